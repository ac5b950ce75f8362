"""Export a ResNet-18-scale CIFAR network, 4-bit, with Brevitas' default float scales, as cleaned QONNX.

Run in a separate venv that has torch (the project's tests do not need torch; the .onnx is committed):

    python3 -m venv /tmp/brevitas-venv && . /tmp/brevitas-venv/bin/activate
    pip install torch==2.13.0 brevitas==0.13.4 qonnx onnx onnxscript onnxruntime onnxoptimizer
    python tests/models/resnet26/make_model.py

The shape of the FINN+ ResNet-18-like W4A4 network the issue names: 28 convolutions and 12 residual Adds
(a 3x3 stem, four stages of three basic blocks at 8, 16, 32 and 64 channels, stride 2 and a 1x1 conv
shortcut at each stage change), global average pool, a 64x10 linear layer; input 32x32x3. Narrow
channels keep the committed file small; the graph is what matters (every residual pattern: identity and
1x1-conv shortcuts; the two branches quantized by one shared QuantIdentity in the first block of each
stage and by separate ones in the others, so both the shared-scale and the unrelated-scale sums occur).
Random init with calibrated scales (no training: hardware figures and bit-exactness need none).
Writes resnet26_w4a4.onnx and images.npy (4 inputs, uniform(-2, 2), seed 1).
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
from brevitas.quant import Int8ActPerTensorFloat, Int8WeightPerTensorFloat, Uint8ActPerTensorFloat
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.util.cleanup import cleanup_model

HERE = os.path.dirname(os.path.abspath(__file__))
BITS = 4
WIDTHS = (8, 16, 32, 64)
BLOCKS = 3


def ident():
    return qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=BITS, return_quant_tensor=False)


def relu():
    return qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=BITS, return_quant_tensor=False)


def conv(cin, cout, k, stride=1):
    return qnn.QuantConv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False, weight_bit_width=BITS,
                           weight_quant=Int8WeightPerTensorFloat)


class Block(nn.Module):
    def __init__(self, cin, cout, stride, shared):
        super().__init__()
        self.c1, self.b1, self.a1 = conv(cin, cout, 3, stride), nn.BatchNorm2d(cout), relu()
        self.c2, self.b2 = conv(cout, cout, 3), nn.BatchNorm2d(cout)
        self.sc = None if stride == 1 and cin == cout else nn.Sequential(conv(cin, cout, 1, stride), nn.BatchNorm2d(cout))
        self.q_main = ident()
        self.q_short = self.q_main if shared else ident()
        self.out = relu()

    def forward(self, x):
        y = self.b2(self.c2(self.a1(self.b1(self.c1(x)))))
        short = x if self.sc is None else self.sc(x)
        return self.out(self.q_main(y) + self.q_short(short))


class ResNet26(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = ident()
        self.stem, self.stem_bn, self.stem_act = conv(3, WIDTHS[0], 3), nn.BatchNorm2d(WIDTHS[0]), relu()
        blocks, cin = [], WIDTHS[0]
        for stage, cout in enumerate(WIDTHS):
            for b in range(BLOCKS):
                stride = 2 if stage > 0 and b == 0 else 1
                blocks.append(Block(cin, cout, stride, shared=(b == 0)))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.pool, self.pool_q = nn.AdaptiveAvgPool2d(1), relu()
        self.fc = qnn.QuantLinear(cin, 10, bias=False, weight_bit_width=BITS, weight_quant=Int8WeightPerTensorFloat)

    def forward(self, x):
        x = self.blocks(self.stem_act(self.stem_bn(self.stem(self.inp(x)))))
        return self.fc(torch.flatten(self.pool_q(self.pool(x)), 1))


def main():
    torch.manual_seed(0)
    net = ResNet26()
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.3, 0.3)
    net.train()
    with torch.no_grad():
        for _ in range(6):
            net(torch.rand(16, 3, 32, 32) * 4 - 2)
    net.eval()
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.onnx")
        export_qonnx(net, torch.rand(1, 3, 32, 32), raw)
        model = cleanup_model(ModelWrapper(raw))
    model.save(os.path.join(HERE, "resnet26_w4a4.onnx"))
    x = np.random.default_rng(1).uniform(-2, 2, (4, 1, 3, 32, 32)).astype(np.float32)
    np.save(os.path.join(HERE, "images.npy"), x)
    worst = max(float(np.abs(execute_onnx(model, {model.graph.input[0].name: s})[model.graph.output[0].name]
                             - net(torch.from_numpy(s)).detach().numpy()).max()) for s in x[:2])
    ops = [n.op_type for n in model.graph.node]
    print(f"resnet26_w4a4.onnx: {ops.count('Conv')} Conv, {ops.count('Add')} Add, max |qonnx - torch| = {worst:.2g}")


if __name__ == "__main__":
    main()
