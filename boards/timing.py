"""An Fmax *estimate* for the xc7z020-1 from Yosys's static timing analysis (``sta``).

Yosys's ``sta`` adds up the delays of the mapped cells along each path (the specify blocks of its xc7
cell library: LUTs, CARRY4, block RAM clock-to-out, DSP...), with no routing. Placed and routed, every
net between two cells costs routing delay, except the dedicated carry chain (CARRY4 CO -> CI). The model:

    path ns = cell delays (sta, clock insertion removed)
              + NET_NS for every net on the path (launch -> first cell, ..., last cell -> endpoint;
                carry-chain nets are free)
              + SETUP_NS (endpoint setup time and clock uncertainty)
    Fmax    = 1000 / path ns   MHz

``NET_NS`` 0.5 ns is a typical routed net of a 7-series -1 device in a moderately full design (Vivado
reports 0.3-0.8 ns); ``SETUP_NS`` 0.3 ns covers a flip-flop's or a block RAM's setup and the clock
uncertainty Vivado assumes. It is an estimate for choosing a clock, never a substitute for Vivado's
timing report: routing in a congested design can add much more.
"""

import re
from dataclasses import dataclass

__all__ = ["CriticalPath", "parse_sta", "NET_NS", "SETUP_NS", "MODEL"]

NET_NS = 0.5
SETUP_NS = 0.3
MODEL = (f"Yosys sta cell delays + {NET_NS} ns per routed net + {SETUP_NS} ns setup/uncertainty "
         f"(an estimate for the xc7z020-1; Vivado's timing report is the real figure)")

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
    """``{module: CriticalPath}`` from the output of Yosys ``sta`` (one block per module)."""
    paths, module, rows = {}, None, []

    def finish():
        if module is not None and rows:
            paths[module] = _path(module, rows[::-1])       # sta lists the end first

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


def _path(module, rows):
    """``rows`` (arrival ps, cell name, cell type, input pin) from the start of the path to its end."""
    launch = next((k for k, (_, _, kind, pin) in enumerate(rows)
                   if _CLOCK_PINS.match(pin) and kind not in _CLOCK_NETWORK), None)
    if launch is None:          # from an input port of the module: its clock is not on this path
        start_ps, logic = 0, [r for r in rows if r[2] not in _CLOCK_NETWORK]
    else:
        start_ps = rows[launch - 1][0] if launch > 0 else 0     # the clock's arrival at the register
        logic = rows[launch + 1:]
    # the net into every logic cell (but a carry chain's CI) and the net from the last cell to the endpoint
    nets = sum(1 for _, _, _, pin in logic if pin != "CI") + 1
    cells = ([rows[launch]] if launch is not None else []) + list(logic)
    return CriticalPath(module, tuple((name, kind) for _, name, kind, _ in cells), (rows[-1][0] - start_ps) / 1000,
                        len(logic), nets)
