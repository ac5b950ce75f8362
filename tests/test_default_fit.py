"""A default compile that does not fit its board says so first and points to --fit (issue 46); with
--strict it fails before the long steps. The board is shrunk here (its capacity monkeypatched) so that the
digits MLP's default folding is over it."""

from pathlib import Path

import pytest

from rtlgen import fit
from rtlgen.cli import main

MODEL = Path(__file__).parent / "models" / "digits_tfc_w1a1i1_clean.onnx"


@pytest.fixture
def tiny_board(monkeypatch):
    device, capacity = fit.BOARDS["pynq-z2"]
    monkeypatch.setitem(fit.BOARDS, "pynq-z2", (device, {**capacity, "LUT": 200}))


def test_over_the_board_is_the_first_line_after_the_compile_and_suggests_fit(tiny_board, tmp_path, capsys):
    assert main(["compile", str(MODEL), "-o", str(tmp_path / "out"), "--fifo-sizing", "none"]) == 0
    err = capsys.readouterr().err.splitlines()
    warnings = [line for line in err if "does not fit the pynq-z2" in line]
    assert len(warnings) == 2, err          # before the table, and again as the last word
    assert "LUT" in warnings[0] and "compile with --fit pynq-z2 for the fastest folding that fits" in warnings[0]
    assert err[-1] == warnings[1]


def test_strict_fails_before_fifo_sizing_and_suggests_fit(tiny_board, tmp_path, capsys):
    assert main(["compile", str(MODEL), "-o", str(tmp_path / "out"), "--strict"]) == 2
    err = capsys.readouterr().err
    assert "does not fit the pynq-z2 (xc7z020) by the estimate: LUT" in err
    assert "compile with --fit pynq-z2" in err and "insert_fifos" not in err

