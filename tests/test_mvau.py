"""MVAU: bit-exact against golden on larger shapes and every option, exact SF*NF cycles, clear errors (FINN's
grid: Op.examples, simulated by tests/test_op_grid.py)."""

import itertools
from dataclasses import replace
from math import prod

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from layers.dotproduct import MEM_MODES
from layers.mvau import MVAU, MVAUSpec
from memstream.packing import pack_words, unpack_words
from sim.harness import FULL_RATE, Backpressure, simulate_streams
from sim.runner import available_simulators
from tests.conftest import RANDOM_EXAMPLES, simulators_under_test
from tests.mvau_util import activation_args, expected_mvau, random_input, run_unit


def make_spec(mw, mh, simd, pe, idt, wdt, act, seed=0, **kwargs):
    """A spec with random weights (and thresholds for ``act``), as FINN's test_fpgadataflow_mvau does."""
    rng = np.random.default_rng(seed)
    np.random.seed(seed)
    w = gen_finn_dt_tensor(DataType[wdt], (mw, mh))
    probe = MVAUSpec(mw, mh, simd, pe, idt, wdt, w, mem_mode=kwargs.get("mem_mode", "internal_decoupled"))
    thresholds, odt, act_val = activation_args(act, rng, mh, probe.acc_range())
    if act is None:
        # FINN's grid: no activation -> INT32 outputs (UINT32 for xnor-popcount)
        odt = DataType["UINT32" if probe.xnor else "INT32"]
    return MVAUSpec(mw, mh, simd, pe, idt, wdt, w, thresholds, odt, act_val, **kwargs)


def check(spec, frames=3, seed=1, simulator=None, backpressure_seed=None):
    """Full rate (cycles must be exactly SF*NF per vector) and with random backpressure."""
    x = random_input(spec, frames, seed)
    expected = expected_mvau(spec, x)
    full = run_unit(MVAU(spec), spec, x, expected, FULL_RATE, simulator)
    assert full.steady_cycles("o", spec.nf * prod(spec.num_input_vectors)) == spec.exp_cycles
    bp = Backpressure(seed=seed if backpressure_seed is None else backpressure_seed)
    run_unit(MVAU(spec), spec, x, expected, bp, simulator)


@pytest.mark.sim
@pytest.mark.parametrize("sim_name", simulators_under_test(slow=("verilator",)))     # CI time: see conftest
def test_each_simulator(sim_name):
    check(make_spec(16, 8, 4, 2, "INT4", "INT4", "INT4", num_input_vectors=(1, 2)), simulator=sim_name)


@pytest.mark.sim
@pytest.mark.slow       # CI time: a full-size layer (21 s); test_op_grid runs MVAU grids
def test_large_depth_128x128():
    # FINN's large-depth variant: WMEM = 16384 words, one MAC.
    spec = make_spec(128, 128, 1, 1, "INT4", "INT4", "INT4", mem_mode="internal_decoupled")
    x = random_input(spec, 2, 7)
    expected = expected_mvau(spec, x)
    full = run_unit(MVAU(spec), spec, x, expected, FULL_RATE, "verilator")
    assert full.steady_cycles("o", spec.nf) == spec.exp_cycles == 16384
    run_unit(MVAU(spec), spec, x[:1], expected[:1], Backpressure(seed=3), "verilator")


@pytest.mark.sim
@pytest.mark.slow       # CI time: a full-size layer (25 s); test_op_grid runs MVAU grids
def test_w1a1_784x64():
    # The TFC first layer shape: SIMD=49 PE=16, xnor-popcount, bipolar activation.
    spec = make_spec(784, 64, 49, 16, "BIPOLAR", "BIPOLAR", "BIPOLAR", mem_mode="internal_decoupled")
    check(spec, frames=4, simulator="verilator")


# Every simulator, Verilator in the slow suite where Icarus is installed: a cold Verilator build of these small
# layers cost 20 s each of the default suite (issue 42 item 6); whole networks run them on Verilator's compiled bench
SIMULATORS = simulators_under_test(slow=("verilator",) if "icarus" in available_simulators() else ())


