"""The compiler's flows: ordered lists of passes, and the one runner that runs them.

A pass is ``run(state, options) -> state``: ``load`` turns a path into a qonnx model, ``to_hw`` a model
into a :class:`rtlgen.ir.graph.DataflowGraph`; every pass after it takes a graph and returns a new one,
leaving its input as it was (``stitch``, the last, returns the top's Verilog). Each pass lives in its own
module of :mod:`rtlgen.passes`. The graph passes and the flows that end before FIFOs are here; ``insert_fifos``
(which may size FIFOs by simulating the stitched design) and ``stitch``, and so ``COMPILE`` and ``DEVICE``,
are the backend's (:mod:`rtlgen.backend.compile`, beside :func:`~rtlgen.backend.compile.compile_model`).

    COMPILE     load, to_hw, fold, place_memories, check_fit, insert_duplicates, insert_fifos, stitch
    INSPECT     load, to_hw, fold
    FRONT       load, to_hw                               (`rtlgen partition` cuts the lowered graph)
    DEVICE      insert_duplicates, insert_fifos, stitch   (each device of a partition, on its subgraph)

    load                 qonnx ModelWrapper, cleanup, Gemm -> MatMul, datatypes, topological order
    to_hw                weight quantizers folded, activations -> exact thresholds, layers matched through
                         the op registry: the hardware nodes plus the host's pre/post ONNX nodes
    fold                 PE/SIMD/... per node: a FINN folding file, the folding optimizer under a budget,
                         or FINN's SetFolding for a target
    place_memories       weights at ram_style auto that would sit in LUTs move to BRAM the board leaves
                         free (most LUTs saved per BRAM18 first, within --max-utilization)
    check_fit            the layers' estimate against the board (an error with --strict), before the long steps
    insert_duplicates    a fan-out node where a tensor feeds several nodes
    insert_fifos         width converters where widths differ, a FIFO on every stream, each at its largest
                         occupancy in the layers' composed timing models (rtlgen.passes.size_fifos), or by
                         simulation (--fifo-sizing sim); never below its join bound
    stitch               one Verilog top with FINN's ports (layers converted in parallel, cached)

:class:`Runner` runs a flow, or a stretch of one (``start``/``stop`` by pass name): it times each pass,
says one line per pass, and with ``keep`` checkpoints every graph that changed as ONNX
(``NN_<pass>.onnx``, opens in Netron).
"""

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import onnx

from rtlgen.costmodel import estimate
from rtlgen.fit import fit_line, usage
from rtlgen.ir.graph import INSERTED_ROLES, DataflowGraph
from rtlgen.ir.model_hw import model_hw
from rtlgen.passes.check_fit import check_fit
from rtlgen.passes.fold import fold
from rtlgen.passes.insert import insert_duplicates
from rtlgen.passes.load import load_model
from rtlgen.passes.place_memories import place_memories
from rtlgen.passes.to_hw import to_hw
from sim import progress

__all__ = ["Pass", "LOAD", "TO_HW", "FOLD", "PLACE_MEMORIES", "CHECK_FIT", "INSERT_DUPLICATES", "INSPECT", "FRONT",
           "Runner", "inserted_nodes"]


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable                   # run(state, options) -> state
    summary: Callable = None        # summary(state, options) -> the text after "name: 1.2 s"


def _load(path, options):
    return load_model(path, options.input_dtype)


def _insert_duplicates(graph, options):
    return insert_duplicates(graph)


def _lowered(graph, options):
    return f"{len(graph.nodes)} layers, host ops: {len(graph.host_pre)} before, {len(graph.host_post)} after"


def _folded(graph, options):
    chosen = graph.optimizer
    return f"II {max(n.spec().exp_cycles for n in graph.nodes)} cycles" + (
        "" if chosen is None else f", by the folding optimizer in {chosen.seconds:.1f} s: {chosen.binding} binds")


def _fit(graph, options):
    return fit_line(usage(sum(estimate(n.spec()) for n in graph.nodes), options.board), options.board,
                    "layers' estimate")


def inserted_nodes(graph, options):
    """A pass's summary: how many nodes of each inserted op type the graph has."""
    counts = {}
    for n in graph.nodes:
        if n.op.role in INSERTED_ROLES:
            counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return ", ".join(f"{v} {k}" for k, v in counts.items()) or "nothing inserted"


LOAD = Pass("load", _load)
TO_HW = Pass("to_hw", to_hw, _lowered)
FOLD = Pass("fold", fold, _folded)
PLACE_MEMORIES = Pass("place_memories", place_memories, inserted_nodes)
CHECK_FIT = Pass("check_fit", check_fit, _fit)
INSERT_DUPLICATES = Pass("insert_duplicates", _insert_duplicates, inserted_nodes)

INSPECT = (LOAD, TO_HW, FOLD)
FRONT = (LOAD, TO_HW)                   # `rtlgen partition`: the lowered graph the partitioner cuts


class Runner:
    """Runs passes: times each (``seconds``), keeps each one's result (``results``), says a line per pass
    (``say``), and saves every graph that changed into ``keep`` as ``NN_<pass>.onnx``."""

    def __init__(self, *, say=lambda text: None, keep=None):
        self.say, self.keep = say, keep
        self.seconds, self.results = {}, {}
        self._saved = 0

    def run(self, flow, state, options, *, start=None, stop=None):
        """Run the passes of ``flow`` from ``start`` through ``stop`` (pass names; default: all) on
        ``state``; the last pass's result."""
        names = [p.name for p in flow]
        first = names.index(start) if start else 0
        last = names.index(stop) if stop else len(flow) - 1
        for step in flow[first:last + 1]:
            t = time.perf_counter()
            with progress.step(step.name):        # in a log: a line every 10 s while a long pass runs
                previous, state = state, step.run(state, options)   # a ValueError, not a CompileError, is a bug
            self.seconds[step.name] = time.perf_counter() - t
            self.results[step.name] = state
            detail = f" ({step.summary(state, options)})" if step.summary else ""
            self.say(f"{step.name}: {self.seconds[step.name]:.1f} s{detail}")
            if isinstance(state, DataflowGraph) and state is not previous:      # a check changes nothing to save
                self._checkpoint(step.name, state)
        return state

    def _checkpoint(self, name, graph):
        if self.keep is None:
            return
        self._saved += 1
        Path(self.keep).mkdir(parents=True, exist_ok=True)
        onnx.save(model_hw(graph), str(Path(self.keep) / f"{self._saved:02d}_{name}.onnx"))
