"""Convolution blocks wired by hand equal qonnx's execution of the lowered graphs:
FMPadding -> SWG -> MVAU -> Thresholding -> DWC -> MaxPool vs Im2Col(pad) -> MatMul -> MultiThreshold ->
MaxPoolNHWC, and depthwise SWG -> VVAU vs Im2Col -> MatMul (block-diagonal)."""

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from onnx import TensorProto, helper
from qonnx.core.datatype import DataType
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.util.basic import gen_finn_dt_tensor, qonnx_make_model

from layers.dwc import DWCSpec, StreamingDataWidthConverter
from layers.fmpadding import FMPadding, FMPaddingSpec
from layers.maxpool import StreamingMaxPool, StreamingMaxPoolSpec
from layers.mvau import MVAU, MVAUSpec
from layers.thresholding import Thresholding, ThresholdingSpec
from layers.vvau import VVAU, VVAUSpec
from memstream.packing import pack_words, unpack_words
from sim.harness import FULL_RATE, Backpressure, simulate_streams
from swg import ConvolutionInputGenerator, SWGSpec

IMG, C, K, PAD, MH, POOL = 6, 3, 3, 1, 4, 2
IDT, WDT, ODT = DataType["UINT4"], DataType["INT4"], DataType["UINT2"]


class Chain(wiring.Component):
    """Layers connected output to input; the chain's ``i`` and ``o`` are the first and last layer's."""

    def __init__(self, layers):
        self._layers = layers
        super().__init__({"i": In(stream.Signature(len(layers[0].i.payload))),
                          "o": Out(stream.Signature(len(layers[-1].o.payload)))})

    def elaborate(self, platform):
        m = Module()
        for k, layer in enumerate(self._layers):
            m.submodules[f"layer{k}"] = layer
        wiring.connect(m, wiring.flipped(self.i), self._layers[0].i)
        for a, b in zip(self._layers, self._layers[1:]):
            wiring.connect(m, a.o, b.i)
        wiring.connect(m, self._layers[-1].o, wiring.flipped(self.o))
        return m


def parameters(seed=0):
    rng = np.random.default_rng(seed)
    weights = rng.integers(int(WDT.min()), int(WDT.max()) + 1, size=(K * K * C, MH))
    thresholds = np.sort(rng.integers(-60, 60, size=(MH, 3)), axis=1)
    return weights, thresholds


def qonnx_model(weights, thresholds):
    """The lowered graph FINN's streamlining produces for this block, NHWC throughout."""
    out = IMG // POOL
    nodes = [
        helper.make_node("Im2Col", ["x"], ["cols"], domain="qonnx.custom_op.general", stride=[1, 1],
                         kernel_size=[K, K], input_shape=str((1, IMG, IMG, C)), pad_amount=[PAD] * 4),
        helper.make_node("MatMul", ["cols", "w"], ["acc"]),
        helper.make_node("MultiThreshold", ["acc", "t"], ["act"], domain="qonnx.custom_op.general",
                         out_dtype=ODT.name, data_layout="NHWC"),
        helper.make_node("MaxPoolNHWC", ["act"], ["y"], domain="qonnx.custom_op.general",
                         kernel_shape=[POOL, POOL], strides=[POOL, POOL], pads=[0, 0, 0, 0]),
    ]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "conv_block", [vi("x", TensorProto.FLOAT, (1, IMG, IMG, C))],
                              [vi("y", TensorProto.FLOAT, (1, out, out, MH))],
                              initializer=[helper.make_tensor("w", TensorProto.FLOAT, weights.shape,
                                                              weights.astype(np.float32).ravel()),
                                           helper.make_tensor("t", TensorProto.FLOAT, thresholds.shape,
                                                              thresholds.astype(np.float32).ravel())],
                              value_info=[vi("cols", TensorProto.FLOAT, (1, IMG, IMG, K * K * C)),
                                          vi("acc", TensorProto.FLOAT, (1, IMG, IMG, MH)),
                                          vi("act", TensorProto.FLOAT, (1, IMG, IMG, MH))])
    model = ModelWrapper(qonnx_make_model(graph))
    model.set_tensor_datatype("x", IDT)
    return model


def hardware(weights, thresholds, pe=2):
    padded = IMG + 2 * PAD
    pad = FMPaddingSpec((IMG, IMG), (PAD,) * 4, C, simd=C, dtype=IDT)
    swg = SWGSpec((padded, padded), C, (K, K), IDT, simd=C)
    mvau = MVAUSpec(K * K * C, MH, simd=C, pe=pe, input_dtype=IDT, weight_dtype=WDT, weights=weights,
                    num_input_vectors=(1, IMG, IMG))
    thr = ThresholdingSpec(MH, pe, mvau.output_dtype, ODT, thresholds, num_input_vectors=(1, IMG, IMG))
    dwc = DWCSpec((1, IMG, IMG, MH), pe * ODT.bitwidth(), MH * ODT.bitwidth(), ODT)
    pool = StreamingMaxPoolSpec((IMG, IMG), POOL, MH, dtype=ODT)
    return Chain([FMPadding(pad), ConvolutionInputGenerator(swg), MVAU(mvau), Thresholding(thr),
                  StreamingDataWidthConverter(dwc), StreamingMaxPool(pool)]), swg, mvau


