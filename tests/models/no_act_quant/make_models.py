"""Linear layers with no activation quantizer between them (issue 46, item 3), as QKeras and Brevitas users
write them; cleaned QONNX files for tests/test_no_act_quant.py.

    python tests/models/no_act_quant/make_models.py qkeras        # any venv with onnx + qonnx
    python tests/models/no_act_quant/make_models.py brevitas      # a venv with torch + brevitas (see below)

qkeras_dense.onnx (no TensorFlow here, so built with onnx.helper in the shape qonnx's QKeras converter
writes): float input (hls4ml users feed floats; compile with --input-dtype "FIXED<16,6>"),
QDense(16 -> 16) -> QDense(16 -> 8) with NO activation between them, quantized_relu, QDense(8 -> 5).
Each QDense is MatMul(x, Quant(W)) -> Add(Quant(b)); quantized_bits(6, 0, alpha=1) for weights and
biases is a 6-bit signed Quant of scale 2^-5; quantized_relu(6, 2) is Relu -> 6-bit unsigned Quant of
scale 2^-4.

Brevitas (venv: torch==2.13.0 brevitas==0.13.4 qonnx onnx onnxscript onnxruntime):
  brevitas_linear.onnx   QuantIdentity(8 bit) -> QuantLinear(12 -> 16) -> QuantLinear(16 -> 10) without a
                         QuantIdentity between them (bias quantized Int32, on the accumulator's scale;
                         per-tensor float weight scales) -> QuantReLU -> QuantLinear(10 -> 4)
  unet_head.onnx         a small CNN on 8x8 (3 channels): a depthwise and a pointwise QuantConv2d with no
                         quantizer between or after them (into a padded 3x3 conv), and a last QuantConv2d
                         (1x1, 4 -> 2 channels) with a bias (Int32) and no quantizer after it, as a U-Net's
                         segmentation head: that bias goes to the host
  float_bias.onnx        brevitas_linear with a float (unquantized) bias on the first layer: not on the
                         accumulator's integer grid, so the compiler refuses it naming the node that reads it
Random weights, deterministic (seeds); each file checked against PyTorch through qonnx's execute_onnx.
"""
import os
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.util.cleanup import cleanup_model

HERE = os.path.dirname(os.path.abspath(__file__))


def qkeras_dense():
    """QDense(16->16) -> QDense(16->8) -> quantized_relu(6, 2) -> QDense(8->5), power-of-two scales."""
    rng = np.random.default_rng(46)
    nodes, inits = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def quant(name, x, scale, bits, signed):
        ins = [x, const(f"{name}_scale", scale), const(f"{name}_zeropt", 0.0), const(f"{name}_bitwidth", bits)]
        nodes.append(helper.make_node("Quant", ins, [name], name=name, domain="qonnx.custom_op.general",
                                      signed=signed, narrow=0, rounding_mode="ROUND"))
        return name

    def qdense(k, x, cin, cout):
        w = const(f"dense{k}_kernel", rng.normal(0, 0.4, (cin, cout)))
        b = const(f"dense{k}_bias", rng.normal(0, 0.3, cout))
        wq = quant(f"dense{k}_kernel_quantizer", w, 2.0 ** -5, 6, 1)
        bq = quant(f"dense{k}_bias_quantizer", b, 2.0 ** -5, 6, 1)
        nodes.append(helper.make_node("MatMul", [x, wq], [f"dense{k}_matmul"], name=f"dense{k}/MatMul"))
        nodes.append(helper.make_node("Add", [f"dense{k}_matmul", bq], [f"dense{k}_out"], name=f"dense{k}/BiasAdd"))
        return f"dense{k}_out"

    x = qdense(1, "input_1", 16, 16)
    x = qdense(2, x, 16, 8)                          # no activation between dense1 and dense2
    nodes.append(helper.make_node("Relu", [x], ["relu2"], name="relu2/Relu"))
    x = quant("relu2_activation_quantizer", "relu2", 2.0 ** -4, 6, 0)
    x = qdense(3, x, 8, 5)
    graph = helper.make_graph(nodes, "qkeras_dense", [helper.make_tensor_value_info("input_1", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 5])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("qonnx.custom_op.general", 1)])
    model = cleanup_model(ModelWrapper(model))
    model.save(os.path.join(HERE, "qkeras_dense.onnx"))
    features = rng.normal(0, 1.5, (64, 1, 16)).astype(np.float32)
    np.save(os.path.join(HERE, "qkeras_dense_inputs.npy"), features)
    y = execute_onnx(model, {"input_1": features[0]})[model.graph.output[0].name]
    print(f"qkeras_dense.onnx: {len(model.graph.node)} nodes, output {y.ravel()}")


