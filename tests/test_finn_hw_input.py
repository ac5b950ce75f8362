"""FINN's own hardware-layer ONNX as input (rtlgen.passes.finn_hw): the model_hw.onnx a compile writes, renamed
to each generation of FINN's op and attribute names (MVAU_hls / MatrixVectorActivation /
StreamingFCLayer_Batch, _rtl / _Batch, scalar dims, mem_mode const), is fed back in.

Two independent goldens: sim.finn_exec (FINN's documented semantics in numpy) on the FINN model itself,
and qonnx's execute_onnx on the original QONNX model (through the original compile's host ops). The II
is FINN's MVAU get_exp_cycles formula at the model's own folding, measured within 2 %.
"""

import copy
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from rtlgen import api
from rtlgen.cli import main
from rtlgen.options import CompileOptions
from rtlgen.passes.to_hw import to_hw
from rtlgen.passes.load import load_model
from rtlgen.check.verify import qonnx_reference, tolerance
from sim.finn_exec import execute_finn_hw
from sim.harness import Backpressure

MODELS = Path(__file__).parent / "models"
FAST = dict(fifo_sizing="none")

# FINN op types by generation: (op_type, domain suffix)
NOW = {"MVAU": "MVAU_hls", "Thresholding": "Thresholding_rtl", "ConvolutionInputGenerator": "ConvolutionInputGenerator_rtl",
       "FMPadding": "FMPadding_rtl", "StreamingMaxPool": "StreamingMaxPool_hls", "GlobalAccPool": "GlobalAccPool_hls",
       "StreamingFIFO": "StreamingFIFO_rtl", "StreamingDataWidthConverter": "StreamingDataWidthConverter_rtl",
       "LabelSelect": "LabelSelect_hls", "ChannelwiseOp": "ChannelwiseOp_hls", "AddStreams": "AddStreams_hls",
       "DuplicateStreams": "DuplicateStreams_hls", "VVAU": "VVAU_hls",
       "UpsampleNearestNeighbour": "UpsampleNearestNeighbour_hls", "StreamingConcat": "StreamingConcat_hls"}
V09 = {"MVAU": "MatrixVectorActivation", "VVAU": "VectorVectorActivation", "Thresholding": "Thresholding_Batch",
       "FMPadding": "FMPadding_Batch", "StreamingMaxPool": "StreamingMaxPool_Batch", "GlobalAccPool": "GlobalAccPool_Batch",
       "StreamingDataWidthConverter": "StreamingDataWidthConverter_Batch", "LabelSelect": "LabelSelect_Batch",
       "ChannelwiseOp": "ChannelwiseOp_Batch", "AddStreams": "AddStreams_Batch", "DuplicateStreams": "DuplicateStreams_Batch",
       "UpsampleNearestNeighbour": "UpsampleNearestNeighbour_Batch"}
V05 = dict(V09, MVAU="StreamingFCLayer_Batch", VVAU="Vector_Vector_Activate_Batch")
SQUARE = ("IFMDim", "OFMDim", "ConvKernelDim", "ImgDim", "PoolDim", "Stride", "Dilation")


def finn_generation(proto, generation):
    """``proto`` (rtlgen's model_hw.onnx) as FINN ``generation`` writes it: "now" (SpecializeLayers:
    _hls / _rtl in the .hls / .rtl domains), "v0.9" (MatrixVectorActivation, *_Batch, mem_mode const),
    "v0.5" (StreamingFCLayer_Batch, square dims as one int, domain finn + backend)."""
    proto = copy.deepcopy(proto)
    for node in proto.graph.node:
        base = node.op_type
        if generation == "now":
            node.op_type = NOW.get(base, base)
            suffix = node.op_type[len(base):]
            node.domain = "finn.custom_op.fpgadataflow" + (".hls" if suffix == "_hls" else ".rtl" if suffix else "")
            continue
        node.op_type = (V09 if generation == "v0.9" else V05).get(base, base)
        node.domain = "finn.custom_op.fpgadataflow" if generation == "v0.9" else "finn"
        for a in node.attribute:
            if a.name == "mem_mode" and a.s == b"internal_embedded":
                a.s = b"const"
            if generation == "v0.5" and a.name in SQUARE and len(a.ints) == 2 and a.ints[0] == a.ints[1]:
                value = a.ints[0]
                a.CopyFrom(helper.make_attribute(a.name, int(value)))
    return proto