@pytest.mark.sim
@pytest.mark.parametrize("sim_name", SIMULATORS)
@pytest.mark.parametrize("res_type", ["lut", pytest.param("dsp", marks=pytest.mark.slow)])     # dsp: CI time
def test_int8_batch_of_vectors(res_type, sim_name):
    # A lowered convolution: numInputVectors (1, 3, 3), INT8 operands, raw accumulator output.
    spec = make_spec(36, 12, 6, 3, "INT8", "INT8", None, num_input_vectors=(1, 3, 3), res_type=res_type,
                     mem_mode="internal_embedded")
    check(spec, frames=2, simulator=sim_name)


@pytest.mark.sim
@pytest.mark.parametrize("simd", [4, 1])
@pytest.mark.parametrize("idt, wdt, pe", [("UINT8", "INT8", 4), ("INT8", "INT8", 2), ("INT4", "UINT4", 2),
                                          ("UINT3", "TERNARY", 2)])
def test_dsp_packing_is_bit_exact(idt, wdt, pe, simd):
    # Two lanes per DSP48E1: (w_hi 2^S + w_lo) * x, the extreme operands included. SIMD 4 splits every
    # product; SIMD 1 accumulates in P and restores the lanes from the canary carries at the fold's end.
    spec = make_spec(16, 2 * pe, simd, pe, idt, wdt, "INT4", res_type="dsp", mem_mode="internal_embedded")
    assert spec.dsp_packing is not None and spec.accumulates_in_dsp == (simd == 1)
    wlo, whi = int(DataType[wdt].min()), int(DataType[wdt].max())
    w = np.array(spec.weights)
    w[0, :] = wlo                                  # the most negative weight in every lane
    w[1, ::2], w[1, 1::2] = whi, wlo
    spec = replace(spec, weights=w, thresholds=spec.thresholds)
    check(spec)


@pytest.mark.sim
@pytest.mark.parametrize("sim_name", SIMULATORS)
@pytest.mark.parametrize("mw, weights", [pytest.param(512, "random", marks=pytest.mark.slow),     # CI time
                                         (512, "extreme"),            # CI time: the 1-word fold's
                                         pytest.param(1, "random", marks=pytest.mark.slow)])   # SF 1 is test_op_grid's
def test_dsp_accumulation_over_a_long_fold(mw, weights, sim_name):
    # INT8 x UINT8 over a 512-step fold: the low lane's sum needs 24 bits against its 16-bit field,
    # so the canaries carry hundreds of times; the extreme case drives every product to a corner. A
    # fold of one step: every step is both the first and the last.
    spec = make_spec(mw, 4, 1, 4, "UINT8", "INT8", None, res_type="dsp", mem_mode="internal_decoupled")
    assert spec.accumulates_in_dsp and spec.sf == mw
    if weights == "extreme":
        w = np.full((mw, 4), -128)
        w[::3, 1::2] = 127
        spec = replace(spec, weights=w)
        assert spec.acc_shape.width >= spec.dsp_packing + 8
    check(spec, frames=2, simulator=sim_name)


@pytest.mark.parametrize("mw, inside", [(1 << 15, True), (1 << 17, False)])
def test_dsp_accumulation_only_where_p_holds_both_lanes(mw, inside):
    # INT8 x INT8 lanes at S = 16: 2^15 terms need 31 bits above the low field's 16 (47 of P's 48);
    # 2^17 terms would need 33 (49): those lanes are split per product and summed in fabric instead.
    spec = MVAUSpec(mw, 4, 1, 4, "INT8", "INT8", None, output_dtype="INT64", res_type="dsp", mem_mode="external")
    assert spec.dsp_packing == 16 and spec.accumulates_in_dsp == inside


@pytest.mark.sim
def test_binary_xnor_mode():
    # binaryXnorMode with BINARY (0/1) operands: the accumulator counts agreeing bits, thresholds in [0, MW].
    spec = make_spec(32, 8, 8, 4, "BINARY", "BINARY", "BIPOLAR", binary_xnor_mode=True, mem_mode="internal_embedded")
    assert spec.acc_range() == (0, 32)
    check(spec)


