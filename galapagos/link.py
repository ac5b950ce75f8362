"""A network link between two Galapagos kernels, as a simulation model: wire rate, header time, latency.

Galapagos carries a kernel's flits to another FPGA over Ethernet. For the multi-device simulation the
network between two kernels is this component: flits of :func:`galapagos.bridges.flit_layout` in, the
same flits out, delayed and rate-limited as a wire would. It is a *model* (written in Amaranth so that
Verilator runs it inside the cluster at full speed), not hardware to put on a board.

The model, exactly
------------------
- **Wire rate.** The wire moves ``bits_per_cycle`` bits per clock cycle (a :class:`~fractions.Fraction`:
  1 Gbit/s at 100 MHz is 10). A flit occupies it for ``flit_width / bits_per_cycle`` cycles, and every
  packet is preceded by ``header_flits`` flit times of overhead (Ethernet preamble, MAC/IP/UDP headers,
  FCS, the inter-frame gap and Galapagos' header flit: :data:`ETHERNET_OVERHEAD_BITS`, by default
  rounded up to whole flits: 10 64-bit or 2 512-bit flit times). A packet of
  ``F`` flits therefore takes ``(F + header_flits) * flit_width / bits_per_cycle`` cycles of wire time
  (:meth:`LinkSpec.packet_cycles`); back-to-back packets reach exactly that rate on average (the
  fraction of a cycle left over by one flit is carried to the next; an idle wire banks less than
  one cycle).
- **Latency.** A flit that enters the wire in cycle ``t`` is offered at the far end from cycle
  ``t + latency`` (``latency >= 2``: a switch and two PHYs are microseconds, hundreds of cycles).
- **Lossless.** The far end holds up to ``depth`` flits (the receiving NIC's buffer); when it is full
  the wire stops taking flits: the model never drops a flit. Real UDP drops instead, so the buffer
  depth a run needed is measured (``max_level``): a deployment needs at least that much buffering,
  or a sender that never outpaces the slowest device (it does not, when the host feeds frames at the
  cluster's II).

Probes (outputs for the simulation bench, counted from reset)
------------------------------------------------------------
``flits``, ``packets``: flits and packets that entered the wire; ``first_end``, ``last_end``: the
cycles in which the last flit of the first and of the latest packet entered it (their spacing over
``packets - 1`` is the sender's measured packet interval); ``max_level``: the most flits the far end
held at once.
"""

from dataclasses import dataclass
from fractions import Fraction
from math import ceil

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from galapagos.bridges import FLIT_WIDTHS, flit_layout

__all__ = ["LinkSpec", "LinkModel", "ETHERNET_OVERHEAD_BITS", "header_flits", "DEFAULT_LATENCY", "PROBES"]

# per packet: 8 B preamble + 14 B MAC + 20 B IPv4 + 8 B UDP + 4 B FCS + 12 B gap, and Galapagos' own 8 B
# header flit (destination, source, size) inside the UDP payload
ETHERNET_OVERHEAD_BITS = (66 + 8) * 8
DEFAULT_LATENCY = 500           # cycles: 5 us at 100 MHz, a switched 1 GbE hop between two FPGA stacks
PROBES = ("flits", "packets", "first_end", "last_end", "max_level")
COUNTER_BITS = 32


def header_flits(flit_width):
    """Flit times of Ethernet, IPv4, UDP and Galapagos overhead per packet (:data:`ETHERNET_OVERHEAD_BITS`,
    rounded up)."""
    return ceil(ETHERNET_OVERHEAD_BITS / flit_width)


