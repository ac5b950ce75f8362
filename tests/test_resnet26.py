"""A ResNet-18-scale network as people export it (tests/models/resnet26: 28 Convs, 12 residual Adds,
4-bit, Brevitas' default float scales, shared and unshared branch quantizers): lowers to hardware whole,
and (slow) compiles at a low target rate and is bit-exact against qonnx in RTL simulation."""

from pathlib import Path

import numpy as np
import pytest

from rtlgen.cli import main
from rtlgen.passes.load import load_model
from rtlgen.passes.lower import lower

HERE = Path(__file__).parent / "models" / "resnet26"
MODEL = HERE / "resnet26_w4a4.onnx"


def test_every_conv_and_residual_add_goes_to_hardware():
    graph = lower(load_model(MODEL))
    ops = [n.op_type for n in graph.nodes]
    assert ops.count("AddStreams") == 12
    assert ops.count("MVAU") == 28 + 1          # the convolutions and the classifier
    assert graph.host_pre == ["Quant_0"] and graph.host_post == []


@pytest.mark.slow
@pytest.mark.sim
def test_compiles_at_a_low_rate_and_verifies(tmp_path, capsys):
    out = tmp_path / "r26"
    assert main(["compile", str(MODEL), "-o", str(out), "--target-fps", "1000", "-q"]) == 0
    assert main(["verify", str(out), "--input", str(HERE / "images.npy")]) == 0
    printed = capsys.readouterr().out
    assert "4 samples, 40 output values match qonnx" in printed, printed
