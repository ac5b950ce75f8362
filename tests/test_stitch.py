"""Stitched accelerators: DWC and FIFO insertion, FINN's top-level ports, bit-exact chains against the numpy
goldens (full rate and backpressure), throughput at the slowest layer, FIFO sizing by simulation."""

import re
from math import prod

import numpy as np
import pytest
from qonnx.core.datatype import DataType

from memstream.packing import pack_words, padded_width, unpack_words
from rtlgen.backend import stitch
from rtlgen.passes import insert, size_fifos as sizing
from rtlgen.backend.simulate import simulate_chain, simulated_fifo_depths
from rtlgen.ir.graph import HWNode, words_per_frame
from rtlgen.report.graph import graph_report
import golden
from layers.mvau import golden_mvau
from sim.harness import FULL_RATE, Backpressure

VECS = 4        # vectors per frame of the MLP chain (so a frame is long enough for a 2 % throughput check)


def mlp_nodes(seed=0, vecs=VECS):
    """Thresholding(C=8, PE=2, UINT4 -> UINT2) -> MVAU(8x6, SIMD=4, PE=3, INT2, thresholds -> UINT2)
    -> MVAU(6x4, SIMD=2, PE=1, no activation). Widths 8 | 4->8 | 6->4 | acc: two DWCs."""
    rng = np.random.default_rng(seed)
    t0 = np.sort(rng.integers(0, 17, size=(8, 3)), axis=1)
    w1 = rng.integers(-2, 2, size=(8, 6))
    t1 = np.sort(rng.integers(-8, 9, size=(6, 3)), axis=1)
    w2 = rng.integers(-2, 2, size=(6, 4))
    vecs = (1, vecs)
    return [
        HWNode("Thresholding_0", "Thresholding",
               dict(num_channels=8, input_dtype="UINT4", output_dtype="UINT2", thresholds=t0, num_input_vectors=vecs),
               {"PE": 2}),
        HWNode("MVAU_0", "MVAU", dict(mw=8, mh=6, input_dtype="UINT2", weight_dtype="INT2", weights=w1, thresholds=t1,
                                      output_dtype="UINT2", num_input_vectors=vecs), {"SIMD": 4, "PE": 3}),
        HWNode("MVAU_1", "MVAU", dict(mw=6, mh=4, input_dtype="UINT2", weight_dtype="INT2", weights=w2,
                                      num_input_vectors=vecs), {"SIMD": 2, "PE": 1}),
    ]


def mlp_golden(nodes, x):
    """x (frames, vecs, 8) -> (frames, vecs, 4), from the network parameters only."""
    x = x.reshape(x.shape[0], -1, 8)
    p0, p1, p2 = (n.params for n in nodes)
    y = golden.multithreshold(x, p0["thresholds"])
    y = golden_mvau(y, p1["weights"], p1["thresholds"])
    return golden_mvau(y, p2["weights"])


