"""Progress of long steps (issue 17 item 2): the compiled simulation reports output words against its
total, Yosys reports the step it is in; the CLI shows bars on a terminal and lines in a log or pipe."""

import time
from contextlib import contextmanager

import numpy as np
import pytest

from boards.yosys import _STEP, synthesize
from rtlgen import api
from sim import progress
from tests.test_yosys_flow import CountMul


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
def test_yosys_reports_its_steps(tmp_path):
    recorder = Recorder()
    with progress.reporting(recorder):
        synthesize(CountMul(), workdir=tmp_path)
    assert [t["description"] for t in recorder.tasks] == ["Yosys synthesis of top"]
    steps = [s.decode() for s in _STEP.findall((tmp_path / "yosys.log").read_bytes())]
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
