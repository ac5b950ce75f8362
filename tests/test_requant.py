"""The exact requantizer: equal to the thresholds the compiler derives, in numpy and in RTL.

The golden model is the threshold table itself (a count of thresholds at or below the input), derived
from the model's float32 nodes by the compiler, or here from a float32 affine + quantizer written out in
numpy. The form is checked on every input of small ranges and near every threshold of large ones.
"""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qonnx.core.datatype import DataType

from layers.mvau import MVAUSpec
from layers.requant import fit_requant
from layers.requant_hw import REQUANT_STAGES
from layers.thresholding import ThresholdingSpec
from rtlgen.passes.thresholds import derive_thresholds
from tests.conftest import RANDOM_EXAMPLES
from tests.test_thresholding import check as check_thresholding

MODELS = Path(__file__).parent / "models"


def float32_codes(scale, bias, out_scale, qmin, qmax):
    """codes(acc): a float32 Mul (per-channel scale), Add (bias), then a quantizer's division, round half
    to even and clip: the float ops an INT8 layer runs between its accumulator and its output codes."""
    scale, bias = np.float32(scale), np.float32(bias)

    def codes(acc):
        y = np.asarray(acc, dtype=np.float32) * scale + bias
        return np.clip(np.round(y / np.float32(out_scale)), qmin, qmax).astype(np.int64)
    return codes


def table_counts(t, x):
    """#{k : T[c, k] <= x[n, c]} per channel: the threshold semantics."""
    return np.stack([np.searchsorted(t[c], x[:, c], side="right") for c in range(t.shape[0])], axis=1)


def near_thresholds(t, lo, hi, rng, n=4000):
    """Inputs (N, C): every threshold -2..+2, plus uniform draws over [lo, hi]."""
    near = np.concatenate([t.T + d for d in range(-2, 3)], axis=0)
    x = np.concatenate([near, rng.integers(lo, hi + 1, size=(n, t.shape[0]))], axis=0)
    return np.clip(x, lo, hi)


@pytest.fixture(scope="module")
def generator_layers():
    from tests.conftest import lowered_once
    _, graph = lowered_once(MODELS / "gen_mlp_int8.onnx")      # one lowering for test_compiler's tests too
    return [n for n in graph.nodes if n.op_type == "MVAU"]


def test_exact_on_the_generators_three_layers(generator_layers):
    rng = np.random.default_rng(0)
    assert len(generator_layers) == 3
    for node in generator_layers:
        spec = node.spec()
        form = spec.requant                     # activation_style auto: 255 levels get the requantizer
        assert form is not None and form.levels == 255
        t, (lo, hi) = spec.table.thresholds, spec.table.value_range
        x = near_thresholds(t, lo, hi, rng)
        assert np.array_equal(form.counts(x), table_counts(t, x)), node.name
        assert form.shared_multiplier and form.exception_slots <= 3     # per-tensor scales: one M
        # the form replaces 255 thresholds per channel by one word of M/B/corrected levels
        assert form.word_width * 20 < 255 * spec.table.storage_shape.width


@settings(max_examples=max(RANDOM_EXAMPLES, 10) * 5, deadline=None)
@given(channels=st.integers(1, 6), bits=st.sampled_from([4, 6, 8]), signed_out=st.booleans(),
       acc_span=st.integers(200, 30_000), seed=st.integers(0, 2**32 - 1))
def test_exact_on_random_per_channel_scales_and_biases(channels, bits, signed_out, acc_span, seed):
    rng = np.random.default_rng(seed)
    lo, hi = -acc_span, acc_span
    levels = (1 << bits) - 1
    qmin = -(1 << (bits - 1)) if signed_out else 0
    out_scale = float(rng.uniform(0.01, 1))
    # per channel: a scale putting the levels somewhere across the range, a bias shifting them
    scale = out_scale * levels / (acc_span * rng.uniform(0.3, 3, size=channels))
    scale *= rng.choice([1, 1, 1, -1], size=channels)                   # decreasing channels too
    bias = rng.normal(0, levels * out_scale / 2, size=channels)
    codes = float32_codes(scale, bias, out_scale, qmin, qmin + levels)
    sign = np.where(scale < 0, -1, 1)
    t = derive_thresholds(lambda acc: codes(acc * sign), lo, hi, channels, qmin, levels)
    form = fit_requant(t, (lo, hi))
    assert form is not None
    x = np.repeat(np.arange(lo, hi + 1)[:, None], channels, axis=1)      # every input
    assert np.array_equal(form.counts(x), table_counts(t, x))


