"""An Fmax *estimate* for the xc7z020-1 from Yosys's static timing analysis (``sta``).

Yosys's ``sta`` adds up the delays of the mapped cells along each path (the specify blocks of its xc7
cell library: LUTs, CARRY4, flip-flop and block RAM clock-to-out, DSP...), with no routing. Placed and
routed, every net between two cells costs routing delay, except the dedicated ones (a carry chain's
CO -> CI, the F7/F8 muxes' inputs from their slice's LUTs, a DSP cascade). The model:

    path ns = cell delays (sta, clock insertion removed)
              + NET_NS for every net on the path (launch -> first cell, ..., last cell -> endpoint;
                dedicated nets are free)
              + SETUP_NS (endpoint setup time and clock uncertainty)
    Fmax    = 1000 / path ns   MHz

``sta`` reports one path, the latest; so that it is the latest *by the model* (a path of many LUTs and
nets can be longer than one of fewer, slower cells), ``charged_library`` adds NET_NS to every arc from
a routed input pin of the cell library ``sta`` reads (and to every setup check: the net into the
endpoint): the arrival times it prints then hold the nets, and ``parse_sta`` takes them out again to
report the cells' share (``sta.txt`` says so in its first line, ``CHARGE_MARK``).

``NET_NS`` 0.5 ns is a typical routed net of a 7-series -1 device in a moderately full design (Vivado
reports 0.3-0.8 ns); ``SETUP_NS`` 0.3 ns covers a flip-flop's or a block RAM's setup and the clock
uncertainty Vivado assumes. It is an estimate for choosing a clock, never a substitute for Vivado's
timing report: routing in a congested design can add much more.
"""

import re
from dataclasses import dataclass

__all__ = ["CriticalPath", "parse_sta", "charged_library", "NET_NS", "SETUP_NS", "MODEL", "CHARGE_MARK", "FREE_NETS"]

NET_NS = 0.5
SETUP_NS = 0.3
MODEL = (f"Yosys sta cell delays + {NET_NS} ns per routed net + {SETUP_NS} ns setup/uncertainty "
         f"(an estimate for the xc7z020-1; Vivado's timing report is the real figure)")

# input pins fed by a dedicated wire, not by routing: no NET_NS on the net into them. An I/O buffer is
# where a part synthesized alone (boards.yosys_parts) meets the design: a wire there, not a cell
_IO_BUFFERS = {"IBUF", "OBUF", "IOBUF", "OBUFT"}
FREE_NETS = {"CARRY4": {"CI"}, "MUXF7": {"I0", "I1"}, "MUXF8": {"I0", "I1"},
             "DSP48E1": {"ACIN", "BCIN", "PCIN", "CARRYCASCIN", "MULTSIGNIN"},
             **{kind: {"I", "IO"} for kind in _IO_BUFFERS}}
CHARGE_MARK = "rtlgen sta: each routed net charged in the arrival times (ps):"

_HEADER = re.compile(r"^Latest arrival time in '(.+?)' is (\d+):$")
_CELL = re.compile(r"^\s+(\d+) (\S+) \((\w+)\.(\w+)->(\w+)\)$")
_CLOCK_PINS = re.compile(r"^(C|CLK\w*|CLKARDCLK|CLKBWRCLK|WCLK)$")
_CLOCK_NETWORK = {"BUFG", "BUFGCTRL", "IBUF", "BUFH", "BUFR", "BUFIO"}


@dataclass(frozen=True)
class CriticalPath:
    """The latest-arriving path of one module, as ``sta`` printed it, with the delay model applied."""
    module: str
    cells: tuple            # (cell name, cell type) from the launching register (or input port) to the end
    cell_ns: float          # sum of cell delays, clock insertion removed
    levels: int             # combinational cells after the launching register
    nets: int               # routed nets on the path (carry-chain nets not counted)

    @property
    def path_ns(self):
        return self.cell_ns + self.nets * NET_NS + SETUP_NS

    @property
    def fmax_mhz(self):
        return 1000.0 / self.path_ns

    def through(self):
        """The cell types along the path, e.g. ``RAMB18E1 -> LUT5 -> LUT6 -> CARRY4``."""
        return " -> ".join(kind for _, kind in self.cells)

    def as_dict(self):
        return {"levels": self.levels, "nets": self.nets, "cell_ns": round(self.cell_ns, 3),
                "path_ns_estimate": round(self.path_ns, 3), "fmax_mhz_estimate": round(self.fmax_mhz, 1),
                "through": self.through(), "cells": [name for name, _ in self.cells]}


