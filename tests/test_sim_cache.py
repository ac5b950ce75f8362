"""The simulator-build cache stays under its size limit, least recently used first, and a cached
compiled harness keeps only its executable."""

import os
import shutil
import time

import pytest

from sim import runner
from sim.harness import FULL_RATE, Backpressure, simulate_streams


def _entry(root, kind, name, size, age_seconds):
    entry = root / kind / name
    entry.mkdir(parents=True)
    (entry / "blob").write_bytes(b"x" * size)
    used = time.time() - age_seconds
    os.utime(entry, (used, used))
    return entry


def test_least_recently_used_builds_go_first(tmp_path, monkeypatch):
    monkeypatch.setenv("RTLGEN_CACHE_DIR", str(tmp_path))
    oldest = _entry(tmp_path, "sim", "a-icarus-1", 4000, 3 * 3600)
    older = _entry(tmp_path, "compiled", "b-2", 4000, 2 * 3600)
    recent = _entry(tmp_path, "sim", "c-verilator-3", 4000, 3600)
    runtime = _entry(tmp_path, "compiled", "runtime-4", 4000, 4 * 3600)
    freed = runner.trim_cache(limit_bytes=5000)
    assert freed == 8000
    assert not oldest.exists() and not older.exists()
    assert recent.exists() and runtime.exists()     # Verilator's shared runtime is never evicted


def test_a_build_in_use_is_never_evicted(tmp_path, monkeypatch):
    monkeypatch.setenv("RTLGEN_CACHE_DIR", str(tmp_path))
    old = _entry(tmp_path, "sim", "a-icarus-1", 4000, 3600)
    just_used = _entry(tmp_path, "sim", "b-icarus-2", 4000, 10)
    assert runner.trim_cache(limit_bytes=1) == 4000
    assert not old.exists() and just_used.exists()


@pytest.mark.parametrize("limit, expected", [("0", None), ("1.5", int(1.5 * 2**30))])
def test_limit_comes_from_the_environment(monkeypatch, limit, expected):
    monkeypatch.setenv("RTLGEN_CACHE_MAX_GB", limit)
    assert runner.cache_limit_bytes() == expected


@pytest.mark.parametrize("limit", ["lots", "-1", "nan", "inf"])
def test_a_bad_limit_is_named_before_any_work(tmp_path, capsys, monkeypatch, limit):
    from rtlgen.cli import main
    monkeypatch.setenv("RTLGEN_CACHE_MAX_GB", limit)
    assert main(["compile", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"rtlgen compile: error: RTLGEN_CACHE_MAX_GB must be a number of gigabytes >= 0 (0: no limit), "
                   f"not {limit!r}"]
    assert not (tmp_path / "out").exists()


def test_a_cached_harness_keeps_only_its_executable_and_still_runs():
    # In the suite's cache, where Verilator's runtime objects are built once (~5 s of a cold build: issue 42
    # item 6), under a top of its own: a fresh build of this run's design.
    top = f"cache_probe_{os.urandom(6).hex()}"
    # The compiled harness drives a stitched design's AXI-Stream ports (FINN's names).
    verilog = (f"module {top}(ap_clk, ap_rst_n, s_axis_0_tdata, s_axis_0_tvalid, s_axis_0_tready,\n"
               "  m_axis_0_tdata, m_axis_0_tvalid, m_axis_0_tready);\n"
               "  input ap_clk;\n  input ap_rst_n;\n  input [7:0] s_axis_0_tdata;\n  input s_axis_0_tvalid;\n"
               "  output s_axis_0_tready;\n  output [7:0] m_axis_0_tdata;\n  output m_axis_0_tvalid;\n"
               "  input m_axis_0_tready;\n  assign m_axis_0_tdata = s_axis_0_tdata + 8'd1;\n"
               "  assign m_axis_0_tvalid = s_axis_0_tvalid;\n  assign s_axis_0_tready = m_axis_0_tready;\n"
               "endmodule\n")
    words = list(range(200))
    # a fresh build, then cache hits on the trimmed build, at full rate and with random backpressure
    for backpressure in (FULL_RATE, FULL_RATE, Backpressure(seed=4)):
        result = simulate_streams(verilog, inputs={"s_axis_0": words}, outputs={"m_axis_0": len(words)},
                                  port_style="axis", clock="ap_clk", reset="ap_rst_n", reset_active_high=False,
                                  compiled=True, backpressure=backpressure, toplevel=top)
        assert result.words("m_axis_0") == [(w + 1) % 256 for w in words]
    builds = [d for d in (runner.cache_dir() / "compiled").iterdir() if d.name.startswith(f"{top}-")]
    assert len(builds) == 1
    assert [p.name for p in (builds[0] / "obj").iterdir()] == ["harness"]
    shutil.rmtree(builds[0])
