"""An op plug-in declared entirely here, outside ``layers``/``swg``, with nothing in ``rtlgen`` touched: a toy
elementwise layer ``ToyAbs`` (|x| of integer codes), its spec (the :class:`layers.op.LayerSpec` contract), a
small Amaranth component, its ``lowers`` hook (ONNX ``Abs`` of a quantized stream) and its ``golden``. Once
registered (:func:`layers.op.register`), a model whose Abs sits between two quantized MatMuls compiles
with it in hardware, and the lowered graph (on the layers' goldens) and the stitched RTL (at the II and
under random backpressure) equal qonnx ``execute_onnx`` of the model bit for bit. Unregistered, the same
model is refused: the compiler reads the registry at compile time, not a copy taken at import."""

from dataclasses import dataclass

import numpy as np
import pytest
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data
from onnx import TensorProto, helper, numpy_helper
from qonnx.core.datatype import DataType
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.transformation.infer_shapes import InferShapes

from layers.datapath import (ChannelFolded, StreamLayer, check_dtype, check_fits, dtype_for_range, dtype_range,
                             element_value, output_stage, register)
from layers.op import Lowering, Op, Resources, divisors_of
from layers.op import register as register_op
from layers.op import unregister
from layers.timing import one_to_one
from rtlgen.check.execute import run_golden
from rtlgen.errors import CompileError
from rtlgen.passes.load import load_model
from rtlgen.passes.lower import lower
from rtlgen.passes.to_hw import stream_io

from tests.conftest import rtl_at_the_ii_under_backpressure


@dataclass(frozen=True, eq=False)
class ToyAbsSpec(ChannelFolded):
    """|x| per element: C channels of ``num_input_vectors`` vectors, PE lanes a word."""
    num_channels: int
    pe: int
    input_dtype: object
    output_dtype: object
    num_input_vectors: tuple = (1,)

    def __post_init__(self):
        for attr in ("input_dtype", "output_dtype"):
            object.__setattr__(self, attr, check_dtype("ToyAbs", attr, getattr(self, attr)))
        if self.num_channels % self.pe:
            raise ValueError(f"ToyAbs pe={self.pe} must divide num_channels={self.num_channels}")
        object.__setattr__(self, "num_input_vectors", tuple(self.num_input_vectors))
        lo, hi = dtype_range(self.input_dtype)
        check_fits("ToyAbs", "output_dtype", self.output_dtype, 0, max(-lo, hi), "|inputs|")

    latency = 4             # input register, result register, output FIFO (as ChannelwiseOp)

    def timing(self, arrivals):
        return one_to_one(self.latency, arrivals[0])

    def resource_estimate(self):
        return Resources(lut=self.pe * self.input_dtype.bitwidth() + 2 * self.out_width,
                         ff=self.in_width + 4 * self.out_width)


class ToyAbs(StreamLayer):
    """|x| of each lane, one word a cycle, two register stages and the output FIFO."""

    def elaborate(self, platform):
        spec = self.spec
        m = Module()
        advance, fifo_in = output_stage(m, self.o, spec.out_width)
        m.d.comb += self.i.ready.eq(advance)
        v0 = register(m, advance, self.i.valid & advance, name="v0", reset_less=False)
        x0 = register(m, advance, self.i.payload, name="x0")
        xs = data.View(data.ArrayLayout(spec.input_dtype.bitwidth(), spec.pe), x0)
        lanes = []
        for j in range(spec.pe):
            x = element_value(xs[j], spec.input_dtype)
            code = Signal(spec.output_dtype.bitwidth(), name=f"abs{j}")
            m.d.comb += code.eq(Mux(x < 0, -x, x) if spec.input_dtype.signed() else x)
            lanes.append(code)
        v1 = register(m, advance, v0, name="v1", reset_less=False)
        y1 = register(m, advance, Cat(lanes), name="y1")
        m.d.comb += [fifo_in.valid.eq(v1), fifo_in.payload.eq(y1)]
        return m


def lower_abs(ctx, node):
    """ONNX Abs of a per-tensor quantized stream: the codes' |x| at the same scale."""
    t = ctx.input(node)
    if t.kind != "codes" or np.ndim(t.scale) or t.gain != 1 or t.offset != 0 or t.dtype == DataType["BIPOLAR"]:
        return None                                 # not codes this layer can take: the host runs it
    lo, hi = dtype_range(t.dtype)
    dtype = dtype_for_range(0, max(-lo, hi))
    channels = t.shape[1] if t.spatial else t.shape[-1]
    vectors = (1, *t.shape[2:]) if t.spatial else (tuple(t.shape[:-1]) if len(t.shape) > 2 else (1,))
    ctx.add("ToyAbs", dict(num_channels=channels, input_dtype=t.dtype, output_dtype=dtype,
                           num_input_vectors=vectors), [node])
    return ctx.tensor(node.output[0], dtype, t.scale, row_order=t.row_order, rounding=t.rounding)


