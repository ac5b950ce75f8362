"""What each `rtlgen` command does, once :mod:`rtlgen.cli_args` has parsed it: the compile, the
simulations, verify, build, inspect, partition, prove, config and demo, each printing its lines; bad input
raised as the one-line errors :mod:`rtlgen.cli` turns into exit 2."""

import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rtlgen.backend import jobs
from rtlgen.check.prove import ProveError, ToolMissing
from rtlgen.check.prove_design import prove_out
from rtlgen.check.verify import verify_outputs
from rtlgen.cli_args import UsageError, refuse_compile_options
from rtlgen.errors import BuildError, CompileError
from sim.outdir import OutDir, OutError
from rtlgen.options import CompileOptions, default_config, from_args, option_fields
from sim import progress
from sim.compiled import network_engine
from sim.runner import SimulationError
from sim.stream_io import InputError, input_batch

__all__ = ["RUN", "print_line", "print_warning", "first_line"]

# Imported inside the commands that use them (each marked "start-up"), so that `rtlgen --help` and bad input
# stay fast; what each adds after this module's own imports: rich ~0.1-0.2 s; rtlgen.api, backend.build and
# demo (amaranth_boards, jinja2) ~0.2 s; passes.load and report.describe (onnx, onnxruntime) 0.4-0.6 s;
# backend.scaleout (galapagos) ~0.1 s; check.netlist, check.shell_sim, report.html ~0.04 s each.


def print_line(text):
    """A line on stdout (the progress reporter counts it: no progress line is due for another interval)."""
    print(text, flush=True)
    progress.line_written()


def _options(args):
    """The compile options, checked before any long step."""
    return from_args(args).check()


def _warn_options(command, options):
    """The options' warnings, for the commands that do not compile (a compile keeps them in its report)."""
    for line in options.warnings():
        print_warning(command, line)


def print_warning(command, text):
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
    say = (lambda line: None) if quiet else (lambda line: print_line(f"  {line}"))
    design = api.compile(model, out, **dataclasses.asdict(options), keep_intermediate=True if keep == "" else keep,
                         force=getattr(args, "force", False), say=say, warn=lambda text: print_warning(args.command, text))
    compiled, report = design.compiled, design.report
    if as_json:
        print(json.dumps(report, indent=2), flush=True)
    if not quiet:
        print_line(f"compiled {model} -> {out} in {time.perf_counter() - start:.1f} s: {len(compiled.nodes)} layers")
        print_summary(report, console())
        host = compiled.host_ops
        if host["pre"] or host["post"]:
            print_line(f"host ops: before {host['pre'] or '-'}, after {host['post'] or '-'}")
        over = api.over_the_board(report, options)
        if over:
            print_warning(args.command, over)       # again, after a table that may have scrolled the first away
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
                else f"a damaged .npy array ({first_line(exc)})")
    return "not a .npy array (NumPy's .npy format starts with \\x93NUMPY)"


def _model_input(model_path, x):
    """``x`` checked against the input of the ONNX model at ``model_path`` (see ``input_batch``)."""
    from rtlgen.passes.load import load_model       # start-up

    model = load_model(model_path)
    name = model.graph.input[0].name
    return input_batch(x, name, model.get_tensor_shape(name))


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
    print_line(f"wrote {path}: every compile option, one key each; rtlgen compile {args.model} -o OUT --config {path}")
    return 0


def run_compile_command(args):
    _compile(args.model, args.out, args)
    return 0


def _warn_changed(command, out):
    """Before anything else is said: which of OUT's files were edited since the compile (the line, or None).
    OUT is read first, so that a damaged file is its own one-line error, not a warning before it."""
    if not Path(out).is_dir():
        return None
    if not OutDir(out).is_partition():
        OutDir(out).read_design()
    line = OutDir(out).changed_line()
    if line:
        print_warning(command, line)
    return line


def run_sim_command(args):
    from rtlgen import api       # start-up

    _warn_changed(args.command, args.out)

    if OutDir(args.out).is_partition():
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
    with progress.step(f"simulating {len(x):,} frame(s)"):         # in a log: a line every 10 s
        run = design.simulate(x, simulator=args.simulator, waves=None if waves is None else str(waves))
    seconds = time.perf_counter() - start
    ii = report["analytic_cycles_per_frame"]
    if args.json:
        return _sim_json(args, run, report, output)
    line = f"simulated {run.frames} frame(s) in {seconds:.1f} s: {run.cycles} cycles, latency {run.latency} cycles"
    if run.cycles_per_frame is not None:
        line += (f", {run.cycles_per_frame:.1f} cycles/frame (slowest layer II {ii}: "
                 f"{100 * (run.cycles_per_frame / ii - 1):+.2f} %)")
    print_line(line)
    if waves is not None:
        if not waves.is_file():
            raise SimulationError(f"--waves: the simulation wrote no waveform to {waves}")
        print_line(f"waveform -> {waves}")
    if output:
        np.save(output, run.outputs)
        print_line(f"output {run.outputs.shape} -> {output}")
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
    print_line(line)
    if output:
        print_line(f"output {run.outputs.shape} -> {output}")
    _report_classes(run.outputs, x, labels)
    return 0


