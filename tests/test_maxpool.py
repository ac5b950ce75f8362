"""StreamingMaxPool: bit-exact against golden (itself checked against qonnx/ONNX MaxPool), one word per cycle."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from layers.maxpool import StreamingMaxPool, StreamingMaxPoolSpec
from memstream.packing import pack_words, unpack_words
from layers.maxpool import golden_maxpool
from sim.harness import FULL_RATE, Backpressure, simulate_streams
from tests.conftest import RANDOM_EXAMPLES, simulators_under_test


def run(spec, frames, backpressure, simulator=None, seed=1, x=None):
    np.random.seed(seed)
    if x is None:
        x = gen_finn_dt_tensor(spec.dtype, (frames, *spec.img_dim, spec.num_channels))
    expected = golden_maxpool(x, spec.pool_dim, spec.ceil_mode)
    words = pack_words(x.reshape(-1, spec.lanes), spec.dtype)
    result = simulate_streams(StreamingMaxPool(spec), inputs={"i": list(words)},
                              outputs={"o": len(x) * spec.out_words}, backpressure=backpressure, simulator=simulator)
    y = unpack_words(np.array(result.words("o"), dtype=object), spec.dtype, spec.lanes)
    assert np.array_equal(y.reshape(expected.shape), expected)
    return result


def check(spec, simulator=None, seed=1):
    full = run(spec, 3, FULL_RATE, simulator, seed)
    assert full.steady_cycles("o", spec.out_words) == spec.exp_cycles
    run(spec, 3, Backpressure(seed=seed), simulator, seed)


# Beyond the grid: non-square images and kernels, other datatypes.
CASES_2D = [((6, 6), 3, 2, "UINT3"), ((4, 8), 2, 2, "INT4")]
SLOW_2D = [((8, 8), 2, 3, "INT4"), ((6, 4), (3, 2), 2, "INT8"), ((4, 4), 2, 1, "INT4"), ((4, 4), 2, 3, "BIPOLAR"), ((4, 6), (2, 1), 1, "INT3"), ((4, 4), 4, 2, "BINARY"),
           ((16, 16), 2, 8, "INT8"), ((9, 9), 3, 4, "BIPOLAR"), ((12, 8), 4, 3, "UINT4")]


@pytest.mark.sim
@pytest.mark.parametrize("img, k, ch, dtype", CASES_2D)
def test_2d(img, k, ch, dtype, simulator):
    check(StreamingMaxPoolSpec(img, k, ch, 1, False, dtype), simulator, seed=ch)


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.parametrize("img, k, ch, dtype", SLOW_2D)
def test_2d_rest(img, k, ch, dtype, simulator):
    check(StreamingMaxPoolSpec(img, k, ch, 1, False, dtype), simulator, seed=ch)


@pytest.mark.sim
def test_column_image_is_1d(simulator):
    # A W x 1 image with a k x 1 kernel is 1D (FINN normalises it): the same stream as 1 x W.
    spec = StreamingMaxPoolSpec((7, 1), (2, 1), 4, 2, True, "INT4")
    assert spec.is_1d and spec.out_img_dim == (4, 1) and spec.folded_input_shape == (1, 7, 1, 2, 2)
    check(spec, simulator)


@pytest.mark.sim
def test_extreme_values(simulator):
    # All minimum, all maximum and a single maximum per window at each position.
    spec = StreamingMaxPoolSpec((1, 9), (1, 4), 4, 2, True, "INT4")
    x = np.full((3, 1, 9, 4), -8)
    x[1] = 7
    x[2, 0, ::3, 0] = 7
    x[2, 0, 1::4, 3] = 7
    run(spec, 3, Backpressure(seed=3), simulator, x=x)


@pytest.mark.sim
@pytest.mark.parametrize("sim_name", simulators_under_test(slow=("verilator",)))
def test_each_simulator(sim_name):
    run(StreamingMaxPoolSpec((4, 4), 2, 3, 1, False, "INT4"), 3, Backpressure(seed=2), sim_name)


@pytest.mark.sim
@settings(max_examples=RANDOM_EXAMPLES)
@given(one_d=st.booleans(), rows=st.integers(1, 3), k=st.integers(1, 3), extra=st.integers(0, 2),
       pe=st.integers(1, 3), nf=st.integers(1, 2), ceil=st.booleans(), dtype=st.sampled_from(["INT3", "UINT4", "INT8"]),
       seed=st.integers(0, 9999))
def test_random_specs(one_d, rows, k, extra, pe, nf, ceil, dtype, seed):
    if one_d:
        spec = StreamingMaxPoolSpec((1, k * 2 + extra), (1, k), pe * nf, pe, ceil, dtype)
    else:
        spec = StreamingMaxPoolSpec((rows * k, (rows + extra) * k), k, pe, 1, False, dtype)
    # One run under random backpressure (the grid cases measure cycles).
    run(spec, 3, Backpressure(seed=seed), seed=seed)


def _onnx_maxpool(x, k, ceil_mode):
    """ONNX MaxPool run by onnxruntime on NCHW, which is what qonnx's MaxPoolNHWC executes. The model is
    built with an explicit IR version and run directly, so no onnx/onnxruntime IR mismatch can hit it."""
    import onnxruntime as rt
    from onnx import TensorProto, helper
    from qonnx.custom_op.general.maxpoolnhwc import compute_pool_output_dim

    n, h, w, c = x.shape
    kh, kw = k
    oshape = (n, c, compute_pool_output_dim(h, kh, kh, 0, ceil_mode), compute_pool_output_dim(w, kw, kw, 0, ceil_mode))
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[kh, kw], pads=[0, 0, 0, 0], strides=[kh, kw],
                            ceil_mode=int(ceil_mode))
    graph = helper.make_graph([node], "maxpool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (n, c, h, w))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, oshape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    y = rt.InferenceSession(model.SerializeToString()).run(None, {"x": x.transpose(0, 3, 1, 2).astype(np.float32)})[0]
    return y.transpose(0, 2, 3, 1)


@pytest.mark.parametrize("shape, k, ceil_mode, dtype", [
    ((2, 1, 10, 3), (1, 4), True, "INT4"), ((2, 1, 10, 3), (1, 4), False, "INT4"), ((1, 8, 8, 3), (2, 2), False, "INT4"),
    ((2, 6, 4, 2), (3, 2), False, "BIPOLAR"), ((1, 7, 5, 2), (2, 2), True, "UINT4"), ((1, 1, 9, 1), (1, 2), True, "INT8"),
])
def test_golden_matches_qonnx(shape, k, ceil_mode, dtype):
    np.random.seed(7)
    x = gen_finn_dt_tensor(DataType[dtype], shape)
    assert np.array_equal(golden_maxpool(x, k, ceil_mode), _onnx_maxpool(x, k, ceil_mode))


@pytest.mark.parametrize("kwargs, message", [
    (dict(img_dim=(5, 5), pool_dim=2), r"^StreamingMaxPool img_dim=\(5, 5\) must be a multiple of pool_dim=2 in 2D$"),
    (dict(img_dim=(6, 4), pool_dim=(2, 3)),
     r"^StreamingMaxPool img_dim=\(6, 4\) must be a multiple of pool_dim=\(2, 3\) in 2D$"),
    (dict(img_dim=(1, 8), pool_dim=(1, 2), dtype="BIPOLAR"),
     r"^StreamingMaxPool dtype=BIPOLAR is only supported in 2D \(FINN has no 1D bipolar max pool\)$"),
    (dict(img_dim=(1, 8), pool_dim=(1, 2), pe=2), r"^StreamingMaxPool pe=2 must divide num_channels=3 in 1D; "
                                                  r"legal pe: 1, 3$"),
    (dict(img_dim=(1, 3), pool_dim=(1, 4)), r"^StreamingMaxPool pool_dim=\(1, 4\) must not exceed img_dim=\(1, 3\)$"),
    (dict(img_dim=(0, 4), pool_dim=2), r"^StreamingMaxPool img_dim must be a positive integer or a pair"),
    (dict(img_dim=4, pool_dim=(1, 2, 3)), r"^StreamingMaxPool pool_dim must be a positive integer or a pair"),
    (dict(img_dim=4, pool_dim=2, num_channels=0), r"^StreamingMaxPool num_channels must be a positive integer, not 0$"),
    (dict(img_dim=4, pool_dim=2, dtype="FLOAT32"), r"^StreamingMaxPool dtype=FLOAT32 is not supported"),
])
def test_illegal_specs(kwargs, message):
    args = dict(num_channels=3)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        StreamingMaxPoolSpec(**args)


def test_derived_figures():
    one_d = StreamingMaxPoolSpec((1, 10), (1, 4), 6, 3, True, "INT4")
    assert (one_d.is_1d, one_d.lanes, one_d.nf, one_d.out_img_dim) == (True, 3, 2, (1, 3))
    assert (one_d.in_words, one_d.out_words, one_d.exp_cycles, one_d.buffer_depth) == (20, 6, 20, 2)
    assert StreamingMaxPoolSpec((1, 10), (1, 4), 6, 3, False, "INT4").out_img_dim == (1, 2)
    two_d = StreamingMaxPoolSpec((8, 8), 2, 3, 3, False, "INT4")          # PE ignored in 2D
    assert (two_d.is_1d, two_d.lanes, two_d.nf, two_d.width) == (False, 3, 1, 12)
    assert (two_d.folded_input_shape, two_d.folded_output_shape) == ((1, 8, 8, 1, 3), (1, 4, 4, 1, 3))
    assert (two_d.exp_cycles, two_d.buffer_depth) == (64, 4)
    assert set(two_d.resource_estimate()) == {"LUT", "FF", "BRAM18", "DSP"}
