"""The compiled bench built from cached per-layer parts (sim.parts, issue 42 item 2): identical layers are
one part, a part is compiled once and then taken from the cache, a changed layer rebuilds its part only,
and a design simulated from parts is bit-exact against qonnx at its II, also under random backpressure."""

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from sim import parts
from sim.harness import FULL_RATE, Backpressure, run_stitched
from sim.runner import SimulationError

MODELS = Path(__file__).parent / "models"


# The bit of the input its low 3 bits select, as Yosys writes a variable bit select: a full case
TAP = "{7'h0, tap}"
_TAP_CASE = ("  reg tap;\n  always @* begin\n    (* full_case = 32'd1 *)\n    casez (i__payload [2:0])\n"
             + "".join(f"      3'h{k}:\n          tap = i__payload[{k}];\n" for k in range(8)) + "    endcase\n  end\n")


def _layer(name, body, nonce=""):
    """A stream stage (Amaranth's port names) whose output register holds ``body`` of its input; ``nonce``
    (a comment) makes it a part no earlier run has cached."""
    return (f"module \\{name} (clk, rst, i__payload, i__valid, i__ready, o__payload, o__valid, o__ready);\n"
            f"  // {nonce}\n"
            "  input clk;\n  input rst;\n  input [7:0] i__payload;\n  input i__valid;\n  output i__ready;\n"
            "  output reg [7:0] o__payload;\n  output reg o__valid;\n  input o__ready;\n"
            + (_TAP_CASE if body == TAP else "") +
            "  assign i__ready = !o__valid || o__ready;\n"
            "  always @(posedge clk) begin\n"
            "    if (rst) o__valid <= 1'b0;\n"
            f"    else if (i__ready) begin o__valid <= i__valid; o__payload <= {body}; end\n"
            "  end\nendmodule\n")


def _design(bodies, top="top", nonce=""):
    """A stitched top (FINN's ports) of a chain of stages, one per body, as Amaranth writes it."""
    n = len(bodies)
    wires = "".join(f"  wire [7:0] d{k};\n  wire v{k};\n  wire r{k};\n" for k in range(n + 1))
    stages = "".join(f"  \\{top}.stage_{k}  stage_{k} (.clk(ap_clk), .rst(!ap_rst_n), .i__payload(d{k}), "
                     f".i__valid(v{k}), .i__ready(r{k}), .o__payload(d{k + 1}), .o__valid(v{k + 1}), "
                     f".o__ready(r{k + 1}));\n" for k in range(n))
    head = (f"module {top}(ap_clk, ap_rst_n, s_axis_0_tdata, s_axis_0_tvalid, s_axis_0_tready, m_axis_0_tdata, "
            "m_axis_0_tvalid, m_axis_0_tready);\n  input ap_clk;\n  input ap_rst_n;\n  input [7:0] s_axis_0_tdata;\n"
            "  input s_axis_0_tvalid;\n  output s_axis_0_tready;\n  output [7:0] m_axis_0_tdata;\n"
            "  output m_axis_0_tvalid;\n  input m_axis_0_tready;\n")
    ties = (f"  assign d0 = s_axis_0_tdata;\n  assign v0 = s_axis_0_tvalid;\n  assign s_axis_0_tready = r0;\n"
            f"  assign m_axis_0_tdata = d{n};\n  assign m_axis_0_tvalid = v{n};\n  assign r{n} = m_axis_0_tready;\n")
    return head + wires + stages + ties + "endmodule\n" + "".join(
        _layer(f"{top}.stage_{k}", body, nonce) for k, body in enumerate(bodies))


def _expected(words, bodies):
    out = []
    for w in words:
        for body in bodies:
            w = {"i__payload + 8'd1": w + 1, "i__payload ^ 8'h5a": w ^ 0x5A, "i__payload ^ 8'h33": w ^ 0x33,
                 TAP: (w >> (w & 7)) & 1}[body]
            w &= 0xFF
        out.append(w)
    return out


