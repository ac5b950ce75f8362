"""Whose fault is it: OS errors about the user's paths and environment are bad input (one line, exit 2,
the path and what to do), a damaged OUT names the file and says to compile again, an external tool's
failure shows the tool's first error lines and where its log is; and every option is checked or used
(nothing silently ignored or misread)."""

import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from onnx import helper

from rtlgen.cli import main
from tests.test_cli_errors import DIGITS, FAST, npy, one_line



@pytest.fixture
def compiled(digits_out):
    """The digits MLP compiled (conftest), for tests that only read it."""
    return digits_out


@pytest.fixture
def out(digits_out_copy):
    """A copy of it that a test may damage."""
    return digits_out_copy


def x_file(tmp_path, shape=(1, 1, 8, 8)):
    return npy(tmp_path, np.zeros(shape, dtype=np.float32))


# ---------------------------------------------------------------------------------------------- the environment

@pytest.mark.parametrize("value, message", [
    ("", "RTLGEN_CACHE_DIR is set but empty; unset it (the cache is then ~/.cache/rtlgen) or name a directory"),
    ("{file}", "RTLGEN_CACHE_DIR={file}: is a file, not a directory; point it at a directory, or unset it (the "
               "cache is then ~/.cache/rtlgen)"),
    ("{file}/cache", "RTLGEN_CACHE_DIR={file}/cache: cannot be made ({file} is a file), not a directory; point it at "
                     "a directory, or unset it (the cache is then ~/.cache/rtlgen)"),
])
def test_cache_dir_that_cannot_be_one(tmp_path, capsys, monkeypatch, value, message):
    (tmp_path / "afile").write_text("")
    file = str(tmp_path / "afile")
    monkeypatch.setenv("RTLGEN_CACHE_DIR", value.format(file=file))
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "out"), *FAST])
    assert line == f"rtlgen compile: error: {message.format(file=file)}"
    assert not (tmp_path / "out").exists()


def test_keep_intermediate_naming_a_file(tmp_path, capsys):
    (tmp_path / "graphs").write_text("mine")
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "out"), *FAST, "--keep-intermediate",
                             str(tmp_path / "graphs")])
    assert line == (f"rtlgen compile: error: --keep-intermediate {tmp_path / 'graphs'}: is a file, not a directory; "
                    f"give a directory (made if missing)")
    assert (tmp_path / "graphs").read_text() == "mine" and not (tmp_path / "out").exists()


def test_a_missing_tool_is_named_with_how_to_install_it(out, tmp_path, capsys, monkeypatch):
    """A program the simulation needs is not on PATH: the OSError of starting it says which and how."""
    def simulate(self, x, **kwargs):
        subprocess.run(["make", "-C", str(tmp_path)], check=True)
    monkeypatch.setattr("rtlgen.api.Design.simulate", simulate)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    line = one_line(capsys, ["sim", str(out), "--input", x_file(tmp_path)])
    assert line == ("rtlgen sim: error: make: not found on PATH; install make and g++ (Debian: apt-get install "
                    "make g++): the Verilator bench is C++")


def test_os_errors_name_the_path_and_what_to_do(out, tmp_path, capsys, monkeypatch):
    import errno
    def simulate(self, x, **kwargs):
        raise PermissionError(errno.EROFS, "Read-only file system", "/cache/rtlgen/compiled/x")
    monkeypatch.setattr("rtlgen.api.Design.simulate", simulate)
    line = one_line(capsys, ["sim", str(out), "--input", x_file(tmp_path)])
    assert line == ("rtlgen sim: error: /cache/rtlgen/compiled/x: read-only file system; it is on a read-only file "
                    "system: use a writable path")


# ---------------------------------------------------------------------------------------------- a damaged OUT

def _truncate(path, keep=0.5):
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])


