"""Grouped convolutions other than one-to-one depthwise: a depthwise conv with a channel multiplier
(groups=4, 4 -> 8 channels) and groups=2 (tests/models/grouped). They run as dense convolutions with
block-diagonal weights, with a warning saying so; golden: qonnx on the original model."""

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import rtl_matches_qonnx
from rtlgen.passes.to_hw import stream_io
from rtlgen.check.execute import run_golden
from rtlgen.passes.load import CompileError, CompileWarning, load_model
from rtlgen.passes.lower import lower
from rtlgen.passes.weight_codes import dense_grouped_weights
from rtlgen.check.verify import verify_outputs

MODEL = Path(__file__).parent / "models" / "grouped" / "grouped_cnn.onnx"


def test_grouped_convs_match_qonnx():
    model = load_model(MODEL)
    with pytest.warns(CompileWarning) as record:
        graph = lower(model)
    messages = [str(w.message) for w in record if issubclass(w.category, CompileWarning)]
    assert any("group=4 of 4 input and 8 output channels runs as a dense convolution" in m for m in messages)
    assert any("group=2 of 8 input and 8 output channels" in m for m in messages)
    io = stream_io(model, graph)
    x = np.random.default_rng(7).standard_normal((32, 1, 4, 8, 8)).astype(np.float32)
    ours = io.output_from_codes(run_golden(graph, io.input_codes(x)))
    result = verify_outputs(MODEL, x, ours, io)
    assert result.passed, result.summary()


def test_block_diagonal_weights_are_the_grouped_convolution():
    """Independent of the lowering: numpy's grouped conv (per group, a dense conv of its channels) at one
    pixel equals the dense conv with the block-diagonal weights."""
    rng = np.random.default_rng(0)
    codes = rng.integers(-8, 8, (6, 2, 3, 3))                   # groups=3: 6 in, 6 out, 2 in per group
    dense = dense_grouped_weights(codes, 3, 6, node=None)
    window = rng.integers(-8, 8, (6, 3, 3))
    grouped = [np.sum(codes[o] * window[(o // 2) * 2:(o // 2) * 2 + 2]) for o in range(6)]
    assert [int(np.sum(dense[o] * window)) for o in range(6)] == grouped


def test_a_group_count_that_does_not_divide_the_channels_is_refused():
    class Node:
        name = "Conv_7"
    with pytest.raises(CompileError, match=r"node Conv_7 \(Conv\): group=4 must divide the 6 input and 8 output"):
        dense_grouped_weights(np.zeros((8, 1, 3, 3), np.int64), 4, 6, Node())


@pytest.mark.slow
@pytest.mark.sim
def test_grouped_cnn_rtl_at_the_ii_and_under_backpressure(tmp_path):
    x = np.random.default_rng(8).standard_normal((8, 1, 4, 8, 8)).astype(np.float32)
    rtl_matches_qonnx(MODEL, x, tmp_path, seed=2)
