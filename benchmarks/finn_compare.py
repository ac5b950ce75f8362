"""FINN's BNN-PYNQ networks at FINN's own folding, whole design by Yosys, beside FINN's published figures.

    python -m benchmarks.finn_compare [--only NAME ...] [--shells standalone,zynq]

For TFC-w1a1, TFC-w2a2, CNV-w1a1 and CNV-w2a2: compile with FINN's folding config for the network
(``examples/finn/``, from finn-examples), simulate test images on Verilator (bit-exact against
qonnx, the steady-state cycles per frame measured), and build the whole design with Yosys in the
standalone and the zynq shell. Two tables: whole designs (LUT, FF, BRAM36-equivalent, DSP) beside FINN's
published board figures, and per layer (the zynq build) Yosys beside the estimate.

FINN's figures (``../shared/reference/anchors.md``): CNV-w1a1 21,135 LUT + 98 BRAM36 (FINN issue #209) and
26,072 LUT / 124 BRAM36 / 24 DSP (BNN-PYNQ v2); CNV-w2a2 37,302 LUT / 140 BRAM36 / 32 DSP (BNN-PYNQ v2).
FINN publishes no resource figures for TFC on this chip.
"""

import argparse
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.tables import section_rows, write_section
from rtlgen import api
from rtlgen.check.verify import verify_outputs

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
FOLDINGS = ROOT / "examples" / "finn"
FRAMES = {"TFC": 16, "CNV": 3}
WHOLE = "FINN's networks at FINN's folding: whole designs by Yosys"
LAYERS = "FINN's networks at FINN's folding: per layer, Yosys beside the estimate"


def mnist(n):
    d = np.load(MODELS / "mnist_test_1000.npz")
    return (d["x"][:n].astype(np.float32) / 255).reshape(n, 1, 28, 28)


def cifar(n):
    """The one CIFAR-10 test image shipped, then its mirror images and shifts (real image statistics)."""
    x = np.load(MODELS / "cifar10_cifar10-test-data-class3.npz")["arr_0"][0].astype(np.float32)
    variants = [x, x[:, :, ::-1], x[:, ::-1, :], np.roll(x, 5, axis=2), np.roll(x, -7, axis=1)]
    return np.stack(variants[:n])


NETWORKS = {
    "TFC-w1a1": (MODELS / "TFC_1W1A.onnx", "tfc-w1a1.json", mnist, "-"),
    "TFC-w2a2": (MODELS / "TFC_2W2A.onnx", "tfc-w2a2.json", mnist, "-"),
    "CNV-w1a1": (MODELS / "cnv_1w1a_ts_clean.onnx", "cnv-w1a1.json", cifar,
                 "21,135 LUT, 98 BRAM36 (FINN #209); 26,072 LUT, 124 BRAM36, 24 DSP (BNN-PYNQ v2)"),
    "CNV-w2a2": (MODELS / "cnv_2w2a_ts_clean.onnx", "cnv-w2a2.json", cifar,
                 "37,302 LUT, 140 BRAM36, 32 DSP (BNN-PYNQ v2)"),
}


def compile_network(name, work):
    model, folding = NETWORKS[name][:2]
    return api.compile(model, work / name, folding=str(FOLDINGS / folding), clock_mhz=100.0)


def measure(name, work, shells):
    _, _, data, finn = NETWORKS[name]
    design = compile_network(name, work)
    x = data(FRAMES[name[:3]])
    run = design.simulate(x)
    comparison = verify_outputs(design.model, x, run.outputs, design.io)
    assert comparison.passed, f"{name}: {comparison.summary()}"
    rows, layers = [], []
    for shell in shells:
        synth = design.build(shell=shell, say=lambda line: None)
        t = synth["totals"]
        est = design.report["totals"]
        rows.append({"network": name, "shell": shell, "cycles/frame": f"{run.cycles_per_frame:,.0f}",
                     "analytic": f"{design.report['analytic_cycles_per_frame']:,}",
                     "fps @100 MHz": f"{100e6 / run.cycles_per_frame:,.0f}",
                     "LUT": f"{t['lut']:,}", "LUT incl. LUTRAM/SRL": f"{synth['lut_including_memory']:,}",
                     "FF": f"{t['ff']:,}", "BRAM36": f"{t['bram36'] + t['bram18'] / 2:g}", "DSP": t["dsp"],
                     "estimate LUT (layers)": f"{est.get('LUT', 0):,}", "FINN (published)": finn})
        print(rows[-1], flush=True)
        if shell == shells[-1]:
            # LUT counts slice LUTs used as memory (LUTRAM, SRL) too, as the estimates do
            layers = [_with_estimate({"network": name, "layer": layer, "LUT": r["lut"] + r["lut_as_memory"],
                                      "FF": r["ff"], "BRAM36": f"{r['bram36'] + r['bram18'] / 2:g}"}, r["estimate"])
                      for layer, r in synth["layers"].items()]
    return rows, layers


