"""Board-level frames/s (issue 31, item 3): report.json's board figures (the lower of the accelerator's rate and
the zynq shell's data movement), the folding optimizer stopping at the shell's I/O bound, and (slow) TFC-w1a1
``--fit pynq-z2`` simulated inside the whole shell: the report's board rate and latency within 10 % of what
``rtlgen sim --shell zynq --json`` measures, the outputs as qonnx's."""

import json
from pathlib import Path

import numpy as np
import pytest

from rtlgen.analyses.board_rate import graph_shell_cycles
from rtlgen.cli import main
from rtlgen.options import CompileOptions
from rtlgen.passes.to_hw import to_hw
from rtlgen.passes.load import load_model
from rtlgen.fit import Budget
from rtlgen.passes.optimize import design_estimate, optimize_folding
from rtlgen.check.verify import qonnx_reference

MODELS = Path(__file__).parent / "models"
TFC = MODELS / "TFC_1W1A.onnx"
# bytes a stream word of a top port's padded width takes in DDR (the shell's layout, boards/zynq.py docstring)
II_4_FOLDING = {"MVAU_0": {"PE": 32, "SIMD": 392}, "MVAU_1": {"PE": 16, "SIMD": 64},
                "MVAU_2": {"PE": 16, "SIMD": 64}, "MVAU_3": {"PE": 5, "SIMD": 32}}     # TFC-w1a1 at II 4
DDR_WORD_BYTES = {8: 1, 16: 2, 24: 4, 32: 4, 40: 8, 56: 8, 64: 8, 72: 16, 104: 16, 112: 16, 392: 56}


def test_report_board_keys(digits_out):
    report = json.loads((digits_out / "report.json").read_text())
    shell, ii, clock = report["shell"], report["analytic_cycles_per_frame"], report["clock_mhz"]
    ins, outs = report["input"], report["output"]
    assert shell["in_bytes_per_frame"] == ins["words_per_frame"] * DDR_WORD_BYTES[ins["width"]]
    assert shell["out_bytes_per_frame"] == outs["words_per_frame"] * DDR_WORD_BYTES[outs["width"]]
    # a beat of 8 bytes a cycle each way at best, a word a cycle at best through the gearboxes
    assert shell["read_cycles_per_frame"] >= max(shell["in_bytes_per_frame"] / 8, ins["words_per_frame"])
    assert shell["write_cycles_per_frame"] >= max(shell["out_bytes_per_frame"] / 8, outs["words_per_frame"])
    assert shell["cycles_per_frame"] == max(shell["read_cycles_per_frame"], shell["write_cycles_per_frame"])
    assert report["board_cycles_per_frame"] == max(ii, shell["cycles_per_frame"])
    assert report["board_frames_per_second"] == pytest.approx(clock * 1e6 / report["board_cycles_per_frame"], rel=1e-6)
    assert report["board_frames_per_second"] <= report["frames_per_second"]
    assert report["io_bound"] == (shell["cycles_per_frame"] > ii)
    # DDR to DDR: the accelerator's latency plus at least the DDR's both ways
    assert report["board_latency_cycles"] >= (report["latency_cycles"] + shell["ddr_read_latency_cycles"] +
                                              shell["ddr_write_latency_cycles"])
    assert report["board_latency_ns"] == pytest.approx(report["board_latency_cycles"] * 1e3 / clock)


def test_summary_prints_the_board_line(digits_out, capsys):
    from rtlgen.report.summary import board_line
    report = json.loads((digits_out / "report.json").read_text())
    line = board_line(report)
    assert f"{report['board_frames_per_second']:,.0f} frames/s" in line and "S_AXI_HP0" in line
    old = {k: v for k, v in report.items() if not k.startswith("board") and k not in ("io_bound", "shell")}
    assert board_line(old) is None          # a report from before: no line, no error


def lowered(name):
    return to_hw(load_model(str(MODELS / name)), CompileOptions())


