"""Every compile option is checked where it is parsed, by one declaration (rtlgen.options.CompileOptions), for
the command line and the API alike (issue 45 item 1): a value no compile can use is one line naming the
option and what is legal (exit 2, nothing written, no "internal error"); a value a compile takes but the
user should know about is a warning kept in report.json and report.html and passed to the API's ``warn``."""

import json
import re

import numpy as np
import pytest

from rtlgen import api
from rtlgen.errors import CompileError
from sim.outdir import OutError
from rtlgen.options import CompileOptions
from tests.test_cli_errors import DIGITS, FAST, npy, one_line

DTYPE_LEGAL = ("legal: BIPOLAR, BINARY, TERNARY, UINTn, INTn (n = 1..32), FIXED<w,i> (w = 2..32 bits, i = 1..w-1 "
               "of them integer bits with the sign, as hls4ml's ap_fixed<w,i>; FIXED<w,w> is INTw)")
BAD_DTYPES = [
    ("FIXED<4,8>", "FIXED<w,i> takes i = 1..w-1 integer bits (the sign among them)"),
    ("FIXED<8,8>", "FIXED<w,i> takes i = 1..w-1 integer bits (the sign among them); FIXED<w,w> is INTw"),
    ("FIXED<0,0>", "FIXED<w,i> takes w = 2..32 bits"),
    ("FIXED<40,8>", "FIXED<w,i> takes w = 2..32 bits"),
    ("INT999", "INTn takes n = 1..32 bits"),
    ("UINT0", "UINTn takes n = 1..32 bits"),
    ("INT33", "INTn takes n = 1..32 bits"),
    ("FLOAT32", "not an integer or fixed-point qonnx DataType"),
]


@pytest.mark.parametrize("dtype, why", BAD_DTYPES, ids=[d for d, _ in BAD_DTYPES])
def test_input_dtype_out_of_range_is_one_line(tmp_path, capsys, dtype, why):
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "out"), "--input-dtype", dtype])
    assert line == f"rtlgen compile: error: --input-dtype {dtype}: {why}; {DTYPE_LEGAL}"
    assert not (tmp_path / "out").exists()
    with pytest.raises(CompileError, match=f"^--input-dtype {dtype}: "):
        api.compile(DIGITS, tmp_path / "api", input_dtype=dtype)
    assert not (tmp_path / "api").exists()


@pytest.mark.parametrize("given, canonical", [("fixed<16, 6>", "FIXED<16,6>"), ("int32", "INT32"),
                                              ("UINT1", "UINT1"), ("bipolar", "BIPOLAR")])
def test_legal_input_dtypes_are_kept_in_canonical_spelling(given, canonical):
    assert CompileOptions.create(input_dtype=given).check().input_dtype == canonical


def test_empty_out_is_refused_not_the_working_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = parse_error(capsys, ["compile", str(DIGITS), "-o", "", "--force", *FAST])
    assert line == "rtlgen compile: error: -o '': an empty value; give OUT (`rtlgen compile --help` shows the usage)"
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OutError, match=r"^-o '': an empty name"):
        api.compile(DIGITS, "", force=True, fifo_sizing="none")
    assert list(tmp_path.iterdir()) == []


def test_folding_file_that_is_not_json_is_named(tmp_path, capsys):
    x = npy(tmp_path, np.zeros((1, 1, 8, 8), dtype=np.float32))
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "out"), "--folding", x])
    assert line == (f"rtlgen compile: error: --folding {x}: not a text file (a FINN folding config is JSON {{node "
                    f"name: {{PE, SIMD, ...}}}}, as OUT/folding.json)")
    with pytest.raises(CompileError, match=f"^--folding {x}: not a text file"):
        api.compile(DIGITS, tmp_path / "api", folding=x)
    missing = tmp_path / "nofile.json"
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "out"), "--folding", str(missing)])
    assert line == f"rtlgen compile: error: --folding {missing}: no such file"
    assert not (tmp_path / "out").exists() and not (tmp_path / "api").exists()


def test_folding_and_target_fps_together_are_refused_before_loading(tmp_path, capsys):
    line = one_line(capsys, ["compile", str(tmp_path / "no-such-model.onnx"), "-o", str(tmp_path / "out"),
                             "--folding", str(tmp_path / "f.json"), "--target-fps", "100"])
    assert line == "rtlgen compile: error: give either --folding or --target-fps, not both"


def test_sim_input_that_is_the_model(digits_out, capsys):
    line = one_line(capsys, ["sim", str(digits_out), "--input", str(DIGITS)])
    assert line == (f"rtlgen sim: error: --input {DIGITS}: an ONNX model, not a .npy array; save the model's input "
                    f"with np.save('x.npy', x) (a numeric array, batch first)")
    assert "pickle" not in line


def test_sim_input_of_python_objects(digits_out, tmp_path, capsys):
    path = tmp_path / "objects.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    line = one_line(capsys, ["sim", str(digits_out), "--input", str(path)])
    assert line.startswith(f"rtlgen sim: error: --input {path}: a .npy array of Python objects (pickled), which "
                           f"rtlgen does not load; save the model's input")


