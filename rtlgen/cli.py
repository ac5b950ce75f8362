"""The `rtlgen` command line. User errors end as one line on stderr and exit status 2."""

import argparse
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from rtlgen.fifo_sizing import FIFO_SIZINGS

__all__ = ["main"]


SIMULATOR_HELP = ("HDL simulator: verilator (a compiled C++ bench; fast) or icarus (the cocotb bench; a second "
                  "opinion, slow on big networks); default: $RTLGEN_SIM, else verilator")


@contextmanager
def _progress_bars():
    """Show :mod:`sim.progress` tasks (Verilator builds, simulations, FIFO sizing, Yosys) as rich progress
    bars on stderr, with elapsed time and, where the total is known, the time remaining; nothing when
    stderr is not a terminal."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)
    from sim import progress

    console = _console()
    if not console.is_terminal:
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

    with bars, progress.reporting(reporter):
        yield


def _console():
    from rich.console import Console
    return Console(stderr=True)


def _say(text):
    print(text, flush=True)


def add_optimizer_options(parser):
    parser.add_argument("--fit", metavar="BOARD", choices=("pynq-z2",),
                        help="the folding optimizer: the fastest design within BOARD's device x --max-utilization "
                             "(with --target-fps: the cheapest design reaching it)")
    parser.add_argument("--max-utilization", type=float, default=0.8, metavar="F",
                        help="share of the device --fit may fill (default: %(default)s)")
    parser.add_argument("--budget", metavar="lut=N,ff=N,bram36=N,dsp=N",
                        help="the folding optimizer within this budget (any subset of the resources)")


def add_compile_options(parser):
    parser.add_argument("--folding", metavar="FOLD.json", help="FINN-format folding config (PE, SIMD, mem_mode, ...)")
    parser.add_argument("--target-fps", type=float, metavar="N",
                        help="naive folding (FINN SetFolding) for N frames/s (default: 1000 cycles per frame)")
    parser.add_argument("--clock-mhz", type=float, default=100.0, help="clock for --target-fps and reports (default: %(default)s)")
    parser.add_argument("--board", default="pynq-z2", choices=("pynq-z2",), help="target board (default: %(default)s)")
    parser.add_argument("--fifo-sizing", default="analytic", choices=FIFO_SIZINGS,
                        help="FIFO depths from the layers' composed timing models (analytic, milliseconds), by "
                             "simulating the stitched design (sim, FINN's way), or 2 and the join bounds "
                             "(none) (default: %(default)s)")
    parser.add_argument("--simulator", choices=("verilator", "icarus"), default=None, help=SIMULATOR_HELP)
    parser.add_argument("--input-dtype", metavar="DTYPE",
                        help="the datatype of the model's input when it has no input quantizer (BIPOLAR, "
                             "BINARY, UINT8, INT8, ...), as FINN's set_tensor_datatype")
    add_optimizer_options(parser)
    parser.add_argument("--strict", action="store_true",
                        help="a design estimated over the board is an error (default: a warning)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no per-pass lines, no per-layer table")


def _options(args):
    """The compile options, checked before any long step."""
    from rtlgen.compiler import CompileOptions
    return CompileOptions(folding=args.folding, target_fps=args.target_fps, clock_mhz=args.clock_mhz,
                          board=args.board, fifo_sizing=args.fifo_sizing, simulator=args.simulator,
                          input_dtype=args.input_dtype, strict=args.strict, fit=args.fit,
                          max_utilization=args.max_utilization, budget=args.budget).check()


def _warn(command, text):
    print(f"rtlgen {command}: warning: {text}", file=sys.stderr, flush=True)


def _compile(model, out, args):
    """Compile ``model`` into ``out`` (checked and cleared of an earlier compile first); prints the passes
    and the per-layer table unless ``--quiet``, and warns when the design is over the board."""
    import dataclasses
    from rtlgen import api
    from rtlgen.summary import console, print_summary

    options = _options(args)
    as_json = getattr(args, "json", False)
    quiet = getattr(args, "quiet", False) or as_json
    start = time.perf_counter()
    keep = getattr(args, "keep_intermediate", None)
    if keep == "":
        keep = str(Path(out) / "intermediate")
    say = (lambda line: None) if quiet else (lambda line: _say(f"  {line}"))
    design = api.compile(model, out, **dataclasses.asdict(options), keep_intermediate=keep, say=say)
    compiled, report = design.compiled, design.report
    if as_json:
        import json
        print(json.dumps(report, indent=2), flush=True)
    if not quiet:
        _say(f"compiled {model} -> {out} in {time.perf_counter() - start:.1f} s: {len(compiled.nodes)} layers")
        print_summary(report, console())
        host = compiled.host_ops
        if host["pre"] or host["post"]:
            _say(f"host ops: before {host['pre'] or '-'}, after {host['post'] or '-'}")
    from rtlgen.fit import Usage, fit_line
    fit = report["fit"]
    if not fit["fits"]:
        used = [Usage(k, v["used"], v["available"]) for k, v in fit["resources"].items()]
        _warn(args.command, f"{fit_line(used, fit['board'])}; lower the folding (--target-fps, --folding)")
    if args.target_fps is not None and report["frames_per_second"] < args.target_fps * (1 - 1e-9):
        _warn(args.command, f"--target-fps {args.target_fps:,.0f} is out of reach: the most parallel folding "
                            f"gives {report['frames_per_second']:,.0f} frames/s at {args.clock_mhz:g} MHz")
    return design


def _load_input(path):
    import numpy as np
    from sim.stream_io import InputError
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        return np.load(path, allow_pickle=False)
    except Exception as exc:
        raise InputError(f"{path}: not a .npy array ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None


def _model_input(model_path, x):
    """``x`` checked against the input of the ONNX model at ``model_path`` (see ``input_batch``)."""
    from sim.stream_io import input_batch
    from rtlgen.frontend import load_model

    model = load_model(model_path)
    name = model.graph.input[0].name
    return input_batch(x, name, model.get_tensor_shape(name))


# ---- commands ----

def add_compile_arguments(parser):
    parser.add_argument("model", metavar="MODEL.onnx")
    parser.add_argument("-o", "--out", required=True, metavar="OUT", help="output directory")
    parser.add_argument("--keep-intermediate", nargs="?", const="", metavar="DIR",
                        help="save the dataflow graph after every compiler pass as ONNX (NN_<pass>.onnx, opens "
                             "in Netron) into DIR (default: OUT/intermediate)")
    add_compile_options(parser)
    parser.add_argument("--json", action="store_true", help="print report.json on stdout instead of the table")


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
    parser.add_argument("--link-latency", type=int, default=None, metavar="CYCLES",
                        help="an `rtlgen partition` OUT: cycles from a flit entering a link to its arrival "
                             "(default 500: 5 us at 100 MHz)")


def run_sim_command(args):
    import numpy as np
    from rtlgen import api

    from sim.stream_io import InputError

    if (Path(args.out) / "partition.json").is_file():
        return _run_cluster_sim(args)
    if args.link_latency is not None:
        raise InputError(f"--link-latency: {args.out} is a single-device compile, not an `rtlgen partition` "
                           f"output")
    design = api.open_design(args.out)
    report = design.report
    x = design.io.check_input(_load_input(args.input))
    labels = _labels(args.labels, len(x)) if args.labels else None
    output = _npy_path(args.output) if args.output else None
    start = time.perf_counter()
    waves = None if args.waves is None else (args.waves or str(Path(args.out) / "waves.vcd"))
    run = design.simulate(x, simulator=args.simulator, waves=waves)
    seconds = time.perf_counter() - start
    ii = report["analytic_cycles_per_frame"]
    line = f"simulated {run.frames} frame(s) in {seconds:.1f} s: {run.cycles} cycles, latency {run.latency} cycles"
    if run.cycles_per_frame is not None:
        line += (f", {run.cycles_per_frame:.1f} cycles/frame (slowest layer II {ii}: "
                 f"{100 * (run.cycles_per_frame / ii - 1):+.2f} %)")
    _say(line)
    if waves:
        _say(f"waveform -> {waves}")
    if output:
        np.save(output, run.outputs)
        _say(f"output {run.outputs.shape} -> {output}")
    _report_classes(run.outputs, x, labels)
    return 0


def _run_cluster_sim(args):
    """`rtlgen sim` of an `rtlgen partition` OUT: every device with its bridges and the modelled links."""
    import json

    import numpy as np
    from rtlgen import scaleout
    from sim.stream_io import InputError, StreamIO

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
    (Path(args.out) / "cluster_sim.json").write_text(json.dumps(run.as_dict(), indent=2) + "\n")
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
    import numpy as np
    from sim.stream_io import InputError
    labels = np.asarray(_load_input(path)).reshape(-1)
    if len(labels) != n or labels.dtype.kind not in "iuf" or not np.all(np.isfinite(labels)) \
            or not np.all(labels == np.round(labels)):
        raise InputError(f"--labels {path}: need {n} integer class labels (one per sample), got an array of "
                         f"shape {labels.shape} and dtype {labels.dtype}")
    return labels.astype(np.int64)


def _npy_path(path):
    """Where ``np.save(path)`` writes (it appends .npy), checked before the simulation runs."""
    from sim.stream_io import InputError
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
    add_compile_options(parser)


def run_verify_command(args):
    """MODEL.onnx: compile (into -o or a temporary directory), simulate, compare; an OUT directory: simulate
    the design there and compare with the model it was compiled from."""
    from rtlgen import api

    existing = Path(args.model).is_dir()
    model = api.open_design(args.model).model if existing else args.model
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
    from rtlgen.verify import verify_outputs
    result = verify_outputs(model, x, run.outputs, design.io)
    _say(result.summary())
    if existing or args.out:            # kept: the result goes into OUT's report.html
        from rtlgen.html_report import record_verification
        _say(f"report -> {record_verification(args.model if existing else args.out, result)}")
    return 0 if result.passed else 1


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
    from rtlgen.build import BuildError, build
    from sim.stream_io import read_outputs

    if (Path(args.out) / "partition.json").is_file():
        if args.shell != "standalone" or args.toolchain != "yosys" or args.input:
            raise BuildError("a partitioned OUT is built as Galapagos kernels by Yosys, out of context (no "
                             "--shell zynq, --toolchain vivado or --input: there is no Galapagos shell for the "
                             "PYNQ-Z2)")
        from rtlgen import scaleout
        scaleout.build_kernels(args.out, say=_say)
        return 0
    inputs = None
    if args.input:
        _, io, _ = read_outputs(args.out)
        inputs = io.check_input(_load_input(args.input))
    build(args.out, shell=args.shell, toolchain=args.toolchain, board=args.board, inputs=inputs, say=_say,
          force=args.force)
    return 0


def add_inspect_arguments(parser):
    parser.add_argument("model", metavar="MODEL.onnx")
    parser.add_argument("--json", action="store_true", help="print the description as JSON")
    parser.add_argument("--folding", metavar="FOLD.json", help="FINN-format folding config (PE, SIMD, ...)")
    parser.add_argument("--target-fps", type=float, metavar="N",
                        help="naive folding (FINN SetFolding) for N frames/s (default: 1000 cycles per frame)")
    parser.add_argument("--clock-mhz", type=float, default=100.0, help="clock for --target-fps (default: %(default)s)")
    parser.add_argument("--input-dtype", metavar="DTYPE", help="the datatype of an input without a quantizer")
    add_optimizer_options(parser)


def run_inspect_command(args):
    import json
    from rtlgen.describe import describe, print_description
    from rtlgen.summary import console

    args.board, args.fifo_sizing, args.simulator, args.strict = "pynq-z2", "none", None, False
    info = describe(args.model, _options(args))
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print_description(info, console())
    return 0


def add_demo_arguments(parser):
    parser.add_argument("--simulator", choices=("verilator", "icarus"), default=None, help=SIMULATOR_HELP)
    parser.add_argument("--images", type=int, default=360, help="test images to simulate (default: all %(default)s)")
    parser.add_argument("--no-synth", action="store_true", help="skip the Yosys synthesis step")


def run_demo_command(args):
    from rtlgen.demo import run_demo
    return run_demo(simulator=args.simulator, synth=not args.no_synth, images=args.images, say=_say)


def add_partition_arguments(parser):
    parser.add_argument("model", help="QONNX / FINN-ONNX model (.onnx)")
    parser.add_argument("-o", "--out", required=True, help="output directory (partition.json, folding.json, cluster/)")
    parser.add_argument("--devices", type=int, required=True, help="number of FPGAs (at most)")
    parser.add_argument("--board", default="pynq-z2", choices=("pynq-z2",), help="each device's board")
    parser.add_argument("--budget", default=None, help="per-device budget lut=N,ff=N,bram36=N,dsp=N (default: "
                        "the board x --max-utilization)")
    parser.add_argument("--max-utilization", type=float, default=0.8, help="share of the board per device")
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


def run_partition_command(args):
    """The plan (cuts, folding, cluster files), then each device's Galapagos kernel (:mod:`rtlgen.scaleout`)."""
    import json
    from rtlgen.frontend import CompileError, load_model
    from rtlgen.lower import lower
    from rtlgen.optimize import Budget
    from rtlgen.partition import PartitionError, partition, write_plan

    try:
        budget = Budget.parse(args.budget) if args.budget else Budget.for_board(args.board, args.max_utilization)
    except ValueError as exc:
        raise CompileError(f"--budget: {exc}") from None
    fixed = None
    if args.partition:
        try:
            fixed = json.loads(Path(args.partition).read_text())
        except (OSError, ValueError) as exc:
            raise CompileError(f"--partition {args.partition}: {exc}") from None
        if not isinstance(fixed, dict):
            raise CompileError(f"--partition {args.partition}: must be a JSON object {{node name: device index}}")
    graph = lower(load_model(args.model))
    try:
        part = partition(graph, args.devices, budget, link_gbps=args.link_gbps, clock_mhz=args.clock_mhz,
                         fixed=fixed, flit_width=args.flit_width, max_packet_bytes=args.max_packet_bytes)
    except PartitionError as exc:
        raise CompileError(str(exc)) from None
    paths = write_plan(part, args.out, board=args.board)
    for device in part.devices:
        if device.nodes:
            _say(f"device {device.index}: {', '.join(device.nodes)} ({device.cycles:,} cycles; "
                 f"{device.binding} {device.utilization:.0%} of its budget)")
    _say(f"II {part.ii:,} cycles ({part.frames_per_second:,.0f} frames/s at {part.clock_mhz:g} MHz), "
         f"set by {part.bound_by}; plan -> {paths['partition']}, cluster files -> {paths['logical'].parent}")
    if args.plan_only:
        return 0
    from rtlgen import scaleout
    from rtlgen.compiler import CompileOptions

    options = CompileOptions(clock_mhz=args.clock_mhz, board=args.board, fifo_sizing=args.fifo_sizing)
    devices, io = scaleout.build_devices(args.model, part, options=options, say=_say)
    for device, path in zip(devices, scaleout.write_devices(devices, io, args.out)):
        _say(f"device {device.index}: Galapagos kernel {device.kernel_id} ({device.name}: FromGalapagos "
             f"{device.receive.words_per_frame} x {device.receive.word_width}-bit words -> layers -> ToGalapagos "
             f"TDEST {device.send.dest}) -> {path}")
    _say(f"simulate the cluster: rtlgen sim {args.out} --input X.npy")
    return 0