@pytest.mark.parametrize("name, damage, what", [
    ("report.json", _truncate, "damaged or truncated (not JSON: "),
    ("report.json", lambda p: p.write_text("{}"), "damaged (no 'model', 'analytic_cycles_per_frame'"),
    ("io.json", lambda p: p.write_text("{}"), "damaged (no 'model_input', 'model_input_shape'"),
    ("io.json", lambda p: p.write_text("[1, 2]"), "damaged (a JSON object was expected)"),
    ("host_post.onnx", _truncate, "damaged ("),
    ("host_pre.onnx", lambda p: p.write_bytes(b"\xff" * 10), "damaged ("),
    ("finn_design_wrapper.v", _truncate, "truncated (it does not end with endmodule)"),
])
def test_a_damaged_out_names_the_file(out, tmp_path, capsys, name, damage, what):
    damage(out / name)
    line = one_line(capsys, ["sim", str(out), "--input", x_file(tmp_path)])
    assert line.startswith(f"rtlgen sim: error: {out / name}: {what}"), line
    assert line.endswith(f"; compile again: rtlgen compile {DIGITS.resolve()} -o {out}"), line


def test_a_damaged_out_for_build_and_verify(out, tmp_path, capsys):
    (out / "io.json").write_text("{}")
    for argv in (["build", str(out)], ["verify", str(out), "--input", x_file(tmp_path)]):
        line = one_line(capsys, argv)
        assert f"{out / 'io.json'}: damaged (no 'model_input'" in line and "compile again" in line


def test_out_that_is_a_file(tmp_path, capsys):
    (tmp_path / "out").write_text("")
    line = one_line(capsys, ["sim", str(tmp_path / "out"), "--input", x_file(tmp_path)])
    assert line == f"rtlgen sim: error: {tmp_path / 'out'}: is a file, not an rtlgen compile output (a directory)"


# ---------------------------------------------------------------------------------------------- external tools

@pytest.mark.sim
def test_a_verilator_failure_shows_its_errors_and_log(out, tmp_path, capsys):
    verilog = (out / "finn_design_wrapper.v").read_text()
    at = verilog.rindex("endmodule")
    (out / "finn_design_wrapper.v").write_text(verilog[:at] + f"  this is not verilog_{tmp_path.name};\n"
                                               + verilog[at:])
    assert main(["sim", str(out), "--input", x_file(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    edited = err.pop(0)             # first, the edit that explains what follows (issue 45)
    assert edited.startswith(f"rtlgen sim: warning: 1 file of {out} changed since the compile (sha256 differs from "
                             f"its manifest): finn_design_wrapper.v (edited)"), edited
    assert err[0] == "rtlgen sim: error: verilator build of finn_design_wrapper failed (verilator):", err
    assert err[1].startswith("  %Error: finn_design_wrapper.v:") and "syntax error" in err[1], err
    assert err[-1].startswith("  full log: ") and err[-1].endswith("build.log"), err
    log = Path(err[-1].split("full log: ")[1])
    assert f"verilog_{tmp_path.name}" in log.read_text()
    assert "internal error" not in "\n".join(err)


def test_a_yosys_error_line_keeps_the_frontends_location(tmp_path):
    from boards.yosys import YosysError
    log = ("-- Executing script file `synth.ys' --\n\n1. Executing Verilog-2005 frontend: top.v\n"
           "Parsing Verilog input from `top.v' to AST representation.\n"
           "top.v:2513: ERROR: syntax error, unexpected TOK_PRIMITIVE, expecting '(' or '['\n")
    exc = YosysError("rtlgen_zynq", 1, log, tmp_path / "yosys.log")
    assert exc.error == "top.v:2513: syntax error, unexpected TOK_PRIMITIVE, expecting '(' or '['"
    assert str(exc).splitlines()[0] == (f"yosys failed on 'rtlgen_zynq' during Verilog-2005 frontend: top.v: "
                                        f"{exc.error}; log: {tmp_path / 'yosys.log'}")


@pytest.mark.slow
def test_a_yosys_failure_in_build_shows_its_error_and_log(out, tmp_path, capsys):
    verilog = (out / "finn_design_wrapper.v").read_text()
    at = verilog.rindex("endmodule")
    (out / "finn_design_wrapper.v").write_text(verilog[:at] + "  this is not verilog;\n" + verilog[at:])
    line = one_line(capsys, ["build", str(out), "--shell", "zynq"])
    assert "rtlgen build: error: Yosys failed during Verilog-2005 frontend: top.v: top.v:" in line
    assert "syntax error" in line and line.endswith(f"; log: {out / 'build' / 'yosys' / 'yosys.log'}"), line


# ---------------------------------------------------------------------------------------------- options

@pytest.mark.parametrize("budget", [" ", ","])        # "": an empty value, refused as any (test_cli_options)
def test_a_budget_naming_no_resource_is_refused(tmp_path, capsys, budget):
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "out"), "--budget", budget])
    assert line == (f"rtlgen compile: error: --budget {budget!r}: names no resource; give lut=N,ff=N,bram36=N,"
                    f"dsp=N (any subset), or --fit pynq-z2")
    assert not (tmp_path / "out").exists()


