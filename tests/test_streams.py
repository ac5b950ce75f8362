"""AddStreams, DuplicateStreams, StreamingConcat: bit-exact against golden (itself checked against ONNX
Add and Concat), one word per cycle, independent backpressure on every port."""

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from hypothesis import given, settings
from hypothesis import strategies as st
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from layers.fifo import FIFOSpec, StreamingFIFO
from layers.duplicate_streams import DuplicateStreams, DuplicateStreamsSpec
from layers.streams import AddStreams, AddStreamsSpec, StreamingConcat, StreamingConcatSpec
from memstream.packing import pack_words, unpack_words
from layers.streams import golden_add_streams, golden_concat
from sim.harness import FULL_RATE, Backpressure, simulate_streams
from tests.conftest import RANDOM_EXAMPLES, simulators_under_test, verilog_once




def _unpack(result, port, dtype, lanes, shape):
    return unpack_words(np.array(result.words(port), dtype=object), dtype, lanes).reshape(shape)


# --- AddStreams ----------------------------------------------------------------------------------

def run_add(spec, frames, backpressure, simulator=None, seed=1):
    np.random.seed(seed)
    shape = (frames, *spec.num_input_vectors, spec.num_channels)
    a, b = gen_finn_dt_tensor(spec.input_dtype, shape), gen_finn_dt_tensor(spec.input_dtype, shape)
    expected = golden_add_streams(a, b)
    inputs = {"i0": list(pack_words(a.reshape(-1, spec.pe), spec.input_dtype)),
              "i1": list(pack_words(b.reshape(-1, spec.pe), spec.input_dtype))}
    result = simulate_streams(verilog_once(AddStreams, spec), inputs=inputs, outputs={"o": frames * spec.words},
                              backpressure=backpressure, simulator=simulator)
    assert np.array_equal(_unpack(result, "o", spec.output_dtype, spec.pe, shape), expected)
    return result


def check_add(spec, simulator=None, seed=1):
    full = run_add(spec, 3, FULL_RATE, simulator, seed)
    assert full.steady_cycles("o", spec.words) == spec.exp_cycles
    run_add(spec, 3, Backpressure(seed=seed), simulator, seed)


@pytest.mark.sim
@settings(max_examples=RANDOM_EXAMPLES)
@given(cf=st.integers(1, 4), pe=st.integers(1, 4), dtype=st.sampled_from(["BIPOLAR", "BINARY", "INT3", "UINT5"]),
       vecs=st.sampled_from([(1,), (2,), (1, 3)]), seed=st.integers(0, 9999))
def test_add_random_specs(cf, pe, dtype, vecs, seed):
    run_add(AddStreamsSpec(cf * pe, pe, dtype, vecs), 3, Backpressure(seed=seed), seed=seed)


def test_add_output_dtype_follows_finn():
    # FINN: signed -> smallest INT holding 2*min; unsigned -> smallest UINT holding 2*max
    assert AddStreamsSpec(4, 2, "UINT4").output_dtype == DataType["UINT5"]
    assert AddStreamsSpec(4, 2, "UINT8").output_dtype == DataType["UINT9"]
    assert AddStreamsSpec(4, 2, "INT4").output_dtype == DataType["INT5"]
    assert AddStreamsSpec(4, 2, "BINARY").output_dtype == DataType["UINT2"]
    assert AddStreamsSpec(4, 2, "BIPOLAR").output_dtype == DataType["INT3"]     # -2 .. 2
    spec = AddStreamsSpec(64, 8, "INT4", (1, 2, 2))
    assert (spec.exp_cycles, spec.in_width, spec.out_width) == (32, 32, 40)
    assert spec.folded_input_shape == (1, 2, 2, 8, 8)


# --- DuplicateStreams ----------------------------------------------------------------------------

def run_dup(spec, frames, backpressure, simulator=None, seed=1):
    np.random.seed(seed)
    shape = (frames, *spec.num_input_vectors, spec.num_channels)
    x = gen_finn_dt_tensor(spec.dtype, shape)
    outs = [f"o{k}" for k in range(spec.num_output_streams)]
    words = list(pack_words(x.reshape(-1, spec.pe), spec.dtype))
    result = simulate_streams(verilog_once(DuplicateStreams, spec), inputs={"i": words},
                              outputs={o: frames * spec.words for o in outs}, backpressure=backpressure,
                              simulator=simulator)
    for o in outs:
        assert np.array_equal(_unpack(result, o, spec.dtype, spec.pe, shape), x)
    return result


# Bit-exact at the II and under backpressure over a few shapes: Op.examples, simulated by tests/test_op_grid.py.


