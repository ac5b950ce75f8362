"""Compile time (ONNX -> Verilog) and whole-network simulation speed of the compiler on real models.

    python -m benchmarks.compiler              # TFC (zoo 1W1A), digits, CNV (1W1A): both tables
    python -m benchmarks.compiler tfc digits   # a subset

Compile time is split into the compiler's steps (FIFO sizing simulates the stitched design; the
Verilog conversion is Amaranth + its built-in Yosys). Simulation runs MNIST / digits / CIFAR inputs
through `rtlgen.verify.simulate_model` on the compiled Verilator bench: cycles/s of simulated hardware
and images/s, with the build (cached on a rerun) reported apart. Accuracy and bit-exactness are
asserted against qonnx on the way, so a table row is also a verification run.
"""

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.tables import write_section
from rtlgen.compiler import CompileOptions, compile_model
from rtlgen.emit import write_outputs
from sim.stream_io import read_outputs
from rtlgen.verify import compare, qonnx_reference, simulate_model, tolerance

MODELS = Path(__file__).resolve().parent.parent / "tests" / "models"


def _mnist(n):
    d = np.load(MODELS / "mnist_test_1000.npz")
    return (d["x"][:n].astype(np.float32) / 255).reshape(n, 1, 28, 28)


def _digits(n):
    return np.load(MODELS / "digits_tfc_w1a1i1_testset.npz")["x"][:n]


def _cifar(n):
    return np.repeat(np.load(MODELS / "cifar10_cifar10-test-data-class3.npz")["arr_0"].astype(np.float32), n, axis=0)


# name: (model file, inputs, images simulated, images checked against qonnx, folding target fps or None)
CASES = {
    "tfc": ("TFC_1W1A.onnx", _mnist, 1000, 1000, None),
    "tfc-fast": ("TFC_1W1A.onnx", _mnist, 1000, 100, 1_000_000),
    "digits": ("digits_tfc_w1a1i1_clean.onnx", _digits, 360, 360, None),
    "cnv": ("cnv_1w1a_ts_clean.onnx", _cifar, 4, 1, None),
}


def run(name):
    model, inputs, frames, checked, fps = CASES[name]
    path = MODELS / model
    with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as cache:
        os.environ["RTLGEN_CACHE_DIR"] = cache         # a cold compile: no Verilog or simulator cached
        start = time.perf_counter()
        compiled = compile_model(path, CompileOptions(target_fps=fps))
        write_outputs(compiled, out)
        compile_s = time.perf_counter() - start
        start = time.perf_counter()
        compile_model(path, CompileOptions(target_fps=fps))
        warm_s = time.perf_counter() - start
        verilog, io, report = read_outputs(out)
        x = inputs(frames)
        start = time.perf_counter()
        simulate_model(verilog, io, x[:2], report)              # builds (or finds) the harness
        build_s = time.perf_counter() - start
        start = time.perf_counter()
        sim = simulate_model(verilog, io, x, report)
        sim_s = time.perf_counter() - start
    ref = qonnx_reference(path, x[:checked])
    result = compare(sim.outputs[:checked], ref, rtol=tolerance(io))
    if not result.passed:
        raise SystemExit(f"{name}: {result.summary()}")
    steps = compiled.seconds
    sizing = next((v for k, v in steps.items() if k.startswith("insert DWC/FIFO")), 0.0)
    verilog_s = next((v for k, v in steps.items() if k.startswith("stitch")), 0.0)
    compile_row = {
        "model": f"{model}" + (f" @ {fps:,} fps" if fps else ""), "layers": len(compiled.nodes),
        "II cycles": compiled.analytic_cycles, "load+lower+fold s": f"{compile_s - sizing - verilog_s:.1f}",
        "FIFO sizing s": f"{sizing:.1f}", "Verilog s": f"{verilog_s:.1f}", "total s": f"{compile_s:.1f}",
        "again (cached) s": f"{warm_s:.1f}",
        "Verilog MB": f"{len(compiled.verilog) / 1e6:.2f}",
    }
    sim_row = {
        "model": compile_row["model"], "frames": frames, "cycles/frame": f"{sim.cycles_per_frame:.1f}",
        "vs II": f"{100 * (sim.cycles_per_frame / compiled.analytic_cycles - 1):+.2f} %",
        "build s": f"{build_s:.1f}", "run s": f"{sim_s:.1f}",
        "Mcycles/s": f"{sim.cycles / sim_s / 1e6:.2f}", "images/s": f"{frames / sim_s:,.0f}",
        "checked vs qonnx": f"{checked} ({'bit-exact' if result.exact else 'within float32 rounding'})",
    }
    sim_row["accuracy (qonnx)"] = "-"
    if name.startswith("tfc"):
        labels = np.load(MODELS / "mnist_test_1000.npz")["y"][:checked]
        ours, theirs = (sim.outputs[:checked].argmax(axis=1) == labels).mean(), (ref.argmax(axis=1) == labels).mean()
        sim_row["accuracy (qonnx)"] = f"{100 * ours:.2f} % ({100 * theirs:.2f} %)"
    print(compile_row, sim_row, flush=True)
    return compile_row, sim_row


def main(names):
    rows = [run(n) for n in names]
    write_section("Compiler: compile time", "ONNX -> stitched Verilog with `compile_model` (default folding: naive "
                  "SetFolding for 1000 cycles/frame unless a target fps is given; FIFO depths by simulation), "
                  "cold: empty `RTLGEN_CACHE_DIR`, so FIFO sizing includes building its Verilator bench and the "
                  "layers' Verilog is converted (in parallel, 2 cores); `again`: the same compile with the "
                  "caches warm (layer Verilog and simulator builds reused). 2-core machine.", [c for c, _ in rows])
    write_section("Compiler: whole-network simulation speed",
                  "`simulate_model` on the compiled Verilator bench (sim/compiled.py), full rate, frames back to "
                  "back; run time includes packing, the host pre/post ops and decoding. `build s` is the first "
                  "call (Verilator build, cached afterwards) on 2 frames.", [s for _, s in rows])


if __name__ == "__main__":
    main(sys.argv[1:] or list(CASES))
