"""Train and export a tiny quantized ViT on scikit-learn's 8x8 digits (Brevitas 0.13, QONNX export).

Run with the Brevitas venv (the tests need neither torch nor scikit-learn; the .onnx and .npz are committed):

    /work/brevitas-venv/bin/python tests/models/attention/make_vit.py

digits_vit.onnx: pixels (0..16) / 16 -> 8-bit QuantIdentity -> patch embedding QuantConv2d(1, 16, 2, stride 2)
(4-bit weights) -> 4-bit QuantIdentity -> 16 tokens of 16 features (flatten, transpose) -> the encoder block of
make_models.py (QuantMultiheadAttention, 2 heads, residual Adds, QuantReLU MLP) -> mean over tokens -> 4-bit
QuantIdentity -> QuantLinear(16, 10). Trained with quantization in the loop (Adam, seeded), 1,437 training
and 360 test digits (the split of shared/scripts/train_digits.py: train_test_split(test_size=0.2,
random_state=0)). digits_vit_testset.npz: the 360 test digits (uint8 pixels 0..16) and labels.
"""
import os
import sys
import tempfile
import time
import warnings

warnings.filterwarnings("ignore")

import numpy as np
import onnx
import torch
import torch.nn as nn
import brevitas.nn as qnn
from brevitas.export import export_qonnx
from brevitas.quant import Int8WeightPerTensorFloat
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.util.cleanup import cleanup_model
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_models import EncoderBlock, ident, linear  # noqa: E402

onnx.IR_VERSION = 13
EPOCHS = 40


class TinyViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = ident(8)
        self.patch = qnn.QuantConv2d(1, 16, 2, stride=2, bias=False, weight_bit_width=4,
                                     weight_quant=Int8WeightPerTensorFloat)
        self.patch_quant = ident(4)
        self.block = EncoderBlock()
        self.pool_quant = ident(4)
        self.head = linear(16, 10)

    def forward(self, x):
        tokens = self.patch_quant(self.patch(self.inp(x))).flatten(2).transpose(1, 2)     # (B, 16, 16)
        return self.head(self.pool_quant(self.block(tokens).mean(dim=1)))


def main():
    torch.manual_seed(0)
    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(digits.images, digits.target, test_size=0.2, random_state=0)
    xt = torch.tensor(x_train / 16.0, dtype=torch.float32).unsqueeze(1)
    yt = torch.tensor(y_train)
    net = TinyViT()
    opt = torch.optim.Adam(net.parameters(), lr=0.005)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, EPOCHS)
    start = time.time()
    for _ in range(EPOCHS):
        net.train()
        order = torch.randperm(len(xt))
        for k in range(0, len(xt), 64):
            idx = order[k:k + 64]
            opt.zero_grad()
            nn.functional.cross_entropy(net(xt[idx]), yt[idx]).backward()
            opt.step()
        sched.step()
    net.eval()
    xs = torch.tensor(x_test / 16.0, dtype=torch.float32).unsqueeze(1)
    with torch.no_grad():
        torch_pred = net(xs).argmax(1).numpy()
    print(f"trained in {time.time() - start:.0f} s: torch test accuracy {np.mean(torch_pred == y_test):.4f}")
    path = os.path.join(HERE, "digits_vit.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        export_qonnx(net, xs[:1], os.path.join(tmp, "raw.onnx"), dynamo=False)
        cleanup_model(ModelWrapper(os.path.join(tmp, "raw.onnx"))).save(path)
    np.savez_compressed(os.path.join(HERE, "digits_vit_testset.npz"), images=x_test.astype(np.uint8),
                        labels=y_test.astype(np.uint8))
    model = ModelWrapper(path)
    name, out = model.graph.input[0].name, model.graph.output[0].name
    qonnx_pred = np.array([execute_onnx(model, {name: xs[k:k + 1].numpy()})[out].argmax() for k in range(len(xs))])
    print(f"digits_vit.onnx: {os.path.getsize(path)} bytes; qonnx test accuracy {np.mean(qonnx_pred == y_test):.4f}, "
          f"{np.sum(qonnx_pred == torch_pred)} of {len(xs)} predictions equal torch's")


if __name__ == "__main__":
    main()
