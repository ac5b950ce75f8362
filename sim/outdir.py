"""OUT, the directory ``rtlgen compile`` writes, owned by this module: the name of every file in it, their
writing and reading back, the manifest with their sha256 (the lock and the swap: :mod:`sim.outdir_swap`).
The compiler (``rtlgen``) and the runtime (:mod:`sim.stream_io`'s users: the benches, ``boards``) both use
it; no other module names a file in OUT (tests/test_outdir.py). It lives in ``sim`` so that the runtime imports nothing of the compiler.

A compile writes OUT through :mod:`sim.outdir_swap` (checked, locked, built beside and swapped in);
what it wrote is listed in ``OUT/.rtlgen-manifest.json``.

The manifest keeps each file's sha256 too, so that ``sim``, ``verify``, ``build`` and ``prove`` can say
first which of OUT's files were edited since the compile (:func:`changed_line`); a command that rewrites
one of them itself (report.html) updates its hash (:func:`rehash`).

The manifest also keeps the source model's sha256 and its path relative to OUT (and absolute, as a
fallback), so ``rtlgen sim OUT`` / ``verify OUT`` find the model after the project moved and can say
when it changed since the compile. :func:`read_outputs` reads an OUT back; :func:`read_design` does too,
with errors that name the damaged file.
"""

import hashlib
import json
import os
from pathlib import Path

from sim.stream_io import StreamIO

__all__ = ["OutError", "VERILOG", "IO", "REPORT", "MODEL_HW", "FOLDING", "PARTITION", "CLUSTER_SIM", "VERIFY",
           "HOST_PRE", "HOST_POST", "REPORT_HTML", "BUILD", "YOSYS_DIR", "YOSYS_REPORT", "VIVADO_DIR", "WAVES",
           "PROVE_DIR", "PROVE_REPORT", "MANIFEST", "REQUIRED", "device_dir", "missing", "write_io", "read_io",
           "read_outputs", "read_manifest", "claim", "rehash", "changed_files", "changed_line", "model_source",
           "read_design", "sha256"]

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
