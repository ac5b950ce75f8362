"""Distributed arithmetic: an MVAU with constant weights at II 1 (``pipeline="distributed"``, issue 43) as
one bit heap per output channel, with no multiplier and no stored weight.

At II 1 each output channel is a sum of constant multiples of the input elements. Every weight is written
in canonical signed digits (7 = 8 - 1: the fewest +-2^k), so channel c sums +-(x_i << k) over its weights'
digits, and nothing for a zero weight (a pruned network's 75 % of zeros cost nothing). Each term enters the
channel's bit heap as its bits alone, never sign-extended: an element is taken as unsigned (a signed one's
sign bit inverted: x = x_u - 2^(n-1)), a negative term as its inverted bits (-x_u = ~x_u - (2^n - 1)), and
every constant this leaves, with the activation's offset, folds into one constant per channel whose
one-bits join the heap. The heap's columns are counted six bits to a LUT6 (3 output bits, one LUT each)
level after level until two rows are left, which one carry chain adds, modulo 2^W (W: the channel's exact
range, so the wrap-around is exact).

The activation is the threshold table's exact requantizer (:func:`layers.requant.fit_requant`) where its
multiplier is one power of two for every channel with no corrected level (what a float scale of 2^-k
before a quantizer gives, as in hls4ml's jet tagger): z = 2^m acc + B, so v = acc + (B >> m) is the heap's
sum with the offset in its constant, the level is v >> (shift - m) with the half-even correction of its
lowest bit, clipped: a LUT after the carry chain. A table without such a form is refused (the MVAU's
other pipelines take it).

Register placement follows the clock (``clock_mhz``): :class:`DistributedPlan` walks each channel's steps
(the counter levels, the carry chain, the activation) with a delay model of the xc7z020 -1 (below) and puts
a register where the next step would not fit in the cycle. The layer reads its input word straight from
the stream (the FIFO in front is a register) and drives its output stream from its last step
combinationally (the FIFO behind registers it), so ``latency`` counts only the registers inside: a layer
whose whole heap fits in a cycle has latency 0. A stall pipeline: every register loads on ``advance`` =
``o.ready`` or no word at the output.

Cost: a LUT per counter output bit, a LUT per bit of the carry chain, the activation's LUTs; a flip-flop per
heap bit at each register (:meth:`DistributedPlan.resources`).
"""

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from amaranth.hdl import C, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from layers.datapath import register
from layers.dotproduct_unit import csd_terms as csd_digits     # one CSD recoding for both
from layers.op import ArrayMemo, Resources
from layers.thresholding import activation_lane

__all__ = ["DistributedPlan", "DistributedUnit", "distributed_plan", "check_distributed", "csd_digits",
           "STEP_NS", "counter_ns", "carry_chain_ns"]

# The delay model, xc7z020 -1: Yosys's xc7 cell library (techlibs/xilinx/cells_sim.v specify blocks) with
# boards/timing.py's routing model (0.5 ns a routed net, 0.3 ns setup and clock uncertainty), the model the
# Fmax estimate of `rtlgen build` uses.
NET_NS = 0.5
SETUP_NS = 0.3
CLOCK_TO_Q_NS = 0.303           # FDRE C -> Q
LUT6_NS = 0.642                 # LUT6, slowest pin (I0)
LUT2_NS = 0.238                 # an adder bit's LUT2
CARRY_IN_NS = 0.508             # CARRY4 S[0] -> CO[3]
CARRY_THROUGH_NS = 0.114        # CARRY4 CI -> CO[3], per further CARRY4
CARRY_OUT_NS = 0.313            # CARRY4 CI -> O[3]
LUT_INPUTS = 6
LUT3_NS = 0.407                 # LUT3, slowest pin
# The FIFO the stitcher puts behind the layer takes its word through its fall-through mux (a net, a LUT3)
NEXT_FIFO_NS = NET_NS + LUT3_NS


def counter_ns():
    """A level of counters: a net into a LUT6."""
    return NET_NS + LUT6_NS


def carry_chain_ns(width):
    """Two rows of ``width`` bits added by a carry chain: a net, the LUT2, the chain to its top bit."""
    return NET_NS + LUT2_NS + CARRY_IN_NS + CARRY_THROUGH_NS * max(0, math.ceil(width / 4) - 2) + CARRY_OUT_NS


def cycle_budget_ns(clock_mhz):
    """What logic may take between two registers: the period less clock-to-out, the last net and setup."""
    return 1000.0 / clock_mhz - CLOCK_TO_Q_NS - NET_NS - SETUP_NS


