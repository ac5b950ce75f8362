"""Attention (issue 41): the products of two activation streams (MatMulStreams) and the quantized Softmax
(QuantSoftmax) on Brevitas' exports (tests/models/attention, made by make_models.py there), against qonnx
on the original models; each op alone against its golden and its timing model; what is still refused."""

from pathlib import Path

import numpy as np
import pytest
from qonnx.core.datatype import DataType

from layers.matmul_streams import MatMulStreamsSpec, transposed_order
from layers.softmax import QuantSoftmaxSpec, softmax_constants
from rtlgen.check.verify import verify_outputs
from rtlgen.errors import CompileError
from rtlgen.passes.load import load_model
from rtlgen.passes.lower import lower
from tests.conftest import golden_matches_qonnx, rtl_at_the_ii_under_backpressure
import golden

MODELS = Path(__file__).parent / "models" / "attention"


def _batch(path, n, seed, spread=2.0):
    shape = tuple(load_model(path).get_tensor_shape(load_model(path).graph.input[0].name))
    return (np.random.default_rng(seed).standard_normal((n, *shape)) * spread).astype(np.float32)


def _lowered(name):
    path = MODELS / f"{name}.onnx"
    model = load_model(path)
    return path, model, lower(model)


# --- golden level, against qonnx on the original models ------------------------------------------

def test_qk_matmul_is_a_product_of_two_streams_bit_exact():
    """Q.K^T: K's Transpose makes no hardware (the MatMul reads K's stream as B^T); the scores' quantizer
    becomes thresholds on the exact accumulators."""
    path, model, graph = _lowered("qk_matmul")
    assert [n.op_type for n in graph.nodes] == ["MVAU", "MVAU", "MatMulStreams", "Thresholding"]
    matmul = graph.nodes[2].spec()
    assert (matmul.m, matmul.k, matmul.p, matmul.b_transposed) == (8, 16, 8, True)
    result = golden_matches_qonnx(path, model, graph, _batch(path, 32, 0))
    assert result.exact


def test_softmax_and_its_quantizer_bit_exact():
    path, model, graph = _lowered("softmax")
    assert [n.op_type for n in graph.nodes] == ["QuantSoftmax"]
    assert graph.nodes[0].spec().error_bound < 1e-5          # output codes: far below float32's own rounding
    result = golden_matches_qonnx(path, model, graph, _batch(path, 256, 1, spread=3.0))
    assert result.exact


def test_one_attention_head_matches_qonnx():
    """q, k, v projections, Q.K^T / 2, Softmax, scores.V (B in rows, no transpose), the output projection
    (float at the end: equal up to float32 rounding, as every model ending in a float MatMul)."""
    path, model, graph = _lowered("attention_1head")
    assert [n.op_type for n in graph.nodes] == ["MVAU", "MVAU", "MVAU", "MatMulStreams", "Thresholding",
                                                "QuantSoftmax", "MatMulStreams", "Thresholding", "MVAU"]
    assert [graph.nodes[k].spec().b_transposed for k in (3, 6)] == [True, False]
    golden_matches_qonnx(path, model, graph, _batch(path, 16, 2))


# --- refused, naming the node and why ------------------------------------------------------------

def test_the_encoder_block_is_refused_naming_the_node():
    """QuantMultiheadAttention's export starts with a batch-first Transpose (1, 8, 16) -> (8, 1, 16) and
    splits heads by Reshape/Transpose: not mapped yet, and said so (not "nothing to put in hardware")."""
    with pytest.raises(CompileError) as info:
        lower(load_model(MODELS / "encoder_block.onnx"))
    message = str(info.value)
    assert message.startswith("node Transpose_0 (Transpose) cannot be mapped to hardware and is not at the graph's "
                              "edge: MatMul_0 (MatMul) comes after it"), message
    assert "nothing to put in hardware" not in message
    assert "MatMul of two streams" in message and "Softmax (over the last axis and then quantized)" in message


def test_a_softmax_without_its_quantizer_is_refused(tmp_path):
    import onnx
    model = onnx.load(str(MODELS / "softmax.onnx"))
    graph = model.graph
    quant = next(n for n in graph.node if n.op_type == "Quant" and n.input[0] != graph.input[0].name)
    softmax = next(n for n in graph.node if n.op_type == "Softmax")
    softmax.output[0] = quant.output[0]             # the Softmax's float output is the graph's
    graph.node.remove(quant)
    onnx.save(model, str(tmp_path / "float_softmax.onnx"))
    with pytest.raises(CompileError, match=r"node Softmax_0 \(Softmax\): its output must be read by one Quant"):
        lower(load_model(tmp_path / "float_softmax.onnx"))


# --- the ops alone ------------------------------------------------------------------------------

def test_transposed_order_reads_the_stream_as_its_transpose():
    index = transposed_order((1, 3, 2))           # logical (1, 3, 2) streamed as its (1, 2, 3) transpose
    logical = np.arange(6).reshape(1, 3, 2)
    assert list(logical.reshape(-1)[index]) == list(logical.swapaxes(1, 2).reshape(-1))


@pytest.mark.parametrize("transposed", [True, False])
def test_matmul_golden_reads_b_in_its_stream_order(transposed):
    spec = MatMulStreamsSpec(2, 4, 6, 2, 3, "INT4", "UINT3", b_transposed=transposed, heads=2)
    rng = np.random.default_rng(3)
    a, b = rng.integers(-8, 8, (2, 2, 4)), rng.integers(0, 8, (2, 4, 6))
    b_stream = b.swapaxes(1, 2) if transposed else b
    from layers.matmul_streams import _golden
    y = _golden(spec, [a.reshape(1, -1, 2), b_stream.reshape(1, -1, spec.b_lanes)], None)
    assert np.array_equal(y.reshape(2, 2, 6), a @ b)


def test_softmax_golden_is_the_quantized_real_softmax():
    """On random rows (INT8 codes), the integer algorithm gives Quant(softmax) of the float64 softmax."""
    s_in, s_out, n = 0.05808441, 0.00381181, 8
    table, k, z = softmax_constants(s_in, s_out, n, DataType["INT8"])
    x = np.random.default_rng(4).integers(-128, 128, (2000, n))
    real = np.exp(s_in * (x - x.max(axis=1, keepdims=True)))
    real /= real.sum(axis=1, keepdims=True)
    assert np.array_equal(golden.quant_softmax(x, table, k, z, 255), np.clip(np.round(real / s_out), 0, 255))


# --- RTL at the II under backpressure -----------------------------------------------------------

@pytest.mark.sim
def test_qk_matmul_rtl_at_the_ii_under_backpressure(tmp_path):
    path = MODELS / "qk_matmul.onnx"
    x = _batch(path, 2, 5)
    outputs, io = rtl_at_the_ii_under_backpressure(path, x, tmp_path)
    assert verify_outputs(path, x, outputs, io).exact


@pytest.mark.sim
def test_softmax_rtl_at_the_ii_under_backpressure(tmp_path):
    path = MODELS / "softmax.onnx"
    x = _batch(path, 2, 6, spread=3.0)
    outputs, io = rtl_at_the_ii_under_backpressure(path, x, tmp_path)
    assert verify_outputs(path, x, outputs, io).exact


@pytest.mark.slow
@pytest.mark.sim
def test_one_attention_head_rtl_at_the_ii_under_backpressure(tmp_path):
    path = MODELS / "attention_1head.onnx"
    x = _batch(path, 2, 7)
    outputs, io = rtl_at_the_ii_under_backpressure(path, x, tmp_path)
    assert verify_outputs(path, x, outputs, io).passed