@pytest.fixture
def builds(monkeypatch):
    """Every :func:`sim.parts.build_from_parts` of the test, as it returned."""
    monkeypatch.setenv(parts.ENV, "1")
    made, build = [], parts.build_from_parts

    def spy(*args, **kwargs):
        made.append(build(*args, **kwargs))
        return made[-1]
    monkeypatch.setattr(parts, "build_from_parts", spy)
    return made


def test_identical_layers_are_one_part_and_the_top_instantiates_parts():
    bodies = ["i__payload + 8'd1", "i__payload ^ 8'h5a", "i__payload + 8'd1"]
    design = parts.plan(_design(bodies), "top")
    assert design.layers == 3 and len(design.parts) == 2
    shared = next(p for p in design.parts if len(p.layers) == 2)
    assert shared.layers == ("top.stage_0", "top.stage_2") and shared.label == "stage_0 (and 1 identical)"
    assert parts.PLACEHOLDER in shared.text and "top.stage" not in shared.text
    assert design.top.count(f"  {shared.name}  stage_") == 2 and "\\top.stage" not in design.top
    # the key is the text's, not the layer's name: the same stage in another design is the same part
    assert shared.key in {p.key for p in parts.plan(_design(bodies[:1], top="other"), "other").parts}


def test_what_stays_with_the_one_model_build(monkeypatch):
    monkeypatch.setenv(parts.ENV, "1")
    verilog = _design(["i__payload + 8'd1"])
    assert parts.applies(verilog, "top")
    assert not parts.applies(verilog, "top", waves=True)
    assert not parts.applies(verilog, "top", x_random=True)
    assert not parts.applies(verilog + "module LUT6(O, I0);\n  output O;\n  input I0;\nendmodule\n", "top")
    assert not parts.applies("module top(ap_clk);\n  input ap_clk;\nendmodule\n", "top")     # no layers
    monkeypatch.setenv(parts.ENV, "0")
    assert not parts.applies(verilog, "top")
    monkeypatch.delenv(parts.ENV)
    assert not parts.applies(verilog, "top")            # a small design: one model
    assert parts.applies(verilog + " " * parts.PARTS_FROM_BYTES, "top")
    monkeypatch.setenv(parts.ENV, "yes")
    with pytest.raises(SimulationError, match="RTLGEN_SIM_PARTS must be 0"):
        parts.applies(verilog, "top")


def _run(verilog, words, backpressure=FULL_RATE):
    return run_stitched(verilog, words, len(words), toplevel="top", compiled=True,
                        backpressure=backpressure).words("m_axis_0")


@pytest.mark.sim
def test_parts_are_compiled_once_taken_from_the_cache_and_rebuilt_only_where_changed(builds):
    # (the suite's cache, where Verilator's runtime is compiled once, with parts of this run's own)
    nonce = os.urandom(8).hex()
    words = list(range(256)) * 2
    bodies = ["i__payload + 8'd1", "i__payload ^ 8'h5a", "i__payload + 8'd1"]
    verilog = _design(bodies, nonce=nonce)
    assert _run(verilog, words) == _expected(words, bodies)
    assert _run(verilog, words, Backpressure(seed=3, valid_prob=0.5, ready_prob=0.4)) == _expected(words, bodies)
    first = builds[0]
    assert (first.layers, first.parts, len(first.compiled)) == (3, 2, 2)     # the identical stages once
    assert builds[1].harness_cached
    # the same design again without its harness: every part from the cache, linked again
    shutil.rmtree(first.exe.parent.parent)
    assert _run(verilog, words) == _expected(words, bodies)
    assert not builds[2].harness_cached and builds[2].compiled == () and builds[2].cached == 2
    # one stage changed: its part only
    changed = ["i__payload + 8'd1", "i__payload ^ 8'h33", "i__payload + 8'd1"]
    assert _run(_design(changed, nonce=nonce), words, Backpressure(seed=5)) == _expected(words, changed)
    assert len(builds[3].compiled) == 1 and builds[3].cached == 1
    assert builds[3].compiled[0] not in {p.key for p in parts.plan(verilog, "top").parts}


