"""CNV-w1a1 past the block-RAM read ceiling (issue 33): what binds at each II, and where the weights live.

    python -m benchmarks.cnv_beyond_bram

Binary CNV reads every weight bit once per output pixel. The xc7z020's 140 RAMB36 give at most 140 x 72
bits a cycle, so a design that streams all its weights from block RAM cannot beat the *BRAM ceiling*
below; past it weights must be LUT ROM (one LUT6 a bit up to 64 words), read inside the XNOR's LUT6
(``weights_in_xnor``, 5-32 words), folded away (up to 4 words, or constants at one word), while the
lane sums get cheaper (``popcount="heap"``). Table 1: per target II, the cheapest design the optimizer
finds (``optimize_folding`` with the target) within the PYNQ-Z2 budget (``--fit``: the xc7z020's LUT and FF x 0.8, BRAM36 and DSP x 0.95),
and the fewest LUTs its layers alone can take at that II with their block RAM within the whole chip's 140
RAMB36 (a 0/1 program over every layer's options, FIFOs, width converters and the shell not counted: a
lower bound on what the II needs). Table 2:
the ``--fit pynq-z2`` design layer by layer. Estimates (the calibrated cost model), not Yosys; the
Yosys build of the ``--fit`` design is in "Folding: the optimizer's PYNQ-Z2 designs by Yosys".
*LUT per binary MAC per cycle*: the whole design's LUTs over the binary MACs (1-bit x 1-bit) it does a
cycle at its II.
"""

import math
from math import prod

import numpy as np

from benchmarks.tables import write_section
from rtlgen.costmodel import estimate
from rtlgen.options import CompileOptions
from rtlgen.passes.load import load_model
from rtlgen.fit import Budget
from rtlgen.passes.optimize import NoFit, design_estimate, fold_groups, group_options, optimize_folding
from rtlgen.passes.to_hw import to_hw
from benchmarks.folding import MODELS

CLOCK_MHZ = 100.0
BRAM36, BRAM_BITS = 140, 72                 # xc7z020: RAMB36 and the widest read of one (64 data + 8 parity)
TARGETS = (6400, 5000, 4704, 4608, 4096)


def graph():
    return to_hw(load_model(str(MODELS / "cnv_1w1a_ts_clean.onnx")), CompileOptions())


def weight_bits_per_frame(g):
    """(all weight bits read per frame, of which binary x binary MACs)."""
    total = binary = 0
    for node in g.nodes:
        if node.op_type != "MVAU":
            continue
        s = node.spec()
        bits = s.mw * s.mh * prod(s.num_input_vectors) * s.weight_dtype.bitwidth()
        total += bits
        binary += bits if s.xnor else 0
    return total, binary


def storage(s):
    if s.constant_weights:
        return "constants in the XNORs"
    if s.weight_ram_style == "block":
        return f"BRAM ({s.weight_lut_bits} bits LUT ROM)" if s.weight_lut_bits else "BRAM"
    if s.weights_in_xnor:
        return "LUT ROM inside the XNOR LUT6"
    if s.wmem <= 4:
        return "LUT ROM, folded into the popcount"
    return "LUT ROM"


def lut_per_mac(lut, binary_bits, ii):
    return f"{lut / (binary_bits / ii):.2f}"


