"""The INT8 generator MLP (100-256-512-784) on the PYNQ-Z2, beside the hand-written Vitis HLS design.

    python -m benchmarks.gan

1. Compiles ``tests/models/gen_mlp_int8.onnx`` with the shipped folding ``examples/gan/pynq_z2_folding.json``
   at 200 MHz (FIFO depths by simulation), simulates ``FRAMES`` random inputs on Verilator (bit-exact
   against qonnx, the steady-state cycles per frame measured), and builds the zynq shell with Yosys:
   LUT/FF/BRAM36/DSP of the whole design, utilisation of the xc7z020, the resource that binds.
2. The requantizer against the threshold table it replaces, for each layer's activation alone (a
   standalone Thresholding layer with the layer's thresholds, input range and PE): Yosys LUT/FF/BRAM36/DSP.

The HLS row is the project brief's (3,008 frames/s at 200 MHz; 58 % LUT, 94 % BRAM, 42 % DSP).
"""

import tempfile
from pathlib import Path

import numpy as np

from benchmarks.tables import write_section
from boards.yosys import synthesize
from layers.datapath import dtype_for_range
from layers.thresholding import Thresholding, ThresholdingSpec
from rtlgen import api
from rtlgen.check.verify import verify_outputs

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "models" / "gen_mlp_int8.onnx"
FOLDING = ROOT / "examples" / "gan" / "pynq_z2_folding.json"
CLOCK_MHZ = 200.0
FRAMES = 32
CAPACITY = {"LUT": 53_200, "FF": 106_400, "BRAM36": 140, "DSP": 220}
HLS = {"design": "hand-written Vitis HLS (project brief)", "II cycles": "-", "fps @200 MHz": "3,008",
       "fps @100 MHz": "1,575", "LUT": "58 %", "FF": "-", "BRAM36": "94 %", "DSP": "42 %", "binds": "BRAM",
       "Fmax estimate": "200 MHz (reported)", "vs HLS": "1.0x"}


def whole_design(work):
    design = api.compile(MODEL, work / "gan", folding=str(FOLDING), clock_mhz=CLOCK_MHZ)
    x = np.random.default_rng(1).uniform(-3.8, 3.8, size=(FRAMES, 100)).astype(np.float32)
    run = design.simulate(x)
    comparison = verify_outputs(design.model, x, run.outputs, design.io)
    assert comparison.passed, comparison.summary()
    synth = design.build(shell="zynq", say=lambda line: None)
    totals = synth["totals"]
    used = {"LUT": synth["lut_including_memory"], "FF": totals["ff"], "BRAM36": totals["bram36"] + totals["bram18"] / 2,
            "DSP": totals["dsp"]}
    share = {k: used[k] / CAPACITY[k] for k in used}
    ii = design.report["analytic_cycles_per_frame"]
    path = synth["timing"]["design"]
    if path is None:        # no whole-design path from sta (the zynq top): the slowest layer's
        path = min(synth["timing"]["layers"].values(), key=lambda p: p["fmax_mhz_estimate"], default=None)
    fps = lambda mhz: f"{mhz * 1e6 / run.cycles_per_frame:,.0f}"
    row = {"design": f"rtlgen, {FOLDING.relative_to(ROOT)} (zynq shell, Yosys)", "II cycles": f"{ii:,}",
           "fps @200 MHz": fps(200), "fps @100 MHz": fps(100),
           **{k: f"{used[k]:,.1f} ({100 * share[k]:.0f} %)" if k == "BRAM36" else f"{used[k]:,} ({100 * share[k]:.0f} %)"
              for k in used},
           "binds": max(share, key=share.get),
           "Fmax estimate": f"~{path['fmax_mhz_estimate']:.0f} MHz ({path['levels']} levels)" if path else "-",
           "vs HLS": f"{CLOCK_MHZ * 1e6 / run.cycles_per_frame / 3008:.1f}x"}
    print(row, f"measured {run.cycles_per_frame} cycles/frame; longest path {path}", flush=True)
    return row, design, layer_rows(synth)


