"""CNV-w1a1 --fit pynq-z2: where the LUTs go, per layer and per component, by Yosys (issue 43 item 3).

    python -m benchmarks.cnv_luts BEFORE [AFTER] [--label-before TEXT] [--label-after TEXT] [--note TEXT]
    python -m benchmarks.cnv_luts --parts OUT [--note TEXT]

``--parts``: a design whose ``rtlgen build`` by parts has not finished, the layers Yosys has (the parts
cache of ``RTLGEN_CACHE_DIR``) beside their estimates, the rest named.

BEFORE and AFTER (optional) are rtlgen OUT directories of ``rtlgen compile tests/models/cnv_1w1a_ts_clean.onnx
--fit pynq-z2`` each built by ``rtlgen build OUT --shell zynq`` (Yosys by parts): their
``report.json`` (the II and the estimate), ``build/yosys/report.json`` (Yosys per layer) and
``build/yosys/netlist.v`` (the mapped netlist, one module per layer). Each LUT of an MVAU is given to
the component whose register it feeds (followed through LUTs, carry chains and muxes to the first
flip-flop), or whose registers it reads where that says more (a threshold comparison into the output
FIFO): the lane sums (popcount heap or adder tree: ``sumP_...``), the XNOR with its weight ROM
(``agree``), the thresholds (``thr_...``), the accumulators (``accP``), the operand registers and the
replay buffer (``x1``, ``x_word``), and the rest (control, output FIFO). Other layers count whole, by
kind: sliding-window generators, FIFOs, width converters, max pools; the shell is what the design has
beyond its layers. LUT includes LUTRAM and SRLs, as the estimates do. *LUT per binary MAC per cycle*:
the whole design's LUTs over the binary (1-bit x 1-bit) MACs it does a cycle at its II.
"""

import argparse
import collections
import json
import re
from pathlib import Path

from benchmarks.tables import write_section
from boards.yosys_parts import split_modules

CLOCK_MHZ = 100.0
BINARY_MACS = 57_906_176        # CNV-w1a1's binary x binary MACs a frame (benchmarks/cnv_beyond_bram.py)
INTRO = ("The `--fit pynq-z2` designs of CNV-w1a1 (`rtlgen compile tests/models/cnv_1w1a_ts_clean.onnx --fit pynq-z2`, "
         "`rtlgen build OUT --shell zynq`: Yosys in the zynq shell, by parts), their LUTs by layer and by component "
         "from the mapped netlist: each LUT of an MVAU goes to the component whose register it feeds (through LUTs, "
         "carry chains and muxes to the first flip-flop), or whose registers it reads where that says more (a "
         "threshold comparison into the output FIFO): the lane sums (popcount or adder tree), the XNOR with its weight "
         "ROM, the thresholds, the accumulators, the operand registers and replay buffer, and the rest (control, "
         "output FIFO, weight-memory muxes). Other layers count whole, by kind; the shell is what the design has "
         "beyond its layers. LUT includes LUTRAM and SRLs, as the estimates do. *LUT per binary MAC per cycle*: the "
         "whole design's LUTs over the binary (1-bit x 1-bit) MACs it does a cycle at its II (57,906,176 a frame).")
MVAU_PARTS = ("lane sums", "XNOR + weight ROM", "thresholds", "accumulators", "operands, replay", "other")
KINDS = {"ConvolutionInputGenerator": "sliding windows", "StreamingFIFO": "FIFOs",
         "StreamingDataWidthConverter": "width converters", "StreamingMaxPool": "max pools"}
_CELL = re.compile(r"^\s+(\w+)\s+(?:#\(.*?\)\s*)?(\\?\S+)\s*\(\n(.*?)\n\s*\);", re.M | re.S)
_PORT = re.compile(r"\.(\w+)\((.*?)\)\s*,?\s*$", re.M)
_OUTPUTS = {"O", "O5", "O6", "Q", "CO", "DO", "DOADO", "DOBDO", "SPO", "DPO", "Q31", "DOA", "DOB", "DOC", "DOD"}


def _nets(expr):
    expr = expr.strip()
    return [e.strip() for e in expr[1:-1].split(",")] if expr.startswith("{") else [expr]


def _cells(module_text):
    """[(cell type, {port: [nets]})] of a mapped module."""
    return [(m.group(1), {p: _nets(e) for p, e in _PORT.findall(m.group(3))}) for m in _CELL.finditer(module_text)]


