"""Every layer's timing model (:mod:`layers.timing`) is cycle-exact: simulated alone, with random gaps
between its input words (and at full rate) and its output never stalled, the layer takes every input
word and offers every output word at exactly the cycles its spec's ``timing`` predicts from the cycles
at which the bench offered the input words. FIFO sizing and the latency figure rest on these models."""

import numpy as np
import pytest

from rtlgen.ir.graph import OPS
from sim.harness import Backpressure, simulate_streams
from tests.test_layer_contract import _node, _words

FRAMES = 2

# Foldings beyond each op's example (its Op.examples()[0], which is always a case); params
# overrides under "params".
CASES = [(op_type, {}) for op_type in sorted(OPS)] + [
    ("ConvolutionInputGenerator", {"SIMD": 4, "parallel_window": True}),
    ("ConvolutionInputGenerator", {"SIMD": 1}),
    ("ConvolutionInputGenerator", {"SIMD": 2, "params": dict(stride=(2, 2), kernel=(3, 3), ifm_dim=(7, 7))}),
    ("ConvolutionInputGenerator", {"SIMD": 2, "params": dict(depthwise=True)}),
    ("ConvolutionInputGenerator", {"SIMD": 4, "parallel_window": True,
                                   "params": dict(stride=(2, 2), ifm_dim=(6, 6))}),
    # default style: dilation, depthwise (with dilation), 1D, stride > kernel (2D and 1D), kernel 1x1; in the
    # first four the writer waits for room, and at a frame's end the next frame's first window waits for it
    ("ConvolutionInputGenerator", {"SIMD": 2, "params": dict(dilation=(2, 2), ifm_dim=(6, 6))}),
    ("ConvolutionInputGenerator", {"SIMD": 2, "params": dict(dilation=(2, 1), ifm_dim=(5, 5), kernel=(2, 3),
                                                             depthwise=True)}),
    ("ConvolutionInputGenerator", {"SIMD": 1, "params": dict(kernel=(3, 3), ifm_dim=(5, 5), depthwise=True)}),
    ("ConvolutionInputGenerator", {"SIMD": 1, "params": dict(ifm_dim=(1, 12), kernel=(1, 3), stride=(1, 2))}),
    ("ConvolutionInputGenerator", {"SIMD": 2, "params": dict(ifm_dim=(1, 10), kernel=(1, 2), stride=(1, 3))}),
    ("ConvolutionInputGenerator", {"SIMD": 2, "params": dict(stride=(3, 3), ifm_dim=(8, 8))}),
    ("ConvolutionInputGenerator", {"SIMD": 1, "params": dict(kernel=(1, 1), stride=(2, 2), ifm_dim=(5, 5))}),
    # parallel window: depthwise with dilation, kernel 1x1, stride > kernel (2D and 1D)
    ("ConvolutionInputGenerator", {"SIMD": 2, "parallel_window": True,
                                   "params": dict(kernel=(3, 3), ifm_dim=(6, 6), dilation=(2, 1), depthwise=True)}),
    ("ConvolutionInputGenerator", {"SIMD": 1, "parallel_window": True,
                                   "params": dict(kernel=(1, 1), ifm_dim=(4, 4), stride=(2, 2))}),
    ("ConvolutionInputGenerator", {"SIMD": 4, "parallel_window": True, "params": dict(stride=(3, 3), ifm_dim=(7, 7))}),
    ("ConvolutionInputGenerator", {"SIMD": 4, "parallel_window": True,
                                   "params": dict(kernel=(1, 3), ifm_dim=(1, 11), stride=(1, 4))}),
    ("MVAU", {"SIMD": 8, "PE": 4}), ("MVAU", {"SIMD": 1, "PE": 1}),
    ("MVAU", {"SIMD": 1, "PE": 2, "resType": "dsp"}), ("MVAU", {"SIMD": 4, "PE": 1, "resType": "dsp"}),
    ("MVAU", {"SIMD": 2, "PE": 2, "mem_mode": "internal_decoupled"}),
    # MVAU's default mem_mode is internal_decoupled: the embedded ROM, replay over several vectors, 1-word
    # vectors (SF 1, NF 4), block-RAM operands, DSP pairs (in P; split per product), rows, requant, none
    ("MVAU", {"SIMD": 2, "PE": 1, "mem_mode": "internal_embedded", "params": dict(num_input_vectors=(1, 3))}),
    ("MVAU", {"SIMD": 8, "PE": 1, "mem_mode": "internal_embedded"}), ("MVAU", {"SIMD": 8, "PE": 1}),
    ("MVAU", {"SIMD": 1, "PE": 1, "mem_mode": "internal_embedded", "ram_style": "block"}),
    ("MVAU", {"SIMD": 1, "PE": 2, "mem_mode": "internal_embedded", "resType": "dsp"}),
    ("MVAU", {"SIMD": 2, "PE": 2, "resType": "dsp"}),
    ("MVAU", {"SIMD": 4, "PE": 2, "resType": "lut", "params": dict(input_dtype="INT8")}),
    ("MVAU", {"SIMD": 2, "PE": 2, "mem_mode": "internal_embedded", "activation_style": "requant",
              "params": dict(thresholds=np.array([[-4, 0, 4]] * 4))}),
    ("MVAU", {"SIMD": 2, "PE": 2, "params": dict(thresholds=None, output_dtype=None)}),
    ("VVAU", {"resType": "dsp"}), ("VVAU", {"PE": 4, "SIMD": 3}),
    ("VVAU", {"SIMD": 3, "PE": 2, "mem_mode": "internal_decoupled"}), ("VVAU", {"SIMD": 9, "PE": 1}),
    ("VVAU", {"SIMD": 3, "PE": 1, "params": dict(thresholds=np.array([[-4, 0, 4], [-2, 1, 5], [-6, -3, 0], [0, 2, 3]]),
                                                  output_dtype="UINT2")}),
    ("StreamingDataWidthConverter", {"params": dict(shape=(1, 8), in_width=8, out_width=4)}),
    ("StreamingDataWidthConverter", {"params": dict(shape=(1, 12), in_width=6, out_width=4)}),
    ("StreamingDataWidthConverter", {"params": dict(shape=(1, 12), in_width=4, out_width=6)}),
    # max pool: 1D, 1D ceil mode (a partial window; also W x 1), floor mode dropping a tail, 2D kh != kw
    ("StreamingMaxPool", {"params": dict(img_dim=(1, 8), pool_dim=(1, 2))}),
    ("StreamingMaxPool", {"params": dict(img_dim=(1, 7), pool_dim=(1, 2), ceil_mode=True)}),
    ("StreamingMaxPool", {"params": dict(img_dim=(7, 1), pool_dim=(3, 1), ceil_mode=True)}),
    ("StreamingMaxPool", {"PE": 2, "params": dict(img_dim=(1, 7), pool_dim=(1, 3))}),
    ("StreamingMaxPool", {"params": dict(img_dim=(6, 6), pool_dim=(3, 2))}),
    # padding: asymmetric (a frame starting with pad words waits for its first input word), none
    ("FMPadding", {"params": dict(padding=(1, 0, 0, 2))}),
    ("FMPadding", {"SIMD": 1, "params": dict(padding=(2, 0, 0, 1))}),
    ("FMPadding", {"params": dict(padding=(0, 2, 1, 0))}), ("FMPadding", {"params": dict(padding=(0, 0, 0, 0))}),
    # pixel padding: rows only, one channel per word (the example: both axes, two words per pixel)
    ("FMPadding_Pixel", {"SIMD": 1, "params": dict(img_dim=(3, 2), stride=(2, 1))}),
    # upsampling: columns only, rows only, factor 1, one channel fold per word
    ("UpsampleNearestNeighbour", {"params": dict(ifm_dim=(2, 2), ofm_dim=(2, 4))}),
    ("UpsampleNearestNeighbour", {"params": dict(ifm_dim=(2, 2), ofm_dim=(6, 2))}),
    ("UpsampleNearestNeighbour", {"params": dict(ifm_dim=(2, 3), ofm_dim=(2, 3))}),
    ("UpsampleNearestNeighbour", {"SIMD": 1, "params": dict(ifm_dim=(1, 3), ofm_dim=(2, 9))}),
    ("LabelSelect", {"params": dict(labels=8, k=5), "PE": 1}),
    # K > Labels/PE (a vector's last word waits for the previous indices), 1-word vectors, K = Labels/PE, K 1
    ("LabelSelect", {"params": dict(labels=8, k=5, num_input_vectors=(1, 3)), "PE": 4}),
    ("LabelSelect", {"params": dict(labels=8, k=3, num_input_vectors=(1, 3)), "PE": 8}),
    ("LabelSelect", {"params": dict(labels=8, k=4, num_input_vectors=(1, 2)), "PE": 2}),
    ("LabelSelect", {"params": dict(labels=8, k=1, num_input_vectors=(1, 2)), "PE": 8}),
    ("GlobalAccPool", {"PE": 4}), ("GlobalAccPool", {"PE": 1, "params": dict(num_input_vectors=(2, 1, 3))}),
    ("StreamingConcat", {"SIMD": 1}),
]


