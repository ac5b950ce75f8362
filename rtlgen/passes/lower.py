"""The ``to_hw`` pass: a cleaned QONNX / FINN-ONNX model -> a :class:`DataflowGraph` plus host ops.

The walk starts at the first integer tensor (an integer-annotated graph input, or the output of the
first activation quantizer, computed on the host) and visits the model's nodes in topological order.
A node whose data inputs are all hardware streams is matched against the registry: each op declares in
``Op.lowers`` the ONNX patterns it lowers from (:class:`layers.op.Lowering`), and its rule builds the
hardware through this pass's context (:class:`layers.op.LoweringContext`, implemented here): the stream
tensors, the weights as integer codes, the float ops up to the next quantizer turned into exact
thresholds (:mod:`rtlgen.passes.thresholds`), exact sums of streams on a common grid. The pass itself
only handles what makes no hardware: reshapes (a flatten of a feature map permutes the rows of the
MatMul that consumes it) and float ops with constants from an integer input into its first MatMul
(absorbed as that MatMul's bias). A tensor read by several nodes is an ordinary edge with several
consumers (:func:`rtlgen.passes.insert_duplicates` adds the fan-out later). What cannot be matched runs
on the host: allowed at the graph's edge, an error naming the node if hardware work would follow it.
A dot product with no quantizer after it whose result another layer reads travels on, as hls4ml carries
it, as an exact wide integer stream (its bias added by the registry's ``at="bias"`` op).

Stream layout: 4D tensors (NCHW in the model) stream as NHWC, channel fastest.
"""

import copy
import warnings
from dataclasses import dataclass, replace
from fractions import Fraction
from math import gcd, lcm

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper
from onnx.numpy_helper import from_array
from qonnx.core.datatype import DataType
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_node

from layers.datapath import dtype_for_range
from rtlgen.passes.load import INPUT_DTYPE_HINT, CompileError, CompileWarning, quantizer_output_codes, user_names
from rtlgen.ir.graph import OPS, DataflowGraph, HWNode, StreamTensor
from rtlgen.passes.thresholds import (ELEMENTWISE_OPS, QUANTIZERS, SHAPE_OPS, ActivationChain, channel_directions,
                                      derive_thresholds)

__all__ = ["StreamTensor", "lower", "supported_ops", "Accumulator", "Activation", "float32_sum_is_exact",
           "order_preserving_factors", "dense_grouped_weights"]

COMPUTE_OPS = {"MatMul", "Conv"}
LAYOUT_OPS = SHAPE_OPS | {"Transpose"}
MAX_SUM_CHECK = 1 << 22             # code pairs checked one by one to find a residual sum exact
MAX_AFFINE_CHECK = 1 << 16         # input codes checked one by one to absorb float ops before a MatMul
AFFINE_OPS = {"Add", "Sub", "Mul", "Div"}
MAX_RESCALE = 1 << 8                # largest integer factor a branch's codes are multiplied by
OFFSET_RTOL = 2.0 ** -22            # a bias on an integer grid up to float32 rounding (relative)


def lower(model):
    """Lower a model from :func:`rtlgen.passes.load.load_model` into a :class:`DataflowGraph` (the model
    itself is not changed; the graph keeps a copy with the weight quantizers folded)."""
    try:
        return _Lowering(ModelWrapper(copy.deepcopy(model.model))).run()
    except CompileError as exc:         # named as in the user's model, not as qonnx renamed them
        names = getattr(model, "original_names", None)
        if not names:
            raise
        raise CompileError(user_names(str(exc), names)) from None


def _lowerings(at):
    """Every (op, lowering) of the registry (read now: plug-ins registered after import count) at ``at``."""
    return [(op, lowering) for op in OPS.values() for lowering in op.lowers if lowering.at == at]


def _legal_names(lowering):
    return lowering.legal.split(", ") if lowering.legal else list(lowering.onnx_ops)


def supported_ops():
    """The ONNX ops the lowering maps to hardware, as one clause for messages (from the registry)."""
    nodes = sorted({name for _, lw in _lowerings("node") if lw.streams == 1 for name in _legal_names(lw)})
    tails = sorted({f"{name} (at the end)" for _, lw in _lowerings("tail") for name in _legal_names(lw)})
    joins = sorted({lw.legal or f"{', '.join(lw.onnx_ops)} of streams" for _, lw in _lowerings("node")
                    if lw.streams != 1})
    parts = nodes + tails + joins
    if _lowerings("activation"):
        quantizers = ", ".join(sorted(QUANTIZERS))
        elementwise = ", ".join(sorted(set(ELEMENTWISE_OPS) - set(QUANTIZERS)))
        parts += [f"quantizers ({quantizers})", f"the float ops up to a quantizer ({elementwise})"]
    return (f"mapped to hardware: {', '.join(parts)} and reshapes ({', '.join(sorted(SHAPE_OPS))}); any other op "
            f"runs on the host, before the first hardware layer or after the last")


@dataclass
class Accumulator:
    """A dot product whose float ops after it reach no quantizer, for an at="tail" lowering."""
    node: object            # the ONNX node (MatMul, Conv)
    t: StreamTensor         # its input stream
    op_type: str            # the dot-product op (the registry's)
    params: object          # params(weights, weight_dtype, **fields) -> its spec fields
    codes: np.ndarray       # its weights
    wdtype: DataType
    spec: object            # its spec without activation, unit folding
    chain: list             # the float ops after it, up to the tail node
    wscale: np.ndarray      # weight scale per output channel
    lo: int                 # accumulator range
    hi: int
    bias: np.ndarray        # per output channel, or None
    channel_axis: int = 1   # the output channels' axis of ``codes``


@dataclass
class Activation:
    """The float ops from a node up to a quantizer on integer codes, as thresholds (LoweringContext.activation)."""
    nodes: list             # the ONNX nodes it implements
    thresholds: np.ndarray
    dtype: DataType         # output codes
    act_val: int            # code of the lowest level
    channels: int
    vectors: tuple          # numInputVectors
    output: StreamTensor
    where: str              # "node <quantizer> (<op type>)", for messages
    decreasing: bool        # some channel decreases with its input (then no thresholds, no output)


def _default_folding(op):
    folding = {a: 1 for a in ("PE", "SIMD") if a in op.folding}
    if "mem_mode" in op.folding:
        # Weights the compiler never rewrites at run time: read in place (internal_embedded), which
        # saves the weight stream's skid buffer (~1 LUT and 3 FF per weight bit) of internal_decoupled,
        # FINN's default. A folding file's mem_mode still overrides it.
        folding["mem_mode"] = "internal_embedded"
    return folding


