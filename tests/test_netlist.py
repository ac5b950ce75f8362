"""`rtlgen verify OUT --netlist`: the Yosys netlist simulated with the Xilinx cell models.

Default suite: rtlgen's block RAM model (boards/xilinx_sim.py) against the 7-series layout computed here
from UG473 (INIT_xx / INITP_xx bit order, port widths, SDP buses, byte enables, read-first collisions),
under random backpressure; the exit-2 messages (no build, stale netlist, a model instead of OUT, a build
from before netlists were kept). Slow (Yosys on whole designs): the digits MLP, TFC-w1a1 and CNV-w1a1 at
FINN's foldings, the INT8 generator at its shipped folding, each bit-exact against qonnx; and mutated
netlists (one block RAM INIT word, one LUT's INIT) must give a MISMATCH.
"""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from boards.xilinx_sim import cell_models
from rtlgen.cli import main
from sim.harness import Backpressure, FULL_RATE, simulate_streams

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
FOLDINGS = ROOT / "examples"

# ---------------------------------------------------------------------------------------------- the RAMB model

# (primitive, RAM_MODE, read width of port A, write width of port B (0: none), data bits, parity bits)
GEOMETRY = {"RAMB18E1": (16384, 2048, 14), "RAMB36E1": (32768, 4096, 16)}
CASES = [("RAMB18E1", "TDP", 9, 0), ("RAMB18E1", "TDP", 4, 0), ("RAMB18E1", "SDP", 36, 36),
         ("RAMB36E1", "SDP", 72, 72), ("RAMB36E1", "TDP", 18, 0)]


