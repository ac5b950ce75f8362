"""QuantSoftmax: a Softmax over the last axis followed by its quantizer, on integer codes.

Per row of ``n`` input codes ``c`` (scale ``s_in``) it gives the codes of ``Quant(softmax(s_in * c))``
(scale ``s_out``, zero point 0, round to nearest) in integer arithmetic:

- ``d = max(c) - c`` (the max subtraction); ``e = E[d]``, a table of ``round(2^F * exp(-s_in * d))`` over
  the input datatype's range of differences (``E[0] = 2^F``);
- ``S = sum(e)`` (exact), ``R = floor(K / S)`` with ``K = round(2^Z / s_out)`` (one division a row: a
  restoring divider, one quotient bit a cycle);
- ``code = min(floor((e * R + 2^(Z-1)) / 2^Z), out_max)``: ``e * R / 2^Z`` is ``p / s_out`` and the
  rounding picks the nearest level.

Exactness: the integer result equals the quantizer of the real softmax except where ``p / s_out`` lies
within ``error_bound`` (in units of the output code) of a half-integer: there float32 (qonnx's Softmax,
whose relative error is about 1e-7) cannot decide either; such codes are float32 ties, classified as the
residual Adds' are (:mod:`rtlgen.check.exact`). ``F`` and ``Z`` are chosen so that bound is below
float32's own.

Schedule per row, one step a cycle: ``n`` steps taking the codes (and the running max), ``n`` steps
summing ``E[d]``, ``quotient_bits / div_bits`` steps of the divider (``div_bits``, its folding: quotient bits
a step), ``n`` steps each giving one output code.
"""

from dataclasses import dataclass, field
from math import ceil, exp, log2, prod

import numpy as np
from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from qonnx.core.datatype import DataType

from layers.datapath import check_dtype, dtype_for_range, element_value, output_stage, register, wrapping_increment
from layers.fifo import output_fifo_spec
from layers.memcost import rom_luts
from layers.op import Lowering, Op, Resources
from layers.timing import Timing, as_cycles, frames_of, take_when_ready
import golden

__all__ = ["QuantSoftmaxSpec", "QuantSoftmax", "softmax_constants"]

EXP_FRACTION_BITS = 30          # F: E[d] = round(2^F exp(-s d)); its rounding moves p by < (n + 1) 2^-(F+1)
RECIPROCAL_BITS = 32            # R = K // S keeps at least this many bits (its floor moves p by < 2^-31 p)
MAX_DIV_BITS = 4                # quotient bits a divider step: that many subtractors in series
LATENCY = 5                     # an output step -> E[d]'s register -> the product's -> the code's -> the FIFO (2)
NO_WORD = np.iinfo(np.int64).min // 4


def softmax_constants(s_in, s_out, n, in_dtype, exp_bits=EXP_FRACTION_BITS, reciprocal_bits=RECIPROCAL_BITS):
    """(exp table E, numerator K, shift Z) of a softmax over rows of ``n`` codes of ``in_dtype`` at input
    scale ``s_in``, quantized at ``s_out``: E has ``exp_bits`` fraction bits, R = K // S at least
    ``reciprocal_bits`` bits for every S."""
    span = int(in_dtype.max()) - int(in_dtype.min())
    table = tuple(int(round(2.0 ** exp_bits * exp(-float(s_in) * d))) for d in range(span + 1))
    s_max = n << exp_bits
    shift = max(1, ceil(reciprocal_bits + log2(s_max) + log2(float(s_out))) + 1)
    numerator = int(round(2.0 ** shift / float(s_out)))
    return table, numerator, shift