FINN_BOOKKEEPING = {"exec_mode": "rtlsim", "code_gen_dir_ipgen": "/tmp/finn_dev/code_gen_ipgen_x", "ipgen_path": "",
                    "ip_path": "", "ip_vlnv": "", "rtlsim_trace": "", "res_estimate": "", "cycles_estimate": 64,
                    "preferred_impl_style": "", "inFIFODepths": [2], "outFIFODepths": [2], "accDataType": "INT32",
                    "partition_id": 0, "device_id": 0, "slr": -1, "mem_port": ""}


def as_finn_writes_it(proto):
    """``proto`` with what FINN's files carry besides the layers: bookkeeping attributes on every node,
    tensor shapes (NHWC) and FINN datatype annotations on the graph's ends."""
    from qonnx.core.modelwrapper import ModelWrapper
    from sim.finn_exec import attrs_of, normal_shapes

    proto = copy.deepcopy(proto)
    for node in proto.graph.node:
        names = {a.name for a in node.attribute}
        node.attribute.extend(helper.make_attribute(k, v) for k, v in FINN_BOOKKEEPING.items() if k not in names)
    model = ModelWrapper(proto)
    layers = [n for n in proto.graph.node if "FIFO" not in n.op_type and "Width" not in n.op_type]
    for tensor, node, side in ((proto.graph.input[0].name, layers[0], 0), (proto.graph.output[0].name, layers[-1], 1)):
        a = attrs_of(node)
        model.set_tensor_shape(tensor, list(normal_shapes(node, a)[side]))
        model.set_tensor_datatype(tensor, __import__("qonnx.core.datatype", fromlist=["DataType"]).DataType[
            a.get("inputDataType", a.get("dataType")) if side == 0 else a["outputDataType"]])
    return model.model


def binary_form(proto):
    """FINN's own form of a binarized network (ConvertBipolarMatMulToXnorPopcount): BIPOLAR tensors
    become BINARY (0 stands for -1), weights 0/1, binaryXnorMode=1; thresholds stay in popcount space."""
    proto = copy.deepcopy(proto)
    inits = {i.name: i for i in proto.graph.initializer}
    for node in proto.graph.node:
        attrs = {a.name: a for a in node.attribute}
        for a in node.attribute:
            if a.type == onnx.AttributeProto.STRING and a.s == b"BIPOLAR":
                a.s = b"BINARY"
        if node.op_type == "MVAU" and attrs["weightDataType"].s == b"BINARY":
            w = inits[node.input[1]]
            w.CopyFrom(onnx.numpy_helper.from_array((onnx.numpy_helper.to_array(w) + 1) / 2, w.name))
            attrs["binaryXnorMode"].i = 1
    return proto


def save(proto, path):
    onnx.save(proto, str(path))
    return path


