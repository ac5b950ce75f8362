"""Distributed arithmetic (issue 43 item 2): an MVAU's constant weights as bit heaps at II 1
(``pipeline="distributed"``, layers/distributed.py), chosen by ``--objective latency``.

Independent goldens: numpy's matrix product and the thresholds counted (the layer's definition), the table's
counts (searchsorted), qonnx's execute_onnx on the original models; the simulated latency against the
spec's (the plan's register count)."""

import json
import zlib
from pathlib import Path

import numpy as np
import pytest
from qonnx.core.datatype import DataType

from layers.bit_heap import channel_heap, choose_pairs, chosen_products, csd_digits, product_width
from layers.distributed import DistributedPlan, NEXT_FIFO_NS, cycle_budget_ns, distributed_plan, power_of_two_requant
from layers.mvau import MVAUSpec
from layers.thresholding import ThresholdTable
from memstream.packing import pack_words, unpack_words
from rtlgen.ir.graph import OPS
from sim.harness import Backpressure, simulate_streams

MODELS = Path(__file__).parent / "models" / "jet_tagger"
TINY, TINY_FEATURES = MODELS / "jet_tiny.onnx", MODELS / "tiny_features.npy"
JET_OPTIONS = dict(fit="pynq-z2", clock_mhz=200.0, input_dtype="FIXED<16,6>", objective="latency")


def _weights(rng, mw, mh, zeros=0.5, bits=6):
    w = rng.integers(-(1 << (bits - 1)) + 1, 1 << (bits - 1), (mw, mh))
    w[rng.random((mw, mh)) < zeros] = 0
    w[:, 0] = 0                         # a channel of zeros
    w[0, 1] = -(1 << (bits - 1)) + 1    # the most negative digit pattern
    return w


def _line_thresholds(rng, mh, levels, shift, half_even=True):
    """Thresholds of a power-of-two requantizer: level k starts at k 2^shift (+1 for odd k, half-even) - o."""
    offsets = rng.integers(-40, 40, mh)
    return np.array([[(k << shift) + (k & 1 if half_even else 0) - o for k in range(1, levels + 1)] for o in offsets])


def _spec(w, input_dtype, thresholds=None, output_dtype=None, clock_mhz=200.0, **kw):
    mw, mh = w.shape
    return MVAUSpec(mw=mw, mh=mh, simd=mw, pe=mh, input_dtype=input_dtype, weight_dtype="INT6", weights=w,
                    thresholds=thresholds, output_dtype=output_dtype, mem_mode="internal_embedded", res_type="lut",
                    pipeline="distributed", clock_mhz=clock_mhz, **kw)


def _mvau(x, w, thresholds):
    """The layer from its definition: x . W, then per channel the number of thresholds at or below."""
    acc = x.astype(np.int64) @ w
    if thresholds is None:
        return acc
    return (acc[:, :, None] >= np.asarray(thresholds)[None, :, :]).sum(axis=2)


def _heap_value(ch, x, n, signed, pairs=()):
    """A channel's heap summed in numpy from the elements x (N, MW): each term's source bits (an element's
    or a shared pair's, offset to unsigned), times its odd part, inverted for a negative term, shifted, and
    the constant, modulo 2^width, as a signed number."""
    mw = x.shape[1]
    total = ch.constant
    for src, k, sign, odd in ch.terms:
        if src < mw:
            u, bits = x[:, src] + ((1 << (n - 1)) if signed else 0), n
        else:
            pair = pairs[src - mw]
            t = x[:, pair.i] + pair.sign * (x[:, pair.j] << pair.shift)
            assert t.min() >= pair.lo and t.max() <= pair.hi
            u, bits = t + pair.offset, pair.width
            assert u.min() >= 0 and u.max() < 1 << bits
        p, m = odd * u, product_width(odd, bits)
        total = total + ((p if sign > 0 else ((1 << m) - 1) ^ p) << k)
    total = total % (1 << ch.width)
    return np.where(total >= 1 << (ch.width - 1), total - (1 << ch.width), total)


