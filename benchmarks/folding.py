"""The folding optimizer against FINN's naive folding, under the PYNQ-Z2 budget and under half of it.

    python -m benchmarks.folding                    # estimates: naive against the optimizer
    python -m benchmarks.folding --yosys NAME ...   # the optimizer's PYNQ-Z2 designs, verified, by Yosys

For each network and budget: the best naive design (FINN's SetFolding at every ``--target-fps`` of a
fine geometric grid, fastest first; the first whole design, DWCs and FIFOs included, whose estimate is
within the budget) beside the optimizer's design (``rtlgen compile --budget``), both by the resource
estimate; frames/s at 100 MHz; the optimizer's run time. The budget is ``--fit pynq-z2``'s default (the
xc7z020's LUT and FF x 0.8, BRAM36 and DSP x 0.95: ``rtlgen.fit.DEFAULT_UTILIZATION``) and x 0.4.

``--yosys``: each network compiled as a user would (``rtlgen compile --fit pynq-z2 --clock-mhz 100``),
simulated on Verilator and compared with qonnx (bit-exact), and built with Yosys in the zynq shell (PS7,
AXI-Lite control, AXI DMA): whether it fits the xc7z020, Yosys beside the estimate.
"""

import argparse
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

from benchmarks.finn_compare import cifar, mnist
from benchmarks.tables import command_line, section_provenance, section_rows, write_section
from boards.yosys import XC7Z020
from rtlgen.options import CompileOptions
from rtlgen.passes.to_hw import to_hw
from rtlgen.passes.fold import set_folding
from rtlgen.passes.load import load_model
from rtlgen.fit import Budget
from rtlgen.passes.optimize import NoFit, design_estimate, optimize_folding

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
        used = design_estimate(g)
        if (used <= limit).all():
            return ii, used
    return None, None


def _fmt(used):
    return f"{used[0]:,.0f} / {used[1]:,.0f} / {used[2] / 2:,.1f} / {used[3]:,.0f}"


def rows():
    table = []
    for label, file in NETWORKS:
        graph = to_hw(load_model(str(MODELS / file)), CompileOptions())
        for share, name in ((None, "PYNQ-Z2 (--fit)"), (0.4, "PYNQ-Z2 x0.4")):
            budget = Budget.for_board("pynq-z2", share)
            naive_ii, naive_used = best_naive(graph, budget)
            chosen = graph.copy()
            start = time.perf_counter()
            try:
                result = optimize_folding(chosen, budget)
                opt_ii, opt_used, binding = result.ii, design_estimate(chosen), result.binding
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


PROOF = "Folding: the optimizer's PYNQ-Z2 designs by Yosys"


def inputs(label, n):
    """Test inputs: MNIST / CIFAR-10 images for FINN's networks, random floats across the input quantizer's
    range for the others."""
    if label.startswith("TFC"):
        return mnist(n)
    if label.startswith("CNV"):
        return cifar(n)
    from qonnx.core.modelwrapper import ModelWrapper
    model = ModelWrapper(str(MODELS / dict(NETWORKS)[label]))
    shape = model.get_tensor_shape(model.graph.input[0].name)
    return (2 * np.random.default_rng(0).standard_normal((n, *shape[1:]))).astype(np.float32)


def proof_row(label, work, target_fps=None, clock_mhz=CLOCK_MHZ, max_utilization=None):
    from rtlgen import api
    from rtlgen.check.verify import verify_outputs
    start = time.perf_counter()
    design = api.compile(MODELS / dict(NETWORKS)[label], work / "design", fit="pynq-z2", clock_mhz=clock_mhz,
                         target_fps=target_fps, max_utilization=max_utilization)
    compile_s = time.perf_counter() - start
    x = inputs(label, 3 if label.startswith("CNV") else 8)
    run = design.simulate(x)
    comparison = verify_outputs(design.model, x, run.outputs, design.io)
    synth = design.build(shell="zynq", say=lambda line: None)
    t, est = synth["totals"], design.report["totals"]
    built = {"LUT": synth["lut_including_memory"], "FF": t["ff"], "BRAM36": t["bram36"] + t["bram18"] / 2,
             "DSP": t["dsp"]}
    estimate = {"LUT": est.get("LUT", 0), "FF": est.get("FF", 0), "BRAM36": est.get("BRAM18", 0) / 2,
                "DSP": est.get("DSP", 0)}
    use = {k: built[k] / XC7Z020[k] for k in built}
    binds = max(use, key=use.get)
    layers = synth["timing"]["layers"]
    slowest = min(layers, key=lambda name: layers[name]["fmax_mhz_estimate"], default=None)
    path = layers[slowest] if slowest else synth["timing"]["design"]
    return synth, {"network": label, "options": f"--clock-mhz {clock_mhz:g}" + (f" --target-fps {target_fps:g}" if target_fps else "")
            + (f" --max-utilization {max_utilization}" if max_utilization is not None else ""),
            "II": f"{design.report['analytic_cycles_per_frame']:,}",
            "cycles/frame": f"{run.cycles_per_frame:,.0f}", "fps": f"{clock_mhz * 1e6 / run.cycles_per_frame:,.0f}",
            "bit-exact": f"{comparison.summary()}",
            "Yosys LUT/FF/BRAM36/DSP": " / ".join(f"{built[k]:,g}" for k in built),
            "estimate LUT/FF/BRAM36/DSP": " / ".join(f"{estimate[k]:,g}" for k in estimate),
            "LUT error": f"{100 * (estimate['LUT'] - built['LUT']) / built['LUT']:+.0f} %",
            "fits xc7z020": "yes" if max(use.values()) <= 1 else "NO",
            "highest use": f"{binds} {use[binds]:.0%}",
            "Fmax estimate": (f"~{path['fmax_mhz_estimate']:.0f} MHz ({slowest or 'design'}: {path['through']})"
                              if path else "-"), "compile s": f"{compile_s:.1f}"}


