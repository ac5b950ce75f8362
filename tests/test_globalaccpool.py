"""GlobalAccPool: bit-exact against golden, one input word per cycle, FINN's output datatype."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from layers.globalaccpool import GlobalAccPool, GlobalAccPoolSpec
from memstream.packing import pack_words, unpack_words
from layers.globalaccpool import golden_global_acc_pool
from sim.harness import FULL_RATE, Backpressure, simulate_streams
from tests.conftest import RANDOM_EXAMPLES, simulators_under_test


def run(spec, frames, backpressure, simulator=None, seed=1, x=None):
    np.random.seed(seed)
    n, h, w = spec.num_input_vectors
    if x is None:
        x = gen_finn_dt_tensor(spec.input_dtype, (frames * n, h, w, spec.num_channels))
    expected = golden_global_acc_pool(x)
    words = pack_words(x.reshape(-1, spec.pe), spec.input_dtype)
    result = simulate_streams(GlobalAccPool(spec), inputs={"i": list(words)},
                              outputs={"o": len(x) // n * spec.out_words}, backpressure=backpressure,
                              simulator=simulator)
    y = unpack_words(np.array(result.words("o"), dtype=object), spec.output_dtype, spec.pe)
    assert np.array_equal(y.reshape(expected.shape), expected)
    return result


def check(spec, simulator=None, seed=1):
    full = run(spec, 3, FULL_RATE, simulator, seed)
    assert full.steady_cycles("o", spec.out_words) == spec.exp_cycles
    run(spec, 3, Backpressure(seed=seed), simulator, seed)


# FINN's 7x7x64 case at a few PEs and small images: Op.examples, simulated by tests/test_op_grid.py.


@pytest.mark.sim
def test_extremes(simulator):
    # Every pixel at min, then at max: the sums reach both ends of the output datatype's needed range.
    spec = GlobalAccPoolSpec(4, 2, "INT4", (1, 4, 4))
    x = np.stack([np.full((4, 4, 4), -8), np.full((4, 4, 4), 7)])
    assert spec.output_dtype.name == "INT8"             # 16 * -8 = -128
    run(spec, 2, Backpressure(seed=9), simulator, x=x)


@pytest.mark.sim
@pytest.mark.parametrize("sim_name", simulators_under_test(slow=("verilator",)))
def test_each_simulator(sim_name):
    run(GlobalAccPoolSpec(6, 3, "INT4", (2, 2, 3)), 3, Backpressure(seed=2), sim_name)


@pytest.mark.sim
@settings(max_examples=RANDOM_EXAMPLES)
@given(nf=st.integers(1, 4), pe=st.integers(1, 4), n=st.integers(1, 2), h=st.integers(1, 4), w=st.integers(1, 4),
       idt=st.sampled_from(["UINT2", "INT3", "BIPOLAR", "INT8"]), seed=st.integers(0, 9999))
def test_random_specs(nf, pe, n, h, w, idt, seed):
    # One run under random backpressure (the grid cases measure cycles).
    run(GlobalAccPoolSpec(nf * pe, pe, idt, (n, h, w)), 3, Backpressure(seed=seed), seed=seed)


@pytest.mark.parametrize("idt, vecs, odt", [("INT4", (1, 7, 7), "INT10"), ("UINT4", (1, 7, 7), "UINT10"),
                                             ("INT8", (1, 1, 1), "INT8"), ("UINT8", (3, 2, 2), "UINT10"),
                                             ("BIPOLAR", (1, 2, 2), "INT4"), ("INT2", (1, 2, 4), "INT5")])
def test_output_dtype(idt, vecs, odt):
    # FINN: smallest INT holding H*W*min if signed, else smallest UINT holding H*W*max.
    assert GlobalAccPoolSpec(4, 2, idt, vecs).output_dtype == DataType[odt]


@pytest.mark.parametrize("kwargs, message", [
    (dict(pe=3), r"^GlobalAccPool pe=3 must divide num_channels=4; legal pe: 1, 2, 4$"),
    (dict(num_channels=0), r"^GlobalAccPool num_channels must be a positive integer, not 0$"),
    (dict(num_input_vectors=(7, 7)), r"^GlobalAccPool num_input_vectors must be \(N, H, W\) of positive integers, "
                                     r"not \(7, 7\)$"),
    (dict(num_input_vectors=(1, 0, 7)), r"^GlobalAccPool num_input_vectors must be \(N, H, W\)"),
    (dict(input_dtype="FLOAT32"), r"^GlobalAccPool input_dtype=FLOAT32 is not supported"),
])
def test_illegal_specs(kwargs, message):
    args = dict(num_channels=4, pe=2, input_dtype="INT4", num_input_vectors=(1, 7, 7))
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        GlobalAccPoolSpec(**args)


def test_derived_figures():
    spec = GlobalAccPoolSpec(64, 16, "UINT4", (2, 7, 7))
    assert (spec.cf, spec.in_width, spec.out_width, spec.output_dtype.name) == (4, 64, 160, "UINT10")
    assert (spec.folded_input_shape, spec.folded_output_shape) == ((2, 7, 7, 4, 16), (2, 1, 1, 4, 16))
    assert (spec.words, spec.out_words, spec.exp_cycles) == (392, 8, 392)
    assert set(spec.resource_estimate()) == {"LUT", "FF", "BRAM18", "DSP"}
    assert np.array_equal(golden_global_acc_pool(np.ones((1, 2, 3, 2))), np.full((1, 1, 1, 2), 6))