def test_csd_digits_add_up_and_are_the_fewest():
    for value in range(-300, 301):
        digits = csd_digits(value)
        assert sum(sign << k for sign, k in digits) == value
        ks = [k for _, k in digits]
        assert all(b - a >= 2 for a, b in zip(ks, ks[1:]))        # no two adjacent non-zero digits


@pytest.mark.parametrize("input_dtype", ["INT16", "UINT6", "INT6", "INT3", "UINT1"])
def test_heap_sums_to_the_matrix_product(input_dtype):
    """Every channel's terms and constant (signs, inversions, the modulus) give x . W exactly, for random
    constant matrices with zeros, negatives, a zero channel, at the extremes of the input range."""
    rng = np.random.default_rng(11)
    w = _weights(rng, 12, 7)
    spec = _spec(w, input_dtype)
    plan = distributed_plan(spec)
    dt = DataType[input_dtype]
    x = np.concatenate([rng.integers(dt.min(), dt.max() + 1, (200, 12)), np.full((1, 12), dt.min()),
                        np.full((1, 12), dt.max())])
    n = dt.bitwidth()
    for c in range(w.shape[1]):
        np.testing.assert_array_equal(_heap_value(plan.channels[c], x, n, dt.signed(), plan.pairs), x @ w[:, c])
        if n <= 6:          # products of the elements by the weights' odd parts: one term a weight
            ch = channel_heap(spec.weight_matrix()[c], n, dt.signed(), 0, 3, products=True)
            assert len(ch.terms) == np.count_nonzero(w[:, c])
            np.testing.assert_array_equal(_heap_value(ch, x, n, dt.signed()), x @ w[:, c])
            # some weights products, the others digits, pairs taking digits only
            chosen = chosen_products(spec.weight_matrix(), n, bit_cost=4.0)
            ch = channel_heap(spec.weight_matrix()[c], n, dt.signed(), 0, 3, products=chosen, pairs=plan.pairs)
            assert all(odd == 1 or (src, odd) in chosen for src, _, _, odd in ch.terms)
            np.testing.assert_array_equal(_heap_value(ch, x, n, dt.signed(), plan.pairs), x @ w[:, c])


@pytest.mark.parametrize("input_dtype", ["INT16", "UINT6", "INT3"])
def test_shared_pairs_sum_to_the_matrix_product(input_dtype):
    """Weights of few magnitudes (as a pruned layer's) share pairs of digits across channels: every pair
    taken is held by two channels or more, and each channel built with them still sums to x . W, at the
    extremes of the input range too."""
    rng = np.random.default_rng(12)
    w = rng.choice([-31, -29, -27, -25, 0, 0, 0, 0, 25, 27, 29, 31], (10, 12))
    w[:, 0] = 0
    dt = DataType[input_dtype]
    n = dt.bitwidth()
    pairs = choose_pairs(w.T, n, dt.signed())
    assert pairs
    x = np.concatenate([rng.integers(dt.min(), dt.max() + 1, (200, 10)), np.full((1, 10), dt.min()),
                        np.full((1, 10), dt.max()), np.array([[dt.min(), dt.max()] * 5])])
    holders = [0] * len(pairs)
    for c in range(w.shape[1]):
        for rows in (2, 3):
            ch = channel_heap(w[:, c], n, dt.signed(), 0, rows, pairs=pairs)
            np.testing.assert_array_equal(_heap_value(ch, x, n, dt.signed(), pairs), x @ w[:, c])
        for p in ch.pairs:
            holders[p] += 1
    assert all(h >= 2 for h in holders[:1])       # the first pair taken is the most held


def _apply_level(heights, groups):
    """Column heights after one level of counters: a group of s bits leaves one bit in its column and
    one in each of the next bit_length(s) - 1 columns."""
    after = [0] * (len(heights) + 3)
    for col, (h, sizes) in enumerate(zip(heights, groups)):
        assert sum(sizes) <= h and all(2 <= size <= 6 for size in sizes)
        after[col] += h - sum(sizes)
        for size in sizes:
            for j in range(size.bit_length()):
                after[col + j] += 1
    return after


