"""Why the INT8 generator MLP stops short of 150,000 frames/s at ``--fit pynq-z2 --clock-mhz 200``.

    python -m benchmarks.gen_int8_bound

150,000 frames/s at 200 MHz is an II of at most 1,333 cycles. Per layer, the folding steps (SIMD | MW,
PE | MH: cycles = MW/SIMD x MH/PE) and the fewest MACs per cycle that reach an II; then, at the II the
target needs, the least LUTs any design can have by the cost model (``rtlgen.costmodel.estimate``):
per layer and folding, the all-fabric option (resType lut) and the all-DSP option (resType dsp: two INT8
lanes per DSP48E1 where PE is even), both with ``shared_activation`` and the requantizer, weights in
block RAM. A layer whose lanes are part fabric, part DSP costs the linear mix of the two (its memory,
control and activation are the same in both; the lanes are what differs), and weights that do not fit
the block RAM budget spill into LUT ROM at the estimate's cost per BRAM18 of 1,024-word columns. The
linear program (``scipy.optimize.linprog``) over every combination of the layers' foldings gives a lower
bound on the layers' LUTs, before the FIFOs and width converters between them.
"""

import itertools
import sys

import numpy as np
from scipy.optimize import linprog

from benchmarks.tables import write_section
from rtlgen.costmodel import estimate
from rtlgen.options import CompileOptions
from rtlgen.passes.load import load_model
from rtlgen.fit import Budget
from rtlgen.passes.to_hw import to_hw
from boards.yosys import XC7Z020

