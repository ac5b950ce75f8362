"""Load a QONNX / FINN-ONNX model and normalize it for lowering (the ``load`` pass).

What qonnx already does we call: ModelWrapper (also renames the old ``finn`` and ``onnx.brevitas``
domains), ``cleanup_model`` (shapes, constant folding with weight Quants kept, transposes folded into
Quant initializers, readable names), GemmToMatMul, InferDataTypes.
"""

import re
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper
from qonnx.core.datatype import DataType
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_node
from qonnx.custom_op.registry import getCustomOp
from qonnx.transformation.gemm_to_matmul import GemmToMatMul
from qonnx.transformation.general import SortGraph
from qonnx.transformation.infer_datatypes import InferDataTypes
from qonnx.util.cleanup import cleanup_model

from layers.datapath import dtype_for_range
from rtlgen.errors import CompileError, CompileWarning       # noqa: F401 (the names every module imports from here)
from rtlgen.passes.channels_last import is_channels_last, to_channels_first
from rtlgen.passes.finn_hw import is_finn_hw, load_finn_hw

__all__ = ["CompileError", "load_model", "quantizer_output_codes"]

INPUT_DTYPE_HINT = ("if the model's input already holds integers (e.g. +-1, 0/1 or 0..255), say which with "
                    "--input-dtype BIPOLAR|BINARY|UINT8|INT8|... (FINN's set_tensor_datatype)")


def load_model(path, input_dtype=None):
    """ModelWrapper of ``path``, cleaned up, Gemm lowered to MatMul, datatypes inferred, nodes in
    topological order; ``input_dtype`` (a qonnx DataType name) annotates the graph input as FINN's
    ``set_tensor_datatype`` does, for models whose input has no quantizer."""
    path = Path(path)
    if path.is_dir():
        raise CompileError(f"{path}: is a directory; give the model's .onnx file")
    if not path.is_file():
        raise CompileError(f"{path}: no such file")
    try:
        proto = onnx.load(str(path))
        if not proto.graph.node:
            raise ValueError("the graph has no nodes")
    except Exception as exc:                      # onnx raises DecodeError, OSError... on bad files
        raise CompileError(f"{path}: not a valid ONNX model ({_first_line(exc)})") from None
    _initializers_are_not_inputs(proto)
    _multithreshold_out_dtypes(proto)
    if is_finn_hw(proto):                         # FINN's hardware-layer ONNX: no qonnx cleanup (rtlgen.passes.finn_hw)
        return load_finn_hw(proto, path, input_dtype)
    _fixed_input_shape(proto, path)
    originals = _mark_node_names(proto)
    try:
        model = cleanup_model(ModelWrapper(proto))
        if _is_one_d(model):
            model = cleanup_model(_one_d_as_two_d(model))
        if is_channels_last(model):
            model = cleanup_model(to_channels_first(model))
        _bias_free_gemms_to_matmul(model)
        _spatial_means_to_global_pool(model)
        _explicit_pads(model)
        model = model.transform(GemmToMatMul())
        model = cleanup_model(model)
        _fold_quantized_constants(model)
        _unquantized_conv_bias_to_add(model)
        model = model.transform(InferDataTypes())
        model = model.transform(SortGraph())          # lowering visits nodes in topological order
    except CompileError:
        raise
    except Exception as exc:
        raise CompileError(f"{path}: qonnx cannot clean up this model ({_first_line(exc)})") from None
    if len(model.graph.input) != 1 or len(model.graph.output) != 1:
        raise CompileError(f"{path}: the model must have one input and one output, not "
                           f"{len(model.graph.input)} and {len(model.graph.output)}")
    if input_dtype is not None:
        _annotate_input(model, input_dtype)
    model.original_names = _original_names(model, originals)
    return model


_MARK = "rtlgen-node:"


def _mark_node_names(proto):
    """qonnx's cleanup renames every node (GiveUniqueNodeNames: the user's ``Sin_ins`` becomes ``Sin_0``);
    each node's doc_string carries its index through the cleanup, so that messages can name the node as
    the user did. Returns {index: (name, doc_string)}."""
    originals = {}
    for k, node in enumerate(proto.graph.node):
        originals[k] = (node.name, node.doc_string)
        node.doc_string = f"{_MARK}{k}"
    return originals


