"""Export small *branching* Brevitas models as cleaned QONNX files (test inputs for rtlgen).

Run in a separate venv that has torch (the project's tests do not need torch; only the
generated .onnx files are committed):

    python3 -m venv /tmp/brevitas-venv && . /tmp/brevitas-venv/bin/activate
    pip install torch==2.13.0 brevitas==0.13.4 qonnx==1.0.0 onnx==1.22.0 onnxruntime==1.31.1 onnxoptimizer
    python tests/models/branching/make_models.py

Every model:
  * starts with a QuantIdentity input quantizer (4-bit signed, scale 2^-3), so the hardware gets
    integer codes;
  * has only quantized weights (QuantConv2d / QuantLinear, 2-4 bit, power-of-two per-tensor or
    per-channel scales), no conv/linear biases (BatchNorm after a conv);
  * feeds every conv/linear from an activation quantizer (QuantReLU / QuantIdentity, 2-4 bit);
  * uses only POWER-OF-TWO activation scales (fixed-point quantizers initialised from a max value),
    so residual sums are exact in float32;
  * feeds both inputs of every Add from Quant nodes and requantizes every Add output before the
    next conv/linear.

The script is deterministic (fixed seeds).  For each model it checks that qonnx's execute_onnx
on the cleaned model matches the PyTorch module, prints the node list, the quantizers around each
Add / Concat, and how many distinct codes every activation quantizer produced (so that nothing is
trivially zero or saturated).
"""
import math
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
from brevitas.quant.fixed_point import (Int8ActPerTensorFixedPointMinMaxInit,
                                        Int8WeightPerChannelFixedPoint,
                                        Int8WeightPerTensorFixedPoint,
                                        Uint8ActPerTensorFixedPointMaxInit)
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.util.cleanup import cleanup_model

HERE = os.path.dirname(os.path.abspath(__file__))


# ----------------------------------------------------------------------------------------------
# Quantizer / layer helpers
# ----------------------------------------------------------------------------------------------

def _check_scale(q, bits, exp):
    s = float(q.act_quant.scale().detach())
    assert s == 2.0 ** exp, f"expected scale 2^{exp}, got {s}"
    assert int(q.act_quant.bit_width()) == bits


def iact(bits, exp):
    """Signed `bits`-bit QuantIdentity with scale 2^exp (codes -2^(b-1) .. 2^(b-1)-1)."""
    m = 2.0 ** exp * 2 ** (bits - 1)
    q = qnn.QuantIdentity(act_quant=Int8ActPerTensorFixedPointMinMaxInit, bit_width=bits,
                          min_val=-m, max_val=m, return_quant_tensor=False)
    _check_scale(q, bits, exp)
    return q


def uident(bits, exp):
    """Unsigned `bits`-bit QuantIdentity with scale 2^exp (codes 0 .. 2^b-1)."""
    q = qnn.QuantIdentity(act_quant=Uint8ActPerTensorFixedPointMaxInit, bit_width=bits,
                          max_val=2.0 ** exp * 2 ** bits, return_quant_tensor=False)
    _check_scale(q, bits, exp)
    return q


def uact(bits, exp):
    """QuantReLU, unsigned `bits`-bit, scale 2^exp."""
    q = qnn.QuantReLU(act_quant=Uint8ActPerTensorFixedPointMaxInit, bit_width=bits,
                      max_val=2.0 ** exp * 2 ** bits, return_quant_tensor=False)
    _check_scale(q, bits, exp)
    return q


def conv(cin, cout, k, stride=1, groups=1, wbits=4, per_channel=False):
    wq = Int8WeightPerChannelFixedPoint if per_channel else Int8WeightPerTensorFixedPoint
    return qnn.QuantConv2d(cin, cout, k, stride=stride, padding=k // 2, groups=groups, bias=False,
                           weight_quant=wq, weight_bit_width=wbits)


