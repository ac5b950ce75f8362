"""The Fmax estimate (issue 17 item 7): Yosys ``sta`` paths parsed and the delay model of
:mod:`boards.timing` applied, per module of a hierarchical synthesis and for the flattened design."""

import pytest

from boards.timing import NET_NS, SETUP_NS, parse_sta
from boards.yosys import synthesize

# what Yosys 0.70 `sta` printed for the decimal MLP in the standalone shell (trimmed)
STA = """
Latest arrival time in 'rtlgen_standalone' is 3982:
    3982 (<unknown>)
           $flatten\\selftest.\\accelerator.\\MVAU_1.$abc$188882$aiger$i319
    3982 $flatten\\selftest.\\accelerator.\\MVAU_1.$le$top.v:7987$8569.carry4 (CARRY4.S->O)
           $flatten\\selftest.\\accelerator.\\MVAU_1.$abc$188882$aiger$o6
    3364 $flatten\\selftest.\\accelerator.\\MVAU_1.$abc$188882$lut$aiger$o6 (LUT6.I3->O)
           $flatten\\selftest.\\accelerator.\\MVAU_1.$techmap780933.A [3]
    2957 $flatten\\selftest.\\accelerator.\\MVAU_1.$abc$188882$lut$aiger188881$576 (LUT5.I2->O)
           $flatten\\selftest.\\accelerator.\\MVAU_1.$techmap780932.A [2]
    2550 selftest.accelerator.MVAU_1.thr_s7_pe0.0.0 (RAMB18E1.CLKARDCLK->DOADO)
           \\por_clk
      96 bufg (BUFG.I->O)
           \\clk_buf.buf.i
       0 clk_buf.buf.buf0 (IBUF.I->O)
       0   \\clk125_0__io (<primary input>)
Warning: Critical-path does not terminate in a recognised endpoint.
Latest arrival time in 'finn_design_wrapper.StreamingFIFO_0' is 1473:
    1473 (<unknown>)
           $abc$247202$aiger$o202
    1473 $auto$maccmap.cc:240:synth$32321.slice[1].carry4 (CARRY4.CI->O)
           $abc$247202$aiger$i85
    1139 $auto$maccmap.cc:240:synth$32321.slice[0].carry4 (CARRY4.S->CO)
           $abc$247202$aiger$o182
     631 $auto$abc_ops_reintegrate.cc:694:reintegrate$247211 (LUT6.I1->O)
       0   \\i__valid (<primary input>)
"""


def test_parse_and_model():
    paths = parse_sta(STA)
    top = paths["rtlgen_standalone"]
    assert top.through() == "RAMB18E1 -> LUT5 -> LUT6 -> CARRY4"
    assert top.levels == 3 and top.nets == 4            # RAM -> LUT5 -> LUT6 -> CARRY4 -> endpoint
    assert top.cell_ns == pytest.approx(3.886)          # the BUFG's 96 ps of clock insertion removed
    assert top.path_ns == pytest.approx(3.886 + 4 * NET_NS + SETUP_NS)
    assert top.fmax_mhz == pytest.approx(1000 / top.path_ns)
    fifo = paths["finn_design_wrapper.StreamingFIFO_0"]
    assert fifo.levels == 3 and fifo.nets == 3          # from an input port; the CO -> CI net is free
    assert fifo.cell_ns == pytest.approx(1.473)


MULTIPLIER = """
module top(input clk, input [7:0] a, input [7:0] b, output [15:0] p);
  \\top.mul mul (.clk(clk), .a(a), .b(b), .p(p));
endmodule
module \\top.mul (input clk, input [7:0] a, input [7:0] b, output reg [15:0] p);
  reg [7:0] ra, rb;
  always @(posedge clk) begin ra <= a; rb <= b; p <= ra * rb + p; end
endmodule
"""


@pytest.mark.synth
def test_hierarchical_synthesis_reports_module_and_design_paths(tmp_path):
    report = synthesize(MULTIPLIER, top="top", hierarchy=True, sta=True, workdir=tmp_path)
    assert set(report.paths) == {"top", "mul"}
    assert report.paths["mul"].cell_ns > 0 and report.paths["top"].cell_ns >= report.paths["mul"].cell_ns - 1e-9
    assert report.critical_path_ns is not None