def _original_names(model, originals):
    """{qonnx's name: the user's name} for the nodes renamed; the doc_strings are restored."""
    names = {}
    for node in model.graph.node:
        if node.doc_string.startswith(_MARK) and node.doc_string[len(_MARK):].isdigit():
            name, doc = originals[int(node.doc_string[len(_MARK):])]
            if doc:
                node.doc_string = doc
            else:
                node.ClearField("doc_string")
            if name and name != node.name:
                names[node.name] = name
    return names


def user_names(text, names):
    """``text`` with the nodes qonnx renamed called by their names in the user's model."""
    if not names:
        return text
    pattern = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")(?!\w)")
    return pattern.sub(lambda m: names[m.group(1)], text)


def _fixed_input_shape(proto, path):
    """A symbolic batch dimension (``N`` in [N, F]) becomes 1, as the hardware takes one frame at a time;
    any other symbolic or unknown dimension is an error (the hardware is built for one shape)."""
    for graph_input in proto.graph.input[:1]:
        tensor_type = graph_input.type.tensor_type
        if not tensor_type.HasField("shape") or not tensor_type.shape.dim:
            raise CompileError(f"{path}: input {graph_input.name} has no shape; legal: a fixed shape such as "
                               f"(1, 64) or (1, 3, 32, 32) (export the model with its input shape, or set it with "
                               f"onnx.tools.update_model_dims)")
        dims = tensor_type.shape.dim
        for k, dim in enumerate(dims):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                continue
            if k == 0 and len(dims) > 1:
                dim.Clear()
                dim.dim_value = 1
                continue
            raise CompileError(f"{path}: input {graph_input.name} has a symbolic or unknown size in dimension {k} "
                               f"({dim.dim_param or '?'}); legal: fixed sizes (only the batch dimension, the "
                               f"first, may be symbolic)")


def _initializers_are_not_inputs(proto):
    """Old exporters (ONNX IR < 4) also list every initializer among the graph inputs, e.g. the
    BatchNormalization parameters; an accelerator's weights are constants, so they are dropped from
    the inputs (qonnx would otherwise see two value infos per parameter)."""
    constants = {init.name for init in proto.graph.initializer}
    kept = [i for i in proto.graph.input if i.name not in constants]
    if len(kept) != len(proto.graph.input):
        del proto.graph.input[:]
        proto.graph.input.extend(kept)


def _bias_free_gemms_to_matmul(model):
    """Gemm without its optional C input (torch exports bias-free Linear layers so) -> MatMul, B transposed
    first where ``transB``; qonnx's GemmToMatMul assumes a C input and fails on these."""
    graph = model.graph
    for node in list(graph.node):
        if node.op_type != "Gemm" or len(node.input) != 2:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0:
            continue                                  # left to GemmToMatMul
        weight = node.input[1]
        if attrs.get("transB", 0):
            transposed = model.make_new_valueinfo_name()
            at = list(graph.node).index(node)
            graph.node.insert(at, helper.make_node("Transpose", [weight], [transposed], perm=[1, 0],
                                                   name=f"{node.name}_transB"))
            weight = transposed
        node.op_type = "MatMul"
        node.input[1] = weight
        del node.attribute[:]


def _fold_quantized_constants(model):
    """A Quant of a constant read only by elementwise Add/Sub/Mul/Div (a bias quantized on its own, as
    QKeras and Brevitas' bias quantizers export it: MatMul -> Add(Quant(bias))), or as a Conv's bias
    input, -> its value as an initializer, so the Add is a float op with a constant like any other: it
    joins the activation after the MatMul, or runs on the host after the last one (a Conv's bias too:
    :func:`_unquantized_conv_bias_to_add`). Weights keep their Quant: the lowering reads their codes
    from it."""
    graph = model.graph
    opset = next((o.version for o in model.model.opset_import if o.domain in ("", "ai.onnx")), 13)
    for node in list(graph.node):
        if node.op_type not in ("Quant", "BipolarQuant") or \
                any(i and model.get_initializer(i) is None for i in node.input):
            continue
        consumers = model.find_consumers(node.output[0]) or []
        # only a constant added to (or scaling) activations; weights may reach their MatMul through a
        # Transpose or Reshape, and keep their Quant
        if not consumers or any(c.op_type not in ("Add", "Sub", "Mul", "Div") and not
                                (c.op_type == "Conv" and list(c.input).index(node.output[0]) == 2)
                                for c in consumers):
            continue
        context = {i: model.get_initializer(i) for i in node.input if i}
        execute_node(node, context, graph, opset)
        model.set_initializer(node.output[0], np.asarray(context[node.output[0]], dtype=np.float32))
        graph.node.remove(node)


