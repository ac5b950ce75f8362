"""The `rtlgen` command line. User errors end as one line on stderr and exit status 2."""

import argparse
import sys

__all__ = ["main"]


def add_demo_arguments(parser):
    parser.add_argument("--simulator", choices=("verilator", "icarus"), default=None,
                        help="HDL simulator (default: $RTLGEN_SIM, else icarus if installed, else verilator)")
    parser.add_argument("--no-synth", action="store_true", help="skip the Yosys synthesis step (default: %(default)s)")


def run_demo_command(args):
    from rtlgen.demo import run_demo
    return run_demo(simulator=args.simulator, synth=not args.no_synth)


COMMANDS = {
    "demo": ("run the foundation layers on a bundled example, bit-exact, and report cycles and resources",
             add_demo_arguments, run_demo_command),
}


def build_parser():
    parser = argparse.ArgumentParser(prog="rtlgen", description=__import__("rtlgen").__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add_arguments, _) in COMMANDS.items():
        add_arguments(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv=None):
    from sim.runner import SimulationError

    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command][2](args)
    except (ValueError, SimulationError, FileNotFoundError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"rtlgen {args.command}: error: {first_line}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
