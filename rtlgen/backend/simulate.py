"""Simulating a stitched design: its Verilog (:func:`rtlgen.backend.stitch.to_verilog`) on the stream bench
of :mod:`sim.harness` (cocotb, or the C++ Verilator bench of :mod:`sim.compiled`)."""

import re

from rtlgen.backend.stitch import DEFAULT_TOP_NAME, StitchedAccelerator, to_verilog
from rtlgen.passes.insert import tensor_words
from sim.harness import FULL_RATE, cycle_budget, run_stitched

__all__ = ["simulate_chain", "strip_memory_init"]


def simulate_chain(design, input_words, output_count, *, backpressure=FULL_RATE, simulator=None,
                   monitor=False, probes=(), toplevel=DEFAULT_TOP_NAME, max_cycles=None, drain=None, check=True,
                   compiled=False, blank_memories=False, waves=None):
    """Stream ``input_words`` into ``s_axis_0`` until ``output_count`` words leave ``m_axis_0``.

    ``design`` is a graph (or chain) of HWNodes with DWCs and FIFOs, a :class:`StitchedAccelerator` or
    the Verilog text of :func:`to_verilog` (then ``toplevel`` must be its module name). With a graph,
    ``monitor`` adds the FIFOs' ``max_count`` ports and reads them (``result.probe(f"{fifo}_max_count")``)
    and the cycle limit is :func:`sim.harness.cycle_budget` of its layers. ``compiled`` runs it on the
    C++ Verilator bench of :mod:`sim.compiled` (whole networks, long runs). ``blank_memories`` drops the
    initial contents of every memory (weights, thresholds): for timing-only runs, where they cost build
    time and change nothing. Returns :class:`sim.harness.StreamResult`; words are read on the port
    ``"m_axis_0"``.
    """
    probes = list(probes)
    if not isinstance(design, str):
        top = design if isinstance(design, StitchedAccelerator) else StitchedAccelerator(design, monitor=monitor)
        if top.monitor:
            probes += [f"{name}_max_count" for name in top.fifo_names if f"{name}_max_count" not in probes]
        if max_cycles is None:
            cycles = [s.exp_cycles for s in top.specs]
            frames = -(-len(input_words) // tensor_words(top.graph)[top.graph.input])
            max_cycles = cycle_budget(cycles, max(cycles), frames, len(input_words) + output_count, backpressure)
        design = to_verilog(top, name=toplevel)
        if blank_memories:
            design = strip_memory_init(design)
    return run_stitched(design, input_words, output_count, backpressure=backpressure, simulator=simulator,
                        toplevel=toplevel, probes=probes, max_cycles=max_cycles, drain=drain, check=check,
                        compiled=compiled, waves=waves)


_MEMORY_INIT = re.compile(r"^[ \t]*initial begin\n(?:[ \t]*[\w$\\.]+\[\d+\] = [^;\n]+;\n)+[ \t]*end\n", re.M)


def strip_memory_init(verilog):
    """``verilog`` without the ``initial`` blocks that load memory contents (``mem[3] = 8'h5a;`` lines,
    as Yosys writes Amaranth memories); registers keep their reset values."""
    return _MEMORY_INIT.sub("", verilog)
