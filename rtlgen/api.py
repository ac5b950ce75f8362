"""The Python API: what the `rtlgen` command line does, as functions and one object.

    from rtlgen import api
    design = api.compile("model.onnx", "out", target_fps=10_000)   # writes out/ as `rtlgen compile`
    design.report["frames_per_second"], design.fits
    run = design.simulate(x)                 # x: model inputs, batch first -> run.outputs, run.cycles_per_frame
    result = design.verify(x)                # the simulation against qonnx's execution of the model
    assert result.passed, result.summary()
    design.build(shell="zynq")               # Yosys report (and a bitstream with toolchain="vivado")
    same = api.open_design("out")         # a Design for an existing compile output

Errors are the command line's: :class:`rtlgen.passes.load.CompileError` (bad model or options),
:class:`sim.stream_io.InputError` (bad inputs), :class:`rtlgen.backend.build.BuildError`,
:class:`sim.outdir.OutError` (an OUT that is not rtlgen's, in use, or damaged).
"""

import os
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from rtlgen.backend import jobs
from rtlgen.backend.build import build as build_design
from rtlgen.check.verify import simulate_model, verify_outputs
from rtlgen.errors import CompileError, CompileWarning
from rtlgen.fit import Budget, Usage, fit_line
from sim.outdir import OutDir, OutError
from rtlgen.options import CompileOptions, read_config
from sim import progress
from sim.harness import FULL_RATE

__all__ = ["compile", "partition", "open_design", "Design"]


class Design:
    """A compiled accelerator in its output directory ``out`` (``verilog``, ``io``, ``report`` as written
    there). ``compiled`` is the compiler's :class:`rtlgen.backend.compile.Compiled` when this process made it."""

    def __init__(self, out, compiled=None):
        self.out = Path(out)
        self.verilog, self.io, self.report = OutDir(self.out).read_design()
        self.compiled = compiled

    @property
    def model(self):
        """The ONNX model the design was compiled from: found by its path relative to OUT (so a project
        that moved still finds it), else the absolute path it had; None when it is gone."""
        return self.model_status()[0]

    def model_status(self):
        """(:attr:`model`, None if the model is as compiled, else a line saying it changed or is gone)."""
        return OutDir(self.out).model_source(self.report)

    @property
    def changed_files(self):
        """OUT's files whose sha256 differs from the compile's, [(path in OUT, "edited" | "gone" |
        "unreadable")]: what `rtlgen sim|verify|build|prove` name first."""
        return OutDir(self.out).changed_files()

    @property
    def warnings(self):
        """The compile's warnings (options, model, fit, target), as report.json keeps them."""
        return list(self.report.get("warnings", ()))

    @property
    def fits(self):
        """Whether the estimate fits the board the design was compiled for."""
        return self.report["fit"]["fits"]

    def simulate(self, x, *, simulator=None, backpressure=None, waves=None):
        """Model inputs ``x`` (the model's input shape, or a batch of it) through the host ops and the RTL
        simulation: a :class:`rtlgen.check.verify.SimulationRun` (outputs, cycles, cycles_per_frame, latency)."""
        return simulate_model(self.verilog, self.io, x, self.report, simulator=simulator,
                              backpressure=backpressure or FULL_RATE, waves=waves)

    def verify(self, x, *, simulator=None):
        """Simulate ``x`` and compare with qonnx's execution of :attr:`model`: a
        :class:`rtlgen.check.verify.Comparison` (``passed``, ``exact``, ``summary()``)."""
        model, note = self.model_status()
        if model is None:
            raise OutError(note)
        x = self.io.check_input(x)
        run = self.simulate(x, simulator=simulator)
        return verify_outputs(model, x, run.outputs, self.io)

    def build(self, *, shell="standalone", toolchain="yosys", inputs=None, force=False, say=print):
        """Synthesize in a board shell (see :func:`rtlgen.backend.build.build`); returns the Yosys report dict."""
        return build_design(self.out, shell=shell, toolchain=toolchain, board=self.report["fit"]["board"],
                     inputs=inputs, force=force, say=say)


