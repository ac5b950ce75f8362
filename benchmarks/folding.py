"""The folding optimizer against FINN's naive folding, under the PYNQ-Z2 budget and under half of it.

    python -m benchmarks.folding

For each network and budget: the best naive design (FINN's SetFolding at every ``--target-fps`` of a
fine geometric grid, fastest first; the first whole design, DWCs and FIFOs included, whose estimate is
within the budget) beside the optimizer's design (``rtlgen compile --budget``), both by the resource
estimate; frames/s at 100 MHz; the optimizer's run time. The budget is the xc7z020 x 0.8 (``--fit
pynq-z2``'s default) and half of that.
"""

import time
from pathlib import Path

from benchmarks.tables import write_section
from rtlgen.compiler import CompileOptions, to_hw
from rtlgen.folding import set_folding
from rtlgen.frontend import load_model
from rtlgen.optimize import Budget, NoFit, _whole_design, optimize_folding

MODELS = Path(__file__).resolve().parent.parent / "tests" / "models"
NETWORKS = [("TFC-w1a1", "TFC_1W1A.onnx"), ("TFC-w2a2", "TFC_2W2A.onnx"), ("CNV-w1a1", "cnv_1w1a_ts_clean.onnx"),
            ("CNV-w2a2", "cnv_2w2a_ts_clean.onnx"), ("generator MLP int8", "gen_mlp_int8.onnx"),
            ("MobileNetV2 block", "branching/mobilenetv2_block.onnx"), ("ResNet block", "branching/resnet_block.onnx")]
CLOCK_MHZ = 100.0


def best_naive(graph, budget):
    """(II, estimate) of the fastest naive design within ``budget``; (None, None) if none fits."""
    limit = budget.as_vector()
    tried = set()
    for target in sorted({max(1, int(round(2 ** (k / 4)))) for k in range(0, 4 * 22)}):
        g = graph.copy()
        ii = set_folding(g, target)
        if ii in tried:
            continue
        tried.add(ii)
        used = _whole_design(g)
        if (used <= limit).all():
            return ii, used
    return None, None


def _fmt(used):
    return f"{used[0]:,.0f} / {used[1]:,.0f} / {used[2] / 2:,.1f} / {used[3]:,.0f}"


def rows():
    table = []
    for label, file in NETWORKS:
        graph = to_hw(load_model(str(MODELS / file)), CompileOptions())
        for share, name in ((0.8, "PYNQ-Z2 x0.8"), (0.4, "PYNQ-Z2 x0.4")):
            budget = Budget.for_board("pynq-z2", share)
            naive_ii, naive_used = best_naive(graph, budget)
            chosen = graph.copy()
            start = time.perf_counter()
            try:
                result = optimize_folding(chosen, budget)
                opt_ii, opt_used, binding = result.ii, _whole_design(chosen), result.binding
            except NoFit:
                opt_ii, opt_used, binding = None, None, "-"
            seconds = time.perf_counter() - start
            fps = lambda ii: f"{CLOCK_MHZ * 1e6 / ii:,.0f}" if ii else "does not fit"
            table.append({"network": label, "budget": name,
                          "naive II": naive_ii or "-", "naive fps": fps(naive_ii),
                          "naive LUT/FF/BRAM36/DSP": _fmt(naive_used) if naive_used is not None else "-",
                          "optimizer II": opt_ii or "-", "optimizer fps": fps(opt_ii),
                          "optimizer LUT/FF/BRAM36/DSP": _fmt(opt_used) if opt_used is not None else "-",
                          "binds": binding,
                          "speed-up": f"{naive_ii / opt_ii:.2f}x" if naive_ii and opt_ii else "-",
                          "optimizer s": f"{seconds:.1f}"})
            print(table[-1], flush=True)
    return table


if __name__ == "__main__":
    write_section(
        "Folding: the optimizer against FINN's naive folding",
        "Estimates (the layers' `resource_estimate()`, DWCs and FIFOs at their analytic depths included), "
        "frames/s at 100 MHz. *Naive*: FINN's SetFolding at every target of a 2^(1/4) grid, the fastest whole "
        "design within the budget. *Optimizer*: `rtlgen compile --budget` (`rtlgen/optimize.py`). Budget: the "
        "xc7z020 (53,200 LUT, 106,400 FF, 140 BRAM36, 220 DSP) x 0.8 and x 0.4. Yosys figures for these designs "
        "are not in this table yet: the cost model is not calibrated (issue 15 item 1), so an estimate "
        "within the budget is not yet a proof of fit.", rows())
