"""``rtlgen build``: a compiled accelerator (an ``rtlgen compile`` OUT directory) into a board design
(the compiler's side: it reads OUT and uses :mod:`boards` for the platform, shells and Yosys).

Steps, all under ``OUT/build/``:

1. the shell around the accelerator (``standalone``: :class:`boards.shells.SelfTest`, its ROMs filled
   with input frames and the words the simulated accelerator answers them with; ``zynq``:
   :class:`boards.zynq.ZynqTop`, the PS7 with the AXI-Lite control block and the AXI DMA);
2. the Vivado build plan from the platform (:class:`boards.pynq_z2.PynqZ2Platform`: Verilog, XDC, TCL,
   build script) in ``vivado/``, always written; run when ``--toolchain vivado`` and ``vivado`` is on
   PATH, giving ``vivado/rtlgen_<shell>.bit``;
3. Yosys ``synth_xilinx`` of the whole shell, keeping the hierarchy so each layer gets its own numbers,
   written to ``yosys/report.json``; over the xc7z020's capacity is an error (:class:`BuildError`). The
   accelerator's netlist goes to ``yosys/netlist.v`` (``rtlgen verify OUT --netlist`` simulates it,
   :mod:`rtlgen.check.netlist`).
"""

import hashlib
import shutil

import numpy as np

from boards.pynq_z2 import PynqZ2Platform
from boards.shells import SelfTest, StandaloneTop
from boards.timing import MODEL
from boards.yosys import XC7Z020, YosysError, check_fits, synthesize, yosys_engine
from boards.yosys_parts import synthesize_by_parts
from boards.zynq import ZynqShell, ZynqTop
from memstream.packing import pack_words
from rtlgen.backend import jobs
from rtlgen.backend.stitch import DEFAULT_TOP_NAME
from rtlgen.errors import BuildError
from rtlgen.fit import BOARDS, BRAM18_PER_BRAM36, FAR_OVER, usage
from sim.outdir import OutDir
from rtlgen.report.html import write_html
from sim.harness import cycle_budget, run_stitched

__all__ = ["BuildError", "build", "SHELLS", "NETLIST_FILE", "design_digest", "netlist_record"]

SHELLS = ("standalone", "zynq")

NETLIST_FILE = "netlist.v"          # in OUT/build/yosys/, beside report.json


def design_digest(verilog):
    """The sha256 of a design's Verilog text: what a netlist records to be matched with its OUT later."""
    return hashlib.sha256(verilog.encode()).hexdigest()


def netlist_record(verilog):
    """What ``rtlgen build`` stores under ``"netlist"`` in its report: the file, its module, the design."""
    return {"file": NETLIST_FILE, "module": DEFAULT_TOP_NAME, "design_sha256": design_digest(verilog)}


SELFTEST_FRAMES = 4


def build(out, *, shell="standalone", toolchain="yosys", board="pynq-z2", inputs=None, say=print, device=XC7Z020,
          force=False, flat=False, self_test=True):
    """Build ``out`` (an ``rtlgen compile`` directory); returns the Yosys report dict (also written).
    ``device``: the capacity checked against (the xc7z020's). A design estimated over ``FAR_OVER`` times a
    resource of the board is refused before Yosys starts (it would run for long, often out of memory),
    unless ``force``. ``flat``: one Yosys run over the whole design instead of by parts (each layer on its
    own, cached: :mod:`boards.yosys_parts`). ``self_test=False`` (``--no-self-test``): the standalone shell
    without expected words (no simulation: it streams its input frames and checks nothing; a line says so).
    With it, the expected words come from the compiled bench ``rtlgen sim`` builds (the same executable,
    taken from the cache when ``sim`` or ``verify`` ran on this design before)."""
    if board != "pynq-z2":
        raise BuildError(f"--board {board!r} is not supported; legal: pynq-z2")
    if shell not in SHELLS:
        raise BuildError(f"--shell {shell!r} is unknown; legal: {', '.join(SHELLS)}")
    if toolchain not in ("yosys", "vivado"):
        raise BuildError(f"--toolchain {toolchain!r} is unknown; legal: yosys, vivado")
    if toolchain == "vivado" and shutil.which("vivado") is None:
        raise BuildError("--toolchain vivado: vivado is not on PATH; with --toolchain yosys the Vivado plan is "
                         "written all the same (OUT/build/vivado/build_<name>.sh runs it where Vivado is installed)")
    try:
        yosys_engine()
    except ValueError as exc:
        raise BuildError(str(exc)) from None
    out = OutDir(out)
    verilog, io, report = out.read_design()
    _refuse_far_over(report, board, force)
    vivado = out.vivado_dir
    name = f"rtlgen_{shell}"

    if not self_test and shell != "standalone":
        raise BuildError(f"--no-self-test: only the standalone shell has a self-test (not --shell {shell})")
    top = _standalone(verilog, io, report, inputs, say, self_test) if shell == "standalone" else \
        _zynq(verilog, io, report, say)
    platform = PynqZ2Platform()
    plan = platform.build(top, name=name, build_dir=str(vivado), do_build=False)
    plan.extract(str(vivado))
    say(f"Vivado plan: {vivado} ({name}.tcl, {name}.xdc, build_{name}.sh)")

    files = plan.files
    shell_verilog = files[f"{name}.v"] + "\n" + verilog
    try:
        synth = _synthesize(shell_verilog, name, out.yosys_dir, flat, say,
                            {layer["name"]: layer["resources"].get("LUT", 0) for layer in report["layers"]})
    except YosysError as exc:
        raise BuildError(f"Yosys failed during {exc.step}: {exc.error}; log: {exc.log}") from None
    result = _report_dict(synth, report)
    result["netlist"] = netlist_record(verilog)     # `rtlgen verify OUT --netlist` checks it against OUT
    out.write_json(out.yosys_report, result)
    say(_table(result))
    say(f"report -> {write_html(out)}")
    over = check_fits(synth, device)
    if over:
        raise BuildError(f"the design does not fit the xc7z020: {'; '.join(over)}; compile again with --fit {board} "
                         f"and a --max-utilization below the share Yosys found over (the estimate was low), or split "
                         f"the network across devices (rtlgen partition)")

    if toolchain == "vivado":
        plan.execute_local(str(vivado))
        say(f"bitstream: {vivado / (name + '.bit')}")
    return result


