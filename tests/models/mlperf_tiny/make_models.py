"""Export quantized versions of MLPerf Tiny's four reference networks as cleaned QONNX files.

Run in a separate venv that has torch (the project's tests do not need torch; the .onnx files and the
input samples are committed):

    python3 -m venv /tmp/brevitas-venv && . /tmp/brevitas-venv/bin/activate
    pip install torch==2.13.0 brevitas==0.13.4 qonnx onnx onnxscript onnxruntime onnxoptimizer
    python tests/models/mlperf_tiny/make_models.py

The topologies are MLPerf Tiny's reference ones (mlcommons/tiny, benchmark/training/*); the weights are
RANDOM (torch.manual_seed per network) and only the quantizer scales and BatchNorm statistics are
calibrated, on random inputs in train mode: no training, so the accuracy is chance. That is enough for
hardware figures (the accelerator's size and speed do not depend on the weight values beyond their bit
widths) and for bit-exact verification. Quantization: 8-bit input (Int8ActPerTensorFloat), 4-bit weights
(per-tensor float scales), 4-bit activations (float scales), BatchNorm in float between conv and ReLU
(rtlgen folds it into thresholds); layers have no bias (the BatchNorms carry it), the last layer's output
is its accumulator times the scales (float, no quantizer after it).

- resnet8.onnx (image classification, CIFAR-10, 1x3x32x32): stem 3x3 conv 16; three residual stacks of
  16, 32, 64 channels (two 3x3 convs each; stacks 2 and 3 start with stride 2 and take a stride-2 1x1
  conv shortcut); global average pool; FC 10. Each residual Add's two branches share one QuantIdentity
  (the way Brevitas ResNets are written), then a ReLU quantizer.
- ds_cnn.onnx (keyword spotting, 1x1x49x10 MFCC): 10x4 stride-2 conv with 64 channels (padding 5x1:
  25x5 out, as TensorFlow's 'same'), four depthwise-separable blocks (3x3 depthwise + 1x1 pointwise, 64
  channels), global average pool, FC 12.
- mobilenet_v1_025.onnx (visual wake words, 1x3x96x96): MobileNetV1 at width 0.25 (8, 16, 32, 32, 64,
  64, 128 x6, 256, 256 channels; 3x3 stride-2 stem; 13 depthwise-separable blocks), global average pool,
  FC 2.
- fc_autoencoder.onnx (anomaly detection, 1x640 log-mel frames): 640-128-128-128-128-8-128-128-128-128-640,
  BatchNorm + ReLU after every layer but the last.

Each gets <name>_inputs.npy: 4 inputs, shape (4, *input shape), float32, uniform in [-1, 1] (seed 1).
Deterministic (torch.manual_seed). Checks that qonnx's execute_onnx matches PyTorch on those inputs.
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
W_BITS, A_BITS, IN_BITS = 4, 4, 8


def inp():
    return qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=IN_BITS, return_quant_tensor=False)


def ident():
    return qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=A_BITS, return_quant_tensor=False)


def relu():
    return qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=A_BITS, return_quant_tensor=False)


def conv(cin, cout, k, stride=1, padding=None, groups=1):
    return qnn.QuantConv2d(cin, cout, k, stride=stride, padding=(k // 2 if padding is None else padding),
                           groups=groups, bias=False, weight_bit_width=W_BITS,
                           weight_quant=Int8WeightPerTensorFloat)


def linear(cin, cout):
    return qnn.QuantLinear(cin, cout, bias=False, weight_bit_width=W_BITS, weight_quant=Int8WeightPerTensorFloat)


def conv_bn_relu(cin, cout, k, stride=1, padding=None, groups=1):
    return nn.Sequential(conv(cin, cout, k, stride, padding, groups), nn.BatchNorm2d(cout), relu())


class Head(nn.Module):
    """Global average pool (AdaptiveAvgPool2d: ReduceMean over H, W), a quantizer, the classifier."""

    def __init__(self, channels, classes):
        super().__init__()
        self.pool, self.q, self.fc = nn.AdaptiveAvgPool2d(1), relu(), linear(channels, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.q(self.pool(x)), 1))


class ResidualStack(nn.Module):
    """MLPerf Tiny ResNet-8's stack: conv-BN-ReLU, conv-BN, + shortcut (identity or stride-2 1x1 conv), ReLU."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = conv_bn_relu(cin, cout, 3, stride)
        self.c2, self.bn2 = conv(cout, cout, 3), nn.BatchNorm2d(cout)
        self.sc = None if stride == 1 and cin == cout else nn.Sequential(conv(cin, cout, 1, stride, 0),
                                                                          nn.BatchNorm2d(cout))
        self.q = ident()   # shared by both branches of the Add
        self.act = relu()

    def forward(self, x):
        y = self.bn2(self.c2(self.c1(x)))
        short = x if self.sc is None else self.sc(x)
        return self.act(self.q(y) + self.q(short))


