"""Issue 42 item 1: Amaranth's built-in Yosys run inside the compiling process (rtlgen.backend.yosys_inprocess)
writes the same Verilog, byte for byte, as the separate process Amaranth starts for it, fails as it does,
and leaves a Yosys that Amaranth finds on the PATH alone."""

import os

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth._toolchain.yosys import YosysError, _BuiltinYosys

from layers.fifo import FIFOSpec, StreamingFIFO
from layers.mvau import MVAU, MVAUSpec
from rtlgen.backend import yosys_inprocess
from sim.runner import to_verilog


def _designs():
    rng = np.random.default_rng(42)
    w = rng.integers(-2, 2, size=(8, 4))
    t = np.sort(rng.integers(-6, 7, size=(4, 3)), axis=1)
    xnor = rng.choice([-1, 1], size=(12, 4))
    return {
        "fifo": lambda: StreamingFIFO(FIFOSpec(8, 32)),
        "mvau_int2_thresholds": lambda: MVAU(MVAUSpec(8, 4, 2, 2, "INT2", "INT2", w, thresholds=t, output_dtype="UINT2",
                                                      mem_mode="internal_embedded")),
        "mvau_xnor_heap": lambda: MVAU(MVAUSpec(12, 4, 6, 2, "BIPOLAR", "BIPOLAR", xnor, mem_mode="internal_embedded",
                                                popcount="heap")),
    }


@pytest.fixture(autouse=True)
def amaranths_own_choice(monkeypatch):
    """Amaranth's own find_yosys under these tests, not the test process's Yosys server (tests/yosys_server.py)."""
    from tests import yosys_server
    monkeypatch.setattr(verilog, "find_yosys", yosys_server.AMARANTH_FIND_YOSYS)


@pytest.fixture
def in_process():
    yosys_inprocess.uninstall()
    assert yosys_inprocess.install()
    yield
    yosys_inprocess.uninstall()


@pytest.mark.parametrize("name", list(_designs()))
def test_the_same_verilog_as_amaranths_own_process(name, in_process):
    make = _designs()[name]
    assert verilog.find_yosys(lambda v: True) is yosys_inprocess.InProcessYosys
    ours = [to_verilog(make(), "top") for _ in range(2)]       # the second run starts afresh too
    yosys_inprocess.uninstall()
    assert verilog.find_yosys(lambda v: True) is _BuiltinYosys
    theirs = to_verilog(make(), "top")
    assert ours[0] == ours[1] == theirs
    assert "$auto$" in theirs and "module top" in theirs


def test_a_yosys_error_is_raised_as_amaranth_raises_it(in_process):
    script = "read_rtlil <<rtlil\nmodule \\broken\n  wire width 2 \\a\nrtlil\n"
    with pytest.raises(YosysError) as ours:
        yosys_inprocess.InProcessYosys.run(["-q", "-"], script)
    with pytest.raises(YosysError) as theirs:
        _BuiltinYosys.run(["-q", "-"], script)
    assert str(ours.value) == str(theirs.value) and "ERROR" in str(ours.value)


def test_a_yosys_on_the_path_keeps_its_place(in_process, monkeypatch):
    class SystemYosys:
        pass
    monkeypatch.setattr(yosys_inprocess, "_original_find", lambda requirement: SystemYosys)
    assert verilog.find_yosys(lambda v: True) is SystemYosys


@pytest.mark.parametrize("setting", ["version", "env"])
def test_other_versions_and_the_users_no_are_left_alone(monkeypatch, setting):
    yosys_inprocess.uninstall()
    if setting == "version":
        monkeypatch.setitem(yosys_inprocess._CHECKED_AGAINST, "amaranth", "0.0.1")
    else:
        monkeypatch.setenv(yosys_inprocess.ENV, "0")
    try:
        assert yosys_inprocess.install() is False
        assert verilog.find_yosys is not yosys_inprocess._find_yosys
    finally:
        yosys_inprocess.uninstall()


