"""What a user sees when something is wrong: one line and exit 2 for bad input (checked before the long
steps), a warning line for what does not stop the compile, "internal error" and exit 1 for a bug (the
traceback under --verbose), exit 130 on Ctrl-C; and a fit check against the board at compile time."""

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest

from rtlgen.cli import main

MODELS = Path(__file__).parent / "models"
DIGITS = MODELS / "digits_tfc_w1a1i1_clean.onnx"        # input (1, 1, 8, 8), MVAU_0 has MW = 64
FAST = ["--fifo-sizing", "none"]


def one_line(capsys, argv, code=2, kind="error"):
    assert main(argv) == code
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rtlgen {argv[0]}: {kind}: "), err
    return lines[0]


@pytest.fixture(scope="module")
def digits_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("digits")
    assert main(["compile", str(DIGITS), "-o", str(out), "-q", *FAST]) == 0
    return out


def npy(tmp_path, array, name="x.npy"):
    path = tmp_path / name
    np.save(path, array)
    return str(path)


# ---------------------------------------------------------------------------------------------- options

@pytest.mark.parametrize("flag, value", [("--clock-mhz", "0"), ("--clock-mhz", "-100"), ("--clock-mhz", "nan"),
                                         ("--target-fps", "0"), ("--target-fps", "inf"), ("--target-fps", "-5")])
def test_rates_must_be_positive_numbers(tmp_path, capsys, flag, value):
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "out"), flag, value])
    assert f"{flag} {float(value):g}: must be a positive number" in line
    assert not (tmp_path / "out").exists()          # nothing done before the check


def test_out_that_is_a_file_is_refused_before_compiling(tmp_path, capsys):
    (tmp_path / "afile").write_text("mine")
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "afile")])
    assert "-o " in line and "afile: is a file, not a directory" in line
    assert (tmp_path / "afile").read_text() == "mine"


@pytest.mark.parametrize("dtype", ["FLOAT32", "NOTATYPE"])
def test_input_dtype_must_be_an_integer_qonnx_type(tmp_path, capsys, dtype):
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "out"), "--input-dtype", dtype])
    assert f"--input-dtype {dtype}" in line


# ---------------------------------------------------------------------------------------------- model files

def test_empty_model_file(tmp_path, capsys):
    (tmp_path / "empty.onnx").write_bytes(b"")
    line = one_line(capsys, ["compile", str(tmp_path / "empty.onnx"), "-o", str(tmp_path / "out")])
    assert "empty.onnx: not a valid ONNX model" in line


def test_random_bytes(tmp_path, capsys):
    (tmp_path / "noise.onnx").write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    line = one_line(capsys, ["compile", str(tmp_path / "noise.onnx"), "-o", str(tmp_path / "out")])
    assert "noise.onnx: not a valid ONNX model" in line


def _with_input_dims(tmp_path, dims):
    model = onnx.load(str(DIGITS))
    shape = model.graph.input[0].type.tensor_type.shape
    for dim, value in zip(shape.dim, dims):
        if isinstance(value, str):
            dim.Clear()
            dim.dim_param = value
    path = tmp_path / "symbolic.onnx"
    onnx.save(model, str(path))
    return str(path)


def test_symbolic_batch_dimension_is_one_frame(tmp_path, capsys):
    path = _with_input_dims(tmp_path, ["N", 1, 8, 8])
    assert main(["compile", path, "-o", str(tmp_path / "out"), "-q", *FAST]) == 0
    assert json.loads((tmp_path / "out" / "io.json").read_text())["model_input_shape"] == [1, 1, 8, 8]


def test_symbolic_feature_dimension_is_refused(tmp_path, capsys):
    path = _with_input_dims(tmp_path, [1, 1, "H", 8])
    line = one_line(capsys, ["compile", path, "-o", str(tmp_path / "out")])
    assert "has a symbolic or unknown size in dimension 2 (H)" in line


# ---------------------------------------------------------------------------------------------- folding files

