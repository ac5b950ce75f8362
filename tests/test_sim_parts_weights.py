"""Weights loaded as data in the bench built from parts (sim.parts, issue 42 item 2): a memory's initial
contents are taken out of its part's text and read at run time from a file per instance, so a design that
differs from one simulated before only in its weight values compiles no part; only what is recognised
exactly is lifted, anything else stays in the text and simulates the same."""

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from sim import parts
from sim.harness import FULL_RATE, Backpressure, run_stitched
from sim.runner import SimulationError
from tests.test_sim_parts import builds  # noqa: F401 (the fixture: every parts build of a test)

MODELS = Path(__file__).parent / "models"

PORTS = ("  input clk;\n  input rst;\n  input [7:0] i__payload;\n  input i__valid;\n  output i__ready;\n"
         "  output reg [7:0] o__payload;\n  output reg o__valid;\n  input o__ready;\n")


def _init(name, words, width=8, order=None):
    """A memory's declaration and initial block as Yosys writes an Amaranth Memory (``order``: the
    words' order, as nobody writes them, for a block that is not recognised)."""
    lines = [f"    {name}[{k}] = {width}'h{words[k]:0{-(-width // 4)}x};\n" for k in order or range(len(words))]
    return f"  reg [{width - 1}:0] {name} [{len(words) - 1}:0];\n  initial begin\n" + "".join(lines) + "  end\n"


def _stage(name, looked_up, extra=""):
    """A stream stage whose output register holds its input XOR ``looked_up`` (a word of a memory)."""
    return (f"module \\{name} (clk, rst, i__payload, i__valid, i__ready, o__payload, o__valid, o__ready);\n"
            + PORTS + extra + "  assign i__ready = !o__valid || o__ready;\n  always @(posedge clk) begin\n"
            "    if (rst) o__valid <= 1'b0;\n"
            f"    else if (i__ready) begin o__valid <= i__valid; o__payload <= i__payload ^ {looked_up}; end\n"
            "  end\nendmodule\n")


def _rom_design(own, nested, inline, nonce):
    """A top (FINN's ports) of three stages, each XOR-ing its input with a ROM word its low 2 bits select:
    ``own`` in the stage's module, ``nested`` in a submodule of its stage, ``inline`` in an initial block
    written out of order (not recognised)."""
    stages = [
        _stage("top.stage_0", "rom[i__payload[1:0]]", f"  // {nonce}\n" + _init("rom", own)),
        _stage("top.stage_1", "looked", f"  // {nonce}\n  wire [7:0] looked;\n"
               "  \\top.stage_1.lookup  lookup (.addr(i__payload[1:0]), .data(looked));\n"),
        "module \\top.stage_1.lookup (addr, data);\n  input [1:0] addr;\n  output [7:0] data;\n"
        + _init("\\words$3 ", nested) + "  assign data = \\words$3 [addr];\nendmodule\n",
        _stage("top.stage_2", "rom[i__payload[1:0]]", f"  // {nonce}\n" + _init("rom", inline, order=[1, 0, 3, 2])),
    ]
    wires = "".join(f"  wire [7:0] d{k};\n  wire v{k};\n  wire r{k};\n" for k in range(4))
    instances = "".join(f"  \\top.stage_{k}  stage_{k} (.clk(ap_clk), .rst(!ap_rst_n), .i__payload(d{k}), "
                        f".i__valid(v{k}), .i__ready(r{k}), .o__payload(d{k + 1}), .o__valid(v{k + 1}), "
                        f".o__ready(r{k + 1}));\n" for k in range(3))
    top = ("module top(ap_clk, ap_rst_n, s_axis_0_tdata, s_axis_0_tvalid, s_axis_0_tready, m_axis_0_tdata, "
           "m_axis_0_tvalid, m_axis_0_tready);\n  input ap_clk;\n  input ap_rst_n;\n  input [7:0] s_axis_0_tdata;\n"
           "  input s_axis_0_tvalid;\n  output s_axis_0_tready;\n  output [7:0] m_axis_0_tdata;\n"
           "  output m_axis_0_tvalid;\n  input m_axis_0_tready;\n" + wires + instances
           + "  assign d0 = s_axis_0_tdata;\n  assign v0 = s_axis_0_tvalid;\n  assign s_axis_0_tready = r0;\n"
           "  assign m_axis_0_tdata = d3;\n  assign m_axis_0_tvalid = v3;\n  assign r3 = m_axis_0_tready;\nendmodule\n")
    return top + "".join(stages)


