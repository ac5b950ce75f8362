"""StreamingFIFO: bit-exact transfer, exact latency and rate, occupancy monitor, with and without backpressure."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from layers.fifo import FIFOSpec, StreamingFIFO
from memstream.packing import pack_words, unpack_words
from sim.harness import FULL_RATE, Backpressure, simulate_streams
from tests.conftest import RANDOM_EXAMPLES, simulators_under_test


def occupancy_peak(in_cycles, out_cycles):
    """Largest number of words inside, from the transfer stamps alone (independent of the count register)."""
    events = sorted([(t, 1) for t in in_cycles] + [(t, -1) for t in out_cycles])
    level = peak = 0
    for k, (t, step) in enumerate(events):
        level += step
        if k + 1 == len(events) or events[k + 1][0] != t:      # count only after all transfers at edge t
            peak = max(peak, level)
    return peak


def run_fifo(spec, words, backpressure, simulator):
    result = simulate_streams(StreamingFIFO(spec), inputs={"i": words}, outputs={"o": len(words)},
                              backpressure=backpressure, simulator=simulator, probes=["max_count", "count"])
    assert result.words("o") == [int(w) for w in words]
    assert result.probe("count") == 0
    assert result.probe("max_count") == occupancy_peak(result.in_cycles("i"), result.out_cycles("o"))
    return result


@pytest.mark.sim
@pytest.mark.parametrize("dtype, backpressure", [   # CI time: one of FINN's four cases by default, the rest slow
    pytest.param("BIPOLAR", FULL_RATE, id="full-BIPOLAR", marks=pytest.mark.slow),
    pytest.param("BIPOLAR", Backpressure(seed=7), id="bp-BIPOLAR", marks=pytest.mark.slow),
    pytest.param("INT2", FULL_RATE, id="full-INT2"), pytest.param("INT2", Backpressure(seed=7), id="bp-INT2",
                                                                  marks=pytest.mark.slow)])
def test_finn_grid_tensor(dtype, backpressure, simulator):
    # FINN's FIFO test: normal shape [1, 128], folded [1, 1, 128], depth 16; here 20 frames back to back.
    frames = 20
    x = gen_finn_dt_tensor(DataType[dtype], (frames, 1, 128))
    words = list(pack_words(x, dtype).reshape(-1))
    spec = FIFOSpec(width=128 * DataType[dtype].bitwidth(), depth=16)
    result = run_fifo(spec, words, backpressure, simulator)
    y = unpack_words(np.array(result.words("o"), dtype=object), dtype, 128).reshape(x.shape)
    assert np.array_equal(y, x)
    if backpressure is FULL_RATE:
        assert result.latency("i", "o") == frames + spec.latency
        assert result.steady_cycles("o", words_per_frame=1) == 1.0


DEPTHS_STYLES = [(2, "auto"), (3, "distributed"), (33, "auto"), (100, "block")] + [
    pytest.param(d, s, marks=pytest.mark.slow)        # CI time (issue 42): each storage style stays by default above
    for d, s in ((32, "auto"), (512, "auto"), (1000, "distributed"), (4, "block"))]


@pytest.mark.sim
@pytest.mark.parametrize("depth, ram_style", DEPTHS_STYLES)
def test_depths_and_styles(depth, ram_style, simulator):
    spec = FIFOSpec(width=13, depth=depth, ram_style=ram_style)
    words = [int(w) for w in np.random.default_rng(depth).integers(0, 1 << 13, 3 * depth + 50)]
    full = run_fifo(spec, words, FULL_RATE, simulator)
    assert full.out_cycles("o") == list(range(full.out_cycles("o")[0], full.out_cycles("o")[0] + len(words)))
    assert full.latency("i", "o") == len(words) + spec.latency
    # A slow consumer fills the FIFO: it must hold exactly `capacity` words, then stall its input.
    slow = run_fifo(spec, words, Backpressure(seed=depth, valid_prob=1.0, ready_prob=0.25), simulator)
    assert slow.probe("max_count") == spec.capacity
    run_fifo(spec, words, Backpressure(seed=depth + 1), simulator)


@pytest.mark.sim
# CI time (issue 42 item 6): Verilator's case in the slow suite (a cold cocotb build: 16 s), see conftest; the FIFOs
# run on Verilator under random backpressure in every whole network (test_cli_verify's
# test_network_under_random_backpressure[verilator], the compiled bench of rtl_at_the_ii_under_backpressure)
@pytest.mark.parametrize("sim_name", simulators_under_test(slow=("verilator",)))
def test_each_simulator(sim_name):
    spec = FIFOSpec(width=64, depth=40)
    words = [int(w) for w in np.random.default_rng(1).integers(0, 1 << 62, 300)]
    run_fifo(spec, words, Backpressure(seed=3), sim_name)


@pytest.mark.sim
@settings(max_examples=RANDOM_EXAMPLES)
@given(width=st.integers(1, 96), depth=st.integers(2, 300), ram_style=st.sampled_from(["auto", "distributed", "block"]),
       seed=st.integers(0, 1000))
def test_random_specs(width, depth, ram_style, seed):
    rng = np.random.default_rng(seed)
    words = [int.from_bytes(rng.bytes(12), "little") % (1 << width) for _ in range(depth + 40)]
    run_fifo(FIFOSpec(width, depth, ram_style), words, Backpressure(seed=seed), None)


@pytest.mark.parametrize("kwargs, message", [
    ({"width": 0, "depth": 4}, r"^FIFO width must be a positive integer, not 0$"),
    ({"width": 8, "depth": 1}, r"^FIFO depth must be an integer >= 2, not 1$"),
    ({"width": 8, "depth": 2.5}, r"^FIFO depth must be an integer >= 2, not 2\.5$"),
    ({"width": 8, "depth": 4, "ram_style": "ultra"},
     r"^FIFO ram_style must be one of auto, distributed, block, not 'ultra'$"),
])
def test_illegal_specs(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FIFOSpec(**kwargs)


def test_storage_choice():
    assert FIFOSpec(8, 32).storage == "srl"
    assert FIFOSpec(8, 33).storage == "memory"
    assert FIFOSpec(8, 16, "block").storage == "memory"
    assert FIFOSpec(8, 65536).capacity == 65537


# The FIFO --fit's slowest candidate for the 128x128 ESPCN (tests/models/espcn) wants in front of a slow MVAU.
DEEP = 104_542


def test_a_fifo_deeper_than_65536_words_is_legal_and_costed_in_block_ram():
    """Issue 46 item 6: one memory of as many block RAMs as the depth takes, as Yosys tiles it (4096 x 9
    RAMB36 halves stacked 26 deep: 52 RAMB18, a 26:1 read multiplexer per bit), never a ValueError."""
    from layers.memcost import ram_cost
    from rtlgen.costmodel import estimate
    spec = FIFOSpec(8, DEEP)
    assert spec.storage == "memory" and spec.in_block_ram and spec.capacity == DEEP + 1
    used = spec.resource_estimate()
    assert used.bram18 == 52 == ram_cost(8, DEEP).bram18
    assert used.lut >= 8 * 13                       # 13 LUTs a bit for the 26:1 read multiplexer
    assert estimate(spec)["BRAM18"] == 52
    assert FIFOSpec(8, 1 << 20).resource_estimate().bram18 == 512      # 2^20 x 8: 8 x 32 RAMB36 of 32K x 1
    lutram = FIFOSpec(8, DEEP, "distributed").resource_estimate()       # legal, and costly, as asked
    assert lutram.bram18 == 0 and lutram.lut > 10_000


def _axis_top(spec):
    """A StreamingFIFO's Verilog with FINN's stream port names (``s_axis_0_t*``, ``m_axis_0_t*``, as the compiled
    bench drives them) and its ``count`` / ``max_count``."""
    from amaranth.back import verilog
    from amaranth.hdl import Elaboratable, Module, Signal

    class Top(Elaboratable):
        def __init__(self):
            self.ports = {name: Signal(width, name=name) for name, width in (
                ("s_axis_0_tdata", spec.width), ("s_axis_0_tvalid", 1), ("s_axis_0_tready", 1),
                ("m_axis_0_tdata", spec.width), ("m_axis_0_tvalid", 1), ("m_axis_0_tready", 1),
                ("count", (spec.capacity + 1).bit_length()), ("max_count", (spec.capacity + 1).bit_length()))}

        def elaborate(self, platform):
            m, p = Module(), self.ports
            m.submodules.fifo = fifo = StreamingFIFO(spec)
            m.d.comb += [fifo.i.payload.eq(p["s_axis_0_tdata"]), fifo.i.valid.eq(p["s_axis_0_tvalid"]),
                         p["s_axis_0_tready"].eq(fifo.i.ready), p["m_axis_0_tdata"].eq(fifo.o.payload),
                         p["m_axis_0_tvalid"].eq(fifo.o.valid), fifo.o.ready.eq(p["m_axis_0_tready"]),
                         p["count"].eq(fifo.count), p["max_count"].eq(fifo.max_count)]
            return m

    top = Top()
    return verilog.convert(top, name="top", ports=list(top.ports.values()))


@pytest.mark.sim
@pytest.mark.parametrize("backpressure", [
    pytest.param(Backpressure(seed=2, valid_prob=1.0, ready_prob=0.1), id="slow-consumer"),
    pytest.param(Backpressure(seed=3), id="random-gaps", marks=pytest.mark.slow)])     # CI time: 27 s each
def test_a_fifo_deeper_than_65536_words_fills_and_drains_under_backpressure(backpressure):
    """The RTL of a 70,000-word FIFO (17-bit levels and addresses, 35 RAMB18 stacked in depth) on the compiled
    bench: a slow consumer fills it to its capacity, then it drains in order; and under random gaps on both
    sides, its ``max_count`` the occupancy its transfers show."""
    spec = FIFOSpec(width=8, depth=70_000)
    verilog = _axis_top(spec)
    words = [(k * 7) % 251 for k in range(spec.depth + 10_000)]         # fills at 0.9 words a cycle net
    result = simulate_streams(verilog, inputs={"s_axis_0": words}, outputs={"m_axis_0": len(words)},
                              port_style="axis", backpressure=backpressure, probes=["max_count", "count"],
                              compiled=True)
    assert result.words("m_axis_0") == words
    assert result.probe("count") == 0
    assert result.probe("max_count") == occupancy_peak(result.in_cycles("s_axis_0"), result.out_cycles("m_axis_0"))
    if backpressure.ready_prob < 0.5:                   # the slow consumer: it fills to its capacity
        assert result.probe("max_count") == spec.capacity


# Yosys 0.70 synth_xilinx of a ROM with random contents and a registered read (rom_style block): (depth,
# width) -> (RAMB18s, LUTs). Per-block tiling would be wrong on 7 of the 9.
YOSYS_BLOCK_ROMS = {(2304, 128): (18, 256), (18432, 32): (32, 160), (9216, 32): (16, 160), (4608, 64): (16, 320),
                    (1152, 256): (22, 256), (2304, 64): (9, 128), (32768, 8): (15, 64), (32768, 4): (8, 0),
                    (288, 512): (15, 0)}


@pytest.mark.parametrize("shape", sorted(YOSYS_BLOCK_ROMS))
def test_block_rom_cost_follows_yosys(shape):
    from layers.memcost import rom_bram_cost
    depth, width = shape
    assert rom_bram_cost(width, depth) == YOSYS_BLOCK_ROMS[shape]
