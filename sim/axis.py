"""AXI-Stream driver and monitor for cocotb, run inside the simulator.

One coroutine drives every stream of the design cycle by cycle: per-cycle Python is the simulation
bottleneck, so one loop with cached handles beats a coroutine per port. The protocol as the drivers
play it (AXI-Stream, Amaranth ``lib.stream``):

- a source presents a word by raising ``valid`` with the payload and holds both until the word moves
  (``valid`` and ``ready`` high at a rising edge); with backpressure it inserts random gaps between words;
- a sink drives ``ready`` high every cycle, or, with backpressure, at random;
- every transfer is stamped with the index of the clock edge that moved it, and every source word
  with the edge at which it was first presented.

After the sinks have their expected words the bench keeps ``ready`` high for ``drain`` more cycles:
any word that still comes out is reported as extra (a duplicated or invented word).
"""

import random

from cocotb.clock import Clock
from cocotb.types import Logic
from cocotb.triggers import ReadOnly, RisingEdge

__all__ = ["StreamBench", "reset", "unsigned_value", "CLOCK_NS"]

CLOCK_NS = 10                   # the benches' clock period


async def reset(dut, *, clock="clk", reset="rst", active_high=True, cycles=2):
    """Start the clock (10 ns) and hold reset for ``cycles`` edges."""
    clk = getattr(dut, clock)
    Clock(clk, CLOCK_NS, unit="ns").start(start_high=False)
    rst = getattr(dut, reset)
    rst.value = int(active_high)
    for _ in range(cycles):
        await RisingEdge(clk)
    rst.value = int(not active_high)


def unsigned_value(value):
    # A 1-bit port reads as a Logic, wider ones as a LogicArray.
    return int(value) if isinstance(value, Logic) else value.to_unsigned()


class _Source:
    def __init__(self, dut, ports, words):
        self.data, self.valid, self.ready = (getattr(dut, p) for p in ports)
        self.words = words
        self.pos = 0            # index of the word presented or next to present
        self.shown = False      # a word is on the bus, held until it moves
        self.valid_now = 0      # what valid is driven to (written only on change)
        self.cycles = []
        self.offered = []       # the edge at which each word was first presented (valid raised)
        self.valid.value = 0


class _Sink:
    def __init__(self, dut, ports, count):
        self.data, self.valid, self.ready = (getattr(dut, p) for p in ports)
        self.count = count
        self.words, self.cycles, self.extra = [], [], []
        self.ready_now = 0
        self.ready.value = 0


class StreamBench:
    """Push words into the sources and collect words from the sinks of ``dut``.

    ``sources``: ``{name: ((data, valid, ready), [words])}``; ``sinks``: ``{name: ((data, valid, ready),
    expected_count)}``, signal names as in the Verilog. ``valid_prob`` / ``ready_prob`` are the per-cycle
    chances that a source offers its next word / a sink is ready (1.0 = full rate), drawn from ``seed``.
    """

    def __init__(self, dut, *, sources, sinks, clock="clk", seed=0, valid_prob=1.0, ready_prob=1.0):
        self.clk = getattr(dut, clock)
        self.sources = {n: _Source(dut, ports, words) for n, (ports, words) in sources.items()}
        self.sinks = {n: _Sink(dut, ports, count) for n, (ports, count) in sinks.items()}
        self.rng = random.Random(seed)
        self.valid_prob, self.ready_prob = valid_prob, ready_prob

    async def run(self, *, max_cycles, drain=0):
        """Run until every sink has its words and every source is consumed (plus ``drain`` cycles), or
        ``max_cycles`` pass."""
        rng, vp, rp = self.rng, self.valid_prob, self.ready_prob
        sources, sinks = list(self.sources.values()), list(self.sinks.values())
        cycle, done_at, timed_out = 0, None, False
        while True:
            await RisingEdge(self.clk)
            cycle += 1
            for s in sources:
                if s.shown:
                    continue        # hold valid and payload until the word moves
                if s.pos < len(s.words) and (vp >= 1.0 or rng.random() < vp):
                    s.data.value = s.words[s.pos]
                    s.shown = True
                    s.offered.append(cycle)
                if s.shown != s.valid_now:
                    s.valid.value = s.valid_now = int(s.shown)
            for k in sinks:
                ready = 1 if done_at is not None or rp >= 1.0 or rng.random() < rp else 0
                if ready != k.ready_now:
                    k.ready.value = k.ready_now = ready
            await ReadOnly()
            for s in sources:
                if s.shown and s.ready.value == 1:
                    s.cycles.append(cycle)
                    s.pos += 1
                    s.shown = False
            for k in sinks:
                if k.ready_now and k.valid.value == 1:
                    word = unsigned_value(k.data.value)
                    if len(k.words) < k.count:
                        k.words.append(word)
                        k.cycles.append(cycle)
                    else:
                        k.extra.append(word)
            # done once every sink has its words and every source is consumed (a layer may still be
            # swallowing a frame's unused tail after its last output)
            if done_at is None and all(len(k.words) >= k.count for k in sinks) and \
                    all(s.pos == len(s.words) for s in sources):
                done_at = cycle
            if done_at is not None and cycle - done_at >= drain:
                break
            if cycle >= max_cycles:
                timed_out = True
                break
        return self._result(cycle, timed_out)

    def _result(self, cycles, timed_out):
        return {
            "cycles": cycles,
            "timed_out": timed_out,
            "sources": {n: {"consumed": s.pos, "cycles": s.cycles, "offered": s.offered} for n, s in self.sources.items()},
            "sinks": {n: {"words": [hex(w) for w in k.words], "cycles": k.cycles,
                          "extra": [hex(w) for w in k.extra]} for n, k in self.sinks.items()},
        }
