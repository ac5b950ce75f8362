"""Export Brevitas networks whose activation quantizers have PER-CHANNEL scales as cleaned QONNX files
(issue 46 item 2: brevitas_examples' quant_mobilenet_v1_4b, FINN's end-to-end MobileNet, has 12 of its
27 activation quantizers per channel).

Run in a separate venv that has torch (the project's tests do not need torch; the .onnx files are
committed):

    python3 -m venv /tmp/brevitas-venv && . /tmp/brevitas-venv/bin/activate
    pip install torch==2.13.0 brevitas==0.13.4 qonnx onnx onnxscript onnxruntime onnxoptimizer
    python tests/models/per_channel/make_per_channel.py [--no-mobilenet]

The quantizers are written here the way brevitas_examples/imagenet_classification/models (mobilenetv1.py,
common.py) configure them: weights signed narrow with a float scale (per output channel in the convs,
per tensor in the classifier), activations unsigned with a float scale learned in the log domain
(RestrictValueType.LOG_FP), per channel where the MobileNet has them (the first conv block and the
pointwise convs of every stage but the last). Weights are RANDOM (torch.manual_seed), BatchNorms get random
affine parameters and running statistics from random inputs in train mode (so activations are spread over
their codes); no training. Files:

- tiny_mobilenet.onnx (1, 3, 8, 8): 8-bit QuantIdentity -> conv3x3 s2 (8 ch) + BN + per-channel 4-bit
  QuantReLU -> dw3x3 + BN + QuantReLU -> pw1x1 (8 ch) + BN + per-channel QuantReLU -> dw3x3 s2 + BN +
  QuantReLU -> pw1x1 (8 ch) + BN + QuantReLU -> TruncAvgPool2d(2) -> QuantLinear 8x4 (with an Int32 bias).
- residual_per_channel.onnx (1, 4, 6, 6): 8-bit QuantIdentity -> conv3x3 (8 ch) + BN + per-channel QuantReLU
  A -> depthwise conv3x3 + BN -> per-channel signed QuantIdentity Q (ONE module, called on both branches:
  the same scale per channel on both sides of the Add); the shortcut is Q(A) -> Add -> per-channel
  QuantReLU -> MaxPool 2x2 -> global average pool -> QuantReLU -> QuantLinear 8x4.
- dense_after_per_channel.onnx (1, 3, 6, 6): 8-bit QuantIdentity -> conv3x3 + BN + per-channel QuantReLU ->
  DENSE conv3x3 + BN + QuantReLU -> global pool -> QuantLinear: the per-channel float scales have no
  common integer grid, so a dense layer cannot read them exactly (rtlgen refuses, naming the conv).
- dense_after_per_channel_po2.onnx: the same with power-of-two per-channel scales
  (RestrictValueType.POWER_OF_TWO): every channel's scale is an integer multiple of the smallest, which
  the dense conv's weights absorb.
- mobilenet_v1_w4a4.onnx (1, 3, 224, 224): quant_mobilenet_v1_4b's topology (width 1.0, 4-bit weights and
  activations, 8-bit first-layer weights, per-channel activations as above, TruncAvgPool2d(7) to 4 bits,
  QuantLinear 1024x1000 with an Int32 bias), preceded by FINN's end-to-end MobileNet preprocessing: the
  input is raw UINT8 pixels (0..255), normalized per channel ((x / 255 - mean) / std, ImageNet's mean and
  std) and quantized by an 8-bit signed QuantIdentity. So `rtlgen compile --input-dtype UINT8` takes raw
  pixels and the normalization becomes per-channel thresholds; without it the host normalizes.

Each model gets <name>_inputs.npy (4 samples uniform in [-1, 1]; for the MobileNet one sample of integer
pixels 0..255 as uint8). Deterministic; checks that qonnx's execute_onnx matches PyTorch on those inputs.
"""
import os
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")

import numpy as np
import torch
import torch.nn as nn
import brevitas.nn as qnn
from brevitas.core.restrict_val import RestrictValueType
from brevitas.export import export_qonnx
from brevitas.quant import Int8ActPerTensorFloat, Int8WeightPerTensorFloat, Uint8ActPerTensorFloat
from brevitas.quant import Int32Bias
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.util.cleanup import cleanup_model

HERE = os.path.dirname(os.path.abspath(__file__))
CALIBRATION_BATCHES = 40


# ---- quantizers, configured as brevitas_examples' imagenet models configure theirs ----
class WeightPerTensor(Int8WeightPerTensorFloat):
    scaling_min_val = 2e-16
    bit_width = None


class WeightPerChannel(WeightPerTensor):
    scaling_per_output_channel = True


class UintAct(Uint8ActPerTensorFloat):
    scaling_min_val = 2e-16
    bit_width = None
    restrict_scaling_type = RestrictValueType.LOG_FP


class IntAct(Int8ActPerTensorFloat):
    scaling_min_val = 2e-16
    bit_width = None
    restrict_scaling_type = RestrictValueType.LOG_FP


