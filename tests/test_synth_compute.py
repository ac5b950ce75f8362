"""Yosys maps the compute layers as intended: DSPs only for res_type=dsp, small threshold units."""

import numpy as np
import pytest
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from boards.yosys import synthesize
from layers.mvau import MVAU, MVAUSpec
from layers.thresholding import Thresholding, ThresholdingSpec


def int8_mvau(res_type, pe=2, idt="INT8", simd=4, **kwargs):
    np.random.seed(0)
    w = gen_finn_dt_tensor(DataType["INT8"], (32, 8))
    return MVAUSpec(32, 8, simd, pe, idt, "INT8", w, res_type=res_type, mem_mode="internal_embedded", **kwargs)


@pytest.mark.synth
# (UINT8 inputs in slow, CI time: a second WebAssembly Yosys run of the same packing; UINT8 x INT8 lanes in DSP
# pairs run bit-exact in RTL in tests/test_mvau.py's DSP cases by default)
@pytest.mark.parametrize("idt", ["INT8", pytest.param("UINT8", marks=pytest.mark.slow)])
def test_dsp_res_type_packs_two_int8_products_per_dsp48(idt):
    spec = int8_mvau("dsp", pe=4, idt=idt)      # lanes (0, 1) and (2, 3) share their DSPs
    assert spec.dsp_packing == 16
    r = synthesize(MVAU(spec))
    assert r.dsp == spec.pe * spec.simd // 2 == spec.resource_estimate().dsp
    assert min(min(regs) for regs in r.dsp_registers) == 1 and sum(r.dsp_registers.values()) == r.dsp  # A, B, M, P


@pytest.mark.synth
def test_two_lanes_accumulate_inside_each_dsp48():
    # SIMD 1: P accumulates both lanes over the fold (its Z input switched between P and 0 by "first").
    spec = int8_mvau("dsp", pe=4, simd=1)
    assert spec.accumulates_in_dsp
    r = synthesize(MVAU(spec))
    assert r.dsp == spec.pe // 2 == spec.resource_estimate().dsp
    assert min(min(regs) for regs in r.dsp_registers) == 1 and sum(r.dsp_registers.values()) == r.dsp


@pytest.mark.synth
def test_dsp_res_type_with_odd_pe_uses_one_dsp48_per_mac():
    spec = int8_mvau("dsp", pe=1)
    assert spec.dsp_packing is None
    r = synthesize(MVAU(spec))
    assert r.dsp == spec.pe * spec.simd == spec.resource_estimate().dsp
    assert min(min(regs) for regs in r.dsp_registers) == 1      # A, B, M and P: the tree starts from P


@pytest.mark.synth
def test_lut_res_type_uses_no_dsp():
    r = synthesize(MVAU(int8_mvau("lut")))
    assert r.dsp == 0


@pytest.mark.synth
@pytest.mark.slow       # CI time: a Yosys run (33 s); the threshold unit's other synthesis tests stay
def test_255_thresholds_stay_small():
    # An 8-bit output per lane is 8 compares (binary search), not 255 comparators.
    rng = np.random.default_rng(2)
    t = np.sort(rng.integers(-30000, 30000, size=(16, 255)), axis=1)
    spec = ThresholdingSpec(16, 4, "INT16", "UINT8", t)
    r = synthesize(Thresholding(spec), sta=True)
    assert r.lut < 4 * 8 * 40 + 600         # per lane: 8 stages of a 17-bit compare plus ROM bits
    assert r.critical_path_ns < 5.0


def test_canonical_signed_digits():
    from layers.dotproduct import canonical_digits
    # 7 = 8 - 1, 11 = 8 + 4 - 1 (or 16 - 4 - 1), -8 = -(8), 0: nothing
    assert canonical_digits([0, 1, 2, 3, 5, 7, -7, -8, 11, 15, 85]).tolist() == [0, 1, 1, 2, 2, 2, 2, 1, 3, 2, 4]


@pytest.mark.synth
@pytest.mark.slow
@pytest.mark.parametrize("wdt, idt, mw, xnor", [("INT4", "UINT4", 16, False), ("INT2", "UINT2", 32, False),
                                                ("BINARY", "BINARY", 64, True), ("INT4", "INT4", 16, False)])
@pytest.mark.parametrize("fold", [1, 2], ids=["one-word", "four-words"])
def test_embedded_few_word_weight_estimate_follows_yosys(wdt, idt, mw, xnor, fold):
    """One weight word (PE = MH, SIMD = MW), embedded: Yosys folds the weights into the products; the
    estimate counts their signed digits (it counted generic multipliers and a ROM: 2-2.7x over). Four
    words (PE and SIMD halved): the ROM's bits fold into the products' LUTs."""
    lo, hi = (0, 2) if xnor else (-(1 << (int(wdt[3:]) - 1)), 1 << (int(wdt[3:]) - 1))
    w = np.random.default_rng(1).integers(lo, hi, size=(mw, 8))
    spec = MVAUSpec(mw, 8, mw // fold, 8 // fold, idt, wdt, w, binary_xnor_mode=xnor, mem_mode="internal_embedded",
                    res_type="lut")
    assert spec.constant_weights == (fold == 1) and spec.wmem == fold * fold
    r = synthesize(MVAU(spec))
    assert abs(spec.resource_estimate().lut - r.lut) <= 0.15 * r.lut


@pytest.mark.synth
@pytest.mark.slow
@pytest.mark.parametrize("res_type, pe, simd", [("lut", 2, 16), ("dsp", 4, 16), ("dsp", 16, 1)])
def test_int8_mvau_with_block_ram_weights_meets_200_mhz(res_type, pe, simd):
    """The generator's layers: INT8 weights in block RAM, fabric MACs (as radix-4 Booth rows of the
    pipelined tree, an adder level a cycle) or packed DSP48E1 pairs, chained through the cascade (SIMD 16)
    or accumulated in P (SIMD 1). Every register-to-register path by Yosys sta and the delay model of
    boards.timing is under 5 ns (before: ~128 MHz, the BRAM's clock-to-out starting a multiplier, or the
    packed weight's borrow chain in front of the DSP; with the paths between registers seen (issue 43):
    ~163 MHz, a Booth row and two ~20-bit adders a cycle, ~134 MHz, the chain's canary rises summed in one
    cycle), and every DSP48E1 uses its A, B, M and P registers."""
    w = np.random.default_rng(0).integers(-128, 128, size=(256, 16))
    spec = MVAUSpec(256, 16, simd, pe, "UINT8", "INT8", w, res_type=res_type, mem_mode="internal_embedded",
                    ram_style="block")
    assert spec.registers_operands and spec.booth_products == (spec.product_rows == 4) == (res_type == "lut")
    assert spec.accumulates_in_dsp == (simd == 1) and spec.chains_in_dsp == (res_type == "dsp" and simd > 1)
    r = synthesize(MVAU(spec), sta=True)
    assert r.paths["top"].fmax_mhz >= 200, r.paths["top"]
    assert r.dsp == spec.resource_estimate().dsp
    assert all(min(regs) >= 1 for regs in r.dsp_registers) and sum(r.dsp_registers.values()) == r.dsp
