"""Every public name imports; the CLI runs its demo and rejects bad input with exit status 2."""

import importlib
import re

import pytest

from rtlgen.cli import main

MODULES = ["layers.fifo", "layers.dwc", "layers.datapath", "layers.thresholding", "layers.mvau", "layers.vvau",
           "layers.maxpool", "layers.fmpadding", "layers.labelselect", "layers.streams", "layers.channelwise",
           "layers.globalaccpool", "swg", "swg.spec", "swg.default", "swg.parallel",
           "sim.golden", "memstream", "memstream.memstream", "memstream.packing",
           "memstream.axilite", "sim.runner", "sim.harness", "sim.axis", "sim.tb_job", "sim.compiled", "boards.yosys",
           "boards.pynq_z2", "boards.shells", "boards.zynq", "boards.driver", "rtlgen.build", "rtlgen.demo",
           "rtlgen.layer_verilog", "rtlgen.verify", "sim.stream_io", "rtlgen.stitch"]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_import(name):
    module = importlib.import_module(name)
    for public in module.__all__:
        assert hasattr(module, public), f"{name}.__all__ names {public!r}, which does not exist"


@pytest.mark.sim
def test_demo_runs_bit_exact(capsys):
    """The bundled digits MLP: every test image bit-exact against qonnx, the accuracy its trainer measured
    (96.67 % on the 360 images, models README), and the stream at the slowest layer's II."""
    assert main(["demo", "--no-synth"]) == 0
    out = capsys.readouterr().out
    assert "bit-exact: 360 samples, 3600 output values equal qonnx" in out and "MISMATCH" not in out
    assert "accuracy 96.67 % (qonnx: 96.67 %)" in out
    measured, ii = re.search(r"([\d.]+) cycles/frame \(slowest layer II (\d+)\)", out).groups()
    assert abs(float(measured) / int(ii) - 1) <= 0.02


def test_bad_simulator_choice_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--simulator", "modelsim"])
    assert exc.value.code == 2
    assert "invalid choice: 'modelsim'" in capsys.readouterr().err


def test_bad_rtlgen_sim_is_one_line_error(monkeypatch, capsys):
    monkeypatch.setenv("RTLGEN_SIM", "xsim")
    assert main(["demo", "--no-synth"]) == 2
    err = capsys.readouterr().err
    assert err == "rtlgen demo: error: RTLGEN_SIM must be one of verilator, icarus, not 'xsim'\n"
