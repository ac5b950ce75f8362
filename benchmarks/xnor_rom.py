"""Binary MVAU lanes by Yosys, one layer: where the weights are read and how the lanes count (issue 33).

    python -m benchmarks.xnor_rom [NAME ...]        # Yosys (synth_xilinx -flatten) of the named rows, or all

The variants of one CNV-like binary layer (and CNV's first layer, INT8 x BIPOLAR), random weights and
one threshold per channel, ``internal_embedded``:

- ``tree``: the weights a LUT ROM read into a register, the XNORs in the adder tree's LUTs (before);
- ``weights in XNOR``: the ROM read inside the XNOR's LUT6, the agreement bits registered
  (``weights_in_xnor``, automatic for 5-32 words);
- ``heap``: and the lane's popcount a registered compressor heap (``popcount="heap"``,
  :mod:`layers.popcount`), the optimizer's choice;
- ``block + heap``: weights in block RAM, three XNOR terms to a LUT6 at the heap's first level;
- ``INT8 x BIPOLAR negate`` / ``select``: CNV's first layer with each weight negating its input, or
  summing the selected inputs twice less the shared input sum (``selects_bipolar_weights``).

Rows are rewritten per name, the others kept.
"""

import sys
import time

import numpy as np
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from benchmarks.tables import section_rows, write_section

# name: (MW, MH, SIMD, PE, ram_style, input datatype, extra spec fields)
ROWS = {
    "tree": (576, 128, 144, 16, "distributed", "BIPOLAR", {"popcount": "tree"}),
    "weights in XNOR": (576, 128, 144, 16, "distributed", "BIPOLAR", {"popcount": "tree"}),
    "heap": (576, 128, 144, 16, "distributed", "BIPOLAR", {"popcount": "heap"}),
    "block + heap": (576, 64, 144, 16, "block", "BIPOLAR", {"popcount": "heap"}),
    "INT8 x BIPOLAR negate": (27, 64, 27, 16, "distributed", "INT8", {"offset_operands": False}),
    "INT8 x BIPOLAR select": (27, 64, 27, 16, "distributed", "INT8", {}),
}
TITLE = "Binary MVAU lanes by Yosys: weights in the XNOR, compressor-heap popcount"


def spec_of(name):
    from layers.mvau import MVAUSpec
    mw, mh, simd, pe, ram, idt, extra = ROWS[name]
    np.random.seed(0)
    w = gen_finn_dt_tensor(DataType["BIPOLAR"], (mw, mh)).astype(np.int64)
    make = lambda **kw: MVAUSpec(mw, mh, simd, pe, DataType[idt], DataType["BIPOLAR"], w, ram_style=ram,
                                 mem_mode="internal_embedded", **extra, **kw)
    lo, hi = make().acc_range()
    thr = np.sort(np.random.default_rng(0).integers(lo, hi + 2, size=(mh, 1)), axis=1)
    return make(thresholds=thr, output_dtype=DataType["BIPOLAR"], act_val=0)


def row(name):
    from boards.yosys import synthesize
    from layers import mvau
    from layers.mvau import MVAU
    spec = spec_of(name)
    if name == "tree":          # before weights_in_xnor: the ROM read into a register
        saved = mvau.XNOR_ROM_WORDS
        mvau.XNOR_ROM_WORDS = (0, -1)
    start = time.perf_counter()
    try:
        report = synthesize(MVAU(spec)).as_row()
        est = spec.resource_estimate()
    finally:
        if name == "tree":
            mvau.XNOR_ROM_WORDS = saved
    mw, mh, simd, pe, ram, idt, _ = ROWS[name]
    return {"variant": name, "layer": f"{idt} x BIPOLAR, MW {mw}, MH {mh}, PE {pe}, SIMD {simd}, {spec.wmem} words, {ram}",
            "Yosys LUT": f"{report['lut']:,}", "estimate LUT": f"{est.lut:,}",
            "LUT error": f"{100 * (est.lut - report['lut']) / report['lut']:+.0f} %",
            "Yosys FF": f"{report['ff']:,}", "CARRY4": f"{report['carry']:,}",
            "LUT per MAC": f"{report['lut'] / (pe * simd):.2f}", "Yosys s": f"{time.perf_counter() - start:.0f}"}


def main():
    names = sys.argv[1:] or list(ROWS)
    for name in names:
        if name not in ROWS:
            sys.exit(f"unknown row {name!r}; known: {', '.join(ROWS)}")
    for name in names:
        new = row(name)
        print(new, flush=True)
        kept = {r["variant"]: r for r in section_rows(TITLE)}
        kept[name] = new
        write_section(TITLE, __doc__.split("\n\n", 2)[2].strip().replace("\n", " "),
                      [kept[n] for n in ROWS if n in kept])


if __name__ == "__main__":
    main()
