"""Faulty streams for the formal tests: a layer or a bridge with one fault on its output stream ``o``, which
`rtlgen prove`'s properties must catch (tests/test_prove.py, tests/test_prove_galapagos.py)."""

from amaranth.hdl import Module, ResetSignal, Signal, Value
from amaranth.lib import wiring

__all__ = ["Mutant", "mutant"]


class Mutant(wiring.Component):
    """``inner`` with one fault on its output stream ``o`` (``kind``):

    drop        the second output word is taken from ``inner`` but never offered (only that one)
    duplicate   the first output word is offered twice (``inner`` is not told it was taken the first time)
    unstable    bit 0 of the payload flips every cycle while ``valid`` waits for ``ready``
    retract     ``valid`` falls while a word waits for ``ready``, for one cycle
    reset       ``valid`` is high in the reset cycle
    corrupt     bit 0 of the payload inverted on the second word (stable, so only the bit tracking sees it)
    pad         (ToGalapagos) the top TDATA bit of the third flit set: with the tests' geometry, a padding bit
    tlast       (ToGalapagos) TLAST inverted on the first flit
    """

    def __init__(self, inner, kind):
        self.inner, self.kind = inner, kind
        inner._MustUse__silence = True      # elaborated with the mutant (a probe built for its signature is not)
        super().__init__({n: m for n, m in inner.signature.members.items() if m.is_signature})

    @property
    def spec(self):
        return self.inner.spec

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        for name, member in self.signature.members.items():
            if member.flow == wiring.In:
                wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(inner, name))
        o, io = self.o, inner.o
        given = Signal(4)           # output words taken, saturating: the faults pick the 1st to 3rd
        stalled = Signal()
        m.d.sync += stalled.eq(io.valid & ~o.ready)
        with m.If(o.valid & o.ready):
            m.d.sync += given.eq(given + (given != 15))
        m.d.comb += [o.valid.eq(io.valid), o.payload.eq(io.payload), io.ready.eq(o.ready)]
        bits, out_bits = Value.cast(io.payload), Value.cast(o.payload)
        if self.kind == "drop":
            dropped = Signal()
            with m.If((given == 1) & ~dropped):
                m.d.comb += [o.valid.eq(0), io.ready.eq(1)]
                with m.If(io.valid):
                    m.d.sync += dropped.eq(1)
        elif self.kind == "duplicate":
            repeat = Signal()
            with m.If((given == 0) & ~repeat & o.valid & o.ready):
                m.d.sync += repeat.eq(1)
            m.d.comb += io.ready.eq(o.ready & (given != 0))
        elif self.kind == "unstable":
            flip = Signal()
            m.d.sync += flip.eq(~flip)
            m.d.comb += out_bits.eq(bits ^ (stalled & flip))
        elif self.kind == "retract":
            m.d.comb += o.valid.eq(io.valid & ~(stalled & (given == 0)))
            m.d.comb += io.ready.eq(o.ready & o.valid)
        elif self.kind == "reset":
            m.d.comb += o.valid.eq(io.valid | ResetSignal())
        elif self.kind == "corrupt":
            m.d.comb += out_bits.eq(bits ^ (given == 1))
        elif self.kind == "pad":
            m.d.comb += o.payload.tdata.eq(io.payload.tdata | ((given == 2) << (self.spec.flit_width - 1)))
        elif self.kind == "tlast":
            m.d.comb += o.payload.tlast.eq(io.payload.tlast ^ (given == 0))
        else:
            raise ValueError(f"unknown mutant kind {self.kind!r}")
        return m


def mutant(cls, kind):
    """A builder ``spec -> Mutant(cls(spec), kind)``, as ``prove_spec`` takes one."""
    return lambda spec: Mutant(cls(spec), kind)
