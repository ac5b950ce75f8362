"""Issue 43: the Fmax estimate covers the paths between registers. Yosys's ``sta`` took the flip-flops'
stale derived modules (no timing arcs: "Module 'FDRE' has no timing arcs"), so every path it reported
started at an input port; it picks its one path by cell delays, not by the model's nets
(:func:`boards.timing.charged_library`); and a part built alone (:mod:`boards.yosys_parts`) had no register
before its inputs or after its outputs (``synthesize(between_registers=True)``).

The expected delays are worked out here by hand from the specify blocks of Yosys 0.70's
``techlibs/xilinx/cells_sim.v`` and the model of :mod:`boards.timing` (0.5 ns a routed net, 0.3 ns setup)."""

import pytest

from boards.timing import CHARGE_MARK, charged_library, parse_sta
from boards.yosys import synthesize

FDRE_CLOCK_TO_Q = 0.303     # FDRE: (posedge C => (Q : D)) = 303
LUT2_I0 = 0.238             # LUT2: (I0 => O) = 238, (I1 => O) = 127
CARRY4_S1_CO3 = 0.528       # CARRY4: (S[1] => CO[3]) = 528, the slowest S -> CO[3] (S[0] 508, S[2] 378, S[3] 380)
CARRY4_CI_O1 = 0.334        # CARRY4: (CI => O[1]) = 334, the slowest CI -> O (O[0] 222, O[2] 239, O[3] 313)

# A layer as Amaranth writes one: its input registered, an 8-bit adder between two of its registers.
ADDER_LAYER = """(* generator = "Amaranth" *)
module adder(clk, x, y);
  input clk;
  input [7:0] x;
  output [7:0] y;
  reg [7:0] y;
  reg [7:0] r1, r2;
  always @(posedge clk) begin r1 <= x; r2 <= ~x; y <= r1 + r2; end
endmodule
"""


@pytest.mark.synth
def test_a_register_to_register_adder_inside_a_part_is_its_critical_path(tmp_path):
    """The adder's longest path: r1/r2 -> LUT2 (a bit's propagate, its slower pin I0) -> the first CARRY4
    from S[1] out of CO[3] -> the second from CI out of O[1] -> y; three routed nets (Q -> LUT2, LUT2 -> S,
    O -> y's D; CO -> CI is the carry chain's own wire). Before: the part reported only paths from its
    input port (x -> r1, no logic), or none."""
    r = synthesize(ADDER_LAYER, top="adder", hierarchy=True, sta=True, between_registers=True, workdir=tmp_path,
                   module_paths=False)
    path = r.paths["adder"]
    assert path.through() == "FDRE -> LUT2 -> CARRY4 -> CARRY4"
    cells = FDRE_CLOCK_TO_Q + LUT2_I0 + CARRY4_S1_CO3 + CARRY4_CI_O1
    assert path.cell_ns == pytest.approx(cells)                         # 1.403 ns
    assert path.nets == 3 and path.levels == 3
    assert path.path_ns == pytest.approx(cells + 3 * 0.5 + 0.3)         # 3.203 ns, ~312 MHz
    assert "no timing arcs" not in (tmp_path / "sta.txt").read_text()


# a cell library in the form of cells_sim.v (trimmed)
LIBRARY = """module LUT2(output O, input I0, I1);
  specify
    (I0 => O) = 238;
    (I1 => O) = 127;
  endspecify
endmodule
module CARRY4(output [3:0] CO, O, input CI, CYINIT, input [3:0] DI, S);
  specify
    (S[1]   => CO[3]) = 528;
    (CI     => O[1]) = 334;
  endspecify
endmodule
module MUXF7(output O, input I0, I1, S);
  specify
    (I0 => O) = 217;
    (S => O) = 296;
  endspecify
endmodule
module FDRE(output reg Q, input C, CE, D, R);
  specify
    $setup(D , posedge C &&& !IS_C_INVERTED && CE, /*-46*/ 0); // Negative times not currently supported
    if (!IS_C_INVERTED && R == IS_R_INVERTED && CE) (posedge C => (Q : D ^ IS_D_INVERTED)) = 303;
  endspecify
endmodule
module DSP48E1(input [47:0] PCIN, input [29:0] A, output [47:0] P);
  specify
    (A *> P) =      \\A.P.comb ();
    (PCIN *> P) =       1107;
  endspecify
endmodule
"""