def finn_mvau_ii(proto):
    """FINN's MVAU get_exp_cycles, (MH / PE) * (MW / SIMD) * prod(numInputVectors), the slowest node's."""
    cycles = []
    for node in proto.graph.node:
        if node.op_type.startswith(("MVAU", "MatrixVector", "StreamingFCLayer")):
            a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
            vecs = a.get("numInputVectors", [1])
            cycles.append(a["MH"] // a["PE"] * (a["MW"] // a["SIMD"]) * int(np.prod(vecs)))
    return max(cycles)


class Case:
    """An original QONNX model compiled (OUT1), its model_hw.onnx in one FINN generation compiled (OUT2)."""

    def __init__(self, tmp, model, generation, x, binary=False):
        self.model, self.x = model, x
        self.original = api.compile(model, tmp / "orig", **FAST)
        base = onnx.load(str(tmp / "orig" / "model_hw.onnx"))
        self.base_path = save(base, tmp / "model_hw.onnx")
        self.finn = finn_generation(binary_form(base) if binary else base, generation)
        self.path = save(self.finn, tmp / f"model_hw_{generation}.onnx")
        self.design = api.compile(self.path, tmp / "hw")
        # the FINN model's input: the original's input codes, in stream order, in the FINN input's shape
        shape = self.design.io.model_input_shape
        self.x_hw = self.original.io.input_codes(x).reshape(-1, *shape[1:]).astype(np.float32)
        if binary and self.original.io.input.dtype.name == "BIPOLAR":
            self.x_hw = (self.x_hw + 1) / 2

    def check(self, run):
        """The accelerator's outputs against both goldens."""
        golden = execute_finn_hw(self.finn, self.x_hw)
        np.testing.assert_array_equal(run.outputs, golden)
        ours = self.original.io.output_from_codes(np.asarray(run.outputs).reshape(len(self.x), -1))
        reference = qonnx_reference(self.model, self.x)
        rtol = tolerance(self.original.io)
        scale = np.abs(reference.reshape(len(reference), -1)).max(axis=1).reshape((-1,) + (1,) * (reference.ndim - 1))
        assert (np.abs(ours - reference) <= rtol * scale).all()


@pytest.fixture(scope="module")
def tfc(tmp_path_factory):
    images = np.load(MODELS / "mnist_test_1000.npz")["x"][:6]
    x = (images.astype(np.float32) / 255).reshape(-1, 1, 28, 28)
    return Case(tmp_path_factory.mktemp("tfc"), MODELS / "TFC_1W1A.onnx", "now", x)


@pytest.fixture(scope="module")
def labelselect(tmp_path_factory):
    """FINN's end-to-end TFC-w1a1 form: Thresholding, four XNOR MVAUs (BINARY), LabelSelect."""
    x = np.load(MODELS / "build_dataflow_input.npy")
    return Case(tmp_path_factory.mktemp("bd"), MODELS / "build_dataflow_model.onnx", "now", x, binary=True)


@pytest.fixture(scope="module")
def small_cnn(tmp_path_factory):
    x = np.random.default_rng(3).normal(size=(4, 1, 8, 8)).astype(np.float32)
    return Case(tmp_path_factory.mktemp("cnn"), MODELS / "small_cnn.onnx", "v0.5", x)


@pytest.mark.parametrize("backpressure", [None, Backpressure(seed=5, valid_prob=0.5, ready_prob=0.5)],
                         ids=["full-rate", "backpressure"])
def test_tfc_model_hw_fed_back_equals_finn_semantics_and_qonnx(tfc, backpressure, simulator):
    run = tfc.design.simulate(tfc.x_hw, backpressure=backpressure, simulator=simulator)
    tfc.check(run)
    ii = tfc.design.report["analytic_cycles_per_frame"]
    assert ii == finn_mvau_ii(tfc.finn) == tfc.original.report["analytic_cycles_per_frame"]
    if backpressure is None:
        assert abs(run.cycles_per_frame - ii) <= 0.02 * ii


@pytest.mark.parametrize("backpressure", [None, Backpressure(seed=6, valid_prob=0.5, ready_prob=0.5)],
                         ids=["full-rate", "backpressure"])
def test_cnn_with_padding_window_pool_in_old_finn_names(small_cnn, backpressure, simulator):
    """FMPadding_Batch, ConvolutionInputGenerator, StreamingFCLayer_Batch, StreamingMaxPool_Batch,
    GlobalAccPool_Batch, Thresholding_Batch with FINN <= 0.5's scalar dims and mem_mode const."""
    ops = {n.op_type for n in small_cnn.finn.graph.node}
    assert {"FMPadding_Batch", "ConvolutionInputGenerator", "StreamingFCLayer_Batch", "StreamingMaxPool_Batch",
            "GlobalAccPool_Batch", "Thresholding_Batch"} <= ops
    run = small_cnn.design.simulate(small_cnn.x_hw, backpressure=backpressure, simulator=simulator)
    small_cnn.check(run)
    ii = small_cnn.design.report["analytic_cycles_per_frame"]
    assert ii == finn_mvau_ii(small_cnn.finn) == small_cnn.original.report["analytic_cycles_per_frame"]
    if backpressure is None:
        assert abs(run.cycles_per_frame - ii) <= 0.02 * ii


@pytest.mark.parametrize("backpressure", [None, Backpressure(seed=7, valid_prob=0.5, ready_prob=0.5)],
                         ids=["full-rate", "backpressure"])
def test_binary_xnor_form_thresholding_and_labelselect(labelselect, backpressure, simulator):
    ops = [n.op_type for n in labelselect.finn.graph.node if "FIFO" not in n.op_type and "Width" not in n.op_type]
    assert ops == ["Thresholding_rtl"] + ["MVAU_hls"] * 4 + ["LabelSelect_hls"]
    assert sum(b"BINARY" in a.s for n in labelselect.finn.graph.node for a in n.attribute) > 4
    run = labelselect.design.simulate(labelselect.x_hw, backpressure=backpressure, simulator=simulator)
    labelselect.check(run)
    assert labelselect.design.report["analytic_cycles_per_frame"] == finn_mvau_ii(labelselect.finn)


def _graph_summary(path):
    graph = to_hw(load_model(path), CompileOptions())
    return [(n.name, n.op_type, n.inputs, n.outputs, dict(n.folding),
             {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in n.params.items()}) for n in graph.nodes]


@pytest.mark.parametrize("generation", ["now", "v0.9", "v0.5"])
@pytest.mark.parametrize("case", ["tfc", "small_cnn"])
def test_every_generation_reads_alike(request, case, generation, tmp_path):
    """The same graph (ops, params, the user's folding) and the same golden outputs from every generation."""
    c = request.getfixturevalue(case)
    renamed = save(finn_generation(onnx.load(str(c.base_path)), generation), tmp_path / "m.onnx")
    assert _graph_summary(renamed) == _graph_summary(c.base_path)
    written = save(as_finn_writes_it(onnx.load(str(renamed))), tmp_path / "finn.onnx")
    assert _graph_summary(written) == _graph_summary(c.base_path)
    np.testing.assert_array_equal(execute_finn_hw(onnx.load(str(renamed)), c.x_hw),
                                  execute_finn_hw(c.finn, c.x_hw))


def test_dwcs_and_fifos_are_ours_and_folding_is_the_users(tfc):
    folded = [n for n in tfc.design.compiled.nodes]
    assert [n.op_type for n in folded] == ["MVAU"] * 4
    finn = {n.name: {a.name: helper.get_attribute_value(a) for a in n.attribute} for n in tfc.finn.graph.node}
    for node in folded:
        assert (node.folding["PE"], node.folding["SIMD"]) == (finn[node.name]["PE"], finn[node.name]["SIMD"])
    assert {n.op_type for n in tfc.design.compiled.chain} >= {"StreamingFIFO", "StreamingDataWidthConverter"}


def test_cli_verify_and_inspect(tfc, tmp_path, capsys):
    x = tmp_path / "x.npy"
    np.save(x, tfc.x_hw[:2])
    assert main(["verify", str(tfc.path), "--input", str(x), "--fifo-sizing", "none", "-q"]) == 0
    assert "bit-exact" in capsys.readouterr().out
    assert main(["inspect", str(tfc.path), "--json"]) == 0
    import json
    info = json.loads(capsys.readouterr().out)
    assert [n["op_type"] for n in info["nodes"]] == ["MVAU"] * 4
    assert info["analytic_cycles_per_frame"] == finn_mvau_ii(tfc.finn)


# ---- what is refused: one line, exit 2, naming the node and what is legal

def _one_line(capsys, argv):
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rtlgen {argv[0]}: error: "), lines
    return lines[0]


def _edit(tfc, tmp_path, change):
    proto = copy.deepcopy(tfc.finn)
    change(proto)
    return str(save(proto, tmp_path / "bad.onnx"))


def _attr(node, name, value):
    for a in node.attribute:
        if a.name == name:
            a.CopyFrom(helper.make_attribute(name, value))
            return
    node.attribute.append(helper.make_attribute(name, value))


def test_unsupported_op_named_with_the_legal_ones(tfc, tmp_path, capsys):
    def pool(p):
        p.graph.node[1].op_type = "Pool_hls"
    line = _one_line(capsys, ["compile", _edit(tfc, tmp_path, pool), "-o", str(tmp_path / "o")])
    assert "MVAU_0 (Pool_hls) is not supported" in line and "legal FINN hardware ops" in line and "MVAU" in line


def test_external_weights_refused(tfc, tmp_path, capsys):
    line = _one_line(capsys, ["compile", _edit(tfc, tmp_path, lambda p: _attr(p.graph.node[1], "mem_mode", "external")),
                              "-o", str(tmp_path / "o")])
    assert "MVAU_0" in line and "mem_mode='external'" in line and "internal_embedded" in line


def test_illegal_folding_named(tfc, tmp_path, capsys):
    line = _one_line(capsys, ["inspect", _edit(tfc, tmp_path, lambda p: _attr(p.graph.node[1], "SIMD", 5))])
    assert "MVAU_0" in line and "simd=5" in line and "legal simd" in line


def test_parent_model_and_host_op_between_layers(tfc, tmp_path, capsys):
    def parent(p):
        p.graph.node[1].op_type = "StreamingDataflowPartition"
    line = _one_line(capsys, ["inspect", _edit(tfc, tmp_path, parent)])
    assert "StreamingDataflowPartition" in line and "dataflow partition" in line

    def between(p):
        node = p.graph.node[2]      # the DWC after MVAU_0 becomes a host Identity
        node.op_type, node.domain = "Identity", ""
        del node.attribute[:]
    line = _one_line(capsys, ["inspect", _edit(tfc, tmp_path, between)])
    assert "sits between FINN hardware layers" in line


def test_input_dtype_refused(tfc, capsys):
    line = _one_line(capsys, ["inspect", str(tfc.path), "--input-dtype", "INT8"])
    assert "inputDataType" in line


# ---- slow: whole networks

@pytest.mark.slow
def test_cnv_w1a1_model_hw_fed_back(tmp_path):
    """CNV-w1a1 (SWG, MaxPool, 9 MVAUs), FINN's current names, on CIFAR-10 images."""
    x = np.load(MODELS / "cifar10_cifar10-test-data-class3.npz")["arr_0"].astype(np.float32)
    x = np.concatenate([x, x[:, :, ::-1]], axis=0)
    case = Case(tmp_path, MODELS / "cnv_1w1a_ts_clean.onnx", "now", x)
    run = case.design.simulate(case.x_hw)
    case.check(run)
    assert case.design.report["analytic_cycles_per_frame"] == finn_mvau_ii(case.finn)
    assert abs(run.cycles_per_frame - finn_mvau_ii(case.finn)) <= 0.02 * finn_mvau_ii(case.finn)


@pytest.mark.slow
def test_residual_block_model_hw_fed_back(tmp_path):
    """DuplicateStreams, ChannelwiseOp, AddStreams, FMPadding, GlobalAccPool: FINN v0.9 names."""
    x = np.random.default_rng(4).normal(size=(3, 4, 8, 8)).astype(np.float32)
    case = Case(tmp_path, MODELS / "branching" / "resnet_block.onnx", "v0.9", x)
    case.check(case.design.simulate(case.x_hw, backpressure=Backpressure(seed=2, valid_prob=0.6, ready_prob=0.6)))


@pytest.mark.slow
def test_depthwise_block_model_hw_fed_back(tmp_path):
    """VectorVectorActivation after a depthwise ConvolutionInputGenerator, 1x1 windows, a residual
    AddStreams: FINN v0.9 names."""
    x = np.random.default_rng(5).normal(size=(3, 4, 8, 8)).astype(np.float32)
    case = Case(tmp_path, MODELS / "branching" / "mobilenetv2_block.onnx", "v0.9", x)
    assert "VectorVectorActivation" in {n.op_type for n in case.finn.graph.node}
    case.check(case.design.simulate(case.x_hw))


def test_missing_attribute_named(tfc, tmp_path, capsys):
    def drop(p):
        node = p.graph.node[1]
        keep = [a for a in node.attribute if a.name != "MW"]
        del node.attribute[:]
        node.attribute.extend(keep)
    line = _one_line(capsys, ["inspect", _edit(tfc, tmp_path, drop)])
    assert "MVAU_0" in line and "attribute MW is missing" in line


def test_finn_defaults_and_refused_window_modes(tfc, tmp_path, capsys):
    """No mem_mode: FINN's default internal_decoupled; an SWG's dynamic_mode / M > 1 are refused by name."""
    def no_mem_mode(p):
        node = p.graph.node[1]
        keep = [a for a in node.attribute if a.name != "mem_mode"]
        del node.attribute[:]
        node.attribute.extend(keep)
    graph = to_hw(load_model(_edit(tfc, tmp_path, no_mem_mode)), CompileOptions())
    assert graph.nodes[0].folding["mem_mode"] == "internal_decoupled"
    line = _one_line(capsys, ["inspect", _edit(tfc, tmp_path, lambda p: _attr(p.graph.node[1], "M", 2))])
    assert "MVAU_0" in line and "M=2 is not supported; legal: 1" in line


@pytest.mark.slow
def test_concat_model_hw_fed_back(tmp_path):
    """StreamingConcat of two branches (DuplicateStreams, FMPadding, windows), FINN's current names."""
    x = np.random.default_rng(6).normal(size=(3, 4, 8, 8)).astype(np.float32)
    case = Case(tmp_path, MODELS / "branching" / "concat_net.onnx", "now", x)
    assert "StreamingConcat_hls" in {n.op_type for n in case.finn.graph.node}
    case.check(case.design.simulate(case.x_hw, backpressure=Backpressure(seed=3, valid_prob=0.6, ready_prob=0.6)))


def _with_host_ops(proto, pre, post, new_input=None):
    """``proto`` with standard ONNX nodes ``pre`` before its first node (reading the new graph input
    ``new_input`` = (name, shape)) and ``post`` after its last; ``post`` ends in ``final`` (int64)."""
    proto = copy.deepcopy(proto)
    graph = proto.graph
    old_in, old_out = graph.input[0].name, graph.output[0].name
    for node in reversed(pre):
        graph.node.insert(0, node)
    graph.node.extend(post)
    if new_input is not None:
        del graph.input[:]
        graph.input.append(helper.make_tensor_value_info(new_input[0], onnx.TensorProto.FLOAT, new_input[1]))
    if post:
        del graph.output[:]
        graph.output.append(helper.make_tensor_value_info(post[-1].output[0], onnx.TensorProto.INT64, None))
    return proto


def test_host_ops_before_and_after_run_on_the_host(tfc, small_cnn, tmp_path, simulator):
    """A Mul/Add before and a Mul after the layers (as FINN leaves them outside the dataflow
    partition), and a Transpose NCHW -> NHWC before a CNN: compiled, run, equal to the executors."""
    p = _with_host_ops(tfc.finn, [helper.make_node("Mul", ["x01", "two"], ["x02"], name="Mul_host"),
                                  helper.make_node("Add", ["x02", "minus1"], ["global_in"], name="Add_host")],
                       [helper.make_node("Mul", ["global_out", "half"], ["y"], name="Scale_host")],
                       ("x01", [1, 784]))
    p.graph.initializer.extend([onnx.numpy_helper.from_array(np.array(2.0, np.float32), "two"),
                                onnx.numpy_helper.from_array(np.array(-1.0, np.float32), "minus1"),
                                onnx.numpy_helper.from_array(np.array(0.5, np.float32), "half")])
    del p.graph.output[:]
    p.graph.output.append(helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 10]))
    for imp in p.opset_import:
        if imp.domain == "":
            imp.version = 13
    design = api.compile(save(p, tmp_path / "tfc_host.onnx"), tmp_path / "o1", **FAST)
    assert design.io.host_pre is not None and design.io.host_post is not None
    x01 = (tfc.x_hw + 1) / 2
    run = design.simulate(x01, simulator=simulator)
    np.testing.assert_array_equal(run.outputs, execute_finn_hw(p, x01))
    assert run.outputs.shape == (len(x01), 10)

    n, h, w, c = (len(small_cnn.x_hw), *small_cnn.x_hw.shape[1:])
    first = next(node for node in small_cnn.finn.graph.node if "FIFO" not in node.op_type)
    q = _with_host_ops(small_cnn.finn, [helper.make_node("Transpose", ["x_nchw"], [small_cnn.finn.graph.input[0].name],
                                                         name="Transpose_host", perm=[0, 2, 3, 1])], [],
                       ("x_nchw", [1, c, h, w]))
    for imp in q.opset_import:
        if imp.domain == "":
            imp.version = 13
    design = api.compile(save(q, tmp_path / "cnn_host.onnx"), tmp_path / "o2", **FAST)
    x_nchw = small_cnn.x_hw.transpose(0, 3, 1, 2)
    run = design.simulate(x_nchw, simulator=simulator)
    np.testing.assert_array_equal(run.outputs, execute_finn_hw(q, x_nchw))
    small_cnn.check(run)            # and still qonnx's answer on the original model
    assert first is not None


