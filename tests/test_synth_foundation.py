"""Foundation components through Yosys synth_xilinx: memories land in BRAM/LUTRAM/SRL, not in flip-flops.

The default suite keeps one run per memory kind the compiler relies on most (a shallow FIFO in SRLs, a
deep one in block RAM, a MemStream in block RAM); the other mappings are Yosys runs of 10-60 s each and run
in the slow suite (CI time, issue 42 item 6); benchmarks/foundation.py tables these components by Yosys."""

import pytest

SLOW_YOSYS = pytest.mark.slow       # CI time (issue 42): a Yosys run beyond the default's one per memory kind

from boards.yosys import synthesize
from layers.dwc import DWCSpec, StreamingDataWidthConverter
from layers.fifo import FIFOSpec, StreamingFIFO
from layers.memcost import bram18_count
from memstream import MemStream, MemStreamSpec


@pytest.mark.synth
@pytest.mark.parametrize("ram_style", [pytest.param("auto", marks=SLOW_YOSYS), "block",
                                       pytest.param("distributed", marks=SLOW_YOSYS)])
def test_deep_fifo_maps_to_ram(ram_style):
    r = synthesize(StreamingFIFO(FIFOSpec(width=64, depth=512, ram_style=ram_style)))
    if ram_style == "distributed":
        assert r.lutram > 0 and r.bram18 + r.bram36 == 0
    elif ram_style == "block":
        assert r.bram18 + r.bram36 > 0 and r.lutram == 0
    else:
        assert r.bram18 + r.bram36 > 0 or r.lutram > 0
    assert r.ff < 200        # output register, pointers, levels: not 512 x 64 flip-flops


@pytest.mark.synth
def test_shallow_fifo_maps_to_srl():
    r = synthesize(StreamingFIFO(FIFOSpec(width=64, depth=32)))
    assert r.srl >= 64 and r.lutram == 0 and r.bram18 + r.bram36 == 0
    assert r.ff < 120


@pytest.mark.synth
def test_memstream_maps_to_bram():
    spec = MemStreamSpec(1024, 36, tuple(range(1024)), "block", runtime_writeable=True)
    r = synthesize(MemStream(spec))
    assert r.bram18 + 2 * r.bram36 >= 2 and r.ff < 250


@pytest.mark.synth
@SLOW_YOSYS
@pytest.mark.parametrize("writeable", [False, True])
def test_memstream_distributed_maps_without_bram(writeable):
    # A read-only memory forced to "distributed" is a LUT ROM (it once failed Yosys' LUTRAM mapping);
    # a writeable one is LUTRAM.
    init = tuple((i * 0x9E3779B97F4A7C15) % (1 << 64) for i in range(64))
    r = synthesize(MemStream(MemStreamSpec(64, 64, init, "distributed", runtime_writeable=writeable)))
    assert r.bram18 + r.bram36 == 0
    assert (r.lutram > 0) == writeable


@pytest.mark.synth
@SLOW_YOSYS
def test_dwc_is_small():
    r = synthesize(StreamingDataWidthConverter(DWCSpec((1, 784), 49, 16)))
    assert r.ff <= DWCSpec((1, 784), 49, 16).buffer_bits + 16
    assert r.lut < 400


@pytest.mark.synth
@SLOW_YOSYS
@pytest.mark.parametrize("iw, ow", [(16, 128), (128, 32)])
def test_integer_ratio_dwc_has_no_per_bit_multiplexers(iw, ow):
    # up: clock-enabled registers only (it was 244 LUT with the general buffer); down: a LUT5 per input
    # bit (was 422). Bounds: the control's counters, not the word width.
    r = synthesize(StreamingDataWidthConverter(DWCSpec((1, 1024), iw, ow)))
    assert r.lut <= (16 if ow > iw else iw + 16)
    assert r.ff <= 2 * max(iw, ow) + 8


@pytest.mark.synth
@SLOW_YOSYS
def test_distributed_rom_streams_at_lut6_density():
    # 1,024 x 10 bits: 16 LUT6 per bit joined by MUXF7/F8 and one LUT (160 LUT), plus the stream's
    # registers and counter. With a CARRY4 address counter abc9 spent 622 LUT (measured 232 now).
    init = tuple((i * 0x9E3779B9) % 1024 for i in range(1024))
    r = synthesize(MemStream(MemStreamSpec(1024, 10, init, "distributed")))
    assert r.bram18 + r.bram36 == 0 and r.lutram == 0
    assert r.lut <= 1.5 * 10 * (1024 // 64)


@pytest.mark.synth
@pytest.mark.slow       # CI time: a Yosys run (22 s)
def test_split_rom_keeps_its_block_ram_share():
    # 1,024 x 72 bits: the low 36 bits in block RAM (2 RAMB18 as 1,024 x 18, the estimate's count), the top
    # 36 bits a logic ROM: 16 LUT6 per bit and their MUXF7/F8 at best; abc9 spends about 1.6x that on
    # random contents (963 LUT measured, as for a 1,024 x 36 distributed MemStream alone: 969)
    init = tuple((i * 0x9E3779B97F4A7C15) % (1 << 72) for i in range(1024))
    spec = MemStreamSpec(1024, 72, init, "block", lut_bits=36)
    r = synthesize(MemStream(spec))
    assert r.bram18 + 2 * r.bram36 == bram18_count(36, 1024) == 2
    assert r.lut + r.lut_as_memory <= 1.8 * 16 * 36