def split(width):
    """(data bits, parity bits) of a port of ``width`` (UG473: 9 -> 8 + 1, ..., 72 -> 64 + 8)."""
    return (width // 9 * 8, width // 9) if width >= 9 else (width, 0)


def bram_top(prim, mode, rw, ww, data, parity):
    """A stream wrapper: each input word reads port A at its address and, with its write flag, writes
    port B (byte enables, data) at the same address in the same cycle; the output is the word read."""
    n, np_, abits = GEOMETRY[prim]
    d, p = split(rw)
    wd, wp = split(ww) if ww else (0, 0)
    half, halfp = (16, 2) if prim == "RAMB18E1" else (32, 4)
    params = [f".INIT_{k:02X}(256'h{int(''.join(map(str, data[256 * k:256 * (k + 1)][::-1])), 2):064x})"
              for k in range(n // 256)]
    params += [f".INITP_{k:02X}(256'h{int(''.join(map(str, parity[256 * k:256 * (k + 1)][::-1])), 2):064x})"
               for k in range(np_ // 256)]
    params += [f'.RAM_MODE("{mode}")', f".READ_WIDTH_A({rw})", f".WRITE_WIDTH_B({ww})", ".READ_WIDTH_B(0)",
               ".WRITE_WIDTH_A(0)", '.WRITE_MODE_A("READ_FIRST")', '.WRITE_MODE_B("READ_FIRST")']
    web = 4 if prim == "RAMB18E1" else 8
    width = d + p
    # payload: [addr (abits)] [write] [byte enables (web)] [write data (wd + wp)]
    return f"""
module top(input clk, input rst, input [{abits + 1 + web + max(wd + wp, 1) - 1}:0] i__payload, input i__valid,
           output i__ready, output [{width - 1}:0] o__payload, output reg o__valid, input o__ready);
    wire [{abits - 1}:0] addr = i__payload[{abits - 1}:0];
    wire write = i__payload[{abits}];
    wire [{web - 1}:0] be = i__payload[{abits + web}:{abits + 1}];
    wire [{max(wd + wp, 1) - 1}:0] wdata = i__payload[{abits + web + max(wd + wp, 1)}:{abits + web + 1}];
    wire fire = i__valid && i__ready;
    assign i__ready = !o__valid || o__ready;
    always @(posedge clk) if (rst) o__valid <= 0; else if (fire) o__valid <= 1; else if (o__ready) o__valid <= 0;
    wire [{2 * half - 1}:0] dout; wire [{2 * halfp - 1}:0] dpout;
    wire [{2 * half - 1}:0] din = {f"wdata[{wd - 1}:0]" if wd else "0"};
    wire [{2 * halfp - 1}:0] dpin = {f"wdata[{wd + wp - 1}:{wd}]" if wp else "0"};
    {prim} #({", ".join(params)}) ram (
        .CLKARDCLK(clk), .CLKBWRCLK(clk), .ENARDEN(fire), .ENBWREN(fire && write), .REGCEAREGCE(1'b0),
        .REGCEB(1'b0), .RSTRAMARSTRAM(1'b0), .RSTRAMB(1'b0), .RSTREGARSTREG(1'b0), .RSTREGB(1'b0),
        .ADDRARDADDR(addr), .ADDRBWRADDR(addr), .WEA({web // 2}'b0), .WEBWE(write ? be : {web}'b0),
        .DIADI(din[{half - 1}:0]), .DIBDI(din[{2 * half - 1}:{half}]), .DIPADIP(dpin[{halfp - 1}:0]),
        .DIPBDIP(dpin[{2 * halfp - 1}:{halfp}]),
        .DOADO(dout[{half - 1}:0]), .DOBDO(dout[{2 * half - 1}:{half}]), .DOPADOP(dpout[{halfp - 1}:0]),
        .DOPBDOP(dpout[{2 * halfp - 1}:{halfp}]));
    // the read word as data then parity: {{parity, data}}
    assign o__payload = {{{f"dpout[{p - 1}:0], " if p else ""}dout[{d - 1}:0]}};
endmodule
"""


def golden(prim, rw, ww, data, parity, ops):
    """The words port A reads for ``ops`` [(addr, write, byte enables, data word)], by UG473's layout: word
    a of a w-bit port is data bits [a*d, (a+1)*d) and parity bits [a*p, (a+1)*p); a write on port B in
    the same cycle (READ_FIRST) leaves the read with the old contents."""
    data, parity = data.copy(), parity.copy()
    d, p = split(rw)
    wd, wp = split(ww) if ww else (0, 0)
    out = []
    for addr, write, be, word in ops:
        a = addr >> int(np.log2(d)) if d > 1 else addr
        bits = list(data[a * d:(a + 1) * d]) + list(parity[a * p:(a + 1) * p])
        out.append(sum(int(b) << k for k, b in enumerate(bits)))
        if write:
            w = addr >> int(np.log2(wd))
            for k in range(wd):
                if (be >> (k // 8)) & 1:
                    data[w * wd + k] = (word >> k) & 1
            for k in range(wp):
                if (be >> k) & 1:
                    parity[w * wp + k] = (word >> (wd + k)) & 1
    return out


@pytest.mark.sim
@pytest.mark.parametrize("prim, mode, rw, ww", CASES, ids=[f"{c[0]}-{c[1]}-r{c[2]}-w{c[3]}" for c in CASES])
@pytest.mark.parametrize("backpressure", [FULL_RATE, Backpressure(seed=5)], ids=["full-rate", "backpressure"])
def test_block_ram_model_follows_ug473(prim, mode, rw, ww, backpressure):
    rng = np.random.default_rng(len(prim) + rw + ww)
    n, np_, abits = GEOMETRY[prim]
    data, parity = rng.integers(0, 2, n), rng.integers(0, 2, np_)
    d, p = split(rw)
    wd, wp = split(ww) if ww else (0, 0)
    web = 4 if prim == "RAMB18E1" else 8
    words = n // d
    ops = []
    for k in range(60):
        addr = int(rng.integers(0, words)) * d if k % 3 else int(rng.integers(0, 4)) * d     # some repeats
        write = bool(ww) and k % 4 == 1
        ops.append((addr, write, int(rng.integers(1, 1 << web)), int.from_bytes(rng.bytes(9)) % (1 << (wd + wp)) if ww else 0))
    ops += [(a, False, 0, 0) for a, w, _, _ in ops if w]           # read back what was written
    packed = [a | (w << abits) | (be << (abits + 1)) | (word << (abits + 1 + web)) for a, w, be, word in ops]
    result = simulate_streams(cell_models() + bram_top(prim, mode, rw, ww, data, parity), inputs={"i": packed},
                              outputs={"o": len(ops)}, backpressure=backpressure, toplevel="top")
    assert result.words("o") == golden(prim, rw, ww, data, parity, ops)


# ---------------------------------------------------------------------------------------------- exit 2

def one_line(capsys, argv, code=2):
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.fixture
def digits_x(tmp_path):
    x = np.load(MODELS / "digits_tfc_w1a1i1_testset.npz")["x"][:4]
    np.save(tmp_path / "x.npy", x)
    return tmp_path / "x.npy"


def fake_build(out, verilog_sha256=None, netlist=True):
    """A report.json (and netlist.v) as `rtlgen build` leaves them, without running Yosys."""
    from rtlgen.backend.build import design_digest
    from sim.outdir import OutDir
    VERILOG_NAME = OutDir.verilog
    yosys = out / "build" / "yosys"
    yosys.mkdir(parents=True)
    record = {"file": "netlist.v", "module": "finn_design_wrapper",
              "design_sha256": verilog_sha256 or design_digest((out / VERILOG_NAME).read_text())}
    (yosys / "report.json").write_text(json.dumps({"totals": {}, **({"netlist": record} if netlist else {})}))
    (yosys / "netlist.v").write_text("module finn_design_wrapper(ap_clk);\n  input ap_clk;\nendmodule\n")


def test_no_build_says_run_build_first(digits_out_copy, digits_x, capsys):
    err = one_line(capsys, ["verify", str(digits_out_copy), "--netlist", "--input", str(digits_x)])
    assert "the design was not built" in err and f"run rtlgen build {digits_out_copy} first" in err


def test_a_stale_netlist_is_refused(digits_out_copy, digits_x, capsys):
    fake_build(digits_out_copy, verilog_sha256="0" * 64)
    err = one_line(capsys, ["verify", str(digits_out_copy), "--netlist", "--input", str(digits_x)])
    assert "netlist.v: stale" in err and "older design" in err and "rtlgen build" in err


def test_a_build_without_a_netlist_is_refused(digits_out_copy, digits_x, capsys):
    fake_build(digits_out_copy, netlist=False)
    err = one_line(capsys, ["verify", str(digits_out_copy), "--netlist", "--input", str(digits_x)])
    assert "kept no netlist" in err and "rtlgen build" in err


def test_a_missing_netlist_file_is_refused(digits_out_copy, digits_x, capsys):
    fake_build(digits_out_copy)
    (digits_out_copy / "build" / "yosys" / "netlist.v").unlink()
    err = one_line(capsys, ["verify", str(digits_out_copy), "--netlist", "--input", str(digits_x)])
    assert "the netlist is missing" in err


def test_netlist_needs_an_out_not_a_model(tmp_path, digits_x, capsys):
    err = one_line(capsys, ["verify", str(MODELS / "digits_tfc_w1a1i1_clean.onnx"), "--netlist",
                            "--input", str(digits_x)])
    assert "--netlist" in err and "give verify an OUT directory" in err


# ---------------------------------------------------------------------------------------------- whole designs

def build_and_verify(capsys, out, model, x, compile_args=(), build_args=()):
    assert main(["compile", str(model), "-o", str(out), "-q", *compile_args]) == 0
    assert main(["build", str(out), *build_args]) == 0
    capsys.readouterr()
    code = main(["verify", str(out), "--netlist", "--input", str(x)])
    printed = capsys.readouterr().out
    return code, printed


@pytest.mark.slow
@pytest.mark.synth
def test_digits_netlist_is_bit_exact_and_a_mutated_one_is_not(tmp_path, digits_x, capsys):
    out = tmp_path / "digits"
    code, printed = build_and_verify(capsys, out, MODELS / "digits_tfc_w1a1i1_clean.onnx", digits_x,
                                     ["--fifo-sizing", "none"], ["--shell", "zynq"])
    assert code == 0, printed
    assert "netlist: bit-exact: 4 samples, 40 output values equal qonnx" in printed
    assert "x drawn from seeds 1, 2" in printed
    from rtlgen import api
    from rtlgen.check.netlist import simulate_netlist
    from rtlgen.check.verify import verify_outputs
    x = np.load(digits_x)
    stalled = simulate_netlist(out, x, backpressure=Backpressure(seed=3))       # the same netlist, stalled
    assert verify_outputs(MODELS / "digits_tfc_w1a1i1_clean.onnx", x, stalled.outputs, api.open_design(out).io).exact
    assert not stalled.x_dependent

    netlist = out / "build" / "yosys" / "netlist.v"
    good = netlist.read_text()
    # a block RAM's weights: the first INIT word of the first RAMB18E1, inverted
    m = re.search(r"RAMB18E1 #\((?:(?!\);).)*?\.INIT_00\(256'h([0-9a-fx]{64})\)", good, re.S)
    assert m, "the digits MLP keeps its weights in block RAM"
    flipped = "".join(f"{15 - int(c, 16):x}" for c in m.group(1))
    netlist.write_text(good[:m.start(1)] + flipped + good[m.end(1):])
    assert main(["verify", str(out), "--netlist", "--input", str(digits_x)]) == 1
    assert "netlist MISMATCH" in capsys.readouterr().out

    # the same INIT word unknown: Verilator draws it per seed, and the outputs follow
    netlist.write_text(good[:m.start(1)] + "x" * 64 + good[m.end(1):])
    assert main(["verify", str(out), "--netlist", "--input", str(digits_x)]) == 1
    assert "X-DEPENDENT" in capsys.readouterr().out

    # a LUT's truth table: every LUT6 INIT inverted
    netlist.write_text(re.sub(r"(LUT6 #\(\s*\.INIT\(64'h)([0-9a-f]{16})",
                              lambda m: m.group(1) + f"{~int(m.group(2), 16) & (2**64 - 1):016x}", good))
    assert main(["verify", str(out), "--netlist", "--input", str(digits_x)]) == 1
    assert "netlist MISMATCH" in capsys.readouterr().out


def mnist(tmp_path, n):
    d = np.load(MODELS / "mnist_test_1000.npz")
    np.save(tmp_path / "x.npy", (d["x"][:n].astype(np.float32) / 255).reshape(n, 1, 28, 28))
    return tmp_path / "x.npy"


def cifar(tmp_path, n):
    x = np.load(MODELS / "cifar10_cifar10-test-data-class3.npz")["arr_0"][0].astype(np.float32)
    variants = [x, x[:, :, ::-1], x[:, ::-1, :], np.roll(x, 5, axis=2)]
    np.save(tmp_path / "x.npy", np.stack(variants[:n]))
    return tmp_path / "x.npy"


@pytest.mark.slow
@pytest.mark.synth
def test_tfc_w1a1_netlist_at_finn_folding_is_bit_exact(tmp_path, capsys):
    code, printed = build_and_verify(capsys, tmp_path / "tfc", MODELS / "TFC_1W1A.onnx", mnist(tmp_path, 16),
                                     ["--folding", str(FOLDINGS / "finn" / "tfc-w1a1.json")], ["--shell", "zynq"])
    assert code == 0, printed
    assert "netlist: bit-exact: 16 samples" in printed


@pytest.mark.slow
@pytest.mark.synth
def test_cnv_w1a1_netlist_at_finn_folding_is_bit_exact(tmp_path, capsys):
    code, printed = build_and_verify(capsys, tmp_path / "cnv", MODELS / "cnv_1w1a_ts_clean.onnx", cifar(tmp_path, 4),
                                     ["--folding", str(FOLDINGS / "finn" / "cnv-w1a1.json")], ["--shell", "zynq"])
    assert code == 0, printed
    assert "netlist: bit-exact: 4 samples" in printed


@pytest.mark.slow
@pytest.mark.synth
def test_int8_generator_netlist_at_its_shipped_folding_is_bit_exact(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.random.default_rng(8).uniform(-3.8, 3.8, size=(8, 100)).astype(np.float32))
    code, printed = build_and_verify(capsys, tmp_path / "gan", MODELS / "gen_mlp_int8.onnx", tmp_path / "x.npy",
                                     ["--folding", str(FOLDINGS / "gan" / "pynq_z2_folding.json"),
                                      "--clock-mhz", "200"], ["--shell", "zynq"])
    assert code == 0, printed
    assert f"netlist: bit-exact: 8 samples, {8 * 784} output values equal qonnx" in printed
