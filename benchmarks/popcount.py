"""Popcount and low-bit sum trees on LUT6 + CARRY4: which structure does Yosys map smallest?

    python -m benchmarks.popcount               # both tables
    python -m benchmarks.popcount --chains      # only the second: the layers' popcount against the 6:3 heap

The MVAU/VVAU lane sum (:func:`layers.datapath.adder_tree`, a balanced tree of ``+``) against the
alternatives a hand mapping for LUT6 would use, each summing SIMD terms between two registers:

- ``adder tree``: the lane's own balanced binary tree of ``+`` (what the layers build);
- ``6:3 compressor heap``: bit columns reduced by 6:3 counters (one 6-input function per output bit,
  a constant lookup, so one LUT6 each), then one carry-chain adder of the last two rows;
- ``fused 3-pair counters + heap``: XNOR of three operand pairs and their count in one 6-input function
  (two LUT6 per three products), then the heap;
- ``heap to three rows``: the heap stopped at three rows, summed by two carry-chain adders (the
  ternary-adder shape).

Yosys (``synth_xilinx -flatten``, abc LUT mapping) re-maps the pure logic of all of them; the table says
which it maps smallest. Result (BENCHMARKS.md): the adder tree is smallest for XNOR popcounts of 32 and 64
terms and for 2-bit products; fused counters win only at 16 XNOR terms (26 against 29 LUT); the heap is
14 % smaller than the tree for unsigned 4x4-bit products. The layers keep the adder tree; a heap for
4-bit (signed: offset to unsigned, the constant subtracted once) products is the open step.

Second table (issue 43): the binary layers' popcount (:func:`layers.popcount.popcount_heap`, levels of
carry chains with counters in their LUTs) against the registered 6:3 heap it replaced (2026-11-25,
:func:`heap_6_3`, kept here as the baseline), one lane between registers, over registered bits (the
agreement bits of ``weights_in_xnor``, constant weights) and over XNORs of two registered bits (weights
from block RAM): Yosys LUTs beside :func:`layers.popcount.heap_cost`'s planned count.
"""

import sys
import time

from amaranth.hdl import Array, Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from qonnx.core.datatype import DataType

from benchmarks.tables import write_section
from boards.yosys import synthesize
from layers.datapath import adder_tree, product, register
from layers.popcount import _counter, heap_cost, popcount_heap


def counter(bits):
    """The count of up to 6 bits as a constant lookup: pure logic, one LUT6 per output bit."""
    table = Array([Const(bin(i).count("1"), len(bits).bit_length()) for i in range(1 << len(bits))])
    return table[Cat(*bits)]


def heap_sum(columns, rows=2):
    """Bit columns (least significant first) reduced by counters of up to 6 bits until at most ``rows``
    bits remain per column, then summed by carry-chain adders."""
    columns = [list(c) for c in columns]
    while max(len(c) for c in columns) > rows:
        reduced = [[] for _ in range(len(columns) + 3)]
        for i, column in enumerate(columns):
            k = 0
            while len(column) - k >= 3:
                count = counter(column[k:k + 6])
                k += min(6, len(column) - k)
                for j in range(len(count)):
                    reduced[i + j].append(count[j])
            reduced[i].extend(column[k:])
        while not reduced[-1]:
            reduced.pop()
        columns = reduced
    words = [Cat(*[c[r] if r < len(c) else Const(0, 1) for c in columns]) for r in range(rows)]
    return sum(words[1:], words[0])


def bit_columns(values, width):
    """Unsigned ``width``-bit values as bit columns."""
    return [[v[b] for v in values if b < len(v)] for b in range(width)]


