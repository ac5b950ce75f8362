"""Models shaped like other exporters' (tests/models/exporters/make_models.py, Brevitas): a LeakyReLU
absorbed into thresholds, a channels-last input (Transpose on the host), a last layer with a float bias
and no quantizer, a non-global average pool, initializers listed as graph inputs. Each is compared
with qonnx's execute_onnx on the original model."""

import json
from pathlib import Path

import numpy as np
import pytest

from rtlgen.compiler import CompileOptions, _stream_io, compile_model
from rtlgen.emit import write_outputs
from rtlgen.execute import run_golden
from rtlgen.frontend import load_model
from rtlgen.lower import lower
from rtlgen.verify import compare, qonnx_reference, simulate_model, tolerance
from sim.harness import Backpressure

MODELS = Path(__file__).parent / "models" / "exporters"

# model -> (input shape, ops the accelerator must have, host ops before, host ops after, exact)
CASES = {
    "leaky_mlp": ((1, 16), {"MVAU": 2}, ["Quant"], [], True),
    "channels_last": ((1, 6, 6, 3), {"MVAU": 2}, ["Transpose", "Quant"], [], True),
    "float_bias_head": ((1, 3, 4, 4), {"MVAU": 2}, ["Quant"], ["Add"], False),
    "avgpool_net": ((1, 3, 8, 8), {"VVAU": 1, "MVAU": 2}, ["Quant"], [], True),
    "bn_graph_inputs": ((1, 3, 8, 8), {"VVAU": 1, "MVAU": 2}, ["Quant"], [], True),
}
# qonnx itself cannot run a model whose initializers are also graph inputs ("Multiple ValueInfoProto"):
# its reference is the same network saved the modern way.
REFERENCE = {"bn_graph_inputs": "avgpool_net"}


def _inputs(name, n, seed=0):
    shape = CASES[name][0]
    return (2 * np.random.default_rng(seed).standard_normal((n, *shape[1:]))).astype(np.float32)


def _reference(name, x):
    return qonnx_reference(MODELS / f"{REFERENCE.get(name, name)}.onnx", x)


def _ops(model, names):
    by_name = {n.name: n.op_type for n in model.graph.node}
    return [by_name[n] for n in names]


@pytest.mark.parametrize("name", CASES)
def test_lowered_graph_matches_qonnx(name):
    _, ops, pre, post, exact = CASES[name]
    model = load_model(MODELS / f"{name}.onnx")
    graph = lower(model)
    io = _stream_io(model, graph)
    kinds = [n.op_type for n in graph.nodes]
    for op, count in ops.items():
        assert kinds.count(op) == count, kinds
    assert _ops(model, graph.host_pre) == pre and _ops(model, graph.host_post) == post
    x = _inputs(name, 16)
    result = compare(io.output_from_codes(run_golden(graph, io.input_codes(x))), _reference(name, x),
                     rtol=tolerance(io))
    assert result.passed, result.summary()
    assert result.exact == exact, result.summary()      # a float bias on the host: float32 rounding only


def test_window_average_is_an_all_ones_depthwise_sum():
    graph = lower(load_model(MODELS / "avgpool_net.onnx"))
    vvau = next(n for n in graph.nodes if n.op_type == "VVAU")
    swg = graph.predecessors(vvau)[0]
    assert swg.op_type == "ConvolutionInputGenerator" and swg.params["depthwise"]
    assert swg.params["kernel"] == (2, 2) and swg.params["stride"] == (2, 2)
    assert (np.asarray(vvau.params["weights"]) == 1).all() and vvau.params["thresholds"] is not None


@pytest.mark.sim
def test_average_pool_net_rtl_bit_exact_under_backpressure(tmp_path):
    compiled = compile_model(MODELS / "avgpool_net.onnx", CompileOptions())
    write_outputs(compiled, tmp_path)
    report = json.loads((tmp_path / "report.json").read_text())
    x = _inputs("avgpool_net", 6, seed=1)
    ref = _reference("avgpool_net", x)
    full = simulate_model(compiled.verilog, compiled.io, x, report)
    assert compare(full.outputs, ref).exact
    ii = report["analytic_cycles_per_frame"]
    assert abs(full.cycles_per_frame / ii - 1) <= 0.02, (full.cycles_per_frame, ii)
    stalled = simulate_model(compiled.verilog, compiled.io, x, report,
                             backpressure=Backpressure(seed=3, valid_prob=0.6, ready_prob=0.5))
    assert compare(stalled.outputs, ref).exact
