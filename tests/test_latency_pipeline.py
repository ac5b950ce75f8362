"""The latency pipeline (issue 33, --objective latency): layers built for the fewest cycles from input to
output, bit-exact, at their analytic latency, under random backpressure.

- StreamingFIFO ``fall_through``: a word entering an empty FIFO is offered one cycle later, not two.
"""

import numpy as np
import pytest

from layers.fifo import FIFOSpec, StreamingFIFO
from sim.harness import FULL_RATE, Backpressure, simulate_streams
from tests.test_fifo import run_fifo


@pytest.mark.sim
@pytest.mark.parametrize("depth", [2, 5, 32])
def test_fifo_fall_through(depth, simulator):
    spec = FIFOSpec(width=11, depth=depth, fall_through=True)
    assert spec.latency == 1
    words = [int(w) for w in np.random.default_rng(depth).integers(0, 1 << 11, 3 * depth + 40)]
    full = run_fifo(spec, words, FULL_RATE, simulator)
    assert full.latency("i", "o") == len(words) + spec.latency
    first = full.out_cycles("o")[0]
    assert full.out_cycles("o") == list(range(first, first + len(words)))     # one word per cycle
    # one word alone into the empty FIFO: offered the next cycle
    one = run_fifo(spec, words[:1], FULL_RATE, simulator)
    assert one.out_cycles("o")[0] - one.in_cycles("i")[0] == 1
    slow = run_fifo(spec, words, Backpressure(seed=depth, valid_prob=1.0, ready_prob=0.25), simulator)
    assert slow.probe("max_count") == spec.capacity
    run_fifo(spec, words, Backpressure(seed=depth + 1), simulator)


def test_fifo_fall_through_needs_srl():
    with pytest.raises(ValueError, match="fall_through needs shift-register storage"):
        FIFOSpec(width=8, depth=64, fall_through=True)


# - MVAU ``pipeline="latency"``: a fall-through output FIFO, no sum register at SF = 1 (the accumulator
#   register takes the sum), the 2-stage requantizer for power-of-two scales; on the jet tagger's own layers
#   (QKeras-style fixed-point scales), against the golden model, at the analytic latency and II.

JET = "tests/models/jet_tagger/jet_tagger.onnx"


@pytest.fixture(scope="module")
def jet_layers():
    import warnings
    from rtlgen.options import CompileOptions
    from rtlgen.passes.to_hw import to_hw
    from rtlgen.passes.load import load_model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return to_hw(load_model(JET, "FIXED<16,6>"), CompileOptions()).nodes


def _first_out_after_lead(spec, simulator):
    from layers.mvau import MVAU
    from memstream.packing import pack_words
    from tests.mvau_util import random_input
    x = random_input(spec, 1, 5)
    words = list(pack_words(x.reshape(-1, spec.simd), spec.input_dtype))
    result = simulate_streams(MVAU(spec), inputs={"i": words}, outputs={"o": spec.nf}, simulator=simulator)
    return result.out_cycles("o")[0] - result.in_cycles("i")[spec.lead_words - 1]


# (layer, PE, SIMD, resType): SF = 1 and NF > 1 (ROM-read requant words), SF > 1 and NF = 1, both > 1, no
# activation. The three big ones take minutes in Icarus: slow.
# The issue stage without a register (registers_input False): (0, 8, 16) SF = 1, the word held for the replays
# behind a mux; (3, 5, 4) NF = 1, SF = 8; (3, 1, 32) and (2, 4, 32) SF = 1 in fabric, digit rows over the NF
# folds. (1, 8, 16): a replay buffer, registered.
LATENCY_CASES = [(0, 8, 16, "dsp"), (3, 5, 4, "lut"), (3, 1, 32, "lut")] + [pytest.param(*case, marks=pytest.mark.slow) for case in
                                                        ((2, 4, 32, "lut"), (2, 32, 8, "lut"), (1, 8, 16, "lut"), (3, 5, 32, "lut"))]


