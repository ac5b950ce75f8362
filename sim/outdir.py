"""OUT, the directory ``rtlgen compile`` writes, owned by this one module: the name of every file in it,
their writing and reading back, the manifest with their sha256, the lock and the swap. The compiler
(``rtlgen``) and the runtime (:mod:`sim.stream_io`'s users: the benches, ``boards``) both use it; no other
module names a file in OUT. It lives in ``sim`` so that the runtime imports nothing of the compiler.

A compile writes the new design into a temporary directory beside OUT (``.OUT.rtlgen-new-*``) and only
at the end swaps it in, so an interrupted or failed recompile leaves the previous design as it was.
What it wrote is listed in ``OUT/.rtlgen-manifest.json``; on the next compile, only those files are
removed: anything else in OUT (``build/`` with a bitstream, ``waves.vcd``, the user's notes) moves into
the new OUT with the swap. A directory that is neither empty nor an rtlgen OUT is refused unless
``force`` (then its files stay, one named like a file rtlgen writes renamed ``NAME~``). A lock file
beside OUT (``.OUT.rtlgen-lock``) makes a second compile into the same OUT refuse while one runs.

The manifest keeps each file's sha256 too, so that ``sim``, ``verify``, ``build`` and ``prove`` can say
first which of OUT's files were edited since the compile (:func:`changed_line`); a command that rewrites
one of them itself (report.html) updates its hash (:func:`rehash`).

The manifest also keeps the source model's sha256 and its path relative to OUT (and absolute, as a
fallback), so ``rtlgen sim OUT`` / ``verify OUT`` find the model after the project moved and can say
when it changed since the compile. :func:`read_outputs` reads an OUT back; :func:`read_design` does too,
with errors that name the damaged file.
"""

import errno
import glob
import hashlib
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from sim.stream_io import StreamIO

__all__ = ["OutError", "VERILOG", "IO", "REPORT", "MODEL_HW", "FOLDING", "PARTITION", "CLUSTER_SIM", "VERIFY",
           "HOST_PRE", "HOST_POST", "REPORT_HTML", "BUILD", "YOSYS_DIR", "YOSYS_REPORT", "VIVADO_DIR", "WAVES",
           "PROVE_DIR", "PROVE_REPORT",
           "MANIFEST", "REQUIRED",
           "device_dir", "missing", "write_io", "read_io", "read_outputs", "check_out", "replacing", "lock",
           "read_manifest", "claim", "rehash", "changed_files", "changed_line", "model_source", "read_design", "sha256"]

# ---- the files of an OUT
VERILOG = "finn_design_wrapper.v"       # the stitched top (FINN's name)
IO = "io.json"                          # how the model's tensors meet the streams (sim.stream_io.StreamIO)
REPORT = "report.json"                  # the compile's figures (rtlgen.backend.emit)
MODEL_HW = "model_hw.onnx"              # the dataflow graph in FINN's hardware-layer ONNX
FOLDING = "folding.json"                # the folding, in FINN's format
PARTITION = "partition.json"            # `rtlgen partition`'s plan (its OUT has no top of its own)
CLUSTER_SIM = "cluster_sim.json"        # `rtlgen sim` of a partition: the last run's figures
VERIFY = "verify.json"                  # `rtlgen verify OUT`: the last comparison
HOST_PRE, HOST_POST = "host_pre.onnx", "host_post.onnx"     # the host's ONNX before and after the accelerator
REPORT_HTML = "report.html"             # the compile's figures as a page (rtlgen.report.html)
BUILD = "build"                         # `rtlgen build`'s folder (its files are the user's: kept by a compile)
YOSYS_DIR = f"{BUILD}/yosys"            # Yosys' synthesis: its scripts, logs and netlist
YOSYS_REPORT = f"{YOSYS_DIR}/report.json"   # `rtlgen build`'s synthesis figures and netlist record
VIVADO_DIR = f"{BUILD}/vivado"          # `rtlgen build`'s Vivado project (and bitstream, with --toolchain vivado)
WAVES = "waves.vcd"                     # `rtlgen sim --waves`' default (the user's: kept by a compile)
PROVE_DIR = "prove"                     # `rtlgen prove`'s runs, one folder a node
PROVE_REPORT = f"{PROVE_DIR}/report.json"   # the last `rtlgen prove`'s outcomes, one per node
MANIFEST = ".rtlgen-manifest.json"      # what the compile wrote, with sha256s and the model's
REQUIRED = (VERILOG, IO, REPORT)        # a compile's OUT has at least these
FORMAT = 1


