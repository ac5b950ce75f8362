"""FINN's hardware-layer ONNX as input (rtlgen.passes.finn_hw): FINN's networks compiled from QONNX at FINN's folding,
their ``OUT/model_hw.onnx`` (FINN's dialect: MVAU, Thresholding, ConvolutionInputGenerator, StreamingMaxPool,
DWCs and FIFOs in the finn.custom_op.fpgadataflow domain, PE/SIMD/mem_mode/ram_style in node attributes)
compiled again as it is, with no folding option: the same II and the same estimate (the same hardware)
from the FINN file, and the simulated RTL against two goldens: sim.finn_exec (FINN's semantics) on the
FINN file, and qonnx's execute_onnx on the original QONNX model through the original's host ops.

Also two files FINN itself wrote (tests/models/finn_hw), at their own folding, against sim.finn_exec.

    python -m benchmarks.finn_hw [NAME ...]
"""

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.tables import section_rows, write_section

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
FINN = ROOT / "examples" / "finn"

NETWORKS = {    # name -> (QONNX model, FINN folding, input samples)
    "TFC-w1a1": ("TFC_1W1A.onnx", "tfc-w1a1.json", "mnist"),
    "TFC-w2a2": ("TFC_2W2A.onnx", "tfc-w2a2.json", "mnist"),
    "CNV-w1a1": ("cnv_1w1a_ts_clean.onnx", "cnv-w1a1.json", "cifar"),
    "CNV-w2a2": ("cnv_2w2a_ts_clean.onnx", "cnv-w2a2.json", "cifar"),
}
FINN_FILES = {  # name -> (a file FINN wrote, tests/models/finn_hw/README.md, input samples)
    "cybsec-MLP (FINN's file)": ("cybsec_PE_SIMD.onnx", lambda rng: rng.choice([-1.0, 1.0], size=(4, 600))),
    "residual test case (FINN's file)": ("residual_testcase.onnx", lambda rng: rng.integers(-8, 8, size=(2, 32, 32, 16))),
}
SECTION = "FINN's hardware-layer ONNX as input: FINN's networks at FINN's folding"


def samples(kind):
    if kind == "mnist":
        return (np.load(MODELS / "mnist_test_1000.npz")["x"][:8].astype(np.float32) / 255).reshape(-1, 1, 28, 28)
    x = np.load(MODELS / "cifar10_cifar10-test-data-class3.npz")["arr_0"].astype(np.float32)
    return np.concatenate([x, x[:, :, ::-1], x[:, :, :, ::-1]], axis=0)


def measure_file(name):
    """A file FINN itself wrote, at its own folding: no QONNX original, so the one golden is sim.finn_exec."""
    from rtlgen import api
    from rtlgen.check.verify import compare
    from sim.finn_exec import execute_finn_hw
    import onnx

    path, make = FINN_FILES[name]
    path = MODELS / "finn_hw" / path
    x = make(np.random.default_rng(0)).astype(np.float32)
    with tempfile.TemporaryDirectory(prefix="rtlgen-finn-hw-") as tmp:
        start = time.perf_counter()
        design = api.compile(path, Path(tmp) / "hw")
        seconds = time.perf_counter() - start
        run = design.simulate(x)
        finn = compare(run.outputs, execute_finn_hw(onnx.load(str(path)), x))
        b = design.report
        layers = sorted({layer["op_type"] for layer in b["layers"]} - {"StreamingFIFO", "StreamingDataWidthConverter"})
        return {
            "network": name, "FINN ops in the file": ", ".join(layers), "II (QONNX + folding file)": "-",
            "II (FINN file)": f"{b['analytic_cycles_per_frame']:,}",
            "measured cycles/frame": f"{run.cycles_per_frame:,.1f}",
            "frames/s @100 MHz": f"{b['frames_per_second']:,.0f}", "latency (cycles)": f"{b['latency_cycles']:,}",
            "LUT / FF / BRAM36 / DSP (QONNX)": "-",
            "LUT / FF / BRAM36 / DSP (FINN file)": _estimate(b),
            "verify vs FINN semantics": ("bit-exact" if finn.exact else f"MISMATCH {finn.bad_elements}") + f" ({len(x)} samples)",
            "verify vs qonnx (original)": "- (no QONNX original)",
            "compile s (FINN file)": f"{seconds:.1f}",
        }


