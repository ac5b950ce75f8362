"""Stream words through an Amaranth component in a real simulator: the helper every layer test uses.

>>> result = simulate_streams(StreamingFIFO(spec), inputs={"i": words}, outputs={"o": len(words)},
...                           backpressure=Backpressure(seed=1))
>>> result.words("o"), result.steady_cycles("o", words_per_frame=16)
"""

from dataclasses import dataclass

from sim.runner import SimulationError, build, run_cocotb

__all__ = ["Backpressure", "StreamResult", "simulate_streams", "stream_ports"]


@dataclass(frozen=True)
class Backpressure:
    """Random valid gaps on inputs and ready stalls on outputs, reproducible from ``seed``."""
    seed: int = 0
    valid_prob: float = 0.6     # chance per cycle that a source offers its next word
    ready_prob: float = 0.6     # chance per cycle that a sink is ready

    def __post_init__(self):
        for name in ("valid_prob", "ready_prob"):
            p = getattr(self, name)
            if not 0.0 < p <= 1.0:
                raise ValueError(f"Backpressure {name} must be in (0, 1], not {p!r}")


FULL_RATE = Backpressure(seed=0, valid_prob=1.0, ready_prob=1.0)


@dataclass(frozen=True)
class StreamResult:
    """What came out of a simulation: words and transfer cycles per port, probe values at the end."""
    raw: dict

    def words(self, port):
        return [int(w, 16) for w in self.raw["sinks"][port]["words"]]

    def extra_words(self, port):
        return [int(w, 16) for w in self.raw["sinks"][port]["extra"]]

    def out_cycles(self, port):
        return self.raw["sinks"][port]["cycles"]

    def in_cycles(self, port):
        return self.raw["sources"][port]["cycles"]

    def offered_cycles(self, port):
        """The edge at which each word of source ``port`` was first presented (cocotb benches only)."""
        return self.raw["sources"][port]["offered"]

    def consumed(self, port):
        return self.raw["sources"][port]["consumed"]

    def axilite_responses(self):
        """BRESP of each write in ``axilite_writes``, in order (0 = OKAY, 2 = SLVERR)."""
        return self.raw["axilite_responses"]

    def probe(self, name):
        return self.raw["probes"][name]

    @property
    def cycles(self):
        return self.raw["cycles"]

    def latency(self, in_port, out_port):
        """Edges from the first input transfer to the last output transfer, inclusive of both."""
        return self.out_cycles(out_port)[-1] - self.in_cycles(in_port)[0] + 1

    def steady_cycles(self, port, words_per_frame):
        """Cycles per frame in steady state: spacing of frame ends at ``port``, averaged over the later
        half of the frames (a design's first frames can come faster, or slower while its FIFOs fill)."""
        ends = self.out_cycles(port)[words_per_frame - 1::words_per_frame]
        if len(ends) < 2:
            raise ValueError(f"steady_cycles needs at least 2 frames at {port!r}, got {len(ends)}")
        start = (len(ends) - 1) // 2
        return (ends[-1] - ends[start]) / (len(ends) - 1 - start)


def cycle_budget(layer_cycles, ii, frames, words, backpressure=FULL_RATE):
    """The cycle limit of a whole-network run: every layer's frame time four times over (pipeline
    fill), two IIs per frame, eight cycles per stream word, all stretched by the backpressure; a run
    that needs more is hung (a deadlock), not slow. ``layer_cycles`` are the layers' cycles per frame,
    ``ii`` the largest, ``words`` the input plus output words."""
    slack = 1.0 / min(backpressure.valid_prob, backpressure.ready_prob)
    return int(10_000 + slack * (4 * sum(layer_cycles) + 2 * frames * ii + 8 * words))


def run_stitched(verilog, input_words, output_count, *, toplevel="finn_design_wrapper", **kwargs):
    """Stream ``input_words`` into the ``s_axis_0`` of a stitched accelerator's Verilog (FINN's top
    ports: ``ap_clk``, active-low ``ap_rst_n``) until ``output_count`` words leave ``m_axis_0``;
    ``kwargs`` as for :func:`simulate_streams`. What `rtlgen sim`, the shells and the driver's simulated
    board share."""
    return simulate_streams(verilog, inputs={"s_axis_0": list(input_words)}, outputs={"m_axis_0": int(output_count)},
                            toplevel=toplevel, port_style="axis", clock="ap_clk", reset="ap_rst_n",
                            reset_active_high=False, **kwargs)


