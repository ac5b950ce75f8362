"""The ``to_hw`` pass: a cleaned QONNX / FINN-ONNX model -> a chain of :class:`HWNode` plus host ops.

The walk starts at the first integer tensor (an integer-annotated graph input, or the output of the
first activation quantizer, computed on the host) and follows the data: every MatMul or Conv with
integer weights becomes an MVAU (or SWG [+ FMPadding] + MVAU/VVAU), with the float ops up to the next
quantizer turned into exact thresholds (:mod:`rtlgen.thresholds`); MaxPool becomes StreamingMaxPool; a
quantizer on integer data becomes Thresholding; a final TopK after a monotone per-tensor chain becomes
LabelSelect. Where the walk stops, the rest of the graph runs on the host: allowed at the graph's edge,
an error naming the node if hardware work would follow it.

Stream layout: 4D tensors (NCHW in the model) stream as NHWC, channel fastest; a flatten of such a
tensor is absorbed by permuting the rows of the MatMul that consumes it.
"""

from dataclasses import dataclass, field

import numpy as np
import onnx
from qonnx.core.datatype import DataType

from layers.datapath import dtype_for_range
from layers.mvau import MVAUSpec
from rtlgen.frontend import CompileError, quantizer_output_codes
from rtlgen.hwgraph import HWNode
from rtlgen.thresholds import (ELEMENTWISE_OPS, QUANTIZERS, SHAPE_OPS, ActivationChain, channel_directions,
                               derive_thresholds)

__all__ = ["StreamTensor", "Dataflow", "lower"]

COMPUTE_OPS = {"MatMul", "Conv"}
MAX_TOPK_CHECK = 1 << 20            # accumulator values checked one by one to absorb a chain into TopK


@dataclass
class StreamTensor:
    """An integer tensor on a hardware stream: real value = scale * code.

    ``shape`` is the model's (logical) shape; 4D tensors stream NHWC. ``row_order`` (after a flatten of
    a feature map) maps stream position -> logical flat index. ``scale`` is a number, or (C,) per channel
    for an accelerator output that feeds host ops.
    """
    name: str
    dtype: DataType
    scale: object
    shape: tuple
    row_order: np.ndarray = None
    kind: str = "codes"             # "codes", or "indices" (LabelSelect output: ints, no scale)
    offset: int = 0                 # real = scale * (gain * code + offset): xnor popcounts give
    gain: int = 1                   # the bipolar dot product as 2 * popcount - MW
    rounding: bool = False          # the model computes this tensor as a float32 dot product with scales
                                    # that are not powers of two: equal to scale * code only up to rounding

    @property
    def spatial(self):
        return len(self.shape) == 4


@dataclass
class Dataflow:
    """The lowered network: hardware chain ``nodes`` between ``input`` and ``output`` stream tensors, and
    the model's own nodes that run on the host before and after it."""
    model: object
    nodes: list
    input: StreamTensor
    output: StreamTensor
    host_pre: list = field(default_factory=list)       # ONNX node names
    host_post: list = field(default_factory=list)


def lower(model):
    """Lower a model from :func:`rtlgen.frontend.load_model` into a :class:`Dataflow`."""
    return _Lowering(model).run()


