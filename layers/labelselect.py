"""LabelSelect: the indices of the K largest of Labels values per vector, largest first (FINN ``LabelSelect``).

A sorted list of K (value, index) entries is updated by every input word, PE insertions per cycle; at
the last word of a vector the K indices move to an output register and leave one per cycle while the
next vector streams in.
"""

from dataclasses import dataclass, field
from math import prod

import numpy as np
from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data
from qonnx.core.datatype import DataType

from layers.datapath import StreamLayer, check_dtype, dtype_for_range, element_value, legal_divisors, output_stage, wrapping_increment
from layers.op import Lowering, Op, Resources, StreamContract, divisors_of, grid_examples
from layers import small
import golden
from layers.timing import Timing, as_cycles, frames_of, take_in_turn, take_when_ready


__all__ = ["LabelSelectSpec", "LabelSelect"]

OWNER = "LabelSelect"


@dataclass(frozen=True)
class LabelSelectSpec(StreamContract):
    """Contract of a top-K label selector (FINN attributes Labels, PE, K, inputDataType, outputDataType,
    numInputVectors; outputDataType is derived).

    Ranking follows FINN's insertion list exactly: equal values rank by lower index first (as ONNX
    TopK), and only values strictly above ``input_dtype.min`` are ranked, so if fewer than K are, the
    remaining outputs are index 0.
    """
    labels: int                         # Labels: values per vector
    pe: int                             # PE: values per input word, divides Labels
    k: int                              # K: indices out per vector, 1..Labels
    input_dtype: object                 # inputDataType
    num_input_vectors: tuple = (1,)     # numInputVectors: vectors per frame = prod
    output_dtype: DataType = field(init=False)  # outputDataType: UINT of ceil8(bits of Labels - 1)

    def __post_init__(self):
        for attr in ("labels", "pe", "k"):
            v = getattr(self, attr)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{OWNER} {attr} must be a positive integer, not {v!r}")
        if self.labels % self.pe:
            raise ValueError(f"{OWNER} pe={self.pe} must divide labels={self.labels}; "
                             f"legal pe: {legal_divisors(self.labels)}")
        if self.k > self.labels:
            raise ValueError(f"{OWNER} k={self.k} must not exceed labels={self.labels}")
        object.__setattr__(self, "input_dtype", check_dtype(OWNER, "input_dtype", self.input_dtype))
        vecs = (self.num_input_vectors,) if isinstance(self.num_input_vectors, int) else tuple(self.num_input_vectors)
        if not vecs or any(not isinstance(v, int) or v < 1 for v in vecs):
            raise ValueError(f"{OWNER} num_input_vectors must be positive integers, not {self.num_input_vectors!r}")
        object.__setattr__(self, "num_input_vectors", vecs)
        bits = max(1, (self.labels - 1).bit_length())
        object.__setattr__(self, "output_dtype", DataType[f"UINT{-(-bits // 8) * 8}"])

    @property
    def nf(self):
        """Input words per vector."""
        return self.labels // self.pe

    @property
    def vectors(self):
        return prod(self.num_input_vectors)

    @property
    def in_width(self):
        return self.pe * self.input_dtype.bitwidth()

    @property
    def out_width(self):
        return self.output_dtype.bitwidth()

    @property
    def normal_input_shape(self):
        return (*self.num_input_vectors, self.labels)

    @property
    def normal_output_shape(self):
        return (*self.num_input_vectors, self.k)

    @property
    def folded_input_shape(self):
        return (*self.num_input_vectors, self.nf, self.pe)

    @property
    def folded_output_shape(self):
        return (*self.num_input_vectors, self.k, 1)

    @property
    def lead_words(self):
        """Input words taken before the first output word can leave (FIFO bounds on reconvergent paths)."""
        return self.nf

    @property
    def in_words(self):
        return self.vectors * self.nf

    @property
    def out_words(self):
        return self.vectors * self.k

    @property
    def exp_cycles(self):
        """Cycles per frame in steady state: a vector takes Labels/PE cycles, or K when its K output words
        (which overlap the next vector's input) take longer."""
        return self.vectors * max(self.nf, self.k)

    @property
    def min_code(self):
        """The list's initial value, as the hardware compares it (BIPOLAR: bit 0 = -1)."""
        return 0 if self.input_dtype.name == "BIPOLAR" else int(self.input_dtype.min())

    latency = 3                 # cycles from a vector's last word to its first index being offered

    def timing(self, arrivals):
        """Takes a word whenever one is offered, except a vector's last word: it loads the output
        register, so it waits until the previous vector's K indices are all out but the one leaving
        now, K cycles after that vector's last word. Index j of a vector is offered ``latency + j``
        cycles after its last word (:mod:`layers.timing`).

        The last words L_v then follow ``L_v = max(A_v, L_{v-1} + max(K, NF))``, where A_v is when the
        vector's last word could be taken from its own arrivals alone (each word one cycle after the one
        before): :func:`take_in_turn` over vectors. The other words fill in with L_v as the floor of
        the last words."""
        nf, k = self.nf, self.k
        vectors = frames_of(arrivals[0], self.in_words) * self.vectors
        a = as_cycles(arrivals[0])
        # A_v = max over the vector's words f of arrival[f] + (NF-1-f), as take_when_ready's chain
        own = (a.reshape(vectors, nf) + np.arange(nf - 1, -1, -1, dtype=np.int64)).max(axis=1)
        lasts = take_in_turn(own, np.full(vectors, max(k, nf), dtype=np.int64))
        ready = np.zeros((vectors, nf), dtype=np.int64)
        ready[:, -1] = lasts
        reads = take_when_ready(a, ready.reshape(-1))
        writes = lasts[:, None] + self.latency + np.arange(k, dtype=np.int64)
        return Timing((reads,), writes.reshape(-1))

    def resource_estimate(self):
        """Per insertion (PE per cycle) and list entry: two compares and the value and index selects;
        FFs of the list, the output register, the 2-word output FIFO and the counters."""
        vb, ob = self.input_dtype.bitwidth(), self.out_width
        lut = self.pe * self.k * (2 * vb + vb + ob) // 2 + self.k * ob + 16
        ff = self.k * (vb + ob) + self.k * ob + 2 * ob + 2 * ob.bit_length() + 16
        return Resources(lut=lut, ff=ff, bram18=0)


