"""FIFO depths and latency without simulating the design: the layers' timing models composed along the graph.

Every layer's spec says, cycle-exactly, when it takes each input word and offers each output word given
when its input words arrive (:mod:`layers.timing`). :func:`graph_timing` composes these models over a
graph with its FIFOs, taking every FIFO as deep as it needs to be: node by node in topological order,
a node's arrivals are its producers' offers (a FIFO offers a word two cycles after it entered). A width
converter that feeds its consumer directly (no FIFO between) is run again behind the consumer's takes
until both agree. The result is every word's cycle on every stream, so each FIFO's occupancy at every
cycle is known, and its depth is its largest occupancy (:func:`analytic_fifo_depths`).

Why this is enough. The model drives the graph input *paced*: frame ``f``'s word ``n`` arrives at cycle
``f * II + n * II // N`` (``N`` words per frame, ``II`` the slowest layer's cycles per frame), as fast
on average as the design can take it, so no FIFO fills with a backlog of input the slowest layer could
not take anyway (FINN's simulation-based sizing floods the input, and the FIFO in front of the slowest
layer grows to frames of backlog). With every FIFO at its modelled largest occupancy, the real design
fed this way repeats the model's cycles exactly (no FIFO is ever full when a word arrives). Fed faster
(a DMA that floods the input), the design's events can only come earlier: its handshakes are monotone
(a word offered earlier is never taken later), so every layer still runs at least as fast as in the
model, which reaches the II. The depths are never below the join bounds of
:func:`rtlgen.backend.stitch.branch_fifo_bounds` either. ``tests/test_fifo_sizing.py`` checks both claims
against simulation on the networks the tests compile.
"""

from dataclasses import dataclass

import numpy as np

from layers.timing import as_cycles

__all__ = ["FIFO_SIZINGS", "GraphTiming", "graph_timing", "paced_arrivals", "analytic_fifo_depths", "latency_cycles",
           "SIZING_FRAMES"]

FIFO_SIZINGS = ("analytic", "sim", "none")     # --fifo-sizing: this module, rtlgen.backend.stitch.size_fifos, join bounds
SIZING_FRAMES = 3           # frames the model runs to find every FIFO's largest occupancy (at least)
MAX_SIZING_FRAMES = 64      # (at most: more only while the output's frame period has not settled)
FIFO_OP, DWC_OP = "StreamingFIFO", "StreamingDataWidthConverter"
_MAX_ROUNDS = 64            # converter <-> consumer agreement rounds (a few in practice)


@dataclass
class GraphTiming:
    """Every stream's word cycles: ``enter[t]`` when each word of tensor ``t`` moves out of its producer
    (graph input: out of the source), ``leave[t]`` when each moves into its consumer (graph output:
    into the sink)."""
    enter: dict
    leave: dict
    frames: int

    def occupancy(self, fifo):
        """The largest number of words ``fifo`` (a node with one input and one output tensor) holds:
        words that entered before a cycle minus words that left before it, at its worst cycle."""
        into, out = self.leave[fifo.inputs[0]], self.leave[fifo.outputs[0]]
        if into.size == 0:
            return 0
        left_by = np.searchsorted(out, into, side="right")      # words gone when word j enters
        return int((np.arange(1, into.size + 1) - left_by).max())

    def frame_ends(self, tensor, words_per_frame):
        return self.leave[tensor][words_per_frame - 1::words_per_frame]


