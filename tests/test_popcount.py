"""The popcount heap's counters (layers/popcount.py): exact on every input, and small to convert.

The lanes built from them are checked bit-exact and cycle-exact in tests/test_mvau.py
(test_popcount_heap_bit_exact_and_cycle_exact)."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from layers.popcount import _counter
from sim.runner import to_verilog


def test_counters_count_every_input_of_one_to_six_bits():
    m = Module()
    inputs = {n: Signal(n, name=f"bits{n}") for n in range(1, 7)}
    counts = {}
    for n, bits in inputs.items():
        counts[n] = Signal(n.bit_length(), name=f"count{n}")
        m.d.comb += counts[n].eq(Cat(*_counter([bits[k] for k in range(n)])))
    seen = {}

    async def bench(ctx):
        for n, bits in inputs.items():
            for value in range(1 << n):
                ctx.set(bits, value)
                seen[n, value] = ctx.get(counts[n])

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert seen == {(n, v): bin(v).count("1") for n in range(1, 7) for v in range(1 << n)}


def test_counters_convert_to_a_line_per_output_bit():
    # A 2^n-way Array of the counts (the first form) became 2^n cases per output bit in the Verilog:
    # 22 MB and ~5 minutes of conversion for CNV's PE 16 x SIMD 576 layer. A truth table read at the
    # bits is one assignment per output bit.
    text = to_verilog(_Counter6(), "counter")
    assert "case" not in text
    assert text.count(" >> ") == 3


class _Counter6(wiring.Component):
    bits: In(6)
    count: Out(3)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.count.eq(Cat(*_counter([self.bits[k] for k in range(6)])))
        return m
