"""The popcount heap's counters (layers/popcount.py): exact on every input, and small to convert.

The lanes built from them are checked bit-exact and cycle-exact in tests/test_mvau.py
(test_popcount_heap_bit_exact_and_cycle_exact)."""

import pytest
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


def _lane_counts(n, term_inputs, vectors):
    """popcount_heap over ``n`` terms (registered bits, or XNORs of two bits) at one vector a cycle:
    (the counts it gives, in order, its register stages)."""
    import numpy as np
    from amaranth.hdl import C
    from layers.popcount import popcount_heap
    m = Module()
    x, w = Signal(n, name="x"), Signal(n, name="w")
    terms = [x[i] for i in range(n)] if term_inputs == 1 else [~(x[i] ^ w[i]) for i in range(n)]
    total, stages = popcount_heap(m, C(1, 1), terms, term_inputs=term_inputs)
    count, tick = Signal(16, name="count"), Signal(name="tick")
    m.d.comb += count.eq(total)
    m.d.sync += tick.eq(~tick)              # a clock domain even for a lane of no registers
    got = []

    async def bench(ctx):
        for xv, wv in list(vectors) + [(0, 0)] * stages:
            ctx.set(x, int(xv))
            ctx.set(w, int(wv))
            got.append(ctx.get(count))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return np.array(got[stages:]), stages


def _expected(n, term_inputs, vectors):
    import numpy as np
    mask = (1 << n) - 1
    return np.array([bin(xv if term_inputs == 1 else ~(xv ^ wv) & mask).count("1") for xv, wv in vectors])


def test_popcount_lanes_count_every_input_of_small_lanes():
    # registered bits: every vector of 1-8 bits; XNOR terms: every (x, w) of 1-4 bits (3 to a LUT6 at the
    # first level, then chains: groups of 1, 2, 3 and a partial one)
    from layers.popcount import heap_cost
    for term_inputs, widths in ((1, range(1, 9)), (2, range(1, 5))):
        for n in widths:
            vectors = [(v & ((1 << n) - 1), v >> n) for v in range(1 << (n * term_inputs))]
            got, stages = _lane_counts(n, term_inputs, vectors)
            assert (got == _expected(n, term_inputs, vectors)).all(), (n, term_inputs)
            assert stages == heap_cost(n, term_inputs)[2]


def test_popcount_lanes_count_random_wide_lanes():
    import random
    from layers.popcount import heap_cost
    rng = random.Random(43)
    for n in (27, 64, 145):
        for term_inputs in (1, 2):
            vectors = [(rng.getrandbits(n), rng.getrandbits(n)) for _ in range(12)] + [(0, 0), ((1 << n) - 1, 0)]
            if term_inputs == 2:
                vectors += [(0, (1 << n) - 1), ((1 << n) - 1, (1 << n) - 1)]
            got, stages = _lane_counts(n, term_inputs, vectors)
            assert (got == _expected(n, term_inputs, vectors)).all(), (n, term_inputs)
            assert stages == heap_cost(n, term_inputs)[2]


def test_popcount_plan_takes_fewer_luts_than_a_counter_a_bit():
    # The carry chains' LUTs hold counters: about 0.72 LUT a registered bit where the 6:3 heap took
    # 1.04 (576 bits: 598 LUTs), and 1.15 an XNOR term where it took 1.37 (787)
    from layers.popcount import heap_cost
    assert heap_cost(576, 1)[0] <= 0.75 * 576
    assert heap_cost(576, 2)[0] <= 1.2 * 576
    assert heap_cost(144, 1)[0] <= 0.75 * 144


def test_heap_sum_adds_columns_of_any_heights():
    # heap_sum over columns of plain bits (each worth 2^j): every value of a small uneven heap
    import itertools
    from amaranth.hdl import C
    from layers.popcount import columns_cost, heap_sum
    heights = [3, 0, 5, 2]
    m = Module()
    bits = Signal(sum(heights), name="bits")
    it = iter(range(sum(heights)))
    columns = [[bits[next(it)] for _ in range(h)] for h in heights]
    total, stages = heap_sum(m, C(1, 1), columns)
    assert stages == columns_cost(heights)[2]
    out, tick = Signal(8, name="out"), Signal(name="tick")
    m.d.comb += out.eq(total)
    m.d.sync += tick.eq(~tick)
    values = list(range(1 << sum(heights)))
    got = []

    async def bench(ctx):
        for v in values + [0] * stages:
            ctx.set(bits, v)
            got.append(ctx.get(out))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    weight = [1 << j for j, h in enumerate(heights) for _ in range(h)]
    expected = [sum(w for k, w in enumerate(weight) if v >> k & 1) for v in values]
    assert got[stages:] == expected


def test_selected_elements_take_the_smaller_set():
    from layers.popcount import selected_elements
    assert selected_elements([[1, -1, 1], [-1, -1, 1], [1, 1, 1, 1]]) == [((1,), False), ((2,), True), ((), False)]


@pytest.mark.sim
@pytest.mark.parametrize("idt, mh, simd, act", [("INT8", 8, 27, "BIPOLAR"), ("UINT4", 6, 9, None)])
def test_constant_bipolar_weights_heap_bit_exact_under_backpressure(idt, mh, simd, act, simulator):
    # CNV's first layer (INT8 x BIPOLAR, its thresholds make the inputs unsigned) at one weight word: each
    # lane a heap of the inputs its weights select (no adder tree); unsigned inputs without an activation
    # too; golden through the MVAU tests' driver (numpy), at full rate and under backpressure
    from tests.test_mvau import check, make_spec
    spec = make_spec(simd, mh, simd, mh, idt, "BIPOLAR", act, seed=mh + simd, mem_mode="internal_embedded",
                     res_type="lut", popcount="heap")
    tree = make_spec(simd, mh, simd, mh, idt, "BIPOLAR", act, seed=mh + simd, mem_mode="internal_embedded",
                     res_type="lut")
    assert spec.uses_heap and spec.constant_weights and not tree.uses_heap
    assert spec.resource_estimate().lut < tree.resource_estimate().lut
    check(spec, simulator=simulator, frames=3)


@pytest.mark.sim
@pytest.mark.parametrize("mw, mh, simd, pe, act", [(384, 4, 128, 4, "BIPOLAR"), (256, 6, 128, 3, None)])
def test_xnor_lanes_by_classes_bit_exact_under_backpressure(mw, mh, simd, pe, act, simulator):
    # Binary lanes behind a LUT ROM of 3 and 4 words (SF and NF both above one): each lane's terms counted
    # by classes of the same pattern over the words, the constants of the inverted classes starting the
    # accumulator; golden (numpy) through the MVAU tests' driver, at full rate and under backpressure
    from layers.popcount import counts_classes
    from tests.test_mvau import check, make_spec
    spec = make_spec(mw, mh, simd, pe, "BIPOLAR", "BIPOLAR", act, seed=mw + pe, mem_mode="internal_embedded",
                     ram_style="distributed", popcount="heap")
    assert counts_classes(spec) and spec.wmem in (3, 4)
    tree = make_spec(mw, mh, simd, pe, "BIPOLAR", "BIPOLAR", act, seed=mw + pe, mem_mode="internal_embedded",
                     ram_style="distributed")
    assert spec.resource_estimate().lut < tree.resource_estimate().lut
    small = make_spec(48, 4, 16, 4, "BIPOLAR", "BIPOLAR", act, mem_mode="internal_embedded", ram_style="distributed",
                      popcount="heap")
    assert not counts_classes(small)        # classes of one or two terms do not pay: XNOR terms as before
    check(spec, simulator=simulator, frames=3)
