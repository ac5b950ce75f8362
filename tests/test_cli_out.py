"""OUT is rtlgen's alone, and replaced as a whole (sim/outdir.py): a manifest of what a compile wrote;
only those files are ever removed; a folder that is neither empty nor an rtlgen OUT is refused unless
--force; the new design is built beside the old one and swapped in, so an interrupted or failed
recompile leaves the previous design usable; a second compile into the same OUT refuses while one
runs; the model's hash and relative path are kept, and sim/verify OUT say when it changed."""

import errno
import json
import os
import shutil
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import pytest

from rtlgen.cli import main
from sim.outdir import OutDir

MANIFEST = OutDir.manifest          # its name in OUT

from tests.test_cli_errors import DIGITS, FAST, npy, one_line



def compile_into(out, *extra, model=DIGITS):
    return main(["compile", str(model), "-o", str(out), "-q", *FAST, *extra])


def snapshot(out):
    """{relative path: bytes} of every file under ``out``."""
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(Path(out).rglob("*")) if p.is_file()}


def leftovers(out):
    """Temporary directories or lock files a compile left beside ``out``."""
    return sorted(p.name for p in Path(out).parent.iterdir() if p.name.startswith(f".{Path(out).name}.rtlgen-"))


def user_files(out):
    (out / "build").mkdir()
    (out / "build" / "design.bit").write_bytes(b"\x00bitstream")
    (out / "waves.vcd").write_text("$timescale 1ns $end\n")
    (out / "notes.txt").write_text("the user's")


def assert_user_files(out):
    assert (out / "build" / "design.bit").read_bytes() == b"\x00bitstream"
    assert (out / "waves.vcd").read_text() == "$timescale 1ns $end\n"
    assert (out / "notes.txt").read_text() == "the user's"


# ---------------------------------------------------------------------------------------------- the manifest

def test_manifest_lists_what_the_compile_wrote_and_the_model(tmp_path):
    out = tmp_path / "out"
    assert compile_into(out) == 0
    manifest = json.loads((out / MANIFEST).read_text())
    assert set(manifest["files"]) == set(snapshot(out)) - {MANIFEST}
    assert {"finn_design_wrapper.v", "report.json", "io.json", "report.html"} <= set(manifest["files"])
    model = manifest["model"]
    assert Path(os.path.normpath(out / model["path"])) == DIGITS.resolve()
    assert model["absolute"] == str(DIGITS.resolve())
    import hashlib
    assert model["sha256"] == hashlib.sha256(DIGITS.read_bytes()).hexdigest()
    assert leftovers(out) == []


def test_recompile_removes_only_its_own_files(tmp_path, capsys):
    out = tmp_path / "out"
    assert compile_into(out, "--keep-intermediate") == 0
    assert any(name.startswith("intermediate/") for name in json.loads((out / MANIFEST).read_text())["files"])
    user_files(out)
    (out / "intermediate" / "mine.txt").write_text("kept")        # the user's, in a folder of rtlgen's
    (out / "folding.json").write_text("{}")                         # rtlgen's: replaced
    assert compile_into(out) == 0                                   # no --keep-intermediate this time
    assert_user_files(out)
    assert (out / "intermediate" / "mine.txt").read_text() == "kept"
    assert sorted(p.name for p in (out / "intermediate").iterdir()) == ["mine.txt"]     # rtlgen's graphs gone
    assert json.loads((out / "folding.json").read_text())["MVAU_0"]
    manifest = json.loads((out / MANIFEST).read_text())
    assert not any(name.startswith("intermediate/") for name in manifest["files"])
    assert "build/design.bit" not in manifest["files"] and "notes.txt" not in manifest["files"]
    assert leftovers(out) == [] and capsys.readouterr().err == ""


def test_keep_intermediate_inside_out_lands_in_the_new_out(tmp_path):
    out = tmp_path / "out"
    assert compile_into(out, "--keep-intermediate") == 0
    assert compile_into(out, "--keep-intermediate", str(out / "graphs")) == 0
    assert sorted(p.name for p in (out / "graphs").iterdir())[0].endswith("_to_hw.onnx")
    assert not (out / "intermediate").exists()


def test_a_folder_that_is_not_an_rtlgen_out_is_refused(tmp_path, capsys):
    folder = tmp_path / "project"
    folder.mkdir()
    user_files(folder)
    (folder / "report.json").write_text("my own report")
    before = snapshot(folder)
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(folder), *FAST])
    assert line == (f"rtlgen compile: error: -o {folder}: the directory is not empty and is not an rtlgen output "
                    f"(it has no {MANIFEST}); choose a new or empty directory, or pass --force to compile into it "
                    f"(its files stay; one named like an rtlgen output is kept as NAME~)")
    assert snapshot(folder) == before and leftovers(folder) == []


def test_force_compiles_into_a_foreign_folder_and_keeps_its_files(tmp_path, capsys):
    folder = tmp_path / "project"
    folder.mkdir()
    user_files(folder)
    (folder / "report.json").write_text("my own report")
    assert compile_into(folder, "--force") == 0
    assert_user_files(folder)
    assert (folder / "report.json~").read_text() == "my own report"
    assert json.loads((folder / "report.json").read_text())["layers"]
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"rtlgen compile: warning: {folder / 'report.json'} is not rtlgen's but the new design writes "
                   f"that name: kept as {folder / 'report.json~'}"]
    assert "report.json~" not in json.loads((folder / MANIFEST).read_text())["files"]


def test_an_empty_folder_is_fine(tmp_path):
    (tmp_path / "empty").mkdir()
    assert compile_into(tmp_path / "empty") == 0
    assert (tmp_path / "empty" / MANIFEST).is_file()


def test_recompiling_from_inside_out(tmp_path, monkeypatch):
    """OUT holding the working directory is updated in place (renaming it would leave the shell in a
    deleted directory)."""
    out = tmp_path / "out"
    assert compile_into(out) == 0
    user_files(out)
    monkeypatch.chdir(out)
    assert compile_into(".") == 0
    assert Path(os.getcwd()) == out.resolve() and (out / "finn_design_wrapper.v").is_file()
    assert_user_files(out)
    assert set(json.loads((out / MANIFEST).read_text())["files"]) == set(snapshot(out)) - {
        MANIFEST, "build/design.bit", "waves.vcd", "notes.txt"}


# ---------------------------------------------------------------------------------------------- failures keep the old design

def _fault(exc):
    def compile_model(*args, **kwargs):
        raise exc
    return compile_model


def test_ctrl_c_during_a_recompile_keeps_the_previous_design(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    assert compile_into(out) == 0
    user_files(out)
    before = snapshot(out)
    monkeypatch.setattr("rtlgen.backend.compile.compile_model", _fault(KeyboardInterrupt()))
    assert compile_into(out) == 130
    assert capsys.readouterr().err == "rtlgen compile: interrupted\n"
    assert snapshot(out) == before and leftovers(out) == []
    from rtlgen import api
    assert api.open_design(out).report["layers"]


def test_a_first_compile_interrupted_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr("rtlgen.backend.compile.compile_model", _fault(KeyboardInterrupt()))
    assert compile_into(tmp_path / "out") == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_full_disk_during_a_recompile_keeps_the_previous_design(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    assert compile_into(out) == 0
    user_files(out)
    before = snapshot(out)

    def write_outputs(compiled, new):
        (Path(new) / "finn_design_wrapper.v").write_text("module half")
        raise OSError(errno.ENOSPC, "No space left on device", str(Path(new) / "model_hw.onnx"))
    monkeypatch.setattr("rtlgen.backend.emit.write_outputs", write_outputs)
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(out), "-q", *FAST])
    assert line.startswith("rtlgen compile: error: ") and "model_hw.onnx: no space left on device; the disk is " \
                                                          "full: free some space" in line, line
    assert snapshot(out) == before and leftovers(out) == []


def test_a_failed_swap_is_undone(tmp_path, capsys, monkeypatch):
    """The last rename (the new design into OUT's place) fails: the old OUT and the user's files, already
    moved into the new design, go back."""
    out = tmp_path / "out"
    assert compile_into(out) == 0
    user_files(out)
    before = snapshot(out)
    rename = os.rename

    def failing(src, dst):
        if Path(dst) == out and ".rtlgen-new-" in Path(src).name:
            raise PermissionError(errno.EACCES, "Permission denied", str(src))
        return rename(src, dst)
    monkeypatch.setattr(os, "rename", failing)
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(out), "-q", *FAST])
    assert "cannot move" in line and "(Permission denied); the previous design is left as it was" in line
    monkeypatch.setattr(os, "rename", rename)
    assert snapshot(out) == before and leftovers(out) == []


def test_read_only_out_is_named_before_compiling(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    assert compile_into(out) == 0
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: Path(path) != out and access(path, mode, **kw))
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(out), "-q", *FAST])
    assert line.startswith(f"rtlgen compile: error: -o {out}: cannot write into it (") and \
        line.endswith("); make it writable or choose another -o"), line


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_out_where_no_file_can_be_created_is_named_not_the_lock(capsys):
    """/proc passes the access check but takes no new file: the error names -o and its folder, not the lock
    file rtlgen would have created beside it."""
    line = one_line(capsys, ["compile", str(DIGITS), "-o", "/proc/rtlgen-x", "-q", *FAST])
    assert line.startswith("rtlgen compile: error: -o /proc/rtlgen-x: cannot create files in /proc ("), line
    assert "rtlgen-lock" not in line and line.endswith("choose another -o"), line


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_out_for_real(tmp_path, capsys):
    out = tmp_path / "out"
    assert compile_into(out) == 0
    out.chmod(0o555)
    try:
        line = one_line(capsys, ["compile", str(DIGITS), "-o", str(out), "-q", *FAST])
    finally:
        out.chmod(0o755)
    assert f"-o {out}: cannot write into it (permission denied)" in line


def test_out_below_a_file_is_named(tmp_path, capsys):
    (tmp_path / "afile").write_text("mine")
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "afile" / "out"), *FAST])
    assert line == (f"rtlgen compile: error: -o {tmp_path / 'afile' / 'out'}: cannot create the directory "
                    f"({tmp_path / 'afile'} is a file, not a directory)")


# ---------------------------------------------------------------------------------------------- concurrent compiles

def test_a_second_compile_into_the_same_out_is_refused(tmp_path, capsys, monkeypatch):
    """A compile running in a thread holds OUT's lock; a second one refuses at once and the first one
    finishes with a whole design."""
    import rtlgen.backend.compile
    from rtlgen import api
    out = tmp_path / "out"
    real = rtlgen.backend.compile.compile_model
    started, release = threading.Event(), threading.Event()

    def slow(*args, **kwargs):
        started.set()
        release.wait(60)
        return real(*args, **kwargs)
    monkeypatch.setattr(rtlgen.backend.compile, "compile_model", slow)
    first = {}
    thread = threading.Thread(target=lambda: first.setdefault("design", api.compile(DIGITS, out, fifo_sizing="none")))
    thread.start()
    try:
        assert started.wait(60)
        line = one_line(capsys, ["compile", str(DIGITS), "-o", str(out), "-q", *FAST])
    finally:
        release.set()
        thread.join(120)
    assert line.startswith(f"rtlgen compile: error: -o {out}: another rtlgen compile (process {os.getpid()}) is "
                           f"writing it now (lock "), line
    assert line.endswith("); wait for it to finish, or choose another -o")
    assert first["design"].report["layers"] and (out / MANIFEST).is_file() and leftovers(out) == []


# ---------------------------------------------------------------------------------------------- the model, later

@pytest.fixture
def project(tmp_path):
    """A project folder with its own copy of the model, compiled into project/out."""
    root = tmp_path / "project"
    root.mkdir()
    shutil.copy(DIGITS, root / "model.onnx")
    assert compile_into(root / "out", model=root / "model.onnx") == 0
    return root


def _change_model(path):
    """The model with its final bias moved by 1 (a host op: every output changes)."""
    model = onnx.load(str(path))
    for init in model.graph.initializer:
        if init.name == "Add_0_param0" or init.name.endswith("Add_0_param0"):
            value = onnx.numpy_helper.to_array(init) + 1
            init.CopyFrom(onnx.numpy_helper.from_array(value.astype(np.float32), init.name))
            break
    else:
        node = next(n for n in model.graph.node if n.op_type == "Add")
        name = next(i for i in node.input if any(init.name == i for init in model.graph.initializer))
        init = next(i for i in model.graph.initializer if i.name == name)
        init.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(init) + 1, name))
    onnx.save(model, str(path))


def _as_compiled(monkeypatch, model):
    """Design.simulate answering what the compiled design computes (qonnx on the model as compiled), so
    that these tests need no simulator."""
    from rtlgen.check.verify import qonnx_reference
    reference = str(model)

    def simulate(self, x, **kwargs):
        x = self.io.check_input(x)
        return SimpleNamespace(outputs=qonnx_reference(reference, x), frames=len(x), cycles=0, latency=0,
                               cycles_per_frame=None)
    monkeypatch.setattr("rtlgen.api.Design.simulate", simulate)


def test_a_moved_project_still_finds_its_model(project, tmp_path, capsys, monkeypatch):
    moved = tmp_path / "moved"
    project.rename(moved)
    _as_compiled(monkeypatch, moved / "model.onnx")
    x = npy(tmp_path, np.zeros((2, 1, 8, 8), dtype=np.float32))
    assert main(["verify", str(moved / "out"), "--input", x]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "bit-exact" in captured.out


def test_sim_warns_when_the_model_changed(project, tmp_path, capsys):
    _change_model(project / "model.onnx")
    bad = npy(tmp_path, np.zeros((3, 7), dtype=np.float32))
    assert main(["sim", str(project / "out"), "--input", bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == (f"rtlgen sim: warning: {project / 'model.onnx'} changed since {project / 'out'} was compiled "
                      f"from it (sha256 differs); {project / 'out'} may be stale: rtlgen compile "
                      f"{project / 'model.onnx'} -o {project / 'out'}")
    assert err[1].startswith("rtlgen sim: error: input of shape (3, 7)") and len(err) == 2


def test_verify_says_a_mismatch_may_come_from_a_stale_out(project, tmp_path, capsys, monkeypatch):
    from shutil import copy
    copy(project / "model.onnx", tmp_path / "as_compiled.onnx")
    _change_model(project / "model.onnx")
    _as_compiled(monkeypatch, tmp_path / "as_compiled.onnx")
    x = npy(tmp_path, np.random.default_rng(0).integers(0, 2, (4, 1, 8, 8)).astype(np.float32))
    assert main(["verify", str(project / "out"), "--input", x]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith(f"rtlgen verify: warning: {project / 'model.onnx'} changed since ")
    lines = captured.out.strip().splitlines()
    assert any(line.startswith("MISMATCH") for line in lines), lines
    assert lines[-2] == (f"{project / 'out'} was compiled from an earlier version of the model: recompile before "
                         f"reading this mismatch as a bug"), lines
    assert "verify.json" in json.loads((project / "out" / MANIFEST).read_text())["files"]


def test_verify_of_an_out_whose_model_is_gone(project, tmp_path, capsys):
    (project / "model.onnx").unlink()
    x = npy(tmp_path, np.zeros((1, 1, 8, 8), dtype=np.float32))
    line = one_line(capsys, ["verify", str(project / "out"), "--input", x])
    assert line.startswith(f"rtlgen verify: error: the model {project / 'out'} was compiled from is gone (not at "
                           f"{project / 'model.onnx'} nor ")


def test_a_kept_build_of_an_earlier_design_is_not_shown_as_this_ones(tmp_path):
    """OUT/build survives a recompile (it may hold a bitstream); report.html does not present its Yosys
    numbers as the new design's."""
    from rtlgen.report.html import write_html
    out = tmp_path / "out"
    assert compile_into(out) == 0
    totals = json.loads((out / "report.json").read_text())["totals"]
    (out / "build" / "yosys").mkdir(parents=True)
    (out / "build" / "yosys" / "report.json").write_text(json.dumps({"estimate": dict(totals, LUT=totals["LUT"] + 1)}))
    page = write_html(out).read_text()
    assert "OUT/build holds the Yosys report of an earlier compile" in page and 'data-key="yosys.' not in page


def test_verify_of_a_read_only_out_reports_the_comparison(digits_out_copy, tmp_path, capsys, monkeypatch):
    """`verify OUT` where OUT cannot be written (a read-only mount; simulated, as root writes anywhere):
    the bit-exact comparison is the answer (exit 0), and one warning says the record was not written."""
    import rtlgen.report.html as html

    x = np.load(Path(__file__).parent / "models" / "digits_tfc_w1a1i1_testset.npz")["x"][:2]
    np.save(tmp_path / "x.npy", x)
    target = digits_out_copy / "verify.json"

    def read_only(out, comparison):
        raise OSError(errno.EROFS, "Read-only file system", str(target))
    monkeypatch.setattr(html, "record_verification", read_only)
    capsys.readouterr()
    assert main(["verify", str(digits_out_copy), "--input", str(tmp_path / "x.npy")]) == 0
    captured = capsys.readouterr()
    assert "bit-exact" in captured.out, captured.out
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0] == (f"rtlgen verify: warning: the result is not recorded in {digits_out_copy}'s "
                                        f"report: cannot write {target} (Read-only file system)"), err
