"""Run a lowered chain on numpy: each layer's independent golden model (:mod:`sim.golden`) applied in
stream order. It checks lowering against qonnx without building hardware, and it is what the RTL
simulation of the same chain must equal."""

from math import prod

import numpy as np
from qonnx.core.datatype import DataType

from sim import golden

__all__ = ["run_golden"]


def run_golden(nodes, codes):
    """``codes`` (batch, elements) in the first layer's stream order -> the last layer's output, same form."""
    x = np.asarray(codes, dtype=np.int64)
    previous = None
    for node in nodes:
        spec = node.spec()
        x = _GOLDEN[node.op_type](spec, _shaped(x, spec.folded_input_shape), previous)
        x = x.reshape(x.shape[0], -1)
        previous = spec
    return x


def _shaped(x, folded):
    """(batch, elements) -> (batch, *outer dims, channels) of a folded shape (last two dims merged)."""
    if x.shape[1] != prod(folded):
        raise ValueError(f"golden chain: {x.shape[1]} elements do not fill the folded shape {folded}")
    return x.reshape(x.shape[0], -1, folded[-2] * folded[-1])


def _bipolar(dtype):
    return dtype == DataType["BIPOLAR"]


def _mvau(spec, x, _):
    t = None if spec.table is None else spec.table.thresholds
    return golden.mvau(x, np.asarray(spec.weights), t, spec.act_val, spec.xnor, _bipolar(spec.output_dtype))


def _vvau(spec, x, producer):
    k, c = spec.in_elems, spec.channels
    simd = producer.simd if producer is not None else spec.pe
    windows = x.reshape(*x.shape[:-1], c // simd, k, simd)
    windows = np.moveaxis(windows, -2, -3).reshape(*x.shape[:-1], k, c)
    t = None if spec.table is None else spec.table.thresholds
    return golden.vvau(windows, spec.weight_matrix(), t, spec.act_val, spec.xnor, _bipolar(spec.output_dtype))


def _thresholding(spec, x, _):
    return golden.multithreshold(x, spec.table.thresholds, spec.act_val, _bipolar(spec.output_dtype))


def _swg(spec, x, _):
    x = x.reshape(x.shape[0], *spec.ifm_dim, spec.ifm_channels)
    if spec.depthwise:
        return golden.depthwise_windows(x, spec.kernel, spec.simd, spec.stride, spec.dilation)
    return golden.im2col(x, spec.kernel, spec.stride, spec.dilation)


def _fmpadding(spec, x, _):
    return golden.fm_padding(x.reshape(x.shape[0], *spec.img_dim, spec.num_channels), spec.padding)


def _maxpool(spec, x, _):
    return golden.maxpool_nhwc(x.reshape(x.shape[0], *spec.img_dim, spec.num_channels), spec.pool_dim)


def _global_acc_pool(spec, x, _):
    return golden.global_acc_pool(x.reshape(x.shape[0], *spec.num_input_vectors[1:], spec.num_channels))


def _labelselect(spec, x, _):
    return golden.label_select(x, spec.k, spec.input_dtype.min())


_GOLDEN = {"MVAU": _mvau, "VVAU": _vvau, "Thresholding": _thresholding, "ConvolutionInputGenerator": _swg,
           "FMPadding": _fmpadding, "StreamingMaxPool": _maxpool, "LabelSelect": _labelselect,
           "GlobalAccPool": _global_acc_pool,
           "StreamingDataWidthConverter": lambda spec, x, _: x, "StreamingFIFO": lambda spec, x, _: x}
