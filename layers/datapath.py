"""Building blocks shared by the compute layers: datatype ranges, stall pipelines, products, adder trees.

The compute layers (MVAU, VVAU, Thresholding) are pipelines whose registers all advance on one
enable, ``advance``, which is the registered ``i.ready`` of a small output FIFO. So no combinational
path runs from a layer's ``o.ready`` to its ``i.ready``, and a stalled consumer freezes the pipeline
without losing or repeating anything: memories are read with ``en=advance`` so their data holds too.
"""

import math
from math import prod

import numpy as np
from amaranth.hdl import Cat, Const, Mux, Shape, Signal, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from qonnx.core.datatype import DataType

from layers.fifo import StreamingFIFO, output_fifo_spec
from layers.op import ArrayMemo, StreamContract

__all__ = ["booth_rows", "booth_offset", "fold_starts", "booth_start_bits", "shifted", "packing_shift", "packed_weight", "unpack_products", "signed_width", "dtype_range", "shape_for_range", "dtype_for_range", "check_dtype", "check_fits",
           "legal_divisors", "register", "wire", "wrapping_increment", "output_stage", "element_value", "product",
           "adder_tree", "tree_stages", "ceil_thresholds", "ChannelFolded", "PixelFolded", "StreamLayer"]


def check_dtype(owner, attr, dtype, *, allow_fixed=False):
    """Turn a name into a DataType; integer types (and BIPOLAR) only unless ``allow_fixed``."""
    if isinstance(dtype, str):
        try:
            dtype = DataType[dtype]
        except KeyError:
            raise ValueError(f"{owner} {attr}={dtype!r} is not a qonnx DataType name") from None
    if not hasattr(dtype, "bitwidth"):
        raise TypeError(f"{owner} {attr} must be a qonnx DataType, not {dtype!r}")
    if not allow_fixed and not dtype.is_integer():
        raise ValueError(f"{owner} {attr}={dtype.name} is not supported; legal: BIPOLAR, BINARY, TERNARY, "
                         f"INTn, UINTn")
    return dtype


def dtype_range(dtype):
    """(min, max) as Python ints."""
    return int(dtype.min()), int(dtype.max())


def shape_for_range(lo, hi):
    """The narrowest Amaranth shape holding every integer in [lo, hi]."""
    if lo >= 0:
        return unsigned(max(1, int(hi).bit_length()))
    return signed(max(int(hi).bit_length(), (-int(lo) - 1).bit_length()) + 1)


def dtype_for_range(lo, hi):
    """FINN's accumulator rule: UINTn if lo >= 0, else INTn, n the fewest bits holding [lo, hi]."""
    shape = shape_for_range(lo, hi)
    return DataType[f"{'INT' if shape.signed else 'UINT'}{shape.width}"]


def check_fits(owner, attr, dtype, lo, hi, what):
    """Raise if ``dtype`` cannot hold every value in [lo, hi] (``what`` names where they come from)."""
    dmin, dmax = dtype_range(dtype)
    if lo < dmin or hi > dmax:
        raise ValueError(f"{owner} {attr}={dtype.name} holds [{dmin}, {dmax}] but {what} reach [{lo}, {hi}]; "
                         f"use {dtype_for_range(min(lo, dmin), max(hi, dmax)).name} or wider")


def positive_pair(owner, attr, value):
    """An int n -> (n, n); a pair (h, w) of positive ints stays; anything else is refused naming ``attr``."""
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2 or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in pair):
        raise ValueError(f"{owner} {attr} must be a positive integer or a pair (h, w) of them, not {value!r}")
    return pair


def legal_divisors(n):
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def register(m, advance, value, *, name, reset_less=True):
    """A pipeline register that loads ``value`` when ``advance`` (data registers have no reset)."""
    reg = Signal(value.shape(), name=name, reset_less=reset_less)
    with m.If(advance):
        m.d.sync += reg.eq(value)
    return reg


