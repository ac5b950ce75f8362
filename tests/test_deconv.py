"""Deconvolution (issue 46 item 5): ONNX ConvTranspose as FINN lowers it, FMPadding_Pixel (zeros between the
input pixels) + FMPadding (k - 1 - pad around, output_padding at the bottom and right) + a stride-1
convolution by the flipped kernel with its channels swapped.

- FMPadding_Pixel: its golden against an independent numpy expression; its spec's figures and refusals (its
  component bit-exact at one word per cycle, also under random backpressure, over a grid of shapes:
  Op.examples, simulated by tests/test_op_grid.py).
- The formulation against the definition of a transposed convolution (numpy, and onnxruntime's ConvTranspose).
- Brevitas QuantConvTranspose2d models (tests/models/deconv, made by make_deconv.py): the lowered graph's
  goldens and an ``--fit pynq-z2`` compile against qonnx on the original model; the smallest in RTL at the II
  and under backpressure; every refused attribute named in one clear error.
"""

import itertools
from pathlib import Path

import numpy as np
import onnx
import pytest

import golden
from layers.fmpadding import golden_fm_padding
from layers.fmpadding_pixel import golden_pixel_padding
from layers.fmpadding_pixel import FMPaddingPixelSpec, deconv_padding, deconv_weights
from rtlgen.check.execute import run_golden
from rtlgen.errors import CompileError
from rtlgen.backend.compile import COMPILE
from rtlgen.flows import Runner
from rtlgen.options import CompileOptions
from rtlgen.passes.load import load_model
from rtlgen.passes.lower import lower
from rtlgen.passes.to_hw import stream_io
from tests.conftest import golden_matches_qonnx, rtl_matches_qonnx

MODELS = Path(__file__).parent / "models" / "deconv"
SHAPES = {"deconv_tiny": (2, 3, 3), "deconv_s2k3": (4, 4, 4), "deconv_s2k4": (3, 4, 4)}


def inputs(name, n, seed):
    return np.random.default_rng(seed).standard_normal((n, 1, *SHAPES[name])).astype(np.float32)


# ---- FMPadding_Pixel ----------------------------------------------------------------------------------

@pytest.mark.parametrize("stride", [(1, 1), (2, 2), (2, 3), (3, 1)])
def test_golden_pixel_padding_is_a_kronecker_product(stride):
    """Independent of golden_pixel_padding's slicing: each pixel times a (sy, sx) block that is 1 at its
    top left only, the trailing stride - 1 zero rows and columns cut off."""
    x = np.random.default_rng(1).integers(-8, 8, (2, 3, 4, 5))
    sy, sx = stride
    corner = np.zeros((1, sy, sx, 1), dtype=np.int64)
    corner[0, 0, 0, 0] = 1
    expected = np.kron(x, corner)[:, :(3 - 1) * sy + 1, :(4 - 1) * sx + 1]
    assert np.array_equal(golden_pixel_padding(x, stride), expected)


def test_derived_figures():
    spec = FMPaddingPixelSpec((3, 4), (2, 3), 4, 2, "INT4")
    assert spec.out_dim == (5, 10)
    assert spec.folded_input_shape == (1, 3, 4, 2, 2)
    assert spec.folded_output_shape == (1, 5, 10, 2, 2)
    assert (spec.in_words, spec.out_words, spec.exp_cycles, spec.width) == (24, 100, 100, 8)
    assert spec.words_before_lead == 0                  # a frame starts and ends with an input pixel
    assert FMPaddingPixelSpec(5, 2, 1).img_dim == (5, 5) and FMPaddingPixelSpec(5, 2, 1).stride == (2, 2)
    assert set(spec.resource_estimate()) == {"LUT", "FF", "BRAM18", "DSP"}