def brevitas_models():
    import torch
    import torch.nn as nn
    import brevitas.nn as qnn
    from brevitas.export import export_qonnx
    from brevitas.quant import Int8ActPerTensorFloat, Int8WeightPerTensorFloat, Int32Bias, Uint8ActPerTensorFloat

    def linear(cin, cout, bias_quant=Int32Bias):
        return qnn.QuantLinear(cin, cout, bias=True, weight_quant=Int8WeightPerTensorFloat, weight_bit_width=4,
                               bias_quant=bias_quant, return_quant_tensor=bias_quant is not None)

    def conv(cin, cout, k, bias_quant=Int32Bias, **kw):
        return qnn.QuantConv2d(cin, cout, k, bias=True, weight_quant=Int8WeightPerTensorFloat, weight_bit_width=4,
                               bias_quant=bias_quant, return_quant_tensor=bias_quant is not None, **kw)

    class Linear2(nn.Module):
        """QuantLinear -> QuantLinear with no QuantIdentity between, then QuantReLU -> QuantLinear."""

        def __init__(self, first_bias_quant):
            super().__init__()
            # Int32Bias needs the input's scale: the quantizers hand a QuantTensor on
            self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=8, return_quant_tensor=True)
            self.fc1 = linear(12, 16, first_bias_quant)
            self.fc2 = linear(16, 10, Int32Bias if first_bias_quant is not None else None)
            self.relu = qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=4, return_quant_tensor=True)
            self.fc3 = linear(10, 4)

        def forward(self, x):
            return self.fc3(self.relu(self.fc2(self.fc1(self.inp(x)))))

    class UNetHead(nn.Module):
        """conv 3 -> 4 (3x3) + ReLU; a depthwise 3x3 and a pointwise 1x1 with no quantizer between or after
        them (a separable conv: the depthwise accumulators travel into the pointwise one, whose own travel
        into the next padded 3x3); conv 4 -> 4 (3x3) + ReLU; the head, a 1x1 conv 4 -> 2 with a bias and no
        quantizer after it, as a U-Net's segmentation head: its bias goes to the host. Every bias Int32."""

        def __init__(self):
            super().__init__()
            self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=8, return_quant_tensor=True)
            self.conv1 = conv(3, 4, 3, padding=1)
            self.relu1 = qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=4, return_quant_tensor=True)
            self.dw = conv(4, 4, 3, padding=1, groups=4)
            self.pw = conv(4, 4, 1)
            self.conv2 = conv(4, 4, 3, padding=1)
            self.relu2 = qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=4, return_quant_tensor=True)
            self.head = conv(4, 2, 1)

        def forward(self, x):
            x = self.relu1(self.conv1(self.inp(x)))
            return self.head(self.relu2(self.conv2(self.pw(self.dw(x)))))

    def export(net, shape, name, seed, save_inputs=True):
        torch.manual_seed(seed)
        for m in net.modules():          # biases and weights large enough to matter
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                nn.init.uniform_(m.weight, -0.5, 0.5)
                nn.init.uniform_(m.bias, -0.5, 0.5)
        net.eval()
        x = torch.randn(16, *shape[1:]) * 2
        with torch.no_grad():
            net(x)                      # settle the activation quantizers' scales (no training)
        with tempfile.TemporaryDirectory() as tmp:
            raw = os.path.join(tmp, "raw.onnx")
            export_qonnx(net, torch.randn(*shape), raw)
            model = cleanup_model(ModelWrapper(raw))
        for node in model.graph.node:   # the exporter's stack traces: paths of this machine, and bulk
            del node.metadata_props[:]
        model.save(os.path.join(HERE, f"{name}.onnx"))
        samples = np.random.default_rng(seed).normal(0, 2, (32, *shape)).astype(np.float32)
        if save_inputs:
            np.save(os.path.join(HERE, f"{name}_inputs.npy"), samples)
        worst = 0.0
        for s in samples[:8]:
            ours = execute_onnx(model, {model.graph.input[0].name: s})[model.graph.output[0].name]
            ref = net(torch.from_numpy(s))
            ref = getattr(ref, "value", ref).detach().numpy()
            worst = max(worst, float(np.abs(ours - ref).max()))
        print(f"{name}.onnx: {len(model.graph.node)} nodes {sorted({n.op_type for n in model.graph.node})}, "
              f"max |qonnx - torch| = {worst:.2g}")

    export(Linear2(Int32Bias), (1, 12), "brevitas_linear", 1)
    export(Linear2(None), (1, 12), "float_bias", 1, save_inputs=False)      # refused: no inputs needed
    export(UNetHead(), (1, 3, 8, 8), "unet_head", 2)


if __name__ == "__main__":
    which = sys.argv[1:] or ["qkeras", "brevitas"]
    if "qkeras" in which:
        qkeras_dense()
    if "brevitas" in which:
        brevitas_models()
