"""Simulating a stitched design: its Verilog (:func:`rtlgen.backend.stitch.to_verilog`) on the stream bench
of :mod:`sim.harness` (cocotb, or the C++ Verilator bench of :mod:`sim.compiled`, built from cached
per-layer parts by :mod:`sim.parts`, whose builds run through :mod:`rtlgen.backend.jobs`); and FIFO depths
sized by such a simulation (``--fifo-sizing sim``, :func:`simulated_fifo_depths`)."""

import re

from rtlgen.backend import jobs
from rtlgen.backend.stitch import DEFAULT_TOP_NAME, StitchedAccelerator, to_verilog
from rtlgen.analyses.timing import tensor_words
from rtlgen.ir.graph import as_graph
from rtlgen.passes.insert import insert_dwcs_and_fifos
from rtlgen.passes.size_fifos import MAX_SIZING_DEPTH, branch_fifo_bounds, finn_fifo_depth, tensor_fifo_depths
from sim import parts
from sim.compiled import network_engine
from sim.harness import FULL_RATE, cycle_budget, run_stitched
from sim.runner import SimulationError

__all__ = ["simulate_chain", "strip_memory_init", "simulated_fifo_depths"]


def _parts_runner(function, items):
    """The compiled bench's layers (sim.parts) built as the compiler's other per-layer jobs are: on a local
    process pool, or on the Dask cluster of --cluster / $RTLGEN_CLUSTER; when the local pool breaks (a
    worker killed for memory), the parts it had not finished are built here."""
    items, done = list(items), set()
    try:
        for index, result in jobs.completed(function, items):
            done.add(index)
            yield index, result
    except jobs.WorkersLost:
        for index, item in enumerate(items):
            if index not in done:
                yield index, function(item)


parts.use_runner(_parts_runner)


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


def simulated_fifo_depths(graph, *, frames=3, simulator=None, max_depth=MAX_SIZING_DEPTH):
    """FIFO depths by simulation (FINN's InsertAndSetFIFODepths): ``{fifo name: depth}``.

    ``graph`` (or a chain) has no DWCs and FIFOs yet. Every FIFO is first made deep (see
    :func:`tensor_fifo_depths`); ``frames`` frames of zero words stream in at full rate (every layer's
    timing is data independent, so on Verilator the memories are left blank) and out at full rate;
    then each FIFO gets :func:`finn_fifo_depth` of the largest occupancy it saw (at most its deep
    depth), and never less than its join bound (:func:`branch_fifo_bounds`). The sized design then
    repeats the deep design's timing cycle for cycle. The names match ``insert_dwcs_and_fifos(graph)``.
    A deep design that still deadlocks is an error naming the joins' FIFOs.

    As in FINN, the input arrives as fast as the design takes it, so the FIFO in front of the slowest
    layer fills with the backlog up to its deep depth: in a linear chain that depth usually buys nothing
    (the slowest layer is never starved either way) and can be trimmed by hand.
    """
    graph = as_graph(graph)
    deep = tensor_fifo_depths(graph, max_depth=max_depth)
    sized = insert_dwcs_and_fifos(graph, deep)
    words = tensor_words(sized)
    in_words, out_words = words[sized.input] * frames, words[sized.output] * frames
    simulator, compiled = network_engine(simulator)
    try:
        result = simulate_chain(sized, [0] * in_words, out_words, simulator=simulator, monitor=True,
                                toplevel="fifo_sizing", compiled=compiled,
                                blank_memories=compiled)         # Verilator reads them as 0, Icarus as X
    except SimulationError as exc:
        raise ValueError(f"FIFO sizing: the design with deep FIFOs ({', '.join(f'{k}={v}' for k, v in deep.items() if v > 2)}) "
                         f"does not finish ({str(exc).splitlines()[0]})") from None
    bounds = branch_fifo_bounds(sized)
    # A FIFO that filled up (count = depth + 1) was holding back its producer in the deep run already;
    # its deep depth repeats that run exactly, so no FIFO grows beyond its deep depth.
    return {name: max(finn_fifo_depth(min(result.probe(f"{name}_max_count"), depth)), bounds.get(name, 0))
            for name, depth in deep.items()}
