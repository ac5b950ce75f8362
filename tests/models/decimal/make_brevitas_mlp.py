"""Export a Brevitas MLP with DECIMAL scales (the case of issue 17 item 6: verify at rounding ties).

Run in a separate venv that has torch (the project's tests do not need torch; the .onnx is committed):

    python3 -m venv /tmp/brevitas-venv && . /tmp/brevitas-venv/bin/activate
    pip install torch==2.13.0 brevitas==0.13.4 qonnx onnx onnxscript
    python tests/models/decimal/make_brevitas_mlp.py

The network: QuantIdentity (8-bit signed, scale 0.05) -> QuantLinear 32x24 (3-bit weights, constant
scale 0.1) -> QuantReLU (5-bit, scale 0.1) -> QuantLinear 24x10 (3-bit, scale 0.1) -> QuantIdentity
(8-bit signed, scale 0.1). Every scale is a decimal, so qonnx's float32 dot products land on Quant's
round-half-to-even boundaries now and then. Deterministic (fixed seed); checks that qonnx's execution
of the exported model matches PyTorch up to those ties.
"""
import os
import warnings

warnings.filterwarnings("ignore")

import numpy as np
import torch
import torch.nn as nn
import brevitas.nn as qnn
from brevitas.core.scaling import ScalingImplType
from brevitas.export import export_qonnx
from brevitas.quant import Int8ActPerTensorFloat, Int8WeightPerTensorFloat, Uint8ActPerTensorFloat
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.util.cleanup import cleanup_model

HERE = os.path.dirname(os.path.abspath(__file__))


def linear(cin, cout):
    return qnn.QuantLinear(cin, cout, bias=False, weight_quant=Int8WeightPerTensorFloat, weight_bit_width=3,
                           weight_scaling_impl_type=ScalingImplType.CONST, weight_scaling_init=0.1 * 3,
                           weight_narrow_range=True)


class DecimalMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=8,
                                     scaling_impl_type=ScalingImplType.CONST, scaling_init=0.05 * 128,
                                     return_quant_tensor=False)
        self.fc0 = linear(32, 24)
        self.act = qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=5,
                                 scaling_impl_type=ScalingImplType.CONST, scaling_init=0.1 * 31,
                                 return_quant_tensor=False)
        self.fc1 = linear(24, 10)
        self.out = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=8,
                                     scaling_impl_type=ScalingImplType.CONST, scaling_init=0.1 * 128,
                                     return_quant_tensor=False)

    def forward(self, x):
        return self.out(self.fc1(self.act(self.fc0(self.inp(x)))))


def main():
    torch.manual_seed(0)
    net = DecimalMLP().eval()
    with torch.no_grad():
        for fc in (net.fc0, net.fc1):
            fc.weight.copy_(torch.randint(-3, 4, fc.weight.shape).float() * 0.1)
    path = os.path.join(HERE, "brevitas_decimal_mlp.onnx")
    export_qonnx(net, torch.zeros(1, 32), export_path=path)
    model = cleanup_model(ModelWrapper(path))
    model.save(path)
    for node in model.graph.node:
        if node.op_type == "Quant":
            print(node.name, [float(model.get_initializer(i)) for i in node.input[1:] if model.get_initializer(i) is not None
                              and model.get_initializer(i).size == 1])
    x = np.random.default_rng(1).uniform(-6, 6, (200, 32)).astype(np.float32)
    name, out = model.graph.input[0].name, model.graph.output[0].name
    ours = np.concatenate([execute_onnx(model, {name: s[None]})[out] for s in x])
    with torch.no_grad():
        torch_out = net(torch.from_numpy(x)).numpy()
    print("qonnx vs torch: values differing", int((ours != torch_out).sum()), "of", ours.size,
          "max |diff|", float(np.abs(ours - torch_out).max()))


if __name__ == "__main__":
    main()
