"""The INT8 generator MLP at board scale: the shipped PYNQ-Z2 folding, bit-exact against qonnx.

The default suite checks 4 random inputs (FIFOs at depth 2: the function does not depend on them); the
slow tests check 32 inputs at the sized FIFOs (cycles per frame = the II) and the whole design in the
zynq shell by Yosys (see benchmarks/gan.py for the table).
"""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from rtlgen.cli import main

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "models" / "gen_mlp_int8.onnx"
FOLDING = ROOT / "examples" / "gan" / "pynq_z2_folding.json"
II = 4096       # the shipped folding's slowest layer: 48,828 frames/s at 200 MHz


def inputs(tmp_path, frames, seed):
    path = tmp_path / "x.npy"
    np.save(path, np.random.default_rng(seed).uniform(-3.8, 3.8, size=(frames, 100)).astype(np.float32))
    return path


def verify(tmp_path, frames, *extra):
    out = tmp_path / "gan"
    code = main(["verify", str(MODEL), "-o", str(out), "--folding", str(FOLDING), "--clock-mhz", "200",
                 "--input", str(inputs(tmp_path, frames, seed=frames)), *extra])
    return code, out


@pytest.mark.slow   # CI time (103 s, issue 42): requantizers in RTL are test_shared_activation's, DSP pairs test_mvau's,
@pytest.mark.sim    # the generator's three layers exact against qonnx test_requant's
def test_shipped_folding_is_bit_exact_on_4_inputs(tmp_path, capsys):
    code, out = verify(tmp_path, 4, "--fifo-sizing", "none")
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert f"bit-exact: 4 samples, {4 * 784} output values equal qonnx" in printed
    report = json.loads((out / "report.json").read_text())
    assert report["analytic_cycles_per_frame"] == II
    assert [layer["activation"]["style"] for layer in report["layers"] if "activation" in layer] == ["requant"] * 3
    assert report["fit"]["fits"]


@pytest.mark.slow
@pytest.mark.sim
def test_shipped_folding_is_bit_exact_on_32_inputs_at_the_ii(tmp_path, capsys):
    code, _ = verify(tmp_path, 32)
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert f"bit-exact: 32 samples, {32 * 784} output values equal qonnx" in printed
    assert re.search(rf"simulated 32 frame\(s\) in [\d.]+ s, {II}\.0 cycles/frame \(II {II}\)", printed), printed


@pytest.mark.slow
def test_whole_design_in_the_zynq_shell_fits_by_yosys(tmp_path):
    assert main(["compile", str(MODEL), "-o", str(tmp_path / "gan"), "--folding", str(FOLDING),
                 "--clock-mhz", "200", "--fifo-sizing", "none", "-q"]) == 0
    assert main(["build", str(tmp_path / "gan"), "--shell", "zynq"]) == 0       # exit 2 if over the device
    totals = json.loads((tmp_path / "gan" / "build" / "yosys" / "report.json").read_text())["totals"]
    assert totals["lut"] <= 53_200 and totals["ff"] <= 106_400 and totals["dsp"] <= 220
    assert totals["bram36"] + totals["bram18"] / 2 <= 140


@pytest.mark.slow   # CI time (67 s): the generator's 4-input test above covers requantizers and DSP pairs in RTL
@pytest.mark.sim
def test_another_int8_mlp_gets_the_requantizer_and_dsp_packing_with_no_flag(tmp_path):
    # 64-512-384-768, per-channel weight scales, float biases (tests/models/int8_mlp/make_int8_mlp.py):
    # --target-fps alone; every 8-bit activation becomes a requantizer, the MACs DSP48E1 pairs.
    from rtlgen import api
    model = ROOT / "tests" / "models" / "int8_mlp" / "int8_mlp_per_channel.onnx"
    design = api.compile(model, tmp_path / "mlp", target_fps=40_000, clock_mhz=200, fifo_sizing="none")
    assert design.report["frames_per_second"] >= 40_000 and design.fits
    specs = [node.spec() for node in design.compiled.graph.nodes if node.op_type == "MVAU"]
    assert len(specs) == 3
    assert all(spec.requant is not None and not spec.requant.shared_multiplier for spec in specs)
    assert all(spec.res_type == "dsp" for spec in specs)
    assert [spec.dsp_packing is not None for spec in specs] == [spec.pe % 2 == 0 for spec in specs]
    assert any(spec.dsp_packing for spec in specs)
    folding = json.loads((tmp_path / "mlp" / "folding.json").read_text())
    assert {folding[name]["resType"] for name in ("MVAU_0", "MVAU_1", "MVAU_2")} == {"dsp"}
    x = np.load(ROOT / "tests" / "models" / "int8_mlp" / "inputs8.npy")
    result = design.verify(x)
    assert result.passed and result.exact, result.summary()