def write_layers(row, synth):
    """The row's build layer by layer: Yosys beside the estimate, DSPs, and each layer's longest path."""
    from benchmarks.gan import layer_rows
    write_section(
        f"Folding: {row['network']} {row['options']} per layer by Yosys",
        f"The design of the row `{row['network']}`, `{row['options']}` of \"{PROOF}\" (the same build), per layer "
        "(FIFOs and width converters their own rows): Yosys cells beside the estimate (LUT includes LUTRAM/SRL, "
        "as the estimate does), and each layer's longest "
        "register-to-register path from Yosys `sta` with the delay model of `boards/timing.py` (an estimate; "
        "Vivado's timing report is the real figure).", layer_rows(synth))


def write_proofs(rows):
    """Rewrite the rows given, keep the others and the section's account of their runs (each run adds its
    command and date for its row)."""
    runs = "; ".join(f"`{r['network']} | {r['options']}`" for r in rows)
    provenance = section_provenance(PROOF) or "Produced by `RTLGEN_YOSYS=native python -m benchmarks.folding " \
                                              "--yosys NAME --keep DIR`, one run per row."
    provenance += f" The row {runs}: `{command_line()}` on {date.today().isoformat()}."
    order = [n for n, _ in NETWORKS]
    done = {(r["network"], r["options"]) for r in rows}
    rows = sorted([r for r in section_rows(PROOF) if (r["network"], r["options"]) not in done] + rows,
                  key=lambda r: (order.index(r["network"]), r["options"]))
    write_section(
        PROOF,
        "Each network compiled as a user would: `rtlgen compile MODEL --fit pynq-z2` with the options shown (the "
        "optimizer, budget the xc7z020's LUT and FF x 0.8, BRAM36 and DSP x 0.95 unless the row says otherwise: the fastest design that fits, or with `--target-fps` the cheapest "
        "that reaches it); frames/s at the clock given; cycles per frame measured on Verilator and the outputs compared "
        "with qonnx's execution of the model; the whole design built by Yosys `synth_xilinx` in the zynq shell "
        "(PS7, AXI-Lite control, AXI DMA). LUT includes LUTRAM/SRL. *Fmax estimate*: the slowest layer's longest "
        "path by Yosys `sta` and `boards/timing.py` (Vivado's timing report is the real figure); the optimizer "
        "does not model timing: the layers are pipelined so that their paths stay within ~5 ns by this estimate. "
        "*fits*: every resource within the "
        "xc7z020 (53,200 LUT, 106,400 FF, 140 BRAM36, 220 DSP). `python -m benchmarks.folding --yosys NAME ...` "
        "rewrites the rows it is given (NAME, NAME@FPS for a target, NAME@FPS@MHZ or NAME@@MHZ for a clock, "
        "NAME@@MHZ@F for --max-utilization F). "
        "TFC-w1a1's fastest design (II 4) was built by the native Yosys (`RTLGEN_YOSYS=native`, the pyosys "
        "wheel): the WebAssembly one runs out of its 4 GB on it. Each row is the design the optimizer returned "
        "on the day of its run (the estimates, and so the choice, move as the cost model improves).", rows,
        provenance)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--yosys", nargs="+", metavar="NAME[@FPS[@MHZ]]")
    parser.add_argument("--layers", action="store_true", help="with --yosys: also a table per layer of each design")
    parser.add_argument("--keep", metavar="DIR", help="with --yosys: keep each design and its build in DIR/NAME")
    args = parser.parse_args()
    if args.yosys:
        for item in args.yosys:         # the table is rewritten after each network
            label, fps, mhz, util = (item.split("@") + ["", "", ""])[:4]
            if label not in dict(NETWORKS):
                parser.error(f"--yosys {item}: unknown network; known: {', '.join(n for n, _ in NETWORKS)}")
            with tempfile.TemporaryDirectory(prefix="rtlgen-folding-") as tmp:
                work = Path(args.keep) / item.replace(" ", "_") if args.keep else Path(tmp)
                synth, row = proof_row(label, work, float(fps) if fps else None, float(mhz) if mhz else CLOCK_MHZ,
                                       util or None)
            print(row, flush=True)
            write_proofs([row])
            if args.layers:
                write_layers(row, synth)
        return
    write_section(
        "Folding: the optimizer against FINN's naive folding",
        "Estimates (the layers' `resource_estimate()`, DWCs and FIFOs at their analytic depths included), "
        "frames/s at 100 MHz. *Naive*: FINN's SetFolding at every target of a 2^(1/4) grid, the fastest whole "
        "design within the budget. *Optimizer*: `rtlgen compile --budget` (`rtlgen/passes/optimize.py`). Budget: the "
        "xc7z020 (53,200 LUT, 106,400 FF, 140 BRAM36, 220 DSP) at `--fit`'s default shares (LUT and FF x 0.8, "
        "BRAM36 and DSP x 0.95) and x 0.4. The next section builds the "
        "optimizer's PYNQ-Z2 designs with Yosys.", rows())


if __name__ == "__main__":
    main()
