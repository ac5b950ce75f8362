"""MVAU ``shared_activation``: the PE lanes take turns at fewer activation units (issue 33, item 2).

Bit-exact against the numpy golden at full rate (cycles per frame exactly SF * NF per vector) and under
random backpressure, the first output word at ``spec.latency`` after input word ``lead_words``, for
requantizers and threshold searches, fabric and DSP lanes (split per product, accumulated in P)."""

from dataclasses import replace

import numpy as np
import pytest
from qonnx.core.datatype import DataType

from layers.mvau import MVAU, MVAUSpec
from memstream.packing import pack_words
from sim.harness import simulate_streams
from tests.test_mvau import check, make_spec
from rtlgen.passes.thresholds import derive_thresholds
from tests.test_requant import float32_codes, generator_layers  # noqa: F401 (a fixture)


def _requant_spec(mw, mh, simd, pe, seed=7, **kwargs):
    """UINT8 x INT8 lanes with an INT8 network's activation (affine thresholds: a requantizer)."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-127, 128, size=(mw, mh))
    plain = MVAUSpec(mw, mh, simd, pe, "UINT8", "INT8", w, output_dtype=None)
    lo, hi = plain.acc_range()
    scale = 255 * 0.1 / ((hi - lo) * rng.uniform(0.2, 0.6, size=mh))
    codes = float32_codes(scale, rng.normal(0, 3, size=mh), 0.1, 0, 255)
    t = derive_thresholds(codes, lo, hi, mh, 0, 255)
    return MVAUSpec(mw, mh, simd, pe, "UINT8", "INT8", w, t, "UINT8", **kwargs)


def _first_output_latency(spec):
    rng = np.random.default_rng(3)
    x = rng.integers(int(spec.input_dtype.min()), int(spec.input_dtype.max()) + 1, (spec.sf, spec.simd))
    result = simulate_streams(MVAU(spec), inputs={"i": [int(v) for v in pack_words(x, spec.input_dtype)]},
                              outputs={"o": spec.nf})
    return result.out_cycles("o")[0] - result.in_cycles("i")[spec.lead_words - 1]


@pytest.mark.sim
@pytest.mark.parametrize("simd, pe, res_type, units", [
    (2, 8, "lut", 1),       # SF 4 >= 8 / 2 turns: two units of the eight
    (1, 8, "dsp", 1),       # lanes accumulated in P, eight turns at one requantizer
    (4, 4, "dsp", 2),       # split per product; SF 2: two turns of two
])
def test_requantizers_shared_bit_exact_and_cycle_exact(simd, pe, res_type, units):
    mw = {1: 8, 2: 8, 4: 8}[simd]
    spec = _requant_spec(mw, 2 * pe, simd, pe, shared_activation=True, res_type=res_type,
                         mem_mode="internal_embedded")
    assert spec.requant is not None
    assert spec.activation_lanes == max(units, pe // spec.sf) and spec.activation_groups == pe // spec.activation_lanes
    assert spec.activation_groups > 1
    check(spec)
    assert _first_output_latency(spec) == spec.latency


@pytest.mark.sim
@pytest.mark.parametrize("act", ["INT4", "BIPOLAR"])
def test_threshold_searches_shared_bit_exact_and_cycle_exact(act):
    spec = make_spec(16, 12, 2, 6, "INT4", "INT4", act, shared_activation=True, activation_style="thresholds")
    assert spec.requant is None and spec.activation_lanes == 1 and spec.activation_groups == 6
    check(spec)
    assert _first_output_latency(spec) == spec.latency


@pytest.mark.sim
def test_shared_lanes_with_one_step_between_folds_at_the_limit():
    # G == SF: the next fold's copy lands in the cycle of the last turn
    spec = _requant_spec(4, 8, 1, 4, shared_activation=True, res_type="dsp", mem_mode="internal_decoupled")
    assert spec.sf == 4 and spec.activation_groups == 4
    check(spec, frames=4, backpressure_seed=5)


def test_one_requantizer_for_the_generators_last_layer_shape(generator_layers):
    # SIMD 1 x PE 392 over MW 512: 392 requantizers of 2 DSP48E1 each, busy one cycle in 512, or one
    node = generator_layers[2]
    spec = node.spec(SIMD=1, PE=392, resType="dsp", activation_style="requant", mem_mode="internal_embedded")
    shared = node.spec(SIMD=1, PE=392, resType="dsp", activation_style="requant", mem_mode="internal_embedded",
                       shared_activation=True)
    assert spec.requant is not None and spec.requant.multiplier_bits > 17     # 2 DSP48E1 a requantizer
    assert spec.activation_lanes == 392 and shared.activation_lanes == 1 and shared.activation_groups == 392
    per_lane, one = spec.resource_estimate(), shared.resource_estimate()
    assert per_lane.dsp == 196 + 392 * 2 and one.dsp == 196 + 2
    assert one.lut < per_lane.lut / 4       # 392 requantizers against one, its word ROM in block RAM
    assert shared.activation_stages == 392 + spec.activation_stages
    assert shared.latency - spec.latency == 392


def test_sharing_needs_a_fold_to_take_turns_in():
    # SF 1: no cycle to spare, one unit per lane as before; no activation: nothing to share
    spec = _requant_spec(8, 16, 8, 8, shared_activation=True)
    assert spec.sf == 1 and spec.activation_lanes == 8 and spec.activation_groups == 1
    plain = MVAUSpec(8, 16, 1, 8, "UINT8", "INT8", np.ones((8, 16), dtype=int), shared_activation=True)
    assert plain.activation_lanes == 8 and plain.output_dtype == DataType[plain.acc_dtype().name]
