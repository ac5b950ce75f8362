"""VVAU: depthwise products bit-exact against golden, exact cycles, clear errors (FINN's grid: Op.examples,
simulated by tests/test_op_grid.py)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from layers.vvau import VVAU, VVAUSpec
from layers.vvau import golden_vvau
from sim.harness import FULL_RATE, Backpressure
from tests.conftest import RANDOM_EXAMPLES
from tests.mvau_util import activation_args, run_unit


def make_spec(channels, kernel, dim, pe, simd, idt, wdt, act, seed=0, **kwargs):
    rng = np.random.default_rng(seed)
    np.random.seed(seed)
    w = gen_finn_dt_tensor(DataType[wdt], (channels, 1, *kernel))
    probe = VVAUSpec(channels, kernel, dim, pe, simd, idt, wdt, w)
    thresholds, odt, act_val = activation_args(act, rng, channels, probe.acc_range())
    if act is not None and not DataType[act].signed():
        act_val = 0
    return VVAUSpec(channels, kernel, dim, pe, simd, idt, wdt, w, thresholds, odt, act_val, **kwargs)


def check(spec, frames=2, seed=1, simulator=None):
    """Random windows in plain (..., K, C) order; the stream carries them in the depthwise SWG order."""
    np.random.seed(seed)
    windows = gen_finn_dt_tensor(spec.input_dtype, (frames, *spec.dim, spec.in_elems, spec.channels))
    expected = golden_vvau(windows, spec.weight_matrix(), spec.thresholds, spec.act_val, spec.xnor,
                           spec.output_dtype.name == "BIPOLAR")
    x = spec.input_order(windows)
    lanes = spec.simd * spec.pe
    full = run_unit(VVAU(spec), spec, x, expected, FULL_RATE, simulator, in_lanes=lanes)
    assert full.steady_cycles("o", spec.nf * spec.dim[0] * spec.dim[1]) == spec.exp_cycles
    run_unit(VVAU(spec), spec, x, expected, Backpressure(seed=seed), simulator, in_lanes=lanes)


@pytest.mark.sim
@pytest.mark.parametrize("mode", [pytest.param("internal_embedded", marks=pytest.mark.slow),  # CI time (24 s): the
                                  "internal_decoupled", "external"])     # embedded ROM in RTL is test_mvau's (one unit)
def test_mem_modes(mode):
    check(make_spec(6, (3, 3), (2, 3), 2, 3, "INT4", "INT4", "INT4", mem_mode=mode))


@pytest.mark.sim
@settings(max_examples=RANDOM_EXAMPLES)
@given(nf=st.integers(1, 3), pe=st.sampled_from([1, 2, 4]), kernel=st.sampled_from([(3, 3), (1, 5), (2, 2)]),
       simd_pick=st.integers(0, 8), idt=st.sampled_from(["BIPOLAR", "INT4", "UINT2"]),
       wdt=st.sampled_from(["BIPOLAR", "INT3"]), act=st.sampled_from([None, "BIPOLAR", "INT4"]),
       seed=st.integers(0, 9999))
def test_random_specs(nf, pe, kernel, simd_pick, idt, wdt, act, seed):
    k = kernel[0] * kernel[1]
    divisors = [d for d in range(1, k + 1) if k % d == 0]
    spec = make_spec(nf * pe, kernel, (2, 2), pe, divisors[simd_pick % len(divisors)], idt, wdt, act, seed=seed)
    check(spec, seed=seed)


def test_input_order_is_finn_depthwise_order():
    # word nf*SF + sf, element simd*PE + pe = kernel position sf*SIMD + simd of channel nf*PE + pe
    spec = VVAUSpec(4, (2, 2), (1, 1), 2, 2, "UINT8", "UINT2", np.ones((4, 1, 2, 2), dtype=int))
    windows = np.arange(16).reshape(4, 4)          # windows[k, c] = 4k + c
    words = spec.input_order(windows)
    for nf, sf, simd, pe in itertools.product(range(2), range(2), range(2), range(2)):
        assert words[nf * 2 + sf, simd * 2 + pe] == 4 * (sf * 2 + simd) + (nf * 2 + pe)


def test_derived_numbers():
    spec = make_spec(6, (3, 3), (10, 10), 3, 9, "UINT4", "UINT4", None)
    assert (spec.sf, spec.nf, spec.wmem) == (1, 2, 2)
    assert spec.exp_cycles == 6 * 9 // (3 * 9) * 100
    assert spec.folded_input_shape == (1, 10, 10, 2, 27) and spec.folded_output_shape == (1, 10, 10, 2, 3)


@pytest.mark.parametrize("kwargs, message", [
    (dict(pe=4), r"^VVAU pe=4 must divide channels=6; legal pe: 1, 2, 3, 6$"),
    (dict(simd=2), r"^VVAU simd=2 must divide the 9 kernel positions; legal simd: 1, 3, 9$"),
    (dict(kernel=(3,)), r"^VVAU kernel must be two positive integers"),
    (dict(weights=np.ones((6, 9), dtype=int)), r"^VVAU weights must have shape \(6, 1, 3, 3\), not \(6, 9\)$"),
])
def test_illegal_specs(kwargs, message):
    args = dict(channels=6, kernel=(3, 3), dim=(4, 4), pe=2, simd=3, input_dtype="UINT4", weight_dtype="INT4",
                weights=np.ones((6, 1, 3, 3), dtype=int))
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        VVAUSpec(**args)