def test_max_utilization_with_budget_is_refused(tmp_path, capsys):
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "out"), "--budget", "lut=1000",
                             "--max-utilization", "0.5"])
    assert line == ("rtlgen compile: error: --max-utilization 0.5: a share of the board for --fit BOARD; --budget "
                    "lut=1000 gives the numbers themselves: give one of them")
    with pytest.raises(CompileError, match="^--max-utilization 0.5: a share of the board for --fit BOARD"):
        api.compile(DIGITS, tmp_path / "api", budget="lut=1000", max_utilization="0.5")


@pytest.mark.parametrize("name, value, legal", [("clock_mhz", "100", "a number"), ("strict", "yes", "True or False"),
                                                ("fit", 1, "a string"), ("target_fps", True, "a number")])
def test_api_option_of_the_wrong_type(tmp_path, name, value, legal):
    flag = "--" + name.replace("_", "-")
    with pytest.raises(CompileError, match=f"^{flag} {value!r}: must be {legal}, not {type(value).__name__}$"):
        api.compile(DIGITS, tmp_path / "out", **{name: value})


CLOCK_WARNING = ("--clock-mhz 1,000,000: beyond what an xc7z020 can run (at most ~500 MHz; rtlgen's layers reach "
                 "~250 MHz), so the frames/s reported are not reachable")
UTILIZATION_WARNING = ("--max-utilization 0.5 without --fit: the folding is not chosen within it (only weights moved "
                       "into block RAM keep to its BRAM36 share); add --fit pynq-z2 for the fastest design within it")


def test_option_warnings_land_in_the_report_and_the_page(tmp_path, capsys):
    out = tmp_path / "out"
    assert main_ok(["compile", str(DIGITS), "-o", str(out), "-q", *FAST, "--clock-mhz", "1e6",
                    "--max-utilization", "0.5"])
    err = capsys.readouterr().err.splitlines()
    assert err == [f"rtlgen compile: warning: {CLOCK_WARNING}", f"rtlgen compile: warning: {UTILIZATION_WARNING}"]
    report = json.loads((out / "report.json").read_text())
    assert report["warnings"] == [CLOCK_WARNING, UTILIZATION_WARNING]
    page = (out / "report.html").read_text()
    assert '<div class="warnings" data-key="warnings">' in page and "beyond what an xc7z020 can run" in page
    assert api.open_design(out).warnings == [CLOCK_WARNING, UTILIZATION_WARNING]


def test_api_passes_warnings_to_warn_and_keeps_them(tmp_path):
    said = []
    design = api.compile(DIGITS, tmp_path / "out", clock_mhz=1e6, fifo_sizing="none", warn=said.append)
    assert said == [CLOCK_WARNING] and design.warnings == [CLOCK_WARNING]


def test_api_without_warn_issues_python_warnings(tmp_path):
    from rtlgen.errors import CompileWarning
    with pytest.warns(CompileWarning, match="beyond what an xc7z020 can run"):
        design = api.compile(DIGITS, tmp_path / "out", clock_mhz=1e6, fifo_sizing="none")
    assert design.warnings == [CLOCK_WARNING]


def test_a_clean_compile_keeps_no_warnings(digits_out):
    assert json.loads((digits_out / "report.json").read_text())["warnings"] == []
    assert 'class="warnings"' not in (digits_out / "report.html").read_text()


def test_open_design_of_a_missing_directory_is_an_out_error(tmp_path, capsys):
    with pytest.raises(OutError, match="missing: no such directory; give the directory `rtlgen compile` wrote"):
        api.open_design(tmp_path / "missing")
    with pytest.raises(OutError, match="not an rtlgen compile output"):
        api.open_design(tmp_path)
    line = one_line(capsys, ["sim", str(tmp_path / "missing"), "--input", "x.npy"])
    assert line.startswith(f"rtlgen sim: error: {tmp_path / 'missing'}: no such directory")


def main_ok(argv):
    from rtlgen.cli import main
    return main(argv) == 0


@pytest.mark.parametrize("argv", [["sim", "{out}", "--input", "{x}", "-o", ""], ["sim", "{out}", "--input", ""],
                                  ["sim", "{out}", "--input", "{x}", "--labels", ""],
                                  ["verify", str(DIGITS), "--input", "{x}", "-o", ""], ["build", "{out}", "--input", ""],
                                  ["compile", "", "-o", "{tmp}/o"], ["compile", str(DIGITS), "-o", "{tmp}/o", "--budget", ""],
                                  ["inspect", str(DIGITS), "--input-dtype", ""]],
                         ids=["sim-o", "sim-input", "labels", "verify-o", "build-input", "model", "budget", "dtype"])
def test_an_empty_value_is_never_silently_the_default(digits_out, tmp_path, capsys, argv):
    x = npy(tmp_path, np.zeros((1, 1, 8, 8), dtype=np.float32))
    argv = [a.format(out=digits_out, x=x, tmp=tmp_path) for a in argv]
    line = parse_error(capsys, argv)
    assert re.fullmatch(rf"rtlgen {argv[0]}: error: \S+ '': an empty value; give \S+ \(`rtlgen {argv[0]} --help` "
                        rf"shows the usage\)", line), line


def parse_error(capsys, argv):
    """A command line argparse refuses: exit 2, one line."""
    from rtlgen.cli import main
    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]
