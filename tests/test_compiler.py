"""The compiler on real models: lowering checked against qonnx's execution of the original model.

The lowered chain runs on the layers' independent numpy goldens (:mod:`rtlgen.check.execute`), between the
host pre/post models the compiler cut off; qonnx ``execute_onnx`` of the untouched model is the
reference. The RTL of the same chains is checked in ``test_cli_verify.py``. No HDL here: fast.
"""

from pathlib import Path

import numpy as np
import pytest

from rtlgen.passes.to_hw import stream_io
from rtlgen.demo import DEMO_MODEL, DEMO_TESTSET, bundled
from rtlgen.check.execute import run_golden
from rtlgen.check.verify import FLOAT32_RTOL, compare, qonnx_reference, tolerance
from tests.conftest import lowered_once

MODELS = Path(__file__).parent / "models"


def mnist(n):
    d = np.load(MODELS / "mnist_test_1000.npz")
    return (d["x"][:n].astype(np.float32) / 255).reshape(n, 1, 28, 28), d["y"][:n]


def cifar():
    return np.load(MODELS / "cifar10_cifar10-test-data-class3.npz")["arr_0"].astype(np.float32)


def digits_model(bits):
    """The w1a1 digits MLP is a test model; the w2a2 one ships with rtlgen (the demo's)."""
    return MODELS / "digits_tfc_w1a1i1_clean.onnx" if bits == 1 else Path(str(bundled(DEMO_MODEL)))


def digits(bits):
    d = np.load(MODELS / "digits_tfc_w1a1i1_testset.npz" if bits == 1 else str(bundled(DEMO_TESTSET)))
    return d["x"], d["y"]


def random_normal(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def lowered(path):
    model, flow = lowered_once(Path(path))       # read only here: shared with the other tests of the process
    return flow, stream_io(model, flow)


def golden_outputs(path, x):
    """The model's outputs as the compiled chain computes them: host pre -> layer goldens -> host post."""
    flow, io = lowered(path)
    return io.output_from_codes(run_golden(flow.nodes, io.input_codes(x))), io, flow


# (model, inputs, expected layer ops, expected host ops before / after)
CASES = {
    "TFC_1W1A": (lambda: mnist(100)[0], ["MVAU"] * 4, 4, 4),
    "TFC_1W2A": (lambda: mnist(100)[0], ["MVAU"] * 4, 4, 4),
    "TFC_2W2A": (lambda: mnist(100)[0], ["MVAU"] * 4, 4, 4),
    # 40 of the 360 test digits: the whole set is test_cli_verify's (qonnx's execution costs ~0.15 s a digit)
    "digits_tfc_w1a1i1_clean": (lambda: digits(1)[0][:40], ["MVAU"] * 4, 4, 4),
    "cnv_1w1a_ts_clean": (cifar, None, 3, 4),
    "cnv_2w2a_ts_clean": (cifar, None, 3, 4),
    "gen_mlp_int8": (lambda: random_normal((20, 100)), ["MVAU"] * 3, 1, 0),
    "small_cnn": (lambda: random_normal((20, 1, 8, 8)), [
        "FMPadding", "ConvolutionInputGenerator", "MVAU", "StreamingMaxPool", "ConvolutionInputGenerator", "MVAU",
        "GlobalAccPool", "Thresholding", "MVAU"], 1, 1),
}
CNV_OPS = ["ConvolutionInputGenerator", "MVAU"] * 2 + ["StreamingMaxPool"] + ["ConvolutionInputGenerator", "MVAU"] * 2 \
    + ["StreamingMaxPool"] + ["ConvolutionInputGenerator", "MVAU"] * 2 + ["MVAU"] * 3


@pytest.mark.parametrize("name", CASES)
def test_lowering_matches_qonnx(name):
    make_input, ops, pre, post = CASES[name]
    path = MODELS / f"{name}.onnx"
    x = make_input()
    ours, io, flow = golden_outputs(path, x)
    assert [n.op_type for n in flow.nodes] == (ops or CNV_OPS)
    assert (len(flow.host_pre), len(flow.host_post)) == (pre, post)
    result = compare(ours, qonnx_reference(path, x), rtol=tolerance(io))
    assert result.exact or (io.output.rounding and result.passed), result.summary()


def test_finn_dialect_tfc_golden_io():
    """FINN's own build_dataflow test model (MultiThreshold, MatMul, Mul, TopK) and its golden output."""
    x = np.load(MODELS / "build_dataflow_input.npy")
    expected = np.load(MODELS / "build_dataflow_expected_output.npy")
    ours, io, flow = golden_outputs(MODELS / "build_dataflow_model.onnx", x)
    assert [n.op_type for n in flow.nodes] == ["Thresholding"] + ["MVAU"] * 4 + ["LabelSelect"]
    assert io.output.kind == "indices"
    assert np.array_equal(np.asarray(ours).reshape(-1), expected.reshape(-1))


def test_digits_accuracy_equals_trained_figures():
    """Both digits MLPs over their full test sets: the accuracy their trainer measured (models README)."""
    for bits, accuracy in ((1, 0.9111), (2, 0.9667)):
        x, y = digits(bits)
        ours, _, _ = golden_outputs(digits_model(bits), x)
        assert abs((ours.argmax(axis=1) == y).mean() - accuracy) < 5e-5


@pytest.mark.slow
@pytest.mark.parametrize("name", ["TFC_1W1A", "TFC_1W2A", "TFC_2W2A"])
def test_zoo_tfc_accuracy_on_1000_images_equals_qonnx(name):
    x, y = mnist(1000)
    path = MODELS / f"{name}.onnx"
    ours, _, _ = golden_outputs(path, x)
    ref = qonnx_reference(path, x)
    assert compare(ours, ref).exact
    assert (ours.argmax(axis=1) == y).mean() == (ref.argmax(axis=1) == y).mean()


def test_gan_lowering_facts():
    """The INT8 generator: int8 in, three MVAUs, ReLU/HardTanh folded into 8-bit thresholds, float bias
    absorbed (no host op after the accelerator), output exact (a quantizer ends the model)."""
    flow, io = lowered(MODELS / "gen_mlp_int8.onnx")
    specs = [n.spec() for n in flow.nodes]
    assert [(s.mw, s.mh) for s in specs] == [(100, 256), (256, 512), (512, 784)]
    assert [s.input_dtype.name for s in specs] == ["INT8", "UINT8", "UINT8"]
    assert [s.weight_dtype.name for s in specs] == ["INT8"] * 3
    assert [s.output_dtype.name for s in specs] == ["UINT8", "UINT8", "INT8"]
    assert not io.output.rounding and flow.host_post == []


def test_float_output_tolerance_is_tight():
    """small_cnn ends in an unquantized MatMul with float scales: the tolerance allows float32 rounding
    only; one output code off is a mismatch."""
    x = random_normal((8, 1, 8, 8), seed=3)
    path = MODELS / "small_cnn.onnx"
    flow, io = lowered(path)
    assert io.output.rounding
    codes = run_golden(flow.nodes, io.input_codes(x))
    ref = qonnx_reference(path, x)
    assert compare(io.output_from_codes(codes), ref, rtol=FLOAT32_RTOL).passed
    codes[3, 7] += 1
    bad = compare(io.output_from_codes(codes), ref, rtol=FLOAT32_RTOL)
    assert not bad.passed and bad.bad_elements == 1 and "sample 3 [7]" in bad.summary()