class UintActPo2(UintAct):
    restrict_scaling_type = RestrictValueType.POWER_OF_TWO


def act(quant, channels, bits, per_channel, signed=False):
    """An activation quantizer, per channel (one scale per channel of a (1, C, H, W) tensor) or per tensor."""
    kind = qnn.QuantIdentity if signed else qnn.QuantReLU
    extra = dict(per_channel_broadcastable_shape=(1, channels, 1, 1), scaling_stats_permute_dims=(1, 0, 2, 3),
                 scaling_per_output_channel=True) if per_channel else {}
    return kind(act_quant=quant, bit_width=bits, return_quant_tensor=True, **extra)


def input_quant(bits=8):
    return qnn.QuantIdentity(act_quant=IntAct, bit_width=bits, return_quant_tensor=True)


class ConvBlock(nn.Module):
    """Conv (no bias) + BatchNorm + QuantReLU, as mobilenetv1.py's ConvBlock."""

    def __init__(self, cin, cout, k, stride=1, padding=0, groups=1, wbits=4, abits=4, per_channel=False,
                 quant=UintAct, wquant=WeightPerChannel):
        super().__init__()
        self.conv = qnn.QuantConv2d(cin, cout, k, stride=stride, padding=padding, groups=groups, bias=False,
                                    weight_quant=wquant, weight_bit_width=wbits)
        self.bn = nn.BatchNorm2d(cout)
        self.act = act(quant, cout, abits, per_channel)

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class DwsBlock(nn.Module):
    """Depthwise 3x3 (per-tensor activation) then pointwise 1x1 (per-channel activation where asked)."""

    def __init__(self, cin, cout, stride, bits, pw_per_channel):
        super().__init__()
        self.dw = ConvBlock(cin, cin, 3, stride, 1, groups=cin, wbits=bits, abits=bits)
        self.pw = ConvBlock(cin, cout, 1, wbits=bits, abits=bits, per_channel=pw_per_channel)

    def forward(self, x):
        return self.pw(self.dw(x))


class Head(nn.Module):
    """TruncAvgPool2d (4 bits, rounding) -> flatten -> QuantLinear with an Int32 bias (float output)."""

    def __init__(self, channels, classes, pool, bits):
        super().__init__()
        self.pool = qnn.TruncAvgPool2d(kernel_size=pool, stride=1, bit_width=bits, float_to_int_impl_type="ROUND")
        self.fc = qnn.QuantLinear(channels, classes, bias=True, bias_quant=Int32Bias, weight_quant=WeightPerTensor,
                                  weight_bit_width=bits)

    def forward(self, x):
        x = self.pool(x)
        return self.fc(x.view(x.size(0), -1))


class MobileNet(nn.Module):
    """quant_mobilenet_v1's topology: an init ConvBlock (stride 2, 8-bit weights, per-channel activation),
    stages of depthwise-separable blocks (stride 2 at each stage's first block but the first stage's), the
    pointwise activations per channel in all stages but the last, a 4-bit TruncAvgPool2d, a QuantLinear."""
    STAGES = [[64], [128, 128], [256, 256], [512] * 6, [1024, 1024]]

    def __init__(self, shape, stages, init_channels, classes, pool, bits=4, preprocess=False):
        super().__init__()
        self.shape, self.preprocess = shape, preprocess
        if preprocess:      # FINN's end-to-end MobileNet: (x / 255 - mean) / std per channel on raw pixels
            self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).reshape(1, 3, 1, 1))
            self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).reshape(1, 3, 1, 1))
        self.inp = input_quant()
        blocks = [ConvBlock(shape[1], init_channels, 3, 2, 1, wbits=8, abits=bits, per_channel=True)]
        cin = init_channels
        for i, stage in enumerate(stages):
            for j, cout in enumerate(stage):
                stride = 2 if j == 0 and i != 0 else 1
                blocks.append(DwsBlock(cin, cout, stride, bits, pw_per_channel=i < len(stages) - 1))
                cin = cout
        self.features = nn.Sequential(*blocks)
        self.head = Head(cin, classes, pool, bits)

    def forward(self, x):
        if self.preprocess:
            x = (x / 255.0 - self.mean) / self.std
        return self.head(self.features(self.inp(x)))


class Residual(nn.Module):
    shape = (1, 4, 6, 6)

    def __init__(self):
        super().__init__()
        self.inp = input_quant()
        self.c1 = ConvBlock(4, 8, 3, 1, 1, per_channel=True)
        self.c2, self.bn2 = qnn.QuantConv2d(8, 8, 3, padding=1, groups=8, bias=False, weight_quant=WeightPerChannel,
                                            weight_bit_width=4), nn.BatchNorm2d(8)
        self.q = act(IntAct, 8, 4, per_channel=True, signed=True)      # shared by both branches
        self.out = act(UintAct, 8, 4, per_channel=True)
        self.maxpool = nn.MaxPool2d(2)
        self.pool, self.pq = nn.AdaptiveAvgPool2d(1), act(UintAct, 8, 4, per_channel=False)
        self.fc = qnn.QuantLinear(8, 4, bias=False, weight_quant=WeightPerTensor, weight_bit_width=4)

    def forward(self, x):
        a = self.c1(self.inp(x))
        y = self.q(self.bn2(self.c2(a)))
        x = self.maxpool(self.out(y + self.q(a)))
        return self.fc(torch.flatten(self.pq(self.pool(x)), 1))