def linear(cin, cout, wbits=4, per_channel=False):
    wq = Int8WeightPerChannelFixedPoint if per_channel else Int8WeightPerTensorFixedPoint
    return qnn.QuantLinear(cin, cout, bias=False, weight_quant=wq, weight_bit_width=wbits)


class Head(nn.Module):
    """Global average pool -> unsigned quantizer -> flatten -> QuantLinear(10)."""

    def __init__(self, c, bits=4, exp=-4, wbits=4):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.q = uident(bits, exp)
        self.fc = linear(c, 10, wbits=wbits, per_channel=True)

    def forward(self, x):
        return self.fc(torch.flatten(self.q(self.pool(x)), 1))


# ----------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------

class ResNetBlock(nn.Module):
    """stem -> basic block (identity shortcut) -> basic block (downsampling shortcut) -> head."""

    def __init__(self):
        super().__init__()
        self.inp = iact(4, -3)
        self.stem = conv(4, 8, 3, wbits=4, per_channel=True)
        self.stem_bn = nn.BatchNorm2d(8)
        self.stem_act = uact(4, -3)
        # block 1: identity shortcut
        self.b1_c1, self.b1_bn1, self.b1_a1 = conv(8, 8, 3, wbits=3), nn.BatchNorm2d(8), uact(4, -3)
        self.b1_c2, self.b1_bn2, self.b1_a2 = conv(8, 8, 3, wbits=3), nn.BatchNorm2d(8), iact(4, -3)
        self.b1_out = uact(4, -3)
        # block 2: stride-2 main path, 1x1 stride-2 conv shortcut
        self.b2_c1, self.b2_bn1, self.b2_a1 = (conv(8, 16, 3, stride=2, wbits=4, per_channel=True),
                                               nn.BatchNorm2d(16), uact(4, -3))
        self.b2_c2, self.b2_bn2, self.b2_a2 = conv(16, 16, 3, wbits=3), nn.BatchNorm2d(16), iact(4, -3)
        self.b2_sc, self.b2_sc_bn, self.b2_sc_a = (conv(8, 16, 1, stride=2, wbits=2, per_channel=True),
                                                   nn.BatchNorm2d(16), iact(4, -3))
        self.b2_out = uact(4, -3)
        self.head = Head(16)

    def forward(self, x):
        x = self.stem_act(self.stem_bn(self.stem(self.inp(x))))
        y = self.b1_a1(self.b1_bn1(self.b1_c1(x)))
        y = self.b1_a2(self.b1_bn2(self.b1_c2(y)))
        x = self.b1_out(x + y)
        y = self.b2_a1(self.b2_bn1(self.b2_c1(x)))
        y = self.b2_a2(self.b2_bn2(self.b2_c2(y)))
        s = self.b2_sc_a(self.b2_sc_bn(self.b2_sc(x)))
        x = self.b2_out(y + s)
        return self.head(x)


class ResNetRequant(nn.Module):
    """Identity block whose shortcut is requantized by its own QuantIdentity (3-bit, scale 2^-2)
    while the main path ends in a 4-bit signed quantizer with scale 2^-3."""

    def __init__(self):
        super().__init__()
        self.inp = iact(4, -3)
        self.stem, self.stem_bn, self.stem_act = conv(4, 8, 3, wbits=4), nn.BatchNorm2d(8), uact(4, -3)
        self.c1, self.bn1, self.a1 = conv(8, 8, 3, wbits=3, per_channel=True), nn.BatchNorm2d(8), uact(4, -3)
        self.c2, self.bn2, self.a2 = conv(8, 8, 3, wbits=3), nn.BatchNorm2d(8), iact(4, -3)
        self.sc_q = uident(3, -2)          # shortcut requantized: unsigned 3-bit, scale 2^-2
        self.out = uact(4, -3)
        self.head = Head(8)

    def forward(self, x):
        x = self.stem_act(self.stem_bn(self.stem(self.inp(x))))
        y = self.a2(self.bn2(self.c2(self.a1(self.bn1(self.c1(x))))))
        x = self.out(y + self.sc_q(x))
        return self.head(x)