@pytest.mark.slow
@pytest.mark.sim
def test_small_cnn_from_parts_is_bit_exact_at_its_ii_and_builds_self_test_reuses_the_bench(tmp_path, monkeypatch,
                                                                                          builds):
    from rtlgen.backend import build as build_module
    from tests.conftest import rtl_matches_qonnx

    x = np.random.default_rng(5).standard_normal((4, 1, 8, 8)).astype(np.float32)
    rtl_matches_qonnx(MODELS / "small_cnn.onnx", x, tmp_path / "out", seed=6)
    assert len(builds) == 2 and all(b.layers > 3 for b in builds)     # both runs on one bench of parts

    class Synthesis(Exception):
        pass

    def synthesis(*args, **kwargs):
        raise Synthesis
    monkeypatch.setattr(build_module, "_synthesize", synthesis)
    lines = []
    with pytest.raises(Synthesis):
        build_module.build(tmp_path / "out", shell="standalone", say=lines.append)
    assert len(builds) == 3 and builds[2].harness_cached, lines      # the self-test's expected words: sim's bench


def test_build_without_self_test_simulates_nothing_and_says_so(tmp_path, monkeypatch, builds):
    from rtlgen import api
    from rtlgen.backend import build as build_module
    from rtlgen.errors import BuildError
    import sim.compiled

    design = api.compile(MODELS / "small_cnn.onnx", tmp_path / "out", fifo_sizing="none")

    class Synthesis(Exception):
        pass

    def synthesis(*args, **kwargs):
        raise Synthesis

    def no_simulation(*args, **kwargs):
        raise AssertionError("simulated")
    monkeypatch.setattr(build_module, "_synthesize", synthesis)
    monkeypatch.setattr(sim.compiled, "run_compiled", no_simulation)
    lines = []
    with pytest.raises(Synthesis):
        build_module.build(design.out, shell="standalone", self_test=False, say=lines.append)
    assert any(line.startswith("self-test: skipped (--no-self-test)") for line in lines), lines
    assert not builds
    with pytest.raises(BuildError, match="--no-self-test: only the standalone shell"):
        build_module.build(design.out, shell="zynq", self_test=False, say=lines.append)


def test_a_broken_pool_leaves_its_unfinished_parts_to_this_process(monkeypatch):
    from rtlgen.backend import jobs, simulate

    def breaks_after_one(function, items):
        yield 1, function(items[1])
        raise jobs.WorkersLost("a worker was killed")
    monkeypatch.setattr(jobs, "completed", breaks_after_one)
    assert sorted(simulate._parts_runner(lambda x: x * 10, [1, 2, 3])) == [(0, 10), (1, 20), (2, 30)]


def test_a_case_that_is_a_variable_bit_select_becomes_one_and_nothing_else_does():
    case = _TAP_CASE[_TAP_CASE.index("    (*"):_TAP_CASE.index("  end\n")]
    assert parts.bit_selects(case).strip() == "tap = i__payload[i__payload [2:0]];"
    for wrong in (case.replace("tap = i__payload[5]", "tap = i__payload[6]"),     # arm 5 takes another bit
                  case.replace("tap = i__payload[5]", "tap = other[5]"),          # another vector
                  case.replace("          tap = i__payload[7];\n", "").replace("      3'h7:\n", ""),   # an arm missing
                  case.replace("i__payload [2:0]", "i__payload [3:0]")):          # 16 values, 8 arms
        assert parts.bit_selects(wrong) == wrong


@pytest.mark.sim
def test_a_stage_with_a_variable_bit_select_simulates_the_same_from_parts(builds):
    nonce = os.urandom(8).hex()
    words = list(range(256))
    bodies = ["i__payload + 8'd1", TAP]
    verilog = _design(bodies, nonce=nonce)
    assert "casez" in verilog
    assert _run(verilog, words, Backpressure(seed=7, valid_prob=0.6, ready_prob=0.5)) == _expected(words, bodies)
    assert builds[0].compiled
