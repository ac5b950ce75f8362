"""Distributed arithmetic: an MVAU with constant weights at II 1 (``pipeline="distributed"``, issue 43) as
one bit heap per output channel, with no multiplier and no stored weight.

At II 1 each output channel is a sum of constant multiples of the input elements. Every weight is written
in canonical signed digits (7 = 8 - 1: the fewest +-2^k), so channel c sums +-(x_i << k) over its weights'
digits, and nothing for a zero weight (a pruned network's 75 % of zeros cost nothing). Each term enters the
channel's bit heap as its bits alone, never sign-extended: an element is taken as unsigned (a signed one's
sign bit inverted: x = x_u - 2^(n-1)), a negative term as its inverted bits (-x_u = ~x_u - (2^n - 1)), and
every constant this leaves, with the activation's offset, folds into one constant per channel whose
one-bits join the heap (the heaps, the shared pairs and the counter levels: :mod:`layers.bit_heap`). The heap's columns are counted six bits to a LUT6 (3 output bits, one LUT each)
level after level until three rows are left (or two), which one carry chain adds: a ternary adder, each
bit's S a LUT6 taking its column's three bits and the three below (their parity and the majority below),
its DI that majority, modulo 2^W (W:
the channel's exact range, so the wrap-around is exact). Where an element has at most six bits, a channel
may instead take one term per weight: the element times the weight's odd part, each bit of that product a
LUT of the element's bits, computed once for every channel that needs it (a LUT level more, a heap about
2.5 times lower: what a layer of many digits per weight needs to drop a register); or only the layer's
chosen products (those whose saved heap bits over the channels pay for their LUTs) and digits elsewhere.

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
``o.ready`` or no word at the output; chained, ``o.ready`` alone (a layer takes a word every cycle its output
is ready).

Chained (the latency objective, :func:`rtlgen.passes.latency.chain_layers`): two such layers need no FIFO
between them, and the cycle at the boundary is shared: the producer's last steps and the consumer's first
ones between the same two registers. ``input_ns`` is the logic already on the input word's path in its
cycle (the producer's :attr:`DistributedPlan.output_ns`; 0 where a register drives it), and
``output_fifo=False`` says a layer, not a FIFO's mux, takes the output. The consumer's registers are placed
from ``input_ns`` on; where its first step cannot follow in that cycle it registers its input word
(``input_register``, the register the FIFO was). The ready of a chain is one signal, the last FIFO's.

Each channel is built the way (digits or products, three rows or two) that needs the fewest registers,
then, among the ways within the layer's latency (its slowest channel's), the one of the fewest LUTs.

Cost: a LUT per counter output bit, a LUT per bit of the carry chain (two where the ternary adder's bit
also needs a majority for the chain's DI), a LUT per product bit (once a layer), the activation's LUTs
(and the tie test's beside the chain); a
flip-flop per heap bit at each register, the bits channels share (elements', products', pairs' bits no counter
took yet) once (:meth:`DistributedPlan.resources`).
"""

from dataclasses import dataclass, replace

import numpy as np
from amaranth.hdl import C, Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from layers.bit_heap import LUT_INPUTS, ROWS, CounterLevel, PairAdder, ProductLUTs, RowAdder, TieTest, channel_heap, tie_luts, choose_pairs, chosen_products, csd_digits, product_width
from layers.datapath import register
from layers.delay_model import (CLOCK_TO_Q_NS, LUT6_NS, LUT_NS, NET_NS, NEXT_FIFO_NS, SETUP_NS,
                                carry_chain_ns, counter_ns, cycle_budget_ns, place_registers, tie_ns)
from layers.op import ArrayMemo, Resources
from layers.requant_shift import ActivationLUTs, PowerOfTwoRequant, power_of_two_requant

__all__ = ["DistributedPlan", "DistributedUnit", "distributed_plan", "check_distributed", "csd_digits", "PowerOfTwoRequant",
           "power_of_two_requant",
           "STEP_NS", "counter_ns", "carry_chain_ns", "cycle_budget_ns", "NEXT_FIFO_NS"]

def _largest(groups):
    return max((size for sizes in groups for size in sizes), default=1)


