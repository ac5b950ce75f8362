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
model, which reaches the II. The depths are never below the join bounds of :func:`branch_fifo_bounds`
either. ``tests/test_fifo_sizing.py`` checks both claims against simulation on the networks the tests
compile.

The other two sizings (``--fifo-sizing``): :func:`rtlgen.backend.simulate.simulated_fifo_depths` is FINN's
InsertAndSetFIFODepths (``largefifo_rtlsim``): simulate with deep FIFOs (:func:`tensor_fifo_depths`, here),
read each FIFO's ``max_count``, round as FINN does (:func:`finn_fifo_depth`); it stitches and simulates, so
it lives in the backend. :func:`join_fifo_depths` is only the analytic lower bound of
:func:`branch_fifo_bounds` on reconvergent paths (the short branch buffers the long one's lead), which
every sizing keeps. FIFOs, width converters and joins are the ops with role ``"fifo"``, ``"dwc"``,
``"join"`` (:mod:`rtlgen.passes.insert` puts the first two in).
"""

from dataclasses import dataclass

import numpy as np

from layers.timing import as_cycles, composing
from rtlgen.ir.graph import as_graph
from rtlgen.passes.insert import DEFAULT_FIFO_DEPTH, insert_dwcs_and_fifos, is_role, tensor_words

__all__ = ["GraphTiming", "graph_timing", "paced_arrivals", "analytic_fifo_depths", "latency_cycles",
           "SIZING_FRAMES", "MAX_SIZING_DEPTH", "finn_fifo_depth", "branch_fifo_bounds", "check_fifo_depths",
           "tensor_fifo_depths", "join_fifo_depths"]

SIZING_FRAMES = 3           # frames the model runs to find every FIFO's largest occupancy (at least)
MAX_SIZING_FRAMES = 64      # (at most: more only while the output's frame period has not settled)
MAX_SIZING_DEPTH = 16384    # deepest FIFO simulated sizing simulates with
JOIN_SLACK = 8              # words of pipeline registers a join bound leaves out
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
        start = min(int(into[0]), int(out[0]))
        span = max(int(into[-1]), int(out[-1])) + 1 - start
        if span > 4 * into.size:            # a sparse stream: words gone when word j enters, by search
            left_by = np.searchsorted(out, into, side="right")
            return int((np.arange(1, into.size + 1) - left_by).max())
        # a dense one: words in after each cycle's moves (at most one enters a cycle), a pass over the cycles
        held = np.bincount(into - start, minlength=span)
        held -= np.bincount(out - start, minlength=span)
        np.cumsum(held, out=held)
        return int(held[into - start].max())

    def frame_ends(self, tensor, words_per_frame):
        return self.leave[tensor][words_per_frame - 1::words_per_frame]


def paced_arrivals(words_per_frame, frames, ii):
    """Frame ``f``'s word ``n`` at cycle ``1 + f * ii + n * ii // words_per_frame`` (the bench's first edge
    is 1)."""
    n = np.arange(words_per_frame, dtype=np.int64)
    return (1 + np.arange(frames, dtype=np.int64)[:, None] * ii + (n * ii) // words_per_frame).reshape(-1)


def graph_timing(graph, source):
    """Compose the layers' timing models over ``graph`` (with its FIFOs, see
    :func:`rtlgen.passes.insert.insert_dwcs_and_fifos`; their depths are ignored: every FIFO as deep as needed).
    ``source``: the cycles at which the graph input's words are offered. The graph output is never
    stalled."""
    words = tensor_words(graph)
    frames = -(-len(source) // max(1, words.get(graph.input, 1)))
    with composing(frames * max(words.values(), default=0)):
        return _compose(graph, source)


def _compose(graph, source):
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
            if dwc is None or not is_role(dwc, "dwc"):
                continue
            if leave[t] is offers[t] or np.array_equal(leave[t], offers[t]):    # took every word when offered:
                continue                            # the converter never stalled, its model as run is the answer
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
            enter[t] = timing.reads[0] if is_role(node, "fifo") else writes
    leave[graph.output] = offers[graph.output]          # the sink is always ready
    _check_unstalled(graph, enter, leave, producers)
    return GraphTiming(enter, leave, len(source))


def _run(node, arrivals):
    return node.spec().timing(arrivals)         # every op has one: the LayerSpec contract


def _check_unstalled(graph, enter, leave, producers):
    """Every layer's model assumes its output is never stalled: true behind a FIFO, and checked here where
    a layer feeds a width converter directly (a widening converter's buffer could, in principle, push back)."""
    for node in graph.nodes:
        if not is_role(node, "dwc"):
            continue
        t = node.inputs[0]
        producer = producers.get(t)
        if producer is None or is_role(producer, "fifo"):
            continue
        if not np.array_equal(leave[t], enter[t]):
            raise NotImplementedError(f"timing model: {node.name} stalls {producer.name}, whose output the model "
                                      f"takes as never stalled")


def _ii(graph):
    return max(n.spec().exp_cycles for n in graph.nodes)


def analytic_fifo_depths(graph, *, frames=SIZING_FRAMES):
    """{FIFO name: depth} of ``graph`` (with its FIFOs): each FIFO's largest occupancy in the composed
    timing model under paced input (see the module docstring), rounded as FINN rounds simulated
    occupancies (:func:`finn_fifo_depth`), and never below its join bound. ``graph`` may also be a
    :class:`rtlgen.passes.insert.StreamPlan` (the FIFOs planned, no graph built): like the timing model
    and the join bounds, this reads only its ``nodes``, ``input``, ``output`` and ``producer``."""
    timing = _settled_timing(graph, frames)
    bounds = branch_fifo_bounds(graph)
    return {n.name: max(finn_fifo_depth(timing.occupancy(n)), bounds.get(n.name, 0))
            for n in graph.nodes if is_role(n, "fifo")}


def _settled_timing(graph, frames):
    """The composed model under input paced at the II, run until the output's frame period has settled at
    the II (its last two frames each one II apart), doubling the frames from ``frames`` up to
    :data:`MAX_SIZING_FRAMES`. A chain of layers at the II with window generators between them can start
    slower than the II for several frames (DS-CNN at --fit: 4 frames of 4,127 cycles, then 4,000) while the
    FIFOs before the slow consumer build the backlog that later keeps it busy; sizing on the first three
    frames only missed that backlog, and the design then ran at the transient's rate for good."""
    words, ii = tensor_words(graph), _ii(graph)
    while True:
        timing = graph_timing(graph, paced_arrivals(words[graph.input], frames, ii))
        period = np.diff(timing.frame_ends(graph.output, words[graph.output]))
        if frames >= MAX_SIZING_FRAMES or (len(period) >= 2 and (period[-2:] <= ii).all()):
            return timing
        frames = min(2 * frames, MAX_SIZING_FRAMES)


def latency_cycles(graph):
    """Cycles from the first input word to the last output word of one frame, the pipeline idle and the
    input offered at full rate (``graph`` with its FIFOs, at depths that do not stall it)."""
    words = tensor_words(graph)
    timing = graph_timing(graph, 1 + np.arange(words[graph.input], dtype=np.int64))
    return int(timing.leave[graph.output][-1] - timing.leave[graph.input][0] + 1)


# ---------------------------------------------------------------------------------------------- join bounds

def finn_fifo_depth(max_count):
    """FINN's rounding of an observed occupancy: <= 2 -> 2, <= 32 -> 32 (one SRL), else exact.

    Our FIFO holds ``depth + 1`` words (storage plus output register) but its ``i.ready`` drops when
    the storage holds ``depth``. An occupancy of ``n >= 2`` always means ``n - 1`` words in storage and
    a full output register, and reaching it took a write while storage held ``n - 2``... up to ``n - 1``
    with a simultaneous read; so ``depth = n`` (not ``n - 1``) is what keeps ``i.ready`` high in every
    cycle it was high in the deep simulation, and the sized design repeats its timing exactly.
    """
    n = int(max_count)
    if n <= 2:
        return 2
    if n <= 32:
        return 32
    return n


def branch_fifo_bounds(graph):
    """{FIFO name: words} the FIFO in front of each input of a join (an op with role ``"join"``:
    AddStreams, StreamingConcat) must hold at least, or the design deadlocks: an analytic lower bound from
    the layers' lead.

    For every tensor, ``lead`` counts the graph-input words that must enter before its first word can
    appear: a layer taking ``L`` input words (``spec.lead_words``) before its first output adds
    ``(L - 1)`` of its input words, each worth ``ratio`` graph-input words (input words per frame over
    that tensor's words per frame). A join takes its inputs in lockstep, so while its slowest input's
    first word is on its way, each faster input's words pile up: ``(lead(slow) - lead(fast)) /
    ratio(fast)`` words, all of which sit in the FIFO in front of the join when the paths have no other
    buffering (pipeline registers of a few words are left out, so this is a lower bound). ``graph`` has
    its FIFOs (:func:`rtlgen.passes.insert.insert_dwcs_and_fifos`).
    """
    words = tensor_words(graph)
    frame_in = words[graph.input]
    lead = {graph.input: 0.0}
    bounds = {}
    for node in graph.nodes:
        spec = node.spec()
        ratios = [frame_in / words[t] for t in node.inputs]
        leads = [lead[t] for t in node.inputs]
        if is_role(node, "join"):
            slow = max(leads)
            for t, l, r in zip(node.inputs, leads, ratios):
                fifo = graph.producer(t)[0]
                if is_role(fifo, "fifo"):
                    bounds[fifo.name] = max(bounds.get(fifo.name, 0), int((slow - l) / r))
        start = max(l + (spec.lead_words - 1) * r for l, r in zip(leads, ratios))
        for t in node.outputs:
            lead[t] = start
    return bounds


def check_fifo_depths(graph):
    """Raise ValueError naming the first FIFO in front of a join shallower than :func:`branch_fifo_bounds`."""
    for name, bound in branch_fifo_bounds(graph).items():
        depth = graph.node(name).spec().depth
        if depth < bound:
            raise ValueError(f"{name} (depth {depth}) in front of a join holds fewer words than the other "
                             f"branch's lead ({bound} words): the design would deadlock")
    return graph


def join_fifo_depths(graph):
    """FIFO depths without simulation: 2, and in front of joins their bound (:func:`branch_fifo_bounds`)
    with FINN's rounding and room for the layers' pipeline registers (not proven by simulation)."""
    graph = as_graph(graph)
    bounds = branch_fifo_bounds(insert_dwcs_and_fifos(graph))
    return {name: finn_fifo_depth(bound + JOIN_SLACK) for name, bound in bounds.items() if bound > 0}


# ---------------------------------------------------------------------------------------------- by simulation

def tensor_fifo_depths(graph, *, max_depth=MAX_SIZING_DEPTH):
    """The deep FIFOs :func:`rtlgen.backend.simulate.simulated_fifo_depths` starts from: each FIFO as deep as one frame of its tensor
    (words per frame of what its consumer takes; the graph output FIFO: of what the last layer emits),
    or its join bound if larger, at most ``max_depth``, at least 2. ``graph`` has no FIFOs yet."""
    fifoed = insert_dwcs_and_fifos(graph)
    bounds, words = branch_fifo_bounds(fifoed), tensor_words(fifoed)
    deep = {}
    for node in fifoed.nodes:
        if is_role(node, "fifo"):
            frame = words[node.inputs[0]]
            deep[node.name] = max(DEFAULT_FIFO_DEPTH, min(int(max_depth), max(frame, 2 * bounds.get(node.name, 0))))
    return deep
