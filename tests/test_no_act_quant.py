"""Linear layers with no activation quantizer between them (issue 46 item 3), as hls4ml carries them: the
exact accumulator (its acc_range width) travels into the next layer as a wide integer stream, a bias on
the accumulator's grid added by a ChannelwiseOp; a trailing bias runs on the host.
- tests/models/no_act_quant (made by make_models.py): QKeras' QDense -> QDense (power-of-two scales, fixed-
  point input), Brevitas QuantLinear -> QuantLinear (Int32 bias, float scales), a small CNN with a depthwise
  and a pointwise conv without quantizers and a biased 1x1 head (a U-Net's): the lowered graph's goldens
  against qonnx on the original model, an ``--fit pynq-z2`` compile, the smallest in RTL at the II and
  under backpressure.
- Biases on a finer power-of-two grid (the accumulator scaled by the weights) and per-channel weight scales
  that are integer multiples of one (folded into the weights); what stays refused names the node reading
  the unquantized accumulator and says why.
- The exact semantics verify compares with keep a carried accumulator exact (qonnx rounds it to float32).
"""
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from qonnx.core.modelwrapper import ModelWrapper

from rtlgen.check.exact import exact_reference
from rtlgen.check.verify import qonnx_reference
from rtlgen.errors import CompileError
from rtlgen.backend.compile import COMPILE
from rtlgen.flows import Runner
from rtlgen.options import CompileOptions
from rtlgen.passes.load import load_model
from rtlgen.passes.lower import lower
from tests.conftest import golden_matches_qonnx, rtl_matches_qonnx

MODELS = Path(__file__).parent / "models" / "no_act_quant"
FIXED = "FIXED<16,6>"


def inputs(name, n):
    return np.load(MODELS / f"{name}_inputs.npy")[:n]


def summary(graph):
    return [(n.op_type, n.spec().input_dtype.name, n.spec().output_dtype.name) for n in graph.nodes]


# ---- the models --------------------------------------------------------------------------------------------
def test_qkeras_dense_into_dense_is_bit_exact():
    """dense1's accumulator (INT16 inputs x 6-bit weights over 16 inputs: INT24 by its weights) and its bias
    (2^-5 grid, on the accumulator's 2^-15 one) travel as one INT25 stream into dense2."""
    path = MODELS / "qkeras_dense.onnx"
    model = load_model(path, FIXED)
    graph = lower(model)
    assert summary(graph) == [("MVAU", "INT16", "INT24"), ("ChannelwiseOp", "INT24", "INT25"),
                              ("MVAU", "INT25", "UINT6"), ("MVAU", "UINT6", "INT14")]
    mvau = graph.nodes[0].spec()
    assert mvau.output_dtype == mvau.acc_dtype() and mvau.no_activation
    bias = graph.nodes[1].spec()
    assert bias.func == "add" and graph.nodes[1].sources == ("Add_0",)
    assert graph.host_post == ["Add_2"]                 # the last layer's bias: the host's
    result = golden_matches_qonnx(path, model, graph, inputs("qkeras_dense", 64))
    assert result.exact, result.summary()


def test_brevitas_linear_into_linear_matches_qonnx():
    """Int32 bias on the accumulator's (float) scale, no QuantIdentity between the two QuantLinears."""
    path = MODELS / "brevitas_linear.onnx"
    model = load_model(path)
    graph = lower(model)
    assert summary(graph) == [("MVAU", "INT8", "INT14"), ("ChannelwiseOp", "INT14", "INT15"),
                              ("MVAU", "INT15", "UINT4"), ("MVAU", "UINT4", "INT10")]
    assert graph.host_post == ["Add_2"]
    golden_matches_qonnx(path, model, graph, inputs("brevitas_linear", 32))


def test_cnn_with_unquantized_separable_conv_and_head_matches_qonnx():
    """Depthwise (VVAU) -> pointwise -> padded 3x3 with no quantizer between them: each accumulator plus
    its Conv's own bias carried on; the head's bias split off to the host."""
    path = MODELS / "unet_head.onnx"
    model = load_model(path)
    graph = lower(model)
    ops = [n.op_type for n in graph.nodes]
    assert ops == ["FMPadding", "ConvolutionInputGenerator", "MVAU",
                   "FMPadding", "ConvolutionInputGenerator", "VVAU", "ChannelwiseOp",
                   "ConvolutionInputGenerator", "MVAU", "ChannelwiseOp",
                   "FMPadding", "ConvolutionInputGenerator", "MVAU",
                   "ConvolutionInputGenerator", "MVAU"]
    assert graph.nodes[-1].spec().no_activation
    assert graph.host_post == ["Conv_4_bias"]
    golden_matches_qonnx(path, model, graph, inputs("unet_head", 16))