MODEL = "tests/models/gen_mlp_int8.onnx"
CLOCK_MHZ = 200
TARGET_FPS = 150_000
IIS = (2048, 1792, 1568, 1333, 1024)


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def foldings(node, ii):
    """(SIMD, PE) pairs with the fewest MACs per cycle whose cycles are at most ``ii``."""
    mw, mh = node.params["mw"], node.params["mh"]
    fits = [(s, p) for s in divisors(mw) for p in divisors(mh) if (mw // s) * (mh // p) <= ii]
    least = min(s * p for s, p in fits)
    return [(s, p) for s, p in fits if s * p == least]


def option(node, simd, pe, res_type):
    spec = node.spec(SIMD=simd, PE=pe, resType=res_type, ram_style="block", activation_style="requant",
                     shared_activation=True, mem_mode="internal_embedded")
    e = estimate(spec)
    return np.array([e.lut, e.ff, e.bram18, e.dsp], dtype=float), spec


def spill_lut_per_bram18(node, simd, pe):
    """LUTs per BRAM18 saved when a block-RAM weight word moves a quarter of its bits into LUT ROM."""
    spec = node.spec(SIMD=simd, PE=pe, resType="dsp", ram_style="block", mem_mode="internal_embedded")
    quarter = spec.weight_width // 4
    spilled = node.spec(SIMD=simd, PE=pe, resType="dsp", ram_style="block", mem_mode="internal_embedded",
                        weight_lut_bits=quarter)
    a, b = estimate(spec), estimate(spilled)
    return (b.lut - a.lut) / (a.bram18 - b.bram18)


def least_luts(layers, budget, spill_cost):
    """(LUT, choice) of the cheapest mix: per layer a folding and the share t of its lanes on DSPs."""
    best = None
    for combo in itertools.product(*layers):
        fab = np.array([c["fabric"] for c in combo])
        dsp = np.array([c["dsp"] for c in combo])
        n = len(combo)
        # variables: t_k (DSP share of layer k), s (BRAM18 spilled); minimise LUT
        lut_f, lut_d = fab[:, 0], dsp[:, 0]
        c = np.concatenate([lut_d - lut_f, [spill_cost]])
        rows, rhs = [], []
        for r, cap in ((1, budget.ff), (3, budget.dsp)):      # FF, DSP
            rows.append(np.concatenate([dsp[:, r] - fab[:, r], [0]]))
            rhs.append(cap - fab[:, r].sum())
        rows.append(np.concatenate([dsp[:, 2] - fab[:, 2], [-1]]))      # BRAM18 after the spill
        rhs.append(budget.bram18 - fab[:, 2].sum())
        res = linprog(c, A_ub=np.array(rows), b_ub=np.array(rhs), bounds=[(0, 1)] * n + [(0, None)])
        if res.status != 0:
            continue
        lut = lut_f.sum() + res.fun
        if best is None or lut < best[0]:
            best = (lut, combo, res.x)
    return best


def rows():
    graph = to_hw(load_model(MODEL), CompileOptions())
    nodes = [n for n in graph.nodes if n.op_type == "MVAU"]
    table = []
    for ii in IIS:
        row = {"II": f"{ii:,}", "frames/s @200 MHz": f"{CLOCK_MHZ * 1e6 / ii:,.0f}"}
        for node in nodes:
            fs = foldings(node, ii)
            s, p = fs[0]
            cycles = (node.params["mw"] // s) * (node.params["mh"] // p)
            row[f"{node.name} ({node.params['mw']}x{node.params['mh']}) MACs/cycle (its II)"] = f"{s * p} ({cycles:,})"
        table.append(row)
    target_ii = CLOCK_MHZ * 1e6 / TARGET_FPS
    ii = max(i for i in IIS if i <= target_ii)
    layers = []
    for node in nodes:
        choices = []
        for simd, pe in foldings(node, ii):
            fabric, _ = option(node, simd, pe, "lut")
            dsp, spec = option(node, simd, pe, "dsp")
            choices.append({"node": node.name, "SIMD": simd, "PE": pe, "fabric": fabric, "dsp": dsp,
                            "packed": spec.dsp_packing is not None})
        layers.append(choices)
    last = nodes[-1]
    s, p = foldings(last, ii)[0]
    spill = spill_lut_per_bram18(last, s, p)
    bounds = []
    for label, share in (("--fit pynq-z2 (x0.8)", 0.8), ("x0.9", 0.9), ("the whole xc7z020 (x1.0)", 1.0)):
        budget = Budget.for_board("pynq-z2", share)
        found = least_luts(layers, budget, spill)
        if found is None:
            bounds.append({"budget": label, "least layer LUT": "no mix fits DSP/BRAM/FF"})
            continue
        lut, combo, x = found
        mix = ", ".join(f"{c['node']} {c['SIMD']}x{c['PE']} {100 * t:.0f}% DSP lanes" for c, t in zip(combo, x[:-1]))
        dsp = sum(c["fabric"][3] + t * (c["dsp"][3] - c["fabric"][3]) for c, t in zip(combo, x[:-1]))
        bounds.append({"budget": label, "LUT budget": f"{budget.lut:,.0f}", "least layer LUT": f"{lut:,.0f}",
                       "fits": "yes" if lut <= budget.lut else "NO",
                       "DSP used": f"{dsp:.0f} of {budget.dsp:.0f}", "BRAM18 spilled": f"{x[-1]:.1f}", "mix": mix})
    return table, bounds, ii, spill, layers


def main():
    table, bounds, ii, spill, layers = rows()
    for r in table + bounds:
        print(r)
    per_mac = []
    for choices in layers:
        for c in choices:
            macs = c["SIMD"] * c["PE"]
            per_mac.append(f"{c['node']} {c['SIMD']}x{c['PE']}: fabric {c['fabric'][0] / macs:.0f}, DSP "
                           f"{c['dsp'][0] / macs:.0f} LUT/MAC ({c['dsp'][3]:.0f} DSP{'' if c['packed'] else ', unpacked: odd PE'})")
    if "--print" in sys.argv:
        return
    write_section(
        "INT8 generator: folding steps per II",
        f"`{MODEL}` at 200 MHz: per II, the fewest MACs per cycle each layer needs (SIMD | MW, PE | MH), and "
        f"the II that folding gives. 150,000 frames/s needs II <= 1,333; the last layer (512 x 784 = 2^9 x 2^4 "
        f"7^2) has no folding between 392 MACs/cycle (II 1,024) and 256 (II 1,568), so a design that reaches it "
        f"runs at II 1,024 (its other layers may stay slower, down to II {ii:,}): 525-545 MACs per cycle against 220 DSP48E1 (440 MACs at two per DSP, 352 under the 0.8 cap).", table)
    write_section(
        "INT8 generator: the least LUTs at 150,000 frames/s",
        f"The least LUTs of the generator's three layers at II <= {ii:,} by the cost model, over every folding "
        f"that reaches it with the fewest MACs, any share of each layer's lanes on DSPs (two INT8 lanes per "
        f"DSP48E1; a layer's lanes part fabric, part DSP costed as the linear mix of its all-fabric and "
        f"all-DSP estimates), shared activations with the requantizer, weights beyond the BRAM budget "
        f"spilled to LUT ROM at {spill:.0f} LUT per BRAM18; the FIFOs and width converters between the "
        f"layers not counted: a lower bound (linear program, `scipy.optimize.linprog`). LUT per MAC at II "
        f"<= {ii:,} (whole layer: activation, memory and control included): " + "; ".join(per_mac) + ".", bounds)

if __name__ == "__main__":
    main()
