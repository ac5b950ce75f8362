"""A build file (issue 45 item 5): `rtlgen config MODEL` writes every compile option, one key per
CompileOptions field; `rtlgen compile --config BUILD.json` reads it, checked as the flags are, the flags
written on the command line over it; the API's ``config`` the same. `compile --help` groups the options by
task."""

import json

import pytest

from rtlgen import api
from rtlgen.cli import build_parser, main
from rtlgen.errors import CompileError
from rtlgen.options import GROUPS, CompileOptions, option_fields
from tests.test_cli_errors import DIGITS, one_line


def write(tmp_path, data, name="build.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_config_writes_every_option_at_its_default(tmp_path, capsys):
    assert main(["config", str(DIGITS)]) == 0
    written = json.loads(capsys.readouterr().out)
    assert list(written) == [f.name for f in option_fields()]
    assert written == {f.name: f.default for f in option_fields()}
    assert CompileOptions.create(**{k: v for k, v in written.items() if v is not None}).check() == CompileOptions()


def test_config_with_flags_writes_them_and_refuses_to_overwrite(tmp_path, capsys):
    path = tmp_path / "b.json"
    assert main(["config", str(DIGITS), "-o", str(path), "--fit", "pynq-z2", "--clock-mhz", "200"]) == 0
    assert json.loads(path.read_text())["fit"] == "pynq-z2" and json.loads(path.read_text())["clock_mhz"] == 200
    assert capsys.readouterr().out.startswith(f"wrote {path}: every compile option, one key each")
    line = one_line(capsys, ["config", str(DIGITS), "-o", str(path)])
    assert line == f"rtlgen config: error: -o {path}: exists; pass --force to replace it, or choose another name"
    line = one_line(capsys, ["config", str(DIGITS), "--input-dtype", "INT33"])
    assert line.startswith("rtlgen config: error: --input-dtype INT33: INTn takes n = 1..32 bits")


@pytest.mark.parametrize("data, message", [
    ({"target-fps": 5}, "unknown key 'target-fps' (the key of target-fps is 'target_fps'); legal: folding, fit, "),
    ({"fit": 3}, "fit 3: must be a string, not int"),
    ({"input_dtype": "FIXED<4,8>"}, "input_dtype FIXED<4,8>: FIXED<w,i> takes i = 1..w-1 integer bits"),
    ({"clock_mhz": -5}, "clock_mhz -5: must be a positive number"),
    ([1, 2], "must be a JSON object {option: value}, not list"),
    ("{not json", "not JSON (line 1 column 2: "),
])
def test_a_bad_build_file_is_one_line_naming_it_and_the_key(tmp_path, capsys, data, message):
    path = write(tmp_path, data)
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "out"), "--config", str(path)])
    assert line.startswith(f"rtlgen compile: error: --config {path}: {message}"), line
    assert not (tmp_path / "out").exists()
    with pytest.raises(CompileError, match="^--config "):
        api.compile(DIGITS, tmp_path / "api", config=path)


def test_a_missing_build_file_says_how_to_make_one(tmp_path, capsys):
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "out"), "--config", str(tmp_path / "no.json")])
    assert line == (f"rtlgen compile: error: --config {tmp_path / 'no.json'}: no such file; `rtlgen config MODEL.onnx "
                    f"-o {tmp_path / 'no.json'}` writes one with the defaults")


def test_flags_override_the_build_file_and_combinations_are_checked(tmp_path, capsys):
    path = write(tmp_path, {"target_fps": 3e4, "fifo_sizing": "none", "clock_mhz": 100})
    out = tmp_path / "out"
    assert main(["compile", str(DIGITS), "-o", str(out), "-q", "--config", str(path), "--target-fps", "2e5"]) == 0
    assert json.loads((out / "report.json").read_text())["frames_per_second"] >= 2e5
    design = api.compile(DIGITS, tmp_path / "api", config=path)          # the file alone: its 30,000 frames/s
    assert 3e4 <= design.report["frames_per_second"] < 1e5
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(out), "--config", str(path), "--folding", "f.json"])
    assert line == "rtlgen compile: error: give either --folding or --target-fps, not both"


def test_folding_path_in_a_build_file_is_relative_to_it(tmp_path):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "fold.json").write_text(json.dumps({"MVAU_0": {"PE": 2, "SIMD": 8}}))
    path = write(tmp_path / "conf", {"folding": "fold.json", "fifo_sizing": "none"})
    design = api.compile(DIGITS, tmp_path / "out", config=path)
    assert next(l for l in design.report["layers"] if l["name"] == "MVAU_0")["folding"]["PE"] == 2


def test_verify_of_an_out_refuses_a_build_file(digits_out, tmp_path, capsys):
    path = write(tmp_path, {"fit": "pynq-z2"})
    line = one_line(capsys, ["verify", str(digits_out), "--input", "x.npy", "--config", str(path)])
    assert line.startswith("rtlgen verify: error: --config is a compile option, and ")


def test_compile_help_groups_the_options_by_task():
    parser = build_parser().commands["compile"]
    titles = [g.title for g in parser._action_groups]
    assert [t for t in titles if t in GROUPS.values()] == list(GROUPS.values())
    group_of = {a.dest: g.title.split(":")[0] for g in parser._action_groups for a in g._group_actions}
    assert {name: group_of[name] for name in ("folding", "fit", "budget", "target_fps", "objective", "board",
                                              "input_dtype", "config", "out", "json", "fifo_sizing")} == {
        "folding": "folding", "fit": "folding", "budget": "folding", "target_fps": "objective",
        "objective": "objective", "board": "board", "input_dtype": "input", "config": "input", "out": "output",
        "json": "output", "fifo_sizing": "simulation"}
    assert all(f.metadata["group"] in GROUPS for f in option_fields())


def test_inspect_reads_a_build_file(tmp_path, capsys):
    path = write(tmp_path, {"target_fps": 1e6, "fifo_sizing": "sim", "clock_mhz": 100})
    assert main(["inspect", str(DIGITS), "--json", "--config", str(path)]) == 0
    fast = json.loads(capsys.readouterr().out)
    assert main(["inspect", str(DIGITS), "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert fast != default              # the file's 1e6 frames/s folds the layers wider than the default
    line = one_line(capsys, ["inspect", str(DIGITS), "--config", str(write(tmp_path, {"fit": 3}, "bad.json"))])
    assert line.startswith("rtlgen inspect: error: --config ") and line.endswith("fit 3: must be a string, not int")