def test_integer_host_op_after_refused(tfc, tmp_path, capsys):
    p = _with_host_ops(tfc.finn, [], [helper.make_node("TopK", ["global_out", "k"], ["v", "i"], name="TopK_host", axis=-1)])
    p.graph.initializer.append(onnx.numpy_helper.from_array(np.array([1], np.int64), "k"))
    del p.graph.output[:]
    p.graph.output.append(helper.make_tensor_value_info("i", onnx.TensorProto.INT64, [1, 1]))
    line = _one_line(capsys, ["inspect", str(save(p, tmp_path / "topk.onnx"))])
    assert "TopK_host (TopK)" in line and "LabelSelect" in line


def test_folding_options_still_refold(tfc, tmp_path):
    """The file's folding is kept by default; --folding (FINN's JSON, by the file's node names) and
    --target-fps override it."""
    import json
    from rtlgen.passes.fold import fold
    model = load_model(tfc.path)
    kept = fold(to_hw(model, None), CompileOptions())
    assert [n.folding["PE"] for n in kept.nodes] == [n.folding["PE"] for n in tfc.design.compiled.nodes]
    folding = tmp_path / "fold.json"
    folding.write_text(json.dumps({"MVAU_0": {"PE": 4, "SIMD": 28}}))
    refolded = fold(to_hw(model, None), CompileOptions(folding=str(folding)))
    assert refolded.node("MVAU_0").spec().exp_cycles == 64 // 4 * (784 // 28)
    slow = fold(to_hw(model, None), CompileOptions(target_fps=1000))
    assert max(n.spec().exp_cycles for n in slow.nodes) > max(n.spec().exp_cycles for n in kept.nodes)


