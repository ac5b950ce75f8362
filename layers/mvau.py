"""MVAU: matrix-vector-activation unit (FINN ``MVAU``), fully connected layers and lowered convolutions.

Per input vector of MW elements it computes MH accumulators ``acc = x . W`` (or xnor-popcount for
1-bit operands), optionally followed by multi-thresholding. PE output channels are computed in
parallel, SIMD input elements per cycle: SF * NF cycles per vector.
"""

import itertools
from dataclasses import dataclass, field
from math import prod
from typing import Literal

import numpy as np
from qonnx.core.datatype import DataType

from layers.datapath import legal_divisors
from layers.thresholding import ThresholdTable
from layers.dotproduct import MEM_MODES, POPCOUNTS, UnitSpec, XNOR_ROM_WORDS, check_positive
from layers.dotproduct_hooks import (UNIT_FOLDING, activation_choices, example_activation, finn_import_unit,
                                     lower_dot_product, multiplier_kind, unit_finn_export)
from layers.dotproduct_unit import DotProductUnit
from layers.distributed import DistributedUnit, check_distributed, distributed_plan
from layers.op import Example, Lowering, Op, divisors_of, random_elements
from layers import small
from memstream.memstream import BRAM_OR_LUT_STYLES
import golden


__all__ = ["MVAUSpec", "MVAU", "conv_bias", "pad_borders", "lower_conv_windows"]