def _case_id(case):
    op_type, folding = case
    extra = ",".join(f"{k}={v}" for k, v in folding.items() if k != "params")
    return op_type + (f"[{extra}]" if extra else "") + ("+params" if "params" in folding else "")


def _spec(op_type, folding):
    folding = dict(folding)
    node = _node(op_type)
    node.params = {**node.params, **folding.pop("params", {})}
    node.folding.update(folding)
    return node.spec()


def _frames_of_words(spec, k, rng):
    return [w for _ in range(FRAMES) for w in _words(spec, k, rng)]


def _simulate(spec, op_type, backpressure):
    rng = np.random.default_rng(11)
    ins = {("i" if spec.num_inputs == 1 else f"i{k}"): _frames_of_words(spec, k, rng)
           for k in range(spec.num_inputs)}
    n_in = len(next(iter(ins.values())))
    out_words = n_in if spec.folded_output_shape is None else \
        FRAMES * int(np.prod(spec.folded_output_shape[:-1]))
    outs = {("o" if spec.num_outputs == 1 else f"o{k}"): out_words for k in range(spec.num_outputs)}
    component = _node(op_type).op.component(spec)
    return simulate_streams(component, inputs=ins, outputs=outs, backpressure=backpressure), ins, outs


# The default suite checks every op's example with random gaps (tests/test_op_grid.py checks every default
# example's model at full rate, in the same run as its bit-exactness), and with random gaps one folding
# beyond the example for each style of the ops whose timing is intricate: a parallel-window generator, a
# dilated one, a 1-D one whose stride exceeds its kernel, an MVAU replaying its embedded weights over
# several vectors, DSP lanes, a VVAU reading decoupled weights, a width converter of no integer ratio. The
# rest of the grid, and every case at full rate, run in the slow suite (the suite's time, issue 42).
DEFAULT_BEYOND_EXAMPLE = [
    ("ConvolutionInputGenerator", {"SIMD": 4, "parallel_window": True}),
    ("ConvolutionInputGenerator", {"SIMD": 2, "params": dict(dilation=(2, 2), ifm_dim=(6, 6))}),
    ("ConvolutionInputGenerator", {"SIMD": 2, "params": dict(ifm_dim=(1, 10), kernel=(1, 2), stride=(1, 3))}),
    ("MVAU", {"SIMD": 2, "PE": 1, "mem_mode": "internal_embedded", "params": dict(num_input_vectors=(1, 3))}),
    ("MVAU", {"SIMD": 2, "PE": 2, "resType": "dsp"}),
    ("VVAU", {"SIMD": 3, "PE": 2, "mem_mode": "internal_decoupled"}),
    ("StreamingDataWidthConverter", {"params": dict(shape=(1, 12), in_width=6, out_width=4)}),
]