def _synthesize(verilog, top, workdir, flat, say, estimated_luts):
    netlist = (DEFAULT_TOP_NAME, NETLIST_FILE)
    if flat:
        say("Yosys synth_xilinx of the whole design (minutes on large designs) ...")
        return synthesize(verilog, top=top, hierarchy=True, children_of=DEFAULT_TOP_NAME, workdir=workdir, sta=True,
                          netlist=netlist)
    synth = synthesize_by_parts(verilog, top=top, parts_of=DEFAULT_TOP_NAME, workdir=workdir, netlist=netlist,
                                run=jobs.completed, say=say, effort=estimated_luts)
    say(f"Yosys by parts: {synth.parts['synthesized']} synthesized, {synth.parts['cached']} from the cache "
        f"({synth.seconds:.1f} s)")
    return synth


def _refuse_far_over(report, board, force):
    over = sorted((u for u in usage(report["totals"], board) if u.fraction > FAR_OVER), key=lambda u: -u.fraction)
    if over and not force:
        fix = (f"compile again with --fit {board} for the fastest folding that fits (or lower the folding: "
               f"--target-fps, --folding)" if report.get("optimizer") is None else
               "the budget's folding is over the board: compile again with a lower --max-utilization, or split the "
               "network across devices (rtlgen partition)")
        raise BuildError(f"not starting Yosys: the estimate is far over the {board} ({BOARDS[board][0]}): "
                         f"{', '.join(map(str, over))}; {fix}, or build with --force")


def _standalone(verilog, io, report, inputs, say, self_test=True):
    """The self-test shell: ``inputs`` (model inputs, through the host pre ops) or random input codes;
    the expected words are the simulated accelerator's answers (``rtlgen verify`` proves that simulation
    against qonnx); without ``self_test``, none."""
    end = io.input
    if inputs is not None:
        words = io.encode(inputs)
    else:
        rng = np.random.default_rng(0)
        size = (SELFTEST_FRAMES * end.words_per_frame, end.lanes)
        if end.dtype.name == "BIPOLAR":
            codes = rng.choice([-1, 1], size=size)
        else:
            codes = rng.integers(int(end.dtype.min()), int(end.dtype.max()) + 1, size=size)
        words = [int(w) for w in pack_words(codes, end.dtype)]
    frames = len(words) // end.words_per_frame
    per_frame = io.output.words_per_frame
    if not self_test:
        say(f"self-test: skipped (--no-self-test): the shell streams {frames} frame(s) from ROM and checks no output "
            f"(LEDs: heartbeat and frame activity only)")
        return StandaloneTop(SelfTest(in_words=words, in_width=report["input"]["width"], expected_words=None,
                                      out_width=report["output"]["width"], out_per_frame=per_frame), verilog)
    budget = cycle_budget([r["exp_cycles"] for r in report["layers"]], report["analytic_cycles_per_frame"], frames,
                          len(words) + frames * per_frame)
    expected = run_stitched(verilog, words, frames * per_frame, compiled=True, max_cycles=budget).words("m_axis_0")
    say(f"self-test: {frames} frame(s), {len(words)} input and {len(expected)} expected words in ROM (simulated on "
        f"the bench `rtlgen sim` builds, cached; --no-self-test skips it)")
    selftest = SelfTest(in_words=words, in_width=report["input"]["width"], expected_words=expected,
                        out_width=report["output"]["width"], out_per_frame=per_frame)
    return StandaloneTop(selftest, verilog)


