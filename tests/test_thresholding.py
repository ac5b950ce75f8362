"""Thresholding: bit-exact against golden, one word per cycle, clear errors (FINN's grid: Op.examples,
simulated by tests/test_op_grid.py)."""

from math import prod

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from layers.thresholding import Thresholding, ThresholdingSpec, ThresholdTable
from memstream.packing import pack_words, unpack_words
import golden
from sim.harness import FULL_RATE, Backpressure, simulate_streams
from sim.runner import available_simulators
from tests.conftest import RANDOM_EXAMPLES, simulators_under_test


def make_spec(channels, pe, idt, tdt, act, vecs=(1,), narrow=False, per_tensor=False, seed=0, **kwargs):
    """Random ascending thresholds drawn from the threshold datatype's range (may exceed the input's)."""
    rng = np.random.default_rng(seed)
    odt = DataType[act]
    steps = 1 if act == "BIPOLAR" else (1 << odt.bitwidth()) - 1 - int(narrow)
    act_val = 0 if act == "BIPOLAR" else int(odt.min()) + int(narrow)
    tlo, thi = int(DataType[tdt].min()), int(DataType[tdt].max())
    t = np.sort(rng.integers(tlo, thi + 1, size=(1 if per_tensor else channels, steps)), axis=1)
    return ThresholdingSpec(channels, pe, idt, odt, t, act_val, vecs, **kwargs)


def run(spec, frames, backpressure, simulator=None, seed=1):
    np.random.seed(seed)
    x = gen_finn_dt_tensor(spec.input_dtype, (frames, *spec.num_input_vectors, spec.num_channels))
    expected = golden.multithreshold(x, spec.thresholds, spec.act_val, bipolar=spec.output_dtype.name == "BIPOLAR")
    words = pack_words(x.reshape(-1, spec.pe), spec.input_dtype)
    result = simulate_streams(Thresholding(spec), inputs={"i": list(words)}, outputs={"o": len(words)},
                              backpressure=backpressure, simulator=simulator)
    y = unpack_words(np.array(result.words("o"), dtype=object), spec.output_dtype, spec.pe).reshape(x.shape)
    assert np.array_equal(y, expected)
    return result


def check(spec, simulator=None, seed=1):
    full = run(spec, 3, FULL_RATE, simulator, seed)
    assert full.steady_cycles("o", spec.exp_cycles) == spec.exp_cycles
    run(spec, 3, Backpressure(seed=seed), simulator, seed)


@pytest.mark.sim
@pytest.mark.parametrize("sim_name", simulators_under_test(slow=("verilator",)))    # CI time: see conftest
def test_each_simulator(sim_name):
    check(make_spec(16, 4, "INT8", "INT9", "INT4", (1, 2)), sim_name)


@pytest.mark.sim
def test_eight_bit_output():
    # 255 thresholds per channel: an 8-stage search, wide (INT16) inputs.
    check(make_spec(8, 2, "INT16", "INT16", "UINT8", (1, 3)))      # the grid's simulator (a cold Verilator
    # build of this cocotb bench cost ~50 s of the default suite; Verilator runs it in test_each_simulator)


@pytest.mark.sim
@settings(max_examples=RANDOM_EXAMPLES)
@given(cf=st.integers(1, 4), pe=st.sampled_from([1, 2, 3]), idt=st.sampled_from(["INT3", "UINT4", "INT12"]),
       steps=st.integers(1, 20), act_val=st.integers(-4, 4), per_tensor=st.booleans(), seed=st.integers(0, 9999))
def test_random_specs(cf, pe, idt, steps, act_val, per_tensor, seed):
    # Any step count (padded to 2^N - 1 inside), thresholds anywhere, including far outside the input range.
    rng = np.random.default_rng(seed)
    t = np.sort(rng.integers(-5000, 5000, size=(1 if per_tensor else cf * pe, steps)), axis=1)
    odt = DataType["INT8"]
    check(ThresholdingSpec(cf * pe, pe, idt, odt, t, act_val, (1, 2)), seed=seed)


def test_stage_images_follow_finn_layout():
    # Stage s, lane pe, entry (cf << s) | i holds T[cf*PE + pe][(2i + 1) * 2^(N-1-s) - 1].
    t = np.arange(4 * 7).reshape(4, 7) * 3
    table = ThresholdTable("Thresholding", t, 4, 2, (-1000, 1000))
    images = table.stage_images()
    assert [img.shape for img in images] == [(2, 2), (2, 4), (2, 8)]
    assert images[0][1][1] == t[3][3]           # cf=1, pe=1: the middle threshold
    assert images[2][0][(1 << 2) | 3] == t[2][6]  # cf=1, pe=0, last stage, i=3 -> index 6


