"""Export a super-resolution CNN shaped like qonnx's ESPCN test model (bsd300x3-espcn/nn_resize: convs,
ReLU quantizers, a nearest-neighbour x2 Resize, a last conv) at two sizes, as cleaned QONNX files.

Run in a venv with torch (the project's tests do not need it; the .onnx files are committed):

    /work/brevitas-venv/bin/python tests/models/espcn/make_espcn.py

The network (issue 46 item 6: large feature maps): an 8-bit input QuantIdentity on a (1, 1, H, W) image
-> QuantConv2d 1->64 5x5 pad 2 (4-bit weights, float bias) -> QuantReLU 4-bit -> QuantConv2d 64->32 3x3
pad 1 -> QuantReLU 4-bit -> nn.Upsample(scale_factor=2, mode="nearest") (exports as Resize) ->
QuantConv2d 32->1 3x3 pad 1 -> QuantIdentity 8-bit: a (1, 1, 2H, 2W) image. Float (Brevitas default)
scales, calibrated in train mode on random images; random weights (deterministic, torch.manual_seed(0)).

  espcn_128.onnx  H = W = 128 (the size qonnx's model is exported at; qonnx's has 3 -> 64 -> 64 -> 32 -> 3
                channels): --fit's candidates have FIFOs deeper than 65,536 words
  espcn_16.onnx   H = W = 16  (the tiny instance the default tests simulate)

Checks that qonnx's execute_onnx on the cleaned model matches PyTorch.
"""
import os
import tempfile
import warnings

warnings.filterwarnings("ignore")

import numpy as np
import onnx
import torch
import torch.nn as nn
import brevitas.nn as qnn
from brevitas.export import export_qonnx
from brevitas.quant import Int8ActPerTensorFloat, Int8WeightPerTensorFloat, Uint8ActPerTensorFloat
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.util.cleanup import cleanup_model

if onnx.IR_VERSION > 13:        # onnxruntime reads IR 13 at most; qonnx builds per-node models at onnx.IR_VERSION
    onnx.IR_VERSION = 13

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = (128, 16)


def conv(cin, cout, k):
    return qnn.QuantConv2d(cin, cout, k, padding=k // 2, bias=True, weight_bit_width=4,
                           weight_quant=Int8WeightPerTensorFloat)


def relu():
    return qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=4, return_quant_tensor=False)


class ESPCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=8, return_quant_tensor=False)
        self.conv1, self.a1 = conv(1, 64, 5), relu()
        self.conv2, self.a2 = conv(64, 32, 3), relu()
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.conv3 = conv(32, 1, 3)
        self.out = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=8, return_quant_tensor=False)

    def forward(self, x):
        x = self.a2(self.conv2(self.a1(self.conv1(self.inp(x)))))
        return self.out(self.conv3(self.up(x)))


def export(net, size):
    path = os.path.join(HERE, f"espcn_{size}.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.onnx")
        export_qonnx(net, torch.randn(1, 1, size, size), raw, dynamo=False)
        model = cleanup_model(ModelWrapper(raw))
    model.save(path)
    x = np.random.default_rng(0).standard_normal((2, 1, 1, size, size)).astype(np.float32)
    name_in, name_out = model.graph.input[0].name, model.graph.output[0].name
    worst = max(float(np.abs(execute_onnx(model, {name_in: s})[name_out]
                             - net(torch.from_numpy(s)).detach().numpy()).max()) for s in x)
    ops = [n.op_type for n in model.graph.node if n.op_type != "Quant"]
    print(f"{os.path.basename(path)}: {os.path.getsize(path):,} bytes, ops {ops}, "
          f"output {model.get_tensor_shape(name_out)}, max |qonnx - torch| = {worst:.2g}")


def main():
    torch.manual_seed(0)
    net = ESPCN()
    net.train()
    with torch.no_grad():       # calibrate the activation scales on random images
        for _ in range(8):
            net(torch.randn(4, 1, 32, 32))
    net.eval()
    for size in SIZES:
        export(net, size)


if __name__ == "__main__":
    main()