def _fifo_verilog(_):
    from amaranth.back import verilog as amaranth_verilog
    return amaranth_verilog.find_yosys(lambda v: True).__name__, to_verilog(StreamingFIFO(FIFOSpec(8, 32)), "top")


def test_a_process_forked_after_loading_runs_amaranths_own(in_process):
    """A process forked after its parent ran the module in process would hang in its first run (wasmtime
    across a fork): it runs Amaranth's separate process instead, and writes the same text."""
    import multiprocessing
    name, here = _fifo_verilog(None)
    assert name == "InProcessYosys"
    with multiprocessing.get_context("fork").Pool(1) as pool:
        there = pool.map_async(_fifo_verilog, [0, 1]).get(timeout=120)
    assert there == [("_BuiltinYosys", here)] * 2


_POOL_SCRIPT = """
import json, os, sys
from rtlgen.backend import layer_verilog, yosys_inprocess
from rtlgen.ir.graph import HWNode
original = yosys_inprocess.run_yosys
def counted(args, stdin):
    with open(os.environ["RAN_IN"], "a") as f:     # the workers' too
        f.write(f"{os.getpid()}\\n")
    return original(args, stdin)
yosys_inprocess.run_yosys = counted
layer_verilog._PARALLEL_FROM = int(sys.argv[1])
nodes = [HWNode(f"f{d}", "StreamingFIFO", {"width": 8}, {"depth": d}) for d in (4, 8, 16)]
texts = [m.text for m in layer_verilog.layer_modules(nodes, [n.spec() for n in nodes], prefix="top")]
ran_in = open(os.environ["RAN_IN"]).read().split() if os.path.exists(os.environ["RAN_IN"]) else []
print(json.dumps({"texts": texts, "loaded_here": bool(yosys_inprocess._loaded), "ran_in": ran_in, "here": os.getpid()}))
"""


def test_the_layer_pool_workers_run_it_and_the_compiling_process_does_not(tmp_path):
    """layer_verilog converts in its pool's workers with the module in process and leaves the compiling
    process without it (free to fork its next pool); the texts are those converted one by one in the
    compiling process, by Amaranth's own Yosys process. A fresh Python each: this test process has
    loaded the module already (its forks would fall back)."""
    import json
    import subprocess
    import sys
    runs = {}
    for parallel_from in (3, 100):          # the pool; one by one in the compiling process
        env = {**os.environ, "RTLGEN_CACHE_DIR": str(tmp_path / str(parallel_from)),
               "RAN_IN": str(tmp_path / f"ran_in_{parallel_from}")}
        out = subprocess.run([sys.executable, "-c", _POOL_SCRIPT, str(parallel_from)], capture_output=True,
                             text=True, env=env, check=True, timeout=300).stdout
        runs[parallel_from] = json.loads(out.strip().splitlines()[-1])
    assert runs[3]["texts"] == runs[100]["texts"] and len(runs[3]["texts"]) == 3
    pool, serial = runs[3], runs[100]
    assert not pool["loaded_here"] and not serial["loaded_here"] and serial["ran_in"] == []
    assert len(pool["ran_in"]) == 3 and str(pool["here"]) not in pool["ran_in"]     # 3 layers, in the workers


def test_the_test_processes_yosys_server_writes_the_same_verilog(monkeypatch):
    """tests/yosys_server.py (the suite's conversions, one Yosys process per test process) writes what
    Amaranth's own process writes, and a Yosys error comes back as Amaranth raises it."""
    from tests import yosys_server
    theirs = to_verilog(_designs()["mvau_int2_thresholds"](), "top")
    monkeypatch.setattr(verilog, "find_yosys", lambda requirement: yosys_server.ServerYosys)
    assert to_verilog(_designs()["mvau_int2_thresholds"](), "top") == theirs
    script = "read_rtlil <<rtlil\nmodule \\broken\n  wire width 2 \\a\nrtlil\n"
    with pytest.raises(YosysError, match="ERROR"):
        yosys_server.ServerYosys.run(["-q", "-"], script)