def _unquantized_conv_bias_to_add(model):
    """A Conv with a bias whose output reaches no quantizer (a float last layer: a classifier or
    segmentation head) -> the Conv without it and an Add of the bias, which then runs on the host after
    the accelerator's accumulators, as a MatMul's float bias does. With a quantizer after it, the bias
    stays: the activation's thresholds absorb it. (A separate float32 Add rounds once more than
    onnxruntime's Conv with a bias: verify's exact semantics add it afterwards too, and name ties.)"""
    quantizers = {"Quant", "BipolarQuant", "MultiThreshold", "Trunc"}
    graph = model.graph
    for node in list(graph.node):
        if node.op_type != "Conv" or len(node.input) < 3 or not node.input[2]:
            continue
        bias = model.get_initializer(node.input[2])
        if bias is None or _reaches(model, node.output[0], quantizers):
            continue
        shaped = model.make_new_valueinfo_name()
        model.set_initializer(shaped, np.asarray(bias, dtype=np.float32).reshape(1, -1, 1, 1))
        summed, out = model.make_new_valueinfo_name(), node.output[0]
        model.set_tensor_shape(summed, model.get_tensor_shape(out))
        node.output[0] = summed
        del node.input[2]
        graph.node.insert(list(graph.node).index(node) + 1,
                          helper.make_node("Add", [summed, shaped], [out], name=f"{node.name}_bias"))


_WINDOW_OPS = ("Conv", "ConvTranspose", "MaxPool", "AveragePool")
_WINDOW_ATTRS = ("kernel_shape", "strides", "dilations", "output_padding")
_BROADCASTING_OPS = ("Add", "Sub", "Mul", "Div", "PRelu", "Max", "Min", "Quant", "BipolarQuant", "Trunc")


def _is_one_d(model):
    return any(n.op_type in _WINDOW_OPS and len(model.get_tensor_shape(n.input[0]) or ()) == 3
               for n in model.graph.node)


def _one_d_as_two_d(model):
    """A 1-D network (Conv1d, MaxPool1d, AvgPool1d, BatchNorm1d on (N, C, L) tensors) as the 2-D one FINN
    builds from it: every 3-D tensor (N, C, L) becomes (N, C, L, 1), every window (k) becomes (k, 1). This
    is qonnx's Change3DTo4DTensors convention; that transformation itself is not used because it refuses
    any graph with a Quant node (it accepts a fixed list of op types) and leaves the weights under a Quant
    3-D. The model's own input and output keep their shapes: a Reshape at each 3-D edge, which the host
    runs. Constants broadcast against 3-D tensors are re-aligned ((1, C, 1) -> (1, C, 1, 1))."""
    graph = model.graph
    three_d = {vi.name for vi in list(graph.value_info) if len(model.get_tensor_shape(vi.name) or ()) == 3}
    for node in graph.node:
        if node.op_type in _WINDOW_OPS and len(model.get_tensor_shape(node.input[0]) or ()) == 3:
            _window_attrs_as_two_d(node)
            if node.op_type in ("Conv", "ConvTranspose"):
                _weights_as_two_d(model, node.input[1])
        elif node.op_type == "ReduceMean" and len(model.get_tensor_shape(node.input[0]) or ()) == 3:
            _reduce_axes_as_two_d(node)
        if node.op_type in _BROADCASTING_OPS and (node.input[0] in three_d or _is_edge_3d(model, node.input[0])):
            for name in node.input[1:]:
                _constant_as_two_d(model, name)
    for vi in list(graph.value_info):
        if vi.name in three_d:
            graph.value_info.remove(vi)
    _edge_reshapes(model)
    return model


