"""Folding: FINN's SetFolding on hand-built chains (expected foldings worked out by hand from FINN's rules),
and the FINN folding config JSON (naming generations, Defaults, round trip, error messages). Pure Python."""

import json
import re

import numpy as np
import pytest

from rtlgen.options import load_folding_config, target_cycles
from rtlgen.passes.fold import apply_folding_config, folding_config, set_folding, write_folding_config
from rtlgen.ir.graph import HWNode


# ---------------------------------------------------------------------------------------------- graphs

def mvau(name, mw, mh, wdt="BIPOLAR", idt="BIPOLAR", act=True, vecs=(1,), seed=0):
    rng = np.random.default_rng(seed)
    if wdt == "BIPOLAR":
        w = rng.choice([-1, 1], size=(mw, mh))
    else:
        w = rng.integers(-8, 8, size=(mw, mh))
    params = dict(mw=mw, mh=mh, input_dtype=idt, weight_dtype=wdt, weights=w, num_input_vectors=vecs)
    if act:     # one popcount threshold per channel -> BIPOLAR
        params.update(thresholds=np.sort(rng.integers(0, mw + 1, size=(mh, 1)), axis=1), output_dtype="BIPOLAR")
    return HWNode(name, "MVAU", params, {"PE": 1, "SIMD": 1})


def tfc():
    """TFC-like: MVAU 784x64, 64x64 (BIPOLAR, thresholds), 64x10 (no activation), LabelSelect 10 labels."""
    return [mvau("MVAU_0", 784, 64), mvau("MVAU_1", 64, 64, seed=1), mvau("MVAU_2", 64, 10, act=False, seed=2),
            HWNode("LabelSelect_0", "LabelSelect", dict(labels=10, k=1, input_dtype="UINT8"), {"PE": 1})]


def conv():
    """SWG 8x8x4, 3x3 -> MVAU 36x8 (INT4 weights, 6x6 vectors). SWG exp_cycles (swg/spec.py):
    SIMD 1: 1325, 2: 663, 4: 332, parallel_window: 64."""
    return [HWNode("ConvolutionInputGenerator_0", "ConvolutionInputGenerator",
                   dict(ifm_dim=(8, 8), ifm_channels=4, kernel=(3, 3), input_dtype="UINT4"), {"SIMD": 1}),
            mvau("MVAU_0", 36, 8, wdt="INT4", idt="UINT4", act=False, vecs=(1, 6, 6))]


def depthwise():
    """Depthwise SWG 8x8x4, 3x3 -> VVAU (C=4, 3x3, 6x6): VVAU cycles = (4/PE)*(9/SIMD)*36."""
    rng = np.random.default_rng(3)
    return [HWNode("ConvolutionInputGenerator_0", "ConvolutionInputGenerator",
                   dict(ifm_dim=(8, 8), ifm_channels=4, kernel=(3, 3), input_dtype="UINT4", depthwise=True),
                   {"SIMD": 1}),
            HWNode("VVAU_0", "VVAU", dict(channels=4, kernel=(3, 3), dim=(6, 6), input_dtype="UINT4",
                                          weight_dtype="INT4", weights=rng.integers(-8, 8, size=(4, 1, 3, 3))),
                   {"PE": 1, "SIMD": 1})]


def small_ops():
    """Thresholding C=12 (6 vectors), FMPadding 4x4x6 pad 1 (6x6 out), 1D and 2D max pools."""
    t = np.sort(np.random.default_rng(4).integers(0, 16, size=(12, 3)), axis=1)
    return [HWNode("Thresholding_0", "Thresholding",
                   dict(num_channels=12, input_dtype="UINT4", output_dtype="UINT2", thresholds=t,
                        num_input_vectors=(1, 6)), {"PE": 1}),
            HWNode("FMPadding_0", "FMPadding", dict(img_dim=(4, 4), padding=(1, 1, 1, 1), num_channels=6,
                                                    dtype="UINT4"), {"SIMD": 1}),
            HWNode("StreamingMaxPool_0", "StreamingMaxPool", dict(img_dim=(1, 8), pool_dim=(1, 2), num_channels=6,
                                                                  dtype="UINT4"), {"PE": 1}),
            HWNode("StreamingMaxPool_1", "StreamingMaxPool", dict(img_dim=(4, 4), pool_dim=(2, 2), num_channels=6,
                                                                  dtype="UINT4"), {"PE": 1})]