@pytest.mark.parametrize("bound", [pytest.param(40.0, marks=pytest.mark.slow), 130.0])    # CI time: one bound
def test_optimizer_stops_at_the_io_bound(bound):
    """With a shell that needs ``bound`` cycles a frame, the optimizer builds the cheapest design at that II,
    not the fastest the budget allows (same board rate, fewer resources); with a fast shell nothing changes."""
    budget = Budget.for_board("pynq-z2")
    free = lowered("TFC_1W1A.onnx")
    fastest = optimize_folding(free, budget)
    assert fastest.ii < bound
    graph = lowered("TFC_1W1A.onnx")
    chosen = optimize_folding(graph, budget, io_cycles=lambda g: bound)
    assert chosen.io_bound and chosen.budget_ii == fastest.ii and chosen.io_cycles == bound
    assert fastest.ii < chosen.ii <= bound
    assert max(n.spec().exp_cycles for n in graph.nodes) == chosen.ii
    assert design_estimate(graph)[0] < 0.7 * design_estimate(free)[0]         # LUTs not spent on speed unseen
    fast_shell = lowered("TFC_1W1A.onnx")
    same = optimize_folding(fast_shell, budget, io_cycles=lambda g: 1.0)
    assert not same.io_bound and same.ii == fastest.ii
    assert [n.folding for n in fast_shell.nodes] == [n.folding for n in free.nodes]


def test_io_bound_follows_the_folding():
    """The shell's figure is the first and last layers' words as folded: TFC-w1a1's 784 one-bit inputs in
    words of SIMD bits (padded to bytes, then to 1, 2, 4 or 8k bytes)."""
    graph = lowered("TFC_1W1A.onnx")
    first = graph.nodes[0]
    cycles = {}
    for simd in (16, 49, 392):
        first.folding.update(SIMD=simd, PE=1)
        cycles[simd] = graph_shell_cycles(graph, 100.0)
    # SIMD 16: 49 words of 2 bytes = 98 B; 49: 16 words of 8 bytes = 128 B; 392: 2 words of 56 bytes = 112 B;
    # a beat of 8 bytes a cycle, a word a cycle: the larger of the two
    assert cycles == {16: 49, 49: 16, 392: 14}


@pytest.mark.slow
@pytest.mark.sim
def test_tfc_fit_board_rate_measured_in_the_shell(tmp_path, capsys):
    out = tmp_path / "tfc"
    assert main(["compile", str(TFC), "-o", str(out), "--fit", "pynq-z2"]) == 0
    report = json.loads((out / "report.json").read_text())
    chosen = report["optimizer"]
    clock = report["clock_mhz"] * 1e6
    # the budget allows a faster accelerator than the shell can feed: the optimizer stopped at the bound
    assert chosen["io_bound"] and chosen["budget_ii"] < report["analytic_cycles_per_frame"]
    assert report["board_frames_per_second"] < clock / chosen["budget_ii"]
    assert report["board_frames_per_second"] <= report["frames_per_second"]
    d = np.load(MODELS / "mnist_test_1000.npz")
    x = (d["x"][:64].astype(np.float32) / 255).reshape(64, 1, 28, 28)
    np.save(tmp_path / "x.npy", x)
    capsys.readouterr()
    assert main(["sim", str(out), "--input", str(tmp_path / "x.npy"), "--shell", "zynq", "--json",
                 "-o", str(tmp_path / "y.npy")]) == 0
    measured = json.loads(capsys.readouterr().out)
    assert measured["cycles_per_frame"] == pytest.approx(report["board_cycles_per_frame"], rel=0.10)
    assert measured["frames_per_second"] == pytest.approx(report["board_frames_per_second"], rel=0.10)
    assert measured["latency_cycles"] == pytest.approx(report["board_latency_cycles"], rel=0.10)
    assert np.array_equal(np.load(tmp_path / "y.npy"), qonnx_reference(TFC, x))


@pytest.mark.slow
def test_tfc_at_ii_4_is_io_bound_in_the_report(tmp_path):
    """The folding the budget allows without the I/O bound (II 4, 25M frames/s): the board delivers far less."""
    out, folding = tmp_path / "tfc", tmp_path / "folding.json"
    folding.write_text(json.dumps(II_4_FOLDING))
    assert main(["compile", str(TFC), "-o", str(out), "--folding", str(folding), "--fifo-sizing", "none"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["io_bound"] and report["board_frames_per_second"] < report["frames_per_second"] / 2
    assert report["board_cycles_per_frame"] == report["shell"]["cycles_per_frame"]
