"""The layouts exporters write (issue 46): 1-D networks (finn-examples' VGG10 for RadioML: Conv1d,
BatchNorm1d, MaxPool1d, AvgPool1d) run as the (k, 1) 2-D networks FINN builds from them; hls4ml's
channels-last QONNX test models (NHWC input, qonnx's channels_last Conv/MaxPool/BatchNormalization,
LeakyReLU, nearest Resize, Concat); the Reshape or Transpose between an NHWC input and the first layer
(QKeras' converter), which the host runs while it packs the input. The models are tests/models/user_zoo
(Brevitas, random weights; make_models.py). Golden: qonnx execute_onnx on the original model."""

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.conftest import golden_matches_qonnx, rtl_matches_qonnx
from rtlgen.errors import CompileError
from rtlgen.backend.compile import COMPILE
from rtlgen.flows import Runner
from rtlgen.options import CompileOptions
from rtlgen.passes.load import load_model
from rtlgen.passes.lower import lower

MODELS = Path(__file__).parent / "models" / "user_zoo"
SMALL = {       # model: the hardware ops it must lower to (every layer but the input quantizer)
    "vgg10_small": {"MVAU": 5, "StreamingMaxPool": 2, "VVAU": 1},
    "branched_cl_16": {"StreamingConcat": 1, "StreamingMaxPool": 1},
    "sepconv_cl_16": {"VVAU": 2, "StreamingMaxPool": 2},
    "unet_cl_8": {"UpsampleNearestNeighbour": 1, "StreamingConcat": 1, "StreamingMaxPool": 1},
    "unet_cl_16": {"UpsampleNearestNeighbour": 1, "StreamingConcat": 1, "StreamingMaxPool": 1},
    "nhwc_reshape": {"MVAU": 2},
    "nhwc_transpose": {"MVAU": 2},
}


def model_input(name):
    shape = [d.dim_value for d in onnx.load(str(MODELS / f"{name}.onnx")).graph.input[0].type.tensor_type.shape.dim]
    return tuple(shape)


def inputs(name, n, seed=1):
    return np.random.default_rng(seed).uniform(-2, 2, (n, *model_input(name))).astype(np.float32)


def counts(graph):
    found = {}
    for node in graph.nodes:
        found[node.op_type] = found.get(node.op_type, 0) + 1
    return found


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_layer_in_hardware_and_bit_exact(name):
    path = MODELS / f"{name}.onnx"
    model = load_model(path)
    graph = lower(model)
    found = counts(graph)
    assert all(found.get(op, 0) == k for op, k in SMALL[name].items()), found
    golden_matches_qonnx(path, model, graph, inputs(name, 8))


def test_one_d_keeps_the_models_shapes():
    """The user feeds (N, 2, 32) as the model says; the host reshapes it to (N, 2, 32, 1), quantizes it and
    packs it as the hardware reads it (length steps outer, channels inner)."""
    model = load_model(MODELS / "vgg10_small.onnx")
    graph = lower(model)
    first = graph.nodes[0].spec()
    assert graph.tensors[graph.input].shape == (1, 2, 32, 1)
    assert first.img_dim == (32, 1) and first.padding == (1, 0, 1, 0)
    assert model.get_tensor_shape(model.graph.input[0].name) == [1, 2, 32]


def test_nhwc_input_packs_without_a_transpose_in_hardware():
    """hls4ml's NHWC input: the host runs the quantizer and the Transpose to NCHW; the stream is NHWC."""
    model = load_model(MODELS / "branched_cl_16.onnx")
    graph = lower(model)
    transposes = [n.name for n in model.graph.node if n.op_type == "Transpose" and n.name in graph.host_pre]
    assert len(transposes) == 1
    assert graph.tensors[graph.input].shape == (1, 3, 16, 16)


@pytest.mark.parametrize("name", ["vgg10_small", "unet_cl_16"])
def test_fit_pynq_z2_golden(name):
    path = MODELS / f"{name}.onnx"
    runner = Runner()
    stitched = runner.run(COMPILE, path, CompileOptions(fit="pynq-z2"), stop="insert_fifos")
    assert runner.results["fold"].optimizer is not None
    golden_matches_qonnx(path, runner.results["load"], stitched, inputs(name, 4, seed=3))


def _rtl_matches_qonnx(name, n, tmp_path, options=None, seed=4):
    path = MODELS / f"{name}.onnx"
    x = inputs(name, n, seed=seed)
    rtl_matches_qonnx(path, x, tmp_path, options, seed=seed)


@pytest.mark.sim
@pytest.mark.parametrize("name", [pytest.param("vgg10_small", marks=pytest.mark.slow),   # CI time (30 s): 1-D windows
                                  pytest.param("unet_cl_8", marks=pytest.mark.slow)])     # are test_swg's (in RTL)
# CI time (133 s, issue 42): the U-Net's lowering is checked against qonnx above, each of its ops in RTL at the
# II under backpressure by test_op_grid, channels-last inputs in RTL by test_branching's and test_finn_hw_input's
def test_small_instances_in_rtl_at_the_ii_under_backpressure(name, tmp_path):
    """A 1-D network, and hls4ml's channels-last U-Net (NHWC input, LeakyReLU, MaxPool, Resize, Concat)."""
    _rtl_matches_qonnx(name, 4, tmp_path)


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.parametrize("name", ["vgg10_small", "branched_cl_16", "sepconv_cl_16", "unet_cl_16", "nhwc_reshape",
                                  "nhwc_transpose"])