def mvau_part(target, inputs):
    """The component of a LUT of an MVAU: by the register it feeds (``target``), or the ones it reads."""
    reads = " ".join(inputs)
    if re.search(r"(^|\W)sum\d+_", target):
        return "lane sums"
    if "agree" in target:
        return "XNOR + weight ROM"
    if "thr_" in target or "thr_" in reads:
        return "thresholds"
    if re.search(r"(^|\W)acc\d", target):
        return "accumulators"
    if re.search(r"(^|\W)(x1|x_word|x\d+b|w1|w_addr)", target) or "from_input" in reads or "x1[" in reads:
        return "operands, replay"
    return "other"


def lut_parts(module_text):
    """{component: LUTs} of one layer's mapped modules (its own and its submodules')."""
    cells = _cells(module_text)
    consumers, drives = collections.defaultdict(list), collections.defaultdict(list)
    for i, (_, ports) in enumerate(cells):
        for port, nets in ports.items():
            for net in nets:
                (drives[i] if port in _OUTPUTS else consumers[net]).append(net if port in _OUTPUTS else i)
    target = {}

    def first_register(i):
        """The Q net of the first flip-flop downstream of cell ``i`` ('' if none)."""
        if i in target:
            return target[i]
        kind, ports = cells[i]
        if kind.startswith("FD"):
            target[i] = ports.get("Q", [""])[0]
            return target[i]
        target[i] = ""                  # cycles (none in a mapped netlist) end here
        for net in drives[i]:
            for j in consumers.get(net, []):
                found = first_register(j)
                if found:
                    target[i] = found
                    return found
        return ""

    parts = collections.Counter()
    for i, (kind, ports) in enumerate(cells):
        if re.fullmatch(r"LUT[1-6]", kind):
            parts[mvau_part(first_register(i), [n for p, ns in ports.items() if p.startswith("I") for n in ns])] += 1
        elif kind.startswith(("SRL", "RAM")) and not kind.startswith("RAMB"):
            parts["operands, replay" if "replay" in str(ports) else "other"] += 1
    return parts


def design_rows(out):
    """(per-layer rows, {component: LUTs}, summary) of a built OUT directory."""
    out = Path(out)
    report = json.loads((out / "report.json").read_text())
    synth = json.loads((out / "build" / "yosys" / "report.json").read_text())
    modules = split_modules((out / "build" / "yosys" / "netlist.v").read_text())
    ops = {layer["name"]: layer["op_type"] for layer in report["layers"]}
    folding = {layer["name"]: layer["folding"] for layer in report["layers"]}
    estimates = {layer["name"]: layer["resources"].get("LUT", 0) for layer in report["layers"]}
    rows, totals = [], collections.Counter()
    for name, r in synth["layers"].items():
        lut = r["lut_including_memory"]
        if ops.get(name) == "MVAU":
            text = "".join(t for m, t in modules.items() if m.split(".", 1)[-1] == name
                           or m.split(".", 1)[-1].startswith(f"{name}."))
            parts = lut_parts(text)
            parts["other"] += lut - sum(parts.values())       # LUTRAM/SRL the netlist names differently
            first = name == "MVAU_0"
            for part, n in parts.items():
                totals["first layer (INT8 x BIPOLAR)" if first else f"binary MVAUs: {part}"] += n
            rows.append({"layer": name, "PE x SIMD": f"{folding[name].get('PE')} x {folding[name].get('SIMD')}",
                         "LUT": lut, "est LUT": estimates.get(name, 0), **{p: parts.get(p, 0) for p in MVAU_PARTS}})
        else:
            totals[KINDS.get(ops.get(name), ops.get(name, "?"))] += lut
    totals["shell"] = synth["lut_including_memory"] - sum(r["lut_including_memory"] for r in synth["layers"].values())
    ii = report["analytic_cycles_per_frame"]
    summary = {"II": ii, "frames/s": CLOCK_MHZ * 1e6 / ii, "LUT": synth["lut_including_memory"],
               "estimate LUT": report["totals"].get("LUT", 0),
               "LUT per binary MAC per cycle": synth["lut_including_memory"] / (BINARY_MACS / ii)}
    return rows, totals, summary


def finished_parts(out):
    """Per layer of a compiled OUT whose build by parts began (its stitched Verilog written): (name, op type,
    folding, estimate LUT, Yosys LUT incl. LUTRAM/SRL or None where the part is not in the cache yet)."""
    from boards.yosys import report_from_files
    from boards.yosys_parts import PLACEHOLDER, _cached, _entry, _key, _part_text
    out = Path(out)
    report = json.loads((out / "report.json").read_text())
    modules = split_modules((out / "build" / "vivado" / "accelerator.v").read_text())
    rows = []
    for layer in report["layers"]:
        key = _key(_part_text(modules, f"finn_design_wrapper.{layer['name']}"))
        lut = None
        if _cached(key):
            r = report_from_files(_entry(key), PLACEHOLDER, sta=False)
            lut = r.lut + r.lut_as_memory
        rows.append((layer["name"], layer["op_type"], layer["folding"], layer["resources"].get("LUT", 0), lut))
    return report, rows


