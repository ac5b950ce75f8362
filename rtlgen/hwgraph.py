"""The dataflow graph the compiler works on: a chain of hardware nodes, each a FINN op with its attributes.

A :class:`HWNode` keeps what the network fixed (``params``: shapes, datatypes, weights, thresholds) apart
from what folding chooses (``folding``: FINN's attribute names ``PE``, ``SIMD``, ``mem_mode``,
``ram_style``, ``resType``, ``parallel_window``), so the folding passes can rebuild its spec with other
choices. :data:`OPS` says, per FINN op type, which spec and component implement it and how the FINN
folding attributes map onto spec fields.
"""

from dataclasses import dataclass, field

from layers.dwc import DWCSpec, StreamingDataWidthConverter
from layers.fifo import FIFOSpec, StreamingFIFO
from layers.fmpadding import FMPadding, FMPaddingSpec
from layers.globalaccpool import GlobalAccPool, GlobalAccPoolSpec
from layers.labelselect import LabelSelect, LabelSelectSpec
from layers.maxpool import StreamingMaxPool, StreamingMaxPoolSpec
from layers.mvau import MVAU, MVAUSpec
from layers.thresholding import Thresholding, ThresholdingSpec
from layers.vvau import VVAU, VVAUSpec
from swg import ConvolutionInputGenerator, SWGSpec

__all__ = ["OpKind", "OPS", "HWNode", "canonical_op_type", "MEM_MODE_ALIASES"]


@dataclass(frozen=True)
class OpKind:
    """How one FINN op type becomes hardware: its spec and component, its folding attributes (FINN
    attribute name -> spec field), and the FINN names of its other attributes (spec field -> FINN
    attribute name; ``model_hw.onnx`` is written with these)."""
    spec: type
    component: object
    folding_attrs: dict
    finn_names: dict = None


OPS = {
    "MVAU": OpKind(MVAUSpec, MVAU, {"PE": "pe", "SIMD": "simd", "mem_mode": "mem_mode", "ram_style": "ram_style",
                                    "ram_style_thresholds": "ram_style_thresholds", "resType": "res_type"},
                   {"mw": "MW", "mh": "MH", "input_dtype": "inputDataType", "weight_dtype": "weightDataType",
                    "output_dtype": "outputDataType", "act_val": "ActVal", "num_input_vectors": "numInputVectors"}),
    "VVAU": OpKind(VVAUSpec, VVAU, {"PE": "pe", "SIMD": "simd", "mem_mode": "mem_mode", "ram_style": "ram_style",
                                    "ram_style_thresholds": "ram_style_thresholds", "resType": "res_type"},
                   {"channels": "Channels", "kernel": "Kernel", "dim": "Dim", "input_dtype": "inputDataType",
                    "weight_dtype": "weightDataType", "output_dtype": "outputDataType", "act_val": "ActVal"}),
    "Thresholding": OpKind(ThresholdingSpec, Thresholding, {"PE": "pe", "ram_style": "ram_style"},
                           {"num_channels": "NumChannels", "input_dtype": "inputDataType",
                            "output_dtype": "outputDataType", "act_val": "ActVal", "num_input_vectors": "numInputVectors"}),
    "ConvolutionInputGenerator": OpKind(SWGSpec, ConvolutionInputGenerator,
                                        {"SIMD": "simd", "parallel_window": "parallel_window",
                                         "ram_style": "ram_style"},
                                        {"ifm_dim": "IFMDim", "ifm_channels": "IFMChannels", "kernel": "ConvKernelDim",
                                         "input_dtype": "inputDataType", "stride": "Stride", "dilation": "Dilation"}),
    "FMPadding": OpKind(FMPaddingSpec, FMPadding, {"SIMD": "simd"},
                        {"img_dim": "ImgDim", "padding": "Padding", "num_channels": "NumChannels",
                         "dtype": "inputDataType"}),
    "StreamingMaxPool": OpKind(StreamingMaxPoolSpec, StreamingMaxPool, {"PE": "pe"},
                               {"img_dim": "ImgDim", "pool_dim": "PoolDim", "num_channels": "NumChannels",
                                "dtype": "dataType"}),
    "LabelSelect": OpKind(LabelSelectSpec, LabelSelect, {"PE": "pe"},
                          {"labels": "Labels", "k": "K", "input_dtype": "inputDataType"}),
    "GlobalAccPool": OpKind(GlobalAccPoolSpec, GlobalAccPool, {"PE": "pe"},
                            {"num_channels": "NumChannels", "input_dtype": "inputDataType",
                             "num_input_vectors": "numInputVectors"}),
    "StreamingDataWidthConverter": OpKind(DWCSpec, StreamingDataWidthConverter, {},
                                          {"in_width": "inWidth", "out_width": "outWidth", "dtype": "dataType"}),
    "StreamingFIFO": OpKind(FIFOSpec, StreamingFIFO, {"depth": "depth", "ram_style": "ram_style"}),
}

# Older FINN names of the same ops (v0.7 .. v0.9), and the SpecializeLayers suffixes.
OLD_OP_NAMES = {
    "StreamingFCLayer_Batch": "MVAU", "MatrixVectorActivation": "MVAU",
    "Vector_Vector_Activate_Batch": "VVAU", "VectorVectorActivation": "VVAU",
    "Thresholding_Batch": "Thresholding", "StreamingMaxPool_Batch": "StreamingMaxPool",
    "StreamingDataWidthConverter_Batch": "StreamingDataWidthConverter", "FMPadding_Batch": "FMPadding",
    "LabelSelect_Batch": "LabelSelect", "GlobalAccPool_Batch": "GlobalAccPool", "ConvolutionInputGenerator_rtl": "ConvolutionInputGenerator",
}
MEM_MODE_ALIASES = {"const": "internal_embedded", "decoupled": "internal_decoupled"}


def canonical_op_type(op_type):
    """FINN op type of any generation (``MatrixVectorActivation``, ``MVAU_hls``...) -> ours (``MVAU``)."""
    for suffix in ("_hls", "_rtl"):
        if op_type.endswith(suffix) and op_type[:-len(suffix)] in OPS:
            return op_type[:-len(suffix)]
    return OLD_OP_NAMES.get(op_type, op_type)


@dataclass
class HWNode:
    """One dataflow layer: FINN ``op_type``, unique ``name`` (FINN style, e.g. ``MVAU_0``), the spec
    fields the network fixes (``params``) and the FINN folding attributes (``folding``).

    ``sources`` names the ONNX nodes it implements (for reports and error messages).
    """
    name: str
    op_type: str
    params: dict
    folding: dict = field(default_factory=dict)
    sources: tuple = ()

    @property
    def kind(self):
        return OPS[self.op_type]

    def spec(self, **folding):
        """The spec with this node's folding, overridden by ``folding`` (FINN attribute names)."""
        chosen = {**self.folding, **folding}
        unknown = sorted(set(chosen) - set(self.kind.folding_attrs))
        if unknown:
            raise ValueError(f"{self.name} ({self.op_type}) has no folding attribute {unknown[0]!r}; "
                             f"legal: {', '.join(self.kind.folding_attrs) or 'none'}")
        kwargs = {self.kind.folding_attrs[a]: MEM_MODE_ALIASES.get(v, v) if a == "mem_mode" else v
                  for a, v in chosen.items()}
        try:
            return self.kind.spec(**self.params, **kwargs)
        except ValueError as exc:
            raise ValueError(f"{self.name}: {exc}") from None

    def component(self, spec=None):
        return self.kind.component(spec or self.spec())