def least_layer_luts(g, target):
    """The fewest LUTs the layers alone (no FIFOs, DWCs, shell) need at ``target`` cycles with the block
    RAM within the whole chip's 140 RAMB36: a 0/1 program over every node's options (spilled ones too)."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    choices = [[o for o in group_options(g, group, spill=True) if o.cycles <= target] for group in fold_groups(g)]
    columns = [(k, o) for k, options in enumerate(choices) for o in options]
    lut = np.array([o.cost[0] for _, o in columns], dtype=float)
    bram = np.array([o.cost[2] for _, o in columns], dtype=float)
    one_each = np.zeros((len(choices), len(columns)))
    for j, (k, _) in enumerate(columns):
        one_each[k, j] = 1
    result = milp(lut, constraints=[LinearConstraint(one_each, 1, 1), LinearConstraint(bram[None, :], 0, 2 * BRAM36)],
                  integrality=np.ones(len(columns)), bounds=Bounds(0, 1))
    picked = result.x > 0.5
    return lut[picked].sum(), bram[picked].sum() / 2


def target_rows(g, binary_bits):
    rows = []
    board = Budget.for_board("pynq-z2")
    for target in TARGETS:
        chosen = g.copy()
        try:
            result = optimize_folding(chosen, board, target_cycles=target)
            used = design_estimate(chosen)
            fits = "yes"
            design = (f"{used[0]:,.0f} / {used[1]:,.0f} / {used[2] / 2:,.1f}",
                      lut_per_mac(used[0], binary_bits, result.ii), f"{CLOCK_MHZ * 1e6 / result.ii:,.0f}")
        except NoFit:
            fits, design = "no", ("-", "-", "-")
        layers_lut, layers_bram = least_layer_luts(g, target)
        rows.append({"target II": f"{target:,}", "fits --fit pynq-z2": fits,
                     "frames/s at 100 MHz": design[2], "LUT / FF / BRAM36 (estimate)": design[0],
                     "LUT per binary MAC per cycle": design[1],
                     "fewest layer LUTs, BRAM36 <= 140": f"{layers_lut:,.0f} ({layers_lut / 53200:.0%} of 53,200; "
                                                          f"{layers_bram:g} BRAM36)"})
        print(rows[-1], flush=True)
    return rows


def layer_rows(g):
    chosen = g.copy()
    result = optimize_folding(chosen, Budget.for_board("pynq-z2"))
    rows = []
    for node in chosen.nodes:
        if node.op_type != "MVAU":
            continue
        s = node.spec()
        e = estimate(s)
        rows.append({"layer": node.name, "MW x MH x pixels": f"{s.mw} x {s.mh} x {prod(s.num_input_vectors)}",
                     "PE x SIMD": f"{s.pe} x {s.simd}", "words": s.wmem, "cycles": f"{s.exp_cycles:,}",
                     "weights": storage(s), "lane sum": "heap" if s.uses_heap else "adder tree",
                     "weight bits a cycle": f"{s.pe * s.simd * s.weight_dtype.bitwidth():,}",
                     "LUT / FF / BRAM36 (estimate)": f"{e.lut:,} / {e.ff:,} / {e.bram18 / 2:g}"})
    return result, rows


def main():
    g = graph()
    total_bits, binary_bits = weight_bits_per_frame(g)
    ceiling = BRAM36 * BRAM_BITS
    ceiling_fps = CLOCK_MHZ * 1e6 / (total_bits / ceiling)
    intro = (__doc__.split("\n\n", 2)[2].replace("\n", " ").strip() +
             f" CNV-w1a1 reads {total_bits:,} weight bits a frame ({binary_bits:,} of them binary x binary); "
             f"the BRAM ceiling is {ceiling:,} bits a cycle: {ceiling_fps:,.0f} frames/s at 100 MHz "
             f"(II {math.ceil(total_bits / ceiling):,}), and 20,000 frames/s (II 5,000) needs "
             f"{total_bits / 5000:,.0f} bits a cycle.")
    rows = target_rows(g, binary_bits)
    result, layers = layer_rows(g)
    write_section("CNV-w1a1 beyond the block-RAM ceiling: what binds per II", intro, rows)
    used = result.used
    write_section("CNV-w1a1 --fit pynq-z2 layer by layer: where the weights live",
                  f"The `--fit pynq-z2` design (II {result.ii:,}, {CLOCK_MHZ * 1e6 / result.ii:,.0f} frames/s at "
                  f"100 MHz; whole design LUT {used['LUT']:,.0f}, FF {used['FF']:,.0f}, BRAM36 "
                  f"{used['BRAM18'] / 2:,.1f} estimated; binds {result.binding}; optimizer {result.seconds:.0f} s), "
                  f"the MVAUs: words = SF x NF weight words, weight bits a cycle = what the layer reads from its "
                  f"memory each cycle.", layers)


if __name__ == "__main__":
    main()