def _with_estimate(row, estimate):
    """``row`` (network, layer and Yosys's LUT, FF, BRAM36) with the estimate's columns, in table order."""
    lut = int(str(row["LUT"]).replace(",", ""))
    return {"network": row["network"], "layer": row["layer"], "LUT": lut, "est LUT": estimate.get("LUT", 0),
            "FF": row["FF"], "est FF": estimate.get("FF", 0), "BRAM36": row["BRAM36"],
            "est BRAM36": f"{estimate.get('BRAM18', 0) / 2:g}", "LUT error": _error(estimate.get("LUT", 0), lut)}


def refresh_estimates(names, work):
    """Recompute the estimate columns of the tables against the Yosys figures already there (no Yosys):
    for a change of the cost model."""
    whole, layers = section_rows(WHOLE), section_rows(LAYERS)
    for name in names:
        design = compile_network(name, work)
        estimates = {layer["name"]: layer["resources"] for layer in design.report["layers"]}
        layers = [_with_estimate(r, estimates.get(r["layer"], {})) if r["network"] == name else r for r in layers]
        for r in whole:
            if r["network"] == name:
                r["estimate LUT (layers)"] = f"{design.report['totals'].get('LUT', 0):,}"
    return whole, layers


def _error(estimate, actual):
    return f"{100 * (estimate - actual) / actual:+.0f} %" if actual else "-"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(NETWORKS), choices=list(NETWORKS))
    parser.add_argument("--shells", default="standalone,zynq")
    parser.add_argument("--estimates-only", action="store_true",
                        help="recompute the estimate columns against the Yosys figures in BENCHMARKS.md")
    args = parser.parse_args()
    shells = args.shells.split(",")
    with tempfile.TemporaryDirectory(prefix="rtlgen-finn-") as tmp:
        if args.estimates_only:
            _write(*refresh_estimates(args.only, Path(tmp)))
            return
        for name in args.only:          # the tables are rewritten after each network (an hour of Yosys in all)
            rows, per_layer = measure(name, Path(tmp), shells)
            write_tables(name, rows, per_layer)


def write_tables(name, whole, layers):
    """The two sections with ``name``'s rows replaced (other networks keep theirs), in NETWORKS order."""
    order = list(NETWORKS)
    whole = sorted([r for r in section_rows(WHOLE) if r["network"] != name] + whole,
                   key=lambda r: order.index(r["network"]))
    layers = sorted([r for r in section_rows(LAYERS) if r["network"] != name] + layers,
                    key=lambda r: order.index(r["network"]))
    _write(whole, layers)


def _write(whole, layers):
    write_section(
        WHOLE,
        "Each network compiled with FINN's folding config for it (finn-examples, `examples/finn/`) at "
        "100 MHz; cycles per frame measured on Verilator (bit-exact against qonnx on test images) beside the "
        "analytic II; resources by Yosys `synth_xilinx` of the whole design in each shell (standalone: the "
        "self-test with input ROMs; zynq: PS7, AXI-Lite control, AXI DMA). LUT excludes LUTRAM/SRL, listed "
        "beside. FINN's figures are its published board builds (Vivado, whole design).", whole)
    write_section(
        LAYERS,
        "The zynq build of each network above, per layer (FIFOs and width converters are their own rows): "
        "Yosys cells beside the compiler's estimate (`rtlgen.costmodel`: the analytic figure, calibrated where "
        "`rtlgen/data/cost_model.json` exists). LUT includes the slice LUTs used as LUTRAM and SRL, as the "
        "estimates do. `--estimates-only` recomputes the estimate columns against the Yosys figures already "
        "here, without Yosys. " + accuracy(layers), layers)


def accuracy(layers):
    """One sentence per network: how many layers' LUT estimates are within 15 % of Yosys (and within
    15 % or 16 LUT, for the layers of a few dozen LUTs), and the largest misses."""
    parts = []
    for name in NETWORKS:
        rows = [r for r in layers if r["network"] == name]
        if not rows:
            continue
        misses = [(int(r["est LUT"]) - int(r["LUT"]), r) for r in rows]
        close = sum(abs(d) <= 0.15 * int(r["LUT"]) for d, r in misses)
        near = sum(abs(d) <= max(0.15 * int(r["LUT"]), 16) for d, r in misses)
        worst = sorted(misses, key=lambda m: -abs(m[0]))[:2]
        parts.append(f"{name}: {close} of {len(rows)} layers within 15 %, {near} within 15 % or 16 LUT; largest "
                     "misses " + ", ".join(f"{r['layer']} {d:+,} LUT" for d, r in worst) + ".")
    return "LUT estimates: " + " ".join(parts)

if __name__ == "__main__":
    main()
