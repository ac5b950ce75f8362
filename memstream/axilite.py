"""AXI4-Lite: the signature (seen from the manager) and the response codes our slaves use."""

from amaranth.hdl import Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AXILiteSignature", "OKAY", "SLVERR", "accept_writes", "refuse_reads"]

OKAY, SLVERR = 0b00, 0b10


class AXILiteSignature(wiring.Signature):
    """AXI4-Lite with 32-bit data, from the manager's side; a slave has ``In(AXILiteSignature(aw))``.

    Member names are the AXI ones in lower case, so the Verilog ports read ``<prefix>__awaddr`` etc.
    """

    def __init__(self, addr_width):
        if not isinstance(addr_width, int) or not 2 <= addr_width <= 64:
            raise ValueError(f"AXI-Lite addr_width must be an integer in 2..64, not {addr_width!r}")
        self._addr_width = addr_width
        super().__init__({
            "awaddr": Out(addr_width), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(32), "wstrb": Out(4), "wvalid": Out(1), "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_width), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
            "rdata": In(32), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        })

    @property
    def addr_width(self):
        return self._addr_width

    def __eq__(self, other):
        return isinstance(other, AXILiteSignature) and other.addr_width == self.addr_width

    def __repr__(self):
        return f"AXILiteSignature({self.addr_width})"


def accept_writes(m, bus, legal):
    """Take AW and W together, one write at a time, answering OKAY if ``legal`` (of awaddr) else SLVERR.

    Returns the accept strobe: the cycle ``bus.awaddr``/``bus.wdata`` are written (the response must
    have been taken before the next write is accepted).
    """
    accept = bus.awvalid & bus.wvalid & ~bus.bvalid
    m.d.comb += [bus.awready.eq(accept), bus.wready.eq(accept)]
    with m.If(accept):
        m.d.sync += [bus.bvalid.eq(1), bus.bresp.eq(Mux(legal, OKAY, SLVERR))]
    with m.Elif(bus.bready):
        m.d.sync += bus.bvalid.eq(0)
    return accept


def refuse_reads(m, bus):
    """A write-only slave: every read gets SLVERR and zero data."""
    m.d.comb += [bus.arready.eq(~bus.rvalid), bus.rdata.eq(0), bus.rresp.eq(SLVERR)]
    with m.If(bus.arvalid & ~bus.rvalid):
        m.d.sync += bus.rvalid.eq(1)
    with m.Elif(bus.rready):
        m.d.sync += bus.rvalid.eq(0)