def fold(nodes, *attrs):
    return [tuple(n.folding.get(a) for a in attrs) for n in nodes]


def cycles(nodes):
    return [n.spec().exp_cycles for n in nodes]


# ---------------------------------------------------------------------------------------------- SetFolding

def test_target_cycles_as_finn():
    assert target_cycles(10_000, 100) == 10_000         # int(1e9 / 10 ns / 10k fps)
    assert target_cycles(1_000_000, 200) == 200
    assert target_cycles(3, 100) == 33_333_333
    with pytest.raises(ValueError):
        target_cycles(0, 100)


def test_tfc_loose_target():
    # 784x64 BIPOLAR: SIMD 1, 2, 4 give 50176, 25088, 12544; SIMD 7 gives 7168 < 10000. The rest already fits.
    nodes = tfc()
    assert set_folding(nodes, 10_000) == 7168
    assert fold(nodes, "SIMD", "PE") == [(7, 1), (1, 1), (1, 1), (None, 1)]
    assert cycles(nodes) == [7168, 4096, 640, 10]


def test_tfc_wwidth_cap_then_pe():
    # MVAU_0 at T=1000: SIMD 28 -> 1792; SIMD 49 -> 1024, still too slow and 49 bits > 36: back to 28;
    # then PE 2 -> 896. MVAU_1: SIMD 8 -> 512. MVAU_2: 640 at SIMD 1.
    nodes = tfc()
    assert set_folding(nodes, 1000) == 896
    assert fold(nodes, "SIMD", "PE") == [(28, 2), (8, 1), (1, 1), (None, 1)]
    assert cycles(nodes) == [896, 512, 640, 10]


def test_tfc_simd_meeting_target_is_kept_past_the_cap_as_finn():
    # FINN's loop checks the target before the width: MVAU_1 at T=100 reaches SIMD 64 (64 bits > 36), which
    # meets the target (64 cycles), so it stays. MVAU_0: SIMD 28 (49 reverted), PE 32 -> 56. MVAU_2: SIMD 8 -> 80.
    nodes = tfc()
    assert set_folding(nodes, 100) == 80
    assert fold(nodes, "SIMD", "PE") == [(28, 32), (64, 1), (8, 1), (None, 1)]
    assert cycles(nodes) == [56, 64, 80, 10]


def test_tfc_wider_cap():
    # mvau_wwidth_max=64: MVAU_0 goes SIMD 49, 56 (896), then 98 > 64 is reverted; PE 64 -> 14 cycles.
    nodes = tfc()
    set_folding(nodes, 10, mvau_wwidth_max=64, two_pass_relaxation=False)
    assert fold(nodes[:1], "SIMD", "PE") == [(56, 64)]
    assert cycles(nodes[:1]) == [14]


def test_tfc_two_pass_relaxation():
    # T=10 is out of reach: MVAU_0 stops at SIMD 28 (cap), PE 64 -> 28 cycles. First pass (kept without
    # relaxation): MVAU_1 SIMD 32 (64 reverted), PE 16 -> 8; MVAU_2 SIMD 32 (64 gives 10, not < 10, and is
    # reverted), PE 5 -> 4; LabelSelect PE 2 -> 5.
    nodes = tfc()
    assert set_folding(nodes, 10, two_pass_relaxation=False) == 28
    assert fold(nodes, "SIMD", "PE") == [(28, 64), (32, 16), (32, 5), (None, 2)]
    assert cycles(nodes) == [28, 8, 4, 5]
    # second pass with target 28: MVAU_1 needs only PE 8 (16), MVAU_2 SIMD 32 PE 1 (20), LabelSelect PE 1.
    nodes = tfc()
    assert set_folding(nodes, 10) == 28
    assert fold(nodes, "SIMD", "PE") == [(28, 64), (32, 8), (32, 1), (None, 1)]
    assert cycles(nodes) == [28, 16, 20, 10]


