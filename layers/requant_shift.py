"""The activation of distributed arithmetic's bit heaps (:mod:`layers.distributed`): a threshold table whose
levels are 2^s apart (a power-of-two scale before the quantizer, as hls4ml's jet tagger has), computed from
the heap's sum by a shift, half-even's tie and a clip (:class:`PowerOfTwoRequant`), and its hardware after the
heap's carry chain (:class:`ActivationLUTs`; half-even's tie beside the chain: :class:`layers.bit_heap.TieTest`).
"""

import math
from dataclasses import dataclass

import numpy as np
from amaranth.hdl import C, Cat, Elaboratable, Module, Mux, Signal

from layers.thresholding import activation_lane

__all__ = ["ActivationLUTs", "PowerOfTwoRequant", "power_of_two_requant"]


@dataclass(frozen=True)
class PowerOfTwoRequant:
    """The requantizer of a threshold table whose multiplier is 2^m for every channel and which corrects no
    level: count = clip(raw, 0, levels), raw = v >> shift (floor), or with "half_even" its lowest bit
    cleared where the low ``shift`` bits of v are zero and ``exact_low`` (B's bits below m are zero);
    v = acc + offsets[c]."""
    offsets: tuple          # per channel, added to the accumulator in the heap's constant
    shift: int
    rounding: str
    exact_low: tuple        # per channel: B mod 2^m == 0
    levels: int

    def counts(self, acc):
        """Counts of accumulators ``acc`` (N, C), as the hardware computes them."""
        v = np.asarray(acc, dtype=np.int64) + np.asarray(self.offsets, dtype=np.int64)[None, :]
        q = v >> self.shift
        if self.rounding == "half_even":
            tie = ((v & ((1 << self.shift) - 1)) == 0) & np.asarray(self.exact_low)[None, :]
            q = q - ((q & 1) & tie)
        return np.clip(q, 0, self.levels)


def power_of_two_requant(owner, table):
    """The :class:`PowerOfTwoRequant` of ``table`` (a :class:`layers.thresholding.ThresholdTable`), or a
    ValueError saying why there is none. Level k of channel c starts at k 2^s + (k odd, half_even) - o_c:
    s from the thresholds' median step, each o_c from its first threshold; the form is kept only if its
    counts equal the table's on the whole accumulator range (both are step functions: equal at the range's
    start and either side of every step of both means equal everywhere)."""
    t = np.asarray(table.thresholds, dtype=np.int64)
    lo, hi = (int(v) for v in table.value_range)
    steps = np.diff(t, axis=1)
    if t.shape[1] > 1 and (steps > 0).any():
        guess = int(round(math.log2(max(1.0, float(np.median(steps[steps > 0]))))))
        shifts = [s for s in (guess, guess - 1, guess + 1) if s >= 0]
    else:
        shifts = list(range(0, 2))
    levels = t.shape[1]
    for shift in shifts:
        for rounding in ("half_even", "floor"):
            odd = 1 if rounding == "half_even" and shift > 0 else 0
            offsets = (1 << shift) + odd - t[:, 0]
            form = PowerOfTwoRequant(tuple(int(o) for o in offsets), shift, rounding if odd else "floor",
                                     (True,) * len(offsets), levels)
            if _equals_table(form, t, lo, hi):
                return form
    raise ValueError(f"{owner} pipeline=distributed: its {levels} thresholds per channel are not levels 2^s apart "
                     f"(a power-of-two scale before the quantizer); legal with distributed arithmetic: no "
                     f"activation, or such thresholds")


def _equals_table(form, t, lo, hi):
    line = np.arange(1, t.shape[1] + 1, dtype=np.int64)[None, :] << form.shift
    if form.rounding == "half_even":
        line = line + (np.arange(1, t.shape[1] + 1)[None, :] & 1)
    line = line - np.asarray(form.offsets, dtype=np.int64)[:, None]
    points = np.clip(np.concatenate([np.full((len(t), 1), lo), t - 1, t, line - 1, line], axis=1), lo, hi)
    truth = np.stack([np.searchsorted(row, p, side="right") for row, p in zip(t, points)])
    return bool(np.array_equal(form.counts(points.T).T, truth))


class ActivationLUTs(Elaboratable):
    """Channel c's activation from its heap's sum ``v`` (signed, ``width`` bits) to its output ``lane``, in a
    module of its own: each output bit is a function of its level bit, the level's bits above it (the clip)
    and half-even's tie (the low bits' zero test), so alone Yosys maps it to one LUT
    (:meth:`layers.distributed.DistributedPlan.activation_luts`; in the layer's module abc shared the clip
    between the bits: LUT4 -> LUT5). With ``tie_apart`` the tie comes in as a bit (``tie``, from
      :class:`layers.bit_heap.TieTest`) and v's bits below the level are not read: a zero test over more bits than the LUT has
    room for is levels of its own (the pruned jet tagger's MVAU_1, 8 low bits: two LUT levels, its ~185 MHz
    path while the delay model counted the tie as free)."""

    def __init__(self, act, c, width, output_dtype, act_val, tie_apart=False):
        self._act, self._c, self._output_dtype, self._act_val = act, c, output_dtype, act_val
        self._tie_apart = tie_apart
        self.v = Signal(width, name="v")
        self.tie = Signal(name="tie")
        self.lane = Signal(output_dtype.bitwidth(), name="lane")

    def elaborate(self, platform):
        m = Module()
        act, v = self._act, self.v.as_signed()
        s = act.shift
        q = v[s:].as_signed() if s < len(v) else Cat(v[-1], v[-1]).as_signed()     # -1 or 0
        if act.rounding == "half_even" and act.exact_low[self._c]:
            tie = self.tie if self._tie_apart else (v[:s] == 0) if s else C(1, 1)
            q = Cat(q[0] & ~tie, q[1:]).as_signed()
        count = Mux(q < 0, 0, Mux(q > act.levels, act.levels, q))
        m.d.comb += self.lane.eq(activation_lane(count[:max(1, act.levels.bit_length())], self._output_dtype,
                                                 self._act_val))
        return m