STEP_NS = {"counter": counter_ns(), "activation": NET_NS + LUT6_NS}


# --- the activation ------------------------------------------------------------------------------------


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


# --- the plan: terms, heaps, levels, registers ---------------------------------------------------------


@dataclass(frozen=True)
class Channel:
    """One output channel's heap: ``terms`` (element, shift, sign), the constant (mod 2^width), the width
    of its sum, and the heights of its columns level by level."""
    terms: tuple
    constant: int
    width: int
    levels: tuple           # per counter level, (the column heights before it, the groups per column)
    lo: int
    hi: int


def _level_plan(heights, target=None):
    """One level of counters over columns of ``heights``: per column the sizes of its groups, and the
    heights after it (a group of s bits leaves one bit in its column and carries into the next one or two).

    With ``target``, only as many groups as bring each column (its bits left, the carries it takes from
    the columns below) down to ``target`` (Dadda's rule): columns already low pass untouched. A group of 3
    costs 2 LUTs and one of 4 to 6 bits 3, so a column short of 1 or 2 bits counts 3 of them and one short
    of more counts 6. Without it, every six bits counted (a rest of 3 to 5 too; the last level, of columns
    of at most 3, counts 2 as well, so that each keeps one bit and takes one carry)."""
    groups, after = [], [0] * (len(heights) + 3)
    last = max(heights) <= 3
    for i, h in enumerate(heights):
        if target is None:
            sizes = [LUT_INPUTS] * (h // LUT_INPUTS)
            rest = h % LUT_INPUTS
            if rest >= 3 or (last and rest == 2):
                sizes.append(rest)
        else:
            sizes, avail, excess = [], h, h + after[i] - target
            while excess > 0 and avail >= 2:
                size = min(avail, 3 if excess <= 2 else LUT_INPUTS)
                sizes.append(size)
                avail, excess = avail - size, excess - (size - 1)
        after[i] += h - sum(sizes)
        for size in sizes:
            for j in range(size.bit_length()):
                after[i + j] += 1
        groups.append(tuple(sizes))
    return tuple(groups), after


@lru_cache(maxsize=None)
def _capacity(levels):
    """The tallest column a heap of any width takes to two bits in ``levels`` levels of counters (every
    column counted in full)."""
    if levels <= 0:
        return 2
    below, h = _capacity(levels - 1), _capacity(levels - 1)
    while max(_level_plan([h + 1] * 24)[1][:24]) <= below:
        h += 1
    return h


def _heap_levels(heights, width):
    """The counter levels taking columns of ``heights`` (within ``width``) to at most two bits each: as
    many levels as counting every column needs, each counting only what keeps the next levels able to
    finish (:func:`_capacity`)."""
    heights = list(heights[:width])
    full, levels = list(heights), 0
    while full and max(full) > 2:           # the depth: every column counted
        full, levels = _level_plan(full)[1][:width], levels + 1
    planned = []
    while heights and max(heights) > 2:
        left = levels - len(planned) - 1   # levels after this one
        groups, after = _level_plan(heights, _capacity(left) if left >= 0 else 2)
        planned.append((tuple(heights), groups))
        heights = after[:width]
        if len(planned) > levels + 8:
            raise RuntimeError("bit heap does not converge")     # a bug, never a user's input
    return tuple(planned), tuple(heights)


def _signed_width(lo, hi):
    return max(int(hi).bit_length(), (-int(lo) - 1).bit_length()) + 1


def _channel(weights_row, n, signed_input, offset):
    """The heap of one channel: weights (MW,), n-bit elements, the activation's offset."""
    x_lo, x_hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed_input else (0, (1 << n) - 1)
    w = np.asarray(weights_row, dtype=np.int64)
    lo = int(np.minimum(w * x_lo, w * x_hi).sum()) + offset
    hi = int(np.maximum(w * x_lo, w * x_hi).sum()) + offset
    width = _signed_width(min(lo, 0), max(hi, 0))
    x_off = (1 << (n - 1)) if signed_input else 0          # x = x_u - x_off
    terms, constant = [], offset
    for i, value in enumerate(w):
        for sign, k in csd_digits(value):
            terms.append((i, k, sign))
            # +x = x_u - x_off; -x = ~x_u - (2^n - 1) + x_off
            constant += (-x_off if sign > 0 else x_off - ((1 << n) - 1)) << k
    constant %= 1 << width
    heights = [0] * width
    for _, k, _ in terms:
        for b in range(k, min(k + n, width)):
            heights[b] += 1
    for b in range(width):
        heights[b] += constant >> b & 1
    levels, _ = _heap_levels(heights, width)
    return Channel(tuple(terms), constant, width, levels, lo, hi)


@dataclass(frozen=True)
class DistributedPlan:
    """Every channel's heap and where the registers go: ``registers[c]`` the step indices (into
    :meth:`steps`) after which channel c has a register, ``latency`` the registers on every channel's
    path (channels with fewer get theirs after their last step)."""
    channels: tuple
    activation: object          # PowerOfTwoRequant or None
    out_bits: int
    clock_mhz: float
    registers: tuple
    latency: int

    def steps(self, c):
        """Channel c's steps as (kind, ns): its counter levels, the carry chain, the activation."""
        ch = self.channels[c]
        steps = [("counter", counter_ns())] * len(ch.levels) + [("carry", carry_chain_ns(ch.width))]
        if self.activation is not None:
            steps.append(("activation", STEP_NS["activation"] * self.activation_luts(c)))
        return steps

    def activation_luts(self, c):
        """LUT levels of channel c's activation: an output bit is a function of its level bit and the
        level's bits above the output's (the clip): one LUT6 while they are at most five."""
        level_bits = max(1, self.activation.levels.bit_length())
        above = max(0, self.channels[c].width - self.activation.shift - level_bits)
        return 1 if above + 1 <= LUT_INPUTS else 2

    def critical_ns(self):
        """The longest delay between two registers by the model (the next FIFO's mux included)."""
        worst = 0.0
        for c in range(len(self.channels)):
            for start, end in _segments(len(self.steps(c)), self.registers[c]):
                ns = sum(t for _, t in self.steps(c)[start:end]) + (NEXT_FIFO_NS if end == len(self.steps(c)) else 0)
                worst = max(worst, ns)
        return worst + CLOCK_TO_Q_NS + NET_NS + SETUP_NS

    def resources(self):
        """LUTs: a LUT per counter output bit, per carry-chain bit, per output bit of the activation; FFs:
        every heap bit at each register, the outputs padded to the latency, the valid bits."""
        lut = ff = 0
        for c, ch in enumerate(self.channels):
            heights = []
            for before, groups in ch.levels:
                lut += sum(size.bit_length() for sizes in groups for size in sizes)
                heights.append(sum(before))
            lut += ch.width
            if self.activation is not None:
                lut += self.out_bits + 1 + self.activation.shift // LUT_INPUTS
            bits_after = heights[1:] + [2 * ch.width, ch.width]     # what a register after each step holds
            for r in self.registers[c]:
                ff += bits_after[r] if r < len(bits_after) else self.out_bits
            ff += (self.latency - len(self.registers[c])) * self.out_bits
        return Resources(lut=int(lut) + 2, ff=int(ff) + self.latency)


def _segments(n_steps, registers):
    """(start, end) step ranges between registers."""
    bounds = [0] + [r + 1 for r in registers] + [n_steps]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a or a == 0]


