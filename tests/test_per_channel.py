"""Per-channel activation scales (issue 46 item 2): a quantizer with one scale (and zero point) per channel
becomes per-channel thresholds, and the layers reading such a stream stay exact.

Models (tests/models/per_channel, made by make_per_channel.py with Brevitas, random weights, BatchNorms
calibrated on random inputs): a tiny MobileNet (per-channel QuantReLUs after the first conv and the
pointwise convs, read by depthwise convs), a residual block whose Add is fed by one per-channel quantizer
shared by both branches (read by a Thresholding, a MaxPool and a global pool), and a dense conv reading a
per-channel stream (float scales: refused; power-of-two scales: the integer factors join its weights).
Golden: qonnx ``execute_onnx`` on the original model (run_golden on the lowered graph, verify_outputs).
A model made here with onnx.helper adds per-channel zero points.
"""

import json
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rtlgen.check.execute import run_golden
from rtlgen.check.verify import verify_outputs
from rtlgen.backend.compile import COMPILE
from rtlgen.flows import Runner
from rtlgen.options import CompileOptions
from rtlgen.passes.load import CompileError, load_model, quantizer_output_codes
from rtlgen.passes.lower import lower
from rtlgen.passes.to_hw import stream_io
from tests.conftest import rtl_matches_qonnx

MODELS = Path(__file__).parent / "models" / "per_channel"


def inputs(name, n, seed):
    """n random inputs in the calibration range [-1, 1], in the model's input shape."""
    shape = np.load(MODELS / f"{name}_inputs.npy").shape[1:]
    return np.random.default_rng(seed).uniform(-1, 1, (n, *shape)).astype(np.float32)


def golden_check(path, x, input_dtype=None):
    """The lowered graph's layer goldens against qonnx on ``x``; returns the graph."""
    model = load_model(path, input_dtype)
    graph = lower(model)
    io = stream_io(model, graph)
    ours = io.output_from_codes(run_golden(graph, io.input_codes(x)))
    result = verify_outputs(path, x, ours, io)
    assert result.passed, result.summary()
    return graph


def per_channel_scales(graph):
    """The graph's stream tensors whose scale is per channel."""
    return [t for t in graph.tensors.values() if np.ndim(t.scale) and np.ptp(np.asarray(t.scale)) > 0]


def test_tiny_mobilenet_matches_qonnx():
    """Per-channel QuantReLUs after the first conv and a pointwise conv, each read by a depthwise conv (a
    VVAU whose real scale per channel is s_in[c] * w_scale[c]): every layer in hardware, exact."""
    graph = golden_check(MODELS / "tiny_mobilenet.onnx", inputs("tiny_mobilenet", 32, seed=3))
    counts = Counter(n.op_type for n in graph.nodes)
    assert {op: counts[op] for op in ("MVAU", "VVAU", "GlobalAccPool")} == {"MVAU": 4, "VVAU": 2, "GlobalAccPool": 1}
    assert len(per_channel_scales(graph)) >= 2


def test_residual_add_of_one_shared_per_channel_quantizer_matches_qonnx():
    """Both branches of the Add quantized by one per-channel QuantIdentity: ratio 1 in every channel, so the
    codes add as they are (no ChannelwiseOp), on a per-channel scale; a Thresholding reads the per-channel
    stream (the shortcut's requantizer), the sum's per-channel QuantReLU feeds a MaxPool and a global pool."""
    graph = golden_check(MODELS / "residual_per_channel.onnx", inputs("residual_per_channel", 32, seed=4))
    counts = Counter(n.op_type for n in graph.nodes)
    assert counts["AddStreams"] == 1 and counts["ChannelwiseOp"] == 0 and counts["StreamingMaxPool"] == 1
    add = next(n for n in graph.nodes if n.op_type == "AddStreams")
    assert np.ndim(graph.tensors[add.outputs[0]].scale) == 1


def test_dense_conv_folds_power_of_two_channel_scales_into_its_weights():
    """Per-channel power-of-two scales are integer multiples of the smallest: a dense conv reading them takes
    the factors into its (wider) weights and stays exact."""
    graph = golden_check(MODELS / "dense_after_per_channel_po2.onnx", inputs("dense_after_per_channel_po2", 16, 5))
    mvaus = [n for n in graph.nodes if n.op_type == "MVAU"]
    assert mvaus[1].params["weight_dtype"].bitwidth() > mvaus[0].params["weight_dtype"].bitwidth() == 4