@dataclass(frozen=True)
class LinkSpec:
    """Contract of :class:`LinkModel` (the model: module docstring)."""
    flit_width: int
    bits_per_cycle: Fraction
    latency: int = DEFAULT_LATENCY
    header_flits: int = None        # default: header_flits(flit_width), the Ethernet/IP/UDP overhead
    depth: int = None               # far-end buffer in flits; default: what the latency keeps in flight + 64

    def __post_init__(self):
        if self.flit_width not in FLIT_WIDTHS:
            raise ValueError(f"link flit_width must be one of {', '.join(map(str, FLIT_WIDTHS))}, "
                             f"not {self.flit_width!r}")
        if self.header_flits is None:
            object.__setattr__(self, "header_flits", header_flits(self.flit_width))
        rate = Fraction(self.bits_per_cycle)
        if rate <= 0:
            raise ValueError(f"link bits_per_cycle must be positive, not {self.bits_per_cycle!r}")
        object.__setattr__(self, "bits_per_cycle", rate)
        for name, lo in (("latency", 2), ("header_flits", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < lo:
                raise ValueError(f"link {name} must be an integer >= {lo}, not {value!r}")
        if self.depth is None:
            object.__setattr__(self, "depth", self.in_flight + 64)
        elif not isinstance(self.depth, int) or self.depth < 2:
            raise ValueError(f"link depth must be an integer >= 2, not {self.depth!r}")

    @classmethod
    def ethernet(cls, flit_width, link_gbps, clock_mhz, **kw):
        """A link of ``link_gbps`` Gbit/s seen from a ``clock_mhz`` MHz kernel clock."""
        rate = Fraction(str(float(link_gbps))) * 1000 / Fraction(str(float(clock_mhz)))
        return cls(flit_width, rate, **kw)

    @property
    def flit_cycles(self):
        """Wire time of one flit, in cycles."""
        return Fraction(self.flit_width) / self.bits_per_cycle

    def packet_cycles(self, flits):
        """Wire time of a packet of ``flits`` flits, headers included: the link's packet interval."""
        return (flits + self.header_flits) * self.flit_cycles

    def frame_cycles(self, sizes):
        """Wire time of a frame sent as packets of ``sizes`` flits."""
        return sum(self.packet_cycles(n) for n in sizes)

    @property
    def in_flight(self):
        """Flits the latency keeps on the wire at full rate."""
        return ceil(self.latency / self.flit_cycles) + 2


class LinkModel(wiring.Component):
    """The link model of :class:`LinkSpec` (module docstring).

    Members
    -------
    i : In(stream.Signature(flit_layout(flit_width)))
    o : Out(stream.Signature(flit_layout(flit_width)))
    flits, packets, first_end, last_end : Out(32); max_level : Out(range(depth + 1))
    """

    def __init__(self, spec):
        self._spec = spec
        layout = flit_layout(spec.flit_width)
        super().__init__({
            "i": In(stream.Signature(layout)),
            "o": Out(stream.Signature(layout)),
            **{name: Out(COUNTER_BITS) for name in PROBES if name != "max_level"},
            "max_level": Out(range(spec.depth + 1)),
        })

    @property
    def spec(self):
        return self._spec

    def elaborate(self, platform):
        spec = self._spec
        m = Module()
        num, den = spec.bits_per_cycle.numerator, spec.bits_per_cycle.denominator
        flit_cost = spec.flit_width * den                   # wire work of one flit, in 1/den bits
        header_cost = spec.header_flits * flit_cost
        layout = flit_layout(spec.flit_width)
        stamped = layout.size + COUNTER_BITS

        m.submodules.buffer = buffer = fifo.SyncFIFOBuffered(width=stamped, depth=spec.depth)
        now = Signal(COUNTER_BITS)
        m.d.sync += now.eq(now + 1)

        # debt: wire work still to do (1/den bits); the wire is free for the next flit (or header) at <= 0
        debt = Signal(signed(max(flit_cost, header_cost, num).bit_length() + 2))
        first = Signal(init=1)          # the next flit starts a packet
        header_sent = Signal()          # ... and its header time is already on the wire
        free = debt <= 0
        may_send = free & (header_sent | ~first | (spec.header_flits == 0))
        m.d.comb += self.i.ready.eq(may_send & buffer.w_rdy)
        accept = self.i.valid & self.i.ready
        start_header = free & first & ~header_sent & self.i.valid & (spec.header_flits > 0)

        with m.If(accept):
            m.d.sync += debt.eq(debt + flit_cost - num)
        with m.Elif(start_header):
            m.d.sync += [debt.eq(debt + header_cost - num), header_sent.eq(1)]
        with m.Elif(debt > 0):
            m.d.sync += debt.eq(debt - num)
        with m.If(accept):
            m.d.sync += [first.eq(self.i.payload.tlast), header_sent.eq(0), self.flits.eq(self.flits + 1)]
            with m.If(self.i.payload.tlast):
                m.d.sync += [self.packets.eq(self.packets + 1), self.last_end.eq(now)]
                with m.If(self.packets == 0):
                    m.d.sync += self.first_end.eq(now)
        m.d.comb += [buffer.w_data.eq(self.i.payload.as_value() | (now << layout.size)), buffer.w_en.eq(accept)]

        head_stamp = buffer.r_data[layout.size:]
        arrived = (now - head_stamp)[:COUNTER_BITS] >= spec.latency
        m.d.comb += [
            self.o.payload.eq(buffer.r_data[:layout.size]),
            self.o.valid.eq(buffer.r_rdy & arrived),
            buffer.r_en.eq(self.o.ready & arrived),
        ]
        with m.If(buffer.level > self.max_level):
            m.d.sync += self.max_level.eq(buffer.level)
        return m
