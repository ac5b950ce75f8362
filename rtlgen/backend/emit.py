"""What ``rtlgen compile`` writes into OUT, and what ``rtlgen sim`` reads back.

OUT/
  finn_design_wrapper.v   the stitched accelerator (FINN's top ports)
  model_hw.onnx           the dataflow chain as FINN-style nodes with their attributes (opens in Netron)
  folding.json            the folding used (FINN format: feed it back with --folding)
  report.json             per layer: op, folding, widths, expected cycles, resource estimate; totals; host ops;
                          frames/s and latency of the accelerator and of the board (behind the zynq shell)
  report.html             the same as a page with plots (and Yosys / verify results once they have run)
  io.json, host_pre.onnx, host_post.onnx   how the model's tensors map onto the streams
  .rtlgen-manifest.json   what the compile wrote, and the model's sha256 and path

Every name and every write is :class:`sim.outdir.OutDir`'s: a compile writes these into a new directory
beside OUT (:meth:`~sim.outdir.OutDir.replacing`), which is then swapped in. What is written is what the
compile computed (:class:`rtlgen.backend.compile.Compiled`): nothing here derives a figure or a graph again.
"""

from pathlib import Path

import numpy as np

from sim.outdir import OutDir
from rtlgen.analyses.board_rate import top_width
from rtlgen.fit import BOARDS, BRAM18_PER_BRAM36, fits, usage
from rtlgen.passes.fold import folding_config
from rtlgen.report.html import write_html
from rtlgen.backend.stitch import DEFAULT_TOP_NAME

__all__ = ["write_outputs", "build_report"]

assert OutDir.verilog == f"{DEFAULT_TOP_NAME}.v"      # the top's module name is its file's


def write_outputs(compiled, out):
    """Write the design ``compiled`` into the directory ``out``: its report put together first (from what
    the compile computed), then every file at once (:meth:`sim.outdir.OutDir.write_design`), then the
    page of the report."""
    # The weights live inside the Verilog (memory initial values), so no mem/*.dat images are written: a
    # file that the design does not read would invite edits that change nothing.
    report = build_report(compiled)
    out = OutDir(out)
    out.write_design(verilog=compiled.verilog, io=compiled.io, folding=folding_config(compiled.nodes),
                     model_hw=compiled.model_hw, report=report)
    write_html(out)


def build_report(compiled):
    layers, total = compiled.rows[:-1], compiled.rows[-1]
    model = compiled.io
    ii = compiled.analytic_cycles
    latency = compiled.latency_cycles
    report = {
        "model": str(Path(compiled.model_path).resolve()),
        "top": DEFAULT_TOP_NAME,
        "analytic_cycles_per_frame": ii,
        "layers": [dict(r, sources=list(_sources(compiled, r["name"]))) for r in layers],
        "totals": total["resources"],
        "host_ops": compiled.host_ops,
        "input": {"model_tensor": model.model_input, "stream_tensor": model.input.tensor,
                  "dtype": model.input.dtype.name, "words_per_frame": model.input.words_per_frame,
                  "width": top_width(compiled.chain[0].spec().in_width)},
        "output": {"model_tensor": model.model_output, "stream_tensor": model.output.tensor,
                   "dtype": model.output.dtype.name, "words_per_frame": model.output.words_per_frame,
                   "width": top_width(compiled.chain[-1].spec().out_width)},
        "compile_seconds": {k: round(v, 3) for k, v in compiled.seconds.items()},
        "clock_mhz": compiled.options.clock_mhz,
        "frames_per_second": round(compiled.options.clock_mhz * 1e6 / ii, 1),
        # one frame into the idle design, first input word to last output word (the timing models)
        "latency_cycles": latency,
        "latency_ns": round(latency * 1e3 / compiled.options.clock_mhz, 1),
        "fit": _fit(total["resources"], compiled.options.board),
        "optimizer": _optimizer(compiled.folded.optimizer, compiled.options),
    }
    report.update(compiled.board)          # on the board: behind the zynq shell's DMA, as the compile found it
    return report


def _optimizer(result, options):
    """What the folding optimizer chose against (None when the folding came from a file or --target-fps):
    the user's budget, and what of it was held back for FIFOs that simulation sized deeper than their
    analytic bound (``RoundOptions.fifo_reserve``)."""
    if result is None:
        return None
    names, scale = ("LUT", "FF", "BRAM36", "DSP"), np.array([1, 1, 1 / BRAM18_PER_BRAM36, 1])     # BRAM18 -> BRAM36
    budget = options.user_budget().as_vector() * scale
    held = np.asarray(options.fifo_reserve, dtype=float) * scale
    limit = lambda value: float(value) if value != float("inf") else None      # JSON has no infinity: unlimited
    return {"budget": {k: limit(v) for k, v in zip(names, budget)},
            "held_for_fifos": {k: float(v) for k, v in zip(names, held) if v},
            "estimate": {"LUT": result.used["LUT"], "FF": result.used["FF"], "BRAM36": result.used["BRAM18"] / BRAM18_PER_BRAM36,
                         "DSP": result.used["DSP"]},
            "binding": result.binding, "ii": result.ii, "seconds": round(result.seconds, 2),
            "options": result.options, "rounds": result.rounds,
            # the zynq shell's data movement at the chosen folding; io_bound: the budget allowed budget_ii,
            # faster than the shell can feed, so the cheapest design at the shell's bound was taken instead
            "io_cycles_per_frame": None if result.io_cycles is None else round(result.io_cycles, 3),
            "io_bound": result.io_bound, "budget_ii": result.budget_ii,
            # with --target-fps the optimizer takes the cheapest folding that reaches it, not the fastest
            "target_fps": options.target_fps,
            # --objective latency: the lowest-latency design within the budget (target_fps: a floor on the rate)
            "objective": getattr(result, "objective", "throughput"), "latency_cycles": getattr(result, "latency", None)}


def _fit(totals, board):
    used = usage(totals, board)
    return {"board": board, "device": BOARDS[board][0], "fits": fits(used),
            "resources": {u.resource: {"used": u.used, "available": u.available} for u in used}}


def _sources(compiled, name):
    return next((n.sources for n in compiled.chain if n.name == name), ())
