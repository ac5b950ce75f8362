"""``rtlgen verify OUT --netlist``: simulate what Yosys built instead of the RTL.

``rtlgen build OUT`` writes the ``synth_xilinx`` netlist of the accelerator (the module the shells
instantiate, with its own ports: ``ap_clk``, ``ap_rst_n``, ``s_axis_0_*``, ``m_axis_0_*``) to
``OUT/build/yosys/netlist.v`` and records, in ``OUT/build/yosys/report.json`` under ``"netlist"``, the
sha256 of the design Verilog it was synthesized from. This module checks that the netlist belongs to
OUT's design as it is now, and streams model inputs through it on the same bench and with the same
comparison as ``rtlgen verify`` (:mod:`rtlgen.check.verify`), with the cells simulated by their models
(:mod:`boards.xilinx_sim`: Yosys's, plus rtlgen's behavioural block RAMs).

Simulator: Verilator by default. Yosys's cell library goes through it with the flags the compiled bench
already uses (``-Wno-fatal``, timing ignored: ``specify`` blocks are delays only), and it is the only one
that runs a whole network's netlist (tens of thousands of cells) in seconds to minutes; Icarus
(``--simulator icarus``) takes the cocotb bench, 4-state, and suits small designs. Verilator has no
``x``: every ``x`` a cell model assigns (block RAM collisions, DSP48E1 modes, undriven nets) and every
uninitialized variable is drawn at random from a seed (``--x-assign unique --x-initial unique``), and the
netlist runs under two seeds; outputs that differ between them depend on an unknown value, and are
reported as such, never masked by a fixed fill. Every flip-flop, LUTRAM and block RAM starts from its
``INIT`` (the configured board, no GSR pulse to drive) and the bench pulses ``ap_rst_n`` as the shells do.
"""

import json
import time
from dataclasses import dataclass

import numpy as np

from boards.xilinx_sim import cell_models
from rtlgen.backend.build import design_digest
from rtlgen.backend.stitch import DEFAULT_TOP_NAME
from rtlgen.check.verify import verify_outputs
from sim.outdir import OutDir, OutError
from sim.compiled import network_engine
from sim.harness import FULL_RATE, cycle_budget, run_stitched
from sim.runner import wrap_long_lines

__all__ = ["X_SEEDS", "read_netlist", "NetlistRun",
           "simulate_netlist"]

X_SEEDS = (1, 2)                    # Verilator: the two draws of the x values


def read_netlist(out, verilog):
    """The netlist text of ``out``'s build, checked against ``verilog`` (OUT's design Verilog now);
    :class:`OutError` when there is no build, no netlist, or the netlist is of another (older) design."""
    out = OutDir(out)
    yosys, report = out.yosys_dir, out.yosys_report
    build_again = f"run rtlgen build {out}"
    if not report.is_file():
        raise OutError(f"{out}: no netlist to simulate, the design was not built; {build_again} first")
    try:
        record = json.loads(report.read_text()).get("netlist")
    except (ValueError, AttributeError):
        raise OutError(f"{report}: damaged (not a JSON object); {build_again} again") from None
    if not isinstance(record, dict) or not {"file", "module", "design_sha256"} <= set(record):
        raise OutError(f"{report}: the build kept no netlist (an older rtlgen built it); "
                       f"{build_again} again")
    path = yosys / record["file"]
    if not path.is_file():
        raise OutError(f"{path}: the netlist is missing; {build_again} again")
    if record["design_sha256"] != design_digest(verilog):
        raise OutError(f"{path}: stale, it was synthesized from an older design than {out}'s (compiled since "
                       f"the build); {build_again} again")
    text = path.read_text(errors="replace")
    if f"module {record['module']}(" not in text or not text.rstrip().endswith("endmodule"):
        raise OutError(f"{path}: damaged (no complete module {record['module']}); {build_again} again")
    return text