@pytest.mark.parametrize("input_dtype, zeros", [("UINT6", 0.1), ("INT16", 0.75), ("UINT2", 0.5)])
def test_every_counter_level_ends_in_the_rows_the_carry_chain_adds(input_dtype, zeros):
    """Each level's groups applied to its columns give the next level's columns (nothing above the
    channel's width is lost: its sum is taken modulo 2^width), the last at most ``rows`` (2 or 3) high."""
    rng = np.random.default_rng(4)
    plan = distributed_plan(_spec(_weights(rng, 40, 6, zeros=zeros), input_dtype))
    n = DataType[input_dtype].bitwidth()
    for ch in plan.channels:
        heights = [0] * ch.width
        for src, k, _, odd in ch.terms:
            bits = n if src < 40 else plan.pairs[src - 40].width
            for b in range(k, min(k + product_width(odd, bits), ch.width)):
                heights[b] += 1
        for b in range(ch.width):
            heights[b] += ch.constant >> b & 1
        for before, groups in ch.levels:
            assert list(before) == heights
            heights = _apply_level(heights, groups)[:ch.width]
        assert list(ch.final) == heights and max(heights, default=0) <= ch.rows and ch.rows in (2, 3)


def test_power_of_two_requant_counts_equal_the_table():
    rng = np.random.default_rng(5)
    for shift, half_even in ((3, True), (5, False), (0, False)):
        t = _line_thresholds(rng, 6, 7, shift, half_even)
        table = ThresholdTable("MVAU", t, 6, 6, (-2000, 2000))
        form = power_of_two_requant("MVAU", table)
        acc = np.arange(-2000, 2001)[:, None].repeat(6, axis=1)
        truth = np.stack([np.searchsorted(t[c], acc[:, c], side="right") for c in range(6)], axis=1)
        np.testing.assert_array_equal(form.counts(acc), truth)


def test_thresholds_off_a_power_of_two_line_are_refused():
    rng = np.random.default_rng(6)
    w = _weights(rng, 8, 4)
    t = np.sort(rng.integers(-100, 100, (4, 3)), axis=1)
    with pytest.raises(ValueError, match="pipeline=distributed.*power-of-two"):
        _spec(w, "UINT4", thresholds=t, output_dtype="UINT2")


@pytest.mark.parametrize("change, message", [
    (dict(simd=4), "SIMD = MW and PE = MH"), (dict(res_type="dsp"), "resType must be lut"),
    (dict(mem_mode="internal_decoupled"), "constant weights")])
def test_what_distributed_arithmetic_cannot_build_is_refused(change, message):
    w = _weights(np.random.default_rng(7), 8, 4)
    params = dict(mw=8, mh=4, simd=8, pe=4, input_dtype="UINT4", weight_dtype="INT6", weights=w,
                  mem_mode="internal_embedded", res_type="lut", pipeline="distributed")
    with pytest.raises(ValueError, match=message):
        MVAUSpec(**{**params, **change})


@pytest.mark.parametrize("clock_mhz", [100.0, 200.0, 300.0])
def test_registers_go_where_the_clock_needs_them(clock_mhz):
    """Each stretch between registers fits the cycle by the delay model (where one step alone can), and
    a register less somewhere would not: no stretch plus the next step fits."""
    rng = np.random.default_rng(8)
    plan = distributed_plan(_spec(_weights(rng, 32, 8, zeros=0.3), "UINT6", _line_thresholds(rng, 8, 63, 7),
                                  "UINT6", clock_mhz=clock_mhz))
    budget = cycle_budget_ns(clock_mhz)
    for c in range(len(plan.channels)):
        steps = [ns for _, ns in plan.steps(c)]
        bounds = [0] + [r + 1 for r in plan.registers[c]] + [len(steps)]
        for a, b in zip(bounds, bounds[1:]):
            used = sum(steps[a:b]) + (NEXT_FIFO_NS if b == len(steps) else 0)
            assert used <= budget or b - a == 1
            if b < len(steps):
                extra = steps[b] + (NEXT_FIFO_NS if b + 1 == len(steps) else 0)
                assert used + extra > budget
    slower = distributed_plan(_spec(_weights(np.random.default_rng(8), 32, 8, zeros=0.3), "UINT6",
                                    _line_thresholds(np.random.default_rng(8), 8, 63, 7), "UINT6", clock_mhz=50.0))
    assert slower.latency == 0 and isinstance(slower, DistributedPlan)


