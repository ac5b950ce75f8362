"""Shared drivers for the MVAU and VVAU tests: random specs, stimulus, golden comparison."""

from math import prod

import numpy as np
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from memstream.packing import pack_words, unpack_words
from layers.mvau import golden_mvau
from sim.harness import simulate_streams


def random_thresholds(rng, channels, steps, lo, hi):
    """Random ascending integer thresholds in [lo, hi + 1] (FINN's tests sort random integers)."""
    return np.sort(rng.integers(lo, hi + 2, size=(channels, steps)), axis=1)


def activation_args(act, rng, channels, acc_range):
    """(thresholds, output_dtype, act_val) for FINN's activation grid values None / BIPOLAR / INTn."""
    if act is None:
        return None, None, 0
    odt = DataType[act]
    steps = 1 if odt.name == "BIPOLAR" else (1 << odt.bitwidth()) - 1
    act_val = 0 if odt.name == "BIPOLAR" else int(odt.min())
    return random_thresholds(rng, channels, steps, *acc_range), odt, act_val


def expected_mvau(spec, x):
    bipolar_out = spec.output_dtype.name == "BIPOLAR"
    return golden_mvau(x, spec.weights, spec.thresholds, spec.act_val, spec.xnor, bipolar_out)


def run_unit(design, spec, x, expected, backpressure, simulator=None, in_lanes=None):
    """Stream x (frames, *vecs, elems) through a MVAU/VVAU; compare with ``expected``; return the result."""
    frames = x.shape[0]
    in_lanes = in_lanes or spec.simd
    inputs = {"i": list(pack_words(x.reshape(-1, in_lanes), spec.input_dtype))}
    vectors = frames * prod(spec.num_input_vectors)
    if spec.mem_mode == "external":
        inputs["w"] = spec.external_weight_words(vectors)
    out_words = vectors * spec.nf
    slack = 1.0 / min(backpressure.valid_prob, backpressure.ready_prob)
    max_cycles = int(slack * (frames * spec.exp_cycles + len(inputs["i"]) + out_words)) + 2000
    result = simulate_streams(design, inputs=inputs, outputs={"o": out_words}, backpressure=backpressure,
                              simulator=simulator, max_cycles=max_cycles)
    y = unpack_words(np.array(result.words("o"), dtype=object), spec.output_dtype, spec.pe)
    y = y.reshape(expected.shape)
    if not np.array_equal(y, expected):
        bad = np.argwhere(y != expected)
        raise AssertionError(f"{len(bad)} of {y.size} outputs differ; first at {tuple(bad[0])}: "
                             f"got {y[tuple(bad[0])]}, expected {expected[tuple(bad[0])]}")
    return result


def random_input(spec, frames, rng_seed):
    np.random.seed(rng_seed)
    return gen_finn_dt_tensor(spec.input_dtype, (frames, *spec.num_input_vectors, spec.in_elems))
