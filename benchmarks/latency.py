"""The latency objective (issue 33) on hls4ml's jet tagger, 16-64-32-32-5, 6-bit weights and activations,
FIXED<16,6> input, at `--fit pynq-z2 --clock-mhz 200`: each objective's design, its latency reported
(report.json) and measured (`rtlgen sim --json`, 8 frames), its II, bit-exactness (`rtlgen verify` against
qonnx), the estimate, and with `--yosys` the Yosys build's resources in the zynq shell and its Fmax estimate.

    python -m benchmarks.latency                 # every row, no Yosys
    python -m benchmarks.latency --table         # the section rewritten from its rows, nothing measured
    python -m benchmarks.latency --yosys NAME..  # also `rtlgen build OUT --shell zynq` for those rows
                                                 # (heavy: run alone; RTLGEN_YOSYS=native if wasm runs out)
    python -m benchmarks.latency --keep DIR ...  # the compiled designs (and builds) kept in DIR
    python -m benchmarks.latency --keep DIR --reuse ...  # a design already compiled there (by this script,
                                                 # or `rtlgen compile` as below with its seconds in
                                                 # DIR/NAME/compile_seconds) not compiled again

Rows not measured again keep their previous figures (from BENCHMARKS.md).
"""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.tables import section_rows, write_section

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models" / "jet_tagger"
SECTION = "Latency objective: hls4ml's jet tagger at --fit pynq-z2, 200 MHz"
CASES = {   # name: (model file, objective, --max-utilization)
    "unpruned, throughput": ("jet_tagger.onnx", "throughput", "0.8"),
    "unpruned, latency": ("jet_tagger.onnx", "latency", "0.8"),
    "pruned 75 %, throughput": ("jet_tagger_pruned.onnx", "throughput", "0.8"),
    "pruned 75 %, latency": ("jet_tagger_pruned.onnx", "latency", "0.8"),
}
YOSYS = "Yosys LUT / FF / BRAM36 / DSP (zynq shell)"
HLS4ML = ("hls4ml (reference/anchors.md): 13 cycles = 65 ns at RF 1 on an xczu3eg (3,915 DSP, 88,289 LUT: "
          "many times the xc7z020), \"on the scale of 100 ns\" (arXiv:1804.06913), 75-150 ns quoted in issue 33")


def _rtlgen(*args):
    run = subprocess.run([sys.executable, "-m", "rtlgen", *args], capture_output=True, text=True, cwd=ROOT)
    return run.returncode, run.stdout + run.stderr


def measure(name, tmp, yosys=False, reuse=False):
    model, objective, utilization = CASES[name]
    out, x = Path(tmp) / name.replace(" ", "_").replace(",", "").replace("%", "pc"), Path(tmp) / "x.npy"
    np.save(x, np.load(MODELS / "features.npy")[:8])
    if reuse and (out / "compile_seconds").exists():
        seconds = float((out / "compile_seconds").read_text())
    else:
        start = time.time()
        code, log = _rtlgen("compile", str(MODELS / model), "-o", str(out), "-q", "--fit", "pynq-z2", "--clock-mhz",
                            "200", "--input-dtype", "FIXED<16,6>", "--objective", objective, "--max-utilization",
                            utilization)
        seconds = time.time() - start
        if code != 0:
            return {"design": name, "compile": f"no: {log.strip().splitlines()[-1][:100]}"}
        (out / "compile_seconds").write_text(f"{seconds:.1f}\n")
    report = json.loads((out / "report.json").read_text())
    code, log = _rtlgen("sim", str(out), "--input", str(x), "--json")
    run = json.loads(log[log.index("{"):]) if code == 0 else {}
    code, log = _rtlgen("verify", str(out), "--input", str(x))
    verdict = next((line.split(":")[0] for line in log.splitlines() if line.startswith(("bit-exact", "equal", "MISMATCH"))),
                   f"exit {code}")
    t = report["totals"]
    layers = [entry for entry in report["layers"] if entry["op_type"] == "MVAU"]
    heaps = " (bit heaps)" if layers and all(l["folding"].get("pipeline") == "distributed" for l in layers) else ""
    row = {"design": name, "model": model, "objective": objective, "--max-utilization": utilization,
           "compile": f"{seconds:.0f} s",
           "folding (PE x SIMD per layer)": ", ".join(f"{l['folding']['PE']}x{l['folding']['SIMD']}" for l in layers) + heaps,
           "II (cycles)": f"{report['analytic_cycles_per_frame']}; measured {run.get('cycles_per_frame', '-')}",
           "latency reported": f"{report['latency_cycles']} cycles = {report['latency_ns']:.0f} ns",
           "latency measured": f"{run.get('latency_cycles', '-')} cycles",
           "verify (8 inputs)": verdict,
           "estimate LUT / FF / BRAM36 / DSP": f"{t['LUT']:,} / {t['FF']:,} / {t['BRAM18'] / 2:g} / {t['DSP']}",
           YOSYS: "-", "Fmax estimate": "-"}
    if yosys:
        code, log = _rtlgen("build", str(out), "--shell", "zynq")
        built = out / "build" / "yosys" / "report.json"
        if code == 0 and built.exists():
            r = json.loads(built.read_text())
            row[YOSYS] = _yosys_cell(r)
            row["Fmax estimate"] = _fmax_cell(r) + _flat_fmax_text(out / "build" / "yosys")
        else:
            row[YOSYS] = f"build exit {code}: {log.strip().splitlines()[-1][:80]}"
    return row


