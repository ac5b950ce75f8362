"""Exact integer thresholds for whatever the model computes between an integer accumulator and the next
quantizer (the ``to_finn`` and ``streamline`` passes in one).

Instead of rewriting the float ops (BatchNorm, scalar and per-channel Mul/Add, bias, ReLU, Quant...)
into thresholds by algebra, where float rounding and Quant's round-half-to-even make closed forms wrong
at ties, :class:`ActivationChain` runs the model's own nodes through qonnx ``execute_onnx`` on candidate
accumulator values, and :func:`derive_thresholds` binary-searches, per channel and output level, the
smallest accumulator that reaches the level. Whatever qonnx computes for an accumulator value, the
thresholds reproduce; decreasing channels (negative BN gamma or scale) are reported so the caller can
negate that weight column.
"""

import numpy as np
import onnx
from onnx import TensorProto, helper
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.util.basic import qonnx_make_model

from rtlgen.passes.load import CompileError

__all__ = ["ActivationChain", "derive_thresholds", "channel_directions", "ELEMENTWISE_OPS", "SHAPE_OPS", "QUANTIZERS"]

ELEMENTWISE_OPS = {"Mul", "Add", "Sub", "Div", "BatchNormalization", "Relu", "Clip", "LeakyRelu", "Sigmoid",
                   "Tanh", "HardSigmoid", "Neg", "Quant", "BipolarQuant", "MultiThreshold", "Trunc"}
SHAPE_OPS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}
QUANTIZERS = {"Quant", "BipolarQuant", "MultiThreshold", "Trunc"}     # outputs are scale * integer code
SAMPLES = 1025          # points checked for monotonicity over the accumulator range


class ActivationChain:
    """The model's elementwise nodes from tensor ``start`` (shape (1, C) or (1, C, H, W), channel axis 1)
    to tensor ``end``, evaluated on a batch of per-channel values (N, C).

    ``extra_bias`` (C,) is added first (a Conv's bias input, which is not a node of its own).
    """

    def __init__(self, model, nodes, start, end, channels, spatial, extra_bias=None):
        self.model, self.nodes, self.start, self.end = model, nodes, start, end
        self.channels, self.spatial, self.extra_bias = channels, spatial, extra_bias
        for node in nodes:
            if node.op_type not in ELEMENTWISE_OPS | SHAPE_OPS:
                raise CompileError(f"node {node.name} ({node.op_type}) cannot be absorbed into thresholds; "
                                   f"legal between a MatMul/Conv and its quantizer: "
                                   f"{', '.join(sorted(ELEMENTWISE_OPS | SHAPE_OPS))}")
            if node.op_type in SHAPE_OPS and spatial:
                raise CompileError(f"node {node.name} ({node.op_type}) reshapes a feature map before its "
                                   f"quantizer; only elementwise ops may sit there")

    def __call__(self, values):
        """Chain output for ``values`` (N, C) float: the same numbers qonnx computes element by element."""
        values = np.asarray(values, dtype=np.float32)
        n = values.shape[0]
        shape = (n, self.channels) + ((1, 1) if self.spatial else ())
        nodes, inits, current = [], [], self.start
        if self.extra_bias is not None:
            inits.append(self._constant("__bias", self.extra_bias))
            nodes.append(helper.make_node("Add", [current, "__bias"], ["__biased"]))
            current = "__biased"
        renamed = {self.start: current}
        for node in self.nodes:
            src = renamed.get(node.input[0], node.input[0])
            if node.op_type in SHAPE_OPS:
                renamed[node.output[0]] = src
                continue
            ins = []
            for name in node.input:
                if name in renamed:
                    ins.append(renamed[name])
                elif name == "":
                    ins.append("")
                else:
                    value = self.model.get_initializer(name)
                    if value is None:
                        raise CompileError(f"node {node.name} ({node.op_type}): input {name} must be a constant "
                                           f"or the activation itself")
                    inits.append(self._constant(name, value, keep=node.op_type in
                                                ("BatchNormalization", "MultiThreshold")))
                    ins.append(name)
            new = helper.make_node(node.op_type, ins, list(node.output), name=node.name, domain=node.domain)
            new.attribute.extend(a for a in node.attribute if a.name != "data_layout")
            if node.op_type == "MultiThreshold":
                new.attribute.append(helper.make_attribute("data_layout", "NCHW" if self.spatial else "NC"))
            nodes.append(new)
            renamed[node.output[0]] = node.output[0]
        out = renamed[self.end]
        graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info(self.start, TensorProto.FLOAT, shape)],
                                  [helper.make_tensor_value_info(out, TensorProto.FLOAT, shape)], initializer=inits)
        sub = ModelWrapper(qonnx_make_model(graph, opset_imports=list(self.model.model.opset_import)))
        for node in nodes:
            sub.set_tensor_shape(node.output[0], list(shape))
        result = execute_onnx(sub, {self.start: values.reshape(shape)})[out]
        return np.asarray(result, dtype=np.float64).reshape(n, self.channels)

    def _constant(self, name, value, keep=False):
        """A constant reshaped to broadcast against (N, C[, 1, 1]): scalars stay, per-channel -> (1, C...)."""
        value = np.asarray(value, dtype=np.float32)
        if not keep:
            if value.size == 1:
                value = value.reshape(())
            elif value.size == self.channels:
                value = value.reshape((1, self.channels) + ((1, 1) if self.spatial else ()))
            else:
                raise CompileError(f"constant {name} of shape {value.shape} is neither per-tensor nor "
                                   f"per-channel ({self.channels} channels)")
        return onnx.numpy_helper.from_array(value, name)


def channel_directions(codes_of, lo, hi, channels, where):
    """+1 where ``codes_of(acc)`` is non-decreasing in acc over [lo, hi], -1 where non-increasing
    (constant counts as +1); a channel that is neither is an error naming ``where``."""
    span = hi - lo
    acc = np.unique(np.round(np.linspace(lo, hi, min(SAMPLES, span + 1))).astype(np.int64))
    codes = codes_of(np.repeat(acc[:, None], channels, axis=1))       # (M, C)
    steps = np.diff(codes, axis=0)
    up, down = np.all(steps >= 0, axis=0), np.all(steps <= 0, axis=0)
    bad = np.flatnonzero(~up & ~down)
    if len(bad):
        raise CompileError(f"{where}: the activation of channel {bad[0]} is not monotonic in the accumulator, "
                           f"so it cannot be computed by thresholds")
    return np.where(up, 1, -1)


def derive_thresholds(codes_of, lo, hi, channels, qmin, levels):
    """T (channels, levels): T[c, k-1] = the smallest acc in [lo, hi] with ``codes_of(acc)[c] >= qmin + k``,
    or hi + 1 if none; ``codes_of`` maps (N, C) integer accumulators to (N, C) integer codes and is
    non-decreasing in acc for every channel."""
    target = qmin + np.arange(1, levels + 1)[None, :]                  # (1, L)
    low = np.full((channels, levels), lo, dtype=np.int64)
    high = np.full((channels, levels), hi + 1, dtype=np.int64)
    while np.any(low < high):
        mid = (low + high) // 2
        reached = codes_of(mid.T).T >= target                          # evaluate L rows of C channels
        high = np.where(reached & (low < high), mid, high)
        low = np.where(~reached & (low < high), mid + 1, low)
    return high
