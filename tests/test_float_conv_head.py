"""A float last layer with a bias: a quantized Conv (3 -> 5 channels, 3x3) with a float bias and no
quantizer after it (a segmentation or detection head, as hls4ml's channels-last test models end). The
accelerator computes the accumulators; the bias is split off into an Add that runs on the host.
Golden: qonnx execute_onnx on the model, equal up to float32 rounding (the model adds the bias inside
onnxruntime's float32 Conv)."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from qonnx.core.modelwrapper import ModelWrapper

from rtlgen.passes.to_hw import stream_io
from rtlgen.check.execute import run_golden
from rtlgen.passes.load import load_model
from rtlgen.passes.lower import lower
from rtlgen.check.verify import verify_outputs


def conv_head(path):
    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def quant(name, x, scale, bits):
        for k, v in (("s", scale), ("z", 0.0), ("b", float(bits))):
            inits.append(numpy_helper.from_array(np.asarray(v, np.float32), f"{name}_{k}"))
        nodes.append(helper.make_node("Quant", [x, f"{name}_s", f"{name}_z", f"{name}_b"], [name], name=name,
                                      domain="qonnx.custom_op.general", signed=1, narrow=0, rounding_mode="ROUND"))

    quant("xq", "x", 0.125, 4)
    inits.append(numpy_helper.from_array((rng.integers(-4, 4, (5, 3, 3, 3)) * 0.07).astype(np.float32), "w"))
    quant("wq", "w", 0.07, 3)
    inits.append(numpy_helper.from_array(rng.uniform(-1, 1, 5).astype(np.float32), "bias"))
    nodes.append(helper.make_node("Conv", ["xq", "wq", "bias"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                  name="Conv_head"))
    graph = helper.make_graph(nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 6, 6])], initializer=inits)
    ModelWrapper(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                         helper.make_opsetid("qonnx.custom_op.general", 1)])).save(str(path))
    return path


def test_the_bias_of_a_float_conv_head_runs_on_the_host(tmp_path):
    path = conv_head(tmp_path / "head.onnx")
    model = load_model(path)
    graph = lower(model)
    assert [n.op_type for n in graph.nodes] == ["FMPadding", "ConvolutionInputGenerator", "MVAU"]
    assert graph.host_post == ["Conv_0_bias"]            # qonnx renamed Conv_head Conv_0
    io = stream_io(model, graph)
    x = np.random.default_rng(1).standard_normal((16, 1, 3, 6, 6)).astype(np.float32)
    result = verify_outputs(path, x, io.output_from_codes(run_golden(graph, io.input_codes(x))), io)
    assert result.passed, result.summary()