@pytest.mark.sim
def test_unsigned_and_ternary_types():
    check(make_spec(24, 6, 8, 3, "UINT3", "TERNARY", "UINT2", mem_mode="internal_embedded"))
    check(make_spec(12, 4, 3, 2, "INT3", "UINT2", None, mem_mode="external"))


@pytest.mark.sim
@settings(max_examples=RANDOM_EXAMPLES)
@given(sf=st.integers(1, 4), simd=st.sampled_from([1, 2, 3, 5]), nf=st.integers(1, 4), pe=st.sampled_from([1, 2, 4]),
       idt=st.sampled_from(["BIPOLAR", "INT2", "UINT4", "INT8"]), wdt=st.sampled_from(["BIPOLAR", "INT3", "UINT2"]),
       act=st.sampled_from([None, "BIPOLAR", "UINT2", "INT4"]), mode=st.sampled_from(MEM_MODES),
       vecs=st.sampled_from([(1,), (1, 2), (1, 2, 2)]), seed=st.integers(0, 10_000))
def test_random_specs(sf, simd, nf, pe, idt, wdt, act, mode, vecs, seed):
    spec = make_spec(sf * simd, nf * pe, simd, pe, idt, wdt, act, seed=seed, mem_mode=mode, num_input_vectors=vecs)
    check(spec, frames=2, seed=seed)


def test_weight_memory_image_layout():
    # Word nf*SF + sf holds W[sf*SIMD + s, nf*PE + p] at element p*SIMD + s (element 0 at the LSB).
    w = np.arange(8 * 4).reshape(8, 4) % 7 - 3
    spec = MVAUSpec(8, 4, 2, 2, "INT4", "INT4", w, mem_mode="internal_embedded")
    image = spec.weight_memory_image()
    assert len(image) == spec.wmem == 8
    for nf, sf, p, s in itertools.product(range(2), range(4), range(2), range(2)):
        code = (image[nf * 4 + sf] >> (4 * (p * 2 + s))) & 0xF
        value = code - 16 if code >= 8 else code
        assert value == w[sf * 2 + s, nf * 2 + p]


def test_derived_numbers():
    spec = make_spec(784, 64, 49, 16, "BIPOLAR", "BIPOLAR", "BIPOLAR", num_input_vectors=(1, 2))
    assert (spec.sf, spec.nf, spec.wmem) == (16, 4, 64)
    assert (spec.in_width, spec.out_width, spec.weight_width) == (49, 16, 784)
    assert spec.exp_cycles == 16 * 4 * 2
    assert spec.folded_input_shape == (1, 2, 16, 49) and spec.folded_output_shape == (1, 2, 4, 16)
    assert spec.acc_range() == (0, 784)         # xnor-popcount, not the +-1 dot product
    int_spec = MVAUSpec(3, 2, 1, 1, "INT2", "INT2", np.array([[1, -2], [1, 1], [-2, 0]]))
    # x in [-2, 1]. Column 0 (1, 1, -2): lo = -2 - 2 - 2 = -6, hi = 1 + 1 + 4 = 6;
    # column 1 (-2, 1, 0): lo = -2 - 2 = -4, hi = 4 + 1 = 5.
    assert int_spec.acc_range() == (-6, 6)
    assert int_spec.output_dtype == DataType["INT4"]


W4 = np.full((16, 8), 3)
T_OK = np.tile(np.arange(15), (8, 1))


