"""The INT8 generator MLP at 200 MHz on the PYNQ-Z2 budget (issue 33, item 2): shared activations free the
DSP48E1s the per-lane requantizers held, and two INT8 lanes per DSP48E1 carry the last layer.

Slow (the folding optimizer over ~4,000 options, a whole-design Verilator build): the optimizer's II at
--fit's default shares (LUT and FF x 0.8, DSP and BRAM36 x 0.95), with every resource at 0.8 and at 0.95,
and the default design in RTL: bit-exact against qonnx, cycles per frame within 2 % of the II at full rate,
the same outputs under random backpressure."""

from pathlib import Path

import numpy as np
import pytest

from rtlgen.options import CompileOptions
from rtlgen.passes.load import load_model
from rtlgen.fit import Budget
from rtlgen.passes.optimize import optimize_folding
from rtlgen.passes.to_hw import to_hw
from tests.conftest import rtl_matches_qonnx

MODEL = Path(__file__).parent / "models" / "gen_mlp_int8.onnx"


def _optimized(share=None):
    graph = to_hw(load_model(str(MODEL)), CompileOptions())
    return graph, optimize_folding(graph, Budget.for_board("pynq-z2", share))


@pytest.mark.slow
def test_shared_activations_lift_the_generator_past_ii_2048_under_the_cap():
    # II 2,048 before (the per-lane requantizers' DSPs); the last layer has no folding between 1,568 and
    # 2,048 besides 1,792, and 1,024 needs 202 DSP48E1 (> 176 under the 0.8 cap): see benchmarks/gen_int8_bound.py
    graph, result = _optimized(0.8)
    assert result.ii == 1792
    assert all(n.folding.get("shared_activation") for n in graph.nodes if n.op_type == "MVAU")


@pytest.mark.slow
@pytest.mark.parametrize("share", [None, 0.95])
def test_two_int8_lanes_per_dsp_reach_ii_1024_with_95_percent_of_the_dsps(share):
    # 200 MHz / 1,024 cycles = 195,312 frames/s: issue 33 asks for 150,000 at --fit pynq-z2 --clock-mhz 200
    graph, result = _optimized(share)
    assert result.ii == 1024 and result.used["DSP"] <= 0.95 * 220 and result.used["LUT"] <= (share or 0.8) * 53200
    last = graph.nodes[-1].spec()
    assert last.dsp_packing is not None and last.pe * last.simd == 392 and last.activation_lanes < last.pe


@pytest.mark.slow
@pytest.mark.sim
def test_generator_at_ii_1024_in_rtl_bit_exact_and_under_backpressure(tmp_path):
    x = (2 * np.random.default_rng(0).standard_normal((4, 100))).astype(np.float32)
    options = CompileOptions.create(fit="pynq-z2", clock_mhz=200)
    rtl_matches_qonnx(MODEL, x, tmp_path / "out", options=options, seed=4)
