"""OUT integrity (issue 45 item 3): the manifest keeps each file's sha256, and `sim`, `verify`, `build` and
`prove` say first which of OUT's files changed since the compile; rtlgen's own rewrites (report.html by
verify and build) are not edits."""

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from rtlgen.cli import main
from sim.outdir import OutDir
from rtlgen.report.html import write_html
from tests.test_cli_errors import npy

MANIFEST = OutDir.manifest


def changed_files(out):
    return OutDir(out).changed_files()


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def edit(out):
    """Hand edits of the Verilog and io.json (both still whole files), and a deleted folding.json (which no
    command reads: not named; a file a command needs is named by its error when gone)."""
    verilog = out / "finn_design_wrapper.v"
    verilog.write_text("// tweaked by hand\n" + verilog.read_text())
    io = out / "io.json"
    io.write_text(json.dumps(json.loads(io.read_text()), indent=1))
    (out / "folding.json").unlink()


def test_changed_files_lists_edits_and_losses(digits_out_copy):
    from rtlgen import api
    design = api.open_design(digits_out_copy)
    edit(digits_out_copy)
    assert changed_files(digits_out_copy) == [("finn_design_wrapper.v", "edited"), ("folding.json", "gone"),
                                              ("io.json", "edited")]
    assert design.changed_files == changed_files(digits_out_copy)           # the API's view


def test_manifest_keeps_a_hash_per_file(digits_out):
    manifest = json.loads((digits_out / MANIFEST).read_text())
    assert set(manifest["sha256"]) == set(manifest["files"]) >= {"finn_design_wrapper.v", "report.json", "io.json"}
    assert all(sha256(digits_out / name) == digest for name, digest in manifest["sha256"].items())
    assert changed_files(digits_out) == []


def test_rtlgens_own_rewrite_of_the_page_is_not_an_edit(digits_out_copy):
    write_html(digits_out_copy)
    (digits_out_copy / "report.html").read_text()
    assert changed_files(digits_out_copy) == []


def warning_first(out, err):
    line = err.splitlines()[0]
    assert line.startswith(f"2 files of {out} changed since the compile (sha256 differs from its manifest): "
                           f"finn_design_wrapper.v (edited), io.json (edited); what follows runs the changed "
                           f"design, not the compile's (rtlgen compile ") and line.endswith(f" -o {out} writes it again)")


def stub_simulate(outputs):
    def simulate(self, x, **kwargs):
        return SimpleNamespace(frames=len(x), cycles=100, latency=10, cycles_per_frame=None, outputs=outputs(x))
    return simulate


@pytest.mark.parametrize("command", ["sim", "build", "prove"])
def test_commands_on_an_edited_out_say_so_first(digits_out_copy, tmp_path, capsys, monkeypatch, command):
    out = digits_out_copy
    edit(out)
    x = npy(tmp_path, np.zeros((1, 1, 8, 8), dtype=np.float32))
    monkeypatch.setattr("rtlgen.api.Design.simulate", stub_simulate(lambda x: np.zeros((len(x), 10), np.float32)))
    monkeypatch.setattr("rtlgen.backend.build.build", lambda *a, **k: None)
    monkeypatch.setattr("rtlgen.cli_commands.prove_out", lambda *a, **k: [])
    argv = {"sim": ["sim", str(out), "--input", x], "build": ["build", str(out)], "prove": ["prove", str(out)]}
    main(argv[command])
    err = capsys.readouterr().err
    assert err.startswith(f"rtlgen {command}: warning: "), err
    warning_first(out, err.split(": warning: ", 1)[1])


def test_verify_of_an_edited_out_says_the_mismatch_may_be_the_edit(digits_out_copy, tmp_path, capsys, monkeypatch):
    out = digits_out_copy
    edit(out)
    x = npy(tmp_path, np.zeros((1, 1, 8, 8), dtype=np.float32))
    monkeypatch.setattr("rtlgen.api.Design.simulate", stub_simulate(lambda x: np.full((len(x), 10), 99, np.float32)))
    assert main(["verify", str(out), "--input", x]) == 1
    captured = capsys.readouterr()
    warning_first(out, captured.err.split(": warning: ", 1)[1])
    assert (f"files of {out} were edited since the compile (the first line names them): recompile before reading "
            f"this mismatch as a bug") in captured.out


def test_an_unedited_out_says_nothing(digits_out_copy, tmp_path, capsys, monkeypatch):
    x = npy(tmp_path, np.zeros((1, 1, 8, 8), dtype=np.float32))
    monkeypatch.setattr("rtlgen.api.Design.simulate", stub_simulate(lambda x: np.zeros((len(x), 10), np.float32)))
    assert main(["sim", str(digits_out_copy), "--input", x]) == 0
    assert capsys.readouterr().err == ""
