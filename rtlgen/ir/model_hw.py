"""A dataflow graph as ONNX (``OUT/model_hw.onnx``, the compile's checkpoints): FINN-style nodes with their
attributes, which open in Netron and read back as FINN's hardware-layer ONNX."""

import numpy as np
import onnx
from onnx import TensorProto, helper
from qonnx.core.datatype import BaseDataType

__all__ = ["model_hw"]


def model_hw(graph):
    """The dataflow graph (a :class:`rtlgen.ir.graph.DataflowGraph`, as the flow made it) as an ONNX graph of
    FINN-style nodes (domain finn.custom_op.fpgadataflow), tensors named as in the graph, the graph input
    ``global_in`` and output ``global_out``."""
    rename = {graph.input: "global_in", graph.output: "global_out"}
    nodes, inits = [], []
    for node in graph.nodes:
        inputs = [rename.get(t, t) for t in node.inputs]
        attrs = {"backend": "fpgadataflow", **_derived_attributes(node)}
        names = node.op.finn_names
        for key, value in {**node.params, **node.folding}.items():
            if isinstance(value, np.ndarray):
                name = f"{node.name}_{key}"
                inits.append(onnx.numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
                inputs.append(name)
            elif value is not None:
                attrs[names.get(key, key)] = _attribute(value)
        nodes.append(helper.make_node(node.op_type, inputs, [rename.get(t, t) for t in node.outputs], name=node.name,
                                      domain="finn.custom_op.fpgadataflow", **attrs))
    graph_proto = helper.make_graph(nodes, "rtlgen_dataflow",
                                    [helper.make_tensor_value_info("global_in", TensorProto.FLOAT, None)],
                                    [helper.make_tensor_value_info("global_out", TensorProto.FLOAT, None)],
                                    initializer=inits)
    return helper.make_model(graph_proto, producer_name="rtlgen")


def _derived_attributes(node):
    """FINN attributes the spec derives: the folding attributes with their defaults, outputDataType where
    the network left it implicit, and what the op's ``finn_export`` hook adds (the MVAU / VVAU activation
    flags)."""
    spec = node.spec()
    attrs = {attr: _attribute(getattr(spec, field)) for attr, field in node.op.folding.items()
             if getattr(spec, field, None) is not None}          # the folding in force, defaults included
    if spec.output_dtype is not None and "output_dtype" not in node.op.finn_names:
        attrs["outputDataType"] = spec.output_dtype.name
    if node.op.finn_export is not None:
        attrs.update(node.op.finn_export(spec))
    return attrs


def _attribute(value):
    if isinstance(value, BaseDataType):
        return value.name
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (tuple, list)):
        return [int(v) for v in value]
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return value