class _Lowering:
    def __init__(self, model):
        self.model = model
        self.weights = _fold_weight_quants(model)
        self.nodes, self.counts = [], {}

    # ---- walk ----
    def run(self):
        start, pre = self._accelerator_input()
        t = start
        while True:
            consumers = self.model.find_consumers(t.name) or []
            if t.name in self._graph_outputs() or not consumers:
                break
            if len(consumers) > 1:
                raise CompileError(f"tensor {t.name} feeds {len(consumers)} nodes "
                                   f"({', '.join(c.name for c in consumers)}); branching graphs (residuals) "
                                   f"are not supported yet")
            node = consumers[0]
            step = {"MatMul": self._matmul, "Conv": self._conv, "MaxPool": self._maxpool,
                    "AveragePool": self._global_pool, "GlobalAveragePool": self._global_pool}.get(node.op_type)
            if node.op_type in SHAPE_OPS:
                t = self._reshape(t, node)
            elif step is not None:
                t = step(t, node)
            elif node.op_type in ELEMENTWISE_OPS:
                new = self._thresholding(t, node)
                if new is None:
                    break
                t = new
            else:
                break
        if not self.nodes:
            raise CompileError("nothing to put in hardware: no MatMul, Conv, MaxPool or quantizer on integer "
                               "data follows the model's input quantizer")
        post = self._host_post(t)
        return Dataflow(self.model, self.nodes, start, t, pre, post)

    def _graph_outputs(self):
        return {o.name for o in self.model.graph.output}

    def _name(self, op_type):
        k = self.counts.get(op_type, 0)
        self.counts[op_type] = k + 1
        return f"{op_type}_{k}"

    def _add(self, op_type, params, sources):
        node = HWNode(self._name(op_type), op_type, params, sources=tuple(n.name for n in sources))
        node.folding = {a: 1 for a in ("PE", "SIMD") if a in node.kind.folding_attrs}
        node.spec()         # validate now: errors name the ONNX nodes, not a later pass
        self.nodes.append(node)
        return node

    # ---- the accelerator's input ----
    def _accelerator_input(self):
        model = self.model
        name = model.graph.input[0].name
        shape = tuple(model.get_tensor_shape(name))
        dtype = model.get_tensor_datatype(name)
        if dtype.is_integer():
            return StreamTensor(name, dtype, 1.0, shape), []
        # float input: the host runs everything up to and including the first activation quantizer
        t, pre = name, []
        while True:
            consumers = model.find_consumers(t) or []
            if len(consumers) != 1:
                raise CompileError(f"the float input {name} never reaches an activation quantizer "
                                   f"(Quant, BipolarQuant, MultiThreshold) on a single path; the hardware "
                                   f"needs integer data")
            node = consumers[0]
            pre.append(node.name)
            if node.op_type in COMPUTE_OPS:
                raise CompileError(f"node {node.name} ({node.op_type}) works on float (unquantized) data: its "
                                   f"input is not the output of a Quant, BipolarQuant or MultiThreshold")
            if node.op_type in QUANTIZERS:
                dtype, scale, _, _ = quantizer_output_codes(model, node)
                out = node.output[0]
                return StreamTensor(out, dtype, scale, tuple(model.get_tensor_shape(out))), pre
            t = node.output[0]

    # ---- layers ----
    def _reshape(self, t, node):
        out_shape = tuple(self.model.get_tensor_shape(node.output[0]))
        if t.spatial and len(out_shape) != 4:
            c, h, w = t.shape[1:]
            order = None
            if c > 1 and h * w > 1:      # stream (h, w, c) -> logical flat (c, h, w)
                order = np.arange(c * h * w).reshape(c, h, w).transpose(1, 2, 0).reshape(-1)
            return StreamTensor(node.output[0], t.dtype, t.scale, out_shape, order, t.kind)
        if len(out_shape) == 4 and (not t.spatial or out_shape != t.shape):
            raise CompileError(f"node {node.name} ({node.op_type}) reshapes {t.shape} into the feature map "
                               f"{out_shape}; only flattening feature maps is supported")
        return StreamTensor(node.output[0], t.dtype, t.scale, out_shape, t.row_order, t.kind)

    def _weights_of(self, node, index):
        name = node.input[index]
        if name in self.weights:
            return self.weights[name]
        value = self.model.get_initializer(name)
        dtype = self.model.get_tensor_datatype(name)
        if value is None:
            raise CompileError(f"node {node.name} ({node.op_type}): its weights {name} are not constant")
        if not dtype.is_integer():
            raise CompileError(f"node {node.name} ({node.op_type}) has float (unquantized) weights {name}; "
                               f"quantize them (Quant, BipolarQuant) or annotate an integer datatype")
        return np.asarray(value), np.ones(1), dtype

    def _check_codes(self, t, node):
        if t.kind != "codes" or np.ndim(t.scale) != 0:
            raise CompileError(f"node {node.name} ({node.op_type}) needs per-tensor quantized input")

    def _matmul(self, t, node):
        self._check_codes(t, node)
        if node.input[0] != t.name:
            raise CompileError(f"node {node.name} (MatMul): the activation must be the first input")
        codes, wscale, wdtype = self._weights_of(node, 1)
        if codes.ndim != 2:
            raise CompileError(f"node {node.name} (MatMul): weights must be 2D, not {codes.shape}")
        if t.row_order is not None:
            codes = codes[t.row_order, :]
        mw, mh = codes.shape
        vecs = tuple(t.shape[:-1]) if len(t.shape) > 2 else (1,)
        return self._dot_product(t, node, "MVAU", codes, _per_channel(wscale, mh, node), wdtype,
                                 dict(mw=mw, mh=mh, num_input_vectors=vecs), spatial=False, bias=None)

    def _conv(self, t, node):
        self._check_codes(t, node)
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        codes, wscale, wdtype = self._weights_of(node, 1)
        oc, icg, kh, kw = codes.shape
        c, h, w = t.shape[1:]
        group = attrs.get("group", 1)
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
        strides = tuple(attrs.get("strides", [1, 1]))
        dil = tuple(attrs.get("dilations", [1, 1]))
        if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            raise CompileError(f"node {node.name} (Conv): auto_pad is not supported; legal: explicit pads")
        depthwise = group > 1
        if depthwise and not (group == c == oc and icg == 1):
            raise CompileError(f"node {node.name} (Conv): group={group} is not supported; legal: 1, or "
                               f"depthwise (group = input channels = output channels)")
        bias = None
        if len(node.input) > 2 and node.input[2]:
            bias = self.model.get_initializer(node.input[2])
            if bias is None:
                raise CompileError(f"node {node.name} (Conv): the bias must be a constant")
        if any(pads):
            if t.dtype == DataType["BIPOLAR"]:
                raise CompileError(f"node {node.name} (Conv): zero padding of BIPOLAR data has no code for 0; "
                                   f"legal: pads=0 for bipolar inputs")
            self._add("FMPadding", dict(img_dim=(h, w), padding=(pads[0], pads[1], pads[2], pads[3]),
                                        num_channels=c, dtype=t.dtype), [node])
            h, w = h + pads[0] + pads[2], w + pads[1] + pads[3]
        swg = self._add("ConvolutionInputGenerator",
                        dict(ifm_dim=(h, w), ifm_channels=c, kernel=(kh, kw), input_dtype=t.dtype, stride=strides,
                             dilation=dil, depthwise=depthwise), [node])
        ofm = swg.spec().ofm_dim
        wscale = _per_channel(wscale, oc, node)
        if depthwise:
            return self._dot_product(t, node, "VVAU", codes, wscale, wdtype,
                                     dict(channels=c, kernel=(kh, kw), dim=ofm), spatial=True, bias=bias)
        matrix = codes.transpose(2, 3, 1, 0).reshape(kh * kw * c, oc)     # rows (ky, kx, c): SWG order
        return self._dot_product(t, node, "MVAU", matrix, wscale, wdtype,
                                 dict(mw=kh * kw * c, mh=oc, num_input_vectors=(1, *ofm)), spatial=True, bias=bias)

    def _dot_product(self, t, node, op_type, codes, wscale, wdtype, geometry, *, spatial, bias):
        """MVAU/VVAU for ``node`` and the elementwise chain behind it, up to its quantizer if any."""
        model, out_name = self.model, node.output[0]
        channels = codes.shape[0] if op_type == "VVAU" else codes.shape[1]
        base = dict(geometry, input_dtype=t.dtype, weight_dtype=wdtype, weights=codes, pe=1, simd=1)
        plain = (MVAUSpec if op_type == "MVAU" else _vvau_spec())(**base)
        lo, hi = plain.acc_range()
        in_elems = plain.in_elems
        dot = (lambda acc: 2 * acc - in_elems) if plain.xnor else (lambda acc: acc)
        chain_nodes, quantizer, after = self._chain(out_name)
        out_shape = tuple(model.get_tensor_shape(out_name))
        if quantizer is None:
            topk = self._labelselect(t, node, op_type, base, chain_nodes, after, wscale, plain, lo, hi, bias)
            if topk is not None:
                return topk
            return self._no_activation(t, node, op_type, base, wscale, out_name, out_shape, lo, hi, bias)
        dtype, s_out, qmin, levels = quantizer_output_codes(model, quantizer)
        chain = ActivationChain(model, chain_nodes + [quantizer], out_name, quantizer.output[0], channels,
                                spatial, extra_bias=bias)
        real_scale = float(t.scale) * wscale

        def codes_of(acc, sign):
            return np.round(chain(real_scale[None, :] * sign[None, :] * dot(acc)) / s_out).astype(np.int64)

        ones = np.ones(channels)
        dlo, dhi = (-in_elems, in_elems) if plain.xnor else (lo, hi)
        sign = channel_directions(lambda d: codes_of(d if not plain.xnor else (d + in_elems) // 2, ones),
                                  dlo, dhi, channels, f"node {node.name} ({node.op_type})")
        # a decreasing channel gets its weight column negated (bipolar weights stay bipolar)
        weights = codes * (sign[:, None, None, None] if op_type == "VVAU" else sign[None, :])
        wdtype_hw = wdtype if wdtype == DataType["BIPOLAR"] or (sign > 0).all() else \
            dtype_for_range(int(weights.min()), int(weights.max()))
        flipped = dict(base, weights=weights, weight_dtype=wdtype_hw)
        spec = (MVAUSpec if op_type == "MVAU" else _vvau_spec())(**flipped)
        hlo, hhi = spec.acc_range()
        bipolar = dtype == DataType["BIPOLAR"]
        thresholds = derive_thresholds(lambda acc: codes_of(acc, sign.astype(np.float64)), hlo, hhi, channels,
                                       0 if bipolar else qmin, levels) if not bipolar else \
            derive_thresholds(lambda acc: (codes_of(acc, sign.astype(np.float64)) + 1) // 2, hlo, hhi, channels,
                              0, 1)
        params = dict(flipped, thresholds=thresholds, output_dtype=dtype, act_val=0 if bipolar else qmin)
        params.pop("pe"), params.pop("simd")
        self._add(op_type, params, [node] + chain_nodes + [quantizer])
        q_out = quantizer.output[0]
        return StreamTensor(q_out, dtype, s_out, tuple(model.get_tensor_shape(q_out)))

    def _no_activation(self, t, node, op_type, base, wscale, out_name, out_shape, lo, hi, bias, odt=None):
        if bias is not None:
            raise CompileError(f"node {node.name} ({node.op_type}): a biased convolution without a quantizer "
                               f"after it is not supported")
        params = dict(base, output_dtype=odt)
        params.pop("pe"), params.pop("simd")
        self._add(op_type, params, [node])
        spec = self.nodes[-1].spec()
        xnor = dict(gain=2, offset=-spec.in_elems) if spec.xnor else {}
        rounding = not all(_power_of_two(s) for s in (float(t.scale), *np.ravel(wscale)))
        return StreamTensor(out_name, spec.output_dtype, float(t.scale) * wscale, out_shape, rounding=rounding,
                            **xnor)

    def _labelselect(self, t, node, op_type, base, chain_nodes, after, wscale, plain, lo, hi, bias):
        """MVAU (no activation) + LabelSelect when the chain ends in a TopK it cannot reorder."""
        model = self.model
        if after is None or after.op_type != "TopK" or op_type != "MVAU" or bias is not None:
            return None
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in after.attribute}
        k = model.get_initializer(after.input[1])
        values_used = model.find_consumers(after.output[0]) or after.output[0] in self._graph_outputs()
        per_tensor = np.ptp(wscale) == 0
        if (attrs.get("largest", 1) != 1 or attrs.get("axis", -1) not in (-1, 1) or k is None or values_used
                or not per_tensor or hi - lo > MAX_TOPK_CHECK or len(after.output) < 2):
            return None
        acc = np.arange(lo, hi + 1)
        if chain_nodes:
            if not all(_per_tensor_node(model, n) for n in chain_nodes):
                return None
            chain = ActivationChain(model, chain_nodes, node.output[0], chain_nodes[-1].output[0], 1, False)
            values = chain(float(t.scale) * wscale[0] * acc[:, None].astype(np.float64))[:, 0]
            if not np.all(np.diff(values) > 0):
                return None          # not strictly increasing: TopK stays on the host
        odt = dtype_for_range(lo - 1, hi)       # dtype.min never reached: LabelSelect skips it
        self._no_activation(t, node, op_type, base, wscale, node.output[0], (), lo, hi, bias, odt=odt)
        self.nodes[-1].sources += tuple(n.name for n in chain_nodes)
        mh = base["mh"]
        self._add("LabelSelect", dict(labels=mh, k=int(np.asarray(k).reshape(-1)[0]), input_dtype=odt),
                  [after])
        out = after.output[1]
        return StreamTensor(out, self.nodes[-1].spec().output_dtype, 1.0, tuple(model.get_tensor_shape(out)),
                            kind="indices")

    def _maxpool(self, t, node):
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        kernel = tuple(attrs["kernel_shape"])
        strides = tuple(attrs.get("strides", kernel))
        if strides != kernel or any(attrs.get("pads", [0])) or attrs.get("ceil_mode", 0) or \
                any(d != 1 for d in attrs.get("dilations", [1])) or not t.spatial:
            raise CompileError(f"node {node.name} (MaxPool): only kernel = stride, no padding, no ceil mode, "
                               f"no dilation on a feature map is supported; got kernel {kernel}, strides {strides}")
        c, h, w = t.shape[1:]
        self._add("StreamingMaxPool", dict(img_dim=(h, w), pool_dim=kernel, num_channels=c, dtype=t.dtype), [node])
        out = node.output[0]
        return StreamTensor(out, t.dtype, t.scale, tuple(self.model.get_tensor_shape(out)))

    def _global_pool(self, t, node):
        """An average over the whole feature map -> GlobalAccPool: the stream carries the per-channel sum,
        so the average is that code at scale / (H*W); the quantizer (e.g. Trunc) after it becomes a
        Thresholding layer on the sum."""
        c, h, w = t.shape[1:] if t.spatial else (None, None, None)
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "AveragePool":
            kernel = tuple(attrs["kernel_shape"])
            if kernel != (h, w) or any(attrs.get("pads", [0])) or attrs.get("ceil_mode", 0):
                raise CompileError(f"node {node.name} (AveragePool): only a global average (kernel = the "
                                   f"{h}x{w} feature map, no padding, no ceil mode) is supported; got kernel "
                                   f"{kernel}, pads {list(attrs.get('pads', [0, 0, 0, 0]))}")
        self._check_codes(t, node)
        if not t.spatial:
            raise CompileError(f"node {node.name} ({node.op_type}) needs a feature map (N, C, H, W), "
                               f"not shape {t.shape}")
        self._add("GlobalAccPool", dict(num_channels=c, input_dtype=t.dtype, num_input_vectors=(1, h, w)), [node])
        out = node.output[0]
        return StreamTensor(out, self.nodes[-1].spec().output_dtype, float(t.scale) / (h * w),
                            tuple(self.model.get_tensor_shape(out)))

    def _thresholding(self, t, node):
        """A quantizer on integer data (through elementwise ops): a standalone Thresholding layer."""
        if t.kind != "codes" or np.ndim(t.scale) != 0:
            return None                 # e.g. float ops after a last MatMul: the host's
        chain_nodes, quantizer, _ = self._chain(t.name)
        if quantizer is None:
            return None
        model = self.model
        q_out = quantizer.output[0]
        out_shape = tuple(model.get_tensor_shape(q_out))
        if len(out_shape) == 4 and out_shape != t.shape or len(out_shape) == 2 and t.spatial and \
                t.shape[1] > 1 and t.shape[2] * t.shape[3] > 1:
            raise CompileError(f"node {node.name}: the ops before quantizer {quantizer.name} change the layout")
        per_tensor = all(_per_tensor_node(model, n) for n in chain_nodes + [quantizer])
        channels = out_shape[1]
        eval_channels = 1 if per_tensor else channels
        spatial = len(out_shape) == 4
        chain = ActivationChain(model, chain_nodes + [quantizer], t.name, q_out, eval_channels,
                                spatial and not per_tensor)
        dtype, s_out, qmin, levels = quantizer_output_codes(model, quantizer)
        bipolar = dtype == DataType["BIPOLAR"]
        lo, hi = int(t.dtype.min()), int(t.dtype.max())

        def codes_of(x):
            codes = np.round(chain(float(t.scale) * x.astype(np.float64)) / s_out).astype(np.int64)
            return (codes + 1) // 2 if bipolar else codes

        where = f"node {quantizer.name} ({quantizer.op_type})"
        if (channel_directions(codes_of, lo, hi, eval_channels, where) < 0).any():
            raise CompileError(f"{where}: the activation decreases with its input; a standalone Thresholding "
                               f"layer needs a non-decreasing one")
        thresholds = derive_thresholds(codes_of, lo, hi, eval_channels, 0 if bipolar else qmin, levels)
        vecs = (1, *out_shape[2:]) if spatial else (1,)
        self._add("Thresholding", dict(num_channels=channels, input_dtype=t.dtype, output_dtype=dtype,
                                       thresholds=thresholds, act_val=0 if bipolar else qmin,
                                       num_input_vectors=vecs), chain_nodes + [quantizer])
        return StreamTensor(q_out, dtype, s_out, out_shape)

    def _chain(self, tensor):
        """(elementwise nodes, quantizer or None, the node that stopped the walk or None) after ``tensor``."""
        nodes = []
        while True:
            consumers = self.model.find_consumers(tensor) or []
            if len(consumers) != 1 or tensor in self._graph_outputs():
                return nodes, None, None
            node = consumers[0]
            if node.op_type in QUANTIZERS:
                return nodes, node, None
            if node.op_type not in ELEMENTWISE_OPS | SHAPE_OPS:
                return nodes, None, node
            nodes.append(node)
            tensor = node.output[0]

    # ---- the host's share ----
    def _host_post(self, t):
        """Names of the nodes after the accelerator's output; an error if hardware work is among them."""
        model, post, frontier = self.model, [], [t.name]
        seen = set()
        while frontier:
            name = frontier.pop()
            for node in model.find_consumers(name) or []:
                if node.name in seen:
                    continue
                seen.add(node.name)
                post.append(node.name)
                frontier.extend(node.output)
        first = next((model.get_node_from_name(n) for n in post), None)
        for name in post:
            node = model.get_node_from_name(name)
            if node.op_type in COMPUTE_OPS:
                raise CompileError(f"node {first.name} ({first.op_type}) cannot be mapped to hardware and is not "
                                   f"at the graph's edge: {node.name} ({node.op_type}) comes after it")
        return post


