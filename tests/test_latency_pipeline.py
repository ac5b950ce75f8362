"""The latency pipeline (issue 33, --objective latency): layers built for the fewest cycles from input to
output, bit-exact, at their analytic latency, under random backpressure.

- StreamingFIFO ``fall_through``: a word entering an empty FIFO is offered one cycle later, not two.
"""

import numpy as np
import pytest

from layers.fifo import FIFOSpec, StreamingFIFO
from sim.harness import FULL_RATE, Backpressure, simulate_streams
from tests.test_fifo import run_fifo


@pytest.mark.sim
@pytest.mark.parametrize("depth", [2, 5, 32])
def test_fifo_fall_through(depth, simulator):
    spec = FIFOSpec(width=11, depth=depth, fall_through=True)
    assert spec.latency == 1
    words = [int(w) for w in np.random.default_rng(depth).integers(0, 1 << 11, 3 * depth + 40)]
    full = run_fifo(spec, words, FULL_RATE, simulator)
    assert full.latency("i", "o") == len(words) + spec.latency
    first = full.out_cycles("o")[0]
    assert full.out_cycles("o") == list(range(first, first + len(words)))     # one word per cycle
    # one word alone into the empty FIFO: offered the next cycle
    one = run_fifo(spec, words[:1], FULL_RATE, simulator)
    assert one.out_cycles("o")[0] - one.in_cycles("i")[0] == 1
    slow = run_fifo(spec, words, Backpressure(seed=depth, valid_prob=1.0, ready_prob=0.25), simulator)
    assert slow.probe("max_count") == spec.capacity
    run_fifo(spec, words, Backpressure(seed=depth + 1), simulator)


def test_fifo_fall_through_needs_srl():
    with pytest.raises(ValueError, match="fall_through needs shift-register storage"):
        FIFOSpec(width=8, depth=64, fall_through=True)
