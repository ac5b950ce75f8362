"""The host's share of a network: the model's own nodes before and after the accelerator, as small
qonnx models (FINN's parent model, in two pieces), run with qonnx ``execute_onnx``."""

import copy

import numpy as np
from onnx import TensorProto, helper

__all__ = ["submodel", "run_submodel"]


def submodel(model, node_names, inputs, outputs, name):
    """A ModelWrapper of ``model``'s nodes ``node_names`` from tensors ``inputs`` to ``outputs`` (shapes,
    datatypes and initializers copied), or None when there is nothing to run (``inputs == outputs``)."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.util.basic import qonnx_make_model

    if not node_names:
        if list(inputs) != list(outputs):
            raise ValueError(f"host {name}: no nodes, but inputs {inputs} differ from outputs {outputs}")
        return None
    wanted = set(node_names)
    nodes = [copy.deepcopy(n) for n in model.graph.node if n.name in wanted]
    used = {i for n in nodes for i in n.input} | {o for n in nodes for o in n.output}
    inits = [copy.deepcopy(i) for i in model.graph.initializer if i.name in used]
    init_names = {i.name for i in inits}

    def info(tensor):
        return helper.make_tensor_value_info(tensor, TensorProto.FLOAT, model.get_tensor_shape(tensor))

    inner = sorted(used - set(inputs) - set(outputs) - init_names - {""})
    graph = helper.make_graph(nodes, name, [info(t) for t in inputs], [info(t) for t in outputs],
                              initializer=inits, value_info=[info(t) for t in inner])
    sub = ModelWrapper(qonnx_make_model(graph, opset_imports=list(model.model.opset_import)))
    for tensor in used | set(inputs):
        if tensor:
            sub.set_tensor_datatype(tensor, model.get_tensor_datatype(tensor))
    return sub


def run_submodel(sub, x):
    """Run ``sub`` (or the identity for None) on each sample of ``x`` (batch first; the models are built
    for batch 1, as exported) and stack the results."""
    if sub is None:
        return np.asarray(x)
    from qonnx.core.onnx_exec import execute_onnx

    in_name, out_name = sub.graph.input[0].name, sub.graph.output[0].name
    shape = sub.get_tensor_shape(in_name)
    rows = [execute_onnx(sub, {in_name: np.asarray(sample, dtype=np.float32).reshape(shape)})[out_name]
            for sample in np.asarray(x)]
    return np.concatenate(rows, axis=0)
