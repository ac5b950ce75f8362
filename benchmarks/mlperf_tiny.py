"""MLPerf Tiny's networks (tests/models/mlperf_tiny: Brevitas W4A4, 8-bit input, random weights with
calibrated scales) compiled with ``--fit pynq-z2``, verified against qonnx in RTL simulation, beside the
published PYNQ-Z2 results; ResNet-8 in its own section (benchmarks/resnet8.py, W4A4 and W8A8 against
fpgaConvNet).

Each network goes through the CLI as a user would run it:

    rtlgen compile tests/models/mlperf_tiny/NAME.onnx -o OUT --fit pynq-z2
    rtlgen verify OUT --input X.npy        # X: the committed NAME_inputs.npy, repeated to 12 frames

and the row takes report.json's figures (the accelerator's frames/s from its II, the board's behind the zynq
shell's DMA, the latency of one frame with the pipeline idle, DDR to DDR, and the estimate's LUT/FF/BRAM36/DSP)
and verify's exit status, last line and measured cycles/frame. The published figures are FINN's MLPerf Tiny
PYNQ-Z2 submission (Borras et al., arXiv:2206.11791): different networks (CNV for image classification, an
MLP for keyword spotting), trained, single-stream through the benchmark harness; ours are random-weight
networks with MLPerf's reference topologies, so the rows compare hardware, not accuracy.

    python -m benchmarks.mlperf_tiny [NAME ...]      # default: all three; other rows of the table are kept
"""

import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from benchmarks.tables import section_rows, write_section

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models" / "mlperf_tiny"
SECTION = "MLPerf Tiny networks at --fit pynq-z2"
# ResNet-8 (image classification) has its own section, at W4A4 and W8A8 against fpgaConvNet: benchmarks/resnet8.py
NETWORKS = {   # name -> (MLPerf Tiny task and reference topology, published PYNQ-Z2 figure)
    "ds_cnn": ("keyword spotting: DS-CNN, 49x10 MFCC",
               "FINN KWS MLP: 57,268 inf/s (published)"),
    "mobilenet_v1_025": ("visual wake words: MobileNetV1-0.25, 96x96x3", "no PYNQ-Z2 submission"),
    "fc_autoencoder": ("anomaly detection: FC autoencoder 640-128x4-8-128x4-640",
                       "hls4ml submitted one (arXiv:2206.11791); figure not re-read here"),
}
SOURCE = "Brevitas 0.13.4 export_qonnx, W4A4, 8-bit input"
FRAMES = 12


def run(args):
    """Run ``rtlgen ARGS``: (exit status, stdout + stderr, seconds)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "rtlgen", *args], capture_output=True, text=True, cwd=ROOT)
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - start


def row(name, work):
    task, published = NETWORKS[name]
    model = MODELS / f"{name}.onnx"
    out = work / name
    status, log, seconds = run(["compile", str(model), "-o", str(out), "--fit", "pynq-z2", "-q"])
    base = {"model": name, "task / topology": task, "source": SOURCE}
    if status != 0:
        return {**base, "compiles": f"no (exit {status}): {log.strip().splitlines()[-1]}"}
    report = json.loads((out / "report.json").read_text())
    ops = Counter(layer["op_type"] for layer in report["layers"]
                  if layer["op_type"] not in ("StreamingFIFO", "StreamingDataWidthConverter"))
    x = np.load(MODELS / f"{name}_inputs.npy")
    x = np.concatenate([x] * -(-FRAMES // len(x)))[:FRAMES]
    np.save(work / f"{name}_x.npy", x)
    vstatus, vlog, _ = run(["verify", str(out), "--input", str(work / f"{name}_x.npy")])
    measured = re.search(r"([\d.]+) cycles/frame \(II (\d+)\)", vlog)
    verdict = [line for line in vlog.splitlines() if line.startswith(("bit-exact", "equal", "differ", "MISMATCH"))]
    verdict = verdict[-1].split(":")[0] if verdict else vlog.strip().splitlines()[-1]
    t = report["totals"]
    return {**base,
            "hardware ops": ", ".join(f"{n} {op}" for op, n in sorted(ops.items())),
            "compiles": f"yes, {seconds:.0f} s",
            "verify": f"exit {vstatus}: {verdict} ({FRAMES} frames)",
            "II (cycles)": f"{report['analytic_cycles_per_frame']:,}"
                           + (f"; measured {float(measured.group(1)):,.0f}" if measured else ""),
            "accelerator frames/s": f"{report['frames_per_second']:,.0f}"
                                    + (f"; RTL {report['clock_mhz'] * 1e6 / float(measured.group(1)):,.0f}"
                                       if measured else ""),
            "board frames/s": f"{report['board_frames_per_second']:,.0f}",
            "latency (µs, board)": f"{report['latency_ns'] / 1000:,.1f} ({report['board_latency_ns'] / 1000:,.1f})",
            "LUT / FF / BRAM36 / DSP (estimate)": f"{t['LUT']:,} / {t['FF']:,} / {t['BRAM18'] / 2:g} / {t['DSP']}",
            "binds": report["optimizer"]["binding"],
            "published on the PYNQ-Z2": published}


def main(names):
    names = names or list(NETWORKS)
    unknown = [n for n in names if n not in NETWORKS]
    if unknown:
        sys.exit(f"mlperf_tiny: unknown network {unknown[0]!r}; legal: {', '.join(NETWORKS)}")
    rows = {r["model"]: r for r in section_rows(SECTION)}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            rows[name] = row(name, Path(tmp))
            print(rows[name], flush=True)
    keys = list(rows[names[0]])
    ordered = [{k: rows[n].get(k, "") for k in keys} for n in NETWORKS if n in rows]
    intro = ("MLPerf Tiny's reference topologies for keyword spotting, visual wake words and anomaly detection "
             "(ResNet-8, image classification: its own section, \"MLPerf Tiny ResNet-8 at W8A8 and W4A4 against "
             "fpgaConvNet\"), quantized with Brevitas (4-bit weights and activations, "
             "8-bit input, float scales; random weights, scales and BatchNorm statistics calibrated on random "
             "inputs: no training, so hardware figures only) by tests/models/mlperf_tiny/make_models.py, "
             "compiled with `rtlgen compile MODEL -o OUT --fit pynq-z2` at 100 MHz and checked with "
             "`rtlgen verify OUT --input X.npy` (RTL in Verilator against qonnx execute_onnx on the original "
             "model; the measured II is the steady spacing of frame ends over 12 frames). Compile time is wall "
             "time on the shared 2-core machine with the stitch and Verilator caches warm from earlier runs. "
             "frames/s and latency are the compiler's figures (the accelerator's II; the board's behind "
             "the zynq shell's one 64-bit HP0 port); resources are the estimate, not Yosys. Published: FINN's "
             "MLPerf Tiny PYNQ-Z2 submission (Borras et al., arXiv:2206.11791), other networks and trained: "
             "compare hardware, not accuracy.")
    write_section(SECTION, intro, ordered)


if __name__ == "__main__":
    main(sys.argv[1:])
