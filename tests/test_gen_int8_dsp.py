"""The INT8 generator MLP at 200 MHz on the PYNQ-Z2 budget (issue 33, item 2): shared activations free the
DSP48E1s the per-lane requantizers held, and the last layer's 392 MACs a cycle fit (as Booth-row fabric lanes
since issue 43, where they cost less by the optimizer's objective than two INT8 lanes per DSP48E1).

Slow (the folding optimizer over ~4,000 options, a whole-design Verilator build): the optimizer's II at
--fit's default shares (LUT and FF x 0.8, DSP and BRAM36 x 0.95), with every resource at 0.8 and at 0.95,
and the default design in RTL: bit-exact against qonnx, cycles per frame within 2 % of the II at full rate,
the same outputs under random backpressure."""

from pathlib import Path

import numpy as np
import pytest

from rtlgen.costmodel import estimate
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
    # (II 1,792 until issue 43's Booth-row lanes; 1,568 since, 2026-11-27)
    graph, result = _optimized(0.8)
    assert result.ii < 2048
    assert all(n.folding.get("shared_activation") for n in graph.nodes if n.op_type == "MVAU")


def _objective(cost, budget):
    """What the optimizer minimizes (rtlgen.passes.optimize._cheapest_within), for one option: its cost in units of
    the budget, summed over LUT, FF, BRAM18 and DSP."""
    return sum(float(cost[r]) / limit for r, limit in zip(("LUT", "FF", "BRAM18", "DSP"), budget.as_vector()))


@pytest.mark.slow
def test_ii_1024_with_the_last_layer_no_costlier_than_two_int8_lanes_per_dsp(share=None):
    # 200 MHz / 1,024 cycles = 195,312 frames/s: issue 33 asks for 150,000 at --fit pynq-z2 --clock-mhz 200.
    # The last layer's 392 MACs a cycle were two INT8 lanes a DSP48E1 (PE 98 x SIMD 4) while fabric lanes cost
    # ~130-160 LUT a MAC; as radix-4 Booth rows (an adder level a cycle) they cost ~78, and the optimizer takes them
    # (PE 49 x SIMD 8: 30,650 LUT / 2 DSP against 10,641 LUT / 198 DSP, 1.83 against 2.11 of its objective; by
    # Yosys the whole designs: 44,450 LUT / 26 DSP at 503ed92 against 32,726 / 204 at 2026-11-26): two lanes a
    # DSP48E1 remain an option, priced, not a requirement (issue 43)
    graph, result = _optimized(share)
    budget = Budget.for_board("pynq-z2", share)
    assert result.ii == 1024 and result.used["DSP"] <= 0.95 * 220 and result.used["LUT"] <= (share or 0.8) * 53200
    node = graph.nodes[-1]
    last = node.spec()
    assert last.pe * last.simd == 392 and last.activation_lanes < last.pe
    pairs = node.spec(**{**node.folding, "PE": 98, "SIMD": 4, "resType": "dsp"})
    assert pairs.dsp_packing is not None and pairs.exp_cycles == last.exp_cycles == 1024
    assert _objective(estimate(last), budget) <= _objective(estimate(pairs), budget)


@pytest.mark.slow
def test_every_resource_at_95_percent_reaches_ii_1024_or_faster():
    # II 1,024 before issue 43's Booth rows; II 896 since (50,205 LUT by the estimate, 2026-11-27)
    graph, result = _optimized(0.95)
    assert result.ii <= 1024 and result.used["DSP"] <= 0.95 * 220 and result.used["LUT"] <= 0.95 * 53200


@pytest.mark.slow
@pytest.mark.sim
def test_generator_at_ii_1024_in_rtl_bit_exact_and_under_backpressure(tmp_path):
    x = (2 * np.random.default_rng(0).standard_normal((4, 100))).astype(np.float32)
    options = CompileOptions.create(fit="pynq-z2", clock_mhz=200)
    rtl_matches_qonnx(MODEL, x, tmp_path / "out", options=options, seed=4)
