"""`rtlgen build --shell zynq` of a `--fit` design by parts (boards.yosys_parts, issue 42 item 3): cold (an
empty ``RTLGEN_CACHE_DIR``), the same build again, the design with one layer refolded (only the parts whose
Verilog changed are synthesized), and, where asked, one flat Yosys run of the same design beside it (the
totals of the parts against the whole's: within 1 % of the LUTs, every other count equal).

    RTLGEN_YOSYS=native python -m benchmarks.build_parts cnv [--flat cnv] --note "quiet"

Each build is the CLI in a child process, timed from outside (wall; CPU of the child and its workers).
"""

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from benchmarks.tables import section_rows, write_section
from rtlgen import api

MODELS = Path(__file__).resolve().parent.parent / "tests" / "models"
# name: (model, compile options, the layer refolded and its new PE: the sim benchmark's)
DESIGNS = {
    "tfc": ("TFC_2W2A.onnx", {"fit": "pynq-z2"}, ("MVAU_3", 10)),
    "cnv": ("cnv_1w1a_ts_clean.onnx", {"fit": "pynq-z2"}, ("MVAU_5", 8)),
}
SECTION = "Board build by parts: cold, again, one layer changed"
COUNTS = ("lut_including_memory", "ff", "bram36", "bram18", "dsp")
_HEAD = {"lut_including_memory": "LUT", "ff": "FF", "bram36": "BRAM36", "bram18": "BRAM18", "dsp": "DSP"}


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _build(out, cache, *flags):
    """(wall s, CPU s, the build's report.json) of `rtlgen build OUT --shell zynq` with ``cache``."""
    env = dict(os.environ, RTLGEN_CACHE_DIR=str(cache))
    command = [sys.executable, "-m", "rtlgen", "build", str(out), "--shell", "zynq", *flags]
    start, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds, cpu = time.perf_counter() - start, _children_cpu() - cpu
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return seconds, cpu, json.loads((Path(out) / "build" / "yosys" / "report.json").read_text())


def _row(design, step, seconds, cpu, load, report, compared=None):
    totals, parts = report["totals"], report["synthesis"]
    row = {"design": design, "step": step,
           "parts": "flat" if parts == "flat" else f"{parts['synthesized']} synthesized, {parts['cached']} cached",
           "wall": f"{int(seconds // 60)} min {seconds % 60:.0f} s", "CPU s": f"{cpu:.0f}",
           "load": f"{load[0]:.1f}-{load[1]:.1f}"}
    row.update({_HEAD[k]: totals[k] for k in COUNTS})
    fmax = (report["timing"].get("design") or {}).get("fmax_mhz_estimate")
    row["Fmax est. MHz"] = "-" if fmax is None else f"{fmax:.0f}"
    row["against by parts"] = "-" if compared is None else ", ".join(
        f"{_HEAD[k]} {100 * (totals[k] - compared[k]) / compared[k]:+.2f} %"
        for k in COUNTS if compared[k])
    return row


def measure(name, flat, write):
    model, options, (layer, pe) = DESIGNS[name]
    label = f"{name} {' '.join(f'--{k} {v}' for k, v in options.items())}"
    with tempfile.TemporaryDirectory(prefix="rtlgen-buildparts-") as tmp:
        tmp = Path(tmp)
        os.environ["RTLGEN_CACHE_DIR"] = str(tmp / "compile-cache")     # the compiles' own, not timed
        api.compile(MODELS / model, tmp / "out", say=lambda line: None, **options)
        refold = json.loads((tmp / "out" / "folding.json").read_text())
        refold[layer]["PE"] = pe
        (tmp / "refold.json").write_text(json.dumps(refold))
        api.compile(MODELS / model, tmp / "refold", folding=str(tmp / "refold.json"), say=lambda line: None)
        cache = tmp / "cache"
        first = None
        for step, out in (("cold (empty cache)", tmp / "out"), ("the same build again", tmp / "out"),
                          (f"{layer} refolded (PE {pe})", tmp / "refold")):
            load = os.getloadavg()[0]
            seconds, cpu, report = _build(out, cache)
            write(_row(label, step, seconds, cpu, (load, os.getloadavg()[0]), report))
            first = first or report["totals"]
        if flat:
            load = os.getloadavg()[0]
            seconds, cpu, report = _build(tmp / "out", tmp / "cache-flat", "--flat")
            write(_row(label, "flat (one Yosys run)", seconds, cpu, (load, os.getloadavg()[0]), report, first))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("designs", nargs="+", choices=DESIGNS)
    parser.add_argument("--flat", nargs="*", default=(), choices=DESIGNS, help="also one flat Yosys run of these")
    parser.add_argument("--note", default="", help="how the machine was (quiet, loaded)")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    engine = os.environ.get("RTLGEN_YOSYS") or "wasm"
    # a flat row of a design not measured flat this time stays (a flat CNV run is ~25 minutes)
    rows = [row for row in section_rows(SECTION) if row.get("step", "").startswith("flat")
            and not any(row["design"].startswith(f"{name} ") for name in args.flat)]

    def write(row):
        rows.append(row)
        rows.sort(key=lambda r: r["step"].startswith("flat"))      # the flat rows last
        print(row, flush=True)
        write_section(
            SECTION,
            f"`rtlgen build OUT --shell zynq` at commit {commit} ({engine} Yosys), OUT compiled by `rtlgen compile "
            f"MODEL --fit pynq-z2` (the compile not timed): wall and CPU seconds of the CLI in a child process (its "
            f"workers included), an empty `RTLGEN_CACHE_DIR` at the start of each design, then the same build again, "
            f"then the design with one layer refolded (compiled again; only the parts whose Verilog changed are "
            f"synthesized, then the design around them). 'flat': one Yosys run over the whole design (`--flat`), its "
            f"totals against the cold build by parts (abc maps LUTs slightly differently run to run). LUT includes "
            f"LUTRAM and SRLs; Fmax the estimate of boards.timing. 'load': the 1-minute load before and after "
            f"(2 cores). Acceptance (issue 42): cold <= 8 min, after one layer changes <= 2 min. {args.note}".strip(),
            rows, provenance=f"Produced by `RTLGEN_YOSYS={engine} python -m benchmarks.build_parts "
                             f"{shlex.join(sys.argv[1:])}` on {date.today().isoformat()}.")
    for name in args.designs:
        measure(name, name in args.flat, write)


if __name__ == "__main__":
    main()