def test_fit_pynq_z2_golden():
    """``--fit pynq-z2``: the folded, stitched graph (width converters, FIFOs) on the layers' goldens."""
    path = MODELS / "qkeras_dense.onnx"
    runner = Runner()
    stitched = runner.run(COMPILE, path, CompileOptions(fit="pynq-z2", input_dtype=FIXED), stop="insert_fifos")
    assert runner.results["fold"].optimizer is not None
    assert "ChannelwiseOp" in [n.op_type for n in stitched.nodes]
    result = golden_matches_qonnx(path, runner.results["load"], stitched, inputs("qkeras_dense", 32))
    assert result.exact, result.summary()


@pytest.mark.sim
def test_qkeras_dense_rtl_at_the_ii_under_backpressure(tmp_path):
    path = MODELS / "qkeras_dense.onnx"
    x = inputs("qkeras_dense", 12)
    result = rtl_matches_qonnx(path, x, tmp_path, CompileOptions(input_dtype=FIXED), seed=5)
    assert result.exact, result.summary()


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.parametrize("name", ["brevitas_linear", "unet_head"])
def test_fit_rtl_at_the_ii_under_backpressure(name, tmp_path):
    path = MODELS / f"{name}.onnx"
    x = inputs(name, 6)
    rtl_matches_qonnx(path, x, tmp_path, CompileOptions(fit="pynq-z2"), seed=6)