# the default suite: a signed input with the activation, registers and shared pairs; products (a signed input);
# two rows at the end, all combinational; chained behind a producer's 2 ns tail (its input registered first).
# Slow: chained both sides, the first step in the input's cycle
CASES = [("INT5", True, 150.0, False, 3, None), ("INT4", True, 250.0, True, 3, None),
         ("UINT6", True, 60.0, "chosen", 2, None), ("INT5", True, 200.0, False, 3, (2.0, True, True)),
         pytest.param("INT5", True, 200.0, False, 3, (1.0, False, False), marks=pytest.mark.slow),
         pytest.param("UINT4", False, 200.0, False, 2, None, marks=pytest.mark.slow),
         pytest.param("INT8", True, 400.0, False, 3, None, marks=pytest.mark.slow),
         pytest.param("UINT6", False, 300.0, True, 2, None, marks=pytest.mark.slow)]


@pytest.mark.sim
@pytest.mark.parametrize("input_dtype, activation, clock_mhz, products, rows, link", CASES)
def test_distributed_unit_matches_golden_at_full_rate_and_under_backpressure(input_dtype, activation, clock_mhz,
                                                                             products, rows, link, monkeypatch):
    """The RTL against the layer's definition (numpy) for random constant matrices (zeros, negatives, a zero channel), one
    vector a cycle and under random backpressure; the first output leaves ``spec.latency`` cycles after the
    first input (the analytic figure, in simulation). ``products``: every weight one term, the element times
    the weight's odd part (a LUT a bit), shared by the channels; ``rows``: the carry chain adds three rows
    (a ternary adder) or two. ``link``: chained (``input_ns``, ``output_fifo``, whether the plan registers
    the input word)."""
    import layers.distributed
    monkeypatch.setattr(layers.distributed, "_forms", lambda n: (products,))
    monkeypatch.setattr(layers.distributed, "_ROW_CHOICES", (rows,))
    rng = np.random.default_rng(zlib.crc32(f"{input_dtype} {clock_mhz}".encode()))
    w = _weights(rng, 7, 5)
    if not products and rows == 3:      # few magnitudes, as a pruned layer's: channels share pairs of digits
        w = rng.choice([-31, -29, -27, -25, 0, 0, 25, 27, 29, 31], (7, 5))
    if products == "chosen":            # products where channels share them (three digits each), digits elsewhere
        w = rng.choice([-21, -19, -11, 0, 0, 8, 3, 11, 19, 21], (7, 5))
    t = _line_thresholds(rng, 5, 7, 4) if activation else None
    chained = {} if link is None else dict(input_ns=link[0], output_fifo=link[1])
    spec = _spec(w, input_dtype, t, "UINT3" if activation else None, clock_mhz=clock_mhz, **chained)
    plan = distributed_plan(spec)
    assert link is None or plan.input_register == link[2]
    assert bool(plan.products()) == bool(products) and all(ch.rows == rows for ch in plan.channels)
    if products == "chosen":
        assert any(odd == 1 for ch in plan.channels for *_, odd in ch.terms)
    assert plan.used_pairs() or products or rows == 2 or link     # chained: pairs may not fit after the tail
    dt = DataType[input_dtype]
    x = np.concatenate([rng.integers(dt.min(), dt.max() + 1, (46, 7)), np.full((1, 7), dt.min()),
                        np.full((1, 7), dt.max())])
    want = _mvau(x, w, t)
    for backpressure in (None, Backpressure(seed=3, valid_prob=0.6, ready_prob=0.5)):
        extra = {} if backpressure is None else {"backpressure": backpressure}
        result = simulate_streams(OPS["MVAU"].component(spec), inputs={"i": pack_words(x, dt)},
                                  outputs={"o": len(x)}, **extra)
        got = np.asarray(unpack_words(result.words("o"), spec.output_dtype, 5)).reshape(want.shape)
        np.testing.assert_array_equal(got, want)
        if backpressure is None:
            assert result.out_cycles("o")[0] - result.in_cycles("i")[0] == spec.latency
            assert result.out_cycles("o")[-1] - result.out_cycles("o")[0] == len(x) - 1     # II 1


