"""Formal stream contract of one layer: a wrapper that puts AXI-Stream assumptions on a component's inputs
and assertions on its outputs, for SymbiYosys (``rtlgen prove`` runs it; this module knows only the
:class:`layers.op.LayerSpec` contract and the component's stream members, never the compiler).

Properties (each a named 1-bit signal ``prop_<name>``, asserted; a counterexample trace shows which is 0):

- ``stable_<o>``: once ``valid`` is high on output ``<o>`` it stays high, and the payload stays the same,
  until ``ready``.
- ``reset_<o>``: ``valid`` is low during reset and in the cycle after it.
- ``count_<i>_<o>``: no output word without an input to justify it. Each input frame (its words are the
  product of ``folded_input_shapes[k][:-1]``) grants one output frame (``folded_output_shape[:-1]``
  words) once ``lead_words`` of its words were taken (see :class:`StreamPlan` ``leads``); an output word
  moves only with such a credit left.
  So no word is duplicated or invented, at frame granularity.
- ``order`` (FIFO) / ``bits`` (DWC): symbolic word tracking. A free index ``k`` (constant over the run):
  the payload entering at input position ``k`` leaves at output position ``k`` unchanged; for a width
  converter the stream is a string of bits and bit ``k`` must come out as output bit ``k``. Catches
  drops, duplicates, reordering and corruption of words, not just their count.
- ``bits`` and ``flit_o`` (Galapagos bridges, ``track`` ``"to_galapagos"`` / ``"from_galapagos"``): a
  chosen bit of a chosen frame leaves at its position in the other framing unchanged (pad bits as 0),
  and ToGalapagos's TDEST/TID/TLAST/TKEEP are the packet format's; FromGalapagos is proven under the
  stated assumption that its input is well-formed packets addressed to it (:meth:`FormalHarness._bridge`).
- ``frame`` (``live`` mode only): with the input offering exactly one frame, every cycle, from the
  first cycle after reset, and the consumer always ready, every output has produced exactly its frame
  by cycle ``deadline``: exp_cycles + latency, or when the spec's timing model (:mod:`layers.timing`)
  moves the frame's last word if later (a window generator's output waits for its first window), plus
  :data:`SLACK` (bounded liveness; with the ``count`` credits, no word was lost either).

Induction: the properties alone are rarely inductive (a state no run reaches, e.g. a FIFO whose output
register disagrees with its occupancy, breaks them one step later). Where a component names its registers
in ``formal_state`` after elaboration (StreamingFIFO, the width converters, DuplicateStreams, AddStreams,
the Galapagos bridges),
``inv_*`` properties tie them to the harness's counts: the words (bits) taken and not yet given are the
ones the component holds, and the tracked word (bit) sits where the component keeps it. They hold in
every reachable state, so they are asserted, never assumed; with them the k-induction step closes.
A FIFO in a memory has no such view of its words (its contents are no signal): its ``order`` stays bounded.

Inputs are assumed to follow AXI-Stream: ``valid`` low in reset, and once high held with a stable
payload until ``ready``. Reset is high in the first cycle only (registers start at their reset values).
The harness's own registers are never reset (``reset_less``): reset belongs to the component.
"""

from dataclasses import dataclass
from math import prod

import numpy as np
from amaranth.hdl import (Array, Assert, Assume, Cat, Const, Elaboratable, Fragment, Module, Mux, ResetSignal, Signal,
                          Value)
from amaranth.lib import data
from amaranth.lib import wiring

__all__ = ["StreamPlan", "FormalHarness", "plan_of", "SLACK", "ASSERTED"]

BRIDGES = ("to_galapagos", "from_galapagos")        # ``track`` of the Galapagos bridges (:meth:`FormalHarness._bridge`)

SLACK = 2           # cycles the liveness deadline allows beyond exp_cycles + latency: the reset cycle,
                    # and the cycle in which the last output word is taken (latency counts to "offered")


