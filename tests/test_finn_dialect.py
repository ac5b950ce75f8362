"""Models in FINN's own dialect (what FINN's ConvertQONNXtoFINN writes): MultiThreshold activations on
annotated integer weights, a signed activation written as MultiThreshold -> Add -> Mul (at the input and
between layers), and an older FINN model whose MultiThreshold has no out_dtype. Built here with onnx's
helper; golden: qonnx execute_onnx on the model itself."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from qonnx.core.datatype import DataType
from qonnx.core.modelwrapper import ModelWrapper

from tests.conftest import rtl_at_the_ii_under_backpressure
from rtlgen.cli import main
from rtlgen.passes.to_hw import stream_io
from rtlgen.check.execute import run_golden
from rtlgen.passes.load import load_model
from rtlgen.passes.lower import lower
from rtlgen.check.verify import compare, qonnx_reference


def finn_cnn(path, *, out_dtype=True, signed=True):
    """x (1,1,8,8) float -> MultiThreshold (15 thresholds: 0..15) [-> Add -8 -> Mul 0.25] -> Conv 3x3 pad 1
    (INT3 weights, 4 channels) -> MultiThreshold (3 per channel) [-> Add -2 -> Mul 0.5] -> Flatten -> MatMul
    (INT2 weights) -> y (1,10)."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def threshold(name, x, t, dtype):
        kw = dict(out_dtype=dtype) if out_dtype else {}
        nodes.append(helper.make_node("MultiThreshold", [x, t], [name], domain="qonnx.custom_op.general",
                                      name=f"MT_{name}", **kw))
        return name

    def signed_shift(x, steps, scale):
        nodes.append(helper.make_node("Add", [x, const(f"{x}_steps", [steps])], [f"{x}_moved"], name=f"Add_{x}"))
        nodes.append(helper.make_node("Mul", [f"{x}_moved", const(f"{x}_scale", [scale])], [f"{x}_signed"],
                                      name=f"Mul_{x}"))
        return f"{x}_signed"

    a = threshold("a", "x", const("t_in", np.sort(rng.uniform(-2, 2, (1, 15)), axis=1)), "UINT4")
    if signed:
        a = signed_shift(a, -8.0, 0.25)
    nodes.append(helper.make_node("Conv", [a, const("w0", rng.integers(-4, 4, (4, 1, 3, 3)))], ["c"],
                                  kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="Conv_0"))
    m = threshold("m", "c", const("t0", np.sort(rng.uniform(-20, 20, (4, 3)), axis=1)), "UINT2")
    if signed:
        m = signed_shift(m, -2.0, 0.5)
    nodes += [helper.make_node("Flatten", [m], ["f"], name="Flatten_0"),
              helper.make_node("MatMul", ["f", const("w1", rng.integers(-1, 2, (4 * 8 * 8, 10)))], ["y"],
                               name="MatMul_0")]
    graph = helper.make_graph(nodes, "finn_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], initializer=inits)
    model = ModelWrapper(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11),
                                                                 helper.make_opsetid("qonnx.custom_op.general", 1)]))
    model.set_tensor_datatype("w0", DataType["INT3"])
    model.set_tensor_datatype("w1", DataType["INT2"])
    model.save(str(path))
    return path


def images(n, seed=1):
    return np.random.default_rng(seed).standard_normal((n, 1, 1, 8, 8)).astype(np.float32)


def test_signed_activations_are_the_layers_own_codes(tmp_path):
    path = finn_cnn(tmp_path / "signed.onnx")
    model = load_model(path)
    graph = lower(model)
    assert [n.op_type for n in graph.nodes] == ["FMPadding", "ConvolutionInputGenerator", "MVAU", "MVAU"]
    io = stream_io(model, graph)
    assert (io.input.dtype.name, io.input.scale) == ("INT4", 0.25)        # -8..7 at 0.25: the Add and Mul
    conv = graph.nodes[2].spec()
    assert conv.output_dtype == DataType["INT2"] and graph.nodes[2].params["act_val"] == -2
    x = images(32)
    ours = io.output_from_codes(run_golden(graph, io.input_codes(x)))
    assert compare(ours, qonnx_reference(path, x)).exact


@pytest.mark.sim
def test_signed_activations_rtl_under_backpressure(tmp_path):
    path = finn_cnn(tmp_path / "signed.onnx")
    x = images(6, seed=2)
    outputs, _ = rtl_at_the_ii_under_backpressure(path, x, tmp_path / "out", seed=9)
    assert compare(outputs, qonnx_reference(path, x)).exact

def test_an_old_multithreshold_without_out_dtype_gets_one(tmp_path):
    path = finn_cnn(tmp_path / "old.onnx", out_dtype=False, signed=False)
    model = load_model(path)
    mts = [n for n in model.graph.node if n.op_type == "MultiThreshold"]
    assert [next(a.s for a in n.attribute if a.name == "out_dtype") for n in mts] == [b"UINT4", b"UINT2"]
    graph = lower(model)
    io = stream_io(model, graph)
    x = images(16)
    assert compare(io.output_from_codes(run_golden(graph, io.input_codes(x))), qonnx_reference(path, x)).exact


def test_a_multithreshold_without_out_dtype_and_no_integer_type_is_refused(tmp_path, capsys):
    path = finn_cnn(tmp_path / "old.onnx", out_dtype=False, signed=False)
    model = onnx.load(str(path))
    mt = next(n for n in model.graph.node if n.op_type == "MultiThreshold")
    mt.attribute.append(helper.make_attribute("out_scale", 0.3))
    onnx.save(model, str(path))
    assert main(["compile", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["rtlgen compile: error: node MT_a (MultiThreshold) has no out_dtype, and out_scale 0.3 with "
                   "out_bias 0 give no integer type; add the out_dtype attribute"], err
