"""Synthesis of a stitched design by parts: each layer on its own (out of context), once per distinct
Verilog text (cached), then the rest of the design around the layers as black boxes; the counts add up.

Why: one ``synth_xilinx`` over a whole CNV runs for tens of minutes and starts over when one layer's
folding changes. ``rtlgen build`` keeps the module hierarchy (no optimization crosses a module
boundary), so a layer synthesized alone maps to the cells it maps to inside the design: the totals of
the parts are the totals of the whole (``tests/test_yosys_parts.py`` compares the two on a design). A
layer whose Verilog is unchanged (same folding, same weights) comes from the cache; identical layers
(the FIFOs of one depth and width) are synthesized once: a part is synthesized under a placeholder name.

What does not carry over: timing paths that cross a layer boundary (a layer's output logic into the
next one's input logic). Each part's own paths are analysed as if a register drove each of its inputs
and took each of its outputs (``synthesize(between_registers=True)``): register to register inside it,
and from its input ports and to its output ports; the top's with the layers as black boxes; the design's
critical path is the longest of those. A layer whose output logic feeds the next layer's input logic in
the same cycle (chained layers, no FIFO between them) has a path across the boundary that neither part
sees whole: ``boards.yosys.netlist_path`` analyses the kept netlist flattened whole.

``run(function, items)`` yields ``(index, result)`` as jobs finish (``rtlgen.backend.jobs.completed``: a
process pool or a Dask cluster); serial when not given. The cache lives in ``$RTLGEN_CACHE_DIR/yosys-parts``.
"""

import dataclasses
import hashlib
import json
import re
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from boards.yosys import SynthReport, report_from_files, synthesize, yosys_engine
from sim.parts import split_modules      # (the compiled bench is built by parts as well)
from sim.runner import cache_dir, locked, touch

__all__ = ["synthesize_by_parts", "split_modules", "PLACEHOLDER"]

PLACEHOLDER = "rtlgen_yosys_part"      # a part's module name while it is synthesized and cached
_FORMAT = 3                            # bump when the script or the files kept change
_KEPT = ("stat.json", "dsp.txt", "sta.txt", "sta_modules.txt", "netlist.v")
_FRAMED = "$flatten\\framed."           # boards.yosys.registered_frame's instance, flattened


def synthesize_by_parts(verilog_text, *, top, parts_of, workdir, netlist=None, run=None, say=print, effort=None):
    """Synthesize ``verilog_text`` (top module ``top``) with each direct submodule of ``parts_of`` (the
    stitched accelerator's layers) as a part of its own; returns a :class:`SynthReport` of the whole as
    ``synthesize(..., hierarchy=True, children_of=parts_of, sta=True)`` does (``modules``: per layer,
    ``paths``: per layer and the design's longest), with ``parts``: {"synthesized": n, "cached": n}.
    ``netlist``: ``(module, file name)`` written into ``workdir``: the mapped ``parts_of`` module and its
    layers, as one Verilog file. ``effort``: {layer: a number growing with its synthesis time} (e.g. the
    estimated LUTs), to start the longest first; by default the length of the layer's Verilog."""
    start = time.monotonic()
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    modules = split_modules(verilog_text)
    prefix = f"{parts_of}."
    layers = [name[len(prefix):] for name in modules if name.startswith(prefix) and "." not in name[len(prefix):]]
    texts = {layer: _part_text(modules, f"{prefix}{layer}") for layer in layers}
    keys = {layer: _key(text) for layer, text in texts.items()}
    missing = {}                        # key -> the layers that share it
    for layer in layers:
        if not _cached(keys[layer]):
            missing.setdefault(keys[layer], []).append(layer)
    say(f"Yosys by parts: {len(layers)} layers ({len(set(keys.values()))} distinct, {len(missing)} to synthesize, "
        f"the rest from the cache) and the design around them")
    rest = "".join(text for name, text in modules.items()
                   if not any(name == f"{prefix}{l}" or name.startswith(f"{prefix}{l}.") for l in layers))
    stubs = "".join(_ports_only(modules[f"{prefix}{layer}"]) for layer in layers)
    # The design around the layers needs only their ports: it runs here (a Yosys child process, watched
    # from a thread) beside the parts' jobs instead of after them.
    with ThreadPoolExecutor(max_workers=1) as background:
        around = background.submit(synthesize, rest, top=top, hierarchy=True, children_of=parts_of, sta=True,
                                   workdir=workdir / "top", netlist=netlist, lib=stubs,
                                   label=f"{top} around its layers")
        # the longest first, so that the pool ends on small parts, not on a long one
        size = (lambda layer: effort.get(layer, 0)) if effort else (lambda layer: len(texts[layer]))
        jobs = [(key, (texts[same[0]], _label(same)))
                for key, same in sorted(missing.items(), key=lambda item: -size(item[1][0]))]
        _synthesize_missing(jobs, run)
        reports = {layer: _read_part(keys[layer], f"{prefix}{layer}") for layer in layers}
        around = around.result()
    if netlist is not None:
        module, name = netlist
        text = (workdir / "top" / name).read_text()
        text += "".join(reports[layer][1] for layer in layers)
        (workdir / name).write_text(text)
    return _whole(top, around, {layer: r for layer, (r, _) in reports.items()}, time.monotonic() - start,
                  synthesized=len(missing), cached=len(set(keys.values())) - len(missing))