def _zynq(verilog, io, report, say):
    """The PS7 shell: the DMA and control block of :mod:`boards.zynq` around the accelerator."""
    shell = ZynqShell(in_width=report["input"]["width"], out_width=report["output"]["width"],
                      in_words_per_frame=io.input.words_per_frame, out_words_per_frame=io.output.words_per_frame)
    say(f"zynq shell: {shell.in_frame_bytes} input and {shell.out_frame_bytes} output bytes per frame; "
        f"control at 0x4000_0000 (M_AXI_GP0), DMA on S_AXI_HP0, fabric clock FCLK_CLK0")
    return ZynqTop(shell, verilog)


def _report_dict(synth, report):
    # "lut" is Yosys' logic LUTs; "lut_including_memory" adds LUTRAM and SRLs, as the estimates count them
    # and as the device's LUT capacity does: compare that one with an estimate or a budget.
    row = _with_memory_luts(synth.as_row())
    estimates = {layer["name"]: layer["resources"] for layer in report["layers"]}
    layers = {name: dict(_with_memory_luts(sub.as_row()), estimate=estimates.get(name, {}))
              for name, sub in (synth.modules or {}).items()}
    shell = {k: row[k] - sum(r[k] for r in layers.values())
             for k in ("lut", "lut_including_memory", "ff", "bram36", "bram18", "dsp")}
    return {"top": synth.top, "device": "xc7z020", "capacity": XC7Z020, "totals": row, "shell": shell,
            "lut_including_memory": row["lut_including_memory"],
            "layers": layers, "estimate": report["totals"], "yosys_seconds": round(synth.seconds, 1),
            "synthesis": "flat" if synth.parts is None else dict(synth.parts, by="parts"),
            "timing": _timing(synth, report)}


def _with_memory_luts(row):
    return dict(row, lut_including_memory=row["lut"] + row["lut_as_memory"])


def _timing(synth, report):
    """The longest paths (Yosys sta) and the Fmax estimate of :mod:`boards.timing`, for the design and per
    layer (a layer's own paths: from its registers and input ports), beside the requested clock."""
    paths = synth.paths or {}
    design = paths.get(synth.top)
    layers = {name: paths[name].as_dict() for name in synth.modules or {} if name in paths}
    names = [layer["name"] for layer in report["layers"]]
    where = None
    if design is not None:
        where = next((n for n in names if any(f".{n}." in cell.replace("\\", "") for cell, _ in design.cells)
                      or layers.get(n) == design.as_dict()), None)       # by parts: the worst layer's own path
    return {"model": MODEL, "requested_mhz": report.get("clock_mhz"),
            "design": None if design is None else dict(design.as_dict(), layer=where), "layers": layers}


def _table(result):
    lines = [f"{'layer':34s} {'LUT':>7s} {'(est)':>7s} {'FF':>7s} {'(est)':>7s} {'BRAM36':>6s} {'BRAM18':>6s} "
             f"{'(est)':>6s} {'DSP':>4s} {'levels':>6s} {'Fmax~':>6s}"]
    timing = result["timing"]
    for name, r in result["layers"].items():
        est, path = r["estimate"], timing["layers"].get(name)
        lines.append(f"{name:34s} {r['lut_including_memory']:7d} {est.get('LUT', 0):7d} {r['ff']:7d} {est.get('FF', 0):7d} "
                     f"{r['bram36']:6d} {r['bram18']:6d} {est.get('BRAM18', 0):6d} {r['dsp']:4d} "
                     f"{path['levels'] if path else '-':>6} {round(path['fmax_mhz_estimate']) if path else '-':>6}")
    t, sh = result["totals"], result["shell"]
    cap = result["capacity"]
    for label, r in (("shell (ROMs / DMA, control, glue)", sh), (f"total ({result['top']})", t)):
        lines.append(f"{label:34s} {r['lut_including_memory']:7d} {'':7s} {r['ff']:7d} {'':7s} {r['bram36']:6d} "
                     f"{r['bram18']:6d} {'':6s} {r['dsp']:4d}")
    lines.append(f"xc7z020: LUT {result['lut_including_memory'] / cap['LUT']:.1%} (incl. LUTRAM/SRL), "
                 f"FF {t['ff'] / cap['FF']:.1%}, BRAM36 {(t['bram36'] + t['bram18'] / BRAM18_PER_BRAM36) / cap['BRAM36']:.1%}, "
                 f"DSP {t['dsp'] / cap['DSP']:.1%}")
    design = timing["design"]
    if design is not None:
        requested = timing["requested_mhz"]
        verdict = "" if not requested else f"; the requested {requested:g} MHz " + (
            "is within it" if design["fmax_mhz_estimate"] >= requested else "is ABOVE it: lower --clock-mhz")
        lines.append(f"timing (estimate): longest path {design['levels']} logic level{'s' if design['levels'] != 1 else ''} "
                     f"({design['through']}{' in ' + design['layer'] if design['layer'] else ''}), "
                     f"~{design['path_ns_estimate']:.1f} ns, Fmax ~{design['fmax_mhz_estimate']:.0f} MHz{verdict}")
        lines.append(f"  model: {timing['model']}")
    return "\n".join(lines)
