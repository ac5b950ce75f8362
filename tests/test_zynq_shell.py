"""The `zynq` shell without the PS7: cocotbext-axi AxiRam as DDR behind HP0 and AxiLiteMaster as the CPU
run batches of a compiled zoo TFC through the DMA, bit-exact against qonnx (also with HP-port stalls);
bad lengths and addresses end in an error status, not a hang. The buffer layout is the driver's."""

from pathlib import Path

import numpy as np
import pytest

from boards.driver import pack_words_to_bytes, unpack_bytes_to_words
from boards.zynq import MAGIC, ZynqShell, word_bytes
from rtlgen.backend.compile import compile_model
from rtlgen.backend.emit import build_report
from rtlgen.check.verify import qonnx_reference
from sim.runner import build as build_sim, run_cocotb, to_verilog

MODELS = Path(__file__).parent / "models"
TFC = MODELS / "TFC_1W1A.onnx"
DDR = 1 << 20


@pytest.fixture(scope="module")
def tfc():
    compiled = compile_model(TFC)
    report = build_report(compiled)
    io = compiled.io
    shell = ZynqShell(in_width=report["input"]["width"], out_width=report["output"]["width"],
                      in_words_per_frame=io.input.words_per_frame, out_words_per_frame=io.output.words_per_frame,
                      ddr=(0, DDR))
    return compiled, report, shell, to_verilog(shell, "top") + compiled.verilog


def mnist(n, offset=0):
    d = np.load(MODELS / "mnist_test_1000.npz")
    return (d["x"][offset:offset + n].astype(np.float32) / 255).reshape(n, 1, 28, 28)


def batch(tfc, x, src, dst, **extra):
    compiled, report, shell, _ = tfc
    frames = len(x) if x is not None else extra.pop("frames")
    data = pack_words_to_bytes(compiled.io.encode(x), report["input"]["width"]) if x is not None else b""
    return {"src": src, "dst": dst, "frames": frames, "input": data.hex(),
            "out_bytes": max(8, frames * shell.out_frame_bytes), **extra}


def outputs(tfc, result, frames):
    compiled, report, _, _ = tfc
    words = unpack_bytes_to_words(bytes.fromhex(result["output"]), report["output"]["width"],
                                  frames * compiled.io.output.words_per_frame)
    return compiled.io.decode(words, frames)


def run(tfc, batches, stalls=False):
    built = build_sim(tfc[3], toplevel="top")
    return run_cocotb(built, "boards.tb_zynq", {"ddr_size": DDR, "stalls": stalls, "batches": batches})["batches"]


@pytest.mark.sim
def test_batches_bit_exact_and_bad_requests_refused(tfc):
    compiled, report, shell, _ = tfc
    x1, x2 = mnist(10), mnist(3, offset=10)
    results = run(tfc, [
        batch(tfc, x1, src=0x1000, dst=0x8000),
        batch(tfc, None, src=0x1000, dst=0x8000, frames=0),                     # zero frames
        batch(tfc, None, src=0x1004, dst=0x8000, frames=2),                     # misaligned
        batch(tfc, None, src=DDR - 64, dst=0x8000, frames=2),                   # past the DDR window
        batch(tfc, x2, src=0x20000 - 24, dst=0x9000),                           # bursts cross 4 KB: fine
    ])
    good, zero, misaligned, outside, again = results
    assert good["magic"] == MAGIC and good["in_bytes"] == shell.in_frame_bytes
    assert shell.in_frame_bytes == compiled.io.input.words_per_frame * word_bytes(report["input"]["width"])
    assert good["status"] & 0b111 == 0b010 and good["done"] == 10
    assert np.array_equal(outputs(tfc, good, 10), qonnx_reference(TFC, x1))
    ii = report["analytic_cycles_per_frame"]
    assert 10 * ii <= good["cycles"] <= 10 * ii + 3000       # the DMA keeps the accelerator near its II
    for result, code in ((zero, 1), (misaligned, 2), (outside, 3)):
        assert result["status"] & 0b110 == 0b110 and (result["status"] >> 8) & 0xF == code
        assert result["polls"] <= 2 and set(result["output"]) == {"e"}      # nothing written
    assert again["status"] & 0b111 == 0b010
    assert np.array_equal(outputs(tfc, again, 3), qonnx_reference(TFC, x2))


@pytest.mark.sim
def test_batch_with_hp_port_stalls(tfc):
    x = mnist(4, offset=20)
    (result,) = run(tfc, [batch(tfc, x, src=0x3000, dst=0xA000)], stalls=True)
    assert result["status"] & 0b111 == 0b010 and result["done"] == 4
    assert np.array_equal(outputs(tfc, result, 4), qonnx_reference(TFC, x))


PASSTHROUGH = """
module finn_design_wrapper(input ap_clk, input ap_rst_n, input [103:0] s_axis_0_tdata, input s_axis_0_tvalid,
                           output s_axis_0_tready, output [103:0] m_axis_0_tdata, output m_axis_0_tvalid,
                           input m_axis_0_tready);
  reg [103:0] d; reg v;
  assign s_axis_0_tready = ~v | m_axis_0_tready;
  assign m_axis_0_tdata = d;
  assign m_axis_0_tvalid = v;
  always @(posedge ap_clk)
    if (!ap_rst_n) v <= 0;
    else if (s_axis_0_tready) begin v <= s_axis_0_tvalid; d <= s_axis_0_tdata; end
endmodule
"""


@pytest.mark.sim
@pytest.mark.parametrize("stalls", [pytest.param(False, marks=pytest.mark.slow), True])   # CI time (25 s): the
def test_words_wider_than_a_beat(stalls):                                       # stalled run covers the full-rate one
    """104-bit words (16 bytes in DDR, two beats each) through a register: what comes back is what went in."""
    shell = ZynqShell(in_width=104, out_width=104, in_words_per_frame=3, out_words_per_frame=3, ddr=(0, DDR))
    assert shell.in_word_bytes == 16
    rng = np.random.default_rng(7)
    words = [int(rng.integers(0, 1 << 52)) << 52 | int(rng.integers(0, 1 << 52)) for _ in range(15)]
    data = pack_words_to_bytes(words, 104)
    built = build_sim(to_verilog(shell, "top") + PASSTHROUGH, toplevel="top")
    (result,) = run_cocotb(built, "boards.tb_zynq", {"ddr_size": DDR, "stalls": stalls, "batches": [
        {"src": 0x0F80, "dst": 0x4000, "frames": 5, "input": data.hex(), "out_bytes": len(data)}]})["batches"]
    assert result["status"] & 0b111 == 0b010 and result["done"] == 5
    assert unpack_bytes_to_words(bytes.fromhex(result["output"]), 104, 15) == words
