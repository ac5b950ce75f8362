"""`rtlgen demo`: the foundation layers doing real work on a small example, checked bit-exact.

Until the compiler exists, the demo stitches a width converter, a FIFO and a second converter into one
design, streams a packed INT4 tensor through it in a real simulator (with and without random
backpressure), streams a weight image out of a memstream, and synthesizes the chain with Yosys.
"""

import time

import numpy as np
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from qonnx.core.datatype import DataType

from layers.dwc import DWCSpec, StreamingDataWidthConverter
from layers.fifo import FIFOSpec, StreamingFIFO
from memstream import MemStream, MemStreamSpec
from memstream.packing import pack_words, unpack_words

__all__ = ["ConverterChain", "run_demo"]


class ConverterChain(wiring.Component):
    """DWC (wide -> narrow) -> FIFO -> DWC (narrow -> wide): an identity on the stream, joined with connect."""

    def __init__(self, down, fifo, up):
        self._parts = (down, fifo, up)
        super().__init__({"i": In(stream.Signature(down.in_width)), "o": Out(stream.Signature(up.out_width))})

    def elaborate(self, platform):
        m = Module()
        down, fifo, up = self._parts
        m.submodules.down = d = StreamingDataWidthConverter(down)
        m.submodules.fifo = f = StreamingFIFO(fifo)
        m.submodules.up = u = StreamingDataWidthConverter(up)
        wiring.connect(m, wiring.flipped(self.i), d.i)
        wiring.connect(m, producer=d.o, consumer=f.i)
        wiring.connect(m, producer=f.o, consumer=u.i)
        wiring.connect(m, u.o, wiring.flipped(self.o))
        return m


def run_demo(*, simulator=None, synth=True, say=print):
    from sim.harness import FULL_RATE, Backpressure, simulate_streams
    from sim.runner import default_simulator

    simulator = simulator or default_simulator()
    dtype, frames, rows, channels, lanes_narrow = DataType["INT4"], 32, 2, 24, 16
    bits = dtype.bitwidth()
    rng = np.random.default_rng(2026)
    x = rng.integers(dtype.min(), dtype.max() + 1, (frames, rows, channels)).astype(np.float32)
    words = list(pack_words(x, dtype).reshape(-1))
    shape = (rows, channels)
    down = DWCSpec(shape, channels * bits, lanes_narrow * bits, dtype)
    fifo = FIFOSpec(lanes_narrow * bits, 32)
    up = DWCSpec(shape, lanes_narrow * bits, channels * bits, dtype)
    say(f"input: {frames} frames of INT4 {shape}, packed into {len(words)} words of {down.in_width} bits "
        f"(element 0 at the LSB)")
    say(f"design: DWC {down.in_width}->{down.out_width} -> FIFO {fifo.width}b x {fifo.depth} ({fifo.storage}) "
        f"-> DWC {up.in_width}->{up.out_width}; simulator: {simulator}")

    for label, bp in (("full rate", FULL_RATE), ("random backpressure", Backpressure(seed=1))):
        start = time.perf_counter()
        result = simulate_streams(ConverterChain(down, fifo, up), inputs={"i": words}, outputs={"o": len(words)},
                                  backpressure=bp, simulator=simulator)
        y = unpack_words(np.array(result.words("o"), dtype=object), dtype, channels).reshape(x.shape)
        exact = np.array_equal(x, y)
        line = f"  {label}: {frames} frames {'bit-exact' if exact else 'MISMATCH'} in {result.cycles} cycles"
        if bp is FULL_RATE:
            line += (f"; {result.steady_cycles('o', rows):.2f} cycles/frame (analytic {down.exp_cycles}), "
                     f"latency {result.latency('i', 'o')} cycles")
        say(line + f" [{time.perf_counter() - start:.1f} s]")
        if not exact:
            return 1

    image = tuple(int(w) for w in pack_words(rng.integers(-128, 128, (64, 4)).astype(np.float32), "INT8"))
    spec = MemStreamSpec(64, 32, image, "auto")
    result = simulate_streams(MemStream(spec), inputs={}, outputs={"o": 3 * spec.depth},
                              backpressure=Backpressure(seed=2, ready_prob=0.5), simulator=simulator, drain=0)
    exact = result.words("o") == list(image) * 3
    say(f"memstream: {spec.depth} x {spec.width}b weight image streamed 3 times under consumer stalls: "
        f"{'bit-exact' if exact else 'MISMATCH'}")
    if not exact:
        return 1

    if synth:
        from boards.yosys import synthesize
        r = synthesize(ConverterChain(down, fifo, up), sta=True)
        say(f"yosys synth_xilinx (xc7): LUT {r.lut}, FF {r.ff}, SRL {r.srl}, LUTRAM {r.lutram}, "
            f"BRAM36 {r.bram36}, BRAM18 {r.bram18}, critical path {r.critical_path_ns} ns (cells only) "
            f"[{r.seconds:.1f} s]")
    return 0