@dataclass(frozen=True, eq=False)
class MVAUSpec(UnitSpec):
    """Contract of an MVAU (FINN attribute names in snake case)."""
    mw: int                             # MW: input vector length (rows of W)
    mh: int                             # MH: output channels (columns of W)
    simd: int                           # SIMD: input elements per cycle, divides MW
    pe: int                             # PE: output channels per cycle, divides MH
    input_dtype: object                 # inputDataType
    weight_dtype: object                # weightDataType
    weights: np.ndarray = None          # W, shape (MW, MH), y = x . W; None only with mem_mode=external
    thresholds: np.ndarray = None       # (MH, S) or (1, S) ascending; None = noActivation
    output_dtype: object = None         # outputDataType (noActivation: default = minimal accumulator type)
    act_val: int = 0                    # ActVal
    binary_xnor_mode: bool = False      # binaryXnorMode: 1-bit operands, acc = popcount(xnor)
    num_input_vectors: tuple = (1,)     # numInputVectors, e.g. (1, OH, OW) for a lowered convolution
    mem_mode: Literal["internal_embedded", "internal_decoupled", "external"] = "internal_decoupled"
    res_type: Literal["auto", "lut", "dsp"] = "auto"    # resType: multipliers in fabric or DSP48E1 (auto:
                                                        # DSP from 6x6-bit operands, two per DSP in pairs)
    ram_style: Literal["auto", "distributed", "block", "ultra"] = "auto"
    ram_style_thresholds: Literal["auto", "distributed", "block"] = "auto"
    runtime_writeable_weights: bool = False
    activation_style: Literal["auto", "thresholds", "requant"] = "auto"    # see layers.requant.requant_form
    offset_operands: bool = True        # offset_weights / offset_inputs where they apply; False: signed products
    pipeline: Literal["throughput", "latency"] = "throughput"  # latency: the fewest stages (issue 33):
                                        # a fall-through output FIFO, no sum register at SF = 1, a 2-stage
                                        # requantizer where lean_requant allows
    weight_lut_bits: int = 0            # top bits of each weight word built as LUT ROM, the rest in BRAM
                                        # (ram_style=block): BRAM spilled into LUTs a bit column at a time
    shared_activation: bool = False     # the PE lanes take turns at fewer activation units (activation_lanes)
    popcount: Literal["tree", "heap"] = "tree"     # binary lanes: adder tree, or registered compressor heap
    clock_mhz: float = 200.0            # pipeline=distributed: the clock its registers are placed for
    input_ns: float = 0.0               # pipeline=distributed, chained (rtlgen.passes.latency.chain_layers):
                                        # logic already on the input's path in its cycle (0: a register drives it)
    output_fifo: bool = True            # pipeline=distributed: a FIFO takes the output (False: a chained layer);
                                        # pipeline=latency: the engine ends in its FIFO (False: straight out)
    xnor: bool = field(init=False, repr=False)
    offset_inputs: bool = field(init=False, repr=False)
    table: ThresholdTable = field(init=False, repr=False)              # the contract's thresholds
    datapath_table: ThresholdTable = field(init=False, repr=False)     # what the hardware compares against
    requant: object = field(init=False, repr=False)

    owner = "MVAU"
    LATENCY_PIPELINES = ("latency", "distributed")     # what the latency objective tries (rtlgen.passes.latency)

    def __post_init__(self):
        check_positive(self.owner, self, "mw", "mh", "simd", "pe")
        if self.mw % self.simd:
            raise ValueError(f"MVAU simd={self.simd} must divide mw={self.mw}; legal simd: {legal_divisors(self.mw)}")
        if self.mh % self.pe:
            raise ValueError(f"MVAU pe={self.pe} must divide mh={self.mh}; legal pe: {legal_divisors(self.mh)}")
        if self.popcount not in POPCOUNTS:
            raise ValueError(f"MVAU popcount must be one of {', '.join(POPCOUNTS)}, not {self.popcount!r}")
        self._validate_common()
        if self.popcount == "heap" and not (self.xnor or self.selects_bipolar_weights):
            raise ValueError(f"MVAU popcount=heap needs an XNOR layer (1-bit inputs and weights, BIPOLAR or "
                             f"binary_xnor_mode) or BIPOLAR weights on 2+-bit integer inputs, not "
                             f"{self.input_dtype.name} x {self.weight_dtype.name}")
        if not self.clock_mhz > 0:
            raise ValueError(f"MVAU clock_mhz must be positive, not {self.clock_mhz!r}")
        if not self.input_ns >= 0 or self.input_ns and not self.distributed:
            raise ValueError(f"MVAU input_ns={self.input_ns!r}: a chained layer's input_ns (>= 0) needs "
                             f"pipeline=distributed, not {self.pipeline}")
        if self.output_fifo not in (True, False) or not self.output_fifo and self.pipeline == "throughput":
            raise ValueError(f"MVAU output_fifo={self.output_fifo!r}: True, or False (the output straight into a "
                             f"chained layer) with pipeline=latency or distributed, not {self.pipeline}")
        if self.distributed:
            check_distributed(self)

    @property
    def distributed(self):
        """``pipeline="distributed"``: the weights as bit heaps (:mod:`layers.distributed`)."""
        return self.pipeline == "distributed"

    @property
    def chains(self):
        """Whether the layer may be wired to another that chains, with no FIFO between (the latency
        objective, :func:`rtlgen.passes.latency.chain_layers`): one vector a cycle, ``i.ready`` is
        ``o.ready``, its registers placed from ``input_ns`` on (distributed arithmetic)."""
        return self.distributed

    @property
    def ends_in_fifo(self):
        """The engine ends in a FIFO of its own (``output_stage``): a FIFO the stitcher puts behind it that
        never holds a word only repeats it (rtlgen.passes.fifo_links drops those). The bit heaps have none."""
        return not self.distributed and self.output_fifo

    @property
    def ready_is_advance(self):
        """``i.ready`` is the layer's pipeline enable and nothing else: it takes a word every cycle its output
        may move (the bit heaps; the engine at NF = 1 with embedded weights). A producer may then give
        up its output FIFO (``output_fifo=False``) and advance on this ``ready``: the two move as one."""
        return self.distributed or (self.nf == 1 and self.mem_mode == "internal_embedded")

    @property
    def out_latency(self):
        """Cycles of the output FIFO (:meth:`UnitSpec.out_latency`), none without it."""
        return UnitSpec.out_latency.fget(self) if self.output_fifo or self.distributed else 0

    @property
    def output_ns(self):
        """Chained: the logic on the output's path in its last cycle (the next layer's ``input_ns``)."""
        return distributed_plan(self).output_ns if self.distributed else 0.0

    @property
    def latency(self):
        if self.distributed:        # only the registers inside: the FIFOs on both sides register the ends
            return distributed_plan(self).latency
        return UnitSpec.latency.fget(self)

    def resource_estimate(self):
        if self.distributed:
            return distributed_plan(self).resources()
        return UnitSpec.resource_estimate(self)

    @property
    def in_elems(self):
        return self.mw

    @property
    def out_channels(self):
        return self.mh

    @property
    def weights_shape(self):
        return (self.mw, self.mh)

    def weight_matrix(self):
        """(MH, MW): row c holds the weights of output channel c."""
        return np.asarray(self.weights).T

    @property
    def in_width(self):
        return self.simd * self.input_dtype.bitwidth()

    @property
    def folded_input_shape(self):
        return (*self.num_input_vectors, self.sf, self.simd)

    @property
    def folded_output_shape(self):
        return (*self.num_input_vectors, self.nf, self.pe)

    @property
    def lead_words(self):
        """Input words taken before the first output word can leave (FIFO bounds on reconvergent paths)."""
        return self.sf

    @property
    def exp_cycles(self):
        """Cycles per frame in steady state: SF * NF per input vector."""
        return self.sf * self.nf * prod(self.num_input_vectors)

    @property
    def weights_in_xnor(self):
        """A binary layer whose weights are a small LUT ROM (ram_style distributed, embedded, fixed, 5-32
        words): each agreement bit ``x XNOR W[addr]`` is one LUT6 of the registered word address (up to 5
        bits) and the input bit, registered before the popcount. Without this the ROM's LUT6 per bit
        feeds a register and the XNOR joins the popcount's LUTs, about one LUT a term more (the popcount
        of plain bits maps smaller than that of XNORs: Yosys, benchmarks/xnor_rom.py). Up to 4 words the
        ROM already vanishes into the popcount (the cost model, :mod:`layers.dotproduct_cost`)."""
        lo, hi = XNOR_ROM_WORDS
        return (self.xnor and self.mem_mode == "internal_embedded" and self.weights is not None
                and not self.runtime_writeable_weights and self.weight_lut_bits == 0
                and self.weight_ram_style == "distributed" and lo <= self.wmem <= hi)

    # The dot-product engine's view of the input: MVAU lanes all see element s of the word and the
    # word is replayed for every nf.
    replays_input = True

    def lane_input_index(self, pe, s):
        return s