def test_the_charged_library_adds_a_net_to_each_routed_input_and_setup_only():
    charged = charged_library(LIBRARY, net_ps=500)
    assert "(I0 => O) = (238) + 500;" in charged and "(I1 => O) = (127) + 500;" in charged
    assert "(S[1]   => CO[3]) = (528) + 500;" in charged
    assert "(CI     => O[1]) = 334;" in charged                 # the carry chain's own wire
    assert "(I0 => O) = 217;" in charged and "(S => O) = (296) + 500;" in charged   # F7 mux: I0 from its LUT
    assert "$setup(D , posedge C &&& !IS_C_INVERTED && CE, ( /*-46*/ 0) + 500);" in charged
    assert "(posedge C => (Q : D ^ IS_D_INVERTED)) = 303;" in charged   # clock-to-out: no net before it
    assert "(A *> P) =      (\\A.P.comb ()) + 500;" in charged and "(PCIN *> P) =       1107;" in charged


# what `sta` printed over the charged library for ADDER_LAYER between registers (trimmed)
CHARGED_STA = f"""{CHARGE_MARK} 500

Latest arrival time in 'adder_between_registers' is 3499:
    3499 $flatten\\framed.$auto$ff.cc:337:slice$1535 (FDRE.D)
           $flatten\\framed.$abc$21116$aiger$o33
    2999 $flatten\\framed.$auto$alumacc.cc:578:replace_alu$1105.slice[1].carry4 (CARRY4.CI->O)
           $flatten\\framed.$abc$21116$aiger$i58
    2665 $flatten\\framed.$auto$alumacc.cc:578:replace_alu$1105.slice[0].carry4 (CARRY4.S->CO)
           $flatten\\framed.$abc$21116$aiger$o6
    1637 $flatten\\framed.$abc$21116$lut$aiger$o6 (LUT2.I0->O)
           \\framed.r2 [1]
     899 $flatten\\framed.$auto$ff.cc:337:slice$1547 (FDRE.C->Q)
           $flatten\\framed.$abc$21116$aiger$o20
     596 $flatten\\framed.$auto$clkbufmap.cc:261:execute$21136 (BUFG.I->O)
           $flatten\\framed.$auto$clkbufmap.cc:262:execute$21137
       0 $flatten\\framed.$iopadmap$rtlgen_yosys_part.clk (IBUF.I->O)
       0   \\clk (<primary input>)
Latest arrival time in 'wire_through' is 899:
     899 (<primary output>)
           \\framed.y [7]
     899 $flatten\\framed.$iopadmap$y_7 (OBUF.I->O)
           $flatten\\framed.$abc$20702$aiger$o14
     899 $flatten\\framed.$auto$ff.cc:337:slice$1519 (FDRE.C->Q)
           $flatten\\framed.$abc$20702$aiger$o0
     596 $flatten\\framed.$auto$clkbufmap.cc:261:execute$20706 (BUFG.I->O)
"""


def test_charged_arrivals_are_read_back_as_cell_delays_and_nets():
    paths = parse_sta(CHARGED_STA)
    adder = paths["adder_between_registers"]
    assert adder.cell_ns == pytest.approx(FDRE_CLOCK_TO_Q + LUT2_I0 + CARRY4_S1_CO3 + CARRY4_CI_O1)
    assert adder.nets == 3 and adder.levels == 3
    # an I/O buffer (a part's port, a wire in the design) is neither a level nor a net of its own
    through = paths["wire_through"]
    assert through.through() == "FDRE" and through.levels == 0 and through.nets == 1
    assert through.cell_ns == pytest.approx(FDRE_CLOCK_TO_Q)
