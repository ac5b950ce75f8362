"""Issue 42 item 1: the folding optimizer's worker processes (rtlgen/passes/optimize_workers.py) change its
time, never its answer: the same folding, II and estimate with the candidates costed on a pool and the
spilled search run in a forked process beside the plain one as all in this process; a lost worker is
computed here instead; a child's exception comes back as itself."""

import os
from pathlib import Path

import pytest

from rtlgen.fit import Budget
from rtlgen.options import CompileOptions
from rtlgen.passes import optimize, optimize_workers
from rtlgen.passes.load import load_model
from rtlgen.passes.optimize import NoFit, design_estimate, optimize_folding
from rtlgen.passes.optimize_workers import Forked, WorkerLost
from rtlgen.passes.to_hw import to_hw

MODELS = Path(__file__).parent / "models"


def test_forked_returns_the_childs_value_and_its_exception():
    state = {"weights": list(range(1000))}          # inherited by the fork, not sent
    assert Forked(lambda: sum(state["weights"])).result() == sum(range(1000))
    with pytest.raises(NoFit, match="nothing fits"):
        Forked(lambda: (_ for _ in ()).throw(NoFit("nothing fits"))).result()


def test_a_child_that_dies_is_a_lost_worker():
    with pytest.raises(WorkerLost, match="ended without an answer"):
        Forked(lambda: os._exit(3)).result()


def _optimized(model, budget, **kwargs):
    graph = to_hw(load_model(str(MODELS / model)), CompileOptions())
    result = optimize_folding(graph, Budget.parse(budget), **kwargs)
    return ({n.name: dict(n.folding) for n in graph.nodes}, result.ii, result.used, result.binding,
            design_estimate(graph).tolist())


@pytest.mark.parametrize("model, budget, kwargs", [
    pytest.param("TFC_2W2A.onnx", "lut=8000", {}, marks=pytest.mark.slow),     # CI time: the MLP below covers it
    ("decimal/brevitas_decimal_mlp.onnx", "lut=1500", {"target_cycles": 64})])
def test_the_same_design_with_workers_as_without(monkeypatch, model, budget, kwargs):
    monkeypatch.setattr(optimize_workers, "cores", lambda: 1)        # everything here, one after the other
    monkeypatch.setattr(optimize, "cores", lambda: 1)
    alone = _optimized(model, budget, **kwargs)
    monkeypatch.setattr(optimize_workers, "cores", lambda: 2)
    monkeypatch.setattr(optimize, "cores", lambda: 2)
    monkeypatch.setattr(optimize_workers, "PARALLEL_FROM", 0)       # small models: pools and fork anyway
    monkeypatch.setattr(optimize, "SEARCH_BESIDE_FROM", 0)
    forked = []
    original = optimize_workers.Forked.__init__
    monkeypatch.setattr(optimize_workers.Forked, "__init__", lambda self, f: forked.append(1) or original(self, f))
    assert _optimized(model, budget, **kwargs) == alone
    assert forked, "the spilled search did not run beside"


def test_a_lost_search_is_searched_here(monkeypatch):
    monkeypatch.setattr(optimize, "SEARCH_BESIDE_FROM", 0)
    monkeypatch.setattr(optimize, "cores", lambda: 2)
    alone = _optimized("decimal/brevitas_decimal_mlp.onnx", "lut=1500")
    monkeypatch.setattr(optimize, "_spilled_in_worker", lambda *args: os._exit(9))
    assert _optimized("decimal/brevitas_decimal_mlp.onnx", "lut=1500") == alone
