"""sim.rtlil_speedup writes memory contents as one constant: the RTLIL (hence the Verilog) must be
byte-identical to what Amaranth's own emitter writes, for memories of every shape and for real layers."""

import random

import pytest
from amaranth import Module, Signal, unsigned
from amaranth.back import rtlil
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from sim import rtlil_speedup
from tests.test_mvau import make_spec


class _Roms(wiring.Component):
    addr: In(8)
    data: Out(64)

    def __init__(self, shapes, seed):
        super().__init__()
        self.shapes = shapes
        self.seed = seed

    def elaborate(self, platform):
        m = Module()
        rng = random.Random(self.seed)
        outputs = []
        for k, (width, depth) in enumerate(self.shapes):
            init = [rng.randrange(1 << width) for _ in range(rng.choice((0, depth // 2, depth)))]
            m.submodules[f"rom{k}"] = mem = Memory(shape=unsigned(width), depth=depth, init=init)
            port = mem.read_port()
            m.d.comb += port.addr.eq(self.addr)
            outputs.append(port.data)
        acc = Signal(64)
        for out in outputs:
            acc = acc ^ out
        m.d.comb += self.data.eq(acc)
        return m


def both_ways(component):
    rtlil_speedup.uninstall()
    try:
        theirs = rtlil.convert(component, name="top", emit_src=False)
    finally:
        assert rtlil_speedup.install()
    return theirs, rtlil.convert(component, name="top", emit_src=False)


@pytest.mark.parametrize("seed", range(3))
def test_memories_of_every_shape_give_the_same_rtlil(seed):
    shapes = [(1, 1), (1, 64), (7, 13), (8, 256), (33, 5), (64, 100)]
    theirs, ours = both_ways(_Roms(shapes, seed))
    assert "$meminit_v2" in ours and ours == theirs


def test_an_mvau_with_its_weights_gives_the_same_rtlil():
    from layers.mvau import MVAU
    spec = make_spec(64, 32, 8, 4, "INT8", "INT8", None)
    theirs, ours = both_ways(MVAU(spec))
    assert ours.count("$meminit_v2") >= 1 and ours == theirs


def test_it_stays_out_of_an_amaranth_it_was_not_checked_against(monkeypatch):
    rtlil_speedup.uninstall()
    monkeypatch.setattr("importlib.metadata.version", lambda name: "0.6.0")
    try:
        assert rtlil_speedup.install() is False
        assert rtlil.ModuleEmitter.emit_memory is not rtlil_speedup._emit_memory
    finally:
        monkeypatch.undo()
        assert rtlil_speedup.install()
