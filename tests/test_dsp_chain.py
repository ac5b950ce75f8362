"""DSP48E1 chains (issue 43 item 1, ``UnitSpec.chains_in_dsp``): a lane pair's SIMD packed products summed
in the DSPs' cascade, one fabric accumulator a pair over the fold, canary bits restoring the two lanes.

The arithmetic alone in numpy (every carry the canaries must tell, at the extreme operands), then the RTL
bit-exact against golden at full rate and under random backpressure, for each way the weights reach the
chain: column ROMs in LUTs or in block RAM, a streamed word delayed in flip-flops."""

from dataclasses import replace

import numpy as np
import pytest
from qonnx.core.datatype import DataType

from layers.dotproduct_unit import chain_canary_bits
from layers.mvau import MVAU, MVAUSpec
from tests.mvau_util import expected_mvau, random_input, run_unit
from tests.test_mvau import make_spec
from sim.harness import FULL_RATE, Backpressure


def chain_lanes(spec, w, x, k):
    """The two lanes of every pair as the chain computes them, in numpy: per step the pair's sum Q = sum_s
    (w_hi 2^S + w_lo) x, accumulated modulo 2^(S + acc width); each step's carry out of the low field
    from the k canary bits against (sum_s w_hi x) mod 2^k; the lanes restored from the carries' sum.
    ``w`` (MW, MH) as the spec's weights, ``x`` (vectors, MW); returns (vectors, MH)."""
    shift, width, n = spec.dsp_packing, spec.acc_shape.width, spec.simd
    total = shift + width
    out = np.zeros((x.shape[0], w.shape[1]), dtype=np.int64)
    for q in range(0, w.shape[1], 2):
        acc = np.zeros(x.shape[0], dtype=np.int64)
        carries = np.zeros(x.shape[0], dtype=np.int64)
        for sf in range(spec.sf):
            rows = slice(sf * n, (sf + 1) * n)
            q_step = x[:, rows] @ (w[rows, q + 1] * (1 << shift) + w[rows, q])
            rise = (x[:, rows] @ w[rows, q + 1]) % (1 << k)
            new = (acc + q_step) % (1 << total)
            carry = ((new >> shift) - (acc >> shift) - rise) % (1 << k)
            carries += np.where(carry >= 1 << (k - 1), carry - (1 << k), carry)
            acc = new
        low = (acc % (1 << shift)) + carries * (1 << shift)
        high = ((acc >> shift) - carries) % (1 << width)
        out[:, q] = low
        out[:, q + 1] = np.where(high >= 1 << (width - 1), high - (1 << width), high)
    return out


def extreme_weights(dtype, mw, mh):
    """The low lanes all at the most negative weight (the low field borrows every step), the high lanes
    alternating between the extremes."""
    lo, hi = int(DataType[dtype].min()), int(DataType[dtype].max())
    w = np.full((mw, mh), lo, dtype=np.int64)
    w[::2, 1::2] = hi
    return w


@pytest.mark.parametrize("idt, wdt", [("UINT8", "INT8"), ("INT8", "INT8"), ("INT4", "UINT4"), ("UINT3", "TERNARY")])
@pytest.mark.parametrize("simd", [2, 3, 8, 16, 32])
def test_canary_bits_tell_every_carry(idt, wdt, simd):
    mw, mh = simd * 8, 4
    rng = np.random.default_rng(simd)
    xlo, xhi = int(DataType[idt].min()), int(DataType[idt].max())
    weights = [extreme_weights(wdt, mw, mh),
               np.clip(-extreme_weights(wdt, mw, mh), int(DataType[wdt].min()), int(DataType[wdt].max())),
               rng.integers(int(DataType[wdt].min()), int(DataType[wdt].max()) + 1, (mw, mh))]
    x = np.concatenate([np.full((1, mw), xlo), np.full((1, mw), xhi), rng.integers(xlo, xhi + 1, (64, mw)),
                        rng.choice([xlo, xhi], (64, mw))]).astype(np.int64)
    for w in weights:
        spec = MVAUSpec(mw, mh, simd, mh, idt, wdt, w, res_type="dsp", mem_mode="internal_embedded")
        assert spec.chains_in_dsp
        k = chain_canary_bits(spec)
        assert np.array_equal(chain_lanes(spec, w, x, k), x @ w)


def test_fewer_canary_bits_would_miss_a_carry():
    # UINT8 x INT8 at S = 16, SIMD 8: a step's low-lane sum reaches -8 x 32,640, a carry of -4 (k = 4;
    # three bits hold -4 .. 3, but the carry out of a full low field reaches +4)
    mw, simd = 64, 8
    w = extreme_weights("INT8", mw, 2)
    spec = MVAUSpec(mw, 2, simd, 2, "UINT8", "INT8", w, res_type="dsp", mem_mode="internal_embedded")
    assert chain_canary_bits(spec) == 4
    x = np.array([[255] * mw, [255, 0] * (mw // 2)], dtype=np.int64)
    rng = np.random.default_rng(0)
    x = np.concatenate([x, rng.choice([0, 255], (256, mw))])
    w2 = rng.choice([-128, 127], (mw, 2))
    assert any(not np.array_equal(chain_lanes(spec, ww, x, 3), x @ ww) for ww in (w, w2, np.clip(-w, -128, 127)))


CASES = {   # id: (idt, wdt, mw, mh, simd, pe, mem_mode, ram_style, activation)
    "lut-column-roms": ("UINT8", "INT8", 32, 8, 8, 4, "internal_embedded", "distributed", None),
    "bram-column-roms": ("UINT8", "INT8", 96, 4, 6, 2, "internal_embedded", "block", "INT4"),
    "streamed-word-skewed": ("INT8", "INT8", 24, 4, 8, 4, "internal_decoupled", "auto", None),
    "external-weights": ("UINT8", "INT8", 12, 4, 3, 2, "external", "auto", None),
    "int4": ("INT4", "UINT4", 12, 4, 3, 4, "internal_embedded", "auto", "UINT4"),
}


@pytest.mark.sim
@pytest.mark.parametrize("case", list(CASES))
def test_chain_is_bit_exact(case):
    idt, wdt, mw, mh, simd, pe, mem_mode, ram_style, act = CASES[case]
    spec = make_spec(mw, mh, simd, pe, idt, wdt, act, res_type="dsp", mem_mode=mem_mode, ram_style=ram_style)
    spec = replace(spec, weights=extreme_weights(wdt, mw, mh), thresholds=spec.thresholds)
    assert spec.chains_in_dsp and spec.chain_column_roms == (mem_mode == "internal_embedded")
    assert spec.registers_operands == (ram_style == "block")
    x = random_input(spec, 3, 1)
    x[0] = int(spec.input_dtype.max())          # every product at a corner: the most carries
    x[1] = int(spec.input_dtype.min())
    expected = expected_mvau(spec, x)
    full = run_unit(MVAU(spec), spec, x, expected, FULL_RATE)
    assert full.steady_cycles("o", spec.nf) == spec.exp_cycles
    run_unit(MVAU(spec), spec, x, expected, Backpressure(seed=5))