def _is_edge_3d(model, name):
    return name == model.graph.input[0].name and len(model.get_tensor_shape(name) or ()) == 3


def _window_attrs_as_two_d(node):
    for attr in node.attribute:
        if attr.name in _WINDOW_ATTRS and len(attr.ints) == 1:
            extra = 0 if attr.name == "output_padding" else 1
            attr.ints.append(extra)
        elif attr.name == "pads" and len(attr.ints) == 2:
            begin, end = attr.ints
            del attr.ints[:]
            attr.ints.extend([begin, 0, end, 0])


def _reduce_axes_as_two_d(node):
    for attr in node.attribute:
        if attr.name == "axes" and sorted(a % 3 for a in attr.ints) == [2]:
            del attr.ints[:]
            attr.ints.extend([2, 3])


def _weights_as_two_d(model, name):
    """Conv weights (OC, IC, k) -> (OC, IC, k, 1): the initializer, or the ones under its Quant."""
    value = model.get_initializer(name)
    if value is not None:
        if value.ndim == 3:
            model.set_initializer(name, value[..., None])
        return
    producer = model.find_producer(name)
    if producer is not None and producer.op_type in ("Quant", "BipolarQuant"):
        for i in producer.input:
            value = model.get_initializer(i)
            if value is not None and value.ndim == 3:
                model.set_initializer(i, value[..., None])


def _constant_as_two_d(model, name):
    """A constant broadcast against a 3-D tensor, re-aligned for its 4-D form: (1, C, 1) -> (1, C, 1, 1),
    (C, 1) -> (1, C, 1, 1), (L,) -> (1, 1, L, 1); one number stays as it is."""
    value = model.get_initializer(name) if name else None
    if value is None or value.size == 1 or value.ndim > 3 or value.dtype.kind in "iu":
        return
    model.set_initializer(name, value.reshape((1,) * (3 - value.ndim) + value.shape + (1,)))


def _edge_reshapes(model):
    """The model's 3-D input and output keep their shapes: Reshapes into and out of the 4-D graph."""
    graph = model.graph
    if len(model.get_tensor_shape(graph.input[0].name)) == 3:
        _reshape_at_edge(model, graph.input[0].name, "input", lambda shape: [*shape, 1])
    if len(model.get_tensor_shape(graph.output[0].name)) == 3:
        _reshape_at_edge(model, graph.output[0].name, "output", lambda shape: shape)


def _reshape_at_edge(model, name, edge, target_shape):
    """A Reshape between the graph's ``edge`` tensor ``name`` and the nodes, to ``target_shape(shape)``."""
    graph, inside, target = model.graph, model.make_new_valueinfo_name(), model.make_new_valueinfo_name()
    model.set_initializer(target, np.array(target_shape(model.get_tensor_shape(name)), dtype=np.int64))
    for node in graph.node:
        ports = node.input if edge == "input" else node.output
        ports[:] = [inside if i == name else i for i in ports]
    if edge == "input":
        graph.node.insert(0, helper.make_node("Reshape", [name, target], [inside], name="input_as_2d"))
    else:
        graph.node.append(helper.make_node("Reshape", [inside, target], [name], name="output_as_1d"))


def _reaches(model, tensor, op_types):
    """Whether a node of ``op_types`` reads ``tensor`` or anything computed from it."""
    seen, todo = set(), [tensor]
    while todo:
        for node in model.find_consumers(todo.pop()) or []:
            if node.op_type in op_types:
                return True
            if node.name not in seen:
                seen.add(node.name)
                todo.extend(node.output)
    return False