@pytest.mark.slow
def test_upsample_model_hw_fed_back(tmp_path):
    """UpsampleNearestNeighbour (IFMDim / OFMDim as one int, as FINN declares them) and StreamingConcat."""
    x = np.random.default_rng(8).normal(size=(3, 4, 8, 8)).astype(np.float32)
    case = Case(tmp_path, MODELS / "branching" / "upsample_concat.onnx", "v0.5", x)
    assert "UpsampleNearestNeighbour_Batch" in {n.op_type for n in case.finn.graph.node}
    case.check(case.design.simulate(case.x_hw))


# ---- a file FINN itself wrote (tests/models/finn_hw/README.md)

CYBSEC = MODELS / "finn_hw" / "cybsec_PE_SIMD.onnx"


def test_finn_written_file_reads_with_its_folding():
    """FINN's own MVAU_hls file: unnamed nodes get MVAU_hls_<k>; PE/SIMD kept; no mem_mode means FINN's
    internal_decoupled; the II is FINN's formula (64/1)(600/1) = 38,400."""
    from rtlgen.passes.fold import fold
    graph = fold(to_hw(load_model(CYBSEC), None), CompileOptions())
    assert [n.name for n in graph.nodes] == [f"MVAU_hls_{k}" for k in range(4)]
    assert all(n.folding == {"PE": 1, "SIMD": 1, "mem_mode": "internal_decoupled"} for n in graph.nodes)
    assert max(n.spec().exp_cycles for n in graph.nodes) == finn_mvau_ii(onnx.load(str(CYBSEC))) == 38_400


