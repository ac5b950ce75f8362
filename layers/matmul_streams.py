"""MatMulStreams: the product of two activation streams (attention's Q.K^T and scores.V), exact on codes.

Per head, ``A`` (M x K) times ``B`` (K x P) = ``Y`` (M x P). B is buffered: all its words of a head are
taken first (rows of B, or rows of B^T where the model reads a transposed stream, as K in Q.K^T), then A
streams row by row and each row gives P accumulators, PE per output word, SIMD products per cycle; a row
is kept while its NF output words are computed (SF words, replayed NF - 1 times). Accumulation is exact
(the output datatype holds every sum), so the quantizer after it becomes exact thresholds as after an
MVAU. One head after another: a head's B is taken once the previous head's last row has been computed
(no double buffering yet: ``exp_cycles`` counts the load and the compute of every head).

The ONNX pattern: ``MatMul`` of two streams, and a ``Transpose`` of the last two axes read only as the
second input of such MatMuls (no hardware: the stream keeps its order, the MatMul reads it as B^T).
"""

from dataclasses import dataclass, field
from math import prod

import numpy as np
from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from layers.datapath import (adder_tree, check_dtype, dtype_for_range, dtype_range, element_value, legal_divisors,
                             output_stage, product, register, wrapping_increment)
from layers.fifo import output_fifo_spec
from layers.op import Lowering, Op, Resources, divisors_of
from layers.timing import Timing, as_cycles, frames_of, take_when_ready
import golden

__all__ = ["MatMulStreamsSpec", "MatMulStreams", "transposed_order", "permuted_order", "interleaved_order"]

LATENCY = 4             # a compute step -> its stage-1 registers -> the sum register -> the output FIFO (2)
NO_WORD = np.iinfo(np.int64).min // 4     # a step that takes no input word waits for nothing


def _positive(attr, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"MatMulStreams {attr} must be a positive integer, not {value!r}")