def _key(case):
    return repr(case)


def _timing_cases():
    for k, case in enumerate(CASES):
        for gaps in (False, True):
            default = gaps and (k < len(OPS) or _key(case) in set(map(_key, DEFAULT_BEYOND_EXAMPLE)))
            yield pytest.param(case, gaps, id=f"{_case_id(case)}-{'random-gaps' if gaps else 'full-rate'}",
                               marks=[] if default else [pytest.mark.slow])


def test_the_default_foldings_beyond_the_examples_are_cases():
    assert set(map(_key, DEFAULT_BEYOND_EXAMPLE)) <= set(map(_key, CASES))


@pytest.mark.sim
@pytest.mark.parametrize("case, gaps", list(_timing_cases()))
def test_timing_model_is_cycle_exact(case, gaps):
    op_type, folding = case
    spec = _spec(op_type, folding)
    if not hasattr(spec, "timing"):
        pytest.fail(f"{op_type} has no timing model")
    backpressure = Backpressure(seed=7, valid_prob=0.5, ready_prob=1.0) if gaps else \
        Backpressure(seed=0, valid_prob=1.0, ready_prob=1.0)
    result, ins, outs = _simulate(spec, op_type, backpressure)
    arrivals = [np.array(result.offered_cycles(p)) for p in ins]
    model = spec.timing(arrivals)
    for k, port in enumerate(ins):
        np.testing.assert_array_equal(model.reads[k], result.in_cycles(port), err_msg=f"reads of {port}")
    for port in outs:
        np.testing.assert_array_equal(model.writes, result.out_cycles(port), err_msg=f"writes of {port}")


