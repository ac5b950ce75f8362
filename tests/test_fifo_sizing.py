"""FIFO sizing without simulating the design (:mod:`rtlgen.passes.size_fifos`).

1. The composed timing model is the design's timing: with FIFOs deep enough never to fill, the stitched
   network simulated at full rate moves every input and output word at the cycle the model says.
2. The analytic depths are enough: the network compiled with them runs at its II (within 2 %, as
   measured at full rate) and gives the same words under random backpressure, and no FIFO is shallower
   than its join bound. Simulation-sized depths are listed beside them in BENCHMARKS.md
   (``python -m benchmarks.compiler``).
"""

from pathlib import Path

import numpy as np
import pytest

from rtlgen.passes import insert, size_fifos as sizing
from rtlgen.backend.simulate import simulate_chain
from rtlgen.options import CompileOptions
from rtlgen.backend.compile import compile_model
from rtlgen.demo import DEMO_MODEL, bundled
from rtlgen.analyses.timing import graph_timing, latency_cycles, paced_arrivals, tensor_words
from rtlgen.ir.graph import is_role
from rtlgen.passes.size_fifos import analytic_fifo_depths
from sim.harness import Backpressure

MODELS = Path(__file__).parent / "models"
NETWORKS = {
    "digits-mlp": (bundled(DEMO_MODEL), dict(target_fps=100_000)),                  # MVAUs, DWCs
    "tfc-w2a2": (MODELS / "TFC_2W2A.onnx", dict(target_fps=200_000)),
    "residual-mlp": (MODELS / "branching" / "mlp_residual.onnx", {}),              # a join
    "resnet-block": (MODELS / "branching" / "resnet_block.onnx", {}),               # SWGs on both paths
    "concat": (MODELS / "branching" / "concat_mixed.onnx", {}),
    "small-cnn": (MODELS / "small_cnn.onnx", dict(target_fps=50_000)),            # SWG, pooling, padding
}
FRAMES = 3
EXACTNESS = ["digits-mlp", "resnet-block", "concat", "small-cnn"]


def _run(design, inputs, outputs, **kwargs):
    """Whole networks run on the compiled Verilator bench, as ``rtlgen sim`` runs them."""
    return simulate_chain(design, inputs, outputs, compiled=True, **kwargs)


def _folded(name, cache={}):
    if name not in cache:
        model, options = NETWORKS[name]
        cache[name] = compile_model(model, CompileOptions(fifo_sizing="none", **options))
    return cache[name]


@pytest.mark.sim
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n != "small-cnn" else n
                                  for n in EXACTNESS])    # CI time: concat runs at the II below, small-cnn covers
                                                          # DWCs, SWGs, pooling and padding (digits-mlp: 22 s)
def test_composed_model_is_the_designs_timing(name):
    compiled = _folded(name)
    graph = insert.insert_duplicates(compiled.folded)
    words = tensor_words(insert.insert_dwcs_and_fifos(graph))
    never_full = {f: FRAMES * words[insert.insert_dwcs_and_fifos(graph).node(f).inputs[0]] + 4
                  for f in sizing.tensor_fifo_depths(graph)}
    deep = insert.insert_dwcs_and_fifos(graph, never_full)
    n_in, n_out = FRAMES * words[deep.input], FRAMES * words[deep.output]
    model = graph_timing(deep, 1 + np.arange(n_in))             # the bench offers word n at edge n + 1 at best
    run = _run(deep, [0] * n_in, n_out)
    np.testing.assert_array_equal(model.leave[deep.input], run.in_cycles("s_axis_0"))
    np.testing.assert_array_equal(model.leave[deep.output], run.out_cycles("m_axis_0"))


@pytest.mark.sim
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in ("resnet-block", "concat", "tfc-w2a2")
                                  else n for n in sorted(NETWORKS)])    # CI time; residual-mlp has a join by
                                                                        # default, digits-mlp is an MLP as TFC
def test_analytic_depths_run_at_the_ii(name):
    compiled = _folded(name)
    graph = insert.insert_dwcs_and_fifos(insert.insert_duplicates(compiled.folded))
    depths = analytic_fifo_depths(graph)
    sized = sizing.check_fifo_depths(insert.insert_dwcs_and_fifos(insert.insert_duplicates(compiled.folded), depths))
    ii = max(n.spec().exp_cycles for n in sized.nodes)
    words = tensor_words(sized)
    frames = 6
    rng = np.random.default_rng(1)
    inputs = [int(w) for w in rng.integers(0, 2 ** 8, frames * words[sized.input])]
    full = _run(sized, inputs, frames * words[sized.output])
    steady = full.steady_cycles("m_axis_0", words[sized.output])
    assert abs(steady / ii - 1) <= 0.02, (steady, ii, depths)
    stalled = _run(sized, inputs, frames * words[sized.output],
                   backpressure=Backpressure(seed=4, valid_prob=0.7, ready_prob=0.6))
    assert stalled.words("m_axis_0") == full.words("m_axis_0")
    # the model's own II under paced input is the design's
    timing = graph_timing(sized, paced_arrivals(words[sized.input], frames, ii))
    ends = timing.frame_ends(sized.output, words[sized.output])
    assert ends[-1] - ends[-2] == ii