@pytest.mark.parametrize("text, message", [
    ("{not json", "invalid JSON at line 1"),
    ("[1, 2]", "must be a JSON object"),
    ('{"MVAU_0": 4}', "entry 'MVAU_0' must be an object"),
    ('{"Foo_0": {"PE": 1}}', "folding config names node 'Foo_0', which is not in the dataflow graph"),
    ('{"MVAU_0": {"SIMD": 7}}', "simd=7 must divide mw=64"),
    ('{"MVAU_0": {"PE": 0}}', "MVAU_0"),
    ('{"MVAU_0": {"SIMD": 8, "ram_style": "distributed", "weight_lut_bits": 4}}',
     "MVAU_0: MVAU weight_lut_bits=4 splits a block ROM: it needs ram_style=block, not ram_style=distributed"),
    ('{"MVAU_0": {"ram_style": "block", "weight_lut_bits": 100000}}',
     "MVAU_0: MVAU weight_lut_bits must be an integer in 0.."),
])
def test_bad_folding_files(tmp_path, capsys, text, message):
    (tmp_path / "fold.json").write_text(text)
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "out"), "--folding",
                             str(tmp_path / "fold.json")])
    assert message in line


def test_missing_folding_file(tmp_path, capsys):
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "out"), "--folding",
                             str(tmp_path / "none.json")])
    assert "none.json: no such file" in line


def test_finn_entries_for_nodes_on_the_host_are_a_warning(tmp_path, capsys):
    """FINN's configs name the input Thresholding layer, which rtlgen computes on the host."""
    (tmp_path / "fold.json").write_text(json.dumps({"Thresholding_Batch_0": {"PE": 1},
                                                    "MatrixVectorActivation_0": {"PE": 2, "SIMD": 8}}))
    assert main(["compile", str(DIGITS), "-o", str(tmp_path / "out"), "-q", "--folding",
                 str(tmp_path / "fold.json"), *FAST]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rtlgen compile: warning: folding config entry "
                                               "'Thresholding_Batch_0': no such node"), err
    assert json.loads((tmp_path / "out" / "folding.json").read_text())["MVAU_0"]["SIMD"] == 8


# ---------------------------------------------------------------------------------------------- inputs

@pytest.mark.parametrize("array, message", [
    (np.full((2, 1, 8, 8), np.nan, dtype=np.float32), "input sample 0 has NaN or infinite values (2 of 2 samples)"),
    (np.zeros((0, 1, 8, 8), dtype=np.float32), "has no samples"),
    (np.array([["a"] * 64]), "is not numbers"),
    (np.zeros((3, 7)), "input of shape (3, 7) does not match the model input"),
])
def test_bad_inputs_to_sim(digits_out, tmp_path, capsys, array, message):
    line = one_line(capsys, ["sim", str(digits_out), "--input", npy(tmp_path, array)])
    assert message in line


def test_input_that_is_no_npy(digits_out, tmp_path, capsys):
    (tmp_path / "x.npy").write_text("1, 2, 3")
    line = one_line(capsys, ["sim", str(digits_out), "--input", str(tmp_path / "x.npy")])
    assert "x.npy: not a .npy array" in line


def test_missing_input_file(digits_out, tmp_path, capsys):
    line = one_line(capsys, ["sim", str(digits_out), "--input", str(tmp_path / "none.npy")])
    assert "none.npy: no such file" in line


def test_verify_checks_the_input_before_compiling(tmp_path, capsys):
    x = npy(tmp_path, np.full((1, 1, 8, 8), np.inf, dtype=np.float32))
    line = one_line(capsys, ["verify", str(DIGITS), "--input", x, "-o", str(tmp_path / "out")])
    assert "NaN or infinite" in line and not (tmp_path / "out").exists()


def test_sim_output_into_a_missing_directory(digits_out, tmp_path, capsys):
    x = npy(tmp_path, np.zeros((1, 1, 8, 8), dtype=np.float32))
    line = one_line(capsys, ["sim", str(digits_out), "--input", x, "-o", str(tmp_path / "no" / "y.npy")])
    assert "the directory" in line and "does not exist" in line