class ResNet8(nn.Module):
    shape = (1, 3, 32, 32)

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(inp(), conv_bn_relu(3, 16, 3), ResidualStack(16, 16, 1),
                                  ResidualStack(16, 32, 2), ResidualStack(32, 64, 2))
        self.head = Head(64, 10)

    def forward(self, x):
        return self.head(self.body(x))


def dw_separable(cin, cout, stride):
    return nn.Sequential(conv_bn_relu(cin, cin, 3, stride, groups=cin), conv_bn_relu(cin, cout, 1, 1, 0))


class DSCNN(nn.Module):
    shape = (1, 1, 49, 10)

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(inp(), conv_bn_relu(1, 64, (10, 4), 2, (5, 1)),
                                  *[dw_separable(64, 64, 1) for _ in range(4)])
        self.head = Head(64, 12)

    def forward(self, x):
        return self.head(self.body(x))


class MobileNetV1(nn.Module):
    shape = (1, 3, 96, 96)
    # (output channels, stride) of the 13 depthwise-separable blocks at width 1.0
    BLOCKS = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + [(1024, 2), (1024, 1)]

    def __init__(self, alpha=0.25, classes=2):
        super().__init__()
        c = int(32 * alpha)
        layers = [inp(), conv_bn_relu(3, c, 3, 2)]
        for cout, stride in self.BLOCKS:
            layers.append(dw_separable(c, int(cout * alpha), stride))
            c = int(cout * alpha)
        self.body = nn.Sequential(*layers)
        self.head = Head(c, classes)

    def forward(self, x):
        return self.head(self.body(x))


class FCAutoencoder(nn.Module):
    shape = (1, 640)
    SIZES = (640, 128, 128, 128, 128, 8, 128, 128, 128, 128, 640)

    def __init__(self):
        super().__init__()
        layers = [inp()]
        for cin, cout in zip(self.SIZES[:-2], self.SIZES[1:-1]):
            layers += [linear(cin, cout), nn.BatchNorm1d(cout), relu()]
        layers.append(linear(self.SIZES[-2], self.SIZES[-1]))
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


def calibrate(net, seed):
    """Random BatchNorm affine parameters, then running statistics and activation scales from random
    inputs in train mode (Brevitas' float scales are learned/collected there)."""
    torch.manual_seed(seed)
    for m in net.modules():
        if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)):
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.3, 0.3)
    net.train()
    with torch.no_grad():
        for _ in range(8):
            net(torch.rand(16, *net.shape[1:]) * 2 - 1)
    net.eval()


def export(net, name):
    path = os.path.join(HERE, f"{name}.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.onnx")
        export_qonnx(net, torch.rand(*net.shape), raw)
        model = cleanup_model(ModelWrapper(raw))
    model.save(path)
    x = np.random.default_rng(1).uniform(-1, 1, (4, *net.shape)).astype(np.float32)
    np.save(os.path.join(HERE, f"{name}_inputs.npy"), x)
    worst = 0.0
    for sample in x:
        ours = execute_onnx(model, {model.graph.input[0].name: sample})[model.graph.output[0].name]
        theirs = net(torch.from_numpy(sample)).detach().numpy()
        worst = max(worst, float(np.abs(ours - theirs).max()))
    ops = sorted({n.op_type for n in model.graph.node})
    print(f"{name}.onnx: {len(model.graph.node)} nodes {ops}, {os.path.getsize(path) / 1024:.0f} KiB, "
          f"max |qonnx - torch| = {worst:.2g}")


def main():
    for seed, (name, cls) in enumerate((("resnet8", ResNet8), ("ds_cnn", DSCNN),
                                        ("mobilenet_v1_025", MobileNetV1), ("fc_autoencoder", FCAutoencoder))):
        torch.manual_seed(seed)
        net = cls()
        calibrate(net, seed)
        export(net, name)


if __name__ == "__main__":
    main()