class OutError(ValueError):
    """OUT cannot be used as asked (not rtlgen's, in use by another compile, damaged); the message names
    the path and what to do."""


def _absolute(out):
    out = Path(os.path.abspath(out))
    return out.resolve() if out.is_symlink() else out


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def device_dir(index):
    """The folder of device ``index`` in an `rtlgen partition` OUT: its kernel, report.json, model_hw.onnx and
    build/ (the names above, inside it)."""
    return f"device{index}"


def missing(out):
    """The names of :data:`REQUIRED` that ``out`` lacks."""
    return [name for name in REQUIRED if not (Path(out) / name).is_file()]


# ---------------------------------------------------------------------------------------------- the runtime's files

def write_io(io, out):
    """Save the :class:`sim.stream_io.StreamIO` ``io`` into ``out``: io.json and the host's models."""
    out = Path(out)
    hosts = ((HOST_PRE, io.host_pre), (HOST_POST, io.host_post))
    for name, sub in hosts:
        path = out / name
        if sub is not None:
            sub.save(str(path))
        elif path.exists():
            path.unlink()
    meta = dict(io.to_json(), host_models=[name for name, sub in hosts if sub is not None])
    (out / IO).write_text(json.dumps(meta, indent=2) + "\n")


def read_io(out):
    """The :class:`sim.stream_io.StreamIO` saved in ``out`` (:func:`write_io`)."""
    from qonnx.core.modelwrapper import ModelWrapper

    out = Path(out)
    meta = json.loads((out / IO).read_text())
    lost = [n for n in meta.get("host_models", ()) if not (out / n).is_file()]
    if lost:
        raise FileNotFoundError(f"{out}: {lost[0]} is missing (the host's share of the model, written by "
                                f"`rtlgen compile`); compile again")
    hosts = [ModelWrapper(str(out / n)) if (out / n).exists() else None for n in (HOST_PRE, HOST_POST)]
    return StreamIO.from_json(meta, *hosts)


def read_outputs(out):
    """(Verilog text, StreamIO, report dict) of a compile output directory; clear errors if it is not one."""
    out = Path(out)
    lacking = missing(out)
    if lacking:
        raise FileNotFoundError(f"{out}: not an rtlgen compile output (missing {', '.join(lacking)}); "
                                f"run `rtlgen compile MODEL.onnx -o {out}` first")
    return (out / VERILOG).read_text(), read_io(out), json.loads((out / REPORT).read_text())


# ---------------------------------------------------------------------------------------------- before a compile

def check_out(out, *, force=False):
    """Raise :class:`OutError` unless ``out`` can take a compile: missing (its parent creatable and
    writable), an empty directory, or an rtlgen OUT (one with a manifest); any other directory only
    with ``force``."""
    shown = out
    if not str(out).strip():            # os.path.abspath("") is the working directory: never a silent choice
        raise OutError(f"-o {str(out)!r}: an empty name; give the output directory (-o . for the current one)")
    out = _absolute(out)
    if out.exists() and not out.is_dir():
        raise OutError(f"-o {shown}: is a file, not a directory")
    if out.is_dir():
        if not os.access(out, os.W_OK | os.X_OK):
            raise OutError(f"-o {shown}: cannot write into it ({_why_not_writable(out)}); make it writable or "
                           f"choose another -o")
        if not force and not (out / MANIFEST).is_file() and any(True for _ in out.iterdir()):
            raise OutError(f"-o {shown}: the directory is not empty and is not an rtlgen output (it has no "
                           f"{MANIFEST}); choose a new or empty directory, or pass --force to compile into it "
                           f"(its files stay; one named like an rtlgen output is kept as NAME~)")
    existing = out.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise OutError(f"-o {shown}: cannot create the directory ({existing} is a file, not a directory)")
    if not os.access(existing, os.W_OK | os.X_OK):      # the new design is built beside OUT, in its parent
        raise OutError(f"-o {shown}: cannot write in {existing} ({_why_not_writable(existing)}), where the new "
                       f"design is built before it replaces OUT; make that writable or choose another -o")


def _why_not_writable(path):
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "a read-only file system"
    except OSError:
        pass
    return "permission denied"


