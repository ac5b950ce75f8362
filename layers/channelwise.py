"""ChannelwiseOp: one per-channel parameter applied to every element, p[c] OP x (compare, add or multiply)."""

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import data
from amaranth.lib.memory import Memory

from layers.datapath import (StreamLayer, ChannelFolded, check_dtype, check_fits, dtype_for_range, dtype_range, element_value,
                             legal_divisors, output_stage, register, wrapping_increment)
from memstream.packing import pack_words
from layers.memcost import rom_luts
from layers.timing import one_to_one
from layers.op import Lowering, Op, Resources, divisors_of, grid_examples, random_elements
from layers.small import shrink_channels
import golden


__all__ = ["ChannelwiseOpSpec", "ChannelwiseOp", "FUNCS"]

FUNCS = ("cmp_le", "cmp_ge", "add", "mul")


def _positive(owner, attr, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{owner} {attr} must be a positive integer, not {value!r}")
    return value


@dataclass(frozen=True, eq=False)
class ChannelwiseOpSpec(ChannelFolded):
    """Contract of a channelwise operation (FINN ``ChannelwiseOp``: Func, PE, NumChannels, inputDataType,
    paramDataType, outputDataType, numInputVectors; the parameter tensor of C values).

    The result is ``p[c] OP x`` as in finn-hlslib's ``ChannelWiseOperation``: cmp_le -> [p <= x],
    cmp_ge -> [p >= x] (0 or 1), add -> p + x, mul -> p * x. ``output_dtype`` must hold every result
    the given parameters can produce over the whole input range.
    """
    func: str                   # Func: cmp_le, cmp_ge, add, mul
    num_channels: int           # NumChannels: C
    pe: int                     # PE: channels per word, divides C
    input_dtype: object         # inputDataType
    param_dtype: object         # paramDataType
    output_dtype: object        # outputDataType
    params: np.ndarray          # (C,) integers; p[c] with c = fold * PE + lane
    num_input_vectors: tuple = (1,)     # numInputVectors: words per frame = prod(vecs) * C / PE

    def __post_init__(self):
        owner = "ChannelwiseOp"
        if self.func not in FUNCS:
            raise ValueError(f"{owner} func={self.func!r} is not supported; legal: {', '.join(FUNCS)}")
        _positive(owner, "num_channels", self.num_channels)
        _positive(owner, "pe", self.pe)
        if self.num_channels % self.pe:
            raise ValueError(f"{owner} pe={self.pe} must divide num_channels={self.num_channels}; "
                             f"legal: {legal_divisors(self.num_channels)}")
        for attr in ("input_dtype", "param_dtype", "output_dtype"):
            dt = check_dtype(owner, attr, getattr(self, attr))
            if dt.name == "BIPOLAR":
                raise ValueError(f"{owner} {attr}=BIPOLAR is not supported; legal: integer types")
            object.__setattr__(self, attr, dt)
        vecs = (self.num_input_vectors,) if isinstance(self.num_input_vectors, int) else tuple(self.num_input_vectors)
        if not vecs or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in vecs):
            raise ValueError(f"{owner} num_input_vectors must be positive integers, not {self.num_input_vectors!r}")
        object.__setattr__(self, "num_input_vectors", vecs)

        p = np.asarray(self.params)
        if p.shape != (self.num_channels,):
            raise ValueError(f"{owner} params must have shape ({self.num_channels},), one per channel, not {p.shape}")
        as_float = p.astype(np.float64)
        if not np.all(np.isfinite(as_float)) or not np.array_equal(as_float, np.round(as_float)):
            raise ValueError(f"{owner} params must be integers")
        p = as_float.astype(np.int64)
        object.__setattr__(self, "params", p)
        check_fits(owner, "param_dtype", self.param_dtype, int(p.min()), int(p.max()), "params")
        lo, hi = self.result_range
        what = "compare results" if self.func.startswith("cmp") else f"params {self.func} inputs"
        check_fits(owner, "output_dtype", self.output_dtype, lo, hi, what)

    @property
    def result_range(self):
        """(min, max) of p[c] OP x over every channel and every input value."""
        if self.func in ("cmp_le", "cmp_ge"):
            return 0, 1
        xlo, xhi = dtype_range(self.input_dtype)
        p = [int(v) for v in self.params]
        if self.func == "add":
            return min(p) + xlo, max(p) + xhi
        ends = [v * x for v in p for x in (xlo, xhi)]
        return min(ends), max(ends)

    @property
    def param_width(self):
        """Bits of one parameter word (PE parameters, lane 0 at the LSB)."""
        return self.pe * self.param_dtype.bitwidth()

    @property
    def latency(self):
        """Cycles from an input transfer to its result being offered (input and result registers, FIFO)."""
        return 4

    def timing(self, arrivals):
        """Takes a word whenever one is offered; its result ``latency`` cycles later (:mod:`layers.timing`)."""
        return one_to_one(self.latency, arrivals[0])

    def param_words(self):
        """The parameter ROM image: word f holds p[f*PE .. f*PE + PE - 1], lane 0 at the LSB."""
        return [int(w) for w in pack_words(self.params.reshape(self.cf, self.pe), self.param_dtype)]

    def resource_estimate(self):
        """Per lane: the operation (a LUT per result bit for add and compare; a DSP48 for a multiply of
        operands wider than 4x4 bits, else a shift-add of LUTs), the parameter ROM in LUTs (64 entries a
        LUT6 per bit; constants when C = PE), registers for input, parameters, result and output FIFO."""
        ib, pb, ob = self.input_dtype.bitwidth(), self.param_dtype.bitwidth(), self.output_dtype.bitwidth()
        rom_lut = 0 if self.cf == 1 else rom_luts(self.param_width, self.cf)
        dsp = 0
        if self.func == "mul" and min(ib, pb) > 4:
            op_lut = 0
            dsp = self.pe
        elif self.func == "mul":
            op_lut = self.pe * min(ib, pb) * ob
        else:
            op_lut = self.pe * max(ib, pb)
        ff = self.in_width + (0 if self.cf == 1 else self.param_width) + 4 * self.out_width + self.cf.bit_length()
        return Resources(lut=op_lut + rom_lut + 2 * self.out_width, ff=ff, bram18=0, dsp=dsp)