def test_partition_budget_naming_no_resource_is_refused(tmp_path, capsys):
    line = one_line(capsys, ["partition", str(DIGITS), "-o", str(tmp_path / "out"), "--devices", "2",
                             "--budget", " "])
    assert line.startswith("rtlgen partition: error: --budget ' ': names no resource")


@pytest.mark.parametrize("images", ["-3", "0", "361"])
def test_demo_images_must_be_in_the_test_set(capsys, images):
    line = one_line(capsys, ["demo", "--images", images, "--no-synth"])
    assert line == f"rtlgen demo: error: --images {images}: must be a positive number of test images, at most 360"


@pytest.mark.parametrize("option, spelled", [
    (["--target-fps", "5"], "--target-fps"), (["--clock-mhz", "100"], "--clock-mhz"),
    (["--clock", "200"], "--clock-mhz"), (["-o", "elsewhere"], "--out"), (["--fifo-sizing=none"], "--fifo-sizing"),
    (["-q"], "--quiet"), (["--force"], "--force")])
def test_verify_out_refuses_compile_options(compiled, tmp_path, capsys, option, spelled):
    line = one_line(capsys, ["verify", str(compiled), "--input", x_file(tmp_path), *option])
    assert line == (f"rtlgen verify: error: {spelled} is a compile option, and {compiled} is already compiled; "
                    f"verify runs it as it is (compile again with the option, or give verify the model to compile)")