def test_set_folding_resets_parallelism_and_keeps_other_attributes():
    nodes = tfc()
    nodes[0].folding.update(PE=64, SIMD=784, mem_mode="internal_embedded", ram_style="block")
    set_folding(nodes, 10_000)
    assert nodes[0].folding == {"PE": 1, "SIMD": 7, "mem_mode": "internal_embedded", "ram_style": "block"}


def test_conv_chain():
    # T=2000: SWG SIMD 1 (1325); MVAU 36x8x36 vectors: SIMD 6 -> 1728.
    nodes = conv()
    assert set_folding(nodes, 2000) == 1728
    assert fold(nodes, "SIMD", "PE", "parallel_window") == [(1, None, False), (6, 1, None)]
    # T=1000: SWG SIMD 2 (663). MVAU: SIMD 9 (1152), SIMD 12 gives 864 < 1000: kept although 48 bits > 36.
    nodes = conv()
    assert set_folding(nodes, 1000) == 864
    assert fold(nodes, "SIMD", "PE", "parallel_window") == [(2, None, False), (12, 1, None)]
    # T=200: SWG SIMD 4 = C is 332, too slow -> parallel_window (64). MVAU SIMD 12 (864) too slow and too
    # wide -> 9; PE 1, 2, 4, 8 -> 1152, 576, 288, 144.
    nodes = conv()
    assert set_folding(nodes, 200) == 144
    assert fold(nodes, "SIMD", "PE", "parallel_window") == [(4, None, True), (9, 8, None)]
    assert cycles(nodes) == [64, 144]


def test_conv_swg_parallel_window_only_where_legal():
    # the SWG's parallel_window is reset by the walk, and set only at SIMD = C.
    nodes = conv()
    nodes[0].folding["parallel_window"] = True
    nodes[0].folding["SIMD"] = 4
    set_folding(nodes, 2000)
    assert nodes[0].folding == {"SIMD": 1, "parallel_window": False}


def test_depthwise_chain():
    # T=1000: VVAU PE 1 -> 1296, PE 2 -> 648; SIMD stays 1; the SWG follows: SIMD 2, default style.
    nodes = depthwise()
    set_folding(nodes, 1000)
    assert fold(nodes, "SIMD", "PE", "parallel_window") == [(2, None, False), (1, 2, None)]
    assert cycles(nodes) == [671, 648]
    # T=200: PE 4 = C gives 324, still too slow -> SIMD 3 (108); the SWG gets SIMD 4 and parallel_window (64).
    nodes = depthwise()
    assert set_folding(nodes, 200) == 108
    assert fold(nodes, "SIMD", "PE", "parallel_window") == [(4, None, True), (3, 4, None)]
    assert cycles(nodes) == [64, 108]
    # T=20: PE 4, SIMD 9 -> 36; the parallel SWG (64 words in) is the bottleneck; pass 2 at 64 agrees.
    nodes = depthwise()
    assert set_folding(nodes, 20) == 64
    assert fold(nodes, "SIMD", "PE", "parallel_window") == [(4, None, True), (9, 4, None)]


def test_small_ops():
    # Thresholding 12 ch x 6 vectors: PE 1, 2, 3 -> 72, 36, 24. FMPadding 6x6 out x 6/SIMD: SIMD 1, 2, 3, 6 ->
    # 216, 108, 72, 36. 1D max pool 8 pixels x 6/PE: PE 1, 2 -> 48, 24. 2D max pool: a word per pixel (16), untouched.
    nodes = small_ops()
    assert set_folding(nodes, 30) == 36         # FMPadding misses 30; pass 2 (target 36) gives the same
    assert fold(nodes, "PE", "SIMD") == [(3, None), (None, 6), (2, None), (1, None)]
    assert cycles(nodes) == [24, 36, 24, 16]
    nodes = small_ops()
    assert set_folding(nodes, 120) == 108
    assert fold(nodes, "PE", "SIMD") == [(1, None), (None, 2), (1, None), (1, None)]
    assert cycles(nodes) == [72, 108, 48, 16]