def _waves_path(args):
    """Where --waves writes (OUT/waves.vcd by default; into a directory given: DIR/waves.vcd), checked
    before the simulation; None without --waves."""
    if args.waves is None:
        return None
    path = Path(args.waves) if args.waves else OutDir(args.out).waves
    if path.is_dir():
        path = OutDir(path).waves           # a directory given: its waves.vcd
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
        print_warning(command, note)
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
    io = OutDir(args.out).read_io()
    x = io.check_input(_load_input(args.input))
    labels = _labels(args.labels, len(x)) if args.labels else None
    output = _npy_path(args.output) if args.output else None
    start = time.perf_counter()
    with progress.step(f"simulating {len(x):,} frame(s) on the cluster"):
        run = scaleout.simulate(args.out, x, latency=args.link_latency)
    seconds = time.perf_counter() - start
    line = f"simulated {run.frames} frame(s) on {len(run.devices)} device(s) in {seconds:.1f} s: {run.cycles} cycles, " \
           f"latency {run.latency} cycles"
    if run.cycles_per_frame is not None:
        fps = plan["clock_mhz"] * 1e6 / run.cycles_per_frame
        line += (f", {run.cycles_per_frame:.1f} cycles/frame = {fps:,.0f} frames/s at {plan['clock_mhz']:g} MHz "
                 f"(plan II {plan['ii']}: {100 * (run.cycles_per_frame / plan['ii'] - 1):+.2f} %)")
    print_line(line)
    for device in run.devices:
        measured = "-" if device["measured_ii"] is None else f"{device['measured_ii']:.1f}"
        print_line(f"  {device['name']}: II {device['analytic_ii']} cycles (its slowest layer), measured output packet "
             f"interval {measured} cycles")
    for link in run.links:
        used = "-" if link.utilization is None else f"{100 * link.utilization:.1f} %"
        print_line(f"  link {link.src} -> {link.dst}: {link.flits_per_frame} flits in {link.packets_per_frame} "
             f"packet(s) per frame, wire time {link.wire_cycles:.1f} cycles/frame, utilisation {used}, receive "
             f"buffer up to {link.max_level} of {link.depth} flits")
    out = OutDir(args.out)
    out.write_json(out.cluster_sim, run.as_dict())
    out.claim([out.cluster_sim])            # this plan's: the next partition into OUT removes it
    if output:
        np.save(output, run.outputs)
        print_line(f"output {run.outputs.shape} -> {output}")
    _report_classes(run.outputs, x, labels)
    return 0