def test_latency_objective_chooses_distributed_arithmetic():
    """On the tiny jet-tagger-like model every MVAU becomes bit heaps, chained with no FIFO between them (a
    cycle shorter than with a FIFO at each boundary, each register within the cycle by the delay model), and
    the design is shorter than the latency objective's best without them."""
    import warnings

    from rtlgen.analyses.timing import latency_cycles
    from rtlgen.flows import INSPECT, Runner
    from rtlgen.options import CompileOptions
    from rtlgen.passes.fifo_links import chain_layers
    from rtlgen.passes.insert import insert_duplicates, insert_dwcs_and_fifos
    from rtlgen.passes.latency import design_latency, fall_through_fifos
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = Runner().run(INSPECT, str(TINY), CompileOptions(**JET_OPTIONS).check())
    mvaus = [n for n in graph.nodes if n.op_type == "MVAU"]
    assert mvaus and all(n.folding["pipeline"] == "distributed" for n in mvaus)
    assert all(n.folding["clock_mhz"] == 200.0 for n in mvaus)
    with_heaps = design_latency(graph)
    with_fifos = fall_through_fifos(insert_dwcs_and_fifos(insert_duplicates(graph)))
    chained = chain_layers(with_fifos)
    assert [n.op.role for n in chained.nodes] == ["fifo"] + ["layer"] * len(mvaus) + ["fifo"]
    assert with_heaps == latency_cycles(chained) == latency_cycles(with_fifos) - 1
    budget = 1000 / JET_OPTIONS["clock_mhz"]
    assert all(distributed_plan(n.spec()).critical_ns() <= budget for n in chained.nodes if n.op_type == "MVAU")
    for n in mvaus:
        n.folding["pipeline"] = "latency"
    assert with_heaps < design_latency(graph)


@pytest.mark.slow       # a compile and three Verilator builds: 250 s on the shared machine
def test_tiny_jet_model_bit_exact_at_the_ii_and_under_backpressure(tmp_path, capsys):
    """The tiny model compiled with --objective latency: its layers chained with no FIFO between them (so
    a stalled output stalls them all at once), bit-exact against qonnx (full rate and random
    backpressure), and the simulated latency equals report.json's."""
    from rtlgen.cli import main
    from rtlgen.options import CompileOptions
    from tests.conftest import rtl_matches_qonnx
    x = np.load(TINY_FEATURES)[:8]
    out = tmp_path / "tiny"
    rtl_matches_qonnx(str(TINY), x, out, CompileOptions(**JET_OPTIONS).check())
    report = json.loads((out / "report.json").read_text())
    assert [layer["op_type"] for layer in report["layers"]] == ["StreamingFIFO", "MVAU", "MVAU", "MVAU", "StreamingFIFO"]
    np.save(tmp_path / "x.npy", x[:1])
    capsys.readouterr()
    assert main(["sim", str(out), "--input", str(tmp_path / "x.npy"), "--json"]) == 0
    text = capsys.readouterr().out
    assert json.loads(text[text.index("{"):])["latency_cycles"] == report["latency_cycles"]