class MVAU(DotProductUnit):
    __doc__ = DotProductUnit.__doc__


def _component(spec):
    """The MVAU's datapath: the dot-product engine, or with ``pipeline="distributed"`` the bit heaps."""
    return DistributedUnit(spec) if spec.distributed else MVAU(spec)


# ---- the golden: this op on numpy from its definition, written apart from the hardware (no folding,
# packing or pipeline, no spec); the OP's golden hook applies it to a spec's streams
def golden_mvau(x, w, thresholds=None, act_val=0, xnor=False, bipolar_out=False):
    """Matrix-vector-activation: accumulate (matmul, or xnor-popcount), then optionally threshold."""
    acc = golden.xnor_popcount(x, w) if xnor else golden.matmul(x, w)
    if thresholds is None:
        return acc
    return golden.multithreshold(acc, thresholds, act_val, bipolar_out)


def _golden(spec, xs, producer):
    """The numpy reference (:func:`golden_mvau`) on the spec's weights and thresholds."""
    thresholds = None if spec.table is None else spec.table.thresholds
    return golden_mvau(xs[0], np.asarray(spec.weights), thresholds, spec.act_val, spec.xnor,
                       spec.output_dtype.name == "BIPOLAR")


def popcount_choices(params):
    """The optimizer's popcount values for an MVAU with ``params``: both for 1-bit inputs and weights
    (the heap: fewer LUTs, about one flip-flop a term more) and for BIPOLAR weights on wider integer
    inputs (a heap where the weights are constants: ``layers.popcount.selects_constants``), else none."""
    x, w = (DataType[str(params.get(k))] for k in ("input_dtype", "weight_dtype"))
    one_bit = x.bitwidth() == 1 and w.bitwidth() == 1
    selects = w == DataType["BIPOLAR"] and x.is_integer() and x.bitwidth() >= 2
    return POPCOUNTS if one_bit or selects else ()