def compile(model, out, *, config=None, keep_intermediate=None, force=False, say=None, warn=None, cluster=None,
            **options):
    """Compile ``model`` (a QONNX / FINN-ONNX file) into the directory ``out`` and return its
    :class:`Design`. ``out`` is new, empty, or an earlier compile's output (``force``: any directory);
    the design is built beside it and swapped in at the end, keeping files that are not rtlgen's (see
    :mod:`sim.outdir`). ``options`` are the fields of :class:`rtlgen.options.CompileOptions` (the
    `rtlgen compile` flags: ``folding``, ``target_fps``, ``clock_mhz``, ``fit``, ``budget``, ...; an unknown
    name is a CompileError listing the legal ones); ``config`` a build file (`rtlgen compile --config`, see
    :func:`rtlgen.options.read_config`) whose options ``options`` override; ``keep_intermediate`` a directory, or True for
    ``out/intermediate``; ``say`` gets one line per compiler pass, ``warn`` a line for each warning (the
    options', the compiler's, a design over the board or short of ``target_fps``; without ``warn`` they are
    Python warnings of :class:`rtlgen.errors.CompileWarning`) and for each of the user's files renamed to
    make way. The compile's warnings are kept in report.json (``"warnings"``, :attr:`Design.warnings`) and
    report.html. ``cluster``: a Dask scheduler's address (`--cluster`) for the layers' Verilog conversion
    (:mod:`rtlgen.backend.jobs`; default ``$RTLGEN_CLUSTER``, else a process per core here)."""
    # onnx: loaded by a compile only, so the command line's errors on an existing OUT stay fast
    from rtlgen.backend.emit import write_outputs
    from rtlgen.backend.compile import compile_model

    if config is not None:
        options = {**read_config(config), **options}
    options = CompileOptions.create(**options).check()
    if keep_intermediate not in (None, True):
        _check_keep(keep_intermediate)
    jobs.connect(cluster)       # a cluster that cannot be used is said before OUT is touched
    with OutDir(out).replacing(force=force, model=model, warn=warn) as new, _kept_warnings(warn) as kept:
        keep = _inside(keep_intermediate, out, new)
        for line in options.warnings():
            warnings.warn(line, CompileWarning, stacklevel=2)
        with jobs.using(cluster=cluster):
            compiled = compile_model(model, options, say=say or (lambda line: None), keep=keep)
        with progress.step(f"writing the design into {out}"):
            write_outputs(compiled, new)
        for line in _design_warnings(new.read_json(new.report), options):
            warnings.warn(line, CompileWarning, stacklevel=2)
        _keep_warnings(new, kept)
    return Design(out, compiled)


@contextmanager
def _kept_warnings(warn):
    """Collect the CompileWarnings issued in the body (every one, even a repeat), each passed on to
    ``warn`` as it comes, or to Python's warning display when there is no ``warn``."""
    kept = []
    with warnings.catch_warnings():
        warnings.simplefilter("always", CompileWarning)
        shown = warnings.showwarning

        def show(message, category, *rest, **kwargs):
            if not issubclass(category, CompileWarning):
                return shown(message, category, *rest, **kwargs)
            if str(message) not in kept:
                kept.append(str(message))
                if warn is not None:
                    warn(str(message))
                else:
                    shown(message, category, *rest, **kwargs)
        warnings.showwarning = show
        yield kept


def _design_warnings(report, options):
    """What the user asked for and did not get: a design over its board, a frame rate short of
    ``target_fps``; each with what to try."""
    lines = []
    over = over_the_board(report, options)
    if over:
        lines.append(over)
    target = options.target_fps
    fps = report["frames_per_second"]
    if target is not None and fps < target * (1 - 1e-9):
        reached = f"{fps:,.0f} frames/s at {options.clock_mhz:g} MHz"
        if options.user_budget() is None:
            lines.append(f"--target-fps {target:,.0f} is out of reach of the naive folding (FINN's SetFolding; "
                         f"its most parallel gives {reached}); --fit {options.board} --target-fps {target:,.0f} "
                         f"searches every folding for the cheapest design reaching it within the board (the "
                         f"fastest that fits when none does)")
        else:
            lines.append(f"--target-fps {target:,.0f} is out of reach within the budget: the fastest design in it "
                         f"gives {reached}; raise the budget (--max-utilization, --budget) or split the network "
                         f"across devices (rtlgen partition)")
    return lines


