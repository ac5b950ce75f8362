"""VVAU: vector-vector-activation unit (FINN ``VVAU``), the depthwise convolution after a depthwise SWG.

Per output pixel and channel c: acc[c] = sum over the K = kh*kw kernel positions of x[k, c] * W[c, k],
then optional thresholds. PE channels and SIMD kernel positions per cycle; the same engine as the MVAU
(``DotProductUnit``) with a different input order and no input replay.
"""

from dataclasses import dataclass, field
from math import prod
from typing import Literal

import numpy as np
from qonnx.core.datatype import DataType

from layers.datapath import legal_divisors
from layers.globalaccpool import check_pool_attrs, whole_map
from layers.dotproduct import UnitSpec, check_positive
from layers.dotproduct_hooks import (UNIT_FOLDING, activation_choices, example_activation, finn_import_unit,
                                     lower_dot_product, multiplier_kind, unit_finn_export)
from layers.dotproduct_unit import DotProductUnit
from layers.op import Lowering, Op, divisors, divisors_of, grid_examples, random_elements
from layers import small
import golden
from layers.thresholding import ThresholdTable


__all__ = ["VVAUSpec", "VVAU"]


@dataclass(frozen=True, eq=False)
class VVAUSpec(UnitSpec):
    """Contract of a VVAU (FINN attribute names in snake case)."""
    channels: int                       # Channels: C
    kernel: tuple                       # Kernel: (kh, kw)
    dim: tuple                          # Dim: output image (OH, OW); one window per output pixel
    pe: int                             # PE: channels per cycle, divides C
    simd: int                           # SIMD: kernel positions per cycle, divides kh*kw
    input_dtype: object                 # inputDataType
    weight_dtype: object                # weightDataType
    weights: np.ndarray = None          # W, shape (C, 1, kh, kw); None only with mem_mode=external
    thresholds: np.ndarray = None       # (C, S) or (1, S) ascending; None = noActivation
    output_dtype: object = None         # outputDataType (noActivation: default = minimal accumulator type)
    act_val: int = 0                    # ActVal
    binary_xnor_mode: bool = False
    mem_mode: Literal["internal_embedded", "internal_decoupled", "external"] = "internal_embedded"
    res_type: Literal["auto", "lut", "dsp"] = "auto"    # see MVAUSpec
    ram_style: Literal["auto", "distributed", "block", "ultra"] = "auto"
    ram_style_thresholds: Literal["auto", "distributed", "block"] = "auto"
    runtime_writeable_weights: bool = False
    activation_style: Literal["auto", "thresholds", "requant"] = "auto"    # see layers.requant.requant_form
    num_input_vectors: tuple = field(init=False, repr=False)
    xnor: bool = field(init=False, repr=False)
    offset_inputs: bool = field(init=False, repr=False)
    table: ThresholdTable = field(init=False, repr=False)
    datapath_table: ThresholdTable = field(init=False, repr=False)
    requant: object = field(init=False, repr=False)

    owner = "VVAU"

    def __post_init__(self):
        check_positive(self.owner, self, "channels", "pe", "simd")
        for attr in ("kernel", "dim"):
            value = tuple(getattr(self, attr))
            if len(value) != 2 or min(value) < 1:
                raise ValueError(f"VVAU {attr} must be two positive integers (height, width), not {value!r}")
            object.__setattr__(self, attr, tuple(int(v) for v in value))
        if self.channels % self.pe:
            raise ValueError(f"VVAU pe={self.pe} must divide channels={self.channels}; "
                             f"legal pe: {legal_divisors(self.channels)}")
        if self.in_elems % self.simd:
            raise ValueError(f"VVAU simd={self.simd} must divide the {self.in_elems} kernel positions; "
                             f"legal simd: {legal_divisors(self.in_elems)}")
        object.__setattr__(self, "num_input_vectors", (1, *self.dim))
        self._validate_common()

    @property
    def in_elems(self):
        return self.kernel[0] * self.kernel[1]

    @property
    def out_channels(self):
        return self.channels

    @property
    def weights_shape(self):
        return (self.channels, 1, *self.kernel)

    def weight_matrix(self):
        """(C, K): row c holds channel c's kernel, positions in row-major (ky, kx) order."""
        return np.asarray(self.weights).reshape(self.channels, self.in_elems)

    @property
    def in_width(self):
        return self.simd * self.pe * self.input_dtype.bitwidth()

    @property
    def folded_input_shape(self):
        return (*self.num_input_vectors, self.nf * self.sf, self.simd * self.pe)

    @property
    def folded_output_shape(self):
        return (*self.num_input_vectors, self.nf, self.pe)

    @property
    def lead_words(self):
        """Input words taken before the first output word can leave (FIFO bounds on reconvergent paths)."""
        return self.sf

    @property
    def exp_cycles(self):
        """Cycles per frame in steady state: C*K / (PE*SIMD) per output pixel."""
        return self.nf * self.sf * prod(self.dim)

    # The dot-product engine's view of the input (FINN's depthwise SWG order): word nf*SF + sf, element
    # simd*PE + pe is kernel position sf*SIMD + simd of channel nf*PE + pe. Every word is used once.
    replays_input = False

    def lane_input_index(self, pe, s):
        return s * self.pe + pe

    def input_order(self, windows):
        """Windows (..., K, C) in plain order -> the folded input words' elements (..., NF*SF, SIMD*PE)."""
        w = np.asarray(windows)
        lead = w.shape[:-2]
        w = w.reshape(*lead, self.sf, self.simd, self.nf, self.pe)
        w = np.moveaxis(w, -2, -4)              # (..., NF, SF, SIMD, PE)
        return w.reshape(*lead, self.nf * self.sf, self.simd * self.pe)