@dataclass
class NetlistRun:
    """The netlist's outputs for a batch (the first seed's), and, under Verilator, where other seeds
    changed them."""
    outputs: np.ndarray
    frames: int
    cycles: int
    cycles_per_frame: float | None
    simulator: str
    seeds: tuple                    # the x seeds run (empty under Icarus: 4-state)
    x_dependent: int = 0            # output words that differ between the seeds
    broken: str = None              # the stream did not complete (a hang, missing or extra words): what happened

    def x_summary(self):
        return (f"X-DEPENDENT: {self.x_dependent} output words change with the random values Verilator gives "
                f"the netlist's unknown (x) bits (seeds {', '.join(map(str, self.seeds))}): the netlist "
                f"reads an undefined value (an uninitialized memory, a block RAM collision, an undriven net)")


def simulate_netlist(out, x, *, simulator=None, backpressure=None):
    """Model input batch ``x`` through host pre ops, the netlist of ``out``'s build and host post ops:
    a :class:`NetlistRun`. ``simulator``: verilator (default) or icarus; ``backpressure``: a
    :class:`sim.harness.Backpressure` (default: full rate)."""
    verilog, io, report = OutDir(out).read_design()
    netlist = read_netlist(out, verilog)
    x = io.check_input(x)
    words = io.encode(x)
    frames = len(x)
    backpressure = backpressure or FULL_RATE
    per_frame = io.output.words_per_frame
    max_cycles = cycle_budget([layer["exp_cycles"] for layer in report["layers"]],
                              report["analytic_cycles_per_frame"], frames, len(words) + frames * per_frame,
                              backpressure)
    simulator, compiled = network_engine(simulator)
    # Yosys writes wide concatenations on one line, which Verilator's preprocessor refuses.
    design = wrap_long_lines(cell_models() + "\n" + netlist)
    seeds = X_SEEDS if compiled else ()
    results = [run_stitched(design, words, frames * per_frame, toplevel=DEFAULT_TOP_NAME, simulator=simulator,
                            compiled=compiled, max_cycles=max_cycles, x_seed=seed,
                            backpressure=backpressure, check=False)
               for seed in (seeds or (None,))]
    first = results[0]
    # A netlist that hangs or loses words is a wrong netlist (a MISMATCH), not a failed tool.
    for seed, r in zip(seeds or (None,), results):
        got, extra, used = len(r.words("m_axis_0")), len(r.extra_words("m_axis_0")), r.consumed("s_axis_0")
        if got < frames * per_frame or extra or used != len(words):
            broken = (f"the netlist's stream did not complete{f' (x seed {seed})' if seed else ''}: {got} of "
                      f"{frames * per_frame} output words{f' and {extra} extra' if extra else ''} in {r.cycles} "
                      f"cycles, {used} of {len(words)} input words taken")
            return NetlistRun(None, frames, r.cycles, None, simulator, tuple(seeds), 0, broken)
    differ = sum(a != b for r in results[1:] for a, b in zip(first.words("m_axis_0"), r.words("m_axis_0")))
    steady = first.steady_cycles("m_axis_0", per_frame) if frames >= 2 else None
    return NetlistRun(io.decode(first.words("m_axis_0"), frames), frames, first.cycles, steady, simulator,
                      tuple(seeds), differ)


def verify_netlist(out, model, x, *, simulator=None, say=print):
    """``rtlgen verify OUT --netlist``: simulate the netlist on model inputs ``x``, compare with qonnx's
    execution of ``model`` as ``rtlgen verify`` does; say the result. Returns the exit status: 0 iff the
    outputs pass the comparison and, under Verilator, do not change with the x seeds."""
    _, io, report = OutDir(out).read_design()
    start = time.perf_counter()
    run = simulate_netlist(out, x, simulator=simulator)
    if run.broken:
        say(f"netlist MISMATCH: {run.broken}")
        return 1
    how = (f"Verilator, x drawn from seeds {', '.join(map(str, run.seeds))}" if run.seeds
           else f"{run.simulator}, 4-state")
    say(f"simulated the Yosys netlist ({how}) on {run.frames} frame(s) in {time.perf_counter() - start:.1f} s"
        + (f", {run.cycles_per_frame:.1f} cycles/frame (II {report['analytic_cycles_per_frame']})"
           if run.cycles_per_frame is not None else ""))
    result = verify_outputs(model, x, run.outputs, io)
    say(("netlist: " if result.passed else "netlist ") + result.summary())
    if run.x_dependent:
        say(run.x_summary())
    return 0 if result.passed and not run.x_dependent else 1
