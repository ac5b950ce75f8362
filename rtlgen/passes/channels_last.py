"""qonnx's channels-last layout back to the channels-first one the lowering reads.

qonnx's ``ConvertToChannelsLastAndClean`` (and hls4ml's channels-last QONNX models) put Conv, MaxPool and
BatchNormalization in the ``qonnx.custom_op.channels_last`` domain: they read and write NHWC tensors (Conv
weights OHWI), with Transposes at the edges and every elementwise op between them in NHWC. The accelerator
streams pixels with their channels innermost either way, so nothing about the hardware changes; only the
graph is rewritten:

1. each channels-last node becomes the standard op between a Transpose to NCHW and one back (Conv weights
   permuted OHWI -> OIHW in their initializer, under their Quant);
2. Transposes to NHWC move downstream past elementwise ops (qonnx's ``move_transpose_past_eltwise``,
   which permutes the ops' constant inputs) and past forks (qonnx's ``MoveTransposePastFork``, one copy
   per branch), and a Transpose to NHWC followed by one to NCHW cancels
   (qonnx's ``RemoveConsecutiveChanFirstAndChanLastTrafos`` removes only the other order), until nothing
   changes;
3. constants folded, shapes inferred again.

What is left is the channels-first graph the exporter started from, with Transposes only where the
model's own input or output is channels-last (the host runs those).
"""

import numpy as np
from onnx import helper
from qonnx.transformation.channels_last import (MoveTransposePastFork, is_eltwise_optype,
                                                move_transpose_past_eltwise)
from qonnx.transformation.fold_constants import FoldConstants
from qonnx.transformation.general import SortGraph
from qonnx.transformation.infer_shapes import InferShapes

__all__ = ["is_channels_last", "to_channels_first"]

DOMAIN = "qonnx.custom_op.channels_last"
_TO_FIRST, _TO_LAST = [0, 3, 1, 2], [0, 2, 3, 1]
_ROUNDS = 1000          # each round moves or removes one Transpose: a bound far above any real graph's count


def is_channels_last(model):
    return any(node.domain == DOMAIN for node in model.graph.node)


def to_channels_first(model):
    """``model`` (a ModelWrapper) with its channels-last nodes rewritten as above; returns the new model."""
    for node in list(model.graph.node):
        if node.domain == DOMAIN:
            _standard_between_transposes(model, node)
    model = model.transform(SortGraph())
    for _ in range(_ROUNDS):
        if _remove_one_inverse_pair(model) or _move_one_to_last_downstream(model):
            continue
        model, forked = model.transform(MoveTransposePastFork()), model
        if model.graph.SerializeToString() == forked.graph.SerializeToString():
            break
    model = model.transform(FoldConstants(exclude_op_types=["Quant", "BipolarQuant", "MultiThreshold"]))
    model = model.transform(InferShapes())
    return model.transform(SortGraph())


def _standard_between_transposes(model, node):
    graph = model.graph
    at = list(graph.node).index(node)
    nhwc_in, nhwc_out = node.input[0], node.output[0]
    nchw_in, nchw_out = model.make_new_valueinfo_name(), model.make_new_valueinfo_name()
    n, h, w, c = model.get_tensor_shape(nhwc_in)
    model.set_tensor_shape(nchw_in, [n, c, h, w])
    on, oh, ow, oc = model.get_tensor_shape(nhwc_out)
    model.set_tensor_shape(nchw_out, [on, oc, oh, ow])
    graph.node.insert(at, helper.make_node("Transpose", [nhwc_in], [nchw_in], perm=_TO_FIRST,
                                           name=f"{node.name}_to_nchw"))
    graph.node.insert(at + 2, helper.make_node("Transpose", [nchw_out], [nhwc_out], perm=_TO_LAST,
                                               name=f"{node.name}_to_nhwc"))
    node.input[0], node.output[0] = nchw_in, nchw_out
    node.domain = ""
    if node.op_type == "Conv":
        _weights_to_oihw(model, node)


def _weights_to_oihw(model, conv):
    """The Conv's OHWI weights as OIHW: the initializer itself, or the one under its Quant."""
    name = conv.input[1]
    producer = model.find_producer(name)
    target = producer.input[0] if producer is not None and producer.op_type in ("Quant", "BipolarQuant") else name
    value = model.get_initializer(target)
    if value is None or value.ndim != 4:
        raise ValueError(f"channels-last Conv {conv.name}: weights {name} are not a constant OHWI tensor")
    model.set_initializer(target, np.ascontiguousarray(value.transpose(0, 3, 1, 2)))
    if producer is not None and target != name:
        for k in range(1, len(producer.input)):     # a per-output-channel scale (O,1,1,1) keeps its shape
            scale = model.get_initializer(producer.input[k])
            if scale is not None and scale.ndim == 4 and scale.shape[1:] != (1, 1, 1):
                model.set_initializer(producer.input[k], np.ascontiguousarray(scale.transpose(0, 3, 1, 2)))
        model.set_tensor_shape(name, list(model.get_initializer(target).shape))


def _perm(node):
    return list(helper.get_attribute_value(next(a for a in node.attribute if a.name == "perm")))


def _remove_one_inverse_pair(model):
    """Remove one Transpose to NHWC directly followed by its only reader, a Transpose to NCHW."""
    outputs = {o.name for o in model.graph.output}
    for node in model.graph.node:
        if node.op_type != "Transpose" or _perm(node) != _TO_LAST or node.output[0] in outputs:
            continue
        readers = model.find_consumers(node.output[0]) or []
        if len(readers) != 1 or readers[0].op_type != "Transpose" or _perm(readers[0]) != _TO_FIRST:
            continue
        back = readers[0]
        for consumer in model.find_consumers(back.output[0]) or []:
            consumer.input[:] = [node.input[0] if i == back.output[0] else i for i in consumer.input]
        if back.output[0] in outputs:
            return False
        model.graph.node.remove(back)
        model.graph.node.remove(node)
        return True
    return False


def _move_one_to_last_downstream(model):
    """Move one Transpose to NHWC past the elementwise op after it (in place); whether one moved."""
    for node in model.graph.node:
        if node.op_type != "Transpose" or _perm(node) != _TO_LAST:
            continue
        successors = model.find_consumers(node.output[0]) or []
        if len(successors) == 1 and is_eltwise_optype(successors[0].op_type) and \
                node.output[0] not in [o.name for o in model.graph.output]:
            move_transpose_past_eltwise(node, successors[0], model)
            return True
    return False
