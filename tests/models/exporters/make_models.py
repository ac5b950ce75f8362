"""Export small Brevitas models shaped like the public models other exporters produce (test inputs for
rtlgen's front end). Run in a venv with torch (the project's tests do not need it; the .onnx files are
committed):

    python3 -m venv /tmp/brevitas-venv && . /tmp/brevitas-venv/bin/activate
    pip install torch==2.13.0 brevitas==0.13.4 qonnx==1.0.0 onnx==1.22.0 onnxruntime==1.31.1 onnxoptimizer
    python tests/models/exporters/make_models.py

Models (all deterministic, power-of-two activation scales):
  leaky_mlp        a LeakyReLU (float, monotone) between a QuantLinear and its quantizer
  channels_last    an NHWC input permuted to NCHW before the input quantizer (a Transpose at the input)
  float_bias_head  a CNN whose last layer is a QuantLinear with a float bias and no output quantizer
  avgpool_net      a non-global AvgPool2d(2) between two quantized convolutions
  bn_graph_inputs  avgpool_net re-saved with every initializer also listed as a graph input (old exports)
"""
import os
import sys
import warnings

warnings.filterwarnings("ignore")

import numpy as np
import onnx
import torch
import torch.nn as nn
import brevitas.nn as qnn
from brevitas.export import export_qonnx
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.util.cleanup import cleanup_model

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "branching"))
from make_models import conv, iact, linear, uact  # noqa: E402  (the branching models' quantizer helpers)


class LeakyMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp, self.fc1 = iact(4, -3), linear(16, 12, wbits=3)
        self.leaky, self.q1 = nn.LeakyReLU(0.125), iact(4, -3)
        self.fc2, self.out = linear(12, 8, wbits=3, per_channel=True), uact(4, -3)

    def forward(self, x):
        return self.out(self.fc2(self.q1(self.leaky(self.fc1(self.inp(x))))))


class ChannelsLast(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = iact(4, -3)
        self.c1, self.bn1, self.a1 = conv(3, 8, 3, wbits=3, per_channel=True), nn.BatchNorm2d(8), uact(3, -2)
        self.fc = linear(8 * 6 * 6, 10, wbits=3)

    def forward(self, x):                   # x: (N, H, W, C)
        x = self.a1(self.bn1(self.c1(self.inp(x.permute(0, 3, 1, 2)))))
        return self.fc(torch.flatten(x, 1))


class FloatBiasHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = iact(4, -3)
        self.c1, self.bn1, self.a1 = conv(3, 8, 3, wbits=3), nn.BatchNorm2d(8), uact(3, -2)
        self.fc = qnn.QuantLinear(8 * 4 * 4, 5, bias=True, weight_bit_width=3)

    def forward(self, x):
        x = self.a1(self.bn1(self.c1(self.inp(x))))
        return self.fc(torch.flatten(x, 1))


class AvgPoolNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = iact(4, -3)
        self.c1, self.bn1, self.a1 = conv(3, 8, 3, wbits=3), nn.BatchNorm2d(8), uact(3, -2)
        self.pool, self.q = nn.AvgPool2d(2), uact(4, -4)
        self.c2, self.bn2, self.a2 = conv(8, 8, 3, wbits=3), nn.BatchNorm2d(8), uact(3, -2)

    def forward(self, x):
        x = self.a1(self.bn1(self.c1(self.inp(x))))
        return self.a2(self.bn2(self.c2(self.q(self.pool(x)))))


def _randomize_bn(model, seed):
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.weight.data = 0.5 + torch.rand(c, generator=g)
            m.bias.data = 0.5 * torch.randn(c, generator=g)
            m.running_mean.data = 0.3 * torch.randn(c, generator=g)
            m.running_var.data = 0.5 + torch.rand(c, generator=g)


def export(name, model, shape, seed):
    torch.manual_seed(seed)
    _randomize_bn(model, seed)
    model.eval()
    path = os.path.join(HERE, f"{name}.onnx")
    export_qonnx(model, torch.randn(*shape), export_path=path)
    cleanup_model(ModelWrapper(path)).save(path)
    check(path, model, shape, seed)
    return path


def check(path, model, shape, seed):
    m = ModelWrapper(path)
    x = (np.random.default_rng(seed).standard_normal(shape)).astype(np.float32)
    y = execute_onnx(m, {m.graph.input[0].name: x})[m.graph.output[0].name]
    ref = model(torch.from_numpy(x)).detach().numpy()
    assert np.allclose(y, ref, atol=1e-5), (path, np.abs(y - ref).max())
    print(os.path.basename(path), [n.op_type for n in m.graph.node])


def initializers_as_inputs(src, dst):
    """Old exporters (ONNX IR < 4) list every initializer among the graph inputs too."""
    model = onnx.load(src)
    listed = {i.name for i in model.graph.input}
    for init in model.graph.initializer:
        if init.name not in listed:
            model.graph.input.append(onnx.helper.make_tensor_value_info(init.name, init.data_type, init.dims))
    onnx.save(model, dst)


if __name__ == "__main__":
    export("leaky_mlp", LeakyMLP(), (1, 16), 1)
    export("channels_last", ChannelsLast(), (1, 6, 6, 3), 2)
    export("float_bias_head", FloatBiasHead(), (1, 3, 4, 4), 3)
    avg = export("avgpool_net", AvgPoolNet(), (1, 3, 8, 8), 4)
    initializers_as_inputs(avg, os.path.join(HERE, "bn_graph_inputs.onnx"))
