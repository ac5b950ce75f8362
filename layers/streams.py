"""Stream joins: AddStreams (lane-wise sum of two streams), StreamingConcat (channel concatenation). Each
moves one word per cycle with registered ready signals. (The fan-out, DuplicateStreams:
:mod:`layers.duplicate_streams`.)"""

from dataclasses import dataclass
from math import prod

import numpy as np
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from qonnx.core.datatype import DataType

from layers.datapath import (ChannelFolded, check_dtype, dtype_for_range, dtype_range, element_value, legal_divisors,
                             output_stage, register, wrapping_increment)
from layers.fifo import output_fifo_spec
from layers.timing import Timing, as_cycles, take_when_ready
from layers.op import (Example, Lowering, OneDatatype, OneWidth, Op, Resources, StreamContract, divisors_of,
                       grid_examples)
from layers import small
from layers.small import shrink_channels
import golden

__all__ = ["AddStreamsSpec", "AddStreams", "StreamingConcatSpec", "StreamingConcat"]


def _lockstep(arrivals, latency):
    """Words of every input taken together, once all are offered, one set per cycle."""
    taken = take_when_ready(np.max([as_cycles(a) for a in arrivals], axis=0))
    return Timing((taken,) * len(arrivals), taken + latency)


def _positive(owner, attr, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{owner} {attr} must be a positive integer, not {value!r}")
    return value


def _vectors(owner, vecs):
    """numInputVectors as a tuple of positive ints (an int is one dimension)."""
    t = (vecs,) if isinstance(vecs, int) else tuple(vecs)
    if not t or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in t):
        raise ValueError(f"{owner} num_input_vectors must be positive integers, not {vecs!r}")
    return t


def _check_fold(owner, attr, fold, channels, channels_attr="num_channels"):
    _positive(owner, attr, fold)
    if channels % fold:
        raise ValueError(f"{owner} {attr}={fold} must divide {channels_attr}={channels}; "
                         f"legal: {legal_divisors(channels)}")


def _fifo_cost(width):
    return output_fifo_spec(width).resource_estimate()


# --- AddStreams ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class AddStreamsSpec(ChannelFolded):
    """Contract of a lane-wise adder of two streams (FINN ``AddStreams``: NumChannels, PE, inputDataType,
    numInputVectors). Both inputs have the same datatype; the output datatype follows FINN: the
    smallest INTn holding 2*min and 2*max if signed, else the smallest UINTn holding 2*max."""
    num_channels: int           # NumChannels: C
    pe: int                     # PE: channels per word, divides C
    input_dtype: object         # inputDataType (both inputs)
    num_input_vectors: tuple = (1,)     # numInputVectors: words per frame = prod(vecs) * C / PE

    num_inputs = 2

    def __post_init__(self):
        owner = "AddStreams"
        _positive(owner, "num_channels", self.num_channels)
        _check_fold(owner, "pe", self.pe, self.num_channels)
        object.__setattr__(self, "input_dtype", check_dtype(owner, "input_dtype", self.input_dtype))
        object.__setattr__(self, "num_input_vectors", _vectors(owner, self.num_input_vectors))

    @property
    def output_dtype(self):
        lo, hi = dtype_range(self.input_dtype)
        return dtype_for_range(2 * lo, 2 * hi)

    @property
    def latency(self):
        """Cycles from the input pair's transfer to the sum being offered (sum register, output FIFO)."""
        return 3

    def timing(self, arrivals):
        """Takes the pair once both words are offered; the sum ``latency`` cycles later (:mod:`layers.timing`)."""
        return _lockstep(arrivals, self.latency)

    def resource_estimate(self):
        """An adder per lane (a LUT per output bit), the sum register and the output FIFO."""
        fifo = _fifo_cost(self.out_width)
        return Resources(lut=self.out_width + fifo.lut + 2, ff=self.out_width + 1 + fifo.ff, bram18=0)


def _lane_value(bits, dtype):
    """Element value of raw bits, with BIPOLAR as -1/+1."""
    if dtype == DataType["BIPOLAR"]:
        return Mux(bits[0], 1, -1)
    return element_value(bits, dtype)