@dataclass(frozen=True)
class QuantSoftmaxSpec:
    """Contract of a softmax over rows of ``n`` codes and its quantizer (one element a word). The
    arithmetic's constants (``exp_table``, ``numerator``, ``shift``) follow from the two scales."""
    n: int                          # the softmax axis: codes per row
    input_dtype: object             # the codes' datatype
    output_dtype: object            # the quantizer's codes (0 .. out_max)
    out_max: int                    # largest output code (the quantizer's clamp)
    in_scale: float                 # s_in: the input codes' scale (a float32 value)
    out_scale: float                # s_out: the quantizer's scale (a float32 value)
    num_input_vectors: tuple = (1,)     # rows: the tensor's other dimensions
    exp_bits: int = EXP_FRACTION_BITS   # F, fraction bits of the exp table (fewer: only for rtlgen prove)
    reciprocal_bits: int = RECIPROCAL_BITS  # least bits of R (fewer: only for rtlgen prove)
    div_bits: int = 1               # quotient bits the divider finds a step (its folding: 1 .. MAX_DIV_BITS)
    exp_table: tuple = field(init=False, repr=False)     # E[d], d = 0 .. input range
    numerator: int = field(init=False, repr=False)      # K
    shift: int = field(init=False, repr=False)          # Z
    quotient_bits: int = field(init=False, repr=False)

    num_inputs = 1
    num_outputs = 1
    words_before_lead = 0

    def __post_init__(self):
        if not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"QuantSoftmax n must be a positive integer, not {self.n!r}")
        object.__setattr__(self, "input_dtype", check_dtype("QuantSoftmax", "input_dtype", self.input_dtype))
        object.__setattr__(self, "output_dtype", check_dtype("QuantSoftmax", "output_dtype", self.output_dtype))
        object.__setattr__(self, "num_input_vectors", tuple(self.num_input_vectors))
        for attr in ("in_scale", "out_scale"):
            if not float(getattr(self, attr)) > 0:
                raise ValueError(f"QuantSoftmax {attr} must be a positive number, not {getattr(self, attr)!r}")
        if not 0 <= self.out_max <= int(self.output_dtype.max()):
            raise ValueError(f"QuantSoftmax out_max={self.out_max} must be a code of {self.output_dtype.name}")
        table, numerator, shift = softmax_constants(self.in_scale, self.out_scale, self.n, self.input_dtype,
                                                    self.exp_bits, self.reciprocal_bits)
        object.__setattr__(self, "exp_table", table)
        object.__setattr__(self, "numerator", numerator)
        object.__setattr__(self, "shift", shift)
        if self.div_bits not in range(1, MAX_DIV_BITS + 1):
            raise ValueError(f"QuantSoftmax div_bits={self.div_bits} must be 1 .. {MAX_DIV_BITS} (quotient bits a "
                             f"divider step)")
        # S >= E[0] = 2^F, so K >> quotient_bits < S: the divider starts there, and K // S < 2^quotient_bits;
        # rounded up to whole steps of div_bits (the extra top bits are 0)
        bits = max(1, numerator.bit_length() - self.fraction_bits)
        object.__setattr__(self, "quotient_bits", -(-bits // self.div_bits) * self.div_bits)

    @property
    def fraction_bits(self):
        return max(self.exp_table).bit_length() - 1

    @property
    def sum_bits(self):
        return (self.n * max(self.exp_table)).bit_length()

    @property
    def rows(self):
        return prod(self.num_input_vectors)

    @property
    def in_width(self):
        return self.input_dtype.bitwidth()

    @property
    def out_width(self):
        return self.output_dtype.bitwidth()

    @property
    def folded_input_shapes(self):
        return ((*self.num_input_vectors, self.n, 1),)

    @property
    def folded_output_shape(self):
        return (*self.num_input_vectors, self.n, 1)

    @property
    def div_steps(self):
        return self.quotient_bits // self.div_bits

    @property
    def row_steps(self):
        return 3 * self.n + self.div_steps

    @property
    def exp_cycles(self):
        return self.rows * self.row_steps

    @property
    def lead_words(self):
        return self.n

    @property
    def latency(self):
        """From the row's last input word to its first code offered: the sum, the division, an output step."""
        return self.n + self.div_steps + 1 + LATENCY

    @property
    def error_bound(self):
        """Largest difference, in output codes, between ``e * R / 2^Z`` and the real ``p / s_out``: E's
        rounding moves ``e / S`` by at most (n + 1) / 2 units of 2^-F (S >= 2^F), and R's floor and K's
        rounding scale the result by less than 2^-(RECIPROCAL_BITS - 1)."""
        s_out = 2.0 ** self.shift / self.numerator
        return ((self.n + 1) * 2.0 ** -(self.fraction_bits + 1) / s_out
                + (self.out_max + 1) * 2.0 ** -(self.reciprocal_bits - 1))

    def steps(self):
        """Per row: (takes an input word, gives an output word) for each of its ``row_steps`` steps."""
        takes = np.zeros(self.row_steps, bool)
        takes[:self.n] = True
        gives = np.zeros(self.row_steps, bool)
        gives[-self.n:] = True
        return takes, gives

    def timing(self, arrivals):
        """The steps of every row one a cycle, an input step as soon as its word is offered; a code
        ``LATENCY`` cycles after its output step (:mod:`layers.timing`)."""
        a = as_cycles(arrivals[0])
        rows = frames_of(a, self.n)
        takes, gives = self.steps()
        takes, gives = np.tile(takes, rows), np.tile(gives, rows)
        offered = np.full(takes.size, NO_WORD, dtype=np.int64)
        offered[takes] = a
        taken = take_when_ready(offered)
        return Timing((taken[takes],), taken[gives] + LATENCY)

    def resource_estimate(self):
        """The row buffer, the exp table as LUT ROM, the sum, the divider (a subtractor and its registers),
        the product e * R in DSP48E1s (as Yosys splits it: 17 x 24-bit pieces), its registers, the rounding,
        the counters and the FIFO. (Yosys, attention_2heads: 431 LUT, 226 FF, 4 DSP before the product's
        pipeline registers were added.)"""
        ib, eb, sb, qb = self.in_width, self.fraction_bits + 1, self.sum_bits, self.quotient_bits
        table = rom_luts(eb, len(self.exp_table))
        dsp = -(-min(eb, qb) // 17) * -(-max(eb, qb) // 24)
        counters = 3 * max(1, self.row_steps.bit_length())
        fifo = output_fifo_spec(self.out_width).resource_estimate()
        divider = self.div_bits * 2 * (sb + 1)          # per quotient bit of a step: a subtractor, a multiplexer
        lut = self.n * ib // 2 + 2 * ib + table + sb + divider + (eb + qb) + 2 * self.out_width + counters + fifo.lut
        ff = self.n * ib + ib + 3 * sb + qb + eb + self.out_width + 4 + counters + fifo.ff
        return Resources(lut=lut, ff=ff, bram18=0, dsp=dsp)


class QuantSoftmax(wiring.Component):
    """Rows of ``spec.n`` codes on ``i`` -> their quantized softmax codes on ``o`` (one a word).

    One step a cycle, each only while the output FIFO's registered ``i.ready`` allows (so no ready depends
    on ``o.ready``): ``n`` steps taking a row (``i.ready`` high in those only), ``n`` summing the table's
    entries, ``spec.div_steps`` dividing, ``n`` giving the codes. ``spec.exp_cycles`` a frame.
    """

    def __init__(self, spec):
        self._spec = spec
        super().__init__({"i": In(stream.Signature(spec.in_width)), "o": Out(stream.Signature(spec.out_width))})

    @property
    def spec(self):
        return self._spec

    def elaborate(self, platform):
        s = self._spec
        n, qb, z, r = s.n, s.quotient_bits, s.shift, s.div_bits
        ib, eb, sb = s.in_width, s.fraction_bits + 1, s.sum_bits
        m = Module()
        advance, fifo_in = output_stage(m, self.o, s.out_width)

        step = Signal(range(s.row_steps))
        j = Signal(range(n))                            # the element of the row this step is at
        taking, summing = step < n, (step >= n) & (step < 2 * n)
        dividing = (step >= 2 * n) & (step < 2 * n + s.div_steps)
        giving = step >= 2 * n + s.div_steps
        go = advance & (~taking | self.i.valid)
        m.d.comb += self.i.ready.eq(advance & taking)

        # the row and its max
        row = Array(Signal(ib, name=f"c_{k}") for k in range(n))
        code_in = element_value(self.i.payload[:ib], s.input_dtype)
        top = Signal(code_in.shape(), name="max")
        with m.If(go & taking):
            m.d.sync += row[j].eq(self.i.payload[:ib])
            m.d.sync += top.eq(Mux((j == 0) | (code_in > top), code_in, top))

        # E[max - c] (an asynchronous ROM read)
        m.submodules.exp_table = rom = Memory(shape=unsigned(eb), depth=len(s.exp_table), init=s.exp_table)
        rd = rom.read_port(domain="comb")
        m.d.comb += rd.addr.eq(top - element_value(row[j], s.input_dtype))
        e = rd.data

        # the sum, then the divider: R = K // S, ``div_bits`` quotient bits a step (restoring division unrolled),
        # from the remainder K >> qb
        total = Signal(sb, name="sum")
        rem = Signal(sb + 1, name="remainder")
        quotient = Signal(qb, name="quotient")
        # K's bits below K >> qb, MSB first, by a variable shift of a constant: an Array of constants
        # becomes an ``always @*`` block that Icarus never runs at time 0 (see layers.streams)
        k_low = s.numerator & ((1 << qb) - 1)
        k_reversed = Const(int(format(k_low, f"0{qb}b")[::-1], 2), qb)     # bit b: the b-th shifted in
        t = Signal(range(s.div_steps), name="div_step")
        k_at = Signal(range(qb + 1), name="k_at")                          # t * div_bits
        k_bits = Signal(r)
        m.d.comb += k_bits.eq(k_reversed >> k_at)
        remainder = Signal(sb + 1, name="remainder_in")
        m.d.comb += remainder.eq(Mux(t == 0, s.numerator >> qb, rem))
        fits = []
        for i in range(r):
            shifted = Signal(sb + 1, name=f"shifted_{i}")
            m.d.comb += shifted.eq(remainder * 2 + k_bits[i])
            fit = Signal(name=f"fits_{i}")
            m.d.comb += fit.eq(shifted >= total)
            remainder = Mux(fit, shifted - total, shifted)
            fits.append(fit)
        with m.If(go & summing):
            m.d.sync += total.eq(Mux(j == 0, e, total + e))
        with m.If(go & dividing):
            m.d.sync += [rem.eq(remainder), quotient.eq(Cat(*reversed(fits), quotient[:qb - r])),
                         t.eq(wrapping_increment(t, s.div_steps)),
                         k_at.eq(Mux(t == s.div_steps - 1, 0, k_at + r))]

        # a code: min((e * R + 2^(Z-1)) >> Z, out_max) = min((floor(e * R / 2^(Z-1)) + 1) >> 1, out_max): the
        # rounding adds to the product's top bits only. Registers after the table and after the product
        # (the DSP48E1s' own) keep the path from the ROM through the multiplier to the clamp apart.
        e_valid = register(m, advance, go & giving, name="e_valid", reset_less=False)
        e_reg = register(m, advance, e, name="e")
        product_valid = register(m, advance, e_valid, name="product_valid", reset_less=False)
        product = register(m, advance, e_reg * quotient, name="product")
        high = product[z - 1:] if z - 1 < len(product) else Const(0, 1)
        scaled = Signal(len(high) + 1)
        m.d.comb += scaled.eq((high + 1) >> 1)
        code = Mux(scaled > s.out_max, s.out_max, scaled)
        out_valid = register(m, advance, product_valid, name="out_valid", reset_less=False)
        out = register(m, advance, code[:s.out_width], name="out")
        m.d.comb += [fifo_in.valid.eq(out_valid), fifo_in.payload.eq(out)]

        with m.If(go):
            m.d.sync += step.eq(wrapping_increment(step, s.row_steps))
            with m.If(taking | summing | giving):
                m.d.sync += j.eq(wrapping_increment(j, n))
        return m


# ---- the golden: this op on numpy from its definition, written apart from the hardware (no folding,
# packing or pipeline, no spec); the OP's golden hook applies it to a spec's streams
def golden_quant_softmax(x, exp_table, numerator, shift, out_max):
    """Softmax over the last axis of integer codes, quantized, in integers: e = E[max - x], R = K // sum(e),
    min((e * R + 2^(shift-1)) >> shift, out_max). Python integers (e * R exceeds int64)."""
    x = golden.integers(x)
    e = np.asarray(exp_table, dtype=object)[x.max(axis=-1, keepdims=True) - x]
    r = int(numerator) // e.sum(axis=-1, keepdims=True)
    codes = (e * r + (1 << (int(shift) - 1))) >> int(shift)
    return np.minimum(codes, int(out_max)).astype(np.int64)


def _golden(spec, xs, producer):
    """golden_quant_softmax on each row."""
    x = xs[0].reshape(xs[0].shape[0], -1, spec.n)
    y = golden_quant_softmax(x, spec.exp_table, spec.numerator, spec.shift, spec.out_max)
    return y.reshape(xs[0].shape[0], -1, 1)


# --- lowering ------------------------------------------------------------------------------------

def _only_quantizer(ctx, node):
    """The one Quant reading the Softmax's output, or None."""
    readers = ctx.consumers(node.output[0])
    if len(readers) == 1 and readers[0].op_type == "Quant" and not ctx.is_graph_output(node.output[0]):
        return readers[0]
    return None


def _lower_softmax(ctx, node):
    """Softmax (last axis) + its Quant -> QuantSoftmax."""
    where = f"node {node.name} (Softmax)"
    t = ctx.input(node)
    ctx.require_codes(t, node)
    if np.ndim(t.scale) or t.spatial:
        raise ctx.error(f"{where}: its input {t.name} must be a per-tensor quantized sequence (no feature map, no "
                        f"per-channel scale)")
    rank = len(t.shape)
    if t.row_order is not None and not _rows_whole(t.row_order, t.shape[-1]):
        raise ctx.error(f"{where}: its input {t.name} streams in an order that splits its rows (legal: each row of "
                        f"the softmax axis streamed whole and in order, the rows in any order)")
    if ctx.attrs(node).get("axis", -1) % rank != rank - 1:
        raise ctx.error(f"{where}: only a softmax over the last axis maps to hardware (the one that streams "
                        f"fastest), not axis {ctx.attrs(node).get('axis')}")
    quant = _only_quantizer(ctx, node)          # (a float softmax runs on the host, at the graph's end)
    qwhere = f"node {quant.name} (Quant)"
    scale, zero, bits = (ctx.initializer(quant.input[k]) for k in (1, 2, 3))
    attrs = ctx.attrs(quant)
    if any(v is None or np.size(v) != 1 for v in (scale, zero, bits)) or float(np.ravel(zero)[0]) != 0:
        raise ctx.error(f"{qwhere}: the quantizer after a softmax needs a constant per-tensor scale, zero point 0 "
                        f"and a constant bit width")
    mode = attrs.get("rounding_mode", "ROUND")
    if (mode.decode() if isinstance(mode, bytes) else mode) != "ROUND":
        raise ctx.error(f"{qwhere}: the quantizer after a softmax must round to nearest (ROUND), not {mode}")
    bits, signed, narrow = int(np.ravel(bits)[0]), bool(attrs.get("signed", 1)), bool(attrs.get("narrow", 0))
    out_max = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1 - narrow
    s_out = float(np.float32(np.ravel(scale)[0]))
    n = t.shape[-1]
    vecs = tuple(t.shape[:-1]) if rank > 1 else (1,)
    ctx.add("QuantSoftmax", dict(n=n, input_dtype=t.dtype, output_dtype=dtype_for_range(0, out_max), out_max=out_max,
                                 in_scale=float(np.float32(t.scale)), out_scale=s_out, num_input_vectors=vecs),
            [node, quant])
    return ctx.tensor(quant.output[0], dtype_for_range(0, out_max), s_out, tuple(t.shape), rounding=True,
                      row_order=t.row_order)


def _rows_whole(row_order, n):
    """Whether a stream in ``row_order`` carries each row of ``n`` elements whole and in order."""
    rows = np.asarray(row_order).reshape(-1, n)
    return bool((rows[:, :1] % n == 0).all() and (rows - rows[:, :1] == np.arange(n)).all())


def _small_instance(s):
    """Rows of at most two codes, at most two rows; a 6-bit exp table and an 8-bit reciprocal (the same
    datapath, narrower: the 31 x 36-bit product and 36 division steps are beyond SymbiYosys' reach)."""
    return dict(n=min(s.n, 2), num_input_vectors=(min(s.rows, 2),), exp_bits=6, reciprocal_bits=8)


def _examples():
    """Softmax over 4 elements, three vectors."""
    return [(dict(n=4, input_dtype="INT4", output_dtype="UINT8", out_max=255, in_scale=0.06, out_scale=0.0039,
                  num_input_vectors=(1, 3)), {})]


OP = Op("QuantSoftmax", QuantSoftmaxSpec, QuantSoftmax, golden=_golden, small_instance=_small_instance,
        folding={"div_bits": "div_bits"}, extensions=("div_bits",),
        parallelism={"div_bits": lambda params: list(range(1, MAX_DIV_BITS + 1))},
        lowers=(Lowering(("Softmax",), _lower_softmax, when=lambda ctx, node: _only_quantizer(ctx, node) is not None,
                         legal="Softmax (over the last axis and then quantized)"),), examples=_examples)
