"""AXI4-Lite: the signature (seen from the manager) and the response codes our slaves use."""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AXILiteSignature", "OKAY", "SLVERR"]

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
