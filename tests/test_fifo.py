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
@pytest.mark.parametrize("dtype", ["BIPOLAR", "INT2"])
@pytest.mark.parametrize("backpressure", [FULL_RATE, Backpressure(seed=7)], ids=["full", "bp"])
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


DEPTHS_STYLES = [(2, "auto"), (3, "distributed"), (32, "auto"), (33, "auto"), (100, "block"),
                 (512, "auto"), (1000, "distributed"), (4, "block")]


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
@pytest.mark.parametrize("sim_name", simulators_under_test())
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
    ({"width": 8, "depth": 1}, r"^FIFO depth must be an integer in 2\.\.65536, not 1$"),
    ({"width": 8, "depth": 65537}, r"^FIFO depth must be an integer in 2\.\.65536, not 65537$"),
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


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.parametrize("depth", [4096, 65536])
def test_deepest_fifo_fills_completely(depth):
    spec = FIFOSpec(width=8, depth=depth, ram_style="block")
    words = [k % 251 for k in range(depth + 200)]
    # The consumer waits until the producer has had time to fill the FIFO, then drains it.
    slow = run_fifo(spec, words, Backpressure(seed=1, valid_prob=1.0, ready_prob=0.02), "verilator")
    assert slow.probe("max_count") == spec.capacity


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