@pytest.mark.slow
@pytest.mark.parametrize("model, most", [("jet_tagger_pruned.onnx", 12), ("jet_tagger.onnx", 24)])
def test_jet_tagger_bit_exact_with_its_latency_measured(tmp_path, capsys, model, most):
    """hls4ml's jet tagger (pruned: every layer as bit heaps; unpruned: where the budget allows) at
    --fit pynq-z2 --clock-mhz 200 --objective latency: bit-exact against qonnx at the II and under
    backpressure, the simulated latency equal to report.json's and at most ``most`` cycles (32 and 51 before
    distributed arithmetic, 15 and 34 with its first bit heaps, the pruned 13 before its layers were chained
    with no FIFO between them, the unpruned 34 before its DSP layers' shorter latency pipelines)."""
    from rtlgen.cli import main
    from rtlgen.options import CompileOptions
    from tests.conftest import rtl_matches_qonnx
    x = np.load(MODELS / "features.npy")[:4]
    out = tmp_path / "jet"
    rtl_matches_qonnx(str(MODELS / model), x, out, CompileOptions(**JET_OPTIONS).check())
    report = json.loads((out / "report.json").read_text())
    assert report["latency_cycles"] <= most
    np.save(tmp_path / "x.npy", x[:1])
    capsys.readouterr()
    assert main(["sim", str(out), "--input", str(tmp_path / "x.npy"), "--json"]) == 0
    text = capsys.readouterr().out
    assert json.loads(text[text.index("{"):])["latency_cycles"] == report["latency_cycles"]


def _lut_depths(netlist):
    """Per module of a mapped netlist (write_verilog -noattr), per LUT output net the LUT levels from the
    module's inputs, and the nets on its CARRY4s' S pins."""
    import re
    found = {}
    for name, body in re.findall(r"^module (\S+?)\s*\(.*?\n(.*?)^endmodule", netlist, re.S | re.M):
        drivers = {}
        for _, cell in re.findall(r"\b(LUT\d)\s*#\(.*?\)\s*\S+\s*\((.*?)\);", body, re.S):
            pins = {pin: net.strip() for pin, net in re.findall(r"\.(\w+)\(([^)]*)\)", cell)}
            out = pins.pop("O")
            drivers[out] = list(pins.values())
        s_pins = [net.strip() for cell in re.findall(r"\bCARRY4\s*\S+\s*\((.*?)\);", body, re.S)
                  for net in re.search(r"\.S\(\{?([^)}]*)\}?\)", cell).group(1).split(",")]

        def depth(net):
            return 1 + max(map(depth, drivers[net]), default=0) if net in drivers else 0
        found[name.lstrip("\\")] = ({net: depth(net) for net in drivers}, [depth(net) for net in s_pins])
    return found


@pytest.mark.parametrize("rows", [2, 3])
def test_tie_test_beside_the_chain_equals_the_sums_low_bits_all_zero(rows):
    """TieTest takes the carry chain's operands, not its sum: for every value of a small heap's columns (some
    bits inverted, a constant one), its ``zero`` for each width of low bits equals the sum's low bits all
    zero, the sum computed here by numpy."""
    from amaranth.hdl import Cat, Const, Module, Signal
    from amaranth.sim import Simulator
    from layers.bit_heap import RowAdder, TieTest

    width = 5 if rows == 2 else 4          # every input value: 1,024 and 4,096
    bits = Signal(rows * width)
    terms = [[(rows * b + r, (b + r) % 3 == 1) for r in range(rows)] for b in range(width)]
    terms[1][-1] = (None, False)        # a constant one
    columns = [[(Const(1, 1) if k is None else bits[k], inv) for k, inv in col] for col in terms]
    m = Module()
    adder = m.submodules.add = RowAdder(columns, width, rows)
    m.d.comb += adder.i.eq(Cat(*adder.sources))
    ties = []
    for k in range(1, width + 1):
        tie = m.submodules[f"tie{k}"] = TieTest(adder.columns, k, rows)
        m.d.comb += [tie.i.eq(adder.i), tie.s.eq(adder.front_s[:k]), tie.di.eq(adder.di[:k])]
        ties.append(tie.zero)
    wrong = []

    async def bench(ctx):
        for value in range(1 << len(bits)):
            ctx.set(bits, value)
            total = sum((1 if k is None else (value >> k & 1) ^ inv) << b for b, col in enumerate(terms)
                        for k, inv in col)
            assert ctx.get(adder.s) == total % (1 << width)
            for k, zero in enumerate(ties, 1):
                if ctx.get(zero) != (total % (1 << k) == 0):
                    wrong.append((value, k))
    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert not wrong