@pytest.mark.parametrize("kwargs, message", [
    (dict(mw=16, mh=8, simd=3, pe=1), r"^MVAU simd=3 must divide mw=16; legal simd: 1, 2, 4, 8, 16$"),
    (dict(mw=16, mh=8, simd=1, pe=3), r"^MVAU pe=3 must divide mh=8; legal pe: 1, 2, 4, 8$"),
    (dict(mw=16, mh=8, simd=0, pe=1), r"^MVAU simd must be a positive integer, not 0$"),
    (dict(thresholds=T_OK[:, ::-1], output_dtype="INT4", act_val=-8),
     r"^MVAU thresholds row 0 is not ascending: \[14, 13,"),
    (dict(thresholds=T_OK, output_dtype="INT2", act_val=-2),
     r"^MVAU output_dtype=INT2 holds \[-2, 1\] but act_val \+ counts .* reach \[-2, 13\]; use INT5 or wider$"),
    (dict(thresholds=T_OK[:3], output_dtype="INT4"), r"^MVAU thresholds must have shape \(8, S\) or \(1, S\)"),
    (dict(thresholds=T_OK[:, :2], output_dtype="BIPOLAR"), r"^MVAU output_dtype=BIPOLAR needs 1 threshold"),
    (dict(output_dtype="INT4"), r"^MVAU output_dtype=INT4 holds \[-8, 7\] but accumulators"),
    (dict(weights=W4 + 9), r"INT4.*\[-8, 7\]"),
    (dict(weights=W4[:, :4]), r"^MVAU weights must have shape \(16, 8\), not \(16, 4\)$"),
    (dict(weights=None), r"^MVAU weights are required for mem_mode=internal_decoupled$"),
    (dict(mem_mode="const"), r"^MVAU mem_mode must be one of internal_embedded, internal_decoupled, external"),
    (dict(ram_style="ultra"), r"^MVAU ram_style=ultra needs runtime_writeable_weights=True$"),
    (dict(runtime_writeable_weights=True, mem_mode="internal_embedded"),
     r"^MVAU runtime_writeable_weights needs mem_mode=internal_decoupled"),
    (dict(binary_xnor_mode=True), r"^MVAU binary_xnor_mode needs 1-bit input_dtype, not INT4$"),
    (dict(input_dtype="FLOAT32"), r"^MVAU input_dtype=FLOAT32 is not supported"),
    (dict(res_type="bram"), r"^MVAU res_type must be one of auto, lut, dsp"),
    (dict(thresholds=None, output_dtype=None, input_dtype="INT9"), None),      # legal: a control case
])
def test_illegal_specs(kwargs, message):
    args = dict(mw=16, mh=8, simd=4, pe=2, input_dtype="INT4", weight_dtype="INT4", weights=W4)
    args.update(kwargs)
    if message is None:
        MVAUSpec(**args)
        return
    with pytest.raises(ValueError, match=message):
        MVAUSpec(**args)


@pytest.mark.sim
def test_few_thresholds_into_a_wide_output():
    # S = 5 steps (not 2^n - 1) into INT8 with a negative ActVal: counts are padded and sign-extended.
    rng = np.random.default_rng(4)
    w = rng.integers(-4, 4, size=(12, 6))
    probe = MVAUSpec(12, 6, 4, 3, "INT3", "INT3", w, mem_mode="internal_embedded")
    t = np.sort(rng.integers(*probe.acc_range(), size=(6, 5)), axis=1)
    check(MVAUSpec(12, 6, 4, 3, "INT3", "INT3", w, t, DataType["INT8"], -2, mem_mode="internal_embedded"))


@pytest.mark.sim
@pytest.mark.parametrize("sim_name", simulators_under_test(slow=("verilator",)))     # CI time: see conftest
def test_runtime_writeable_weights(sim_name):
    # Rewrite the whole weight memory over AXI-Lite, run one flush vector (FINN: the memstream has
    # already fetched words with the old weights), then every output must use the new weights.
    spec = make_spec(16, 8, 4, 2, "INT4", "INT4", "INT4", runtime_writeable_weights=True)
    np.random.seed(9)
    new = MVAUSpec(16, 8, 4, 2, "INT4", "INT4", gen_finn_dt_tensor(DataType["INT4"], (16, 8)), spec.thresholds,
                   spec.output_dtype, spec.act_val, runtime_writeable_weights=True)
    stream = spec.weight_stream_spec()
    writes = [(stream.address_of(line, chunk), (word >> (32 * chunk)) & 0xFFFFFFFF)
              for line, word in enumerate(new.weight_memory_image()) for chunk in range(stream.chunks)]
    x = random_input(spec, 4, 3)
    words = pack_words(x.reshape(-1, spec.simd), spec.input_dtype)
    result = simulate_streams(MVAU(spec), inputs={"i": list(words)}, outputs={"o": 4 * spec.nf},
                              backpressure=Backpressure(seed=6), simulator=sim_name, axilite_writes=writes)
    assert result.axilite_responses() == [0] * len(writes)
    y = unpack_words(np.array(result.words("o"), dtype=object), spec.output_dtype, spec.pe).reshape(4, 1, 8)
    assert np.array_equal(y[1:], expected_mvau(new, x[1:]))
    assert not np.array_equal(expected_mvau(new, x[1:]), expected_mvau(spec, x[1:]))    # the test can fail