# ---- grids ---------------------------------------------------------------------------------------------
def dense_pair(path, *, w1_scale, b1_scale, b1, between=(), in_scale=1.0, in_bits=8, seed=0):
    """x -> Quant(in_scale, in_bits) -> MatMul(4 -> 3, Quant(W1, w1_scale)) -> Add(Quant(b1, b1_scale))
    [-> ``between`` nodes] -> MatMul(3 -> 2) -> Relu -> Quant(unsigned 4 bits, 1.0). Returns the path and
    W1's integer codes."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def quant(name, x, scale, bits, signed=1):
        ins = [x, const(f"{name}_s", scale), const(f"{name}_z", 0.0), const(f"{name}_b", bits)]
        nodes.append(helper.make_node("Quant", ins, [name], name=name, domain="qonnx.custom_op.general",
                                      signed=signed, narrow=0, rounding_mode="ROUND"))
        return name

    w1_scale = np.asarray(w1_scale, np.float32)
    quant("xq", "x", in_scale, in_bits)
    w1 = rng.integers(-7, 8, (4, 3))
    quant("w1q", const("w1", w1 * w1_scale), w1_scale, 4)
    quant("b1q", const("b1", np.asarray(b1, np.float32)), b1_scale, 16)
    nodes.append(helper.make_node("MatMul", ["xq", "w1q"], ["m1"], name="dense1"))
    nodes.append(helper.make_node("Add", ["m1", "b1q"], ["a1"], name="bias1"))
    tensor = "a1"
    for k, (op_type, value) in enumerate(between):
        out = f"between{k}"
        ins = [tensor] + ([const(f"c{k}", value)] if value is not None else [])
        nodes.append(helper.make_node(op_type, ins, [out], name=f"{op_type.lower()}{k}"))
        tensor = out
    quant("w2q", const("w2", rng.integers(-7, 8, (3, 2)) * 0.25), 0.25, 4)
    nodes.append(helper.make_node("MatMul", [tensor, "w2q"], ["m2"], name="dense2"))
    nodes.append(helper.make_node("Relu", ["m2"], ["r2"], name="relu2"))
    quant("y", "r2", 1.0, 4, signed=0)
    graph = helper.make_graph(nodes, "pair", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], initializer=inits)
    ModelWrapper(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(
        "qonnx.custom_op.general", 1)])).save(str(path))
    return path, w1


def conv_pool(path, residual):
    """x (3x6x6) -> Quant -> Conv 3x3 (4 channels, a float bias on 2^-5, no quantizer) -> MaxPool 2x2
    [+ a quantized 1x1 conv branch, pooled: a residual Add] -> Relu -> Quant."""
    rng = np.random.default_rng(3)
    nodes, inits = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def quant(name, x, scale, bits, signed=1):
        ins = [x, const(f"{name}_s", scale), const(f"{name}_z", 0.0), const(f"{name}_b", bits)]
        nodes.append(helper.make_node("Quant", ins, [name], name=name, domain="qonnx.custom_op.general",
                                      signed=signed, narrow=0, rounding_mode="ROUND"))
        return name

    quant("xq", "x", 0.25, 4)
    quant("w1q", const("w1", rng.integers(-7, 8, (4, 3, 3, 3)) * 0.125), 0.125, 4)
    nodes.append(helper.make_node("Conv", ["xq", "w1q", const("b1", rng.integers(-20, 20, 4) * 2.0 ** -5)], ["c1"],
                                  kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv1"))
    nodes.append(helper.make_node("MaxPool", ["c1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"))
    last = "p1"
    if residual:
        quant("w2q", const("w2", rng.integers(-7, 8, (4, 3, 1, 1)) * 0.125), 0.125, 4)
        nodes.append(helper.make_node("Conv", ["xq", "w2q"], ["c2"], kernel_shape=[1, 1], name="conv2"))
        nodes.append(helper.make_node("Relu", ["c2"], ["r2"], name="relu2"))
        quant("q2", "r2", 0.5, 4, 0)
        nodes.append(helper.make_node("MaxPool", ["q2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2], name="pool2"))
        nodes.append(helper.make_node("Add", ["p1", "p2"], ["s"], name="residual"))
        last = "s"
    nodes.append(helper.make_node("Relu", [last], ["r"], name="relu"))
    quant("y", "r", 0.5, 4, 0)
    graph = helper.make_graph(nodes, "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 3, 3])], initializer=inits)
    ModelWrapper(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(
        "qonnx.custom_op.general", 1)])).save(str(path))
    return path


@pytest.mark.parametrize("residual", [False, True])
def test_a_carried_conv_accumulator_into_maxpool_and_a_residual_add(residual, tmp_path):
    path = conv_pool(tmp_path / "pool.onnx", residual)
    model = load_model(path)
    graph = lower(model)
    ops = [n.op_type for n in graph.nodes]
    producers = {t: n.op_type for n in graph.nodes for t in n.outputs}
    pools = [n for n in graph.nodes if n.op_type == "StreamingMaxPool"]
    assert "ChannelwiseOp" in [producers[n.inputs[0]] for n in pools]        # conv1's bias, then its pool
    assert ("AddStreams" in ops) == residual
    x = np.random.default_rng(4).standard_normal((16, 1, 3, 6, 6)).astype(np.float32)
    result = golden_matches_qonnx(path, model, graph, x)
    assert result.exact, result.summary()


def pair_inputs(n=64, seed=1):
    return np.random.default_rng(seed).integers(-128, 128, (n, 1, 4)).astype(np.float32)


def test_a_bias_on_a_finer_power_of_two_grid_scales_the_accumulator(tmp_path):
    """Accumulator grid 2^-3 (INT8 inputs, weights 2^-3), bias on 2^-7: the stream is 16 acc + B, the
    factor 16 folded into dense1's weights."""
    path, w1 = dense_pair(tmp_path / "fine.onnx", w1_scale=2.0 ** -3, b1_scale=2.0 ** -7,
                          b1=[0.5078125, -1.9921875, 0.0234375])
    model = load_model(path)
    graph = lower(model)
    assert np.array_equal(graph.nodes[0].spec().weights, w1 * 16)
    assert [n.op_type for n in graph.nodes] == ["MVAU", "ChannelwiseOp", "MVAU"]
    assert list(graph.nodes[1].spec().params) == [65, -255, 3]
    result = golden_matches_qonnx(path, model, graph, pair_inputs())
    assert result.exact, result.summary()


