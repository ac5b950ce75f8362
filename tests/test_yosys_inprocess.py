"""Issue 42 item 1: Amaranth's built-in Yosys run inside the compiling process (rtlgen.backend.yosys_inprocess)
writes the same Verilog, byte for byte, as the separate process Amaranth starts for it, fails as it does,
and leaves a Yosys that Amaranth finds on the PATH alone."""

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


def test_other_versions_are_left_alone(monkeypatch):
    yosys_inprocess.uninstall()
    monkeypatch.setitem(yosys_inprocess._CHECKED_AGAINST, "amaranth", "0.0.1")
    try:
        assert yosys_inprocess.install() is False
        assert verilog.find_yosys is not yosys_inprocess._find_yosys
    finally:
        yosys_inprocess.uninstall()