def test_dense_conv_reading_unrelated_per_channel_scales_is_refused():
    with pytest.raises(CompileError, match=r"\(Conv\) reads .*whose scale is per channel .* not small integer "
                                           r"multiples .*legal: a depthwise convolution reading it"):
        lower(load_model(MODELS / "dense_after_per_channel.onnx"))


# ---- per-channel zero points, on a model made here ----

def _quant(name, x, out, scale, zero, bits, signed, narrow=0):
    inits = [numpy_helper.from_array(np.asarray(v, dtype=np.float32), f"{name}_{k}")
             for k, v in (("scale", scale), ("zero", zero), ("bits", bits))]
    node = helper.make_node("Quant", [x, *(i.name for i in inits)], [out], name=name,
                            domain="qonnx.custom_op.general", signed=signed, narrow=narrow, rounding_mode="ROUND")
    return node, inits


def zero_point_model(path):
    """INT8 input quantizer with a scale per channel (the host quantizes per channel) -> depthwise 3x3 conv -> 4-bit unsigned Quant with a scale AND a zero point per
    channel (codes q - z: a channel's output is (q - z) * s; the scales are 1, 2, 4, 3 times 1/16) ->
    MaxPool 2x2 -> dense 1x1 conv (those factors join its weights) -> signed Quant with float scales and
    zero points per channel -> per-tensor 4-bit Quant (a Thresholding reading a per-channel stream)."""
    rng = np.random.default_rng(11)
    c = 4
    nodes, inits = [], []
    for node, consts in (_quant("q_in", "x", "xq", np.array([0.02, 0.03, 0.015, 0.025]).reshape(1, c, 1, 1), 0, 8, 1),
                         _quant("q_dw_w", "w_dw", "w_dwq", np.full((c, 1, 1, 1), 0.02), 0, 4, 1, 1),
                         _quant("q_a", "dw", "a", (np.array([1, 2, 4, 3]) / 16).reshape(1, c, 1, 1),
                                np.array([0, 1, 3, -2]).reshape(1, c, 1, 1), 4, 0),
                         _quant("q_pw_w", "w_pw", "w_pwq", np.array([0.5, 0.25, 0.125, 0.5]).reshape(c, 1, 1, 1), 0,
                                4, 1, 1),
                         _quant("q_b", "pw", "b", np.array([1.5, 0.5, 0.35, 0.3]).reshape(1, c, 1, 1),
                                np.array([2, 0, -1, 5]).reshape(1, c, 1, 1), 4, 1),
                         _quant("q_out", "b", "y", 0.7, 0, 4, 1)):
        nodes.append(node)
        inits += consts
    inits += [numpy_helper.from_array(rng.integers(-7, 8, (c, 1, 3, 3)).astype(np.float32), "w_dw"),
              numpy_helper.from_array(rng.integers(-7, 8, (c, c, 1, 1)).astype(np.float32), "w_pw")]
    nodes.insert(2, helper.make_node("Conv", ["xq", "w_dwq"], ["dw"], name="dw_conv", group=c, pads=[1, 1, 1, 1],
                                     kernel_shape=[3, 3]))
    nodes.insert(4, helper.make_node("MaxPool", ["a"], ["pooled"], name="pool", kernel_shape=[2, 2], strides=[2, 2]))
    nodes.insert(6, helper.make_node("Conv", ["pooled", "w_pwq"], ["pw"], name="pw_conv", kernel_shape=[1, 1]))
    return _saved(path, nodes, "zero_points", (1, c, 6, 6), (1, c, 3, 3), inits)


