"""Progress of long steps (issue 17 item 2): the compiled simulation reports output words against its
total, Yosys reports the step it is in; the CLI shows bars on a terminal and lines in a log or pipe."""

import re
import time
from contextlib import contextmanager

import numpy as np
import pytest

from boards.yosys import _STEP
from rtlgen import api
from sim import progress


class Recorder:
    """A reporter keeping every task's description, total and updates."""

    def __init__(self):
        self.tasks = []

    @contextmanager
    def __call__(self, description, total):
        task = {"description": description, "total": total, "done": [], "steps": []}
        self.tasks.append(task)

        def update(completed=None, description=None):
            if completed is not None:
                task["done"].append(completed)
            if description is not None:
                task["steps"].append(description)
        yield update


@pytest.mark.sim
def test_compiled_simulation_reports_output_words(digits_out):
    design = api.open_design(digits_out)
    frames = 1200                   # > 2 x 2^18 cycles: the bench reports every 2^18 cycles
    x = np.random.default_rng(0).integers(0, 17, (frames, 1, 8, 8)).astype(np.float32)
    recorder = Recorder()
    with progress.reporting(recorder):
        run = design.simulate(x)
    assert run.frames == frames
    words = frames * design.io.output.words_per_frame
    sim, = [t for t in recorder.tasks if t["description"] == "finn_design_wrapper: simulating"]
    assert sim["total"] == words
    assert len(sim["done"]) >= 2 and sim["done"] == sorted(sim["done"]) and 0 < sim["done"][-1] < words
    assert progress._reporter is None                  # restored


def test_without_a_reporter_a_task_costs_nothing():
    with progress.task("nothing listens", total=3) as update:
        update(1)
        update(description="still nothing")
    assert list(progress.over([1, 2, 3], "items")) == [1, 2, 3]


@pytest.mark.synth
def test_yosys_reports_its_steps(count_mul_synthesis):
    _, tasks, workdir = count_mul_synthesis      # test_yosys_flow's run of the same design, reported
    assert tasks == ["Yosys synthesis of top"]
    steps = [s.decode() for s in _STEP.findall((workdir / "yosys.log").read_bytes())]
    assert "SYNTH_XILINX pass" in steps and "ABC9 pass" in steps, steps[:20]


def test_cli_writes_lines_off_a_terminal(capsys):
    """In a log or a pipe: a line when a step starts and when it ends, on stdout; none with --quiet/--json."""
    from rtlgen.cli import _progress_bars
    with _progress_bars():
        with progress.task("converting layers to Verilog", total=3) as update:
            update(2)
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == "converting layers to Verilog ..."
    assert out.splitlines()[1].startswith("converting layers to Verilog: done in ") and err == ""
    with _progress_bars(lines=False):
        assert progress._reporter is None


def test_text_reporter_speaks_while_a_step_runs():
    lines = []
    with progress.reporting(progress.text_reporter(lines.append, every=0.05)):
        with progress.task("simulating", total=100) as update:
            update(40)
            time.sleep(0.18)
    assert lines[0] == "simulating ..." and lines[-1].startswith("simulating: done in ")
    running = lines[1:-1]
    assert len(running) >= 2 and all(l.startswith("simulating (40 of 100): running for ") for l in running)


# ---------------------------------------------------------------------------------------------- in a pipe

REPO = __import__("pathlib").Path(__file__).parent.parent
DIGITS = REPO / "tests" / "models" / "digits_tfc_w1a1i1_clean.onnx"


