"""The compile options: one dataclass, read by everything that takes options.

:class:`CompileOptions` is the single place an option is declared: its field (name, default), and in the
field's metadata the command-line flag, help and legal values. The command line's arguments are
generated from it (:func:`add_arguments`, :func:`from_args`), the API's ``compile(**options)`` is
validated by it, and :meth:`CompileOptions.check` says what no compile can use before any long step. A new
option is one field here (and what reads it). The options' own files are read here too: a build file
(:func:`read_config`) and a FINN folding file (:func:`load_folding_config`, checked before any step).
"""

import json
import math
import os
import re
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

import numpy as np

from rtlgen.errors import CompileError
from rtlgen.fit import BOARDS, Budget, utilization_shares

__all__ = ["CompileOptions", "DEFAULT_TARGET_CYCLES", "MAX_PLAUSIBLE_MHZ", "add_arguments", "argument_groups",
           "FIFO_SIZINGS", "target_cycles", "load_folding_config", "check_folding_config", "from_args", "read_config",
           "default_config", "check_input_dtype", "INSPECT", "OPTIMIZER"]

DEFAULT_TARGET_CYCLES = 1000        # naive folding target when neither a folding file nor a target fps is given
FIFO_SIZINGS = ("analytic", "sim", "none")     # --fifo-sizing: by the timing models, by simulation, join bounds only
SIMULATORS = ("verilator", "icarus")
SIMULATOR_HELP = ("HDL simulator: verilator (a compiled C++ bench; fast) or icarus (the cocotb bench; a second "
                  "opinion, slow on big networks); default: $RTLGEN_SIM, else verilator")
OPTIMIZER = ("fit", "max_utilization", "budget", "objective")                    # the folding optimizer's options
INSPECT = ("folding", "target_fps", "clock_mhz", "input_dtype") + OPTIMIZER     # what `rtlgen inspect` takes
# Beyond this the xc7z020 cannot clock a design at all (its global clock buffers stop at 464 MHz in the
# -1 speed grade, 628 MHz in the -3); rtlgen's layers reach ~250 MHz by the boards/timing.py estimate.
MAX_PLAUSIBLE_MHZ = 500
INPUT_DTYPES = ("BIPOLAR, BINARY, TERNARY, UINTn, INTn (n = 1..32), FIXED<w,i> (w = 2..32 bits, i = 1..w-1 of "
                "them integer bits with the sign, as hls4ml's ap_fixed<w,i>; FIXED<w,w> is INTw)")


# `rtlgen compile --help` shows the options in these groups, in this order (argparse argument groups)
GROUPS = {"folding": "folding: how parallel each layer is (FINN's PE and SIMD; hls4ml's reuse factor)",
          "objective": "objective: what the folding aims for",
          "board": "board: the device the design must fit",
          "input": "input: the model and its datatypes",
          "output": "output: OUT and what the compile writes and prints",
          "simulation": "simulation: FIFO sizing and the HDL simulator"}


def _option(default, help, *, group, metavar=None, choices=None, type=None, flag=None):
    return field(default=default, metadata=dict(help=help, group=group, metavar=metavar, choices=choices, type=type,
                                                flag=flag))


@dataclass
class CompileOptions:
    """Every option of a compile (`rtlgen compile`, `verify MODEL`, `inspect`, :func:`rtlgen.api.compile`)."""
    folding: str = _option(None, "FINN-format folding config (PE, SIMD, mem_mode, ...)", metavar="FOLD.json",
                           group="folding")
    fit: str = _option(None, "the folding optimizer: the fastest design within BOARD's device x --max-utilization "
                       "(with --target-fps: the cheapest design reaching it)", metavar="BOARD", choices=tuple(BOARDS),
                       group="folding")
    max_utilization: str = _option(None, "share of the device --fit may fill: F for every resource, or "
                                   "lut=F,ff=F,bram36=F,dsp=F (the others at their defaults) (default: LUT and FF "
                                   "0.8, BRAM36 and DSP 0.95)", metavar="F", group="folding")
    budget: str = _option(None, "the folding optimizer within this budget (any subset of the resources)",
                          metavar="lut=N,ff=N,bram36=N,dsp=N", group="folding")
    target_fps: float = _option(None, "naive folding (FINN SetFolding) for N frames/s (default: 1000 cycles per "
                                "frame); with --fit/--budget the cheapest design reaching it", metavar="N", type=float,
                                group="objective")
    objective: str = _option("throughput", "what the folding optimizer (--fit/--budget) minimises: throughput (the "
                             "highest frame rate) or latency (the fewest cycles from input to output; --target-fps "
                             "then a floor on the rate) (default: %(default)s)", choices=("throughput", "latency"),
                             group="objective")
    clock_mhz: float = _option(100.0, "clock for --target-fps and reports (default: %(default)s)", metavar="MHZ",
                               type=float, group="objective")
    board: str = _option("pynq-z2", "target board (default: %(default)s)", choices=tuple(BOARDS), group="board")
    strict: bool = _option(False, "a design estimated over the board is an error (default: a warning)", group="board")
    input_dtype: str = _option(None, "the datatype of the model's input when it has no input quantizer (BIPOLAR, "
                               "BINARY, UINT8, INT8, FIXED<16,6>, ...), as FINN's set_tensor_datatype (hls4ml's "
                               "precision of the input layer)", metavar="DTYPE", group="input")
    fifo_sizing: str = _option("analytic", "FIFO depths from the layers' composed timing models (analytic, "
                               "milliseconds), by simulating the stitched design (sim, FINN's way), or 2 and the "
                               "join bounds (none) (default: %(default)s)", choices=FIFO_SIZINGS, group="simulation")
    simulator: str = _option(None, SIMULATOR_HELP, choices=SIMULATORS, group="simulation")

    @classmethod
    def create(cls, **options):
        """The options named in ``options``; a CompileError naming an unknown one and the legal names."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise CompileError(f"unknown compile option {unknown[0]!r}; legal: {', '.join(names)}")
        return cls(**options)

    def check(self):
        """Raise CompileError for options no compile can use (before any long step): each value's type and
        range, the files it names, and the combinations that cannot go together. Returns ``self``."""
        self._check_types()
        for flag, value in (("--clock-mhz", self.clock_mhz), ("--target-fps", self.target_fps)):
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise CompileError(f"{flag} {value:g}: must be a positive number" if isinstance(value, (int, float))
                                   else f"{flag} {value!r}: must be a positive number")
        if self.target_fps is not None and self.target_fps > self.clock_mhz * 1e6:
            raise CompileError(f"--target-fps {self.target_fps:,.0f}: beyond one frame per clock cycle, the most any "
                               f"design reaches (at most {self.clock_mhz * 1e6:,.0f} frames/s at --clock-mhz "
                               f"{self.clock_mhz:g})")
        for f in fields(self):
            choices, value = f.metadata.get("choices"), getattr(self, f.name)
            if choices and value is not None and value not in choices:
                raise CompileError(f"{_flag(f)} {value!r} is not supported; legal: {', '.join(choices)}")
        try:
            utilization_shares(self.max_utilization)
        except ValueError as exc:
            raise CompileError(str(exc)) from None
        if self.fit is not None and self.budget is not None:
            raise CompileError("give either --fit or --budget, not both")
        if self.folding and (self.fit is not None or self.budget is not None):
            raise CompileError("give either --folding or --fit/--budget, not both")
        if self.folding and self.target_fps is not None:
            raise CompileError("give either --folding or --target-fps, not both")
        if self.budget is not None and self.max_utilization is not None:
            raise CompileError(f"--max-utilization {self.max_utilization}: a share of the board for --fit BOARD; "
                               f"--budget {self.budget} gives the numbers themselves: give one of them")
        if self.input_dtype is not None:
            self.input_dtype = check_input_dtype(self.input_dtype)
        if self.folding:
            _check_folding_file(self.folding)
        if self.budget is not None:
            if not np.isfinite(self.optimizer_budget().as_vector()).any():     # "" is no budget, not no limit
                raise CompileError(f"--budget {self.budget!r}: names no resource; give lut=N,ff=N,bram36=N,dsp=N "
                                   f"(any subset), or --fit pynq-z2")
        return self

    def _check_types(self):
        """Each option of the type its field declares (the API takes any Python value)."""
        for f in option_fields():
            value = getattr(self, f.name)
            if value is None and f.default is None:
                continue
            if f.type is bool:
                ok = isinstance(value, bool)
            elif f.type is float:
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            else:
                ok = isinstance(value, str) or (f.name == "folding" and isinstance(value, os.PathLike))
            if not ok:
                legal = {bool: "True or False", float: "a number"}.get(f.type, "a string")
                raise CompileError(f"{_flag(f)} {value!r}: must be {legal}, not {type(value).__name__}")

    def warnings(self):
        """Lines about options a compile takes but the user should know of (kept in report.json and
        report.html, and shown as the compile starts)."""
        lines = []
        if self.clock_mhz > MAX_PLAUSIBLE_MHZ:
            mhz = f"{self.clock_mhz:,.0f}" if self.clock_mhz >= 1000 else f"{self.clock_mhz:g}"
            lines.append(f"--clock-mhz {mhz}: beyond what an xc7z020 can run (at most "
                         f"~{MAX_PLAUSIBLE_MHZ} MHz; rtlgen's layers reach ~250 MHz), so the frames/s reported are "
                         f"not reachable")
        if self.max_utilization is not None and self.fit is None:
            lines.append(f"--max-utilization {self.max_utilization} without --fit: the folding is not chosen "
                         f"within it (only weights moved into block RAM keep to its BRAM36 share); add --fit "
                         f"{self.board} for the fastest design within it")
        return lines

    def optimizer_budget(self):
        """The folding optimizer's budget, or None when it is not asked for."""
        return self.user_budget()

    def user_budget(self):
        """The budget the user asked for (``--fit`` or ``--budget``), or None."""
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
        return max(1, target_cycles(self.target_fps, self.clock_mhz))     # beyond 1 cycle: the most parallel