DWC_CASES = [dict(shape=(1, 8), in_width=4, out_width=8), dict(shape=(1, 8), in_width=8, out_width=4),
             dict(shape=(1, 12), in_width=6, out_width=4), dict(shape=(1, 12), in_width=4, out_width=6),
             dict(shape=(1, 24), in_width=12, out_width=2)]


@pytest.mark.sim
@pytest.mark.parametrize("params", DWC_CASES, ids=lambda p: f"{p['in_width']}to{p['out_width']}")
def test_width_converter_model_follows_a_stalled_consumer(params):
    """A converter feeds its consumer with no FIFO between: given the cycles at which the (randomly
    stalling) consumer took each word, the model tells when each input word moved, exactly."""
    spec = _spec("StreamingDataWidthConverter", {"params": params})
    result, ins, outs = _simulate(spec, "StreamingDataWidthConverter",
                                  Backpressure(seed=3, valid_prob=0.7, ready_prob=0.4))
    taken = np.array(result.out_cycles("o"))
    model = spec.timing([np.array(result.offered_cycles("i"))], taken=taken)
    np.testing.assert_array_equal(model.reads[0], result.in_cycles("i"))
    assert (model.writes <= taken).all()


@pytest.mark.parametrize("widths", [(4, 6), (6, 4), (32, 36), (64, 48), (49, 16), (16, 49), (3, 5), (10, 4)],
                         ids=lambda w: f"{w[0]}to{w[1]}")
def test_general_converter_model_is_its_word_loop(widths, monkeypatch):
    """The general converter's vectorized model (rounds of cumulative maxima to their fixed point, period by
    period) gives the cycles its word loop (the model as it was, cycle-exact above) gives: offered with random
    gaps and bursts, never stalled and behind a consumer that stalls at random; and where the rounds are
    cut short, it is the word loop that answers."""
    from layers import dwc
    from layers.dwc import DWCSpec
    iw, ow = widths
    rng = np.random.default_rng(iw * 100 + ow)
    spec = DWCSpec((3 * 40 * np.lcm(iw, ow),), iw, ow, "BINARY")
    for gap in (1, 3, 9):
        a = np.cumsum(1 + rng.integers(0, gap, spec.in_words) * (rng.random(spec.in_words) < 0.3))
        free = spec._general_timing_loop(a, None)
        taken = free.writes + np.cumsum(rng.integers(0, gap, free.writes.size))
        for behind in (None, taken):
            want, got = spec._general_timing_loop(a, behind), spec.timing([a], taken=behind)
            np.testing.assert_array_equal(got.reads[0], want.reads[0])
            np.testing.assert_array_equal(got.writes, want.writes)
    monkeypatch.setattr(dwc, "GENERAL_TIMING_ROUNDS", 0)
    np.testing.assert_array_equal(spec.timing([a]).writes, spec._general_timing_loop(a, None).writes)


def test_composing_shares_one_count_and_restores_numpys_setting():
    """Inside :func:`layers.timing.composing` (nested too) ``counting`` is ``arange``, as views of one read-only
    array; numpy's huge-page advice is off inside and as it was after."""
    from layers.timing import composing, counting, take_when_ready
    switch = np._core.multiarray._set_madvise_hugepage
    advised = switch(True)
    try:
        with composing(10):
            assert not switch(False)                # off inside (and left off)
            with composing():
                shared = counting(7)
                np.testing.assert_array_equal(shared, np.arange(7))
                assert not shared.flags.writeable and counting(100).size == 100
            assert counting(3).base is not None
            a = np.array([5, 5, 9, 9, 9])
            np.testing.assert_array_equal(take_when_ready(a), [5, 6, 9, 10, 11])
        assert switch(True) and counting(4).flags.writeable        # restored; counting fresh again
    finally:
        switch(advised)
