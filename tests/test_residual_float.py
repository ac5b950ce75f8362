"""Residual adds as Brevitas exports them: float (learned, not power-of-two) scales.

tests/models/residual_float (made by its make_models.py): a ResNet block with an identity shortcut and one
with a stride-2 1x1 conv shortcut (per-channel weight scales), both with one QuantIdentity shared by the
two branches, and the identity block with an unshared quantizer per branch (scales 0.4874 and 0.5362:
no common integer grid). The accelerator adds integer codes exactly; qonnx adds two float32 products in
float32, so the two may differ only where a quantizer after the Add sits on a rounding tie, which
``verify`` classifies. Golden: qonnx ``execute_onnx`` on the original model.
"""

from pathlib import Path

import numpy as np
import onnx
import pytest
from qonnx.core.datatype import DataType

from tests.conftest import rtl_matches_qonnx
from rtlgen.cli import main
from rtlgen.passes.to_hw import stream_io
from rtlgen.check.execute import run_golden
from rtlgen.passes.load import CompileError, load_model
from rtlgen.ir.graph import StreamTensor
from rtlgen.passes.exact_scales import order_preserving_factors
from rtlgen.passes.lower import lower
from rtlgen.check.verify import verify_outputs

MODELS = Path(__file__).parent / "models" / "residual_float"
NAMES = ["resnet_identity", "resnet_conv_shortcut", "resnet_unshared"]


def images(n, seed):
    return np.random.default_rng(seed).uniform(-2, 2, (n, 1, 3, 8, 8)).astype(np.float32)


@pytest.mark.parametrize("name", NAMES)
def test_lowered_graph_matches_qonnx(name):
    """The lowered graph's layer goldens (host ops around them) against qonnx on 64 images."""
    model = load_model(MODELS / f"{name}.onnx")
    graph = lower(model)
    io = stream_io(model, graph)
    assert [n.op_type for n in graph.nodes].count("AddStreams") == 1
    x = images(64, seed=2)
    ours = io.output_from_codes(run_golden(graph, io.input_codes(x)))
    result = verify_outputs(MODELS / f"{name}.onnx", x, ours, io)
    assert result.passed, result.summary()


def _rtl_case(name, tmp_path_factory):
    x = images(12, seed=3)
    rtl_matches_qonnx(MODELS / f"{name}.onnx", x, tmp_path_factory.mktemp(name))


@pytest.mark.sim
def test_unshared_scales_rtl_at_the_ii_and_under_backpressure(tmp_path_factory):
    _rtl_case("resnet_unshared", tmp_path_factory)


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.parametrize("name", ["resnet_identity", "resnet_conv_shortcut"])
def test_shared_scales_rtl_at_the_ii_and_under_backpressure(name, tmp_path_factory):
    _rtl_case(name, tmp_path_factory)


def _order_kept(a, b, factors):
    """Brute force, independent of the lowering: every two pairs of codes compare the same way by the
    real sum and by the integer sum (a strictly larger real sum has a strictly larger integer sum)."""
    ca = np.arange(int(a.dtype.min()), int(a.dtype.max()) + 1)
    cb = np.arange(int(b.dtype.min()), int(b.dtype.max()) + 1)
    pa, pb = np.meshgrid(ca, cb)
    real = float(np.float32(a.scale)) * pa.ravel() + float(np.float32(b.scale)) * pb.ravel()
    ints = factors[0] * pa.ravel() + factors[1] * pb.ravel()
    larger = real[:, None] > real[None, :]
    return bool((ints[:, None] > ints[None, :])[larger].all())


@pytest.mark.parametrize("seed", range(6))
def test_order_preserving_factors_keep_the_order_of_every_pair(seed):
    rng = np.random.default_rng(seed)
    a = StreamTensor("a", DataType[rng.choice(["INT4", "UINT4", "INT3"])], float(rng.uniform(0.01, 1)), (1, 4))
    b = StreamTensor("b", DataType[rng.choice(["INT4", "UINT3"])], float(rng.uniform(0.01, 1)), (1, 4))
    factors = order_preserving_factors(a, b, CompileError("none"))
    assert _order_kept(a, b, factors)
    # the check bites: the nearest small-integer ratio does not keep the order
    assert not _order_kept(a, b, [1, max(1, round(float(b.scale) / float(a.scale)))])


def test_a_sum_on_the_grid_read_by_anything_but_a_quantizer_is_refused(tmp_path, capsys):
    """resnet_unshared with the quantizer after the Add (and its ReLU) removed: the pooling reads the sum."""
    model = onnx.load(str(MODELS / "resnet_unshared.onnx"))
    nodes = list(model.graph.node)
    add = next(n for n in nodes if n.op_type == "Add")
    relu = next(n for n in nodes if add.output[0] in n.input)
    quant = next(n for n in nodes if relu.output[0] in n.input)
    for n in nodes:
        n.input[:] = [add.output[0] if i == quant.output[0] else i for i in n.input]
    model.graph.node.remove(relu)
    model.graph.node.remove(quant)
    path = tmp_path / "no_requant.onnx"
    onnx.save(model, str(path))
    assert main(["compile", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a residual sum of branches with unrelated float scales" in err[0] and \
        "only a quantizer may read it" in err[0], err
