"""The compiler's flows: ordered lists of passes, and the one runner that runs them.

A pass is ``run(state, options) -> state``: ``load`` turns a path into a qonnx model, ``to_hw`` a model
into a :class:`rtlgen.ir.graph.DataflowGraph`; every pass after it takes a graph and returns a new one,
leaving its input as it was (``stitch``, the last, returns the top's Verilog). Each pass lives in its own
module of :mod:`rtlgen.passes` (``stitch`` in :mod:`rtlgen.backend.stitch`).

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
(``NN_<pass>.onnx``, opens in Netron). :func:`compile_model` reruns the FIFO rounds from ``fold`` only:
lowering does not depend on the budget.
"""

import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np
import onnx

from rtlgen.backend import stitch
from rtlgen.backend.emit import model_hw
from rtlgen.costmodel import estimate
from rtlgen.errors import CompileWarning
from rtlgen.fit import BRAM18_PER_BRAM36, Budget, fit_line, usage
from rtlgen.ir.graph import INSERTED_ROLES, DataflowGraph
from rtlgen.options import CompileOptions
from rtlgen.passes.check_fit import check_fit
from rtlgen.passes.fold import fold
from rtlgen.passes.latency import fall_through_fifos
from rtlgen.passes.load import load_model
from rtlgen.passes.optimize import RESOURCES, design_estimate
from rtlgen.passes.place_memories import place_memories
from rtlgen.passes.insert import insert_duplicates, insert_dwcs_and_fifos
from rtlgen.passes.size_fifos import analytic_fifo_depths, check_fifo_depths, join_fifo_depths, simulated_fifo_depths
from rtlgen.passes.to_hw import stream_io, to_hw
from sim import progress
from sim.stream_io import StreamIO

__all__ = ["Pass", "COMPILE", "INSPECT", "FRONT", "DEVICE", "Runner", "Compiled", "compile_model", "RoundOptions",
           "FIFO_ROUNDS"]


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable                   # run(state, options) -> state
    summary: Callable = None        # summary(state, options) -> the text after "name: 1.2 s"


def _load(path, options):
    return load_model(path, options.input_dtype)


def _insert_duplicates(graph, options):
    return insert_duplicates(graph)


def _insert_fifos(graph, options):
    if options.fifo_sizing == "analytic":
        depths = analytic_fifo_depths(insert_dwcs_and_fifos(graph))
    elif options.fifo_sizing == "sim":
        depths = simulated_fifo_depths(graph, simulator=options.simulator)
    else:
        depths = join_fifo_depths(graph)
    stitched = check_fifo_depths(insert_dwcs_and_fifos(graph, depths))
    if getattr(options, "objective", "throughput") == "latency":
        stitched = fall_through_fifos(stitched)         # latency 1 each
    return stitched


def _stitch(graph, options):
    return stitch.to_verilog(graph)


def _lowered(graph, options):
    return f"{len(graph.nodes)} layers, host ops: {len(graph.host_pre)} before, {len(graph.host_post)} after"


def _folded(graph, options):
    chosen = graph.optimizer
    return f"II {max(n.spec().exp_cycles for n in graph.nodes)} cycles" + (
        "" if chosen is None else f", by the folding optimizer in {chosen.seconds:.1f} s: {chosen.binding} binds")


def _fit(graph, options):
    return fit_line(usage(sum(estimate(n.spec()) for n in graph.nodes), options.board), options.board,
                    "layers' estimate")


def _inserted(graph, options):
    counts = {}
    for n in graph.nodes:
        if n.op.role in INSERTED_ROLES:
            counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return ", ".join(f"{v} {k}" for k, v in counts.items()) or "nothing inserted"


LOAD = Pass("load", _load)
TO_HW = Pass("to_hw", to_hw, _lowered)
FOLD = Pass("fold", fold, _folded)
PLACE_MEMORIES = Pass("place_memories", place_memories, _inserted)
CHECK_FIT = Pass("check_fit", check_fit, _fit)
INSERT_DUPLICATES = Pass("insert_duplicates", _insert_duplicates, _inserted)
INSERT_FIFOS = Pass("insert_fifos", _insert_fifos, _inserted)
STITCH = Pass("stitch", _stitch)

COMPILE = (LOAD, TO_HW, FOLD, PLACE_MEMORIES, CHECK_FIT, INSERT_DUPLICATES, INSERT_FIFOS, STITCH)
INSPECT = (LOAD, TO_HW, FOLD)
FRONT = (LOAD, TO_HW)                   # `rtlgen partition`: the lowered graph the partitioner cuts
DEVICE = (INSERT_DUPLICATES, INSERT_FIFOS, STITCH)      # each device of a partition, on its subgraph


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