def _yosys_cell(r):
    """The whole design's Yosys counts in the zynq shell, and the MVAUs' LUTs layer by layer."""
    tt = r["totals"]
    mvaus = {name: layer["lut_including_memory"] for name, layer in r["layers"].items() if name.startswith("MVAU")}
    return (f"{r['lut_including_memory']:,} / {tt['ff']:,} / {tt['bram36'] + tt['bram18'] / 2:g} / {tt['dsp']} "
            f"({r['lut_including_memory'] / r['capacity']['LUT']:.0%} of the LUTs; MVAUs "
            + " / ".join(f"{v:,}" for v in mvaus.values()) + f"; shell {r['shell']['lut_including_memory']:,})")


def _fmax_cell(r):
    """The design's Fmax estimate by parts (each layer between registers: boards.yosys_parts), and the
    slowest layer's."""
    design, layers = r["timing"]["design"], r["timing"]["layers"]
    worst = min(layers.items(), key=lambda item: item[1]["fmax_mhz_estimate"], default=None)
    text = "-" if design is None else f"~{design['fmax_mhz_estimate']:.0f} MHz"
    if worst is not None:
        text += f" (slowest layer {worst[0]}: ~{worst[1]['fmax_mhz_estimate']:.0f} MHz, {worst[1]['levels']} levels)"
    return text


def flat_fmax(yosys_dir):
    """The accelerator's longest path over its whole mapped netlist (its layers flattened into one module,
    :func:`boards.yosys.netlist_path`: the same ``sta`` and delay model as the by-parts estimate, which
    analyses each layer alone between registers): this one also sees the paths from one layer's last
    register through the next layer's first logic (chained layers, no FIFO between them). A CriticalPath,
    or None without the netlist."""
    from boards.yosys import netlist_path
    from rtlgen.backend.build import NETLIST_FILE
    from rtlgen.backend.stitch import DEFAULT_TOP_NAME
    netlist = Path(yosys_dir) / NETLIST_FILE
    return netlist_path(netlist, DEFAULT_TOP_NAME) if netlist.exists() else None


def _flat_fmax_text(yosys_dir):
    path = flat_fmax(yosys_dir)
    if path is None:
        return ""
    return f"; whole netlist flat: ~{path.fmax_mhz:.0f} MHz, {path.levels} levels ({path.through()})"


def main(argv):
    keep = argv[argv.index("--keep") + 1] if "--keep" in argv else None
    argv = [a for i, a in enumerate(argv) if a != "--keep" and (i == 0 or argv[i - 1] != "--keep")]
    yosys, table_only, reuse = "--yosys" in argv, "--table" in argv, "--reuse" in argv   # --table: measure nothing
    names = [a for a in argv if a not in ("--yosys", "--table", "--reuse")] or ([] if table_only else list(CASES))
    rows = {r["design"]: r for r in section_rows(SECTION)}
    with tempfile.TemporaryDirectory() as scratch:
        tmp = keep or scratch
        Path(tmp).mkdir(parents=True, exist_ok=True)
        for name in names:
            previous = rows.get(name, {})
            rows[name] = measure(name, tmp, yosys, reuse)
            if not yosys:       # keep an earlier Yosys figure
                for key in (YOSYS, "Fmax estimate"):
                    rows[name][key] = previous.get(key, "-")
            print(rows[name], flush=True)
    keys = ["design", "model", "objective", "--max-utilization", "compile", "folding (PE x SIMD per layer)",
            "II (cycles)", "latency reported", "latency measured", "verify (8 inputs)",
            "estimate LUT / FF / BRAM36 / DSP", YOSYS, "Fmax estimate"]
    table = [{k: rows[n].get(k, "-") for k in keys} for n in CASES if n in rows]
    write_section(SECTION, "Each design compiled with `rtlgen compile MODEL --fit pynq-z2 --clock-mhz 200 --input-dtype "
                  "\"FIXED<16,6>\" --objective OBJ --max-utilization U`; latency reported = report.json "
                  "`latency_cycles` (the composed timing model), measured = `rtlgen sim OUT --input X --json` "
                  "(first input word to last output word of one frame into the idle design), both at 5 ns a "
                  "cycle; verify = `rtlgen verify` against qonnx's execute_onnx on the original model. "
                  "The pruned model is hls4ml's deployed one (75 % of each layer's weights zero, "
                  "tests/models/jet_tagger/make_jet_tagger_pruned.py). \"(bit heaps)\": every MVAU built by "
                  "distributed arithmetic (`pipeline=distributed`, layers/distributed.py, issue 43: the constant "
                  "weights' canonical signed digits as one bit heap per output, pairs of digits that several "
                  "outputs hold added once and shared, or, for 6-bit elements, one term a weight, its product a "
                  "LUT a bit; LUT6 counters, one carry chain adding the last three rows (a ternary adder) or two, "
                  "the activation a LUT after it, registers where the 200 MHz clock needs them, none at the "
                  "layer's ends); the latency objective takes it per layer where it is shorter and the budget "
                  "allows. Yosys: `RTLGEN_YOSYS=native python -m benchmarks.latency --yosys NAME` (native "
                  "pyosys): `rtlgen build OUT --shell zynq`, by parts (each layer alone, its counter levels "
                  "modules of their own), the MVAUs' LUTs listed. " + HLS4ML + ".", table)


if __name__ == "__main__":
    main(sys.argv[1:])
