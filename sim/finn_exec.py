"""numpy executors of FINN's hardware-layer ONNX (what FINN's ``step_convert_to_hw`` /
``step_specialize_layers`` write): the golden reference for such a model, which qonnx's ``execute_onnx``
cannot run (FINN's custom ops execute only inside FINN).

Each executor follows FINN's documented semantics (its ``execute_node`` in python mode, and
reference/finn-conventions.md) on the *normal* (unfolded) tensors, NHWC for feature maps, written from
those semantics alone (it shares no code with the hardware layers in ``layers`` / ``swg``; FINN's older op
names are the ones the ops declare, :func:`canonical`):

- MVAU: ``acc = x @ W`` with W of shape (MW, MH); in ``binaryXnorMode`` (or BIPOLAR x BIPOLAR) the
  XNOR-popcount ``(xb @ wb + MW) / 2`` of the operands as +-1 (a BINARY 0 is -1); then, unless
  ``noActivation``, multi-thresholding ``out = ActVal + #{i: acc >= T[c, i]}`` (BIPOLAR output:
  ``2 * count - 1``). VVAU: the same per channel on its (kh, kw, C) window.
- Thresholding: the multi-thresholding above on the last axis.
- ConvolutionInputGenerator: im2col, each output pixel's window in (kh, kw, C) order (no padding).
- FMPadding: zeros, [top, left, bottom, right]. FMPadding_Pixel: Stride - 1 zero pixels between the input
  pixels, input pixel (y, x) at (y * sy, x * sx). StreamingMaxPool: max over PoolDim windows (stride =
  PoolDim). GlobalAccPool: sum over H, W. AddStreams: sum. DuplicateStreams: copies. ChannelwiseOp:
  ``Func`` (add, mul, cmp_le, cmp_ge) with one parameter per channel. StreamingConcat: concat on the
  channels. LabelSelect: the K largest indices, larger first, ties to the lower index (ONNX TopK).
- UpsampleNearestNeighbour: nearest by the integer scale round(OFMDim / IFMDim) (FINN runs ONNX Resize).
- StreamingDataWidthConverter, StreamingFIFO: the identity.

Nodes outside FINN's fpgadataflow domains (the host's Transpose, Mul, TopK ... around a dataflow
partition) run through onnx's reference evaluator (qonnx's custom ops through qonnx).
"""

import functools

import numpy as np
import onnx
from onnx import helper
from qonnx.core.datatype import DataType

__all__ = ["FINN_DOMAIN", "EXECUTORS", "canonical", "is_finn_node", "execute_finn_hw", "normal_shapes"]

FINN_DOMAIN = "finn.custom_op.fpgadataflow"


def is_finn_node(node):
    """A FINN hardware layer: domain finn.custom_op.fpgadataflow[.hls|.rtl], or FINN <= 0.4's domain
    ``finn`` with the attribute backend=fpgadataflow."""
    if node.domain.startswith(FINN_DOMAIN):
        return True
    return node.domain == "finn" and any(a.name == "backend" and a.s == b"fpgadataflow" for a in node.attribute)


def canonical(op_type):
    """FINN op type of any generation (``MVAU_hls``, ``MatrixVectorActivation``, ``StreamingFCLayer_Batch``) ->
    the name its executor is listed under. FINN's older names are the ones the ops declare
    (:attr:`layers.op.Op.old_names`: one place for them); executors follow FINN's semantics alone."""
    for suffix in ("_hls", "_rtl"):
        if op_type.endswith(suffix):
            op_type = op_type[:-len(suffix)]
    return {old: op.op_type for op in _ops().values() for old in op.old_names}.get(op_type, op_type)


@functools.cache
def _ops():
    """The op registry (every op ``layers`` and ``swg`` declare, and plug-ins registered since), loaded when
    first asked: the executors themselves use nothing of the layers."""
    import layers
    import swg
    from layers.op import discover
    return discover(layers, swg)


def attrs_of(node):
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def _dtype(attrs, *names, default=None):
    for name in names:
        if name in attrs:
            return DataType[attrs[name]]
    return default


