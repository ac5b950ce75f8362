"""Branching networks: residual Adds, channel Concats, tensors read by several nodes.

The models are Brevitas exports (``tests/models/branching/make_models.py`` writes them; torch is not
needed here). The lowered graph runs on the layers' numpy goldens and the stitched RTL on the compiled
Verilator bench, both against qonnx ``execute_onnx`` of the untouched model, at full rate and under
random backpressure; FIFOs in front of joins are sized so that the short branch buffers the long one's
lead, and an undersized one is caught before it ships.
"""

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from rtlgen.analyses.timing import tensor_words
from rtlgen.passes import insert, size_fifos as sizing
from rtlgen.backend.simulate import simulate_chain, simulated_fifo_depths
from rtlgen.cli import main
from rtlgen.options import CompileOptions
from rtlgen.passes.to_hw import stream_io
from rtlgen.passes.insert import insert_duplicates
from rtlgen.backend.compile import compile_model
from rtlgen.passes.fold import fold
from rtlgen.check.execute import run_golden
from rtlgen.passes.load import CompileError, load_model
from rtlgen.ir.graph import StreamTensor
from rtlgen.passes.exact_scales import float32_sum_is_exact
from rtlgen.passes.lower import lower
from rtlgen.check.verify import compare, qonnx_reference, simulate_model
from sim.harness import Backpressure
from sim.runner import SimulationError

BRANCHING = Path(__file__).parent / "models" / "branching"

# model -> (input shape, {op type: count} the lowering must produce)
MODELS = {
    "resnet_block": ((1, 4, 8, 8), {"AddStreams": 2, "ChannelwiseOp": 2}),
    "resnet_requant": ((1, 4, 8, 8), {"AddStreams": 1, "ChannelwiseOp": 2}),
    "mobilenetv2_block": ((1, 4, 8, 8), {"AddStreams": 1, "VVAU": 1}),
    "concat_net": ((1, 4, 8, 8), {"StreamingConcat": 1}),
    "concat_mixed": ((1, 4, 8, 8), {"StreamingConcat": 1, "ChannelwiseOp": 3}),
    "fanout3": ((1, 4, 8, 8), {"AddStreams": 2, "ChannelwiseOp": 1}),
    "mlp_residual": ((1, 16), {"AddStreams": 1}),
    "upsample_concat": ((1, 4, 8, 8), {"UpsampleNearestNeighbour": 1, "StreamingConcat": 1}),
}
FAST = ["mlp_residual", "mobilenetv2_block"]          # RTL in the default suite; the others are slow


def inputs(name, n, seed=0):
    shape = MODELS[name][0]
    return (2 * np.random.default_rng(seed).standard_normal((n, *shape[1:]))).astype(np.float32)


def lowered(name):
    model = load_model(BRANCHING / f"{name}.onnx")
    graph = lower(model)
    return model, graph, stream_io(model, graph)


@pytest.mark.parametrize("name", MODELS)
def test_lowered_graph_matches_qonnx(name):
    """Host pre ops -> the graph's layer goldens -> host post ops equals qonnx bit for bit."""
    model, graph, io = lowered(name)
    ops = [n.op_type for n in graph.nodes]
    for op, count in MODELS[name][1].items():
        assert ops.count(op) == count, ops
    x = inputs(name, 16)
    ours = io.output_from_codes(run_golden(graph, io.input_codes(x)))
    result = compare(ours, qonnx_reference(BRANCHING / f"{name}.onnx", x))
    assert result.exact, result.summary()


def test_fanout_is_an_edge_with_several_consumers_until_duplicates_are_inserted():
    _, graph, _ = lowered("fanout3")
    fanned = [t for t, _, consumers in graph.edges() if len(consumers) == 3]
    assert len(fanned) == 1
    folded = fold(graph, CompileOptions())
    duplicated = insert_duplicates(folded)
    dups = [n for n in duplicated.nodes if n.op_type == "DuplicateStreams"]
    assert [d.spec().num_output_streams for d in dups] == [3]
    assert all(len(c) == (t != duplicated.output) for t, _, c in duplicated.edges())
    # the passes left their inputs alone
    assert not any(n.op_type == "DuplicateStreams" for n in folded.nodes)
    assert [n.folding for n in graph.nodes] != [n.folding for n in folded.nodes]


# ---------------------------------------------------------------------------------------------- RTL

def _compiled(name, tmp_path_factory, cache={}):
    if name not in cache:
        out = tmp_path_factory.mktemp(name)
        compiled = compile_model(BRANCHING / f"{name}.onnx", CompileOptions())
        from rtlgen.backend.emit import write_outputs
        write_outputs(compiled, out)
        cache[name] = compiled, out
    return cache[name]


