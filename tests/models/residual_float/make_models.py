"""Export small Brevitas ResNets with Brevitas' DEFAULT (float, learned) scales as cleaned QONNX files.

Run in a separate venv that has torch (the project's tests do not need torch; the .onnx files are
committed):

    python3 -m venv /tmp/brevitas-venv && . /tmp/brevitas-venv/bin/activate
    pip install torch==2.13.0 brevitas==0.13.4 qonnx onnx onnxscript onnxruntime
    python tests/models/residual_float/make_models.py

Unlike tests/models/branching (power-of-two scales, exact float32 sums), every quantizer here keeps
Brevitas' default float scale (Int8ActPerTensorFloat / Uint8ActPerTensorFloat at 4 bits, weights
Int8WeightPerTensorFloat or Int8WeightPerChannelFloat), calibrated on a few batches in train mode, so
the float32 Add of the two branches is not the exact sum: the models are the residual networks users
export. The two inputs of each Add are quantized by ONE QuantIdentity module called on both branches (the
way Brevitas ResNets share a quantizer), so both branches have the same scale.

- resnet_identity.onnx: stem conv -> block with an identity shortcut -> head (global pool, linear).
- resnet_conv_shortcut.onnx: stem -> block with a stride-2 1x1 conv shortcut (per-channel weight
  scales) -> head.
- resnet_unshared.onnx: the identity block with two separate QuantIdentity modules on the branches,
  so the scales differ by a non-integer ratio (refused, with a message).

Deterministic (torch.manual_seed). Checks that qonnx's execute_onnx matches PyTorch on random inputs.
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
from brevitas.quant import (Int8ActPerTensorFloat, Int8WeightPerChannelFloat, Int8WeightPerTensorFloat,
                            Uint8ActPerTensorFloat)
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.util.cleanup import cleanup_model

HERE = os.path.dirname(os.path.abspath(__file__))
BITS = 4


def ident():
    return qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=BITS, return_quant_tensor=False)


def relu():
    return qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=BITS, return_quant_tensor=False)


def conv(cin, cout, k, stride=1, per_channel=False):
    return qnn.QuantConv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False, weight_bit_width=BITS,
                           weight_quant=Int8WeightPerChannelFloat if per_channel else Int8WeightPerTensorFloat)


class Net(nn.Module):
    def __init__(self, shortcut="identity", shared=True):
        super().__init__()
        self.shortcut_kind = shortcut
        self.inp = ident()
        self.stem, self.stem_bn, self.stem_act = conv(3, 8, 3), nn.BatchNorm2d(8), relu()
        cout, stride = (8, 1) if shortcut == "identity" else (16, 2)
        self.c1, self.bn1, self.a1 = conv(8, cout, 3, stride=stride), nn.BatchNorm2d(cout), relu()
        self.c2, self.bn2 = conv(cout, cout, 3), nn.BatchNorm2d(cout)
        if shortcut == "conv":
            self.sc, self.sc_bn = conv(8, cout, 1, stride=2, per_channel=True), nn.BatchNorm2d(cout)
        self.q_main = ident()
        self.q_short = self.q_main if shared else ident()
        self.out_act = relu()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.pool_q = relu()
        self.fc = qnn.QuantLinear(cout, 10, bias=False, weight_bit_width=BITS, weight_quant=Int8WeightPerTensorFloat)

    def forward(self, x):
        x = self.stem_act(self.stem_bn(self.stem(self.inp(x))))
        y = self.bn2(self.c2(self.a1(self.bn1(self.c1(x)))))
        short = self.sc_bn(self.sc(x)) if self.shortcut_kind == "conv" else x
        x = self.out_act(self.q_main(y) + self.q_short(short))
        return self.fc(torch.flatten(self.pool_q(self.pool(x)), 1))


def calibrate(net, seed):
    torch.manual_seed(seed)
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.3, 0.3)
    net.train()
    with torch.no_grad():
        for _ in range(8):
            net(torch.rand(16, 3, 8, 8) * 4 - 2)
    net.eval()


def export(net, name):
    path = os.path.join(HERE, name)
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.onnx")
        export_qonnx(net, torch.rand(1, 3, 8, 8), raw)
        model = cleanup_model(ModelWrapper(raw))
    model.save(path)
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(8):
        x = rng.uniform(-2, 2, (1, 3, 8, 8)).astype(np.float32)
        ours = execute_onnx(model, {model.graph.input[0].name: x})[model.graph.output[0].name]
        theirs = net(torch.from_numpy(x)).detach().numpy()
        worst = max(worst, float(np.abs(ours - theirs).max()))
    scales = sorted({float(model.get_initializer(n.input[1])) for n in model.graph.node
                     if n.op_type == "Quant" and model.get_initializer(n.input[1]).size == 1})
    print(f"{name}: {len(model.graph.node)} nodes, max |qonnx - torch| = {worst:.2g}, act scales {scales[:6]}")


def main():
    for name, kwargs, seed in (("resnet_identity.onnx", dict(), 1),
                               ("resnet_conv_shortcut.onnx", dict(shortcut="conv"), 2),
                               ("resnet_unshared.onnx", dict(shared=False), 3)):
        torch.manual_seed(seed)
        net = Net(**kwargs)
        calibrate(net, seed)
        export(net, name)


if __name__ == "__main__":
    main()