@pytest.mark.synth
def test_each_piece_maps_to_the_lut_levels_the_delay_model_counts(tmp_path):
    """The delay model counts an element's product by a weight's odd part (a function of the element's
    <= 6 bits) and the activation (its level bit, the clip, the tie) as one LUT level, the LUT before a
    two-row carry chain as one and a ternary adder's S as one LUT6 (layers/delay_model.carry_chain_ns), the
    half-even tie beside the chain as tie_ns's levels: each piece a module of its own, Yosys must map them
    so (in the layer's module abc had mapped the jet tagger's products as the ripple they are written as,
    four LUT levels, and its activation as two; a ternary adder in one module as a majority LUT3 into an XOR
    LUT4, two levels)."""
    from amaranth.back import verilog
    from amaranth.hdl import Cat, Const, Elaboratable, Module, Signal
    from boards.yosys import synthesize
    from layers.bit_heap import ProductLUTs, RowAdder, TieTest
    from layers.delay_model import LUT6_NS, NET_NS, tie_ns
    from layers.requant_shift import ActivationLUTs, PowerOfTwoRequant

    class Pieces(Elaboratable):
        def __init__(self):
            self.products = [ProductLUTs(27, 6, True), ProductLUTs(11, 6, False), ProductLUTs(13, 5, True)]
            act = PowerOfTwoRequant((3,), 4, "floor", (True,), 7)
            self.activation = ActivationLUTs(act, 0, 10, DataType["UINT3"], 0)
            self.bits = Signal(3 * 16)
            self.adders = [RowAdder([[(self.bits[rows * b + r], (b + r) % 3 == 0) for r in range(rows)]
                                     + ([(Const(1, 1), False)] if b == 5 and rows == 2 else []) for b in range(16)],
                                    16, rows) for rows in (3, 2)]
            self.ties = {(rows, bits): TieTest(adder.columns, bits, rows)
                         for rows, adder in zip((3, 2), self.adders) for bits in (3, 8, 13)}
            self.zeros = Signal(len(self.ties))

        def elaborate(self, platform):
            m = Module()
            for k, unit in enumerate(self.products):
                m.submodules[f"p{k}"] = unit
            m.submodules.act = self.activation
            for rows, unit in zip((3, 2), self.adders):
                m.submodules[f"add{rows}"] = unit
                m.d.comb += unit.i.eq(Cat(*unit.sources))
            for k, ((rows, bits), tie) in enumerate(self.ties.items()):
                m.submodules[f"tie{rows}_{bits}"] = tie
                adder = self.adders[rows == 2]
                m.d.comb += [tie.i.eq(adder.i), tie.s.eq(adder.front_s[:bits]), tie.di.eq(adder.di[:bits]),
                             self.zeros[k].eq(tie.zero)]
            return m

    top = Pieces()
    ports = [sig for unit in top.products for sig in (unit.x, unit.p)] + [top.activation.v, top.activation.lane,
                                                                          top.bits, top.zeros] + [u.s for u in top.adders]
    report = synthesize(verilog.convert(top, name="top", ports=ports, emit_src=False), top="top", workdir=tmp_path,
                        hierarchy=True, netlist=("top", "netlist.v"))
    modules = _lut_depths((tmp_path / "netlist.v").read_text())
    products = [modules[f"top.p{k}"][0] for k in range(3)]
    assert all(max(depths.values()) == 1 for depths in products)
    # at most a LUT a bit but bit 0 (the element's own bit; a bit equal to another needs none), none between
    assert sum(map(len, products)) <= sum(len(unit.p) - 1 for unit in top.products)
    assert max(modules["top.act"][0].values()) == 1
    # the ternary adder: S one LUT6 a bit, DI a LUT3 a bit, nothing between them and the chain
    assert max(modules["top.add3.front"][0].values()) == 1 and len(modules["top.add3.front"][0]) == 16
    assert max(modules["top.add3.carry"][0].values()) == 1 and len(modules["top.add3.carry"][0]) <= 15
    assert not modules["top.add3"][0] and max(modules["top.add2"][1]) == 1
    for (rows, bits) in top.ties:       # each group of bits' tests one LUT, their AND the rest of tie_ns's levels
        levels = round(tie_ns(bits, rows) / (NET_NS + LUT6_NS)) - (rows > 2)
        name = f"top.tie{rows}_{bits}"
        groups = [depths for module, (depths, _) in modules.items() if module.startswith(name + ".g")]
        assert groups and all(max(depths.values()) == 1 for depths in groups), (rows, bits)
        assert 1 + max(modules[name][0].values(), default=0) == levels, (rows, bits)
    assert report.lut > 0