def _rtl_case(name, tmp_path_factory):
    compiled, out = _compiled(name, tmp_path_factory)
    report = json.loads((out / "report.json").read_text())
    x = inputs(name, 12, seed=1)
    ref = qonnx_reference(BRANCHING / f"{name}.onnx", x)
    full = simulate_model(compiled.verilog, compiled.io, x, report)
    assert compare(full.outputs, ref).exact
    ii = report["analytic_cycles_per_frame"]
    assert abs(full.cycles_per_frame / ii - 1) <= 0.02, (full.cycles_per_frame, ii)
    stalled = simulate_model(compiled.verilog, compiled.io, x, report,
                             backpressure=Backpressure(seed=5, valid_prob=0.6, ready_prob=0.5))
    assert compare(stalled.outputs, ref).exact
    assert stalled.cycles >= full.cycles        # equal where the II, not the ports, limits the rate


@pytest.mark.sim
@pytest.mark.parametrize("name", FAST)
def test_rtl_bit_exact_at_ii_and_under_backpressure(name, tmp_path_factory):
    _rtl_case(name, tmp_path_factory)


@pytest.mark.slow
@pytest.mark.parametrize("name", [m for m in MODELS if m not in FAST])
def test_rtl_bit_exact_at_ii_and_under_backpressure_slow(name, tmp_path_factory):
    _rtl_case(name, tmp_path_factory)


@pytest.mark.sim
def test_undersized_branch_fifo_is_detected_not_shipped():
    """mlp_residual's shortcut must hold the long branch's first input vector: depth-2 FIFOs fail the
    analytic check, and the simulation of that design indeed hangs; the sized design passes both."""
    _, graph, io = lowered("mlp_residual")
    graph = insert_duplicates(fold(graph, CompileOptions()))
    bounds = sizing.branch_fifo_bounds(insert.insert_dwcs_and_fifos(graph))
    name, bound = max(bounds.items(), key=lambda item: item[1])
    assert bound >= 8
    shallow = insert.insert_dwcs_and_fifos(graph)
    with pytest.raises(ValueError, match=f"{name} \\(depth 2\\) in front of a join"):
        sizing.check_fifo_depths(shallow)
    words_in = tensor_words(shallow)[shallow.input]
    words_out = tensor_words(shallow)[shallow.output]
    with pytest.raises(SimulationError):
        simulate_chain(shallow, [0] * 3 * words_in, 3 * words_out, compiled=True, blank_memories=True)
    sized = insert.insert_dwcs_and_fifos(graph, simulated_fifo_depths(graph))
    sizing.check_fifo_depths(sized)
    assert sized.node(name).spec().depth >= bound


def test_analytic_depths_without_simulation_cover_the_bound():
    _, graph, _ = lowered("mlp_residual")
    graph = insert_duplicates(fold(graph, CompileOptions()))
    depths = sizing.join_fifo_depths(graph)
    sizing.check_fifo_depths(insert.insert_dwcs_and_fifos(graph, depths))


# ---------------------------------------------------------------------------------------------- outputs

@pytest.mark.sim
def test_model_hw_and_report_show_the_branches(tmp_path):
    from qonnx.core.modelwrapper import ModelWrapper

    out = tmp_path / "out"
    assert main(["compile", str(BRANCHING / "mlp_residual.onnx"), "-o", str(out), "--fifo-sizing", "none",
                 "--keep-intermediate"]) == 0
    hw = ModelWrapper(str(out / "model_hw.onnx"))
    ops = [n.op_type for n in hw.graph.node]
    assert ops.count("DuplicateStreams") == 1 and ops.count("AddStreams") == 1
    dup = hw.get_nodes_by_op_type("DuplicateStreams")[0]
    branches = [hw.find_consumer(t) for t in dup.output]
    assert len(branches) == 2 and all(b is not None for b in branches)
    add = hw.get_nodes_by_op_type("AddStreams")[0]
    assert len([i for i in add.input if hw.find_producer(i) is not None]) == 2
    report = json.loads((out / "report.json").read_text())
    by_name = {row["name"]: row for row in report["layers"]}
    assert by_name[add.name]["inputs"] == list(add.input[:2])
    assert set(by_name) == {n.name for n in hw.graph.node}
    kept = sorted(p.name for p in (out / "intermediate").iterdir())
    assert kept == ["01_to_hw.onnx", "02_fold.onnx", "03_insert_duplicates.onnx", "04_insert_fifos.onnx"]


# ---------------------------------------------------------------------------------------------- errors

