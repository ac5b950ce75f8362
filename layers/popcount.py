"""Popcount as registered levels of carry chains with counters in their LUTs: the lane sum of binary
(XNOR) MVAU lanes.

An adder tree of ``+`` over bits maps to carry chains whose LUTs each add one bit of two numbers:
Yosys 0.70 spends about 2 LUTs per XNOR term on it, 1.5 per plain bit (benchmarks/popcount.py,
benchmarks/xnor_rom.py). A LUT6 counting 6 bits of one column into 3 (one LUT per output bit) removes
one bit per LUT: the 2026-11-25 heap, about n LUTs for n bits.

A carry chain does better when its LUTs do two things at once. Position p of a chain adds one
registered bit ``a_p`` (the CARRY4's DI input, no LUT) and one bit ``b_p`` (the LUT: S = a_p ^ b_p, so
``b_p`` may be any function of five more signals), plus the carry. With ``b`` the output bits of a
5-bit counter (3 positions) or a full adder of 3 bits (2 positions), three LUTs take in 5 + 3 bits and
give 3 (plus the chain's carry-in, CYINIT, one more bit at its first position): about 1.5-1.7 bits
removed per LUT where the counters' 1.0. A level builds chains column by column from the least
significant (each continues while the next column has bits) and registers every output, the bits it
leaves too; levels repeat until one bit per column is left: the sum. abc keeps each chain's
``b_p`` inside its S LUT (one function of six inputs) and DI on the registered bit, as long as every
chain is a ``+`` of its own between registers (alumacc would otherwise merge the sums into one carry-save
tree): ``benchmarks/popcount.py`` measures it, Yosys against :func:`heap_cost`.

The first level counts XNOR terms three pairs (x, w) to a LUT6 (two outputs) when the agreement bits are
not registered yet (``term_inputs=2``): a chain's DI must be a plain bit, and no XNOR is one.

The chain levels take any heap (:func:`heap_sum`: columns of bits worth 2^j), so a layer of constant
BIPOLAR weights on unsigned multi-bit inputs (CNV's first layer at one weight word) sums, per lane, the
bits of the inputs its weights select, plain bits with no AND (:func:`selected_elements`), where the
adder tree added whole words. Each level is one register, not a register a bit (conversion time).
"""

from functools import lru_cache

import numpy as np

from amaranth.hdl import Cat, Const, Signal

from layers.datapath import register
from layers.op import ArrayMemo

__all__ = ["popcount_heap", "heap_cost", "heap_sum", "columns_cost", "selected_elements", "selection_cost",
           "selects_constants", "heap_stages", "counts_classes", "term_classes", "class_cost", "class_starts",
           "class_heaps"]

LUT_INPUTS = 6
MAX_LEVELS = 64


def _first_level(n_terms, term_inputs):
    """(groups of term indices counted by one LUT6 function per output bit, out heights) for terms of
    ``term_inputs`` signals each: all terms counted, LUT_INPUTS // term_inputs to a group."""
    size = LUT_INPUTS // term_inputs
    groups = [list(range(k, min(k + size, n_terms))) for k in range(0, n_terms, size)]
    heights = [0] * 3
    for g in groups:
        for j in range(len(g).bit_length()):
            heights[j] += 1
    while heights and not heights[-1]:
        heights.pop()
    return groups, heights


class _Chain:
    """One carry chain of a level: from column ``start``; ``ci`` the carry-in bit (a reference or None);
    ``positions`` [(a, b)]: a a reference or None, b None, ("bit", ref) or ("count", refs, j): output
    bit j of the count of ``refs``. References are (column, index) into the level's input columns."""

    def __init__(self, start, ci):
        self.start, self.ci, self.positions = start, ci, []

    def max_value(self):
        total = (1 << self.start) if self.ci is not None else 0
        counted = set()
        for i, (a, b) in enumerate(self.positions):
            p = self.start + i
            total += (1 << p) if a is not None else 0
            if b is not None and b[0] == "bit":
                total += 1 << p
            elif b is not None and tuple(b[1]) not in counted:
                counted.add(tuple(b[1]))
                total += len(b[1]) << (p - b[2])
        return total

    def width(self):
        return (self.max_value() >> self.start).bit_length()

    def luts(self):
        """A position needs a LUT where its S input is a function: a counter bit, or a ^ b."""
        return sum(1 for a, b in self.positions if b is not None and (b[0] == "count" or a is not None))


