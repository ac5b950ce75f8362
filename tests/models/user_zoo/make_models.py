"""Export the issue-46 families made with Brevitas, as people export them, as cleaned QONNX files.

Run in a separate venv that has torch (the project's tests do not need torch; the .onnx files are committed):

    python3 -m venv /tmp/brevitas-venv && . /tmp/brevitas-venv/bin/activate
    pip install torch==2.13.0 brevitas==0.13.4 qonnx onnx onnxscript onnxruntime onnxoptimizer
    python tests/models/user_zoo/make_models.py

1-D networks (finn-examples' vgg10-radioml: Conv1d k3 + BatchNorm1d + ReLU + MaxPool1d, w4a4, 8-bit input):
  vgg10_small.onnx      input (1, 2, 32): 2 conv blocks of 8 channels, AvgPool1d, 3 linear layers
  vgg10_radioml.onnx    input (1, 2, 1024): 7 conv blocks of 64 channels, 128-128-24 linear layers (slow tests)
hls4ml's QONNX test models (Brevitas -> qonnx's ConvertToChannelsLastAndClean with the input made
channels-last: `Conv`, `MaxPool`, `BatchNormalization` in the qonnx.custom_op.channels_last domain, NHWC input):
  branched_cl_16.onnx, branched_cl_256.onnx     two conv branches from one tensor, Concat (shared quantizer)
  sepconv_cl_16.onnx, sepconv_cl_256.onnx       depthwise + pointwise convs, LeakyReLU before the quantizers
  unet_cl_8/16/512.onnx                         conv, MaxPool, nearest Resize x2, Concat with the skip
The input layouts an exporter writes before the first layer:
  nhwc_reshape.onnx     QKeras' converter: (1, 28, 28, 1) -> Quant -> Reshape (1, 1, 28, 28) -> conv
  nhwc_transpose.onnx   (1, 8, 8, 3) -> Quant -> Transpose to NCHW -> conv

Random weights, BatchNorm statistics randomised so the activations spread; deterministic (seeds); each file
is checked against PyTorch through qonnx's execute_onnx.
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
from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
from qonnx.util.cleanup import cleanup_model

HERE = os.path.dirname(os.path.abspath(__file__))


def relu(bits=4):
    return qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=bits, return_quant_tensor=False)


def ident(bits=8):
    return qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=bits, return_quant_tensor=False)


def wq(**kw):
    return dict(weight_bit_width=4, weight_quant=Int8WeightPerTensorFloat, **kw)


class VGG10(nn.Module):
    """finn-examples' vgg10-radioml topology, ``blocks`` conv blocks of ``ch`` channels."""

    def __init__(self, length, ch, blocks, hidden, classes, avg=False):
        super().__init__()
        self.inp = ident(8)
        layers, c = [], 2
        for _ in range(blocks):
            layers += [qnn.QuantConv1d(c, ch, 3, padding=1, bias=False, **wq()), nn.BatchNorm1d(ch), relu(),
                       nn.MaxPool1d(2)]
            c = ch
        self.features = nn.Sequential(*layers)
        self.avg = nn.AvgPool1d(2) if avg else None
        self.avgq = relu() if self.avg is not None else None
        flat = ch * ((length >> blocks) // (2 if self.avg is not None else 1))
        self.fc1 = qnn.QuantLinear(flat, hidden, bias=False, **wq())
        self.bn1, self.a1 = nn.BatchNorm1d(hidden), relu()
        self.fc2 = qnn.QuantLinear(hidden, hidden, bias=False, **wq())
        self.bn2, self.a2 = nn.BatchNorm1d(hidden), relu()
        self.fc3 = qnn.QuantLinear(hidden, classes, bias=False, **wq())

    def forward(self, x):
        x = self.features(self.inp(x))
        if self.avg is not None:
            x = self.avgq(self.avg(x))
        x = torch.flatten(x, 1)
        x = self.a1(self.bn1(self.fc1(x)))
        x = self.a2(self.bn2(self.fc2(x)))
        return self.fc3(x)


class Branched(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = ident(8)
        self.c0, self.b0, self.a0 = qnn.QuantConv2d(3, 8, 3, padding=1, bias=False, **wq()), nn.BatchNorm2d(8), relu()
        self.c1, self.b1 = qnn.QuantConv2d(8, 4, 1, bias=False, **wq()), nn.BatchNorm2d(4)
        self.c2, self.b2 = qnn.QuantConv2d(8, 4, 3, padding=1, bias=False, **wq()), nn.BatchNorm2d(4)
        self.shared = relu()            # one quantizer for both branches: the Concat's inputs share a scale
        self.c3, self.b3, self.a3 = qnn.QuantConv2d(8, 8, 3, padding=1, bias=False, **wq()), nn.BatchNorm2d(8), relu()
        self.pool = nn.MaxPool2d(2)
        self.fc = qnn.QuantLinear(8, 4, bias=True, **wq())

    def forward(self, x):
        x = self.a0(self.b0(self.c0(self.inp(x))))
        x = torch.cat([self.shared(self.b1(self.c1(x))), self.shared(self.b2(self.c2(x)))], dim=1)
        x = self.pool(self.a3(self.b3(self.c3(x))))
        return self.fc(torch.flatten(torch.mean(x, dim=(2, 3), keepdim=True), 1))


class SepConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = ident(8)
        blocks, c = [], 3
        for out in (8, 16):
            blocks += [qnn.QuantConv2d(c, c, 3, padding=1, groups=c, bias=False, **wq()), nn.BatchNorm2d(c),
                       nn.LeakyReLU(0.125), ident(4),
                       qnn.QuantConv2d(c, out, 1, bias=False, **wq()), nn.BatchNorm2d(out), nn.LeakyReLU(0.125),
                       ident(4), nn.MaxPool2d(2)]
            c = out
        self.body = nn.Sequential(*blocks)
        self.head = qnn.QuantConv2d(c, 4, 1, bias=False, **wq())

    def forward(self, x):
        return self.head(self.body(self.inp(x)))


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = ident(8)
        self.e1, self.eb1 = qnn.QuantConv2d(1, 8, 3, padding=1, bias=False, **wq()), nn.BatchNorm2d(8)
        self.skip = ident(4)            # the skip and the upsampled branch share it: one scale at the Concat
        self.pool = nn.MaxPool2d(2)
        self.e2, self.eb2 = qnn.QuantConv2d(8, 8, 3, padding=1, bias=False, **wq()), nn.BatchNorm2d(8)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.d1, self.db1 = qnn.QuantConv2d(16, 8, 3, padding=1, bias=False, **wq()), nn.BatchNorm2d(8)
        self.a = ident(4)
        self.head = qnn.QuantConv2d(8, 2, 1, bias=False, **wq())

    def forward(self, x):
        s = self.skip(nn.functional.leaky_relu(self.eb1(self.e1(self.inp(x))), 0.125))
        y = self.skip(nn.functional.leaky_relu(self.eb2(self.e2(self.pool(s))), 0.125))
        y = torch.cat([s, self.up(y)], dim=1)
        return self.head(self.a(nn.functional.leaky_relu(self.db1(self.d1(y)), 0.125)))


class NHWCReshape(nn.Module):
    """QKeras' converter reads (N, H, W, C) and reshapes it to NCHW before the first conv (C = 1)."""

    def __init__(self):
        super().__init__()
        self.inp = ident(8)
        self.c, self.b, self.a = qnn.QuantConv2d(1, 4, 3, stride=2, bias=False, **wq()), nn.BatchNorm2d(4), relu()
        self.fc = qnn.QuantLinear(4 * 13 * 13, 10, bias=False, **wq())

    def forward(self, x):
        x = self.inp(x).reshape(-1, 1, 28, 28)
        return self.fc(torch.flatten(self.a(self.b(self.c(x))), 1))


class NHWCTranspose(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = ident(8)
        self.c, self.b, self.a = qnn.QuantConv2d(3, 4, 3, padding=1, bias=False, **wq()), nn.BatchNorm2d(4), relu()
        self.c2 = qnn.QuantConv2d(4, 4, 3, stride=2, bias=False, **wq())

    def forward(self, x):
        x = self.inp(x).permute(0, 3, 1, 2)
        return self.c2(self.a(self.b(self.c(x))))


def export(make, shape, name, channels_last=False, seed=0):
    torch.manual_seed(seed)             # before the model is built: its initial weights are drawn from it
    net = make()
    for m in net.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.3, 0.3)
    net.train()
    with torch.no_grad():
        for _ in range(4):
            net(torch.randn((8, *shape[1:])))
    net.eval()
    path = os.path.join(HERE, name)
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.onnx")
        export_qonnx(net, torch.randn(shape), raw)
        model = cleanup_model(ModelWrapper(raw))
        if channels_last:
            model = model.transform(ConvertToChannelsLastAndClean(make_input_channels_last=True))
            model = cleanup_model(model)
    model.save(path)
    x = np.random.default_rng(seed).standard_normal((2 if np.prod(shape) < 1 << 14 else 1, *shape)).astype(np.float32)
    worst = 0.0
    for s in x:
        feed = s.transpose(0, 2, 3, 1) if channels_last else s
        ours = execute_onnx(model, {model.graph.input[0].name: feed})[model.graph.output[0].name]
        ref = net(torch.from_numpy(s)).detach().numpy()
        if ref.shape != ours.shape and ref.ndim == 4:
            ref = ref.transpose(0, 2, 3, 1)
        worst = max(worst, float(np.abs(ours - ref).max()))
    ops = sorted({n.op_type for n in model.graph.node})
    print(f"{name}: input {model.get_tensor_shape(model.graph.input[0].name)}, {os.path.getsize(path)} bytes, "
          f"max |qonnx - torch| = {worst:.2g}, ops {ops}")


def main(only=None):
    export = _only(only)
    export(lambda: VGG10(32, 8, 2, 16, 5, avg=True), (1, 2, 32), "vgg10_small.onnx")
    export(lambda: VGG10(1024, 64, 7, 128, 24), (1, 2, 1024), "vgg10_radioml.onnx")
    for size in (16, 256):
        export(Branched, (1, 3, size, size), f"branched_cl_{size}.onnx", channels_last=True)
        export(SepConv, (1, 3, size, size), f"sepconv_cl_{size}.onnx", channels_last=True)
    for size in (8, 16, 512):
        export(UNet, (1, 1, size, size), f"unet_cl_{size}.onnx", channels_last=True)
    export(NHWCReshape, (1, 28, 28, 1), "nhwc_reshape.onnx")
    export(NHWCTranspose, (1, 8, 8, 3), "nhwc_transpose.onnx")


def _only(names):
    """``export`` restricted to the files named on the command line (all when none)."""
    return lambda make, shape, name, **kw: export(make, shape, name, **kw) if not names or name in names else None


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])