class MobileNetV2Block(nn.Module):
    """Inverted residual: 1x1 expand 4->16, 3x3 depthwise, 1x1 project 16->4, Add with the input."""

    def __init__(self):
        super().__init__()
        self.inp = iact(4, -3)
        self.expand, self.bn1, self.a1 = conv(4, 16, 1, wbits=4, per_channel=True), nn.BatchNorm2d(16), uact(4, -3)
        self.dw, self.bn2, self.a2 = (conv(16, 16, 3, groups=16, wbits=3, per_channel=True),
                                      nn.BatchNorm2d(16), uact(4, -3))
        self.project, self.bn3, self.a3 = conv(16, 4, 1, wbits=4), nn.BatchNorm2d(4), iact(4, -3)
        self.out = iact(4, -2)
        self.head = Head(4, bits=4, exp=-4)
        # the head quantizer after the pool must be signed here (the block output is signed)
        self.head.q = iact(4, -4)

    def forward(self, x):
        x = self.inp(x)
        y = self.a3(self.bn3(self.project(self.a2(self.bn2(self.dw(self.a1(self.bn1(self.expand(x)))))))))
        return self.head(self.out(x + y))


class ConcatNet(nn.Module):
    """stem -> {1x1 conv -> 4 ch, 3x3 conv -> 8 ch} (one shared QuantReLU) -> cat -> conv -> head."""

    def __init__(self):
        super().__init__()
        self.inp = iact(4, -3)
        self.stem, self.stem_bn, self.stem_act = conv(4, 8, 3, wbits=4), nn.BatchNorm2d(8), uact(4, -3)
        self.ba, self.ba_bn = conv(8, 4, 1, wbits=4, per_channel=True), nn.BatchNorm2d(4)
        self.bb, self.bb_bn = conv(8, 8, 3, wbits=3), nn.BatchNorm2d(8)
        self.branch_act = uact(4, -3)      # shared by both branches: same bit width and scale
        self.c, self.c_bn, self.c_act = conv(12, 16, 3, wbits=3, per_channel=True), nn.BatchNorm2d(16), uact(4, -3)
        self.head = Head(16)

    def forward(self, x):
        x = self.stem_act(self.stem_bn(self.stem(self.inp(x))))
        a = self.branch_act(self.ba_bn(self.ba(x)))
        b = self.branch_act(self.bb_bn(self.bb(x)))
        x = torch.cat([a, b], dim=1)
        return self.head(self.c_act(self.c_bn(self.c(x))))


class ConcatMixed(nn.Module):
    """Three branches with DIFFERENT quantizers (UINT4 2^-3, UINT3 2^-2, INT2 2^-1) concatenated,
    then requantized onto one scale by a signed QuantIdentity (INT4 2^-2) before the next conv."""

    def __init__(self):
        super().__init__()
        self.inp = iact(4, -3)
        self.stem, self.stem_bn, self.stem_act = conv(4, 8, 3, wbits=4), nn.BatchNorm2d(8), uact(4, -3)
        self.ba, self.ba_bn, self.ba_act = conv(8, 4, 1, wbits=4), nn.BatchNorm2d(4), uact(4, -3)
        self.bb, self.bb_bn, self.bb_act = conv(8, 4, 3, wbits=3, per_channel=True), nn.BatchNorm2d(4), uact(3, -2)
        self.bc, self.bc_bn, self.bc_act = conv(8, 6, 3, wbits=2), nn.BatchNorm2d(6), iact(2, -1)
        self.cat_q = iact(4, -2)            # requantize the mixed-scale concat onto one scale
        self.c, self.c_bn, self.c_act = conv(14, 16, 3, wbits=3), nn.BatchNorm2d(16), uact(4, -3)
        self.head = Head(16)

    def forward(self, x):
        x = self.stem_act(self.stem_bn(self.stem(self.inp(x))))
        a = self.ba_act(self.ba_bn(self.ba(x)))
        b = self.bb_act(self.bb_bn(self.bb(x)))
        c = self.bc_act(self.bc_bn(self.bc(x)))
        x = self.cat_q(torch.cat([a, b, c], dim=1))
        return self.head(self.c_act(self.c_bn(self.c(x))))


