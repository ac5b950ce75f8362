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

Models are written in numpy, loops only over chunks or periods of words: a recurrence of the form
``x[n] = max(y[n], x[n - 1] + 1)`` is a cumulative maximum (:func:`take_when_ready`), and two that feed each
other (a window generator's buffer, a width converter's) are raised to their least fixed point in a few
rounds of those. A 128x128 CNN's streams are millions of words a frame and the sizer runs several frames,
so a model makes few arrays (fresh memory costs as much as the arithmetic): an answer may be its arrivals
array itself, and no model writes into its arrivals or into another model's answer. The sizer runs them
inside :func:`composing`.
"""

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

__all__ = ["Timing", "as_cycles", "take_when_ready", "take_when_ready_in_place", "take_in_turn", "one_to_one",
           "frames_of", "counting", "composing"]


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
    ``take[n] = n + cummax(max(arrivals, ready)[k] - k)``.

    The streams of large feature maps are millions of words, and a fresh array costs as much as the
    arithmetic: one new array, updated in place; none when every word is offered at least a cycle after
    the one before and ``ready`` is None (a producer never stalled offers so): ``arrivals`` itself is the
    answer then (read only, as every model's answer is)."""
    a = as_cycles(arrivals)
    if a.size == 0:
        return a.copy()
    if ready is None:
        if a.size == 1 or (a[1:] > a[:-1]).all():
            return a
        return take_when_ready_in_place(a.copy())
    return take_when_ready_in_place(np.maximum(a, as_cycles(ready)))


def take_when_ready_in_place(x):
    """:func:`take_when_ready` of ``x`` (a writable int64 array), written over ``x``; returns ``x``."""
    n = counting(x.size)
    x -= n
    np.maximum.accumulate(x, out=x)
    x += n
    return x


def counting(n):
    """``np.arange(n)`` (int64, read only): a view of one array kept while :func:`composing` is on, so the
    many models of one composed run do not each build their own."""
    if _COUNTING is None:
        return np.arange(n, dtype=np.int64)
    if _COUNTING[0].size < n:
        _COUNTING[0] = np.arange(n, dtype=np.int64)
        _COUNTING[0].flags.writeable = False
    return _COUNTING[0][:n]


_COUNTING = None        # [the kept np.arange], while composing is on


@contextmanager
def composing(longest=0):
    """The setting for running many models over long streams (the FIFO sizer's composed runs, millions of
    words): :func:`counting` hands out views of one array, made ``longest`` long at once (growing it costs a
    fresh array each time), freed when the outermost ``composing`` ends; and numpy does not advise the
    kernel to back new arrays with huge pages. Each stream is written once and read a few times, so huge
    pages save little, while with THP defrag "madvise" (a common default) each advised fault may compact
    memory first: on the development machine that was two thirds of the system time of a 128x128 CNN's
    sizing (3.5 s of 5.3 s of CPU; 1.6 s without the advice)."""
    global _COUNTING
    outermost = _COUNTING is None
    if outermost:
        _COUNTING, advised = [np.arange(0, dtype=np.int64)], _hugepage_advice(False)
    try:
        if outermost:
            counting(longest)
        yield
    finally:
        if outermost:
            _COUNTING = None
            _hugepage_advice(advised)


def _hugepage_advice(on):
    """Set numpy's madvise(MADV_HUGEPAGE) on large arrays (where this numpy has the switch); the old setting."""
    switch = getattr(getattr(getattr(np, "_core", None), "multiarray", None), "_set_madvise_hugepage", None)
    return switch(on) if switch is not None else on


def take_in_turn(arrivals, gaps):
    """``take[n] = max(arrivals[n], take[n-1] + gaps[n])`` (``gaps[0]`` is ignored): a layer that needs
    ``gaps[n]`` cycles between taking word ``n - 1`` and word ``n``."""
    a = as_cycles(arrivals)
    if a.size == 0:
        return a.copy()
    offset = as_cycles(gaps).copy()
    offset[0] = 0
    np.cumsum(offset, out=offset)
    x = a - offset
    np.maximum.accumulate(x, out=x)
    x += offset
    return x


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
