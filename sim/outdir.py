"""OUT, the directory ``rtlgen compile`` writes, owned by one class, :class:`OutDir`: every path in it, their
writing and reading back, the manifest with their sha256, and a compile's check, lock and swap (done by
:mod:`sim.outdir_swap`, which the class calls: callers use the class). The compiler (``rtlgen``) and the
runtime (:mod:`sim.stream_io`'s users: the benches, ``boards``) both use it; no other module names a file
in OUT (tests/test_outdir.py). It lives in ``sim`` so that the runtime imports nothing of the compiler.

The manifest keeps each file's sha256 too, so that ``sim``, ``verify``, ``build`` and ``prove`` can say
first which of OUT's files were edited since the compile (:meth:`OutDir.changed_line`); a command that
rewrites one of them itself (report.html) updates its hash (:meth:`OutDir.rehash`).

The manifest also keeps the source model's sha256 and its path relative to OUT (and absolute, as a
fallback), so ``rtlgen sim OUT`` / ``verify OUT`` find the model after the project moved and can say
when it changed since the compile. :meth:`OutDir.read_outputs` reads an OUT back; :meth:`OutDir.read_design`
does too, with errors that name the damaged file.
"""

import json
import os
from contextlib import contextmanager
from pathlib import Path

from sim import outdir_swap
from sim.outdir_swap import MANIFEST, OutError, read_manifest, sha256, write_manifest
from sim.stream_io import StreamIO

__all__ = ["OutDir", "OutError"]


class _File:
    """A file (or folder) of OUT: on the class its name in OUT, on an :class:`OutDir` its path."""

    def __init__(self, name):
        self.name = name

    def __set_name__(self, owner, attr):
        owner.FILES = {**getattr(owner, "FILES", {}), attr: self.name}

    def __get__(self, out, owner):
        return self.name if out is None else out.path / self.name