@pytest.mark.parametrize("kwargs, message", [
    (dict(simd=3), r"^FMPadding_Pixel simd=3 must divide num_channels=4; legal: 1, 2, 4$"),
    (dict(simd=0), r"^FMPadding_Pixel simd must be a positive integer, not 0$"),
    (dict(img_dim=(3, 0)), r"^FMPadding_Pixel img_dim must be a positive integer or a pair \(h, w\) of them"),
    (dict(stride=(2, 2, 2)), r"^FMPadding_Pixel stride must be a positive integer or a pair"),
    (dict(stride=0), r"^FMPadding_Pixel stride must be a positive integer or a pair"),
    (dict(dtype="BIPOLAR"), r"^FMPadding_Pixel dtype=BIPOLAR has no code for 0 to pad with; legal: BINARY, "
                            r"TERNARY, INTn, UINTn$"),
    (dict(dtype="FLOAT32"), r"^FMPadding_Pixel dtype=FLOAT32 is not supported"),
])
def test_illegal_specs(kwargs, message):
    args = dict(img_dim=(3, 3), stride=(2, 2), num_channels=4, simd=2, dtype="INT4")
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        FMPaddingPixelSpec(**args)


# ---- the formulation ----------------------------------------------------------------------------------

def conv_transpose_by_definition(x, w, stride, pads, output_padding):
    """ONNX ConvTranspose (group 1, dilation 1) on x (C, H, W) by w (C, OC, KH, KW): every input pixel
    scatters its kernel-weighted copy to the output at (y * sy + ky - top, x * sx + kx - left)."""
    c, h, wd = x.shape
    _, oc, kh, kw = w.shape
    (sy, sx), (top, left, bottom, right), (oph, opw) = stride, pads, output_padding
    full = np.zeros((oc, (h - 1) * sy + kh + oph, (wd - 1) * sx + kw + opw), dtype=np.int64)
    for y, xx in itertools.product(range(h), range(wd)):
        full[:, y * sy:y * sy + kh, xx * sx:xx * sx + kw] += np.einsum("c,cokl->okl", x[:, y, xx], w)
    return full[:, top:full.shape[1] - bottom, left:full.shape[2] - right]


def conv_transpose_as_lowered(x, w, stride, pads, output_padding):
    """What the lowering builds: pixel padding, border padding, stride-1 windows by the flipped kernel."""
    kernel = w.shape[2:]
    padded = golden_fm_padding(golden_pixel_padding(x.transpose(1, 2, 0)[None], stride),
                               deconv_padding(kernel, pads, output_padding))
    conv = deconv_weights(w)                                            # (OC, C, KH, KW)
    matrix = conv.transpose(2, 3, 1, 0).reshape(-1, conv.shape[0])     # rows (ky, kx, c): SWG order
    return golden.matmul(golden.im2col(padded, kernel), matrix)[0].transpose(2, 0, 1)


FORMULATION = [  # stride, kernel, pads (top, left, bottom, right), output_padding, input (h, w)
    ((2, 2), (3, 3), (1, 1, 1, 1), (1, 1), (4, 4)), ((2, 2), (4, 4), (1, 1, 1, 1), (0, 0), (3, 3)),
    ((2, 3), (3, 2), (1, 0, 2, 1), (1, 2), (3, 4)), ((1, 1), (3, 3), (0, 2, 1, 0), (0, 0), (4, 3)),
    ((3, 1), (2, 3), (0, 1, 1, 2), (2, 0), (2, 5)), ((2, 2), (1, 1), (0, 0, 0, 0), (1, 0), (3, 3)),
]


@pytest.mark.parametrize("stride, kernel, pads, output_padding, dim", FORMULATION)
def test_lowering_formulation_is_the_transposed_convolution(stride, kernel, pads, output_padding, dim):
    rng = np.random.default_rng(sum(kernel) + sum(pads))
    x, w = rng.integers(-8, 8, (3, *dim)), rng.integers(-8, 8, (3, 4, *kernel))
    assert np.array_equal(conv_transpose_as_lowered(x, w, stride, pads, output_padding),
                          conv_transpose_by_definition(x, w, stride, pads, output_padding))