def _place_registers(steps, budget):
    """Step indices after which a register goes: greedily, as late as the budget allows; the last segment
    also carries the next FIFO's mux."""
    registers, used = [], 0.0
    for k, (_, ns) in enumerate(steps):
        last = k == len(steps) - 1
        need = ns + (NEXT_FIFO_NS if last else 0.0)
        if used > 0 and used + need > budget:
            registers.append(k - 1)
            used = 0.0
        used += ns
    if used + NEXT_FIFO_NS > budget and steps and used > steps[-1][1]:
        pass        # the last step alone is over the budget: nothing a register before it would cure
    return registers


_PLANS = ArrayMemo()


def distributed_plan(spec):
    """The :class:`DistributedPlan` of an MVAU spec with ``pipeline="distributed"`` (memoized on its
    weights, datatypes, activation and clock)."""
    key = (spec.input_dtype.name, spec.output_dtype.name, float(spec.clock_mhz),
           None if spec.thresholds is None else np.asarray(spec.thresholds).tobytes())
    return _PLANS.get(spec.weights, key, lambda: _make_plan(spec))


def _make_plan(spec):
    activation = None if spec.table is None else power_of_two_requant(spec.owner, spec.table)
    w = spec.weight_matrix().astype(np.int64)               # (channels, elements)
    n, signed_input = spec.input_dtype.bitwidth(), spec.input_dtype.signed()
    offsets = activation.offsets if activation is not None else (0,) * w.shape[0]
    channels = tuple(_channel(w[c], n, signed_input, offsets[c]) for c in range(w.shape[0]))
    budget = cycle_budget_ns(spec.clock_mhz)
    out_bits = spec.output_dtype.bitwidth()
    plan = DistributedPlan(channels, activation, out_bits, float(spec.clock_mhz), (), 0)
    registers = tuple(tuple(_place_registers(plan.steps(c), budget)) for c in range(len(channels)))
    latency = max((len(r) for r in registers), default=0)
    return DistributedPlan(channels, activation, out_bits, float(spec.clock_mhz), registers, latency)


