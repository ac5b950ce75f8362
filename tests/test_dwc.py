"""StreamingDataWidthConverter: identity on the tensor for any width pair, exact cycles, backpressure."""

from math import lcm

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from layers.dwc import DWCSpec, StreamingDataWidthConverter
from memstream.packing import pack_words, unpack_words
from sim.harness import FULL_RATE, Backpressure, simulate_streams
from tests.conftest import RANDOM_EXAMPLES, simulators_under_test


def run_dwc(spec, frames, backpressure, simulator=None):
    """Stream `frames` random frames through the converter; the output must be the same tensor."""
    bits = spec.dtype.bitwidth()
    x = gen_finn_dt_tensor(spec.dtype, (frames, *spec.shape))
    flat = x.reshape(frames, -1)
    words_in = pack_words(flat.reshape(-1, spec.in_width // bits), spec.dtype)
    result = simulate_streams(StreamingDataWidthConverter(spec), inputs={"i": list(words_in)},
                              outputs={"o": frames * spec.out_words}, backpressure=backpressure,
                              simulator=simulator)
    y = unpack_words(np.array(result.words("o"), dtype=object), spec.dtype, spec.out_width // bits)
    assert np.array_equal(y.reshape(x.shape), x)
    return result


# FINN's grid and other ratios, bit-exact at the II and under backpressure: Op.examples, simulated by
# tests/test_op_grid.py. Here what that test does not see: at full rate the narrow side moves a word every
# cycle, one case converting up and one down.
@pytest.mark.sim
@pytest.mark.parametrize("shape, iw, ow, dtype", [((1, 24), 6, 4, "INT2"), ((4, 64), 8, 512, "UINT8")])
def test_narrow_side_never_pauses(shape, iw, ow, dtype, simulator):
    spec = DWCSpec(shape, iw, ow, DataType[dtype])
    full = run_dwc(spec, frames=3, backpressure=FULL_RATE, simulator=simulator)
    stamps = full.in_cycles("i") if iw < ow else full.out_cycles("o")
    assert stamps == list(range(stamps[0], stamps[0] + len(stamps)))


@pytest.mark.sim
@pytest.mark.parametrize("sim_name", simulators_under_test(slow=("verilator",)))     # CI time: see conftest
def test_each_simulator(sim_name):
    run_dwc(DWCSpec((1, 24), 6, 4, DataType["INT2"]), frames=3, backpressure=Backpressure(seed=5), simulator=sim_name)


@pytest.mark.sim
@settings(max_examples=RANDOM_EXAMPLES)
@given(dtype=st.sampled_from(["BIPOLAR", "INT2", "UINT3", "INT8"]), in_lanes=st.integers(1, 24),
       out_lanes=st.integers(1, 24), reps=st.integers(1, 3), seed=st.integers(0, 1000))
def test_random_specs(dtype, in_lanes, out_lanes, reps, seed):
    bits = DataType[dtype].bitwidth()
    spec = DWCSpec((lcm(in_lanes, out_lanes) * reps,), in_lanes * bits, out_lanes * bits, DataType[dtype])
    np.random.seed(seed)
    run_dwc(spec, frames=3, backpressure=Backpressure(seed=seed))


@pytest.mark.parametrize("kwargs, message", [
    ({"shape": (1, 24), "in_width": 0, "out_width": 4}, r"^DWC in_width must be a positive integer, not 0$"),
    ({"shape": (1, 24), "in_width": 6, "out_width": 5, "dtype": "INT2"},
     r"^DWC out_width=5 must be a multiple of the INT2 element width 2$"),
    ({"shape": (1, 6), "in_width": 6, "out_width": 4, "dtype": "BINARY"},
     r"^DWC out_width=4 must divide the frame of 6 bits \(shape \(1, 6\) x 1 bits\)$"),
    ({"shape": (), "in_width": 6, "out_width": 4}, r"^DWC shape must be non-empty"),
])
def test_illegal_specs(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DWCSpec(**kwargs)


def test_derived_figures():
    spec = DWCSpec((1, 24), 6, 4, DataType["INT2"])
    assert (spec.frame_bits, spec.in_words, spec.out_words, spec.exp_cycles) == (48, 8, 12, 12)
    assert spec.buffer_bits == 6 + 4 + 4 - 2