def test_fit_in_rtl_at_the_ii_under_backpressure(name, tmp_path):
    _rtl_matches_qonnx(name, 4, tmp_path, CompileOptions(fit="pynq-z2"))


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.parametrize("name", ["vgg10_radioml", "branched_cl_256", "sepconv_cl_256", "unet_cl_512"])
def test_full_size_models_fit_in_rtl_at_the_ii_under_backpressure(name, tmp_path):
    """Two frames: the II is measured between them."""
    _rtl_matches_qonnx(name, 2, tmp_path, CompileOptions(fit="pynq-z2"))


# ---- refusals name the node ----------------------------------------------------------------------------
def _quantized_input_then(tmp_path, middle, rows=8, inits=()):
    """x (1, 8) -> Quant (INT4) -> ``middle`` nodes (q -> h) -> MatMul rows x 8 (Quant INT4 weights) -> y."""
    consts = [helper.make_tensor(n, TensorProto.FLOAT, [], [v]) for n, v in (("s", 0.5), ("z", 0.0), ("b", 4.0))]
    w = np.random.default_rng(0).integers(-7, 8, (rows, 8)).astype(np.float32)
    consts += [helper.make_tensor("w", TensorProto.FLOAT, [rows, 8], w.ravel()), *inits]
    quant = dict(domain="qonnx.custom_op.general", signed=1, rounding_mode="ROUND")
    nodes = [helper.make_node("Quant", ["x", "s", "z", "b"], ["q"], narrow=0, name="in_quant", **quant), *middle,
             helper.make_node("Quant", ["w", "s", "z", "b"], ["wq"], narrow=1, name="w_quant", **quant),
             helper.make_node("MatMul", ["h", "wq"], ["y"], name="fc")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("qonnx.custom_op.general", 1)])
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    return path


def test_an_unmapped_node_right_after_the_input_quantizer_is_named(tmp_path):
    path = _quantized_input_then(tmp_path, [helper.make_node("Sin", ["q"], ["h"], name="my_sine")])
    with pytest.raises(CompileError, match=r"node my_sine \(Sin\) reads the quantized input and cannot be "
                                           r"mapped to hardware; mapped to hardware: .*MatMul"):
        lower(load_model(path))


def test_a_product_of_two_streams_maps(tmp_path):
    """A product of two activations (q . q^T, as attention's Q.K^T) is a MatMulStreams (issue 41; it was refused
    before), its exact accumulator carried into the next MatMul: bit-exact against qonnx."""
    from tests.conftest import golden_matches_qonnx
    column = helper.make_tensor("column", TensorProto.INT64, [2], [8, 1])
    middle = [helper.make_node("Reshape", ["q", "column"], ["qc"], name="as_column"),
              helper.make_node("MatMul", ["q", "qc"], ["h"], name="scores")]
    path = _quantized_input_then(tmp_path, middle, rows=1, inits=[column])
    model = load_model(path)
    graph = lower(model)
    assert [n.op_type for n in graph.nodes] == ["MatMulStreams", "MVAU"]
    x = np.random.default_rng(0).standard_normal((16, 1, 8)).astype(np.float32) * 3
    assert golden_matches_qonnx(path, model, graph, x).exact


def test_a_feature_map_leaving_flattened_is_flattened_by_the_host(tmp_path):
    """A 1-D conv whose (1, 4, 16) output is the model's: the stream is a (16, 1) feature map in (h, w, c)
    order, the model's tensor (c, h): the host runs the final Reshape, so the output is not read in
    stream order as if it were the model's."""
    w = np.random.default_rng(0).integers(-7, 8, (4, 2, 3)).astype(np.float32)
    consts = [helper.make_tensor(n, TensorProto.FLOAT, list(np.shape(v)), np.ravel(v)) for n, v in
              (("s", 0.5), ("z", 0.0), ("b8", 8.0), ("b4", 4.0), ("so", 2.0), ("w", w))]
    quant = dict(domain="qonnx.custom_op.general", rounding_mode="ROUND")
    nodes = [helper.make_node("Quant", ["x", "s", "z", "b8"], ["q"], signed=1, narrow=0, name="in_q", **quant),
             helper.make_node("Quant", ["w", "s", "z", "b4"], ["wq"], signed=1, narrow=1, name="w_q", **quant),
             helper.make_node("Conv", ["q", "wq"], ["y0"], kernel_shape=[3], pads=[1, 1], name="conv"),
             helper.make_node("Quant", ["y0", "so", "z", "b4"], ["y"], signed=1, narrow=0, name="out_q", **quant)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16])], consts)
    path = tmp_path / "conv1d_out3d.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                      helper.make_opsetid("qonnx.custom_op.general", 1)]), str(path))
    model = load_model(path)
    graph = lower(model)
    assert [n.op_type for n in graph.nodes][-1] == "MVAU" and len(graph.host_post) == 1
    x = np.random.default_rng(3).uniform(-2, 2, (8, 1, 2, 16)).astype(np.float32)
    assert golden_matches_qonnx(path, model, graph, x).exact