STEP_NS = {"counter": counter_ns()}


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
    n: int = 0                  # the elements' bits (a product's LUT has n inputs)
    pairs: tuple = ()           # the shared pairs (:class:`Pair`) terms at or above MW take
    input_ns: float = 0.0       # logic on the input word's path before the layer, in its cycle (chained)
    end_ns: float = NEXT_FIFO_NS    # logic after the layer in its last cycle (the next FIFO's mux; 0 chained)
    input_register: bool = False    # the input word registered first (counted in ``latency``)
    in_bits: int = 0            # the input word's bits (what ``input_register`` holds)

    @property
    def product_ns(self):
        return NET_NS + LUT_NS[min(LUT_INPUTS, max(1, self.n))]

    def products(self):
        """The (element, odd) products the channels share: odd * x_u, one LUT a bit (but bit 0, x_u's)."""
        return sorted({(i, odd) for ch in self.channels for i, _, _, odd in ch.terms if odd > 1})

    def used_pairs(self):
        """Indices of the shared pairs some channel takes (each one adder)."""
        return sorted(set().union(*(ch.pairs for ch in self.channels)))

    def steps(self, c):
        """Channel c's steps as (kind, ns): its products or shared pairs' adders, its counter levels, the
        carry chain, the activation."""
        ch = self.channels[c]
        before = ([self.product_ns] if ch.products else []) + \
            ([carry_chain_ns(max(self.pairs[p].width for p in ch.pairs), 2)] if ch.pairs else [])
        # the products' LUTs and the pairs' adders side by side: one step
        steps = [("pair" if ch.pairs else "product", max(before))] if before else []
        steps += [("counter", counter_ns(_largest(groups))) for _, groups in ch.levels]
        carry = carry_chain_ns(ch.width, ch.rows)
        if self.tie_apart(c):       # the tie beside the chain, from its operands: ready with it or later
            carry = max(carry, tie_ns(self.activation.shift, ch.rows))
        steps.append(("carry", carry))
        if self.activation is not None:
            steps.append(("activation", self.activation_ns(c)))
        return steps

    def tie_apart(self, c):
        """Whether channel c's half-even tie (the sum's bits below the level all zero) is a test of its own
        beside the carry chain (:class:`layers.requant_shift.TieTest`), one bit into the activation: where
        with the level bit and the clip's bits it needs more than one LUT's inputs."""
        return bool(self._tie_bits(c)) and 1 + self._above(c) + self._tie_bits(c) > LUT_INPUTS

    def _tie_bits(self, c):
        act = self.activation       # (a shift past the sum's top: the level is 0 or -1, clipped to 0, no tie)
        return act.shift if act is not None and act.rounding == "half_even" and act.exact_low[c] and \
            act.shift < self.channels[c].width else 0

    def _above(self, c):
        level_bits = max(1, self.activation.levels.bit_length())
        return max(0, self.channels[c].width - self.activation.shift - level_bits)

    def activation_luts(self, c):
        """LUT levels of channel c's activation: an output bit is a function of its level bit, the level's
        bits above the output's (the clip) and, for the lowest, half-even's tie (the bits below the level
        zero: those bits, or the one bit of the tie test beside the chain): one LUT while at most six."""
        return 1 if self._activation_inputs(c) <= LUT_INPUTS else 2

    def activation_ns(self, c):
        """Channel c's activation by the delay model: a net and the LUT of its inputs, once or twice."""
        inputs = self._activation_inputs(c)
        if inputs <= LUT_INPUTS:
            return NET_NS + LUT_NS[max(1, inputs)]
        return 2 * (NET_NS + LUT6_NS)

    def _activation_inputs(self, c):
        return 1 + self._above(c) + (1 if self.tie_apart(c) else self._tie_bits(c))

    def critical_ns(self):
        """The longest delay between two registers by the model (the next FIFO's mux included, or a chained
        producer's tail)."""
        worst = 0.0
        for c in range(len(self.channels)):
            for ns in self._segment_ns(c):
                worst = max(worst, ns)
        return worst + CLOCK_TO_Q_NS + NET_NS + SETUP_NS

    def _segment_ns(self, c):
        """Channel c's logic between two registers, segment by segment: the first from the input word (after
        the chained producer's tail, unless the input is registered), the last into what takes the output
        (none where the channel's output waits in padding registers)."""
        steps = self.steps(c)
        bounds = [0] + [r + 1 for r in self.registers[c]] + [len(steps)]
        padded = len(self.registers[c]) + self.input_register < self.latency
        for start, end in zip(bounds, bounds[1:]):
            ns = sum(t for _, t in steps[start:end])
            if start == 0 and not self.input_register:
                ns += self.input_ns
            if end == len(steps) and start == bounds[-2] and not padded:
                ns += self.end_ns
            yield ns

    @property
    def output_ns(self):
        """The logic on the output's path in its last cycle (after the last register): what a chained
        consumer takes as its ``input_ns``."""
        tails = [0.0]
        for c in range(len(self.channels)):
            if len(self.registers[c]) + self.input_register < self.latency:
                continue            # its output waits in a padding register
            *_, last = self._segment_ns(c)
            tails.append(last - self.end_ns)
        return max(tails)

    def resources(self):
        """LUTs: a LUT per product bit (bit 0 is the element's), per counter output bit, per carry-chain bit
        (and the ternary adder's majorities), per output bit of the activation (and the tie test's, or an
        estimate of the tie inside the activation's LUTs); FFs: what each register holds
        (:meth:`held`), the outputs padded to the latency, the valid bits. A register holds a channel's
        counter outputs as its own, and the elements', products' and pairs' bits no counter took yet as bits
        the channels share: Yosys merges their copies (each counted once)."""
        lut = sum(product_width(odd, self.n) - 1 for _, odd in self.products())
        lut += sum(self.pairs[p].luts for p in self.used_pairs())
        ff, shared = 0, set()
        for c, ch in enumerate(self.channels):
            for _, groups in ch.levels:
                lut += sum(size.bit_length() for sizes in groups for size in sizes)
            lut += ch.width + (_parity_luts(ch.final) if ch.rows == 3 else 0)
            if self.activation is not None:
                lut += self.out_bits + (tie_luts(self.activation.shift) if self.tie_apart(c)
                                        else 1 + self.activation.shift // LUT_INPUTS)
            held = self.held(c)
            for k, r in enumerate(self.registers[c]):     # a source bit's k-th register: the same in all
                own, sources = held[r]
                ff += own
                shared |= {(k, bit) for bit in sources}
            ff += (self.latency - self.input_register - len(self.registers[c])) * self.out_bits
        ff += self.input_register * self.in_bits + len(shared)
        return Resources(lut=int(lut) + 2, ff=int(ff) + self.latency)

    def held(self, c):
        """Per step of channel c (:meth:`steps`), what a register after it holds: (its own bits, the set of
        source bits (source, odd part, bit) it holds as they came), following the hardware's columns: each
        level's counters take their bits from the front of a column, leftovers stay in front, counts follow."""
        ch = self.channels[c]
        columns = [[] for _ in range(ch.width)]
        for src, k, _, odd in ch.terms:
            width = self.pairs[src - ch.mw].width if src >= ch.mw else product_width(odd, self.n)
            for b in range(max(0, min(width, ch.width - k))):
                columns[k + b].append((src, odd, b))
        for b in range(ch.width):
            if ch.constant >> b & 1:
                columns[b].append(None)         # a constant: never registered

        def holding(cols):
            return (sum(bit == "own" for col in cols for bit in col),
                    {bit for col in cols for bit in col if bit not in (None, "own")})
        held = [holding(columns)] if ch.products or ch.pairs else []
        for _, groups in ch.levels:
            out, counts = [[] for _ in range(ch.width + 3)], []
            for col, sizes in enumerate(groups):
                out[col].extend(columns[col][sum(sizes):])
                counts += [col + j for size in sizes for j in range(size.bit_length())]
            for col in counts:
                out[col].append("own")
            columns = out[:ch.width]
            held.append(holding(columns))
        held.append((ch.width, set()))
        if self.tie_apart(c):
            held[-1] = (ch.width - self.activation.shift + 1, set())     # the level's bits and the tie
        if self.activation is not None:
            held.append((self.out_bits, set()))
        return held


def _parity_luts(final):
    """The ternary adder's LUTs besides one a bit (:class:`layers.bit_heap.TernaryFront`): the majorities
    the chain's DI takes (:class:`layers.bit_heap.TernaryMajority`), one for each column of two bits or
    more below the top."""
    return sum(1 for h in final[:-1] if h >= 2)


def _segments(n_steps, registers):
    """(start, end) step ranges between registers."""
    bounds = [0] + [r + 1 for r in registers] + [n_steps]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a or a == 0]