def _report_classes(outputs, x, labels):
    predicted = outputs.reshape(len(x), -1)
    predicted = predicted[:, 0] if predicted.shape[1] == 1 else predicted.argmax(axis=1)
    if labels is not None:
        print_line(f"accuracy {100 * float((predicted == labels).mean()):.2f} % ({int((predicted == labels).sum())} of "
             f"{len(x)} samples; class = {'the output' if outputs[0].size == 1 else 'argmax of the outputs'})")
    else:
        print_line(f"class of the first samples: {', '.join(str(int(c)) for c in predicted[:10])}"
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


def run_verify_command(args):
    """MODEL.onnx: compile (into -o or a temporary directory), simulate, compare; an OUT directory: simulate
    the design there and compare with the model it was compiled from."""
    from rtlgen import api       # start-up

    existing = Path(args.model).is_dir()
    stale = edited = None
    if existing:
        edited = _warn_changed(args.command, args.model)
        refuse_compile_options(args, f"{args.model} is already compiled; verify runs it as it is (compile "
                                      f"again with the option, or give verify the model to compile)")
        design = api.open_design(args.model)
        model, stale = design.model_status()
        if model is None:
            raise OutError(stale)
        if stale:
            print_warning(args.command, stale)
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
        with progress.step(f"simulating {len(x):,} frame(s)"):
            run = design.simulate(x, simulator=args.simulator)
        print_line(f"simulated {run.frames} frame(s) in {time.perf_counter() - start:.1f} s"
             + (f", {run.cycles_per_frame:.1f} cycles/frame (II {design.report['analytic_cycles_per_frame']})"
                if run.cycles_per_frame is not None else ""))
    with progress.step("qonnx's execution of the model"):
        result = verify_outputs(model, x, run.outputs, design.io)
    print_line(result.summary())
    if edited and not result.passed:    # the first line said which: the mismatch may be the edit
        print_line(f"files of {args.model} were edited since the compile (the first line names them): recompile "
             f"before reading this mismatch as a bug")
    if stale and not result.passed:     # the warning above said why: the mismatch may be the staleness
        print_line(f"{args.model} was compiled from an earlier version of the model: recompile before reading this "
             f"mismatch as a bug")
    if existing or args.out:            # kept: the result goes into OUT's report.html
        from rtlgen.report.html import record_verification       # start-up
        target = args.model if existing else args.out
        try:
            print_line(f"report -> {record_verification(target, result)}")
        except OSError as exc:          # a read-only OUT: the comparison above stands, only the record is lost
            print_warning(args.command, f"the result is not recorded in {target}'s report: cannot write "
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
    with progress.step("the netlist's simulation"):
        return verify_netlist(args.model, model, x, simulator=args.simulator, say=print_line)


def run_build_command(args):
    from rtlgen.backend.build import build       # start-up

    _warn_changed(args.command, args.out)

    if OutDir(args.out).is_partition():
        if args.shell != "standalone" or args.toolchain != "yosys" or args.input:
            raise BuildError("a partitioned OUT is built as Galapagos kernels by Yosys, out of context (no "
                             "--shell zynq, --toolchain vivado or --input: there is no Galapagos shell for the "
                             "PYNQ-Z2)")
        from rtlgen.backend import scaleout       # start-up
        scaleout.build_kernels(args.out, say=print_line)
        return 0
    inputs = None
    if args.input:
        _, io, _ = OutDir(args.out).read_design()
        inputs = io.check_input(_load_input(args.input))
    build(args.out, shell=args.shell, toolchain=args.toolchain, board=args.board, inputs=inputs, say=print_line,
          force=args.force, flat=args.flat, self_test=not args.no_self_test)
    return 0


def run_inspect_command(args):
    from rtlgen.flows import INSPECT, Runner        # start-up
    from rtlgen.report.describe import describe, print_description       # start-up
    from rtlgen.report.summary import console       # start-up

    options = from_args(args, fifo_sizing="none").check()        # inspect stops before the FIFOs
    _warn_options(args.command, options)
    runner = Runner()
    graph = runner.run(INSPECT, args.model, options)
    info = describe(args.model, runner.results["load"], graph)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print_description(info, console())
    return 0


def run_demo_command(args):
    from rtlgen.demo import DEMO_IMAGES, run_demo       # start-up
    if not 1 <= args.images <= DEMO_IMAGES:
        raise UsageError(f"--images {args.images}: must be a positive number of test images, at most {DEMO_IMAGES}")
    return run_demo(args.out, simulator=args.simulator, synth=not args.no_synth, images=args.images,
                    force=args.force, say=print_line)


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
                  fifo_sizing=args.fifo_sizing, input_dtype=args.input_dtype, plan_only=args.plan_only,
                  force=args.force, say=print_line,
                  warn=lambda text: print_warning(args.command, text))
    if not args.plan_only:
        print_line(f"simulate the cluster: rtlgen sim {args.out} --input X.npy")
    return 0


def run_prove_command(args):
    if args.depth is not None and args.depth < 1:
        raise UsageError(f"--depth {args.depth}: must be a positive number of cycles")
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout:g}: must be a positive number of seconds")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: must be a positive number of processes")
    started = time.time()
    _warn_changed(args.command, args.out)
    try:
        with progress.step("proving the nodes' stream contracts"):     # a node's run may take minutes
            outcomes = prove_out(args.out, depth=args.depth, node=args.node, timeout=args.timeout, jobs=args.jobs,
                                 report=lambda outcome: print_line(outcome.line()))
    except ValueError as exc:           # an unknown --node, naming the legal ones
        raise UsageError(str(exc)) from None
    except ToolMissing as exc:          # the environment, not a bug
        raise UsageError(str(exc)) from None
    except ProveError as exc:
        raise RuntimeError(str(exc)) from None
    failed = [o.node for o in outcomes if o.status == "failed"]
    unknown = [o.node for o in outcomes if o.status == "unknown"]
    held = len(outcomes) - len(failed) - len(unknown)
    print_line(f"{held} of {len(outcomes)} nodes hold their stream contract"
         + (f", {len(failed)} fail" if failed else "")
         + (f", {len(unknown)} unknown (no answer: {', '.join(unknown)})" if unknown else "")
         + f" ({time.time() - started:.1f} s)")
    return 1 if failed or unknown else 0


def _on_cluster(run):
    """``run`` with its jobs on ``--cluster ADDRESS`` (:mod:`rtlgen.backend.jobs`); a cluster it cannot use
    is the user's setting: one line, exit 2."""
    def run_with_cluster(args):
        try:
            with jobs.using(cluster=getattr(args, "cluster", None)):
                if hasattr(args, "cluster"):        # a command with jobs: a bad address now, not after a compile
                    jobs.connect()
                return run(args)
        except jobs.ClusterError as exc:
            raise UsageError(str(exc)) from None
    return run_with_cluster


# what each command of rtlgen.cli_args.COMMANDS runs
RUN = {name: _on_cluster(run) for name, run in {
    "compile": run_compile_command, "config": run_config_command, "sim": run_sim_command, "verify": run_verify_command, "build": run_build_command, "inspect": run_inspect_command, "partition": run_partition_command, "prove": run_prove_command, "demo": run_demo_command}.items()}


def first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
