"""FMPadding: bit-exact against golden (itself checked against ONNX Pad), one word per cycle."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qonnx.util.basic import gen_finn_dt_tensor

from layers.fmpadding import FMPadding, FMPaddingSpec
from memstream.packing import pack_words, unpack_words
from layers.fmpadding import golden_fm_padding
from sim.harness import FULL_RATE, Backpressure, simulate_streams
from tests.conftest import RANDOM_EXAMPLES, simulators_under_test, verilog_once




def pad_value(dtype):
    """The value of the all-zero element code (what the hardware pads with): -1 for BIPOLAR, else 0."""
    return -1 if dtype.name == "BIPOLAR" else 0


def run(spec, frames, backpressure, simulator=None, seed=1):
    np.random.seed(seed)
    x = gen_finn_dt_tensor(spec.dtype, (frames, *spec.img_dim, spec.num_channels))
    expected = golden_fm_padding(x, spec.padding, pad_value(spec.dtype))
    words = pack_words(x.reshape(-1, spec.simd), spec.dtype)
    result = simulate_streams(verilog_once(FMPadding, spec), inputs={"i": list(words)},
                              outputs={"o": frames * spec.out_words}, backpressure=backpressure, simulator=simulator)
    y = unpack_words(np.array(result.words("o"), dtype=object), spec.dtype, spec.simd).reshape(expected.shape)
    assert np.array_equal(y, expected)
    return result


def check(spec, simulator=None, seed=1):
    full = run(spec, 3, FULL_RATE, simulator, seed)
    assert full.steady_cycles("o", spec.out_words) == spec.exp_cycles
    run(spec, 3, Backpressure(seed=seed), simulator, seed)


@pytest.mark.sim
@pytest.mark.parametrize("sim_name", simulators_under_test(slow=("verilator",)))
def test_each_simulator(sim_name):
    run(FMPaddingSpec((3, 5), (2, 0, 1, 3), 6, 3, "UINT3"), 3, Backpressure(seed=3), sim_name)


@pytest.mark.sim
@settings(max_examples=RANDOM_EXAMPLES)
@given(h=st.integers(1, 6), w=st.integers(1, 6), pad=st.tuples(*[st.integers(0, 3)] * 4),
       cf=st.integers(1, 3), simd=st.integers(1, 3), dtype=st.sampled_from(["BIPOLAR", "BINARY", "INT3", "UINT8"]),
       seed=st.integers(0, 9999))
def test_random_specs(h, w, pad, cf, simd, dtype, seed):
    # includes no padding at all, single-pixel images and BIPOLAR (padded with code 0 = -1)
    spec = FMPaddingSpec((h, w), pad, cf * simd, simd, dtype)
    result = run(spec, 3, Backpressure(seed=seed), seed=seed)
    assert result.words("o")


@pytest.mark.parametrize("idim, pad", [((8, 8), (1, 3, 2, 3)), ((10, 8), (7, 0, 8, 0)), ((3, 5), (0, 2, 1, 0))])
def test_golden_matches_onnx_pad(idim, pad):
    # onnxruntime directly: qonnx's execute_onnx wraps each node in a model of the newest IR version,
    # which the installed onnxruntime refuses.
    import onnxruntime
    from onnx import TensorProto, helper

    top, left, bottom, right = pad
    x = np.random.default_rng(0).integers(-8, 8, size=(2, *idim, 3)).astype(np.float32)
    out_shape = [2, idim[0] + top + bottom, idim[1] + left + right, 3]
    graph = helper.make_graph(
        [helper.make_node("Pad", ["x", "pads"], ["y"], mode="constant")], "pad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        [helper.make_tensor("pads", TensorProto.INT64, [8], [0, top, left, 0, 0, bottom, right, 0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = session.run(None, {"x": x})[0]
    assert np.array_equal(golden_fm_padding(x, pad), theirs)


def test_derived_figures():
    spec = FMPaddingSpec((10, 8), (1, 3, 2, 3), 4, 2, "INT4")
    assert spec.out_dim == (13, 14)
    assert spec.folded_input_shape == (1, 10, 8, 2, 2)
    assert spec.folded_output_shape == (1, 13, 14, 2, 2)
    assert (spec.in_words, spec.out_words, spec.exp_cycles, spec.width) == (160, 364, 364, 8)
    assert FMPaddingSpec(5, (0, 0, 0, 0), 1, 1, "INT2").img_dim == (5, 5)
    assert set(spec.resource_estimate()) == {"LUT", "FF", "BRAM18", "DSP"}


@pytest.mark.parametrize("kwargs, message", [
    (dict(simd=3), r"^FMPadding simd=3 must divide num_channels=4; legal: 1, 2, 4$"),
    (dict(simd=0), r"^FMPadding simd must be a positive integer, not 0$"),
    (dict(num_channels=-4), r"^FMPadding num_channels must be a positive integer, not -4$"),
    (dict(img_dim=(8, 8, 8)), r"^FMPadding img_dim must be \(h, w\), not \(8, 8, 8\)$"),
    (dict(img_dim=(8, 0)), r"^FMPadding img_dim must be a positive integer, not 0$"),
    (dict(padding=(1, 1, 1)), r"^FMPadding padding must be 4 non-negative integers \[top, left, bottom, right\], "
                              r"not \(1, 1, 1\)$"),
    (dict(padding=(1, -1, 1, 1)), r"^FMPadding padding must be 4 non-negative integers"),
    (dict(dtype="FOO"), r"^FMPadding dtype='FOO' is not a qonnx DataType name$"),
    (dict(dtype="FLOAT32"), r"^FMPadding dtype=FLOAT32 is not supported; legal: BIPOLAR, BINARY, TERNARY"),
])
def test_illegal_specs(kwargs, message):
    args = dict(img_dim=(8, 8), padding=(1, 1, 1, 1), num_channels=4, simd=2, dtype="INT4")
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        FMPaddingSpec(**args)
