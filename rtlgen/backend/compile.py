"""The compile whole: the flows that end in a stitched top (``COMPILE``, ``DEVICE``), their last two passes,
and :func:`compile_model`, which runs ``COMPILE`` into a :class:`Compiled`: the design, and what is
computed once on it (its latency, its rate behind the board's shell, its ONNX, its report's rows) that
OUT's writers save as they are.

``insert_fifos`` and ``stitch`` are the backend's passes: FIFOs may be sized by simulating the stitched
design (``--fifo-sizing sim``, :func:`rtlgen.backend.simulate.simulated_fifo_depths`), and ``stitch``
writes the top (:mod:`rtlgen.backend.stitch`). The passes before them, the ``Runner`` and what each pass
does: :mod:`rtlgen.flows`. :func:`compile_model` reruns the FIFO rounds from ``fold`` only: lowering does
not depend on the budget.
"""

import warnings
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from rtlgen.analyses.board_rate import board_figures, top_width
from rtlgen.analyses.timing import latency_cycles
from rtlgen.backend import stitch
from rtlgen.backend.simulate import simulated_fifo_depths
from rtlgen.costmodel import estimate
from rtlgen.errors import CompileWarning
from rtlgen.fit import BRAM18_PER_BRAM36, Budget
from rtlgen.ir.model_hw import model_hw
from rtlgen.flows import (CHECK_FIT, FOLD, INSERT_DUPLICATES, LOAD, PLACE_MEMORIES, TO_HW, Pass, Runner,
                          inserted_nodes)
from rtlgen.options import CompileOptions
from rtlgen.passes.insert import insert_dwcs_and_fifos
from rtlgen.passes.fifo_links import chain_layers, unlinked
from rtlgen.passes.latency import fall_through_fifos
from rtlgen.passes.optimize import RESOURCES, design_estimate
from rtlgen.passes.size_fifos import analytic_fifo_depths, check_fifo_depths, join_fifo_depths
from rtlgen.passes.to_hw import stream_io
from rtlgen.report.graph import graph_report
from sim.stream_io import StreamIO

__all__ = ["INSERT_FIFOS", "STITCH", "COMPILE", "DEVICE", "Compiled", "compile_model", "RoundOptions", "FIFO_ROUNDS"]


def _insert_fifos(graph, options):
    if options.fifo_sizing == "analytic":
        depths = analytic_fifo_depths(insert_dwcs_and_fifos(graph))
    elif options.fifo_sizing == "sim":
        depths = simulated_fifo_depths(graph, simulator=options.simulator)
    else:
        depths = join_fifo_depths(graph)
    stitched = check_fifo_depths(insert_dwcs_and_fifos(graph, depths))
    if getattr(options, "objective", "throughput") == "latency":
        stitched = chain_layers(fall_through_fifos(stitched))   # latency 1 each; none between chained layers
    else:
        stitched = unlinked(stitched)       # a latency design's folding.json: planned for the FIFOs it gets
    return stitched


def _stitch(graph, options):
    return stitch.to_verilog(graph)


INSERT_FIFOS = Pass("insert_fifos", _insert_fifos, inserted_nodes)
STITCH = Pass("stitch", _stitch)

COMPILE = (LOAD, TO_HW, FOLD, PLACE_MEMORIES, CHECK_FIT, INSERT_DUPLICATES, INSERT_FIFOS, STITCH)
DEVICE = (INSERT_DUPLICATES, INSERT_FIFOS, STITCH)      # each device of a partition, on its subgraph


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
    latency_cycles: int             # one frame into the idle design, first input word to last output word
    board: dict                     # frames/s and latency behind the zynq shell (analyses.board_rate.board_figures)
    model_hw: object = None         # the stitched graph as FINN-style ONNX (ir.model_hw): OUT's model_hw.onnx
    rows: list = None               # report.json's row per node and its TOTAL (report.graph.graph_report)
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
    io = stream_io(runner.results["load"], stitched)
    latency = latency_cycles(stitched)
    return Compiled(str(model_path), runner.results["fold"], stitched, io,
                    {"pre": stitched.host_pre, "post": stitched.host_post}, verilog, latency,
                    _board(stitched, io, latency, options.clock_mhz), model_hw(stitched), graph_report(stitched),
                    runner.seconds, options)


def _board(stitched, io, latency, clock_mhz):
    """The design's figures behind the zynq shell's DMA, at the stitched top's ports."""
    first, last = stitched.nodes[0].spec(), stitched.nodes[-1].spec()
    ii = max(n.spec().exp_cycles for n in stitched.nodes)
    return board_figures(ii=ii, latency=latency, clock_mhz=clock_mhz, in_width=top_width(first.in_width),
                         out_width=top_width(last.out_width), in_words=io.input.words_per_frame,
                         out_words=io.output.words_per_frame, dense_in_bits=io.input.words_per_frame * first.in_width)


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