# Signed weights summed as unsigned ones (offset_weights): INTn / TERNARY weights x UINTm inputs in fabric
# CI time (issue 42 item 6): the fully unrolled 16 x 16 case (256 lanes, 9-10 s) of both grids in the slow suite;
# the four others check the same offsets by default (PE 2-8, SIMD 2-16, folded)
FULL_UNROLL = pytest.mark.slow
OFFSET_CASES = [("INT2", "UINT2", 4, 8, None), ("INT2", "UINT2", 2, 16, "INT4"), ("TERNARY", "UINT3", 4, 4, "BIPOLAR"),
                ("INT4", "UINT4", 8, 2, None), pytest.param("INT3", "UINT2", 16, 16, "INT4", marks=FULL_UNROLL)]


@pytest.mark.sim
@pytest.mark.parametrize("wdt, idt, pe, simd, act", OFFSET_CASES,
                         ids=[f"{w}x{i}-pe{p}-simd{s}-{a}" for w, i, p, s, a in (getattr(c, "values", c) for c in OFFSET_CASES)])
def test_offset_weights_bit_exact_and_cycle_exact(wdt, idt, pe, simd, act, simulator):
    spec = make_spec(16, 16, simd, pe, idt, wdt, act, seed=pe + simd, mem_mode="internal_embedded", res_type="lut")
    assert spec.offset_weights
    check(spec, simulator=simulator)


def test_offset_weights_only_where_it_is_exact_and_pays():
    base = dict(mem_mode="internal_embedded", res_type="lut")
    assert make_spec(16, 16, 4, 4, "UINT2", "INT2", None, **base).offset_weights
    assert not make_spec(16, 16, 4, 1, "UINT2", "INT2", None, **base).offset_weights      # one lane: nothing shared
    assert not make_spec(16, 16, 4, 4, "INT2", "INT2", None, **base).offset_weights       # signed inputs, no table
    assert not make_spec(16, 16, 4, 4, "UINT2", "UINT2", None, **base).offset_weights     # unsigned weights
    assert not make_spec(16, 16, 4, 4, "BIPOLAR", "BIPOLAR", None, **base).offset_weights
    assert not make_spec(16, 16, 4, 4, "UINT8", "INT8", None, mem_mode="internal_embedded",
                         res_type="dsp").offset_weights


# Signed inputs too (offset_inputs): x_u = x + 2^(m-1), and each channel's thresholds raised by 2^(m-1) rowsum(W)
OFFSET_INPUT_CASES = [("INT2", "INT2", 4, 8, "INT2", False), ("INT2", "INT2", 2, 16, "BIPOLAR", True),
                      ("TERNARY", "INT3", 4, 4, "UINT2", False), ("INT4", "INT4", 8, 2, "INT4", True),
                      pytest.param("INT3", "INT2", 16, 16, "INT4", False, marks=FULL_UNROLL)]


@pytest.mark.sim
@pytest.mark.parametrize("wdt, idt, pe, simd, act, shared_row", OFFSET_INPUT_CASES,
                         ids=[f"{w}x{i}-pe{p}-simd{s}-{a}{'-shared' if r else ''}"
                              for w, i, p, s, a, r in (getattr(c, "values", c) for c in OFFSET_INPUT_CASES)])
