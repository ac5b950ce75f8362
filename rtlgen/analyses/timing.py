"""Stream timing without simulating the design: the layers' timing models composed along a graph.

Every layer's spec says, cycle-exactly, when it takes each input word and offers each output word given
when its input words arrive (:mod:`layers.timing`). :func:`graph_timing` composes these models over a
graph with its FIFOs, taking every FIFO as deep as it needs to be: node by node in topological order,
a node's arrivals are its producers' offers (a FIFO offers a word two cycles after it entered). A width
converter that feeds its consumer directly (no FIFO between) is run again behind the consumer's takes
until both agree. The result is every word's cycle on every stream: what FIFO sizing reads
(:mod:`rtlgen.passes.size_fifos`), and the design's latency (:func:`latency_cycles`), which the folding
optimizer's latency objective and the compile's figures share.
"""

from dataclasses import dataclass

import numpy as np

from layers.timing import as_cycles, composing
from rtlgen.ir.graph import is_role, words_per_frame

__all__ = ["GraphTiming", "graph_timing", "paced_arrivals", "latency_cycles", "tensor_words"]

_MAX_ROUNDS = 64            # converter <-> consumer agreement rounds (a few in practice)


def tensor_words(graph):
    """{tensor: words per frame} for every stream of ``graph`` (FIFOs pass their neighbours' counts on)."""
    words = {}
    for node in graph.nodes:
        spec = node.spec()
        if is_role(node, "fifo"):
            continue
        if is_role(node, "dwc"):
            words[node.inputs[0]], words[node.outputs[0]] = spec.in_words, spec.out_words
            continue
        for k, t in enumerate(node.inputs):
            words.setdefault(t, words_per_frame(spec.folded_input_shapes[k]))
        for t in node.outputs:
            words[t] = words_per_frame(spec.folded_output_shape)
    fifos = [n for n in graph.nodes if is_role(n, "fifo")]
    changed = True
    while changed:
        changed = False
        for f in fifos:
            a, b = f.inputs[0], f.outputs[0]
            if (a in words) != (b in words):
                words[a] = words[b] = words.get(a, words.get(b))
                changed = True
    return words


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


def latency_cycles(graph):
    """Cycles from the first input word to the last output word of one frame, the pipeline idle and the
    input offered at full rate (``graph`` with its FIFOs, at depths that do not stall it)."""
    words = tensor_words(graph)
    timing = graph_timing(graph, 1 + np.arange(words[graph.input], dtype=np.int64))
    return int(timing.leave[graph.output][-1] - timing.leave[graph.input][0] + 1)
