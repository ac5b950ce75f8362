"""The :class:`layers.op.LoweringContext` the registry's lowering rules run with, over one model being
lowered: its state (the stream tensors, their graph wires, the hardware nodes added so far, the ONNX nodes
absorbed) and what a rule asks of it: the model's tensors and constants, weights as integer codes, new
hardware nodes, and the float ops up to the next quantizer turned into exact integer arithmetic (a dot
product's thresholds, an activation's, a sum of streams on a common grid; a dot product with no quantizer
after it carried on as a wide integer stream, as hls4ml carries it). The walk over the graph that uses it
is :mod:`rtlgen.passes.lower`."""

import warnings
from dataclasses import dataclass, replace

import numpy as np
import onnx
from qonnx.core.datatype import DataType

from layers.datapath import dtype_for_range
from rtlgen.errors import CompileError, CompileWarning
from rtlgen.ir.graph import HWNode, StreamTensor
from rtlgen.passes import exact_scales
from rtlgen.passes.exact_scales import input_scale_per_output_channel, integer_grid, power_of_two
from rtlgen.passes.float_ops import (absorbable, chain_after, chain_from, graph_outputs, per_tensor_node, run_alone,
                                     shift_after)
from rtlgen.passes.load import quantizer_output_codes
from rtlgen.passes.lowering_rules import lowerings, may_lower, rule_for, supported_ops
from rtlgen.passes.thresholds import QUANTIZERS, SHAPE_OPS, ActivationChain, channel_directions, derive_thresholds
from rtlgen.passes.weight_codes import dense_grouped_weights, fold_weight_quants, weight_scale_per_channel

__all__ = ["ModelLoweringContext", "Accumulator", "Activation", "COMPUTE_OPS", "AFFINE_OPS"]

COMPUTE_OPS = {"MatMul", "Conv"}
AFFINE_OPS = {"Add", "Sub", "Mul", "Div"}


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


class ModelLoweringContext:
    """The :class:`layers.op.LoweringContext` of one model being lowered, and the state the walk builds."""

    def __init__(self, model):
        self.model = model
        self.folded_weights = fold_weight_quants(model)
        self.nodes, self.counts = [], {}
        self.streams = {}           # model tensor -> StreamTensor, for every tensor on a hardware stream
        self.wires = {}             # model tensor -> the graph tensor carrying it (a reshape keeps the wire)
        self.done = set()           # ONNX node names absorbed into hardware
        self.cursor = None          # the wire the next added node reads

    def _name(self, op_type):
        k = self.counts.get(op_type, 0)
        self.counts[op_type] = k + 1
        return f"{op_type}_{k}"

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
        return tensor in graph_outputs(self.model)

    def run_alone(self, node, x):
        return run_alone(self.model, node, x)

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
        return weight_scale_per_channel(scale, channels, node)

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
        chain_nodes, quantizer, after = chain_after(model, out_name)
        out_shape = tuple(model.get_tensor_shape(out_name))
        if quantizer is None:
            acc = Accumulator(node, t, op_type, params, codes, wdtype, plain, chain_nodes, wscale, lo, hi, bias,
                              channel_axis)
            tail = rule_for(self, after, "tail", ()) if after is not None else None
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
        shift = shift_after(model, quantizer, dtype, s_out, qmin, levels)
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
            if rest or may_lower(reader):
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
        rounding = not all(power_of_two(s) for s in (float(t.scale), *np.ravel(acc.wscale)))
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
        scale, factors, codes_bias = integer_grid(gain, offset, reads)
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
            (_, lowering), = lowerings("bias")
            dtype = lowering.rule(self, affine or [node], StreamTensor(end, dtype, scale, shape), codes_bias) \
                .spec().output_dtype
        self.done.update(n.name for n in affine)
        rounding = not all(power_of_two(abs(float(g))) for g in (*gain, scale))
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
            axis = -1 if len(shape) == 3 else 1         # a sequence (batch, tokens, features): features last
            per_channel = np.moveaxis(full, axis, 0).reshape(shape[axis], -1)
            if shape[axis] != channels or not np.all(per_channel == per_channel[:, :1]):
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
        return per_tensor_node(self.model, node)

    def activation(self, t, node):
        """A quantizer on integer data (through elementwise ops) as thresholds, or None. A per-channel
        input scale (and a per-channel quantizer) gives per-channel thresholds."""
        if t.kind != "codes" or np.ndim(t.scale) > 1:
            return None                 # e.g. float ops after a last MatMul: the host's
        if node.op_type not in QUANTIZERS and not absorbable(self.model, node):
            return None
        chain_nodes, quantizer, _ = chain_from(self.model, node)
        if quantizer is None:
            return None
        model = self.model
        q_out = quantizer.output[0]
        out_shape = tuple(model.get_tensor_shape(q_out))
        if len(out_shape) == 4 and out_shape != t.shape or len(out_shape) == 2 and t.spatial and \
                t.shape[1] > 1 and t.shape[2] * t.shape[3] > 1:
            raise CompileError(f"node {node.name}: the ops before quantizer {quantizer.name} change the layout")
        per_tensor = np.ndim(t.scale) == 0 and all(per_tensor_node(model, n) for n in chain_nodes + [quantizer])
        sequence = len(out_shape) == 3     # (batch, tokens, features): a stream of token vectors
        channels = out_shape[-1] if sequence else out_shape[1]
        if sequence and not per_tensor:
            # name the node with the constants (a positional embedding is an Add of a (1, tokens, features) one)
            culprit = next((n for n in chain_nodes + [quantizer] if not per_tensor_node(model, n)), quantizer)
            raise CompileError(f"node {culprit.name} ({culprit.op_type}): per-channel or per-token float ops or "
                               f"quantizers on the sequence {t.name} of shape {t.shape} (up to quantizer "
                               f"{quantizer.name}) are not supported, e.g. a positional embedding; legal: per-tensor "
                               f"ones")
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
        vecs = (1, *out_shape[2:]) if spatial else tuple(out_shape[:-1]) if sequence else (1,)
        if (channel_directions(codes_of, lo, hi, eval_channels, where) < 0).any():
            return Activation(chain_nodes + [quantizer], None, dtype, None, channels, vecs, None, where, True)
        thresholds = derive_thresholds(codes_of, lo, hi, eval_channels, 0 if bipolar else qmin, levels)
        shift = shift_after(model, quantizer, dtype, s_out, qmin, levels)
        return Activation(chain_nodes + [quantizer] + shift.nodes, thresholds, shift.dtype,
                          0 if bipolar else shift.qmin, channels, vecs,
                          StreamTensor(shift.tensor, shift.dtype, shift.scale, out_shape, t.row_order), where, False)

    def sum_grid(self, a, b, where):
        return exact_scales.sum_grid(a, b, where)

    def sum_values(self, a, b, factors, dtype):
        return exact_scales.sum_values(a, b, factors, dtype)

    def common_scale(self, scales, where):
        return exact_scales.common_scale(scales, where)

    # ---- LoweringContext: messages ----
    def error(self, message):
        return CompileError(message)

    def warn(self, message):
        warnings.warn(CompileWarning(message))
