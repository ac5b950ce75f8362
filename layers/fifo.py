"""StreamingFIFO: an elastic buffer between two layers, with occupancy monitoring for FIFO sizing."""

from dataclasses import dataclass
from typing import Literal

from amaranth.hdl import Array, C, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from layers.timing import one_to_one
from layers.memcost import ram_cost, ram_in_block
from layers.op import OneWidth, Op, Resources, StreamContract
from memstream.memstream import BRAM_OR_LUT_STYLES

__all__ = ["FIFOSpec", "StreamingFIFO", "output_fifo_spec"]

RAM_STYLES = BRAM_OR_LUT_STYLES
SRL_MAX_DEPTH = 32      # one SRLC32E per bit; deeper FIFOs are cheaper as LUTRAM or BRAM
# Any depth from 2 up is a legal FIFO (a 128x128 super-resolution CNN's window stream wants 104,542 words in
# front of a slow MVAU): deep ones are one memory that Yosys tiles over as many block RAMs as it takes
# (stacked in depth behind a read multiplexer, costed by layers.memcost.ram_cost), not a chain of FIFOs.
# FINN chains (SplitLargeFIFOs) because Vivado's FIFO IP stops at 32,768 words; ours is our own RTL, where
# a chain would cost the same block RAMs plus a controller, 2 cycles of latency and an output register per
# link, and would move the timing the FIFO sizer models (one FIFO, latency 2). Whether it fits the board is
# the estimate's question (check_fit, the optimizer), not the spec's.
MIN_DEPTH = 2