def test_other_ops_are_left_alone():
    # FIFOs between the depthwise SWG and its VVAU do not hide the SWG; FIFO depth is not touched.
    sw, vv = depthwise()
    nodes = [sw, HWNode("StreamingFIFO_0", "StreamingFIFO", {"width": 16}, {"depth": 8}), vv]
    set_folding(nodes, 200)
    assert fold([sw, vv], "SIMD", "PE", "parallel_window") == [(4, None, True), (3, 4, None)]
    assert nodes[1].folding == {"depth": 8}


def test_vvau_without_swg():
    with pytest.raises(ValueError, match=r"VVAU_0 .*ConvolutionInputGenerator.*Thresholding_0"):
        set_folding(small_ops()[:1] + depthwise()[1:], 200)


# ---------------------------------------------------------------------------------------------- config JSON

def specs_equal(a, b):
    return all(getattr(a, f) == getattr(b, f) for f in ("pe", "simd", "mem_mode", "ram_style", "res_type",
                                                         "parallel_window") if hasattr(a, f))


def test_config_round_trip(tmp_path):
    nodes = tfc() + conv()[:1]
    set_folding(nodes, 200)
    nodes[1].folding.update(mem_mode="const", ram_style="distributed")
    path = tmp_path / "folding.json"
    written = write_folding_config(nodes, path)
    on_disk = load_folding_config(path)
    assert on_disk == json.loads(json.dumps(written))
    assert on_disk["Defaults"] == {}
    # every folding attribute as the spec resolved it, FINN names and values
    assert on_disk["MVAU_0"] == {"PE": nodes[0].folding["PE"], "SIMD": nodes[0].folding["SIMD"],
                                 "mem_mode": "internal_decoupled", "ram_style": "auto",
                                 "ram_style_thresholds": "auto", "resType": "lut", "activation_style": "auto"}
    assert on_disk["MVAU_1"]["mem_mode"] == "internal_embedded"      # old name resolved
    assert on_disk["ConvolutionInputGenerator_0"] == {"SIMD": 4, "parallel_window": 1, "ram_style": "auto"}
    assert on_disk["LabelSelect_0"] == {"PE": 1}
    fresh = tfc() + conv()[:1]
    assert apply_folding_config(fresh, on_disk) == []
    for a, b in zip(nodes, fresh):
        assert specs_equal(a.spec(), b.spec()), a.name
    assert folding_config(fresh) == written


@pytest.mark.parametrize("key", ["MVAU_0", "MVAU_hls_0", "MVAU_rtl_0", "MatrixVectorActivation_0",
                                 "StreamingFCLayer_Batch_0"])
def test_mvau_naming_generations(key):
    nodes = tfc()
    apply_folding_config(nodes, {key: {"PE": 4, "SIMD": 16}})
    assert nodes[0].folding == {"PE": 4, "SIMD": 16}
    assert nodes[1].folding == {"PE": 1, "SIMD": 1}