def test_finn_written_file_refolded_runs_bit_exact(tmp_path, simulator):
    """The same file with a FINN folding JSON (by those names), simulated under backpressure and at full
    rate: bit-exact against sim.finn_exec, at the II of FINN's formula."""
    import json
    folding = tmp_path / "fold.json"
    folding.write_text(json.dumps({"MVAU_hls_0": {"PE": 4, "SIMD": 20}, "MVAU_hls_1": {"PE": 2, "SIMD": 8},
                                   "MVAU_hls_2": {"PE": 2, "SIMD": 8}, "MVAU_hls_3": {"PE": 1, "SIMD": 2}}))
    design = api.compile(CYBSEC, tmp_path / "out", folding=str(folding))
    x = np.random.default_rng(9).choice([-1.0, 1.0], size=(8, 600)).astype(np.float32)
    golden = execute_finn_hw(onnx.load(str(CYBSEC)), x)
    assert set(np.unique(golden)) <= {-1.0, 1.0}
    for backpressure in (None, Backpressure(seed=9, valid_prob=0.5, ready_prob=0.5)):
        run = design.simulate(x, backpressure=backpressure, simulator=simulator)
        np.testing.assert_array_equal(run.outputs, golden)
        if backpressure is None:
            assert abs(run.cycles_per_frame - 480) <= 0.02 * 480
    assert design.report["analytic_cycles_per_frame"] == 480         # FINN's (64/4)(600/20)


