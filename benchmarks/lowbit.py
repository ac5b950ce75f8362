"""Low-bit MVAUs with signed operands: offset operands against signed products, by Yosys.

    python -m benchmarks.lowbit

An MVAU with signed n-bit weights in fabric can multiply unsigned operands instead
(``MVAUSpec.offset_weights``, ``offset_inputs``): w + 2^(n-1) and x + 2^(m-1) are the operands with their
sign bits inverted, the input sum they need is one tree shared by all PE lanes, and the constant per
output channel goes into the stored thresholds. The unsigned products need no sign extension in the
adder trees. Each case is one whole MVAU (``mem_mode=internal_embedded``, random weights and thresholds,
``synth_xilinx -flatten``) built both ways (``offset_operands=False`` keeps the signed products); the
shapes are layers of FINN's TFC-w2a2 and CNV-w2a2 at FINN's folding, and two other datatype pairs.
"""

import numpy as np
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from benchmarks.tables import write_section
from boards.yosys import synthesize
from layers.mvau import MVAU, MVAUSpec

# (name, mw, mh, simd, pe, input, weight, output)
CASES = [
    ("TFC-w2a2 MVAU_1", 64, 64, 8, 8, "INT2", "INT2", "INT2"),
    ("TFC-w2a2 MVAU_0", 784, 64, 49, 16, "INT2", "INT2", "INT2"),
    ("CNV-w2a2 MVAU_2", 576, 128, 16, 8, "INT2", "INT2", "INT2"),
    ("UINT2 inputs", 64, 64, 8, 8, "UINT2", "INT2", "UINT2"),
    ("INT4 x INT4", 64, 32, 8, 8, "INT4", "INT4", "INT4"),
]


def spec(mw, mh, simd, pe, idt, wdt, odt, offset_operands):
    np.random.seed(0)
    w = gen_finn_dt_tensor(DataType[wdt], (mw, mh))
    probe = MVAUSpec(mw, mh, simd, pe, idt, wdt, w, mem_mode="internal_embedded")
    lo, hi = probe.acc_range()
    out = DataType[odt]
    steps = (1 << out.bitwidth()) - 1
    thresholds = np.sort(np.random.default_rng(1).integers(lo // 2, hi // 2 + 1, size=(mh, steps)), axis=1)
    return MVAUSpec(mw, mh, simd, pe, idt, wdt, w, thresholds, out, int(out.min()), mem_mode="internal_embedded",
                    res_type="lut", offset_operands=offset_operands)


def main():
    rows = []
    for name, *shape in CASES:
        built = {}
        for offset in (False, True):
            s = spec(*shape, offset)
            built[offset] = synthesize(MVAU(s))
        mw, mh, simd, pe, idt, wdt, odt = shape
        on = spec(*shape, True)
        rows.append({"layer": name, "MW x MH": f"{mw} x {mh}", "SIMD x PE": f"{simd} x {pe}",
                     "input x weight": f"{idt} x {wdt}",
                     "offsets": "weights and inputs" if on.offset_inputs else "weights" if on.offset_weights else "-",
                     "LUT signed": built[False].lut + built[False].lut_as_memory,
                     "LUT offset": built[True].lut + built[True].lut_as_memory,
                     "change": f"{100 * (built[True].lut - built[False].lut) / built[False].lut:+.0f} %",
                     "CARRY4 signed / offset": f"{built[False].carry} / {built[True].carry}",
                     "FF signed / offset": f"{built[False].ff} / {built[True].ff}"})
        print(rows[-1], flush=True)
    write_section(
        "Low-bit MVAUs: offset operands against signed products",
        "One whole MVAU per row (internal_embedded weights, random weights and thresholds), Yosys "
        "`synth_xilinx -flatten`, built with signed products (`offset_operands=False`) and with the offsets "
        "the compiler applies by default. LUT includes LUTRAM/SRL.", rows)


if __name__ == "__main__":
    main()
