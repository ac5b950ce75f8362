"""`rtlgen prove` proves a design's nodes in parallel (rtlgen/check/prove_design.py over
rtlgen/backend/jobs.py): the same verdicts as one at a time, identical nodes proven once, the outcomes in the
design's order, and OUT/prove/report.json with every node's outcome, including the step a timed-out check
reached."""

import json

import pytest

from layers.dwc import DWCSpec
from layers.fifo import FIFOSpec
from rtlgen.check import prove_design
from rtlgen.ir.graph import OPS
from sim.outdir import OutDir

# three nodes, two of them the same FIFO under different names
NODES = [("StreamingFIFO_0", OPS["StreamingFIFO"], FIFOSpec(3, 2)),
         ("StreamingDataWidthConverter_0", OPS["StreamingDataWidthConverter"], DWCSpec((1, 8), 2, 4)),
         ("StreamingFIFO_1", OPS["StreamingFIFO"], FIFOSpec(3, 2))]


@pytest.fixture
def design(tmp_path, monkeypatch):
    """An OUT whose nodes are :data:`NODES`, and an empty proof cache."""
    monkeypatch.setattr(prove_design, "design_nodes", lambda out: list(NODES))
    monkeypatch.setenv("RTLGEN_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "out"


def _verdicts(outcomes):
    return [(o.node, o.status, o.depth, o.instance) for o in outcomes]


def test_parallel_proofs_give_the_serial_verdicts(design):
    """Proven on two processes: the verdicts tests/test_prove.py asserts one at a time for these specs
    (fifo-srl, dwc-up: k-induction closes at 4), in the design's order, every node printed once."""
    printed = []
    parallel = prove_design.prove_out(design, jobs=2, report=printed.append)
    assert _verdicts(parallel) == [("StreamingFIFO_0", "proven", 4, None),
                                   ("StreamingDataWidthConverter_0", "proven", 4, None),
                                   ("StreamingFIFO_1", "proven", 4, None)]
    assert sorted(o.node for o in printed) == sorted(n for n, _, _ in NODES)
    assert parallel[0].seconds == parallel[2].seconds       # one proof for both FIFOs (one result, two names)
    report = json.loads(OutDir(design).prove_report.read_text())
    assert [n["line"] for n in report["nodes"]] == [o.line() for o in parallel]
    assert report["proven"] == 3 and report["ran_on"] == "2 local processes"
    again = prove_design.prove_out(design, jobs=2, report=lambda o: None)         # the cache answers
    assert _verdicts(again) == _verdicts(parallel) and all(o.cached for o in again)


def test_a_timed_out_node_is_in_the_report_with_the_step_it_reached(design):
    """A solver cut short (8 s of a 400-step check): the node is unknown, and report.json has the step its
    bounded check reached beside the line the terminal printed, which names it too."""
    (outcome,) = prove_design.prove_out(design, node="StreamingFIFO_0", depth=400, timeout=8, report=lambda o: None)
    assert outcome.status == "unknown" and "timed out after 8 s" in outcome.reason, outcome.line()
    (node,) = json.loads(OutDir(design).prove_report.read_text())["nodes"]
    assert node["status"] == "unknown" and node["line"] == outcome.line()
    assert isinstance(node["reached"], int) and 0 < node["reached"] < 400, node
    assert f"at step {node['reached']} of 400: the properties hold for the first {node['reached']} cycles" in node["line"]


def test_a_node_proven_as_several_instances_holds_as_far_as_the_weakest():
    """A node with two instances (a window generator: the sliding image, one window at two words per pixel):
    one line naming both, bounded to the least depth with each one's said, the worst status winning."""
    from rtlgen.check.prove import Outcome

    a = Outcome("SWG_0", "bounded", 46, instance="IFMDim 14x14->4x4", seconds=3.0, note="n",
                runs=[["control", "bmc", 46, "pass", 2.0]])
    b = Outcome("SWG_0", "bounded", 26, instance="IFMDim 14x14->3x3", seconds=1.0, note="n")
    both = prove_design._combined([a, b])
    assert (both.status, both.depth, both.depths, both.seconds) == ("bounded", 26, [46, 26], 4.0)
    assert both.line() == "SWG_0  bounded to depth 46/26 (n) [small instances: IFMDim 14x14->4x4; IFMDim 14x14->3x3]"
    assert both.runs == [["instance 1: control", "bmc", 46, "pass", 2.0]]
    failed = Outcome("SWG_0", "failed", 26, instance="IFMDim 14x14->3x3", failed=["stable_o"], vcd="x.vcd")
    assert prove_design._combined([a, failed]).status == "failed"
    assert prove_design._combined([a]) is a