@pytest.mark.sim
@pytest.mark.parametrize("layer, pe, simd, res_type", LATENCY_CASES)
def test_mvau_latency_pipeline(jet_layers, layer, pe, simd, res_type, simulator):
    from layers.datapath import tree_stages
    from layers.dotproduct_latency import digit_bits, starts_requant
    from layers.dotproduct_unit import TREE_LEVELS_PER_STAGE
    from tests.test_mvau import check
    node = jet_layers[layer]
    kw = dict(PE=pe, SIMD=simd, resType=res_type, mem_mode="internal_embedded")
    if node.params.get("thresholds") is not None:
        kw["activation_style"] = "requant"
    base, lean = node.spec(**kw), node.spec(**kw, pipeline="latency")
    assert base.registers_input and lean.registers_input == (lean.sf > 1 and lean.nf > 1)     # a replay buffer
    if res_type == "lut" and not lean.registers_input:     # x's digits times the word at the step: 2 ROM rows
        assert digit_bits(lean) >= 3 and lean.product_rows == 2 < base.product_rows == 6
    if lean.requant is not None:    # the offsets start the accumulators where they add, or in the DSP's P
        started = lean.sf > 1 or res_type == "dsp"
        assert starts_requant(lean) == started and not starts_requant(base)
        assert lean.activation_stages == 2 - started and base.activation_stages == 6
    saved = (base.out_latency - lean.out_latency) + (base.activation_stages - lean.activation_stages) \
        + int(lean.sf == 1 and base.registers_sum) + int(base.registers_input and not lean.registers_input) \
        + int(base.registers_dsp_operands and not lean.registers_dsp_operands) \
        + tree_stages(base.tree_terms, TREE_LEVELS_PER_STAGE) - tree_stages(lean.tree_terms, TREE_LEVELS_PER_STAGE)
    assert base.latency - lean.latency == saved > 0
    check(lean, frames=3, simulator=simulator)              # golden; full rate at the II; random backpressure
    assert _first_out_after_lead(lean, simulator) == lean.latency


# - MVAU ``output_fifo=False`` (rtlgen.passes.fifo_links._straight_out): no output FIFO, the pipeline advances on
#   ``o.ready`` itself; alone under random backpressure it must still hold every word until it is taken.
@pytest.mark.sim
@pytest.mark.parametrize("layer, pe, simd", [(3, 5, 4), pytest.param(1, 32, 8, marks=pytest.mark.slow)])
def test_mvau_straight_out(jet_layers, layer, pe, simd, simulator):
    from tests.test_mvau import check
    kw = dict(PE=pe, SIMD=simd, resType="lut", mem_mode="internal_embedded", pipeline="latency")
    if jet_layers[layer].params.get("thresholds") is not None:
        kw["activation_style"] = "requant"
    fifo, straight = jet_layers[layer].spec(**kw), jet_layers[layer].spec(**kw, output_fifo=False)
    assert straight.out_latency == 0 and fifo.latency - straight.latency == fifo.out_latency == 1
    assert straight.ready_is_advance and not straight.ends_in_fifo and fifo.ends_in_fifo
    check(straight, frames=3, simulator=simulator)          # golden; full rate at the II; random backpressure
    assert _first_out_after_lead(straight, simulator) == straight.latency


