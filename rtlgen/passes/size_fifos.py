"""FIFO depths without simulating the design: from the layers' timing models composed along the graph.

:func:`rtlgen.analyses.timing.graph_timing` gives every word's cycle on every stream of a graph with its
FIFOs, each FIFO as deep as it needs to be; so each FIFO's occupancy at every cycle is known, and its
depth is its largest occupancy (:func:`analytic_fifo_depths`).

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

import numpy as np

from rtlgen.analyses import timing as timing_models
from rtlgen.analyses.timing import paced_arrivals, tensor_words
from rtlgen.ir.graph import as_graph, is_role
from rtlgen.passes.insert import DEFAULT_FIFO_DEPTH, insert_dwcs_and_fifos

__all__ = ["analytic_fifo_depths", "SIZING_FRAMES", "MAX_SIZING_DEPTH", "finn_fifo_depth", "branch_fifo_bounds",
           "check_fifo_depths", "tensor_fifo_depths", "join_fifo_depths"]

SIZING_FRAMES = 3           # frames the model runs to find every FIFO's largest occupancy (at least)
MAX_SIZING_FRAMES = 64      # (at most: more only while the output's frame period has not settled)
MAX_SIZING_DEPTH = 16384    # deepest FIFO simulated sizing simulates with
JOIN_SLACK = 8              # words of pipeline registers a join bound leaves out


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
        # looked up at the call, where it lives: benchmarks/fifo_sizing.py counts the calls by patching it
        timing = timing_models.graph_timing(graph, paced_arrivals(words[graph.input], frames, ii))
        period = np.diff(timing.frame_ends(graph.output, words[graph.output]))
        if frames >= MAX_SIZING_FRAMES or (len(period) >= 2 and (period[-2:] <= ii).all()):
            return timing
        frames = min(2 * frames, MAX_SIZING_FRAMES)


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
    """The deep FIFOs :func:`rtlgen.backend.simulate.simulated_fifo_depths` starts from: each FIFO as deep as
    one frame of its tensor (words per frame of what its consumer takes; the graph output FIFO: of what the
    last layer emits), or its join bound if larger, at most ``max_depth``, at least 2. ``graph`` has no FIFOs
    yet."""
    fifoed = insert_dwcs_and_fifos(graph)
    bounds, words = branch_fifo_bounds(fifoed), tensor_words(fifoed)
    deep = {}
    for node in fifoed.nodes:
        if is_role(node, "fifo"):
            frame = words[node.inputs[0]]
            deep[node.name] = max(DEFAULT_FIFO_DEPTH, min(int(max_depth), max(frame, 2 * bounds.get(node.name, 0))))
    return deep
