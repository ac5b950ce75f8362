"""Verilog of one layer at a time: converted in parallel worker processes, cached by spec.

Amaranth's conversion costs seconds per large layer (a 64x36 XNOR MVAU: 3 s; CNV: 40 s in all) and is
single-threaded. A stitched design converts its layers as separate modules instead, so that

- the layers convert in parallel (one process per core, or on a Dask cluster: :mod:`rtlgen.backend.jobs`),
- FIFO sizing and the final design (which differ only in their FIFOs) share every other layer, and
- a rerun on the same model (``rtlgen verify`` after ``rtlgen compile``, a test, a benchmark) converts
  nothing: texts are cached on disk under ``$RTLGEN_CACHE_DIR/verilog``, keyed by the layer's spec,
  Amaranth's version and a hash of the layer sources (``layers``, ``swg``, ``memstream``), so an edited
  layer never reuses stale Verilog, and
- identical layers (the same op and spec under different names: CNV's FIFOs of one depth and width)
  convert once: a text is converted and cached under a placeholder module name, each node's name put
  in when it is read.

A module is named ``{top}.{node}`` (its submodules ``{top}.{node}.{sub}``), exactly as a single
conversion of :class:`rtlgen.backend.stitch.StitchedAccelerator` names them.
"""

import hashlib
import io
import os
import pickle
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import amaranth

from rtlgen.backend import yosys_inprocess
from rtlgen.costmodel import estimate
from rtlgen.backend.jobs import WorkersLost, completed
from sim import progress
from sim.runner import cache_dir, to_verilog

__all__ = ["LayerModule", "layer_modules", "unused", "convert", "sources_hash"]

_PLACEHOLDER = "rtlgen_top_placeholder.rtlgen_layer_placeholder"    # the layer's module name while cached;
                                                                    # replaced by "{top}.{node}"
_PARALLEL_FROM = 3                              # uncached layers worth starting worker processes for


@dataclass(frozen=True)
class LayerModule:
    name: str           # Verilog module name, "{top}.{node}"
    ports: dict         # {port: ("input" | "output", width)}
    text: str


def layer_modules(nodes, specs, *, prefix):
    """One :class:`LayerModule` per node (in order), module names under ``prefix`` (the top's name)."""
    keys = [_key(node, spec) for node, spec in zip(nodes, specs)]
    missing = {k: (k, node, spec) for k, node, spec in zip(keys, nodes, specs) if _cached(k) is None}
    if missing:
        with progress.task("converting layers to Verilog", total=len(missing)) as update:
            _convert_missing(list(missing.values()), update)
    modules = []
    for k, node in zip(keys, nodes):
        text = _cached(k).replace(_PLACEHOLDER, f"{prefix}.{node.name}")
        name, ports = _header(text)
        modules.append(LayerModule(name, ports, text))
    return modules


def _convert_missing(missing, update):
    done = 0
    jobs = [(k, n, s) for k, n, s in _by_size(missing)]
    try:
        # a cluster (--cluster) converts even a few layers; locally, worker processes pay from 3
        for index, text in completed(_convert, [(n, s, os.getpid()) for _, n, s in jobs], local_from=_PARALLEL_FROM,
                                     check=sources_hash):
            _store(jobs[index][0], text)
            done += 1
            update(done)
    except WorkersLost:
        pass                        # e.g. a worker killed for memory: convert here instead
    for k, node, spec in missing:
        if _cached(k) is None:
            update(description=f"converting {node.name} to Verilog")
            _store(k, _convert((node, spec, os.getpid())))
            done += 1
            update(done)


def unused(elaboratable):
    """Mark a component built only to read its signature (Amaranth warns about unelaborated ones)."""
    elaboratable._MustUse__silence = True
    return elaboratable


def _by_size(missing):
    """The largest netlists first (the layer's estimated LUTs and flip-flops; then the spec's size), so
    that the long conversions start at once: CNV-w1a1's MVAU_1 at ``--fit`` (15,000 LUTs, 13,000 one-bit
    registers: a quarter of the conversion, the longest) started seventh by spec size (its weights are
    few beside MVAU_3-7's), and the compile waited for it. A stable order for zip above."""
    def netlist(spec):
        try:
            used = estimate(spec)
        except Exception:       # an op without a cost model is not left out: it goes by its spec's size
            return 0
        return used.lut + used.ff
    return sorted(missing, key=lambda item: (-netlist(item[2]), -item[0][1]))


def convert(component, name):
    """Verilog text of an Amaranth component (top module ``name``, ports named by its signature): the one
    place the compiler converts. Layers go through :func:`layer_modules` (which calls this, cached); a top
    that only instantiates them (the stitched top, a scale-out device or cluster) calls it directly."""
    return to_verilog(component, name)


def _convert(job):
    """A layer's Verilog (cached under the placeholder name). In a worker of the pool or the cluster,
    Amaranth's built-in Yosys runs in the worker, loaded once for all its layers
    (:mod:`rtlgen.backend.yosys_inprocess`: the same text, without a new process per layer); in the
    compiling process itself, as Amaranth runs it (a process that loaded it cannot fork the next pool)."""
    node, spec, caller = job
    if os.getpid() == caller:
        return convert(node.component(spec), _PLACEHOLDER)
    with yosys_inprocess.used():
        return convert(node.component(spec), _PLACEHOLDER)


def _header(text):
    """(module name, ports) of the first module in ``text``: the layer itself."""
    m = re.search(r"^module \\?(\S+)\s*\(", text, re.M)
    body = text[m.end():text.index("endmodule", m.end())]
    ports = {}
    for direction, msb, port in re.findall(r"^\s*(input|output)\s+(?:\[(\d+):0\]\s+)?(\S+?)\s*;", body, re.M):
        ports[port] = (direction, int(msb) + 1 if msb else 1)
    return m.group(1), ports


# ---- the cache: {key: (digest, spec size)}; texts in memory and on disk ----

_MEMORY = {}


def _key(node, spec):
    # not the node's name: a layer's text is the same under any name (put in when read)
    return _digest((sources_hash(), _PLACEHOLDER, node.op_type, len(node.inputs), len(node.outputs), spec))


def _digest(value):
    """(sha256 prefix, size) of ``value`` pickled without the memo: a memoized pickle refers back to an object
    seen before, so two equal specs whose strings are shared differently (one from the code's literals, one
    read from a folding file) pickled to different keys, and a compile from a design's own folding.json
    converted every layer again."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=4)
    pickler.fast = True             # no memo: the bytes depend on the values only (specs hold no cycles)
    pickler.dump(value)
    blob = buffer.getvalue()
    return hashlib.sha256(blob).hexdigest()[:32], len(blob)


def _cache_file(key):
    return cache_dir() / "verilog" / f"{key[0]}.v"


def _cached(key):
    if key[0] in _MEMORY:
        return _MEMORY[key[0]]
    path = _cache_file(key)
    if path.is_file():
        _MEMORY[key[0]] = path.read_text()
        return _MEMORY[key[0]]
    return None


def _store(key, text):
    _MEMORY[key[0]] = text
    path = _cache_file(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    except OSError:
        pass                # a read-only cache only costs time


@lru_cache(maxsize=None)
def sources_hash():
    """A hash of the Amaranth version and every source of ``layers``, ``swg`` and ``memstream``: what a
    layer's generated Verilog depends on besides its spec (part of every cache key built from it)."""
    digest = hashlib.sha256(amaranth.__version__.encode())
    root = Path(__file__).resolve().parents[2]
    for package in ("layers", "swg", "memstream"):
        for path in sorted((root / package).rglob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()