COMMANDS = {
    "compile": ("compile a QONNX / FINN-ONNX model into a stitched Verilog accelerator",
                add_compile_arguments, run_compile_command),
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
    "demo": ("compile a bundled trained model (8x8 digits MLP), simulate its test set, report accuracy, "
             "cycles and resources", add_demo_arguments, run_demo_command),
}


def build_parser():
    parser = argparse.ArgumentParser(prog="rtlgen", description=__import__("rtlgen").__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add_arguments, _) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        add_arguments(command)
        command.add_argument("--verbose", action="store_true", help="on an internal error, print the traceback")
    return parser


def user_errors():
    """The exceptions that mean bad input (exit 2, one line); anything else is a bug in rtlgen (exit 1)."""
    from rtlgen.build import BuildError
    from rtlgen.frontend import CompileError
    from sim.runner import SimulationError
    from sim.stream_io import InputError
    return CompileError, BuildError, InputError, SimulationError, FileNotFoundError


def main(argv=None):
    import warnings
    from rtlgen.frontend import CompileWarning

    args = build_parser().parse_args(argv)

    def show(message, category, *rest, **kwargs):
        if issubclass(category, CompileWarning):
            _warn(args.command, str(message))
        else:
            original(message, category, *rest, **kwargs)

    with warnings.catch_warnings():             # filters and the printer are restored on return
        # qonnx warns about opset versions and the like on every model: noise for a user of rtlgen
        warnings.filterwarnings("ignore", module=r"qonnx(\.|$)")
        warnings.filterwarnings("ignore", category=UserWarning, module=r"onnx(\.|$)")
        warnings.simplefilter("always", CompileWarning)
        original, warnings.showwarning = warnings.showwarning, show
        return _run(args)


def _run(args):
    """The command; bad input -> one line, exit 2; Ctrl-C -> exit 130; anything else is a bug -> exit 1."""
    import traceback
    from sim.runner import cache_limit_bytes
    try:
        cache_limit_bytes()         # a bad $RTLGEN_CACHE_MAX_GB is named now, not after the first build
        with _progress_bars():
            return COMMANDS[args.command][2](args)
    except KeyboardInterrupt:
        print(f"rtlgen {args.command}: interrupted", file=sys.stderr)
        return 130
    except user_errors() as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"rtlgen {args.command}: error: {first_line}", file=sys.stderr)
        return 2
    except Exception as exc:
        if args.verbose:
            traceback.print_exc()
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"rtlgen {args.command}: internal error: {type(exc).__name__}: {first_line} (a bug in rtlgen; "
              f"{'the traceback is above' if args.verbose else 'rerun with --verbose for the traceback'})",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