def shared_activation_choices(params):
    """The optimizer's shared_activation values for an MVAU with ``params``: both where it has an
    activation to share (the spec finds the fewest units that keep up), else none."""
    return () if params.get("thresholds") is None else (False, True)


def _fold(ctx, node, target):
    """FINN's SetFolding rule: SIMD first, but never a weight stream wider than ``ctx.mvau_wwidth_max``
    bits (the step that would is reverted); then PE."""
    f = node.folding
    f["PE"], f["SIMD"] = 1, 1
    wbits = ctx.spec(node).weight_dtype.bitwidth()
    for simd in node.op.legal("SIMD", node.params):
        prev = f["SIMD"]
        f["SIMD"] = simd
        if ctx.cycles(node) < target:
            break                   # FINN checks the target first: a step meeting it is kept
        if wbits * simd > ctx.mvau_wwidth_max:
            f["SIMD"] = prev        # weight stream too wide: revert and stop
            break
    ctx.walk(node, "PE", node.op.legal("PE", node.params))


def _lower_matmul(ctx, node):
    """MatMul (and Gemm, which loading turns into MatMul) of a stream by integer weights."""
    t = ctx.input(node)
    ctx.require_codes(t, node)
    if node.input[0] != t.name:
        raise ctx.error(f"node {node.name} (MatMul): the activation must be the first input")
    codes, wscale, wdtype = ctx.weights(node, 1)
    if codes.ndim != 2:
        raise ctx.error(f"node {node.name} (MatMul): weights must be 2D, not {codes.shape}")
    mw, mh = codes.shape
    wscale = ctx.per_channel(wscale, mh, node)
    # an offset on the input adds offset @ W to every output channel: a bias for the thresholds
    bias = None if t.bias is None else np.asarray(t.bias, dtype=np.float64) @ (codes * wscale[None, :])
    if t.row_order is not None and len(t.row_order) != mw:
        raise ctx.error(f"node {node.name} (MatMul): its input {t.name} streams in another order than its own (a "
                        f"transposed sequence); a MatMul with weights reads a sequence's rows in order")
    if t.row_order is not None:         # a flattened feature map streams (h, w, c): permute the rows
        codes = codes[t.row_order, :]
    vecs = tuple(t.shape[:-1]) if len(t.shape) > 2 else (1,)
    return lower_dot_product(ctx, node, t, "MVAU", codes, wscale, wdtype, dict(mw=mw, mh=mh, num_input_vectors=vecs),
                             spatial=False, bias=bias, channel_axis=1)


def _lower_conv(ctx, node):
    """Conv -> [FMPadding] + ConvolutionInputGenerator + MVAU, or + VVAU for a depthwise one (one output
    channel per input channel); other grouped convolutions run dense with block-diagonal weights."""
    t = ctx.input(node)
    ctx.require_codes(t, node)
    attrs = ctx.attrs(node)
    codes, wscale, wdtype = ctx.weights(node, 1)
    oc, icg, kh, kw = codes.shape
    c, h, w = t.shape[1:]
    group = attrs.get("group", 1)
    depthwise = group > 1 and group == c == oc and icg == 1
    if group > 1 and not depthwise:
        codes = ctx.dense_grouped_weights(codes, group, c, node)
        ctx.warn(f"node {node.name} (Conv): group={group} of {c} input and {oc} output channels runs as a dense "
                 f"convolution with block-diagonal weights ({group}x its multiply-accumulates; only group=1 and "
                 f"depthwise with one output channel per input channel have their own datapath)")
    bias = conv_bias(ctx, node)
    dim = pad_borders(ctx, node, t, (h, w), tuple(attrs.get("pads", [0, 0, 0, 0])))
    return lower_conv_windows(ctx, node, t, codes, wscale, wdtype, bias, dim, tuple(attrs.get("strides", [1, 1])),
                              tuple(attrs.get("dilations", [1, 1])), depthwise)


