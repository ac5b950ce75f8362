"""`rtlgen build`: the standalone self-test shell (simulated: it passes on the right answers and catches
one wrong word), the Vivado plan with the PYNQ-Z2 pins, the Yosys report with per-layer numbers and the
capacity check."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from rtlgen.backend.build import BuildError, build
from boards.shells import SelfTest
from memstream.packing import pack_words, padded_width
from rtlgen.cli import main
from rtlgen.options import CompileOptions
from rtlgen.backend.compile import compile_model
from rtlgen.backend.emit import write_outputs
from rtlgen.check.execute import run_golden
from sim.runner import build as build_sim, run_cocotb, to_verilog

MODELS = Path(__file__).parent / "models"
DIGITS = MODELS / "digits_tfc_w1a1i1_clean.onnx"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    result = compile_model(DIGITS, CompileOptions(fifo_sizing="none"))
    write_outputs(result, out)
    return result, out


def golden_words(compiled, frames, seed=0):
    """Input words and the words the accelerator must answer, from the layers' numpy goldens."""
    first, last = compiled.nodes[0].spec(), compiled.nodes[-1].spec()
    codes = np.random.default_rng(seed).choice([-1, 1], size=(frames, first.mw))      # BIPOLAR input
    out = run_golden(compiled.nodes, codes)
    return ([int(w) for w in pack_words(codes.reshape(-1, first.simd), first.input_dtype)],
            [int(w) for w in pack_words(out.reshape(-1, last.pe), last.output_dtype)], out.shape[1] // last.pe)


def run_selftest(compiled, expected_fix=None, frames=3):
    words, expected, per_frame = golden_words(compiled, frames)
    if expected_fix:
        expected = expected_fix(expected)
    shell = SelfTest(in_words=words, in_width=padded_width(compiled.nodes[0].spec().in_width),
                     expected_words=expected, out_width=padded_width(compiled.nodes[-1].spec().out_width),
                     out_per_frame=per_frame)
    design = to_verilog(shell, "top") + compiled.verilog
    built = build_sim(design, toplevel="top")
    job = {"clock": "clk", "reset": "rst", "reset_active_high": True, "until": ["frames", 2 * frames],
           "max_cycles": 40_000, "probes": ["frames", "passed", "failed", "leds", "rgb"]}
    return run_cocotb(built, "sim.tb_cycles", job)


@pytest.mark.sim
def test_selftest_passes_on_the_golden_answers(compiled):
    result = run_selftest(compiled[0])
    p = result["probes"]
    assert result["reached"] and p["frames"] >= 6           # the ROM wraps: frames run twice
    assert (p["passed"], p["failed"]) == (1, 0)
    assert p["leds"] & 0b110 == 0b010 and p["rgb"] == 0b010


@pytest.mark.sim
def test_selftest_catches_one_wrong_word(compiled):
    def corrupt(words):
        words = list(words)
        words[len(words) // 2] ^= 1
        return words
    p = run_selftest(compiled[0], corrupt)["probes"]
    assert (p["passed"], p["failed"]) == (0, 1)
    assert p["leds"] & 0b110 == 0b100 and p["rgb"] == 0b001


@pytest.fixture(scope="module")
def tfc_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("tfc")
    assert main(["compile", str(MODELS / "TFC_1W1A.onnx"), "-o", str(out)]) == 0
    return out


# The PYNQ-Z2 board file's pins (TUL's pynq-z2 part0_pins.xml / master XDC), written out independently.
BOARD_PINS = {"clk125_0__io": "H16", "led_0__io": "R14", "led_1__io": "P14", "led_2__io": "N16", "led_3__io": "M14",
              "button_0__io": "D19", "rgb_led_0__r__io": "N15", "rgb_led_0__g__io": "G17", "rgb_led_0__b__io": "L15"}


@pytest.mark.slow
@pytest.mark.synth
def test_build_tfc_standalone_plan_and_report(tfc_out, capsys):
    out = tfc_out
    assert main(["build", str(out)]) == 0
    text = capsys.readouterr().out
    vivado = out / "build" / "vivado"
    for name in ("rtlgen_standalone.v", "rtlgen_standalone.xdc", "rtlgen_standalone.tcl", "build_rtlgen_standalone.sh",
                 "accelerator.v"):
        assert (vivado / name).is_file(), name
    xdc = (vivado / "rtlgen_standalone.xdc").read_text()
    for port, pin in BOARD_PINS.items():
        assert f'set_property LOC {pin} [get_ports "{port}"]' in xdc, (port, pin)
        assert f'set_property IOSTANDARD "LVCMOS33" [get_ports "{port}"]' in xdc, port
    assert "create_clock -name clk125_0__io -period 8.0" in xdc
    assert "xc7z020clg400-1" in (vivado / "rtlgen_standalone.tcl").read_text()
    report = json.loads((out / "build" / "yosys" / "report.json").read_text())
    layers = {r["name"] for r in json.loads((out / "report.json").read_text())["layers"]}
    assert set(report["layers"]) == layers
    totals = report["totals"]
    assert totals["lut"] == sum(r["lut"] for r in report["layers"].values()) + report["shell"]["lut"]
    # the LUTs set beside an estimate or the capacity count LUTRAM and SRLs, as the estimates do
    assert report["lut_including_memory"] == totals["lut"] + totals["lut_as_memory"] == totals["lut_including_memory"]
    for name, row in report["layers"].items():
        assert row["lut_including_memory"] == row["lut"] + row["lut_as_memory"]
        assert any(line.split()[:2] == [name, str(row["lut_including_memory"])] for line in text.splitlines()), name
    assert report["lut_including_memory"] < 53200 and totals["ff"] < 106400 and totals["dsp"] <= 220
    assert "xc7z020: LUT" in text and "MVAU_0" in text
    for name, row in report["layers"].items():          # the estimate beside Yosys, per layer
        assert row["estimate"]["LUT"] > 0 or name.startswith("StreamingFIFO"), name
    timing = report["timing"]
    assert timing["requested_mhz"] == 100.0 and "estimate" in timing["model"]
    design = timing["design"]
    # levels may be 0: a block RAM's clock-to-out into a register can be the longest path (TFC's weights)
    assert design["levels"] >= 0 and design["path_ns_estimate"] > design["cell_ns"] > 0
    assert abs(design["fmax_mhz_estimate"] - 1000 / design["path_ns_estimate"]) < 0.1
    assert set(timing["layers"]) == layers and all(t["levels"] >= 0 for t in timing["layers"].values())
    # the design's longest path is at least as long as any layer's own paths
    assert design["cell_ns"] >= max(t["cell_ns"] for t in timing["layers"].values()) - 1e-9
    assert "timing (estimate): longest path" in text and "Fmax ~" in text


@pytest.mark.slow
@pytest.mark.synth
def test_build_tfc_zynq_shell(tfc_out, capsys):
    assert main(["build", str(tfc_out), "--shell", "zynq"]) == 0
    verilog = (tfc_out / "build" / "vivado" / "rtlgen_zynq.v").read_text()
    assert "PS7 ps7 (" in verilog and ".SAXIHP0ARADDR(" in verilog and ".MAXIGP0AWADDR(" in verilog
    report = json.loads((tfc_out / "build" / "yosys" / "report.json").read_text())
    assert report["top"] == "rtlgen_zynq" and report["lut_including_memory"] < 53200
    assert "zynq shell: 112 input and 10 output bytes per frame" in capsys.readouterr().out


def test_build_over_budget_is_a_clear_error(compiled, monkeypatch):
    """The capacity check on a (fabricated) Yosys result over the xc7z020's LUTs: no Yosys run needed."""
    import rtlgen.backend.build
    from boards.yosys import SynthReport

    big = dataclasses.replace(SynthReport.from_cells("rtlgen_standalone", {"LUT6": 60000, "FDRE": 1000}),
                              modules={}, parts={"synthesized": 0, "cached": 0})
    monkeypatch.setattr(rtlgen.backend.build, "synthesize_by_parts", lambda *a, **k: big)
    _, out = compiled
    with pytest.raises(BuildError, match=r"does not fit the xc7z020: LUT: 60000 used > 53200 available \(112.8%\)"):
        build(out, say=lambda _: None)
    assert main(["build", str(out)]) == 2


def test_unknown_board(compiled, capsys):
    _, out = compiled
    with pytest.raises(BuildError, match="--board 'zcu104' is not supported; legal: pynq-z2"):
        build(out, board="zcu104")


def test_vivado_toolchain_without_vivado(compiled, capsys, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    _, out = compiled
    assert main(["build", str(out), "--toolchain", "vivado"]) == 2
    assert "--toolchain vivado: vivado is not on PATH" in capsys.readouterr().err