_PLANS = ArrayMemo()
_PAIRS = ArrayMemo()          # the shared pairs depend on the weights alone: one search for every plan of a layer


def distributed_plan(spec):
    """The :class:`DistributedPlan` of an MVAU spec with ``pipeline="distributed"`` (memoized on its
    weights, datatypes, activation and clock)."""
    key = (spec.input_dtype.name, spec.output_dtype.name, float(spec.clock_mhz),
           None if spec.thresholds is None else np.asarray(spec.thresholds).tobytes(),
           float(spec.input_ns), bool(spec.output_fifo))
    return _PLANS.get(spec.weights, key, lambda: _make_plan(spec))


def _make_plan(spec):
    """The plan as the layer's own registers make it (the input from a register); chained (``input_ns``
    > 0), also with the cycle shared with the producer, kept where it needs fewer registers in all."""
    end_ns = NEXT_FIFO_NS if spec.output_fifo else 0.0
    registered = _plan_from(spec, 0.0, end_ns)
    if not spec.input_ns:
        return registered
    registered = replace(registered, input_ns=float(spec.input_ns), input_register=True,
                         latency=registered.latency + 1)
    shared = _plan_from(spec, float(spec.input_ns), end_ns)
    if shared is None:
        return registered

    def cost(plan):
        r = plan.resources()
        return plan.latency, r.lut + r.ff
    return min((shared, registered), key=cost)