@contextmanager
def lock(out):
    """Hold OUT's lock file (``.OUT.rtlgen-lock`` beside it) for the body; :class:`OutError` at once if
    another compile holds it. The file is removed on release."""
    import fcntl           # POSIX only: the rest of the module (read_design, the CLI's checks) imports anywhere

    out = _absolute(out)
    path = out.parent / f".{out.name}.rtlgen-lock"
    while True:
        fd = _os_call(lambda: os.open(path, os.O_RDWR | os.O_CREAT, 0o644), out, beside=True)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                os.close(fd)
                raise
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            os.close(fd)
            raise OutError(f"-o {out}: another rtlgen compile{f' (process {holder})' if holder else ''} is writing "
                           f"it now (lock {path}); wait for it to finish, or choose another -o") from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)            # the previous holder removed the file as we opened it: take the new one
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
        os.close(fd)


def _os_call(call, out, beside=False):
    """``call()``, an OSError as :class:`OutError` naming OUT; ``beside``: the call creates one of rtlgen's
    own files beside OUT (its lock, the new design's folder), which the message names by OUT's folder, not
    by a file name the user never chose."""
    try:
        return call()
    except OSError as exc:
        if beside:
            raise OutError(f"-o {out}: cannot create files in {out.parent} ({exc.strerror or exc}), where rtlgen "
                           f"keeps OUT's lock and builds the new design before it replaces OUT; choose another "
                           f"-o") from None
        raise OutError(f"-o {out}: {exc.strerror or exc}"
                       + (f" ({exc.filename})" if exc.filename else "") + "; choose another -o") from None


# ---------------------------------------------------------------------------------------------- the swap

