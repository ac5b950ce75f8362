"""The model's exact semantics, and which differences from qonnx are float32 rounding ties.

qonnx executes a MatMul/Conv/Gemm in float32: the sum of a dot product is rounded after every addition,
in an order the runtime chooses; a residual Add of two quantized tensors with float scales adds two
rounded float32 products. The accelerator computes the same dot product exactly on integer codes
and then runs the model's own float32 nodes (scale, bias, BatchNorm, ReLU, Quant) on the exact value
(``rtlgen.passes.thresholds``). Where the exact value lies within float32 rounding of a quantizer's boundary
(a round-half-to-even tie of ``Quant``, or a threshold), the two can pick neighbouring codes, and the
difference then travels through the rest of the network.

:func:`exact_reference` evaluates the model node by node with the accelerator's semantics: quantizer
outputs are kept exactly (``code * scale`` in float64) for the linear ops that consume them; MatMul,
Conv and Gemm, an Add of two such tensors, a Softmax or a ReduceMean of one (and ops that only move values: reshapes, pooling by max,
padding...) are evaluated in float64 and rounded once to float32; every other node runs as qonnx runs it, in float32.
A dot product's exact value, and constant scales and biases on it, are kept as well for a next dot
product that reads them with no quantizer between (the accelerator carries such an accumulator into the
next layer as an exact integer stream). Its
:class:`TieReport` compares the two executions quantizer by quantizer: an output code that differs
while the quantizer's input differs by no more than float32 rounding (``rtol`` of the tensor's largest
value) is a *tie*; a differing code whose input differs by more is *downstream* of a tie, legal only if
the same sample has a tie upstream. Anything else is not explained by rounding, and ``explained`` is
False.
"""

from dataclasses import dataclass, field

import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_node
from qonnx.util.cleanup import cleanup_model

from sim import progress

__all__ = ["exact_reference", "TieReport", "TIE_RTOL"]

LINEAR_OPS = {"MatMul", "Conv", "Gemm"}             # float64 from exact inputs, then one rounding to float32
# ops that only select, move or copy values: exact in, exact out (evaluated in float64 as well)
MOVING_OPS = {"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity", "MaxPool", "Relu", "Pad",
              "Concat", "Slice", "Split", "Gather"}
QUANTIZER_OPS = {"Quant", "BipolarQuant", "MultiThreshold", "Trunc"}
# constant ops on an exact value that stay exact (in float64): a scale, a bias
CONSTANT_OPS = {"Mul": np.multiply, "Div": np.divide, "Add": np.add, "Sub": np.subtract}
TIE_RTOL = 1e-5         # a float32 dot product's rounding, relative to the tensor's largest magnitude


@dataclass
class TieReport:
    """How the float32 execution (qonnx) and the exact one differ, per quantizer node."""
    samples: int
    ties: dict = field(default_factory=dict)          # node name -> tie count over all samples
    downstream: int = 0                               # differing codes caused by a tie upstream
    unexplained: list = field(default_factory=list)   # (sample, node name, count): not a rounding tie

    @property
    def tie_count(self):
        return sum(self.ties.values())

    @property
    def explained(self):
        return not self.unexplained

    def summary(self):
        nodes = ", ".join(f"{name} ({n})" for name, n in self.ties.items())
        text = f"{self.tie_count} rounding ties in qonnx's float32 execution (at {nodes})" if self.ties else \
            "no rounding ties"
        if self.unexplained:
            rows = "; ".join(f"sample {s} {name}: {n} codes" for s, name, n in self.unexplained[:3])
            text += f"; differences that are not ties: {rows}"
        return text


