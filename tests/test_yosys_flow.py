"""Yosys xc7 flow: a tiny design goes through synth_xilinx and the stat/sta output is parsed."""

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from boards.yosys import check_fits, synthesize


class CountMul(wiring.Component):
    """An 8-bit enabled counter next to a registered 8x8 multiply."""
    en: In(1)
    count: Out(8)
    a: In(8)
    b: In(8)
    p: Out(16)

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += self.count.eq(self.count + 1)
        m.d.sync += self.p.eq(self.a * self.b)
        return m


@pytest.mark.synth
def test_synthesize_counter_and_multiply(count_mul_synthesis):
    r, _, workdir = count_mul_synthesis        # the run test_progress reads the steps of
    # The counter's 8 bits stay in fabric FFs (DSP registers may absorb the multiply's, so >=).
    assert r.ff >= 8
    assert r.dsp >= 1 or r.lut > 0
    assert r.lut == sum(n for t, n in r.cells.items() if t.startswith("LUT"))
    assert r.bram36 == r.bram18 == 0
    assert not any(t.startswith("$") for t in r.cells)     # $scopeinfo filtered out
    assert r.critical_path_ns is not None and r.critical_path_ns > 0
    assert r.seconds > 0 and set(r.as_row()) >= {"top", "lut", "ff", "dsp", "critical_path_ns"}
    assert check_fits(r) == []
    assert (workdir / "yosys.log").exists()


@pytest.mark.synth
def test_native_yosys_reports_like_the_webassembly_one(tmp_path, monkeypatch, count_mul_synthesis):
    pytest.importorskip("pyosys", reason="the native Yosys is optional: pip install pyosys==0.70")
    wasm, _, _ = count_mul_synthesis            # the default Yosys's run, as test_synthesize_counter_and_multiply
    monkeypatch.setenv("RTLGEN_YOSYS", "native")
    native = synthesize(CountMul(), sta=True, workdir=tmp_path / "native")
    assert native.cells == wasm.cells and native.critical_path_ns == wasm.critical_path_ns
    with pytest.raises(Exception, match="syntax error"):
        synthesize("module top(input a, output b); assign b = a & ; endmodule", workdir=tmp_path / "bad")