class AddStreams(wiring.Component):
    """Lane-wise sum of two streams of ``pe``-lane words: ``o`` lane j = ``i0`` lane j + ``i1`` lane j.

    Members
    -------
    i0, i1 : In(stream.Signature(spec.in_width))
    o : Out(stream.Signature(spec.out_width))

    Words are paired in order: the n-th output word is the sum of the n-th words of ``i0`` and ``i1``,
    and a word is taken from both inputs in the same cycle (each input's ``ready`` waits for the other's
    ``valid``). One word per cycle when both inputs keep up (``spec.exp_cycles`` per frame); latency
    ``spec.latency``. The readies come from the output FIFO's registered ready, never from ``o.ready``;
    a stall holds the pipeline still.
    """

    def __init__(self, spec):
        self._spec = spec
        super().__init__({
            "i0": In(stream.Signature(spec.in_width)),
            "i1": In(stream.Signature(spec.in_width)),
            "o": Out(stream.Signature(spec.out_width)),
        })

    @property
    def spec(self):
        return self._spec

    def elaborate(self, platform):
        spec = self._spec
        idt, ob = spec.input_dtype, spec.output_dtype.bitwidth()
        m = Module()
        advance, fifo_in = output_stage(m, self.o, spec.out_width)

        m.d.comb += [
            self.i0.ready.eq(advance & self.i1.valid),
            self.i1.ready.eq(advance & self.i0.valid),
        ]
        take = self.i0.valid & self.i1.valid & advance
        layout = data.ArrayLayout(idt.bitwidth(), spec.pe)
        a, b = data.View(layout, self.i0.payload), data.View(layout, self.i1.payload)
        # the sum is exact in ob bits (ob holds 2*min .. 2*max), so its low ob bits are the element code
        sums = Cat((_lane_value(a[j], idt) + _lane_value(b[j], idt))[:ob] for j in range(spec.pe))
        valid = register(m, advance, take, name="sum_valid", reset_less=False)
        total = register(m, advance, sums, name="sum")
        m.d.comb += [fifo_in.valid.eq(valid), fifo_in.payload.eq(total)]
        self.formal_state = dict(fifo=m.submodules.out_fifo, valid=valid)     # for sim.formal's invariants
        return m


# --- StreamingConcat -----------------------------------------------------------------------------

