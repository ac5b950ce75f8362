"""The analytic model of the zynq shell's data movement (:func:`boards.zynq_timing.shell_timing`) against the shell
itself on the cocotb bench (AxiRam as the DDR, with a fixed read latency and write-response latency): cycles
per frame of a long batch and the cycles of a one-frame batch (the CYCLES register), around a stand-in
accelerator that takes a word a cycle and answers each frame with numbered words (so the bench also checks
that the gearboxes at full rate lose, duplicate or reorder no word, under HP0 stalls too)."""

import pytest

from boards.driver import unpack_bytes_to_words
from boards.zynq import ZynqShell
from boards.zynq_timing import shell_timing
from sim.runner import build, run_cocotb, to_verilog

DDR = 1 << 22
FRAMES = 64


def stand_in(in_width, out_width, in_words, out_words):
    """An accelerator that takes a word every cycle and, after each frame's last input word, sends
    ``out_words`` words numbered from 0 across the batch: its latency is ``in_words + out_words`` cycles."""
    iw, ow = -(-in_width // 8) * 8, -(-out_width // 8) * 8
    return f"""
module finn_design_wrapper(input ap_clk, input ap_rst_n, input [{iw - 1}:0] s_axis_0_tdata, input s_axis_0_tvalid,
  output s_axis_0_tready, output [{ow - 1}:0] m_axis_0_tdata, output m_axis_0_tvalid, input m_axis_0_tready);
  reg [31:0] idx, credits, seq;
  assign s_axis_0_tready = 1;
  assign m_axis_0_tvalid = credits != 0;
  assign m_axis_0_tdata = seq;
  always @(posedge ap_clk)
    if (!ap_rst_n) begin idx <= 0; credits <= 0; seq <= 0; end
    else begin
      if (s_axis_0_tvalid) idx <= (idx == {in_words - 1}) ? 0 : idx + 1;
      credits <= credits + ((s_axis_0_tvalid && idx == {in_words - 1}) ? {out_words} : 0)
                 - (m_axis_0_tvalid && m_axis_0_tready);
      if (m_axis_0_tvalid && m_axis_0_tready) seq <= seq + 1;
    end
endmodule
"""


def run(in_width, out_width, in_words, out_words, *, read_latency, write_latency, stalls=False):
    shell = ZynqShell(in_width=in_width, out_width=out_width, in_words_per_frame=in_words,
                      out_words_per_frame=out_words, ddr=(0, DDR))
    built = build(to_verilog(shell, "top") + stand_in(in_width, out_width, in_words, out_words), toplevel="top")
    batches = [{"src": 0x1000, "dst": 0x100000, "frames": n, "input": "5a" * (n * shell.in_frame_bytes),
                "out_bytes": n * shell.out_frame_bytes, "reset_after": True} for n in (1, FRAMES)]
    results = run_cocotb(built, "boards.tb_zynq", {"ddr_size": DDR, "stalls": stalls, "read_latency": read_latency,
                                                "write_latency": write_latency, "batches": batches})["batches"]
    for n, result in zip((1, FRAMES), results):
        assert result["status"] & 0b111 == 0b010 and result["done"] == n
        words = unpack_bytes_to_words(bytes.fromhex(result["output"]), -(-out_width // 8) * 8, n * out_words)
        assert words == [k % (1 << min(32, out_width)) for k in range(n * out_words)]
    return [r["cycles"] for r in results]


# (in_width, out_width, in_words, out_words, read_latency, write_latency); three cases slow for the suite's
# time (issue 42): the TFC-like case and a latency-bound one stay, the gearbox test below runs 104 bits both ways
CASES = [
    pytest.param(392, 40, 2, 2, 35, 35, id="wide-in-TFC-w1a1"),     # 7 beats a word in, 8 bytes a word out
    pytest.param(16, 32, 49, 10, 35, 35, id="narrow", marks=pytest.mark.slow),              # 4 words a beat in, 2 out: the words bind
    pytest.param(104, 104, 3, 3, 35, 35, id="wide-both", marks=pytest.mark.slow),           # 2 beats a word: the writes bind
    pytest.param(64, 8, 16, 1, 80, 35, id="read-latency-bound"),    # 80 cycles: more than 4 bursts in flight cover
    pytest.param(8, 64, 1, 16, 35, 80, id="write-latency-bound", marks=pytest.mark.slow),   # 80 cycles: more than 4 responses pending cover
]


@pytest.mark.sim
@pytest.mark.parametrize("in_width, out_width, in_words, out_words, read_latency, write_latency", CASES)
def test_model_matches_the_bench(in_width, out_width, in_words, out_words, read_latency, write_latency):
    one, batch = run(in_width, out_width, in_words, out_words, read_latency=read_latency,
                     write_latency=write_latency)
    model = shell_timing(in_width=in_width, out_width=out_width, in_words_per_frame=in_words,
                         out_words_per_frame=out_words, read_latency=read_latency, write_latency=write_latency)
    measured = (batch - one) / (FRAMES - 1)         # the one-frame batch's fill and drain cancel
    assert measured == pytest.approx(model.cycles_per_frame, rel=0.03)
    assert one == pytest.approx(model.latency(in_words + out_words), rel=0.05)


@pytest.mark.sim
@pytest.mark.parametrize("in_width, out_width, in_words, out_words", [(104, 104, 3, 3)])
def test_full_rate_gearboxes_under_stalls(in_width, out_width, in_words, out_words):
    """The same batches with random pauses on every HP0 channel: every word, in order (checked in run)."""
    run(in_width, out_width, in_words, out_words, read_latency=35, write_latency=35, stalls=True)


def test_model_at_the_clock():
    """The DDR latency is an assumption in nanoseconds: more cycles at a faster clock; the bursts in flight
    hide it up to ~46 cycles, then reads slow down."""
    args = dict(in_width=64, out_width=8, in_words_per_frame=16, out_words_per_frame=1)
    at100, at200 = shell_timing(**args, clock_mhz=100), shell_timing(**args, clock_mhz=200)
    assert (at100.read_latency, at200.read_latency) == (35, 70)
    assert at100.cycles_per_frame == 16                             # a beat a cycle
    assert at200.cycles_per_frame == pytest.approx((70 + 18) / 4)   # 4 bursts per latency + loop
    assert shell_timing(**args, read_latency=0).cycles_per_frame == 16