class OutDir:
    """The OUT at ``path``: its files as paths (``OutDir(out).report``; on the class, ``OutDir.report`` is
    the name), what reads and writes them, its manifest, and a compile's check, lock and swap."""

    # ---- the files of an OUT
    verilog = _File("finn_design_wrapper.v")        # the stitched top (FINN's name)
    io = _File("io.json")                           # how the model's tensors meet the streams (sim.stream_io)
    report = _File("report.json")                   # the compile's figures (rtlgen.backend.emit)
    model_hw = _File("model_hw.onnx")               # the dataflow graph in FINN's hardware-layer ONNX
    folding = _File("folding.json")                 # the folding, in FINN's format
    partition = _File("partition.json")             # `rtlgen partition`'s plan (its OUT has no top of its own)
    cluster_sim = _File("cluster_sim.json")         # `rtlgen sim` of a partition: the last run's figures
    verify = _File("verify.json")                   # `rtlgen verify OUT`: the last comparison
    host_pre = _File("host_pre.onnx")               # the host's ONNX before the accelerator
    host_post = _File("host_post.onnx")             # ... and after it
    report_html = _File("report.html")              # the compile's figures as a page (rtlgen.report.html)
    intermediate = _File("intermediate")            # `--keep-intermediate`'s default: the graph after each pass
    build = _File("build")                          # `rtlgen build`'s folder (its files are the user's: kept)
    yosys_dir = _File("build/yosys")                # Yosys' synthesis: its scripts, logs and netlist
    yosys_report = _File("build/yosys/report.json")  # `rtlgen build`'s synthesis figures and netlist record
    vivado_dir = _File("build/vivado")              # `rtlgen build`'s Vivado project (and bitstream)
    waves = _File("waves.vcd")                      # `rtlgen sim --waves`' default (the user's: kept)
    prove_dir = _File("prove")                      # `rtlgen prove`'s runs, one folder a node
    prove_report = _File("prove/report.json")       # the last `rtlgen prove`'s outcomes, one per node
    cluster_logical = _File("cluster/logical.xml")  # `rtlgen partition`'s Galapagos cluster files
    cluster_map = _File("cluster/map.xml")
    manifest = _File(MANIFEST)                      # what the compile wrote, with sha256s and the model's

    REQUIRED = ("verilog", "io", "report")          # a compile's OUT has at least these

    def __init__(self, path):
        self._given = str(path)         # as the user gave it ("" is not the working directory)
        self.path = Path(path.path if isinstance(path, OutDir) else path)

    def __fspath__(self):
        return os.fspath(self.path)

    def __str__(self):
        return str(self.path)

    def __repr__(self):
        return f"OutDir({str(self.path)!r})"

    def __eq__(self, other):
        return isinstance(other, OutDir) and other.path == self.path

    def __hash__(self):
        return hash(self.path)

    def device(self, index):
        """The folder of device ``index`` in an `rtlgen partition` OUT, itself laid out as an OUT (its
        kernel, report.json, model_hw.onnx, build/)."""
        return OutDir(self.path / f"device{index}")

    def kernel(self, top):
        """A device folder's kernel Verilog, module ``top`` (`rtlgen partition`)."""
        return self.path / f"{top}.v"

    def is_partition(self):
        """Whether this is an `rtlgen partition` OUT (it has a plan)."""
        return self.partition.is_file()

    def relative(self, path):
        """``path`` (in OUT) relative to OUT, as the manifest lists it."""
        return Path(path).relative_to(self.path).as_posix()

    def missing(self):
        """The names of the required files (verilog, io, report) that OUT lacks."""
        return [OutDir.FILES[k] for k in self.REQUIRED if not getattr(self, k).is_file()]

    # ------------------------------------------------------------------------------------- reads and writes

    def write_text(self, path, text):
        """Write ``text`` to ``path`` in OUT, making its folder."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def write_json(self, path, data):
        """Write ``data`` as JSON (indented, a final newline) to ``path`` in OUT, making its folder."""
        self.write_text(path, json.dumps(data, indent=2) + "\n")

    def read_json(self, path):
        """The JSON at ``path`` in OUT."""
        return json.loads(Path(path).read_text())

    def write_design(self, *, verilog, io, folding, model_hw, report):
        """Write a compile's design: the stitched top's Verilog, ``io`` (:meth:`write_io`), the ``folding``
        (FINN's format), ``model_hw`` (an ONNX ModelProto) and ``report`` (report.json's dict)."""
        import onnx             # start-up: the CLI's reads of OUT load no onnx

        self.path.mkdir(parents=True, exist_ok=True)
        self.write_text(self.verilog, verilog)
        self.write_io(io)
        self.write_json(self.folding, folding)
        onnx.save(model_hw, str(self.model_hw))
        self.write_json(self.report, report)

    def write_io(self, io):
        """Save the :class:`sim.stream_io.StreamIO` ``io``: io.json and the host's models."""
        hosts = ((self.host_pre, io.host_pre), (self.host_post, io.host_post))
        for path, sub in hosts:
            if sub is not None:
                sub.save(str(path))
            elif path.exists():
                path.unlink()
        meta = dict(io.to_json(), host_models=[path.name for path, sub in hosts if sub is not None])
        self.write_json(self.io, meta)

    def read_io(self):
        """The :class:`sim.stream_io.StreamIO` saved here (:meth:`write_io`)."""
        from qonnx.core.modelwrapper import ModelWrapper

        meta = self.read_json(self.io)
        lost = [n for n in meta.get("host_models", ()) if not (self.path / n).is_file()]
        if lost:
            raise FileNotFoundError(f"{self.path}: {lost[0]} is missing (the host's share of the model, written "
                                    f"by `rtlgen compile`); compile again")
        hosts = [ModelWrapper(str(p)) if p.exists() else None for p in (self.host_pre, self.host_post)]
        return StreamIO.from_json(meta, *hosts)

    def read_outputs(self):
        """(Verilog text, StreamIO, report dict) of a compile output directory; clear errors if it is not one."""
        lacking = self.missing()
        if lacking:
            raise FileNotFoundError(f"{self.path}: not an rtlgen compile output (missing {', '.join(lacking)}); "
                                    f"run `rtlgen compile MODEL.onnx -o {self.path}` first")
        return self.verilog.read_text(), self.read_io(), self.read_json(self.report)

    # ------------------------------------------------------------------------------------------ the manifest

    def read_manifest(self):
        """The manifest as a dict, or None when OUT has none (an OUT of an older rtlgen, or not one)."""
        return read_manifest(self.path)

    def claim(self, paths):
        """Add ``paths`` (in OUT, written there by a later command: verify.json) to the manifest, so the next
        compile removes them with the rest of the design; no-op without a manifest."""
        manifest = self.read_manifest()
        if manifest is None:
            return
        manifest["files"] = sorted(set(manifest.get("files", [])) | {self.relative(p) for p in paths})
        write_manifest(self.path, manifest)

    def rehash(self, paths):
        """Record the current sha256 of ``paths`` (in OUT, rewritten by rtlgen itself after the compile:
        report.html) in the manifest, where it keeps one; no-op otherwise."""
        manifest = self.read_manifest()
        hashes = (manifest or {}).get("sha256")
        if not isinstance(hashes, dict):
            return
        names = [self.relative(p) for p in paths]
        names = [n for n in names if n in hashes and (self.path / n).is_file()]
        if not names:
            return
        for name in names:
            hashes[name] = sha256(self.path / name)
        write_manifest(self.path, manifest)

    def changed_files(self):
        """[(path relative to OUT, "edited" | "gone")] for the files whose sha256 differs from the manifest's
        (empty for an OUT whose manifest keeps no hashes: an older rtlgen's, or not an rtlgen OUT)."""
        try:
            manifest = self.read_manifest()
        except OutError:
            return []
        hashes = (manifest or {}).get("sha256")
        if not isinstance(hashes, dict):
            return []
        changed = []
        for name, digest in sorted(hashes.items()):
            path = self.path / name
            if not path.is_file():
                changed.append((name, "gone"))
                continue
            try:
                if sha256(path) != digest:
                    changed.append((name, "edited"))
            except OSError:
                changed.append((name, "unreadable"))
        return changed

    def changed_line(self):
        """One line naming OUT's files edited since the compile (None when none was): said before anything
        else, since a run on an edited design is not the compile's."""
        # a file gone is left to the reader that needs it (its error names it); one it does not need changes nothing
        changed = [(name, how) for name, how in self.changed_files() if how != "gone"]
        if not changed:
            return None
        shown = ", ".join(f"{name} ({how})" for name, how in changed[:6]) + (
            f" and {len(changed) - 6} more" if len(changed) > 6 else "")
        model = None
        try:
            model, _ = self.model_source()
        except OutError:
            pass
        out = self.path
        return (f"{len(changed)} file{'s' if len(changed) > 1 else ''} of {out} changed since the compile (sha256 "
                f"differs from its manifest): {shown}; what follows runs the changed design, not the compile's "
                f"(rtlgen compile {model or 'MODEL.onnx'} -o {out} writes it again)")

    def model_source(self, report=None):
        """(path of the model OUT was compiled from, or None if it is not found; a note: None when it is
        as compiled, else one line saying what changed). Looks at the manifest's path relative to OUT, then
        its absolute path; an OUT without a manifest gives report.json's path, unchecked."""
        out = self.path
        source = (self.read_manifest() or {}).get("model")
        if not source:
            path = (report or {}).get("model")
            return (path if path and Path(path).is_file() else None), None
        candidates = [Path(os.path.normpath(out.absolute() / source["path"])), Path(source["absolute"])]
        found = next((p for p in candidates if p.is_file()), None)
        if found is None:
            return None, (f"the model {out} was compiled from is gone (not at {candidates[0]} nor {candidates[1]})")
        try:
            changed = sha256(found) != source["sha256"]
        except OSError:
            changed = True
        if changed:
            return str(found), (f"{found} changed since {out} was compiled from it (sha256 differs); {out} may be "
                                f"stale: rtlgen compile {found} -o {out}")
        return str(found), None

    # ------------------------------------------------------------------------------------- a compile's swap

    def check(self, *, force=False):
        """Raise :class:`OutError` unless OUT can take a compile: missing (its parent creatable and
        writable), an empty directory, or an rtlgen OUT; any other directory only with ``force``."""
        outdir_swap.check_out(self._given, force=force)   # as given: "" is refused

    def lock(self):
        """A context holding OUT's lock (``.OUT.rtlgen-lock`` beside it); :class:`OutError` at once if
        another compile holds it."""
        return outdir_swap.lock(self._given)

    @contextmanager
    def replacing(self, *, force=False, model=None, warn=None):
        """Yield the :class:`OutDir` of a new empty directory beside OUT to write a design into; when the
        body returns, its manifest is written (every file, and ``model``'s sha256 and paths) and it is
        swapped in as OUT, carrying over what the old OUT held besides its manifest's files. On an
        exception the new directory is removed and OUT is untouched. ``warn(text)`` gets a line for each
        of the user's files renamed (``NAME~``) because the new design writes a file of that name."""
        with outdir_swap.replacing(self._given, force=force, model=model, warn=warn) as new:
            yield OutDir(new)

    # ------------------------------------------------------------------------------------------ reading OUT

    REPORT_KEYS = ("model", "analytic_cycles_per_frame", "layers", "totals", "input", "output", "clock_mhz", "fit")
    IO_KEYS = ("model_input", "model_input_shape", "model_output", "input", "output")

    def read_design(self):
        """(Verilog text, :class:`sim.stream_io.StreamIO`, report dict) of a compile's OUT, as
        :meth:`read_outputs`; a file that is there but damaged (truncated, emptied, edited) is an
        :class:`OutError` naming it and saying to compile again."""
        out = self.path
        if not self._given.strip():
            raise OutError(f"{self._given!r}: an empty name; give the directory `rtlgen compile` wrote")
        if out.exists() and not out.is_dir():
            raise OutError(f"{out}: is a file, not an rtlgen compile output (a directory)")
        if not out.exists():
            raise OutError(f"{out}: no such directory; give the directory `rtlgen compile` wrote (rtlgen compile "
                           f"MODEL.onnx -o {out} makes it)")
        if self.missing():
            try:
                self.read_outputs()
            except FileNotFoundError as exc:    # it says what is missing and what to run
                raise OutError(str(exc)) from None
        again = self._again()
        report = self._json(self.report, again, self.REPORT_KEYS)
        meta = self._json(self.io, again, self.IO_KEYS)
        verilog = _text(self.verilog, again)
        if not verilog.rstrip().endswith("endmodule"):
            raise OutError(f"{self.verilog}: truncated (it does not end with endmodule); {again}")
        try:
            io = self.read_io()
        except FileNotFoundError:
            raise
        except Exception as exc:
            raise OutError(f"{self._culprit(meta)}: damaged ({_first_line(exc)}); {again}") from None
        return verilog, io, report

    def _again(self):
        try:
            model, _ = self.model_source()
        except OutError:
            model = None
        return f"compile again: rtlgen compile {model or 'MODEL.onnx'} -o {self.path}"

    def _json(self, path, again, keys):
        try:
            data = json.loads(_text(path, again))
        except ValueError as exc:
            raise OutError(f"{path}: damaged or truncated (not JSON: {_first_line(exc)}); {again}") from None
        if not isinstance(data, dict):
            raise OutError(f"{path}: damaged (a JSON object was expected); {again}")
        lost = [k for k in keys if k not in data]
        if lost:
            raise OutError(f"{path}: damaged (no {', '.join(map(repr, lost))}); {again}")
        return data

    def _culprit(self, meta):
        """Which of io.json's files cannot be read: a host model that onnx cannot load, else io.json."""
        import onnx             # ~0.3 s: only to name a damaged host model; read_design stays light for the CLI
        for name in meta.get("host_models", ()) if isinstance(meta.get("host_models"), list) else ():
            try:
                onnx.load(str(self.path / name))
            except Exception:
                return self.path / name
        return self.io


def _text(path, again):
    try:
        return path.read_text()
    except UnicodeDecodeError:
        raise OutError(f"{path}: damaged (not text); {again}") from None


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