def _plan_from(spec, input_ns, end_ns):
    """The plan with ``input_ns`` on the input's path and ``end_ns`` after the output; None where some
    channel cannot start in the input's cycle."""
    activation = None if spec.table is None else power_of_two_requant(spec.owner, spec.table)
    w = spec.weight_matrix().astype(np.int64)               # (channels, elements)
    n, signed_input = spec.input_dtype.bitwidth(), spec.input_dtype.signed()
    offsets = activation.offsets if activation is not None else (0,) * w.shape[0]
    budget = cycle_budget_ns(spec.clock_mhz)
    out_bits = spec.output_dtype.bitwidth()
    clock = float(spec.clock_mhz)
    pairs = _PAIRS.get(spec.weights, (n, signed_input), lambda: choose_pairs(w, n, signed_input)) if _SHARE else ()
    chosen = chosen_products(w, n) if n <= LUT_INPUTS else frozenset()
    # per channel, each way to build it (three rows or two at the end; digits, digits with the shared
    # pairs, or products where an element's product is a LUT) with the registers it needs
    options = []
    for c in range(w.shape[0]):
        found = []
        for form in _forms(n):
            products = chosen if form == "chosen" else form
            for shared in ((False, True) if pairs and products is not True else (False,)):
                for rows in _ROW_CHOICES:
                    ch = channel_heap(w[c], n, signed_input, offsets[c], rows, products, pairs if shared else ())
                    if shared and not ch.pairs:
                        continue
                    plan = DistributedPlan((ch,), activation, out_bits, clock, ((),), 0, n, pairs)
                    regs = tuple(place_registers(plan.steps(0), budget, input_ns, end_ns))
                    if regs[:1] == (-1,):
                        continue        # cannot start in the input's cycle
                    plan = DistributedPlan((ch,), activation, out_bits, clock, (regs,), len(regs), n, pairs)
                    found.append((ch, regs, plan.resources().lut))
        if not found:
            return None
        options.append(found)
    # the layer's latency: its slowest channel's fewest registers; each channel then built the cheapest way
    # within it: a product already made for another channel costs nothing more, a pair's adder is shared
    # by the channels holding it
    latency = max((min(len(r) for _, r, _ in found) for found in options), default=0)
    holders = [0] * len(pairs)
    for found in options:
        for p in set().union(*(o[0].pairs for o in found)):
            holders[p] += 1
    made, channels, registers = set(), [], []
    for found in options:
        def cost(option):
            ch = option[0]
            owned = {(i, odd) for i, _, _, odd in ch.terms if odd > 1} & made
            return (option[2] - sum(product_width(odd, n) - 1 for _, odd in owned)
                    - sum(pairs[p].luts * (1 - 1 / holders[p]) for p in ch.pairs))
        ch, regs, _ = min((o for o in found if len(o[1]) <= latency), key=cost)
        made |= {(i, odd) for i, _, _, odd in ch.terms if odd > 1}
        channels.append(ch)
        registers.append(regs)
    return DistributedPlan(tuple(channels), activation, out_bits, clock, tuple(registers), latency, n, pairs,
                           input_ns, end_ns, in_bits=spec.in_width)


