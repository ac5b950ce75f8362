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


@pytest.mark.sim
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
