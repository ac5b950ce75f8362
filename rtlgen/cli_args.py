"""The `rtlgen` command line's parsing: each command's arguments (the compile options generated from
:class:`rtlgen.options.CompileOptions`, in groups by task), the parser, and what the parse tells the
commands (``given``: the options written on the command line). :mod:`rtlgen.cli` runs the command
(:mod:`rtlgen.cli_commands`) under its error policy."""

import argparse

from rtlgen.options import FIFO_SIZINGS, INSPECT, SIMULATOR_HELP, add_arguments, argument_groups, option_fields

__all__ = ["COMMANDS", "UsageError", "build_parser", "parse", "option_name", "refuse_compile_options"]


class UsageError(ValueError):
    """An option or setting the command cannot use (one line, exit 2)."""


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
    add_cluster_option(groups["output"])
    return groups


def add_cluster_option(parser):
    parser.add_argument("--cluster", metavar="ADDRESS",
                        help="run the per-layer jobs (Verilog conversion, proofs, a partition's kernel "
                             "syntheses) on the Dask scheduler at "
                             "ADDRESS (tcp://HOST:8786; needs pip install 'rtlgen[cluster]'; default: "
                             "$RTLGEN_CLUSTER, else a process per core here)")


def add_force_option(parser):
    parser.add_argument("--force", action="store_true",
                        help="compile into OUT even if it is a directory that is neither empty nor an rtlgen output "
                             "(its files stay; one named like an rtlgen output is kept as NAME~)")


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
    parser.add_argument("--flat", action="store_true",
                        help="one Yosys run over the whole design (the default synthesizes each layer on its own, "
                             "once per distinct layer, cached and in parallel, then the design around them)")
    parser.add_argument("--no-self-test", action="store_true",
                        help="standalone shell: no expected words, so no simulation (the self-test's expected "
                             "words otherwise come from the bench `rtlgen sim` builds, cached)")
    add_cluster_option(parser)


def add_inspect_arguments(parser):
    parser.add_argument("model", metavar="MODEL.onnx")
    parser.add_argument("--json", action="store_true", help="print the description as JSON")
    parser.add_argument("--config", metavar="BUILD.json", help="a build file (`rtlgen config`): its options, the "
                        "flags written here over them")
    add_compile_options(parser, INSPECT)


def add_demo_arguments(parser):
    parser.add_argument("--simulator", choices=("verilator", "icarus"), default=None, help=SIMULATOR_HELP)
    parser.add_argument("--images", type=int, default=360, help="test images to simulate (default: all %(default)s)")
    parser.add_argument("--no-synth", action="store_true", help="skip the Yosys synthesis step (rtlgen build)")
    parser.add_argument("-o", "--out", default="rtlgen-demo", metavar="OUT",
                        help="keep the compiled design, its report.html and the build here, as `rtlgen compile` "
                             "does (replaced by the next demo; `rtlgen sim|verify|build OUT` work on it) "
                             "(default: %(default)s in the current directory)")
    add_force_option(parser)


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
    add_compile_options(parser, ("input_dtype",))
    add_force_option(parser)
    add_cluster_option(parser)


def add_prove_arguments(parser):
    parser.add_argument("out", metavar="OUT", help="a directory written by `rtlgen compile` or `rtlgen partition` "
                        "(every device's nodes and Galapagos bridges, named device{d}/NAME)")
    parser.add_argument("--depth", type=int, metavar="N",
                        help="cycles of each node's bounded check and induction (default: one frame of the "
                             "proven instance, a FIFO twice its capacity)")
    parser.add_argument("--node", metavar="NAME", help="prove this node only (a name from report.json)")
    parser.add_argument("--timeout", type=float, metavar="S",
                        help="seconds per solver run (default 300); a node whose run takes longer is "
                             "reported unknown, with the step its bounded check reached")
    parser.add_argument("--jobs", type=int, metavar="N", help="nodes proven at once (default: one per core)")
    add_cluster_option(parser)


# {command: (help, function adding its arguments)}; rtlgen.cli_commands.RUN has what each runs
COMMANDS = {
    "compile": ("compile a QONNX / FINN-ONNX model into a stitched Verilog accelerator", add_compile_arguments),
    "config": ("write a build file (JSON) with every compile option, for `rtlgen compile --config`", add_config_arguments),
    "sim": ("simulate a compiled accelerator on model inputs (.npy)", add_sim_arguments),
    "verify": ("compile, simulate and compare with qonnx's execution of the model: exit 0 iff bit-exact", add_verify_arguments),
    "build": ("synthesize a compiled accelerator in a board shell (Yosys report, Vivado plan, bitstream "
              "with Vivado)", add_build_arguments),
    "inspect": ("show the dataflow graph a model lowers to: nodes, datatypes, folding axes with their legal "
                "values, host ops", add_inspect_arguments),
    "partition": ("split a model across several FPGAs (Galapagos): cuts and folding under each device's "
                  "budget and the links' bandwidth, cluster files, one Verilog kernel per device", add_partition_arguments),
    "prove": ("prove every node's stream contract (Yosys' SMT-BMC, yices): AXI-Stream rules, words per frame, FIFO "
              "and width-converter order, a frame within its cycles; exit 0 iff all hold", add_prove_arguments),
    "demo": ("compile a bundled trained model (8x8 digits MLP), simulate its test set, report accuracy, "
             "cycles and resources", add_demo_arguments),
}


class _Parser(argparse.ArgumentParser):
    """argparse's errors as one line (the usage is ten): what is wrong, and where the usage is."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` shows the usage)\n")


def build_parser():
    parser = _Parser(prog="rtlgen", description=__import__("rtlgen").__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parser.commands = {}
    for name, (help_text, add_command_arguments) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        add_command_arguments(command)
        command.add_argument("--verbose", action="store_true", help="on an internal error, print the traceback")
        parser.commands[name] = command
    return parser


def parse(argv):
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
    _refuse_empty(parser.commands[args.command], args)
    return args


def _refuse_empty(command, args):
    """An option or argument written as "" is an error naming it (never silently the default, or the working
    directory); where a bare flag means the default (``--waves``, ``--keep-intermediate``), "" means it too."""
    for action in command._actions:
        if action.dest in args.given and getattr(args, action.dest, None) == "" and action.nargs != "?":
            name = action.option_strings[0] if action.option_strings else action.metavar or action.dest
            what = action.metavar or action.dest.upper()
            command.error(f"{name} '': an empty value; give {what}")


def _unrecognized(parser, command, extra):
    option = extra[0].split("=", 1)[0]
    compile_options = {s for a in parser.commands["compile"]._actions for s in a.option_strings}
    if command in ("sim", "build") and option in compile_options:
        return (f"{option} is a compile option, and `rtlgen {command}` uses OUT as it was compiled; compile again "
                f"with it (rtlgen compile MODEL.onnx -o OUT {option} ...)")
    return f"unrecognized arguments: {' '.join(extra)}"


def compile_only():
    """What `rtlgen verify OUT` cannot use (it runs OUT as compiled): every compile option but the simulator."""
    return ("out", "quiet", "force", "config") + tuple(f.name for f in option_fields() if f.name != "simulator")


def refuse_compile_options(args, why):
    given = [dest for dest in compile_only() if dest in getattr(args, "given", ())]
    if given:
        raise UsageError(f"{option_name(args.command, given[0])} is a compile option, and {why}")


def option_name(command, dest):
    """The long spelling of the option of ``command`` stored in ``dest`` (e.g. --target-fps)."""
    for action in build_parser().commands[command]._actions:
        if action.dest == dest and action.option_strings:
            return max(action.option_strings, key=len)
    return dest