def swg_nodes(seed=1):
    """Parallel-window SWG (5x5x2 UINT3, 3x3 kernel, SIMD=2: 6-bit words, padded to 8) -> DWC 54 -> 18 bits ->
    MVAU(18x4, SIMD=6, PE=2, INT3 weights, no activation)."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-4, 4, size=(18, 4))
    return [
        HWNode("ConvolutionInputGenerator_0", "ConvolutionInputGenerator",
               dict(ifm_dim=(5, 5), ifm_channels=2, kernel=(3, 3), input_dtype="UINT3"),
               {"SIMD": 2, "parallel_window": True}),
        HWNode("MVAU_0", "MVAU", dict(mw=18, mh=4, input_dtype="UINT3", weight_dtype="INT3", weights=w,
                                      num_input_vectors=(1, 3, 3)), {"SIMD": 6, "PE": 2}),
    ]


def swg_golden(nodes, x):
    """x (frames, 5, 5, 2) -> (frames, 3, 3, 4)."""
    return golden_mvau(golden.im2col(x.reshape(x.shape[0], 5, 5, 2), (3, 3)), nodes[1].params["weights"])


def stream(nodes, x, frames, *, chain=None, backpressure=FULL_RATE, simulator=None, garbage_seed=None):
    """Pack x into the first layer's words, stream through the stitched chain (default: depth-2 FIFOs; or
    ``chain``, a chain or its Verilog), unpack the last layer's words."""
    first, last = nodes[0].spec(), nodes[-1].spec()
    words = [int(w) for w in pack_words(x.reshape(-1, first.folded_input_shape[-1]), first.input_dtype)]
    if garbage_seed is not None:    # pad bits of s_axis_0_tdata must be ignored
        rng = np.random.default_rng(garbage_seed)
        pad = padded_width(first.in_width) - first.in_width
        assert pad > 0
        words = [w | int(rng.integers(0, 1 << pad)) << first.in_width for w in words]
    out_per_frame = words_per_frame(last.folded_output_shape)
    result = simulate_chain(chain or insert.insert_dwcs_and_fifos(nodes), words, frames * out_per_frame,
                                   backpressure=backpressure, simulator=simulator)
    out = result.words("m_axis_0")
    assert all(w >> last.out_width == 0 for w in out), "m_axis_0_tdata pad bits must be zero"
    y = unpack_words(np.array(out, dtype=object), last.output_dtype, last.folded_output_shape[-1])
    return y, result, out_per_frame


def ports(verilog, module):
    """{port: width} of ``module`` in Verilog text."""
    body = verilog[verilog.index(f"module {module}("):]
    body = body[:body.index("endmodule")]
    found = {}
    for direction, msb, name in re.findall(r"^\s*(input|output)\s+(?:\[(\d+):0\]\s+)?(\S+?)\s*;", body, re.M):
        found[name] = (direction, int(msb) + 1 if msb else 1)
    return found


# ---------------------------------------------------------------------------------------------- structure

def test_dwcs_exactly_where_widths_differ_and_fifos_everywhere():
    nodes = mlp_nodes()
    chain = insert.insert_dwcs_and_fifos(nodes)
    assert [n.name for n in chain] == [
        "StreamingFIFO_0", "Thresholding_0", "StreamingDataWidthConverter_0", "StreamingFIFO_1", "MVAU_0",
        "StreamingFIFO_2", "StreamingDataWidthConverter_1", "MVAU_1", "StreamingFIFO_3"]   # narrowing: FIFO first
    specs = {n.name: n.spec() for n in chain}
    assert (specs["StreamingDataWidthConverter_0"].in_width, specs["StreamingDataWidthConverter_0"].out_width) == (4, 8)
    assert (specs["StreamingDataWidthConverter_1"].in_width, specs["StreamingDataWidthConverter_1"].out_width) == (6, 4)
    assert specs["StreamingDataWidthConverter_1"].dtype == DataType["UINT2"]
    assert [specs[f"StreamingFIFO_{k}"].width for k in range(4)] == [8, 8, 6, specs["MVAU_1"].out_width]
    assert all(specs[f"StreamingFIFO_{k}"].depth == 2 for k in range(4))
    # consecutive widths agree, so the stitched top accepts it; the originals are untouched
    for a, b in zip(chain, chain[1:]):
        assert specs[a.name].out_width == specs[b.name].in_width
    assert len(nodes) == 3

    # equal widths: no DWC; depth overrides by name; unknown names are refused
    same = insert.insert_dwcs_and_fifos(swg_nodes()[:1] + [HWNode(
        "MVAU_0", "MVAU", dict(mw=18, mh=4, input_dtype="UINT3", weight_dtype="INT3",
                               weights=np.zeros((18, 4), dtype=int), num_input_vectors=(1, 3, 3)),
        {"SIMD": 18, "PE": 2})], {"StreamingFIFO_1": 40})
    assert [n.op_type for n in same] == ["StreamingFIFO", "ConvolutionInputGenerator", "StreamingFIFO", "MVAU",
                                         "StreamingFIFO"]
    assert [n.folding["depth"] for n in same if n.op_type == "StreamingFIFO"] == [2, 40, 2]
    with pytest.raises(ValueError, match="StreamingFIFO_9"):
        insert.insert_dwcs_and_fifos(nodes, {"StreamingFIFO_9": 4})
    with pytest.raises(ValueError, match="insert_dwcs_and_fifos"):
        stitch.StitchedAccelerator(nodes)


def test_verilog_has_finn_ports_byte_padded():
    nodes = swg_nodes()         # 6-bit input, 2 x INT-accumulator output: both need padding
    chain = insert.insert_dwcs_and_fifos(nodes)
    first, last = nodes[0].spec(), nodes[-1].spec()
    assert first.in_width % 8 and last.out_width % 8
    v = stitch.to_verilog(chain)
    assert ports(v, "finn_design_wrapper") == {
        "ap_clk": ("input", 1), "ap_rst_n": ("input", 1),
        "s_axis_0_tdata": ("input", padded_width(first.in_width)), "s_axis_0_tvalid": ("input", 1),
        "s_axis_0_tready": ("output", 1),
        "m_axis_0_tdata": ("output", padded_width(last.out_width)), "m_axis_0_tvalid": ("output", 1),
        "m_axis_0_tready": ("input", 1),
    }
    monitored = ports(stitch.to_verilog(chain, name="top", monitor=True), "top")
    fifos = [n.name for n in chain if n.op_type == "StreamingFIFO"]
    assert {f"{f}_max_count" for f in fifos} == set(monitored) - {"ap_clk", "ap_rst_n"} - {
        f"{s}_{p}" for s in ("s_axis_0", "m_axis_0") for p in ("tdata", "tvalid", "tready")}
    assert all(monitored[f"{f}_max_count"][0] == "output" for f in fifos)


def test_chain_report_totals_and_ii():
    chain = insert.insert_dwcs_and_fifos(mlp_nodes())
    rows = graph_report(chain)
    assert [r["name"] for r in rows[:-1]] == [n.name for n in chain]
    total = rows[-1]
    assert total["name"] == "TOTAL"
    assert total["exp_cycles"] == max(n.spec().exp_cycles for n in mlp_nodes()) == 3 * 4 * VECS   # MVAU_1: SF*NF
    for key in ("LUT", "FF", "BRAM18"):
        assert total["resources"][key] == sum(r["resources"].get(key, 0) for r in rows[:-1])
    mvau0 = rows[[r["name"] for r in rows].index("MVAU_0")]
    assert mvau0["folding"] == {"SIMD": 4, "PE": 3} and (mvau0["in_width"], mvau0["out_width"]) == (8, 6)


def test_fifo_depth_rounding():
    assert [sizing.finn_fifo_depth(n) for n in (0, 1, 2, 3, 32, 33, 100)] == [2, 2, 2, 32, 32, 33, 100]


# ---------------------------------------------------------------------------------------------- simulation

@pytest.mark.sim
@pytest.mark.parametrize("backpressure", [FULL_RATE, Backpressure(seed=11)], ids=["full-rate", "backpressure"])
def test_mlp_chain_bit_exact_at_slowest_layer_rate(backpressure, simulator):
    nodes = mlp_nodes()
    frames = 6
    x = np.random.default_rng(2).integers(0, 16, size=(frames, VECS, 8))
    verilog = stitch.to_verilog(insert.insert_dwcs_and_fifos(nodes))      # as the compiler calls it
    y, result, per_frame = stream(nodes, x, frames, chain=verilog, backpressure=backpressure, simulator=simulator)
    assert np.array_equal(y.reshape(frames, VECS, 4), mlp_golden(nodes, x))
    if backpressure is FULL_RATE:
        ii = max(n.spec().exp_cycles for n in nodes)
        assert abs(result.steady_cycles("m_axis_0", per_frame) - ii) <= 0.02 * ii


@pytest.mark.sim
@pytest.mark.parametrize("backpressure", [FULL_RATE, Backpressure(seed=5)], ids=["full-rate", "backpressure"])
def test_parallel_swg_chain_bit_exact(backpressure, simulator):
    """A parallel-window SWG (combinational ready) behind a FIFO, a DWC, an MVAU; pad bits on the input are junk."""
    nodes = swg_nodes()
    frames = 4
    x = np.random.default_rng(3).integers(0, 8, size=(frames, 5, 5, 2))
    y, result, per_frame = stream(nodes, x, frames, backpressure=backpressure, simulator=simulator, garbage_seed=4)
    expected = swg_golden(nodes, x)
    assert np.array_equal(y.reshape(expected.shape), expected)
    if backpressure is FULL_RATE:
        ii = max(n.spec().exp_cycles for n in nodes)
        assert abs(result.steady_cycles("m_axis_0", per_frame) - ii) <= 0.02 * ii


@pytest.mark.sim
@pytest.mark.parametrize("make_nodes, expect, exact", [
    (mlp_nodes, mlp_golden, False), (lambda: mlp_nodes(vecs=32), mlp_golden, True), (swg_nodes, swg_golden, False)],
    ids=["mlp", "mlp-32-vectors", "swg"])
def test_size_fifos_rule_and_sized_chain_keeps_rate(make_nodes, expect, exact, simulator):
    """FINN's rule on the observed occupancies (the 32-vector MLP backs up more than 32 words in front of its
    slowest layer, so one depth is exact); the sized chain keeps the deep chain's timing exactly."""
    nodes = make_nodes()
    depths = simulated_fifo_depths(nodes, simulator=simulator)
    chain = insert.insert_dwcs_and_fifos(nodes, depths)
    fifos = [n.name for n in chain if n.op_type == "StreamingFIFO"]
    assert sorted(depths) == sorted(fifos)
    assert all(d in (2, 32) or d > 32 for d in depths.values()), depths
    assert any(d > 32 for d in depths.values()) == exact, depths
    # each FIFO holds at most a frame of its tensor (the deep FIFO the sizing run started from)
    for k, node in enumerate(chain):
        if node.op_type == "StreamingFIFO":
            neighbour = chain[k + 1].spec().folded_input_shape if k + 1 < len(chain) else \
                chain[k - 1].spec().folded_output_shape
            assert depths[node.name] <= max(32, prod(neighbour[:-1]))

    # depth = max_count loses nothing: the sized chain repeats the deep chain's output timing to the cycle
    deep = insert.insert_dwcs_and_fifos(nodes, sizing.tensor_fifo_depths(nodes))
    zeros = [0] * (3 * prod(nodes[0].spec().folded_input_shape[:-1]))
    out_count = 3 * words_per_frame(nodes[-1].spec().folded_output_shape)
    timing = [simulate_chain(c, zeros, out_count, simulator=simulator).out_cycles("m_axis_0")
              for c in (deep, chain)]
    assert timing[0] == timing[1]

    # the sized chain runs bit-exact, at the slowest layer's rate, and under backpressure without deadlock
    frames = 5
    rng = np.random.default_rng(8)
    first = nodes[0].spec()
    x = rng.integers(0, 1 << first.input_dtype.bitwidth(), size=(frames, prod(first.folded_input_shape[:-1]),
                                                                  first.folded_input_shape[-1]))
    ii = max(n.spec().exp_cycles for n in nodes)
    for bp in (FULL_RATE, Backpressure(seed=9, valid_prob=0.8, ready_prob=0.5)):
        y, result, per_frame = stream(nodes, x, frames, chain=chain, backpressure=bp, simulator=simulator)
        expected = expect(nodes, x)
        assert np.array_equal(y.reshape(expected.shape), expected)
        if bp is FULL_RATE:
            assert abs(result.steady_cycles("m_axis_0", per_frame) - ii) <= 0.02 * ii


