"""FINN's own hardware-layer ONNX as input: what FINN's ``step_convert_to_hw`` / ``step_specialize_layers``
write (nodes in the domains ``finn.custom_op.fpgadataflow[.hls|.rtl]``), and what ``rtlgen compile``
writes as ``OUT/model_hw.onnx``.

Such a model is already a dataflow graph: each FINN node becomes one :class:`HWNode` directly (no
lowering), its spec parameters from its attributes (every generation of names: ``MVAU_hls``,
``MatrixVectorActivation``, ``StreamingFCLayer_Batch`` ..., ``mem_mode`` const/decoupled) and its
initializers (MVAU / VVAU weights on input 1 in FINN's (MW, MH) / (C, 1, kh, kw) layout, thresholds on
input 2, Thresholding's on input 1, ChannelwiseOp's parameters on input 1), its folding (PE, SIMD,
mem_mode, ram_style, resType, parallel_window) kept as the user's folding.

FINN's StreamingDataWidthConverters and StreamingFIFOs are dropped and our passes insert their own (DWCs
where widths differ, FIFOs sized by the layers' timing models): FINN's FIFO depths are not kept, since
ours are sized for our layers' timing, which is what the stitched design runs.

Nodes outside those domains before the first FINN node (a Transpose, Mul, Add FINN leaves outside the
dataflow partition) and after the last (a dequantizing Mul ...) run on the host through qonnx, as the
host ops of a QONNX model do; a standard node between two FINN nodes is refused, and so is an integer
op after them (a TopK: FINN's LabelSelect is the layer for it). The golden reference for ``verify``
is :func:`sim.finn_exec.execute_finn_hw` (FINN's documented semantics in numpy).
"""

import copy
import dataclasses
from math import prod

import numpy as np
import onnx
from onnx import helper
from qonnx.core.datatype import DataType
from qonnx.core.modelwrapper import ModelWrapper

from rtlgen.errors import CompileError
from rtlgen.ir.graph import MEM_MODE_ALIASES, OPS, DataflowGraph, HWNode, StreamTensor
from rtlgen.ir.host import submodel
from sim.finn_exec import (EXECUTORS, FINN_DOMAIN, attrs_of, canonical, execute_finn_hw, is_finn_node,
                           normal_shapes)
from sim.stream_io import StreamEnd, StreamIO

__all__ = ["is_finn_hw", "is_finn_hw_file", "load_finn_hw", "lower_finn_hw", "finn_stream_io", "ACCEPTED"]

DROPPED_ROLES = ("fifo", "dwc")     # FINN's FIFOs and width converters: our passes insert their own
ACCEPTED = tuple(sorted(op for op in EXECUTORS if op in OPS))    # a hardware layer and a golden executor
# FINN attribute -> spec field, beyond each Op's finn_names (names that changed across FINN versions)
EXTRA_NAMES = {"binaryXnorMode": "binary_xnor_mode", "depthwise": "depthwise", "CeilMode": "ceil_mode",
               "runtime_writeable_weights": "runtime_writeable_weights", "ElemsPerStream": "channels_per_stream"}
# attributes whose other values change what the layer computes or how it streams, and their legal values here
REFUSED = {"dynamic_mode": (0,), "M": (1,)}
# FINN's defaults where the file gives none (SIMD is optional for VVAU and FMPadding, 1)
FINN_DEFAULT_FOLDING = {"mem_mode": "internal_decoupled", "SIMD": 1}
TUPLE_FIELDS = {"img_dim", "pool_dim", "ifm_dim", "ofm_dim", "kernel", "stride", "dilation", "dim", "padding",
                "num_input_vectors", "channels_per_stream"}
MAX_HOST_OPSET = 17
INTEGER_HOST_OPS = {"TopK", "ArgMax", "ArgMin", "Cast"}     # int64 outputs: rtlgen's host models carry float
LEGAL_MEM_MODES = "internal_embedded, internal_decoupled (const, decoupled in older FINN)"


def is_finn_hw(proto):
    """Whether ``proto`` (a ModelProto) holds FINN hardware-layer nodes."""
    return any(is_finn_node(n) for n in proto.graph.node)


