"""The INT8 throughput pipelines with their registers where a 200 MHz clock needs them (issue 43; the
register-to-register Fmax estimate of boards.timing): Booth-row lanes sum one adder level a cycle (two ~20-bit
carry chains in one were ~181 MHz), DSP48E1 chains sum their canaries' rises column by column (a SIMD-term sum in
one cycle was ~134 MHz), and the canaries' carry is one subtraction. Each bit-exact at full rate and under
backpressure, its first output word ``latency`` cycles after the lead word (the cycle model says so)."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.test_latency_pipeline import _first_out_after_lead
from tests.test_mvau import check, make_spec

CASES = {   # id: (res_type, mw, mh, simd, pe, ram_style, activation)
    "booth-rows": ("lut", 16, 4, 8, 2, "block", None),         # 32 rows a lane: five adder levels, five stages
    "dsp-chain": ("dsp", 24, 4, 8, 4, "block", "INT4"),        # chains_in_dsp, column ROMs in block RAM
    "dsp-accumulate": ("dsp", 8, 4, 1, 2, "distributed", None),    # accumulates_in_dsp: the pair in P
}


@pytest.mark.sim
@pytest.mark.parametrize("case", list(CASES))
def test_int8_pipeline_bit_exact_at_its_latency(case, simulator):
    res_type, mw, mh, simd, pe, ram_style, act = CASES[case]
    spec = make_spec(mw, mh, simd, pe, "UINT8", "INT8", act, res_type=res_type, mem_mode="internal_embedded",
                     ram_style=ram_style)
    w = np.array(spec.weights)
    w[:, 0], w[::2, 1] = -128, 127              # the extreme weights: every Booth digit, the most carries
    spec = replace(spec, weights=w, thresholds=spec.thresholds)
    assert spec.booth_products == (case == "booth-rows") and spec.chains_in_dsp == (case == "dsp-chain")
    assert spec.accumulates_in_dsp == (case == "dsp-accumulate")
    if spec.booth_products:     # one adder level a stage: 4 registers between the 5 levels, and the sum's
        assert spec.tree_levels_per_stage == 1 and spec.registers_sum
    assert _first_out_after_lead(spec, simulator) == spec.latency
    check(spec, simulator=simulator)


GENERATOR = Path(__file__).parent / "models" / "gen_mlp_int8.onnx"


@pytest.mark.synth
@pytest.mark.slow
def test_generator_first_layer_and_its_fifo_meet_200_mhz_between_registers():
    """The INT8 generator's first layer as `--fit pynq-z2 --clock-mhz 200` folds it (PE 8 x SIMD 4, packed
    DSP48E1 lanes, weights in block RAM, one shared requantizer taking turns over the 256 channels) and a
    32 x 32 FIFO (the generator's first): every register-to-register path by Yosys sta and the delay model of
    boards.timing under 5 ns, each analysed between registers as a part of a build is. Before (issue 43):
    the requantizer's stage 5 (raw + 1, the listed levels' comparisons and raw - up + down: two carry
    chains, ~136 MHz in MVAU_1/2), the word ROM read at the turn counter's next value behind its
    incrementer's CARRY4 (~153-174 MHz), the FIFO's level + write - read into its max_count (~176 MHz)."""
    from boards.yosys import synthesize
    from layers.fifo import FIFOSpec, StreamingFIFO
    from layers.mvau import MVAU
    from tests.conftest import lowered_once
    _, graph = lowered_once(GENERATOR)
    node = next(n for n in graph.nodes if n.op_type == "MVAU")
    spec = node.spec(PE=8, SIMD=4, resType="dsp", ram_style="block", mem_mode="internal_embedded",
                     activation_style="requant", shared_activation=1)
    assert spec.requant is not None and spec.requant.exception_slots > 0 and spec.activation_lanes == 1
    for name, component in (("MVAU_0", MVAU(spec)), ("FIFO 32 x 32", StreamingFIFO(FIFOSpec(32, 32)))):
        path = synthesize(component, sta=True, between_registers=True).paths["top"]
        assert path.fmax_mhz >= 200, (name, path)