def test_offset_inputs_bit_exact_and_cycle_exact(wdt, idt, pe, simd, act, shared_row, simulator):
    spec = make_spec(16, 16, simd, pe, idt, wdt, act, seed=pe + simd, mem_mode="internal_embedded", res_type="lut")
    if shared_row:      # one threshold row for every channel: the raised table has a row per channel
        spec = MVAUSpec(16, 16, simd, pe, idt, wdt, spec.weights, spec.thresholds[:1], spec.output_dtype,
                        spec.act_val, mem_mode="internal_embedded", res_type="lut")
    assert spec.offset_inputs and spec.offset_weights
    raised = spec.datapath_table.thresholds - spec.table.thresholds
    x0 = 1 << (DataType[idt].bitwidth() - 1)
    assert np.array_equal(raised[:, 0], x0 * np.asarray(spec.weights).sum(axis=0))    # rowsum of channel c
    check(spec, simulator=simulator)


def test_offset_inputs_only_with_a_stored_threshold_table():
    base = dict(mem_mode="internal_embedded", res_type="lut")
    assert make_spec(16, 16, 4, 4, "INT2", "INT2", "INT2", **base).offset_inputs
    assert not make_spec(16, 16, 4, 4, "INT2", "INT2", None, **base).offset_inputs        # accumulators out
    assert not make_spec(16, 16, 4, 4, "UINT2", "INT2", "INT2", **base).offset_inputs     # unsigned already
    assert not make_spec(16, 16, 4, 1, "INT2", "INT2", "INT2", **base).offset_inputs      # one lane
    assert not make_spec(16, 16, 4, 4, "INT2", "INT2", "INT2", mem_mode="internal_decoupled", res_type="lut",
                         runtime_writeable_weights=True).offset_inputs                   # rowsum may change
    signed = make_spec(16, 16, 4, 4, "INT2", "INT2", "INT2", offset_operands=False, **base)
    assert not signed.offset_inputs and not signed.offset_weights and signed.datapath_table is signed.table


# Weights split between BRAM and LUT ROM (weight_lut_bits): the word's top bits are a logic ROM at the
# BRAM's address; the layer computes the same thing at the same rate.
@pytest.mark.sim
@pytest.mark.parametrize("mem_mode, lut_bits", [("internal_embedded", 1), ("internal_embedded", 24),
                                                 ("internal_decoupled", 8), ("internal_decoupled", 127)])
def test_split_weight_rom_bit_exact_and_cycle_exact(mem_mode, lut_bits, simulator):
    spec = make_spec(32, 16, 8, 4, "INT4", "INT4", "UINT4", seed=lut_bits, mem_mode=mem_mode, ram_style="block",
                     weight_lut_bits=lut_bits)
    assert spec.weight_width == 4 * 8 * 4 and spec.weight_ram_style == "block"      # PE x SIMD x 4 bits
    check(spec, simulator=simulator)


def test_split_weight_rom_estimate_moves_bram_into_luts():
    whole = make_spec(256, 64, 16, 8, "INT8", "INT8", None, mem_mode="internal_decoupled", ram_style="block")
    split = make_spec(256, 64, 16, 8, "INT8", "INT8", None, mem_mode="internal_decoupled", ram_style="block",
                      weight_lut_bits=512)
    # 128 words x 1,024 bits: 1,024 / 36 -> 29 RAMB18 in 512 x 36; 512 bits -> 15 of them (514 kept bits)
    assert (whole.resource_estimate().bram18, split.resource_estimate().bram18) == (29, 15)
    assert split.resource_estimate().lut - whole.resource_estimate().lut == 512 * 2     # 128 words: 2 LUT6/bit


@pytest.mark.parametrize("kwargs, message", [
    (dict(ram_style="distributed", weight_lut_bits=4), r"weight_lut_bits=4 splits a block ROM: it needs "
                                                       r"ram_style=block, not ram_style=distributed"),
    (dict(ram_style="block", weight_lut_bits=128), r"weight_lut_bits must be an integer in 0\.\.127"),
    (dict(ram_style="block", weight_lut_bits=-1), r"weight_lut_bits must be an integer in 0\.\.127"),
    (dict(ram_style="block", weight_lut_bits=4, runtime_writeable_weights=True),
     r"needs ram_style=block and fixed weights"),
])
def test_split_weight_rom_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_spec(32, 16, 8, 4, "INT4", "INT4", "UINT4", mem_mode="internal_decoupled", **kwargs)


