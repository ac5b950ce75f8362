"""The ``to_hw`` pass: a cleaned QONNX / FINN-ONNX model -> a :class:`DataflowGraph` plus host ops.

The walk starts at the first integer tensor (an integer-annotated graph input, or the output of the
first activation quantizer, computed on the host) and visits the model's nodes in topological order.
A node whose data inputs are all hardware streams is matched: every MatMul or Conv with integer weights
becomes an MVAU (or SWG [+ FMPadding] + MVAU/VVAU), with the float ops up to the next quantizer turned
into exact thresholds (:mod:`rtlgen.passes.thresholds`); MaxPool becomes StreamingMaxPool; a quantizer on
integer data becomes Thresholding; an Add of two streams becomes AddStreams (with a ChannelwiseOp on a
branch whose codes need rescaling onto the common scale); a channel Concat becomes StreamingConcat; a
final TopK after a monotone per-tensor chain becomes LabelSelect. A tensor read by several nodes is an
ordinary edge with several consumers (:func:`rtlgen.passes.insert_duplicates` adds the fan-out later).
What cannot be matched runs on the host: allowed at the graph's edge, an error naming the node if
hardware work would follow it.

Stream layout: 4D tensors (NCHW in the model) stream as NHWC, channel fastest; a flatten of such a
tensor is absorbed by permuting the rows of the MatMul that consumes it.
"""

import copy
import warnings
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import onnx
from qonnx.core.datatype import DataType

from layers.datapath import dtype_for_range
from layers.mvau import MVAUSpec
from rtlgen.passes.load import INPUT_DTYPE_HINT, CompileError, CompileWarning, quantizer_output_codes, user_names
from rtlgen.ir.graph import DataflowGraph, HWNode, StreamTensor
from rtlgen.passes.thresholds import (ELEMENTWISE_OPS, QUANTIZERS, SHAPE_OPS, ActivationChain, channel_directions,
                               derive_thresholds)

__all__ = ["StreamTensor", "lower"]

COMPUTE_OPS = {"MatMul", "Conv"}
MAX_TOPK_CHECK = 1 << 20            # accumulator values checked one by one to absorb a chain into TopK
MAX_SUM_CHECK = 1 << 22             # code pairs checked one by one to find a residual sum exact
MAX_AFFINE_CHECK = 1 << 16         # input codes checked one by one to absorb float ops before a MatMul
AFFINE_OPS = {"Add", "Sub", "Mul", "Div"}
MAX_RESCALE = 1 << 8                # largest integer factor a branch's codes are multiplied by


def lower(model):
    """Lower a model from :func:`rtlgen.passes.load.load_model` into a :class:`DataflowGraph` (the model
    itself is not changed; the graph keeps a copy with the weight quantizers folded)."""
    from qonnx.core.modelwrapper import ModelWrapper
    try:
        return _Lowering(ModelWrapper(copy.deepcopy(model.model))).run()
    except CompileError as exc:         # named as in the user's model, not as qonnx renamed them
        names = getattr(model, "original_names", None)
        if not names:
            raise
        raise CompileError(user_names(str(exc), names)) from None


def supported_ops():
    """The ONNX ops the lowering maps to hardware, as one clause for messages."""
    quantizers = ", ".join(sorted(QUANTIZERS))
    elementwise = ", ".join(sorted(set(ELEMENTWISE_OPS) - set(QUANTIZERS)))
    return (f"mapped to hardware: MatMul, Gemm, Conv, MaxPool, AveragePool, GlobalAveragePool, Resize, Upsample, "
            f"TopK (at the end), Add and Concat of two streams, quantizers ({quantizers}), the float ops up to a "
            f"quantizer ({elementwise}) and reshapes ({', '.join(sorted(SHAPE_OPS))}); any other op runs on the "
            f"host, before the first hardware layer or after the last")


