"""What `rtlgen compile` writes into OUT: the stitched Verilog with FINN's ports, weight images,
model_hw.onnx (FINN-style nodes with their folding), folding.json (fed back, the same design),
report.json (per layer and totals, host ops). No simulation: FIFO sizing off."""

import json
from pathlib import Path

import pytest

from rtlgen.cli import main

MODELS = Path(__file__).parent / "models"
DIGITS = MODELS / "digits_tfc_w1a1i1_clean.onnx"


@pytest.fixture
def out_dir(digits_out):
    return digits_out


def test_files(out_dir):
    names = {p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*") if p.is_file()}
    assert names == {"finn_design_wrapper.v", "folding.json", "report.json", "model_hw.onnx", "io.json",
                     "host_pre.onnx", "host_post.onnx", "report.html", ".rtlgen-manifest.json"}
    verilog = (out_dir / "finn_design_wrapper.v").read_text()
    for port in ("ap_clk", "ap_rst_n", "s_axis_0_tdata", "s_axis_0_tvalid", "s_axis_0_tready", "m_axis_0_tdata",
                 "m_axis_0_tvalid", "m_axis_0_tready"):
        assert f" {port};" in verilog


def test_report_and_folding_agree(out_dir):
    report = json.loads((out_dir / "report.json").read_text())
    folding = json.loads((out_dir / "folding.json").read_text())
    layers = {r["name"]: r for r in report["layers"]}
    mvaus = [n for n in layers if n.startswith("MVAU")]
    assert mvaus == ["MVAU_0", "MVAU_1", "MVAU_2", "MVAU_3"]
    sizes = {"MVAU_0": (64, 64), "MVAU_1": (64, 64), "MVAU_2": (64, 64), "MVAU_3": (64, 10)}
    for name, (mw, mh) in sizes.items():
        f = folding[name]
        # the compiler's own choice besides PE/SIMD: weights read in place (mem_mode), as folding.json says
        assert layers[name]["folding"] == {"PE": f["PE"], "SIMD": f["SIMD"], "mem_mode": "internal_embedded"}
        assert f["mem_mode"] == "internal_embedded"
        assert layers[name]["exp_cycles"] == (mw // f["SIMD"]) * (mh // f["PE"])
        assert layers[name]["in_width"] == f["SIMD"]            # BIPOLAR input: 1 bit per element
    assert report["analytic_cycles_per_frame"] == max(layers[n]["exp_cycles"] for n in mvaus)
    assert set(report["totals"]) >= {"LUT", "FF", "BRAM18"}
    assert report["totals"]["LUT"] == sum(r["resources"].get("LUT", 0) for r in report["layers"])
    assert report["host_ops"] == {"pre": ["Reshape_0", "Mul_0", "Sub_0", "BipolarQuant_4"],
                                  "post": ["Sub_1", "Div_0", "Mul_1", "Add_0"]}
    assert layers["MVAU_0"]["sources"][0] == "MatMul_0"
    assert report["input"]["dtype"] == "BIPOLAR" and report["output"]["width"] % 8 == 0


def test_model_hw_is_a_finn_style_graph(out_dir):
    from qonnx.core.modelwrapper import ModelWrapper

    model = ModelWrapper(str(out_dir / "model_hw.onnx"))
    report = json.loads((out_dir / "report.json").read_text())
    assert [n.name for n in model.graph.node] == [r["name"] for r in report["layers"]]
    for node in model.graph.node:
        assert node.domain == "finn.custom_op.fpgadataflow"
        attrs = {a.name: a for a in node.attribute}
        assert attrs["backend"].s == b"fpgadataflow"
        if node.op_type == "MVAU":            # FINN's attribute names
            assert {"PE", "SIMD", "MW", "MH", "inputDataType", "weightDataType", "outputDataType", "noActivation",
                    "binaryXnorMode", "numInputVectors", "mem_mode"} <= set(attrs)
            assert attrs["weightDataType"].s == b"BIPOLAR" and attrs["binaryXnorMode"].i == 1
            assert len(node.input) == (2 if attrs["noActivation"].i else 3)     # activations, W[, thresholds]
        if node.op_type == "StreamingDataWidthConverter":
            assert {"inWidth", "outWidth", "dataType"} <= set(attrs)
    # consecutive nodes are connected
    for a, b in zip(model.graph.node, model.graph.node[1:]):
        assert a.output[0] == b.input[0]


def test_folding_json_round_trip(out_dir, tmp_path):
    again = tmp_path / "again"
    assert main(["compile", str(DIGITS), "-o", str(again), "--folding", str(out_dir / "folding.json"),
                 "--fifo-sizing", "none"]) == 0
    assert (again / "folding.json").read_text() == (out_dir / "folding.json").read_text()
    assert (again / "finn_design_wrapper.v").read_text() == (out_dir / "finn_design_wrapper.v").read_text()