def layer_rows(synth):
    """Per layer of the whole design: Yosys beside the estimate, and its longest path (the DSP-packed MVAUs'
    pipelining shows here: levels after the launching register, the cells it runs through)."""
    rows = []
    for name, r in synth["layers"].items():
        est, path = r["estimate"], synth["timing"]["layers"].get(name)
        rows.append({"layer": name, "LUT": f"{r['lut'] + r['lut_as_memory']:,}", "est LUT": f"{est.get('LUT', 0):,}", "FF": f"{r['ff']:,}",
                     "BRAM36": f"{r['bram36'] + r['bram18'] / 2:g}", "est BRAM36": f"{est.get('BRAM18', 0) / 2:g}",
                     "DSP": r["dsp"], "est DSP": est.get("DSP", 0),
                     "levels": path["levels"] if path else "-",
                     "longest path": path["through"] if path else "-",
                     "Fmax estimate": f"~{path['fmax_mhz_estimate']:.0f} MHz" if path else "-"})
    return rows


def activation_rows(design):
    """Per layer: the requantizer and the threshold table, each alone in a Thresholding layer, by Yosys."""
    rows = []
    for node in design.compiled.graph.nodes:
        if node.op_type != "MVAU":
            continue
        spec = node.spec()
        lo, hi = spec.table.value_range
        for style in ("requant", "thresholds"):
            unit = ThresholdingSpec(spec.mh, spec.pe, dtype_for_range(lo, hi), spec.output_dtype, spec.thresholds,
                                    spec.act_val, activation_style=style)
            synth = synthesize(Thresholding(unit))
            est = unit.resource_estimate()
            rows.append({"layer": node.name, "activation": style, "channels x levels": f"{spec.mh} x {spec.table.steps}",
                         "PE": spec.pe, "LUT": f"{synth.lut:,}", "FF": f"{synth.ff:,}",
                         "BRAM36": f"{synth.bram36 + synth.bram18 / 2:g}", "DSP": synth.dsp,
                         "estimate LUT/BRAM36/DSP": f"{est.lut:,} / {est.bram18 / 2:g} / {est.dsp}"})
            print(rows[-1], flush=True)
    return rows


def main():
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--whole-only", action="store_true", help="skip the per-activation comparison (2.)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rtlgen-gan-") as tmp:
        row, design, layers = whole_design(Path(tmp))
        write_section(
            "INT8 generator MLP on the PYNQ-Z2",
            f"`tests/models/gen_mlp_int8.onnx` (100-256-512-784, INT8) compiled with "
            f"`{FOLDING.relative_to(ROOT)}` at {CLOCK_MHZ:.0f} MHz; frames/s from the measured steady-state cycles "
            f"per frame of a {FRAMES}-frame Verilator simulation (bit-exact against qonnx); resources by Yosys "
            f"`synth_xilinx` of the whole design in the zynq shell (PS7, AXI-Lite control, AXI DMA), "
            f"utilisation of the xc7z020. The HLS design's figures are the project brief's.",
            [row, HLS])
        write_section(
            "INT8 generator MLP: per layer, Yosys beside the estimate, and timing",
            "The same build, per layer (FIFOs and width converters included as their own rows): Yosys cells "
            "beside `resource_estimate()`, and each layer's longest register-to-register path from Yosys `sta` "
            "with the delay model of `boards/timing.py` (cell delays + 0.5 ns per routed net + 0.3 ns setup; "
            "an estimate, Vivado's timing report is the real figure).", layers)
        if args.whole_only:
            return
        write_section(
            "INT8 activations: the requantizer against the threshold table",
            "Each generator layer's activation alone (a standalone Thresholding layer with the layer's "
            "thresholds, accumulator range and PE), by Yosys `synth_xilinx`: the exact requantizer "
            "(`layers/requant.py`: a multiply-add, a shift and a few corrected levels per channel) against "
            "the 255 stored thresholds per channel it replaces, beside the estimate.", activation_rows(design))


if __name__ == "__main__":
    main()
