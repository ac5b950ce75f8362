"""MobileNet-v1 w4a4 at 224x224 across PYNQ-Z2 boards: `rtlgen partition`'s plan, with no partition map.

    python -m benchmarks.mobilenet_partition [--devices 9]

The network (brevitas_examples' quant_mobilenet_v1_4b topology, random weights) needs 457 BRAM36 of
weights packed full; one xc7z020 has 140, so `--fit pynq-z2` refuses it and it is split over boards linked by
1 Gbit/s Ethernet (Galapagos), each under the compiler's default budget. The figures are the plan's: the II
from the layers' analytic cycles and the links' bounds, the resources from the cost model (DWCs, FIFOs and
the Galapagos bridges included). No device is built by Yosys or simulated here (a device kernel is a
board-filling design: `rtlgen partition` without `--plan-only` writes them, `rtlgen build` synthesizes
one); the one-frame check of a plan's folding against qonnx is
tests/test_per_channel.py::test_mobilenet_v1_w4a4_across_nine_pynq_z2.
"""

import argparse
import tempfile
import time
import warnings
from pathlib import Path

from benchmarks.tables import write_section
from rtlgen import api

MODEL = Path(__file__).resolve().parent.parent / "tests" / "models" / "per_channel" / "mobilenet_v1_w4a4.onnx"
SECTION = "MobileNet-v1 w4a4 across PYNQ-Z2 boards: rtlgen partition's plan (estimates)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=9)
    args = parser.parse_args()
    notes = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as out, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        part = api.partition(MODEL, Path(out) / "plan", devices=args.devices, plan_only=True, warn=notes.append)
    seconds = time.perf_counter() - start
    rows = []
    for d in part.devices:
        if not d.nodes:
            continue
        r = d.resources
        rows.append({"device": d.index, "layers": f"{d.nodes[0]} .. {d.nodes[-1]} ({len(d.nodes)} nodes)",
                     "cycles/frame": f"{d.cycles:,}", "LUT": f"{r['LUT']:,.0f}", "FF": f"{r['FF']:,.0f}",
                     "BRAM36": f"{r['BRAM18'] / 2:,.1f}", "DSP": f"{r['DSP']:,.0f}",
                     "binding": f"{d.binding} {d.utilization:.0%} of its budget"})
    used = len(rows)
    intro = (f"Automatic plan (no partition map) over at most {args.devices} boards: {used} used; II "
             f"{part.ii:,} cycles = **{part.frames_per_second:,.0f} frames/s** at {part.clock_mhz:g} MHz, set by "
             f"{part.bound_by} (224x224x3 8-bit pixels a frame over 1 Gbit/s); "
             f"{len(part.cuts)} cuts, the busiest link at {max(c.link_utilization for c in part.cuts):.0%} of 1 Gbit/s. "
             f"Planned in {seconds:,.0f} s (greedy start; {part.solver_note or 'every program solved'}). "
             f"Estimates only: no device built by Yosys, no cluster simulated; latency not computed for a plan. "
             f"Also said: {'; '.join(n for n in notes if n != part.solver_note) or 'nothing'}.")
    write_section(SECTION, intro, rows)
    print(intro)


if __name__ == "__main__":
    main()
