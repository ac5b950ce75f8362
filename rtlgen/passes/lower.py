"""The ``to_hw`` pass: a cleaned QONNX / FINN-ONNX model -> a :class:`DataflowGraph` plus host ops.

The walk starts at the first integer tensor (an integer-annotated graph input, or the output of the
first activation quantizer, computed on the host) and visits the model's nodes in topological order.
A node whose data inputs are all hardware streams is matched against the registry: each op declares in
``Op.lowers`` the ONNX patterns it lowers from (:class:`layers.op.Lowering`), and its rule builds the
hardware through this pass's context (:class:`layers.op.LoweringContext`, implemented by
:mod:`rtlgen.passes.lowering_context`, which the walk extends): the stream tensors, the weights as integer
codes (:mod:`rtlgen.passes.weight_codes`), the float ops up to the next quantizer turned into exact
thresholds (:mod:`rtlgen.passes.thresholds`), exact sums of streams on a common grid
(:mod:`rtlgen.passes.exact_scales`). The rules are found by :mod:`rtlgen.passes.lowering_rules`. The walk itself
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

import numpy as np
from qonnx.core.datatype import DataType
from qonnx.core.modelwrapper import ModelWrapper

from rtlgen.errors import CompileError
from rtlgen.ir.graph import DataflowGraph, StreamTensor
from rtlgen.passes.float_ops import chain_from, graph_outputs, shift_after
from rtlgen.passes.load import INPUT_DTYPE_HINT, quantizer_output_codes, user_names
from rtlgen.passes.lowering_context import AFFINE_OPS, COMPUTE_OPS, ModelLoweringContext
from rtlgen.passes.lowering_rules import rule_for, supported_ops
from rtlgen.passes.thresholds import ELEMENTWISE_OPS, QUANTIZERS, SHAPE_OPS, ActivationChain

__all__ = ["lower"]

LAYOUT_OPS = SHAPE_OPS | {"Transpose"}
MAX_AFFINE_CHECK = 1 << 16         # input codes checked one by one to absorb float ops before a MatMul


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


class _Lowering(ModelLoweringContext):
    """The walk over the model's nodes; its context (state, and what the registry's rules ask) is the base."""

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


    def _match(self, node):
        """The StreamTensors ``node`` (and what it absorbs) produces in hardware, or None (host)."""
        streams = [i for i in node.input if i in self.streams]
        join = rule_for(self, node, "node", streams) if len(streams) != 1 else None
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
        rule = rule_for(self, node, "node", [t.name])
        if rule is not None:
            before = len(self.nodes)
            new = rule.rule(self, node)
            if new is not None and len(self.nodes) == before:     # no hardware: the same words, relabelled
                self.done.add(node.name)
                self.wires[new.name] = self.wires[t.name]
                return new, False
            return new, True
        if node.op_type not in ELEMENTWISE_OPS:
            return None, False
        # float ops into the next MatMul's rows: only on a stream in its own order (not a relabelled one)
        moved = self._input_affine(t, node) if t.row_order is None else None
        if moved is not None:
            self.wires[moved.name] = self.wires[t.name]
            return moved, False
        rule = rule_for(self, node, "activation", [t.name])
        return (rule.rule(self, node) if rule is not None else None), True

    def _rows_consumed(self, tensor):
        """Whether every reader of ``tensor``, a feature map flattened in stream order (h, w, c), is a MatMul,
        which takes that order by permuting its weight rows, or a layout op the registry relabels (a
        transpose to (h*w, c) tokens: the stream's own order again). Anything else (a graph output, a host
        op) would read the stream's order as the model's (c, h, w) one."""
        readers = self.consumers(tensor)
        return bool(readers) and not self.is_graph_output(tensor) and all(
            r.op_type == "MatMul" or r.op_type == "Transpose" and rule_for(self, r, "node", [tensor]) is not None
            for r in readers)

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
            return (f": it multiplies {len(streams)} streams ({', '.join(streams)}), an activation by an activation; "
                    f"only a product by constant weights, or a MatMul of two streams, maps")
        if node.op_type in COMPUTE_OPS:
            return ""
        if node.op_type == "LayerNormalization":       # issue 41: Brevitas exports no quantized LayerNorm
            return " (no LayerNorm is mapped yet: it needs each token's mean and variance)"
        if node.op_type == "Concat" and any(self.model.get_initializer(i) is not None for i in node.input):
            return (" (it joins a constant, a class token, to a stream: only streams are concatenated; mean pooling "
                    "over the tokens is mapped)")
        if any(i not in self.streams and self.model.get_initializer(i) is None for i in node.input[1:] if i) \
                and node.op_type in ELEMENTWISE_OPS:
            return ": one of its inputs is neither a stream nor a constant"
        return ""

    def _accelerator_output(self, host):
        """The one stream tensor that leaves the accelerator (read by the host, or a graph output)."""
        outs = graph_outputs(self.model)
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
        if leaving[-1].row_order is not None:
            raise CompileError(f"the accelerator's output {leaving[-1].name} streams in another order than the "
                               f"model's tensor of shape {leaving[-1].shape} (a layout op read in stream order); legal: "
                               f"an output in its own order")
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
                shift = shift_after(model, node, dtype, scale, qmin, levels)
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
        while end not in graph_outputs(self.model):
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
        nodes, quantizer, after = chain_from(self.model, node)
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


def _prune(graph):
    """``graph`` without the nodes whose outputs never reach the graph output."""
    needed, kept = {graph.output}, []
    for node in reversed(graph.nodes):
        if needed & set(node.outputs):
            kept.append(node)
            needed |= set(node.inputs)
    graph.nodes = kept[::-1]
    return graph.check()

