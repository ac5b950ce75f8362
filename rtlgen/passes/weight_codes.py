"""A model's constant weights as integer codes for the lowering: the weight quantizers whose inputs are all
constants folded into (codes, scale per output channel, datatype), a weight scale as one value per output
channel, and a grouped convolution's weights as the dense ones computing the same function."""

import numpy as np
import onnx
from qonnx.core.datatype import DataType
from qonnx.core.onnx_exec import execute_node

from rtlgen.errors import CompileError

__all__ = ["fold_weight_quants", "weight_scale_per_channel", "dense_grouped_weights"]


def fold_weight_quants(model):
    """{weight tensor: (integer codes, scale broadcastable per output channel, DataType)} for every
    Quant/BipolarQuant whose inputs are all constants; their outputs become plain initializers."""
    folded = {}
    for node in list(model.graph.node):
        if node.op_type not in ("Quant", "BipolarQuant"):
            continue
        inputs = [model.get_initializer(i) for i in node.input]
        if any(v is None for v in inputs):
            continue
        dtype, _, _, _ = _weight_dtype(model, node)
        context = {i: v for i, v in zip(node.input, inputs)}
        context[node.output[0]] = None
        execute_node(node, context, model.graph, opset_version=11)
        real = np.asarray(context[node.output[0]], dtype=np.float64)
        scale = np.asarray(inputs[1], dtype=np.float64)
        codes = np.round(real / scale)
        if not np.allclose(codes * scale, real, rtol=1e-6, atol=0):
            raise CompileError(f"node {node.name} ({node.op_type}): weights are not integer multiples of the scale")
        readers = {c.op_type for c in model.find_consumers(node.output[0]) or []}
        out_scale = _output_channel_scale(scale, real.shape, transposed="ConvTranspose" in readers, node=node)
        folded[node.output[0]] = (codes.astype(np.int64), out_scale, dtype)
        model.set_initializer(node.output[0], real.astype(np.float32))
        model.graph.node.remove(node)
    return folded


def _output_channel_scale(scale, shape, transposed=False, node=None):
    """The weight scale per output channel: MatMul W (MW, MH) -> axis 1; Conv W (OC, ...) -> axis 0;
    ConvTranspose W (IC, OC, ...) -> axis 1 (``transposed``)."""
    full = np.broadcast_to(scale, shape)
    axis = 1 if len(shape) == 2 or transposed else 0
    moved = np.moveaxis(full, axis, 0).reshape(shape[axis], -1)
    if not np.all(moved == moved[:, :1]):
        where = f"node {node.name} ({node.op_type}): " if node is not None else ""
        raise CompileError(f"{where}weight scale of shape {scale.shape} varies within an output channel (axis "
                           f"{axis} of weights {tuple(shape)}); legal: one scale per tensor or per output channel")
    return moved[:, 0]


def _weight_dtype(model, node):
    """Codes datatype of a weight quantizer (narrow signed b-bit is INTb; 1-bit signed is BIPOLAR)."""
    if node.op_type == "BipolarQuant":
        return DataType["BIPOLAR"], None, None, None
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    bits = float(np.asarray(model.get_initializer(node.input[3])).reshape(-1)[0])
    zero = np.asarray(model.get_initializer(node.input[2]))
    if np.any(zero != 0):
        raise CompileError(f"node {node.name} (Quant): weight zero point must be 0 for hardware")
    if bits != int(bits) or bits < 1:
        raise CompileError(f"node {node.name} (Quant): weight bit width must be a positive integer, not {bits}")
    signed = bool(attrs.get("signed", 1))
    if int(bits) == 1 and signed:
        return DataType["BIPOLAR"], None, None, None
    return DataType[f"{'INT' if signed else 'UINT'}{int(bits)}"], None, None, None


def weight_scale_per_channel(scale, channels, node):
    """A weight scale as a (channels,) array; it must be per-tensor or per output channel."""
    scale = np.asarray(scale, dtype=np.float64)
    if scale.size == 1:
        return np.full(channels, float(scale.reshape(-1)[0]))
    if scale.size == channels:
        return scale.reshape(-1)
    raise CompileError(f"node {node.name} ({node.op_type}): weight scale of shape {scale.shape} is neither "
                       f"per-tensor nor per output channel")


def dense_grouped_weights(codes, group, channels, node):
    """Weights (OC, C/group, KH, KW) of a grouped convolution as the (OC, C, KH, KW) weights of the dense one
    that computes the same function: output channel o of group g = o // (OC/group) reads only input
    channels g*C/group .. (g+1)*C/group - 1; every other weight is 0."""
    oc, icg, kh, kw = codes.shape
    if channels % group or oc % group or icg != channels // group:
        raise CompileError(f"node {node.name} (Conv): group={group} must divide the {channels} input and {oc} "
                           f"output channels, with weights of {channels // max(group, 1)} input channels per group "
                           f"(got {icg})")
    dense = np.zeros((oc, channels, kh, kw), dtype=codes.dtype)
    per_out = oc // group
    for g in range(group):
        dense[g * per_out:(g + 1) * per_out, g * icg:(g + 1) * icg] = codes[g * per_out:(g + 1) * per_out]
    return dense