def golden_abs(spec, xs, producer):
    return np.abs(np.asarray(xs[0], dtype=np.int64))


TOY_ABS = Op("ToyAbs", ToyAbsSpec, ToyAbs, folding={"PE": "pe"}, parallelism={"PE": divisors_of("num_channels")},
             lowers=(Lowering(("Abs",), lower_abs),), golden=golden_abs)


@pytest.fixture
def toy_abs():
    register_op(TOY_ABS)
    try:
        yield TOY_ABS
    finally:
        unregister(TOY_ABS)


def abs_mlp(path):
    """x (1, 8) -> Quant -> MatMul (8 x 8) -> Quant (INT4) -> Abs -> MatMul (8 x 4) -> Quant (INT4) -> y."""
    rng = np.random.default_rng(3)
    inits, nodes = [], []

    def quant(name, x, scale, bits):
        for k, v in (("s", scale), ("z", 0.0), ("b", float(bits))):
            inits.append(numpy_helper.from_array(np.asarray(v, np.float32), f"{name}_{k}"))
        nodes.append(helper.make_node("Quant", [x, f"{name}_s", f"{name}_z", f"{name}_b"], [name], name=name,
                                      domain="qonnx.custom_op.general", signed=1, narrow=0, rounding_mode="ROUND"))

    quant("xq", "x", 0.25, 4)
    inits.append(numpy_helper.from_array((rng.integers(-4, 4, (8, 8)) * 0.125).astype(np.float32), "w1"))
    quant("w1q", "w1", 0.125, 3)
    nodes.append(helper.make_node("MatMul", ["xq", "w1q"], ["h"], name="MatMul_1"))
    quant("hq", "h", 0.5, 4)
    nodes.append(helper.make_node("Abs", ["hq"], ["a"], name="Abs_1"))
    inits.append(numpy_helper.from_array((rng.integers(-4, 4, (8, 4)) * 0.25).astype(np.float32), "w2"))
    quant("w2q", "w2", 0.25, 3)
    nodes.append(helper.make_node("MatMul", ["a", "w2q"], ["o"], name="MatMul_2"))
    quant("y", "o", 1.0, 4)
    graph = helper.make_graph(nodes, "abs_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], initializer=inits)
    ModelWrapper(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                         helper.make_opsetid("qonnx.custom_op.general", 1)])).save(str(path))
    return path


def qonnx_outputs(path, x):
    model = ModelWrapper(str(path)).transform(InferShapes())
    return np.stack([execute_onnx(model, {"x": xi})["y"] for xi in x])


def inputs(n):
    return (2 * np.random.default_rng(5).standard_normal((n, 1, 8))).astype(np.float32)


def test_the_plugin_lowers_abs_and_the_graph_matches_qonnx(tmp_path, toy_abs):
    path = abs_mlp(tmp_path / "abs_mlp.onnx")
    model = load_model(path)
    graph = lower(model)
    assert [n.op_type for n in graph.nodes] == ["MVAU", "ToyAbs", "MVAU"]
    assert graph.host_post == []
    io = stream_io(model, graph)
    x = inputs(32)
    ours = io.output_from_codes(run_golden(graph, io.input_codes(x)))
    reference = qonnx_outputs(path, x)
    assert np.abs(reference).max() > 0 and len(np.unique(reference)) > 3        # not a constant output
    np.testing.assert_array_equal(np.asarray(ours).reshape(reference.shape), reference)


def test_unregistered_the_abs_is_not_hardware_and_the_model_is_refused(tmp_path):
    path = abs_mlp(tmp_path / "abs_mlp.onnx")
    with pytest.raises(CompileError, match=r"\(Abs\) cannot be mapped to hardware and is not at the graph's edge"):
        lower(load_model(path))


@pytest.mark.sim
def test_the_plugin_in_rtl_is_bit_exact_at_the_ii_and_under_backpressure(tmp_path, toy_abs):
    path = abs_mlp(tmp_path / "abs_mlp.onnx")
    x = inputs(16)
    outputs, _ = rtl_at_the_ii_under_backpressure(path, x, tmp_path / "out", seed=3)
    reference = qonnx_outputs(path, x)
    np.testing.assert_array_equal(np.asarray(outputs).reshape(reference.shape), reference)