def _chain_level(heights):
    """One level of chains over columns of registered bits: (chains, bits passed on, heights after)."""
    left = [list(range(h)) for h in heights]

    def height(c):
        return len(left[c]) if c < len(left) else 0

    def take(c, n=1):
        refs = [(c, k) for k in left[c][:n]]
        del left[c][:n]
        return refs

    chains = []
    for c in range(len(heights)):
        while height(c) >= 2:
            chain = _Chain(c, take(c)[0] if height(c) >= 3 else None)
            p = c
            while height(p) >= 1:
                h = height(p)
                a = take(p)[0]
                if h >= 6:          # a 5-bit counter: positions p .. p + 2
                    refs, span = take(p, 5), 3
                elif h >= 4:        # a full adder: positions p, p + 1
                    refs, span = take(p, 3), 2
                elif h >= 2:
                    refs, span = take(p, 1), 1
                else:
                    refs, span = [], 1
                for j in range(span):
                    b = None if not refs else ("bit", refs[0]) if len(refs) == 1 else ("count", refs, j)
                    chain.positions.append((a if j == 0 else (take(p + j)[0] if height(p + j) else None), b))
                p += span
            chains.append(chain)
    passed = [(c, k) for c, col in enumerate(left) for k in col]
    out = [0] * (len(heights) + 8)
    for c, _ in passed:
        out[c] += 1
    for chain in chains:
        for i in range(chain.width()):
            out[chain.start + i] += 1
    while out and not out[-1]:
        out.pop()
    return chains, passed, out


@lru_cache(maxsize=1024)
def _column_levels(heights):
    """[(chains, passed, heights before)] per chain level over columns of ``heights`` bits."""
    heights, levels = list(heights), []
    while heights and max(heights) > 1:
        chains, passed, after = _chain_level(heights)
        levels.append((chains, passed, heights))
        heights = after
        assert len(levels) < MAX_LEVELS, "the popcount's chain levels do not converge"
    return levels


@lru_cache(maxsize=256)
def _plan(n_terms, term_inputs):
    """(first level's groups or None, [(chains, passed, heights before)] per chain level)."""
    first, heights = None, [n_terms]
    if term_inputs > 1 and n_terms:
        first, heights = _first_level(n_terms, term_inputs)
    return first, _column_levels(tuple(heights))


def _levels_cost(levels):
    luts = sum(chain.luts() for chains, _, _ in levels for chain in chains)
    ffs = sum(len(passed) + sum(chain.width() for chain in chains) for chains, passed, _ in levels)
    return luts, ffs, len(levels)


def heap_cost(n_terms, term_inputs=1):
    """(LUTs, flip-flops, register stages) of :func:`popcount_heap` over ``n_terms`` terms, as planned
    (one LUT per counter output bit of the first level and per chain position whose S is a function)."""
    first, levels = _plan(n_terms, term_inputs)
    luts, ffs, stages = _levels_cost(levels)
    if first is not None:
        bits = sum(len(g).bit_length() for g in first)
        luts, ffs, stages = luts + bits, ffs + bits, stages + 1
    return luts, ffs, stages


def columns_cost(heights):
    """(LUTs, flip-flops, register stages) of :func:`heap_sum` over columns of ``heights`` plain bits."""
    return _levels_cost(_column_levels(tuple(heights)))


def _counter(bits):
    """The number of ones among up to 6 bits, least significant bit first, as a lookup (pure logic:
    one LUT6 per output bit).

    Output bit j is its truth table, a 2^n-bit constant, read at the bits (``bit_select``: one
    ``$shiftx`` cell). The same function as a 2^n-way ``Array`` of the counts, which Amaranth builds,
    converts and writes as 2^n cases per output bit: 22 MB of Verilog and ~5 minutes of elaboration for
    CNV's PE 16 x SIMD 576 layer, where this is a line per bit. A list, not a ``Cat``: Amaranth would
    emit a ``Cat``'s every part again for each bit sliced from it."""
    index = Cat(*bits)
    return [Const(table, 1 << len(bits)).bit_select(index, 1) for table in _count_tables(len(bits))]


@lru_cache(maxsize=None)
def _count_tables(n):
    """Per output bit j of the count of n bits, its truth table: bit i set when bit j of popcount(i) is."""
    return tuple(sum(1 << i for i in range(1 << n) if bin(i).count("1") >> j & 1) for j in range(n.bit_length()))