def exact_reference(model_path, x):
    """(outputs of the exact execution, :class:`TieReport` against the float32 execution) for the
    input batch ``x``, one sample at a time as exported (batch 1)."""
    model = cleanup_model(ModelWrapper(str(model_path)))
    graph = model.graph
    name, out = graph.input[0].name, graph.output[0].name
    shape = model.get_tensor_shape(name)
    opset = next((o.version for o in model.model.opset_import if o.domain in ("", "ai.onnx")), 13)
    report = TieReport(len(x))
    outputs, samples = [], np.asarray(x, dtype=np.float32)
    for sample, s in enumerate(progress.over(samples, "exact semantics")):
        exact_ctx, exact_pre = _run(model, opset, {name: s.reshape(shape)}, exact=True)
        float_ctx, float_pre = _run(model, opset, {name: s.reshape(shape)}, exact=False)
        _classify(graph, sample, exact_ctx, float_ctx, exact_pre, float_pre, report)
        outputs.append(exact_ctx[out])
    order = [node.name for node in graph.node]
    report.ties = dict(sorted(report.ties.items(), key=lambda item: order.index(item[0])))
    return np.concatenate(outputs, axis=0), report


def _run(model, opset, inputs, *, exact):
    """Node by node: the float32 context (what every non-linear node sees), and each quantizer's input.
    With ``exact``, linear ops read the float64 values kept beside the float32 ones."""
    ctx = model.make_empty_exec_context()
    ctx.update(inputs)
    exact_of = {}               # tensor -> float64 value, where it is known exactly
    pre = {}                    # quantizer node name -> its float32 input
    for node in model.graph.node:
        if node.op_type in QUANTIZER_OPS:
            pre[node.name] = np.asarray(ctx[node.input[0]], np.float32).copy()
        if exact and node.op_type in LINEAR_OPS and not _scaled_gemm(node):
            exact_of[node.output[0]], ctx[node.output[0]] = _linear(node, ctx, exact_of, opset)
            continue
        if exact and node.op_type == "ReduceMean" and node.input[0] in exact_of:
            # a mean of exact values (the accelerator sums the codes exactly): float64, one rounding to float32
            exact_of[node.output[0]] = _float64(node, [exact_of[node.input[0]], *(ctx.get(i) for i in node.input[1:])],
                                                opset)[0]
            ctx[node.output[0]] = np.asarray(exact_of[node.output[0]]).astype(np.float32)
            continue
        if exact and node.op_type == "Softmax" and node.input[0] in exact_of:
            # the accelerator's softmax is the real one up to far less than float32's rounding: float64, then
            # one rounding to float32 (the quantizer after it then sees ties where qonnx's float32 one differs)
            exact_of[node.output[0]] = _softmax64(exact_of[node.input[0]], node)
            ctx[node.output[0]] = exact_of[node.output[0]].astype(np.float32)
            continue
        if exact and node.op_type == "Add" and all(i in exact_of for i in node.input):
            # a residual sum: the accelerator adds the codes exactly (AddStreams), qonnx in float32
            exact_of[node.output[0]] = exact_of[node.input[0]] + exact_of[node.input[1]]
            ctx[node.output[0]] = exact_of[node.output[0]].astype(np.float32)
            continue
        execute_node(node, ctx, model.graph, opset)
        if not exact:
            continue
        if node.op_type in QUANTIZER_OPS:
            exact_of[node.output[0]] = _exact_codes(node, ctx, model)
        elif node.op_type in MOVING_OPS and node.input[0] in exact_of:
            exact_of[node.output[0]] = _float64(node, [exact_of.get(i, ctx.get(i)) for i in node.input], opset)[0]
        elif node.op_type in CONSTANT_OPS and node.input[0] in exact_of and model.get_initializer(node.input[1]) is not None:
            # a scale after integer codes (FINN-ONNX: MultiThreshold, then Mul): the accelerator's code x scale;
            # a bias or scale after a dot product with no quantizer: the integer stream the accelerator
            # carries into the next dot product (what the node's own consumers read stays qonnx's float32)
            exact_of[node.output[0]] = CONSTANT_OPS[node.op_type](
                exact_of[node.input[0]], model.get_initializer(node.input[1]).astype(np.float64))
    return ctx, pre