class Fanout3(nn.Module):
    """One quantized tensor read by three convs (1x1, 3x3, 1x1); outputs re-joined by two Adds."""

    def __init__(self):
        super().__init__()
        self.inp = iact(4, -3)
        self.stem, self.stem_bn, self.stem_act = conv(4, 8, 3, wbits=4), nn.BatchNorm2d(8), uact(4, -3)
        self.ca, self.ca_bn, self.ca_act = conv(8, 8, 1, wbits=4), nn.BatchNorm2d(8), iact(4, -3)
        self.cb, self.cb_bn, self.cb_act = conv(8, 8, 3, wbits=3, per_channel=True), nn.BatchNorm2d(8), iact(4, -3)
        self.cc, self.cc_bn, self.cc_act = conv(8, 8, 1, wbits=2), nn.BatchNorm2d(8), iact(3, -2)
        self.sum1 = iact(4, -2)
        self.sum2 = uact(4, -3)
        self.head = Head(8)

    def forward(self, x):
        x = self.stem_act(self.stem_bn(self.stem(self.inp(x))))
        a = self.ca_act(self.ca_bn(self.ca(x)))
        b = self.cb_act(self.cb_bn(self.cb(x)))
        c = self.cc_act(self.cc_bn(self.cc(x)))
        s = self.sum1(a + b)
        return self.head(self.sum2(s + c))


class UpsampleConcat(nn.Module):
    """U-Net-like decoder step: conv (skip) -> stride-2 conv -> nearest x2 upsample (Resize)
    -> cat with the skip tensor (same quantizer settings) -> conv -> head."""

    def __init__(self):
        super().__init__()
        self.inp = iact(4, -3)
        self.enc, self.enc_bn, self.enc_act = conv(4, 8, 3, wbits=4), nn.BatchNorm2d(8), uact(4, -3)
        self.down, self.down_bn, self.down_act = (conv(8, 8, 3, stride=2, wbits=3, per_channel=True),
                                                  nn.BatchNorm2d(8), uact(4, -3))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.dec, self.dec_bn, self.dec_act = conv(16, 8, 3, wbits=3), nn.BatchNorm2d(8), uact(4, -3)
        self.head = Head(8)

    def forward(self, x):
        skip = self.enc_act(self.enc_bn(self.enc(self.inp(x))))
        d = self.down_act(self.down_bn(self.down(skip)))
        x = torch.cat([self.up(d), skip], dim=1)
        return self.head(self.dec_act(self.dec_bn(self.dec(x))))


class MLPResidual(nn.Module):
    """1x16 input -> Linear+ReLU -> Linear+QuantIdentity -> Add with the quantized input -> ReLU -> Linear(10)."""

    def __init__(self):
        super().__init__()
        self.inp = iact(4, -3)
        self.fc1, self.a1 = linear(16, 16, wbits=4, per_channel=True), uact(4, -3)
        self.fc2, self.a2 = linear(16, 16, wbits=3), iact(4, -3)
        self.out = uact(4, -3)
        self.fc3 = linear(16, 10, wbits=4)

    def forward(self, x):
        x = self.inp(x)
        y = self.a2(self.fc2(self.a1(self.fc1(x))))
        return self.fc3(self.out(x + y))


MODELS = [
    ("resnet_block", ResNetBlock, (1, 4, 8, 8)),
    ("resnet_requant", ResNetRequant, (1, 4, 8, 8)),
    ("mobilenetv2_block", MobileNetV2Block, (1, 4, 8, 8)),
    ("concat_net", ConcatNet, (1, 4, 8, 8)),
    ("concat_mixed", ConcatMixed, (1, 4, 8, 8)),
    ("fanout3", Fanout3, (1, 4, 8, 8)),
    ("upsample_concat", UpsampleConcat, (1, 4, 8, 8)),
    ("mlp_residual", MLPResidual, (1, 16)),
]


