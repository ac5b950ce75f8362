"""Issue 42 item 1: the folding optimizer builds a spec for every candidate folding of a node (thousands for
one MVAU), and what depends only on the node's weights and thresholds (weight checks, accumulator ranges,
threshold tables, the input offsets) is derived once per node and shared by them (layers.dotproduct's
memos, keyed by the very arrays). Checked here against specs built from fresh copies of the arrays (every
memo misses: everything derived again), against the definitions in numpy, and that a bad weight or
threshold is refused alike however often it is asked about."""

import pickle
from pathlib import Path

import numpy as np
import pytest
from qonnx.core.datatype import DataType

from layers.mvau import MVAUSpec
from rtlgen.costmodel import estimate
from rtlgen.errors import CompileError
from rtlgen.ir.graph import HWNode
from rtlgen.options import CompileOptions
from rtlgen.passes.load import load_model
from rtlgen.passes.lowering_context import ModelLoweringContext
from rtlgen.passes.optimize import fold_groups, group_options, node_foldings
from rtlgen.passes.to_hw import to_hw

MODELS = Path(__file__).parent / "models"


def _fresh(node, folding):
    """The spec of ``node`` at ``folding`` from copies of its arrays: no memo keyed by them can hit."""
    params = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in node.params.items()}
    return HWNode(node.name, node.op_type, params, dict(node.folding)).spec(**folding)


def _rng_node(name, mw, mh, x, w, steps, seed, **extra):
    rng = np.random.default_rng(seed)
    wlo, whi = int(DataType[w].min()), int(DataType[w].max())
    weights = rng.integers(wlo, whi + 1, size=(mw, mh))
    if w == "BIPOLAR":
        weights = rng.choice([-1, 1], size=(mw, mh))
    bound = mw * max(abs(wlo), whi) * max(abs(int(DataType[x].min())), int(DataType[x].max()))
    thresholds = np.sort(rng.integers(-bound, bound + 1, size=(mh, steps)), axis=1) + 0.5
    if x == w == "BIPOLAR":     # xnor-popcount: accumulators in [0, MW]
        thresholds = np.sort(rng.integers(0, mw + 1, size=(mh, steps)), axis=1).astype(float)
    out = "BIPOLAR" if steps == 1 else f"UINT{steps.bit_length()}"
    params = dict(mw=mw, mh=mh, input_dtype=DataType[x], weight_dtype=DataType[w], weights=weights.astype(np.float32),
                  thresholds=thresholds, output_dtype=DataType[out], act_val=0, **extra)
    return HWNode(name, "MVAU", params, {"mem_mode": "internal_embedded"})


NODES = [
    # signed INT2 inputs: offset_inputs raises the thresholds by X0 * rowsum(w) (the datapath table)
    _rng_node("int2", 16, 8, "INT2", "INT2", 3, 1),
    # BIPOLAR x BIPOLAR: xnor-popcount, popcount tree or heap (CNV-w1a1)
    _rng_node("xnor", 32, 8, "BIPOLAR", "BIPOLAR", 1, 2),
    # INT4 x INT4 with 15 thresholds: the requantizer or the table, shared activation units
    _rng_node("int4", 16, 4, "INT4", "INT4", 15, 3),
]


