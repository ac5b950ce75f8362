"""`rtlgen build` resources on the PYNQ-Z2: Yosys synth_xilinx of whole shells around compiled models.

    python -m benchmarks.boards             # TFC (zoo 1W1A) and the digits MLP, standalone and zynq shells

Counts are Yosys cells with the hierarchy kept (no cross-module optimization): the accelerator's layers
and the shell's share (self-test ROMs and checker, or DMA + control block) apart.
"""

import sys
import tempfile
import time
from pathlib import Path

from benchmarks.tables import write_section
from rtlgen.backend.build import build
from rtlgen.backend.compile import compile_model
from rtlgen.backend.emit import write_outputs

MODELS = Path(__file__).resolve().parent.parent / "tests" / "models"
CASES = {"tfc": "TFC_1W1A.onnx", "digits": "digits_tfc_w1a1i1_clean.onnx"}


def run(name):
    rows = []
    with tempfile.TemporaryDirectory() as out:
        compiled = compile_model(MODELS / CASES[name])
        write_outputs(compiled, out)
        for shell in ("standalone", "zynq"):
            start = time.perf_counter()
            result = build(out, shell=shell, say=lambda _: None)
            seconds = time.perf_counter() - start
            t, sh = result["totals"], result["shell"]
            layers = {k: sum(r[k] for r in result["layers"].values()) for k in ("lut", "ff")}
            rows.append({
                "model": CASES[name], "shell": shell, "II cycles": compiled.analytic_cycles,
                "LUT (incl. LUTRAM/SRL)": result["lut_including_memory"], "FF": t["ff"], "BRAM36": t["bram36"],
                "BRAM18": t["bram18"], "DSP": t["dsp"], "layers LUT / FF": f"{layers['lut']} / {layers['ff']}",
                "shell LUT / FF": f"{sh['lut']} / {sh['ff']}",
                "xc7z020 LUT": f"{result['lut_including_memory'] / 53200:.1%}", "build s": f"{seconds:.0f}",
            })
            print(rows[-1], flush=True)
    return rows


if __name__ == "__main__":
    rows = [r for name in (sys.argv[1:] or list(CASES)) for r in run(name)]
    write_section("Boards: rtlgen build on the PYNQ-Z2", "Yosys 0.70 `synth_xilinx -family xc7` of the whole shell "
                  "(hierarchy kept), default folding (1000 cycles/frame target). `build s` includes the Vivado plan "
                  "and, for the self-test, simulating the expected answers.", rows)