@dataclass(frozen=True)
class MatMulStreamsSpec:
    """Contract of a product of two streams: per head, A (m x k) on input 0 times B (k x p) on input 1."""
    m: int                      # rows of A per head (tokens)
    k: int                      # the summed dimension
    p: int                      # columns of B: outputs per row of A
    simd: int                   # SIMD: products per output lane and cycle, divides k
    pe: int                     # PE: outputs per word, divides p
    a_dtype: object             # datatype of A's elements (input 0)
    b_dtype: object             # datatype of B's elements (input 1)
    b_transposed: bool = False  # B streams as rows of B^T (p vectors of k, SIMD a word), else as rows of
                                # B (k vectors of p, PE a word)
    heads: int = 1              # independent products per frame
    interleaved: bool = False   # heads interleaved in every stream, token-major (torch's head split read in
                                # stream order: A rows (t, h), B rows (., h), output rows (t, h)): B of
                                # every head is buffered, then A's rows go in stream order. Else head after
                                # head: one head's B buffered, then its rows
    output_dtype: object = field(init=False)

    num_inputs = 2
    num_outputs = 1
    words_before_lead = 0

    def __post_init__(self):
        for attr in ("m", "k", "p", "simd", "pe", "heads"):
            _positive(attr, getattr(self, attr))
        if self.k % self.simd:
            raise ValueError(f"MatMulStreams simd={self.simd} must divide k={self.k}; legal simd: "
                             f"{legal_divisors(self.k)}")
        if self.p % self.pe:
            raise ValueError(f"MatMulStreams pe={self.pe} must divide p={self.p}; legal pe: {legal_divisors(self.p)}")
        for attr in ("a_dtype", "b_dtype"):
            dtype = check_dtype("MatMulStreams", attr, getattr(self, attr))
            if dtype.bitwidth() == 1 and dtype.min() < 0 and dtype.max() > 0:
                raise ValueError(f"MatMulStreams {attr} must be an integer datatype (INTn, UINTn), not BIPOLAR")
            object.__setattr__(self, attr, dtype)
        corners = [x * y for x in dtype_range(self.a_dtype) for y in dtype_range(self.b_dtype)]
        object.__setattr__(self, "output_dtype", dtype_for_range(self.k * min(corners), self.k * max(corners)))

    # --- geometry ---
    @property
    def sf(self):
        return self.k // self.simd

    @property
    def nf(self):
        return self.p // self.pe

    @property
    def b_lanes(self):
        return self.simd if self.b_transposed else self.pe

    @property
    def b_words(self):
        """Words of B per head."""
        return self.k * self.p // self.b_lanes

    @property
    def stored_heads(self):
        """Heads whose B is held at once: all when interleaved, else one."""
        return self.heads if self.interleaved else 1

    @property
    def blocks(self):
        """Loads of B a frame (each followed by the rows that read it)."""
        return self.heads // self.stored_heads

    @property
    def input_dtype(self):
        return self.a_dtype

    @property
    def input_dtypes(self):
        return (self.a_dtype, self.b_dtype)

    @property
    def in_widths(self):
        return (self.simd * self.a_dtype.bitwidth(), self.b_lanes * self.b_dtype.bitwidth())

    @property
    def in_width(self):
        return self.in_widths[0]

    @property
    def out_width(self):
        return self.pe * self.output_dtype.bitwidth()

    def _rows(self, count, *word):
        """A stream of ``count`` rows per head: head-major, or token-major when interleaved."""
        return (count, self.heads, *word) if self.interleaved else (self.heads, count, *word)

    @property
    def folded_input_shapes(self):
        b = self._rows(self.p, self.sf, self.simd) if self.b_transposed else self._rows(self.k, self.nf, self.pe)
        return (self._rows(self.m, self.sf, self.simd), b)

    @property
    def folded_output_shape(self):
        return self._rows(self.m, self.nf, self.pe)

    @property
    def exp_cycles(self):
        """Cycles per frame: per head, B's words, then SF * NF steps per row of A."""
        return self.heads * (self.b_words + self.m * self.nf * self.sf)

    @property
    def lead_words(self):
        return self.sf

    @property
    def latency(self):
        return LATENCY

    def b_position(self, h, kk, pp):
        """(word of B within its block of ``stored_heads`` heads, lane) carrying head h's B[kk, pp]."""
        n = self.stored_heads
        if self.b_transposed:
            return (pp * n + h) * self.sf + kk // self.simd, kk % self.simd
        return (kk * n + h) * self.nf + pp // self.pe, pp % self.pe

    # --- the schedule both the component and the timing model follow ---
    def steps(self):
        """Per block (a head, or every head when interleaved), the steps in order: (the input whose word it
        takes, or -1; whether it completes an output word). Loads of B (input 1), then for each row nf-major,
        sf-minor compute steps that take A's word at nf = 0 (input 0)."""
        loads, rows = self.stored_heads * self.b_words, self.stored_heads * self.m
        kind = np.concatenate([np.ones(loads, np.int64), np.tile(np.repeat([0] + [-1] * (self.nf - 1), self.sf), rows)])
        last = np.concatenate([np.zeros(loads, bool), np.tile(np.arange(self.sf) == self.sf - 1, rows * self.nf)])
        return kind, last

    def timing(self, arrivals):
        """Steps one per cycle in the order of :meth:`steps`, each as soon as its input word is offered (a
        step without one: the cycle after the previous); an output word ``latency`` cycles after the step
        completing it (:mod:`layers.timing`)."""
        a, b = as_cycles(arrivals[0]), as_cycles(arrivals[1])
        blocks = frames_of(b, self.stored_heads * self.b_words)
        kind, last = self.steps()
        kind, last = np.tile(kind, blocks), np.tile(last, blocks)
        offered = np.full(kind.size, NO_WORD, dtype=np.int64)
        offered[kind == 0], offered[kind == 1] = a, b
        taken = take_when_ready(offered)       # a frame starts with a load: NO_WORD never leads
        return Timing((taken[kind == 0], taken[kind == 1]), taken[last] + LATENCY)

    def resource_estimate(self):
        """B and A's row in registers, B's read multiplexers (a LUT6 selects from 4), PE x SIMD fabric
        products (about one LUT per bit pair), an adder tree and accumulator per lane, counters, the FIFO."""
        ab, bb, ob = self.a_dtype.bitwidth(), self.b_dtype.bitwidth(), self.output_dtype.bitwidth()
        lanes = self.pe * self.simd
        steps = self.nf * self.sf
        mux = lanes * bb * -(-(self.stored_heads * steps - 1) // 3) + self.simd * ab * -(-(self.sf - 1) // 3)
        products = lanes * ab * bb
        tree = self.pe * (self.simd - 1) * ob + 2 * self.pe * ob
        counters = 4 * (max(1, self.b_words.bit_length()) + max(1, steps.bit_length()) + max(1, self.m.bit_length()))
        fifo = output_fifo_spec(self.out_width).resource_estimate()
        store_ff = self.stored_heads * self.k * self.p * bb + self.k * ab
        pipe_ff = lanes * bb + self.simd * ab + 2 * self.pe * ob + 4
        decode = 2 * self.stored_heads * self.b_words      # a word's write enable (Yosys: 464/616 LUT for the
                                                            # 2-head model's products, 358/450 without it)
        return Resources(lut=mux + products + tree + counters + decode + fifo.lut,
                         ff=store_ff + pipe_ff + counters // 2 + fifo.ff, bram18=0)


class MatMulStreams(wiring.Component):
    """Per head: B's words on ``i1`` into registers, then each row of A on ``i0`` times B onto ``o``.

    Members
    -------
    i0 : In(stream.Signature(spec.in_widths[0]))     A, SIMD elements a word, row-major
    i1 : In(stream.Signature(spec.in_widths[1]))     B, ``spec.b_lanes`` elements a word
    o : Out(stream.Signature(spec.out_width))        Y, PE accumulators a word, row-major

    One step per cycle (``spec.steps``): a load step takes a word of ``i1``; a compute step at nf = 0
    takes a word of ``i0`` (and keeps it for the row's later nf), at nf > 0 replays it. The pipeline (two
    registers, then the output FIFO) moves only when the FIFO's registered ``i.ready`` allows, so the
    readies never depend on ``o.ready``. Latency ``spec.latency``, ``spec.exp_cycles`` a frame.
    """

    def __init__(self, spec):
        self._spec = spec
        super().__init__({"i0": In(stream.Signature(spec.in_widths[0])),
                          "i1": In(stream.Signature(spec.in_widths[1])),
                          "o": Out(stream.Signature(spec.out_width))})

    @property
    def spec(self):
        return self._spec

    def elaborate(self, platform):
        s = self._spec
        ab, bb, ob = s.a_dtype.bitwidth(), s.b_dtype.bitwidth(), s.output_dtype.bitwidth()
        m = Module()
        advance, fifo_in = output_stage(m, self.o, s.out_width)

        loading = Signal(init=1)                        # the phase: taking B's words, else rows of A
        n_heads, loads, rows = s.stored_heads, s.stored_heads * s.b_words, s.stored_heads * s.m
        word = Signal(range(loads))                     # B's word within the block
        step = Signal(range(s.nf * s.sf))               # nf * SF + sf within a row
        sf = Signal(range(s.sf))
        nf = Signal(range(s.nf))
        row = Signal(range(rows))
        head = Signal(range(n_heads))                   # the stored head this row reads (interleaved rows)

        load = loading & self.i1.valid & advance
        first_pass = nf == 0
        compute = ~loading & advance & (~first_pass | self.i0.valid)
        m.d.comb += [self.i1.ready.eq(advance & loading),
                     self.i0.ready.eq(advance & ~loading & first_pass)]

        # B in registers, element (kk, pp) written from its word and lane
        b_lanes = data.View(data.ArrayLayout(bb, s.b_lanes), self.i1.payload)
        stored = [[[Signal(bb, name=f"b_{h}_{kk}_{pp}") for pp in range(s.p)] for kk in range(s.k)]
                  for h in range(n_heads)]
        by_word = {}
        for h in range(n_heads):
            for kk in range(s.k):
                for pp in range(s.p):
                    at, lane = s.b_position(h, kk, pp)
                    by_word.setdefault(at, []).append((stored[h][kk][pp], lane))
        for w, elements in by_word.items():
            with m.If(load & (word == w)):
                m.d.sync += [reg.eq(b_lanes[lane]) for reg, lane in elements]

        # A's row: taken at nf = 0, replayed at nf > 0
        row_words = Array(Signal(s.in_widths[0], name=f"row_{j}") for j in range(s.sf))
        with m.If(compute & first_pass):
            m.d.sync += row_words[sf].eq(self.i0.payload)
        a_word = Mux(first_pass, self.i0.payload, row_words[sf])

        # B's elements of this step, lane (pe, simd): B[sf * SIMD + j, nf * PE + pe]
        at = step if n_heads == 1 else head * (s.nf * s.sf) + step
        b_step = [[Array(stored[h][f_sf * s.simd + j][f_nf * s.pe + pe] for h in range(n_heads) for f_nf in range(s.nf)
                         for f_sf in range(s.sf))[at]
                   for j in range(s.simd)] for pe in range(s.pe)]

        # stage 1: the operands
        s1_valid = register(m, advance, compute, name="s1_valid", reset_less=False)
        s1_first = register(m, advance, sf == 0, name="s1_first")
        s1_last = register(m, advance, sf == s.sf - 1, name="s1_last")
        s1_a = register(m, advance, a_word, name="s1_a")
        s1_b = [[register(m, advance, b_step[pe][j], name=f"s1_b_{pe}_{j}") for j in range(s.simd)]
                for pe in range(s.pe)]
        a_lanes = data.View(data.ArrayLayout(ab, s.simd), s1_a)

        # stage 2: the dot products of this step added to the accumulators
        shape = signed(ob) if s.output_dtype.signed() else unsigned(ob)
        acc = [Signal(shape, name=f"acc_{pe}") for pe in range(s.pe)]
        sums = []
        for pe in range(s.pe):
            dot, _ = adder_tree([product(a_lanes[j], s.a_dtype, s1_b[pe][j], s.b_dtype, xnor=False, res_type="lut")
                                 for j in range(s.simd)])
            total = Signal(shape, name=f"sum_{pe}")
            m.d.comb += total.eq(Mux(s1_first, 0, acc[pe]) + dot)
            with m.If(advance & s1_valid):
                m.d.sync += acc[pe].eq(total)
            sums.append(total)
        out_valid = register(m, advance, s1_valid & s1_last, name="out_valid", reset_less=False)
        out = register(m, advance, Cat(*sums), name="out")
        m.d.comb += [fifo_in.valid.eq(out_valid), fifo_in.payload.eq(out)]

        # the schedule's counters
        with m.If(load):
            m.d.sync += word.eq(wrapping_increment(word, loads))
            with m.If(word == loads - 1):
                m.d.sync += loading.eq(0)
        with m.If(compute):
            m.d.sync += [step.eq(wrapping_increment(step, s.nf * s.sf)), sf.eq(wrapping_increment(sf, s.sf))]
            with m.If(sf == s.sf - 1):
                m.d.sync += nf.eq(wrapping_increment(nf, s.nf))
                with m.If(nf == s.nf - 1):
                    m.d.sync += [row.eq(wrapping_increment(row, rows)), head.eq(wrapping_increment(head, n_heads))]
                    with m.If(row == rows - 1):
                        m.d.sync += loading.eq(1)
        return m


# ---- the golden: this op on numpy from its definition, written apart from the hardware (no folding,
# packing or pipeline, no spec); the OP's golden hook applies it to a spec's streams
def golden_matmul_streams(a, b):
    """The product of two integer tensors exactly: a (..., M, K), b (..., K, P) -> (..., M, P)."""
    return np.matmul(golden.integers(a), golden.integers(b))


def _golden(spec, xs, producer):
    """golden_matmul_streams on A and B read from their stream orders (head-major, or token-major)."""
    batch = xs[0].shape[0]

    def logical(x, rows, cols):
        """(batch, heads, rows, cols) from a stream of rows per head."""
        if spec.interleaved:
            return x.reshape(batch, rows, spec.heads, cols).swapaxes(1, 2)
        return x.reshape(batch, spec.heads, rows, cols)

    a = logical(xs[0], spec.m, spec.k)
    b = logical(xs[1], spec.p, spec.k).swapaxes(-1, -2) if spec.b_transposed else logical(xs[1], spec.k, spec.p)
    y = golden_matmul_streams(a, b)
    y = y.swapaxes(1, 2) if spec.interleaved else y
    return y.reshape(batch, -1, spec.pe)


# --- lowering ------------------------------------------------------------------------------------

def transposed_order(shape):
    """The ``row_order`` of a tensor of logical ``shape`` (..., r, c) that streams as its transpose
    (..., c, r) does: stream position -> logical flat index."""
    return permuted_order(None, (*shape[:-2], shape[-1], shape[-2]), [*range(len(shape) - 2), len(shape) - 1,
                                                                          len(shape) - 2])


def permuted_order(row_order, shape, perm):
    """The ``row_order`` of ``Transpose(perm)`` of a tensor of ``shape`` streamed in ``row_order`` (None: its
    own order): the same words, each now an element of the transposed tensor. None where that is its own
    order."""
    size = prod(shape)
    old_of_new = np.arange(size).reshape(shape).transpose(perm).reshape(-1)    # new flat index -> old one
    new_of_old = np.empty(size, dtype=np.int64)
    new_of_old[old_of_new] = np.arange(size)
    order = new_of_old if row_order is None else new_of_old[np.asarray(row_order)]
    return None if np.array_equal(order, np.arange(size)) else order


def interleaved_order(shape, transposed=False):
    """The ``row_order`` of a tensor (heads..., r, c) streamed token-major: rows (r, head) in turn (torch's
    head split, read in stream order); ``transposed``: rows (c, head) of its transpose (K^T of split heads)."""
    *lead, r, c = shape
    heads = prod(lead)
    index = np.arange(heads * r * c).reshape(heads, r, c)
    return (index.transpose(2, 0, 1) if transposed else index.transpose(1, 0, 2)).reshape(-1)


LAYOUT_READERS = ("Softmax", "Quant", "Div", "Mul", "Reshape", "Transpose")


def _layout_readers(ctx, node):
    """Every reader of the Transpose's output reads a relabelled stream correctly: a MatMul of two streams
    (its orders are checked there), a softmax (rows whole), float ops up to a quantizer (per element, any
    order), another layout op. What leaves the accelerator in another order is refused at its output."""
    out = node.output[0]
    readers = ctx.consumers(out)

    def of_two_streams(r):
        return r.op_type == "MatMul" and all(ctx.initializer(i) is None for i in r.input)

    # (batch..., tokens, features) sequences only: feature maps are the host's, and a 2-D tensor reads as one vector
    sequences = len(ctx.shape(node.input[0])) == 3 and len(ctx.shape(out)) == 3
    return sequences and bool(readers) and not ctx.is_graph_output(out) and all(
        r.op_type in LAYOUT_READERS or of_two_streams(r) for r in readers)


def _lower_transpose(ctx, node):
    """No hardware: the same words, relabelled (``row_order``): a MatMul of two streams reads them as B^T or
    as heads interleaved, a softmax as rows, a quantizer as they come; only unit axes moved: the same order."""
    t = ctx.input(node)
    shape = tuple(ctx.shape(node.output[0]))
    if t.spatial or len(shape) == 4:
        raise ctx.error(f"node {node.name} (Transpose): only sequences (not feature maps) are transposed in "
                        f"stream order")
    perm = list(ctx.attrs(node).get("perm", range(len(t.shape))[::-1]))
    return ctx.tensor(node.output[0], t.dtype, t.scale, shape, row_order=permuted_order(t.row_order, t.shape, perm))


def _is_stream_operand(ctx, t, node, which):
    where = f"node {node.name} (MatMul)"
    if t.values is not None or t.kind != "codes" or np.ndim(t.scale) or t.gain != 1 or t.offset != 0 \
            or t.bias is not None:
        raise ctx.error(f"{where}: its {which} input {t.name} must be the codes of a per-tensor quantizer to "
                        f"multiply two streams")
    if t.dtype.bitwidth() == 1 and t.dtype.min() < 0:
        raise ctx.error(f"{where}: its {which} input {t.name} is BIPOLAR; legal: INTn, UINTn operands")


def _lower_matmul_of_streams(ctx, node):
    """MatMul(A, B) of two streams -> MatMulStreams; B read transposed where a Transpose made it."""
    where = f"node {node.name} (MatMul)"
    a, b = ctx.stream(node.input[0]), ctx.stream(node.input[1])
    _is_stream_operand(ctx, a, node, "first")
    _is_stream_operand(ctx, b, node, "second")
    if len(a.shape) < 2 or len(a.shape) != len(b.shape) or a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-2]:
        raise ctx.error(f"{where}: operands {a.shape} and {b.shape} are not (..., M, K) and (..., K, P) with the same "
                        f"leading dimensions (no broadcasting of streams)")
    *lead, mm, kk = a.shape
    pp = b.shape[-1]
    heads = prod(lead) if lead else 1
    interleaved = heads > 1 and a.row_order is not None and np.array_equal(a.row_order, interleaved_order(a.shape))
    if a.row_order is not None and not interleaved:
        raise ctx.error(f"{where}: its first input {a.name} streams in an order a MatMul of two streams cannot read "
                        f"(legal: rows of A in order, or heads interleaved token by token)")
    b_orders = {(False, False): None, (False, True): transposed_order(b.shape),
                (True, False): interleaved_order(b.shape), (True, True): interleaved_order(b.shape, transposed=True)}
    transposed = next((tr for (il, tr), order in b_orders.items() if il == interleaved and
                       (order is None and b.row_order is None or order is not None and b.row_order is not None
                        and np.array_equal(order, b.row_order))), None)
    if transposed is None:
        raise ctx.error(f"{where}: its second input {b.name} streams neither as rows of B nor as rows of B^T"
                        f"{' with heads interleaved as in its first input' if interleaved else ''}")
    node_hw = ctx.add("MatMulStreams", dict(m=mm, k=kk, p=pp, heads=heads, a_dtype=a.dtype, b_dtype=b.dtype,
                                            b_transposed=transposed, interleaved=interleaved),
                      [node], inputs=(ctx.wire(a), ctx.wire(b)))
    scale = float(a.scale) * float(b.scale)
    exact = all(float(s) > 0 and np.log2(float(s)).is_integer() for s in (a.scale, b.scale))
    out_shape = (*lead, mm, pp)
    return ctx.tensor(node.output[0], node_hw.spec().output_dtype, scale, out_shape, rounding=not exact,
                      row_order=interleaved_order(out_shape) if interleaved else None)


def _small_instance(s):
    """Two rows, two words of SIMD along k and of PE along p, at most two heads (interleaved stays so)."""
    return dict(m=min(s.m, 2), k=min(s.k, 2 * s.simd), p=min(s.p, 2 * s.pe), heads=min(s.heads, 2))


def _examples():
    """Two heads of A (3x4) times B^T, B transposed."""
    return [(dict(m=3, k=4, p=6, heads=2, a_dtype="INT4", b_dtype="UINT3", b_transposed=True), {"SIMD": 2, "PE": 3})]


OP = Op("MatMulStreams", MatMulStreamsSpec, MatMulStreams, folding={"SIMD": "simd", "PE": "pe"},
        parallelism={"SIMD": divisors_of("k"), "PE": divisors_of("p")},
        golden=_golden, small_instance=_small_instance,
        lowers=(Lowering(("MatMul",), _lower_matmul_of_streams, streams=2, legal="MatMul of two streams"),
                Lowering(("Transpose",), _lower_transpose, when=_layout_readers,
                         legal="Transpose (of a sequence read by MatMul or Softmax or a quantizer)")),
                         examples=_examples)
