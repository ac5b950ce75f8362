"""Does a design fit its board? A resource estimate (or a Yosys count) against the device, per resource.

The estimate counts BRAM18 halves; the device is counted in BRAM36 (two RAMB18 per RAMB36, as Vivado
reports utilisation), so BRAM36 used = BRAM18 / 2.
"""

from dataclasses import dataclass

import numpy as np

from boards.yosys import XC7Z020

__all__ = ["BOARDS", "Usage", "usage", "fits", "binding", "fit_line", "FAR_OVER", "BRAM18_PER_BRAM36", "BOARD_NAMES",
           "DEFAULT_UTILIZATION", "utilization_shares", "Budget"]

BOARDS = {"pynq-z2": ("xc7z020", XC7Z020)}          # board -> (device, capacity)
FAR_OVER = 1.5          # `build` refuses to start Yosys when the estimate exceeds a resource by this factor
BRAM18_PER_BRAM36 = 2   # the estimate counts RAMB18 halves; the device (and Vivado's utilisation) RAMB36 blocks
# an estimate's resource -> its name on the board's side (the device's units: BRAM36)
BOARD_NAMES = {"LUT": "LUT", "FF": "FF", "BRAM18": "BRAM36", "DSP": "DSP"}
# The share of each of the device's resources the optimizer may fill (--max-utilization's default). The fabric
# keeps a fifth free: LUTs and flip-flops are what placement and routing need slack in to close timing. The
# hard blocks sit in their own columns and add no routing pressure of their own: FINN's BNN-PYNQ CNV builds
# on this very chip used 140 of 140 RAMB36 and closed 100 MHz with positive slack (../shared anchors:
# BNN-PYNQ@26c0edb, @d39c1c7); 5 % stays free for the shell and for what the estimate misses.
DEFAULT_UTILIZATION = {"LUT": 0.8, "FF": 0.8, "BRAM36": 0.95, "DSP": 0.95}
_UTILIZATION_KEYS = {"lut": "LUT", "ff": "FF", "bram36": "BRAM36", "bram": "BRAM36", "dsp": "DSP"}


def utilization_shares(value=None):
    """{LUT, FF, BRAM36, DSP: share of the device} from ``--max-utilization``: None (the defaults,
    :data:`DEFAULT_UTILIZATION`), one number F (every resource), or ``lut=F,ff=F,bram36=F,dsp=F`` (any
    subset; the others keep their defaults). Each share in (0, 1]. ValueError saying what is legal."""
    legal = "give F (every resource) or lut=F,ff=F,bram36=F,dsp=F (any subset), each F in (0, 1]"
    shown = value if str(value).strip() else repr(value)
    shares = dict(DEFAULT_UTILIZATION)
    if value is None:
        return shares
    try:
        share = float(value)
    except (TypeError, ValueError):
        share = None
    if share is not None:
        items = {key: share for key in shares}
    else:
        items = {}
        for item in filter(None, (part.strip() for part in str(value).split(","))):
            key, sep, number = item.partition("=")
            try:
                if not sep:
                    raise ValueError
                items[_UTILIZATION_KEYS[key.strip().lower()]] = float(number)
            except (KeyError, ValueError):
                raise ValueError(f"--max-utilization {shown}: {item!r} is not KEY=F with KEY one of lut, ff, "
                                 f"bram36, dsp; {legal}") from None
        if not items:
            raise ValueError(f"--max-utilization {shown}: names no resource; {legal}")
    for key, share in items.items():
        if not 0 < share <= 1:
            what = "must be in (0, 1]" if len(set(items.values())) == 1 and len(items) == 4 else \
                f"the {key} share must be in (0, 1]"
            raise ValueError(f"--max-utilization {shown}: {what}; {legal}")
    shares.update(items)
    return shares


