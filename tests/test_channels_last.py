"""qonnx's channels-last layout (hls4ml's channels-last QONNX test models are in it): Conv, MaxPool and
BatchNormalization in the ``qonnx.custom_op.channels_last`` domain on NHWC tensors. The models here are
our channels-first test models put into that layout by qonnx's own ConvertToChannelsLastAndClean; rtlgen
turns them back (rtlgen.passes.channels_last). Golden: qonnx execute_onnx on the channels-last model."""

from pathlib import Path

import numpy as np
import pytest
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
from qonnx.util.cleanup import cleanup_model

from tests.conftest import rtl_matches_qonnx
from rtlgen.passes.channels_last import DOMAIN
from rtlgen.passes.to_hw import stream_io
from rtlgen.check.execute import run_golden
from rtlgen.passes.load import load_model
from rtlgen.passes.lower import lower
from rtlgen.check.verify import verify_outputs

MODELS = Path(__file__).parent / "models"
CASES = {       # model, input shape, hardware ops expected
    "small_cnn": (MODELS / "small_cnn.onnx", (1, 1, 8, 8), {"MVAU": 3}),
    "resnet_identity": (MODELS / "residual_float" / "resnet_identity.onnx", (1, 3, 8, 8), {"AddStreams": 1}),
    "grouped_cnn": (MODELS / "grouped" / "grouped_cnn.onnx", (1, 4, 8, 8), {"MVAU": 3}),
}


def channels_last(name, tmp_path):
    path, _, _ = CASES[name]
    model = cleanup_model(ModelWrapper(str(path))).transform(ConvertToChannelsLastAndClean(make_input_channels_last=False))
    assert any(n.domain == DOMAIN for n in model.graph.node)
    out = tmp_path / f"{name}_channels_last.onnx"
    model.save(str(out))
    return out


@pytest.mark.parametrize("name", CASES)
def test_channels_last_models_lower_like_their_originals(name, tmp_path):
    path = channels_last(name, tmp_path)
    model = load_model(path)
    assert not any(n.op_type == "Transpose" or n.domain == DOMAIN for n in model.graph.node)
    graph = lower(model)
    ops = [n.op_type for n in graph.nodes]
    for op, count in CASES[name][2].items():
        assert ops.count(op) == count, ops
    io = stream_io(model, graph)
    x = np.random.default_rng(3).standard_normal((16, *CASES[name][1])).astype(np.float32)
    result = verify_outputs(path, x, io.output_from_codes(run_golden(graph, io.input_codes(x))), io)
    assert result.passed, result.summary()


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.parametrize("name", ["small_cnn", "resnet_identity"])
def test_channels_last_rtl_at_the_ii_and_under_backpressure(name, tmp_path):
    path = channels_last(name, tmp_path)
    x = np.random.default_rng(5).standard_normal((8, *CASES[name][1])).astype(np.float32)
    rtl_matches_qonnx(path, x, tmp_path / "out", seed=6)
