"""The first `rtlgen sim` of a design, its bench built from cached per-layer parts (sim.parts, issue 42
item 2), with an empty ``RTLGEN_CACHE_DIR``; the same simulation again (the bench cached); the design
with one layer refolded (only the parts whose Verilog changed are compiled); the network with new weight
values at the same folding (weights in memory are data: only layers whose weights are logic compile); beside the one-model build
(``RTLGEN_SIM_PARTS=0``) where asked. Every simulation's outputs are checked against qonnx.

    python -m benchmarks.sim_parts tfc cnv [--flat tfc] [--frames N]
"""

import argparse
import json
import os
import re
import resource
import sys
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.tables import write_section
from rtlgen import api
from rtlgen.check.verify import verify_outputs
from sim import compiled, parts

MODELS = Path(__file__).resolve().parent.parent / "tests" / "models"
# name: (model, compile options, the layer refolded and its new PE, input)
DESIGNS = {
    "tfc": ("TFC_2W2A.onnx", {"fit": "pynq-z2"}, ("MVAU_3", 10), "mnist"),
    "cnv": ("cnv_1w1a_ts_clean.onnx", {"fit": "pynq-z2"}, ("MVAU_5", 8), "images"),
}


def _inputs(kind, n, model):
    from qonnx.core.modelwrapper import ModelWrapper

    wrapper = ModelWrapper(str(model))
    shape = wrapper.get_tensor_shape(wrapper.graph.input[0].name)[1:]
    if kind == "mnist":
        return np.load(MODELS / "mnist_test_1000.npz")["x"][:n].reshape(n, *shape).astype(np.float32)
    return np.random.default_rng(0).integers(0, 256, (n, *shape)).astype(np.float32)


