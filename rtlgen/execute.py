"""Run a dataflow graph on numpy: each layer's independent golden model (:mod:`sim.golden`) applied in
stream order, node by node in topological order. It checks lowering against qonnx without building
hardware, and it is what the RTL simulation of the same graph must equal."""

from math import prod

import numpy as np
from qonnx.core.datatype import DataType

from rtlgen.hwgraph import DataflowGraph
from sim import golden

__all__ = ["run_golden"]


def run_golden(graph, codes):
    """``codes`` (batch, elements) in the graph input's stream order -> the graph output, same form.
    ``graph`` is a :class:`DataflowGraph` (or a list of nodes, run as a chain)."""
    if not isinstance(graph, DataflowGraph):
        graph = DataflowGraph.chain(graph)
    values = {graph.input: np.asarray(codes, dtype=np.int64)}
    for node in graph.nodes:
        spec = node.spec()
        producers = graph.predecessors(node)
        ins = [_shaped(values[t], _folded_input_shape(spec, k)) for k, t in enumerate(node.inputs)]
        producer = producers[0].spec() if producers and producers[0] is not None else None
        outs = _GOLDEN[node.op_type](spec, ins, producer)
        outs = outs if isinstance(outs, list) else [outs] * len(node.outputs)
        for t, x in zip(node.outputs, outs):
            values[t] = x.reshape(x.shape[0], -1)
    return values[graph.output]


def _folded_input_shape(spec, k):
    shape = spec.folded_input_shape
    return shape(k) if callable(shape) else shape


def _shaped(x, folded):
    """(batch, elements) -> (batch, *outer dims, channels) of a folded shape (last two dims merged)."""
    if x.shape[1] != prod(folded):
        raise ValueError(f"golden graph: {x.shape[1]} elements do not fill the folded shape {folded}")
    return x.reshape(x.shape[0], -1, folded[-2] * folded[-1])


def _bipolar(dtype):
    return dtype == DataType["BIPOLAR"]


def _mvau(spec, xs, _):
    t = None if spec.table is None else spec.table.thresholds
    return golden.mvau(xs[0], np.asarray(spec.weights), t, spec.act_val, spec.xnor, _bipolar(spec.output_dtype))


def _vvau(spec, xs, producer):
    x = xs[0]
    k, c = spec.in_elems, spec.channels
    simd = producer.simd if producer is not None else spec.pe
    windows = x.reshape(*x.shape[:-1], c // simd, k, simd)
    windows = np.moveaxis(windows, -2, -3).reshape(*x.shape[:-1], k, c)
    t = None if spec.table is None else spec.table.thresholds
    return golden.vvau(windows, spec.weight_matrix(), t, spec.act_val, spec.xnor, _bipolar(spec.output_dtype))


def _thresholding(spec, xs, _):
    return golden.multithreshold(xs[0], spec.table.thresholds, spec.act_val, _bipolar(spec.output_dtype))


def _swg(spec, xs, _):
    x = xs[0].reshape(xs[0].shape[0], *spec.ifm_dim, spec.ifm_channels)
    if spec.depthwise:
        return golden.depthwise_windows(x, spec.kernel, spec.simd, spec.stride, spec.dilation)
    return golden.im2col(x, spec.kernel, spec.stride, spec.dilation)


def _fmpadding(spec, xs, _):
    return golden.fm_padding(xs[0].reshape(xs[0].shape[0], *spec.img_dim, spec.num_channels), spec.padding)


def _maxpool(spec, xs, _):
    return golden.maxpool_nhwc(xs[0].reshape(xs[0].shape[0], *spec.img_dim, spec.num_channels), spec.pool_dim)


def _global_acc_pool(spec, xs, _):
    x = xs[0]
    return golden.global_acc_pool(x.reshape(x.shape[0], *spec.num_input_vectors[1:], spec.num_channels))


def _labelselect(spec, xs, _):
    return golden.label_select(xs[0], spec.k, spec.input_dtype.min())


def _pixels(x, channels):
    return x.reshape(x.shape[0], -1, channels)


def _add_streams(spec, xs, _):
    return golden.add_streams(_pixels(xs[0], spec.num_channels), _pixels(xs[1], spec.num_channels))


def _concat(spec, xs, _):
    return golden.concat_channels([_pixels(x, c) for x, c in zip(xs, spec.channels_per_stream)])


def _channelwise(spec, xs, _):
    return golden.channelwise(_pixels(xs[0], spec.num_channels), spec.params, spec.func)


_GOLDEN = {"MVAU": _mvau, "VVAU": _vvau, "Thresholding": _thresholding, "ConvolutionInputGenerator": _swg,
           "FMPadding": _fmpadding, "StreamingMaxPool": _maxpool, "LabelSelect": _labelselect,
           "GlobalAccPool": _global_acc_pool, "AddStreams": _add_streams, "StreamingConcat": _concat,
           "ChannelwiseOp": _channelwise, "DuplicateStreams": lambda spec, xs, _: xs[0],
           "StreamingDataWidthConverter": lambda spec, xs, _: xs[0], "StreamingFIFO": lambda spec, xs, _: xs[0]}