# ----------------------------------------------------------------------------------------------
# Randomization, export, verification
# ----------------------------------------------------------------------------------------------

def sample_input(shape, n):
    # 4-bit signed input quantizer with scale 2^-3 covers [-1, 0.875]
    return torch.randn((n,) + tuple(shape[1:])) * 0.6


def randomize(model, shape):
    """Random per-output-channel weight magnitudes, BN statistics calibrated on random data and
    then perturbed, random BN affine parameters."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (qnn.QuantConv2d, qnn.QuantLinear)):
                gain = torch.empty(m.weight.shape[0]).uniform_(0.5, 2.0)
                m.weight.mul_(gain.view(-1, *([1] * (m.weight.dim() - 1))))
        bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
        for m in bns:
            m.momentum = None  # cumulative average over the calibration batches
        model.train()
        for _ in range(8):
            model(sample_input(shape, 32))
        for m in bns:
            c = m.num_features
            m.running_mean.add_(torch.empty(c).uniform_(-0.1, 0.1) * m.running_var.sqrt())
            m.running_var.mul_(torch.empty(c).uniform_(0.6, 1.6))
            m.weight.copy_(torch.empty(c).uniform_(0.4, 1.2) * torch.where(torch.rand(c) < 0.15, -1.0, 1.0))
            m.bias.copy_(torch.empty(c).uniform_(-0.3, 0.5))
    model.eval()


def quant_params(mw, node):
    """(signed, bits, scale, narrow) of a Quant node, scale as a float or list."""
    attrs = {a.name: a.i for a in node.attribute if a.type == 2}
    scale = mw.get_initializer(node.input[1])
    bits = mw.get_initializer(node.input[3])
    scale = scale.flatten().tolist() if scale is not None else node.input[1]
    bits = int(bits) if bits is not None else node.input[3]
    return bool(attrs.get("signed", 1)), bits, scale, bool(attrs.get("narrow", 0))


def fmt_quant(mw, node):
    signed, bits, scale, narrow = quant_params(mw, node)
    if isinstance(scale, list) and len(scale) == 1:
        e = math.log2(scale[0])
        sc = f"2^{int(e)}" if e == int(e) else f"{scale[0]}"
    else:
        sc = "per-channel [" + ", ".join(f"2^{int(math.log2(s))}" for s in scale) + "]"
    return f"{'INT' if signed else 'UINT'}{bits}{' narrow' if narrow else ''} scale {sc}"


def is_weight_quant(mw, node):
    return mw.get_initializer(node.input[0]) is not None


def quant_source(mw, tensor):
    """The activation Quant that produces `tensor` (looking through nothing), or None."""
    p = mw.find_producer(tensor)
    return p if p is not None and p.op_type == "Quant" else None


def quant_sink(mw, tensor):
    """The Quant that requantizes `tensor` (directly, or after a Relu for QuantReLU)."""
    cons = mw.find_consumers(tensor) or []
    out = []
    for c in cons:
        if c.op_type == "Quant":
            out.append(("", c))
        elif c.op_type == "Relu":
            for c2 in mw.find_consumers(c.output[0]) or []:
                if c2.op_type == "Quant":
                    out.append(("Relu -> ", c2))
        else:
            out.append((c.op_type, None))
    return out


def check_pot(mw):
    for n in mw.get_nodes_by_op_type("Quant"):
        s = mw.get_initializer(n.input[1]).flatten()
        e = np.log2(s)
        assert np.all(e == np.round(e)), f"{n.name}: non power-of-two scale {s}"
        assert float(mw.get_initializer(n.input[2]).max()) == 0.0, f"{n.name}: zero point"


def describe(name, mw):
    lines = []
    inp = mw.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    first = mw.find_consumer(inp.name)
    lines.append(f"input {inp.name} {shape}; input quantizer {first.name}: {fmt_quant(mw, first)}")
    lines.append("nodes:")
    for n in mw.graph.node:
        extra = ""
        if n.op_type == "Quant":
            kind = "weight" if is_weight_quant(mw, n) else "act"
            extra = f"  [{kind} {fmt_quant(mw, n)}]"
        elif n.op_type == "Resize":
            at = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            at = {k: v.decode() if isinstance(v, bytes) else v for k, v in at.items()}
            ins = [(t, mw.get_initializer(t).tolist() if t and mw.get_initializer(t) is not None else t)
                   for t in n.input]
            extra = f"  [{at} inputs {ins}]"
        elif n.op_type in ("Conv",):
            at = {a.name: list(a.ints) if a.ints else a.i for a in n.attribute}
            extra = f"  [k={at.get('kernel_shape')} s={at.get('strides')} p={at.get('pads')} g={at.get('group', 1)}]"
        lines.append(f"  {n.op_type:20s} {n.name}{extra}")
    for n in mw.graph.node:
        if n.op_type in ("Add", "Concat"):
            ins = []
            for t in n.input:
                q = quant_source(mw, t)
                if q is None:
                    p = mw.find_producer(t)
                    ins.append(f"{t} <- {p.op_type if p else 'graph input/initializer'} {p.name if p else ''}")
                else:
                    ins.append(f"{q.name} ({fmt_quant(mw, q)})")
            sinks = [f"{pre}{q.name} ({fmt_quant(mw, q)})" if q is not None else f"{pre} (no quantizer)"
                     for pre, q in quant_sink(mw, n.output[0])]
            lines.append(f"{n.op_type} {n.name}: inputs " + " + ".join(ins) + " -> output " + "; ".join(sinks))
    return "\n".join(lines)


def export_one(name, cls, shape, seed):
    torch.manual_seed(seed)
    model = cls()
    randomize(model, shape)
    raw = os.path.join(HERE, f"{name}.raw.onnx")
    out = os.path.join(HERE, f"{name}.onnx")
    export_qonnx(model, torch.zeros(shape), raw, dynamo=False)
    mw = cleanup_model(ModelWrapper(raw))
    os.remove(raw)
    mw.save(out)
    mw = ModelWrapper(out)
    check_pot(mw)

    iname, oname = mw.graph.input[0].name, mw.graph.output[0].name
    act_quants = [n for n in mw.get_nodes_by_op_type("Quant") if not is_weight_quant(mw, n)]
    codes = {n.name: set() for n in act_quants}
    maxdiff = 0.0
    xs = sample_input(shape, 6)
    for i in range(xs.shape[0]):
        x = xs[i:i + 1]
        with torch.no_grad():
            y = model(x).numpy()
        ctx = execute_onnx(mw, {iname: x.numpy()}, return_full_exec_context=True)
        maxdiff = max(maxdiff, float(np.abs(ctx[oname] - y).max()))
        for n in act_quants:
            s = mw.get_initializer(n.input[1])
            codes[n.name].update(np.unique(np.round(ctx[n.output[0]] / s)).astype(int).tolist())
    kb = os.path.getsize(out) / 1024
    print(f"=== {name}.onnx ({kb:.1f} KB, seed {seed})")
    print(describe(name, mw))
    print("distinct codes per activation quantizer (6 inputs): " +
          ", ".join(f"{k}:{len(v)}[{min(v)}..{max(v)}]" for k, v in codes.items()))
    status = "OK" if maxdiff < 1e-4 else "MISMATCH"
    print(f"max |qonnx - torch| = {maxdiff:.3g}  {status}")
    print()
    return maxdiff


def main():
    only = sys.argv[1:]
    results = {}
    for seed, (name, cls, shape) in enumerate(MODELS):
        if only and name not in only:
            continue
        results[name] = export_one(name, cls, shape, seed)
    print("summary: " + ", ".join(f"{k} {v:.3g}" for k, v in results.items()))


if __name__ == "__main__":
    main()
