"""`rtlgen partition -o OUT` writes OUT as `rtlgen compile` does (issue 32): a folder that is neither empty
nor an rtlgen output is refused and the user's files survive; the plan is built beside OUT and swapped in
with a manifest, so the user's files in an earlier OUT are kept, an interrupted partition leaves the
previous plan, and a second partition into an OUT in use is refused."""

import json
from pathlib import Path

import pytest

from rtlgen.cli import main
from sim.outdir import OutDir

MANIFEST = OutDir.manifest

MODEL = Path(__file__).parent / "models" / "digits_tfc_w1a1i1_clean.onnx"
PLAN = ["partition.json", "folding.json", "cluster/logical.xml", "cluster/map.xml"]


def partition(out, *extra):
    return main(["partition", str(MODEL), "-o", str(out), "--devices", "2", "--plan-only", *extra])


def one_line(capsys):
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    return err.strip()


def test_a_folder_that_is_not_rtlgens_is_refused_and_kept(tmp_path, capsys):
    mine = tmp_path / "mine"
    (mine / "build").mkdir(parents=True)
    (mine / "build" / "design.bit").write_bytes(b"\x00bitstream")
    (mine / "partition.json").write_text("my own notes")
    assert partition(mine) == 2
    assert one_line(capsys).startswith(f"rtlgen partition: error: -o {mine}: the directory is not empty and is not "
                                       f"an rtlgen output")
    assert sorted(p.relative_to(mine).as_posix() for p in mine.rglob("*")) == ["build", "build/design.bit",
                                                                              "partition.json"]
    assert (mine / "partition.json").read_text() == "my own notes"
    assert (mine / "build" / "design.bit").read_bytes() == b"\x00bitstream"
    assert not list(tmp_path.glob(".mine.rtlgen-*"))        # no lock or half-built OUT left beside it


def test_force_writes_the_plan_and_keeps_the_users_files(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    (mine / "partition.json").write_text("my own notes")
    assert partition(mine, "--force") == 0
    assert (mine / "notes.txt").read_text() == "keep me" and (mine / "partition.json~").read_text() == "my own notes"
    assert json.loads((mine / "partition.json").read_text())["ii"] > 0
    assert "partition.json is not rtlgen's but the new design writes that name" in capsys.readouterr().err


def test_the_plan_has_a_manifest_and_a_new_partition_replaces_only_it(tmp_path, capsys):
    out = tmp_path / "out"
    assert partition(out) == 0
    assert f"plan -> {out / 'partition.json'}, cluster files -> {out / 'cluster'}" in capsys.readouterr().out
    manifest = json.loads((out / MANIFEST).read_text())
    assert sorted(manifest["files"]) == sorted(PLAN)
    assert manifest["model"]["absolute"] == str(MODEL)
    (out / "mine.txt").write_text("keep me")
    (out / "cluster" / "old_kernel.xml").write_text("a file the next plan does not write")
    manifest["files"].append("cluster/old_kernel.xml")             # as if an earlier plan had written it
    (out / MANIFEST).write_text(json.dumps(manifest))
    assert partition(out, "--devices", "3") == 0                    # the last --devices wins
    assert (out / "mine.txt").read_text() == "keep me" and not (out / "cluster" / "old_kernel.xml").exists()
    assert sorted(json.loads((out / MANIFEST).read_text())["files"]) == sorted(PLAN)
    assert not list(tmp_path.glob(".out.rtlgen-*"))


def test_an_interrupted_partition_leaves_the_previous_plan(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    assert partition(out) == 0
    before = {p: (out / p).read_text() for p in PLAN}

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr("rtlgen.backend.scaleout.write_plan", interrupted)
    assert partition(out, "--devices", "3") == 130
    assert {p: (out / p).read_text() for p in PLAN} == before
    assert not list(tmp_path.glob(".out.rtlgen-*"))


def test_a_partition_into_an_out_in_use_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    assert partition(out) == 0
    capsys.readouterr()
    with OutDir(out).lock():
        assert partition(out) == 2
    assert "another rtlgen compile" in one_line(capsys)
    assert json.loads((out / "partition.json").read_text())["ii"] > 0