def test_power_of_two_scales_use_round_half_even():
    # acc * 2^-4 quantized with round-half-even: every other level boundary is an exact tie
    t = derive_thresholds(float32_codes(2.0 ** -4, 0.0, 1.0, -128, 127), -4096, 4095, 1, -128, 255)
    form = fit_requant(t, (-4096, 4095))
    assert form.rounding == "half_even" and form.exception_slots == 0


def test_no_form_for_thresholds_off_a_line():
    t = np.sort(np.random.default_rng(3).integers(-30_000, 30_000, size=(4, 255)), axis=1)
    assert fit_requant(t, (-30_000, 30_000)) is None
    spec = ThresholdingSpec(4, 2, "INT16", "UINT8", t)                # auto falls back to the search
    assert spec.requant is None
    with pytest.raises(ValueError, match=r"^Thresholding activation_style=requant: these 255 thresholds per "
                                         r"channel have no exact requantizer .* legal here: thresholds, auto$"):
        ThresholdingSpec(4, 2, "INT16", "UINT8", t, activation_style="requant")
    with pytest.raises(ValueError, match=r"^Thresholding activation_style must be one of auto, thresholds, "
                                         r"requant, not 'lut'$"):
        ThresholdingSpec(4, 2, "INT16", "UINT8", t, activation_style="lut")


def affine_thresholds(channels, idt, odt, seed):
    rng = np.random.default_rng(seed)
    lo, hi = int(DataType[idt].min()), int(DataType[idt].max())
    qmin, levels = int(DataType[odt].min()), (1 << DataType[odt].bitwidth()) - 1
    scale = levels * 0.05 / ((hi - lo) * rng.uniform(0.5, 1.5, size=channels))
    codes = float32_codes(scale, rng.normal(0, 2, size=channels), 0.05, qmin, qmin + levels)
    return derive_thresholds(codes, lo, hi, channels, qmin, levels), qmin


@pytest.mark.sim
@pytest.mark.parametrize("channels, pe", [(8, 2), (4, 4)])
def test_standalone_thresholding_requantizes_bit_exact(channels, pe):
    t, qmin = affine_thresholds(channels, "INT16", "INT8", seed=channels)
    spec = ThresholdingSpec(channels, pe, "INT16", "INT8", t, qmin, (1, 3), activation_style="requant")
    assert spec.requant is not None and spec.latency == 1 + REQUANT_STAGES + 2
    check_thresholding(spec)                  # golden thresholds, full rate (cycle-exact), backpressure


@pytest.mark.sim
def test_mvau_requantizes_bit_exact():
    from tests.test_mvau import check as check_mvau
    rng = np.random.default_rng(7)
    w = rng.integers(-128, 128, size=(16, 8))
    plain = MVAUSpec(16, 8, 4, 2, "INT8", "INT8", w, output_dtype=None)
    lo, hi = plain.acc_range()
    scale = 255 * 0.1 / ((hi - lo) * rng.uniform(0.2, 0.6, size=8))
    codes = float32_codes(scale, rng.normal(0, 3, size=8), 0.1, 0, 255)
    t = derive_thresholds(codes, lo, hi, 8, 0, 255)
    spec = MVAUSpec(16, 8, 4, 2, "INT8", "INT8", w, t, "UINT8", res_type="dsp")
    assert spec.requant is not None
    assert spec.resource_estimate().bram18 == 0
    check_mvau(spec)