_SHARE = True                   # look for shared pairs (common subexpressions) at all
_ROW_CHOICES = (ROWS, 2)        # the rows a heap's carry chain may add: three (fewer LUTs, a level less), two (a LUT2)


def _forms(n):
    """How a channel's terms may be made: canonical signed digits of the elements (False), or, where an
    element's product by a weight's odd part is a LUT a bit (n <= 6 bits), every weight a product (True) or
    the layer's chosen products (:func:`layers.bit_heap.chosen_products`: those whose saved heap bits pay
    for their LUTs) and digits for the rest ("chosen")."""
    return (False, True, "chosen") if n <= LUT_INPUTS else (False,)


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


class DistributedUnit(wiring.Component):
    """An MVAU of ``pipeline="distributed"``: one bit heap per output channel (see the module docstring).

    Members
    -------
    i : In(stream.Signature(spec.in_width))
    o : Out(stream.Signature(spec.out_width))

    One vector a cycle. ``i.ready`` is ``o.ready`` or no word at the output (combinational: the FIFOs the
    stitcher puts on both sides break the path); chained (``input_ns`` > 0 or ``output_fifo=False``), ``o.ready``
    alone: a chain's ready is the FIFO's behind it, a LUT at most (its first layer's) before every register's
    enable. With latency 0, ``o`` is ``i`` through the heaps."""

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
        if spec.input_ns or not spec.output_fifo:
            # chained: every register loads when the output is ready (no bubble taken out at a stalled
            # output), so a chain's ready is one wire from the FIFO behind it, not a LUT a layer
            m.d.comb += [advance.eq(self.o.ready), self.i.ready.eq(self.o.ready)]
        else:
            m.d.comb += [advance.eq(self.o.ready | ~out_valid), self.i.ready.eq(advance if stages else self.o.ready)]
        if not stages:      # all combinational: a register so that the component keeps its clock and reset
            taken = Signal(name="taken")
            m.d.sync += taken.eq(self.i.valid & self.o.ready)
        prev = valid
        for k, v in enumerate(stages):
            with m.If(advance):
                m.d.sync += v.eq(prev)
            prev = v
        n, signed = spec.input_dtype.bitwidth(), spec.input_dtype.signed()
        x = register(m, advance, self.i.payload, name="x_r") if plan.input_register else self.i.payload
        # (element, odd) -> its bits as (signal, inverted): a signed element's sign bit, an offset pair's top
        # bit are inverted by the LUT that takes them (a counter's, in its module), never by an inverter
        sources = {}
        for e in range(spec.mw):
            sources[e, 1] = [(x[e * n + b], signed and b == n - 1) for b in range(n)]
        for p in plan.used_pairs():
            pair = plan.pairs[p]
            adder = m.submodules[f"pair{p}"] = PairAdder(pair, n, signed)     # its carry chain whole
            m.d.comb += [adder.a.eq(x[pair.i * n:(pair.i + 1) * n]), adder.b.eq(x[pair.j * n:(pair.j + 1) * n])]
            sources[spec.mw + p, 1] = [(adder.t[b], bool(pair.offset) and b == pair.width - 1) for b in range(pair.width)]
        for e, odd in plan.products():      # each product a module: one LUT a bit (its inputs the element's)
            product = m.submodules[f"p{e}_{odd}"] = ProductLUTs(odd, n, signed)
            m.d.comb += product.x.eq(x[e * n:(e + 1) * n])
            sources[e, odd] = [(product.p[b], False) for b in range(len(product.p))]
        outs = [self._build_channel(m, advance, plan, c, sources) for c in range(len(plan.channels))]
        m.d.comb += [self.o.valid.eq(out_valid), self.o.payload.eq(Cat(*outs))]
        return m

    def _build_channel(self, m, advance, plan, c, sources):
        ch = plan.channels[c]
        registers, step = set(plan.registers[c]), 0
        # a heap bit: (signal, inverted), inverted where the LUT that takes it inverts it (a negative term)
        columns = [[] for _ in range(ch.width)]
        for i, k, sign, odd in ch.terms:
            for b, (bit, inverted) in enumerate(sources[i, odd]):
                if k + b < ch.width:
                    columns[k + b].append((bit, inverted != (sign < 0)))
        for b in range(ch.width):
            if ch.constant >> b & 1:
                columns[b].append((C(1, 1), False))
        if ch.products or ch.pairs:     # the products' LUTs, the pairs' adders: a step of their own
            if step in registers:
                columns = self._register_columns(m, advance, columns, f"c{c}_p")
            step += 1
        for level, (heights, groups) in enumerate(ch.levels):
            out = [[] for _ in range(ch.width + 3)]
            counted = []            # (column, the group's bits)
            for col, sizes in enumerate(groups):
                bits, start = columns[col], 0
                for size in sizes:
                    counted.append((col, bits[start:start + size]))
                    start += size
                out[col].extend(bits[start:])
            if counted:
                unit = CounterLevel([group for _, group in counted])
                m.submodules[f"c{c}_l{level}"] = unit
                m.d.comb += unit.i.eq(Cat(*(bit for _, group in counted for bit, _ in group
                                                if not isinstance(bit, Const))))
                for (col, _), outs in zip(counted, unit.counts()):
                    for j, bit in enumerate(outs):
                        out[col + j].append((bit, False))
            columns = out[:ch.width]
            if step in registers:
                columns = self._register_columns(m, advance, columns, f"c{c}_l{level}")
            step += 1
        adder = m.submodules[f"c{c}_add"] = RowAdder(columns, ch.width, ch.rows)      # its LUTs one level
        m.d.comb += adder.i.eq(Cat(*adder.sources))
        total, tie = adder.s, None
        if plan.tie_apart(c):       # half-even's tie beside the chain, from its operands
            shift = plan.activation.shift
            test = m.submodules[f"c{c}_tie"] = TieTest(adder.columns, shift, ch.rows)
            m.d.comb += test.i.eq(adder.i) if ch.rows == 2 else [test.s.eq(adder.front_s), test.di.eq(adder.di)]
            tie = test.zero
        if step in registers:
            if tie is None:
                total = register(m, advance, total, name=f"c{c}_sum_r")
            else:           # the level's bits and the tie
                held = register(m, advance, Cat(total[plan.activation.shift:], tie), name=f"c{c}_sum_r")
                total, tie = Cat(C(0, plan.activation.shift), held[:-1]), held[-1]
        step += 1
        v = total.as_signed()
        ob = self._spec.output_dtype.bitwidth()
        if plan.activation is None:
            lane = Signal(ob, name=f"c{c}_out")
            m.d.comb += lane.eq(v)
        else:
            unit = m.submodules[f"c{c}_act"] = ActivationLUTs(plan.activation, c, len(total), self._spec.output_dtype,
                                                                self._spec.act_val, tie is not None)  # one LUT level
            m.d.comb += unit.v.eq(total)
            if tie is not None:
                m.d.comb += unit.tie.eq(tie)
            lane = unit.lane
            if step in registers:
                lane = register(m, advance, lane, name=f"c{c}_act_r")
            step += 1
        for k in range(plan.latency - plan.input_register - len(registers)):    # fewer registers: they wait
            lane = register(m, advance, lane, name=f"c{c}_pad{k}")
        return lane

    @staticmethod
    def _register_columns(m, advance, columns, name):
        """Each column's bits registered as they are (an inverted bit stays to be inverted by its taker;
        a constant is not registered)."""
        regs = []
        for b, col in enumerate(columns):
            held = [bit for bit, _ in col if not isinstance(bit, Const)]
            if not held:
                regs.append(list(col))
                continue
            r = iter(register(m, advance, Cat(*held), name=f"{name}_{b}"))
            regs.append([(bit, inv) if isinstance(bit, Const) else (next(r), inv) for bit, inv in col])
        return regs





def _wire(m, value, name):
    sig = Signal(value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig
