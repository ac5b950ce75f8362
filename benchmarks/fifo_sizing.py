"""Analytic FIFO sizing on large feature maps (issue 46 item 6): how long the composed timing models take,
now and at a baseline commit, on the same folded designs.

    python -m benchmarks.fifo_sizing                       # every case, against the baseline commit
    python -m benchmarks.fifo_sizing espcn-128 --baseline none
    python -m benchmarks.fifo_sizing --baseline ebc0ff0    # any commit (git archive into a temporary tree)

Per case: the model compiled through ``insert_duplicates`` (its folding: the default, or the folding
optimizer's with ``--fit pynq-z2``), then :func:`rtlgen.passes.size_fifos.analytic_fifo_depths` of the
design with its FIFOs, timed alone: CPU seconds of the process (user + system; on a shared machine the wall
clock also counts other jobs' turns) and wall seconds, the best of ``--repeat`` runs. The baseline runs the
same steps with its own code in a subprocess (once: the word-by-word models take minutes) and must give the
same depths. ``words/frame`` is the sum over the design's streams: the models' work is per word, for as
many frames as the output takes to settle at the II (``frames``).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.tables import write_section

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
BASELINE = "ebc0ff0"        # the commit before the models were vectorized (issue 46 item 6)


def _qonnx_espcn():
    import qonnx
    return Path(qonnx.__file__).parent / "data" / "onnx" / "bsd300x3-espcn" / "nn_resize" / "quant_model.onnx"


# name: (model path, compile options)
CASES = {
    "espcn-128": (lambda: MODELS / "espcn" / "espcn_128.onnx", {}),
    "espcn-128-fit": (lambda: MODELS / "espcn" / "espcn_128.onnx", {"fit": "pynq-z2"}),
    "qonnx-espcn": (_qonnx_espcn, {}),             # the model of the issue (qonnx's test data, 3 -> 64 -> 64 -> 32 -> 3)
    "qonnx-espcn-fit": (_qonnx_espcn, {"fit": "pynq-z2"}),
    "espcn-16": (lambda: MODELS / "espcn" / "espcn_16.onnx", {}),
    "cnv-w1a1": (lambda: MODELS / "cnv_1w1a_ts_clean.onnx", {}),
}

# Runs in this tree or in the baseline's (as `python -c`, so it needs nothing the baseline lacks): the
# design, then the sizing timed alone. Prints one JSON line.
WORKER = r"""
import json, resource, sys, time, warnings
warnings.filterwarnings("ignore")
import numpy as np
from rtlgen.backend.compile import COMPILE
from rtlgen.flows import Runner
from rtlgen.options import CompileOptions
from rtlgen.passes import size_fifos
from rtlgen.analyses import timing
from rtlgen.analyses.timing import tensor_words
from rtlgen.passes.insert import insert_dwcs_and_fifos
path, options, repeat = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
runner, options = Runner(), CompileOptions(**options)
lowered = runner.run(COMPILE, path, options, stop="to_hw")
start = cpu()
graph = runner.run(COMPILE, lowered, options, start="fold", stop="insert_duplicates")
fold = cpu() - start
fifoed = insert_dwcs_and_fifos(graph)
frames = []
compose = timing.graph_timing
def counted(g, source):
    frames.append(len(source) // tensor_words(g)[g.input])
    return compose(g, source)
timing.graph_timing = counted
best = None
for _ in range(repeat):
    frames.clear()
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    depths = size_fifos.analytic_fifo_depths(fifoed)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    best = (cpu, wall) if best is None or cpu < best[0] else best
words = tensor_words(fifoed)
print(json.dumps({"depths": depths, "cpu": best[0], "wall": best[1], "frames": list(frames),
                  "ii": max(n.spec().exp_cycles for n in graph.nodes), "words": int(sum(words.values())),
                  "fold": fold,
                  "rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6}))
"""


def measure(tree, path, options, repeat):
    """The worker's answer, run with ``tree``'s code."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", WORKER, str(path), json.dumps(options), str(repeat)], cwd=tree,
                         env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{path} in {tree}:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def baseline_tree(commit, into):
    """The files of ``commit`` in directory ``into`` (git archive)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return Path(into)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", metavar="CASE", help=f"any of {', '.join(CASES)} (default: all)")
    parser.add_argument("--baseline", default=BASELINE, help="a commit to compare with, or 'none'")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case {', '.join(unknown)}; the cases are {', '.join(CASES)}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        old = None if args.baseline == "none" else baseline_tree(args.baseline, tmp)
        for name in args.cases or CASES:
            path, options = CASES[name][0](), CASES[name][1]
            now = measure(ROOT, path, options, args.repeat)
            try:
                then = measure(old, path, options, 1) if old else None
            except RuntimeError as exc:           # the baseline's own failure (its --fit crashed on deep FIFOs)
                then = {"error": str(exc).strip().splitlines()[-1][:120]}
            depths = now["depths"]
            row = {"case": name, "model": path.name, "folding": "--fit pynq-z2" if options else "default",
                   "II cycles": f"{now['ii']:,}", "FIFOs": len(depths), "largest depth": f"{max(depths.values()):,}",
                   "words/frame": f"{now['words']:,}", "frames": "+".join(map(str, now["frames"])),
                   "sizing CPU s": f"{now['cpu']:.2f}", "sizing wall s": f"{now['wall']:.2f}",
                   "peak RSS GB": f"{now['rss_gb']:.2f}"}
            if then is not None and "error" in then:
                row.update({f"at {args.baseline}: CPU s": "fails: " + then["error"], f"at {args.baseline}: wall s": "",
                            "speed-up (CPU)": "", "same depths": ""})
            elif then is not None:
                row.update({f"at {args.baseline}: CPU s": f"{then['cpu']:.1f}", f"at {args.baseline}: wall s":
                            f"{then['wall']:.1f}", "speed-up (CPU)": f"{then['cpu'] / now['cpu']:.0f}x",
                            "same depths": "yes" if then["depths"] == depths else "NO"})
            if options:
                row["fold CPU s (optimizer)"] = f"{now['fold']:.1f}"
            rows.append(row)
            print(row, flush=True)
    keys = {k: None for r in rows for k in r}
    rows = [{k: r.get(k, "") for k in keys} for r in rows]
    write_section("Compiler: analytic FIFO sizing on large feature maps",
                  "Issue 46 item 6. `analytic_fifo_depths` (the layers' composed timing models, the default FIFO "
                  "sizing) on the design as folded, timed alone: CPU seconds (user + system: on this shared "
                  "2-core machine the wall clock also counts other jobs), the best of the runs, and wall seconds "
                  "of that run; the baseline commit (its width converters modelled a word at a time in Python) "
                  "timed once, with its own code, and its depths compared. `words/frame`: the words of all the "
                  "design's streams in one frame (the models' work is per word); `frames`: the frame counts the "
                  "model ran until the output settled at the II. `fold CPU s`: the whole folding optimizer (CPU "
                  "seconds), whose estimate sizes the FIFOs of every folding it tries.", rows)


if __name__ == "__main__":
    main()
