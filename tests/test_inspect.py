"""`rtlgen inspect`: every folding value it lists as legal is accepted by the folding pass, on TFC, CNV,
a residual network and a depthwise block; host ops are listed with the reason."""

import json
from pathlib import Path

import pytest

from rtlgen.cli import main
from rtlgen.flows import INSPECT, Runner
from rtlgen.options import CompileOptions
from rtlgen.passes.fold import fold
from rtlgen.passes.to_hw import to_hw
from rtlgen.report.describe import describe
from rtlgen.passes.fold import apply_folding_config
from rtlgen.passes.load import load_model

MODELS = Path(__file__).parent / "models"
CASES = ["TFC_2W2A.onnx", "cnv_1w1a_ts_clean.onnx", "branching/resnet_block.onnx", "branching/mobilenetv2_block.onnx"]


@pytest.mark.parametrize("name", CASES)
def test_every_listed_value_is_accepted_by_the_folding_pass(name):
    options = CompileOptions()
    runner = Runner()
    inspected = runner.run(INSPECT, MODELS / name, options)
    info = describe(MODELS / name, runner.results["load"], inspected)
    graph = fold(to_hw(load_model(MODELS / name), options), options)
    assert [n["name"] for n in info["nodes"]] == [n.name for n in graph.nodes]
    applied = 0
    for entry, node in zip(info["nodes"], graph.nodes):
        for attr, axis in entry["folding"].items():
            assert axis["value"] in axis["legal"], (node.name, attr, axis)
            for value in axis["legal"]:
                trial = graph.copy()
                apply_folding_config(trial.nodes, {node.name: {attr: value}})
                assert trial.nodes[[n.name for n in trial.nodes].index(node.name)].spec() is not None
                applied += 1
            if len(axis["legal"]) == 1:
                continue        # not an axis of this node (a 2D max pool streams whole pixels, PE is ignored)
            # and the first value past the legal ones is refused
            bad = next(v for v in range(2, max(axis["legal"]) + 2) if v not in axis["legal"])
            with pytest.raises(ValueError):
                apply_folding_config(graph.copy().nodes, {node.name: {attr: bad}})
    assert applied > len(graph.nodes)


def test_cli_lists_nodes_host_ops_and_legal_values(capsys):
    assert main(["inspect", str(MODELS / "TFC_2W2A.onnx")]) == 0
    out = capsys.readouterr().out
    assert "host, before: Quant_4 (Quant)" in out and "host, after: Add_0 (Add)" in out
    assert "MVAU_0" in out and "SIMD=16 [1, 2, 4, 7, 8, 14, 16" in out
    assert main(["inspect", str(MODELS / "TFC_2W2A.onnx"), "--json", "--target-fps", "1000"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["nodes"][0]["folding"]["PE"] == {"value": 1, "legal": [1, 2, 4, 8, 16, 32, 64]}


def test_what_cannot_be_lowered_is_the_compile_error(capsys, tmp_path):
    import onnx
    model = onnx.load(str(MODELS / "branching" / "upsample_concat.onnx"))
    next(a for n in model.graph.node if n.op_type == "Resize" for a in n.attribute if a.name == "mode").s = b"linear"
    onnx.save(model, str(tmp_path / "m.onnx"))
    assert main(["inspect", str(tmp_path / "m.onnx")]) == 2
    assert "node Resize_0 (Resize) with coordinate_transformation_mode=asymmetric" in capsys.readouterr().err