def check_distributed(spec):
    """ValueError unless ``spec`` (an MVAU) can be built by distributed arithmetic: constant integer weights
    embedded at SF = NF = 1 (one vector a cycle), integer inputs, an activation of
    :func:`power_of_two_requant`'s form or none."""
    owner = spec.owner
    if spec.sf != 1 or spec.nf != 1:
        raise ValueError(f"{owner} pipeline=distributed needs every weight at once: SIMD = MW and PE = MH, not "
                         f"SIMD {spec.simd} of {spec.in_elems} and PE {spec.pe} of {spec.out_channels}")
    if spec.mem_mode != "internal_embedded" or spec.weights is None or spec.runtime_writeable_weights:
        raise ValueError(f"{owner} pipeline=distributed needs constant weights: mem_mode=internal_embedded, "
                         f"not {spec.mem_mode}" + (" with run-time writable weights" if spec.runtime_writeable_weights
                                                   else ""))
    if spec.res_type != "lut":
        raise ValueError(f"{owner} pipeline=distributed builds no multiplier: resType must be lut, not "
                         f"{spec.res_type}")
    for attr in ("input_dtype", "weight_dtype"):
        dtype = getattr(spec, attr)
        if not dtype.is_integer() or dtype.name == "BIPOLAR" or spec.xnor:
            raise ValueError(f"{owner} pipeline=distributed needs integer {attr} (INTn, UINTn), not {dtype.name}")
    if spec.output_dtype.name == "BIPOLAR":
        raise ValueError(f"{owner} pipeline=distributed: BIPOLAR outputs are not built; legal: INTn, UINTn")
    if spec.table is not None and spec.table.thresholds.shape[0] == 1 and spec.out_channels > 1:
        pass        # one row for every channel: power_of_two_requant broadcasts its offsets
    distributed_plan(spec)


# --- the hardware --------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def _count_tables(n):
    """Per output bit j of the count of n bits, its truth table: bit i set when bit j of popcount(i) is."""
    return tuple(sum(1 << i for i in range(1 << n) if bin(i).count("1") >> j & 1) for j in range(n.bit_length()))


def _adder_counter(m, bits, name):
    """The number of ones among up to 6 bits as full and half adders (XOR, majority): plain logic that
    abc maps to LUTs however it likes, where :func:`_counter`'s constant tables cost Yosys a 64-way mux
    each before it maps them."""
    columns, j, k = [list(bits)], 0, 0
    while j < len(columns):
        col = columns[j]
        while len(col) > 1:
            if len(columns) == j + 1:
                columns.append([])
            if len(col) >= 3:
                a, b, c = col.pop(0), col.pop(0), col.pop(0)
                total, carry = a ^ b ^ c, (a & b) | (a & c) | (b & c)
            else:
                a, b = col.pop(0), col.pop(0)
                total, carry = a ^ b, a & b
            col.append(_wire(m, total, f"{name}_s{k}"))
            columns[j + 1].append(_wire(m, carry, f"{name}_c{k}"))
            k += 1
        j += 1
    return [columns[j][0] if j < len(columns) and columns[j] else C(0, 1) for j in range(len(bits).bit_length())]


def _counter(m, bits, name):
    """The number of ones among up to 6 bits, least significant first: one LUT6 per output bit, each its
    truth table read at the bits (a ``$shiftx`` of a constant, as :mod:`layers.popcount` builds them); the
    bits on one wire, so that the Verilog names them once, not once per output bit."""
    index = _wire(m, Cat(*bits), name)
    return [Const(table, 1 << len(bits)).bit_select(index, 1) for table in _count_tables(len(bits))]


