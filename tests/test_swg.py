"""ConvolutionInputGenerator (both styles): windows bit-exact against Im2Col, exact cycles, clear errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor, qonnx_make_model

from memstream.packing import pack_words, unpack_words
import golden
from swg import golden_depthwise_windows
from sim.harness import FULL_RATE, Backpressure, simulate_streams
from swg import ConvolutionInputGenerator, SWGSpec
from tests.conftest import RANDOM_EXAMPLES, simulators_under_test, verilog_once


def expected_windows(spec, x):
    """The output tensor in emission order, from the golden Im2Col (reordered for depthwise)."""
    if spec.depthwise:
        return golden_depthwise_windows(x, spec.kernel, spec.simd, spec.stride, spec.dilation)
    return golden.im2col(x, spec.kernel, spec.stride, spec.dilation)


def run(spec, frames, backpressure, simulator=None, seed=1):
    np.random.seed(seed)
    x = gen_finn_dt_tensor(spec.input_dtype, (frames, *spec.ifm_dim, spec.ifm_channels))
    words = pack_words(x.reshape(-1, spec.simd), spec.input_dtype)
    result = simulate_streams(verilog_once(ConvolutionInputGenerator, spec), inputs={"i": list(words)},
                              outputs={"o": frames * spec.out_words}, backpressure=backpressure,
                              simulator=simulator)
    y = unpack_words(np.array(result.words("o"), dtype=object), spec.input_dtype, spec.out_lanes)
    assert np.array_equal(y.reshape(frames, -1), expected_windows(spec, x).reshape(frames, -1))
    return result


def check(spec, simulator=None, seed=1):
    """Bit-exact at full rate (cycles per frame = exp_cycles) and under random backpressure."""
    full = run(spec, 3, FULL_RATE, simulator, seed)
    assert full.steady_cycles("o", spec.out_words) == spec.exp_cycles
    run(spec, 2, Backpressure(seed=seed), simulator, seed)


def _spec(case, **kwargs):
    return SWGSpec(case["ifm"], case["c"], case["k"], case["idt"], simd=case["simd"], stride=case["stride"],
                   dilation=case["dilation"], depthwise=case["dw"], parallel_window=case["parallel"], **kwargs)


# Shapes FINN's grid (Op.examples, simulated by tests/test_op_grid.py) misses, each in one style:
# non-square images and kernels, stride above the kernel, a 1x1 kernel with stride, CNV-like full-SIMD
# windows; block RAM buffers.
SHAPES = [
    dict(ifm=(6, 11), c=3, k=(3, 2), stride=(1, 2), dilation=(1, 1), simd=1, dw=False, parallel=False),
    dict(ifm=(6, 11), c=3, k=(3, 2), stride=(1, 2), dilation=(1, 1), simd=1, dw=True, parallel=True),
    dict(ifm=(9, 7), c=2, k=(2, 3), stride=(3, 1), dilation=(2, 1), simd=2, dw=True, parallel=False),
    dict(ifm=(9, 7), c=2, k=(2, 3), stride=(3, 1), dilation=(2, 1), simd=2, dw=False, parallel=True),
    dict(ifm=(10, 10), c=2, k=(2, 2), stride=(3, 3), dilation=(1, 1), simd=1, dw=False, parallel=False),
    dict(ifm=(1, 30), c=4, k=(1, 3), stride=(1, 4), dilation=(1, 2), simd=2, dw=True, parallel=True),
    dict(ifm=(7, 7), c=4, k=(1, 1), stride=(2, 2), dilation=(1, 1), simd=2, dw=False, parallel=True),
    dict(ifm=(10, 10), c=8, k=(3, 3), stride=(1, 1), dilation=(1, 1), simd=8, dw=False, parallel=False,
         ram_style="block"),
    dict(ifm=(10, 10), c=8, k=(3, 3), stride=(1, 1), dilation=(1, 1), simd=8, dw=False, parallel=True,
         ram_style="block"),
]


@pytest.mark.sim
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "-".join(str(v) for v in s.values()))
def test_shapes(shape, simulator):
    shape = dict(shape)
    ram_style = shape.pop("ram_style", "auto")
    check(_spec(dict(shape, idt="INT4"), ram_style=ram_style), simulator)


@pytest.mark.sim
@pytest.mark.parametrize("sim_name", simulators_under_test(slow=("verilator",)))     # CI time: see conftest
@pytest.mark.parametrize("parallel", [False, True])
def test_each_simulator(sim_name, parallel):
    spec = SWGSpec((5, 6), 2, (3, 2), "INT3", simd=2 if parallel else 1, stride=(2, 1), parallel_window=parallel)
    check(spec, sim_name)


@pytest.mark.sim
@settings(max_examples=RANDOM_EXAMPLES)
@given(h=st.integers(1, 9), w=st.integers(1, 9), c=st.sampled_from([1, 2, 3, 4]), kh=st.integers(1, 3),
       kw=st.integers(1, 3), sh=st.integers(1, 3), sw=st.integers(1, 3), dh=st.integers(1, 2), dw=st.integers(1, 2),
       depthwise=st.booleans(), parallel=st.booleans(), data=st.data())
def test_random_specs(h, w, c, kh, kw, sh, sw, dh, dw, depthwise, parallel, data):
    from hypothesis import assume
    assume(dh * (kh - 1) < h and dw * (kw - 1) < w)
    simd = data.draw(st.sampled_from([s for s in range(1, c + 1) if c % s == 0]))
    assume(not parallel or depthwise or simd == c or (kh, kw) == (1, 1))
    spec = SWGSpec((h, w), c, (kh, kw), "INT3", simd=simd, stride=(sh, sw), dilation=(dh, dw),
                   depthwise=depthwise, parallel_window=parallel)
    check(spec, seed=h * 100 + w)


def test_golden_matches_qonnx_im2col():
    from onnx import TensorProto, helper
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx

    x = np.random.default_rng(0).integers(-8, 8, size=(2, 9, 7, 3)).astype(np.float32)
    for kernel, stride, dilation in [((3, 3), (1, 1), (1, 1)), ((2, 3), (2, 1), (2, 1)), ((1, 5), (1, 2), (1, 1))]:
        want = golden.im2col(x, kernel, stride, dilation)
        node = helper.make_node("Im2Col", ["x"], ["y"], domain="qonnx.custom_op.general", stride=list(stride),
                                kernel_size=list(kernel), input_shape=str((1, 9, 7, 3)), dilations=list(dilation))
        graph = helper.make_graph([node], "im2col", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x[:1].shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, want[:1].shape)])
        model = ModelWrapper(qonnx_make_model(graph))
        model.set_tensor_datatype("x", DataType["INT4"])
        for n in range(2):
            got = execute_onnx(model, {"x": x[n:n + 1]})["y"]
            assert np.array_equal(got, want[n:n + 1])


def test_depthwise_golden_is_vvau_order():
    """The depthwise golden is the order the VVAU reads (finn-conventions §5)."""
    from layers.vvau import VVAUSpec
    x = np.random.default_rng(1).integers(0, 4, size=(1, 5, 5, 6))
    windows = golden.im2col(x, (3, 3), (1, 1), (1, 1)).reshape(1, 3, 3, 9, 6)
    spec = VVAUSpec(6, (3, 3), (3, 3), pe=3, simd=3, input_dtype="UINT2", weight_dtype="INT2",
                    weights=np.zeros((6, 1, 3, 3)))
    assert np.array_equal(golden_depthwise_windows(x, (3, 3), 3).reshape(-1), spec.input_order(windows).reshape(-1))


@pytest.mark.parametrize("kwargs, message", [
    (dict(simd=3), r"^ConvolutionInputGenerator simd=3 must divide ifm_channels=4; legal simd: 1, 2, 4$"),
    (dict(kernel=(3, 9)), r"^ConvolutionInputGenerator kernel width 9 with dilation 1 spans 9 pixels but "
                          r"ifm_dim width is 8$"),
    (dict(dilation=(4, 1)), r"^ConvolutionInputGenerator kernel height 3 with dilation 4 spans 9 pixels but "
                            r"ifm_dim height is 8$"),
    (dict(parallel_window=True, simd=2), r"^ConvolutionInputGenerator parallel_window needs simd=ifm_channels=4 "
                                         r"\(got simd=2\) unless depthwise or the kernel is 1x1"),
    (dict(stride=0), r"^ConvolutionInputGenerator stride must be a positive integer or a \(height, width\) pair"),
    (dict(ram_style="ultra"), r"^ConvolutionInputGenerator ram_style must be one of auto, distributed, block"),
    (dict(input_dtype="FLOAT32"), r"^ConvolutionInputGenerator input_dtype=FLOAT32 is not supported"),
])
def test_illegal_specs(kwargs, message):
    args = dict(ifm_dim=(8, 8), ifm_channels=4, kernel=(3, 3), input_dtype="INT4")
    with pytest.raises(ValueError, match=message):
        SWGSpec(**{**args, **kwargs})


def test_derived_figures():
    """CNV's first SWG shape: 32x32x3, 3x3 -> 30x30; the buffer holds two rows plus three pixels."""
    spec = SWGSpec((32, 32), 3, (3, 3), "UINT8", simd=3)
    assert spec.ofm_dim == (30, 30)
    assert spec.window_span == 2 * 32 + 3
    assert spec.folded_output_shape == (1, 30, 30, 9, 3)
    assert spec.out_words == 30 * 30 * 9
    assert spec.exp_cycles >= max(spec.out_words, spec.in_words)
    parallel = SWGSpec((32, 32), 3, (3, 3), "UINT8", simd=3, parallel_window=True)
    assert parallel.folded_output_shape == (1, 30, 30, 1, 27) and parallel.exp_cycles == 32 * 32