def parse_sta(text):
    """``{module: CriticalPath}`` from the output of Yosys ``sta`` (one block per module). Arrival times
    that hold the routed nets (``charged_library``; the text begins with ``CHARGE_MARK``) are read as such:
    ``cell_ns`` is the cells' share either way."""
    paths, module, rows = {}, None, []
    mark = re.search(rf"^{re.escape(CHARGE_MARK)} (\d+)$", text, re.M)
    charge_ps = int(mark.group(1)) if mark else 0

    def finish():
        if module is not None and rows:
            paths[module] = _path(module, rows[::-1], charge_ps)       # sta lists the end first

    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            finish()
            module, rows = header.group(1), []
            continue
        cell = _CELL.match(line)
        if cell and module is not None:
            rows.append((int(cell.group(1)), cell.group(2), cell.group(3), cell.group(4)))
    finish()
    return paths


def _routed(kind, pin):
    """Whether the net into input ``pin`` of a ``kind`` cell is routed (not a dedicated wire)."""
    return pin not in FREE_NETS.get(kind, ())


def _path(module, rows, charge_ps=0):
    """``rows`` (arrival ps, cell name, cell type, input pin) from the start of the path to its end;
    ``charge_ps`` already in the arrival of each cell whose input net is routed."""
    launch = next((k for k, (_, _, kind, pin) in enumerate(rows)
                   if _CLOCK_PINS.match(pin) and kind not in _CLOCK_NETWORK), None)
    if launch is None:          # from an input port of the module: its clock is not on this path
        start_ps, logic = 0, [r for r in rows if r[2] not in _CLOCK_NETWORK | _IO_BUFFERS]
    else:
        start_ps = rows[launch - 1][0] if launch > 0 else 0     # the clock's arrival at the register
        logic = [r for r in rows[launch + 1:] if r[2] not in _IO_BUFFERS]
    # the net into every logic cell (but a dedicated one) and the net from the last cell to the endpoint
    routed = sum(1 for _, _, kind, pin in logic if _routed(kind, pin))
    cells = ([rows[launch]] if launch is not None else []) + list(logic)
    return CriticalPath(module, tuple((name, kind) for _, name, kind, _ in cells),
                        (rows[-1][0] - start_ps - routed * charge_ps) / 1000, len(logic), routed + 1)


_SPECIFY = re.compile(r"\bspecify\b(.*?)\bendspecify\b", re.S)
# a module path `(SRC => DST) = DELAY;` (also `*>`); an edge-sensitive one (`posedge C => (Q : D)`, a
# clock-to-out) has parentheses in its destination and does not match
_MODULE_PATH = re.compile(r"(\(\s*(?P<src>[^()=*;]+?)\s*[*=]>\s*[^();]+?\s*\)\s*=\s*)(?P<delay>[^;]+?)\s*;")
_SETUP = re.compile(r"\$setup\((?P<args>[^;]*)\)\s*;")


def charged_library(cells_sim, net_ps=round(NET_NS * 1000)):
    """Yosys's xc7 cell library (the text of ``cells_sim.v``) with ``net_ps`` added to every
    combinational arc from a routed input pin and to every setup check of one (the net into the
    endpoint); clock-to-out arcs unchanged. ``sta`` over it finds the latest path by the model."""
    pieces, last = [], 0
    for module in re.finditer(r"^\s*module\s+(\\?[\w$]+)(.*?)^\s*endmodule\b", cells_sim, re.M | re.S):
        kind = module.group(1).lstrip("\\")
        for block in _SPECIFY.finditer(cells_sim, module.start(), module.end()):
            pieces += [cells_sim[last:block.start(1)], _charge_block(block.group(1), kind, net_ps)]
            last = block.end(1)
    return "".join(pieces) + cells_sim[last:]


def _charge_block(text, kind, net_ps):
    def routed(pins):
        return any(_routed(kind, pin.split("[")[0].strip()) for pin in pins.split(","))

    def path(m):
        if not routed(m.group("src")):
            return m.group(0)
        return f"{m.group(1)}({m.group('delay')}) + {net_ps};"

    def setup(m):
        pin, rest = m.group("args").split(",", 1)
        if not routed(pin):
            return m.group(0)
        head, limit = rest.rsplit(",", 1)
        return f"$setup({pin},{head}, ({limit}) + {net_ps});"
    return _SETUP.sub(setup, _MODULE_PATH.sub(path, text))