def is_finn_hw_file(path):
    try:
        return is_finn_hw(onnx.load(str(path), load_external_data=False))
    except Exception:
        return False


class FinnHwModel:
    """The loaded model: a qonnx ModelWrapper of the user's file (not cleaned up: qonnx's cleanup cannot
    run FINN's ops) with the graph input and output shapes filled in, and the user's folding kept."""
    finn_hw = True

    def __init__(self, wrapper, path):
        self.wrapper, self.path = wrapper, path
        self.original_names = {}

    def __getattr__(self, name):            # the ModelWrapper's API (graph, get_tensor_shape ...)
        if name.startswith("__") or name == "wrapper":
            raise AttributeError(name)
        return getattr(self.wrapper, name)


def load_finn_hw(proto, path, input_dtype=None):
    """``proto`` (FINN's dialect) as a :class:`FinnHwModel`; unsupported nodes fail here, named."""
    proto = copy.deepcopy(proto)
    graph = proto.graph
    if len(graph.input) != 1 or len(graph.output) != 1:
        raise CompileError(f"{path}: the model must have one input and one output, not {len(graph.input)} and "
                           f"{len(graph.output)}")
    _name_unnamed(graph)
    names = [n.name for n in graph.node]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CompileError(f"{path}: node name {twice[0]!r} is used by {names.count(twice[0])} nodes; legal: unique "
                           f"node names (FINN's GiveUniqueNodeNames)")
    for node in graph.node:
        if node.op_type == "StreamingDataflowPartition":
            raise CompileError(f"{path}: node {node.name} (StreamingDataflowPartition) is FINN's parent model; give "
                               f"the dataflow partition's own model (the file its 'model' attribute names)")
        if is_finn_node(node) and canonical(node.op_type) not in ACCEPTED:
            raise CompileError(f"{path}: node {node.name} ({node.op_type}) is not supported; legal FINN hardware "
                               f"ops: {', '.join(ACCEPTED)} (any generation: _hls/_rtl, _Batch, "
                               f"MatrixVectorActivation ...)")
    if input_dtype is not None:
        raise CompileError(f"--input-dtype {input_dtype}: a FINN hardware-layer model states its input datatype "
                           f"(inputDataType of its first node); give no --input-dtype")
    for node in graph.node:                 # FINN <= 0.4: domain "finn" (qonnx would take it for its own)
        if is_finn_node(node):
            node.domain = FINN_DOMAIN if node.domain == "finn" else node.domain
    wrapper = ModelWrapper(proto)
    _fill_end_shapes(wrapper, path)
    return FinnHwModel(wrapper, path)


def _name_unnamed(graph):
    """Nodes without a name (FINN's notebooks save such files) get ``<op_type>_<k>``, as qonnx's
    GiveUniqueNodeNames would name them; named nodes keep the user's names."""
    taken = {n.name for n in graph.node if n.name}
    counts = {}
    for node in graph.node:
        if node.name:
            continue
        while True:
            k = counts.get(node.op_type, 0)
            counts[node.op_type] = k + 1
            if f"{node.op_type}_{k}" not in taken:
                break
        node.name = f"{node.op_type}_{k}"
        taken.add(node.name)


def _fill_end_shapes(model, path):
    """The graph input and output shapes where the file leaves them out (rtlgen's model_hw.onnx does):
    the normal (NHWC) shapes of the first and last FINN nodes."""
    nodes = list(model.graph.node)
    layers = [n for n in nodes if is_finn_node(n) and not _dropped(canonical(n.op_type))]
    if not layers:
        raise CompileError(f"{path}: no FINN hardware layer besides DWCs and FIFOs; legal: {', '.join(ACCEPTED)}")
    ends = ((model.graph.input[0], layers[0], 0, nodes[0]), (model.graph.output[0], layers[-1], 1, nodes[-1]))
    for vi, node, side, edge in ends:
        if model.get_tensor_shape(vi.name):
            continue
        touches = is_finn_node(edge)        # no host op between the end and the layer: same shape
        try:
            shape = normal_shapes(node, attrs_of(node))[side]
        except KeyError as exc:             # the attributes that give the shape: the user's file lacks one
            raise CompileError(f"node {node.name} ({node.op_type}): attribute {exc.args[0]} is missing") from None
        if not touches or shape is None:
            raise CompileError(f"{path}: tensor {vi.name} has no shape; legal: a model with the shapes of its "
                               f"input and output (FINN writes them)")
        model.set_tensor_shape(vi.name, list(shape))