def _chain_sum(chain, columns):
    """The chain's a + b (+ carry-in) over the level's input ``columns``, as one ``+``."""
    ref = lambda r: columns[r[0]][r[1]]
    counts, a_bits, b_bits = {}, [], []
    for a, b in chain.positions:
        a_bits.append(ref(a) if a is not None else Const(0, 1))
        if b is None:
            b_bits.append(Const(0, 1))
        elif b[0] == "bit":
            b_bits.append(ref(b[1]))
        else:
            key = tuple(b[1])
            if key not in counts:
                counts[key] = _counter([ref(r) for r in b[1]])
            b_bits.append(counts[key][b[2]] if b[2] < len(counts[key]) else Const(0, 1))
    total = Cat(*a_bits) + Cat(*b_bits)
    return total + ref(chain.ci) if chain.ci is not None else total


def popcount_heap(m, advance, terms, *, term_inputs=1, name="pop"):
    """The number of ones among ``terms`` (1-bit values; with ``term_inputs=2`` each an XNOR of two
    signals, counted three to a LUT6 at the first level), every level registered on ``advance``;
    returns (sum, register stages), the stages those of :func:`heap_cost`.

    The first level's counters read the XNOR terms, not the two signals behind each: Yosys maps both the
    same (abc: one shared XNOR and two LUT5s a group of three, its area model making LUT6s dear), and 64-bit
    truth tables over the pairs made CNV's largest layers take minutes to convert."""
    terms = list(terms)
    first, _ = _plan(len(terms), term_inputs)
    if first is None:
        return heap_sum(m, advance, [terms], name=name)
    outputs = [(j, bit) for g in first for j, bit in enumerate(_counter([terms[i] for i in g]))]
    counted = register(m, advance, Cat(*(bit for _, bit in outputs)), name=f"{name}_f")
    columns = [[], [], []]
    for k, (j, _) in enumerate(outputs):
        columns[j].append(counted[k])
    total, stages = heap_sum(m, advance, [c for c in columns], name=name)
    return total, stages + 1


def heap_sum(m, advance, columns, *, name="heap"):
    """The sum of ``columns[j]`` (lists of 1-bit values, each worth 2^j) by registered levels of carry
    chains (:func:`_chain_level`); returns (sum, register stages), the stages those of
    :func:`columns_cost`.

    Each level is one register of all its outputs (the chains' sums and the bits it passes on), not a
    register a bit: CNV's PE 16 x SIMD 576 layer made 12,864 one-bit registers, a fifth of its conversion."""
    columns = [list(col) for col in columns]
    while columns and not columns[-1]:
        columns.pop()
    levels = _column_levels(tuple(len(col) for col in columns))
    for level, (chains, passed, heights) in enumerate(levels):
        values, places = [], []         # what the level registers, and the column each bit lands in
        for c, k in passed:
            values.append(columns[c][k])
            places.append(c)
        for chain in chains:
            values.append(_chain_sum(chain, columns)[:chain.width()])
            places.extend(chain.start + i for i in range(chain.width()))
        reg = register(m, advance, Cat(*values), name=f"{name}_l{level}")
        out = [[] for _ in range(len(heights) + 8)]
        for k, c in enumerate(places):
            out[c].append(reg[k])
        while out and not out[-1]:
            out.pop()
        columns = out
    if not columns:
        return Const(0, 1), len(levels)
    return Cat(*[col[0] if col else Const(0, 1) for col in columns]), len(levels)


def selected_elements(weight_rows):
    """Per lane of constant BIPOLAR weights (a row of +-1), the elements its heap sums and whether they
    are its +1s: sum_s w_s x_s = 2 S - X over its +1s, or X - 2 S over its -1s (X = sum_s x_s, one sum
    all lanes share), whichever set is smaller (at most half the terms)."""
    lanes = []
    for row in weight_rows:
        plus = [s for s, w in enumerate(row) if w > 0]
        minus = [s for s, w in enumerate(row) if w <= 0]
        lanes.append((tuple(plus), True) if len(plus) <= len(minus) else (tuple(minus), False))
    return lanes


def selection_cost(weight_rows, bits):
    """(heap LUTs, flip-flops, register stages) of the lanes of constant BIPOLAR weights over ``bits``-bit
    unsigned elements (:func:`selected_elements`): each lane's heap of its selected elements' bits, the
    heap of all of them that the lanes share (X), all delayed to the deepest; the subtraction after each
    lane is not counted here."""
    rows = [list(r) for r in weight_rows]
    shared = columns_cost([len(rows[0])] * bits) if rows else (0, 0, 0)
    lanes = [columns_cost([len(sel)] * bits) if sel else (0, 0, 0) for sel, _ in selected_elements(rows)]
    stages = max([shared[2]] + [c[2] for c in lanes])
    width = (len(rows[0]) << bits).bit_length() if rows else 0
    delays = sum((stages - c[2]) * width for c in lanes + [shared])      # sums padded to the deepest
    return (shared[0] + sum(c[0] for c in lanes), shared[1] + sum(c[1] for c in lanes) + delays, stages)