def _label(layers):
    return layers[0] + (f" (and {len(layers) - 1} identical)" if len(layers) > 1 else "")


def _part_text(modules, name):
    """A layer's module and its submodules, under the placeholder name."""
    text = "".join(t for n, t in modules.items() if n == name or n.startswith(f"{name}."))
    return text.replace(name, PLACEHOLDER)


def _key(text):
    return hashlib.sha256(json.dumps([_FORMAT, yosys_engine(), text]).encode()).hexdigest()[:24]


def _entry(key):
    return cache_dir() / "yosys-parts" / key


def _cached(key):
    return (_entry(key) / "stat.json").exists()


def _synthesize_missing(jobs, run):
    """Each (key, text) synthesized (in parallel through ``run``), its files stored under its key."""
    if not jobs:
        return
    results = run(_synthesize_part, [item for _, item in jobs]) if run is not None else \
        ((i, _synthesize_part(item)) for i, (_, item) in enumerate(jobs))
    for index, files in results:
        entry = _entry(jobs[index][0])
        with locked(entry.parent / f"{entry.name}.lock"):
            tmp = entry.with_name(entry.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            for name, content in files.items():
                (tmp / name).write_text(content)
            shutil.rmtree(entry, ignore_errors=True)
            tmp.rename(entry)


def _synthesize_part(item):
    """One part alone, as the whole design's run treats it (hierarchy kept, its own paths): {file: text}.
    ``item``: (its Verilog under the placeholder name, what the progress line calls it)."""
    text, label = item
    with tempfile.TemporaryDirectory(prefix="rtlgen-part-") as tmp:
        # (only the part's own longest path is read back: no per-submodule paths). Between registers: in
        # the design a register drives each input (a FIFO's, or the previous layer's) and takes each output
        synthesize(text, top=PLACEHOLDER, hierarchy=True, sta=True, workdir=tmp, between_registers=True,
                   netlist=(PLACEHOLDER, "netlist.v"), label=label, module_paths=False)
        return {name: (Path(tmp) / name).read_text() for name in _KEPT if (Path(tmp) / name).exists()}


def _read_part(key, name):
    """(SynthReport of the cached part under its real ``name``, its netlist text under that name)."""
    entry = _entry(key)
    touch(entry)
    report = report_from_files(entry, PLACEHOLDER, sta=True)
    own = (report.paths or {}).get(PLACEHOLDER)      # the whole part's longest path, between registers
    # (the cells' names as in the part, without the frame's flattening prefix)
    paths = {} if own is None else {name: dataclasses.replace(own, module=name, cells=tuple(
        (c.replace(_FRAMED, "").replace(PLACEHOLDER, name), k) for c, k in own.cells))}
    report = dataclasses.replace(report, top=name, paths=paths)
    return report, _renamed((entry / "netlist.v").read_text(), name)


def _renamed(netlist, name):
    """The placeholder in a part's netlist back to ``name``, which has a dot: always an escaped identifier
    (Yosys wrote the placeholder plain where it could, ``module rtlgen_yosys_part(``)."""
    return re.sub(rf"(\\?){PLACEHOLDER}(\.?)",
                  lambda m: f"\\{name}{m.group(2)}" if m.group(1) or m.group(2) else f"\\{name} ", netlist)


def _ports_only(module_text):
    """A module's header and port declarations: a black box for the top's synthesis."""
    lines = module_text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("module "))
    ports = [line for line in lines[head + 1:] if re.match(r"\s*(input|output|inout)\b", line)]
    return "\n".join(["(* blackbox *)", lines[head], *ports, "endmodule", ""])


def _whole(top, around, parts, seconds, *, synthesized, cached):
    """The top's cells plus every part's, per-layer reports, and the longest path of all."""
    cells = dict(around.cells)
    for report in parts.values():
        for kind, n in report.cells.items():
            cells[kind] = cells.get(kind, 0) + n
    paths = {layer: next(iter(r.paths.values())) for layer, r in parts.items() if r.paths}
    own = (around.paths or {}).get(top)
    worst = max([p for p in [own, *paths.values()] if p is not None], key=lambda p: p.path_ns, default=None)
    if worst is not None:
        paths[top] = worst
    arrivals = [r.critical_path_ns for r in [around, *parts.values()] if r.critical_path_ns is not None]
    whole = SynthReport.from_cells(top, cells, max(arrivals, default=None), seconds)
    dsp = dict(around.dsp_registers or {})
    for report in parts.values():
        for regs, n in (report.dsp_registers or {}).items():
            dsp[regs] = dsp.get(regs, 0) + n
    return dataclasses.replace(whole, modules=parts, paths=paths, dsp_registers=dsp,
                               parts={"synthesized": synthesized, "cached": cached})