# ------------------------------------------------------------------------------------------ to the graph

def lower_finn_hw(model):
    """The :class:`DataflowGraph` of a :class:`FinnHwModel`: one node per FINN layer, FINN's DWCs and
    FIFOs bypassed, standard ONNX nodes at the edges as host ops."""
    m = model.wrapper
    nodes, host_pre, host_post = [], [], []
    rename = {}                                  # a dropped DWC / FIFO's output -> its input
    seen_hw = False
    for node in m.graph.node:
        if not is_finn_node(node):
            (host_post if seen_hw else host_pre).append(node.name)
            continue
        if host_post:
            raise CompileError(f"node {host_post[0]} ({_op(m, host_post[0])}) sits between FINN hardware layers "
                               f"(before {node.name}); legal: standard ONNX ops only before the first or after the "
                               f"last hardware layer")
        seen_hw = True
        op = canonical(node.op_type)
        data = [rename.get(t, t) for t in node.input if t and m.get_initializer(t) is None]
        if _dropped(op):
            rename[node.output[0]] = data[0]
            continue
        nodes.append(_hw_node(m, node, op, data))
    if not nodes:
        raise CompileError(f"{model.path}: no FINN hardware layer besides DWCs and FIFOs")
    for name in host_post:
        op = _op(m, name)
        if op in INTEGER_HOST_OPS:
            topk = next(o.op_type for o in OPS.values() for rule in o.lowers if "TopK" in rule.onnx_ops)
            raise CompileError(f"node {name} ({op}) after the hardware layers: the host runs float ops only; legal: "
                               f"FINN's {topk} layer in place of a final TopK (FINN's Infer{topk}Layer), "
                               f"or elementwise float ops (Mul, Add ...)")
    first_in = nodes[0].inputs[0]
    last = nodes[-1]
    out = last.outputs[0]
    for n in nodes[1:]:
        if any(t == model.graph.input[0].name for t in n.inputs):
            raise CompileError(f"node {n.name} reads the graph input too; legal: one hardware input stream")
    # the tensor leaving: what the host (or the graph output) reads of the last hardware layer, maybe
    # through FIFOs / DWCs we dropped: the last layer writes it directly
    leaving = next((t for t, src in rename.items() if src == out and _leaves(m, t)), out)
    last.outputs = (leaving,)
    graph = DataflowGraph(nodes, first_in, last.outputs[0], model=model, host_pre=host_pre, host_post=host_post)
    for t, spec_of, side in ((first_in, nodes[0], "input"), (last.outputs[0], last, "output")):
        spec = spec_of.spec()
        dtype = getattr(spec, f"{side}_dtype")     # what the stream carries, whatever the annotation says
        shape = tuple(m.get_tensor_shape(t) or ()) or _normal(m, spec_of, side)
        graph.tensors[t] = StreamTensor(t, dtype, 1.0, tuple(int(s) for s in shape))
    try:
        return graph.check()
    except ValueError as exc:
        raise CompileError(f"{model.path}: {exc}") from None


def _dropped(op_type):
    return op_type in OPS and OPS[op_type].role in DROPPED_ROLES


def _leaves(m, tensor):
    return tensor == m.graph.output[0].name or any(tensor in n.input for n in m.graph.node if not is_finn_node(n))


def _op(m, name):
    return next((n.op_type for n in m.graph.node if n.name == name), "?")


def _normal(m, hw, side):
    node = next(n for n in m.graph.node if n.name == hw.name)
    return normal_shapes(node, attrs_of(node))[0 if side == "input" else 1]


