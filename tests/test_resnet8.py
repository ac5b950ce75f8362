"""Issue 43 item 1 (MLPerf Tiny's ResNet-8 at W8A8 on the xc7z020): the INT8 dot-product lanes whose adder
trees keep every sum a carry chain, and the estimate of DSP48E1 lane pairs with LUT-ROM weights, against the
Yosys figures the change was measured with (benchmarks/resnet8.py; the W8A8 model's golden and RTL tests are in
tests/test_mlperf_tiny.py)."""

import numpy as np
import pytest
from amaranth.back import rtlil
from qonnx.core.datatype import DataType

from layers.dotproduct_unit import keeps_sums
from layers.mvau import MVAU, MVAUSpec


def int8_layer(res_type, simd, pe, wdt="INT8", mw=144, idt="UINT8", **kwargs):
    """MVAU_2 of the W8A8 ResNet-8 (3x3 conv, 16 -> 16 channels, 32x32) without its activation."""
    w = np.random.default_rng(0).integers(int(DataType[wdt].min()), int(DataType[wdt].max()) + 1, size=(mw, 16))
    return MVAUSpec(mw, 16, simd, pe, DataType[idt], DataType[wdt], w, res_type=res_type,
                    num_input_vectors=(1, 32, 32), mem_mode="internal_embedded", ram_style="distributed", **kwargs)


def test_wide_product_lanes_keep_their_sums_and_others_do_not():
    assert keeps_sums(int8_layer("lut", 4, 2))                   # 8 partial-product rows a product
    assert keeps_sums(int8_layer("dsp", 4, 2, pipeline="latency"))     # two lanes a DSP48E1, split per product
    assert not keeps_sums(int8_layer("dsp", 4, 2))               # chained in the DSPs' cascade: no tree
    assert not keeps_sums(int8_layer("dsp", 1, 2))               # accumulated in P: no tree
    assert keeps_sums(int8_layer("lut", 4, 2, wdt="INT4"))       # 4 rows (8-bit input, 4-bit weights)
    assert not keeps_sums(int8_layer("lut", 4, 2, wdt="INT4", idt="UINT4"))    # whole 4x4 products
    assert not keeps_sums(int8_layer("lut", 4, 2, wdt="INT2"))   # two rows (x, -2x): not measured


@pytest.mark.parametrize("res_type, simd, pipeline, kept", [("lut", 4, "throughput", True), ("dsp", 4, "latency", True),
                                                       ("dsp", 4, "throughput", False), ("dsp", 1, "throughput", False)])
def test_the_kept_sums_reach_the_netlist(res_type, simd, pipeline, kept):
    """The tree's sums carry Yosys' keep attribute where keeps_sums says so (a lost attribute would let
    alumacc merge them again, silently costing the LUTs the estimate no longer counts)."""
    spec = int8_layer(res_type, simd, 2, mw=16, pipeline=pipeline)
    text = rtlil.convert(MVAU(spec), name="top")
    assert ("keep" in text) == kept


@pytest.mark.parametrize("res_type, simd, pe, idt, wdt, pipeline, yosys",
                         [("dsp", 24, 4, "UINT8", "INT8", "throughput", 2343), ("dsp", 8, 16, "UINT8", "INT8", "throughput", 3255),
                          ("lut", 24, 4, "UINT8", "INT8", "throughput", 8650), ("dsp", 18, 4, "UINT4", "INT4", "latency", 1311)])
def test_estimate_follows_yosys_on_the_resnet8_layer(res_type, simd, pe, idt, wdt, pipeline, yosys):
    """LUT-ROM weights of 24 words (18 at SIMD 8), Yosys (synth_xilinx, native 0.70): INT8 DSP48E1 lane pairs
    chained through the cascade, 2,343 LUT at SIMD 24 x PE 4 (48 DSPs; 3,014 split per product before) and
    3,255 at SIMD 8 x PE 16 (64 DSPs; 840 of them the canaries); the Booth rows in fabric at SIMD 24 x PE 4,
    8,650 (11,996 with shift-add rows before); W4A4's lanes at SIMD 18 x PE 4 split per product (the latency
    pipeline's form), 1,311 LUT with 36 DSP48E1 pairs. Within 10 %."""
    spec = int8_layer(res_type, simd, pe, wdt=wdt, idt=idt, pipeline=pipeline)
    assert spec.chains_in_dsp == (res_type == "dsp" and pipeline == "throughput")
    assert spec.booth_products == (res_type == "lut")
    assert abs(spec.resource_estimate().lut / yosys - 1) <= 0.10, spec.resource_estimate()
