"""Golden adapters per FINN op type: ``GOLDEN[op_type](spec, inputs, producer_spec)`` computes a layer on
numpy from the math in :mod:`sim.golden`. ``inputs`` are integer arrays per input stream, each (batch,
vectors, elements): the input's folded shape with its last two dimensions merged; the result is one
array (every output carries it) or a list (one per output). Specs are read by their fields only, so
this module imports no layer (``sim`` sits beside ``layers``, not above it)."""

import numpy as np

from sim import golden

__all__ = ["GOLDEN"]


def _thresholds(spec):
    return None if spec.table is None else spec.table.thresholds


def _bipolar_out(spec):
    return spec.output_dtype.name == "BIPOLAR"


def _mvau(spec, xs, producer):
    return golden.mvau(xs[0], np.asarray(spec.weights), _thresholds(spec), spec.act_val, spec.xnor,
                       _bipolar_out(spec))


def _vvau(spec, xs, producer):
    """The input words in the order of the depthwise SWG feeding it (SIMD = the producer's)."""
    x = xs[0]
    k, c = spec.in_elems, spec.channels
    simd = producer.simd if producer is not None else spec.pe
    windows = x.reshape(*x.shape[:-1], c // simd, k, simd)
    windows = np.moveaxis(windows, -2, -3).reshape(*x.shape[:-1], k, c)
    return golden.vvau(windows, spec.weight_matrix(), _thresholds(spec), spec.act_val, spec.xnor, _bipolar_out(spec))


def _swg(spec, xs, producer):
    x = xs[0].reshape(xs[0].shape[0], *spec.ifm_dim, spec.ifm_channels)
    if spec.depthwise:
        return golden.depthwise_windows(x, spec.kernel, spec.simd, spec.stride, spec.dilation)
    return golden.im2col(x, spec.kernel, spec.stride, spec.dilation)


def _image(spec, x):
    return x.reshape(x.shape[0], *spec.img_dim, spec.num_channels)


def _passthrough(spec, xs, producer):
    return xs[0]


GOLDEN = {
    "MVAU": _mvau,
    "VVAU": _vvau,
    "Thresholding": lambda spec, xs, _: golden.multithreshold(xs[0], spec.table.thresholds, spec.act_val,
                                                              _bipolar_out(spec)),
    "ConvolutionInputGenerator": _swg,
    "FMPadding": lambda spec, xs, _: golden.fm_padding(_image(spec, xs[0]), spec.padding),
    "StreamingMaxPool": lambda spec, xs, _: golden.maxpool_nhwc(_image(spec, xs[0]), spec.pool_dim),
    "UpsampleNearestNeighbour": lambda spec, xs, _: golden.upsample_nearest(
        xs[0].reshape(xs[0].shape[0], *spec.ifm_dim, spec.num_channels), spec.factor),
    "LabelSelect": lambda spec, xs, _: golden.label_select(xs[0], spec.k, spec.input_dtype.min()),
    "GlobalAccPool": lambda spec, xs, _: golden.global_acc_pool(
        xs[0].reshape(xs[0].shape[0], *spec.num_input_vectors[1:], spec.num_channels)),
    "AddStreams": lambda spec, xs, _: golden.add_streams(*xs),
    "StreamingConcat": lambda spec, xs, _: golden.concat_channels(xs),
    "ChannelwiseOp": lambda spec, xs, _: golden.channelwise(xs[0], spec.params, spec.func),
    "DuplicateStreams": _passthrough,
    "StreamingDataWidthConverter": _passthrough,
    "StreamingFIFO": _passthrough,
}