def selects_constants(spec):
    """A dot-product spec of constant BIPOLAR weights whose lanes sum the unsigned inputs their weights
    select (``offset_weights``; signed ones where ``offset_inputs`` makes them unsigned): with
    ``popcount="heap"``, each lane a heap of those inputs' bits."""
    return (spec.selects_bipolar_weights and spec.offset_weights and spec.constant_weights
            and not spec.lane_input_dtype.signed())


def heap_stages(spec):
    """Register stages of a ``uses_heap`` spec's lane sums."""
    if counts_classes(spec):
        return class_cost(spec)[3]
    if spec.xnor:
        return heap_cost(spec.simd, spec.heap_term_inputs)[2]
    return selection_cost(spec.weight_matrix(), spec.lane_input_dtype.bitwidth())[2]


# ---- XNOR lanes of a few weight words, counted by classes of terms ----------------------------------------
# Behind a LUT ROM of up to CLASS_WORDS words, term s of lane p is x_s XOR c_s with c_s = ~w_s a function of
# the word read: one of 2^WMEM patterns. The terms of one pattern k are the input bits x_s inverted or not
# all together, so the lane counts each class's plain input bits (X_k, carry chains that take plain bits
# at their DI), inverts X_k where the word read says so (n_k - X_k = ~X_k + n_k + 1 - 2^w_k: the bits of
# X_k XOR c_k, and a constant per word), and adds those few values: the XOR is paid a bit of X_k, not a
# term, and the constants of a channel's words start its accumulator (:func:`class_starts`).
CLASS_WORDS = 4
_CLASSES = ArrayMemo()


# Yosys LUTs against the plan: chains of plain bits 1.12, counters of three XOR'd bits 1.5 (abc: one shared
# XOR and two LUT5s, 3 where 2 are planned), the XNOR heap behind a folded ROM 1.25 (layers.dotproduct_cost)
CLASS_CHAIN_FACTOR, CLASS_COUNTER_FACTOR, FOLDED_XNOR_FACTOR = 1.12, 1.5, 1.25


def counts_classes(spec):
    """A ``uses_heap`` XNOR spec whose weights are a LUT ROM of at most CLASS_WORDS words (term_inputs 2),
    where classes take fewer LUTs than XNOR terms (wide lanes: CNV's SIMD 576 lanes of 4 words, 16 classes
    of ~36 terms; a SIMD 16 lane's classes of one or two terms do not pay)."""
    if not (spec.uses_heap and spec.xnor and spec.heap_term_inputs == 2 and spec.wmem <= CLASS_WORDS
            and spec.weight_ram_style == "distributed" and spec.mem_mode == "internal_embedded"
            and spec.weights is not None and not spec.runtime_writeable_weights and not spec.weight_lut_bits):
        return False
    chains, counters, _, _ = class_cost(spec)
    return (CLASS_CHAIN_FACTOR * chains + CLASS_COUNTER_FACTOR * counters
            < FOLDED_XNOR_FACTOR * spec.pe * heap_cost(spec.simd, 2)[0])


def term_classes(spec):
    """Per lane, ((pattern, elements), ...): pattern bit a is c = ~w of the lane's element at word a (word
    ``nf*SF + sf`` holds channel nf*PE + p's row sf*SIMD + s at element p*SIMD + s)."""
    def compute():
        bits = (np.asarray(spec.weight_matrix()) > 0).reshape(spec.nf, spec.pe, spec.sf, spec.simd)
        c = 1 - bits.transpose(1, 3, 0, 2).reshape(spec.pe, spec.simd, spec.wmem).astype(np.int64)
        patterns = (c << np.arange(spec.wmem)).sum(axis=2)
        return tuple(tuple((int(k), tuple(int(e) for e in np.flatnonzero(row == k))) for k in np.unique(row))
                     for row in patterns)
    return _CLASSES.get(spec.weights, ("classes", spec.pe, spec.simd, spec.wmem), compute)


def _class_columns(classes):
    """Heights of the second stage's columns: bit j of each class sum X_k (j < its width)."""
    width = max(len(e).bit_length() for _, e in classes)
    return [sum(1 for _, e in classes if len(e).bit_length() > j) for j in range(width)]