def test_per_channel_weight_scales_that_are_multiples_fold_into_the_weights(tmp_path):
    """Weight scales 2^-3, 3 * 2^-3, 2^-2 per output channel: one grid 2^-3, factors 1, 3, 2 in the weights;
    a Mul by a scalar and a Sub after the bias change the grid and the offset, exactly."""
    path, w1 = dense_pair(tmp_path / "channels.onnx", w1_scale=[0.125, 0.375, 0.25], b1_scale=0.125,
                          b1=[1.0, -0.5, 0.25], between=[("Mul", 0.5), ("Sub", 0.25)])
    model = load_model(path)
    graph = lower(model)
    assert np.array_equal(graph.nodes[0].spec().weights, w1 * np.array([1, 3, 2]))
    result = golden_matches_qonnx(path, model, graph, pair_inputs())
    assert result.exact, result.summary()


def test_a_float_bias_is_refused_naming_the_node_that_reads_it():
    with pytest.raises(CompileError) as err:
        lower(load_model(MODELS / "float_bias.onnx"))
    message = str(err.value)
    assert message.startswith("node MatMul_1 (MatMul) reads Add_0's output, the unquantized accumulator of MatMul_0 "
                              "(MatMul) through Add_0, with no activation quantizer between them: its float bias ")
    assert "is not on the accumulator's integer grid (scale 0.000556978" in message
    assert "quantize the bias on the accumulator's scale" in message


def test_per_channel_weight_scales_without_a_common_grid_are_refused(tmp_path):
    path, _ = dense_pair(tmp_path / "unrelated.onnx", w1_scale=[0.125, 0.1, 0.25], b1_scale=0.125, b1=[0, 0, 0])
    with pytest.raises(CompileError, match=r"node dense2 \(MatMul\) reads bias1's output, the unquantized "
                                           r"accumulator of dense1 \(MatMul\) through bias1, with no activation "
                                           r"quantizer between them: its channels have the scales .* not small "
                                           r"integer multiples"):
        lower(load_model(path))


def test_an_unquantized_relu_between_is_refused_naming_it(tmp_path):
    path, _ = dense_pair(tmp_path / "relu.onnx", w1_scale=0.125, b1_scale=0.125, b1=[0, 0, 0],
                      between=[("Relu", None)])
    with pytest.raises(CompileError, match=r"node relu0 \(Relu\) reads bias1's output, the unquantized accumulator "
                                           r"of dense1 \(MatMul\) through bias1, with no activation quantizer "
                                           r"between them: only constant Add, Sub, Mul and Div are carried exactly "
                                           r"into the next layer as integers, not Relu; legal: a quantizer before "
                                           r"relu0"):
        lower(load_model(path))


# ---- verify's exact semantics ----------------------------------------------------------------------------
def test_exact_semantics_keep_a_carried_accumulator_exact(tmp_path):
    """x = (2^23 + 1, 2^23): dense1 gives (2^24 + 1, 2^24), which float32 rounds to (2^24, 2^24); dense2
    subtracts them: exactly 1, qonnx 0. The accelerator computes 1, and verify's exact semantics agree."""
    nodes, inits = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def quant(name, x, bits):
        ins = [x, const(f"{name}_s", 1.0), const(f"{name}_z", 0.0), const(f"{name}_b", bits)]
        nodes.append(helper.make_node("Quant", ins, [name], name=name, domain="qonnx.custom_op.general",
                                      signed=1, narrow=0, rounding_mode="ROUND"))

    quant("xq", "x", 26)
    quant("w1q", const("w1", [[1, 0], [1, 2]]), 3)
    quant("w2q", const("w2", [[1], [-1]]), 2)
    nodes += [helper.make_node("MatMul", ["xq", "w1q"], ["m1"], name="dense1"),
              helper.make_node("Add", ["m1", const("b1", [0.0, 0.0])], ["a1"], name="bias1"),
              helper.make_node("MatMul", ["a1", "w2q"], ["y"], name="dense2")]
    graph = helper.make_graph(nodes, "carry", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])], initializer=inits)
    path = tmp_path / "carry.onnx"
    ModelWrapper(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(
        "qonnx.custom_op.general", 1)])).save(str(path))
    x = np.array([[[2 ** 23 + 1, 2 ** 23]]], np.float32)
    assert qonnx_reference(path, x).ravel().tolist() == [0.0]
    exact, ties = exact_reference(path, x)
    assert exact.ravel().tolist() == [1.0] and ties.explained
    model = load_model(path)
    graph = lower(model)
    result = golden_matches_qonnx(path, model, graph, x)
    assert result.at_ties and result.against_exact.exact