def _retrained(model, path):
    """``model`` with new random values for its quantized weights (same shapes, same quantizers): what
    training again gives; written to ``path``."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(model)
    quantized = {n.input[0] for n in graph.graph.node if n.op_type in ("Quant", "BipolarQuant")}
    rng = np.random.default_rng(42)
    for init in graph.graph.initializer:
        weights = numpy_helper.to_array(init)
        if init.name in quantized and weights.ndim >= 2:
            init.CopyFrom(numpy_helper.from_array(rng.uniform(-1, 1, weights.shape).astype(np.float32), init.name))
    onnx.save(graph, path)
    return path


def _cpu():
    """CPU seconds of this process and its reaped children (the pool's workers, Verilator, g++, the run)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed_sim(design, x):
    """(seconds, CPU seconds, seconds of the run itself, the run, the parts builds it made)."""
    made, build, report, runs = [], parts.build_from_parts, compiled._run_reporting, []

    def spy(*args, **kwargs):
        made.append(build(*args, **kwargs))
        return made[-1]

    def timed_run(*args, **kwargs):
        start = time.perf_counter()
        try:
            return report(*args, **kwargs)
        finally:
            runs.append(time.perf_counter() - start)
    parts.build_from_parts, compiled._run_reporting = spy, timed_run
    try:
        start, cpu = time.perf_counter(), _cpu()
        run = design.simulate(x)
        return time.perf_counter() - start, _cpu() - cpu, sum(runs), run, made
    finally:
        parts.build_from_parts, compiled._run_reporting = build, report


def _profile(made):
    """What the parts and the top of the last build cost (wall seconds of each step, from the cache's
    profile.json files): one line, the longest first."""
    if not made or made[-1].harness_cached:
        return ""
    b = made[-1]
    steps = []
    for key in b.compiled:
        entry = parts.cache_dir() / "compiled" / f"part-{key}"
        profile = json.loads((entry / "profile.json").read_text())
        label = re.search(r"^module (\S+)", (entry / "wrapper.sv").read_text(), re.M).group(1)
        steps.append((profile.get("verilate", 0) + profile.get("g++", 0), label, profile))
    top = json.loads((b.exe.parent.parent / "profile.json").read_text())
    steps.sort(key=lambda step: -step[0])
    names = {p.name: p.label for p in parts.plan(*_last_design).parts} if _last_design else {}
    shown = "; ".join(f"{names.get(label, label)} {p.get('verilate', 0):.1f} + {p.get('g++', 0):.1f}"
                      for _, label, p in steps[:6])
    rest = sum(t for t, _, _ in steps[6:])
    return (f"{shown}; {len(steps) - 6} more {rest:.1f} s in all; the top {top.get('verilate', 0):.1f} + "
            f"{top.get('g++ and link', 0):.1f}" if len(steps) > 6 else f"{shown}; the top {top.get('verilate', 0):.1f} + "
            f"{top.get('g++ and link', 0):.1f}")


_last_design = None


def _checked(design, x, run):
    result = verify_outputs(design.model, x, run.outputs, design.io)
    if not result.passed:
        sys.exit(f"{design.out}: not equal to qonnx: {result.summary()}")
    return "bit-exact" if result.exact else "equal up to float32 ties"


def _parts_line(made):
    if not made:
        return "-"
    b = made[-1]
    return "bench cached" if b.harness_cached else f"{len(b.compiled)} of {b.parts} compiled ({b.layers} layers)"


def measure(name, frames, flat, profiles, write):
    global _last_design
    model, options, (layer, pe), kind = DESIGNS[name]
    x = _inputs(kind, frames, MODELS / model)
    rows = []
    with tempfile.TemporaryDirectory(prefix="rtlgen-simparts-") as tmp:
        tmp = Path(tmp)
        os.environ["RTLGEN_CACHE_DIR"] = str(tmp / "cache")
        design = api.compile(MODELS / model, tmp / "out", **options)
        refold = json.loads((tmp / "out" / "folding.json").read_text())
        refold[layer]["PE"] = pe
        (tmp / "refold.json").write_text(json.dumps(refold))
        ii = design.report["analytic_cycles_per_frame"]
        os.environ[parts.ENV] = "1"
        retrained = _retrained(MODELS / model, tmp / "retrained.onnx")
        for label, what in (("first sim (empty cache)", design), ("the same sim again", design), (
                f"{layer} refolded (PE {pe})", lambda: api.compile(MODELS / model, tmp / "refold",
                                                                   folding=str(tmp / "refold.json"))), (
                "new weights (retrained), the same folding", lambda: api.compile(
                    retrained, tmp / "retrained", folding=str(tmp / "out" / "folding.json")))):
            d = what() if callable(what) else what
            _last_design = (d.verilog, "finn_design_wrapper")
            load = os.getloadavg()[0]
            seconds, cpu, ran, run, made = _timed_sim(d, x)
            rows.append({"design": f"{name} {' '.join(f'--{k} {v}' for k, v in options.items())}", "step": label,
                         "bench": "parts", "parts": _parts_line(made), "wall s": f"{seconds:.1f}",
                         "CPU s": f"{cpu:.1f}", "run s": f"{ran:.1f}", "load": f"{load:.1f}-{os.getloadavg()[0]:.1f}",
                         "cycles/frame (II)": f"{run.cycles_per_frame:.0f} ({d.report['analytic_cycles_per_frame']})",
                         "outputs": _checked(d, x, run)})
            profile = _profile(made)
            if profile:
                profiles.append(f"{name}, {label}: {profile}")
                print(profiles[-1], flush=True)
            print(rows[-1], flush=True)
            write(rows[-1])
        if flat:
            os.environ["RTLGEN_CACHE_DIR"] = str(tmp / "cache-flat")
            os.environ[parts.ENV] = "0"
            load = os.getloadavg()[0]
            seconds, cpu, ran, run, _ = _timed_sim(design, x)
            rows.append({"design": rows[0]["design"], "step": "first sim (empty cache)", "bench": "one model",
                         "parts": "-", "wall s": f"{seconds:.1f}", "CPU s": f"{cpu:.1f}", "run s": f"{ran:.1f}",
                         "load": f"{load:.1f}-{os.getloadavg()[0]:.1f}",
                         "cycles/frame (II)": f"{run.cycles_per_frame:.0f} ({ii})", "outputs": _checked(design, x, run)})
            print(rows[-1], flush=True)
            write(rows[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("designs", nargs="+", choices=DESIGNS)
    parser.add_argument("--flat", nargs="*", default=(), choices=DESIGNS, help="also the one-model build of these")
    parser.add_argument("--frames", type=int, default=4)
    parser.add_argument("--note", default="", help="how the machine was (quiet, loaded)")
    args = parser.parse_args()
    profiles, rows = [], []
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()

    def write(row):
        rows.append(row)
        write_section("Simulation built from cached parts",
                      f"`rtlgen sim` of {args.frames} frames at commit {commit}: wall and CPU seconds of the simulation "
                      f"call (bench build and run; the compile not counted; CPU: this process and all its children), an "
                      f"empty `RTLGEN_CACHE_DIR` at the start of each design, then the same simulation again, then the "
                      f"design with one layer refolded (compiled again; its simulation compiles only the parts whose "
                      f"Verilog changed), then the network with new weight values (random, the same shapes and quantizers) "
                      f"compiled with the first design's folding.json: weights a layer keeps in memory are loaded as "
                      f"data at the run's start (sim.parts), so only layers whose weights are logic compile again. "
                      f"'run s': the compiled bench running. 'load': the machine's 1-minute load "
                      f"before and after (2 cores). 'one model': the whole design verilated and compiled as one model "
                      f"(`RTLGEN_SIM_PARTS=0`). Where the build's time went (wall seconds of Verilator + g++ per part, "
                      f"the largest first): {' / '.join(profiles) or '-'}. {args.note}".strip(), rows)
    for name in args.designs:
        measure(name, args.frames, name in args.flat, profiles, write)

if __name__ == "__main__":
    main()
