"""Stream timing models: the cycle at which a layer takes each input word and first offers each output
word, given when its input words can first be offered to it.

Every layer's spec answers ``spec.timing(arrivals)``:

- ``arrivals[k][n]`` is the first cycle at which word ``n`` of input ``k`` could be offered, were the
  layer to have taken word ``n - 1`` by then (a FIFO in front of it offers a word two cycles after it
  entered, or the cycle after the previous word left, whichever is later: the layer's own
  ``take[n] > take[n - 1]`` covers the second). Frames follow each other in the same arrays.
- The layer's output is never stalled (a deep FIFO behind it, or a consumer that is always ready).
- The answer, :class:`Timing`, holds ``reads[k][n]``, the cycle at which input word ``n`` moves, and
  ``writes[j]``, the cycle at which output word ``j`` is first offered, which, never stalled, is the
  cycle it moves. Every output stream of a layer moves in lockstep, so there is one ``writes``.

Cycles are the stream bench's (:mod:`sim.axis`): a word that moves at cycle ``t`` was offered and taken
at the clock edge numbered ``t``. A model is exact: ``tests/test_timing_models.py`` simulates each
layer with random gaps on its inputs and compares every read and write cycle. The compiler composes
these models along the graph to size FIFOs and predict latency without simulating the design
(:mod:`rtlgen.passes.size_fifos`).

Models are written in numpy where the recurrence allows it; a loop over words remains only where a
layer's next read depends on its own earlier output (a window generator's buffer), and runs in
milliseconds on the streams of CNV-sized networks.
"""

from dataclasses import dataclass

import numpy as np

__all__ = ["Timing", "as_cycles", "take_when_ready", "take_in_turn", "one_to_one", "frames_of"]


@dataclass(frozen=True)
class Timing:
    """When a layer moves its words (see the module docstring)."""
    reads: tuple            # per input stream: int64 array, the cycle each word moves
    writes: np.ndarray      # int64 array: the cycle each output word is first offered (and moves)


def as_cycles(values):
    """An int64 array of cycles."""
    return np.asarray(values, dtype=np.int64).reshape(-1)


def take_when_ready(arrivals, ready=None):
    """Cycles at which words offered at ``arrivals`` move into a layer that takes at most one word per
    cycle and is ready for word ``n`` from cycle ``ready[n]`` on (always, when ``None``):
    ``take[n] = max(arrivals[n], ready[n], take[n-1] + 1)``, in closed form
    ``take[n] = n + cummax(max(arrivals, ready)[k] - k)``."""
    a = as_cycles(arrivals)
    if ready is not None:
        a = np.maximum(a, as_cycles(ready))
    if a.size == 0:
        return a
    n = np.arange(a.size, dtype=np.int64)
    return np.maximum.accumulate(a - n) + n


def take_in_turn(arrivals, gaps):
    """``take[n] = max(arrivals[n], take[n-1] + gaps[n])`` (``gaps[0]`` is ignored): a layer that needs
    ``gaps[n]`` cycles between taking word ``n - 1`` and word ``n``."""
    a = as_cycles(arrivals)
    if a.size == 0:
        return a
    g = as_cycles(gaps).copy()
    g[0] = 0
    offset = np.cumsum(g)
    return np.maximum.accumulate(a - offset) + offset


def one_to_one(spec_latency, arrivals):
    """A pipeline that takes a word whenever one is offered and offers its result ``spec_latency``
    cycles later (Thresholding, ChannelwiseOp...)."""
    reads = take_when_ready(arrivals)
    return Timing((reads,), reads + spec_latency)


def frames_of(arrivals, words_per_frame):
    """How many whole frames ``arrivals`` holds (a model's inputs are whole frames)."""
    n = len(arrivals)
    if words_per_frame <= 0 or n % words_per_frame:
        raise ValueError(f"{n} arrivals are not whole frames of {words_per_frame} words")
    return n // words_per_frame