def conv_bias(ctx, node):
    """The bias of a Conv or ConvTranspose (per output channel, on input 2), or None."""
    if len(node.input) <= 2 or not node.input[2]:
        return None
    bias = ctx.initializer(node.input[2])
    if bias is None:
        raise ctx.error(f"node {node.name} ({node.op_type}): the bias must be a constant")
    return bias


def pad_borders(ctx, node, t, dim, pads):
    """FMPadding of the (h, w) = ``dim`` image on the current stream (of stream tensor ``t``'s datatype) by
    ``pads`` (top, left, bottom, right) zero pixels, if any; returns the padded (h, w)."""
    (h, w), (top, left, bottom, right) = dim, pads
    if not any(pads):
        return dim
    if t.dtype == DataType["BIPOLAR"]:
        raise ctx.error(f"node {node.name} ({node.op_type}): zero padding of BIPOLAR data has no code for 0; "
                        f"legal: pads=0 for bipolar inputs")
    ctx.add("FMPadding", dict(img_dim=(h, w), padding=(top, left, bottom, right), num_channels=t.shape[1],
                              dtype=t.dtype), [node])
    return h + top + bottom, w + left + right


def lower_conv_windows(ctx, node, t, codes, wscale, wdtype, bias, dim, strides, dilation, depthwise):
    """ConvolutionInputGenerator + MVAU (VVAU if ``depthwise``) for ``node``: a convolution by Conv weights
    ``codes`` (OC, C/group, KH, KW) of the already padded (h, w) = ``dim`` image of stream tensor ``t``'s
    channels and datatype, arriving on the current stream; ``bias`` per output channel or None."""
    oc, _, kh, kw = codes.shape
    c = t.shape[1]
    swg = ctx.add("ConvolutionInputGenerator",
                  dict(ifm_dim=dim, ifm_channels=c, kernel=(kh, kw), input_dtype=t.dtype, stride=strides,
                       dilation=dilation, depthwise=depthwise), [node])
    ofm = swg.spec().ofm_dim
    wscale = ctx.per_channel(wscale, oc, node)
    if depthwise:
        return lower_dot_product(ctx, node, t, "VVAU", codes, wscale, wdtype, dict(channels=c, kernel=(kh, kw), dim=ofm),
                                 spatial=True, bias=bias, channel_axis=0)
    matrix = codes.transpose(2, 3, 1, 0).reshape(kh * kw * c, oc)     # rows (ky, kx, c): SWG order
    return lower_dot_product(ctx, node, t, "MVAU", matrix, wscale, wdtype,
                             dict(mw=kh * kw * c, mh=oc, num_input_vectors=(1, *ofm)), spatial=True, bias=bias,
                             channel_axis=1)


def _small_instance(s):
    """Two words of SIMD inputs and of PE outputs, at most two vectors."""
    mw, mh = small.fold(s.mw, s.simd), small.fold(s.mh, s.pe)
    weights = None if s.weights is None else np.asarray(s.weights)[:mw, :mh]
    return dict(mw=mw, mh=mh, weights=weights, thresholds=small.rows(s.thresholds, mh),
                num_input_vectors=small.vectors(s.num_input_vectors))