def _hw_node(m, node, op, data):
    """One FINN node -> HWNode (params from attributes and initializers, folding from its attributes)."""
    attrs = attrs_of(node)
    spec_op = OPS[op]
    where = f"node {node.name} ({node.op_type})"
    fields = {f.name: f for f in dataclasses.fields(spec_op.spec) if f.init}
    names = {finn: field for field, finn in spec_op.finn_names.items()}
    names.update({k: v for k, v in EXTRA_NAMES.items() if v in fields})
    params = {}
    for finn, field in names.items():
        if finn in attrs and field in fields:
            params[field] = _value(field, attrs[finn], where, finn)
    # arrays from the initializers, in FINN's input order
    consts = [t for t in node.input[1:] if t and m.get_initializer(t) is not None]
    for field, tensor in zip(spec_op.finn_arrays, consts):
        params[field] = np.asarray(m.get_initializer(tensor), dtype=np.float64)
    fold_fields = set(spec_op.folding.values())
    missing = [f for f, d in fields.items() if f not in params and f not in fold_fields
               and d.default is dataclasses.MISSING and d.default_factory is dataclasses.MISSING]
    if missing:
        finn = {field: name for name, field in names.items()}
        raise CompileError(f"{where}: attribute {finn.get(missing[0], missing[0])} is missing; FINN's "
                           f"{op} needs {', '.join(finn.get(f, f) for f in missing)}")
    for attr, legal in REFUSED.items():
        if attr in attrs and attrs[attr] not in legal:
            raise CompileError(f"{where}: {attr}={attrs[attr]} is not supported; legal: "
                               f"{', '.join(map(str, legal))}")
    folding = {}
    for attr, field in spec_op.folding.items():
        if attr in attrs or attr in FINN_DEFAULT_FOLDING:
            folding[attr] = _folding_value(attr, attrs.get(attr, FINN_DEFAULT_FOLDING.get(attr)), where)
        elif fields[field].default is dataclasses.MISSING:
            raise CompileError(f"{where}: attribute {attr} is missing (the folding FINN's {op} needs)")
    if spec_op.finn_import is not None:          # the op's own fix-ups (noActivation, DimMode ...)
        spec_op.finn_import(_ImportContext(node.op_type, attrs, where), attrs, params, folding)
    outputs = tuple(node.output)
    hw = HWNode(node.name, op, params, folding, sources=(node.name,), inputs=tuple(data), outputs=outputs)
    try:
        hw.spec()
    except ValueError as exc:           # the spec's check of the user's attributes (a TypeError is our bug)
        raise CompileError(f"{where}: {str(exc).split(': ', 1)[-1]}") from None
    return hw


class _ImportContext:
    """The :class:`layers.op.FinnImportContext` of one FINN node."""

    def __init__(self, op_type, attrs, where):
        self.op_type, self._attrs, self._where = op_type, attrs, where

    def value(self, field, attr):
        return _value(field, self._attrs[attr], self._where, attr)

    def error(self, message):
        return CompileError(f"{self._where}: {message}")


def _value(field, value, where, finn):
    if field.endswith("dtype"):
        try:
            return DataType[value]
        except KeyError:
            raise CompileError(f"{where}: {finn}={value!r} is not a qonnx DataType (legal: BIPOLAR, BINARY, "
                               f"INTn, UINTn ...)") from None
    if field in ("binary_xnor_mode", "depthwise", "ceil_mode", "runtime_writeable_weights", "runtime_writeable"):
        return bool(value)
    if field in TUPLE_FIELDS:
        v = list(value) if isinstance(value, (list, tuple)) else [value]
        if field in ("img_dim", "pool_dim", "ifm_dim", "ofm_dim", "kernel", "stride", "dilation", "dim") and len(v) == 1:
            v = v * 2                           # older FINN: one int for a square
        return tuple(int(x) for x in v)
    if isinstance(value, float) and value == int(value):
        return int(value)
    return value