@dataclass
class RoundOptions(CompileOptions):
    """The options of one round of :func:`compile_model`: the user's, and what of the optimizer's budget
    is held back for FIFOs that simulation sized beyond their analytic depths."""
    fifo_reserve: tuple = (0, 0, 0, 0)      # LUT, FF, BRAM18, DSP

    def optimizer_budget(self):
        budget = self.user_budget()
        if budget is None:
            return None
        return Budget(*np.maximum(budget.as_vector() - np.array(self.fifo_reserve, dtype=float), 0))


@dataclass
class Compiled:
    """Everything a compile produced."""
    model_path: str
    folded: object                  # DataflowGraph after folding (the network's layers)
    graph: object                   # the stitched graph: with fan-outs, width converters and FIFOs
    io: StreamIO
    host_ops: dict                  # {"pre": [onnx node names], "post": [...]}
    verilog: str
    seconds: dict = field(default_factory=dict)
    options: CompileOptions = field(default_factory=CompileOptions)

    @property
    def nodes(self):
        """The network's layers, folded (no inserted nodes)."""
        return self.folded.nodes

    @property
    def chain(self):
        """Every node of the stitched design, in graph order."""
        return self.graph.nodes

    @property
    def analytic_cycles(self):
        """Cycles per frame of the slowest node: the design's II."""
        return max(n.spec().exp_cycles for n in self.graph.nodes)


FIFO_ROUNDS = 3      # the optimizer, then up to two more rounds holding back what the sized FIFOs took


def compile_model(model_path, options=None, *, say=lambda text: None, keep=None):
    """Run :data:`COMPILE` on ``model_path``; ``say`` receives one line per finished pass; ``keep`` is a
    directory to save the graph into after every pass.

    The folding optimizer counts each FIFO at the depth the analytic sizing gives it, so with
    ``fifo_sizing="analytic"`` one round is the whole compile. Simulation (``"sim"``) may size some
    deeper (a window generator's bursts), into block RAM the budget did not have: when the stitched
    design is then over the budget, the passes from ``fold`` on run again with that extra cost held back
    from the optimizer's budget (``RoundOptions.fifo_reserve``; at most :data:`FIFO_ROUNDS` rounds, then
    a warning)."""
    options = RoundOptions(**asdict(options or CompileOptions()))
    runner = Runner(say=say, keep=keep)
    lowered = runner.run(COMPILE, model_path, options, stop="to_hw")
    for round_ in range(FIFO_ROUNDS):
        stitched = runner.run(COMPILE, lowered, options, start="fold", stop="insert_fifos")
        over, extra = _sized_fifo_cost(stitched, runner.results["fold"], options)
        if over is None:
            break
        if round_ == FIFO_ROUNDS - 1:
            warnings.warn(f"the design is {_resources_text(over)} over the optimizer's budget after its FIFOs "
                          f"were sized by simulation", CompileWarning, stacklevel=2)
            break
        say(f"the design is {_resources_text(over)} over the budget with its FIFOs sized by simulation "
            f"({_resources_text(extra)} beyond their analytic depths): folding again with that held back")
        options = replace(options, fifo_reserve=tuple(np.maximum(options.fifo_reserve, extra).tolist()))
    verilog = runner.run(COMPILE, stitched, options, start="stitch")
    model = runner.results["load"]
    return Compiled(str(model_path), runner.results["fold"], stitched, stream_io(model, stitched),
                    {"pre": stitched.host_pre, "post": stitched.host_post}, verilog, runner.seconds, options)


def _sized_fifo_cost(stitched, folded, options):
    """(what the stitched design's estimate exceeds the optimizer's budget by, what its FIFOs cost beyond
    their analytic depths), both (LUT, FF, BRAM18, DSP); (None, None) when it fits or no optimizer chose
    the folding."""
    if folded.optimizer is None:
        return None, None
    total = sum(estimate(n.spec()) for n in stitched.nodes)
    used = np.array([float(total[r]) for r in RESOURCES])
    over = np.maximum(used - CompileOptions.optimizer_budget(options).as_vector(), 0)
    if not over.any():
        return None, None
    return over, np.maximum(used - design_estimate(folded), 0)


def _resources_text(amounts):
    scale = {"LUT": 1, "FF": 1, "BRAM36": 1 / BRAM18_PER_BRAM36, "DSP": 1}
    return ", ".join(f"{v * k:,.1f} {n}".replace(".0 ", " ") for v, (n, k) in zip(amounts, scale.items()) if v > 0) \
        or "nothing"