def padded_conv_nodes(seed=6):
    """FMPadding (8x8x2 UINT2, 1 on every side) -> parallel-window SWG (3x3, SIMD=2: 18-bit windows) ->
    DWC 18 -> 9 bits -> MVAU(18x2, SIMD=9, PE=2): the MVAU takes each window in 2 cycles, 128 per frame,
    while the SWG needs 100 words, 36 of which make no window (ResNet's 3x3 convolutions)."""
    w = np.random.default_rng(seed).integers(-2, 2, size=(18, 2))
    return [
        HWNode("FMPadding_0", "FMPadding", dict(img_dim=(8, 8), padding=(1, 1, 1, 1), num_channels=2, dtype="UINT2"),
               {"SIMD": 2}),
        HWNode("ConvolutionInputGenerator_0", "ConvolutionInputGenerator",
               dict(ifm_dim=(10, 10), ifm_channels=2, kernel=(3, 3), input_dtype="UINT2"),
               {"SIMD": 2, "parallel_window": True}),
        HWNode("MVAU_0", "MVAU", dict(mw=18, mh=2, input_dtype="UINT2", weight_dtype="INT2", weights=w,
                                      num_input_vectors=(1, 8, 8)), {"SIMD": 9, "PE": 2}),
    ]


@pytest.mark.sim
def test_window_gaps_cost_no_cycles_behind_a_narrowing_dwc(simulator):
    """The rows that make no window (the padding, the next frame's first rows) pass while the MVAU still
    works on earlier windows: the FIFO sits on the DWC's wide side, so the SWG can run ahead. In front of
    the DWC's narrow side it could not (the DWC takes a window only every 2 cycles): 148 cycles per frame."""
    nodes = padded_conv_nodes()
    chain = insert.insert_dwcs_and_fifos(nodes, simulated_fifo_depths(nodes, simulator=simulator))
    order = [n.op_type for n in chain]
    assert order[order.index("ConvolutionInputGenerator") + 1:][:2] == ["StreamingFIFO", "StreamingDataWidthConverter"]
    frames = 8
    x = np.random.default_rng(7).integers(0, 4, size=(frames, 8, 8, 2))
    expected = golden_mvau(golden.im2col(np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0))), (3, 3)),
                           nodes[2].params["weights"])
    ii = max(n.spec().exp_cycles for n in nodes)
    assert ii == 128
    for bp in (FULL_RATE, Backpressure(seed=12)):
        y, result, per_frame = stream(nodes, x, frames, chain=chain, backpressure=bp, simulator=simulator)
        assert np.array_equal(y.reshape(expected.shape), expected)
        if bp is FULL_RATE:
            assert result.steady_cycles("m_axis_0", per_frame) == ii


@pytest.mark.sim
def test_monitor_reports_fifo_occupancy(simulator):
    """max_count ports read through simulate_chain: a slow consumer behind a full-rate input fills the input FIFO."""
    nodes = mlp_nodes()
    chain = insert.insert_dwcs_and_fifos(nodes, {"StreamingFIFO_0": 64})
    words = words_per_frame(nodes[0].spec().folded_input_shape) * 4
    result = simulate_chain(chain, [0] * words, 4 * words_per_frame(nodes[-1].spec().folded_output_shape),
                                   monitor=True, simulator=simulator)
    counts = {n.name: result.probe(f"{n.name}_max_count") for n in chain if n.op_type == "StreamingFIFO"}
    assert counts["StreamingFIFO_0"] > 2          # the MVAU_1 bottleneck backs up to the input
    assert all(1 <= c <= n.spec().capacity for n in chain if n.op_type == "StreamingFIFO" for c in [counts[n.name]])


def test_long_lines_are_wrapped_for_verilator():
    """Yosys writes a wide concatenation on one line (140 kB for TFC-w2a2's 32 x 98 first layer at --fit),
    beyond Verilator's 40,000 tokens per line: such lines break after their commas, tokens unchanged."""
    from sim.runner import LONGEST_LINE, wrap_long_lines
    items = ", ".join(f"w_offset[{k}]" for k in range(6000))
    text = f"module m;\n  assign {{ {items} }} = x;\nendmodule\n"
    wrapped = wrap_long_lines(text)
    assert max(len(line) for line in wrapped.splitlines()) <= LONGEST_LINE
    assert wrapped != text and wrapped.split() == text.split()        # only whitespace changed
    assert wrap_long_lines("module m;\nendmodule\n") == "module m;\nendmodule\n"