def _folding_value(attr, value, where):
    if attr == "mem_mode":
        value = MEM_MODE_ALIASES.get(value, value)
        if value not in ("internal_embedded", "internal_decoupled"):
            raise CompileError(f"{where}: mem_mode={value!r} is not supported; legal: {LEGAL_MEM_MODES}")
    if attr == "parallel_window":
        return bool(value)
    if attr == "ram_style" and value == "ultra":
        raise CompileError(f"{where}: ram_style='ultra' is not supported (the xc7z020 has no UltraRAM); legal: "
                           f"auto, distributed, block")
    return value


# ------------------------------------------------------------------------------------------ host side

def finn_stream_io(model, graph, last=None):
    """The :class:`sim.stream_io.StreamIO` of a compiled FINN hardware-layer model (``last``: the last
    device's graph of a partition): the model's tensors
    are FINN's (NHWC feature maps, integer values at scale 1), streamed in their row-major order; host
    ops before and after run through qonnx. A 4D end is flattened on the host (a Reshape), so the
    stream order is FINN's NHWC order, not the NCHW -> NHWC transpose of a QONNX model's ends."""
    m = copy.deepcopy(model.wrapper)
    for imp in m.model.opset_import:        # rtlgen's model_hw.onnx is stamped with onnx's newest opset,
        if imp.domain in ("", "ai.onnx"):   # which onnxruntime may not run yet; the host ops are old ones
            imp.version = min(imp.version, MAX_HOST_OPSET)
    graph_in, graph_out = m.graph.input[0].name, m.graph.output[0].name
    last_graph = last or graph              # a partition: its last device's graph writes the output
    t_in, t_out = graph.tensors[graph.input], last_graph.tensors[last_graph.output]
    leaving = t_out.name                    # the model's tensor (the stitched graph's output is a FIFO's)
    node, _ = graph.consumers(graph.input)[0]
    first, last = node.spec(), last_graph.producer(last_graph.output)[0].spec()
    pre_nodes, post_nodes = list(graph.host_pre), list(graph.host_post)
    ends = []
    pre_out, post_in = t_in.name, leaving
    for t, lanes, side in ((t_in, first.in_width // t_in.dtype.bitwidth(), "in"),
                           (t_out, last.out_width // t_out.dtype.bitwidth(), "out")):
        shape = tuple(t.shape)
        if len(shape) == 4:                     # flatten on the host: FINN streams NHWC as it is stored
            flat = (shape[0], prod(shape[1:]))
            name = f"{t.name}_rtlgen_flat"
            shape_init = f"{name}_shape"
            m.graph.initializer.append(onnx.numpy_helper.from_array(
                np.array(flat if side == "in" else shape, dtype=np.int64), shape_init))
            if side == "in":
                m.graph.node.append(helper.make_node("Reshape", [t.name, shape_init], [name], name=f"{name}_node"))
                m.set_tensor_shape(name, list(flat))
                pre_nodes.append(f"{name}_node")
                pre_out = name
            else:
                m.graph.node.insert(0, helper.make_node("Reshape", [name, shape_init], [leaving], name=f"{name}_node"))
                m.set_tensor_shape(name, list(flat))
                post_nodes.insert(0, f"{name}_node")
                post_in = name
            shape = flat
        if not m.get_tensor_shape(t.name):
            m.set_tensor_shape(t.name, list(t.shape))
        ends.append(StreamEnd(pre_out if side == "in" else post_in, shape, t.dtype, 1.0, lanes))
    pre = submodel(m, pre_nodes, [graph_in], [pre_out], "host_pre") if pre_nodes else None
    post = submodel(m, post_nodes, [post_in], [graph_out], "host_post") if post_nodes else None
    if pre is None and pre_out != graph_in:
        raise CompileError(f"the first hardware layer reads {pre_out}, not the graph input {graph_in}")
    return StreamIO(graph_in, tuple(m.get_tensor_shape(graph_in)), graph_out, *ends, pre, post)


def finn_reference(model_path, x):
    """The golden outputs of a FINN hardware-layer model for the batch ``x`` (sim.finn_exec)."""
    model = load_finn_hw(onnx.load(str(model_path)), model_path, None)
    return execute_finn_hw(model.wrapper, x)
