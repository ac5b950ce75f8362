"""The messages that misled (issue 45 item 4): each says what happened and what to try, --fit named
wherever a design does not fit or a target is out of reach of the naive folding; a prove that times out
says the depth it reached; a partition that leaves devices empty says so."""

import json

import pytest

from rtlgen import api
from rtlgen.check.prove import _reached
from rtlgen.cli import main
from rtlgen.errors import CompileError
from tests.test_cli_errors import DIGITS, FAST


def test_target_out_of_reach_within_the_budget_says_so():
    """The optimizer's design short of --target-fps (the warning's words; a compile that gets there is slow)."""
    from rtlgen.api import _design_warnings
    from rtlgen.options import CompileOptions
    report = {"fit": {"fits": True}, "frames_per_second": 123_456.7}
    options = CompileOptions.create(fit="pynq-z2", target_fps=2e5).check()
    assert _design_warnings(report, options) == [
        "--target-fps 200,000 is out of reach within the budget: the fastest design in it gives 123,457 frames/s at "
        "100 MHz; raise the budget (--max-utilization, --budget) or split the network across devices (rtlgen "
        "partition)"]
    naive = CompileOptions.create(target_fps=2e5).check()
    assert _design_warnings(report, naive)[0].startswith("--target-fps 200,000 is out of reach of the naive folding "
                                                         "(FINN's SetFolding; its most parallel gives 123,457 frames/s")


def test_partition_leaving_devices_empty_says_so(tmp_path, capsys):
    fixed = tmp_path / "place.json"
    fixed.write_text(json.dumps({f"MVAU_{i}": 0 for i in range(4)}))
    assert main(["partition", str(DIGITS), "-o", str(tmp_path / "out"), "--devices", "3", "--plan-only",
                 "--partition", str(fixed)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == ["rtlgen partition: warning: the plan uses 1 of the 3 devices (--devices 3): devices 1, 2 left "
                   "empty (--partition places 4 node(s), and spreading further does not lower the II, set by link "
                   "last device -> host); no kernel or cluster entry is written for them"]
    said = []
    api.partition(DIGITS, tmp_path / "api", devices=2, fixed={f"MVAU_{i}": 0 for i in range(4)}, plan_only=True,
                  warn=said.append)
    assert len(said) == 1 and said[0].startswith("the plan uses 1 of the 2 devices (--devices 2): device 1 left empty")


SBY_LOG = """SBY  2:40:40 [check] engine_0: ##   0:00:00  Checking assumptions in step 23..
SBY  2:40:41 [check] engine_0: ##   0:00:02  Checking assertions in step 23..
SBY  2:40:42 [check] engine_0.induction: ##   0:00:03  Trying induction in step 30..
SBY  2:40:42 [check] engine_0.induction: ##   0:00:03  Checking assertions in step 30..
SBY  2:40:42 [check] engine_0: ##   0:00:03  Checking assertions in step 24..
"""


def test_a_timed_out_run_says_the_depth_it_reached():
    assert _reached(SBY_LOG, 400) == "at step 24 of 400: the properties hold for the first 24 cycles only"
    assert _reached("", 400) == "before its first step of 400 (no depth reached)"


def test_prove_timeout_reports_the_depth_reached(digits_out_copy, tmp_path, capsys, monkeypatch):
    """A real SymbiYosys run cut short: the line names the step it got to, not only the depth asked."""
    import re

    import rtlgen.check.prove as prove
    monkeypatch.setattr(prove, "_cache_path", lambda key: tmp_path / "cache" / f"{key}.json")
    assert main(["prove", str(digits_out_copy), "--node", "MVAU_0", "--timeout", "6", "--depth", "400"]) == 1
    out = capsys.readouterr().out
    reached = re.search(r"MVAU_0  unknown: timed out after 6 s in the bmc check, at step (\d+) of 400: the "
                        r"properties hold for the first (\d+) cycles only", out)
    assert reached and 0 < int(reached[1]) == int(reached[2]) < 400, out


def test_no_design_in_the_budget_says_what_to_try(tmp_path, capsys):
    from tests.test_cli_errors import one_line
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "out"), *FAST, "--budget", "lut=10"])
    assert line.startswith("rtlgen compile: error: no design fits the budget (LUT 10) at any folding")
    assert line.endswith("; give a larger --budget, or split the network across devices (rtlgen partition)")
    line = one_line(capsys, ["compile", str(DIGITS), "-o", str(tmp_path / "out"), *FAST, "--fit", "pynq-z2",
                             "--max-utilization", "0.01", "--target-fps", "1e7"])
    assert line.endswith("; lower --target-fps, give a larger --max-utilization, or split the network across "
                         "devices (rtlgen partition)"), line


@pytest.mark.parametrize("flag, value, message", [
    ("--devices", "0", "--devices 0: must be a whole number of devices, at least 1"),
    ("--link-gbps", "-1", "--link-gbps -1.0: must be a positive number of Gbit/s (1 for Gigabit Ethernet)"),
    ("--link-gbps", "nan", "--link-gbps nan: must be a positive number of Gbit/s (1 for Gigabit Ethernet)"),
    ("--max-packet-bytes", "4", "--max-packet-bytes 4: must be a whole number of bytes, at least one 64-bit flit (8); "
                                "1440 is the Ethernet MTU's, 8992 with jumbo frames"),
])
def test_partition_options_are_named_by_their_flags(tmp_path, capsys, flag, value, message):
    from tests.test_cli_errors import one_line
    argv = ["partition", str(DIGITS), "-o", str(tmp_path / "out"), "--devices", "2", flag, value]
    assert one_line(capsys, argv) == f"rtlgen partition: error: {message}"
    assert not (tmp_path / "out").exists()
    with pytest.raises(CompileError, match=f"^{flag} "):
        api.partition(DIGITS, tmp_path / "api", **{"devices": 2, flag[2:].replace("-", "_"): {
            "--devices": 0, "--link-gbps": -1.0, "--max-packet-bytes": 4}.get(flag, float(value))})


def test_layer_table_keeps_numbers_whole_at_any_width(digits_out):
    """The per-layer table at every console width from 20 to 260 columns: every number printed whole (the
    text columns wrap, or the rows stack when even the numbers do not fit), never an ellipsis."""
    import io

    from rich.console import Console

    from rtlgen.report.summary import _rows, layer_table
    report = json.loads((digits_out / "report.json").read_text())
    for k, layer in enumerate(report["layers"]):          # numbers as wide as a big design's
        layer["resources"]["LUT"], layer["resources"]["FF"] = 5_512_345 + k, 55_123_456 + k
    report["totals"]["LUT"] = 123_456_789
    header, rows, ends = _rows(report)
    numbers = {cell.removeprefix("II ") for cells, _ in rows + ends for cell in cells[3:] if cell}
    for width in range(20, 261, 3):
        text = io.StringIO()
        Console(file=text, width=width, no_color=True, highlight=False).print(layer_table(report, width))
        printed = text.getvalue()
        assert "…" not in printed, width
        assert all(n in printed for n in numbers), (width, [n for n in numbers if n not in printed])