# Binary weights read inside the XNOR's LUT6 (weights_in_xnor): a LUT ROM of 5-32 words, the agreement
# bits registered before the popcount, one pipeline stage more; the same outputs at the same rate.
XNOR_ROM_CASES = [(32, 16, 8, 2, "BIPOLAR", "BIPOLAR"),    # SF 4, NF 8: 32 words, replayed input
                  (48, 10, 8, 2, "BIPOLAR", None),         # SF 6, NF 5: 30 words, no activation
                  (40, 4, 8, 4, "BIPOLAR", "BIPOLAR"),     # SF 5, NF 1: 5 words, no replay
                  (24, 8, 8, 4, "BINARY", "BIPOLAR")]      # binaryXnorMode with 0/1 operands: SF 3, NF 2


@pytest.mark.sim
@pytest.mark.parametrize("mw, mh, simd, pe, dt, act", XNOR_ROM_CASES,
                         ids=[f"mw{c[0]}-mh{c[1]}-simd{c[2]}-pe{c[3]}-{c[4]}-{c[5]}" for c in XNOR_ROM_CASES])
def test_weights_in_xnor_bit_exact_and_cycle_exact(mw, mh, simd, pe, dt, act, simulator):
    spec = make_spec(mw, mh, simd, pe, dt, dt, act, seed=mw + mh, mem_mode="internal_embedded",
                     ram_style="distributed", binary_xnor_mode=dt == "BINARY")
    assert spec.weights_in_xnor and 5 <= spec.wmem <= 32
    check(spec, simulator=simulator, frames=4)


def test_weights_in_xnor_only_for_small_fixed_lut_roms():
    base = dict(mem_mode="internal_embedded", ram_style="distributed")
    assert make_spec(64, 16, 8, 4, "BIPOLAR", "BIPOLAR", "BIPOLAR", **base).weights_in_xnor        # 32 words
    assert not make_spec(64, 32, 8, 4, "BIPOLAR", "BIPOLAR", "BIPOLAR", **base).weights_in_xnor    # 64 words
    assert not make_spec(16, 8, 8, 4, "BIPOLAR", "BIPOLAR", "BIPOLAR", **base).weights_in_xnor     # 4 words: the ROM is free already
    assert not make_spec(64, 16, 8, 4, "BIPOLAR", "BIPOLAR", "BIPOLAR", mem_mode="internal_embedded",
                         ram_style="block").weights_in_xnor
    assert not make_spec(64, 16, 8, 4, "BIPOLAR", "BIPOLAR", "BIPOLAR", mem_mode="internal_decoupled",
                         ram_style="distributed").weights_in_xnor
    assert not make_spec(64, 16, 8, 4, "INT4", "INT4", "UINT4", **base).weights_in_xnor
    # the estimate: the ROM's LUT per bit, now with the XNOR in it, and a cheaper popcount per term
    on = make_spec(64, 16, 8, 4, "BIPOLAR", "BIPOLAR", "BIPOLAR", **base)
    assert on.pipeline_depth == make_spec(64, 16, 8, 4, "BIPOLAR", "BIPOLAR", "BIPOLAR", mem_mode="internal_embedded",
                                          ram_style="block").pipeline_depth    # block: its operand register instead


# BIPOLAR weights on multi-bit inputs summed as selected inputs (selects_bipolar_weights):
# sum w x = 2 sum b x - sum x, the input sum shared by the lanes; signed inputs offset (offset_inputs).
# ("INT8", "BIPOLAR", 4, 32): SF = 1, the input word held through NF = 4 replays, no accumulator adder
BIPOLAR_SELECT_CASES = [("INT8", "BIPOLAR", 4, 9), ("UINT4", "INT4", 8, 4), ("INT4", None, 2, 16),
                        ("UINT2", "UINT2", 4, 1), ("INT8", "BIPOLAR", 4, 32)]