@pytest.mark.parametrize("node", NODES, ids=lambda n: n.name)
def test_shared_derivation_gives_every_folding_the_spec_derived_afresh(node):
    foldings = list(node_foldings(node, spill=True))
    assert len(foldings) > 20
    foldings = foldings[::max(1, len(foldings) // 120)]        # every axis still varies (a default-suite test)
    legal = 0
    for folding in foldings:
        try:
            fresh = _fresh(node, folding)
        except ValueError as exc:       # an illegal combination: illegal alike with the shared derivations
            with pytest.raises(ValueError, match=f"^{node.name}: ") as shared_exc:
                node.spec(**folding)
            assert str(shared_exc.value) == f"{node.name}: {str(exc).split(': ', 1)[1]}"
            continue
        legal += 1
        shared = node.spec(**folding)
        assert estimate(shared) == estimate(fresh), folding
        assert (shared.exp_cycles, shared.latency, shared.pipeline_depth) == \
            (fresh.exp_cycles, fresh.latency, fresh.pipeline_depth), folding
        assert shared.acc_range() == fresh.acc_range() and shared.datapath_acc_range() == fresh.datapath_acc_range()
        assert shared.output_dtype == fresh.output_dtype and shared.offset_inputs == fresh.offset_inputs
        assert shared.requant == fresh.requant
        for a, b in ((shared.table, fresh.table), (shared.datapath_table, fresh.datapath_table),
                     (shared.activation_table(), fresh.activation_table())):
            assert (a.pe, a.channels, a.value_range) == (b.pe, b.channels, b.value_range)
            assert np.array_equal(a.thresholds, b.thresholds)
            assert [np.array_equal(p, q) for p, q in zip(a.stage_images(), b.stage_images())] == [True] * a.stages
        # the layer's Verilog is cached under a pickle of its spec: the same bytes, the same design
        assert pickle.dumps(shared, protocol=4) == pickle.dumps(fresh, protocol=4), folding
    assert legal > 10


@pytest.mark.parametrize("node", NODES, ids=lambda n: n.name)
def test_derivations_against_their_definitions(node):
    """The shared values against numpy from the definitions (not through the spec's code)."""
    w = node.params["weights"].astype(np.int64)                     # (MW, MH)
    x = node.params["input_dtype"]
    xnor = x.name == node.params["weight_dtype"].name == "BIPOLAR"
    lo_x, hi_x = int(x.min()), int(x.max())
    lo = np.minimum(w * lo_x, w * hi_x).sum(axis=0)
    hi = np.maximum(w * lo_x, w * hi_x).sum(axis=0)
    expected_range = (0, w.shape[0]) if xnor else (min(0, int(lo.min())), max(0, int(hi.max())))
    t = np.ceil(node.params["thresholds"]).astype(np.int64)
    for folding in list(node_foldings(node, spill=True))[::7]:
        try:
            spec = node.spec(**folding)
        except ValueError:
            continue
        assert spec.acc_range() == expected_range
        assert np.array_equal(spec.table.thresholds, t)
        raised = t + (1 << (x.bitwidth() - 1)) * w.sum(axis=0)[:, None] if spec.offset_inputs else t
        assert np.array_equal(spec.datapath_table.thresholds, raised)


def test_optimizer_options_equal_with_every_derivation_afresh(monkeypatch):
    """TFC-w2a2's options (each folding's cycles and cost) with the memos as they are, and with every memo
    computing each time (nothing shared, nothing remembered)."""
    graph = to_hw(load_model(str(MODELS / "TFC_2W2A.onnx")), CompileOptions())
    groups = fold_groups(graph)[2:3]            # MVAU_2's 1,160 foldings (MVAU_0's 2,504 alike, 3x slower)
    shared = [group_options(graph, g) for g in groups]
    from layers.op import ArrayMemo
    monkeypatch.setattr(ArrayMemo, "get", lambda self, array, key, compute: compute())
    afresh = [group_options(graph, g) for g in groups]
    assert shared == afresh and sum(len(o) for o in shared) > 10


def test_a_bad_weight_is_refused_alike_every_time():
    weights = np.full((16, 8), 5.0, dtype=np.float32)
    weights[3, 2] = 9
    good = MVAUSpec(16, 8, 4, 2, "INT5", "INT5", weights)        # checked once as INT5: legal
    assert good.acc_range()[1] > 0
    for simd, pe in ((4, 2), (1, 1), (16, 8), (4, 2)):          # as INT4 never, however often asked
        with pytest.raises(ValueError, match=r"^value 9\.0 is not representable in INT4 \(legal: "):
            MVAUSpec(16, 8, simd, pe, "INT4", "INT4", weights)
    descending = np.tile(np.arange(15)[::-1], (8, 1)).astype(float)
    for pe in (1, 2, 8, 2):
        with pytest.raises(ValueError, match=r"^MVAU thresholds row 0 is not ascending"):
            MVAUSpec(16, 8, 4, pe, "INT4", "INT5", weights, thresholds=descending, output_dtype="UINT4")


def test_a_bad_weight_is_the_same_compile_error_every_time():
    """Lowering validates each node's first spec: a weight its datatype cannot hold is a CompileError naming
    the ONNX node, the second time as the first."""
    model = load_model(str(MODELS / "TFC_2W2A.onnx"))
    ctx = ModelLoweringContext(model)
    source = [n for n in model.graph.node if n.op_type == "MatMul"][:1]
    weights = np.ones((16, 8), dtype=np.float32)
    weights[0, 0] = 2
    params = dict(mw=16, mh=8, input_dtype=DataType["INT2"], weight_dtype=DataType["INT2"], weights=weights)
    messages = []
    for _ in range(2):
        with pytest.raises(CompileError) as exc:
            ctx.add("MVAU", params, source)
        messages.append(str(exc.value))
    assert messages[0] == messages[1]
    assert messages[0].startswith(f"node {source[0].name} (MatMul) as MVAU: value 2.0 is not representable in INT2")
