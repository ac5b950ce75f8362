"""Popcount and low-bit sum trees on LUT6 + CARRY4: which structure does Yosys map smallest?

    python -m benchmarks.popcount

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
"""

from amaranth.hdl import Array, Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from qonnx.core.datatype import DataType

from benchmarks.tables import write_section
from boards.yosys import synthesize
from layers.datapath import adder_tree, product


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


def main():
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


if __name__ == "__main__":
    main()
