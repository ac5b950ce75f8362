"""A compile's writing of OUT, for :class:`sim.outdir.OutDir` (which owns OUT's layout and is what every
caller uses): checked first, locked, written into a new directory beside OUT and swapped in, so an
interrupted or failed recompile leaves the previous design as it was; and the manifest that swap writes.

The new design goes into ``.OUT.rtlgen-new-*`` beside OUT and is swapped in at the end. What it wrote is
listed in OUT's manifest (:data:`MANIFEST`, with each file's sha256 and the model's); on the next compile,
only those files are removed: anything else in OUT (``build/`` with a bitstream, ``waves.vcd``, the user's
notes) moves into the new OUT with the swap. A directory that is neither empty nor an rtlgen OUT is
refused unless ``force`` (then its files stay, one named like a file rtlgen writes renamed ``NAME~``). A
lock file beside OUT (``.OUT.rtlgen-lock``) makes a second compile into the same OUT refuse while one runs.
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

__all__ = ["OutError", "MANIFEST", "FORMAT", "sha256", "read_manifest", "write_manifest", "check_out", "lock",
           "replacing"]

MANIFEST = ".rtlgen-manifest.json"      # what the compile wrote, with sha256s and the model's
FORMAT = 1


class OutError(ValueError):
    """OUT cannot be used as asked (not rtlgen's, in use by another compile, damaged); the message names
    the path and what to do."""


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


def write_manifest(out, manifest):
    """Replace OUT's manifest by ``manifest`` (written beside and renamed: never half a manifest)."""
    path = Path(out) / MANIFEST
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmp, path)


def _absolute(out):
    out = Path(os.path.abspath(out))
    return out.resolve() if out.is_symlink() else out


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