# The models a proof checks, by what they assert (``FormalHarness(asserted=...)``); together they assert
# every property. "control": everything but a payload's stability, unless the component has induction
# invariants (then everything: they close the induction for all of it at once); "stable": the payloads'
# stability alone (it reads the datapath, and it is k-inductive where the output is a register that holds
# while stalled); "frame": the live check's one property (the others are the safety check's: the live
# run's inputs are one of the runs the safety check covers, to a depth at least the live check's).
ASSERTED = {
    "control": lambda harness, name: harness.inductive or not name.startswith("stable_"),
    "stable": lambda harness, name: not harness.inductive and name.startswith("stable_"),
    "frame": lambda harness, name: name == "frame",
}


@dataclass(frozen=True)
class StreamPlan:
    """What the harness needs to know about a component: its stream members and words per frame."""
    inputs: tuple           # ((member name, words per frame), ...)
    outputs: tuple
    leads: tuple            # per input: its words taken before the output frame it grants may go beyond
                            # ``early`` words (the spec's lead_words for input 0; 0 for the others: a
                            # concat emits input 0's part of a pixel before it takes any word of input 1)
    deadline: int           # cycles after reset by which the live check wants one whole frame out
    track: str = None       # None, "fifo" (word order and values) or "dwc" (bit order and values)
    early: int = 0          # output words of a frame that may leave before its lead (words_before_lead)


def _words(shape):
    return 1 if shape is None else prod(shape[:-1])


def plan_of(spec, component, *, track=None, leads=False):
    """The :class:`StreamPlan` of ``component`` built from ``spec`` (a :class:`layers.op.LayerSpec`).

    By default a frame's credit comes with the last word of the input frame before (lead 0 on every
    input: sound for every layer). ``leads=True`` holds input 0 to the spec's ``lead_words`` instead, a
    stricter reading of the contract: no more than the spec's ``words_before_lead`` output words of a
    frame (FMPadding's top padding, the default window generator's first window but its last word) leave
    before that many of its input words were taken."""
    members = component.signature.members
    ins = sorted(n for n, m in members.items() if m.is_signature and m.flow == wiring.In)
    outs = sorted(n for n, m in members.items() if m.is_signature and m.flow == wiring.Out)
    in_shapes = spec.folded_input_shapes or (None,) * len(ins)
    if len(in_shapes) != len(ins) or len(outs) != spec.num_outputs:
        raise ValueError(f"{type(component).__name__}: {len(ins)} input / {len(outs)} output streams, but its spec "
                         f"declares {len(in_shapes)} / {spec.num_outputs}")
    inputs = tuple((n, _words(s)) for n, s in zip(ins, in_shapes))
    outputs = tuple((n, _words(spec.folded_output_shape)) for n in outs)
    longest = max([w for _, w in inputs] + [w for _, w in outputs] + [spec.exp_cycles])
    leads = ((spec.lead_words,) if leads else (0,)) + (0,) * (len(inputs) - 1)
    early = getattr(spec, "words_before_lead", 0) if leads[0] else 0
    # a frame alone in the pipeline takes longer than exp_cycles where the output waits for a window to
    # fill: the spec's cycle-exact timing model (inputs offered from cycle 0, the first after reset, output
    # never stalled) says when its last word moves
    timing = spec.timing([np.arange(w, dtype=np.int64) for _, w in inputs])
    last = int(np.max(timing.writes)) + 1 if len(timing.writes) else 0
    deadline = max(longest + spec.latency, last) + SLACK
    return StreamPlan(inputs, outputs, leads, deadline, track, early)


