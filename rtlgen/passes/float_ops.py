"""The model's float ops as the lowering reads them, on a qonnx ``ModelWrapper``: the chain of elementwise
ops after a tensor up to its quantizer, a quantizer's output moved by the scalar Add/Sub/Mul/Div right
after it (still integer codes, no hardware), whether a node's constants are one number, and a node run
alone on given data as qonnx runs it."""

from dataclasses import dataclass

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper
from onnx.numpy_helper import from_array
from qonnx.core.datatype import DataType

from layers.datapath import dtype_for_range
from rtlgen.errors import CompileError
from rtlgen.passes.thresholds import ELEMENTWISE_OPS, QUANTIZERS, SHAPE_OPS

__all__ = ["graph_outputs", "chain_after", "chain_from", "shift_after", "Shifted", "absorbable", "per_tensor_node",
           "run_alone"]


def graph_outputs(model):
    """The names of the model's graph outputs."""
    return {o.name for o in model.graph.output}


def chain_after(model, tensor):
    """(elementwise nodes, quantizer or None, the node that stopped the walk or None) after ``tensor``."""
    consumers = model.find_consumers(tensor) or []
    if len(consumers) != 1 or tensor in graph_outputs(model):
        return [], None, None
    return chain_from(model, consumers[0])


def chain_from(model, node):
    """:func:`chain_after` starting at ``node`` itself."""
    nodes = []
    while True:
        if node.op_type in QUANTIZERS:
            return nodes, node, None
        if node.op_type not in ELEMENTWISE_OPS | SHAPE_OPS or not absorbable(model, node):
            return nodes, None, node
        nodes.append(node)
        tensor = node.output[0]
        consumers = model.find_consumers(tensor) or []
        if len(consumers) != 1 or tensor in graph_outputs(model):
            return nodes, None, None
        node = consumers[0]


@dataclass
class Shifted:
    """A quantizer's codes after the scalar ops that move them (:func:`shift_after`)."""
    tensor: str             # the model tensor the codes now stand for
    dtype: DataType
    scale: object           # a number, or (C,) per channel
    qmin: int               # the code of the lowest level (the layer's ActVal)
    names: list             # the absorbed nodes' names, and the nodes
    nodes: list


def shift_after(model, quantizer, dtype, scale, qmin, levels):
    """The quantizer's output moved by scalar Add/Sub and scaled by positive scalar Mul/Div right after it
    (FINN's QONNX->FINN conversion writes a signed activation as MultiThreshold -> Add -> Mul): still
    ``scale' * code'`` with integer codes, so the quantizer's layer emits the moved codes (its ActVal)
    and no hardware is added. An Add that is not a whole number of steps, or a Mul that is not
    positive, ends the walk (those nodes are then what they were before)."""
    tensor, names, nodes = quantizer.output[0], [], []
    shift = 0
    while dtype != DataType["BIPOLAR"] and tensor not in graph_outputs(model):
        consumers = model.find_consumers(tensor) or []
        if len(consumers) != 1 or consumers[0].op_type not in ("Add", "Sub", "Mul", "Div"):
            break
        node = consumers[0]
        others = [i for i in node.input if i != tensor]
        const = model.get_initializer(others[0]) if len(others) == 1 else None
        if const is None or np.size(const) != 1 or (node.op_type in ("Sub", "Div") and node.input[0] != tensor):
            break
        c = float(np.asarray(const).reshape(-1)[0])
        if node.op_type in ("Add", "Sub"):
            steps = np.unique((c if node.op_type == "Add" else -c) / np.asarray(scale, dtype=np.float64))
            if len(steps) != 1 or steps[0] != round(steps[0]):
                break               # (per channel: the same whole number of steps in every channel)
            shift += int(round(steps[0]))
        elif c <= 0:
            break
        else:
            scale = scale * c if node.op_type == "Mul" else scale / c
        names.append(node.name)
        nodes.append(node)
        tensor = node.output[0]
    if shift:
        dtype = dtype_for_range(qmin + shift, qmin + shift + levels)
    return Shifted(tensor, dtype, scale if np.ndim(scale) else float(scale), qmin + shift, names, nodes)


def absorbable(model, node):
    """An elementwise node whose other inputs are constants (not a second stream: that is a join)."""
    return all(model.get_initializer(i) is not None for i in node.input[1:] if i)


def per_tensor_node(model, node):
    """True if every constant of ``node`` is one number (MultiThreshold: one row of thresholds)."""
    consts = [model.get_initializer(i) for i in node.input[1:] if model.get_initializer(i) is not None]
    if node.op_type == "MultiThreshold":
        return np.asarray(consts[0]).shape[0] == 1
    return all(np.asarray(c).size == 1 for c in consts)


def run_alone(model, node, x):
    """The output of ``node`` alone for data input ``x`` (its other inputs are the model's constants), by
    onnxruntime, which is what qonnx ``execute_onnx`` runs standard ops with."""
    missing = [i for i in node.input[1:] if i and model.get_initializer(i) is None]
    if missing:
        raise CompileError(f"node {node.name} ({node.op_type}): input {missing[0]} must be a constant")
    consts = [from_array(np.asarray(model.get_initializer(i)), i) for i in node.input[1:] if i]
    graph = helper.make_graph([node], "alone", [helper.make_tensor_value_info(node.input[0], TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)], consts)
    opset = next((o.version for o in model.model.opset_import if o.domain in ("", "ai.onnx")), 13)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {node.input[0]: x})[0]