@pytest.mark.sim
@pytest.mark.parametrize("backpressure", [FULL_RATE, Backpressure(seed=3)], ids=["full-rate", "backpressure"])
def test_conv_block_equals_qonnx(backpressure, simulator):
    weights, thresholds = parameters()
    frames = 3
    np.random.seed(7)
    x = gen_finn_dt_tensor(IDT, (frames, IMG, IMG, C))
    model = qonnx_model(weights, thresholds)
    expected = np.concatenate([execute_onnx(model, {"x": x[n:n + 1]})["y"] for n in range(frames)])

    chain, swg, mvau = hardware(weights, thresholds)
    words = pack_words(x.reshape(-1, C), IDT)
    out_words = frames * (IMG // POOL) ** 2
    result = simulate_streams(chain, inputs={"i": list(words)}, outputs={"o": out_words},
                              backpressure=backpressure, simulator=simulator)
    y = unpack_words(np.array(result.words("o"), dtype=object), ODT, MH).reshape(expected.shape)
    assert np.array_equal(y, expected)
    if backpressure is FULL_RATE:
        # the block runs at its slowest layer: the MVAU (SF*NF per pixel) or the SWG's windows
        slowest = max(mvau.exp_cycles, swg.exp_cycles)
        assert abs(result.steady_cycles("o", (IMG // POOL) ** 2) - slowest) <= 4


def depthwise_model(weights, img, channels, kernel):
    """FINN's lowering of a depthwise convolution: Im2Col, then MatMul with a block-diagonal matrix."""
    kk = kernel * kernel
    dense = np.zeros((kk * channels, channels))
    for c in range(channels):
        dense[np.arange(kk) * channels + c, c] = weights[c, 0].reshape(-1)
    out = img - kernel + 1
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Im2Col", ["x"], ["cols"], domain="qonnx.custom_op.general", stride=[1, 1],
                          kernel_size=[kernel, kernel], input_shape=str((1, img, img, channels)), depthwise=1),
         helper.make_node("MatMul", ["cols", "w"], ["y"])],
        "depthwise", [vi("x", TensorProto.FLOAT, (1, img, img, channels))],
        [vi("y", TensorProto.FLOAT, (1, out, out, channels))],
        initializer=[helper.make_tensor("w", TensorProto.FLOAT, dense.shape, dense.astype(np.float32).ravel())],
        value_info=[vi("cols", TensorProto.FLOAT, (1, out, out, kk * channels))])
    model = ModelWrapper(qonnx_make_model(graph))
    model.set_tensor_datatype("x", IDT)
    return model


@pytest.mark.sim
@pytest.mark.parametrize("parallel", [False, True], ids=["default", "parallel"])
def test_depthwise_block_equals_qonnx(parallel, simulator):
    """Depthwise SWG (SIMD = VVAU PE) -> [DWC to 3 kernel positions per word] -> VVAU, vs Im2Col + MatMul."""
    img, channels, kernel, pe = 7, 6, 3, 2
    simd = kernel * kernel if parallel else 3
    weights = np.random.default_rng(4).integers(-8, 8, size=(channels, 1, kernel, kernel))
    swg = SWGSpec((img, img), channels, (kernel, kernel), IDT, simd=pe, depthwise=True, parallel_window=parallel)
    vvau = VVAUSpec(channels, (kernel, kernel), swg.ofm_dim, pe, simd, IDT, WDT, weights)
    layers = [ConvolutionInputGenerator(swg)]
    if not parallel:    # the default style emits one kernel position per word; the VVAU takes three
        frame = (1, *swg.ofm_dim, kernel * kernel * channels)
        layers.append(StreamingDataWidthConverter(DWCSpec(frame, swg.out_width, vvau.in_width, IDT)))
    layers.append(VVAU(vvau))
    frames = 2
    np.random.seed(5)
    x = gen_finn_dt_tensor(IDT, (frames, img, img, channels))
    model = depthwise_model(weights, img, channels, kernel)
    expected = np.concatenate([execute_onnx(model, {"x": x[n:n + 1]})["y"] for n in range(frames)])
    result = simulate_streams(Chain(layers), inputs={"i": list(pack_words(x.reshape(-1, pe), IDT))},
                              outputs={"o": frames * int(np.prod(swg.ofm_dim)) * channels // pe},
                              backpressure=Backpressure(seed=6), simulator=simulator)
    y = unpack_words(np.array(result.words("o"), dtype=object), vvau.output_dtype, pe).reshape(expected.shape)
    assert np.array_equal(y, expected)
