"""The first `rtlgen sim` of a design, its bench built from cached per-layer parts (sim.parts, issue 42
item 2), with an empty ``RTLGEN_CACHE_DIR``; the same simulation again (the bench cached); and the design
with one layer refolded (only the parts whose Verilog changed are compiled); beside the one-model build
(``RTLGEN_SIM_PARTS=0``) where asked. Every simulation's outputs are checked against qonnx.

    python -m benchmarks.sim_parts tfc cnv [--flat tfc] [--frames N]
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.tables import write_section
from rtlgen import api
from rtlgen.check.verify import verify_outputs
from sim import parts

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


def _timed_sim(design, x):
    """(seconds, the run, the parts builds it made)."""
    made, build = [], parts.build_from_parts

    def spy(*args, **kwargs):
        made.append(build(*args, **kwargs))
        return made[-1]
    parts.build_from_parts = spy
    try:
        start = time.perf_counter()
        run = design.simulate(x)
        return time.perf_counter() - start, run, made
    finally:
        parts.build_from_parts = build


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


def measure(name, frames, flat):
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
        for label, what in (("first sim (empty cache)", design), ("the same sim again", design), (
                f"{layer} refolded (PE {pe})", lambda: api.compile(MODELS / model, tmp / "refold",
                                                                   folding=str(tmp / "refold.json")))):
            d = what() if callable(what) else what
            seconds, run, made = _timed_sim(d, x)
            rows.append({"design": f"{name} {' '.join(f'--{k} {v}' for k, v in options.items())}", "step": label,
                         "bench": "parts", "parts": _parts_line(made), "seconds": f"{seconds:.1f}",
                         "cycles/frame (II)": f"{run.cycles_per_frame:.0f} ({d.report['analytic_cycles_per_frame']})",
                         "outputs": _checked(d, x, run)})
            print(rows[-1], flush=True)
        if flat:
            os.environ["RTLGEN_CACHE_DIR"] = str(tmp / "cache-flat")
            os.environ[parts.ENV] = "0"
            seconds, run, _ = _timed_sim(design, x)
            rows.append({"design": rows[0]["design"], "step": "first sim (empty cache)", "bench": "one model",
                         "parts": "-", "seconds": f"{seconds:.1f}", "cycles/frame (II)": f"{run.cycles_per_frame:.0f} ({ii})",
                         "outputs": _checked(design, x, run)})
            print(rows[-1], flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("designs", nargs="+", choices=DESIGNS)
    parser.add_argument("--flat", nargs="*", default=(), choices=DESIGNS, help="also the one-model build of these")
    parser.add_argument("--frames", type=int, default=4)
    parser.add_argument("--note", default="", help="how the machine was (quiet, loaded)")
    args = parser.parse_args()
    rows = [row for name in args.designs for row in measure(name, args.frames, name in args.flat)]
    write_section("Simulation built from cached parts",
                  f"`rtlgen sim` of {args.frames} frames: wall seconds of the simulation call (bench build and run; "
                  f"the compile not counted), an empty `RTLGEN_CACHE_DIR` at the start of each design, then the same "
                  f"simulation again, then the design with one layer refolded (compiled again; its simulation "
                  f"compiles only the parts whose Verilog changed). 'one model': the whole design verilated and "
                  f"compiled as one model (`RTLGEN_SIM_PARTS=0`). {args.note}".strip(), rows)


if __name__ == "__main__":
    main()