def _per_tensor_node(model, node):
    """True if every constant of ``node`` is one number (MultiThreshold: one row of thresholds)."""
    if node.op_type in ("Quant", "BipolarQuant"):
        return True
    consts = [model.get_initializer(i) for i in node.input[1:] if model.get_initializer(i) is not None]
    if node.op_type == "MultiThreshold":
        return np.asarray(consts[0]).shape[0] == 1
    return all(np.asarray(c).size == 1 for c in consts)


def _power_of_two(x):
    mantissa, _ = np.frexp(x)
    return x > 0 and mantissa == 0.5


def _vvau_spec():
    from layers.vvau import VVAUSpec
    return VVAUSpec


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
    from qonnx.core.onnx_exec import execute_node

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
        out_scale = _output_channel_scale(scale, real.shape)
        folded[node.output[0]] = (codes.astype(np.int64), out_scale, dtype)
        model.set_initializer(node.output[0], real.astype(np.float32))
        model.graph.node.remove(node)
    return folded


def _output_channel_scale(scale, shape):
    """The weight scale per output channel: MatMul W (MW, MH) -> axis 1; Conv W (OC, ...) -> axis 0."""
    full = np.broadcast_to(scale, shape)
    axis = 1 if len(shape) == 2 else 0
    moved = np.moveaxis(full, axis, 0).reshape(shape[axis], -1)
    if not np.all(moved == moved[:, :1]):
        raise CompileError(f"weight scale of shape {scale.shape} varies within an output channel")
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