class _Lowering:
    def __init__(self, model):
        self.model = model
        self.weights = _fold_weight_quants(model)
        self.nodes, self.counts = [], {}
        self.stream = {}            # model tensor -> StreamTensor, for every tensor on a hardware stream
        self.wire = {}              # model tensor -> the graph tensor carrying it (a reshape keeps the wire)
        self.done = set()           # ONNX node names absorbed into hardware
        self.cursor = None          # the wire the next added node reads

    # ---- walk ----
    def run(self):
        start, pre = self._accelerator_input()
        self.stream[start.name], self.wire[start.name] = start, start.name
        self.done |= set(pre)
        host, host_tensors = [], set()
        for node in list(self.model.graph.node):
            if node.name in self.done:
                continue
            data = [i for i in node.input if i in self.stream or i in host_tensors]
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
                self.stream[t.name] = t
        if not self.nodes:
            raise CompileError("nothing to put in hardware: no MatMul, Conv, MaxPool or quantizer on integer "
                               "data follows the model's input quantizer")
        self._check_host(host)
        out = self._accelerator_output(host)
        graph = DataflowGraph(self.nodes, start.name, self.wire[out.name], model=self.model, host_pre=pre,
                              host_post=[n.name for n in host])
        for name, t in self.stream.items():
            graph.tensors.setdefault(self.wire[name], t)
        graph.tensors[graph.output] = out
        graph.tensors[graph.input] = start
        return _prune(graph)

    def _match(self, node):
        """The StreamTensors ``node`` (and what it absorbs) produces in hardware, or None (host)."""
        streams = [i for i in node.input if i in self.stream]
        if node.op_type == "Add" and len(streams) == 2:
            return [self._join_add(node)]
        if node.op_type == "Concat" and len(streams) == len(node.input):
            return [self._join_concat(node)]
        if len(streams) != 1:
            return None
        t = self.stream[streams[0]]
        self.cursor = self.wire[t.name]
        step = {"MatMul": self._matmul, "Conv": self._conv, "MaxPool": self._maxpool,
                "AveragePool": self._global_pool, "GlobalAveragePool": self._global_pool,
                "Resize": self._resize, "Upsample": self._resize}.get(node.op_type)
        if t.values is not None and node.op_type not in SHAPE_OPS | QUANTIZERS | ELEMENTWISE_OPS:
            raise CompileError(f"node {node.name} ({node.op_type}) reads {t.name}, a residual sum of branches with "
                               f"unrelated float scales, which the accelerator holds on an order-preserving integer "
                               f"grid; only a quantizer may read it (legal: quantize the sum first)")
        if t.bias is not None and node.op_type not in SHAPE_OPS | {"MatMul"}:
            raise CompileError(f"node {node.name} ({node.op_type}) reads {t.name}, the input moved by float ops "
                               f"(scale * code + offset); only a MatMul can absorb them; put a quantizer first")
        if node.op_type in SHAPE_OPS:
            new = self._reshape(t, node)
            self.done.add(node.name)
            self.wire[new.name] = self.wire[t.name]
            return [new]
        if step is not None:
            new = step(t, node)
        elif node.op_type in ELEMENTWISE_OPS:
            moved = self._input_affine(t, node)
            if moved is not None:
                self.wire[moved.name] = self.wire[t.name]
                return [moved]
            new = self._thresholding(t, node)
        else:
            new = None
        if new is None:
            return None
        self.nodes[-1].outputs = (new.name,)         # the last node added writes the model tensor
        self.wire[new.name] = new.name
        return [new]

    def _graph_outputs(self):
        return {o.name for o in self.model.graph.output}

    def _name(self, op_type):
        k = self.counts.get(op_type, 0)
        self.counts[op_type] = k + 1
        return f"{op_type}_{k}"

    def _add(self, op_type, params, sources, inputs=None):
        """A new node reading ``inputs`` (default: the cursor) and writing a fresh wire, now the cursor."""
        name = self._name(op_type)
        inputs = tuple(inputs) if inputs is not None else (self.cursor,)
        node = HWNode(name, op_type, params, sources=tuple(n.name for n in sources), inputs=inputs,
                      outputs=(f"{name}_out",))
        node.folding = {a: 1 for a in ("PE", "SIMD") if a in node.op.folding}
        if "mem_mode" in node.op.folding:
            # Weights the compiler never rewrites at run time: read in place (internal_embedded), which
            # saves the weight stream's skid buffer (~1 LUT and 3 FF per weight bit) of internal_decoupled,
            # FINN's default. A folding file's mem_mode still overrides it.
            node.folding["mem_mode"] = "internal_embedded"
        try:
            node.spec()     # validate now: errors name the ONNX nodes, not a later pass
        except ValueError as exc:
            where = ", ".join(f"{n.name} ({n.op_type})" for n in sources[:1])
            raise CompileError(f"node {where} as {op_type}: {str(exc).split(': ', 1)[-1]}") from None
        self.nodes.append(node)
        self.done.update(n.name for n in sources)
        self.cursor = node.outputs[0]
        return node

    def _check_host(self, host):
        """Host nodes after the accelerator must not include compute that hardware should have done."""
        if not host:
            return
        first = host[0]
        for node in host:
            if node.op_type in COMPUTE_OPS:
                raise CompileError(f"node {first.name} ({first.op_type}) cannot be mapped to hardware and is not "
                                   f"at the graph's edge: {node.name} ({node.op_type}) comes after it; "
                                   f"{supported_ops()}")

    def _accelerator_output(self, host):
        """The one stream tensor that leaves the accelerator (read by the host, or a graph output)."""
        outs = self._graph_outputs()
        leaving = []
        for name, t in self.stream.items():
            read_by_host = any(name in n.input for n in host)
            if (read_by_host or name in outs) and t not in leaving:
                leaving.append(t)
        wires = {self.wire[t.name] for t in leaving}
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
        if dtype.is_integer():
            return StreamTensor(name, dtype, 1.0, shape), []
        if dtype.is_fixed_point():      # --input-dtype FIXED<w,i>: w-bit signed codes at scale 2^-(w-i)
            codes = DataType[f"INT{dtype.bitwidth()}"]
            return StreamTensor(name, codes, float(dtype.scale_factor()), shape, fixed=dtype.name), []
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
                pre.extend(shift.names)
                return StreamTensor(shift.tensor, shift.dtype, shift.scale,
                                    tuple(model.get_tensor_shape(shift.tensor))), pre
            t = node.output[0]

    # ---- layers ----
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
        mw, mh = codes.shape
        wscale = _per_channel(wscale, mh, node)
        # an offset on the input adds offset @ W to every output channel: a bias for the thresholds
        bias = None if t.bias is None else np.asarray(t.bias, dtype=np.float64) @ (codes * wscale[None, :])
        if t.row_order is not None:
            codes = codes[t.row_order, :]
        vecs = tuple(t.shape[:-1]) if len(t.shape) > 2 else (1,)
        return self._dot_product(t, node, "MVAU", codes, wscale, wdtype,
                                 dict(mw=mw, mh=mh, num_input_vectors=vecs), spatial=False, bias=bias)

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
        depthwise = group > 1 and group == c == oc and icg == 1
        if group > 1 and not depthwise:
            codes = _dense_grouped_weights(codes, group, c, node)
            warnings.warn(CompileWarning(
                f"node {node.name} (Conv): group={group} of {c} input and {oc} output channels runs as a dense "
                f"convolution with block-diagonal weights ({group}x its multiply-accumulates; only group=1 and "
                f"depthwise with one output channel per input channel have their own datapath)"))
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
        shift = self._shift_after(quantizer, dtype, s_out, qmin, levels)
        params = dict(flipped, thresholds=thresholds, output_dtype=shift.dtype,
                      act_val=0 if bipolar else shift.qmin)
        params.pop("pe"), params.pop("simd")
        self._add(op_type, params, [node] + chain_nodes + [quantizer] + shift.nodes)
        return StreamTensor(shift.tensor, shift.dtype, shift.scale, tuple(model.get_tensor_shape(shift.tensor)))

    def _no_activation(self, t, node, op_type, base, wscale, out_name, out_shape, lo, hi, bias, odt=None):
        if bias is not None:
            raise CompileError(f"node {node.name} ({node.op_type}): a bias (of a convolution, or an offset on "
                               f"its input) without a quantizer after it is not supported")
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
        self.done.update(n.name for n in chain_nodes)
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

    def _resize(self, t, node):
        """Nearest-neighbour upsampling by whole factors -> UpsampleNearestNeighbour. Whatever the node's
        modes say, the node itself is run on a tensor of pixel indices and must copy each pixel sy x sx
        times (ONNX Resize's coordinate modes can shift or round differently; none of that is guessed)."""
        out_shape = tuple(self.model.get_tensor_shape(node.output[0]))
        legal = "legal: nearest-neighbour upsampling of a feature map by whole factors of H and W"
        if not t.spatial or len(out_shape) != 4 or out_shape[:2] != t.shape[:2] or \
                out_shape[2] % t.shape[2] or out_shape[3] % t.shape[3]:
            raise CompileError(f"node {node.name} ({node.op_type}) resizes {t.shape} to {out_shape}; {legal}")
        c, h, w = t.shape[1:]
        sy, sx = out_shape[2] // h, out_shape[3] // w
        index = np.arange(c * h * w, dtype=np.float32).reshape(1, c, h, w)
        if not np.array_equal(_run_alone(self.model, node, index), index.repeat(sy, 2).repeat(sx, 3)):
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            modes = ", ".join(f"{k}={v.decode() if isinstance(v, bytes) else v}" for k, v in sorted(attrs.items())
                              if k in ("mode", "coordinate_transformation_mode", "nearest_mode"))
            raise CompileError(f"node {node.name} ({node.op_type}) with {modes or 'default modes'} does not copy "
                               f"each pixel {sy} x {sx} times; {legal} (e.g. mode=nearest, "
                               f"coordinate_transformation_mode=asymmetric, nearest_mode=floor)")
        self._add("UpsampleNearestNeighbour", dict(ifm_dim=(h, w), ofm_dim=out_shape[2:], num_channels=c,
                                                   dtype=t.dtype), [node])
        return StreamTensor(node.output[0], t.dtype, t.scale, out_shape, None, t.kind)

    def _global_pool(self, t, node):
        """An average over the whole feature map -> GlobalAccPool: the stream carries the per-channel sum,
        so the average is that code at scale / (H*W); the quantizer (e.g. Trunc) after it becomes a
        Thresholding layer on the sum."""
        c, h, w = t.shape[1:] if t.spatial else (None, None, None)
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "AveragePool":
            kernel = tuple(attrs["kernel_shape"])
            if any(attrs.get("pads", [0])) or attrs.get("ceil_mode", 0):
                raise CompileError(f"node {node.name} (AveragePool): padding and ceil_mode are not supported; "
                                   f"got pads {list(attrs.get('pads', [0, 0, 0, 0]))}, ceil_mode "
                                   f"{attrs.get('ceil_mode', 0)}; legal: pads 0, ceil_mode 0")
            if kernel != (h, w):
                return self._window_average(t, node, kernel, tuple(attrs.get("strides", kernel)))
        self._check_codes(t, node)
        if not t.spatial:
            raise CompileError(f"node {node.name} ({node.op_type}) needs a feature map (N, C, H, W), "
                               f"not shape {t.shape}")
        self._add("GlobalAccPool", dict(num_channels=c, input_dtype=t.dtype, num_input_vectors=(1, h, w)), [node])
        out = node.output[0]
        return StreamTensor(out, self.nodes[-1].spec().output_dtype, float(t.scale) / (h * w),
                            tuple(self.model.get_tensor_shape(out)))

    def _window_average(self, t, node, kernel, stride):
        """A (non-global) average pool, as FINN's accumulate-pool: a depthwise SWG and a VVAU of all-one
        weights sum each window; the division by kh*kw is the weight scale, so the quantizer after
        it (and any float ops between) become the VVAU's thresholds, derived from the model's own
        float32 AveragePool as for any depthwise convolution."""
        self._check_codes(t, node)
        c, h, w = t.shape[1:]
        kh, kw = kernel
        swg = self._add("ConvolutionInputGenerator",
                        dict(ifm_dim=(h, w), ifm_channels=c, kernel=kernel, input_dtype=t.dtype, stride=stride,
                             depthwise=True), [node])
        ones = np.ones((c, 1, kh, kw), dtype=np.int64)
        wscale = np.full(c, 1.0 / (kh * kw))
        return self._dot_product(t, node, "VVAU", ones, wscale, DataType["UINT2"],
                                 dict(channels=c, kernel=kernel, dim=swg.spec().ofm_dim), spatial=True, bias=None)

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

    def _thresholding(self, t, node):
        """A quantizer on integer data (through elementwise ops): a standalone Thresholding layer."""
        if t.kind != "codes" or np.ndim(t.scale) != 0:
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
            real = t.values[x - lo] if t.values is not None else float(t.scale) * x.astype(np.float64)
            codes = np.round(chain(real) / s_out).astype(np.int64)
            return (codes + 1) // 2 if bipolar else codes

        where = f"node {quantizer.name} ({quantizer.op_type})"
        if (channel_directions(codes_of, lo, hi, eval_channels, where) < 0).any():
            raise CompileError(f"{where}: the activation decreases with its input; a standalone Thresholding "
                               f"layer needs a non-decreasing one")
        thresholds = derive_thresholds(codes_of, lo, hi, eval_channels, 0 if bipolar else qmin, levels)
        vecs = (1, *out_shape[2:]) if spatial else (1,)
        shift = self._shift_after(quantizer, dtype, s_out, qmin, levels)
        self._add("Thresholding", dict(num_channels=channels, input_dtype=t.dtype, output_dtype=shift.dtype,
                                       thresholds=thresholds, act_val=0 if bipolar else shift.qmin,
                                       num_input_vectors=vecs), chain_nodes + [quantizer] + shift.nodes)
        return StreamTensor(shift.tensor, shift.dtype, shift.scale, out_shape)

    # ---- joins: residual sums and concatenations ----
    def _join_add(self, node):
        """Add of two streams -> AddStreams on a common scale; a branch whose codes are on a coarser
        scale (or of another datatype) goes through a ChannelwiseOp multiply first. The hardware adds
        the integer codes exactly. The model adds two float32 products in float32: with float (not
        power-of-two) scales that sum is only the exact one up to rounding, so where a quantizer after
        the Add sits on a round-half-even tie, qonnx and the accelerator may pick neighbouring codes.
        ``rtlgen verify`` compares against the exact semantics (:mod:`rtlgen.check.exact`, which adds exactly
        too) and names those ties, as for the float32 dot products of MatMul and Conv."""
        where = f"node {node.name} (Add)"
        a, b = (self.stream[i] for i in node.input)
        for t in (a, b):
            self._check_join_input(t, node)
        if a.shape != b.shape:
            raise CompileError(f"{where}: both inputs must have the same shape (no broadcasting of streams), "
                               f"got {a.shape} and {b.shape}")
        try:
            s, factors = _common_scale([float(a.scale), float(b.scale)], where)
            grid = False
        except CompileError as unrelated:
            factors = _order_preserving_factors(a, b, unrelated)
            s, grid = float(a.scale) / factors[0], True
        rounding = a.rounding or b.rounding or grid or not float32_sum_is_exact(a, b, factors, s)
        ranges = [(f * int(t.dtype.min()), f * int(t.dtype.max())) for t, f in zip((a, b), factors)]
        common = dtype_for_range(min(r[0] for r in ranges), max(r[1] for r in ranges))
        channels, vecs = _channels_and_vectors(a)
        wires = [self._rescaled(t, f, common, node) for t, f in zip((a, b), factors)]
        added = self._add("AddStreams", dict(num_channels=channels, input_dtype=common, num_input_vectors=vecs),
                          [node], inputs=wires)
        added.outputs = (node.output[0],)
        self.wire[node.output[0]] = node.output[0]
        out = added.spec().output_dtype
        values = _sum_values(a, b, factors, out) if grid else None
        return StreamTensor(node.output[0], out, s, a.shape, rounding=rounding, values=values)

    def _join_concat(self, node):
        """Concat of streams along channels -> StreamingConcat on a common scale and datatype."""
        where = f"node {node.name} (Concat)"
        ins = [self.stream[i] for i in node.input]
        for t in ins:
            self._check_join_input(t, node)
        axis = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}.get("axis", 1)
        rank = len(ins[0].shape)
        if axis % rank != 1 or any(len(t.shape) != rank or t.shape[:1] + t.shape[2:] != ins[0].shape[:1] +
                                   ins[0].shape[2:] for t in ins):
            raise CompileError(f"{where}: only a concatenation along channels (axis 1) of tensors of the same "
                               f"other dimensions is supported; got axis {axis} of {[t.shape for t in ins]}")
        s, factors = _common_scale([float(t.scale) for t in ins], where)
        if any(float(np.float32(s * f)) != float(np.float32(t.scale)) for t, f in zip(ins, factors)):
            raise CompileError(f"{where}: input scales {[float(t.scale) for t in ins]} have no exact common scale")
        common = dtype_for_range(min(f * int(t.dtype.min()) for t, f in zip(ins, factors)),
                                 max(f * int(t.dtype.max()) for t, f in zip(ins, factors)))
        if all(t.dtype == ins[0].dtype for t in ins) and set(factors) == {1}:
            common = ins[0].dtype
        wires = [self._rescaled(t, f, common, node) for t, f in zip(ins, factors)]
        _, vecs = _channels_and_vectors(ins[0])
        added = self._add("StreamingConcat", dict(channels_per_stream=tuple(t.shape[1] for t in ins), dtype=common,
                                                  num_input_vectors=vecs), [node], inputs=wires)
        added.outputs = (node.output[0],)
        self.wire[node.output[0]] = node.output[0]
        shape = tuple(self.model.get_tensor_shape(node.output[0]))
        return StreamTensor(node.output[0], common, s, shape)

    def _check_join_input(self, t, node):
        if t.values is not None:
            raise CompileError(f"node {node.name} ({node.op_type}): input {t.name} is a residual sum of branches "
                               f"with unrelated float scales; quantize it before another join")
        if t.kind != "codes" or np.ndim(t.scale) != 0 or t.gain != 1 or t.offset != 0:
            raise CompileError(f"node {node.name} ({node.op_type}): input {t.name} must be a per-tensor quantized "
                               f"stream (the output of a quantizer)")
        if t.dtype == DataType["BIPOLAR"]:
            raise CompileError(f"node {node.name} ({node.op_type}): input {t.name} is BIPOLAR; joins of bipolar "
                               f"streams are not supported (legal: INTn, UINTn inputs)")
        if t.row_order is not None:
            raise CompileError(f"node {node.name} ({node.op_type}): input {t.name} is a flattened feature map; "
                               f"joins need both inputs in the same stream order")

    def _rescaled(self, t, factor, dtype, node):
        """The wire of ``t`` with its codes multiplied by ``factor`` and held as ``dtype`` (a ChannelwiseOp,
        or ``t``'s own wire when nothing changes)."""
        if factor == 1 and t.dtype == dtype:
            return self.wire[t.name]
        channels, vecs = _channels_and_vectors(t)
        func, param = ("mul", factor) if factor != 1 else ("add", 0)
        op = self._add("ChannelwiseOp", dict(func=func, num_channels=channels, input_dtype=t.dtype,
                                             param_dtype=dtype_for_range(param, param), output_dtype=dtype,
                                             params=np.full(channels, param), num_input_vectors=vecs),
                       [], inputs=(self.wire[t.name],))
        op.sources = (node.name,)
        return op.outputs[0]

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
                steps = (c if node.op_type == "Add" else -c) / scale
                if steps != round(steps):
                    break
                shift += int(round(steps))
            elif c <= 0:
                break
            else:
                scale = scale * c if node.op_type == "Mul" else scale / c
            names.append(node.name)
            nodes.append(node)
            tensor = node.output[0]
        if shift:
            dtype = dtype_for_range(qmin + shift, qmin + shift + levels)
        return _Shifted(tensor, dtype, float(scale), qmin + shift, names, nodes)

    def _absorbable(self, node):
        """An elementwise node whose other inputs are constants (not a second stream: that is a join)."""
        return all(self.model.get_initializer(i) is not None for i in node.input[1:] if i)


