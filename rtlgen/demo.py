"""`rtlgen demo`: the whole job on a bundled trained model, no arguments needed.

The model is a 64-64-64-10 MLP with 2-bit weights and activations and a 2-bit input, trained on the
8x8 digits of scikit-learn (QONNX from Brevitas; 96.67 % on its 360-image test set through qonnx). The
demo compiles it, simulates the test set through the stitched RTL, checks every output against qonnx's
execution of the model, and reports accuracy, cycles per frame and (``rtlgen build``: Yosys) resources
and timing.

The compile goes into an OUT directory like ``rtlgen compile``'s (:mod:`sim.outdir`: its manifest,
lock and atomic swap), with the verification result and the Yosys build in it, so ``report.html`` there
has every section and ``rtlgen sim|verify|build OUT`` work on it afterwards. ``rtlgen demo`` keeps it in
``./rtlgen-demo`` unless ``-o`` says where: a new user's first command should leave a report to open and a
design to try the other commands on, in the folder they ran it from; the next demo replaces it, and a
folder of that name that is not an rtlgen output is refused, not overwritten. :func:`run_demo` without
``out`` works in a temporary directory and removes it.
"""

import tempfile
import time
from importlib import resources
from pathlib import Path

import numpy as np

from rtlgen import api
from boards.yosys import first_wasm_run
from rtlgen.backend.build import build
from rtlgen.check.verify import compare, qonnx_reference, tolerance
from rtlgen.report.html import record_verification
from sim.runner import default_simulator

__all__ = ["run_demo", "DEMO_MODEL", "DEMO_TESTSET", "DEMO_IMAGES", "DEMO_OUT"]

DEMO_MODEL = "digits_tfc_w2a2i2_clean.onnx"
DEMO_TESTSET = "digits_tfc_w2a2i2_testset.npz"
DEMO_IMAGES = 360                   # the test set's size
DEMO_OUT = "rtlgen-demo"            # where `rtlgen demo` keeps its OUT without -o (the working directory)


def bundled(name):
    return resources.files("rtlgen") / "data" / name


def run_demo(out=None, *, simulator=None, synth=True, images=DEMO_IMAGES, force=False, say=print):
    """Compile the bundled model into ``out`` (an rtlgen OUT, kept; None: a temporary directory, removed),
    simulate ``images`` test images, compare with qonnx, and with ``synth`` build it (Yosys); returns 0
    when every output equals qonnx's, else 1. ``force``: compile into a directory that is neither empty
    nor an rtlgen output (as ``rtlgen compile --force``)."""
    if simulator is None:
        default_simulator()             # a bad $RTLGEN_SIM is named now, before anything is written
    if out is None:
        with tempfile.TemporaryDirectory(prefix="rtlgen-demo-") as tmp:
            return _demo(Path(tmp) / "out", False, simulator, synth, images, force, say)
    return _demo(Path(out), True, simulator, synth, images, force, say)


def _demo(out, keep, simulator, synth, images, force, say):
    model = str(bundled(DEMO_MODEL))
    data = np.load(str(bundled(DEMO_TESTSET)))
    x, y = data["x"][:images], data["y"][:images]
    say(f"model: {DEMO_MODEL} (digits MLP 64-64-64-10, w2a2, 2-bit input); {len(x)} test images")
    start = time.perf_counter()
    design = api.compile(model, out, simulator=simulator, force=force, say=lambda line: say(f"  {line}"),
                         warn=lambda line: say(f"warning: {line}"))
    compiled, report = design.compiled, design.report
    say(f"compiled in {time.perf_counter() - start:.1f} s into {out}: "
        + " -> ".join(f"{n.name}" for n in compiled.chain if n.op.role != "fifo"))
    start = time.perf_counter()
    run = design.simulate(x, simulator=simulator)
    say(f"simulated {run.frames} images in {time.perf_counter() - start:.1f} s: "
        f"{run.cycles_per_frame:.2f} cycles/frame (slowest layer II {report['analytic_cycles_per_frame']}), "
        f"latency {run.latency} cycles")
    reference = qonnx_reference(model, x)
    result = compare(run.outputs, reference, rtol=tolerance(design.io))
    page = record_verification(out, result)          # verify.json and report.html's verification section
    accuracy = float((run.outputs.argmax(axis=1) == y).mean())
    say(f"accuracy {100 * accuracy:.2f} % (qonnx: {100 * float((reference.argmax(axis=1) == y).mean()):.2f} %); "
        f"{result.summary()}")
    say("estimate: " + ", ".join(f"{k} {v:,}" for k, v in report["totals"].items()))
    if synth:
        # `rtlgen build OUT --flat`: the self-test shell, the Vivado plan and Yosys with the timing estimate;
        # flat: one Yosys run over this small design is sooner than one per layer (by parts pays on large ones)
        if first_wasm_run():
            say("yosys: compiling the WebAssembly Yosys to machine code first (once on this machine, kept in "
                "the YoWASP cache; later builds start at once)")
        start = time.perf_counter()
        built = build(out, say=lambda line: None, flat=True)
        t = built["totals"]
        design_path = (built.get("timing") or {}).get("design")
        say(f"yosys synth_xilinx (xc7z020, in the standalone shell): LUT {t['lut']:,}, FF {t['ff']:,}, "
            f"LUTRAM {t['lutram']:,}, SRL {t['srl']:,}, BRAM36 {t['bram36']}, BRAM18 {t['bram18']}, DSP {t['dsp']} "
            f"[{time.perf_counter() - start:.1f} s, Yosys {built['yosys_seconds']:.1f} s of it]"
            + (f"; Fmax ~{design_path['fmax_mhz_estimate']:.0f} MHz (estimate)" if design_path else ""))
    if keep:
        say(f"report -> {page}: open it in a browser (rtlgen sim, verify and build work on {out})")
    return 0 if result.passed else 1