@pytest.mark.sim
@pytest.mark.parametrize("idt, act, pe, simd", BIPOLAR_SELECT_CASES,
                         ids=[f"{i}-{a}-pe{p}-simd{s}" for i, a, p, s in BIPOLAR_SELECT_CASES])
def test_bipolar_weights_as_selected_inputs_bit_exact_and_cycle_exact(idt, act, pe, simd, simulator):
    spec = make_spec(36 if simd == 9 else 32, 16, simd, pe, idt, "BIPOLAR", act, seed=pe + simd,
                     mem_mode="internal_embedded", res_type="lut")
    assert spec.offset_weights and spec.selects_bipolar_weights
    assert spec.offset_inputs == (DataType[idt].signed() and act is not None)
    check(spec, simulator=simulator)


def test_bipolar_select_estimate_drops_the_negations():
    select = make_spec(27, 64, 27, 16, "INT8", "BIPOLAR", "BIPOLAR", mem_mode="internal_embedded", res_type="lut")
    negate = make_spec(27, 64, 27, 16, "INT8", "BIPOLAR", "BIPOLAR", mem_mode="internal_embedded", res_type="lut",
                       offset_operands=False)
    assert select.offset_weights and not negate.offset_weights
    assert select.resource_estimate().lut < negate.resource_estimate().lut - 16 * 27 * 8 // 2


# Binary lanes summed by a registered compressor heap (popcount="heap", layers/popcount.py): the same
# outputs at the same rate, with the agreement bits registered (weights_in_xnor, constant weights) or
# counted three XNORs to a LUT6, behind a replayed input word or not.
HEAP_CASES = [(64, 16, 8, 2, "distributed", "BIPOLAR"),       # 32 words in the XNOR's LUTs, replayed input
              (64, 8, 16, 8, "distributed", None),            # 4 words: XNOR terms, no replay
              (72, 16, 9, 4, "block", "BIPOLAR"),             # block RAM: operands registered already
              (36, 8, 36, 8, "distributed", "BIPOLAR"),       # one word: constant weights
              (27, 12, 27, 3, "block", "BIPOLAR"),            # 27 terms, an odd heap
              (64, 8, 64, 2, "distributed", None)]            # SF = 1: the input word held through 4 replays


@pytest.mark.sim
@pytest.mark.parametrize("mw, mh, simd, pe, ram, act", HEAP_CASES,
                         ids=[f"mw{c[0]}-mh{c[1]}-simd{c[2]}-pe{c[3]}-{c[4]}-{c[5]}" for c in HEAP_CASES])
def test_popcount_heap_bit_exact_and_cycle_exact(mw, mh, simd, pe, ram, act, simulator):
    spec = make_spec(mw, mh, simd, pe, "BIPOLAR", "BIPOLAR", act, seed=mw + pe, mem_mode="internal_embedded",
                     ram_style=ram, popcount="heap")
    assert spec.uses_heap
    check(spec, simulator=simulator, frames=3)


def test_popcount_heap_costs_and_errors():
    from layers.popcount import heap_cost
    # 144 registered bits: 105 LUTs of carry chains (about 0.7 a term); as XNOR terms 164 (issue 43)
    assert heap_cost(144, 1)[0] == 105 and heap_cost(144, 2)[0] == 164
    base = dict(mem_mode="internal_embedded", ram_style="block")
    tree = make_spec(576, 64, 144, 16, "BIPOLAR", "BIPOLAR", "BIPOLAR", **base)
    heap = make_spec(576, 64, 144, 16, "BIPOLAR", "BIPOLAR", "BIPOLAR", popcount="heap", **base)
    assert heap.resource_estimate().lut < tree.resource_estimate().lut - 16 * 144 // 4    # XNOR terms: ~1.7 against 2
    assert heap.resource_estimate().ff > tree.resource_estimate().ff
    with pytest.raises(ValueError, match="popcount=heap needs an XNOR layer"):
        make_spec(16, 16, 4, 4, "INT4", "INT4", None, popcount="heap")
    with pytest.raises(ValueError, match="popcount must be one of tree, heap"):
        make_spec(16, 16, 4, 4, "BIPOLAR", "BIPOLAR", None, popcount="adder")
