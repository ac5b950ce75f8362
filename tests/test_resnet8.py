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



def test_a_parallel_window_generator_forces_a_fifo_and_converter():
    """Op.stitched_after of a dense parallel-window generator: the 1,152-bit FIFO and the width converter
    stitching puts after it unless its consumer reads whole windows (ResNet-8's 16-channel 3x3 windows at 8
    bits; --fit had stopped at II 24,576 picking them for 143 LUT against the default style's 258 + 4
    BRAM18); the default style and a depthwise generator (its VVAU reads whole windows) force nothing."""
    from rtlgen.costmodel import estimate
    from swg import OP, SWGSpec

    window = dict(ifm_dim=(34, 34), ifm_channels=16, kernel=(3, 3), input_dtype="UINT8", simd=16)
    parallel, default = SWGSpec(**window, parallel_window=True), SWGSpec(**window)
    fifo, dwc = OP.stitched_after(parallel)
    assert (fifo.width, dwc.in_width, dwc.out_width) == (1152, 1152, 128)
    assert estimate(parallel).lut + sum(estimate(s).lut for s in (fifo, dwc)) > estimate(default).lut + 2000
    assert OP.stitched_after(default) == ()
    assert OP.stitched_after(SWGSpec(**window, parallel_window=True, depthwise=True)) == ()


@pytest.mark.parametrize("whole_affordable, picked", [(False, [1, 0]), (True, [0, 1])])
def test_the_program_charges_a_forced_converter_unless_the_consumer_avoids_it(whole_affordable, picked):
    """The folding program pays an option's forced cost only where its consumer's option does not read
    its word whole: a generator's parallel style (cheap alone, 2,400 LUT forced) loses to the default
    style (BRAM) behind a narrow reader, and wins where the reader takes whole windows."""
    from rtlgen.passes.optimize import Option, _cheapest_within
    from rtlgen.passes.optimize_stitch import Charge
    generator = [Option((), 100, (143, 0, 0, 0), (2400, 0, 0, 0)), Option((), 100, (258, 0, 4, 0))]
    reader = [Option((), 100, (1000, 0, 0, 0)), Option((), 100, (1000 if whole_affordable else 9000, 0, 0, 0))]
    limit = np.array([10000.0, np.inf, 280.0, np.inf])
    charges = [Charge(0, 0, (2400, 0, 0, 0), consumer=1, avoided_by=(1,))]
    assert _cheapest_within([generator, reader], limit, 100, charges) == picked
