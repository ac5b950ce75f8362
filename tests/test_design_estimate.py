"""The fold pass's cost of the inserted nodes (issue 30, item 4): ``optimize.design_estimate`` costs the
fan-outs, DWCs and FIFOs of ``insert.stream_plan`` (a pure function of the folded graph, no graph built),
and must equal, independently, the estimate of the graph the insertion passes actually build with the
FIFOs at their analytic depths, on every network and folding below."""

from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from rtlgen.costmodel import estimate
from rtlgen.options import CompileOptions
from rtlgen.passes.fold import set_folding
from rtlgen.passes.insert import insert_duplicates, insert_dwcs_and_fifos, stream_plan
from rtlgen.passes.load import load_model
from rtlgen.passes.optimize import RESOURCES, design_estimate, inserted_estimate
from rtlgen.passes.size_fifos import analytic_fifo_depths
from rtlgen.passes.to_hw import to_hw

MODELS = Path(__file__).parent / "models"
NETWORKS = ["TFC_2W2A.onnx", "cnv_1w1a_ts_clean.onnx", "branching/resnet_block.onnx",
            "branching/mobilenetv2_block.onnx", "branching/upsample_concat.onnx", "mlperf_tiny/ds_cnn.onnx"]
TARGETS = (1000, 10000, 100000)


@lru_cache(maxsize=None)
def _lowered(name):
    return to_hw(load_model(str(MODELS / name)), CompileOptions())


def _folded(name, target):
    graph = _lowered(name).copy()
    set_folding(graph, target)
    return graph


def _vector(resources):
    return np.array([float(resources[r]) for r in RESOURCES])


def _estimate_of_built(graph):
    """The old way: build the stitched graph with the passes, size its FIFOs, sum every node."""
    stitched = insert_dwcs_and_fifos(insert_duplicates(graph))
    depths = analytic_fifo_depths(stitched)
    built = insert_dwcs_and_fifos(insert_duplicates(graph), depths)
    return sum(_vector(estimate(n.spec())) for n in built.nodes), stitched, depths


def _described(node):
    return node.name, node.op_type, dict(node.params), dict(node.folding), node.inputs, node.outputs


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", NETWORKS)
def test_pure_estimate_equals_the_built_design(name, target):
    graph = _folded(name, target)
    before = [_described(n) for n in graph.nodes]
    built, stitched, depths = _estimate_of_built(graph)
    plan = stream_plan(graph)
    # the plan is the stitched graph's nodes, names, widths and wiring, without a graph being built
    assert [_described(n) for n in plan.nodes] == [_described(n) for n in stitched.nodes]
    assert (plan.input, plan.output) == (stitched.input, stitched.output)
    assert analytic_fifo_depths(plan) == depths
    layers = sum(_vector(estimate(n.spec())) for n in graph.nodes)
    np.testing.assert_array_equal(inserted_estimate(graph), built - layers)
    np.testing.assert_array_equal(design_estimate(graph), built)
    assert [_described(n) for n in graph.nodes] == before          # the folded graph is not changed
