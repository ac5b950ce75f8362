"""What `rtlgen compile` prints: a per-layer table from ``report.json`` (op, folding, widths, cycles per
frame with the bottleneck marked, the resource estimate), the totals against the board, the rate at the
clock. Rendered with rich; plain (no colour, ASCII rules) when stdout is not a terminal."""

import sys

from rich import box
from rich.console import Console, Group
from rich.table import Table

from rtlgen.fit import BOARD_NAMES, Usage, fit_line
from rtlgen.ir.graph import INSERTED_ROLES, OPS

__all__ = ["layer_table", "print_summary", "console"]

# The ops the compiler inserts (rtlgen.ir.graph.INSERTED_ROLES) are summed in one row: the stitcher's, not the
# network's. What that row calls them, per role:
INSERTED_NAMES = {"fifo": "FIFOs", "dwc": "DWCs", "fanout": "fan-outs"}
RESOURCES = ("LUT", "FF", "BRAM18", "DSP")


def console(stderr=False):
    """A rich Console; when not writing to a terminal: no colour and lines as long as they are (logs)."""
    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    return Console(file=stream, highlight=False, width=None if tty else 200, no_color=not tty)


def _folding(folding):
    return " ".join(f"{k}={v}" for k, v in folding.items() if k not in ("depth", "ram_style")) or "-"


def _inserted_role(op_type):
    """The role of ``op_type`` if the compiler inserts it (a FIFO, DWC, fan-out), else None."""
    op = OPS.get(op_type)
    return op.role if op is not None and op.role in INSERTED_ROLES else None


NUMBERS = ("bits in>out", "cycles/frame", *RESOURCES)      # the columns of numbers: never cut
TEXT_MIN = 20               # the narrowest the folding column gets before the rows are stacked


def layer_table(report, width=None):
    """A rich Table of ``report`` (the dict ``report.json`` holds) for a console ``width`` wide: the text
    columns wrap, the numbers stay whole; where even the numbers do not fit, one block of lines per layer
    (:func:`layer_lines`) instead."""
    header, rows, ends = _rows(report)
    cells = [header] + [c for c, _ in rows + ends]
    widest = [max(len(c[k]) for c in cells) for k in range(len(header))]
    # each column is padded by a space either side; the text columns need a few characters each
    numbers = sum(w + 2 for name, w in zip(header, widest) if name in NUMBERS)
    text = min(widest[0], 20) + min(widest[1], 12) + TEXT_MIN + 6     # the layer, op, folding (wrapped) columns
    if width is not None and numbers + text > width:
        return layer_lines(header, rows + ends)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for k, name in enumerate(header):
        if name in NUMBERS:
            table.add_column(name, justify="right", no_wrap=True, min_width=widest[k])
        else:
            table.add_column(name, justify="left", overflow="fold")
    for cells, style in rows:
        table.add_row(*cells, style=style)
    table.add_section()
    for cells, style in ends:
        table.add_row(*cells, style=style)
    return table


def layer_lines(header, rows):
    """The table as one block per row, ``column: value`` pairs, for a console too narrow for it."""
    from rich.text import Text
    lines = []
    for cells, style in rows:
        lines.append(Text(cells[0], style="bold" if style else ""))
        lines.extend(Text(f"  {name}: {value}") for name, value in zip(header[1:], cells[1:]) if value)
    return Group(*lines)


def _rows(report):
    """(header, [(cells, style)] of the layers and the inserted nodes' row, [(cells, style)] of the totals)."""
    ii = report["analytic_cycles_per_frame"]
    header = ("layer", "op", "folding", "bits in>out", "cycles/frame", *RESOURCES)
    rows = []
    inserted = {"count": {}, **{r: 0 for r in RESOURCES}}
    for row in report["layers"]:
        res = row["resources"]
        role = _inserted_role(row["op_type"])
        if role is not None:
            inserted["count"][role] = inserted["count"].get(role, 0) + 1
            for r in RESOURCES:
                inserted[r] += res.get(r, 0)
            continue
        slowest = row["exp_cycles"] == ii
        cycles = ("II " if slowest else "") + f"{row['exp_cycles']:,}"
        rows.append(((row["name"], row["op_type"], _folding(row["folding"]), f"{row['in_width']}>{row['out_width']}",
                      cycles, *(f"{res.get(r, 0):,}" for r in RESOURCES)), "bold" if slowest else None))
    if inserted["count"]:
        what = ", ".join(f"{n} {INSERTED_NAMES.get(role, role)}" for role, n in inserted["count"].items())
        rows.append(((f"({what})", "", "", "", "", *(f"{inserted[r]:,}" for r in RESOURCES)), None))
    totals = report["totals"]
    ends = [(("total", "", "", "", f"{ii:,}", *(f"{totals.get(r, 0):,}" for r in RESOURCES)), "bold")]
    fit = report.get("fit")
    if fit:
        res = fit["resources"]
        pct = {r: f"{res[k]['used'] / res[k]['available']:.0%}" for r, k in
               BOARD_NAMES.items()}
        ends.append(((f"of the {fit['board']}", "", "", "", "", *(pct[r] for r in RESOURCES)), None))
    return header, rows, ends


