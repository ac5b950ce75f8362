"""Export small Brevitas CNNs with grouped convolutions (not depthwise-one-to-one) as cleaned QONNX files.

Run in a separate venv that has torch (the project's tests do not need torch; the .onnx is committed):

    python3 -m venv /tmp/brevitas-venv && . /tmp/brevitas-venv/bin/activate
    pip install torch==2.13.0 brevitas==0.13.4 qonnx onnx onnxscript onnxruntime onnxoptimizer
    python tests/models/grouped/make_models.py

grouped_cnn.onnx (input (1, 4, 8, 8)): QuantIdentity (4-bit) -> depthwise conv with a channel multiplier
(4 -> 8 channels, groups=4, 3x3) -> BN -> QuantReLU -> conv with groups=2 (8 -> 8, 3x3, stride 2) -> BN ->
QuantReLU -> global average pool -> QuantReLU -> QuantLinear 8x10. Default float scales (calibrated in
train mode), 4-bit weights. Deterministic (torch.manual_seed(0)); checks qonnx against PyTorch.
"""
import os
import tempfile
import warnings

warnings.filterwarnings("ignore")

import numpy as np
import torch
import torch.nn as nn
import brevitas.nn as qnn
from brevitas.quant import Int8ActPerTensorFloat, Int8WeightPerTensorFloat, Uint8ActPerTensorFloat
from brevitas.export import export_qonnx
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.util.cleanup import cleanup_model

HERE = os.path.dirname(os.path.abspath(__file__))


def relu():
    return qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=4, return_quant_tensor=False)


class Grouped(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=4, return_quant_tensor=False)
        self.dw = qnn.QuantConv2d(4, 8, 3, padding=1, groups=4, bias=False, weight_bit_width=4,
                                  weight_quant=Int8WeightPerTensorFloat)
        self.bn1, self.a1 = nn.BatchNorm2d(8), relu()
        self.gc = qnn.QuantConv2d(8, 8, 3, stride=2, padding=1, groups=2, bias=False, weight_bit_width=4,
                                  weight_quant=Int8WeightPerTensorFloat)
        self.bn2, self.a2 = nn.BatchNorm2d(8), relu()
        self.pool, self.pq = nn.AdaptiveAvgPool2d(1), relu()
        self.fc = qnn.QuantLinear(8, 10, bias=False, weight_bit_width=4, weight_quant=Int8WeightPerTensorFloat)

    def forward(self, x):
        x = self.a1(self.bn1(self.dw(self.inp(x))))
        x = self.a2(self.bn2(self.gc(x)))
        return self.fc(torch.flatten(self.pq(self.pool(x)), 1))


def main():
    torch.manual_seed(0)
    net = Grouped()
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.3, 0.3)
    net.train()
    with torch.no_grad():
        for _ in range(8):
            net(torch.randn(16, 4, 8, 8))
    net.eval()
    path = os.path.join(HERE, "grouped_cnn.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.onnx")
        export_qonnx(net, torch.randn(1, 4, 8, 8), raw)
        model = cleanup_model(ModelWrapper(raw))
    model.save(path)
    x = np.random.default_rng(0).standard_normal((4, 1, 4, 8, 8)).astype(np.float32)
    worst = max(float(np.abs(execute_onnx(model, {model.graph.input[0].name: s})[model.graph.output[0].name]
                             - net(torch.from_numpy(s)).detach().numpy()).max()) for s in x)
    groups = [a.i for n in model.graph.node if n.op_type == "Conv" for a in n.attribute if a.name == "group"]
    print(f"grouped_cnn.onnx: conv groups {groups}, max |qonnx - torch| = {worst:.2g}")


if __name__ == "__main__":
    main()