@pytest.mark.synth
@pytest.mark.slow
def test_flip_flop_estimate_counts_the_bits_channels_share_once():
    """A register of a channel holds its counters' outputs and the element and pair bits no counter took
    yet; the channels' copies of the latter are the same flip-flop to Yosys (same D, same enable). The
    estimate counts them once per register depth: Yosys's FF count equals it (it counted each channel's
    copy before: 7,841 FF for the pruned jet tagger's MVAU_1 against Yosys's 3,124). 16 s of WebAssembly
    Yosys; the jet tagger's own layers are built in benchmarks/latency.py."""
    from boards.yosys import synthesize
    from layers.distributed import DistributedUnit
    rng = np.random.default_rng(0)
    w = rng.choice([-31, -29, -27, -25, 0, 0, 25, 27, 29, 31], (8, 6))
    spec = _spec(w, "INT5", _line_thresholds(rng, 6, 7, 4), "UINT3", clock_mhz=300.0)
    plan = distributed_plan(spec)
    copies = sum(len(plan.held(c)[r][1]) for c in range(len(plan.channels)) for r in plan.registers[c])
    shared = {(k, bit) for c in range(len(plan.channels)) for k, r in enumerate(plan.registers[c])
              for bit in plan.held(c)[r][1]}
    assert plan.used_pairs() and copies > len(shared) + 50          # the premise: channels share many
    assert synthesize(DistributedUnit(spec)).ff == spec.resource_estimate().ff


def test_a_latency_designs_hardware_onnx_compiled_for_throughput_plans_for_its_fifos(tmp_path, capsys):
    """A --objective latency design's model_hw.onnx (FINN's hardware-layer ONNX, whose folding a compile keeps)
    carries its links: ``input_ns`` > 0 (a producer's tail in the input's cycle), ``output_fifo`` off (no
    FIFO's mux behind). Compiled without the objective, every boundary gets a FIFO: each layer is then
    planned for it (input_ns 0, output_fifo on), not for the links it no longer has."""
    from rtlgen.cli import main

    def links(out):
        layers = json.loads((out / "report.json").read_text())["layers"]
        return {l["name"]: (l["folding"]["input_ns"], bool(l["folding"]["output_fifo"])) for l in layers
                if l["op_type"] == "MVAU"}, [l["op_type"] for l in layers].count("StreamingFIFO")
    assert main(["compile", str(TINY), "-o", str(tmp_path / "lat"), "--fit", "pynq-z2", "--objective", "latency",
                 "--clock-mhz", "200", "--input-dtype", "FIXED<16,6>", "-q"]) == 0
    chained, _ = links(tmp_path / "lat")
    assert any(ns > 0 for ns, _ in chained.values()) and not all(fifo for _, fifo in chained.values())
    assert main(["compile", str(tmp_path / "lat" / "model_hw.onnx"), "-o", str(tmp_path / "thr"), "--clock-mhz", "200",
                 "-q"]) == 0
    again, fifos = links(tmp_path / "thr")
    assert fifos == len(again) + 1 and set(again.values()) == {(0.0, True)}
    capsys.readouterr()
