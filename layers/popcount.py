"""Popcount as a registered compressor heap: the lane sum of binary (XNOR) MVAU lanes.

An adder tree of ``+`` over bits maps to carry chains whose LUTs each add one bit of two numbers:
Yosys 0.70 spends about 2 LUTs per XNOR term on it, 1.5 per plain bit (benchmarks/popcount.py,
benchmarks/xnor_rom.py). A LUT6 can instead count 6 bits of one column into 3 output bits (one LUT per
output bit, each a function of the same 6 inputs), removing one bit per LUT: a heap of such counters
takes n bits to two rows in about n LUTs. abc would re-map the counters' logic across levels (what
benchmarks/popcount.py measured, unregistered: no better than the tree), so every level ends in a
register and each counter output stays one 6-input function. The first level counts XNOR terms three
pairs (x, w) to a LUT6 when the agreement bits are not registered yet (``term_inputs=2``). The two rows
left are added by one carry chain, registered too; the flip-flops are cheap beside the LUTs saved
(about one per term).
"""

from functools import lru_cache

from amaranth.hdl import Cat, Const

from layers.datapath import register

__all__ = ["popcount_heap", "heap_cost"]

LUT_INPUTS = 6


def _plan(columns, term_inputs):
    """One level: per column, the groups counted (lists of indices into the column) and the bits passed."""
    group = LUT_INPUTS // term_inputs
    plan = []
    for height in columns:
        groups, k = [], 0
        while height - k >= group:
            groups.append(list(range(k, k + group)))
            k += group
        rest = height - k
        if rest >= 3 or (term_inputs > 1 and rest):     # XNOR terms are all counted (registered as counts)
            groups.append(list(range(k, height)))
            k = height
        plan.append((groups, list(range(k, height))))
    return plan


def _levels(n_terms, term_inputs):
    """[(plan, columns before)] of every level, the heights left, for ``n_terms`` terms."""
    columns, levels, inputs = [n_terms], [], term_inputs
    while max(columns) > 2 or inputs > 1:
        plan = _plan(columns, inputs)
        heights = [0] * (len(columns) + 3)
        for i, (groups, passed) in enumerate(plan):
            heights[i] += len(passed)
            for g in groups:
                for j in range(len(g).bit_length()):
                    heights[i + j] += 1
        while heights and not heights[-1]:
            heights.pop()
        levels.append((plan, columns))
        columns, inputs = heights, 1
    return levels, columns


@lru_cache(maxsize=None)       # the folding optimizer asks for every folding of a binary MVAU it costs
def heap_cost(n_terms, term_inputs=1):
    """(LUTs, flip-flops, register stages) of :func:`popcount_heap` over ``n_terms`` terms."""
    levels, columns = _levels(n_terms, term_inputs)
    luts = ffs = 0
    for plan, _ in levels:
        for groups, passed in plan:
            outs = sum(len(g).bit_length() for g in groups)
            luts, ffs = luts + outs, ffs + outs + len(passed)
    stages = len(levels)
    if max(columns) == 2:           # the two rows' carry-chain adder, registered
        width = n_terms.bit_length()
        luts, ffs, stages = luts + width, ffs + width, stages + 1
    return luts, ffs, stages


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


def popcount_heap(m, advance, terms, *, term_inputs=1, name="pop"):
    """The number of ones among ``terms`` (1-bit values; with ``term_inputs=2`` each an XNOR of two
    signals, counted three to a LUT6 at the first level), every level registered on ``advance``;
    returns (sum, register stages), the stages those of :func:`heap_cost`."""
    terms = list(terms)
    levels, _ = _levels(len(terms), term_inputs)
    columns = [terms]
    for level, (plan, _) in enumerate(levels):
        out = [[] for _ in range(len(columns) + 3)]
        for i, (groups, passed) in enumerate(plan):
            for g in groups:
                count = _counter([columns[i][k] for k in g])
                for j in range(len(count)):
                    out[i + j].append(count[j])
            out[i].extend(columns[i][k] for k in passed)
        while out and not out[-1]:
            out.pop()
        columns = [[register(m, advance, bit, name=f"{name}_h{level}_{i}_{k}") for k, bit in enumerate(col)]
                   for i, col in enumerate(out)]
    rows = [Cat(*[col[r] if r < len(col) else Const(0, 1) for col in columns]) for r in range(max(map(len, columns)))]
    if len(rows) == 1:
        return rows[0], len(levels)
    total = register(m, advance, rows[0] + rows[1], name=f"{name}_sum")
    return total, len(levels) + 1
