"""Export a Brevitas INT8 MLP with PER-CHANNEL weight scales and calibrated (learned) activation scales.

Run in a separate venv that has torch (the project's tests do not need torch; the .onnx is committed):

    python3 -m venv /tmp/brevitas-venv && . /tmp/brevitas-venv/bin/activate
    pip install torch==2.13.0 brevitas==0.13.4 qonnx onnx onnxscript
    python tests/models/int8_mlp/make_int8_mlp.py

The network (input shape (1, 64)): QuantIdentity (8-bit signed, per-tensor scale) -> QuantLinear 64x512
-> QuantReLU (8-bit unsigned) -> QuantLinear 512x384 -> QuantReLU (8-bit unsigned) -> QuantLinear 384x768
-> QuantIdentity (8-bit signed). Every QuantLinear has 8-bit signed weights with one float scale per
output channel (Int8WeightPerChannelFloat) and a bias. The bias is left UNQUANTIZED (bias_quant=None, the
Brevitas default): export works with it, it becomes a float Add after the MatMul in the QONNX graph, and
rtlgen folds it into the MVAU with the following quantizer.

Deterministic (torch.manual_seed(0)): weights are normal values whose rows are scaled by factors drawn
from uniform(0.2, 2) so the per-channel scales really differ; biases are random. The activation scales
are learned statistics: a few calibration batches of uniform(-3, 3) inputs run in train mode before
.eval(), so they are not powers of two. Also writes inputs8.npy (8 inputs, uniform(-3, 3), seed 1) and
checks that qonnx's execution of the exported model matches PyTorch on random inputs.
"""
import os
import tempfile
import warnings

warnings.filterwarnings("ignore")

import numpy as np
import torch
import torch.nn as nn
import brevitas.nn as qnn
from brevitas.export import export_qonnx
from brevitas.quant import Int8ActPerTensorFloat, Int8WeightPerChannelFloat, Uint8ActPerTensorFloat
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.util.cleanup import cleanup_model

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = (64, 512, 384, 768)


def linear(cin, cout):
    return qnn.QuantLinear(cin, cout, bias=True, weight_quant=Int8WeightPerChannelFloat, bias_quant=None)


class Int8MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, return_quant_tensor=False)
        self.fc0 = linear(SIZES[0], SIZES[1])
        self.act0 = qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, return_quant_tensor=False)
        self.fc1 = linear(SIZES[1], SIZES[2])
        self.act1 = qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, return_quant_tensor=False)
        self.fc2 = linear(SIZES[2], SIZES[3])
        self.out = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, return_quant_tensor=False)

    def forward(self, x):
        x = self.act0(self.fc0(self.inp(x)))
        x = self.act1(self.fc1(x))
        return self.out(self.fc2(x))


def main():
    torch.manual_seed(0)
    net = Int8MLP()
    with torch.no_grad():
        for fc in (net.fc0, net.fc1, net.fc2):
            cout, cin = fc.weight.shape
            rows = torch.empty(cout, 1).uniform_(0.2, 2.0)
            fc.weight.copy_(torch.randn(cout, cin) / cin ** 0.5 * rows)
            fc.bias.copy_(torch.randn(cout) * 0.5)
        net.train()  # calibration: the activation quantizers collect statistics of their inputs
        for _ in range(8):
            net(torch.empty(64, SIZES[0]).uniform_(-3, 3))
    net.eval()

    path = os.path.join(HERE, "int8_mlp_per_channel.onnx")
    with tempfile.TemporaryDirectory() as tmp:  # the exporter also writes a stray external-data file there
        raw = os.path.join(tmp, "raw.onnx")
        export_qonnx(net, torch.zeros(1, SIZES[0]), export_path=raw)
        model = cleanup_model(ModelWrapper(raw))
    model.save(path)  # self-contained: the weights are inlined
    for node in model.graph.node:
        if node.op_type == "Quant":
            scale = model.get_initializer(node.input[1])
            bits = float(model.get_initializer(node.input[3]))
            if scale.size == 1:
                print(node.name, "scale", float(scale), "zeropt", float(model.get_initializer(node.input[2])),
                      "bits", bits)
            else:
                print(node.name, "per-channel scale", scale.shape, "min", float(scale.min()), "max",
                      float(scale.max()), "bits", bits)

    inputs8 = np.random.default_rng(1).uniform(-3, 3, (8, SIZES[0])).astype(np.float32)
    np.save(os.path.join(HERE, "inputs8.npy"), inputs8)

    x = np.concatenate([inputs8, np.random.default_rng(2).uniform(-3, 3, (200, SIZES[0])).astype(np.float32)])
    name, out = model.graph.input[0].name, model.graph.output[0].name
    ours = np.concatenate([execute_onnx(model, {name: s[None]})[out] for s in x])
    with torch.no_grad():
        torch_out = net(torch.from_numpy(x)).numpy()
    step = float(model.get_initializer([n for n in model.graph.node if n.op_type == "Quant"][-1].input[1]))
    print("qonnx vs torch: values differing", int((ours != torch_out).sum()), "of", ours.size,
          "max |diff|", float(np.abs(ours - torch_out).max()), "(output step %g)" % step)
    print("  on inputs8: values differing", int((ours[:8] != torch_out[:8]).sum()), "of", ours[:8].size)
    print("output range", float(ours.min()), float(ours.max()), "distinct levels", len(np.unique(ours)))


if __name__ == "__main__":
    main()