def _pair(v):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return (int(v[0]), int(v[-1])) if len(v) <= 2 else tuple(int(x) for x in v)


def _multithreshold(acc, thresholds, out_dtype, act_val):
    """FINN's MultiThreshold on the last axis: count of thresholds <= value (ascending per channel)."""
    t = np.asarray(thresholds, dtype=np.float64)
    channels = acc.shape[-1]
    if t.shape[0] == 1:
        t = np.broadcast_to(t, (channels, t.shape[1]))
    count = (acc[..., :, None] >= t).sum(axis=-1).astype(np.float64)
    if out_dtype == DataType["BIPOLAR"]:
        return 2 * count - 1
    return count + act_val


def _bipolar(x, dtype):
    """1-bit operands as +-1: BINARY 0/1 -> -1/+1; BIPOLAR already is."""
    return 2 * x - 1 if dtype == DataType["BINARY"] else x


def _mvau(node, a, ins):
    x, w = ins[0].astype(np.float64), ins[1].astype(np.float64)
    idt, wdt = _dtype(a, "inputDataType"), _dtype(a, "weightDataType")
    bipolar = DataType["BIPOLAR"]
    if a.get("binaryXnorMode", 0) or (idt == bipolar and wdt == bipolar):
        acc = (_bipolar(x, idt) @ _bipolar(w, wdt) + w.shape[0]) / 2
    else:
        acc = x @ w
    if a.get("noActivation", 0) or len(ins) < 3:
        return acc
    return _multithreshold(acc, ins[2], _dtype(a, "outputDataType"), a.get("ActVal", 0))


def _vvau(node, a, ins):
    x, w = ins[0].astype(np.float64), ins[1].astype(np.float64)
    kh, kw = _pair(a["Kernel"])
    channels = int(a["Channels"])
    n, h, wd, _ = x.shape
    x = x.reshape(n, h, wd, kh * kw, channels)
    w = w.reshape(channels, kh * kw)
    idt, wdt = _dtype(a, "inputDataType"), _dtype(a, "weightDataType")
    bipolar = DataType["BIPOLAR"]
    if a.get("binaryXnorMode", 0) or (idt == bipolar and wdt == bipolar):
        acc = (np.einsum("nhwkc,ck->nhwc", _bipolar(x, idt), _bipolar(w, wdt)) + kh * kw) / 2
    else:
        acc = np.einsum("nhwkc,ck->nhwc", x, w)
    if a.get("noActivation", 0) or len(ins) < 3:
        return acc
    return _multithreshold(acc, ins[2], _dtype(a, "outputDataType"), a.get("ActVal", 0))


def _thresholding(node, a, ins):
    return _multithreshold(ins[0].astype(np.float64), ins[1], _dtype(a, "outputDataType"), a.get("ActVal", 0))


def _swg(node, a, ins):
    x = ins[0]
    n, h, w, c = x.shape
    kh, kw = _pair(a["ConvKernelDim"])
    sh, sw = _pair(a.get("Stride", 1))
    dh, dw = _pair(a.get("Dilation", 1))
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
    out = np.empty((n, oh, ow, kh * kw * c), dtype=x.dtype)
    for y in range(oh):
        for xx in range(ow):
            win = x[:, y * sh:y * sh + dh * (kh - 1) + 1:dh, xx * sw:xx * sw + dw * (kw - 1) + 1:dw, :]
            out[:, y, xx, :] = win.reshape(n, -1)
    return out


def _fmpadding(node, a, ins):
    top, left, bottom, right = (int(p) for p in a["Padding"])
    return np.pad(ins[0], ((0, 0), (top, bottom), (left, right), (0, 0)))


def _fmpadding_pixel(node, a, ins):
    x = ins[0]
    (sy, sx), (n, h, w, c) = _pair(a["Stride"]), x.shape
    out = np.zeros((n, (h - 1) * sy + 1, (w - 1) * sx + 1, c), dtype=x.dtype)
    for y in range(h):
        for xx in range(w):
            out[:, y * sy, xx * sx, :] = x[:, y, xx, :]
    return out