def _saved(path, nodes, name, in_shape, out_shape, inits):
    """A one-input, one-output QONNX model of ``nodes`` saved at ``path`` (returned)."""
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("qonnx.custom_op.general", 1)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def shared_quantizer_block(path, shortcut_ratio=None, join="Add"):
    """The smallest residual block on per-channel scales, for RTL: INT8 input quantizer -> depthwise 3x3 ->
    per-channel UINT4 QuantReLU-like Quant A -> depthwise 3x3 -> per-channel INT4 Quant Q; the shortcut is Q
    applied to A (the same scale initializer: one shared quantizer) -> Add -> per-channel UINT4 Quant.
    ``shortcut_ratio`` (C,): the shortcut gets its own quantizer, with Q's scales times these; ``join="Concat"``
    concatenates the branches (8 channels) before a per-tensor Quant."""
    rng = np.random.default_rng(13)
    c = 4
    main_scale = np.array([0.09, 0.13, 0.07, 0.11], dtype=np.float32).reshape(1, c, 1, 1)
    short_scale = main_scale if shortcut_ratio is None else \
        main_scale * np.asarray(shortcut_ratio, dtype=np.float32).reshape(1, c, 1, 1)
    out_scale = np.array([0.1, 0.14, 0.12, 0.09]).reshape(1, c, 1, 1) if join == "Add" else 0.15
    nodes, inits = [], []
    for node, consts in (_quant("q_in", "x", "xq", 0.02, 0, 8, 1),
                         _quant("q_w1", "w1", "w1q", np.array([0.02, 0.03, 0.025, 0.015]).reshape(c, 1, 1, 1), 0, 4, 1, 1),
                         _quant("q_a", "c1", "a", np.array([0.05, 0.08, 0.06, 0.04]).reshape(1, c, 1, 1), 0, 4, 0),
                         _quant("q_w2", "w2", "w2q", np.array([0.1, 0.15, 0.12, 0.2]).reshape(c, 1, 1, 1), 0, 4, 1, 1),
                         _quant("q_main", "c2", "m", main_scale, 0, 4, 1), _quant("q_short", "a", "s", short_scale, 0, 4, 1),
                         _quant("q_out", "sum", "y", out_scale, 0, 4, 0)):
        nodes.append(node)
        inits += consts
    if shortcut_ratio is None:                  # one quantizer: the shortcut reads the same initializers
        inits = [i for i in inits if not i.name.startswith("q_short_")]
        nodes[5].input[1:] = ["q_main_scale", "q_main_zero", "q_main_bits"]
    inits += [numpy_helper.from_array(rng.integers(-7, 8, (c, 1, 3, 3)).astype(np.float32), "w1"),
              numpy_helper.from_array(rng.integers(-7, 8, (c, 1, 3, 3)).astype(np.float32), "w2")]
    nodes.insert(2, helper.make_node("Conv", ["xq", "w1q"], ["c1"], name="dw1", group=c, pads=[1, 1, 1, 1],
                                     kernel_shape=[3, 3]))
    nodes.insert(5, helper.make_node("Conv", ["a", "w2q"], ["c2"], name="dw2", group=c, pads=[1, 1, 1, 1],
                                     kernel_shape=[3, 3]))
    nodes.insert(8, helper.make_node(join, ["m", "s"], ["sum"], name="join", **({"axis": 1} if join == "Concat" else {})))
    out_channels = c if join == "Add" else 2 * c
    return _saved(path, nodes, "shared_quantizer", (1, c, 4, 4), (1, out_channels, 4, 4), inits)


def block_inputs(n, seed):
    return np.random.default_rng(seed).uniform(-2, 2, (n, 1, 4, 4, 4)).astype(np.float32)


def test_add_of_per_channel_scales_in_integer_ratios_matches_qonnx(tmp_path):
    """The shortcut's own per-channel quantizer at 1, 2, 1, 4 times the main branch's scales: the sum runs on
    the main branch's (finer) scale, the shortcut's codes multiplied per channel by 1, 2, 1, 4 (a
    ChannelwiseOp mul; the main branch is only widened to the sum's datatype)."""
    graph = golden_check(shared_quantizer_block(tmp_path / "b.onnx", shortcut_ratio=[1, 2, 1, 4]),
                         block_inputs(32, 15))
    scaled = [n for n in graph.nodes if n.op_type == "ChannelwiseOp" and n.params["func"] == "mul"]
    assert len(scaled) == 1 and scaled[0].params["params"].tolist() == [1, 2, 1, 4]


def test_add_of_per_channel_scales_in_unrelated_ratios_is_refused(tmp_path):
    path = shared_quantizer_block(tmp_path / "b.onnx", shortcut_ratio=[1, 1.37, 1, 1])
    with pytest.raises(CompileError, match=r"node join \(Add\): in channel 1 the inputs' scales .* are not small "
                                           r"integer multiples .*legal: one \(shared\) quantizer on both branches"):
        lower(load_model(path))