def test_output_fifo_names_legal_values(jet_layers, tmp_path, capsys):
    with pytest.raises(ValueError, match=r"MVAU output_fifo=False: True, or False \(the output straight into a "
                                         r"chained layer\) with pipeline=latency or distributed, not throughput"):
        jet_layers[3].spec(output_fifo=False)
    with pytest.raises(ValueError, match=r"MVAU output_fifo='no': True, or False"):
        jet_layers[3].spec(output_fifo="no", pipeline="latency")
    from rtlgen.cli import main
    folding = tmp_path / "fold.json"
    folding.write_text('{"MVAU_3": {"PE": 5, "SIMD": 32, "output_fifo": false}}')
    capsys.readouterr()
    assert main(["compile", JET, "-o", str(tmp_path / "out"), "-q", "--input-dtype", "FIXED<16,6>", "--folding",
                 str(folding)]) == 2            # a CompileError: one line naming the node and what is legal
    assert capsys.readouterr().err.strip() == ("rtlgen compile: error: MVAU_3: MVAU output_fifo=False: True, or False "
                                               "(the output straight into a chained layer) with pipeline=latency or "
                                               "distributed, not throughput")


@pytest.fixture(scope="module")
def pruned_layers():
    import warnings
    from rtlgen.options import CompileOptions
    from rtlgen.passes.load import load_model
    from rtlgen.passes.to_hw import to_hw
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return to_hw(load_model(JET.replace(".onnx", "_pruned.onnx"), "FIXED<16,6>"), CompileOptions()).nodes


# constant weights (SF = NF = 1) as canonical-signed-digit terms, lanes of unequal terms padded to the longest
@pytest.mark.sim
@pytest.mark.parametrize("layer", [3, pytest.param(2, marks=pytest.mark.slow), pytest.param(0, marks=pytest.mark.slow)])
def test_mvau_csd_products(pruned_layers, layer, simulator):
    from layers.dotproduct import canonical_digits
    from tests.test_mvau import check
    node = pruned_layers[layer]
    kw = dict(PE=node.params["mh"], SIMD=node.params["mw"], resType="lut", mem_mode="internal_embedded")
    if node.params.get("thresholds") is not None:
        kw["activation_style"] = "requant"
    spec = node.spec(**kw, pipeline="latency")
    assert spec.csd_products and not spec.offset_weights
    terms = canonical_digits(spec.weight_matrix()).sum(axis=1)
    assert spec.tree_terms == terms.max() < spec.simd * spec.weight_dtype.bitwidth()
    assert len(set(terms.tolist())) > 1             # lanes of unequal terms: the padding is exercised
    check(spec, frames=3, simulator=simulator)
    assert _first_out_after_lead(spec, simulator) == spec.latency


def test_pipeline_names_legal_values(jet_layers):
    with pytest.raises(ValueError, match=r"MVAU pipeline must be one of throughput, latency, distributed, not 'fast'"):
        jet_layers[3].spec(pipeline="fast")


@pytest.mark.parametrize("rounding", ["half_even", "floor"])
def test_rounded_level_in_luts_equals_the_subtraction_and_clip(rounding):
    """The lean requantizer's last stage without carry chains (levels 2^k - 1: q - 1 of an odd q clears bit 0,
    the clip an OR of the high bits) against clip(q - down, 0, levels) itself, every q and remainder of a
    small form; levels 5 takes the general form."""
    from types import SimpleNamespace
    from amaranth.hdl import Module, Mux, Signal, signed
    from amaranth.sim import Simulator
    from layers.requant_hw import _clip, _rounded_level
    for levels, level_bits in ((63, 7), (3, 3), (5, 3)):
        form = SimpleNamespace(levels=levels, level_bits=level_bits, rounding=rounding)
        m = Module()
        q, rem, fast, slow = Signal(signed(8)), Signal(3), Signal(16), Signal(16)
        down = q[0] & (rem == 0) if rounding == "half_even" else 0
        m.d.comb += [fast.eq(_rounded_level(q, rem, form)), slow.eq(_clip(Mux(down, q - 1, q), form))]
        bad = []

        async def bench(ctx):
            for qv in range(-128, 128):
                for r in range(8):
                    ctx.set(q, qv)
                    ctx.set(rem, r)
                    if ctx.get(fast) != ctx.get(slow):
                        bad.append((qv, r))
        sim = Simulator(m)
        sim.add_testbench(bench)
        sim.run()
        assert not bad, (levels, bad[:4])
