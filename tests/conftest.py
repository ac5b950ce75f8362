import functools
import os
from pathlib import Path

import numpy as np
import pytest

from sim.runner import available_simulators, default_simulator, to_verilog


# Examples per hypothesis random-spec test: every example is a new design to build and simulate, so the
# default suite draws a few (fresh ones each run: over many runs the space is covered); export
# RTLGEN_RANDOM_EXAMPLES=8 (or more) for a thorough pass.
RANDOM_EXAMPLES = int(os.environ.get("RTLGEN_RANDOM_EXAMPLES", "2"))


def simulators_under_test(slow=()):
    """Every installed simulator (CI installs both); RTLGEN_SIM narrows it to one. Those in ``slow`` run in the
    slow suite only (a cold Verilator build of a small op costs 15-30 s of the default suite's time, and the
    op's RTL runs on the compiled Verilator bench inside whole networks by default anyway)."""
    names = [os.environ["RTLGEN_SIM"]] if os.environ.get("RTLGEN_SIM") else available_simulators()
    return [pytest.param(n, marks=pytest.mark.slow) if n in slow else n for n in names]


def sampled_grid(axes, *, stride, sample, legal=lambda case: True):
    """pytest params for the product of ``axes`` ({name: values}) that ``legal`` accepts.

    ``sample=True`` gives every ``stride``-th case (the default suite; a stride coprime to the axis
    sizes reaches every value of every axis), ``sample=False`` the rest (the slow suite).
    """
    import itertools

    cases = [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]
    cases = [case for case in cases if legal(case)]
    return [pytest.param(case, id="-".join(str(v) for v in case.values()))
            for k, case in enumerate(cases) if (k % stride == 0) == sample]


@functools.lru_cache(maxsize=None)
def verilog_once(component_class, spec):
    """Verilog of ``component_class(spec)``, converted once per spec: a test's full-rate and backpressure
    runs share it (for wide words the conversion costs more than the simulation)."""
    return to_verilog(component_class(spec), "top")


@functools.lru_cache(maxsize=None)
def lowered_once(path):
    """``(model, graph)``: the model at ``path`` loaded and lowered once per test process, for tests that read
    the lowered graph and do not change it (the INT8 generator's lowering costs ~10 s, and test_compiler,
    test_requant and test_shared_activation each read it; issue 42 item 6)."""
    from rtlgen.passes.load import load_model
    from rtlgen.passes.lower import lower

    model = load_model(Path(path))
    return model, lower(model)


@pytest.fixture(scope="session")
def count_mul_synthesis(tmp_path_factory):
    """tests.test_yosys_flow's CountMul synthesized once per test process by Yosys (with its timing analysis)
    while a progress reporter records the tasks: ``(result, task descriptions, workdir)``, for test_yosys_flow
    (what Yosys made) and test_progress (what it reported); one Yosys run, not two (issue 42 item 6)."""
    from contextlib import contextmanager

    from boards.yosys import synthesize
    from sim import progress
    from tests.test_yosys_flow import CountMul

    tasks = []

    @contextmanager
    def recorder(description, total):
        tasks.append(description)
        yield lambda completed=None, description=None: None

    workdir = tmp_path_factory.mktemp("count_mul")
    with progress.reporting(recorder):
        result = synthesize(CountMul(), sta=True, workdir=workdir)
    return result, tasks, workdir


@pytest.fixture(scope="session")
def digits_out(tmp_path_factory):
    """``rtlgen compile`` of the w1a1 digits MLP (default folding, FIFO sizing off): an OUT directory
    for tests of what reads one (emit, driver)."""
    from pathlib import Path

    from rtlgen.cli import main

    out = tmp_path_factory.mktemp("digits_out")
    model = Path(__file__).parent / "models" / "digits_tfc_w1a1i1_clean.onnx"
    assert main(["compile", str(model), "-o", str(out), "--fifo-sizing", "none"]) == 0
    return out


@pytest.fixture
def digits_out_copy(digits_out, tmp_path):
    """A copy of :func:`digits_out` that a test may change or damage."""
    import shutil
    copy = tmp_path / "out"
    shutil.copytree(digits_out, copy)
    return copy


@pytest.fixture
def simulator():
    """The simulator for grid tests: RTLGEN_SIM, else Icarus when installed (fast builds), else Verilator."""
    return default_simulator()


def pytest_configure(config):
    from tests import yosys_server
    yosys_server.install()          # one Yosys process per test process for Amaranth's conversions


def pytest_report_header(config):
    return f"rtlgen simulators: {', '.join(available_simulators())}; grid tests use {default_simulator()}"


# Simulation examples cost about a second each: generate, do not spend minutes shrinking a failure
# (the failing example is printed either way).
from hypothesis import Phase, settings  # noqa: E402

settings.register_profile("rtlgen", deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate),
                          print_blob=True)
settings.load_profile("rtlgen")


def rtl_at_the_ii_under_backpressure(model, x, out, options=None, seed=7):
    """Compile ``model`` into ``out``, simulate batch ``x`` on the compiled Verilator bench at full rate and
    again under random backpressure; assert the measured cycles per frame are within 2 % of the analytic
    II and the stalled run gives the same outputs. Returns the full-rate outputs (the caller compares them
    with its golden)."""
    import json

    from rtlgen.options import CompileOptions

    from rtlgen.backend.compile import compile_model
    from rtlgen.backend.emit import write_outputs
    from rtlgen.check.verify import simulate_model
    from sim.harness import Backpressure

    compiled = compile_model(model, options or CompileOptions())
    write_outputs(compiled, out)
    report = json.loads((Path(out) / "report.json").read_text())
    full = simulate_model(compiled.verilog, compiled.io, x, report)
    ii = report["analytic_cycles_per_frame"]
    assert abs(full.cycles_per_frame / ii - 1) <= 0.02, (full.cycles_per_frame, ii)
    stalled = simulate_model(compiled.verilog, compiled.io, x, report,
                             backpressure=Backpressure(seed=seed, valid_prob=0.6, ready_prob=0.5))
    np.testing.assert_array_equal(stalled.outputs, full.outputs)
    return full.outputs, compiled.io


def rtl_matches_qonnx(path, x, out, options=None, seed=7):
    """:func:`rtl_at_the_ii_under_backpressure` on the model at ``path``, then its outputs against qonnx's
    execute_onnx on that model (bit-exact, or equal up to classified float32 ties); returns the comparison."""
    from rtlgen.check.verify import verify_outputs

    outputs, io = rtl_at_the_ii_under_backpressure(path, x, out, options, seed)
    result = verify_outputs(path, x, outputs, io)
    assert result.passed, result.summary()
    return result


def golden_matches_qonnx(path, model, graph, x):
    """``graph``'s layer goldens (rtlgen.check.execute) on the batch ``x`` against qonnx's execute_onnx on
    the original model at ``path`` (equal, or equal up to float32 rounding where the model ends in float
    ops); returns the comparison."""
    from rtlgen.check.execute import run_golden
    from rtlgen.check.verify import verify_outputs
    from rtlgen.passes.to_hw import stream_io

    io = stream_io(model, graph)
    result = verify_outputs(path, x, io.output_from_codes(run_golden(graph, io.input_codes(x))), io)
    assert result.passed, result.summary()
    return result
