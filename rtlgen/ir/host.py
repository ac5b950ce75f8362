"""The host's share of a network: the model's own nodes before and after the accelerator, cut out as
small qonnx models (FINN's parent model, in two pieces); :func:`sim.stream_io.run_submodel` runs them."""

import copy

from onnx import TensorProto, helper
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.util.basic import qonnx_make_model

__all__ = ["submodel"]


def submodel(model, node_names, inputs, outputs, name):
    """A ModelWrapper of ``model``'s nodes ``node_names`` from tensors ``inputs`` to ``outputs`` (shapes,
    datatypes and initializers copied), or None when there is nothing to run (``inputs == outputs``)."""
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

    produced = {o for n in nodes for o in n.output} | init_names | set(inputs)
    for n in nodes:
        unknown = [i for i in n.input if i and i not in produced]
        if unknown:     # it would read zeros: a silently wrong host, so a bug to report, never to run
            raise ValueError(f"host {name}: node {n.name} ({n.op_type}) reads {unknown[0]}, which neither the "
                             f"host's nodes nor the model's constants give")
    inner = sorted(used - set(inputs) - set(outputs) - init_names - {""})
    graph = helper.make_graph(nodes, name, [info(t) for t in inputs], [info(t) for t in outputs],
                              initializer=inits, value_info=[info(t) for t in inner])
    sub = ModelWrapper(qonnx_make_model(graph, opset_imports=list(model.model.opset_import)))
    for tensor in used | set(inputs):
        if tensor:
            sub.set_tensor_datatype(tensor, model.get_tensor_datatype(tensor))
    return sub
