"""ONNX in, stitched accelerator out: the compiler's passes, in order, in one list.

    load                 qonnx ModelWrapper, cleanup, Gemm -> MatMul, datatypes, topological order
    to_hw                weight quantizers folded, activations -> exact thresholds, layers matched:
                         a DataflowGraph of hardware nodes plus the host's pre/post ONNX nodes
    fold                 PE/SIMD/... per node: a FINN folding file, or FINN's SetFolding for a target
    place_memories       weights at ram_style auto that would sit in LUTs move to BRAM the board leaves
                         free (most LUTs saved per BRAM18 first, within --max-utilization)
    check_fit            the layers' resource estimate against --board (an error with --strict), before
                         the long steps
    insert_duplicates    DuplicateStreams where a tensor feeds several nodes
    insert_fifos         DWCs where widths differ, a FIFO on every stream, each FIFO at its largest
                         occupancy in the layers' composed timing models (rtlgen.passes.size_fifos, ms), or by
                         simulation (--fifo-sizing sim); never below its join bound
    stitch               one Verilog top with FINN's ports (layers converted in parallel, cached)

Every pass after ``load`` takes the graph (and the options) and returns a new graph, leaving its input
as it was; :data:`PASSES` is the list :func:`compile_model` runs, timing each one and, with
``keep``, saving the graph after each as ONNX (``NN_<pass>.onnx``, opens in Netron). The emit step
(:mod:`rtlgen.backend.emit`) writes what ``rtlgen compile`` leaves in OUT.
"""

import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from rtlgen.backend import stitch
from rtlgen.costmodel import estimate
from rtlgen.passes.size_fifos import FIFO_SIZINGS, analytic_fifo_depths
from sim.stream_io import StreamEnd, StreamIO
from rtlgen.passes.load import CompileError, CompileWarning, load_model
from rtlgen.ir.host import submodel
from rtlgen.passes.lower import lower

__all__ = ["FIFO_SIZINGS", "CompileOptions", "Compiled", "compile_model", "PASSES", "DEFAULT_TARGET_CYCLES"]

DEFAULT_TARGET_CYCLES = 1000        # naive folding target when neither a folding file nor a target fps is given


@dataclass
class CompileOptions:
    folding: str = None             # FINN folding JSON
    target_fps: float = None        # naive folding (FINN SetFolding) for this many frames/s
    clock_mhz: float = 100.0
    board: str = "pynq-z2"
    fifo_sizing: str = "analytic"   # "analytic": depths from the layers' composed timing models;
                                    # "sim": from a simulation of the stitched design;
                                    # "none": 2, and the analytic bound in front of joins
    simulator: str = None
    input_dtype: str = None         # annotate the graph input (a qonnx DataType name), as FINN's notebooks do
    strict: bool = False            # a design estimated over the board is an error, not a warning
    fit: str = None                 # a board: the folding optimizer's budget is its device x max_utilization
    max_utilization: float = 0.8
    budget: str = None              # "lut=N,ff=N,bram36=N,dsp=N": the folding optimizer's budget

    def check(self):
        """Raise CompileError for options no compile can use (before any long step)."""
        import math
        for flag, value in (("--clock-mhz", self.clock_mhz), ("--target-fps", self.target_fps)):
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise CompileError(f"{flag} {value:g}: must be a positive number" if isinstance(value, (int, float))
                                   else f"{flag} {value!r}: must be a positive number")
        from rtlgen.fit import BOARDS
        if self.board not in BOARDS:
            raise CompileError(f"--board {self.board!r} is not supported; legal: {', '.join(BOARDS)}")
        if self.fifo_sizing not in FIFO_SIZINGS:
            raise CompileError(f"--fifo-sizing {self.fifo_sizing!r}: legal: {', '.join(FIFO_SIZINGS)}")
        if self.fit is not None and self.fit not in BOARDS:
            raise CompileError(f"--fit {self.fit!r} is not supported; legal: {', '.join(BOARDS)}")
        if not (isinstance(self.max_utilization, (int, float)) and 0 < self.max_utilization <= 1):
            raise CompileError(f"--max-utilization {self.max_utilization!r}: must be in (0, 1]")
        if self.fit is not None and self.budget is not None:
            raise CompileError("give either --fit or --budget, not both")
        if self.folding and (self.fit is not None or self.budget is not None):
            raise CompileError("give either --folding or --fit/--budget, not both")
        if self.budget is not None:
            if not np.isfinite(self.optimizer_budget().as_vector()).any():     # "" is no budget, not no limit
                raise CompileError(f"--budget {self.budget!r}: names no resource; give lut=N,ff=N,bram36=N,dsp=N "
                                   f"(any subset), or --fit pynq-z2")
        return self

    def optimizer_budget(self):
        """The folding optimizer's budget, or None when it is not asked for."""
        return self.user_budget()

    def user_budget(self):
        """The budget the user asked for (``--fit`` or ``--budget``), or None."""
        from rtlgen.passes.optimize import Budget
        if self.fit is not None:
            return Budget.for_board(self.fit, self.max_utilization)
        if self.budget is not None:
            try:
                return Budget.parse(self.budget)
            except ValueError as exc:
                raise CompileError(str(exc)) from None
        return None

    def target_cycles(self):
        if self.target_fps is None:
            return DEFAULT_TARGET_CYCLES
        if not self.target_fps > 0:
            raise CompileError(f"--target-fps must be positive, not {self.target_fps}")
        from rtlgen.passes.fold import target_cycles
        return max(1, target_cycles(self.target_fps, self.clock_mhz))     # beyond 1 cycle: the most parallel