@pytest.mark.sim
def test_duplicate_outputs_drift_apart_by_the_buffer_only(simulator):
    # With backpressure the outputs take their words in different cycles, but never more than
    # buffer_words apart: the k-th word leaves every output before word k + buffer_words enters.
    spec = DuplicateStreamsSpec(4, 2, 3, "INT4", (1, 6))
    result = run_dup(spec, 3, Backpressure(seed=11, valid_prob=0.9, ready_prob=0.5), simulator)
    ins = result.in_cycles("i")
    outs = [result.out_cycles(f"o{k}") for k in range(3)]
    assert any(outs[0] != o for o in outs[1:])
    for k in range(len(ins) - spec.buffer_words):
        assert max(o[k] for o in outs) < ins[k + spec.buffer_words]


@pytest.mark.sim
@settings(max_examples=RANDOM_EXAMPLES)
@given(n=st.integers(2, 4), cf=st.integers(1, 3), pe=st.integers(1, 3), dtype=st.sampled_from(["BINARY", "INT3"]),
       seed=st.integers(0, 9999))
def test_duplicate_random_specs(n, cf, pe, dtype, seed):
    run_dup(DuplicateStreamsSpec(cf * pe, pe, n, dtype, (1, 3)), 3, Backpressure(seed=seed), seed=seed)


# --- StreamingConcat -----------------------------------------------------------------------------

def run_concat(spec, frames, backpressure, simulator=None, seed=1):
    np.random.seed(seed)
    xs = [gen_finn_dt_tensor(spec.dtype, (frames, *spec.num_input_vectors, c)) for c in spec.channels_per_stream]
    expected = golden_concat(xs)
    inputs = {f"i{k}": list(pack_words(x.reshape(-1, spec.simd), spec.dtype)) for k, x in enumerate(xs)}
    result = simulate_streams(verilog_once(StreamingConcat, spec), inputs=inputs,
                              outputs={"o": frames * spec.out_words}, backpressure=backpressure, simulator=simulator)
    assert np.array_equal(_unpack(result, "o", spec.dtype, spec.simd, expected.shape), expected)
    return result


# Bit-exact at the II and under backpressure over a few shapes: Op.examples, simulated by tests/test_op_grid.py.


@pytest.mark.sim
@settings(max_examples=RANDOM_EXAMPLES)
@given(folds=st.lists(st.integers(1, 3), min_size=2, max_size=4), simd=st.integers(1, 3),
       dtype=st.sampled_from(["BINARY", "INT3", "UINT4"]), seed=st.integers(0, 9999))
def test_concat_random_specs(folds, simd, dtype, seed):
    spec = StreamingConcatSpec(tuple(f * simd for f in folds), simd, dtype, (1, 3))
    run_concat(spec, 3, Backpressure(seed=seed), seed=seed)


class _ConcatBehindFIFOs(wiring.Component):
    """A depth-2 FIFO in front of each input of a StreamingConcat, as stitching puts them: the concat's
    input valids are registers that hold their initial 0 through reset, with no event."""

    def __init__(self, spec):
        self.spec = spec
        super().__init__({**{f"i{k}": In(stream.Signature(spec.width)) for k in range(spec.num_inputs)},
                          "o": Out(stream.Signature(spec.width))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.concat = concat = StreamingConcat(self.spec)
        for k in range(self.spec.num_inputs):
            m.submodules[f"fifo{k}"] = fifo = StreamingFIFO(FIFOSpec(self.spec.width, 2))
            wiring.connect(m, wiring.flipped(getattr(self, f"i{k}")), fifo.i)
            wiring.connect(m, fifo.o, getattr(concat, f"i{k}"))
        wiring.connect(m, concat.o, wiring.flipped(self.o))
        return m


@pytest.mark.sim
@pytest.mark.parametrize("sim_name", simulators_under_test(slow=("verilator",)))
def test_concat_behind_fifos(sim_name):
    """Regression (tests/models/branching/concat_mixed.onnx deadlocked on Icarus): with Array-indexed
    input multiplexers Yosys wrote ``always @*`` blocks that Icarus -g2012 never ran, since nothing in
    them changed after time 0; the valid stayed X, the output FIFO's level went X and no word left."""
    spec = StreamingConcatSpec((2, 3), 1, "INT3", (1, 2))
    inputs = {"i0": [1, 2, 3, 4], "i1": [5, 6, 7, 0, 1, 2]}
    result = simulate_streams(_ConcatBehindFIFOs(spec), inputs=inputs, outputs={"o": 10}, simulator=sim_name)
    assert result.words("o") == [1, 2, 5, 6, 7, 3, 4, 0, 1, 2]


# --- every layer on every simulator, goldens against ONNX, derived figures, errors ----------------

@pytest.mark.sim
@pytest.mark.parametrize("sim_name", simulators_under_test(slow=("verilator",)))
def test_each_simulator(sim_name):
    run_add(AddStreamsSpec(6, 3, "INT4", (1, 2)), 3, Backpressure(seed=2), sim_name)
    run_dup(DuplicateStreamsSpec(6, 2, 2, "UINT3", (1, 2)), 3, Backpressure(seed=3), sim_name)
    run_concat(StreamingConcatSpec((2, 6), 2, "INT3", (1, 2)), 3, Backpressure(seed=4), sim_name)


def _onnx_run(node, inputs, out_shape):
    # onnxruntime directly: qonnx's execute_onnx wraps each node in a model of the newest IR version,
    # which the installed onnxruntime refuses.
    import onnxruntime
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [node], "ref", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(v.shape)) for n, v in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {n: v.astype(np.float32) for n, v in inputs.items()})[0]


