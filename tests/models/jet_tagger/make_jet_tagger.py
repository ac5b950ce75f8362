"""Export hls4ml's flagship jet tagger shape, 16-64-32-32-5, as a QKeras user would quantize it, to QONNX.

Run in a separate venv that has torch (the project's tests do not need torch; the .onnx is committed):

    python3 -m venv /tmp/brevitas-venv && . /tmp/brevitas-venv/bin/activate
    pip install torch==2.13.0 brevitas==0.13.4 qonnx onnx onnxscript onnxruntime onnxoptimizer
    python tests/models/jet_tagger/make_jet_tagger.py

QKeras itself needs TensorFlow, which this machine cannot install; the model is built with Brevitas in the
shape ``qonnx.converters.from_keras`` gives a QKeras model (quantized_bits(6, 0, alpha=1) weights and biases,
quantized_relu(6) activations): power-of-two (fixed-point) scales, 6-bit weights, 6-bit biases quantized on
their own (a Quant on the bias, added after the MatMul as a float Add), 6-bit ReLUs, a float Softmax at the
end, and NO input quantizer: hls4ml users feed float features and choose the input precision
(ap_fixed<16,6>), which rtlgen takes as ``--input-dtype "FIXED<16,6>"``.

Writes jet_tagger.onnx and features.npy (64 float feature vectors, normal, seed 1). Deterministic
(torch.manual_seed(0)). Checks that qonnx's execute_onnx matches PyTorch.
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
from brevitas.quant import Int8BiasPerTensorFixedPointInternalScaling, Int8WeightPerTensorFixedPoint
from brevitas.quant.fixed_point import Uint8ActPerTensorFixedPointMaxInit
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.util.cleanup import cleanup_model

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = (16, 64, 32, 32, 5)
BITS = 6


def dense(cin, cout):
    return qnn.QuantLinear(cin, cout, bias=True, weight_quant=Int8WeightPerTensorFixedPoint, weight_bit_width=BITS,
                           bias_quant=Int8BiasPerTensorFixedPointInternalScaling, bias_bit_width=BITS)


def relu():
    return qnn.QuantReLU(act_quant=Uint8ActPerTensorFixedPointMaxInit, bit_width=BITS, max_val=4.0,
                         return_quant_tensor=False)


class JetTagger(nn.Module):
    def __init__(self):
        super().__init__()
        layers = []
        for cin, cout in zip(SIZES[:-2], SIZES[1:-1]):
            layers += [dense(cin, cout), relu()]
        self.body = nn.Sequential(*layers)
        self.out = dense(SIZES[-2], SIZES[-1])
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x):
        return self.softmax(self.out(self.body(x)))


def main():
    torch.manual_seed(0)
    net = JetTagger().eval()
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.onnx")
        export_qonnx(net, torch.randn(1, SIZES[0]), raw)
        model = cleanup_model(ModelWrapper(raw))
    model.save(os.path.join(HERE, "jet_tagger.onnx"))
    x = np.random.default_rng(1).normal(size=(64, 1, SIZES[0])).astype(np.float32)
    np.save(os.path.join(HERE, "features.npy"), x)
    worst = 0.0
    for sample in x[:16]:
        ours = execute_onnx(model, {model.graph.input[0].name: sample})[model.graph.output[0].name]
        worst = max(worst, float(np.abs(ours - net(torch.from_numpy(sample)).detach().numpy()).max()))
    print(f"jet_tagger.onnx: {len(model.graph.node)} nodes {sorted({n.op_type for n in model.graph.node})}, "
          f"max |qonnx - torch| = {worst:.2g}")


if __name__ == "__main__":
    main()