class VVAU(DotProductUnit):
    __doc__ = DotProductUnit.__doc__.replace(
        "the input word sf is\n    read at nf = 0 and replayed from an SF-word buffer for nf > 0 (MVAU)",
        "every step reads a fresh\n    input word (the depthwise SWG order)")



# ---- the golden: this op on numpy from its definition, written apart from the hardware (no folding,
# packing or pipeline, no spec); the OP's golden hook applies it to a spec's streams
def golden_depthwise_dot(windows, w, xnor=False):
    """Depthwise accumulation: windows (..., K, C) with K kernel positions, w (C, K) -> (..., C).

    acc[c] = sum_k windows[k, c] * w[c, k]; with ``xnor``, the number of agreeing bits instead.
    """
    windows, w = golden.integers(windows), golden.integers(w)
    if xnor:
        return (golden.bits(windows) == golden.bits(w).T).sum(axis=-2).astype(np.int64)
    return np.einsum("...kc,ck->...c", windows, w)


def golden_vvau(windows, w, thresholds=None, act_val=0, xnor=False, bipolar_out=False):
    """Vector-vector-activation (depthwise conv on im2col windows), then optionally threshold."""
    acc = golden_depthwise_dot(windows, w, xnor)
    if thresholds is None:
        return acc
    return golden.multithreshold(acc, thresholds, act_val, bipolar_out)