def wire(m, value, *, name):
    """``value`` driven onto a Signal of its shape, for values used many times. Amaranth emits an
    expression (a Mux, an XOR...) again wherever it is used, slices of it included; a Signal once. The
    logic is the same (Yosys would merge the copies): this only keeps the netlist small."""
    sig = Signal(value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig


def wrapping_increment(counter, modulus):
    """counter + 1, back to 0 after modulus - 1."""
    return Mux(counter == modulus - 1, 0, counter + 1)


def output_stage(m, o, width, *, fall_through=False):
    """End a stall pipeline in a depth-2 FIFO driving stream ``o`` (``fall_through``: of latency 1).

    Returns (advance, fifo input): ``advance`` is the FIFO's registered ``i.ready``, the pipeline's
    enable; the pipeline drives the FIFO input's valid and payload from its last stage.
    """
    m.submodules.out_fifo = fifo = StreamingFIFO(output_fifo_spec(width, fall_through))
    wiring.connect(m, wiring.flipped(o), fifo.o)
    return fifo.i.ready, fifo.i


def element_value(bits, dtype):
    """Raw element bits -> an Amaranth value of the element (BIPOLAR is left as its bit)."""
    if dtype == DataType["BIPOLAR"]:
        return bits
    return bits.as_signed() if dtype.signed() else bits.as_unsigned()


def _shift_add_rows(x, y, y_signed):
    """The shifted partial products whose sum is x * y, one per bit of y."""
    width = len(y)
    terms = [Mux(y[j], shifted(x, j), 0) for j in range(width)]
    if y_signed:
        terms[-1] = -terms[-1]      # the sign bit weighs -2^(n-1)
    return terms


def shifted(x, j):
    """``x << j`` as wiring (no $shl cell), of the shape ``x << j`` has: ``len(x) + 2**len(Const(j)) - 1``
    bits, x's signedness."""
    width = len(x) + 2 ** len(Const(j)) - 1
    v = Cat(Const(0, j), x)
    fill = x[-1] if x.shape().signed else Const(0, 1)
    v = Cat(v, *([fill] * (width - len(v))))
    return v.as_signed() if x.shape().signed else v


def _shift_add(x, y, y_signed):
    """x * y as a sum of shifted partial products (no $mul cell, so Yosys keeps it in LUTs)."""
    return adder_tree(_shift_add_rows(x, y, y_signed))[0]


def product_rows(x, x_dtype, w, w_dtype):
    """A fabric product of two multi-bit integer operands as its partial-product rows (one per bit of
    the narrower operand, see :func:`product`), for an adder tree that pipelines them with the sums."""
    xv, wv = element_value(x, x_dtype), element_value(w, w_dtype)
    if len(w) <= len(x):
        return _shift_add_rows(xv, w, w_dtype.signed())
    return _shift_add_rows(wv, x, x_dtype.signed())


def booth_rows(x, w):
    """Radix-4 Booth rows of ``x * w``, x unsigned (raw bits) and w two's complement of an even width n (raw
    bits; n / 2 digits d_i = -2 w_{2i+1} + w_{2i} + w_{2i-1} in -2..2): row i is |d_i| x (x or 2x, a mux
    in one LUT per bit with the digit's three bits), inverted for a negative digit, its sign bit inverted
    so that every row is unsigned, at 4^i; the +1 a negative digit's inversion owes sits in the next row's
    two empty low bits. What the rows leave out depends on w alone: ``x * w = sum(rows) +
    booth_offset(w)``. Half the rows of a shift-add product (Yosys, UINT8 x INT8, one lane of SIMD 8 with
    its tree: 554 LUT against 858)."""
    ib, rows, owed = len(x), [], None
    for i in range(len(w) // 2):
        b1, b0, bm = w[2 * i + 1], w[2 * i], (w[2 * i - 1] if i else Const(0, 1))
        one, neg = b0 ^ bm, b1 & ~(b0 & bm)
        two = (b1 & ~b0 & ~bm) | (~b1 & b0 & bm)
        magnitude = Mux(one, Cat(x, Const(0, 1)), Mux(two, Cat(Const(0, 1), x), 0))
        row = Cat(magnitude ^ Cat(*([neg] * (ib + 1))), ~neg)
        rows.append(row if owed is None else shifted(Cat(owed, Const(0, 1), row), 2 * i - 2))
        owed = neg
    return rows


def booth_offset(w, n, ib):
    """``x * w - sum(booth_rows(x, w))`` for integer weights ``w`` (numpy) of n bits and ib-bit unsigned
    inputs: the last digit's owed +1 (at 4^(n/2 - 1)), less the inverted sign bits' 2^(ib + 1) per row."""
    w = np.asarray(w, dtype=np.int64) & ((1 << n) - 1)
    b1, b0, bm = (w >> (n - 1)) & 1, (w >> (n - 2)) & 1, (w >> (n - 3)) & 1
    digits = n // 2
    return (b1 & (1 - (b0 & bm))) * 4 ** (digits - 1) - (1 << (ib + 1)) * sum(4 ** i for i in range(digits))


_BOOTH_OFFSETS = ArrayMemo()    # per weights: each output channel's sum of booth_offset (its accumulator's start)


def _booth_channel_offsets(spec):
    return _BOOTH_OFFSETS.get(spec.weights, (type(spec).__name__, spec.input_dtype.bitwidth()),
                              lambda: booth_offset(spec.weight_matrix(), 8, spec.input_dtype.bitwidth()).sum(axis=1))


def fold_starts(spec, nf, per_channel=None, shape=None):
    """Per lane p of a dot-product unit, what its accumulator starts a fold at: ``per_channel[nf PE + p]`` (of
    ``shape`` if given), by default the sum of ``booth_offset`` over the channel (modulo the accumulator's
    width: the partial sums may wrap, the fold's total fits)."""
    shape = Shape.cast(spec.acc_shape.width if shape is None else shape)
    per_channel = _booth_channel_offsets(spec) if per_channel is None else per_channel
    offsets = [int(o) & ((1 << shape.width) - 1) for o in per_channel]
    starts = []
    for p in range(spec.pe):
        if spec.nf == 1:
            starts.append(Const(offsets[p], shape.width).as_signed() if shape.signed else Const(offsets[p], shape))
            continue
        # each bit a constant's bit selected by nf: a balanced mux tree, a LUT a bit up to NF 64 (a priority chain
        # of nf == f tests was a ladder of LUT2s, 6 levels at NF 16: ~197 MHz in the generator's MVAU_2)
        values = [offsets[f * spec.pe + p] for f in range(spec.nf)]
        masks = [sum(((v >> b) & 1) << f for f, v in enumerate(values)) for b in range(shape.width)]
        start = Cat(*(Const(int(mask != 0), 1) if mask in (0, (1 << spec.nf) - 1)
                      else Const(mask, spec.nf).bit_select(nf, 1) for mask in masks))
        starts.append(start.as_signed() if shape.signed else start)
    return starts


def booth_start_bits(spec):
    """Bits of the lanes' Booth starts (:func:`fold_starts`) that differ between folds: the registers Yosys
    keeps of the starts' register (the others hold a constant)."""
    width = spec.acc_shape.width
    offsets = (np.asarray(_booth_channel_offsets(spec), dtype=object) % (1 << width)).reshape(spec.nf, spec.pe)
    return sum(bin(int(np.bitwise_or.reduce(offsets[:, p] ^ offsets[0, p]))).count("1") for p in range(spec.pe))

def product(x, x_dtype, w, w_dtype, *, xnor, res_type):
    """One element product, from raw bits. ``xnor``: agreement bit of two 1-bit operands.

    BIPOLAR and BINARY operands select +-w or w/0 (no multiplier); otherwise ``res_type`` "dsp" writes
    ``*`` (Yosys maps it to DSP48E1) and "lut" a shift-add over the narrower operand.
    """
    if xnor:
        return ~(x ^ w)
    for a, a_dtype, b, b_dtype in ((x, x_dtype, w, w_dtype), (w, w_dtype, x, x_dtype)):
        if a_dtype == DataType["BIPOLAR"]:
            v = element_value(b, b_dtype)
            if b_dtype == DataType["BIPOLAR"]:
                v = Mux(b, 1, -1)
            return Mux(a, v, -v)
        if a_dtype == DataType["BINARY"]:
            return Mux(a, element_value(b, b_dtype), 0)
    xv, wv = element_value(x, x_dtype), element_value(w, w_dtype)
    if res_type == "dsp":
        return xv * wv
    if len(w) <= len(x):
        return _shift_add(xv, w, w_dtype.signed())
    return _shift_add(wv, x, x_dtype.signed())


DSP_A_BITS, DSP_B_BITS = 25, 18        # DSP48E1 multiplier operands (signed)
DSP_P_BITS = 48                        # DSP48E1 accumulator


def packing_shift(x_dtype, w_dtype):
    """The field width S that lets one DSP48E1 compute two products x*w_lo and x*w_hi sharing x as
    (w_hi * 2^S + w_lo) * x, or None when the operands do not allow it: S holds any product as a signed
    number, the packed weight fits the 25-bit A port and x the 18-bit B port."""
    bipolar = DataType["BIPOLAR"]
    if x_dtype == bipolar or w_dtype == bipolar or min(x_dtype.bitwidth(), w_dtype.bitwidth()) < 2:
        return None
    xlo, xhi = dtype_range(x_dtype)
    wlo, whi = dtype_range(w_dtype)
    corners = [a * b for a in (xlo, xhi) for b in (wlo, whi)]
    shift = signed_width(min(corners), max(corners))
    packed_lo, packed_hi = (wlo - 1) * 2 ** shift, whi * 2 ** shift + (2 ** (shift - 1) - 1)
    if signed_width(packed_lo, packed_hi) > DSP_A_BITS or signed_width(xlo, xhi) > DSP_B_BITS:
        return None
    return shift


def signed_width(lo, hi):
    """Bits of the narrowest signed number holding [lo, hi]."""
    return max(int(hi).bit_length(), (-int(lo) - 1).bit_length()) + 1


def packed_weight(w_lo, w_hi, w_dtype, shift):
    """w_hi * 2^shift + w_lo as one signed operand (the DSP48E1's A port), from raw element bits: w_lo's
    low ``shift`` bits (two's complement) under w_hi - [w_lo < 0], the borrow the negative low field
    takes from the high one, so that the packed value is exact. Its product with x is split by
    :func:`unpack_products`."""
    hi = element_value(w_hi, w_dtype)
    borrow = w_lo[-1] if w_dtype.signed() else Const(0, 1)
    low_field = Cat(w_lo, *([borrow] * (shift - len(w_lo))))      # w_lo sign-extended to ``shift`` bits
    return Cat(low_field, hi - borrow).as_signed()


def unpack_products(product, shift):
    """(x * w_lo, x * w_hi) from x times :func:`packed_weight`: the low field as a signed number, and
    the high part plus the low field's sign (the borrow given back)."""
    low = product[:shift].as_signed()
    high = product[shift:].as_signed() + product[shift - 1]
    return low, high


def adder_tree(terms, *, m=None, advance=None, levels_per_stage=0, name="sum", keep=False):
    """Sum of ``terms`` as a balanced tree; returns (sum, register stages).

    With ``m`` and ``levels_per_stage``, a pipeline register (loading on ``advance``) follows every
    ``levels_per_stage`` levels of adders, except after the last; without them the sum is combinational.

    ``keep`` (with ``m``): every sum on a wire Yosys keeps, so that each adder stays a carry chain of its
    own. Otherwise Yosys' alumacc merges the adders between two registers into one $macc, built as a
    carry-save tree of full adders in LUTs: for multi-bit terms (products, partial-product rows) that
    costs more LUTs than the chains (Yosys, UINT8 x INT8, SIMD 24 x PE 4: 13,525 -> 11,996 LUT with the
    rows in fabric, 3,316 -> 3,014 with two lanes a DSP48E1; 1-bit popcount terms are better merged).
    """
    terms = list(terms)
    stages = level = 0
    while len(terms) > 1:
        terms = [terms[k] + terms[k + 1] if k + 1 < len(terms) else terms[k] for k in range(0, len(terms), 2)]
        if keep and m is not None:
            terms = [_kept(m, t, f"{name}_k{level}_{k}") for k, t in enumerate(terms)]
        level += 1
        if m is not None and levels_per_stage and level % levels_per_stage == 0 and len(terms) > 1:
            terms = [register(m, advance, t, name=f"{name}_l{level}_{k}") for k, t in enumerate(terms)]
            stages += 1
    return terms[0], stages


def _kept(m, value, name):
    if isinstance(value, Signal):       # a term passed through this level unchanged
        return value
    sig = Signal(value.shape(), name=name, attrs={"keep": 1})
    m.d.comb += sig.eq(value)
    return sig


def tree_stages(n_terms, levels_per_stage):
    """Register stages :func:`adder_tree` inserts for ``n_terms`` inputs."""
    levels = math.ceil(math.log2(n_terms)) if n_terms > 1 else 0
    return (levels - 1) // levels_per_stage if levels and levels_per_stage else 0


def tree_register_bits(n_terms, width, levels_per_stage):
    """Flip-flops of the pipeline registers :func:`adder_tree` inserts for ``n_terms`` terms of about
    ``width`` bits (each level one bit wider)."""
    bits, level = 0, 0
    while n_terms > 1:
        n_terms, level = -(-n_terms // 2), level + 1
        if levels_per_stage and level % levels_per_stage == 0 and n_terms > 1:
            bits += n_terms * (width + level)
    return bits


def ceil_thresholds(thresholds, owner):
    """Thresholds as int64; non-integers rounded up (x >= T <=> x >= ceil(T) for integer x)."""
    t = np.asarray(thresholds, dtype=np.float64)
    if not np.all(np.isfinite(t)):
        raise ValueError(f"{owner} thresholds must be finite numbers")
    return np.ceil(t).astype(np.int64)



class ChannelFolded(StreamContract):
    """Geometry of a layer that maps (vectors..., C) to (vectors..., C) word for word.

    For spec dataclasses with ``num_channels``, ``pe``, ``input_dtype``, ``output_dtype`` and
    ``num_input_vectors``: each vector streams as C/PE words of PE lanes (lane p of word f is channel
    f*PE + p), one word per cycle in and out.
    """

    @property
    def cf(self):
        return self.num_channels // self.pe

    @property
    def in_width(self):
        return self.pe * self.input_dtype.bitwidth()

    @property
    def out_width(self):
        return self.pe * self.output_dtype.bitwidth()

    @property
    def folded_input_shape(self):
        return (*self.num_input_vectors, self.cf, self.pe)

    @property
    def folded_output_shape(self):
        return self.folded_input_shape

    @property
    def words(self):
        """Words per frame, on the input and on the output."""
        return prod(self.num_input_vectors) * self.cf

    @property
    def exp_cycles(self):
        """Cycles per frame in steady state: one word per cycle."""
        return self.words

    @property
    def lead_words(self):
        """Input words taken before the first output word can leave (FIFO bounds on reconvergent paths)."""
        return 1


class PixelFolded(StreamContract):
    """Geometry of a layer that maps one image to another of the same channels (padding, upsampling), both
    streamed pixel by pixel as C/SIMD words of SIMD lanes, one output word per cycle.

    For spec dataclasses with ``num_channels``, ``simd``, ``dtype`` and the properties ``in_image`` and
    ``out_image`` ((h, w) each).
    """

    @property
    def cf(self):
        """Words per pixel."""
        return self.num_channels // self.simd

    @property
    def width(self):
        """Bits per word, in and out."""
        return self.simd * self.dtype.bitwidth()

    @property
    def folded_input_shape(self):
        return (1, *self.in_image, self.cf, self.simd)

    @property
    def folded_output_shape(self):
        return (1, *self.out_image, self.cf, self.simd)

    @property
    def in_words(self):
        return self.in_image[0] * self.in_image[1] * self.cf

    @property
    def out_words(self):
        return self.out_image[0] * self.out_image[1] * self.cf

    @property
    def exp_cycles(self):
        """Cycles per frame in steady state: one output word per cycle, frames back to back."""
        return self.out_words


class StreamLayer(wiring.Component):
    """A layer with one input stream ``i`` of ``spec.in_width`` bits and one output stream ``o`` of
    ``spec.out_width`` bits (plus ``members``); ``spec`` is its contract."""

    def __init__(self, spec, **members):
        self._spec = spec
        super().__init__({"i": In(stream.Signature(spec.in_width)), "o": Out(stream.Signature(spec.out_width)),
                          **members})

    @property
    def spec(self):
        return self._spec