def test_goldens_match_onnx():
    from onnx import helper

    rng = np.random.default_rng(0)
    a, b = rng.integers(-8, 8, size=(2, 3, 3, 16)), rng.integers(-8, 8, size=(2, 3, 3, 16))
    theirs = _onnx_run(helper.make_node("Add", ["a", "b"], ["y"]), {"a": a, "b": b}, a.shape)
    assert np.array_equal(golden_add_streams(a, b), theirs)
    xs = {f"x{k}": rng.integers(0, 16, size=(2, 3, 3, c)) for k, c in enumerate((2, 6, 4))}
    theirs = _onnx_run(helper.make_node("Concat", list(xs), ["y"], axis=-1), xs, (2, 3, 3, 12))
    assert np.array_equal(golden_concat(list(xs.values())), theirs)


def test_derived_figures():
    dup = DuplicateStreamsSpec(8, 2, 3, "INT4", (1, 3, 3))
    assert (dup.exp_cycles, dup.in_width, dup.buffer_words) == (36, 8, 3)
    cat = StreamingConcatSpec((2, 6, 4), 2, "INT4", (1, 3))
    assert (cat.num_channels, cat.input_folds, cat.out_words, cat.exp_cycles) == (12, (1, 3, 2), 18, 18)
    assert cat.folded_input_shapes[1] == (1, 3, 3, 2) and cat.folded_output_shape == (1, 3, 6, 2)
    for spec in (dup, cat, AddStreamsSpec(4, 2, "INT4")):
        assert set(spec.resource_estimate()) == {"LUT", "FF", "BRAM18", "DSP"}


@pytest.mark.parametrize("make, message", [
    (lambda: AddStreamsSpec(6, 4, "INT4"), r"^AddStreams pe=4 must divide num_channels=6; legal: 1, 2, 3, 6$"),
    (lambda: AddStreamsSpec(0, 1, "INT4"), r"^AddStreams num_channels must be a positive integer, not 0$"),
    (lambda: AddStreamsSpec(4, 1, "FLOAT32"), r"^AddStreams input_dtype=FLOAT32 is not supported; legal: BIPOLAR"),
    (lambda: AddStreamsSpec(4, 1, "INT4", (1, 0)),
     r"^AddStreams num_input_vectors must be positive integers, not \(1, 0\)$"),
    (lambda: DuplicateStreamsSpec(4, 2, 1), r"^DuplicateStreams num_output_streams must be an integer >= 2, not 1$"),
    (lambda: DuplicateStreamsSpec(4, 3, 2), r"^DuplicateStreams pe=3 must divide num_channels=4; legal: 1, 2, 4$"),
    (lambda: DuplicateStreamsSpec(4, 2, 2, "FOO"), r"^DuplicateStreams dtype='FOO' is not a qonnx DataType name$"),
    (lambda: StreamingConcatSpec((4,), 2), r"^StreamingConcat channels_per_stream must be at least 2 positive "
                                           r"integers, not \(4,\)$"),
    (lambda: StreamingConcatSpec((4, 0), 1), r"^StreamingConcat channels_per_stream must be at least 2"),
    (lambda: StreamingConcatSpec((4, 6), 4), r"^StreamingConcat simd=4 must divide every channel count, but input 1 "
                                             r"has 6 channels; legal: 1, 2$"),
    (lambda: StreamingConcatSpec((4, 6), 2, "INT4", ()), r"^StreamingConcat num_input_vectors must be positive"),
])
def test_illegal_specs(make, message):
    with pytest.raises(ValueError, match=message):
        make()