@pytest.mark.parametrize("key, op", [
    ("Thresholding_Batch_0", "Thresholding"), ("Thresholding_hls_0", "Thresholding"),
    ("Thresholding_rtl_0", "Thresholding"), ("LabelSelect_Batch_0", "LabelSelect"),
    ("LabelSelect_hls_0", "LabelSelect"), ("FMPadding_Batch_0", "FMPadding"), ("FMPadding_rtl_0", "FMPadding"),
    ("StreamingMaxPool_Batch_0", "StreamingMaxPool"), ("StreamingMaxPool_hls_0", "StreamingMaxPool"),
    ("ConvolutionInputGenerator_rtl_0", "ConvolutionInputGenerator"),
    ("ConvolutionInputGenerator_hls_0", "ConvolutionInputGenerator"),
    ("VectorVectorActivation_0", "VVAU"), ("Vector_Vector_Activate_Batch_0", "VVAU"), ("VVAU_rtl_0", "VVAU"),
])
def test_other_naming_generations(key, op):
    nodes = small_ops() + depthwise() + [tfc()[3]]
    attr, value = {"Thresholding": ("PE", 4), "LabelSelect": ("PE", 5), "FMPadding": ("SIMD", 3),
                   "StreamingMaxPool": ("PE", 3), "ConvolutionInputGenerator": ("SIMD", 2),
                   "VVAU": ("SIMD", 3)}[op]
    apply_folding_config(nodes, {key: {attr: value}})
    (node,) = [n for n in nodes if n.name == f"{op}_0"]
    assert node.folding[attr] == value
    assert node.spec()      # still legal


def test_index_matters_and_old_mem_mode_names():
    nodes = tfc()
    apply_folding_config(nodes, {"StreamingFCLayer_Batch_2": {"PE": 5, "mem_mode": "decoupled"},
                                 "MatrixVectorActivation_1": {"mem_mode": "const"}})
    assert nodes[2].folding == {"PE": 5, "SIMD": 1, "mem_mode": "decoupled"}
    assert nodes[2].spec().mem_mode == "internal_decoupled"
    assert nodes[1].spec().mem_mode == "internal_embedded"
    assert nodes[0].folding == {"PE": 1, "SIMD": 1}


def test_defaults():
    nodes = tfc() + small_ops()[:1]
    config = {"Defaults": {"ram_style": ["block", ["MVAU_hls", "MVAU_rtl"]],
                           "resType": "dsp",                        # plain value: every node with the attribute
                           "mem_mode": ["internal_embedded", "all"]},
              "MVAU_hls_1": {"ram_style": "distributed", "PE": 2}}  # a node entry overrides the defaults
    assert apply_folding_config(nodes, config) == []
    assert [n.spec().ram_style for n in nodes[:3]] == ["block", "distributed", "block"]
    assert all(n.spec().res_type == "dsp" and n.spec().mem_mode == "internal_embedded" for n in nodes[:3])
    assert nodes[4].spec().ram_style == "auto"                      # Thresholding is not in the op list
    assert nodes[3].folding == {"PE": 1}                            # LabelSelect has none of them
    assert nodes[1].folding["PE"] == 2


def test_defaults_later_pair_wins_and_parallel_window_from_ints():
    nodes = conv()
    apply_folding_config(nodes, {"Defaults": {"ram_style": ["distributed", "all", "block", ["MVAU"]]},
                                 "ConvolutionInputGenerator_rtl_0": {"SIMD": 4, "parallel_window": 1}})
    assert nodes[0].spec().ram_style == "distributed" and nodes[1].spec().ram_style == "block"
    assert nodes[0].folding["parallel_window"] is True and nodes[0].spec().parallel_window


def test_finn_only_attributes_warn():
    nodes = tfc() + small_ops()[:1]
    warns = apply_folding_config(nodes, {
        "Defaults": {"depth_trigger_uram": [0, "all"]},
        "MVAU_hls_0": {"PE": 2, "inFIFODepths": [2], "outFIFODepths": [32], "runtime_writeable_weights": 0,
                       "depth_trigger_uram": 0, "preferred_impl_style": "rtl"},
        "Thresholding_Batch_0": {"PE": 3, "mem_mode": "const"},       # v0.9 Thresholding had a mem_mode
        "StreamingFIFO_rtl_0": {"depth": 32, "impl_style": "rtl"},    # inserted later by our stitcher
        "StreamingDataWidthConverter_Batch_1": {"impl_style": "hls"},
    })
    assert nodes[0].folding == {"PE": 2, "SIMD": 1}
    assert nodes[4].folding == {"PE": 3}
    text = "\n".join(warns)
    for word in ("depth_trigger_uram", "inFIFODepths", "outFIFODepths", "runtime_writeable_weights",
                 "preferred_impl_style", "mem_mode", "StreamingFIFO_rtl_0", "StreamingDataWidthConverter_Batch_1"):
        assert word in text, word
    assert len(warns) == 9