@contextmanager
def replacing(out, *, force=False, model=None, warn=None):
    """Yield a new empty directory beside ``out`` to write a design into; when the body returns, write
    the manifest there (every file in it, and ``model``'s sha256 and paths) and swap it in as ``out``,
    carrying over what the old OUT held besides its manifest's files. On an exception (Ctrl-C included)
    the new directory is removed and ``out`` is untouched. ``warn(text)`` gets a line for each of the
    user's files that had to be renamed (``NAME~``) because the new design writes a file of that name."""
    check_out(out, force=force)
    out = _absolute(out)
    _os_call(lambda: out.parent.mkdir(parents=True, exist_ok=True), out)
    source = _model_record(model, out) if model is not None and Path(model).is_file() else None
    with lock(out):
        for stale in out.parent.glob(f".{glob.escape(out.name)}.rtlgen-*-*"):     # left by a killed compile
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)
        new = Path(_os_call(lambda: tempfile.mkdtemp(prefix=f".{out.name}.rtlgen-new-", dir=out.parent), out,
                            beside=True))
        try:
            yield new
            files = sorted(_files(new))
            manifest = {"rtlgen_out": FORMAT, "files": files, "model": source,
                        "compiled": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                        "sha256": {f: sha256(new / f) for f in files
                                   if (new / f).is_file() and not (new / f).is_symlink()}}
            (new / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
            with _signals_deferred():
                _swap(new, out, warn or (lambda text: None))
        except OSError as exc:
            # a full disk surfaces from write() with no file name: the place it was writing is OUT
            if exc.errno in (errno.ENOSPC, errno.EDQUOT) and not exc.filename:
                exc.filename = str(out)
            raise
        finally:
            if new.exists():
                shutil.rmtree(new, ignore_errors=True)


def _model_record(model, out):
    model = Path(os.path.abspath(model))
    return {"sha256": sha256(model), "path": os.path.relpath(model, out), "absolute": str(model)}


def _files(root):
    """Relative POSIX paths of every file (and symlink) under ``root``."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            found.append((rel / name).as_posix())
    return [f for f in found if f != MANIFEST]


def _owned(out):
    """The files the manifest of ``out`` lists (empty when it has none)."""
    manifest = read_manifest(out)
    return set(manifest.get("files", ())) if manifest else set()


def _user_entries(out, owned):
    """Topmost paths under ``out`` that are not rtlgen's: files not in ``owned``, directories holding none."""
    owned_dirs = {Path(f).parent.as_posix() for f in owned}
    owned_dirs |= {p.as_posix() for f in owned for p in Path(f).parents}

    def walk(directory, rel):
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            r = f"{rel}/{entry.name}" if rel else entry.name
            if r == MANIFEST:
                continue
            if entry.is_dir(follow_symlinks=False):
                if r in owned_dirs:
                    yield from walk(entry.path, r)
                else:
                    yield r
            elif r not in owned:
                yield r
    return list(walk(out, ""))


def _free_name(directory, rel):
    candidate = rel + "~"
    while os.path.lexists(directory / candidate):
        candidate += "~"
    return candidate


def _swap(new, out, warn):
    """Put ``new`` in place of ``out``: the user's entries of the old OUT move into ``new``, then two
    renames exchange the directories and the old one (rtlgen's files only, by now) is removed. Every
    step before the exchange is undone on failure. Where OUT cannot be renamed (it holds the working
    directory, or it is a mount point) its files are replaced one by one instead."""
    mode = out.stat().st_mode & 0o7777 if out.is_dir() else 0o777 & ~_umask()
    os.chmod(new, mode)
    if not out.exists():
        _rename(new, out)
        return
    owned = _owned(out)
    cwd = Path(os.getcwd()).resolve()
    if os.path.ismount(out) or cwd == out.resolve() or out.resolve() in cwd.parents:
        _replace_in_place(new, out, owned, warn)
        return
    moved = []
    try:
        for rel in _user_entries(out, owned):
            target = rel if not os.path.lexists(new / rel) else _free_name(new, rel)
            (new / target).parent.mkdir(parents=True, exist_ok=True)
            _rename(out / rel, new / target)
            moved.append((out / rel, new / target))
            if target != rel:
                warn(f"{out / rel} is not rtlgen's but the new design writes that name: kept as {out / target}")
        aside = Path(tempfile.mkdtemp(prefix=f".{out.name}.rtlgen-old-", dir=out.parent))
        aside.rmdir()
        _rename(out, aside)
        try:
            _rename(new, out)
        except BaseException:
            _rename(aside, out)
            raise
    except BaseException:
        for src, dst in reversed(moved):
            try:
                src.parent.mkdir(parents=True, exist_ok=True)
                os.rename(dst, src)
            except OSError:
                pass
        raise
    shutil.rmtree(aside, ignore_errors=True)


def _replace_in_place(new, out, owned, warn):
    new_files = _files(new)
    for rel in new_files:
        dst = out / rel
        if os.path.lexists(dst) and rel not in owned:
            target = _free_name(out, rel)
            _rename(dst, out / target, PARTLY)
            warn(f"{dst} is not rtlgen's but the new design writes that name: kept as {out / target}")
        dst.parent.mkdir(parents=True, exist_ok=True)
        _rename(new / rel, dst, PARTLY)
    for rel in sorted(owned - set(new_files)):
        path = out / rel
        if path.is_file() or path.is_symlink():
            path.unlink()
        for parent in Path(rel).parents:
            if parent != Path("."):
                try:
                    (out / parent).rmdir()
                except OSError:
                    break
    _rename(new / MANIFEST, out / MANIFEST, PARTLY)


PARTLY = "OUT holds part of the new design: compile again"


def _rename(src, dst, kept="the previous design is left as it was"):
    try:
        os.rename(src, dst)
    except OSError as exc:
        raise OutError(f"cannot move {src} to {dst} ({exc.strerror or exc}); {kept}") from None


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def _signals_deferred():
    """Ctrl-C (and SIGTERM) during the swap take effect after it: the swap is a few renames."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum))
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if caught:
            if caught[0] == signal.SIGINT:
                raise KeyboardInterrupt
            os.kill(os.getpid(), caught[0])


# ---------------------------------------------------------------------------------------------- after a compile

def read_manifest(out):
    """OUT's manifest as a dict, or None when it has none (an OUT of an older rtlgen, or not one)."""
    path = Path(out) / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        raise OutError(f"{path}: damaged (not the JSON `rtlgen compile` wrote); compile again") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files", []), list):
        raise OutError(f"{path}: damaged (not the manifest `rtlgen compile` wrote); compile again")
    return manifest


def claim(out, names):
    """Add ``names`` (paths relative to ``out``, written there by a later command: verify.json) to OUT's
    manifest, so the next compile removes them with the rest of the design; no-op without a manifest."""
    manifest = read_manifest(out)
    if manifest is None:
        return
    manifest["files"] = sorted(set(manifest.get("files", [])) | set(names))
    _write_manifest(out, manifest)


def rehash(out, names):
    """Record the current sha256 of ``names`` (paths relative to ``out`` that rtlgen itself rewrote after
    the compile: report.html) in OUT's manifest, where it keeps one; no-op otherwise."""
    manifest = read_manifest(out)
    hashes = (manifest or {}).get("sha256")
    if not isinstance(hashes, dict):
        return
    names = [n for n in names if n in hashes and (Path(out) / n).is_file()]
    if not names:
        return
    for name in names:
        hashes[name] = sha256(Path(out) / name)
    _write_manifest(out, manifest)


def changed_files(out):
    """[(path relative to OUT, "edited" | "gone")] for the files whose sha256 differs from the manifest's
    (empty for an OUT whose manifest keeps no hashes: an older rtlgen's, or not an rtlgen OUT)."""
    try:
        manifest = read_manifest(out)
    except OutError:
        return []
    hashes = (manifest or {}).get("sha256")
    if not isinstance(hashes, dict):
        return []
    changed = []
    for name, digest in sorted(hashes.items()):
        path = Path(out) / name
        if not path.is_file():
            changed.append((name, "gone"))
            continue
        try:
            if sha256(path) != digest:
                changed.append((name, "edited"))
        except OSError:
            changed.append((name, "unreadable"))
    return changed


def changed_line(out):
    """One line naming OUT's files edited since the compile (None when none was): said before anything
    else, since a run on an edited design is not the compile's."""
    # a file gone is left to the reader that needs it (its error names it); one it does not need changes nothing
    changed = [(name, how) for name, how in changed_files(out) if how != "gone"]
    if not changed:
        return None
    shown = ", ".join(f"{name} ({how})" for name, how in changed[:6]) + (
        f" and {len(changed) - 6} more" if len(changed) > 6 else "")
    model = None
    try:
        model, _ = model_source(out)
    except OutError:
        pass
    return (f"{len(changed)} file{'s' if len(changed) > 1 else ''} of {out} changed since the compile (sha256 "
            f"differs from its manifest): {shown}; what follows runs the changed design, not the compile's "
            f"(rtlgen compile {model or 'MODEL.onnx'} -o {out} writes it again)")


def _write_manifest(out, manifest):
    path = Path(out) / MANIFEST
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmp, path)