class DistributedUnit(wiring.Component):
    """An MVAU of ``pipeline="distributed"``: one bit heap per output channel (see the module docstring).

    Members
    -------
    i : In(stream.Signature(spec.in_width))
    o : Out(stream.Signature(spec.out_width))

    One vector a cycle. ``i.ready`` is ``o.ready`` or no word at the output (combinational: the FIFOs the
    stitcher puts on both sides break the path); with latency 0, ``o`` is ``i`` through the heaps."""

    def __init__(self, spec):
        self._spec = spec
        self._plan = distributed_plan(spec)
        super().__init__({"i": In(stream.Signature(spec.in_width)), "o": Out(stream.Signature(spec.out_width))})

    @property
    def spec(self):
        return self._spec

    def elaborate(self, platform):
        spec, plan = self._spec, self._plan
        m = Module()
        valid = self.i.valid
        stages = []
        for k in range(plan.latency):       # the valid bits, one per register
            stages.append(Signal(name=f"v{k}"))
        advance = Signal()
        out_valid = stages[-1] if stages else valid
        m.d.comb += [advance.eq(self.o.ready | ~out_valid), self.i.ready.eq(advance if stages else self.o.ready)]
        if not stages:      # all combinational: a register so that the component keeps its clock and reset
            taken = Signal(name="taken")
            m.d.sync += taken.eq(self.i.valid & self.o.ready)
        prev = valid
        for k, v in enumerate(stages):
            with m.If(advance):
                m.d.sync += v.eq(prev)
            prev = v
        n = spec.input_dtype.bitwidth()
        x = self.i.payload
        x_u = x ^ C(sum(1 << (e * n + n - 1) for e in range(spec.mw)), len(x)) if spec.input_dtype.signed() else x
        x_u = _wire(m, x_u, "x_u")
        x_n = _wire(m, ~x_u, "x_n")     # the inverted bits of negative digits, inverted once
        outs = [self._channel(m, advance, plan, c, x_u, x_n, n) for c in range(len(plan.channels))]
        m.d.comb += [self.o.valid.eq(out_valid), self.o.payload.eq(Cat(*outs))]
        return m

    def _channel(self, m, advance, plan, c, x_u, x_n, n):
        ch, spec = plan.channels[c], self._spec
        registers, step = set(plan.registers[c]), 0
        columns = [[] for _ in range(ch.width)]
        for i, k, sign in ch.terms:
            bits = (x_u if sign > 0 else x_n)[i * n:(i + 1) * n]
            for b in range(n):
                if k + b < ch.width:
                    columns[k + b].append(bits[b])
        for b in range(ch.width):
            if ch.constant >> b & 1:
                columns[b].append(C(1, 1))
        for level, (heights, groups) in enumerate(ch.levels):
            out = [[] for _ in range(ch.width + 3)]
            for col, sizes in enumerate(groups):
                bits, start = columns[col], 0
                for g, size in enumerate(sizes):
                    for j, bit in enumerate(COUNTER(m, bits[start:start + size], f"c{c}_l{level}_{col}_{g}")):
                        out[col + j].append(bit)
                    start += size
                out[col].extend(bits[start:])
            columns = out[:ch.width]
            if step in registers:
                columns = self._register_columns(m, advance, columns, f"c{c}_l{level}")
            step += 1
        rows = [Cat(*[col[r] if r < len(col) else C(0, 1) for col in columns]) for r in range(2)]
        total = _wire(m, (rows[0] + rows[1])[:ch.width], f"c{c}_sum")
        if step in registers:
            total = register(m, advance, total, name=f"c{c}_sum_r")
        step += 1
        v = total.as_signed()
        ob = spec.output_dtype.bitwidth()
        if plan.activation is None:
            lane = Signal(ob, name=f"c{c}_out")
            m.d.comb += lane.eq(v)
        else:
            lane = self._activation(m, plan.activation, c, v, ob)
            if step in registers:
                lane = register(m, advance, lane, name=f"c{c}_act_r")
            step += 1
        for k in range(plan.latency - len(registers)):      # the channels with fewer registers wait
            lane = register(m, advance, lane, name=f"c{c}_pad{k}")
        return lane

    @staticmethod
    def _register_columns(m, advance, columns, name):
        regs = []
        for b, col in enumerate(columns):
            if not col:
                regs.append([])
                continue
            r = register(m, advance, Cat(*col), name=f"{name}_{b}")
            regs.append([r[j] for j in range(len(col))])
        return regs

    def _activation(self, m, act, c, v, ob):
        spec = self._spec
        s = act.shift
        q = v[s:].as_signed() if s < len(v) else Cat(v[-1], v[-1]).as_signed()     # -1 or 0
        if act.rounding == "half_even" and act.exact_low[c]:
            tie = (v[:s] == 0) if s else C(1, 1)
            q = Cat(q[0] & ~tie, q[1:]).as_signed()
        count = Mux(q < 0, 0, Mux(q > act.levels, act.levels, q))
        lane = Signal(ob, name=f"c{c}_out")
        m.d.comb += lane.eq(activation_lane(count[:max(1, act.levels.bit_length())], spec.output_dtype, spec.act_val))
        return lane


COUNTER = _adder_counter


def _wire(m, value, name):
    sig = Signal(value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig
