"""The compile options: one dataclass, read by everything that takes options.

:class:`CompileOptions` is the single place an option is declared: its field (name, default), and in the
field's metadata the command-line flag, help and legal values. The command line's arguments are
generated from it (:func:`add_arguments`, :func:`from_args`), the API's ``compile(**options)`` is
validated by it, and :meth:`CompileOptions.check` says what no compile can use before any long step. A new
option is one field here (and what reads it).
"""

import math
from dataclasses import MISSING, dataclass, field, fields

import numpy as np

from rtlgen.errors import CompileError
from rtlgen.fit import BOARDS, utilization_shares
from rtlgen.passes.fold import target_cycles
from rtlgen.passes.optimize import Budget
from rtlgen.passes.size_fifos import FIFO_SIZINGS

__all__ = ["CompileOptions", "DEFAULT_TARGET_CYCLES", "add_arguments", "from_args", "INSPECT", "OPTIMIZER"]

DEFAULT_TARGET_CYCLES = 1000        # naive folding target when neither a folding file nor a target fps is given
SIMULATORS = ("verilator", "icarus")
SIMULATOR_HELP = ("HDL simulator: verilator (a compiled C++ bench; fast) or icarus (the cocotb bench; a second "
                  "opinion, slow on big networks); default: $RTLGEN_SIM, else verilator")
OPTIMIZER = ("fit", "max_utilization", "budget", "objective")                    # the folding optimizer's options
INSPECT = ("folding", "target_fps", "clock_mhz", "input_dtype") + OPTIMIZER     # what `rtlgen inspect` takes


def _option(default, help, *, metavar=None, choices=None, type=None, flag=None):
    return field(default=default, metadata=dict(help=help, metavar=metavar, choices=choices, type=type, flag=flag))


@dataclass
class CompileOptions:
    """Every option of a compile (`rtlgen compile`, `verify MODEL`, `inspect`, :func:`rtlgen.api.compile`)."""
    folding: str = _option(None, "FINN-format folding config (PE, SIMD, mem_mode, ...)", metavar="FOLD.json")
    target_fps: float = _option(None, "naive folding (FINN SetFolding) for N frames/s (default: 1000 cycles per "
                                "frame); with --fit/--budget the cheapest design reaching it", metavar="N", type=float)
    clock_mhz: float = _option(100.0, "clock for --target-fps and reports (default: %(default)s)", metavar="MHZ",
                               type=float)
    board: str = _option("pynq-z2", "target board (default: %(default)s)", choices=tuple(BOARDS))
    fifo_sizing: str = _option("analytic", "FIFO depths from the layers' composed timing models (analytic, "
                               "milliseconds), by simulating the stitched design (sim, FINN's way), or 2 and the "
                               "join bounds (none) (default: %(default)s)", choices=FIFO_SIZINGS)
    simulator: str = _option(None, SIMULATOR_HELP, choices=SIMULATORS)
    input_dtype: str = _option(None, "the datatype of the model's input when it has no input quantizer (BIPOLAR, "
                               "BINARY, UINT8, INT8, FIXED<16,6>, ...), as FINN's set_tensor_datatype",
                               metavar="DTYPE")
    fit: str = _option(None, "the folding optimizer: the fastest design within BOARD's device x --max-utilization "
                       "(with --target-fps: the cheapest design reaching it)", metavar="BOARD", choices=tuple(BOARDS))
    max_utilization: str = _option(None, "share of the device --fit may fill: F for every resource, or "
                                   "lut=F,ff=F,bram36=F,dsp=F (the others at their defaults) (default: LUT and FF "
                                   "0.8, BRAM36 and DSP 0.95)", metavar="F")
    budget: str = _option(None, "the folding optimizer within this budget (any subset of the resources)",
                          metavar="lut=N,ff=N,bram36=N,dsp=N")
    strict: bool = _option(False, "a design estimated over the board is an error (default: a warning)")
    objective: str = _option("throughput", "what the folding optimizer (--fit/--budget) minimises: throughput (the "
                             "highest frame rate) or latency (the fewest cycles from input to output; --target-fps "
                             "then a floor on the rate) (default: %(default)s)", choices=("throughput", "latency"))

    @classmethod
    def create(cls, **options):
        """The options named in ``options``; a CompileError naming an unknown one and the legal names."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise CompileError(f"unknown compile option {unknown[0]!r}; legal: {', '.join(names)}")
        return cls(**options)

    def check(self):
        """Raise CompileError for options no compile can use (before any long step)."""
        for flag, value in (("--clock-mhz", self.clock_mhz), ("--target-fps", self.target_fps)):
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise CompileError(f"{flag} {value:g}: must be a positive number" if isinstance(value, (int, float))
                                   else f"{flag} {value!r}: must be a positive number")
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
        if self.budget is not None:
            if not np.isfinite(self.optimizer_budget().as_vector()).any():     # "" is no budget, not no limit
                raise CompileError(f"--budget {self.budget!r}: names no resource; give lut=N,ff=N,bram36=N,dsp=N "
                                   f"(any subset), or --fit pynq-z2")
        return self

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


def _flag(f):
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def add_arguments(parser, names=None):
    """Add the options ``names`` (default: all) to an argparse ``parser``, generated from the fields."""
    for f in fields(CompileOptions):
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
        parser.add_argument(_flag(f), **kwargs)


def from_args(args, **overrides):
    """The :class:`CompileOptions` an argparse namespace carries (fields it lacks keep their defaults)."""
    given = {f.name: getattr(args, f.name) for f in fields(CompileOptions) if hasattr(args, f.name)}
    return CompileOptions(**{**given, **overrides})