class ChannelwiseOp(StreamLayer):
    """Applies ``p[c] OP x`` to each element of a stream of ``pe``-lane words.

    Members
    -------
    i : In(stream.Signature(spec.in_width))
    o : Out(stream.Signature(spec.out_width))

    Lane ``j`` of word ``f`` (within a pixel) is channel ``f * PE + j`` and uses ``p[f * PE + j]``. One
    word per cycle (``spec.exp_cycles`` per frame), order kept, latency ``spec.latency``. The parameters
    sit in a ROM of C/PE words of PE parameters read synchronously alongside the input register (or are
    constants when C = PE). ``i.ready`` is the output FIFO's registered ready, never a function of
    ``o.ready``; a stall holds every register and the ROM read still.
    """

    def elaborate(self, platform):
        spec = self._spec
        idt, pdt, ob = spec.input_dtype, spec.param_dtype, spec.output_dtype.bitwidth()
        m = Module()
        advance, fifo_in = output_stage(m, self.o, spec.out_width)

        fold = Signal(range(spec.cf))
        take = self.i.valid & advance
        m.d.comb += self.i.ready.eq(advance)
        with m.If(take):
            m.d.sync += fold.eq(wrapping_increment(fold, spec.cf))

        # stage 0: the input word, and the parameters of its fold (ROM data arrives with it)
        if spec.cf == 1:
            param_word = Const(spec.param_words()[0], spec.param_width)
        else:
            m.submodules.params = rom = Memory(shape=spec.param_width, depth=spec.cf, init=spec.param_words())
            rd = rom.read_port(domain="sync")
            m.d.comb += [rd.addr.eq(fold), rd.en.eq(advance)]
            param_word = rd.data
        v0 = register(m, advance, take, name="v0", reset_less=False)
        x0 = register(m, advance, self.i.payload, name="x0")
        xs = data.View(data.ArrayLayout(idt.bitwidth(), spec.pe), x0)
        ps = data.View(data.ArrayLayout(pdt.bitwidth(), spec.pe), param_word)

        # stage 1: the results, each exact in its own shape; assigning to ob bits extends by that shape's
        # signedness and drops bits the output range never needs, leaving the output element code
        results = []
        for j in range(spec.pe):
            p, x = element_value(ps[j], pdt), element_value(xs[j], idt)
            op = {"cmp_le": lambda: p <= x, "cmp_ge": lambda: p >= x, "add": lambda: p + x, "mul": lambda: p * x}
            code = Signal(ob, name=f"result{j}")
            m.d.comb += code.eq(op[spec.func]())
            results.append(code)
        v1 = register(m, advance, v0, name="v1", reset_less=False)
        y1 = register(m, advance, Cat(results), name="y1")
        m.d.comb += [fifo_in.valid.eq(v1), fifo_in.payload.eq(y1)]
        return m