def test_definition_matches_onnxruntime():
    """The numpy definition above against onnxruntime's ConvTranspose (a third party), asymmetric pads and
    output_padding. onnxruntime directly: qonnx's execute_onnx builds models of an IR version it refuses."""
    import onnxruntime
    from onnx import TensorProto, helper

    (stride, kernel, pads, output_padding, dim) = FORMULATION[2]
    rng = np.random.default_rng(5)
    x, w = rng.integers(-8, 8, (1, 3, *dim)).astype(np.float32), rng.integers(-8, 8, (3, 4, *kernel)).astype(np.float32)
    expected = conv_transpose_by_definition(x[0].astype(np.int64), w.astype(np.int64), stride, pads, output_padding)
    graph = helper.make_graph(
        [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=stride, pads=pads,
                          output_padding=output_padding, kernel_shape=kernel)], "deconv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, *expected.shape])],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.reshape(-1))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert np.array_equal(session.run(None, {"x": x})[0][0], expected)


# ---- Brevitas models ----------------------------------------------------------------------------------

OPS = {
    "deconv_tiny": ["FMPadding_Pixel", "FMPadding", "ConvolutionInputGenerator", "MVAU"],
    "deconv_s2k3": ["FMPadding_Pixel", "FMPadding", "ConvolutionInputGenerator", "MVAU",
                    "FMPadding", "ConvolutionInputGenerator", "MVAU"],
    "deconv_s2k4": ["FMPadding_Pixel", "FMPadding", "ConvolutionInputGenerator", "MVAU"] * 2,
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_lowered_graph_matches_qonnx(name):
    """Every layer in hardware (the input quantizer on the host), the layers' goldens against qonnx."""
    path = MODELS / f"{name}.onnx"
    model = load_model(path)
    graph = lower(model)
    assert [n.op_type for n in graph.nodes] == OPS[name]
    assert graph.host_post == []
    golden_matches_qonnx(path, model, graph, inputs(name, 16, seed=4))


@pytest.mark.parametrize("attrs, ops", [
    (dict(strides=[1, 1], pads=[0, 0, 0, 0], output_padding=[0, 0]), OPS["deconv_tiny"][1:]),   # borders only
    (dict(strides=[1, 1], pads=[2, 1, 2, 1], output_padding=[0, 0]), OPS["deconv_tiny"][2:]),   # a plain conv
    (dict(strides=[3, 2], pads=[0, 1, 2, 0], output_padding=[2, 1]), OPS["deconv_tiny"]),       # all asymmetric
])
def test_attribute_variants_match_qonnx(attrs, ops, tmp_path):
    """deconv_tiny's ConvTranspose with other strides, pads and output_padding (shapes inferred again):
    padding layers only where they add zeros, bit-exact against qonnx on that model."""
    model = onnx.load(MODELS / "deconv_tiny.onnx")
    node = next(n for n in model.graph.node if n.op_type == "ConvTranspose")
    for name, value in attrs.items():
        node.attribute.remove(next(a for a in node.attribute if a.name == name))
        node.attribute.append(onnx.helper.make_attribute(name, value))
    del model.graph.value_info[:]
    for dim in model.graph.output[0].type.tensor_type.shape.dim:
        dim.Clear()
        dim.dim_param = "unknown"
    path = tmp_path / "variant.onnx"
    onnx.save(model, path)
    loaded = load_model(path)
    graph = lower(loaded)
    assert [n.op_type for n in graph.nodes] == ops
    golden_matches_qonnx(path, loaded, graph, inputs("deconv_tiny", 8, seed=11))


def test_fit_pynq_z2_golden():
    """``--fit pynq-z2``: the folded, stitched graph (SIMD > 1 on the padding layers, width converters,
    FIFOs) on the layers' goldens."""
    path = MODELS / "deconv_s2k4.onnx"
    runner = Runner()
    stitched = runner.run(COMPILE, path, CompileOptions(fit="pynq-z2"), stop="insert_fifos")
    assert runner.results["fold"].optimizer is not None
    pixel = [n for n in stitched.nodes if n.op_type == "FMPadding_Pixel"]
    assert len(pixel) == 2 and max(n.folding["SIMD"] for n in pixel) > 1
    golden_matches_qonnx(path, runner.results["load"], stitched, inputs("deconv_s2k4", 8, seed=6))


def test_model_hw_reads_back_and_runs_as_finn_would(tmp_path):
    """The compile's model_hw.onnx (FINN's FMPadding_Pixel: ImgDim, Stride, NumChannels, SIMD,
    inputDataType): FINN's semantics (sim.finn_exec, numpy of its own) on it equal the layers' goldens, and
    read back as FINN hardware-layer ONNX it lowers to the same layers with the same results."""
    from rtlgen.ir.model_hw import model_hw
    from sim.finn_exec import execute_finn_hw

    runner = Runner()
    stitched = runner.run(COMPILE, MODELS / "deconv_tiny.onnx", CompileOptions(), stop="insert_fifos")
    io = stream_io(runner.results["load"], stitched)
    x = inputs("deconv_tiny", 4, seed=10)
    codes = io.input_codes(x)
    ours = run_golden(stitched, codes)
    proto = model_hw(stitched)
    pixel = next(n for n in proto.graph.node if n.op_type == "FMPadding_Pixel")
    assert {a.name: onnx.helper.get_attribute_value(a) for a in pixel.attribute if a.name in ("ImgDim", "Stride")} \
        == {"ImgDim": [3, 3], "Stride": [2, 1]}
    c, h, w = SHAPES["deconv_tiny"]
    finn = execute_finn_hw(proto, codes.reshape(len(x), h, w, c).astype(np.float32))
    assert np.array_equal(finn.reshape(len(x), -1), ours)
    path = tmp_path / "model_hw.onnx"
    onnx.save(proto, path)
    again = Runner()
    read_back = again.run(COMPILE, path, CompileOptions(), stop="insert_fifos")
    assert [n.spec() for n in read_back.nodes if n.op_type == "FMPadding_Pixel"] == \
        [n.spec() for n in stitched.nodes if n.op_type == "FMPadding_Pixel"]
    assert np.array_equal(run_golden(read_back, codes), ours)


@pytest.mark.sim
def test_tiny_deconv_rtl_at_the_ii_under_backpressure(tmp_path):
    path = MODELS / "deconv_tiny.onnx"
    x = inputs("deconv_tiny", 6, seed=7)
    rtl_matches_qonnx(path, x, tmp_path, seed=3)


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.parametrize("name", ["deconv_s2k3", "deconv_s2k4"])
def test_deconv_rtl_at_the_ii_under_backpressure(name, tmp_path):
    path = MODELS / f"{name}.onnx"
    x = inputs(name, 4, seed=8)
    rtl_matches_qonnx(path, x, tmp_path, CompileOptions(fit="pynq-z2"), seed=4)


# ---- what is refused ----------------------------------------------------------------------------------

def _with_attributes(**attrs):
    """deconv_tiny loaded, its ConvTranspose's attributes changed (None: removed)."""
    model = load_model(MODELS / "deconv_tiny.onnx")
    node = next(n for n in model.graph.node if n.op_type == "ConvTranspose")
    for name, value in attrs.items():
        for a in [a for a in node.attribute if a.name == name]:
            node.attribute.remove(a)
        if value is not None:
            node.attribute.append(onnx.helper.make_attribute(name, value))
    return model, node


def test_output_shape_that_agrees_is_taken(tmp_path):
    """output_shape [6, 4] (what the pads give, split evenly as ONNX splits it) instead of the pads: the same
    hardware, bit-exact against qonnx on that model."""
    model = onnx.load(MODELS / "deconv_tiny.onnx")
    node = next(n for n in model.graph.node if n.op_type == "ConvTranspose")
    node.attribute.remove(next(a for a in node.attribute if a.name == "pads"))
    node.attribute.append(onnx.helper.make_attribute("output_shape", [6, 4]))
    path = tmp_path / "deconv_output_shape.onnx"
    onnx.save(model, path)
    loaded = load_model(path)
    graph = lower(loaded)
    assert [n.op_type for n in graph.nodes] == OPS["deconv_tiny"]
    golden_matches_qonnx(path, loaded, graph, inputs("deconv_tiny", 8, seed=9))


@pytest.mark.parametrize("attrs, message", [
    (dict(group=2), r"group=2; legal: group=1"),
    (dict(dilations=[2, 1]), r"dilations=\[2, 1\]; legal: \[1, 1\]"),
    (dict(auto_pad="SAME_UPPER"), r"auto_pad=SAME_UPPER; legal: NOTSET with explicit pads"),
    (dict(output_shape=[7, 4]), r"output_shape=\[7, 4\] disagrees with pads=\[1, 0, 1, 0\], strides=\[2, 1\] and "
                                r"output_padding=\[1, 0\]; legal: output_shape = "),
    (dict(output_shape=[4, 4]), r"output_shape=\[4, 4\] disagrees with pads"),
    (dict(pads=[3, 0, 1, 0]), r"pads=\[3, 0, 1, 0\]; legal: 4 pads, each in 0..kernel - 1 = 0..2 \(top, bottom\), "
                              r"0..1 \(left, right\)"),
    (dict(output_padding=[2, 0]), r"output_padding=\[2, 0\]; legal: each in 0..stride - 1 \(strides=\[2, 1\]\)"),
    (dict(kernel_shape=[3, 3]), r"kernel_shape=\[3, 3\] but weights of shape \(2, 4, 3, 2\); legal: "
                                r"kernel_shape=\[3, 2\]"),
    (dict(output_padding=[0, 0]), r"the model's output shape \[1, 4, 6, 4\] disagrees with the weights and "
                                  r"attributes, which give \[4, 5, 4\]"),
])
def test_refused_attributes_name_the_node(attrs, message):
    model, node = _with_attributes(**attrs)
    with pytest.raises(CompileError, match=rf"^node {node.name} \(ConvTranspose\): {message}"):
        lower(model)


def test_bipolar_input_is_refused():
    """Zeros between the pixels of BIPOLAR data have no code: the input quantizer made a BipolarQuant."""
    model, node = _with_attributes()
    quant = next(n for n in model.graph.node if n.output[0] == node.input[0])
    quant.op_type = "BipolarQuant"
    del quant.input[2:]
    for a in list(quant.attribute):
        quant.attribute.remove(a)
    with pytest.raises(CompileError, match=rf"^node {node.name} \(ConvTranspose\): zeros between and around the "
                                           rf"pixels of BIPOLAR data have no code; legal: an input datatype with a "
                                           rf"code for 0 \(not BIPOLAR\)$"):
        lower(model)


def test_per_output_channel_weight_scales(tmp_path):
    """Brevitas' per-channel weight quantizer puts a ConvTranspose's scale on axis 1 (its weights are
    (C, OC, KH, KW)): one scale per output channel, exact."""
    from qonnx.core.modelwrapper import ModelWrapper
    model = ModelWrapper(str(MODELS / "deconv_s2k3.onnx"))
    deconv = next(n for n in model.graph.node if n.op_type == "ConvTranspose")
    quant = model.find_producer(deconv.input[1])
    weights = model.get_initializer(quant.input[0])
    oc = weights.shape[1]
    scale = float(np.asarray(model.get_initializer(quant.input[1])).reshape(-1)[0])
    model.set_initializer(quant.input[1], (scale * np.linspace(0.5, 1.5, oc)).astype(np.float32).reshape(1, oc, 1, 1))
    path = tmp_path / "deconv_per_channel.onnx"
    model.save(str(path))
    loaded = load_model(path)
    graph = lower(loaded)
    assert "FMPadding_Pixel" in [n.op_type for n in graph.nodes]
    golden_matches_qonnx(path, loaded, graph, inputs("deconv_s2k3", 16, seed=9))