def test_deleted_host_model_is_named(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["compile", str(DIGITS), "-o", str(out), "-q", *FAST]) == 0
    (out / "host_pre.onnx").unlink()
    line = one_line(capsys, ["sim", str(out), "--input", npy(tmp_path, np.zeros((1, 1, 8, 8), dtype=np.float32))])
    assert "host_pre.onnx is missing" in line


@pytest.mark.sim
def test_sim_output_name_gets_npy_and_says_so(digits_out, tmp_path, capsys):
    x = npy(tmp_path, np.zeros((2, 1, 8, 8), dtype=np.float32))
    assert main(["sim", str(digits_out), "--input", x, "-o", str(tmp_path / "y")]) == 0
    assert f"-> {tmp_path / 'y.npy'}" in capsys.readouterr().out
    assert np.load(tmp_path / "y.npy").shape[0] == 2


# ---------------------------------------------------------------------------------------------- OUT, fit, rates

def test_recompiling_replaces_the_design_and_keeps_the_users_files(tmp_path, capsys):
    """Only what the previous compile wrote (its manifest) goes: a build, a waveform and notes stay (more
    in test_cli_out.py)."""
    out = tmp_path / "out"
    assert main(["compile", str(DIGITS), "-o", str(out), "-q", *FAST]) == 0
    (out / "build").mkdir()
    (out / "build" / "old.bit").write_text("the user's bitstream")
    (out / "waves.vcd").write_text("the user's")
    (out / "notes.txt").write_text("the user's")
    (out / "report.json").write_text("{}")
    assert main(["compile", str(DIGITS), "-o", str(out), "-q", *FAST]) == 0
    assert (out / "build" / "old.bit").read_text() == "the user's bitstream"
    assert (out / "waves.vcd").read_text() == (out / "notes.txt").read_text() == "the user's"
    assert json.loads((out / "report.json").read_text())["layers"]


def test_compile_prints_the_layer_table_and_the_fit(tmp_path, capsys):
    assert main(["compile", str(DIGITS), "-o", str(tmp_path / "out"), *FAST]) == 0
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    ii = report["analytic_cycles_per_frame"]
    assert f"II {ii:,}" in out and f"{report['frames_per_second']:,.0f} frames/s at 100 MHz" in out
    for layer in report["layers"]:
        if layer["op_type"] not in ("StreamingFIFO", "StreamingDataWidthConverter"):
            assert layer["name"] in out
    assert "fits the pynq-z2 (xc7z020) by the estimate: LUT" in out
    assert report["fit"]["fits"] and report["fit"]["resources"]["BRAM36"]["available"] == 140


def test_json_prints_the_report_only(tmp_path, capsys):
    assert main(["compile", str(DIGITS), "-o", str(tmp_path / "out"), "--json", *FAST]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((tmp_path / "out" / "report.json").read_text())


def test_target_beyond_one_frame_per_cycle_is_refused(tmp_path, capsys):
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "out"), "--target-fps", "1e12"])
    assert line == ("rtlgen compile: error: --target-fps 1,000,000,000,000: beyond one frame per clock cycle, the "
                    "most any design reaches (at most 100,000,000 frames/s at --clock-mhz 100)")


GEN_OVER = r"DSP [\d,]+ of 220 \((\d+)%\)"


def test_generator_mlp_does_not_fit_and_strict_compile_stops(tmp_path, capsys):
    """The INT8 generator at its default (fastest) folding: its MACs need several times the board's DSPs."""
    out = tmp_path / "gan"
    line = one_line(capsys, ["compile", str(MODELS / "gen_mlp_int8.onnx"), "-o", str(out), "--strict", "-q"])
    assert "does not fit the pynq-z2 (xc7z020) by the estimate: " in line
    assert int(re.search(GEN_OVER, line).group(1)) > 150, line
    assert not out.exists()


