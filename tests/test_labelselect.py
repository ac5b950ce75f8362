"""LabelSelect: bit-exact against golden (checked against ONNX TopK), FINN's ties and dtype.min quirk."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from layers.labelselect import LabelSelect, LabelSelectSpec
from memstream.packing import pack_words, unpack_words
from layers.labelselect import golden_label_select
from sim.harness import FULL_RATE, Backpressure, simulate_streams
from tests.conftest import RANDOM_EXAMPLES, simulators_under_test


def run(spec, frames, backpressure, simulator=None, seed=1, x=None):
    np.random.seed(seed)
    if x is None:
        x = gen_finn_dt_tensor(spec.input_dtype, (frames, *spec.num_input_vectors, spec.labels))
    expected = golden_label_select(x, spec.k, int(spec.input_dtype.min()))
    words = pack_words(x.reshape(-1, spec.pe), spec.input_dtype)
    result = simulate_streams(LabelSelect(spec), inputs={"i": list(words)}, outputs={"o": len(x) * spec.out_words},
                              backpressure=backpressure, simulator=simulator)
    y = unpack_words(np.array(result.words("o"), dtype=object), spec.output_dtype, 1)
    assert np.array_equal(y.reshape(expected.shape), expected)
    return result


def check(spec, simulator=None, seed=1, x=None):
    full = run(spec, 3, FULL_RATE, simulator, seed, x)
    assert full.steady_cycles("o", spec.out_words) == spec.exp_cycles
    run(spec, 3, Backpressure(seed=seed), simulator, seed, x)


def _corner_vectors(labels, dtype):
    """Ties, minimum values and extremes, one vector each."""
    dt = DataType[dtype]
    lo, hi = int(dt.min()), int(dt.max())
    rows = [np.full(labels, lo),                                    # all at min: every index 0
            np.full(labels, hi),                                    # all tied: 0, 1, 2, ...
            np.where(np.arange(labels) % 3 == 1, lo + 1, lo),       # fewer than K above min at the end
            np.where(np.arange(labels) == labels - 1, hi, lo),      # a single label above min
            np.arange(labels) % 4 + lo,                             # four-way ties, ascending
            (-np.arange(labels)) % 3 + hi - 2]                      # three-way ties, descending
    return np.stack(rows)[:, None, :]


CORNERS = [(10, 1, 5, "INT16"), (6, 6, 6, "UINT2")]
SLOW_CORNERS = [(10, 5, 5, "UINT8"), (12, 4, 3, "INT4")]


@pytest.mark.sim
@pytest.mark.parametrize("labels, pe, k, dtype", CORNERS + [pytest.param(*c, marks=pytest.mark.slow) for c in SLOW_CORNERS])
def test_ties_and_minimum(labels, pe, k, dtype, simulator):
    x = _corner_vectors(labels, dtype)
    spec = LabelSelectSpec(labels, pe, k, dtype, (1,))
    run(spec, len(x), FULL_RATE, simulator, x=x)
    run(spec, len(x), Backpressure(seed=4), simulator, x=x)


def test_golden_quirks():
    assert golden_label_select(np.array([[0, 0, 0]]), 2, 0).tolist() == [[0, 0]]
    assert golden_label_select(np.array([[-8, 3, -8, 3, 5]]), 4, -8).tolist() == [[4, 1, 3, 0]]
    assert golden_label_select(np.array([[2, 7, 7, 1]]), 3, 0).tolist() == [[1, 2, 0]]


@pytest.mark.parametrize("dtype, labels, k", [("INT16", 100, 5), ("UINT8", 10, 1), ("UINT2", 40, 7), ("INT4", 10, 10)])
def test_golden_matches_onnx_topk(dtype, labels, k):
    """ONNX TopK (largest, sorted; ties to the lower index) where no value is at dtype.min."""
    import onnxruntime as rt
    from onnx import TensorProto, helper

    np.random.seed(labels + k)
    dt = DataType[dtype]
    x = gen_finn_dt_tensor(dt, (8, labels))
    x = np.where(x == dt.min(), dt.min() + 1, x)        # FINN's list ignores dtype.min; TopK does not
    graph = helper.make_graph(
        [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1, largest=1, sorted=1)], "topk",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, (8, k)),
         helper.make_tensor_value_info("i", TensorProto.INT64, (8, k))],
        [helper.make_tensor("k", TensorProto.INT64, [1], [k])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    theirs = rt.InferenceSession(model.SerializeToString()).run(None, {"x": x.astype(np.float32)})[1]
    assert np.array_equal(golden_label_select(x, k, int(dt.min())), theirs)


@pytest.mark.sim
@pytest.mark.parametrize("sim_name", simulators_under_test(slow=("verilator",)))
def test_each_simulator(sim_name):
    run(LabelSelectSpec(12, 3, 5, "INT8", (2,)), 3, Backpressure(seed=2), sim_name)


@pytest.mark.sim
@settings(max_examples=RANDOM_EXAMPLES)
@given(nf=st.integers(1, 6), pe=st.integers(1, 4), k=st.integers(1, 6), vecs=st.integers(1, 3),
       idt=st.sampled_from(["UINT2", "INT3", "BIPOLAR", "UINT8"]), seed=st.integers(0, 9999))
def test_random_specs(nf, pe, k, vecs, idt, seed):
    # One run under random backpressure (the grid cases measure cycles).
    run(LabelSelectSpec(nf * pe, pe, min(k, nf * pe), idt, (vecs,)), 3, Backpressure(seed=seed), seed=seed)


@pytest.mark.parametrize("kwargs, message", [
    (dict(pe=3), r"^LabelSelect pe=3 must divide labels=10; legal pe: 1, 2, 5, 10$"),
    (dict(k=11), r"^LabelSelect k=11 must not exceed labels=10$"),
    (dict(k=0), r"^LabelSelect k must be a positive integer, not 0$"),
    (dict(labels=0), r"^LabelSelect labels must be a positive integer, not 0$"),
    (dict(input_dtype="FLOAT32"), r"^LabelSelect input_dtype=FLOAT32 is not supported"),
    (dict(input_dtype="WORD"), r"^LabelSelect input_dtype='WORD' is not a qonnx DataType name$"),
    (dict(num_input_vectors=(1, 0)), r"^LabelSelect num_input_vectors must be positive integers"),
])
def test_illegal_specs(kwargs, message):
    args = dict(labels=10, pe=2, k=3, input_dtype="UINT8")
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        LabelSelectSpec(**args)


def test_derived_figures():
    spec = LabelSelectSpec(100, 10, 5, "INT16", (1, 2))
    assert (spec.output_dtype.name, spec.nf, spec.in_width, spec.out_width) == ("UINT8", 10, 160, 8)
    assert (spec.folded_input_shape, spec.folded_output_shape) == ((1, 2, 10, 10), (1, 2, 5, 1))
    assert (spec.exp_cycles, spec.min_code) == (20, -32768)
    assert LabelSelectSpec(10, 10, 5, "UINT8").exp_cycles == 5          # K output words bound the rate
    assert LabelSelectSpec(1000, 1, 1, "UINT8").output_dtype.name == "UINT16"
    assert LabelSelectSpec(1, 1, 1, "UINT8").output_dtype.name == "UINT8"
    assert set(spec.resource_estimate()) == {"LUT", "FF", "BRAM18", "DSP"}
