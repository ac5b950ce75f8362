"""INT8 MACs on DSP48E1: two lanes per DSP split per product, or accumulated in P; by Yosys.

    python -m benchmarks.dsp_macs

The same layer (UINT8 x INT8, 512 inputs, 16 outputs, weights in block RAM, 16 MACs per cycle, raw
accumulators out) at three foldings: SIMD 16 x PE 1 (one MAC per DSP: odd PE cannot pack), SIMD 4 x PE 4
(two lanes per DSP, each product split and summed in fabric) and SIMD 1 x PE 16 (two lanes per DSP
accumulated in its P register, the lanes restored from the canary carries once per fold:
``MVAUSpec.accumulates_in_dsp``). Yosys ``synth_xilinx`` cells, the DSPs' register use (A, B, M, P) and the
longest register-to-register path by ``sta`` and the delay model of ``boards/timing.py``.
"""

import numpy as np

from benchmarks.tables import write_section
from boards.yosys import synthesize
from layers.mvau import MVAU, MVAUSpec

FOLDINGS = [(16, 1), (4, 4), (1, 16)]


def rows():
    weights = np.random.default_rng(0).integers(-128, 128, size=(512, 16))
    table = []
    for simd, pe in FOLDINGS:
        spec = MVAUSpec(512, 16, simd, pe, "UINT8", "INT8", weights, res_type="dsp", mem_mode="internal_embedded",
                        ram_style="block")
        r, est = synthesize(MVAU(spec), sta=True), spec.resource_estimate()
        form = ("accumulated in P" if spec.accumulates_in_dsp else "split per product" if spec.dsp_packing
                else "one MAC per DSP")
        registers = ", ".join(f"{n} x A{a} B{b} M{m} P{p}" for (a, b, m, p), n in sorted(r.dsp_registers.items()))
        table.append({"SIMD x PE": f"{simd} x {pe}", "DSP MACs": form, "LUT": r.lut, "est LUT": est.lut,
                      "FF": r.ff, "est FF": est.ff, "DSP": r.dsp, "est DSP": est.dsp, "DSP registers": registers,
                      "BRAM36": r.bram36 + r.bram18 / 2, "Fmax estimate": f"~{r.paths['top'].fmax_mhz:.0f} MHz",
                      "cycles/vector": spec.exp_cycles})
        print(table[-1], flush=True)
    return table


def main():
    write_section("INT8 MACs on DSP48E1: split per product or accumulated in P",
                  "One INT8 layer (UINT8 x INT8, MW 512, MH 16, weights in block RAM, no activation) at 16 MACs "
                  "per cycle, three ways: one MAC per DSP (SIMD 16, PE 1), two lanes per DSP split per product "
                  "and summed in fabric (SIMD 4, PE 4), and two lanes per DSP accumulated in P over the fold "
                  "with the low lane's carries tracked by two canary bits of P (SIMD 1, PE 16; FINN's "
                  "mvu_8sx8u_dsp48 scheme). Yosys `synth_xilinx` cells beside `resource_estimate()`; "
                  "`DSP registers`: the DSP48E1 cells' AREG/BREG/MREG/PREG; Fmax from Yosys `sta` with the "
                  "delay model of `boards/timing.py`.", rows())


if __name__ == "__main__":
    main()