# ---- the golden: this op on numpy from its definition, written apart from the hardware (no folding,
# packing or pipeline, no spec); the OP's golden hook applies it to a spec's streams
def golden_channelwise(x, params, func):
    """p[c] OP x[..., c] with channels last: cmp_le -> [p <= x], cmp_ge -> [p >= x] (0/1), add, mul."""
    x, p = golden.integers(x), golden.integers(params)
    ops = {"cmp_le": lambda: (p <= x).astype(np.int64), "cmp_ge": lambda: (p >= x).astype(np.int64),
           "add": lambda: p + x, "mul": lambda: p * x}
    if func not in ops:
        raise ValueError(f"channelwise func must be one of {', '.join(ops)}, not {func!r}")
    return ops[func]()


def _golden(spec, xs, producer):
    return golden_channelwise(xs[0], spec.params, spec.func)


def _lower_bias(ctx, sources, t, bias):
    """A bias of integers, one per channel, added to stream ``t`` (FINN's ChannelwiseOp with Func add): where
    the lowering carries a dot product's accumulator into the next layer with no quantizer between, the
    bias on the accumulator's grid. The output holds every sum over ``t``'s datatype."""
    bias = np.asarray(bias, dtype=np.int64)
    lo, hi = dtype_range(t.dtype)
    b_lo, b_hi = int(bias.min()), int(bias.max())
    vecs = (1, *t.shape[2:]) if t.spatial else tuple(t.shape[:-1]) if len(t.shape) > 2 else (1,)
    return ctx.add("ChannelwiseOp", dict(func="add", num_channels=len(bias), input_dtype=t.dtype,
                                         param_dtype=dtype_for_range(min(b_lo, 0), max(b_hi, 0)),
                                         output_dtype=dtype_for_range(lo + b_lo, hi + b_hi), params=bias,
                                         num_input_vectors=vecs), sources)


def _examples():
    """A per-channel add, then FINN's grid (test_fpgadataflow_channelwise_ops: INT4 inputs and params,
    add/mul into INT8, 16 channels, fold -1/4/1) plus the compares into BINARY."""
    def case(c):
        odt = "BINARY" if c["func"].startswith("cmp") else "INT8"
        return dict(func=c["func"], num_channels=16, input_dtype="INT4", param_dtype="INT4", output_dtype=odt,
                    params=random_elements("INT4", 16, c["pe"]), num_input_vectors=c["vecs"]), {"PE": c["pe"]}
    grid = dict(func=["add", "mul", "cmp_le", "cmp_ge"], vecs=[(1,), (1, 7, 7)], pe=[1, 4, 16])
    return [(dict(func="add", num_channels=4, input_dtype="INT2", param_dtype="INT2", output_dtype="INT4",
                  params=np.array([1, -1, 0, 1]), num_input_vectors=(1, 2)), {"PE": 2}),
            *grid_examples(grid, case, stride=11)]


OP = Op("ChannelwiseOp", ChannelwiseOpSpec, ChannelwiseOp, folding={"PE": "pe"},
        parallelism={"PE": divisors_of("num_channels")},
        finn_names={"func": "Func", "num_channels": "NumChannels", "input_dtype": "inputDataType",
                    "param_dtype": "paramDataType", "output_dtype": "outputDataType",
                    "num_input_vectors": "numInputVectors"},
        old_names=("ChannelwiseOp_Batch",), golden=_golden, finn_arrays=("params",),
        lowers=(Lowering(rule=_lower_bias, at="bias"),),
        small_instance=shrink_channels("num_channels", "pe", ("params",)), examples=_examples)
