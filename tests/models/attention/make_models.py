"""Export small quantized attention models (Brevitas 0.13, QONNX export) as cleaned .onnx files.

Run with the Brevitas venv (the project's tests do not need torch; the .onnx files are committed):

    /work/brevitas-venv/bin/python tests/models/attention/make_models.py

Every quantizer keeps Brevitas' default float scales (Int8ActPerTensorFloat, Uint8ActPerTensorFloat,
Int8WeightPerTensorFloat), calibrated on a few random batches in train mode. Inputs are batch-first
sequences (1, tokens, features): a stream of token vectors.

- qk_matmul.onnx: x -> QuantIdentity(4b) -> q, k by two QuantLinear(16, 16, 4-bit weights) each with a
  4-bit QuantIdentity -> Q.K^T (torch.matmul with k.transpose(1, 2): a MatMul of two activation streams,
  K through a Transpose) -> 8-bit QuantIdentity. 8 tokens, 16 features.
- softmax.onnx: x (1, 8, 8) -> 8-bit QuantIdentity (signed) -> Softmax over the last axis -> 8-bit
  unsigned QuantIdentity (Uint8ActPerTensorFloat, as QuantMultiheadAttention quantizes attention weights).
- attention_1head.onnx: one head without the head split: q, k, v projections (4-bit), scores by Q.K^T / 2
  (8-bit quantizer), Softmax, 8-bit unsigned quantizer, scores . V (a MatMul of two streams, no
  Transpose), 4-bit quantizer, output projection.
- attention_2heads.onnx: the same with two heads split as QuantMultiheadAttention(batch_first=True) splits
  them (transpose to (tokens, 1, 16), reshape to (tokens, heads, 8), transpose to (heads, tokens, 8); K^T
  one more transpose) after the q, k, v quantizers, and merged back (transpose, reshape, transpose) before
  the context quantizer.
- attention_4d_heads.onnx: the same split HuggingFace-style into 4-D (batch, heads, tokens, 8) tensors (not
  mapped yet: 4-D tensors are feature maps to the compiler).
- encoder_block.onnx: a transformer encoder block as users export it: QuantMultiheadAttention (2 heads,
  16 features, unpacked q/k/v projections with biases, 4-bit weights and Q, K, V, 8-bit scores and
  softmax output) with torch's head split (Reshape, Transpose), a residual Add (both branches through
  one shared 4-bit QuantIdentity), a QuantLinear(16, 32) - QuantReLU(4b) - QuantLinear(32, 16) MLP and
  a second residual Add. No LayerNorm (Brevitas has no quantized LayerNorm to export).

Deterministic (torch.manual_seed before each model). Checks that qonnx's execute_onnx matches PyTorch.
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

onnx.IR_VERSION = 13            # onnxruntime reads IR 13 at most (see shared/reference/models-and-qonnx.md)
HERE = os.path.dirname(os.path.abspath(__file__))
TOKENS, FEATURES = 8, 16


def ident(bits, quant=Int8ActPerTensorFloat):
    return qnn.QuantIdentity(act_quant=quant, bit_width=bits, return_quant_tensor=False)


def linear(cin, cout, bias=False):
    return qnn.QuantLinear(cin, cout, bias=bias, weight_bit_width=4, weight_quant=Int8WeightPerTensorFloat)


class QKMatMul(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = ident(4)
        self.q, self.k = linear(FEATURES, FEATURES), linear(FEATURES, FEATURES)
        self.q_quant, self.k_quant = ident(4), ident(4)
        self.scores_quant = ident(8)

    def forward(self, x):
        x = self.inp(x)
        q, k = self.q_quant(self.q(x)), self.k_quant(self.k(x))
        return self.scores_quant(torch.matmul(q, k.transpose(1, 2)))


class Softmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = ident(8)
        self.out = ident(8, Uint8ActPerTensorFloat)

    def forward(self, x):
        return self.out(torch.softmax(self.inp(x), dim=-1))


class Attention1Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = ident(4)
        self.q, self.k, self.v = (linear(FEATURES, FEATURES) for _ in range(3))
        self.q_quant, self.k_quant, self.v_quant = ident(4), ident(4), ident(4)
        self.scores_quant = ident(8)
        self.probs_quant = ident(8, Uint8ActPerTensorFloat)
        self.ctx_quant = ident(4)
        self.out = linear(FEATURES, FEATURES)

    def forward(self, x):
        x = self.inp(x)
        q, k, v = self.q_quant(self.q(x)), self.k_quant(self.k(x)), self.v_quant(self.v(x))
        scores = self.scores_quant(torch.matmul(q, k.transpose(1, 2)) / 2.0)
        probs = self.probs_quant(torch.softmax(scores, dim=-1))
        return self.out(self.ctx_quant(torch.matmul(probs, v)))


class Attention2Heads(Attention1Head):
    """Attention1Head with two heads split as QuantMultiheadAttention splits them (3-D tensors, the heads
    on axis 0), after the q, k, v quantizers."""
    heads = 2

    def forward(self, x):
        x = self.inp(x)
        q, k, v = self.q_quant(self.q(x)), self.k_quant(self.k(x)), self.v_quant(self.v(x))
        h, d = self.heads, FEATURES // self.heads
        batch = x.shape[0]

        def split(t):           # (B, T, F) -> (B*h, T, d), as QuantMultiheadAttention(batch_first=True) does
            return t.transpose(0, 1).reshape(TOKENS, batch * h, d).transpose(0, 1)

        scores = self.scores_quant(torch.matmul(split(q), split(k).transpose(1, 2)) / 2.0)
        probs = self.probs_quant(torch.softmax(scores, dim=-1))
        merged = torch.matmul(probs, split(v)).transpose(0, 1).reshape(TOKENS, batch, FEATURES).transpose(0, 1)
        return self.out(self.ctx_quant(merged))


class Attention4dHeads(Attention1Head):
    """Attention1Head with two heads split HuggingFace-style into 4-D (batch, heads, tokens, d) tensors."""
    heads = 2

    def forward(self, x):
        x = self.inp(x)
        q, k, v = self.q_quant(self.q(x)), self.k_quant(self.k(x)), self.v_quant(self.v(x))
        batch, h, d = x.shape[0], self.heads, FEATURES // self.heads

        def split(t):
            return t.view(batch, TOKENS, h, d).transpose(1, 2)

        scores = self.scores_quant(torch.matmul(split(q), split(k).transpose(-1, -2)) / 2.0)
        probs = self.probs_quant(torch.softmax(scores, dim=-1))
        merged = torch.matmul(probs, split(v)).transpose(1, 2).reshape(batch, TOKENS, FEATURES)
        return self.out(self.ctx_quant(merged))


class EncoderBlock(nn.Module):
    def __init__(self, heads=2):
        super().__init__()
        self.inp = ident(4)
        self.attn = qnn.QuantMultiheadAttention(
            FEATURES, heads, batch_first=True, packed_in_proj=False,
            in_proj_input_bit_width=4, in_proj_weight_bit_width=4, out_proj_input_bit_width=4,
            out_proj_weight_bit_width=4, out_proj_output_quant=Int8ActPerTensorFloat, out_proj_output_bit_width=4,
            q_scaled_bit_width=4, k_transposed_bit_width=4, v_bit_width=4,
            softmax_input_quant=Int8ActPerTensorFloat, softmax_input_bit_width=8)
        self.res1 = ident(4)            # one quantizer on both branches of the first residual Add
        self.fc1, self.act, self.fc2 = linear(FEATURES, 2 * FEATURES, bias=True), \
            qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=4, return_quant_tensor=False), \
            linear(2 * FEATURES, FEATURES, bias=True)
        self.res2 = ident(4)            # and on both branches of the second
        self.out = ident(4)

    def forward(self, x):
        x = self.res1(self.inp(x))
        h = self.res2(x + self.res1(self.attn(x, x, x, need_weights=False)[0]))
        return self.out(h + self.res2(self.fc2(self.act(self.fc1(h)))))


def export(name, net, shape):
    torch.manual_seed(1)
    net.train()
    with torch.no_grad():
        for _ in range(8):              # calibrate the activation scales
            net(torch.randn(16, *shape[1:]) * 2)
    net.eval()
    path = os.path.join(HERE, f"{name}.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.onnx")
        export_qonnx(net, torch.randn(shape), raw, dynamo=False)
        model = cleanup_model(ModelWrapper(raw))
    model.save(path)
    # qonnx against PyTorch on random inputs
    model = ModelWrapper(path)
    worst = 0.0
    for seed in range(4):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 2
        with torch.no_grad():
            ref = net(x).numpy()
        got = execute_onnx(model, {model.graph.input[0].name: x.numpy()})[model.graph.output[0].name]
        worst = max(worst, float(np.abs(got - ref).max()))
    ops = sorted({n.op_type for n in model.graph.node})
    print(f"{name}.onnx: {os.path.getsize(path)} bytes, {len(model.graph.node)} nodes ({', '.join(ops)}); "
          f"max |qonnx - torch| = {worst:g}")


def main():
    for name, make, shape in (("qk_matmul", QKMatMul, (1, TOKENS, FEATURES)),
                              ("softmax", Softmax, (1, TOKENS, TOKENS)),
                              ("attention_1head", Attention1Head, (1, TOKENS, FEATURES)),
                              ("attention_2heads", Attention2Heads, (1, TOKENS, FEATURES)),
                              ("attention_4d_heads", Attention4dHeads, (1, TOKENS, FEATURES)),
                              ("encoder_block", EncoderBlock, (1, TOKENS, FEATURES))):
        torch.manual_seed(0)
        export(name, make(), shape)


if __name__ == "__main__":
    main()