def _groups_of_three(heights):
    """The second stage's first level: per column, groups of up to three XOR'd bits counted into bits j
    and j + 1; returns (groups [(column, size)], heights after)."""
    groups, after = [], [0] * (len(heights) + 2)
    for j, h in enumerate(heights):
        for k in range(0, h, 3):
            size = min(3, h - k)
            groups.append((j, size))
            for i in range(size.bit_length()):
                after[j + i] += 1
    while after and not after[-1]:
        after.pop()
    return groups, after


def class_cost(spec):
    """(chain LUTs, first-level counter LUTs, flip-flops, register stages) of :func:`class_heaps`, as
    planned, all lanes."""
    return _CLASSES.get(spec.weights, ("cost", spec.pe, spec.simd, spec.wmem), lambda: _class_cost(spec))


def _class_cost(spec):
    lanes = term_classes(spec)
    depth_a = max(columns_cost([len(e)])[2] for classes in lanes for _, e in classes)
    chains = firsts = ffs = depth_b = 0
    for classes in lanes:
        for _, e in classes:
            luts, f, stages = columns_cost([len(e)])
            chains, ffs = chains + luts, ffs + f + (depth_a - stages) * len(e).bit_length()
        groups, after = _groups_of_three(_class_columns(classes))
        firsts += sum(size.bit_length() for _, size in groups)
        luts, f, stages = columns_cost(after)
        chains, ffs, depth_b = chains + luts, ffs + f + sum(after), max(depth_b, stages + 1)
    return chains, firsts, ffs, depth_a + depth_b


def class_starts(spec):
    """Per output channel, the constants its words' inverted classes add (sum over the fold's words of
    sum_k c_k (n_k + 1 - 2^w_k)): where :func:`class_heaps`' lanes start the accumulator."""
    lanes = term_classes(spec)
    starts = []
    for nf in range(spec.nf):
        for p, classes in enumerate(lanes):
            starts.append(sum((k >> (nf * spec.sf + sf) & 1) * (len(e) + 1 - (1 << len(e).bit_length()))
                              for sf in range(spec.sf) for k, e in classes))
    return starts


def class_heaps(m, advance, x_bits, w_bit, spec, width):
    """The lanes of :func:`counts_classes`: ``x_bits[p][s]`` lane p's input bits, ``w_bit(p * SIMD + s)``
    the current word's weight bit of lane p's element s (a class's c is ~w of one term of its pattern);
    returns (lane sums modulo 2^width without the constants of :func:`class_starts`, register stages)."""
    lanes = term_classes(spec)
    where = {}
    for p, classes in enumerate(lanes):
        for k, elems in classes:
            where.setdefault(k, p * spec.simd + elems[0])
    full = (1 << spec.wmem) - 1
    c_of = lambda k: Const(0, 1) if k == 0 else Const(1, 1) if k == full else ~w_bit(where[k])
    depth = class_cost(spec)[3]
    depth_a = max(columns_cost([len(e)])[2] for classes in lanes for _, e in classes)
    patterns = sorted({k for classes in lanes for k, _ in classes})
    c_now = Cat(*(c_of(k) for k in patterns))
    for k in range(depth_a):            # the word's c, beside the class sums
        c_now = register(m, advance, c_now, name=f"class_c_d{k}")
    c_at = {k: c_now[i] for i, k in enumerate(patterns)}
    totals = []
    for p, classes in enumerate(lanes):
        columns = [[] for _ in range(max(len(e).bit_length() for _, e in classes))]
        for q, (k, elems) in enumerate(classes):
            total, stages = heap_sum(m, advance, [[x_bits[p][s] for s in elems]], name=f"sum{p}_k{q}")
            for d in range(depth_a - stages):
                total = register(m, advance, total, name=f"sum{p}_k{q}_d{d}")
            for j in range(len(elems).bit_length()):
                columns[j].append(total[j] ^ c_at[k])
        groups, _ = _groups_of_three([len(col) for col in columns])
        outputs, taken = [], [0] * len(columns)
        for j, size in groups:
            bits = columns[j][taken[j]:taken[j] + size]
            taken[j] += size
            outputs += [(j + i, bit) for i, bit in enumerate(_counter(bits))]
        counted = register(m, advance, Cat(*(bit for _, bit in outputs)), name=f"sum{p}_f")
        heap = [[] for _ in range(max(j for j, _ in outputs) + 1)]
        for i, (j, _) in enumerate(outputs):
            heap[j].append(counted[i])
        total, stages = heap_sum(m, advance, heap, name=f"sum{p}")
        for d in range(depth - depth_a - 1 - stages):
            total = register(m, advance, total, name=f"sum{p}_d{d}")
        totals.append(total[:width])
    return totals, depth