@dataclass(frozen=True)
class FIFOSpec(StreamContract, OneWidth):
    """Contract of a StreamingFIFO (FINN attributes ``depth``, ``ram_style``; width in bits).

    A FIFO carries words of any datatype and frame shape: its dtypes and folded shapes are None, and
    it never limits the rate (``exp_cycles`` 0)."""
    width: int                  # word width in bits (the producer's folded output width)
    depth: int                  # words the FIFO holds without stalling its input: 2 or more
    ram_style: Literal["auto", "distributed", "block"] = "auto"
    fall_through: bool = False  # a word entering an empty FIFO goes straight to the output register:
                                # offered one cycle later instead of two (SRL storage only)

    def __post_init__(self):
        if not isinstance(self.width, int) or self.width < 1:
            raise ValueError(f"FIFO width must be a positive integer, not {self.width!r}")
        if not isinstance(self.depth, int) or isinstance(self.depth, bool) or self.depth < MIN_DEPTH:
            raise ValueError(f"FIFO depth must be an integer >= {MIN_DEPTH}, not {self.depth!r}")
        if self.ram_style not in RAM_STYLES:
            raise ValueError(f"FIFO ram_style must be one of {', '.join(RAM_STYLES)}, not {self.ram_style!r}")
        if self.fall_through not in (False, True):
            raise ValueError(f"FIFO fall_through must be True or False, not {self.fall_through!r}")
        if self.fall_through and self.storage != "srl":
            raise ValueError(f"FIFO fall_through needs shift-register storage (depth <= {SRL_MAX_DEPTH}, ram_style "
                             f"not block), not depth={self.depth} ram_style={self.ram_style}")

    @property
    def storage(self):
        """``"srl"`` (shift registers, shallow), or ``"memory"`` (LUTRAM or BRAM, deep or block)."""
        if self.ram_style != "block" and self.depth <= SRL_MAX_DEPTH:
            return "srl"
        return "memory"

    @property
    def capacity(self):
        """Words held at most: ``depth`` in storage plus one in the output register."""
        return self.depth + 1

    input_dtype = output_dtype = None
    folded_input_shape = folded_output_shape = None
    exp_cycles = 0

    @property
    def latency(self):
        """Cycles from a word entering an empty FIFO to it being offered at the output."""
        return 1 if self.fall_through else 2

    def timing(self, arrivals):
        """As deep as it needs to be: takes every word when offered and offers it ``latency`` cycles later
        (the cycle after the previous word left, if later: the consumer's own model sees to that).
        The FIFO sizer reads its depth off these cycles (:mod:`layers.timing`)."""
        return one_to_one(self.latency, arrivals[0])

    @property
    def in_block_ram(self):
        """Whether the words are in BRAM (never for SRL storage; see :func:`ram_in_block`)."""
        return self.storage != "srl" and ram_in_block(self.width, self.depth, self.ram_style)

    def resource_estimate(self):
        """7-series cost, following Yosys 0.70 on the FIFO grid of the cost corpus and the CNV/TFC FIFOs.

        SRL: an SRLC32E per bit and 32 words (a depth-2 FIFO is plain registers), plus the level counter.
        Memory: head, tail and level counters (a non-power-of-two depth adds its wrap compares); in LUTRAM
        a RAM64M (4 LUTs) per 3 bits and 64 words, and a read multiplexer over the 64-word banks."""
        width, depth, bits = self.width, self.depth, (self.depth - 1).bit_length()
        if self.storage == "srl":
            control = 8 + 2 * bits
            ff = 3 * width + 5 if depth == 2 else width + 2 * bits + 5
            return Resources(lut=width * ((depth + 31) // 32) + control, ff=ff, bram18=0)
        control = 8 + 2 * bits + (0 if depth & (depth - 1) == 0 else 2 * bits)
        storage = ram_cost(width, depth, self.ram_style)
        ff = 3 * bits + 9 + (0 if storage.bram18 else width)    # LUTRAM needs a read data register
        return storage + Resources(lut=control, ff=ff, bram18=0)


def output_fifo_spec(width, fall_through=False):
    """The FIFO every layer ends in (depth 2): its registered ``i.ready`` is the layer's pipeline enable,
    so no combinational path runs from a layer's ``o.ready`` back to its ``i.ready``. ``fall_through``:
    its latency is 1 instead of 2 (a layer's ``pipeline="latency"``)."""
    return FIFOSpec(width, 2, fall_through=fall_through)


class StreamingFIFO(wiring.Component):
    """First-in first-out stream buffer.

    Members
    -------
    i : In(stream.Signature(width))
    o : Out(stream.Signature(width))
    count : Out(range(capacity + 1))
        Words held now.
    max_count : Out(range(capacity + 1))
        Largest ``count`` seen since reset (FIFO sizing reads it after simulating a few frames).

    Moves one word per cycle in and out at the same time. ``i.ready`` and ``o.valid`` come from
    registers: no combinational path crosses the FIFO, so it cuts timing paths between layers. A word
    entering an empty FIFO is offered two cycles later. Shallow FIFOs (``depth <= 32``, not ``block``)
    store words in shift registers (SRLs); deeper ones in a memory with a synchronous read port whose
    data register is the output register, so it maps to BRAM or LUTRAM (``ram_style`` is passed on as
    a Verilog attribute).

    After elaboration ``formal_state`` names the registers (``level``, ``out_full``, the SRL ``chains``)
    that :mod:`sim.formal`'s induction invariants read.
    """

    def __init__(self, spec):
        self._spec = spec
        super().__init__({
            "i": In(stream.Signature(spec.width)),
            "o": Out(stream.Signature(spec.width)),
            "count": Out(range(spec.capacity + 1)),
            "max_count": Out(range(spec.capacity + 1)),
        })

    @property
    def spec(self):
        return self._spec

    def elaborate(self, platform):
        spec = self._spec
        m = Module()
        self.formal_state = {}      # registers sim.formal's induction invariants read (this elaboration's)

        level = Signal(range(spec.depth + 1))       # words in storage (not counting the output register)
        out_full = Signal()
        do_write = self.i.valid & self.i.ready
        do_read = (level != 0) & (~out_full | self.o.ready)    # move the oldest word to the output register
        # fall_through: a word written while storage is empty and the output register free (or being
        # emptied) goes straight into the output register, not into storage
        bypass = (do_write & (level == 0) & (~out_full | self.o.ready)) if spec.fall_through else C(0, 1)

        m.d.comb += [
            self.i.ready.eq(level != spec.depth),
            self.o.valid.eq(out_full),
        ]
        with m.If(do_read | bypass):
            m.d.sync += out_full.eq(1)
        with m.Elif(self.o.ready):
            m.d.sync += out_full.eq(0)
        # level +- 1 as two carry chains beside each other and a selection after them (level + write - read,
        # one three-term adder, began a path of two carry chains: ~176 MHz by the register-to-register estimate)
        stored, taken = do_write & ~bypass, do_read
        m.d.sync += level.eq(Mux(stored & ~taken, level + 1, Mux(taken & ~stored, level - 1, level)))

        if spec.storage == "srl":
            self._srl_storage(m, level, do_write & ~bypass, do_read, bypass)
        else:
            self._memory_storage(m, do_write, do_read)

        m.d.comb += self.count.eq(level + out_full)
        self.formal_state["level"], self.formal_state["out_full"] = level, out_full
        # count > max_count as level against max_count (>= with the output register full, > without): two
        # comparisons beside each other, not the count's adder into a comparison
        with m.If(Mux(out_full, level >= self.max_count, level > self.max_count)):
            m.d.sync += self.max_count.eq(self.count)
        return m

    def _srl_storage(self, m, level, do_write, do_read, bypass):
        # Words shift in at 0; the oldest sits at level-1. One shift register per bit with a variable
        # tap is the shape Yosys (xilinx_srl -variable) maps to SRLC32E; no reset, as SRLs have none.
        spec = self._spec
        tap = (level - 1).as_unsigned()[:max(1, (spec.depth - 1).bit_length())]
        out = Signal(spec.width, reset_less=True)
        self.formal_state["chains"] = chains = []
        for bit in range(spec.width):
            chain = Signal(spec.depth, reset_less=True, name=f"srl{bit}")
            chains.append(chain)
            with m.If(do_write):
                m.d.sync += chain.eq(Cat(self.i.payload[bit], chain[:-1]))
            with m.If(do_read):
                m.d.sync += out[bit].eq(Array(chain)[tap])     # a case mux: pmux2shiftx -> SRL tap
            with m.Elif(bypass):
                m.d.sync += out[bit].eq(self.i.payload[bit])
        m.d.comb += self.o.payload.eq(out)

    def _memory_storage(self, m, do_write, do_read):
        spec = self._spec
        attrs = {} if spec.ram_style == "auto" else {"ram_style": spec.ram_style}
        m.submodules.storage = storage = Memory(shape=unsigned(spec.width), depth=spec.depth, init=[], attrs=attrs)
        wr = storage.write_port()
        rd = storage.read_port(domain="sync")
        head = Signal(range(spec.depth))    # next slot to write
        tail = Signal(range(spec.depth))    # oldest word
        m.d.comb += [
            wr.addr.eq(head), wr.data.eq(self.i.payload), wr.en.eq(do_write),
            rd.addr.eq(tail), rd.en.eq(do_read), self.o.payload.eq(rd.data),
        ]
        with m.If(do_write):
            m.d.sync += head.eq(Mux(head == spec.depth - 1, 0, head + 1))
        with m.If(do_read):
            m.d.sync += tail.eq(Mux(tail == spec.depth - 1, 0, tail + 1))


def _golden(spec, xs, producer):
    """The words as they come."""
    return xs[0]


def _small_instance(s):
    """Depth at most 4, in the same kind of storage."""
    return dict(depth=min(s.depth, 4), ram_style="block" if s.storage == "memory" else s.ram_style)


def _examples():
    """Four 6-bit words."""
    return [(dict(width=6), {"depth": 4})]


OP = Op("StreamingFIFO", FIFOSpec, StreamingFIFO,
        folding={"depth": "depth", "ram_style": "ram_style", "fall_through": "fall_through"},
        role="fifo", golden=_golden, small_instance=_small_instance, extensions=("fall_through",), examples=_examples)
