"""A tiny model of the jet tagger's kind for the default suite's distributed-arithmetic tests (issue 43):
4-8-6-3, quantized as make_jet_tagger.py quantizes the real one (6-bit fixed-point weights and biases,
6-bit fixed-point ReLUs: power-of-two scales, no input quantizer, a float Softmax at the end), with random
(untrained) weights, half of each weight tensor set to zero as a pruned model has them. Run in the Brevitas
venv (see make_jet_tagger.py):

    python tests/models/jet_tagger/make_jet_tiny.py

Writes jet_tiny.onnx and tiny_features.npy (16 float feature vectors, normal, seed 2). Deterministic."""
import os
import tempfile
import warnings

warnings.filterwarnings("ignore")

import numpy as np
import torch
import torch.nn as nn
from brevitas.export import export_qonnx
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.util.cleanup import cleanup_model

from make_jet_tagger import dense, relu

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = (4, 8, 6, 3)


class Tiny(nn.Module):
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
    torch.manual_seed(3)
    net = Tiny().eval()
    with torch.no_grad():       # pruned: the smaller half of each weight matrix zero
        for layer in [m for m in net.modules() if hasattr(m, "weight") and m.weight is not None]:
            w = layer.weight
            w[w.abs() < w.abs().median()] = 0
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.onnx")
        export_qonnx(net, torch.randn(1, SIZES[0]), raw)
        model = cleanup_model(ModelWrapper(raw))
    model.save(os.path.join(HERE, "jet_tiny.onnx"))
    x = np.random.default_rng(2).normal(size=(16, 1, SIZES[0])).astype(np.float32)
    np.save(os.path.join(HERE, "tiny_features.npy"), x)
    worst = 0.0
    for sample in x:
        ours = execute_onnx(model, {model.graph.input[0].name: sample})[model.graph.output[0].name]
        worst = max(worst, float(np.abs(ours - net(torch.from_numpy(sample)).detach().numpy()).max()))
    print(f"jet_tiny.onnx: {len(model.graph.node)} nodes, max |qonnx - torch| = {worst:.2g}")


if __name__ == "__main__":
    main()