def test_unknown_node():
    nodes = tfc()
    with pytest.raises(ValueError) as exc:
        apply_folding_config(nodes, {"MVAU_hls_7": {"PE": 2}})
    msg = str(exc.value)
    assert "MVAU_hls_7" in msg and all(n.name in msg for n in nodes)
    # FINN's input Thresholding / LabelSelect layers may be host ops here: a warning, not an error
    warns = apply_folding_config(nodes, {"Thresholding_Batch_0": {"PE": 2}, "LabelSelect_hls_1": {"PE": 1}})
    assert len(warns) == 2 and all("no such node in the dataflow graph" in w for w in warns)


def test_two_keys_for_one_node():
    with pytest.raises(ValueError, match=r"'MVAU_hls_0'.*'MVAU_rtl_0'.*MVAU_0"):
        apply_folding_config(tfc(), {"MVAU_hls_0": {"PE": 2}, "MVAU_rtl_0": {"PE": 4}})


def test_illegal_simd_names_node_attribute_and_legal_values():
    nodes = tfc()
    with pytest.raises(ValueError) as exc:
        apply_folding_config(nodes, {"MVAU_hls_0": {"SIMD": 3}})
    msg = str(exc.value)
    assert "MVAU_0" in msg and "MVAU_hls_0" in msg and re.search("simd", msg, re.I)
    assert "1, 2, 4, 7, 8, 14, 16, 28, 49, 56, 98, 112, 196, 392, 784" in msg
    assert nodes[0].folding == {"PE": 1, "SIMD": 1}                 # nothing applied
    with pytest.raises(ValueError, match=r"MVAU_2.*pe.*1, 2, 5, 10"):
        apply_folding_config(nodes, {"MVAU_2": {"PE": 4}})
    with pytest.raises(ValueError, match=r"ConvolutionInputGenerator_0.*parallel_window"):
        apply_folding_config(conv(), {"ConvolutionInputGenerator_0": {"SIMD": 2, "parallel_window": 1}})
    with pytest.raises(ValueError, match=r"MVAU_1.*mem_mode.*internal_embedded"):
        apply_folding_config(nodes, {"MVAU_1": {"mem_mode": "bram"}})


def test_attribute_the_op_does_not_have():
    with pytest.raises(ValueError, match=r"LabelSelect_0.*'SIMD'.*legal: PE"):
        apply_folding_config(tfc(), {"LabelSelect_hls_0": {"SIMD": 2}})
    with pytest.raises(ValueError, match=r"MVAU_0.*'SMID'"):
        apply_folding_config(tfc(), {"MVAU_0": {"SMID": 2}})
    with pytest.raises(ValueError, match=r"Defaults.*'SMID'"):
        apply_folding_config(tfc(), {"Defaults": {"SMID": 2}})


@pytest.mark.parametrize("text, problem", [
    ('{"MVAU_0": {"PE": 2,}}', "invalid JSON at line 1"),
    ("[1, 2]", "must be a JSON object"),
    ('{"MVAU_0": 4}', "entry 'MVAU_0' must be an object"),
    ("", "invalid JSON"),
])
def test_malformed_file(tmp_path, text, problem):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ValueError) as exc:
        load_folding_config(path)
    msg = str(exc.value)
    assert str(path) in msg and problem in msg and "\n" not in msg
    with pytest.raises(ValueError, match=re.escape(str(path))):
        apply_folding_config(tfc(), path)


def test_missing_file(tmp_path):
    with pytest.raises(ValueError, match=r"nope\.json: no such file"):
        load_folding_config(tmp_path / "nope.json")
