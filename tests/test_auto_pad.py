"""``auto_pad`` as exporters write it (SAME_UPPER, SAME_LOWER, VALID) compiles like the explicit pads it
stands for. tests/models/small_cnn.onnx rewritten with auto_pad on its Convs and MaxPool, including a
stride-2 SAME conv on an even size, whose single pad goes to the end (UPPER) or the start (LOWER).
Golden: qonnx (onnxruntime applies auto_pad itself) on the rewritten model."""

from pathlib import Path

import numpy as np
import onnx
import pytest

from rtlgen.cli import main
from rtlgen.passes.to_hw import stream_io
from rtlgen.check.execute import run_golden
from rtlgen.passes.load import load_model
from rtlgen.passes.lower import lower
from rtlgen.check.verify import verify_outputs

SMALL_CNN = Path(__file__).parent / "models" / "small_cnn.onnx"
VARIANTS = {   # node -> (auto_pad, strides)
    "same-upper": {"Conv_0": ("SAME_UPPER", None), "Conv_1": ("SAME_UPPER", [2, 2]), "MaxPool_0": ("VALID", None)},
    "same-lower": {"Conv_0": ("SAME_LOWER", None), "Conv_1": ("SAME_LOWER", [2, 2])},
}


def rewritten(tmp_path, variant):
    model = onnx.load(str(SMALL_CNN))
    for node in model.graph.node:
        if node.name not in VARIANTS[variant]:
            continue
        mode, strides = VARIANTS[variant][node.name]
        keep = [a for a in node.attribute if a.name not in ("pads",) and not (strides and a.name == "strides")]
        del node.attribute[:]
        node.attribute.extend(keep + [onnx.helper.make_attribute("auto_pad", mode)])
        if strides:
            node.attribute.append(onnx.helper.make_attribute("strides", strides))
    del model.graph.value_info[:]           # shapes are inferred again
    path = tmp_path / f"{variant}.onnx"
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("variant", VARIANTS)
def test_auto_pad_lowers_to_the_pads_it_stands_for(tmp_path, variant):
    path = rewritten(tmp_path, variant)
    model = load_model(path)
    graph = lower(model)
    pads = [n.params for n in graph.nodes if n.op_type == "FMPadding"]
    io = stream_io(model, graph)
    x = np.random.default_rng(4).standard_normal((16, 1, 1, 8, 8)).astype(np.float32)
    ours = io.output_from_codes(run_golden(graph, io.input_codes(x)))
    result = verify_outputs(path, x, ours, io)
    assert result.passed, result.summary()
    assert len(pads) == 2, pads         # both convs padded; the second by one row and column only


def test_an_unknown_auto_pad_is_refused(tmp_path, capsys):
    model = onnx.load(str(SMALL_CNN))
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    keep = [a for a in conv.attribute if a.name != "pads"]
    del conv.attribute[:]
    conv.attribute.extend(keep + [onnx.helper.make_attribute("auto_pad", "SAME")])
    path = tmp_path / "bad.onnx"
    onnx.save(model, str(path))
    assert main(["compile", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"rtlgen compile: error: node Conv_0 (Conv): auto_pad=SAME is not an ONNX value; legal: NOTSET, "
                   f"SAME_UPPER, SAME_LOWER, VALID"], err