@dataclass
class RoundOptions(CompileOptions):
    """The options of one round of :func:`compile_model`: the user's, and what of the optimizer's budget
    is held back for FIFOs that simulation sized beyond their analytic depths."""
    fifo_reserve: tuple = (0, 0, 0, 0)      # LUT, FF, BRAM18, DSP

    def optimizer_budget(self):
        from rtlgen.passes.optimize import Budget
        budget = self.user_budget()
        if budget is None:
            return None
        return Budget(*np.maximum(budget.as_vector() - np.array(self.fifo_reserve, dtype=float), 0))


# ---------------------------------------------------------------------------------------------- passes

def to_hw(model, options):
    if getattr(model, "finn_hw", False):          # FINN's hardware-layer ONNX: already a dataflow graph
        from rtlgen.passes.finn_hw import lower_finn_hw
        return lower_finn_hw(model)
    return lower(model)


def fold(graph, options):
    from rtlgen.passes.fold import apply_folding_config, load_folding_config, set_folding

    graph = graph.copy()
    if options.folding:
        if options.target_fps is not None:
            raise CompileError("give either --folding or --target-fps, not both")
        try:
            notes = apply_folding_config(graph.nodes, load_folding_config(options.folding))
        except ValueError as exc:       # the user's file: a bad entry, an illegal PE/SIMD for a node
            raise CompileError(str(exc)) from None
        for note in notes:
            warnings.warn(note, CompileWarning, stacklevel=2)
    elif options.optimizer_budget() is not None:
        from rtlgen.report.board_rate import graph_shell_cycles
        from rtlgen.passes.optimize import NoFit, optimize_folding
        target = options.target_cycles() if options.target_fps is not None else None
        try:
            # no faster II than the zynq shell's DMA can feed (rtlgen.report.board_rate)
            graph.optimizer = optimize_folding(graph, options.optimizer_budget(), target_cycles=target,
                                               io_cycles=lambda g: graph_shell_cycles(g, options.clock_mhz))
        except NoFit as exc:
            raise CompileError(str(exc)) from None
    elif options.target_fps is None and getattr(graph.model, "finn_hw", False):
        pass                        # FINN's hardware-layer ONNX carries the user's folding: kept
    else:
        set_folding(graph, options.target_cycles())
    return graph


def place_memories(graph, options):
    """Weights left at ``ram_style`` auto that auto would build as LUT ROM move to block RAM, the most LUTs
    saved per RAMB18 first, while the layers' BRAM stays within ``max_utilization`` of the board's: BRAM
    left unused is wasted, while LUTs are what every datapath and the glue need. A folding that names the
    style keeps it; after the optimizer (which chose every style under its budget) nothing moves."""
    from rtlgen.fit import BOARDS

    if graph.optimizer is not None:
        return graph
    _, capacity = BOARDS[options.board]
    room = 2 * capacity["BRAM36"] * options.max_utilization - sum(estimate(n.spec()).bram18 for n in graph.nodes)
    moves = []
    for node in graph.nodes:
        if node.folding.get("ram_style", "auto") != "auto" or "ram_style" not in node.op.folding:
            continue
        spec = node.spec()
        if getattr(spec, "weight_ram_style", None) != "distributed" or spec.mem_mode == "external":
            continue
        here, there = estimate(spec), estimate(node.spec(ram_style="block"))
        saved, cost = here.lut - there.lut, there.bram18 - here.bram18
        if saved > 0:
            moves.append((-saved / max(cost, 1), node.name, cost))
    chosen = set()
    for _, name, cost in sorted(moves):
        if cost <= room:
            chosen.add(name)
            room -= cost
    if not chosen:
        return graph            # unchanged (and not saved again under --keep-intermediate)
    graph = graph.copy()
    for node in graph.nodes:
        if node.name in chosen:
            node.folding["ram_style"] = "block"
    return graph