@pytest.mark.slow
def test_finn_written_file_at_its_own_folding(tmp_path):
    design = api.compile(CYBSEC, tmp_path / "out")
    x = np.random.default_rng(10).choice([-1.0, 1.0], size=(4, 600)).astype(np.float32)
    run = design.simulate(x)
    np.testing.assert_array_equal(run.outputs, execute_finn_hw(onnx.load(str(CYBSEC)), x))
    assert abs(run.cycles_per_frame - 38_400) <= 0.02 * 38_400


RESIDUAL = MODELS / "finn_hw" / "residual_testcase.onnx"


def test_finn_written_residual_reads_with_finn_defaults():
    """FINN's residual test case: VVAU without SIMD (FINN's default 1), mem_mode decoupled, ActVal -8;
    the II is the MVAU's (16/1)(16/16)(32*32) = 16,384."""
    from rtlgen.passes.fold import fold
    graph = fold(to_hw(load_model(RESIDUAL), None), CompileOptions())
    assert [n.op_type for n in graph.nodes] == ["DuplicateStreams", "FMPadding", "ConvolutionInputGenerator", "VVAU",
                                                "MVAU", "AddStreams"]
    assert graph.node("VectorVectorActivation_0").folding["SIMD"] == 1
    assert graph.node("MatrixVectorActivation_0").folding["mem_mode"] == "internal_decoupled"
    assert max(n.spec().exp_cycles for n in graph.nodes) == finn_mvau_ii(onnx.load(str(RESIDUAL))) == 16_384


@pytest.mark.slow
def test_finn_written_residual_runs_bit_exact(tmp_path):
    design = api.compile(RESIDUAL, tmp_path / "out")
    x = np.random.default_rng(11).integers(-8, 8, size=(2, 32, 32, 16)).astype(np.float32)
    run = design.simulate(x)
    np.testing.assert_array_equal(run.outputs, execute_finn_hw(onnx.load(str(RESIDUAL)), x))
    assert run.outputs.shape == (2, 32, 32, 16)
    assert abs(run.cycles_per_frame - 16_384) <= 0.02 * 16_384