def _expected(words, *roms):
    out = []
    for w in words:
        for rom in roms:
            w ^= rom[w & 3]
        out.append(w)
    return out


def test_memory_contents_recognised_exactly_are_lifted_and_nothing_else_is():
    own, nested, inline = [0x11, 0x22, 0x33, 0x44], [1, 2, 3, 250], [9, 8, 7, 6]
    design = parts.plan(_rom_design(own, nested, inline, "unit"), "top")
    data = dict(design.data)
    by_layer = {p.layers[0]: p for p in design.parts}
    stage_0, stage_1, stage_2 = (by_layer[f"top.stage_{k}"] for k in range(3))
    # one file per memory and instance, named by the scope its load prints (%m): the part, then the path
    # below it; the words as $readmemh reads them
    assert data == {f"TOP.top.stage_0.{stage_0.name}.mem0.hex": "11\n22\n33\n44\n",
                    f"TOP.top.stage_1.{stage_1.name}.lookup.mem0.hex": "1\n2\n3\nfa\n"}
    for part in (stage_0, stage_1):
        assert "initial begin\n    if (!$value$plusargs(\"rtlgen_mem_dir=%s\"" in part.text
        assert "'h" not in part.text.split("initial begin")[1]          # no word left in the text
    assert "\\words$3 );" in stage_1.text                              # an escaped name keeps its space
    assert "$readmemh" not in stage_2.text and "    rom[1] = 8'h08;\n    rom[0] = 8'h09;\n" in stage_2.text
    # other values, the same parts: only the data differ
    other = parts.plan(_rom_design([5, 6, 7, 8], [0, 0, 0, 0], inline, "unit"), "top")
    assert [p.key for p in other.parts] == [p.key for p in design.parts] and other.top == design.top
    assert dict(other.data)[f"TOP.top.stage_1.{stage_1.name}.lookup.mem0.hex"] == "0\n0\n0\n0\n"
    # what is not recognised stays as written: a word missing, a width or a value that does not fit, an X,
    # a module whose place below its layer is not certain
    layer = "top.stage_0"
    full = _stage(layer, "rom[0]", _init("rom", own))
    for wrong in (full.replace("    rom[3] = 8'h44;\n", ""), full.replace("8'h44", "7'h44"),
                  full.replace("8'h44", "8'h144"), full.replace("8'h44", "8'hx4"),
                  full.replace("rom[3] = ", "rom[2] = ")):
        assert parts.lift_memories(layer, {layer: wrong}) == (wrong, ())
    assert parts.lift_memories(layer, {layer: full})[1] == ((".mem0", "11\n22\n33\n44\n"),)
    twice = {layer: _stage(layer, "0", "  \\top.stage_0.t  a ();\n  \\top.stage_0.t  b ();\n"),
             f"{layer}.t": "module \\top.stage_0.t ();\n" + _init("rom", own) + "endmodule\n"}
    assert parts.lift_memories(layer, twice)[1] == ()
    escaped = parts.plan(_rom_design(own, nested, inline, "unit").replace("  stage_0 (", "  \\stage$0  ("), "top")
    assert not any(".stage_0." in name for name, _ in escaped.data) and len(escaped.data) == 1
    assert "    rom[0] = 8'h11;\n" in next(p for p in escaped.parts if p.layers == ("top.stage_0",)).text
    # decimal words (Yosys writes 32-bit constants so), a memory of 1-bit words
    decimal = "  reg [31:0] w [1:0];\n  initial begin\n    w[0] = 32'd4294967295;\n    w[1] = 32'd7;\n  end\n"
    bits = "  reg b [1:0];\n  initial begin\n    b[0] = 1'h1;\n    b[1] = 1'h0;\n  end\n"
    lifted = parts.lift_memories(layer, {layer: _stage(layer, "0", decimal + bits)})[1]
    assert lifted == ((".mem0", "ffffffff\n7\n"), (".mem1", "1\n0\n"))