def check_fit(graph, options):
    """The graph unchanged; under ``strict``, an error if its layers alone are estimated over the board.
    A many-level activation kept as a threshold table (no exact requantizer) is a warning."""
    from layers.requant import activation_summary
    from rtlgen.fit import fit_line, fits, usage

    for node in graph.nodes:
        note = (activation_summary(node.spec()) or {}).get("note")
        if note:
            warnings.warn(f"{node.name}: {note}", CompileWarning, stacklevel=2)

    used = usage(sum(estimate(n.spec()) for n in graph.nodes), options.board)
    if options.strict and not fits(used):
        raise CompileError(f"{fit_line(used, options.board)}; lower the folding (--target-fps, --folding) or "
                           f"compile without --strict")
    return graph


def insert_duplicates(graph, options):
    return stitch.insert_duplicates(graph)


def insert_fifos(graph, options):
    if options.fifo_sizing == "analytic":
        depths = analytic_fifo_depths(stitch.insert_dwcs_and_fifos(graph))
    elif options.fifo_sizing == "sim":
        depths = stitch.size_fifos(graph, simulator=options.simulator)
    else:
        depths = stitch.join_fifo_depths(graph)
    return stitch.check_fifo_depths(stitch.insert_dwcs_and_fifos(graph, depths))


PASSES = (
    ("to_hw", to_hw),
    ("fold", fold),
    ("place_memories", place_memories),
    ("check_fit", check_fit),
    ("insert_duplicates", insert_duplicates),
    ("insert_fifos", insert_fifos),
)


# ---------------------------------------------------------------------------------------------- driver

@dataclass
class Compiled:
    """Everything a compile produced."""
    model_path: str
    folded: object                  # DataflowGraph after folding (the network's layers)
    graph: object                   # the stitched graph: with DuplicateStreams, DWCs and FIFOs
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
    """Compile ``model_path``; ``say`` receives one line per finished pass; ``keep`` is a directory to save
    the graph into after every pass.

    The folding optimizer counts each FIFO at the depth the analytic sizing gives it, so with
    ``fifo_sizing="analytic"`` one round is the whole compile. Simulation (``"sim"``) may size some
    deeper (a window generator's bursts), into block RAM the budget did not have: when the stitched
    design is then over the budget, the passes from ``fold`` on run again with that extra cost held back
    from the optimizer's budget (``RoundOptions.fifo_reserve``; at most :data:`FIFO_ROUNDS` rounds, then
    a warning)."""
    options = RoundOptions(**asdict(options or CompileOptions()))
    seconds = {}
    t = time.perf_counter()
    model = load_model(model_path, options.input_dtype)
    seconds["load"] = time.perf_counter() - t
    say(f"load: {seconds['load']:.1f} s")
    graphs, saved = {}, [0]
    lowered = _run_passes(model, PASSES[:1], options, seconds, say, keep, graphs, saved)
    for round_ in range(FIFO_ROUNDS):       # a rerun starts from fold: lowering does not depend on the budget
        state = _run_passes(lowered, PASSES[1:], options, seconds, say, keep, graphs, saved)
        over, extra = _sized_fifo_cost(state, graphs["fold"], options)
        if over is None:
            break
        if round_ == FIFO_ROUNDS - 1:
            warnings.warn(f"the design is {_resources_text(over)} over the optimizer's budget after its FIFOs "
                          f"were sized by simulation", CompileWarning, stacklevel=2)
            break
        say(f"the design is {_resources_text(over)} over the budget with its FIFOs sized by simulation "
            f"({_resources_text(extra)} beyond their analytic depths): folding again with that held back")
        options = replace(options, fifo_reserve=tuple(np.maximum(options.fifo_reserve, extra).tolist()))
    t = time.perf_counter()
    verilog = stitch.to_verilog(state)
    seconds["stitch"] = time.perf_counter() - t
    say(f"stitch: {seconds['stitch']:.1f} s")
    io = _stream_io(model, state)
    return Compiled(str(model_path), graphs["fold"], state, io, {"pre": state.host_pre, "post": state.host_post},
                    verilog, seconds, options)