def test_thresholds_are_clipped_and_padded():
    table = ThresholdTable("Thresholding", np.array([[-500, 3, 900]]), 1, 1, (-8, 7))
    assert table.padded().tolist() == [[-8, 3, 8]]
    table = ThresholdTable("Thresholding", np.array([[1.5, 2, 4]]), 2, 1, (0, 15))
    assert table.padded().tolist() == [[2, 2, 4], [2, 2, 4]]      # ceil, broadcast per tensor
    table = ThresholdTable("Thresholding", np.array([[1, 2, 3, 4]]), 1, 1, (0, 15))
    assert table.stages == 3 and table.padded().tolist() == [[1, 2, 3, 4, 16, 16, 16]]


T15 = np.tile(np.arange(15), (6, 1))


@pytest.mark.parametrize("kwargs, message", [
    (dict(pe=4), r"^Thresholding pe=4 must divide num_channels=6; legal pe: 1, 2, 3, 6$"),
    (dict(thresholds=T15[:, ::-1]), r"^Thresholding thresholds row 0 is not ascending"),
    (dict(thresholds=T15[:4]), r"^Thresholding thresholds must have shape \(6, S\) or \(1, S\)"),
    (dict(output_dtype="UINT3"), r"^Thresholding output_dtype=UINT3 holds \[0, 7\] but act_val \+ counts"),
    (dict(output_dtype="BIPOLAR"), r"^Thresholding output_dtype=BIPOLAR needs 1 threshold per channel"),
    (dict(input_dtype="BIPOLAR"), r"^Thresholding input_dtype=BIPOLAR is not supported"),
    (dict(thresholds=np.full((6, 15), np.nan)), r"^Thresholding thresholds must be finite numbers$"),
    (dict(num_input_vectors=(1, 0)), r"^Thresholding num_input_vectors must be positive integers"),
    (dict(ram_style="ultra"), r"^Thresholding ram_style must be one of auto, distributed, block"),
])
def test_illegal_specs(kwargs, message):
    args = dict(num_channels=6, pe=2, input_dtype="INT8", output_dtype="UINT4", thresholds=T15)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        ThresholdingSpec(**args)


def test_exp_cycles():
    spec = make_spec(16, 4, "INT8", "INT8", "INT4", (1, 2, 2))
    assert spec.exp_cycles == prod((1, 2, 2)) * 4
    assert spec.table.stages == 4


@pytest.mark.sim
@pytest.mark.parametrize("sim_name", simulators_under_test(slow=("verilator",) if "icarus" in available_simulators()
                                                            else ()))      # CI time: 38 s cold on Verilator
def test_runtime_writeable_thresholds(sim_name):
    # Rewrite every threshold over AXI-Lite (FINN's address map), including values beyond the input
    # range that the threshold datatype allows; then the stream must follow the new thresholds.
    spec = make_spec(6, 2, "INT8", "INT10", "INT4", (1, 2), runtime_writeable=True, threshold_dtype="INT10")
    new = np.sort(np.random.default_rng(5).integers(-512, 512, size=(6, 15)), axis=1)
    writes = [(spec.threshold_address(c, i), int(new[c, i]) & 0xFFFFFFFF) for c in range(6) for i in range(15)]
    illegal = [spec.threshold_address(0, 15), spec.threshold_address(6, 0)]    # index 2^N - 1; cf = 3
    writes += [(addr, 0) for addr in illegal]
    np.random.seed(2)
    x = gen_finn_dt_tensor(spec.input_dtype, (3, 1, 2, 6))
    expected = golden.multithreshold(x, new, spec.act_val)
    words = pack_words(x.reshape(-1, spec.pe), spec.input_dtype)
    result = simulate_streams(Thresholding(spec), inputs={"i": list(words)}, outputs={"o": len(words)},
                              backpressure=Backpressure(seed=4), simulator=sim_name, axilite_writes=writes)
    assert result.axilite_responses() == [0] * 90 + [2, 2]
    y = unpack_words(np.array(result.words("o"), dtype=object), spec.output_dtype, spec.pe).reshape(x.shape)
    assert np.array_equal(y, expected)


def test_threshold_address_map():
    spec = make_spec(12, 4, "INT8", "INT8", "INT4")         # N = 4, PE = 4 (2 bits), CF = 3 (2 bits)
    assert spec.axilite_addr_width == 2 + 4 + 2 + 2
    assert spec.threshold_address(0, 0) == 0
    assert spec.threshold_address(1, 3) == ((1 << 4) | 3) * 4
    assert spec.threshold_address(9, 14) == (((2 << 2) + 1) << 4 | 14) * 4
