"""Export small Brevitas deconvolution (QuantConvTranspose2d) CNNs as cleaned QONNX files (issue 46 item 5).

Run in a separate venv that has torch (the project's tests do not need torch; the .onnx files are committed):

    python3 -m venv /tmp/brevitas-venv && . /tmp/brevitas-venv/bin/activate
    pip install torch==2.13.0 brevitas==0.13.4 qonnx==1.0.0 onnx==1.22.0 onnxruntime==1.31.1 onnxoptimizer
    python tests/models/deconv/make_deconv.py

Every model starts with a QuantIdentity input quantizer, so the hardware gets integer codes; weights are
4-bit per-tensor (Brevitas' default Int8WeightPerTensorFloat at bit_width 4), activations 4-bit; default
float scales calibrated in train mode on random data (so thresholds land between the integer grids, not on
powers of two). Deterministic (torch.manual_seed(0)); each model is checked: qonnx on the cleaned model
against PyTorch.

- deconv_s2k3.onnx, input (1, 4, 4, 4): QuantIdentity (4-bit signed) -> QuantConvTranspose2d 4 -> 8,
  kernel 3, stride 2, padding 1, output_padding 1 (8 x 8) -> BN -> QuantReLU -> QuantConv2d 8 -> 4, 3x3,
  padding 1 -> BN -> QuantReLU.
- deconv_s2k4.onnx, input (1, 3, 4, 4): QuantIdentity (8-bit signed) -> QuantConvTranspose2d 3 -> 5 with a
  bias, kernel 4, stride 2, padding 1 (FINN's test_brevitas_deconv: 8 x 8) -> QuantReLU -> a second
  QuantConvTranspose2d 5 -> 4, kernel 3, stride 2, padding 1, output_padding 1 (16 x 16) -> BN -> QuantReLU.
- deconv_tiny.onnx, input (1, 2, 3, 3): QuantIdentity (4-bit signed) -> QuantConvTranspose2d 2 -> 4,
  kernel (3, 2), stride (2, 1), padding (1, 0), output_padding (1, 0) (6 x 4) -> BN -> QuantReLU: the
  smallest, for the RTL test; non-square kernel and stride.
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
from brevitas.quant import Int8ActPerTensorFloat, Int8WeightPerTensorFloat, Uint8ActPerTensorFloat
from brevitas.export import export_qonnx
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.util.cleanup import cleanup_model

HERE = os.path.dirname(os.path.abspath(__file__))
WBITS = 4
CALIBRATION_BATCHES = 32


def relu():
    return qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=4, return_quant_tensor=False)


def inp(bits):
    return qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=bits, return_quant_tensor=False)


def deconv(cin, cout, k, stride, padding, output_padding=0, bias=False):
    return qnn.QuantConvTranspose2d(cin, cout, k, stride=stride, padding=padding, output_padding=output_padding,
                                    bias=bias, weight_bit_width=WBITS, weight_quant=Int8WeightPerTensorFloat)


class DeconvK3(nn.Module):
    shape = (1, 4, 4, 4)

    def __init__(self):
        super().__init__()
        self.inp = inp(4)
        self.up = deconv(4, 8, 3, 2, 1, 1)
        self.bn1, self.a1 = nn.BatchNorm2d(8), relu()
        self.conv = qnn.QuantConv2d(8, 4, 3, padding=1, bias=False, weight_bit_width=WBITS,
                                    weight_quant=Int8WeightPerTensorFloat)
        self.bn2, self.a2 = nn.BatchNorm2d(4), relu()

    def forward(self, x):
        x = self.a1(self.bn1(self.up(self.inp(x))))
        return self.a2(self.bn2(self.conv(x)))


class DeconvK4(nn.Module):
    shape = (1, 3, 4, 4)

    def __init__(self):
        super().__init__()
        self.inp = inp(8)
        self.up1, self.a1 = deconv(3, 5, 4, 2, 1, bias=True), relu()
        self.up2 = deconv(5, 4, 3, 2, 1, 1)
        self.bn2, self.a2 = nn.BatchNorm2d(4), relu()

    def forward(self, x):
        x = self.a1(self.up1(self.inp(x)))
        return self.a2(self.bn2(self.up2(x)))


class DeconvTiny(nn.Module):
    shape = (1, 2, 3, 3)

    def __init__(self):
        super().__init__()
        self.inp = inp(4)
        self.up = deconv(2, 4, (3, 2), (2, 1), (1, 0), (1, 0))
        self.bn, self.act = nn.BatchNorm2d(4), relu()

    def forward(self, x):
        return self.act(self.bn(self.up(self.inp(x))))


def export(net, name):
    torch.manual_seed(0)
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.3, 0.3)
            m.momentum = None           # running statistics: the average of the calibration batches'
    net.train()
    with torch.no_grad():
        for _ in range(CALIBRATION_BATCHES):
            net(torch.randn(16, *net.shape[1:]))
    net.eval()
    path = os.path.join(HERE, name)
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.onnx")
        export_qonnx(net, torch.randn(*net.shape), raw)
        model = cleanup_model(ModelWrapper(raw))
    model.save(path)
    x = np.random.default_rng(0).standard_normal((4, *net.shape)).astype(np.float32)
    contexts = [execute_onnx(model, {model.graph.input[0].name: s}, return_full_exec_context=True) for s in x]
    outputs = [c[model.graph.output[0].name] for c in contexts]
    worst = max(float(np.abs(y - net(torch.from_numpy(s)).detach().numpy()).max()) for s, y in zip(x, outputs))
    levels = [len(np.unique(np.concatenate([c[n.output[0]] for c in contexts])))
              for n in model.graph.node if n.op_type == "Quant" and model.get_initializer(n.input[0]) is None]
    deconvs = [{a.name: onnx.helper.get_attribute_value(a) for a in n.attribute if a.name != "kernel_shape"}
               for n in model.graph.node if n.op_type == "ConvTranspose"]
    print(f"{name}: output {outputs[0].shape}, distinct values per activation quantizer {levels}, "
          f"max |qonnx - torch| = {worst:.2g}; ConvTranspose {deconvs}")


def main():
    torch.manual_seed(0)
    export(DeconvK3(), "deconv_s2k3.onnx")
    torch.manual_seed(1)
    export(DeconvK4(), "deconv_s2k4.onnx")
    torch.manual_seed(2)
    export(DeconvTiny(), "deconv_tiny.onnx")


if __name__ == "__main__":
    main()
