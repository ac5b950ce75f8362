"""The Python API snippet of the README runs as written, and does what the command line does."""

import re
from pathlib import Path

import pytest

README = Path(__file__).parent.parent / "README.md"


def readme_python():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1, "the README has one Python snippet: the API"
    return blocks[0]


@pytest.mark.sim
def test_readme_api_snippet_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(readme_python(), "README.md", "exec"), scope)
    design, same, result = scope["design"], scope["same"], scope["result"]
    assert result.exact and design.fits
    assert same.report == design.report and (tmp_path / "digits_out" / "report.json").is_file()
    out = capsys.readouterr().out
    assert "frames/s, fits the board: True" in out and "accuracy" in out


def test_api_errors_are_the_cli_errors(tmp_path):
    from rtlgen import api
    from sim.outdir import OutError
    from rtlgen.passes.load import CompileError
    with pytest.raises(CompileError, match="--clock-mhz -1: must be a positive number"):
        api.compile("model.onnx", tmp_path / "out", clock_mhz=-1)
    with pytest.raises(OutError, match="not an rtlgen compile output"):
        api.open_design(tmp_path)
