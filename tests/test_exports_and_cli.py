"""Every public name imports; the CLI runs its demo and rejects bad input with exit status 2."""

import importlib
import re

import pytest

from rtlgen.cli import main

MODULES = ["layers.fifo", "layers.memcost", "layers.dwc", "layers.datapath", "layers.thresholding", "layers.dotproduct",
           "layers.dotproduct_unit", "layers.dotproduct_cost", "layers.dotproduct_hooks", "layers.requant",
           "layers.requant_hw", "layers.mvau", "layers.vvau",
           "layers.maxpool", "layers.fmpadding", "layers.labelselect", "layers.streams", "layers.channelwise",
           "layers.globalaccpool", "swg", "swg.spec", "swg.default", "swg.parallel",
           "golden", "memstream", "memstream.memstream", "memstream.packing",
           "memstream.axilite", "sim.runner", "sim.harness", "sim.axis", "sim.tb_job", "sim.compiled", "boards.yosys",
           "boards.pynq_z2", "boards.shells", "boards.zynq", "boards.zynq_timing", "boards.driver", "rtlgen.backend.build",
           "rtlgen.demo",
           "rtlgen.backend.layer_verilog", "rtlgen.check.verify", "sim.stream_io", "rtlgen.backend.stitch",
           "rtlgen.passes.insert", "rtlgen.passes.size_fifos", "rtlgen.backend.simulate", "rtlgen.report.graph",
           "rtlgen.passes.lower", "rtlgen.passes.lowering_context", "rtlgen.passes.lowering_rules",
           "rtlgen.passes.float_ops", "rtlgen.passes.exact_scales", "rtlgen.passes.weight_codes"]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_import(name):
    module = importlib.import_module(name)
    for public in module.__all__:
        assert hasattr(module, public), f"{name}.__all__ names {public!r}, which does not exist"


@pytest.mark.sim
def test_demo_runs_bit_exact(capsys, tmp_path, monkeypatch):
    """The bundled digits MLP: every test image bit-exact against qonnx, the accuracy its trainer measured
    (96.67 % on the 360 images, models README), and the stream at the slowest layer's II. Without -o the
    demo keeps its OUT in ./rtlgen-demo (an rtlgen OUT: `rtlgen verify OUT` runs on it) and its last line
    says where the report is."""
    import json

    import numpy as np
    from rtlgen.demo import DEMO_TESTSET, bundled
    from sim.outdir import OutDir
    MANIFEST = OutDir.manifest
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--no-synth"]) == 0
    out = capsys.readouterr().out
    assert "bit-exact: 360 samples, 3600 output values equal qonnx" in out and "MISMATCH" not in out
    assert "accuracy 96.67 % (qonnx: 96.67 %)" in out
    measured, ii = re.search(r"([\d.]+) cycles/frame \(slowest layer II (\d+)\)", out).groups()
    assert abs(float(measured) / int(ii) - 1) <= 0.02
    demo = tmp_path / "rtlgen-demo"
    assert out.strip().splitlines()[-1] == ("report -> rtlgen-demo/report.html: open it in a browser (rtlgen sim, "
                                            "verify and build work on rtlgen-demo)")
    assert (demo / MANIFEST).is_file() and json.loads((demo / "verify.json").read_text())["samples"] == 360
    assert 'data-key="verify.passed">passed' in (demo / "report.html").read_text()
    np.save(tmp_path / "x.npy", np.load(str(bundled(DEMO_TESTSET)))["x"][:3])
    assert main(["verify", "rtlgen-demo", "--input", "x.npy"]) == 0
    assert "bit-exact: 3 samples" in capsys.readouterr().out


def test_demo_refuses_a_folder_that_is_not_an_rtlgen_output(tmp_path, capsys):
    """demo -o into the user's own non-empty folder: exit 2 naming it, nothing of theirs touched."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert main(["demo", "--no-synth", "-o", str(mine)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rtlgen demo: error: -o {mine}: the directory is not empty and is not an rtlgen output")
    assert len(err.splitlines()) == 1
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and (mine / "notes.txt").read_text() == "keep me"


def test_bad_simulator_choice_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--simulator", "modelsim"])
    assert exc.value.code == 2
    assert "invalid choice: 'modelsim'" in capsys.readouterr().err


def test_bad_rtlgen_sim_is_one_line_error(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("RTLGEN_SIM", "xsim")
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--no-synth"]) == 2
    err = capsys.readouterr().err
    assert err == "rtlgen demo: error: RTLGEN_SIM must be one of verilator, icarus, not 'xsim'\n"
    assert not any(tmp_path.iterdir())          # refused before the demo wrote anything