def _estimate(r):
    return f"{r['totals']['LUT']:,} / {r['totals']['FF']:,} / {r['totals']['BRAM18'] / 2:g} / {r['totals']['DSP']}"


def measure(name):
    from rtlgen import api
    from rtlgen.check.verify import compare, qonnx_reference, tolerance
    from sim.finn_exec import execute_finn_hw
    import onnx

    model, folding, kind = NETWORKS[name]
    x = samples(kind)
    with tempfile.TemporaryDirectory(prefix="rtlgen-finn-hw-") as tmp:
        tmp = Path(tmp)
        original = api.compile(MODELS / model, tmp / "orig", folding=str(FINN / folding))
        finn_file = tmp / "orig" / "model_hw.onnx"
        start = time.perf_counter()
        design = api.compile(finn_file, tmp / "hw")
        seconds = time.perf_counter() - start
        x_hw = original.io.input_codes(x).reshape(-1, *design.io.model_input_shape[1:]).astype(np.float32)
        run = design.simulate(x_hw)
        finn = compare(run.outputs, execute_finn_hw(onnx.load(str(finn_file)), x_hw))
        ours = original.io.output_from_codes(np.asarray(run.outputs).reshape(len(x), -1))
        qonnx = compare(ours, qonnx_reference(MODELS / model, x), rtol=tolerance(original.io))
        a, b = original.report, design.report
        est = _estimate
        layers = sorted({layer["op_type"] for layer in b["layers"]} - {"StreamingFIFO", "StreamingDataWidthConverter"})
        return {
            "network": name,
            "FINN ops in the file": ", ".join(layers),
            "II (QONNX + folding file)": f"{a['analytic_cycles_per_frame']:,}",
            "II (FINN file)": f"{b['analytic_cycles_per_frame']:,}",
            "measured cycles/frame": f"{run.cycles_per_frame:,.1f}",
            "frames/s @100 MHz": f"{b['frames_per_second']:,.0f}",
            "latency (cycles)": f"{b['latency_cycles']:,}",
            "LUT / FF / BRAM36 / DSP (QONNX)": est(a),
            "LUT / FF / BRAM36 / DSP (FINN file)": est(b),
            "verify vs FINN semantics": "bit-exact" if finn.exact else f"MISMATCH {finn.bad_elements}",
            "verify vs qonnx (original)": ("bit-exact" if qonnx.exact else "passed" if qonnx.passed
                                           else f"MISMATCH {qonnx.bad_elements}") + f" ({len(x)} samples)",
            "compile s (FINN file)": f"{seconds:.1f}",
        }


def main(names):
    names = names or list(NETWORKS) + list(FINN_FILES)
    kept = [r for r in section_rows(SECTION) if r.get("network") not in names]
    rows = kept + [measure(n) if n in NETWORKS else measure_file(n) for n in names]
    order = list(NETWORKS) + list(FINN_FILES)
    rows.sort(key=lambda r: order.index(r["network"]))
    write_section(SECTION, "Each network compiled from QONNX with FINN's folding file (`examples/finn/`), then "
                  "its `OUT/model_hw.onnx` compiled as FINN's dialect with no folding option (rtlgen.passes.finn_hw keeps "
                  "the file's PE/SIMD/mem_mode/ram_style; FINN's DWCs and FIFOs are replaced by ours, analytic "
                  "FIFO sizing). The II is FINN's MVAU formula (MH/PE)(MW/SIMD)prod(numInputVectors) of the "
                  "slowest layer; the estimate is rtlgen's cost model; compile s is the FINN file's compile with the layers' "
                  "Verilog already in the cache (the QONNX compile just before converted the same layers). Verify: the RTL (Verilator) on the samples, "
                  "against sim.finn_exec on the FINN file and against qonnx on the original model. The last rows are "
                  "files FINN itself wrote (tests/models/finn_hw/README.md), compiled at their own folding.", rows)


if __name__ == "__main__":
    main(sys.argv[1:])