def board_line(report):
    """What the board delivers behind the zynq shell (``board_frames_per_second``), or None for a report
    written before it was computed."""
    if "board_frames_per_second" not in report:
        return None
    shell, clock = report["shell"], report["clock_mhz"]
    bound = (f"I/O-bound: the shell's DMA moves a frame in {shell['cycles_per_frame']:,.4g} cycles, the accelerator "
             f"alone would do {report['frames_per_second']:,.0f}" if report["io_bound"] else
             f"the accelerator binds; the shell's DMA needs {shell['cycles_per_frame']:,.4g} cycles/frame")
    line = (f"board (zynq shell, {shell['in_bytes_per_frame']:,} B in + {shell['out_bytes_per_frame']:,} B out per "
            f"frame over S_AXI_HP0): {report['board_frames_per_second']:,.0f} frames/s ({bound}); latency "
            f"{report['board_latency_cycles']:,} cycles ({report['board_latency_ns']:,.0f} ns) DDR to DDR, "
            f"{shell['ddr_read_latency_cycles']}-cycle DDR latency assumed")
    packing = shell.get("input_packing")
    if packing and report["io_bound"]:
        dense = clock * 1e6 / packing["dense_cycles_per_frame"]
        line += (f"; the input would move in {packing['dense_in_bits_per_frame']:,} bits/frame packed densely by "
                 f"the host (now {packing['in_bits_per_frame']:,}): {dense:,.0f} frames/s, not supported yet")
    return line


def print_summary(report, console):
    """The table, then the rate and the fit line (a warning, on stderr, when over the board)."""
    console.print(layer_table(report, console.width))
    ii = report["analytic_cycles_per_frame"]
    latency = "" if "latency_cycles" not in report else (
        f"; latency {report['latency_cycles']:,} cycles ({report['latency_ns']:,.0f} ns, one frame into the idle design)")
    console.print(f"II {ii:,} cycles/frame (the slowest layer, marked II): {report['frames_per_second']:,.0f} "
                  f"frames/s at {report['clock_mhz']:g} MHz{latency}", highlight=False, soft_wrap=True)
    line = board_line(report)
    if line:
        console.print(line, highlight=False, soft_wrap=True)
    chosen = report.get("optimizer")
    if chosen:
        budget = ", ".join(f"{k} {v:,.0f}" for k, v in chosen["budget"].items() if v is not None)
        share = chosen["estimate"][chosen["binding"]] / chosen["budget"][chosen["binding"]]
        held = ", ".join(f"{v:,.0f} {k}" for k, v in chosen.get("held_for_fifos", {}).items())
        held = f" ({held} of it held back for the FIFOs that simulation sized deeper)" if held else ""
        what = "the lowest-latency design" if chosen.get("objective") == "latency" else "the fastest design"
        console.print(f"folding optimizer ({chosen['seconds']:.1f} s): {what} within {budget}{held}; "
                      f"{chosen['binding']} binds ({share:.0%} of its budget)", highlight=False, soft_wrap=True)
        if chosen.get("io_bound"):
            console.print(f"folding optimizer: I/O-bound: the budget allows II {chosen['budget_ii']:,}, but the zynq "
                          f"shell's DMA needs {chosen['io_cycles_per_frame']:,.4g} cycles/frame; it took the "
                          f"cheapest design at that bound (II {chosen['ii']:,}) instead", highlight=False,
                          soft_wrap=True)
    fit = report["fit"]
    used = [Usage(k, v["used"], v["available"]) for k, v in fit["resources"].items()]
    line = fit_line(used, fit["board"])
    if fit["fits"]:
        console.print(line, highlight=False, soft_wrap=True)
    return line, fit["fits"]