def test_sim_out_refuses_compile_options(compiled, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:         # argparse's: sim has no such option
        main(["sim", str(compiled), "--input", x_file(tmp_path), "--target-fps", "5"])
    assert exc.value.code == 2
    line, = capsys.readouterr().err.strip().splitlines()
    assert line == ("rtlgen sim: error: --target-fps is a compile option, and `rtlgen sim` uses OUT as it was "
                    "compiled; compile again with it (rtlgen compile MODEL.onnx -o OUT --target-fps ...) "
                    "(`rtlgen sim --help` shows the usage)")


def test_an_implausible_clock_is_a_warning(tmp_path, capsys):
    assert main(["compile", str(DIGITS), "-o", str(tmp_path / "out"), "-q", *FAST, "--clock-mhz", "1e6"]) == 0
    assert capsys.readouterr().err == (
        "rtlgen compile: warning: --clock-mhz 1,000,000: beyond what an xc7z020 can run (at most ~500 MHz; rtlgen's "
        "layers reach ~250 MHz), so the frames/s reported are not reachable\n")
    assert main(["compile", str(DIGITS), "-o", str(tmp_path / "out"), "-q", *FAST, "--clock-mhz", "450"]) == 0
    assert capsys.readouterr().err == ""


class _Waves:
    """Design.simulate standing in for the simulator: records the waveform path, writes it if told to."""

    def __init__(self, write):
        self.write, self.paths = write, []

    def install(self, monkeypatch):
        def simulate(design, x, simulator=None, waves=None, **kwargs):
            self.paths.append(waves)
            if self.write and waves:
                Path(waves).write_text("$enddefinitions $end\n")
            x = design.io.check_input(x)
            return SimpleNamespace(outputs=np.zeros((len(x), 10), dtype=np.float32), frames=len(x), cycles=10,
                                   latency=5, cycles_per_frame=None)
        monkeypatch.setattr("rtlgen.api.Design.simulate", simulate)
        return self


def test_waves_into_a_directory_writes_a_file_there(out, tmp_path, capsys, monkeypatch):
    fake = _Waves(write=True).install(monkeypatch)
    (tmp_path / "waves").mkdir()
    assert main(["sim", str(out), "--input", x_file(tmp_path), "--waves", str(tmp_path / "waves")]) == 0
    assert fake.paths == [str(tmp_path / "waves" / "waves.vcd")]
    assert f"waveform -> {tmp_path / 'waves' / 'waves.vcd'}" in capsys.readouterr().out
    assert (tmp_path / "waves" / "waves.vcd").is_file()


def test_waves_never_claims_a_file_it_did_not_write(out, tmp_path, capsys, monkeypatch):
    _Waves(write=False).install(monkeypatch)
    line = one_line(capsys, ["sim", str(out), "--input", x_file(tmp_path), "--waves"])
    assert line == f"rtlgen sim: error: --waves: the simulation wrote no waveform to {out / 'waves.vcd'}"


def test_waves_with_icarus_is_refused_before_simulating(out, tmp_path, capsys, monkeypatch):
    fake = _Waves(write=True).install(monkeypatch)
    line = one_line(capsys, ["sim", str(out), "--input", x_file(tmp_path), "--waves", "--simulator", "icarus"])
    assert line == ("rtlgen sim: error: --waves needs the Verilator bench: --simulator verilator (Icarus runs the "
                    "cocotb bench, which writes no waveform here)")
    assert fake.paths == []


def test_waves_into_a_missing_directory(out, tmp_path, capsys):
    line = one_line(capsys, ["sim", str(out), "--input", x_file(tmp_path), "--waves", str(tmp_path / "no" / "w.vcd")])
    assert line == f"rtlgen sim: error: --waves {tmp_path / 'no' / 'w.vcd'}: the directory {tmp_path / 'no'} does not exist"


# ---------------------------------------------------------------------------------------------- models and inputs

def test_a_model_without_an_input_shape_is_refused(tmp_path, capsys):
    model = onnx.load(str(DIGITS))
    model.graph.input[0].type.tensor_type.ClearField("shape")
    onnx.save(model, str(tmp_path / "noshape.onnx"))
    line = one_line(capsys, ["compile", str(tmp_path / "noshape.onnx"), "-o", str(tmp_path / "out")])
    assert line == (f"rtlgen compile: error: {tmp_path / 'noshape.onnx'}: input global_in has no shape; legal: a "
                    f"fixed shape such as (1, 64) or (1, 3, 32, 32) (export the model with its input shape, or set "
                    f"it with onnx.tools.update_model_dims)")


def test_an_npz_of_several_arrays_says_to_give_an_npy(compiled, tmp_path, capsys):
    np.savez(tmp_path / "data.npz", x=np.zeros((2, 1, 8, 8), dtype=np.float32), y=np.zeros(2))
    line = one_line(capsys, ["sim", str(compiled), "--input", str(tmp_path / "data.npz")])
    assert line == (f"rtlgen sim: error: --input {tmp_path / 'data.npz'}: an .npz archive of 2 arrays (x, y); give "
                    f"one .npy array, e.g. np.save('x.npy', np.load('data.npz')['x'])")


def test_an_npz_of_one_array_is_read(compiled, tmp_path, capsys):
    np.savez(tmp_path / "one.npz", np.zeros((3, 7), dtype=np.float32))
    line = one_line(capsys, ["sim", str(compiled), "--input", str(tmp_path / "one.npz")])
    assert line.startswith("rtlgen sim: error: input of shape (3, 7) does not match the model input")


@pytest.mark.parametrize("argv, message", [
    (["compile", "{dir}", "-o", "{tmp}/out"], "{dir}: is a directory; give the model's .onnx file"),
    (["verify", "{dir}/../model.onnx", "--input", "{dir}"], "--input {dir}: is a directory; give a .npy file"),
    (["sim", "{out}", "--input", "{dir}"], "--input {dir}: is a directory; give a .npy file"),
    (["inspect", "{dir}"], "{dir}: is a directory; give the model's .onnx file"),
])
def test_a_directory_where_a_file_belongs(compiled, tmp_path, capsys, argv, message):
    (tmp_path / "adir").mkdir()
    shutil.copy(DIGITS, tmp_path / "model.onnx")
    fill = dict(dir=tmp_path / "adir", tmp=tmp_path, out=compiled)
    line = one_line(capsys, [a.format(**fill) for a in argv])
    assert line.endswith(f": error: {message.format(**fill)}"), line


def test_an_unsupported_op_is_named_as_in_the_users_model(tmp_path, capsys):
    model = onnx.load(str(DIGITS))
    nodes = list(model.graph.node)
    at = [n.name for n in nodes].index("MatMul_1")
    tensor = nodes[at].output[0]
    nodes[at].output[0] = tensor + "_before_sin"
    model.graph.node.insert(at + 1, helper.make_node("Sin", [tensor + "_before_sin"], [tensor], name="Sin_ins"))
    onnx.save(model, str(tmp_path / "sin.onnx"))
    line = one_line(capsys, ["compile", str(tmp_path / "sin.onnx"), "-o", str(tmp_path / "out")])
    assert line.startswith("rtlgen compile: error: node Sin_ins (Sin) cannot be mapped to hardware and is not at the "
                           "graph's edge: MatMul_2 (MatMul) comes after it; mapped to hardware: AveragePool, Conv, ConvTranspose, Gemm, "
                           "GlobalAveragePool, MatMul, MaxPool, "), line
    assert "Sin_0" not in line and "quantizers (BipolarQuant, MultiThreshold, Quant, Trunc)" in line


def test_renamed_nodes_keep_the_models_bytes(tmp_path):
    """The names travel through qonnx's cleanup in doc_strings, which are restored: the host models saved
    in OUT are as without them."""
    from rtlgen.passes.load import load_model
    model = load_model(DIGITS)
    assert all(not n.doc_string for n in model.graph.node)
    assert model.original_names == {}


@pytest.mark.parametrize("config", [{"MVAU_0": {"ram_style": "ultra"}}, {"Defaults": {"ram_style": "ultra"}}])
def test_ram_style_ultra_in_a_folding_file(tmp_path, capsys, config):
    (tmp_path / "fold.json").write_text(json.dumps(config))
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "out"), "--folding",
                             str(tmp_path / "fold.json")])
    assert line.endswith("ram_style='ultra' cannot be set by a folding file; legal: auto, distributed, block (ultra: "
                         "UltraRAM needs runtime-writable weights, which a folding file cannot set, and the xc7z020 "
                         "has no UltraRAM)"), line
    assert "runtime_writeable_weights" not in line


# ---------------------------------------------------------------------------------------------- argparse

@pytest.mark.parametrize("argv, message", [
    (["compile", str(DIGITS)], "rtlgen compile: error: the following arguments are required: -o/--out"),
    (["demo", "--bogus"], "rtlgen demo: error: unrecognized arguments: --bogus"),
    (["demo", "--simulator", "modelsim"], "rtlgen demo: error: argument --simulator: invalid choice: 'modelsim'"),
    (["compile", str(DIGITS), "-o", "x", "--clock-mhz", "fast"],
     "rtlgen compile: error: argument --clock-mhz: invalid float value: 'fast'"),
    (["nosuch"], "rtlgen: error: argument COMMAND: invalid choice: 'nosuch'"),
])
def test_argparse_errors_are_one_line_with_the_usage_hint(capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    prog = message.split(": error:")[0]
    assert len(lines) == 1 and lines[0].startswith(message), err
    assert lines[0].endswith(f" (`{prog} --help` shows the usage)"), err