def test_concat_of_per_channel_streams_matches_qonnx(tmp_path):
    """A Concat keeps every channel's own scale: the output's scales are the inputs' side by side (no
    rescaling); a per-tensor quantizer after it reads 8 channel scales as a Thresholding."""
    graph = golden_check(shared_quantizer_block(tmp_path / "b.onnx", shortcut_ratio=[1.5, 0.7, 1.1, 2.3],
                                                join="Concat"), block_inputs(32, 16))
    concat = next(n for n in graph.nodes if n.op_type == "StreamingConcat")
    assert np.size(graph.tensors[concat.outputs[0]].scale) == 8
    assert Counter(n.op_type for n in graph.nodes)["ChannelwiseOp"] == 0


def test_per_channel_zero_points_match_qonnx(tmp_path):
    path = zero_point_model(tmp_path / "zero_points.onnx")
    model = load_model(path)
    q_a = next(n for n in model.graph.node if model.original_names.get(n.name) == "q_a")
    dtype, scale, qmin, levels = quantizer_output_codes(model, q_a)
    # UINT4 codes 0..15 moved by z = 0, 1, 3, -2: the union -3..17
    assert (dtype.name, qmin, levels) == ("INT6", -3, 20) and np.shape(scale) == (4,)
    x = np.random.default_rng(12).uniform(-3, 3, (32, 1, 4, 6, 6)).astype(np.float32)
    graph = golden_check(path, x)
    assert Counter(n.op_type for n in graph.nodes)["Thresholding"] == 1


def test_a_scale_along_another_axis_is_refused(tmp_path):
    path = zero_point_model(tmp_path / "zero_points.onnx")
    model = onnx.load(str(path))
    scale = next(i for i in model.graph.initializer if i.name == "q_a_scale")
    scale.CopyFrom(numpy_helper.from_array(np.full((1, 1, 1, 6), 0.05, dtype=np.float32), "q_a_scale"))
    onnx.save(model, str(path))
    with pytest.raises(CompileError, match=r"scale of shape \(1, 1, 1, 6\) is neither one number \(per tensor\) "
                                           r"nor one per channel"):
        lower(load_model(path))


# ---- compiled ----

def test_tiny_mobilenet_fit_pynq_z2_golden():
    """``--fit pynq-z2``: the folded, stitched graph (width converters, FIFOs) on the layers' goldens."""
    path = MODELS / "tiny_mobilenet.onnx"
    runner = Runner()
    stitched = runner.run(COMPILE, path, CompileOptions(fit="pynq-z2"), stop="insert_fifos")
    assert runner.results["fold"].optimizer is not None
    io = stream_io(runner.results["load"], stitched)
    x = inputs("tiny_mobilenet", 16, seed=6)
    result = verify_outputs(path, x, io.output_from_codes(run_golden(stitched, io.input_codes(x))), io)
    assert result.passed, result.summary()


@pytest.mark.sim
def test_shared_per_channel_quantizer_block_rtl_at_the_ii_under_backpressure(tmp_path):
    """The smallest residual block on per-channel scales (depthwise convs, a Thresholding reading a
    per-channel stream, an AddStreams of one shared per-channel quantizer): RTL at the II and under random
    backpressure, bit-exact against qonnx."""
    path = shared_quantizer_block(tmp_path / "block.onnx")
    x = block_inputs(6, 14)
    result = rtl_matches_qonnx(path, x, tmp_path / "out", seed=3)
    assert "bit-exact" in result.summary(), result.summary()


@pytest.mark.slow
@pytest.mark.sim
def test_residual_per_channel_rtl_at_the_ii_under_backpressure(tmp_path):
    path = MODELS / "residual_per_channel.onnx"
    x = inputs("residual_per_channel", 6, seed=7)
    rtl_matches_qonnx(path, x, tmp_path, seed=3)


# ---- MobileNet-v1 w4a4 at 224x224 (quant_mobilenet_v1_4b's topology; 17 MB) ----

MOBILENET = MODELS / "mobilenet_v1_w4a4.onnx"


def mobilenet_pixels(n, seed):
    """Raw UINT8 pixels, as the model takes them (its normalization and 8-bit quantizer come first)."""
    return np.random.default_rng(seed).integers(0, 256, (n, 1, 3, 224, 224)).astype(np.float32)


