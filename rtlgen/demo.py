"""`rtlgen demo`: the whole job on a bundled trained model, no arguments needed.

The model is a 64-64-64-10 MLP with 2-bit weights and activations and a 2-bit input, trained on the
8x8 digits of scikit-learn (QONNX from Brevitas; 96.67 % on its 360-image test set through qonnx). The
demo compiles it, simulates the test set through the stitched RTL, checks every output against qonnx's
execution of the model, and reports accuracy, cycles per frame and (Yosys) resources.
"""

import tempfile
import time
from importlib import resources

import numpy as np

__all__ = ["run_demo", "DEMO_MODEL", "DEMO_TESTSET", "DEMO_IMAGES"]

DEMO_MODEL = "digits_tfc_w2a2i2_clean.onnx"
DEMO_TESTSET = "digits_tfc_w2a2i2_testset.npz"
DEMO_IMAGES = 360                   # the test set's size


def bundled(name):
    return resources.files("rtlgen") / "data" / name


def run_demo(*, simulator=None, synth=True, images=DEMO_IMAGES, say=print):
    from rtlgen.compiler import CompileOptions, compile_model
    from rtlgen.emit import build_report, write_outputs
    from sim.stream_io import read_outputs
    from rtlgen.verify import compare, qonnx_reference, simulate_model, tolerance

    model = str(bundled(DEMO_MODEL))
    data = np.load(str(bundled(DEMO_TESTSET)))
    x, y = data["x"][:images], data["y"][:images]
    say(f"model: {DEMO_MODEL} (digits MLP 64-64-64-10, w2a2, 2-bit input); {len(x)} test images")
    with tempfile.TemporaryDirectory(prefix="rtlgen-demo-") as out:
        start = time.perf_counter()
        compiled = compile_model(model, CompileOptions(simulator=simulator), say=lambda line: say(f"  {line}"))
        write_outputs(compiled, out)
        report = build_report(compiled)
        say(f"compiled in {time.perf_counter() - start:.1f} s: "
            + " -> ".join(f"{n.name}" for n in compiled.chain if n.op_type != "StreamingFIFO"))
        verilog, io, report = read_outputs(out)
        start = time.perf_counter()
        run = simulate_model(verilog, io, x, report, simulator=simulator)
        say(f"simulated {run.frames} images in {time.perf_counter() - start:.1f} s: "
            f"{run.cycles_per_frame:.2f} cycles/frame (slowest layer II {report['analytic_cycles_per_frame']}), "
            f"latency {run.latency} cycles")
    reference = qonnx_reference(model, x)
    result = compare(run.outputs, reference, rtol=tolerance(compiled.io))
    accuracy = float((run.outputs.argmax(axis=1) == y).mean())
    say(f"accuracy {100 * accuracy:.2f} % (qonnx: {100 * float((reference.argmax(axis=1) == y).mean()):.2f} %); "
        f"{result.summary()}")
    est = report["totals"]
    say("estimate: " + ", ".join(f"{k} {v:,}" for k, v in est.items()))
    if synth:
        from boards.yosys import synthesize
        from rtlgen.stitch import DEFAULT_TOP_NAME
        r = synthesize(compiled.verilog, top=DEFAULT_TOP_NAME)
        say(f"yosys synth_xilinx (xc7z020): LUT {r.lut}, FF {r.ff}, LUTRAM {r.lutram}, SRL {r.srl}, "
            f"BRAM36 {r.bram36}, BRAM18 {r.bram18}, DSP {r.dsp} [{r.seconds:.1f} s]")
    return 0 if result.passed else 1