def paced_arrivals(words_per_frame, frames, ii):
    """Frame ``f``'s word ``n`` at cycle ``1 + f * ii + n * ii // words_per_frame`` (the bench's first edge
    is 1)."""
    n = np.arange(words_per_frame, dtype=np.int64)
    return (1 + np.arange(frames, dtype=np.int64)[:, None] * ii + (n * ii) // words_per_frame).reshape(-1)


def graph_timing(graph, source):
    """Compose the layers' timing models over ``graph`` (with its FIFOs, see
    :func:`rtlgen.backend.stitch.insert_dwcs_and_fifos`; their depths are ignored: every FIFO as deep as needed).
    ``source``: the cycles at which the graph input's words are offered. The graph output is never
    stalled."""
    offers = {graph.input: as_cycles(source)}      # tensor -> when each word is first offered to its reader
    enter = {graph.input: as_cycles(source)}
    leave = {}
    producers = {t: n for n in graph.nodes for t in n.outputs}
    for node in graph.nodes:
        timing = _run(node, [offers[t] for t in node.inputs])
        for k, t in enumerate(node.inputs):
            leave[t] = timing.reads[k]
        # A converter with no FIFO behind it: it stalls when its consumer does; run both until they agree.
        for k, t in enumerate(node.inputs):
            dwc = producers.get(t)
            if dwc is None or dwc.op_type != DWC_OP:
                continue
            for _ in range(_MAX_ROUNDS):
                behind = dwc.spec().timing([offers[dwc.inputs[0]]], taken=leave[t])
                leave[dwc.inputs[0]] = behind.reads[0]
                if np.array_equal(behind.writes, offers[t]):
                    break
                offers[t] = enter[t] = behind.writes
                timing = _run(node, [offers[u] for u in node.inputs])
                for kk, u in enumerate(node.inputs):
                    leave[u] = timing.reads[kk]
            else:
                raise RuntimeError(f"timing model: {dwc.name} and {node.name} do not agree")
        for t in node.outputs:
            writes = timing.writes
            # a FIFO's "writes" are the cycles it can first offer each word; anything else offers and moves
            offers[t] = writes
            enter[t] = timing.reads[0] if node.op_type == FIFO_OP else writes
    leave[graph.output] = offers[graph.output]          # the sink is always ready
    _check_unstalled(graph, enter, leave, producers)
    return GraphTiming(enter, leave, len(source))


def _run(node, arrivals):
    return node.spec().timing(arrivals)         # every op has one: the LayerSpec contract


def _check_unstalled(graph, enter, leave, producers):
    """Every layer's model assumes its output is never stalled: true behind a FIFO, and checked here where
    a layer feeds a width converter directly (a widening converter's buffer could, in principle, push back)."""
    for node in graph.nodes:
        if node.op_type != DWC_OP:
            continue
        t = node.inputs[0]
        producer = producers.get(t)
        if producer is None or producer.op_type == FIFO_OP:
            continue
        if not np.array_equal(leave[t], enter[t]):
            raise NotImplementedError(f"timing model: {node.name} stalls {producer.name}, whose output the model "
                                      f"takes as never stalled")


def _ii(graph):
    return max(n.spec().exp_cycles for n in graph.nodes)


def _words(graph):
    from rtlgen.backend.stitch import tensor_words
    return tensor_words(graph)


def analytic_fifo_depths(graph, *, frames=SIZING_FRAMES):
    """{FIFO name: depth} of ``graph`` (with its FIFOs): each FIFO's largest occupancy in the composed
    timing model under paced input (see the module docstring), rounded as FINN rounds simulated
    occupancies (:func:`rtlgen.backend.stitch.finn_fifo_depth`), and never below its join bound."""
    from rtlgen.backend.stitch import branch_fifo_bounds, finn_fifo_depth
    timing = _settled_timing(graph, frames)
    bounds = branch_fifo_bounds(graph)
    return {n.name: max(finn_fifo_depth(timing.occupancy(n)), bounds.get(n.name, 0))
            for n in graph.nodes if n.op_type == FIFO_OP}


def _settled_timing(graph, frames):
    """The composed model under input paced at the II, run until the output's frame period has settled at
    the II (its last two frames each one II apart), doubling the frames from ``frames`` up to
    :data:`MAX_SIZING_FRAMES`. A chain of layers at the II with window generators between them can start
    slower than the II for several frames (DS-CNN at --fit: 4 frames of 4,127 cycles, then 4,000) while the
    FIFOs before the slow consumer build the backlog that later keeps it busy; sizing on the first three
    frames only missed that backlog, and the design then ran at the transient's rate for good."""
    words, ii = _words(graph), _ii(graph)
    while True:
        timing = graph_timing(graph, paced_arrivals(words[graph.input], frames, ii))
        period = np.diff(timing.frame_ends(graph.output, words[graph.output]))
        if frames >= MAX_SIZING_FRAMES or (len(period) >= 2 and (period[-2:] <= ii).all()):
            return timing
        frames = min(2 * frames, MAX_SIZING_FRAMES)


def latency_cycles(graph):
    """Cycles from the first input word to the last output word of one frame, the pipeline idle and the
    input offered at full rate (``graph`` with its FIFOs, at depths that do not stall it)."""
    words = _words(graph)
    timing = graph_timing(graph, 1 + np.arange(words[graph.input], dtype=np.int64))
    return int(timing.leave[graph.output][-1] - timing.leave[graph.input][0] + 1)
