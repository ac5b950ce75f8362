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


BATCH = 256        # samples per execute_onnx call on the host models


def run_submodel(sub, x):
    """Run ``sub`` (or the identity for None) on ``x`` (batch first; the models are built for batch 1,
    as exported) and stack the results.

    Batches of :data:`BATCH` samples go through one ``execute_onnx`` (qonnx's ChangeBatchSize; the
    per-call overhead is ~10 ms, far more than the work); a model that does not take a batch (e.g. a
    Reshape to a shape computed at run time) runs one sample at a time. The host ops are elementwise
    or reshapes, so the batch changes no value (and verify compares every one with qonnx).
    """
    if sub is None:
        return np.asarray(x)
    x = np.asarray(x, dtype=np.float32)
    rows = []
    for start in range(0, len(x), BATCH):
        chunk = x[start:start + BATCH]
        try:
            rows.append(_execute(_batched(sub, len(chunk)), chunk))
        except Exception:               # the model does not take a batch: one sample at a time
            rows.extend(_execute(sub, sample[None]) for sample in chunk)
    return np.concatenate(rows, axis=0)


def _execute(sub, x):
    from qonnx.core.onnx_exec import execute_onnx

    in_name, out_name = sub.graph.input[0].name, sub.graph.output[0].name
    shape = list(sub.get_tensor_shape(in_name))
    out = execute_onnx(sub, {in_name: x.reshape([len(x)] + shape[1:])})[out_name]
    if len(out) != len(x):
        raise ValueError(f"host model {sub.graph.name}: {len(out)} results for {len(x)} samples")
    return out


_BATCHED = {}


def _batched(sub, n):
    """``sub`` with batch size ``n`` (cached per model object and size)."""
    from qonnx.transformation.change_batchsize import ChangeBatchSize
    from qonnx.transformation.infer_shapes import InferShapes

    key = (id(sub), n)
    if key not in _BATCHED or _BATCHED[key][0] is not sub:
        if n == 1:
            return sub
        model = copy.deepcopy(sub).transform(ChangeBatchSize(n)).transform(InferShapes())
        _BATCHED[key] = (sub, model)
    return _BATCHED[key][1]