def _examples():
    """A small MVAU with thresholds: two words of SIMD inputs and of PE outputs. Then FINN's grid
    (test_fpgadataflow_mvau): mem_mode x activation x weight and input datatype x NF x SF with MW = MH = 16
    (fold -1: PE or SIMD 1; 1: fully parallel; no activation: INT32 outputs, UINT32 for XNOR). The default
    suite takes every fifth (mem_mode, activation, datatypes), which reaches every value of each, with the
    folds cycling through the (NF, SF) pairs."""
    rng = np.random.default_rng(5)
    examples = [(dict(mw=8, mh=4, input_dtype="INT2", weight_dtype="INT2", weights=rng.integers(-2, 2, (8, 4)),
                      thresholds=np.sort(rng.integers(-8, 8, (4, 3)), axis=1), output_dtype="UINT2"),
                 {"PE": 2, "SIMD": 4})]
    folds = list(itertools.product([-1, 2, 1], repeat=2))
    for k, (mode, act, wdt, idt) in enumerate(itertools.product(MEM_MODES, [None, "BIPOLAR", "INT4"],
                                                                ["BIPOLAR", "INT4"], ["BIPOLAR", "INT4"])):
        for j, (nf, sf) in enumerate(folds):
            seed = len(mode) + nf + 3 * sf
            w = random_elements(wdt, (16, 16), seed)
            probe = MVAUSpec(16, 16, 1, 1, idt, wdt, w)
            fields = example_activation(act, probe.acc_range(), 16, seed) or \
                dict(output_dtype="UINT32" if probe.xnor else "INT32")
            examples.append(Example(dict(mw=16, mh=16, input_dtype=idt, weight_dtype=wdt, weights=w, **fields),
                                    {"PE": 1 if nf == -1 else 16 // nf, "SIMD": 1 if sf == -1 else 16 // sf,
                                     "mem_mode": mode},
                                    slow=not (k % 5 == 0 and j == (k // 5) % len(folds))))
    # INT8 lanes paired in DSP48E1s whose SIMD products chain through the cascade (chains_in_dsp), two
    # folds of two steps, the low lanes at the most negative weight (a carry out of their field each step)
    w8 = rng.integers(-128, 128, (8, 4))
    w8[:, ::2] = -128
    examples.append((dict(mw=8, mh=4, input_dtype="UINT8", weight_dtype="INT8", weights=w8, output_dtype="INT32"),
                     {"PE": 2, "SIMD": 4, "resType": "dsp", "mem_mode": "internal_embedded"}))
    # INT8 fabric products as radix-4 Booth rows (booth_products): six folds, so each accumulator starts
    # from a per-nf offset
    examples.append((dict(mw=8, mh=12, input_dtype="UINT8", weight_dtype="INT8", weights=rng.integers(-128, 128, (8, 12)),
                          output_dtype="INT32"), {"PE": 2, "SIMD": 4, "resType": "lut"}))
    return examples


OP = Op("MVAU", MVAUSpec, _component,
        folding={**UNIT_FOLDING, "weight_lut_bits": "weight_lut_bits", "pipeline": "pipeline",
                 "shared_activation": "shared_activation", "popcount": "popcount", "clock_mhz": "clock_mhz",
                 "input_ns": "input_ns", "output_fifo": "output_fifo"},
        parallelism={"SIMD": divisors_of("mw"), "PE": divisors_of("mh")},
        finn_names={"mw": "MW", "mh": "MH", "input_dtype": "inputDataType", "weight_dtype": "weightDataType",
                    "output_dtype": "outputDataType", "act_val": "ActVal", "num_input_vectors": "numInputVectors"},
        old_names=("StreamingFCLayer_Batch", "MatrixVectorActivation"),
        finn_import=finn_import_unit, finn_arrays=("weights", "thresholds"),
        golden=_golden, small_instance=_small_instance, fold=_fold, finn_export=unit_finn_export,
        cost_group=lambda spec: "MVAU/distributed" if spec.distributed else f"MVAU/{multiplier_kind(spec)}",
        extensions=("weight_lut_bits", "pipeline", "shared_activation", "popcount", "clock_mhz", "input_ns",
                    "output_fifo"),
        lowers=(Lowering(("MatMul",), _lower_matmul, legal="MatMul, Gemm"), Lowering(("Conv",), _lower_conv)),
        choices={"resType": ("lut", "dsp"), "ram_style": BRAM_OR_LUT_STYLES,
                 "activation_style": activation_choices, "shared_activation": shared_activation_choices,
                 "popcount": popcount_choices}, examples=_examples)