def _golden(spec, xs, producer):
    """The numpy reference (:func:`golden_vvau`), the input words in the order of the depthwise SWG
    feeding it (SIMD = the producer's)."""
    x = xs[0]
    k, c = spec.in_elems, spec.channels
    simd = producer.simd if producer is not None else spec.pe
    windows = x.reshape(*x.shape[:-1], c // simd, k, simd)
    windows = np.moveaxis(windows, -2, -3).reshape(*x.shape[:-1], k, c)
    thresholds = None if spec.table is None else spec.table.thresholds
    return golden_vvau(windows, spec.weight_matrix(), thresholds, spec.act_val, spec.xnor,
                       spec.output_dtype.name == "BIPOLAR")


def _folded_with(ctx, node):
    """The depthwise window generator feeding the VVAU: its folding follows the VVAU's."""
    swg = ctx.producer(node)
    if swg is not None and swg.op_type == "ConvolutionInputGenerator" and swg.params.get("depthwise"):
        return swg
    return None


def _follower_folding(folding):
    """The depthwise SWG's folding from its VVAU's, as FINN requires: SIMD = the VVAU's PE, the parallel
    window where the VVAU takes several kernel positions a cycle."""
    return {"SIMD": folding["PE"], "parallel_window": folding["SIMD"] > 1}


def _fold(ctx, node, target):
    """FINN's SetFolding rule: PE, then SIMD only once PE = C (the SWG feeding it follows)."""
    f = node.folding
    f["SIMD"] = 1
    legal_pe = node.op.legal("PE", node.params)
    ctx.walk(node, "PE", legal_pe)
    if f["PE"] == legal_pe[-1] and ctx.cycles(node) > target:
        ctx.walk(node, "SIMD", node.op.legal("SIMD", node.params))
    if _folded_with(ctx, node) is None and tuple(node.params["kernel"]) != (1, 1):
        swg = ctx.producer(node)
        raise ValueError(f"{node.name} (VVAU, kernel {tuple(node.params['kernel'])}) expects a depthwise "
                         f"ConvolutionInputGenerator as its producer, found "
                         f"{swg.name + ' (' + swg.op_type + ')' if swg else 'none'}")


def _lower_window_average(ctx, node):
    """A (non-global) AveragePool, as FINN's accumulate-pool: a depthwise SWG and a VVAU of all-one weights
    sum each window; the division by kh*kw is the weight scale, so the quantizer after it (and any float
    ops between) become the VVAU's thresholds, derived from the model's own float32 AveragePool as for any
    depthwise convolution. (A global one is GlobalAccPool's.)"""
    check_pool_attrs(ctx, node)
    t = ctx.input(node)
    ctx.require_codes(t, node)
    attrs = ctx.attrs(node)
    kernel = tuple(attrs["kernel_shape"])
    c, h, w = t.shape[1:]
    kh, kw = kernel
    swg = ctx.add("ConvolutionInputGenerator",
                  dict(ifm_dim=(h, w), ifm_channels=c, kernel=kernel, input_dtype=t.dtype,
                       stride=tuple(attrs.get("strides", kernel)), depthwise=True), [node])
    ones = np.ones((c, 1, kh, kw), dtype=np.int64)
    wscale = np.full(c, 1.0 / (kh * kw))
    return lower_dot_product(ctx, node, t, "VVAU", ones, wscale, DataType["UINT2"],
                             dict(channels=c, kernel=kernel, dim=swg.spec().ofm_dim), spatial=True, bias=None,
                             channel_axis=0)


def _small_instance(s):
    """Two words of PE channels, a 1 x 2 image."""
    c = small.fold(s.channels, s.pe)
    weights = None if s.weights is None else np.asarray(s.weights)[:c]
    return dict(channels=c, weights=weights, thresholds=small.rows(s.thresholds, c), dim=(1, min(s.dim[1], 2)))


def _examples():
    """A small depthwise 3x3 VVAU without activation, then FINN's grid; illegal folds (PE not dividing C,
    SIMD not dividing K) left out."""
    def case(c):
        seed = c["pe"] + c["simd"]
        w = random_elements(c["wdt"], (c["channels"], 1, *c["kernel"]), seed)
        probe = VVAUSpec(c["channels"], c["kernel"], c["dim"], 1, 1, c["idt"], c["wdt"], w)
        return dict(channels=c["channels"], kernel=c["kernel"], dim=c["dim"], input_dtype=c["idt"],
                    weight_dtype=c["wdt"], weights=w, **example_activation(c["act"], probe.acc_range(), c["channels"],
                                                                           seed)), {"PE": c["pe"], "SIMD": c["simd"]}
    grid = dict(idt=["BIPOLAR", "UINT4"], wdt=["BIPOLAR", "UINT4"], act=["BIPOLAR", "UINT4", None], pe=[1, 3, 6],
                simd=[1, 9], dim=[(10, 10), (10, 1)], kernel=[(3, 3), (3, 1)], channels=[3, 6])
    rng = np.random.default_rng(5)
    return [(dict(channels=4, kernel=(3, 3), dim=(2, 2), input_dtype="INT2", weight_dtype="INT2",
                  weights=rng.integers(-2, 2, (4, 1, 3, 3))), {"PE": 2, "SIMD": 1}),
            *grid_examples(grid, case, stride=37, legal=lambda c: c["channels"] % c["pe"] == 0
                           and (c["kernel"][0] * c["kernel"][1]) % c["simd"] == 0)]


OP = Op("VVAU", VVAUSpec, VVAU, folding=UNIT_FOLDING,
        parallelism={"PE": divisors_of("channels"), "SIMD": lambda p: divisors(p["kernel"][0] * p["kernel"][1])},
        finn_names={"channels": "Channels", "kernel": "Kernel", "dim": "Dim", "input_dtype": "inputDataType",
                    "weight_dtype": "weightDataType", "output_dtype": "outputDataType", "act_val": "ActVal"},
        old_names=("Vector_Vector_Activate_Batch", "VectorVectorActivation"), golden=_golden,
        small_instance=_small_instance,
        finn_import=finn_import_unit, finn_arrays=("weights", "thresholds"),
        fold=_fold, folded_with=_folded_with, follower_folding=_follower_folding, finn_export=unit_finn_export,
        cost_group=lambda spec: f"VVAU/{multiplier_kind(spec)}",
        lowers=(Lowering(("AveragePool",), _lower_window_average, when=lambda ctx, node: not whole_map(ctx, node)),),
        choices={"resType": ("lut", "dsp"), "activation_style": activation_choices}, examples=_examples)