class LaneSum(wiring.Component):
    """SIMD products of (``x`` bits x ``w`` bits) summed by ``kind``, registered in and out."""

    def __init__(self, kind, simd, bits):
        self.kind, self.simd, self.bits = kind, simd, bits
        super().__init__({"x": In(simd * bits), "w": In(simd * bits), "o": Out(16)})

    def elaborate(self, platform):
        m = Module()
        x, w = Signal(len(self.x)), Signal(len(self.w))
        m.d.sync += [x.eq(self.x), w.eq(self.w)]
        b = self.bits
        if b == 1:
            terms = [~(x[i] ^ w[i]) for i in range(self.simd)]
            width = 1
        else:       # UINTb x UINTb products as the layers build them with resType lut (shift-add)
            dtype = DataType[f"UINT{b}"]
            terms = [product(x[i * b:(i + 1) * b], dtype, w[i * b:(i + 1) * b], dtype, xnor=False, res_type="lut")
                     for i in range(self.simd)]
            width = 2 * b
        if self.kind == "adder tree":
            total = adder_tree(terms)[0]
        elif self.kind == "6:3 compressor heap":
            total = heap_sum(bit_columns(terms, width))
        elif self.kind == "heap to three rows":
            total = heap_sum(bit_columns(terms, width), rows=3)
        else:       # fused 3-pair counters (1-bit operands only)
            counts = [counter(terms[g:g + 3]) for g in range(0, self.simd, 3)]
            total = heap_sum(bit_columns(counts, 2))
        out = Signal(16)
        m.d.sync += out.eq(total)
        m.d.comb += self.o.eq(out)
        return m


CASES = [(1, 16), (1, 32), (1, 64), (2, 32), (4, 16)]
KINDS = ["adder tree", "6:3 compressor heap", "heap to three rows", "fused 3-pair counters + heap"]


def _heap_6_3_levels(n_terms, term_inputs):
    """The 2026-11-25 heap's plan: per level, per column the groups of up to 6 (XNOR terms: 3) bits
    counted by one LUT6 per output bit, the rest passed; until two rows are left."""
    columns, levels, inputs = [n_terms], [], term_inputs
    while max(columns) > 2 or inputs > 1:
        size, plan = 6 // inputs, []
        for height in columns:
            groups = [list(range(k, k + size)) for k in range(0, height - size + 1, size)]
            k = len(groups) * size
            if height - k >= 3 or (inputs > 1 and height - k):
                groups.append(list(range(k, height)))
                k = height
            plan.append((groups, list(range(k, height))))
        heights = [0] * (len(columns) + 3)
        for i, (groups, passed) in enumerate(plan):
            heights[i] += len(passed)
            for g in groups:
                for j in range(len(g).bit_length()):
                    heights[i + j] += 1
        while not heights[-1]:
            heights.pop()
        levels.append(plan)
        columns, inputs = heights, 1
    return levels


def heap_6_3(m, terms, term_inputs):
    """The 2026-11-25 registered 6:3 heap over ``terms``, then one registered adder of the two rows."""
    columns = [list(terms)]
    for level, plan in enumerate(_heap_6_3_levels(len(terms), term_inputs)):
        out = [[] for _ in range(len(columns) + 3)]
        for i, (groups, passed) in enumerate(plan):
            for g in groups:
                for j, bit in enumerate(_counter([columns[i][k] for k in g])):
                    out[i + j].append(bit)
            out[i].extend(columns[i][k] for k in passed)
        while not out[-1]:
            out.pop()
        columns = [[register(m, 1, bit, name=f"h{level}_{i}_{k}") for k, bit in enumerate(col)]
                   for i, col in enumerate(out)]
    rows = [Cat(*[col[r] if r < len(col) else Const(0, 1) for col in columns]) for r in range(max(map(len, columns)))]
    return rows[0] if len(rows) == 1 else rows[0] + rows[1]