class _Lowering:
    """The walk, and the :class:`layers.op.LoweringContext` the registry's lowering rules are run with."""

    def __init__(self, model):
        self.model = model
        self.folded_weights = _fold_weight_quants(model)
        self.nodes, self.counts = [], {}
        self.streams = {}           # model tensor -> StreamTensor, for every tensor on a hardware stream
        self.wires = {}             # model tensor -> the graph tensor carrying it (a reshape keeps the wire)
        self.done = set()           # ONNX node names absorbed into hardware
        self.cursor = None          # the wire the next added node reads

    # ---- walk ----
    def run(self):
        start, pre = self._accelerator_input()
        self.streams[start.name], self.wires[start.name] = start, start.name
        self.done |= set(pre)
        host, host_tensors = [], set()
        for node in list(self.model.graph.node):
            if node.name in self.done:
                continue
            data = [i for i in node.input if i in self.streams or i in host_tensors]
            if not data:
                continue
            mapped = None
            if not any(i in host_tensors for i in node.input):
                mapped = self._match(node)
            if mapped is None:
                host.append(node)
                host_tensors.update(node.output)
                continue
            for t in mapped:
                self.streams[t.name] = t
        if not self.nodes and host:
            first = host[0]
            raise CompileError(f"nothing to put in hardware: node {first.name} ({first.op_type}) reads the "
                               f"quantized input and cannot be mapped to hardware{self._why_not(first)}; "
                               f"{supported_ops()}")
        if not self.nodes:
            raise CompileError("nothing to put in hardware: no node reads the output of the model's input "
                               "quantizer")
        self._check_host(host)
        out = self._accelerator_output(host)
        graph = DataflowGraph(self.nodes, start.name, self.wires[out.name], model=self.model, host_pre=pre,
                              host_post=[n.name for n in host])
        for name, t in self.streams.items():
            graph.tensors.setdefault(self.wires[name], t)
        graph.tensors[graph.output] = out
        graph.tensors[graph.input] = start
        return _prune(graph)

    def _rule(self, node, at, streams):
        """The one lowering of the registry at ``at`` that takes ``node`` (at="node": with ``streams``, its
        inputs on hardware streams), or None."""
        found = []
        for op, lowering in _lowerings(at):
            if at != "activation" and node.op_type not in lowering.onnx_ops:
                continue
            wanted = len(node.input) if lowering.streams == "all" else lowering.streams
            if at == "node" and len(streams) != wanted:
                continue
            if lowering.when is not None and not lowering.when(self, node):
                continue
            found.append((op, lowering))
        if len(found) > 1:
            raise RuntimeError(f"internal error: node {node.name} ({node.op_type}) matches the lowerings of "
                               f"{', '.join(op.op_type for op, _ in found)}; their Op.lowers must not overlap")
        return found[0][1] if found else None

    def _match(self, node):
        """The StreamTensors ``node`` (and what it absorbs) produces in hardware, or None (host)."""
        streams = [i for i in node.input if i in self.streams]
        join = self._rule(node, "node", streams) if len(streams) != 1 else None
        if join is not None:
            new = join.rule(self, node)
        elif len(streams) != 1:
            return None
        else:
            new, hardware = self._match_one(node, self.streams[streams[0]])
            if new is not None and not hardware:
                return [new]
        if new is None:
            return None
        self.nodes[-1].outputs = (new.name,)         # the last node added writes the model tensor
        self.wires[new.name] = new.name
        return [new]

    def _match_one(self, node, t):
        """(the StreamTensor, whether hardware was added) for a node reading one stream ``t``; a reshape,
        or float ops the next MatMul absorbs, keep ``t``'s wire."""
        self.cursor = self.wires[t.name]
        if t.values is not None and node.op_type not in SHAPE_OPS | QUANTIZERS | ELEMENTWISE_OPS:
            raise CompileError(f"node {node.name} ({node.op_type}) reads {t.name}, a residual sum of branches with "
                               f"unrelated float scales, which the accelerator holds on an order-preserving integer "
                               f"grid; only a quantizer may read it (legal: quantize the sum first)")
        if t.bias is not None and node.op_type not in SHAPE_OPS | {"MatMul"}:
            raise CompileError(f"node {node.name} ({node.op_type}) reads {t.name}, the input moved by float ops "
                               f"(scale * code + offset); only a MatMul can absorb them; put a quantizer first")
        if node.op_type in SHAPE_OPS:
            new = self._reshape(t, node)
            if new.row_order is not None and not self._rows_consumed(new.name):
                return None, False          # the host flattens what leaves as a feature map
            self.done.add(node.name)
            self.wires[new.name] = self.wires[t.name]
            return new, False
        rule = self._rule(node, "node", [t.name])
        if rule is not None:
            return rule.rule(self, node), True
        if node.op_type not in ELEMENTWISE_OPS:
            return None, False
        moved = self._input_affine(t, node)
        if moved is not None:
            self.wires[moved.name] = self.wires[t.name]
            return moved, False
        rule = self._rule(node, "activation", [t.name])
        return (rule.rule(self, node) if rule is not None else None), True

    def _rows_consumed(self, tensor):
        """Whether every reader of ``tensor``, a feature map flattened in stream order (h, w, c), is a MatMul,
        which takes that order by permuting its weight rows. Anything else (a graph output, a host op)
        would read the stream's order as the model's (c, h, w) one."""
        readers = self.consumers(tensor)
        return bool(readers) and not self.is_graph_output(tensor) and all(r.op_type == "MatMul" for r in readers)

    def _graph_outputs(self):
        return {o.name for o in self.model.graph.output}

    def _name(self, op_type):
        k = self.counts.get(op_type, 0)
        self.counts[op_type] = k + 1
        return f"{op_type}_{k}"

    def _check_host(self, host):
        """Host nodes after the accelerator must not include compute that hardware should have done."""
        if not host:
            return
        first = host[0]
        for node in host:
            if node.op_type in COMPUTE_OPS:
                raise CompileError(f"node {first.name} ({first.op_type}) cannot be mapped to hardware"
                                   f"{self._why_not(first)} and is not at the graph's edge: {node.name} "
                                   f"({node.op_type}) comes after it; {supported_ops()}")

    def _why_not(self, node):
        """Why ``node`` was left to the host, where a reason more precise than the list of ops is known."""
        streams = [i for i in node.input if i in self.streams]
        if node.op_type in COMPUTE_OPS and len(streams) > 1:
            return (f": it multiplies {len(streams)} streams ({', '.join(streams)}), an activation by an activation "
                    f"as attention's Q.K^T; only a product by constant weights maps")
        if node.op_type in COMPUTE_OPS:
            return ""
        if any(i not in self.streams and self.model.get_initializer(i) is None for i in node.input[1:] if i) \
                and node.op_type in ELEMENTWISE_OPS:
            return ": one of its inputs is neither a stream nor a constant"
        return ""

    def _accelerator_output(self, host):
        """The one stream tensor that leaves the accelerator (read by the host, or a graph output)."""
        outs = self._graph_outputs()
        leaving = []
        for name, t in self.streams.items():
            read_by_host = any(name in n.input for n in host)
            if (read_by_host or name in outs) and t not in leaving:
                leaving.append(t)
        wires = {self.wires[t.name] for t in leaving}
        if len(wires) != 1:
            where = ", ".join(t.name for t in leaving) or "none"
            first = host[0] if host else None
            raise CompileError(f"the accelerator must have one output stream, but {len(wires)} tensors leave it "
                               f"({where})" + (f"; node {first.name} ({first.op_type}) cannot be mapped to "
                                               f"hardware ({supported_ops()})" if first is not None else ""))
        if leaving[-1].values is not None:
            raise CompileError(f"the accelerator's output {leaving[-1].name} is a residual sum of branches with "
                               f"unrelated float scales; quantize it before it leaves the accelerator")
        return leaving[-1]

    # ---- the accelerator's input ----
    def _accelerator_input(self):
        model = self.model
        name = model.graph.input[0].name
        shape = tuple(model.get_tensor_shape(name))
        dtype = model.get_tensor_datatype(name)
        if dtype.is_integer() or dtype.is_fixed_point():
            layout, tensor = self._input_layout(name)
            shape = tuple(model.get_tensor_shape(tensor))
            if dtype.is_integer():
                return StreamTensor(tensor, dtype, 1.0, shape), layout
            # --input-dtype FIXED<w,i>: w-bit signed codes at scale 2^-(w-i)
            codes = DataType[f"INT{dtype.bitwidth()}"]
            return StreamTensor(tensor, codes, float(dtype.scale_factor()), shape, fixed=dtype.name), layout
        # float input: the host runs everything up to and including the first activation quantizer
        t, pre = name, []
        while True:
            consumers = model.find_consumers(t) or []
            if len(consumers) != 1:
                raise CompileError(f"the float input {name} never reaches an activation quantizer "
                                   f"(Quant, BipolarQuant, MultiThreshold) on a single path; the hardware "
                                   f"needs integer data; {INPUT_DTYPE_HINT}")
            node = consumers[0]
            pre.append(node.name)
            if node.op_type in COMPUTE_OPS:
                raise CompileError(f"node {node.name} ({node.op_type}) works on float (unquantized) data: its "
                                   f"input is not the output of a Quant, BipolarQuant or MultiThreshold; "
                                   f"{INPUT_DTYPE_HINT}")
            if node.op_type in QUANTIZERS:
                dtype, scale, qmin, levels = quantizer_output_codes(model, node)
                shift = self._shift_after(node, dtype, scale, qmin, levels)
                layout, tensor = self._input_layout(shift.tensor)
                pre.extend(shift.names + layout)
                return StreamTensor(tensor, shift.dtype, shift.scale, tuple(model.get_tensor_shape(tensor))), pre
            t = node.output[0]

    def _input_layout(self, tensor):
        """(node names, the tensor after them): the Reshapes and Transposes from the model's input (or its
        input quantizer) into the first feature map, as exporters write them (QKeras' converter reshapes
        (1, 28, 28, 1) to (1, 1, 28, 28); a channels-last model transposes NHWC to NCHW). The host runs
        them: it packs the input in the order the hardware reads it. A reshape that does not end in a
        feature map (a flatten into a MatMul) stays what it was: a stream order."""
        model, names, end = self.model, [], tensor
        while end not in self._graph_outputs():
            consumers = model.find_consumers(end) or []
            if len(consumers) != 1 or consumers[0].op_type not in LAYOUT_OPS:
                break
            names.append(consumers[0].name)
            end = consumers[0].output[0]
        if not names or len(model.get_tensor_shape(end) or ()) != 4:
            return [], tensor
        return names, end

    # ---- what adds no hardware ----
    def _reshape(self, t, node):
        out_shape = tuple(self.model.get_tensor_shape(node.output[0]))
        if t.spatial and len(out_shape) != 4:
            c, h, w = t.shape[1:]
            order = None
            if c > 1 and h * w > 1:      # stream (h, w, c) -> logical flat (c, h, w)
                order = np.arange(c * h * w).reshape(c, h, w).transpose(1, 2, 0).reshape(-1)
            return StreamTensor(node.output[0], t.dtype, t.scale, out_shape, order, t.kind, values=t.values)
        if len(out_shape) == 4 and (not t.spatial or out_shape != t.shape):
            raise CompileError(f"node {node.name} ({node.op_type}) reshapes {t.shape} into the feature map "
                               f"{out_shape}; only flattening feature maps is supported")
        return StreamTensor(node.output[0], t.dtype, t.scale, out_shape, t.row_order, t.kind, bias=t.bias,
                            values=t.values)

    def _input_affine(self, t, node):
        """Float Add/Sub/Mul/Div with constants from an integer stream straight into a MatMul, no quantizer
        between (FINN's cybersecurity MLP takes bipolar +-1 and computes (x + 1) / 2 first): the tensor
        they give, as real = a * code + b with one a for all elements and b per element, checked exactly
        on every code. The MatMul takes b into its thresholds; no hardware is added. None if ``node``
        does not start such a chain."""
        nodes, quantizer, after = self._chain_from(node)
        if quantizer is not None or after is None or after.op_type != "MatMul" or t.spatial or t.bias is not None \
                or t.kind != "codes" or np.ndim(t.scale) or any(n.op_type not in AFFINE_OPS for n in nodes):
            return None
        lo, hi = (int(v) for v in (t.dtype.min(), t.dtype.max()))
        if hi - lo > MAX_AFFINE_CHECK:
            return None
        codes = np.array([-1, 1]) if t.dtype == DataType["BIPOLAR"] else np.arange(lo, hi + 1)
        features, end = t.shape[-1], nodes[-1].output[0]
        chain = ActivationChain(self.model, nodes, t.name, end, features, spatial=False)
        real = chain(float(t.scale) * np.repeat(codes[:, None], features, axis=1).astype(np.float64))
        gain = (real[-1] - real[0]) / (codes[-1] - codes[0])
        offset = real[0] - gain * codes[0]
        where = f"the float ops {', '.join(n.name for n in nodes)} between {t.name} and node {after.name} (MatMul)"
        if not np.all(gain == gain[0]) or gain[0] == 0:
            raise CompileError(f"{where} scale the elements differently (or by 0); legal: one scale for the "
                               f"whole tensor, or a quantizer before the MatMul")
        if not np.array_equal(real, gain[0] * codes[:, None] + offset[None, :]):
            raise CompileError(f"{where} are not exactly a * x + b on the {t.dtype.name} codes in float32; put a "
                               f"quantizer before the MatMul")
        self.done.update(n.name for n in nodes)
        return StreamTensor(end, t.dtype, float(gain[0]), tuple(self.model.get_tensor_shape(end)), bias=offset)

    # ---- LoweringContext: the model ----
    def attrs(self, node):
        return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}

    def shape(self, tensor):
        return tuple(self.model.get_tensor_shape(tensor))

    def initializer(self, tensor):
        return self.model.get_initializer(tensor)

    def consumers(self, tensor):
        return self.model.find_consumers(tensor) or []

    def is_graph_output(self, tensor):
        return tensor in self._graph_outputs()

    def run_alone(self, node, x):
        return _run_alone(self.model, node, x)

    # ---- LoweringContext: streams ----
    def stream(self, tensor):
        return self.streams.get(tensor)

    def input(self, node):
        return next(self.streams[i] for i in node.input if i in self.streams)

    def wire(self, t):
        return self.wires[t.name]

    def tensor(self, name, dtype, scale, shape=None, **fields):
        return StreamTensor(name, dtype, scale, self.shape(name) if shape is None else tuple(shape), **fields)

    def require_codes(self, t, node):
        """Quantized codes, with a scale per tensor or per channel (the dot products check that they can
        read a per-channel one: :func:`input_scale_per_output_channel`)."""
        if t.kind != "codes" or np.ndim(t.scale) > 1:
            raise CompileError(f"node {node.name} ({node.op_type}) needs quantized input (codes with a scale per "
                               f"tensor or per channel)")

    # ---- LoweringContext: weights ----
    def weights(self, node, index):
        name = node.input[index]
        if name in self.folded_weights:
            return self.folded_weights[name]
        value = self.model.get_initializer(name)
        dtype = self.model.get_tensor_datatype(name)
        if value is None:
            raise CompileError(f"node {node.name} ({node.op_type}): its weights {name} are not constant")
        if not dtype.is_integer():
            raise CompileError(f"node {node.name} ({node.op_type}) has float (unquantized) weights {name}; "
                               f"quantize them (Quant, BipolarQuant) or annotate an integer datatype")
        return np.asarray(value), np.ones(1), dtype

    def per_channel(self, scale, channels, node):
        return _per_channel(scale, channels, node)

    def dense_grouped_weights(self, codes, group, channels, node):
        return dense_grouped_weights(codes, group, channels, node)

    # ---- LoweringContext: hardware ----
    def add(self, op_type, params, sources, inputs=None):
        """A new node reading ``inputs`` (default: the cursor) and writing a fresh wire, now the cursor."""
        name = self._name(op_type)
        inputs = tuple(inputs) if inputs is not None else (self.cursor,)
        node = HWNode(name, op_type, params, sources=tuple(n.name for n in sources), inputs=inputs,
                      outputs=(f"{name}_out",))
        node.folding = _default_folding(node.op)
        try:
            node.spec()     # validate now: errors name the ONNX nodes, not a later pass
        except ValueError as exc:
            where = ", ".join(f"{n.name} ({n.op_type})" for n in sources[:1])
            raise CompileError(f"node {where} as {op_type}: {str(exc).split(': ', 1)[-1]}") from None
        self.nodes.append(node)
        self.done.update(n.name for n in sources)
        self.cursor = node.outputs[0]
        return node

    def spec(self, op_type, params):
        node = HWNode(op_type, op_type, params)
        node.folding = _default_folding(node.op)
        return node.spec()

    # ---- LoweringContext: float ops as integer arithmetic ----
    def dot_product(self, node, t, op_type, codes, wscale, wdtype, params, *, spatial, bias, channel_axis):
        """``op_type`` for ``node`` and the elementwise chain behind it, up to its quantizer if any."""
        model, out_name = self.model, node.output[0]
        channels = codes.shape[channel_axis]
        # a per-channel input scale: real scale per output channel, integer factors folded into the weights
        codes, wdtype, in_scale = input_scale_per_output_channel(node, t, codes, wdtype, channel_axis)
        if np.ndim(t.scale):
            t, wscale = replace(t, scale=1.0), in_scale * wscale
            in_scale = np.ones(channels)
        plain = self.spec(op_type, params(codes, wdtype))
        lo, hi = plain.acc_range()
        in_elems = plain.in_elems
        dot = (lambda acc: 2 * acc - in_elems) if plain.xnor else (lambda acc: acc)
        chain_nodes, quantizer, after = self._chain(out_name)
        out_shape = tuple(model.get_tensor_shape(out_name))
        if quantizer is None:
            acc = Accumulator(node, t, op_type, params, codes, wdtype, plain, chain_nodes, wscale, lo, hi, bias,
                              channel_axis)
            tail = self._rule(after, "tail", ()) if after is not None else None
            if tail is not None:
                new = tail.rule(self, after, acc)
                if new is not None:
                    return new
            return self._no_activation(acc, out_name, out_shape)
        dtype, s_out, qmin, levels = quantizer_output_codes(model, quantizer)
        chain = ActivationChain(model, chain_nodes + [quantizer], out_name, quantizer.output[0], channels,
                                spatial, extra_bias=bias)
        real_scale = in_scale * wscale

        def codes_of(acc, sign):
            return np.round(chain(real_scale[None, :] * sign[None, :] * dot(acc)) / s_out).astype(np.int64)

        ones = np.ones(channels)
        dlo, dhi = (-in_elems, in_elems) if plain.xnor else (lo, hi)
        sign = channel_directions(lambda d: codes_of(d if not plain.xnor else (d + in_elems) // 2, ones),
                                  dlo, dhi, channels, f"node {node.name} ({node.op_type})")
        # a decreasing channel gets its weights negated (bipolar weights stay bipolar)
        along = [1] * codes.ndim
        along[channel_axis] = -1
        weights = codes * sign.reshape(along)
        wdtype_hw = wdtype if wdtype == DataType["BIPOLAR"] or (sign > 0).all() else \
            dtype_for_range(int(weights.min()), int(weights.max()))
        spec = self.spec(op_type, params(weights, wdtype_hw))
        hlo, hhi = spec.acc_range()
        bipolar = dtype == DataType["BIPOLAR"]
        thresholds = derive_thresholds(lambda acc: codes_of(acc, sign.astype(np.float64)), hlo, hhi, channels,
                                       0 if bipolar else qmin, levels) if not bipolar else \
            derive_thresholds(lambda acc: (codes_of(acc, sign.astype(np.float64)) + 1) // 2, hlo, hhi, channels,
                              0, 1)
        shift = self._shift_after(quantizer, dtype, s_out, qmin, levels)
        self.add(op_type, params(weights, wdtype_hw, thresholds=thresholds, output_dtype=shift.dtype,
                                 act_val=0 if bipolar else shift.qmin),
                 [node] + chain_nodes + [quantizer] + shift.nodes)
        return StreamTensor(shift.tensor, shift.dtype, shift.scale, tuple(model.get_tensor_shape(shift.tensor)))

    def _no_activation(self, acc, out_name, out_shape, odt=None):
        """The dot product without an activation: its accumulators leave the accelerator for the host, which
        runs the float ops after them; or, where hardware work follows with no quantizer between, they
        travel on as a wide integer stream (:meth:`_carry`)."""
        node, t = acc.node, acc.t
        if odt is None and self._hardware_follows(acc):
            affine, rest, reader = self._carried_part(acc)
            if rest or self._lowerable(reader):
                return self._carry(acc, affine, rest, reader)
            if acc.bias is not None:    # else the check of the host's nodes names the reader
                raise CompileError(f"node {reader.name} ({reader.op_type}) cannot be mapped to hardware and is not "
                                   f"at the graph's edge: it reads the unquantized accumulator of {node.name} "
                                   f"({node.op_type}) and hardware work follows it; {supported_ops()}")
        if acc.bias is not None:
            raise CompileError(f"node {node.name} ({node.op_type}): a bias (of a convolution, or an offset on "
                               f"its input) with no quantizer after it and no hardware layer after it is not "
                               f"supported; legal: the bias as an Add node after it (the host adds it), or a "
                               f"quantizer after it")
        self.add(acc.op_type, acc.params(acc.codes, acc.wdtype, output_dtype=odt), [node])
        spec = self.nodes[-1].spec()
        xnor = dict(gain=2, offset=-spec.in_elems) if spec.xnor else {}
        rounding = not all(_power_of_two(s) for s in (float(t.scale), *np.ravel(acc.wscale)))
        return StreamTensor(out_name, spec.output_dtype, float(t.scale) * acc.wscale, out_shape, rounding=rounding,
                            **xnor)

    # ---- a dot product without activation, carried into the next layer ----
    def _hardware_follows(self, acc):
        """Whether a dot product or a quantizer reads what the float ops after ``acc`` compute (then the
        accumulators cannot leave for the host: hardware work would follow host work)."""
        seen, todo = set(), [acc.chain[-1].output[0] if acc.chain else acc.node.output[0]]
        while todo:
            for node in self.model.find_consumers(todo.pop()) or []:
                if node.op_type in COMPUTE_OPS | QUANTIZERS:
                    return True
                if node.name not in seen:
                    seen.add(node.name)
                    todo.extend(node.output)
        return False

    def _carried_part(self, acc):
        """(the constant Add/Sub/Mul/Div after ``acc``, which the carried stream applies; the rest of its float
        ops; the node reading the stream)."""
        affine = []
        for n in acc.chain:
            if n.op_type not in AFFINE_OPS:
                break
            affine.append(n)
        rest = acc.chain[len(affine):]
        end = affine[-1].output[0] if affine else acc.node.output[0]
        return affine, rest, rest[0] if rest else next(iter(self.model.find_consumers(end) or []))

    def _lowerable(self, node):
        """Whether some lowering of the registry may take ``node`` (a reshape, a quantizer, an op of a rule)."""
        return node.op_type in SHAPE_OPS | QUANTIZERS or \
            any(node.op_type in lowering.onnx_ops for _, lowering in _lowerings("node"))

    def _carry(self, acc, affine, rest, reader):
        """hls4ml's way with linear layers that have no activation quantizer between them: the exact
        accumulator (its true width: the spec's acc_range) travels into the next layer as a wide integer
        stream, with the constant Add/Sub/Mul/Div after it (a bias, a scale) applied exactly: the stream is
        ``F[c] * acc[c] + B[c]`` at one scale, ``F`` folded into this layer's weights (1 where the bias lies
        on the accumulator's grid) and ``B`` added by a ChannelwiseOp. The next layer reads the stream as
        its integer input. A bias or scale that puts the result on no common integer grid is refused,
        naming the node that reads it."""
        node = acc.node
        end = affine[-1].output[0] if affine else node.output[0]
        source = affine[-1].name if affine else node.name
        ops = f" through {', '.join(n.name for n in affine)}" if affine else \
            " with its bias" if acc.bias is not None else ""
        reads = (f"node {reader.name} ({reader.op_type}) reads {source}'s output, the unquantized accumulator of "
                 f"{node.name} ({node.op_type}){ops}, with no activation quantizer between them")
        if rest and rest[0].op_type not in SHAPE_OPS:
            raise CompileError(f"{reads}: only constant Add, Sub, Mul and Div are carried exactly into the next "
                               f"layer as integers, not {rest[0].op_type}; legal: a quantizer before "
                               f"{rest[0].name}")
        if acc.spec.xnor:
            raise CompileError(f"{reads}: a binary (XNOR-popcount) dot product is only carried into the next layer "
                               f"through a quantizer; legal: a quantizer after {node.name}")
        gain, offset = self._affine_of(acc, affine, reads)
        scale, factors, codes_bias = _integer_grid(gain, offset, reads)
        along = [1] * acc.codes.ndim
        along[acc.channel_axis] = -1
        weights, wdtype = acc.codes, acc.wdtype
        if np.any(factors != 1):        # acc * F[c] exactly: the weights of channel c times F[c]
            weights = acc.codes * factors.reshape(along)
            wdtype = dtype_for_range(int(min(weights.min(), 0)), int(max(weights.max(), 0)))
        dot = self.add(acc.op_type, acc.params(weights, wdtype), [node] + ([] if codes_bias.any() else affine))
        shape = tuple(self.model.get_tensor_shape(end))
        dtype = dot.spec().output_dtype
        if codes_bias.any():            # the op of the registry that adds a constant per channel
            (_, lowering), = _lowerings("bias")
            dtype = lowering.rule(self, affine or [node], StreamTensor(end, dtype, scale, shape), codes_bias) \
                .spec().output_dtype
        self.done.update(n.name for n in affine)
        rounding = not all(_power_of_two(abs(float(g))) for g in (*gain, scale))
        return StreamTensor(end, dtype, scale, shape, rounding=rounding)

    def _affine_of(self, acc, nodes, reads):
        """(gain, offset) per output channel: the real value of ``nodes`` applied to the dot product is
        ``gain[c] * acc[c] + offset[c]`` (a Conv's own bias included), in float64."""
        channels = len(acc.wscale)
        gain = float(acc.t.scale) * np.asarray(acc.wscale, dtype=np.float64)
        offset = np.zeros(channels) if acc.bias is None else np.asarray(acc.bias, dtype=np.float64).reshape(-1)
        tensor = acc.node.output[0]
        for n in nodes:
            shape = tuple(self.model.get_tensor_shape(n.output[0]))
            data = list(n.input).index(tensor)
            value = self.model.get_initializer(n.input[1 - data])
            full = np.broadcast_to(np.asarray(value, dtype=np.float64), shape)
            per_channel = np.moveaxis(full, 1, 0).reshape(shape[1], -1)
            if shape[1] != channels or not np.all(per_channel == per_channel[:, :1]):
                raise CompileError(f"{reads}: the constant of node {n.name} ({n.op_type}) of shape {np.shape(value)} "
                                   f"is neither one number nor one per channel")
            c = per_channel[:, 0]
            if n.op_type == "Add":
                offset = offset + c
            elif n.op_type == "Sub" and data == 0:
                offset = offset - c
            elif n.op_type == "Sub":
                gain, offset = -gain, c - offset
            elif n.op_type == "Mul":
                gain, offset = gain * c, offset * c
            elif data == 0 and np.all(c != 0):
                gain, offset = gain / c, offset / c
            else:
                raise CompileError(f"{reads}: node {n.name} (Div) divides by the accumulator (or by 0), which is "
                                   f"not linear; legal: a quantizer before it")
            tensor = n.output[0]
        return gain, offset

    def accumulator_output(self, acc, output_dtype):
        self._no_activation(acc, acc.node.output[0], (), odt=output_dtype)
        self.nodes[-1].sources += tuple(n.name for n in acc.chain)
        self.done.update(n.name for n in acc.chain)
        return self.nodes[-1]

    def evaluate_chain(self, nodes, start, end, values, channels=1, spatial=False):
        return ActivationChain(self.model, nodes, start, end, channels, spatial)(values)

    def per_tensor(self, node):
        return _per_tensor_node(self.model, node)

    def activation(self, t, node):
        """A quantizer on integer data (through elementwise ops) as thresholds, or None. A per-channel
        input scale (and a per-channel quantizer) gives per-channel thresholds."""
        if t.kind != "codes" or np.ndim(t.scale) > 1:
            return None                 # e.g. float ops after a last MatMul: the host's
        if node.op_type not in QUANTIZERS and not self._absorbable(node):
            return None
        chain_nodes, quantizer, _ = self._chain_from(node)
        if quantizer is None:
            return None
        model = self.model
        q_out = quantizer.output[0]
        out_shape = tuple(model.get_tensor_shape(q_out))
        if len(out_shape) == 4 and out_shape != t.shape or len(out_shape) == 2 and t.spatial and \
                t.shape[1] > 1 and t.shape[2] * t.shape[3] > 1:
            raise CompileError(f"node {node.name}: the ops before quantizer {quantizer.name} change the layout")
        per_tensor = np.ndim(t.scale) == 0 and all(_per_tensor_node(model, n) for n in chain_nodes + [quantizer])
        channels = out_shape[1]
        if np.ndim(t.scale) and np.size(t.scale) != channels:
            raise CompileError(f"node {quantizer.name} ({quantizer.op_type}) reads {t.name} of shape {t.shape}, whose "
                               f"scale has {np.size(t.scale)} values per channel, not one for each of its "
                               f"{channels} channels; legal: a per-tensor quantizer before a flatten")
        eval_channels = 1 if per_tensor else channels
        spatial = len(out_shape) == 4
        chain = ActivationChain(model, chain_nodes + [quantizer], t.name, q_out, eval_channels,
                                spatial and not per_tensor)
        dtype, s_out, qmin, levels = quantizer_output_codes(model, quantizer)
        bipolar = dtype == DataType["BIPOLAR"]
        lo, hi = int(t.dtype.min()), int(t.dtype.max())

        def codes_of(x):
            real = t.values[x - lo] if t.values is not None else \
                np.asarray(t.scale, dtype=np.float64) * x.astype(np.float64)
            codes = np.round(chain(real) / s_out).astype(np.int64)
            return (codes + 1) // 2 if bipolar else codes

        where = f"node {quantizer.name} ({quantizer.op_type})"
        vecs = (1, *out_shape[2:]) if spatial else (1,)
        if (channel_directions(codes_of, lo, hi, eval_channels, where) < 0).any():
            return Activation(chain_nodes + [quantizer], None, dtype, None, channels, vecs, None, where, True)
        thresholds = derive_thresholds(codes_of, lo, hi, eval_channels, 0 if bipolar else qmin, levels)
        shift = self._shift_after(quantizer, dtype, s_out, qmin, levels)
        return Activation(chain_nodes + [quantizer] + shift.nodes, thresholds, shift.dtype,
                          0 if bipolar else shift.qmin, channels, vecs,
                          StreamTensor(shift.tensor, shift.dtype, shift.scale, out_shape), where, False)

    def sum_grid(self, a, b, where):
        """The hardware adds the integer codes exactly. The model adds two float32 products in float32:
        with float (not power-of-two) scales that sum is only the exact one up to rounding (``rounding``),
        so where a quantizer after the Add sits on a round-half-even tie, qonnx and the accelerator may
        pick neighbouring codes. ``rtlgen verify`` compares against the exact semantics
        (:mod:`rtlgen.check.exact`, which adds exactly too) and names those ties, as for the float32 dot
        products of MatMul and Conv. Scales with no common integer grid get an order-preserving one
        (``grid``: the sum's real values are :meth:`sum_values`). Per-channel scales: :func:`per_channel_sum_grid`
        (``s`` and the factors per channel)."""
        if np.ndim(a.scale) or np.ndim(b.scale):
            return per_channel_sum_grid(a, b, where)
        try:
            s, factors = _common_scale([float(a.scale), float(b.scale)], where)
            grid = False
        except CompileError as unrelated:
            factors = order_preserving_factors(a, b, unrelated)
            s, grid = float(a.scale) / factors[0], True
        rounding = a.rounding or b.rounding or grid or not float32_sum_is_exact(a, b, factors, s)
        return s, factors, grid, rounding

    def sum_values(self, a, b, factors, dtype):
        return _sum_values(a, b, factors, dtype)

    def common_scale(self, scales, where):
        return _common_scale(scales, where)

    # ---- LoweringContext: messages ----
    def error(self, message):
        return CompileError(message)

    def warn(self, message):
        warnings.warn(CompileWarning(message))

    # ---- chains ----
    def _chain(self, tensor):
        """(elementwise nodes, quantizer or None, the node that stopped the walk or None) after ``tensor``."""
        consumers = self.model.find_consumers(tensor) or []
        if len(consumers) != 1 or tensor in self._graph_outputs():
            return [], None, None
        return self._chain_from(consumers[0])

    def _chain_from(self, node):
        """:meth:`_chain` starting at ``node`` itself."""
        nodes = []
        while True:
            if node.op_type in QUANTIZERS:
                return nodes, node, None
            if node.op_type not in ELEMENTWISE_OPS | SHAPE_OPS or not self._absorbable(node):
                return nodes, None, node
            nodes.append(node)
            tensor = node.output[0]
            consumers = self.model.find_consumers(tensor) or []
            if len(consumers) != 1 or tensor in self._graph_outputs():
                return nodes, None, None
            node = consumers[0]

    def _shift_after(self, quantizer, dtype, scale, qmin, levels):
        """The quantizer's output moved by scalar Add/Sub and scaled by positive scalar Mul/Div right after it
        (FINN's QONNX->FINN conversion writes a signed activation as MultiThreshold -> Add -> Mul): still
        ``scale' * code'`` with integer codes, so the quantizer's layer emits the moved codes (its ActVal)
        and no hardware is added. An Add that is not a whole number of steps, or a Mul that is not
        positive, ends the walk (those nodes are then what they were before)."""
        model, tensor, names, nodes = self.model, quantizer.output[0], [], []
        shift = 0
        while dtype != DataType["BIPOLAR"] and tensor not in self._graph_outputs():
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
        return _Shifted(tensor, dtype, scale if np.ndim(scale) else float(scale), qmin + shift, names, nodes)

    def _absorbable(self, node):
        """An elementwise node whose other inputs are constants (not a second stream: that is a join)."""
        return all(self.model.get_initializer(i) is not None for i in node.input[1:] if i)


@dataclass
class _Shifted:
    tensor: str             # the model tensor the codes now stand for
    dtype: DataType
    scale: object           # a number, or (C,) per channel
    qmin: int               # the code of the lowest level (the layer's ActVal)
    names: list             # the absorbed nodes' names, and the nodes
    nodes: list


def _prune(graph):
    """``graph`` without the nodes whose outputs never reach the graph output."""
    needed, kept = {graph.output}, []
    for node in reversed(graph.nodes):
        if needed & set(node.outputs):
            kept.append(node)
            needed |= set(node.inputs)
    graph.nodes = kept[::-1]
    return graph.check()


def _common_scale(scales, where):
    """(s, factors): every scale is ``factors[k] * s`` with small positive integer factors (gcd 1)."""
    base = scales[0]
    ratios = [Fraction(x / base).limit_denominator(MAX_RESCALE) for x in scales]
    den = lcm(*(r.denominator for r in ratios))
    factors = [int(r * den) for r in ratios]
    g = gcd(*factors)
    factors = [f // g for f in factors]
    s = base * g / den
    if max(factors) > MAX_RESCALE or any(abs(f * s - x) > 1e-12 * x for f, x in zip(factors, scales)):
        raise CompileError(f"{where}: input scales {scales} are not small integer multiples of one common scale; "
                           f"quantize the inputs onto scales whose ratio is an integer up to {MAX_RESCALE} "
                           f"(e.g. powers of two, or one shared quantizer)")
    return s, factors


def _integer_grid(gain, offset, reads):
    """(scale, F, B): ``gain[c] * acc + offset[c] == scale * (F[c] * acc + B[c])`` with small integers F
    (gain's ratios to one common scale, times the factor f that puts the offsets on a grid) and integers B.
    The offsets must lie on that grid up to float32 rounding (a bias quantized on the accumulator's scale,
    Brevitas' Int32Bias, or on a power-of-two one, as QKeras' quantized_bits); a float bias does not."""
    if np.any(gain == 0):
        raise CompileError(f"{reads}: a channel is multiplied by 0; legal: a quantizer between the layers")
    try:
        s, ks = _common_scale([abs(float(g)) for g in gain], reads)
    except CompileError:
        raise CompileError(f"{reads}: its channels have the scales {sorted(set(np.abs(gain).tolist()))[:4]}"
                           f"{'...' if len(set(gain.tolist())) > 4 else ''}, which are not small integer multiples "
                           f"(up to {MAX_RESCALE}) of one common scale, so no integer stream carries them exactly; "
                           f"legal: per-tensor (or power-of-two) weight scales, or an activation quantizer between "
                           f"the layers") from None
    ks = np.asarray(ks, dtype=np.int64) * np.sign(gain).astype(np.int64)
    steps = np.asarray(offset, dtype=np.float64) / s
    for f in range(1, MAX_RESCALE + 1):         # the coarsest grid that holds every offset
        codes = np.round(steps * f)
        off = np.abs(steps * f - codes) > OFFSET_RTOL * np.abs(steps * f)
        if not off.any():
            break
    else:
        c = int(np.flatnonzero(np.abs(steps - np.round(steps)) > OFFSET_RTOL * np.abs(steps))[0])
        raise CompileError(f"{reads}: its float bias {float(offset[c]):.9g} (channel {c}) is not on the "
                           f"accumulator's integer grid (scale {s:.9g}) nor on one up to {MAX_RESCALE}x finer, "
                           f"so no integer stream carries it exactly; legal: quantize the bias on the "
                           f"accumulator's scale (input scale x weight scale, as Brevitas' Int32Bias does) or on a "
                           f"power-of-two scale, or put an activation quantizer between the layers")
    return s / f, ks * f, codes.astype(np.int64)


def _pair_grid(a, b, factors):
    """Every pair of codes (ca, cb): the integer sum fa*ca + fb*cb and the exact real sum sa*ca + sb*cb."""
    ca = np.arange(int(a.dtype.min()), int(a.dtype.max()) + 1, dtype=np.int64)[:, None]
    cb = np.arange(int(b.dtype.min()), int(b.dtype.max()) + 1, dtype=np.int64)[None, :]
    x = (factors[0] * ca + factors[1] * cb).ravel()
    real = (float(np.float32(a.scale)) * ca + float(np.float32(b.scale)) * cb).ravel()
    return x, real


def order_preserving_factors(a, b, refusal):
    """Integer factors (fa, fb) such that the integer sum fa*ca + fb*cb orders every pair of codes as
    the real sum sa*ca + sb*cb does (a larger real sum never gets a smaller or equal integer sum). Then
    any quantizer of the real sum is a quantizer of the integer sum, with thresholds found from the
    pairs (:func:`_sum_values`). The candidates are the best rational approximations fb/fa of sb/sa
    with growing denominators; ``refusal`` is raised where none up to 2^16 keeps the order."""
    if (int(a.dtype.max()) - int(a.dtype.min()) + 1) * (int(b.dtype.max()) - int(b.dtype.min()) + 1) > MAX_SUM_CHECK:
        raise refusal
    ratio = float(np.float32(b.scale)) / float(np.float32(a.scale))
    tried = set()
    for bits in range(0, 17):
        r = Fraction(ratio).limit_denominator(1 << bits)
        factors = (r.denominator, r.numerator)
        if r.numerator == 0 or factors in tried:
            continue
        tried.add(factors)
        x, real = _pair_grid(a, b, factors)
        order = np.lexsort((x, real))
        x, real = x[order], real[order]
        rises = np.flatnonzero(real[1:] > real[:-1])
        if (np.maximum.accumulate(x)[rises] < x[rises + 1]).all():
            return list(factors)
    raise refusal


def _sum_values(a, b, factors, dtype):
    """The real value of every integer sum in ``dtype``'s range: the exact sum of the pair of codes that
    gives it, or, for a sum no pair gives, of the largest one below it (any value between its neighbours
    would do: no pair lands there)."""
    x, real = _pair_grid(a, b, factors)
    order = np.argsort(x, kind="stable")
    x, real = x[order], real[order]
    codes = np.arange(int(dtype.min()), int(dtype.max()) + 1, dtype=np.int64)
    below = np.maximum(np.searchsorted(x, codes, side="right") - 1, 0)
    return real[below]


def float32_sum_is_exact(a, b, factors, s):
    """Whether the model's float32(sa * ca) + float32(sb * cb), added in float32, is exactly the integer
    sum fa*ca + fb*cb at scale s for every pair of codes (checked pair by pair; for huge ranges only
    power-of-two scales count as exact)."""
    (alo, ahi), (blo, bhi) = [(int(t.dtype.min()), int(t.dtype.max())) for t in (a, b)]
    sa, sb = float(np.float32(a.scale)), float(np.float32(b.scale))
    if (ahi - alo + 1) * (bhi - blo + 1) <= MAX_SUM_CHECK:
        ca = np.arange(alo, ahi + 1, dtype=np.float64)[:, None]
        cb = np.arange(blo, bhi + 1, dtype=np.float64)[None, :]
        model = (ca * sa).astype(np.float32) + (cb * sb).astype(np.float32)
        ours = (s * (factors[0] * ca + factors[1] * cb)).astype(np.float32)
        return bool((model == ours).all())
    return all(_power_of_two(x) for x in (sa, sb)) and max(abs(alo), ahi, abs(blo), bhi) < 1 << 23


def _per_tensor_node(model, node):
    """True if every constant of ``node`` is one number (MultiThreshold: one row of thresholds)."""
    consts = [model.get_initializer(i) for i in node.input[1:] if model.get_initializer(i) is not None]
    if node.op_type == "MultiThreshold":
        return np.asarray(consts[0]).shape[0] == 1
    return all(np.asarray(c).size == 1 for c in consts)


def _power_of_two(x):
    mantissa, _ = np.frexp(x)
    return x > 0 and mantissa == 0.5


def _run_alone(model, node, x):
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


def _per_channel(scale, channels, node):
    """A weight scale as a (channels,) array; it must be per-tensor or per output channel."""
    scale = np.asarray(scale, dtype=np.float64)
    if scale.size == 1:
        return np.full(channels, float(scale.reshape(-1)[0]))
    if scale.size == channels:
        return scale.reshape(-1)
    raise CompileError(f"node {node.name} ({node.op_type}): weight scale of shape {scale.shape} is neither "
                       f"per-tensor nor per output channel")


def _fold_weight_quants(model):
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


def input_scale_per_output_channel(node, t, codes, wdtype, channel_axis):
    """(weights, weight datatype, the input's scale per output channel) of a dot product over stream ``t``.

    A per-tensor ``t`` changes nothing. A per-channel one (real = scale[c] * code) is exact when every
    output channel's sum reads channels whose scales are integer multiples k[c] * s of one scale s (its
    own): the real sum is then s * sum(w * k[c] * code), so the factors k join the weights (wider weights)
    and s is the scale of the output channel. A depthwise layer (weights (C, 1, kh, kw): output channel c
    reads input channel c only) needs no factor; a dense one (a weight matrix whose rows are in stream
    order, the channel fastest: a convolution's (ky, kx, c) windows, a flattened map's (h, w, c) pixels)
    does unless its channels share one scale. Anything else is refused, naming the node."""
    channels = codes.shape[channel_axis]
    if np.ndim(t.scale) == 0:
        return codes, wdtype, np.full(channels, float(t.scale))
    scale = np.asarray(t.scale, dtype=np.float64).reshape(-1)
    where = f"node {node.name} ({node.op_type})"
    if codes.ndim == 4 and channel_axis == 0 and codes.shape[1] == 1 and channels == scale.size:
        return codes, wdtype, scale.copy()
    if codes.ndim != 2 or codes.shape[0] % scale.size or len(t.shape) not in (2, 4):
        raise CompileError(f"{where} reads {t.name}, whose scale is per channel ({scale.size} scales), with weights "
                           f"of shape {codes.shape}; legal readers of per-channel scaled data: a depthwise "
                           f"convolution, or a MatMul/Conv when the scales are integer multiples of one scale")
    row_channel = np.arange(codes.shape[0]) % scale.size
    reads = np.zeros((scale.size, channels), dtype=bool)            # input channel c feeds output channel o
    np.logical_or.at(reads, row_channel, codes != 0)
    factors = np.ones((scale.size, channels), dtype=np.int64)
    base = np.full(channels, scale[0])
    patterns, group = np.unique(reads, axis=1, return_inverse=True)
    for k, pattern in enumerate(patterns.T):
        used = np.flatnonzero(pattern)
        if not len(used):
            continue                                    # an all-zero output channel: any scale will do
        try:
            s, ks = _common_scale([float(x) for x in scale[used]], where)
        except CompileError:
            shown = ", ".join(f"{x:.6g}" for x in scale[used][:4]) + (", ..." if len(used) > 4 else "")
            raise CompileError(f"{where} reads {t.name}, whose scale is per channel ({shown}), and adds channels "
                               f"whose scales are not small integer multiples (up to {MAX_RESCALE}) of one scale, "
                               f"so the sum has no exact integer form; legal: a depthwise convolution reading it, "
                               f"per-channel scales that are integer multiples of one scale (e.g. powers of two), "
                               f"or a per-tensor quantizer before this layer") from None
        columns = np.flatnonzero(group.reshape(-1) == k)
        factors[np.ix_(used, columns)] = np.asarray(ks, dtype=np.int64)[:, None]
        base[columns] = s
    if (factors == 1).all():
        return codes, wdtype, base
    weights = codes * factors[row_channel, :]
    return weights, dtype_for_range(int(weights.min()), int(weights.max())), base


def per_channel_sum_grid(a, b, where):
    """(s, factors, grid, rounding) of :meth:`_Lowering.sum_grid` for streams of which one or both have a scale
    per channel: channel c's codes add exactly on scale s[c] where sa[c] = fa * s[c] and sb[c] = fb * s[c]
    with small integer factors; ``factors`` is (fa, fb) as numbers when every channel has the same pair (one
    quantizer shared by both branches: (1, 1)), else as (C,) arrays (a per-channel multiply of a branch).
    A channel whose two scales have no such common scale is refused: the order-preserving grid of
    unrelated per-tensor scales has no per-channel form."""
    channels = a.shape[1]
    sa, sb = (np.broadcast_to(np.asarray(t.scale, dtype=np.float64).reshape(-1), (channels,)) for t in (a, b))
    s, fa, fb = np.empty(channels), np.empty(channels, np.int64), np.empty(channels, np.int64)
    for c in range(channels):
        try:
            s[c], (fa[c], fb[c]) = _common_scale([float(sa[c]), float(sb[c])], where)
        except CompileError:
            raise CompileError(f"{where}: in channel {c} the inputs' scales {sa[c]:.6g} and {sb[c]:.6g} are not small "
                               f"integer multiples (up to {MAX_RESCALE}) of one scale; per-channel scaled inputs "
                               f"add exactly only when each channel's scales are; legal: one (shared) quantizer on "
                               f"both branches, or scales whose ratio per channel is an integer (e.g. powers of "
                               f"two)") from None
    same = len(set(fa.tolist())) == 1 and len(set(fb.tolist())) == 1
    factors = [int(fa[0]), int(fb[0])] if same else [fa, fb]
    rounding = a.rounding or b.rounding or not _float32_sums_exact_per_channel(a, b, sa, sb, fa, fb, s)
    return s, factors, False, rounding


def _float32_sums_exact_per_channel(a, b, sa, sb, fa, fb, s):
    """:func:`float32_sum_is_exact` for every distinct channel (its scales and factors)."""
    seen = set()
    for c in range(len(s)):
        key = (sa[c], sb[c], fa[c], fb[c])
        if key in seen:
            continue
        seen.add(key)
        if not float32_sum_is_exact(replace(a, scale=float(sa[c])), replace(b, scale=float(sb[c])),
                                    (int(fa[c]), int(fb[c])), float(s[c])):
            return False
    return True