def piped(argv, tmp_path, every=1.0):
    """Run `rtlgen ARGV` with stdout a pipe; (its lines, the time each arrived, exit status)."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "RTLGEN_PROGRESS_SECONDS": str(every)}
    run = subprocess.Popen([sys.executable, "-m", "rtlgen", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=env, cwd=REPO)
    lines, stamps = [], []
    for line in run.stdout:
        stamps.append(time.monotonic())
        lines.append(line.rstrip("\n"))
    err = run.stderr.read()
    return lines, stamps, run.wait(), err


def longest_gap(stamps):
    return max(b - a for a, b in zip(stamps, stamps[1:]))


def test_piped_compile_is_never_quiet_and_its_table_whole(tmp_path):
    """Issue 45: a line at least every RTLGEN_PROGRESS_SECONDS (here 0.25 s; 10 by default) through load, the
    folding optimizer (best II so far, candidates tried), the Verilog and the writing; numbers never cut.
    (At 1 s the optimizer, 1.2 s quiet since issue 42's parallel search, could end before its first line.)"""
    lines, stamps, status, err = piped(["compile", str(DIGITS), "-o", str(tmp_path / "out"), "--budget", "lut=3000"],
                                       tmp_path, every=0.25)
    assert status == 0, err
    assert longest_gap(stamps) < 2.5, list(zip(stamps, lines))
    said = r"folding optimizer: (costing [\d,]+ candidate foldings|(best II [\d,]+ so far|none fits yet), [\d,]+ candidate IIs tried )"
    assert any(re.match(said, l) for l in lines), lines
    assert not any("…" in l for l in lines)
    report = __import__("json").loads((tmp_path / "out" / "report.json").read_text())
    total = next(l for l in lines if l.strip().startswith("total"))
    assert f"{report['totals']['LUT']:,}" in total and f"{report['totals']['FF']:,}" in total


@pytest.mark.sim
def test_piped_shell_simulation_is_never_quiet(digits_out, tmp_path):
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(0).integers(0, 17, (4, 1, 8, 8)).astype(np.float32))
    lines, stamps, status, err = piped(["sim", str(digits_out), "--input", str(x), "--shell", "zynq"], tmp_path)
    assert status == 0, err
    assert longest_gap(stamps) < 2.5, list(zip(stamps, lines))
    assert lines[0] == "zynq shell: building the simulation ..." and lines[-2].startswith("simulated 4 frame(s)")


def test_one_heartbeat_for_nested_steps():
    """A step inside a task: the innermost one speaks, once per interval, not each of them."""
    lines = []
    with progress.reporting(progress.text_reporter(lines.append, every=0.05)):
        with progress.task("outer", total=None):
            with progress.step("inner") as update:
                update(description="inner: best II 7 so far")
                time.sleep(0.18)
    running = [l for l in lines if "running for" in l]
    assert 2 <= len(running) <= 4 and all(l.startswith("inner: best II 7 so far: running for ") for l in running)
    assert lines[0] == "outer ..." and lines[-1].startswith("outer: done in ")


def test_progress_interval_must_be_a_positive_number(tmp_path, capsys, monkeypatch):
    from rtlgen.cli import main
    monkeypatch.setenv("RTLGEN_PROGRESS_SECONDS", "0")
    assert main(["compile", str(DIGITS), "-o", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip() == ("rtlgen compile: error: RTLGEN_PROGRESS_SECONDS=0: must be a positive "
                                               "number of seconds (default 10)")


def test_shell_simulation_passes_on_the_frames_the_bench_reports(tmp_path):
    """The bench writes `batch frames` to its progress file; the batch of many (index 1) moves the count."""
    from rtlgen.check.shell_sim import _frames_done
    seen = []
    path = tmp_path / "progress"
    with _frames_done(path, seen.append):
        path.write_text("0 1\n")            # the single frame's batch: not the count of the many
        time.sleep(0.7)
        path.write_text("1 37\n")
        time.sleep(0.7)
    assert seen and set(seen) == {37}


def test_a_line_written_beside_the_reporter_restarts_its_interval():
    """A command's own lines (prove's outcomes, the passes) count: a progress line only after a silence."""
    lines = []
    with progress.reporting(progress.text_reporter(lines.append, every=0.2)):
        with progress.step("proving"):
            for _ in range(6):                  # a line every 0.1 s: never 0.2 s of silence
                time.sleep(0.1)
                progress.line_written()
            time.sleep(0.35)                    # then silence: the step speaks
    assert len(lines) == 1 and lines[0].startswith("proving: running for "), lines