def _softmax64(x, node):
    """Softmax in float64 along the node's axis (ONNX opset >= 13 semantics: one axis, default -1)."""
    axis = next((a.i for a in node.attribute if a.name == "axis"), -1)
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _exact_codes(node, ctx, model):
    """A quantizer's output as code x scale in float64 (qonnx computes the product in float32)."""
    y = np.asarray(ctx[node.output[0]])
    if node.op_type in ("MultiThreshold", "Trunc"):
        return y.astype(np.float64)     # MultiThreshold: integers (exact); Trunc: its float32 value as is
    scale = np.asarray(ctx[node.input[1]], np.float64)
    if node.op_type == "BipolarQuant":
        return np.sign(y).astype(np.float64) * scale
    zero = np.asarray(ctx[node.input[2]], np.float64)
    codes = np.round(y.astype(np.float64) / scale + zero)     # the float32 product rounds far below 0.5
    return (codes - zero) * scale


def _linear(node, ctx, exact_of, opset):
    """MatMul/Conv/Gemm in float64 on exact inputs: (the exact value, kept for a next dot product the
    accelerator carries it into; the value rounded once to float32, with a bias (Conv's third input,
    Gemm's C) added afterwards in float32, as the accelerator's activation chain adds it)."""
    data = [exact_of.get(i, np.asarray(ctx[i], np.float64)) for i in node.input[:2]]
    exact = _float64(node, data, opset, inputs=node.input[:2])[0]
    y = exact.astype(np.float32)
    if len(node.input) > 2 and node.input[2]:
        bias = np.asarray(ctx[node.input[2]], np.float32)
        bias = bias.reshape(1, -1, *([1] * (y.ndim - 2))) if node.op_type == "Conv" else bias
        exact, y = exact + bias.astype(np.float64), y + bias
    return exact, y


def _scaled_gemm(node):
    """A Gemm with alpha or beta other than 1 (not what exporters write): left to qonnx, in float32."""
    return node.op_type == "Gemm" and any(a.name in ("alpha", "beta") and a.f != 1.0 for a in node.attribute)


def _float64(node, values, opset, inputs=None):
    """Run one standard ONNX node on float64 values (onnx's numpy reference: ORT has no float64 Conv)."""
    inputs = list(node.input if inputs is None else inputs)
    feeds, infos = {}, []
    for name, value in zip(inputs, values):
        if not name:
            continue
        value = np.asarray(value)
        if value.dtype == np.float32:
            value = value.astype(np.float64)
        feeds[name] = value
        infos.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))
    single = helper.make_node(node.op_type, inputs, list(node.output[:1]) if node.op_type != "Split" else
                              list(node.output), name=node.name)
    single.attribute.extend(node.attribute)
    graph = helper.make_graph([single], "one", infos,
                              [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in single.output])
    runner = ReferenceEvaluator(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))
    return runner.run(None, feeds)


def _classify(graph, sample, exact_ctx, float_ctx, exact_pre, float_pre, report):
    """Count, per quantizer, the codes that differ between the two executions: ties, or downstream."""
    tie_seen = False
    for node in graph.node:
        if node.op_type not in QUANTIZER_OPS:
            continue
        differs = np.asarray(exact_ctx[node.output[0]]) != np.asarray(float_ctx[node.output[0]])
        if not differs.any():
            continue
        a, b = exact_pre[node.name].astype(np.float64), float_pre[node.name].astype(np.float64)
        gap = np.abs(a - b)
        small = gap <= TIE_RTOL * max(np.abs(a).max(), np.abs(b).max())
        ties, rest = int((differs & small).sum()), int((differs & ~small).sum())
        if rest and tie_seen:
            report.downstream += rest
        elif rest:
            report.unexplained.append((sample, node.name, rest))
        if ties:
            report.ties[node.name] = report.ties.get(node.name, 0) + ties
            tie_seen = True