class DenseAfterPerChannel(nn.Module):
    shape = (1, 3, 6, 6)

    def __init__(self, quant):
        super().__init__()
        self.inp = input_quant()
        self.c1 = ConvBlock(3, 8, 3, 1, 1, per_channel=True, quant=quant)
        self.c2 = ConvBlock(8, 8, 3, 1, 1)
        self.pool, self.pq = nn.AdaptiveAvgPool2d(1), act(UintAct, 8, 4, per_channel=False)
        self.fc = qnn.QuantLinear(8, 4, bias=False, weight_quant=WeightPerTensor, weight_bit_width=4)

    def forward(self, x):
        x = self.c2(self.c1(self.inp(x)))
        return self.fc(torch.flatten(self.pq(self.pool(x)), 1))


def calibrate(net, inputs, seed):
    """Random BatchNorm affine parameters, then running statistics and activation scales collected on
    ``inputs()`` batches in train mode; a few output channels get much larger or smaller BN gains so that
    per-channel scales differ visibly."""
    torch.manual_seed(seed)
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.weight.data.uniform_(0.3, 1.5)
            m.weight.data *= torch.exp(torch.randn_like(m.weight.data) * 0.7)
            m.bias.data.uniform_(-0.3, 0.3)
            m.momentum = None           # running statistics: the average over all calibration batches
    net.train()
    with torch.no_grad():               # more batches than Brevitas' 30 statistics-collection steps
        for _ in range(CALIBRATION_BATCHES):
            net(inputs(8))
    net.eval()


def export(net, name, samples):
    path = os.path.join(HERE, f"{name}.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.onnx")
        export_qonnx(net, samples[:1].clone(), raw, dynamo=False)
        model = cleanup_model(ModelWrapper(raw))
    model.save(path)
    x = samples.numpy().astype(np.float32)[:, None]          # (4, 1, C, H, W): a batch of model inputs
    pixels = bool((x == np.round(x)).all() and x.min() >= 0 and x.max() <= 255)
    # raw pixels: one sample, as uint8 (a 224x224 float32 batch would weigh 2.4 MB)
    np.save(os.path.join(HERE, f"{name}_inputs.npy"), x[:1].astype(np.uint8) if pixels else x)
    worst = 0.0
    for sample in x:
        ours = execute_onnx(model, {model.graph.input[0].name: sample})[model.graph.output[0].name]
        theirs = net(torch.from_numpy(sample))
        theirs = (theirs.value if hasattr(theirs, "value") else theirs).detach().numpy()
        worst = max(worst, float(np.abs(ours - theirs).max()))
    quants = [n for n in model.graph.node if n.op_type == "Quant" and model.get_initializer(n.input[0]) is None]
    per_channel = sum(np.size(model.get_initializer(n.input[1])) > 1 for n in quants)
    ops = sorted({n.op_type for n in model.graph.node})
    print(f"{name}.onnx: {len(model.graph.node)} nodes {ops}, {per_channel} of {len(quants)} activation "
          f"quantizers per channel, {os.path.getsize(path) / 1e6:.2f} MB, max |qonnx - torch| = {worst:.2g}")


def uniform(shape):
    return lambda n: torch.rand(n, *shape[1:]) * 2 - 1


def pixels(shape):
    return lambda n: torch.randint(0, 256, (n, *shape[1:])).float()


def main():
    cases = [
        ("tiny_mobilenet", lambda: MobileNet((1, 3, 8, 8), [[8], [8]], 8, 4, pool=2), uniform),
        ("residual_per_channel", Residual, uniform),
        ("dense_after_per_channel", lambda: DenseAfterPerChannel(UintAct), uniform),
        ("dense_after_per_channel_po2", lambda: DenseAfterPerChannel(UintActPo2), uniform),
    ]
    if "--no-mobilenet" not in sys.argv:
        cases.append(("mobilenet_v1_w4a4", lambda: MobileNet((1, 3, 224, 224), MobileNet.STAGES, 32, 1000, pool=7,
                                                              preprocess=True), pixels))
    for seed, (name, make, data) in enumerate(cases):
        torch.manual_seed(seed)
        net = make()
        shape = net.shape if hasattr(net, "shape") else None
        inputs = data(shape)
        calibrate(net, inputs, seed)
        torch.manual_seed(100 + seed)
        export(net, name, inputs(4))


if __name__ == "__main__":
    main()