class FormalHarness(Elaboratable):
    """``component`` under the stream properties of ``plan``; ``mode`` ``"safety"`` (free inputs and
    readies, under the AXI-Stream assumptions) or ``"live"`` (one frame in at full rate, always ready).

    ``ports`` lists the free inputs (for :func:`amaranth.back.rtlil.convert`); ``properties`` the names
    of the asserted ``prop_<name>`` signals. ``counter_bits`` bounds the run lengths the counters hold
    (the safety check assumes it is never reached: a bounded proof deeper than 2**counter_bits - 2 cycles
    would be vacuous past that point, so the flow sizes it from the depth).

    ``asserted(harness, name)`` picks the properties this model asserts (None: all); the others are left
    out, and so is every register and gate only they read once the model is flattened and cleaned. A
    check of the counts alone then carries no datapath (only ``stable_*`` reads the payload), and the
    live check, which needs ``frame`` only, no more than the counters (see :data:`ASSERTED`).
    """

    def __init__(self, component, plan, *, mode="safety", counter_bits=16, asserted=None):
        if mode not in ("safety", "live"):
            raise ValueError(f"mode must be 'safety' or 'live', not {mode!r}")
        self.component, self.plan, self.mode, self.counter_bits = component, plan, mode, counter_bits
        self.asserted = asserted
        self.ports, self.properties = [], []
        self.inductive = None       # after elaboration: whether the component has induction invariants
        self._free = {}
        for name, _ in plan.inputs:
            port = getattr(component, name)
            self._free[name] = (Signal(name=f"{name}_valid"), Signal(len(Value.cast(port.payload)),
                                                                     name=f"{name}_payload"))
        for name, _ in plan.outputs:
            self._free[name] = Signal(name=f"{name}_ready")
        # the tracked index (held constant: an AnyConst): a word (FIFO), a bit of the stream (DWC: as many
        # as the counted words carry, so every bit moved in the run can be the one tracked), a bit offset
        # in a frame's flits (a bridge, whose tracked frame is ``n``)
        k_bits = counter_bits
        if plan.track == "dwc":
            k_bits += max(len(Value.cast(getattr(component, n).payload)) for n, _ in plan.inputs + plan.outputs
                          ).bit_length()
        elif plan.track in BRIDGES:
            k_bits = (component.spec.flits_per_frame * component.spec.flit_width - 1).bit_length()
        self._k = Signal(k_bits, name="k")
        self._n = Signal(counter_bits, name="n")
        for value in self._free.values():
            self.ports += list(value) if isinstance(value, tuple) else [value]
        if plan.track:
            self.ports.append(self._k)
        if plan.track in BRIDGES:
            self.ports.append(self._n)

    def _prop(self, m, name, test):
        if self.asserted is not None and not self.asserted(self, name):
            return                  # (no signal either: a counterexample shows only what this model asserts)
        sig = Signal(name=f"prop_{name}")
        m.d.comb += [sig.eq(test), Assert(sig, name)]
        self.properties.append(name)

    def elaborate(self, platform):
        m = Module()
        plan, dut, bits = self.plan, self.component, self.counter_bits
        # elaborated here, not by the toolchain later, so the invariants can read the registers it made
        m.submodules.dut = Fragment.get(dut, platform)
        view = _view(dut)
        # known before any property is made (``asserted`` may ask). A FIFO in a memory tracks a word its
        # invariants cannot see: no induction to try
        self.inductive = (view is not None and (not plan.track or view.peek is not None)) or _bridge_state(dut, plan)
        rst = ResetSignal()
        started = Signal(reset_less=True)                  # 0 in the first cycle (reset), 1 after: an Initial()
        after_reset = Signal(reset_less=True)              # the cycle right after reset
        m.d.sync += started.eq(1)
        m.d.comb += Assume(rst == ~started)
        m.d.sync += after_reset.eq(rst)
        cycle = Signal(bits, reset_less=True)                # cycles since reset, saturating
        m.d.sync += cycle.eq(Mux(cycle == (1 << bits) - 1, cycle, cycle + 1))

        # inputs: AXI-Stream by assumption
        taken = {}
        for name, words in plan.inputs:
            port = getattr(dut, name)
            valid, payload = self._free[name]
            m.d.comb += [port.valid.eq(valid), port.payload.eq(payload)]
            was_stalled, last = Signal(reset_less=True, name=f"{name}_was_stalled"), Signal.like(payload, reset_less=True, name=f"{name}_last")
            m.d.sync += [was_stalled.eq(valid & ~port.ready & ~rst), last.eq(payload)]
            m.d.comb += Assume(~rst | ~valid)
            m.d.comb += Assume(~was_stalled | (valid & (payload == last)))
            taken[name] = Signal(reset_less=True, name=f"{name}_taken")
            m.d.comb += taken[name].eq(valid & port.ready & ~rst)

        # outputs: AXI-Stream by assertion
        given = {}
        for name, _ in plan.outputs:
            port = getattr(dut, name)
            m.d.comb += port.ready.eq(self._free[name])
            was_stalled, last = Signal(reset_less=True, name=f"{name}_was_stalled"), Signal.like(port.payload, reset_less=True, name=f"{name}_last")
            m.d.sync += [was_stalled.eq(port.valid & ~port.ready & ~rst), last.eq(port.payload)]
            self._prop(m, f"stable_{name}", ~was_stalled | (port.valid & (port.payload == last)))
            self._prop(m, f"reset_{name}", ~(rst | after_reset) | ~port.valid)
            given[name] = Signal(reset_less=True, name=f"{name}_given")
            m.d.comb += given[name].eq(port.valid & port.ready & ~rst)

        # words moved on every stream since reset (the run is assumed shorter than the counters wrap)
        counts = {}
        for name, _ in plan.inputs + plan.outputs:
            counts[name] = Signal(bits, reset_less=True, name=f"{name}_count")
            moved = taken[name] if name in taken else given[name]
            m.d.sync += counts[name].eq(counts[name] + moved)
            m.d.comb += Assume(counts[name] != (1 << bits) - 1)

        # conservation: each input frame grants an output frame once lead_words of it were taken. The frames
        # granted are a function of the input's count, not a register of their own: nothing for the
        # induction step to start from inconsistently.
        for (iname, iwords), lead in zip(plan.inputs, plan.leads):
            lead = min(lead, iwords)
            # lead 0: a frame's credit comes with the last word of the frame before (the first at reset)
            frames = counts[iname] // iwords + 1 if lead == 0 else (counts[iname] + iwords - lead) // iwords
            early = plan.early if lead else 0       # of the frame whose lead is still to come
            for oname, owords in plan.outputs:
                self._prop(m, f"count_{iname}_{oname}", ~given[oname] | (counts[oname] < frames * owords + early))

        if view is not None:
            self._invariants(m, view, counts)
        if plan.track in BRIDGES:
            self._bridge(m, taken, given, counts)
        elif plan.track:
            self._track(m, taken, given, counts, view)
        if self.mode == "live":
            self._live(m, counts, cycle, rst)
        return m

    def _invariants(self, m, view, counts):
        """What the induction step needs beyond the properties: the component's state agrees with the
        words (bits) the harness counted in and out. True in every reachable state, so asserted (and so
        checked from reset too), never assumed."""
        units = self.plan.track == "dwc"
        for (iname, _), (oname, _) in ((i, o) for i in self.plan.inputs for o in self.plan.outputs):
            i_w, o_w = (len(getattr(self.component, n).payload) if units else 1 for n in (iname, oname))
            moved = counts[iname] * i_w - counts[oname] * o_w          # exact: a signed difference
            self._prop(m, f"inv_held_{iname}_{oname}", moved == view.held(iname, oname))
        for n, test in enumerate(view.extra(counts)):
            self._prop(m, f"inv_state{n}", test)

    def _track(self, m, taken, given, counts, view):
        """The word (FIFO) or bit (DWC) at input position k leaves at output position k, unchanged."""
        (iname, _), = self.plan.inputs
        (oname, _), = self.plan.outputs
        k = self._k
        first = Signal(reset_less=True)
        m.d.sync += first.eq(1)
        k_held = Signal.like(k, reset_less=True)
        m.d.sync += k_held.eq(k)
        m.d.comb += Assume(~first | (k == k_held))          # AnyConst
        i_port, o_port = getattr(self.component, iname), getattr(self.component, oname)
        iw, ow = len(i_port.payload), len(o_port.payload)
        if self.plan.track == "fifo":
            i_base, o_base, iw, ow = counts[iname], counts[oname], 1, 1
            i_value, o_value = i_port.payload, o_port.payload
            width = len(i_value)
        else:           # "dwc": a string of bits; bit k is in input word k // iw, output word k // ow
            i_base, o_base = counts[iname] * iw, counts[oname] * ow        # first bit of the current word
            i_value = (i_port.payload >> (k - i_base)[:max(1, (iw - 1).bit_length())])[0]
            o_value = (o_port.payload >> (k - o_base)[:max(1, (ow - 1).bit_length())])[0]
            width = 1
        i_hit = taken[iname] & (k >= i_base) & (k < i_base + iw)
        o_hit = given[oname] & (k >= o_base) & (k < o_base + ow)
        seen = k < i_base                                   # the tracked unit has entered
        value = Signal(width, reset_less=True)
        with m.If(i_hit):
            m.d.sync += value.eq(i_value)
        self._prop(m, "order" if self.plan.track == "fifo" else "bits",
                   ~o_hit | (seen & (o_value == value)) | (i_hit & (o_value == i_value)))
        if view is not None and view.peek is not None:
            # induction: while inside the component, the tracked unit sits where the component keeps it
            inside = seen & (k >= o_base)
            self._prop(m, "inv_track", ~inside | (view.peek((k - o_base)[:len(k)]) == value))

    def _bridge(self, m, taken, given, counts):
        """A Galapagos bridge (:mod:`galapagos.bridges`) is a pure re-framing: frame ``n``'s bit string
        (``words_per_frame`` words of ``word_width`` bits, LSB first) is the tdata bit string of its
        ``F`` flits, zero-padded in the last. Two free constants pick a bit: frame ``n`` and offset ``r``
        in the frame's flits. ``bits``: it leaves at its position unchanged (ToGalapagos: an offset in
        the padding leaves as 0). ``flit_o`` (ToGalapagos): every offered flit carries TDEST ``dest``,
        TID ``source_id``, TLAST on the last flit of each packet (``packet_sizes``) and only there, TKEEP
        full but on the frame's last flit (``last_tkeep``). FromGalapagos takes, by **assumption**, only
        well-formed packets addressed to it: every offered flit has TDEST ``kernel_id`` and TLAST exactly
        on the last flit of each packet of the frame geometry (TKEEP, TID and the padding bits are free:
        it ignores them). Its dropping of foreign packets and repair of malformed ones is outside
        this proof (tests/test_galapagos_bridges.py simulates them)."""
        spec = self.component.spec
        to_flits = self.plan.track == "to_galapagos"
        (iname, _), = self.plan.inputs
        (oname, _), = self.plan.outputs
        flit_name = oname if to_flits else iname
        F, f, P, frame_bits = spec.flits_per_frame, spec.flit_width, spec.packet_flits, spec.frame_bits
        j = counts[flit_name] % F                           # the flit on the flit stream now: its index in the frame
        end = (j == F - 1) | ((j % P) == P - 1)
        if to_flits:
            flit = self.component.o.payload
            self._prop(m, "flit_o", ~self.component.o.valid
                       | ((flit.tdest == spec.dest) & (flit.tid == spec.source_id) & (flit.tlast == end)
                          & (flit.tkeep == Mux(j == F - 1, spec.last_tkeep, spec.full_tkeep))))
        else:
            valid, payload = self._free[iname]
            flit = data.View(spec.flit_layout, payload)
            m.d.comb += Assume(~valid | ((flit.tdest == spec.kernel_id) & (flit.tlast == end)))

        n, r = self._n, self._k
        first = Signal(reset_less=True)
        m.d.sync += first.eq(1)
        n_held, r_held = Signal.like(n, reset_less=True), Signal.like(r, reset_less=True)
        m.d.sync += [n_held.eq(n), r_held.eq(r)]
        m.d.comb += Assume(~first | ((n == n_held) & (r == r_held)))        # AnyConst
        m.d.comb += Assume(r < (F * f if to_flits else frame_bits))
        payload_bit = r < frame_bits
        k_words, k_flits = n * frame_bits + r, n * (F * f) + r
        k_in, k_out = (k_words, k_flits) if to_flits else (k_flits, k_words)

        def bit(port, name, width, k):
            """(the bit at stream position ``k`` moves now, its value) on stream ``name``."""
            word = Value.cast(port.payload.tdata if name == flit_name else port.payload)
            base = counts[name] * width
            hit = (taken[name] if name == iname else given[name]) & (k >= base) & (k < base + width)
            return hit, (word >> (k - base)[:max(1, (width - 1).bit_length())])[0], base

        w = spec.word_width
        i_hit, i_value, i_base = bit(self.component.i, iname, w if to_flits else f, k_in)
        o_hit, o_value, _ = bit(self.component.o, oname, f if to_flits else w, k_out)
        seen = k_in < i_base
        value = Signal(reset_less=True)
        with m.If(i_hit):
            m.d.sync += value.eq(i_value)
        moved = (seen & (o_value == value)) | (i_hit & (o_value == i_value))
        self._prop(m, "bits", ~o_hit | Mux(payload_bit, moved, o_value == 0))

        # induction: the bridge's registers (``formal_state``) agree with the counts. Its buffer holds the
        # bits that entered (in the output's coordinates: a ToGalapagos frame's pad bits enter with its last
        # word) and have not left, from its LSB, zeros above; its counters are the counts modulo the frame
        # and packet sizes; a FromGalapagos fed well-formed packets never drops nor zero-fills
        if not _bridge_state(self.component, self.plan):
            return                  # (a mutant wrapping a bridge: bounded)
        st = self.component.formal_state
        ci, co = counts[iname], counts[oname]
        if to_flits:
            words = spec.words_per_frame
            entered, left = (ci // words) * (F * f) + (ci % words) * w, co * f
            tests = [st["word"] == ci % words, st["flit"] == co % F]
        else:
            entered, left = (ci // F) * frame_bits + (ci % F) * f, co * w
            tests = [st["index"] == j, ~st["dropping"], ~st["zero_fill"], st["receiving"] == ((j % P) != 0)]
        if "packet_flit" in st:
            tests.append(st["packet_flit"] == j % P)
        held = st["fill"] * spec.step
        tests += [held + left == entered, (st["buf"] >> held) == 0]
        for number, test in enumerate(tests):
            self._prop(m, f"inv_state{number}", test)
        inside = (k_out >= left) & (k_out < entered)
        stored = (st["buf"] >> (k_out - left)[:len(st["buf"]).bit_length()])[0]
        self._prop(m, "inv_track", ~inside | (stored == Mux(payload_bit, value, 0)))

    def _live(self, m, counts, cycle, rst):
        """One frame in at full rate from the first cycle after reset; always ready out; all of it out by
        the deadline."""
        for name, words in self.plan.inputs:
            valid, _ = self._free[name]
            m.d.comb += Assume(valid == (~rst & (counts[name] < words)))
        for name, _ in self.plan.outputs:
            m.d.comb += Assume(self._free[name])
        done = Cat(counts[name] == words for name, words in self.plan.outputs).all()
        self._prop(m, "frame", (cycle < self.plan.deadline) | done)


# --- induction views: what a component holds, read from the registers it names in ``formal_state`` ------

@dataclass
class _View:
    held: object            # (input, output) -> units (words; bits for a width converter) taken, not yet given
    extra: object           # counts -> [1-bit tests]: the component's registers in their legal ranges
    peek: object = None     # p -> the unit p places after the next one to leave (tracked components)


def _fifo_view(fifo):
    st, spec = fifo.formal_state, fifo.spec
    level, out_full = st["level"], st["out_full"]
    peek = None
    if "chains" in st:          # SRL storage: the output register, then the chain from index level-1 down
        def peek(p):
            at = (level - 1 - (p - out_full)).as_unsigned()[:max(1, (spec.depth - 1).bit_length())]
            stored = Cat(Array(chain)[at] for chain in st["chains"])
            return Mux(out_full & (p == 0), fifo.o.payload, stored)
    return _View(held=lambda i, o: fifo.count, extra=lambda counts: [level <= spec.depth], peek=peek)


def _dwc_view(dwc):
    st, spec = dwc.formal_state, dwc.spec
    iw, ow = spec.in_width, spec.out_width
    if spec.kind == "up":
        r = ow // iw
        count, valid = st["count"], st["valid"]
        stored = Mux(valid, ow, 0) + count * iw
        def peek(p):
            rest = (p - Mux(valid, ow, 0)).as_unsigned()
            in_word = (st["word"] >> p[:max(1, (ow - 1).bit_length())])[0]
            return Mux(valid & (p < ow), in_word, (st["collected"] >> ((r - 1 - count) * iw + rest).as_unsigned())[0])
        extra = [count <= r - 1, st["ready"] == ~((count == r - 1) & valid)]
    elif spec.kind == "down":
        r = iw // ow
        left, held_valid = st["left"], st["held_valid"]
        stored = left * ow + Mux(held_valid, iw, 0)
        def peek(p):
            return Mux(p < left * ow, (st["word"] >> p)[0], (st["held"] >> (p - left * ow).as_unsigned())[0])
        extra = [left <= r, st["ready"] == ~held_valid, ~held_valid | (left != 0)]
    else:
        step, size = st["step"], spec.buffer_bits
        stored = st["fill"] * step
        def peek(p):
            return (st["buf"] >> p)[0]
        # bits above the fill are zero: an input is ORed in above the kept bits
        extra = [st["fill"] <= size // step, (st["buf"] >> stored) == 0]
    return _View(held=lambda i, o: stored, extra=lambda counts: extra, peek=peek)


def _bridge_state(component, plan):
    """Whether ``component`` is a Galapagos bridge naming its registers (its invariants close the induction)."""
    return (plan.track in BRIDGES and getattr(component, "formal_state", None) is not None
            and type(component).__name__ in ("ToGalapagos", "FromGalapagos"))


def _view(component):
    """The :class:`_View` of ``component`` (elaborated), or None where it names no registers: the induction
    step then has only the properties to start from, and rarely closes."""
    name = type(component).__name__
    if getattr(component, "formal_state", None) is None:
        return None
    if name == "StreamingFIFO":
        return _fifo_view(component)
    if name == "StreamingDataWidthConverter":
        return _dwc_view(component)
    if name == "DuplicateStreams":
        fifos = component.formal_state["fifos"]
        views = [_fifo_view(f) for f in fifos]
        return _View(held=lambda i, o: fifos[int(o[1:])].count,
                     extra=lambda counts: [t for v in views for t in v.extra(counts)])
    if name == "AddStreams":
        fifo, valid = component.formal_state["fifo"], component.formal_state["valid"]
        inner = _fifo_view(fifo)
        return _View(held=lambda i, o: fifo.count + valid,
                     extra=lambda counts: inner.extra(counts) + [counts["i0"] == counts["i1"]])
    return None


def failing_properties(vcd_text):
    """Names of the ``prop_<name>`` signals that are 0 at the last time step of a counterexample VCD."""
    ids, values, last = {}, {}, {}
    for line in vcd_text.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0] == "$var":
            name = parts[4]
            if name.startswith("prop_"):
                ids.setdefault(parts[3], set()).add(name[len("prop_"):])
        elif line.startswith("#"):
            last.update(values)
            values = dict(last)
        elif line[:1] in "01xz" and line[1:] in ids:
            values[line[1:]] = line[0]
        elif line[:1] == "b" and len(parts) == 2 and parts[1] in ids:
            values[parts[1]] = parts[0][-1]
    last.update(values)
    return sorted(name for code, names in ids.items() if last.get(code) == "0" for name in names)
