"""ChannelwiseOp: bit-exact against golden, one word per cycle, clear errors (FINN's grid: Op.examples,
simulated by tests/test_op_grid.py)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from layers.channelwise import ChannelwiseOp, ChannelwiseOpSpec
from layers.datapath import dtype_for_range
from memstream.packing import pack_words, unpack_words
from layers.channelwise import golden_channelwise
from sim.harness import FULL_RATE, Backpressure, simulate_streams
from tests.conftest import RANDOM_EXAMPLES, simulators_under_test, verilog_once




def make_spec(func, channels, pe, idt, pdt, odt=None, vecs=(1,), seed=0):
    """Random parameters over the whole param datatype; ``odt`` None: the tightest type for the results."""
    params = gen_finn_dt_tensor(DataType[pdt], (channels,)) if seed is None else \
        np.random.default_rng(seed).integers(int(DataType[pdt].min()), int(DataType[pdt].max()) + 1, size=channels)
    if odt is None:
        wide = ChannelwiseOpSpec(func, channels, pe, idt, pdt, "INT64", params, vecs)
        odt = "BINARY" if func.startswith("cmp") else dtype_for_range(*wide.result_range).name
    return ChannelwiseOpSpec(func, channels, pe, idt, pdt, odt, params, vecs)


def run(spec, frames, backpressure, simulator=None, seed=1):
    np.random.seed(seed)
    x = gen_finn_dt_tensor(spec.input_dtype, (frames, *spec.num_input_vectors, spec.num_channels))
    expected = golden_channelwise(x, spec.params, spec.func)
    words = pack_words(x.reshape(-1, spec.pe), spec.input_dtype)
    result = simulate_streams(verilog_once(ChannelwiseOp, spec), inputs={"i": list(words)}, outputs={"o": len(words)},
                              backpressure=backpressure, simulator=simulator)
    y = unpack_words(np.array(result.words("o"), dtype=object), spec.output_dtype, spec.pe).reshape(x.shape)
    assert np.array_equal(y, expected)
    return result


def check(spec, simulator=None, seed=1):
    full = run(spec, 3, FULL_RATE, simulator, seed)
    assert full.steady_cycles("o", spec.exp_cycles) == spec.exp_cycles
    run(spec, 3, Backpressure(seed=seed), simulator, seed)


@pytest.mark.sim
@pytest.mark.parametrize("sim_name", simulators_under_test(slow=("verilator",)))
def test_each_simulator(sim_name):
    run(make_spec("mul", 12, 3, "UINT4", "INT5", vecs=(1, 2)), 3, Backpressure(seed=2), sim_name)


@pytest.mark.sim
@settings(max_examples=RANDOM_EXAMPLES)
@given(func=st.sampled_from(["cmp_le", "cmp_ge", "add", "mul"]), cf=st.integers(1, 4), pe=st.integers(1, 3),
       idt=st.sampled_from(["BINARY", "UINT3", "INT4", "INT9"]), pdt=st.sampled_from(["UINT2", "INT3", "INT8"]),
       seed=st.integers(0, 9999))
def test_random_specs(func, cf, pe, idt, pdt, seed):
    # the tightest output datatype, so every result bit the hardware keeps matters
    run(make_spec(func, cf * pe, pe, idt, pdt, vecs=(1, 3), seed=seed), 3, Backpressure(seed=seed), seed=seed)


def test_result_range_and_rom_image():
    spec = ChannelwiseOpSpec("mul", 4, 2, "INT4", "INT4", "INT8", np.array([-3, 0, 2, 7]), (1, 5))
    assert spec.result_range == (-56, 49)
    assert (spec.cf, spec.exp_cycles, spec.in_width, spec.out_width, spec.param_width) == (2, 10, 8, 16, 8)
    # word f holds p[2f] in the low 4 bits and p[2f + 1] above
    assert spec.param_words() == [0x0D, 0x72]
    add = ChannelwiseOpSpec("add", 2, 1, "UINT4", "INT3", "INT6", [-4, 3])
    assert add.result_range == (-4, 18)
    assert set(spec.resource_estimate()) >= {"LUT", "FF", "BRAM18"}


def test_golden_compares_param_on_the_left():
    x = np.array([[1, 5, -2]])
    p = np.array([3, 3, 3])
    assert golden_channelwise(x, p, "cmp_le").tolist() == [[0, 1, 0]]     # p <= x
    assert golden_channelwise(x, p, "cmp_ge").tolist() == [[1, 0, 1]]     # p >= x
    assert golden_channelwise(x, p, "add").tolist() == [[4, 8, 1]]
    assert golden_channelwise(x, p, "mul").tolist() == [[3, 15, -6]]


P6 = np.array([1, -2, 3, -4, 5, -6])


@pytest.mark.parametrize("kwargs, message", [
    (dict(func="sub"), r"^ChannelwiseOp func='sub' is not supported; legal: cmp_le, cmp_ge, add, mul$"),
    (dict(pe=4), r"^ChannelwiseOp pe=4 must divide num_channels=6; legal: 1, 2, 3, 6$"),
    (dict(pe=0), r"^ChannelwiseOp pe must be a positive integer, not 0$"),
    (dict(params=P6[:4]), r"^ChannelwiseOp params must have shape \(6,\), one per channel, not \(4,\)$"),
    (dict(params=P6 + 0.5), r"^ChannelwiseOp params must be integers$"),
    (dict(param_dtype="INT3"), r"^ChannelwiseOp param_dtype=INT3 holds \[-4, 3\] but params reach \[-6, 5\]; "
                               r"use INT4 or wider$"),
    (dict(output_dtype="INT5"), r"^ChannelwiseOp output_dtype=INT5 holds \[-16, 15\] but params mul inputs reach "
                                r"\[-42, 48\]; use INT7 or wider$"),
    (dict(func="cmp_le", output_dtype="INT8"), None),
    (dict(func="add", output_dtype="UINT8"), r"^ChannelwiseOp output_dtype=UINT8 holds \[0, 255\] but params add "
                                             r"inputs reach \[-14, 12\]; use INT9 or wider$"),
    (dict(input_dtype="BIPOLAR"), r"^ChannelwiseOp input_dtype=BIPOLAR is not supported; legal: integer types$"),
    (dict(num_input_vectors=(0,)), r"^ChannelwiseOp num_input_vectors must be positive integers, not \(0,\)$"),
])
def test_illegal_specs(kwargs, message):
    args = dict(func="mul", num_channels=6, pe=2, input_dtype="INT4", param_dtype="INT4", output_dtype="INT8",
                params=P6)
    args.update(kwargs)
    if message is None:         # a compare fits any type holding 0 and 1
        ChannelwiseOpSpec(**args)
        return
    with pytest.raises(ValueError, match=message):
        ChannelwiseOpSpec(**args)
