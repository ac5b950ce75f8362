"""Fixed-point inputs, as hls4ml users declare them (``--input-dtype "FIXED<16,6>"``, hls4ml's default
ap_fixed<16,6>), on the QKeras-shaped jet tagger 16-64-32-32-5 (tests/models/jet_tagger): 6-bit weights,
biases quantized on their own (MatMul -> Add(Quant(bias))), 6-bit ReLUs, Softmax on the host.

The host rounds float features onto the grid (ties to even) and saturates what lies outside, with a
warning; the hardware sees 16-bit codes at scale 2^-10. Golden: qonnx ``execute_onnx`` on the original
model, fed the features on that grid (the model's semantics for an input of that type), computed here
independently of rtlgen's conversion."""

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import rtl_at_the_ii_under_backpressure
from rtlgen.cli import main
from rtlgen.options import CompileOptions
from rtlgen.passes.to_hw import stream_io
from rtlgen.check.execute import run_golden
from rtlgen.passes.load import load_model
from rtlgen.ir.host import submodel
from rtlgen.passes.lower import lower
from rtlgen.check.verify import compare, qonnx_reference

MODEL = Path(__file__).parent / "models" / "jet_tagger" / "jet_tagger.onnx"
FEATURES = Path(__file__).parent / "models" / "jet_tagger" / "features.npy"
FIXED = "FIXED<16,6>"
STEP = 2.0 ** -10


def on_grid(x):
    """ap_fixed<16,6, AP_RND_CONV, AP_SAT> by hand: nearest multiple of 2^-10, ties to even, in -32..32-2^-10."""
    return np.clip(np.round(np.asarray(x, np.float64) / STEP), -2 ** 15, 2 ** 15 - 1) * STEP


def features(n=32):
    x = np.load(FEATURES)[:n].copy()
    x[0, 0, :4] = [40.0, -40.0, 0.5 * STEP, 1.5 * STEP]     # saturated both ways, two ties
    return x


def test_the_host_rounds_ties_to_even_and_saturates():
    model = load_model(MODEL, FIXED)
    io = stream_io(model, lower(model))
    assert io.input.dtype.name == "INT16" and io.input.scale == STEP and io.input.fixed == FIXED
    with pytest.warns(UserWarning, match=r"2 of 512 input values lie outside FIXED<16,6> \(-32\.\.31\.999\)"):
        codes = io.input_codes(features(32))
    np.testing.assert_array_equal(codes[0, :4], [2 ** 15 - 1, -2 ** 15, 0, 2])
    np.testing.assert_array_equal(io.on_input_grid(features(32)).reshape(32, -1),
                                  on_grid(features(32)).astype(np.float32).reshape(32, -1))


def test_lowered_graph_is_bit_exact_with_qonnx_on_the_grid():
    model = load_model(MODEL, FIXED)
    graph = lower(model)
    io = stream_io(model, graph)
    assert [n.op_type for n in graph.nodes] == ["MVAU"] * 4
    x = features(64)
    with pytest.warns(UserWarning):
        ours = io.output_from_codes(run_golden(graph, io.input_codes(x)))
    reference = qonnx_reference(MODEL, on_grid(x).astype(np.float32))
    assert compare(ours, reference).exact


@pytest.mark.sim
def test_rtl_at_the_ii_and_under_backpressure(tmp_path):
    x = features(12)
    with pytest.warns(UserWarning):
        outputs, _ = rtl_at_the_ii_under_backpressure(MODEL, x, tmp_path, CompileOptions(input_dtype=FIXED), seed=3)
    assert compare(outputs, qonnx_reference(MODEL, on_grid(x).astype(np.float32))).exact

def test_verify_names_the_saturated_values_and_passes(tmp_path, capsys):
    np.save(tmp_path / "x.npy", features(8))
    code = main(["verify", str(MODEL), "-o", str(tmp_path / "out"), "--input-dtype", FIXED,
                 "--input", str(tmp_path / "x.npy"), "-q"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "rtlgen verify: warning: 2 of 128 input values lie outside FIXED<16,6> (-32..31.999) and were " \
           "saturated" in captured.err
    assert "bit-exact: 8 samples" in captured.out


@pytest.mark.parametrize("bad, legal", [("FIXED<40,6>", "FIXED<w,i> takes w = 2..32 bits"),
                                        ("FLOAT32", "not an integer or fixed-point qonnx DataType")])
def test_bad_input_dtypes_are_refused(tmp_path, capsys, bad, legal):
    assert main(["compile", str(MODEL), "-o", str(tmp_path / "out"), "--input-dtype", bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--input-dtype {bad}" in err[0] and legal in err[0], err


def test_a_host_part_that_would_read_a_missing_tensor_is_a_bug_not_zeros():
    """Before biases were folded at load, the host's last Add read the bias Quant's output, which the host
    part did not compute: qonnx then fed zeros. Such a cut is now refused."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.gemm_to_matmul import GemmToMatMul
    from qonnx.util.cleanup import cleanup_model
    model = cleanup_model(cleanup_model(ModelWrapper(str(MODEL))).transform(GemmToMatMul()))
    add = [n for n in model.graph.node if n.op_type == "Add"][-1]
    with pytest.raises(ValueError, match=r"host host_post: node Add_3 \(Add\) reads Quant_7_out0"):
        submodel(model, [add.name], [add.input[0]], [add.output[0]], "host_post")
