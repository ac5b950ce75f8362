"""UpsampleNearestNeighbour: bit-exact against golden (itself checked against ONNX Resize), one output
word per cycle, nothing lost under backpressure."""

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from qonnx.util.basic import gen_finn_dt_tensor

from layers.upsample import UpsampleNearestNeighbour, UpsampleNearestNeighbourSpec
from memstream.packing import pack_words, unpack_words
from layers.upsample import golden_upsample
from sim.harness import Backpressure, simulate_streams
from tests.conftest import RANDOM_EXAMPLES, verilog_once


def onnx_resize(x_nchw, scales):
    """ONNX Resize as PyTorch's nn.Upsample(mode="nearest") exports it, run by onnxruntime."""
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest",
                            coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    n, c, h, w = x_nchw.shape
    graph = helper.make_graph(
        [node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_nchw.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, *scales])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x_nchw.astype(np.float32)})[0]


@pytest.mark.parametrize("factor", [(2, 2), (3, 1), (1, 2), (2, 3)])
def test_golden_equals_onnx_resize(factor):
    x = np.random.default_rng(0).integers(-8, 8, (2, 3, 4, 5))            # NCHW
    ours = golden_upsample(x.transpose(0, 2, 3, 1), factor)
    assert np.array_equal(ours.transpose(0, 3, 1, 2), onnx_resize(x, factor))


def run(spec, frames, backpressure, seed=1):
    np.random.seed(seed)
    x = gen_finn_dt_tensor(spec.dtype, (frames, *spec.ifm_dim, spec.num_channels))
    expected = golden_upsample(x, spec.factor)
    words = pack_words(x.reshape(-1, spec.simd), spec.dtype)
    out_words = spec.exp_cycles
    result = simulate_streams(verilog_once(UpsampleNearestNeighbour, spec), inputs={"i": list(words)},
                              outputs={"o": frames * out_words}, backpressure=backpressure)
    y = unpack_words(np.array(result.words("o"), dtype=object), spec.dtype, spec.simd).reshape(expected.shape)
    assert np.array_equal(y, expected)
    return result


# Bit-exact at one word per cycle and under backpressure over a few shapes: Op.examples, simulated by
# tests/test_op_grid.py.


@pytest.mark.sim
@settings(max_examples=RANDOM_EXAMPLES)
@given(h=st.integers(1, 4), w=st.integers(1, 4), sy=st.integers(1, 3), sx=st.integers(1, 3),
       cf=st.integers(1, 3), simd=st.integers(1, 3), dtype=st.sampled_from(["BINARY", "INT3", "UINT8"]),
       seed=st.integers(0, 9999))
def test_random_specs(h, w, sy, sx, cf, simd, dtype, seed):
    spec = UpsampleNearestNeighbourSpec((h, w), (h * sy, w * sx), cf * simd, simd, dtype)
    run(spec, 2, Backpressure(seed=seed), seed=seed)


@pytest.mark.parametrize("kwargs, message", [
    (dict(ifm_dim=(4, 4), ofm_dim=(6, 8), num_channels=2), r"ofm_dim=\(6, 8\) must be a whole multiple"),
    (dict(ifm_dim=4, ofm_dim=8, num_channels=6, simd=4), "simd=4 must divide num_channels=6; legal: 1, 2, 3, 6"),
    (dict(ifm_dim=(4, 0), ofm_dim=8, num_channels=2), "ifm_dim must be a positive integer or a pair"),
    (dict(ifm_dim=4, ofm_dim=8, num_channels=2, dtype="FLOAT32"), "dtype=FLOAT32 is not supported"),
])
def test_bad_specs_name_the_attribute(kwargs, message):
    with pytest.raises(ValueError, match=message):
        UpsampleNearestNeighbourSpec(**kwargs)