def check_input_dtype(name):
    """The qonnx DataType name ``--input-dtype`` gives, canonical (``fixed<16, 6>`` -> ``FIXED<16,6>``);
    a CompileError naming what is legal for anything rtlgen cannot stream."""
    text = re.sub(r"\s+", "", str(name)).upper()
    legal = f"legal: {INPUT_DTYPES}"
    if text in ("BIPOLAR", "BINARY", "TERNARY"):
        return text
    match = re.fullmatch(r"(U?INT)(\d+)", text)
    if match:
        if not 1 <= int(match[2]) <= 32:
            raise CompileError(f"--input-dtype {name}: {match[1]}n takes n = 1..32 bits; {legal}")
        return f"{match[1]}{int(match[2])}"
    match = re.fullmatch(r"FIXED<(\d+),(-?\d+)>", text)
    if match:
        width, integer = int(match[1]), int(match[2])
        if not 2 <= width <= 32:
            raise CompileError(f"--input-dtype {name}: FIXED<w,i> takes w = 2..32 bits; {legal}")
        if not 1 <= integer < width:
            raise CompileError(f"--input-dtype {name}: FIXED<w,i> takes i = 1..w-1 integer bits (the sign "
                               f"among them){'; FIXED<w,w> is INTw' if integer == width else ''}; {legal}")
        return f"FIXED<{width},{integer}>"
    raise CompileError(f"--input-dtype {name}: not an integer or fixed-point qonnx DataType; {legal}")


def _check_folding_file(path):
    """``--folding``: a readable FINN folding config (JSON), checked now and named in the message."""
    try:
        load_folding_config(path)
    except UnicodeDecodeError:
        raise CompileError(f"--folding {path}: not a text file (a FINN folding config is JSON {{node name: "
                           f"{{PE, SIMD, ...}}}}, as OUT/folding.json)") from None
    except ValueError as exc:
        raise CompileError(f"--folding {path}: {str(exc).removeprefix(f'folding config {path}: ')}") from None


def _flag(f):
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def option_fields():
    """The fields of :class:`CompileOptions` that are options (a subclass may add state of its own)."""
    return [f for f in fields(CompileOptions) if "help" in f.metadata]


def argument_groups(parser):
    """{group: argparse argument group} of ``parser``, one per :data:`GROUPS` entry, in that order."""
    return {name: parser.add_argument_group(title) for name, title in GROUPS.items()}


def add_arguments(parser, names=None, groups=None):
    """Add the options ``names`` (default: all) to an argparse ``parser``, generated from the fields, each in
    its group of ``groups`` (:func:`argument_groups`) when given."""
    for f in option_fields():
        if names is not None and f.name not in names:
            continue
        meta = f.metadata
        kwargs = dict(help=meta["help"], dest=f.name)
        if f.type in (bool, "bool"):
            kwargs["action"] = "store_true"
        else:
            kwargs.update(default=None if f.default is MISSING else f.default)
            for key in ("metavar", "choices", "type"):
                if meta.get(key) is not None:
                    kwargs[key] = meta[key]
        (groups[meta["group"]] if groups else parser).add_argument(_flag(f), **kwargs)


