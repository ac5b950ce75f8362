"""Radix-4 Booth rows for INT8 fabric products (issue 43 item 1, ``UnitSpec.booth_products``): the rows of
every UINT8 x INT8 product plus ``booth_offset`` equal the product (exhaustively), and MVAUs whose lanes sum
them, each accumulator starting a fold at its channel's offset, are bit-exact against golden at full rate and
under random backpressure."""

from dataclasses import replace

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from layers.datapath import booth_offset, booth_rows
from tests.test_mvau import check, make_spec


@pytest.mark.parametrize("ib", [8, 3])
def test_rows_and_offset_make_every_product(ib):
    x, w = Signal(ib), Signal(8)
    rows = booth_rows(x, w)
    assert len(rows) == 4
    m = Module()
    total = Signal(range(4 * 1024 * 64 + 1))
    m.d.comb += total.eq(sum(rows[1:], rows[0]))
    wrong = []

    async def bench(ctx):
        for wv in range(-128, 128):
            ctx.set(w, wv & 0xFF)
            offset = int(booth_offset(wv, 8, ib))
            for xv in range(1 << ib):
                ctx.set(x, xv)
                if ctx.get(total) + offset != wv * xv:
                    wrong.append((wv, xv))
                    return
    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert not wrong


CASES = {   # id: (idt, mw, mh, simd, pe, activation, mem_mode)
    "starts-per-nf": ("UINT8", 16, 12, 4, 2, None, "internal_embedded"),      # NF 6: a start ROM on nf
    "one-fold-step": ("UINT8", 4, 4, 4, 2, "INT4", "internal_decoupled"),      # SF 1: the sum plus the start
    "narrow-input": ("UINT3", 12, 4, 3, 4, "UINT2", "internal_embedded"),
}


@pytest.mark.sim
@pytest.mark.parametrize("case", list(CASES))
def test_booth_lanes_are_bit_exact(case):
    idt, mw, mh, simd, pe, act, mem_mode = CASES[case]
    spec = make_spec(mw, mh, simd, pe, idt, "INT8", act, res_type="lut", mem_mode=mem_mode)
    w = np.array(spec.weights)
    w[0, :], w[1, ::2] = -128, 127               # the extreme weights: every digit's sign and size
    spec = replace(spec, weights=w, thresholds=spec.thresholds)
    assert spec.booth_products and spec.product_rows == 4 and not spec.offset_weights
    check(spec)