def _run_passes(state, passes, options, seconds, say, keep, graphs, saved):
    """Run ``passes`` from ``state``; the last graph. ``graphs`` collects each pass's graph, ``saved`` counts
    the graphs written to ``keep``."""
    for name, run in passes:
        t = time.perf_counter()
        previous, state = state, run(state, options)    # a ValueError that is not a CompileError is a bug
        seconds[name] = time.perf_counter() - t
        graphs[name] = state
        say(f"{name}: {seconds[name]:.1f} s ({_summary(name, state, options)})")
        if keep is not None and state is not previous:     # a check (check_fit) changes nothing to save
            saved[0] += 1
            from rtlgen.backend.emit import model_hw
            Path(keep).mkdir(parents=True, exist_ok=True)
            import onnx
            onnx.save(model_hw(state), str(Path(keep) / f"{saved[0]:02d}_{name}.onnx"))
    return state


def _sized_fifo_cost(stitched, folded, options):
    """(what the stitched design's estimate exceeds the optimizer's budget by, what its FIFOs cost beyond
    their analytic depths), both (LUT, FF, BRAM18, DSP); (None, None) when it fits or no optimizer chose
    the folding."""
    if folded.optimizer is None:
        return None, None
    from rtlgen.passes.optimize import RESOURCES, _whole_design
    total = sum(estimate(n.spec()) for n in stitched.nodes)
    used = np.array([float(total[r]) for r in RESOURCES])
    over = np.maximum(used - CompileOptions.optimizer_budget(options).as_vector(), 0)
    if not over.any():
        return None, None
    return over, np.maximum(used - _whole_design(folded), 0)


def _resources_text(amounts):
    scale = {"LUT": 1, "FF": 1, "BRAM36": 0.5, "DSP": 1}
    return ", ".join(f"{v * k:,.1f} {n}".replace(".0 ", " ") for v, (n, k) in zip(amounts, scale.items()) if v > 0) \
        or "nothing"


def _summary(name, graph, options):
    if name == "to_hw":
        return f"{len(graph.nodes)} layers, host ops: {len(graph.host_pre)} before, {len(graph.host_post)} after"
    if name == "fold":
        chosen = graph.optimizer
        return f"II {max(n.spec().exp_cycles for n in graph.nodes)} cycles" + (
            "" if chosen is None else f", by the folding optimizer in {chosen.seconds:.1f} s: {chosen.binding} binds")
    if name == "check_fit":
        from rtlgen.fit import fit_line, usage
        return fit_line(usage(sum(estimate(n.spec()) for n in graph.nodes), options.board),
                        options.board, "layers' estimate")
    counts = {}
    for n in graph.nodes:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return ", ".join(f"{v} {k}" for k, v in counts.items() if k in (
        "DuplicateStreams", "StreamingFIFO", "StreamingDataWidthConverter")) or "nothing inserted"


def _stream_io(model, graph, last=None):
    """How the model's input and output map onto ``graph``'s streams (its first consumer's and last
    producer's word widths); the output is ``last``'s when given (the last device of a partition)."""
    if getattr(model, "finn_hw", False):
        from rtlgen.passes.finn_hw import finn_stream_io
        return finn_stream_io(model, graph, last)
    last_graph = last or graph
    node, port = graph.consumers(graph.input)[0]
    first, last = node.spec(), last_graph.producer(last_graph.output)[0].spec()
    t_in, t_out = graph.tensors[graph.input], last_graph.tensors[last_graph.output]
    in_bits, out_bits = t_in.dtype.bitwidth(), t_out.dtype.bitwidth()
    graph_in, graph_out = model.graph.input[0].name, model.graph.output[0].name
    ends = []
    for t, lanes in ((t_in, first.in_width // in_bits), (t_out, last.out_width // out_bits)):
        ends.append(StreamEnd(t.name, tuple(t.shape), t.dtype, t.scale, lanes, t.kind, t.gain, t.offset,
                              t.rounding, t.fixed))
    pre = submodel(model, graph.host_pre, [graph_in], [t_in.name], "host_pre")
    post = submodel(model, graph.host_post, [t_out.name], [graph_out], "host_post")
    return StreamIO(graph_in, tuple(model.get_tensor_shape(graph_in)), graph_out, *ends, pre, post)