def from_args(args, **overrides):
    """The :class:`CompileOptions` an argparse namespace carries (fields it lacks keep their defaults). With
    ``args.config`` (``--config BUILD.json``): the file's options, and over them the flags written on the
    command line (``args.given``, the destinations of the options written; without it, every flag)."""
    given = {f.name: getattr(args, f.name) for f in option_fields() if hasattr(args, f.name)}
    path = getattr(args, "config", None)
    if path:
        written = getattr(args, "given", None)
        from_file = read_config(path)
        given = {**given, **from_file,
                 **{k: v for k, v in given.items() if written is None or k in written}}
    return CompileOptions(**{**given, **overrides})


def read_config(path):
    """The options a build file sets (``--config BUILD.json``, :func:`rtlgen.api.compile`'s ``config``): a
    JSON object with one key per :class:`CompileOptions` field (``null``: the default), checked as the flags
    are; a relative ``folding`` path is relative to the file. A CompileError names the file and the key."""
    path = Path(path)
    shown = f"--config {path}"
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise CompileError(f"{shown}: no such file; `rtlgen config MODEL.onnx -o {path}` writes one with the "
                           f"defaults") from None
    except UnicodeDecodeError:
        raise CompileError(f"{shown}: not a text file (a build file is JSON {{option: value}})") from None
    except OSError as exc:
        raise CompileError(f"{shown}: cannot read it ({exc.strerror or exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CompileError(f"{shown}: not JSON (line {exc.lineno} column {exc.colno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise CompileError(f"{shown}: must be a JSON object {{option: value}}, not {type(data).__name__}")
    names = [f.name for f in option_fields()]
    for key in data:
        if key not in names:
            spelled = str(key).lstrip("-").replace("-", "_")
            hint = f" (the key of {key} is {spelled!r})" if spelled in names else ""
            raise CompileError(f"{shown}: unknown key {key!r}{hint}; legal: {', '.join(names)}")
    options = {k: v for k, v in data.items() if v is not None}
    if isinstance(options.get("folding"), str) and not Path(options["folding"]).is_absolute():
        options["folding"] = str(path.parent / options["folding"])
    try:
        CompileOptions.create(**options).check()
    except CompileError as exc:     # its message names the flag: here the key is what the user wrote
        text = re.sub(r"^--([a-z-]+)", lambda m: m[1].replace("-", "_"), str(exc))
        raise CompileError(f"{shown}: {text}") from None
    return options


def default_config(**options):
    """A build file's JSON text: every option, at ``options`` or its default."""
    chosen = CompileOptions.create(**options).check()
    return json.dumps({f.name: getattr(chosen, f.name) for f in option_fields()}, indent=2) + "\n"


def target_cycles(target_fps, clock_mhz):
    """FINN's target: int(1e9 / clk_ns / target_fps) cycles per frame."""
    if not target_fps or target_fps <= 0 or not clock_mhz or clock_mhz <= 0:
        raise ValueError(f"target_fps and clock_mhz must be positive, not {target_fps!r} and {clock_mhz!r}")
    clk_ns = 1000.0 / clock_mhz
    return int(1e9 / clk_ns / target_fps)


def load_folding_config(path):
    """Read a FINN folding config JSON file -> dict. Raises ValueError naming the file and the problem."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ValueError(f"folding config {path}: no such file") from None
    except OSError as exc:
        raise ValueError(f"folding config {path}: cannot read it ({exc.strerror or exc})") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"folding config {path}: invalid JSON at line {exc.lineno} column {exc.colno}: "
                         f"{exc.msg}") from None
    try:
        check_folding_config(config)
    except ValueError as exc:
        raise ValueError(f"folding config {path}: {exc}") from None
    return config


def check_folding_config(config):
    """A FINN folding config's shape, {node name: {attribute: value}}; ValueError saying what is wrong."""
    if not isinstance(config, dict):
        raise ValueError(f"must be a JSON object {{node name: {{attribute: value}}}}, not {type(config).__name__}")
    for key, entry in config.items():
        if not isinstance(entry, dict):
            raise ValueError(f"entry {key!r} must be an object {{attribute: value}}, not {type(entry).__name__}")