def stream_ports(path, *, style="amaranth"):
    """Verilog names (data, valid, ready) of a stream member: ``i`` -> ``i__payload``...; ``axis``: FINN's."""
    if style == "amaranth":
        return [f"{path}__payload", f"{path}__valid", f"{path}__ready"]
    if style == "axis":
        return [f"{path}_tdata", f"{path}_tvalid", f"{path}_tready"]
    raise ValueError(f"port style must be 'amaranth' or 'axis', not {style!r}")


def simulate_streams(design, *, inputs, outputs, backpressure=FULL_RATE, simulator=None, toplevel="top",
                     port_style="amaranth", clock="clk", reset="rst", reset_active_high=True,
                     probes=(), max_cycles=None, drain=None, check=True, axilite_writes=(),
                     axilite_prefix="s_axilite_", compiled=False, waves=None, x_seed=None):
    """Simulate ``design`` with ``inputs`` ``{port: [words]}`` until ``outputs`` ``{port: count}`` arrive.

    ``compiled`` runs the job on :mod:`sim.compiled` (a C++ Verilator bench, ``simulator`` is ignored):
    one source, one sink, no AXI-Lite writes, and orders of magnitude faster on long runs; ``waves``
    (a path) makes it write a VCD there; ``x_seed`` (compiled only) draws every ``x`` and uninitialized
    value at random from that seed (:func:`sim.compiled.run_compiled`), where Verilator would otherwise
    fix them; the cocotb benches need none (Icarus is a 4-state simulator: an ``x`` stays ``x``).

    ``axilite_writes`` ``[(byte address, 32-bit data)]`` are written (cocotbext-axi manager on the
    ports starting with ``axilite_prefix``) after reset and before the streams start.

    With ``check`` (the default) a run that times out, leaves input words unconsumed or produces words
    beyond the expected count raises :class:`SimulationError` naming the port. ``drain`` cycles (default
    32) run after the last expected word to catch such extra words.
    """
    total = sum(len(w) for w in inputs.values()) + sum(outputs.values())
    slack = 1.0 / min(backpressure.valid_prob, backpressure.ready_prob)
    job = {
        "sources": {p: {"ports": stream_ports(p, style=port_style), "words": [hex(int(w)) for w in words]}
                    for p, words in inputs.items()},
        "sinks": {p: {"ports": stream_ports(p, style=port_style), "count": int(n)} for p, n in outputs.items()},
        "clock": clock, "reset": reset, "reset_active_high": reset_active_high,
        "seed": backpressure.seed, "valid_prob": backpressure.valid_prob, "ready_prob": backpressure.ready_prob,
        "max_cycles": int(max_cycles or 1000 + 8 * slack * total),
        "drain": 32 if drain is None else drain, "probes": list(probes),
        "tie_low": _idle_inputs(design, {n for p in inputs for n in stream_ports(p, style=port_style)}),
        "axilite_writes": [[int(a), int(d)] for a, d in axilite_writes], "axilite_prefix": axilite_prefix,
    }
    if compiled:
        from sim.compiled import run_compiled
        from sim.runner import to_verilog
        text = design if isinstance(design, str) else to_verilog(design, toplevel)
        result = StreamResult(run_compiled(text, toplevel, job, waves=waves, x_seed=x_seed))
    else:
        built = build(design, toplevel=toplevel, simulator=simulator)
        result = StreamResult(run_cocotb(built, "sim.tb_stream", job))
    if check:
        _check_complete(result, inputs, outputs, toplevel)
    return result


def _idle_inputs(design, driven):
    """Input ports the bench does not drive (e.g. an AXI-Lite slave): held at 0, not left at X."""
    if isinstance(design, str):
        return []
    from amaranth.lib import wiring
    names = ["__".join(str(part) for part in path) for path, member, _ in design.signature.flatten(design)
             if member.flow == wiring.In]
    return [n for n in names if n not in driven]


def _check_complete(result, inputs, outputs, toplevel):
    for port, n in outputs.items():
        got = len(result.words(port))
        if got < n:
            raise SimulationError(f"{toplevel}: timed out after {result.cycles} cycles with {got} of {n} "
                                  f"words at {port!r}")
        if result.extra_words(port):
            raise SimulationError(f"{toplevel}: {len(result.extra_words(port))} extra word(s) at {port!r} "
                                  f"after the expected {n}")
    for port, words in inputs.items():
        if result.consumed(port) != len(words):
            raise SimulationError(f"{toplevel}: consumed {result.consumed(port)} of {len(words)} words at {port!r}")