def _maxpool(node, a, ins):
    x = ins[0].astype(np.float64)
    n, h, w, c = x.shape
    ph, pw = _pair(a["PoolDim"])
    if a.get("CeilMode", 0):
        oh, ow = -(-h // ph), -(-w // pw)
        x = np.pad(x, ((0, 0), (0, oh * ph - h), (0, ow * pw - w), (0, 0)), constant_values=-np.inf)
    else:
        oh, ow = h // ph, w // pw
        x = x[:, :oh * ph, :ow * pw]
    return x.reshape(n, oh, ph, ow, pw, c).max(axis=(2, 4))


def _globalaccpool(node, a, ins):
    x = ins[0].astype(np.float64)
    return x.sum(axis=tuple(range(1, x.ndim - 1)), keepdims=True)


def _channelwise(node, a, ins):
    x, p = ins[0].astype(np.float64), np.asarray(ins[1], dtype=np.float64).reshape(-1)
    func = a["Func"]
    ops = {"add": np.add, "mul": np.multiply, "cmp_le": lambda u, v: (u <= v) * 1.0,
           "cmp_ge": lambda u, v: (u >= v) * 1.0}
    return ops[func](x, p)


def _upsample(node, a, ins):
    """FINN's execute_node: ONNX Resize mode nearest by the integer scale round(OFMDim / IFMDim), on H and
    W (DimMode 0) or H only (DimMode 1); for integer scales output pixel y is input pixel y // scale."""
    scale = int(round(_pair(a["OFMDim"])[0] / _pair(a["IFMDim"])[0]))
    x = np.repeat(ins[0], scale, axis=1)
    return x if a.get("DimMode", 0) == 1 else np.repeat(x, scale, axis=2)


def _labelselect(node, a, ins):
    x = ins[0]
    k = int(a["K"])
    order = np.argsort(-x.astype(np.float64), axis=-1, kind="stable")
    return order[..., :k].astype(np.float64)


EXECUTORS = {
    "MVAU": _mvau, "VVAU": _vvau, "Thresholding": _thresholding, "ConvolutionInputGenerator": _swg,
    "FMPadding": _fmpadding, "FMPadding_Pixel": _fmpadding_pixel, "StreamingMaxPool": _maxpool, "GlobalAccPool": _globalaccpool,
    "ChannelwiseOp": _channelwise, "LabelSelect": _labelselect, "UpsampleNearestNeighbour": _upsample,
    "AddStreams": lambda node, a, ins: ins[0].astype(np.float64) + ins[1],
    "StreamingConcat": lambda node, a, ins: np.concatenate(ins, axis=-1),
    "DuplicateStreams": lambda node, a, ins: [ins[0]] * len(node.output),
    "StreamingDataWidthConverter": lambda node, a, ins: ins[0],
    "StreamingFIFO": lambda node, a, ins: ins[0],
}


def normal_shapes(node, a):
    """(input shape, output shape) of a FINN node, batch 1, NHWC (FINN's get_normal_*_shape), from its
    attributes alone; for a model that does not carry its tensor shapes."""
    op = canonical(node.op_type)
    vecs = [int(v) for v in a.get("numInputVectors", [1])]
    if isinstance(a.get("numInputVectors"), int):
        vecs = [1, vecs[0]] if vecs[0] > 1 else [1]
    if op == "MVAU":
        return (*vecs, int(a["MW"])), (*vecs, int(a["MH"]))
    if op == "VVAU":
        (oh, ow), (kh, kw), c = _pair(a["Dim"]), _pair(a["Kernel"]), int(a["Channels"])
        return (1, oh, ow, kh * kw * c), (1, oh, ow, c)
    if op == "ConvolutionInputGenerator":
        (h, w), (kh, kw), c = _pair(a["IFMDim"]), _pair(a["ConvKernelDim"]), int(a["IFMChannels"])
        sh, sw = _pair(a.get("Stride", 1))
        dh, dw = _pair(a.get("Dilation", 1))
        oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
        return (1, h, w, c), (1, oh, ow, kh * kw * c)
    if op == "FMPadding":
        (h, w), c = _pair(a["ImgDim"]), int(a["NumChannels"])
        top, left, bottom, right = (int(p) for p in a["Padding"])
        return (1, h, w, c), (1, h + top + bottom, w + left + right, c)
    if op == "FMPadding_Pixel":
        (h, w), (sy, sx), c = _pair(a["ImgDim"]), _pair(a["Stride"]), int(a["NumChannels"])
        return (1, h, w, c), (1, (h - 1) * sy + 1, (w - 1) * sx + 1, c)
    if op == "StreamingMaxPool":
        (h, w), (ph, pw), c = _pair(a["ImgDim"]), _pair(a["PoolDim"]), int(a["NumChannels"])
        div = (lambda u, v: -(-u // v)) if a.get("CeilMode", 0) else (lambda u, v: u // v)
        return (1, h, w, c), (1, div(h, ph), div(w, pw), c)
    if op == "GlobalAccPool":
        c = int(a["NumChannels"])
        return (*vecs, c), (1,) + (1,) * (len(vecs) - 1) + (c,)
    if op == "LabelSelect":
        return (*vecs, int(a["Labels"])), (*vecs, int(a["K"]))
    if op == "UpsampleNearestNeighbour":
        (i, _), (o, _), c = _pair(a["IFMDim"]), _pair(a["OFMDim"]), int(a["NumChannels"])
        one_d = a.get("DimMode", 0) == 1
        return (1, i, 1 if one_d else i, c), (1, o, 1 if one_d else o, c)
    if op == "StreamingConcat":
        chans = [int(c) for c in a.get("ElemsPerStream", a.get("ChannelsPerStream"))]
        return (*vecs, chans[0]), (*vecs, sum(chans))
    if "NumChannels" in a:
        c = int(a["NumChannels"])
        return (*vecs, c), (*vecs, c)
    return None, None


def execute_finn_hw(model, x):
    """Run the ONNX ``model`` (a ModelProto or qonnx ModelWrapper of FINN's hardware-layer dialect) on the
    batch ``x`` (first axis: samples of the model input, batch 1 each); the model output, stacked."""
    proto = getattr(model, "model", model)
    graph = proto.graph
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in graph.initializer}
    name, out = graph.input[0].name, graph.output[0].name
    results = []
    for sample in np.asarray(x, dtype=np.float32):
        context = dict(inits)
        context[name] = sample[None]
        for node in graph.node:
            if is_finn_node(node):
                op = canonical(node.op_type)
                if op not in EXECUTORS:
                    raise ValueError(f"node {node.name}: no executor for FINN op {node.op_type}; "
                                     f"legal: {', '.join(sorted(EXECUTORS))}")
                a = attrs_of(node)
                ins = [context[i] for i in node.input if i]
                got = EXECUTORS[op](node, a, ins)
                got = got if isinstance(got, list) else [got]
                _, oshape = normal_shapes(node, a)
                for t, v in zip(node.output, got):
                    v = np.asarray(v, dtype=np.float32)
                    if oshape is not None and op not in ("DuplicateStreams",) and v.size == int(np.prod(oshape)):
                        v = v.reshape(oshape)
                    context[t] = v
            else:
                _host_node(node, context, proto)
        results.append(context[out])
    return np.concatenate(results, axis=0)


def _host_node(node, context, proto):
    """A standard ONNX node through onnx's reference evaluator (no shapes needed); a qonnx custom op
    (MultiThreshold ...) through qonnx's own execute_node."""
    if node.domain in ("", "ai.onnx"):
        from onnx.reference import ReferenceEvaluator
        outs = ReferenceEvaluator(node).run(None, {i: context[i] for i in node.input if i})
        context.update(zip(node.output, outs))
        return
    from qonnx.custom_op.registry import getCustomOp
    getCustomOp(node).execute_node(context, proto.graph)