def over_the_board(report, options):
    """The warning for a design estimated over its board (None when it fits), with what to do: --fit
    finds the fastest folding that fits, unless the compile already asked for a budget."""
    fit = report["fit"]
    if fit["fits"]:
        return None
    used = [Usage(k, v["used"], v["available"]) for k, v in fit["resources"].items()]
    if options.fit is None and options.budget is None:
        hint = (f"compile with --fit {fit['board']} for the fastest folding that fits (or lower it: --target-fps, "
                f"--folding)")
    else:
        hint = ("the budget's folding is over the board: lower --max-utilization, or split the network across "
                "devices (rtlgen partition)")
    return f"{fit_line(used, fit['board'])}; {hint}"


def _keep_warnings(new, kept):
    """The warnings into the new OUT's report.json and report.html."""
    from rtlgen.report.html import write_html
    report = new.read_json(new.report)
    report["warnings"] = list(kept)
    new.write_json(new.report, report)
    write_html(new)


def partition(model, out, *, devices, budget=None, board="pynq-z2", max_utilization=None, fixed=None,
              link_gbps=1.0, flit_width=64, max_packet_bytes=1440, clock_mhz=100.0, fifo_sizing="analytic",
              input_dtype=None, plan_only=False, force=False, say=None, warn=None):
    """Split ``model`` over at most ``devices`` FPGAs linked by Galapagos (`rtlgen partition`): the plan
    (cuts, folding, cluster files) and, unless ``plan_only``, each device's kernel, written into ``out``
    as a compile is (:meth:`sim.outdir.OutDir.replacing`: built beside it and swapped in at the end). ``budget`` is
    per device (``"lut=N,ff=N,bram36=N,dsp=N"``, default the board x ``max_utilization``); ``fixed`` pins
    nodes, {node name: device index}; ``input_dtype`` as `rtlgen compile --input-dtype`. Returns the :class:`rtlgen.passes.partition.Partition`."""
    # onnx and galapagos: loaded by a partition only, so the command line's errors stay fast
    from rtlgen.backend import scaleout
    from rtlgen.flows import FRONT, Runner
    from rtlgen.passes.partition import PartitionError
    from rtlgen.passes.partition import partition as plan_partition

    say = say or (lambda line: None)
    _check_partition_options(devices, link_gbps, flit_width, max_packet_bytes)
    OutDir(out).check(force=force)      # now, not after the solve
    try:
        per_device = Budget.parse(budget) if budget is not None else Budget.for_board(board, max_utilization)
    except ValueError as exc:       # both name their option
        raise CompileError(str(exc)) from None
    if budget is not None and not np.isfinite(per_device.as_vector()).any():     # "": no budget, not no limit
        raise CompileError(f"--budget {budget!r}: names no resource; give lut=N,ff=N,bram36=N,dsp=N (any "
                           f"subset), or leave it out for the board x --max-utilization")
    options = CompileOptions.create(clock_mhz=clock_mhz, board=board, fifo_sizing=fifo_sizing,
                                    input_dtype=input_dtype).check()
    graph = Runner().run(FRONT, model, options)
    try:
        part = plan_partition(graph, devices, per_device, link_gbps=link_gbps, clock_mhz=clock_mhz, fixed=fixed,
                              flit_width=flit_width, max_packet_bytes=max_packet_bytes)
    except PartitionError as exc:
        raise CompileError(str(exc)) from None
    with OutDir(out).replacing(force=force, model=model, warn=warn) as new:
        def shown(path):            # where it is once the new OUT is swapped in
            return Path(out) / new.relative(path)
        paths = scaleout.write_plan(part, new, board=board)
        for device in part.devices:
            if device.nodes:
                say(f"device {device.index}: {', '.join(device.nodes)} ({device.cycles:,} cycles; "
                    f"{device.binding} {device.utilization:.0%} of its budget)")
        say(f"II {part.ii:,} cycles ({part.frames_per_second:,.0f} frames/s at {part.clock_mhz:g} MHz), set by "
            f"{part.bound_by}; plan -> {shown(paths['partition'])}, cluster files -> {shown(paths['logical']).parent}")
        if part.solver_note:
            (warn or (lambda line: warnings.warn(line, CompileWarning, stacklevel=2)))(part.solver_note)
        used = sum(1 for device in part.devices if device.nodes)
        if used < devices:
            (warn or say)(_unused_devices(used, devices, part.bound_by, fixed))
        if not plan_only:
            built, io = scaleout.build_devices(model, part, options=options, say=say)
            for device, path in zip(built, scaleout.write_devices(built, io, new)):
                say(f"device {device.index}: Galapagos kernel {device.kernel_id} ({device.name}: FromGalapagos "
                    f"{device.receive.words_per_frame} x {device.receive.word_width}-bit words -> layers -> "
                    f"ToGalapagos TDEST {device.send.dest}) -> {shown(path)}")
    return part