def model_source(out, report=None):
    """(path of the model ``out`` was compiled from, or None if it is not found; a note: None when it is
    as compiled, else one line saying what changed). Looks at the manifest's path relative to OUT, then
    its absolute path; an OUT without a manifest gives report.json's path, unchecked."""
    out = Path(out)
    manifest = read_manifest(out)
    source = (manifest or {}).get("model")
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


# ---------------------------------------------------------------------------------------------- reading OUT

REPORT_KEYS = ("model", "analytic_cycles_per_frame", "layers", "totals", "input", "output", "clock_mhz", "fit")
IO_KEYS = ("model_input", "model_input_shape", "model_output", "input", "output")


def read_design(out):
    """(Verilog text, :class:`sim.stream_io.StreamIO`, report dict) of a compile's OUT, as
    :func:`read_outputs`; a file that is there but damaged (truncated, emptied, edited) is
    an :class:`OutError` naming it and saying to compile again."""
    if not str(out).strip():
        raise OutError(f"{str(out)!r}: an empty name; give the directory `rtlgen compile` wrote")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutError(f"{out}: is a file, not an rtlgen compile output (a directory)")
    if not out.exists():
        raise OutError(f"{out}: no such directory; give the directory `rtlgen compile` wrote (rtlgen compile "
                       f"MODEL.onnx -o {out} makes it)")
    if missing(out):
        try:
            read_outputs(out)
        except FileNotFoundError as exc:    # it says what is missing and what to run
            raise OutError(str(exc)) from None
    again = _again(out)
    report = _json(out, REPORT, again, REPORT_KEYS)
    meta = _json(out, IO, again, IO_KEYS)
    verilog = _text(out / VERILOG, again)
    if not verilog.rstrip().endswith("endmodule"):
        raise OutError(f"{out / VERILOG}: truncated (it does not end with endmodule); {again}")
    try:
        io = read_io(out)
    except FileNotFoundError:
        raise
    except Exception as exc:
        raise OutError(f"{_culprit(out, meta)}: damaged ({_first_line(exc)}); {again}") from None
    return verilog, io, report


def _again(out):
    try:
        model, _ = model_source(out)
    except OutError:
        model = None
    return f"compile again: rtlgen compile {model or 'MODEL.onnx'} -o {out}"


def _text(path, again):
    try:
        return path.read_text()
    except UnicodeDecodeError:
        raise OutError(f"{path}: damaged (not text); {again}") from None


def _json(out, name, again, keys):
    path = out / name
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


def _culprit(out, meta):
    """Which of io.json's files cannot be read: a host model that onnx cannot load, else io.json."""
    import onnx             # ~0.3 s: only to name a damaged host model; read_design stays light for the CLI
    for name in meta.get("host_models", ()) if isinstance(meta.get("host_models"), list) else ():
        try:
            onnx.load(str(out / name))
        except Exception:
            return out / name
    return out / IO


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