class LabelSelect(StreamLayer):
    """Top-K indices of each vector of ``labels`` values.

    Members
    -------
    i : In(stream.Signature(spec.in_width))
    o : Out(stream.Signature(spec.out_width))

    Input: each vector as ``spec.nf`` words; lane p of word f is label f * PE + p. Output: K words per
    vector, each one index (``spec.output_dtype``), the largest value's first. The list keeps K
    (value, index) entries in ascending order, starts each vector as K copies of (input_dtype.min, 0)
    and takes the PE values of a word in lane order, each by FINN's insertion with a strict ``>``
    (so ties keep the earlier label ahead and values equal to the minimum never enter).

    The input takes a word every cycle except the last word of a vector while the previous vector
    still has more than one index to send; the K indices then leave one per cycle from the cycle after
    that word, so a frame takes ``spec.exp_cycles`` cycles. ``i.ready`` depends on registers only
    (a counter, the output count and the output FIFO's registered ready). The PE insertions of a word
    form one combinational chain of PE compare-and-select levels.
    """

    def elaborate(self, platform):
        spec = self._spec
        k, pe, ob = spec.k, spec.pe, spec.out_width
        vshape = element_value(Signal(spec.input_dtype.bitwidth()), spec.input_dtype).shape()
        m = Module()
        advance, fifo_in = output_stage(m, self.o, ob)

        word = Signal(range(spec.nf))           # word of the vector
        base = Signal(ob)                       # label of lane 0 of this word
        vals = [Signal(vshape, name=f"val{t}") for t in range(k)]      # ascending: vals[k-1] is the largest
        idxs = [Signal(ob, name=f"idx{t}") for t in range(k)]
        out_idx = [Signal(ob, name=f"out{t}") for t in range(k)]       # out_idx[0] leaves next
        left = Signal(range(k + 1))             # indices of the finished vector still to send

        last_word = word == spec.nf - 1
        # The last word loads the output register, which must be empty or sending its last index now.
        m.d.comb += self.i.ready.eq(~last_word | (left == 0) | ((left == 1) & advance))
        take = self.i.valid & self.i.ready

        # Output register -> FIFO, one index per cycle.
        m.d.comb += [fifo_in.valid.eq(left != 0), fifo_in.payload.eq(out_idx[0])]
        with m.If(advance & (left != 0)):
            m.d.sync += [left.eq(left - 1)] + [out_idx[t].eq(out_idx[t + 1]) for t in range(k - 1)]

        # The list after this word's PE insertions (a vector starts from K x (min, 0)).
        first = word == 0
        cur_v = [Mux(first, Const(spec.min_code, vshape), v) for v in vals]
        cur_i = [Mux(first, 0, i) for i in idxs]
        lanes = data.View(data.ArrayLayout(spec.input_dtype.bitwidth(), pe), self.i.payload)
        for p in range(pe):
            new_v, new_i = _insert(cur_v, cur_i, element_value(lanes[p], spec.input_dtype), (base + p)[:ob])
            # Named signals keep the chain linear (nested expressions would repeat every earlier level).
            cur_v = [Signal(vshape, name=f"ins{p}_val{t}") for t in range(k)]
            cur_i = [Signal(ob, name=f"ins{p}_idx{t}") for t in range(k)]
            m.d.comb += [c.eq(n) for c, n in zip(cur_v + cur_i, new_v + new_i)]

        with m.If(take):
            m.d.sync += [word.eq(wrapping_increment(word, spec.nf)), base.eq(Mux(last_word, 0, base + pe))]
            m.d.sync += [v.eq(c) for v, c in zip(vals, cur_v)] + [i.eq(c) for i, c in zip(idxs, cur_i)]
            with m.If(last_word):
                m.d.sync += [left.eq(k)] + [out_idx[t].eq(cur_i[k - 1 - t]) for t in range(k)]
        return m