def _run(verilog, words, backpressure=FULL_RATE):
    return run_stitched(verilog, words, len(words), toplevel="top", compiled=True,
                        backpressure=backpressure).words("m_axis_0")


@pytest.mark.sim
def test_roms_loaded_as_data_simulate_as_written_and_new_values_compile_nothing(builds, monkeypatch):
    nonce = os.urandom(8).hex()
    words = list(range(256))
    own, nested, inline = [0x11, 0x22, 0x33, 0x44], [1, 2, 3, 250], [9, 8, 7, 6]
    verilog = _rom_design(own, nested, inline, nonce)
    stalled = Backpressure(seed=4, valid_prob=0.6, ready_prob=0.5)
    assert _run(verilog, words, stalled) == _expected(words, own, nested, inline)
    assert len(builds[0].compiled) == 3 and len(builds[0].data) == 2
    # new values in both lifted memories: no part compiled, not even the top
    new_own, new_nested = [0xA0, 0x0B, 0xC0, 0x0D], [0x80, 0x40, 0x20, 0x10]
    verilog = _rom_design(new_own, new_nested, inline, nonce)
    assert _run(verilog, words) == _expected(words, new_own, new_nested, inline)
    assert builds[1].compiled == () and builds[1].harness_cached
    # a bench whose memories' contents do not reach it stops with the reason, never runs blank
    monkeypatch.setattr(parts, "write_data", lambda data, directory: [])
    with pytest.raises(SimulationError, match="rtlgen_mem_dir=DIR"):
        _run(verilog, words)
    monkeypatch.setattr(parts, "write_data", lambda data, directory: [f"+{parts.MEMORY_DIR}={directory}"])
    with pytest.raises(SimulationError, match="no memory contents in"):
        _run(verilog, words)


def _retrained(model, path, seed):
    """``model`` with new weight values of the same ranges: each output's weights shuffled over its
    inputs (the same accumulator bounds, so the same layers; new weights in every memory)."""
    m = onnx.load(model)
    rng = np.random.default_rng(seed)
    for init in m.graph.initializer:
        a = numpy_helper.to_array(init)
        if a.ndim == 2:
            a = np.stack([row[rng.permutation(len(row))] for row in a])
            assert a.shape == numpy_helper.to_array(init).shape
            init.CopyFrom(numpy_helper.from_array(a, init.name))
    onnx.save(m, path)
    return path


@pytest.mark.sim
def test_a_retrained_model_shares_every_compiled_part_and_both_are_bit_exact(tmp_path, builds):
    from rtlgen.check.verify import verify_outputs
    from rtlgen.options import CompileOptions
    from tests.conftest import rtl_at_the_ii_under_backpressure

    model = MODELS / "no_act_quant" / "brevitas_linear.onnx"
    x = np.load(MODELS / "no_act_quant" / "brevitas_linear_inputs.npy")[:4]
    # weights in block RAM: in the layer (embedded) and in a memory streamer below it (decoupled)
    folding = {f"MVAU_{k}": {"ram_style": "block", "mem_mode": mode}
               for k, mode in enumerate(["internal_embedded", "internal_decoupled", "internal_embedded"])}
    (tmp_path / "folding.json").write_text(json.dumps(folding))
    options = CompileOptions(folding=str(tmp_path / "folding.json"))
    runs = {}
    for name, path in (("trained", model), ("retrained", _retrained(model, tmp_path / "retrained.onnx", 3))):
        outputs, io = rtl_at_the_ii_under_backpressure(path, x, tmp_path / name, options)
        result = verify_outputs(path, x, outputs, io)
        assert result.passed, result.summary()
        runs[name] = outputs
    trained, retrained = builds[0], builds[2]
    assert not np.array_equal(runs["trained"], runs["retrained"])
    assert retrained.compiled == () and retrained.harness_cached and builds[3].harness_cached
    weights = {name for name, _ in trained.data if ".MVAU_" in name}
    assert {name.split(".")[2] for name in weights} == {"MVAU_0", "MVAU_1", "MVAU_2"}
    assert any(name.count(".") > 4 for name in weights)                 # the streamer's, below its layer
    changed = {name for (name, old), (_, new) in zip(trained.data, retrained.data) if old != new}
    assert changed and changed <= weights
