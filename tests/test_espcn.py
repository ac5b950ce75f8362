"""A super-resolution CNN on large feature maps (issue 46 item 6): tests/models/espcn, shaped like qonnx's
ESPCN test model (8-bit input, a 5x5 and a 3x3 convolution, a nearest-neighbour x2 Resize, a 3x3
convolution, 8-bit output; make_espcn.py) at 16x16 and 128x128. At 128x128 the folding optimizer's
slowest candidates want FIFOs deeper than 65,536 words (104,542 in front of a slow MVAU): legal, in block
RAM (layers/fifo.py); once the internal error that stopped `--fit`. Golden: qonnx's execute_onnx on the
original model."""

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import golden_matches_qonnx, rtl_matches_qonnx
from rtlgen.costmodel import estimate
from rtlgen.backend.compile import COMPILE
from rtlgen.flows import Runner
from rtlgen.ir.graph import op_with_role
from rtlgen.options import CompileOptions
from rtlgen.fit import Budget
from rtlgen.passes.optimize import RESOURCES

MODELS = Path(__file__).parent / "models" / "espcn"
TINY, LARGE = MODELS / "espcn_16.onnx", MODELS / "espcn_128.onnx"
LAYERS = ["FMPadding", "ConvolutionInputGenerator", "MVAU", "FMPadding", "ConvolutionInputGenerator", "MVAU",
          "UpsampleNearestNeighbour", "FMPadding", "ConvolutionInputGenerator", "MVAU"]


def images(size, n, seed):
    return np.random.default_rng(seed).standard_normal((n, 1, 1, size, size)).astype(np.float32)


def stitched(path, options):
    """(the graph as stitched, through the FIFO sizing, and the runner that made it)."""
    runner = Runner()
    graph = runner.run(COMPILE, path, options, stop="insert_fifos")
    return graph, runner


def fifo_depths(graph):
    fifo = op_with_role("fifo").op_type
    return {n.name: n.folding["depth"] for n in graph.nodes if n.op_type == fifo}


@pytest.mark.parametrize("options", [CompileOptions(), CompileOptions(fit="pynq-z2")], ids=["default", "fit"])
def test_tiny_espcn_matches_qonnx(options):
    graph, runner = stitched(TINY, options)
    assert [n.op_type for n in runner.results["to_hw"].nodes] == LAYERS
    assert (runner.results["fold"].optimizer is not None) == (options.fit is not None)
    golden_matches_qonnx(TINY, runner.results["load"], graph, images(16, 4, seed=1))


@pytest.mark.slow          # CI time: 170 s cold (a 64-channel 5x5 layer, Verilator), beyond the default suite's 40 s
@pytest.mark.sim
def test_tiny_espcn_rtl_at_the_ii_under_backpressure(tmp_path):
    x = images(16, 2, seed=2)
    rtl_matches_qonnx(TINY, x, tmp_path, seed=5)


def test_large_espcn_fits_the_pynq_z2():
    """``--fit pynq-z2`` at 128x128 compiles (no RTL): the optimizer's fastest design within the budget, its
    estimate, FIFOs at their analytic depths included, within the budget."""
    options = CompileOptions(fit="pynq-z2")
    graph, runner = stitched(LARGE, options)
    chosen = runner.results["fold"].optimizer
    assert chosen.ii == max(n.spec().exp_cycles for n in graph.nodes) < 400_000
    total = sum(estimate(n.spec()) for n in graph.nodes)
    used = np.array([float(total[r]) for r in RESOURCES])
    assert (used <= Budget.for_board("pynq-z2").as_vector() + 1e-9).all(), used
    assert max(fifo_depths(graph).values()) > 32


@pytest.mark.slow
def test_large_espcn_slowest_folding_counts_its_deep_fifo():
    """The kind of folding the optimizer used to crash on (every layer at its least parallelism: an II of
    302 M cycles): its FIFO sizing wants more than 65,536 words in front of the slow MVAU, and the estimate
    of the inserted nodes counts that FIFO's block RAM (2.8 GB and some 20 s of timing models)."""
    from layers.memcost import ram_cost
    from rtlgen.passes.insert import stream_plan
    from rtlgen.passes.optimize import inserted_estimate
    from rtlgen.passes.size_fifos import analytic_fifo_depths
    graph = Runner().run(COMPILE, LARGE, CompileOptions(), stop="to_hw")
    for node in graph.nodes:
        for attr in node.op.parallelism:
            node.folding[attr] = 1
    plan = stream_plan(graph)
    depths = analytic_fifo_depths(plan)
    deepest = max(depths, key=depths.get)
    assert depths[deepest] > 65_536
    width = next(n for n in plan.nodes if n.name == deepest).spec().width
    assert inserted_estimate(graph)[RESOURCES.index("BRAM18")] >= ram_cost(width, depths[deepest]).bram18 > 0


@pytest.mark.slow
@pytest.mark.sim
def test_large_espcn_fit_rtl_at_the_ii_under_backpressure(tmp_path):
    x = images(128, 2, seed=3)
    rtl_matches_qonnx(LARGE, x, tmp_path, CompileOptions(fit="pynq-z2"), seed=6)