def _explicit_pads(model):
    """``auto_pad`` (SAME_UPPER, SAME_LOWER, VALID) of Conv, MaxPool and AveragePool -> the explicit ``pads``
    it stands for, by ONNX's rule: SAME gives ceil(in / stride) outputs, padding ``total = (out - 1) *
    stride + (k - 1) * dilation + 1 - in`` (at least 0) split evenly, the odd one at the end (UPPER) or
    at the start (LOWER); VALID pads nothing. onnxruntime (qonnx's executor) computes the same pads."""
    for node in model.graph.node:
        if node.op_type not in ("Conv", "MaxPool", "AveragePool"):
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        mode = attrs.get("auto_pad", b"NOTSET")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode == "NOTSET":
            continue
        shape = model.get_tensor_shape(node.input[0])
        if mode not in ("SAME_UPPER", "SAME_LOWER", "VALID"):
            raise CompileError(f"node {node.name} ({node.op_type}): auto_pad={mode} is not an ONNX value; legal: "
                               f"NOTSET, SAME_UPPER, SAME_LOWER, VALID")
        if shape is None or len(shape) != 4:
            raise CompileError(f"node {node.name} ({node.op_type}): auto_pad needs a known NCHW input shape")
        if node.op_type == "Conv":
            kernel = list(model.get_initializer(node.input[1]).shape[2:]) if model.get_initializer(node.input[1]) \
                is not None else attrs.get("kernel_shape")
        else:
            kernel = attrs.get("kernel_shape")
        strides = attrs.get("strides", [1, 1])
        dilations = attrs.get("dilations", [1, 1])
        begin, end = [], []
        for size, k, stride, dilation in zip(shape[2:], kernel, strides, dilations):
            if mode == "VALID":
                total = 0
            else:
                out = -(-size // stride)
                total = max((out - 1) * stride + (k - 1) * dilation + 1 - size, 0)
            first = total // 2 if mode != "SAME_LOWER" else total - total // 2
            begin.append(first)
            end.append(total - first)
        keep = [a for a in node.attribute if a.name not in ("auto_pad", "pads")]
        del node.attribute[:]
        node.attribute.extend(keep + [onnx.helper.make_attribute("pads", begin + end)])


def _multithreshold_out_dtypes(proto):
    """Older FINN models write MultiThreshold without ``out_dtype``, which qonnx now requires: the type its
    outputs have, from its thresholds (n per channel: counts 0..n) and ``out_bias`` (the count moved by it;
    ``out_scale`` 1), or BIPOLAR for FINN's one-threshold bipolar form (out_scale 2, out_bias -1)."""
    inits = {i.name: i for i in proto.graph.initializer}
    for node in proto.graph.node:
        if node.op_type != "MultiThreshold" or any(a.name == "out_dtype" for a in node.attribute):
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        scale, bias = float(attrs.get("out_scale", 1.0)), float(attrs.get("out_bias", 0.0))
        thresholds = inits.get(node.input[1]) if len(node.input) > 1 else None
        if thresholds is None:
            raise CompileError(f"node {node.name} (MultiThreshold): its thresholds {node.input[1:2]} must be a "
                               f"constant")
        levels = int(numpy_helper.to_array(thresholds).shape[-1])
        if levels == 1 and scale == 2.0 and bias == -1.0:
            dtype = DataType["BIPOLAR"]
        elif scale == 1.0 and bias == int(bias):
            dtype = dtype_for_range(int(bias), int(bias) + levels)
        else:
            raise CompileError(f"node {node.name} (MultiThreshold) has no out_dtype, and out_scale {scale:g} with "
                               f"out_bias {bias:g} give no integer type; add the out_dtype attribute")
        node.attribute.append(onnx.helper.make_attribute("out_dtype", dtype.name))


def _spatial_means_to_global_pool(model):
    """ReduceMean over both spatial axes of an NCHW tensor, keeping them (torch >= 2.x exports
    ``AdaptiveAvgPool2d(1)`` so) -> GlobalAveragePool, which is the same function; other ReduceMeans
    are left alone (and refused later, by name, if they are not at the graph's edge)."""
    for node in model.graph.node:
        if node.op_type != "ReduceMean":
            continue
        shape = model.get_tensor_shape(node.input[0])
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        axes = attrs.get("axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = model.get_initializer(node.input[1])     # opset 18: axes as an input
        if shape is None or len(shape) != 4 or axes is None or attrs.get("keepdims", 1) != 1:
            continue
        if sorted(int(a) % 4 for a in list(axes)) != [2, 3]:
            continue
        node.op_type = "GlobalAveragePool"
        del node.input[1:]
        del node.attribute[:]


def _annotate_input(model, name):
    try:
        dtype = DataType[str(name).upper()]
    except KeyError:
        dtype = None
    if dtype is None or not (dtype.is_integer() or dtype.is_fixed_point()):
        raise CompileError(f"--input-dtype {name}: not an integer or fixed-point qonnx DataType; legal: BIPOLAR, "
                           f"BINARY, TERNARY, UINTn, INTn (n = 1..32), FIXED<w,i> (w bits, i of them integer "
                           f"bits with the sign, as hls4ml's ap_fixed<w,i>)")
    if dtype.is_fixed_point() and not 2 <= dtype.bitwidth() <= 32:
        raise CompileError(f"--input-dtype {name}: legal widths of FIXED<w,i> are 2..32")
    model.set_tensor_datatype(model.graph.input[0].name, dtype)
    model.transform(InferDataTypes())


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def quantizer_output_codes(model, node):
    """(dtype, scale, qmin, levels) of an activation quantizer: its output is ``scale * code`` with
    integer codes qmin .. qmin + levels of ``dtype`` (BIPOLAR: codes -1, +1).

    ``scale`` is a number, or a (C,) array where Quant or BipolarQuant has one scale per channel (axis 1 of
    its input, as Brevitas' per-channel activations export it). A Quant's integer zero point z (one, or one
    per channel) moves channel c's codes to q - z[c] (its output is (q - z) * s): qmin .. qmin + levels is
    then the union of the channels' ranges, each channel using a sub-range of it."""
    where = f"node {node.name} ({node.op_type})"
    if node.op_type == "BipolarQuant":
        scale = _channel_initializer(model, node, 1, where, "scale")
        return DataType["BIPOLAR"], scale, -1, 1
    if node.op_type == "Quant":
        scale = _channel_initializer(model, node, 1, where, "scale")
        zero = _channel_initializer(model, node, 2, where, "zero point", positive=False)
        bits = _scalar_initializer(model, node.input[3], where, "bit width")
        if np.any(np.asarray(zero) != np.round(zero)):
            raise CompileError(f"{where}: zero point must be an integer (one, or one per channel) for hardware, "
                               f"not {_shown(zero)}")
        if bits != int(bits) or not 1 <= bits <= 32:
            raise CompileError(f"{where}: bit width must be an integer in 1..32, not {bits}")
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        signed, narrow, bits = bool(attrs.get("signed", 1)), bool(attrs.get("narrow", 0)), int(bits)
        if bits == 1 and signed:
            if np.any(np.asarray(zero) != 0):
                raise CompileError(f"{where}: a 1-bit signed (bipolar) quantizer needs zero point 0, not "
                                   f"{_shown(zero)}")
            return DataType["BIPOLAR"], scale, -1, 1
        lo = -(1 << (bits - 1)) + narrow if signed else 0
        hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1 - narrow
        if np.all(np.asarray(zero) == 0):
            return DataType[f"{'INT' if signed else 'UINT'}{bits}"], scale, lo, hi - lo
        codes_lo, codes_hi = lo - int(np.max(zero)), hi - int(np.min(zero))
        return dtype_for_range(codes_lo, codes_hi), scale, codes_lo, codes_hi - codes_lo
    if node.op_type == "Trunc":
        return _trunc_output_codes(model, node, where)
    if node.op_type == "MultiThreshold":
        inst = getCustomOp(node)
        out_scale, out_bias = float(inst.get_nodeattr("out_scale")), float(inst.get_nodeattr("out_bias"))
        dtype = DataType[inst.get_nodeattr("out_dtype")]
        levels = model.get_initializer(node.input[1]).shape[1]
        if dtype == DataType["BIPOLAR"]:
            if levels != 1 or out_bias != -out_scale / 2:
                raise CompileError(f"{where}: a BIPOLAR MultiThreshold needs 1 threshold and out_bias = "
                                   f"-out_scale/2, not {levels} and {out_bias}")
            return dtype, out_scale / 2, -1, 1
        if out_scale <= 0 or out_bias / out_scale != int(out_bias / out_scale):
            raise CompileError(f"{where}: out_bias/out_scale must be an integer and out_scale > 0, "
                               f"not {out_bias}/{out_scale}")
        return dtype, out_scale, int(out_bias / out_scale), levels
    raise CompileError(f"{where} is not an activation quantizer (Quant, BipolarQuant, MultiThreshold, Trunc)")


def _trunc_output_codes(model, node, where):
    """Trunc (qonnx v2: x, scale, zero point, in bits, out scale, out bits) clamps to an out-bits integer
    and multiplies by the out scale. v1 (5 inputs) does not clamp: its code range is unbounded."""
    if len(node.input) != 6:
        raise CompileError(f"{where}: only Trunc v2 (6 inputs: x, scale, zeropt, in_bits, out_scale, "
                           f"out_bits) is supported, this one has {len(node.input)} inputs")
    zero = _scalar_initializer(model, node.input[2], where, "zero point", positive=False)
    if zero != 0:
        raise CompileError(f"{where}: zero point must be 0 for hardware, not {zero}")
    scale = _scalar_initializer(model, node.input[4], where, "output scale")
    bits = _scalar_initializer(model, node.input[5], where, "output bit width")
    if bits != int(bits) or not 1 <= bits <= 32:
        raise CompileError(f"{where}: output bit width must be an integer in 1..32, not {bits}")
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    signed, narrow, bits = bool(attrs.get("signed", 1)), bool(attrs.get("narrow", 0)), int(bits)
    lo = -(1 << (bits - 1)) + narrow if signed else 0
    hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1 - narrow
    return DataType[f"{'INT' if signed else 'UINT'}{bits}"], scale, lo, hi - lo


def _scalar_initializer(model, name, where, what, positive=True):
    value = model.get_initializer(name)
    if value is None:
        raise CompileError(f"{where}: {what} must be a constant")
    value = np.asarray(value, dtype=np.float64)
    if value.size != 1:
        raise CompileError(f"{where}: {what} must be one number (per-tensor), not shape {value.shape}")
    value = float(value.reshape(()))
    if positive and not value > 0:
        raise CompileError(f"{where}: {what} must be positive, not {value}")
    return value


def _channel_initializer(model, node, index, where, what, positive=True):
    """Input ``index`` of quantizer ``node``, a constant: one number (a float), or one per channel of its
    data input (a (C,) array), the channel being axis 1 under ONNX broadcasting (shape (1, C, 1, 1) for a
    feature map, (1, C) for features); channels that all hold the same number give that number."""
    value = model.get_initializer(node.input[index])
    if value is None:
        raise CompileError(f"{where}: {what} must be a constant")
    value = np.asarray(value, dtype=np.float64)
    if value.size != 1:
        shape = model.get_tensor_shape(node.input[0])
        padded = (1,) * (len(shape or ()) - value.ndim) + value.shape
        if shape is None or len(shape) < 2 or len(padded) != len(shape) or padded[1] != shape[1] or \
                any(d != 1 for k, d in enumerate(padded) if k != 1):
            raise CompileError(f"{where}: {what} of shape {value.shape} is neither one number (per tensor) nor one "
                               f"per channel of its input of shape {tuple(shape or ())} (legal: shape (1, C, 1, 1) "
                               f"or (1, C), the channels on axis 1)")
        value = value.reshape(-1)
        if np.all(value == value[0]):
            value = value[:1]
    if positive and not np.all(value > 0):
        raise CompileError(f"{where}: {what} must be positive, not {_shown(value)}")
    return float(value.reshape(-1)[0]) if value.size == 1 else value


def _shown(value):
    """A number, or a per-channel array in a message (its first values)."""
    value = np.asarray(value, dtype=np.float64).reshape(-1)
    if value.size == 1:
        return f"{value[0]:g}"
    return f"[{', '.join(f'{v:g}' for v in value[:4])}{', ...' if value.size > 4 else ''}] (per channel)"