@dataclass(frozen=True)
class Usage:
    resource: str           # LUT, FF, BRAM36, DSP
    used: float
    available: int

    @property
    def fraction(self):
        return self.used / self.available

    @property
    def fits(self):
        return self.used <= self.available

    def __str__(self):
        used = f"{self.used:,.1f}" if self.used != int(self.used) else f"{int(self.used):,}"
        return f"{self.resource} {used} of {self.available:,} ({self.fraction:.0%})"


def usage(totals, board="pynq-z2"):
    """[Usage] of ``totals`` (a mapping with LUT, FF, BRAM18, DSP, as ``Resources`` reads) on ``board``."""
    _, capacity = BOARDS[board]
    used = {"LUT": totals.get("LUT", 0), "FF": totals.get("FF", 0), "BRAM36": totals.get("BRAM18", 0) / BRAM18_PER_BRAM36,
            "DSP": totals.get("DSP", 0)}
    return [Usage(key, used[key], capacity[key]) for key in ("LUT", "FF", "BRAM36", "DSP")]


def fits(usages):
    return all(u.fits for u in usages)


def binding(usages):
    """The resource closest to (or furthest over) its capacity."""
    return max(usages, key=lambda u: u.fraction)


def fit_line(usages, board="pynq-z2", what="estimate"):
    """One line: "fits the pynq-z2 (xc7z020) by the estimate: LUT ... " or "does not fit ...: BRAM36 530 of
    140 (379 %)" with the resources over capacity first, the binding one leading."""
    device, _ = BOARDS[board]
    if fits(usages):
        return f"fits the {board} ({device}) by the {what}: " + ", ".join(str(u) for u in usages)
    over = sorted((u for u in usages if not u.fits), key=lambda u: -u.fraction)
    return f"does not fit the {board} ({device}) by the {what}: " + ", ".join(str(u) for u in over)


@dataclass(frozen=True)
class Budget:
    """Resources available to the accelerator (7-series primitives; BRAM in 18 Kbit halves)."""
    lut: float
    ff: float
    bram18: float
    dsp: float

    def as_vector(self):
        return np.array([self.lut, self.ff, self.bram18, self.dsp], dtype=float)

    @classmethod
    def for_board(cls, board, max_utilization=None):
        """The board's device capacity times ``max_utilization`` (one share, per-resource shares as
        ``--max-utilization`` takes them, or None: :data:`rtlgen.fit.DEFAULT_UTILIZATION`)."""
        capacity, share = BOARDS[board][1], utilization_shares(max_utilization)
        return cls(capacity["LUT"] * share["LUT"], capacity["FF"] * share["FF"],
                   BRAM18_PER_BRAM36 * capacity["BRAM36"] * share["BRAM36"], capacity["DSP"] * share["DSP"])

    @classmethod
    def parse(cls, text):
        """``lut=N,ff=N,bram36=N,dsp=N`` (any subset; the rest unlimited; ``bram18=N`` also accepted)."""
        values = {"lut": np.inf, "ff": np.inf, "bram18": np.inf, "dsp": np.inf}
        for item in filter(None, (part.strip() for part in str(text).split(","))):
            key, sep, number = item.partition("=")
            key = key.strip().lower()
            try:
                amount = float(number)
            except ValueError:
                amount = -1
            if not sep or key not in ("lut", "ff", "bram36", "bram18", "dsp") or not amount >= 0:
                raise ValueError(f"--budget {text!r}: {item!r} is not KEY=N with KEY one of lut, ff, bram36, "
                                 f"bram18, dsp and N >= 0")
            if key == "bram36":
                key, amount = "bram18", BRAM18_PER_BRAM36 * amount
            values[key] = amount
        return cls(**values)

    def describe(self):
        return ", ".join(f"{name} {value:,.0f}" for name, value in
                         (("LUT", self.lut), ("FF", self.ff), ("BRAM36", self.bram18 / BRAM18_PER_BRAM36),
                          ("DSP", self.dsp))
                         if np.isfinite(value))