def test_unsupported_op_in_a_branch_names_it(tmp_path, capsys):
    model = onnx.load(str(BRANCHING / "mlp_residual.onnx"))
    add = next(n for n in model.graph.node if n.op_type == "Add")
    shortcut = add.input[0] if any(n.output[0] == add.input[0] and n.name == "Quant_0" for n in model.graph.node) \
        else add.input[1]
    model.graph.node.insert(list(model.graph.node).index(add),
                            helper.make_node("Floor", [shortcut], ["floored"], name="Floor_shortcut"))
    add.input[list(add.input).index(shortcut)] = "floored"
    path = tmp_path / "floor.onnx"
    onnx.save(model, str(path))
    assert main(["compile", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "node Floor_shortcut (Floor) cannot be mapped to hardware" in err[0], err


def test_resize_that_does_not_copy_pixels_is_refused(tmp_path, capsys):
    """A bilinear Resize interpolates: not an upsampler; the error names the node and its modes."""
    model = onnx.load(str(BRANCHING / "upsample_concat.onnx"))
    resize = next(n for n in model.graph.node if n.op_type == "Resize")
    next(a for a in resize.attribute if a.name == "mode").s = b"linear"
    path = tmp_path / "bilinear.onnx"
    onnx.save(model, str(path))
    assert main(["compile", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "node Resize_0 (Resize) with coordinate_transformation_mode=asymmetric, " \
        "mode=linear, nearest_mode=floor does not copy each pixel 2 x 2 times" in err[0], err


def test_residual_sum_with_float_scales_is_marked_inexact():
    """Scales 0.1 and 0.3: the model's float32 sum of the two is not the integer sum at scale 0.1 (the
    hardware adds exactly; verify names the resulting float32 ties). Powers of two: exact."""
    from qonnx.core.datatype import DataType

    a = StreamTensor("a", DataType["INT4"], 0.1, (1, 8))
    b = StreamTensor("b", a.dtype, 0.3, (1, 8))
    assert not float32_sum_is_exact(a, b, [1, 3], 0.1)
    assert float32_sum_is_exact(StreamTensor("a", a.dtype, 0.125, (1, 8)), StreamTensor("b", a.dtype, 0.25, (1, 8)),
                                [1, 2], 0.125)


# ---------------------------------------------------------------------------------------------- --input-dtype

def _without_input_quantizer(tmp_path):
    """mlp_residual with its input Quant removed: the graph input itself feeds the MatMul and the Add."""
    model = onnx.load(str(BRANCHING / "mlp_residual.onnx"))
    quant = next(n for n in model.graph.node if n.op_type == "Quant" and n.input[0] == model.graph.input[0].name)
    for node in model.graph.node:
        node.input[:] = [model.graph.input[0].name if i == quant.output[0] else i for i in node.input]
    model.graph.node.remove(quant)
    path = tmp_path / "no_input_quant.onnx"
    onnx.save(model, str(path))
    return path


@pytest.mark.sim
def test_input_dtype_annotates_an_unquantized_input(tmp_path, capsys):
    path = _without_input_quantizer(tmp_path)
    x = np.random.default_rng(3).integers(-8, 8, size=(10, 1, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["compile", str(path), "-o", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "--input-dtype" in err and len(err.strip().splitlines()) == 1, err
    assert main(["verify", str(path), "--input", str(tmp_path / "x.npy"), "--input-dtype", "INT4",
                 "--fifo-sizing", "none"]) == 0
    assert "bit-exact: 10 samples" in capsys.readouterr().out
    assert main(["compile", str(path), "-o", str(tmp_path / "b"), "--input-dtype", "FLOAT32"]) == 2
    assert "--input-dtype FLOAT32: not an integer or fixed-point qonnx DataType" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- other exporters

def test_quant_nodes_in_the_default_onnx_domain(tmp_path):
    """Some exporters put Quant in the default domain; qonnx's cleanup moves it to its own and lowering
    gives the same graph, bit-exact against qonnx on the original model."""
    model = onnx.load(str(BRANCHING / "mlp_residual.onnx"))
    for node in model.graph.node:
        if node.op_type == "Quant":
            node.domain = ""
    path = tmp_path / "default_domain.onnx"
    onnx.save(model, str(path))
    loaded = load_model(path)
    graph = lower(loaded)
    io = stream_io(loaded, graph)
    x = inputs("mlp_residual", 8)
    ours = io.output_from_codes(run_golden(graph, io.input_codes(x)))
    assert compare(ours, qonnx_reference(BRANCHING / "mlp_residual.onnx", x)).exact


def test_input_codes_survive_float32_rounding_of_large_values():
    """An INT8 input quantizer with scale 0.7: values up to ~90 are 0.7 * code only up to float32
    rounding (a few 1e-6), which must not read as 'not integers'; half a step off still does."""
    from qonnx.core.datatype import DataType
    from sim.stream_io import StreamEnd, StreamIO

    end = StreamEnd("x", (1, 256), DataType["INT8"], 0.7, 1)
    io = StreamIO("x", (1, 256), "y", end, end)
    codes = np.arange(-128, 128)
    real = (0.7 * codes).astype(np.float32)[None, :]
    assert np.abs(real.astype(np.float64) - 0.7 * codes).max() > 1e-6
    assert np.array_equal(io.input_codes(real)[0], codes)
    with pytest.raises(ValueError, match="not integers of INT8"):
        io.input_codes(real + np.float32(0.35))
