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

from amaranth.hdl import Cat, Const, Signal

from layers.datapath import register

__all__ = ["popcount_heap", "heap_cost", "heap_sum", "columns_cost", "selected_elements", "selection_cost",
           "selects_constants", "heap_stages"]

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
    if spec.xnor:
        return heap_cost(spec.simd, spec.heap_term_inputs)[2]
    return selection_cost(spec.weight_matrix(), spec.lane_input_dtype.bitwidth())[2]