@dataclass(frozen=True)
class StreamingConcatSpec(StreamContract, OneDatatype, OneWidth):
    """Contract of a channel concatenation (FINN ``StreamingConcat``: ChannelsPerStream, SIMD,
    inputDataTypes (one common type here), numInputVectors)."""
    channels_per_stream: tuple  # ChannelsPerStream: (C0, C1, ...), at least 2 inputs
    simd: int                   # SIMD: channels per word, divides every Ci
    dtype: object = "INT8"      # the common input datatype (= output datatype)
    num_input_vectors: tuple = (1,)

    def __post_init__(self):
        owner = "StreamingConcat"
        chans = tuple(self.channels_per_stream)
        if len(chans) < 2 or any(not isinstance(c, int) or isinstance(c, bool) or c < 1 for c in chans):
            raise ValueError(f"{owner} channels_per_stream must be at least 2 positive integers, "
                             f"not {self.channels_per_stream!r}")
        object.__setattr__(self, "channels_per_stream", chans)
        _positive(owner, "simd", self.simd)
        for k, c in enumerate(chans):
            if c % self.simd:
                common = [d for d in range(1, min(chans) + 1) if all(x % d == 0 for x in chans)]
                raise ValueError(f"{owner} simd={self.simd} must divide every channel count, but input {k} has "
                                 f"{c} channels; legal: {', '.join(map(str, common))}")
        object.__setattr__(self, "dtype", check_dtype(owner, "dtype", self.dtype))
        object.__setattr__(self, "num_input_vectors", _vectors(owner, self.num_input_vectors))

    @property
    def num_inputs(self):
        return len(self.channels_per_stream)

    @property
    def num_channels(self):
        """Output channels: the sum of the inputs'."""
        return sum(self.channels_per_stream)

    @property
    def input_folds(self):
        """Words per pixel of each input."""
        return tuple(c // self.simd for c in self.channels_per_stream)

    @property
    def width(self):
        return self.simd * self.dtype.bitwidth()

    @property
    def folded_input_shapes(self):
        return tuple((*self.num_input_vectors, fold, self.simd) for fold in self.input_folds)

    @property
    def folded_output_shape(self):
        return (*self.num_input_vectors, self.num_channels // self.simd, self.simd)

    @property
    def pixels(self):
        return prod(self.num_input_vectors)

    @property
    def out_words(self):
        return self.pixels * self.num_channels // self.simd

    @property
    def exp_cycles(self):
        """Cycles per frame in steady state: one output word per cycle."""
        return self.out_words

    @property
    def latency(self):
        """Cycles from an input transfer to the word being offered (output FIFO)."""
        return 2

    def timing(self, arrivals):
        """Per pixel, input 0's words, then input 1's...: each taken when offered and its turn has come,
        one per cycle, and offered ``latency`` cycles later (:mod:`layers.timing`)."""
        folds = self.input_folds
        pixels = len(arrivals[0]) // folds[0]
        turn = np.concatenate([np.full(f, k) for k, f in enumerate(folds)])     # input of each word of a pixel
        order = np.tile(turn, pixels)
        merged = np.empty(order.size, dtype=np.int64)
        for k in range(self.num_inputs):
            merged[order == k] = as_cycles(arrivals[k])
        taken = take_when_ready(merged)
        return Timing(tuple(taken[order == k] for k in range(self.num_inputs)), taken + self.latency)

    def resource_estimate(self):
        """An n-way word multiplexer, the input/fold counters and the output FIFO."""
        n = self.num_inputs
        counter_bits = max(1, (n - 1).bit_length()) + max(1, (max(self.input_folds) - 1).bit_length())
        fifo = _fifo_cost(self.width)
        mux_lut = self.width * -(-(n - 1) // 3) if n > 1 else 0     # a LUT6 selects from 4 inputs
        return Resources(lut=mux_lut + 2 * counter_bits + fifo.lut, ff=counter_bits + fifo.ff, bram18=0)


class StreamingConcat(wiring.Component):
    """Concatenates the channels of ``n`` streams, pixel by pixel.

    Members
    -------
    i0 .. i{n-1} : In(stream.Signature(spec.width))
    o : Out(stream.Signature(spec.width))

    For each pixel the output carries ``C0/SIMD`` words of ``i0``, then ``C1/SIMD`` words of ``i1``, and
    so on, so output channel order is i0's channels, then i1's... Only the input whose turn it is sees
    ``ready``; the others wait. One output word per cycle (``spec.exp_cycles`` per frame) when the
    inputs keep up; latency ``spec.latency``. The readies are the output FIFO's registered ready gated
    by the turn, never a function of ``o.ready``.
    """

    def __init__(self, spec):
        self._spec = spec
        members = {f"i{k}": In(stream.Signature(spec.width)) for k in range(spec.num_inputs)}
        members["o"] = Out(stream.Signature(spec.width))
        super().__init__(members)

    @property
    def spec(self):
        return self._spec

    def elaborate(self, platform):
        spec = self._spec
        n, folds = spec.num_inputs, spec.input_folds
        inputs = [getattr(self, f"i{k}") for k in range(n)]
        m = Module()
        advance, fifo_in = output_stage(m, self.o, spec.width)

        turn = Signal(range(n))                     # the input whose words go out now
        fold = Signal(range(max(folds)))            # words of this pixel taken from it so far
        # The multiplexers are AND-OR of a compare per input, not ``Array(...)[turn]``: Yosys writes an
        # Array index as an ``always @*`` block, and Icarus in SystemVerilog mode (cocotb's -g2012) runs
        # one only when an input changes: declaration initialisers (``reg x = 0``, including the dummy
        # reg Yosys adds to force a time-0 run) raise no event. Behind FIFOs, whose o.valid stay at their
        # initial 0, the valid multiplexer stayed X, so did the output FIFO's level after reset, and the
        # concat never moved (Icarus only; the same for an Array of constants). Continuous assignments
        # are evaluated at time 0.
        sel = [turn == k for k in range(n)]
        last_fold = Cat(sel[k] & (fold == f - 1) for k, f in enumerate(folds)).any()
        valid = Cat(sel[k] & s.valid for k, s in enumerate(inputs)).any()
        payload = 0
        for k, s in enumerate(inputs):
            payload = payload | Mux(sel[k], s.payload, 0)
        take = valid & advance
        m.d.comb += [fifo_in.valid.eq(valid), fifo_in.payload.eq(payload)]
        for k, s in enumerate(inputs):
            m.d.comb += s.ready.eq(advance & sel[k])
        with m.If(take):
            with m.If(last_fold):
                m.d.sync += [fold.eq(0), turn.eq(wrapping_increment(turn, n))]
            with m.Else():
                m.d.sync += fold.eq(fold + 1)
        return m




def _channels_and_vectors(t):
    """(channels, numInputVectors) of a stream tensor: (1, C) -> (C, (1,)); (1, C, H, W) -> (C, (1, H, W))."""
    if t.spatial:
        return t.shape[1], (1, *t.shape[2:])
    return t.shape[-1], tuple(t.shape[:-1]) if len(t.shape) > 2 else (1,)


def _check_join_input(ctx, t, node):
    if t.values is not None:
        raise ctx.error(f"node {node.name} ({node.op_type}): input {t.name} is a residual sum of branches "
                        f"with unrelated float scales; quantize it before another join")
    if t.kind != "codes" or np.ndim(t.scale) > 1 or t.gain != 1 or t.offset != 0:
        raise ctx.error(f"node {node.name} ({node.op_type}): input {t.name} must be a quantized stream (the "
                        f"output of a quantizer, per tensor or per channel)")
    if t.dtype == DataType["BIPOLAR"]:
        raise ctx.error(f"node {node.name} ({node.op_type}): input {t.name} is BIPOLAR; joins of bipolar "
                        f"streams are not supported (legal: INTn, UINTn inputs)")
    if t.row_order is not None:
        raise ctx.error(f"node {node.name} ({node.op_type}): input {t.name} is a flattened feature map; "
                        f"joins need both inputs in the same stream order")


def _rescaled(ctx, t, factor, dtype, node):
    """The wire of ``t`` with its codes multiplied by ``factor`` (a number, or one per channel) and held as
    ``dtype`` (a ChannelwiseOp, or ``t``'s own wire when nothing changes)."""
    channels, vecs = _channels_and_vectors(t)
    factor = np.broadcast_to(np.asarray(factor, dtype=np.int64), (channels,))
    unit = bool((factor == 1).all())
    if unit and t.dtype == dtype:
        return ctx.wire(t)
    func, param = ("mul", factor) if not unit else ("add", np.zeros(channels, dtype=np.int64))
    op = ctx.add("ChannelwiseOp", dict(func=func, num_channels=channels, input_dtype=t.dtype,
                                       param_dtype=dtype_for_range(int(param.min()), int(param.max())),
                                       output_dtype=dtype, params=np.array(param), num_input_vectors=vecs),
                 [], inputs=(ctx.wire(t),))
    op.sources = (node.name,)
    return op.outputs[0]


def _lower_add(ctx, node):
    """Add of two streams -> AddStreams on a common scale; a branch whose codes are on a coarser scale (or
    of another datatype) goes through a ChannelwiseOp multiply first. The hardware adds the integer codes
    exactly (see ``ctx.sum_grid`` for how that compares with the model's float32 sum). Per-channel scales
    add on a common scale per channel (the factors, and the sum's scale, per channel)."""
    where = f"node {node.name} (Add)"
    a, b = (ctx.stream(i) for i in node.input)
    for t in (a, b):
        _check_join_input(ctx, t, node)
    if a.shape != b.shape:
        raise ctx.error(f"{where}: both inputs must have the same shape (no broadcasting of streams), "
                        f"got {a.shape} and {b.shape}")
    s, factors, grid, rounding = ctx.sum_grid(a, b, where)
    ranges = [(int(np.min(f)) * int(t.dtype.min()), int(np.max(f)) * int(t.dtype.max())) for t, f in zip((a, b), factors)]
    common = dtype_for_range(min(r[0] for r in ranges), max(r[1] for r in ranges))
    channels, vecs = _channels_and_vectors(a)
    wires = [_rescaled(ctx, t, f, common, node) for t, f in zip((a, b), factors)]
    added = ctx.add("AddStreams", dict(num_channels=channels, input_dtype=common, num_input_vectors=vecs),
                    [node], inputs=wires)
    out = added.spec().output_dtype
    values = ctx.sum_values(a, b, factors, out) if grid else None
    return ctx.tensor(node.output[0], out, s, a.shape, rounding=rounding, values=values)


def _lower_concat(ctx, node):
    """Concat of streams along channels -> StreamingConcat on a common scale and datatype."""
    where = f"node {node.name} (Concat)"
    ins = [ctx.stream(i) for i in node.input]
    for t in ins:
        _check_join_input(ctx, t, node)
    axis = ctx.attrs(node).get("axis", 1)
    rank = len(ins[0].shape)
    if axis % rank != 1 or any(len(t.shape) != rank or t.shape[:1] + t.shape[2:] != ins[0].shape[:1] +
                               ins[0].shape[2:] for t in ins):
        raise ctx.error(f"{where}: only a concatenation along channels (axis 1) of tensors of the same "
                        f"other dimensions is supported; got axis {axis} of {[t.shape for t in ins]}")
    if any(np.ndim(t.scale) for t in ins):
        # codes keep their own scale per channel: the output's scales are the inputs' scales side by side
        s = np.concatenate([np.broadcast_to(np.asarray(t.scale, dtype=np.float64).reshape(-1), (t.shape[1],))
                            for t in ins])
        factors = [1] * len(ins)
    else:
        s, factors = ctx.common_scale([float(t.scale) for t in ins], where)
        if any(float(np.float32(s * f)) != float(np.float32(t.scale)) for t, f in zip(ins, factors)):
            raise ctx.error(f"{where}: input scales {[float(t.scale) for t in ins]} have no exact common scale")
    common = dtype_for_range(min(f * int(t.dtype.min()) for t, f in zip(ins, factors)),
                             max(f * int(t.dtype.max()) for t, f in zip(ins, factors)))
    if all(t.dtype == ins[0].dtype for t in ins) and set(factors) == {1}:
        common = ins[0].dtype
    wires = [_rescaled(ctx, t, f, common, node) for t, f in zip(ins, factors)]
    _, vecs = _channels_and_vectors(ins[0])
    ctx.add("StreamingConcat", dict(channels_per_stream=tuple(t.shape[1] for t in ins), dtype=common,
                                    num_input_vectors=vecs), [node], inputs=wires)
    return ctx.tensor(node.output[0], common, s)


# ---- the golden: this op on numpy from its definition, written apart from the hardware (no folding,
# packing or pipeline, no spec); the OP's golden hook applies it to a spec's streams
def golden_add_streams(a, b):
    """Elementwise a + b, exact."""
    return golden.integers(a) + golden.integers(b)


def golden_concat(xs):
    """Concatenate tensors along the last (channel) axis."""
    return np.concatenate([np.asarray(x) for x in xs], axis=-1)


def _golden_add(spec, xs, producer):
    return golden_add_streams(*xs)


def _golden_concat(spec, xs, producer):
    return golden_concat(xs)


def _small_concat(s):
    """Two words of SIMD channels per input, at most two vectors."""
    return dict(channels_per_stream=tuple(small.fold(c, s.simd) for c in s.channels_per_stream),
                num_input_vectors=small.vectors(s.num_input_vectors))


def _add_examples():
    """Two small feature maps added, then FINN's grid (test_fpgadataflow_addstreams: UINT4/UINT8 x C {1, 64}
    x fold) plus signed INT4."""
    grid = dict(dtype=["UINT4", "UINT8", "INT4"], channels=[1, 64], pe=[1, 2, 64], vecs=[(1,), (1, 2, 2)])
    return [(dict(num_channels=4, input_dtype="INT2", num_input_vectors=(1, 2, 2)), {"PE": 2}),
            *grid_examples(grid, lambda c: (dict(num_channels=c["channels"], input_dtype=c["dtype"],
                                                 num_input_vectors=c["vecs"]), {"PE": c["pe"]}),
                           stride=23, legal=lambda c: c["channels"] % c["pe"] == 0)]


def _concat_examples():
    """Two streams of 4 and 2 channels side by side, then (channels per stream, SIMD, datatype, vectors)
    cases, the last three slow."""
    cases = [((2, 4), 2, "INT4", (1, 3, 3)), ((3, 1, 5), 1, "UINT8", (1, 4)), ((8, 16), 8, "BIPOLAR", (1, 2)),
             ((6, 3, 9), 3, "INT2", (1, 2, 2)), ((4, 4), 4, "INT8", (7,))]
    return [(dict(channels_per_stream=(4, 2), dtype="INT2", num_input_vectors=(1, 2)), {"SIMD": 2}),
            *(Example(dict(channels_per_stream=chans, dtype=dtype, num_input_vectors=vecs), {"SIMD": simd}, slow=k >= 2)
              for k, (chans, simd, dtype, vecs) in enumerate(cases))]


OPS = (
    Op("AddStreams", AddStreamsSpec, AddStreams, folding={"PE": "pe"},
       parallelism={"PE": divisors_of("num_channels")},
       finn_names={"num_channels": "NumChannels", "input_dtype": "inputDataType",
                   "num_input_vectors": "numInputVectors"}, old_names=("AddStreams_Batch",), role="join",
       golden=_golden_add, small_instance=shrink_channels("num_channels", "pe"), lowers=(Lowering(("Add",), _lower_add, streams=2, legal="Add of two streams"),),
       examples=_add_examples),
    Op("StreamingConcat", StreamingConcatSpec, StreamingConcat, folding={"SIMD": "simd"},
       parallelism={"SIMD": divisors_of("channels_per_stream")},
       finn_names={"channels_per_stream": "ChannelsPerStream", "dtype": "inputDataType",
                   "num_input_vectors": "numInputVectors"}, role="join", golden=_golden_concat, small_instance=_small_concat,
       lowers=(Lowering(("Concat",), _lower_concat, streams="all", legal="Concat of streams"),),
       examples=_concat_examples),
)