class PopcountLane(wiring.Component):
    """One lane's popcount of ``n`` terms between registers: registered bits (``term_inputs=1``) or the
    XNOR of two registered bits each (2), by ``structure`` ("6:3 heap" or "carry chains")."""

    def __init__(self, structure, n, term_inputs):
        self.structure, self.n, self.term_inputs = structure, n, term_inputs
        super().__init__({"x": In(n), "w": In(n), "o": Out(16)})

    def elaborate(self, platform):
        m = Module()
        x, w = Signal(self.n), Signal(self.n)
        m.d.sync += [x.eq(self.x), w.eq(self.w)]
        if self.term_inputs == 1:
            agree = Signal(self.n)
            m.d.sync += agree.eq(~(self.x ^ self.w))
            terms = [agree[i] for i in range(self.n)]
        else:
            terms = [~(x[i] ^ w[i]) for i in range(self.n)]
        if self.structure == "carry chains":
            total, _ = popcount_heap(m, 1, terms, term_inputs=self.term_inputs)
        else:
            total = heap_6_3(m, terms, self.term_inputs)
        out = Signal(16)
        m.d.sync += out.eq(total)
        m.d.comb += self.o.eq(out)
        return m


CHAIN_CASES = [(64, 1), (144, 1), (576, 1), (64, 2), (144, 2), (576, 2)]
CHAINS = "Popcount by carry chains with counters in their LUTs, against the 6:3 heap"


def chain_rows():
    rows = []
    for n, term_inputs in CHAIN_CASES:
        for structure in ("6:3 heap", "carry chains"):
            start = time.perf_counter()
            r = synthesize(PopcountLane(structure, n, term_inputs))
            regs = n * (1 if term_inputs == 1 else 2) + 16     # the lane's input and output registers
            planned = heap_cost(n, term_inputs)[0] if structure == "carry chains" else "-"
            rows.append({"terms": n, "inputs": "registered bits" if term_inputs == 1 else "XNOR of two bits",
                         "structure": structure, "Yosys LUT": r.lut, "planned LUT": planned,
                         "LUT per term": f"{r.lut / n:.2f}", "FF (popcount)": r.ff - regs, "CARRY4": r.carry,
                         "Yosys s": f"{time.perf_counter() - start:.0f}"})
            print(rows[-1], flush=True)
    write_section(
        CHAINS,
        "One lane's popcount between registers by Yosys `synth_xilinx -flatten` (the native Yosys): the binary "
        "layers' lane sum since issue 43 (`carry chains`: `layers.popcount.popcount_heap`, levels of carry chains "
        "whose LUTs hold 5-bit counters and full adders, every level registered) against the registered 6:3 heap "
        "it replaced (`6:3 heap`, 2026-11-25: one LUT6 per counter output bit, then one adder). *registered bits*: "
        "the agreement bits of `weights_in_xnor` or constant weights; *XNOR of two bits*: weights from block "
        "RAM, the first level counting three XNOR pairs to a LUT6. *planned LUT*: `heap_cost`, what the cost "
        "model scales. *FF (popcount)*: the popcount's flip-flops, the lane's input and output registers not "
        "counted. Yosys s: wall time, the machine loaded by other agents' jobs.", rows)


def main():
    if "--chains" in sys.argv[1:]:
        chain_rows()
        return
    rows = []
    for bits, simd in CASES:
        for kind in KINDS:
            if kind.startswith("fused") and bits != 1:
                continue
            r = synthesize(LaneSum(kind, simd, bits))
            rows.append({"terms": f"{simd} x {'XNOR' if bits == 1 else f'UINT{bits} x UINT{bits} product'}",
                         "structure": kind, "LUT": r.lut, "CARRY4": r.carry})
            print(rows[-1], flush=True)
    write_section(
        "Popcount and low-bit sums: adder tree against compressor trees",
        "One lane's sum of SIMD products between two registers, by Yosys `synth_xilinx -flatten` (abc maps "
        "the pure logic of every structure again, so a hand-built compressor only helps where abc would not "
        "find it). The layers keep the adder tree: smallest for XNOR (32, 64 terms) and 2-bit products; the "
        "heap is smaller for 4x4-bit products, not yet used by the layers (their products are signed).", rows)
    chain_rows()


if __name__ == "__main__":
    main()