@pytest.mark.slow       # CI time: converting the generator at its fastest folding takes minutes
def test_generator_mlp_does_not_fit_and_build_stops_at_once(tmp_path, capsys):
    """Compiled anyway (a warning), the same design: ``rtlgen build`` refuses before starting Yosys."""
    out = tmp_path / "gan"
    over = GEN_OVER
    assert main(["compile", str(MODELS / "gen_mlp_int8.onnx"), "-o", str(out), "-q", *FAST]) == 0
    err = capsys.readouterr().err
    assert "rtlgen compile: warning: does not fit the pynq-z2 (xc7z020) by the estimate: " in err and "DSP" in err
    assert "compile with --fit pynq-z2 for the fastest folding that fits" in err         # what to try: named
    report = json.loads((out / "report.json").read_text())
    assert any("--fit pynq-z2" in w and "does not fit" in w for w in report["warnings"])
    line = one_line(capsys, ["build", str(out)])
    assert "not starting Yosys: the estimate is far over the pynq-z2 (xc7z020): " in line
    assert "compile again with --fit pynq-z2 for the fastest folding that fits" in line
    assert int(re.search(over, line).group(1)) > 150, line
    assert not (out / "build").exists()


def test_build_refuses_an_estimate_far_over_the_board(digits_out):
    """The policy the slow generator test shows end to end, on the digits design's own report with its DSP
    total pushed past the board's 220 x FAR_OVER: refused unless forced, the fix named."""
    from rtlgen.backend.build import _refuse_far_over
    from rtlgen.errors import BuildError
    report = json.loads((digits_out / "report.json").read_text())
    _refuse_far_over(report, "pynq-z2", force=False)                    # the design as compiled: fine
    report["totals"]["DSP"] = 400                                        # 182 % of 220
    with pytest.raises(BuildError, match=r"far over the pynq-z2 \(xc7z020\): DSP 400 of 220 \(182%\); compile "
                                         r"again with --fit pynq-z2 for the fastest folding that fits"):
        _refuse_far_over(report, "pynq-z2", force=False)
    _refuse_far_over(report, "pynq-z2", force=True)


def test_unknown_yosys_engine_is_refused_before_building(digits_out, capsys, monkeypatch):
    monkeypatch.setenv("RTLGEN_YOSYS", "vivado")
    line = one_line(capsys, ["build", str(digits_out)])
    assert "RTLGEN_YOSYS must be one of wasm, native, not 'vivado'" in line
    monkeypatch.setenv("RTLGEN_YOSYS", "native")
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    line = one_line(capsys, ["build", str(digits_out)])
    assert "RTLGEN_YOSYS=native needs the pyosys wheel: pip install pyosys==0.70" in line
    assert not (digits_out / "build").exists()


# ---------------------------------------------------------------------------------------------- bugs, Ctrl-C

def _fault(exc):
    def compile_model(*args, **kwargs):
        raise exc
    return compile_model


def test_an_internal_fault_is_not_disguised_as_bad_input(tmp_path, capsys, monkeypatch):
    import rtlgen.backend.compile
    monkeypatch.setattr(rtlgen.backend.compile, "compile_model", _fault(ValueError("operands could not be broadcast")))
    argv = ["compile", str(DIGITS), "-o", str(tmp_path / "out")]
    line = one_line(capsys, argv, code=1, kind="internal error")
    assert "ValueError: operands could not be broadcast (a bug in rtlgen; rerun with --verbose" in line
    assert main(argv + ["--verbose"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "the traceback is above" in err


def test_ctrl_c_is_one_line_and_exit_130(tmp_path, capsys, monkeypatch):
    import rtlgen.backend.compile
    monkeypatch.setattr(rtlgen.backend.compile, "compile_model", _fault(KeyboardInterrupt()))
    assert main(["compile", str(DIGITS), "-o", str(tmp_path / "out")]) == 130
    assert capsys.readouterr().err == "rtlgen compile: interrupted\n"