def parts_section(out, note):
    report, rows = finished_parts(out)
    ii = report["analytic_cycles_per_frame"]
    done = [r for r in rows if r[4] is not None]
    table = [{"layer": name, "PE x SIMD": f"{f.get('PE', '-')} x {f.get('SIMD', '-')}", "popcount": f.get("popcount", "-"),
              "LUT (Yosys)": f"{lut:,}", "LUT (estimate)": f"{est:,}", "error": f"{lut / est - 1:+.0%}" if est else "-"}
             for name, op, f, est, lut in done if op == "MVAU" or lut > 300]
    rest = [name for name, *_, lut in rows if lut is None]
    small = sum(lut for name, op, f, est, lut in done if not (op == "MVAU" or lut > 300))
    write_section(f"CNV-w1a1 at II {ii:,}: the layers Yosys finished by parts",
                  f"The design `rtlgen compile tests/models/cnv_1w1a_ts_clean.onnx --fit pynq-z2 --target-fps 30000` "
                  f"gives (II {ii:,}: {CLOCK_MHZ * 1e6 / ii:,.0f} frames/s at 100 MHz; estimate "
                  f"{report['totals'].get('LUT', 0):,} LUT, {report['totals'].get('LUT', 0) / (BINARY_MACS / ii):.2f} "
                  f"LUT per binary MAC per cycle), its layers that `rtlgen build OUT --shell zynq` (Yosys by parts, "
                  f"native) synthesized before the stop: the MVAUs and every layer over 300 LUT; {len(done) - len(table)} "
                  f"smaller layers {small:,} LUT together; not synthesized yet: {', '.join(rest) or 'none'}. {note}",
                  table)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    if "--parts" in __import__("sys").argv:
        parser.add_argument("--parts", required=True)
        parser.add_argument("--note", default="")
        args = parser.parse_args()
        return parts_section(args.parts, args.note)
    parser.add_argument("before")
    parser.add_argument("after", nargs="?")
    parser.add_argument("--label-before", default="before")
    parser.add_argument("--label-after", default="after")
    parser.add_argument("--note", default="", help="a sentence for the intro: when, loaded or quiet")
    args = parser.parse_args()
    designs = {args.label_before: design_rows(args.before)}
    if args.after:
        designs[args.label_after] = design_rows(args.after)
    intro = INTRO + (f" {args.note}" if args.note else "")
    rows = [{"design": label, "II": f"{s['II']:,}", "frames/s at 100 MHz": f"{s['frames/s']:,.0f}",
             "LUT (Yosys)": f"{s['LUT']:,}", "LUT (estimate)": f"{s['estimate LUT']:,}",
             "LUT per binary MAC per cycle": f"{s['LUT per binary MAC per cycle']:.2f}"}
            for label, (_, _, s) in designs.items()]
    parts = sorted({p for _, totals, _ in designs.values() for p in totals},
                   key=lambda p: -max(t.get(p, 0) for _, t, _ in designs.values()))
    component_rows = [{"component": part, **{f"LUT {label}": f"{t.get(part, 0):,}" for label, (_, t, _) in designs.items()},
                       **{f"share {label}": f"{t.get(part, 0) / s['LUT']:.0%}" for label, (_, t, s) in designs.items()}}
                      for part in parts]
    layer_rows = [{"design": label, **row} for label, (rows_, _, _) in designs.items() for row in rows_]
    write_section("CNV-w1a1 --fit pynq-z2: where the LUTs go (Yosys, by component)", intro, rows)
    same_run = "Produced with the section above, by the same command."
    write_section("CNV-w1a1 --fit pynq-z2: LUTs by component", "The designs of \"CNV-w1a1 --fit pynq-z2: where the "
                  "LUTs go (Yosys, by component)\", the whole design's LUTs (Yosys in the zynq shell) by component.",
                  component_rows, same_run)
    write_section("CNV-w1a1 --fit pynq-z2: the MVAUs' LUTs by component", "Each MVAU of those designs, its LUTs "
                  "(Yosys) by component, beside the layer's estimate.",
                  [{k: (f"{v:,}" if isinstance(v, int) else v) for k, v in r.items()} for r in layer_rows], same_run)


if __name__ == "__main__":
    main()