@pytest.mark.sim
@pytest.mark.parametrize("name", ["digits-mlp", "residual-mlp", "small-cnn"])
def test_latency_is_what_simulation_measures(name):
    """One frame into the idle design with its analytic FIFOs: first input word to last output word."""
    compiled = _folded(name)
    graph = insert.insert_dwcs_and_fifos(insert.insert_duplicates(compiled.folded))
    sized = insert.insert_dwcs_and_fifos(insert.insert_duplicates(compiled.folded), analytic_fifo_depths(graph))
    words = tensor_words(sized)
    run = _run(sized, [0] * words[sized.input], words[sized.output])
    measured = run.out_cycles("m_axis_0")[-1] - run.in_cycles("s_axis_0")[0] + 1
    assert latency_cycles(sized) == measured


@pytest.mark.sim
def test_report_latency_is_the_simulated_latency(tmp_path):
    """report.json's latency_cycles (the model, one frame into the idle design) is what `simulate` measures."""
    from rtlgen import api
    data = np.load(bundled("digits_tfc_w2a2i2_testset.npz"))
    design = api.compile(bundled(DEMO_MODEL), tmp_path / "out")
    run = design.simulate(data["x"][:1])
    assert design.report["latency_cycles"] == run.latency


@pytest.mark.sim
def test_sim_json_measures_rate_and_latency(tmp_path, capsys):
    """`rtlgen sim OUT --json`: one JSON object; the measured latency is the report's, the rate its II."""
    import json
    from rtlgen.cli import main
    data = np.load(bundled("digits_tfc_w2a2i2_testset.npz"))
    np.save(tmp_path / "x.npy", data["x"][:8])
    assert main(["compile", str(bundled(DEMO_MODEL)), "-o", str(tmp_path / "out"), "-q"]) == 0
    capsys.readouterr()
    assert main(["sim", str(tmp_path / "out"), "--input", str(tmp_path / "x.npy"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["frames"] == 8 and got["latency_cycles"] == got["analytic_latency_cycles"]
    assert abs(got["cycles_per_frame"] / got["analytic_cycles_per_frame"] - 1) <= 0.02
    assert got["frames_per_second"] == round(got["clock_mhz"] * 1e6 / got["cycles_per_frame"], 1)


# Latency (cycles) and FIFO depths (StreamingFIFO_0, _1, ...) the composed model gave before its models were
# vectorized for large feature maps (issue 46 item 6: the general width converter a word at a time, a
# converter rerun behind every consumer, fresh arrays everywhere; commit ebc0ff0): the faster models must
# give these exactly. espcn-16 has the general converters (32 -> 36, 64 -> 48), padding and upsampling.
WORD_BY_WORD = {
    "digits-mlp": (2137, [32, 32, 32, 56, 2]),
    "resnet-block": (1981, [32, 32, 2, 2, 32, 2, 70, 32, 2, 70, 2, 2, 358, 2, 2, 2, 96, 2, 32, 2, 2, 32, 2, 48, 2,
                            188, 2, 2, 2, 2, 2]),
    "upsample-concat": (1456, [32, 32, 2, 2, 32, 2, 32, 32, 32, 61, 98, 2, 102, 2, 2, 2, 2]),
    "small-cnn": (2864, [2, 32, 32, 2, 2, 53, 2, 2, 2, 2]),
    "espcn-16": (28396, [2, 70, 32, 1058, 2, 2, 32, 256, 32, 1725, 2]),
}
RECORDED = {**NETWORKS, "upsample-concat": (MODELS / "branching" / "upsample_concat.onnx", {}),
            "espcn-16": (MODELS / "espcn" / "espcn_16.onnx", {})}


@pytest.mark.parametrize("name", sorted(WORD_BY_WORD))
def test_depths_and_latency_are_what_the_word_by_word_models_gave(name):
    from rtlgen.backend.compile import COMPILE
    from rtlgen.flows import Runner
    model, options = RECORDED[name]
    stitched = Runner().run(COMPILE, model, CompileOptions(**options), stop="insert_fifos")
    fifos = sorted((n for n in stitched.nodes if is_role(n, "fifo")), key=lambda n: int(n.name.split("_")[-1]))
    assert [n.name for n in fifos] == [f"StreamingFIFO_{k}" for k in range(len(fifos))]
    assert (latency_cycles(stitched), [n.folding["depth"] for n in fifos]) == WORD_BY_WORD[name]