def _check_partition_options(devices, link_gbps, flit_width, max_packet_bytes):
    """`rtlgen partition`'s own options, each named by its flag with what is legal, before any long step."""
    from galapagos.bridges import FLIT_WIDTHS       # start-up: with the partition only
    whole = lambda value: isinstance(value, int) and not isinstance(value, bool)
    if not whole(devices) or devices < 1:
        raise CompileError(f"--devices {devices!r}: must be a whole number of devices, at least 1")
    if isinstance(link_gbps, bool) or not isinstance(link_gbps, (int, float)) or not 0 < link_gbps < float("inf"):
        raise CompileError(f"--link-gbps {link_gbps!r}: must be a positive number of Gbit/s (1 for Gigabit "
                           f"Ethernet)")
    if flit_width not in FLIT_WIDTHS:
        raise CompileError(f"--flit-width {flit_width!r}: legal: {', '.join(map(str, FLIT_WIDTHS))} bits")
    if not whole(max_packet_bytes) or max_packet_bytes < flit_width // 8:
        raise CompileError(f"--max-packet-bytes {max_packet_bytes!r}: must be a whole number of bytes, at least one "
                           f"{flit_width}-bit flit ({flit_width // 8}); 1440 is the Ethernet MTU's, 8992 with "
                           f"jumbo frames")


def _unused_devices(used, devices, bound_by, fixed):
    """The line for a plan that leaves some of the ``devices`` asked for without a node."""
    empty = ", ".join(str(i) for i in range(used, devices))
    why = f"spreading further does not lower the II, set by {bound_by}"
    if fixed:
        why = f"--partition places {len(fixed)} node(s), and {why}"
    return (f"the plan uses {used} of the {devices} devices (--devices {devices}): device{'s' if devices - used > 1 else ''} "
            f"{empty} left empty ({why}); no kernel or cluster entry is written for {'them' if devices - used > 1 else 'it'}")


def _check_keep(path):
    """--keep-intermediate DIR: a directory, or a path where one can be made."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CompileError(f"--keep-intermediate {path}: is a file, not a directory; give a directory (made if "
                           f"missing)")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise CompileError(f"--keep-intermediate {path}: cannot make the directory ({existing} is a file)")


def _inside(keep, out, new):
    """Where the passes save their graphs: True -> the new OUT's ``intermediate``; a directory inside OUT
    -> the same place in the new OUT (the old OUT is replaced at the end); any other directory as given."""
    if keep is None:
        return None
    if keep is True:
        return str(new.intermediate)
    out, keep_abs = Path(os.path.abspath(out)), Path(os.path.abspath(keep))
    if keep_abs == out or out in keep_abs.parents:
        return str(new.path / keep_abs.relative_to(out))
    return str(keep)


def open_design(out):
    """The :class:`Design` in ``out``, a directory written by `rtlgen compile` or :func:`compile`."""
    return Design(out)
