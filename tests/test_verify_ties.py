"""`verify` at rounding ties (issue 17 item 6): a Brevitas MLP with decimal scales (0.05, 0.1), where
qonnx's float32 dot products land on Quant's round-half-to-even boundaries. The accelerator must equal
the model's exact semantics (checked here against a numpy model of them written from the network's
definition), qonnx's differences must all be ties, and any other difference still fails."""

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rtlgen import api
from rtlgen.cli import main
from rtlgen.check.exact import TieReport, _classify, exact_reference
from rtlgen.check.verify import qonnx_reference, verify_outputs
from sim.harness import Backpressure

MODELS = Path(__file__).parent / "models"
DECIMAL = MODELS / "decimal" / "brevitas_decimal_mlp.onnx"


def decimal_inputs(n, seed=1):
    return np.random.default_rng(seed).uniform(-6, 6, (n, 32)).astype(np.float32)


def numpy_exact_semantics(x):
    """The decimal MLP by hand: integer codes, exact integer dot products, each accumulator scaled to
    float32 once, then ReLU and Quant (round half to even, in float32, as the model's Quant computes)."""
    model = onnx.load(DECIMAL)
    init = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    quants = [n for n in model.graph.node if n.op_type == "Quant"]
    scale = [np.float32(init[q.input[1]]) for q in quants]     # input, w0, w1, relu, output (export order)
    gemms = [n for n in model.graph.node if n.op_type == "Gemm"]
    weight_codes = []
    for gemm in gemms:
        producer = next(q for q in quants if q.output[0] == gemm.input[1])
        w = init[producer.input[0]]
        trans_b = next((a.i for a in gemm.attribute if a.name == "transB"), 0)
        weight_codes.append(np.round((w.T if trans_b else w) / np.float32(init[producer.input[1]])).astype(np.int64))
    w_scales = [np.float32(init[next(q for q in quants if q.output[0] == g.input[1]).input[1]]) for g in gemms]
    s_in, s_act, s_out = scale[0], scale[3], scale[4]

    def quant(v, s, lo, hi):
        return np.clip(np.round(np.float32(v) / np.float32(s)), lo, hi).astype(np.int64)

    codes = quant(x.astype(np.float32), s_in, -128, 127)
    y0 = (codes @ weight_codes[0] * (np.float64(s_in) * np.float64(w_scales[0]))).astype(np.float32)
    hidden = quant(np.maximum(y0, np.float32(0)), s_act, 0, 31)
    y1 = (hidden @ weight_codes[1] * (np.float64(s_act) * np.float64(w_scales[1]))).astype(np.float32)
    return (quant(y1, s_out, -128, 127).astype(np.float32) * s_out).astype(np.float32)


@pytest.fixture(scope="module")
def decimal_design(tmp_path_factory):
    return api.compile(str(DECIMAL), tmp_path_factory.mktemp("decimal") / "out")


def test_exact_reference_equals_the_exact_semantics_by_hand():
    x = decimal_inputs(50)                              # 27 ties among them (the suite's time: 200 took 36 s)
    exact, ties = exact_reference(DECIMAL, x)
    assert np.array_equal(exact, numpy_exact_semantics(x))
    qonnx = qonnx_reference(DECIMAL, x)
    assert not np.array_equal(qonnx, exact)             # the model really has ties
    assert ties.tie_count > 0 and ties.explained, ties.summary()


def test_power_of_two_model_has_no_ties():
    d = np.load(MODELS / "mnist_test_1000.npz")
    x = (d["x"][:5].astype(np.float32) / 255).reshape(5, 1, 28, 28)
    exact, ties = exact_reference(MODELS / "TFC_2W2A.onnx", x)
    assert np.array_equal(exact, qonnx_reference(MODELS / "TFC_2W2A.onnx", x))
    assert ties.tie_count == 0 and ties.explained


@pytest.mark.sim
def test_verify_passes_at_ties_with_a_note(tmp_path, capsys):
    x = decimal_inputs(32)
    np.save(tmp_path / "x.npy", x)
    code = main(["verify", str(DECIMAL), "--input", str(tmp_path / "x.npy")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "equal to the model's exact semantics: 32 samples, 320 output values" in out
    assert "rounding ties in qonnx's float32 execution" in out


@pytest.mark.sim
def test_hardware_equals_exact_semantics_and_one_code_off_fails(decimal_design):
    x = decimal_inputs(32)
    outputs = decimal_design.simulate(x).outputs
    assert np.array_equal(outputs.reshape(32, -1), numpy_exact_semantics(x))
    stalled = decimal_design.simulate(x, backpressure=Backpressure(seed=5)).outputs      # random valid/ready
    assert np.array_equal(stalled, outputs)
    result = verify_outputs(decimal_design.model, x, outputs, decimal_design.io)
    assert result.passed and result.at_ties and not result.exact
    assert result.bad_elements > 0 and result.ties.tie_count > 0

    qonnx = qonnx_reference(DECIMAL, x).reshape(32, -1)
    flat = outputs.reshape(32, -1)
    agree = np.argwhere(flat == qonnx)[0]           # one code off where no tie is involved
    wrong = flat.copy()
    wrong[tuple(agree)] += np.float32(0.1)
    failed = verify_outputs(decimal_design.model, x, wrong.reshape(outputs.shape), decimal_design.io)
    assert not failed.passed
    assert failed.summary().startswith("MISMATCH") and "exact semantics: 1 of 320 values differ" in failed.summary()

    tie = np.argwhere(flat != qonnx)[0]             # the hardware taking qonnx's side of a tie: also wrong
    sided = flat.copy()
    sided[tuple(tie)] = qonnx[tuple(tie)]
    assert not verify_outputs(decimal_design.model, x, sided.reshape(outputs.shape), decimal_design.io).passed


def test_a_large_difference_without_a_tie_upstream_is_unexplained():
    quant = helper.make_node("Quant", ["x", "s", "z", "b"], ["y"], name="Q", domain="qonnx.custom_op.general")
    graph = helper.make_graph([quant], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])])
    pre_a, pre_b = {"Q": np.array([[1.0, 5.0]], np.float32)}, {"Q": np.array([[1.0, 3.0]], np.float32)}
    report = TieReport(1)
    _classify(graph, 0, {"y": np.array([[1.0, 5.0]])}, {"y": np.array([[1.0, 3.0]])}, pre_a, pre_b, report)
    assert not report.explained and report.unexplained == [(0, "Q", 1)]
    near = TieReport(1)
    _classify(graph, 0, {"y": np.array([[1.0, 2.0]])}, {"y": np.array([[1.0, 3.0]])},
              {"Q": np.array([[1.0, 2.5]], np.float32)}, {"Q": np.array([[1.0, 2.5000002]], np.float32)}, near)
    assert near.explained and near.ties == {"Q": 1}