def _insert(vals, idxs, value, index):
    """FINN's insertion of (value, index) into an ascending list, all entries compared at once:
    entry t takes its upper neighbour when the value also beats that one, else the value itself."""
    k = len(vals)
    new_v, new_i = [], []
    for t in range(k):
        beats = value > vals[t]
        climbs = (value > vals[t + 1]) if t < k - 1 else Const(0, 1)
        new_v.append(Mux(beats, Mux(climbs, vals[t + 1] if t < k - 1 else value, value), vals[t]))
        new_i.append(Mux(beats, Mux(climbs, idxs[t + 1] if t < k - 1 else index, index), idxs[t]))
    return new_v, new_i



# ---- the golden: this op on numpy from its definition, written apart from the hardware (no folding,
# packing or pipeline, no spec); the OP's golden hook applies it to a spec's streams
def golden_label_select(x, k, dtype_min):
    """Indices of the ``k`` largest values of the last axis, largest first: (..., L) -> (..., k).

    Equal values rank by lower index first (ONNX TopK). Only values strictly above ``dtype_min`` are
    ranked; if fewer than ``k`` are, the remaining outputs are index 0 (FINN's LabelSelect starts its
    list as k entries of (dtype_min, index 0) and inserts with a strict >).
    """
    x = golden.integers(x)
    flat = x.reshape(-1, x.shape[-1])
    out = np.zeros((flat.shape[0], k), dtype=np.int64)
    for r, row in enumerate(flat):
        ranked = [i for i in np.argsort(-row, kind="stable") if row[i] > dtype_min][:k]
        out[r, :len(ranked)] = ranked
    return out.reshape(*x.shape[:-1], k)


def _golden(spec, xs, producer):
    return golden_label_select(xs[0], spec.k, spec.input_dtype.min())


MAX_TOPK_CHECK = 1 << 20            # accumulator values checked one by one to absorb a chain into TopK


def _lower(ctx, node, acc):
    """A final TopK (only its indices used) after an MVAU without activation whose float ops keep the order
    of the accumulators: MVAU + LabelSelect on the accumulators. None: TopK stays on the host."""
    if acc.op_type != "MVAU" or acc.bias is not None:
        return None
    attrs = ctx.attrs(node)
    k = ctx.initializer(node.input[1])
    values_used = ctx.consumers(node.output[0]) or ctx.is_graph_output(node.output[0])
    per_tensor = np.ptp(acc.wscale) == 0
    if (attrs.get("largest", 1) != 1 or attrs.get("axis", -1) not in (-1, 1) or k is None or values_used
            or not per_tensor or acc.hi - acc.lo > MAX_TOPK_CHECK or len(node.output) < 2):
        return None
    if acc.chain:
        if not all(ctx.per_tensor(n) for n in acc.chain):
            return None
        accs = np.arange(acc.lo, acc.hi + 1)
        values = ctx.evaluate_chain(acc.chain, acc.node.output[0], acc.chain[-1].output[0],
                                    float(acc.t.scale) * acc.wscale[0] * accs[:, None].astype(np.float64))[:, 0]
        if not np.all(np.diff(values) > 0):
            return None          # not strictly increasing: TopK stays on the host
    odt = dtype_for_range(acc.lo - 1, acc.hi)       # dtype.min never reached: LabelSelect skips it
    ctx.accumulator_output(acc, odt)
    select = ctx.add("LabelSelect", dict(labels=acc.spec.mh, k=int(np.asarray(k).reshape(-1)[0]), input_dtype=odt),
                     [node])
    return ctx.tensor(node.output[1], select.spec().output_dtype, 1.0, kind="indices")


def _small_instance(s):
    """Two words of PE labels, at most two vectors."""
    labels = small.fold(s.labels, s.pe)
    return dict(labels=labels, k=min(s.k, labels), num_input_vectors=small.vectors(s.num_input_vectors))


def _examples():
    """The top 2 of 8 labels, then FINN's grid (fold -1: PE = 1, else PE = Labels / fold)."""
    grid = dict(idt=["UINT8", "UINT16", "INT16"], labels=[10, 100], k=[1, 5], fold=[-1, 2, 10])
    return [(dict(labels=8, k=2, input_dtype="INT4"), {"PE": 2}),
            *grid_examples(grid, lambda c: (dict(labels=c["labels"], k=c["k"], input_dtype=c["idt"],
                                                 num_input_vectors=(2,)),
                                            {"PE": 1 if c["fold"] == -1 else c["labels"] // c["fold"]}), stride=13)]


OP = Op("LabelSelect", LabelSelectSpec, LabelSelect, folding={"PE": "pe"},
        parallelism={"PE": divisors_of("labels")},
        finn_names={"labels": "Labels", "k": "K", "input_dtype": "inputDataType"},
        old_names=("LabelSelect_Batch",), golden=_golden, small_instance=_small_instance, host_side=True,
        lowers=(Lowering(("TopK",), _lower, at="tail"),), examples=_examples)
