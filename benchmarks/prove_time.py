"""`rtlgen prove` of a compiled design, cold, as a user runs it (issue 42 item 4: CNV-w1a1 <= 120 s on a
quiet 2-core machine with an empty ``RTLGEN_CACHE_DIR``).

    python -m benchmarks.prove_time                      # CNV-w1a1 (default compile), --jobs 2
    python -m benchmarks.prove_time cnv cnv-fit --note quiet

Each case compiles the model first (its own cache, not timed), then runs ``rtlgen prove OUT --jobs 2`` in
a new process with an empty ``RTLGEN_CACHE_DIR`` and writes its wall and CPU time (all processes: the
pool's workers, Yosys and the solvers), the machine's load when it started, and what was shown; a second
table is the per-node profile of the first case from ``OUT/prove/report.json`` (each distinct node's
proof: the instance proven, its outcome and the seconds of each step: the harness's RTLIL, the Yosys
models, each solver run).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.tables import write_section

ROOT = Path(__file__).resolve().parent.parent
BEFORE = ("Before the models were split and SymbiYosys left (the same command on the `--fifo-sizing none` compile of "
          "CNV-w1a1, at a similar load, 2026-11-27 morning): 1,268 s wall, about 470 CPU s, 31 proven, 15 bounded, "
          "3 unknown (ConvolutionInputGenerator_1, MVAU_3 and the DWC 128->1's live check timed out at 300 s).")
MODELS = ROOT / "tests" / "models"

# name: (model file, compile options, acceptance in seconds on a quiet 2-core machine or None)
CASES = {"cnv": ("cnv_1w1a_ts_clean.onnx", [], 120),
         "cnv-fit": ("cnv_1w1a_ts_clean.onnx", ["--fit", "pynq-z2"], None)}


def _rtlgen(args, env):
    subprocess.run([sys.executable, "-m", "rtlgen", *args], check=False, cwd=ROOT, env=env)


def measure(name, jobs, out):
    """Compile ``name`` into ``out`` (not timed), then `rtlgen prove` it cold: (summary row, report.json)."""
    model, options, target = CASES[name]
    with tempfile.TemporaryDirectory() as compile_cache, tempfile.TemporaryDirectory() as cache:
        _rtlgen(["compile", str(MODELS / model), "-o", str(out), "-q", *options],
                {**os.environ, "RTLGEN_CACHE_DIR": compile_cache})
        load = os.getloadavg()[0]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        _rtlgen(["prove", str(out), "--jobs", str(jobs)], {**os.environ, "RTLGEN_CACHE_DIR": cache})
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = json.loads((out / "prove" / "report.json").read_text())
    slowest = sorted((n for n in report["nodes"] if not n["cached"]), key=lambda n: -n["seconds"])[:3]
    row = {"design": f"{model} ({' '.join(options) or 'default folding'})",
           "command (empty RTLGEN_CACHE_DIR)": f"`rtlgen prove OUT --jobs {jobs}`",
           "nodes": len(report["nodes"]),
           "shown": ", ".join(f"{report[s]} {s}" for s in ("proven", "bounded", "failed", "unknown") if report[s]),
           "wall s": f"{wall:.1f}", "acceptance s": f"<= {target}" if target else "-",
           "CPU s (all processes)": f"{after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime:.1f}",
           "slowest nodes (s)": "; ".join(f"{n['node']} {n['seconds']:.0f}" for n in slowest),
           "load (1 min) at start": f"{load:.1f}"}
    print(row, flush=True)
    return row, report


def _steps(runs):
    """A node's proof steps in a cell: 'control bmc 46: 3.1 s; ...'."""
    def one(step, kind, depth, answer, seconds):
        what = f"{step} {kind}" + (f" {depth}" if depth is not None else "")
        return f"{what}{'' if answer in ('pass', 'done') else ' ' + answer}: {seconds:.1f}"
    return "; ".join(one(*run) for run in runs)


def profile_rows(report):
    """One row per distinct node proven (identical nodes share a proof: the first of them)."""
    rows, seen = [], set()
    for n in report["nodes"]:
        key = (n["seconds"], n["line"].split("  ", 1)[1])
        if key in seen or n["cached"]:
            continue
        seen.add(key)
        rows.append({"node": n["node"], "instance proven": n["instance"] or "itself",
                     "outcome": n["line"].split("  ", 1)[1].split(" [small instance")[0],
                     "s": f"{n['seconds']:.1f}", "steps (s)": _steps(n.get("runs") or [])})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", default=["cnv"], choices=sorted(CASES))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--note", default="", help="how the machine was (quiet, loaded)")
    args = parser.parse_args()
    rows, reports = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases:
            row, report = measure(name, args.jobs, Path(tmp) / name)
            rows.append(row)
            reports.append(report)
    note = f" ({args.note})" if args.note else ""
    write_section("Proof: cold `rtlgen prove`",
                  "Issue 42's measure of a proof as a user runs it: `rtlgen prove OUT` in a new process with an "
                  "empty `RTLGEN_CACHE_DIR` on a design compiled just before (not timed), its nodes proven on "
                  "`--jobs` worker processes (identical nodes once, the longest first). The acceptance holds on "
                  "a quiet 2-core machine; `load at start` is the 1-minute load average when the row ran"
                  f"{note}. CPU s: all processes (workers, Yosys, smtbmc, yices). {BEFORE}", rows)
    write_section("Proof: per-node profile",
                  f"Each distinct node of the first row's design ({rows[0]['design']}), from "
                  "`OUT/prove/report.json`: the instance proven in its place, the outcome and the seconds of "
                  "each step (wall, on a worker sharing the cores): the harnesses' RTLIL, one Yosys run making "
                  "every model, then each solver run (control: the counts and credits; stable: the payloads "
                  "held while stalled; live: one frame out by the deadline).", profile_rows(reports[0]))


if __name__ == "__main__":
    main()