def test_report_names_the_style_and_why_a_table_stays(generator_layers):
    from layers.requant import activation_summary
    from rtlgen.ir.graph import DataflowGraph
    from rtlgen.report.graph import graph_report
    t = np.sort(np.random.default_rng(3).integers(-30_000, 30_000, size=(4, 255)), axis=1)
    summary = activation_summary(ThresholdingSpec(4, 2, "INT16", "UINT8", t))
    assert summary["style"] == "thresholds" and summary["levels"] == 255
    assert summary["note"] == ("255 thresholds per channel stored: no exact requantizer (a line with at most 32 "
                               "corrected levels per channel)")
    assert "note" not in activation_summary(ThresholdingSpec(4, 2, "INT16", "UINT8", t,
                                                             activation_style="thresholds"))
    rows = graph_report(DataflowGraph.chain(generator_layers))
    assert [r["activation"]["style"] for r in rows[:3]] == ["requant"] * 3
    assert all(r["activation"]["multiplier_bits"] <= 24 for r in rows[:3])


def _hand_form(rounding, shared):
    """Three channels of 15 levels over [-60, 70], their levels listed up and down (more than a fit lists,
    so that each flag decides some count): up at the clip's ends too (level 0 up: raw - 1 below 0; level
    15 down: raw + 1 at the top), neighbouring levels up and down, a slot not listed (valid 0)."""
    from layers.requant import RequantForm
    mult = np.array([3, 3, 3] if shared else [3, 5, 2], dtype=np.int64)
    ex = np.zeros((3, 16, 3), dtype=np.int64)
    ex[0] = [(1, level % 2 == 0, level) for level in range(16)]         # up at even levels, down at odd
    ex[1] = [(level != 4, level % 2 == 1, level) for level in range(16)]
    ex[2, :3] = [(1, 0, 8), (1, 1, 9), (1, 0, 10)]
    return RequantForm(mult, np.array([40, -7, 100], dtype=np.int64), 4, rounding, ex, 15, (-60, 70), shared)


@pytest.mark.parametrize("rounding, shared", [("floor", False), ("floor", True), ("half_even", False), ("half_even", True)])
def test_requantizer_pipeline_equals_the_form_at_every_accumulator(rounding, shared):
    """The six-stage requantizer (layers.requant_hw.requantize) alone, one lane reading the three channels'
    words in turn: every accumulator of the range of each channel, at full rate (each count exactly
    REQUANT_STAGES cycles after its accumulator) and under a random stall pattern (advance low: every
    register holds), against the form's numpy function (listed levels corrected up and down, the clip)."""
    from amaranth.hdl import Module, Signal, signed
    from amaranth.sim import Simulator
    from layers.requant_hw import requantize
    form = _hand_form(rounding, shared)
    lo, hi = form.value_range
    xs = [(x, c) for x in range(lo, hi + 1) for c in range(form.channels)]
    want = form.counts(np.array([[x] * form.channels for x, _ in xs]))[np.arange(len(xs)), [c for _, c in xs]]
    assert (form.counts(np.arange(lo, hi + 1)[:, None].repeat(3, 1)) != np.clip(
        form.raw_counts(form.multipliers * np.arange(lo, hi + 1)[:, None] + form.offsets)[0], 0, 15)).sum() >= 20
    m = Module()
    advance, valid = Signal(), Signal()
    acc, cf = Signal(signed(9)), Signal(range(form.channels))
    v_out, counts = requantize(m, advance, valid, [acc], cf, form, 1)
    for stalls in (False, True):
        got, cycles = [], []
        rng = np.random.default_rng(5)

        async def bench(ctx):
            k, cycle = 0, 0
            while len(got) < len(xs):
                go = 1 if not stalls else int(rng.random() < 0.6)
                feed = k < len(xs) and (not stalls or rng.random() < 0.8)
                ctx.set(advance, go)
                ctx.set(valid, int(feed))
                if feed:
                    ctx.set(acc, xs[k][0])
                    ctx.set(cf, xs[k][1])
                if go and ctx.get(v_out):
                    got.append(ctx.get(counts[0]))
                    cycles.append(cycle)
                k += int(feed and go)
                cycle += 1
                await ctx.tick()
        sim = Simulator(m)
        sim.add_clock(1e-8)
        sim.add_testbench(bench)
        sim.run()
        assert got == list(want), (stalls, [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if g != w][:4])
        if not stalls:
            assert cycles == [REQUANT_STAGES + i for i in range(len(xs))]