@dataclass
class _Shifted:
    tensor: str             # the model tensor the codes now stand for
    dtype: DataType
    scale: float
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


def _channels_and_vectors(t):
    """(channels, numInputVectors) of a stream tensor: (1, C) -> (C, (1,)); (1, C, H, W) -> (C, (1, H, W))."""
    if t.spatial:
        return t.shape[1], (1, *t.shape[2:])
    return t.shape[-1], tuple(t.shape[:-1]) if len(t.shape) > 2 else (1,)


def _common_scale(scales, where):
    """(s, factors): every scale is ``factors[k] * s`` with small positive integer factors (gcd 1)."""
    from math import gcd, lcm

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


def _pair_grid(a, b, factors):
    """Every pair of codes (ca, cb): the integer sum fa*ca + fb*cb and the exact real sum sa*ca + sb*cb."""
    ca = np.arange(int(a.dtype.min()), int(a.dtype.max()) + 1, dtype=np.int64)[:, None]
    cb = np.arange(int(b.dtype.min()), int(b.dtype.max()) + 1, dtype=np.int64)[None, :]
    x = (factors[0] * ca + factors[1] * cb).ravel()
    real = (float(np.float32(a.scale)) * ca + float(np.float32(b.scale)) * cb).ravel()
    return x, real


def _order_preserving_factors(a, b, refusal):
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
    if node.op_type in ("Quant", "BipolarQuant"):
        return True
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
    import onnxruntime as ort
    from onnx import TensorProto, helper
    from onnx.numpy_helper import from_array

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


def _vvau_spec():
    from layers.vvau import VVAUSpec
    return VVAUSpec


def _dense_grouped_weights(codes, group, channels, node):
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