@pytest.mark.slow
def test_mobilenet_v1_w4a4_uint8_input_one_frame_matches_qonnx():
    """``--input-dtype UINT8``: the accelerator takes raw pixels, the per-channel normalization and the 8-bit
    input quantizer become one per-channel Thresholding; the 12 per-channel QuantReLUs become per-channel
    thresholds of the layers before them, read by depthwise convs. Every layer in hardware; the classifier's
    float bias Add runs on the host. The committed sample and one more frame."""
    x = np.concatenate([np.load(MODELS / "mobilenet_v1_w4a4_inputs.npy").astype(np.float32),
                        mobilenet_pixels(1, seed=8)])
    graph = golden_check(MOBILENET, x, input_dtype="UINT8")
    counts = Counter(n.op_type for n in graph.nodes)
    assert {op: counts[op] for op in ("MVAU", "VVAU", "Thresholding", "GlobalAccPool")} == \
        {"MVAU": 15, "VVAU": 13, "Thresholding": 2, "GlobalAccPool": 1}
    assert graph.host_pre == [] and len(graph.host_post) == 1
    assert len(per_channel_scales(graph)) >= 12


@pytest.mark.slow
def test_mobilenet_v1_w4a4_does_not_fit_one_pynq_z2():
    """4.2 M weights of 4 bits (8 in the first layer) are 16.8 Mbit, 457 BRAM36 packed full; the xc7z020 has
    140 BRAM36 (5.0 Mbit) and 53,200 LUTs: ``--fit pynq-z2`` says that no folding fits, as one error."""
    from rtlgen.backend.compile import compile_model
    with pytest.raises(CompileError, match="no design fits the budget"):
        compile_model(MOBILENET, CompileOptions(fit="pynq-z2", input_dtype="UINT8"))


@pytest.mark.slow
def test_mobilenet_v1_w4a4_across_nine_pynq_z2(tmp_path):
    """``rtlgen partition --devices 9 --partition mobilenet_v1_w4a4_9x_pynq_z2.json --plan-only``: cut after
    the stride-2 depthwise convs and the 14x14 stages (small feature maps on the 1 Gbit/s links; the
    placement balances weights and multiply-accumulates by hand), every device within its --fit budget; the II is the host
    link's bound (224x224x3 8-bit pixels a frame over 1 Gbit/s Ethernet), 786 frames/s at 100 MHz. The
    folding it chose, at golden level, on one frame against qonnx."""
    from rtlgen import api
    fixed = json.loads((MODELS / "mobilenet_v1_w4a4_9x_pynq_z2.json").read_text())
    part = api.partition(MOBILENET, tmp_path / "out", devices=9, fixed=fixed, plan_only=True)
    assert [d.index for d in part.devices if d.nodes] == list(range(9))
    assert all(d.utilization <= 1 for d in part.devices)
    assert part.ii == part.host_links["link host -> device 0"] and part.frames_per_second > 780
    assert all(d.cycles <= part.ii for d in part.devices)
    # the plan's folding (per-channel thresholds as thresholds or as exact requantizers) on one frame
    runner = Runner()
    folded = runner.run(COMPILE, MOBILENET, CompileOptions(folding=str(tmp_path / "out" / "folding.json")), stop="fold")
    assert {n.folding.get("activation_style") for n in folded.nodes} >= {"thresholds", "requant"}
    io = stream_io(runner.results["load"], folded)
    x = mobilenet_pixels(1, seed=9)
    result = verify_outputs(MOBILENET, x, io.output_from_codes(run_golden(folded, io.input_codes(x))), io)
    assert result.passed, result.summary()


@pytest.mark.slow
def test_mobilenet_v1_w4a4_partitioned_automatically_over_nine_pynq_z2(tmp_path):
    """``rtlgen partition --devices 9 --plan-only`` with no map: the greedy start places the layers (the
    whole 0/1 program, 40-60k columns, finds no partition within HiGHS's time limit) and reaches the hand
    placement's II, the host link's bound, every device within its budget."""
    from rtlgen import api
    part = api.partition(MOBILENET, tmp_path / "out", devices=9, plan_only=True, warn=lambda line: None)
    assert part.ii == part.host_links["link host -> device 0"] == 127_143
    assert all(d.utilization <= 1 and d.cycles <= part.ii for d in part.devices)
    assert json.loads((tmp_path / "out" / "partition.json").read_text())["solver_note"] == part.solver_note
