"""The links between two layers that need no FIFO (the latency objective, issue 43): :func:`chain_layers`.

Two kinds: chained layers (below), and a FIFO behind a layer that already ends in a FIFO of its own
(``spec.ends_in_fifo``: the dot-product engine's output FIFO) which never holds a word at the frame rate
(:func:`_idle_fifos`): it only repeats the layer's own FIFO, one cycle more; and where the reader takes a
word whenever it may advance, the layer's own FIFO goes too (:func:`_straight_out`).

A FIFO between two layers lets the producer run ahead of a stalled consumer and registers the boundary;
between two layers that take one word a cycle whenever their output is ready and whose registers follow
the clock from the input's arrival on (``spec.chains``: distributed arithmetic's bit heaps), neither is
needed, and the FIFO's register costs a cycle of latency. This module names no op type: the specs say
whether they chain (``chains``), what logic their output carries into the next cycle (``output_ns``), and
take ``input_ns`` / ``output_fifo`` as folding attributes.
"""

import numpy as np

from rtlgen.analyses.timing import graph_timing, tensor_words
from rtlgen.ir.graph import is_role

__all__ = ["chain_layers", "unlinked"]


def _chains(node):
    return not is_role(node, "fifo") and bool(getattr(node.spec(), "chains", False))


def chain_layers(graph):
    """``graph`` (stitched, with its FIFOs) without the FIFOs between two layers whose specs say they chain
    (``spec.chains``: one word a cycle, ``i.ready`` is ``o.ready``, registers placed from the input's arrival
    on, as distributed arithmetic's bit heaps): such a producer never needs its consumer to wait, and the
    FIFO's register only cost a cycle. The FIFOs on the graph's input and output stay (a chain's ready is
    the last FIFO's), and every FIFO next to a layer that does not chain, but those that only repeat the
    layer's own output FIFO (:func:`_idle_fifos`). Where the registers go across each boundary:
    :func:`_place_chain`."""
    graph = graph.copy()
    producer = {t: n for n in graph.nodes for t in n.outputs}
    reader = {t: n for n in graph.nodes for t in n.inputs}
    idle = _idle_fifos(graph, producer, reader)
    bypass = {}                         # a dropped FIFO's output tensor -> its input tensor
    for node in graph.nodes:
        if not is_role(node, "fifo") or len(node.inputs) != 1:
            continue
        before, after = producer.get(node.inputs[0]), reader.get(node.outputs[0])
        if before is not None and after is not None and _chains(before) and _chains(after) \
                and len(before.outputs) == 1 and len(after.inputs) == 1 \
                and "input_ns" in after.op.folding and "output_fifo" in before.op.folding:
            bypass[node.outputs[0]] = node.inputs[0]
    if not bypass and not idle:
        return graph
    dropped = {producer[t].name for t in {**bypass, **idle}}
    for out, into in idle.items():
        _straight_out(producer[into], reader[out])
    nodes = [n for n in graph.nodes if n.name not in dropped]
    for node in nodes:
        node.inputs = tuple(bypass.get(t, idle.get(t, t)) for t in node.inputs)
    linked = set(bypass.values())       # tensors from one chained layer straight into the next
    after = {t: n for n in nodes for t in n.inputs}
    for head in nodes:
        if head.outputs[0] in linked and not set(head.inputs) & linked:
            chain = [head]
            while chain[-1].outputs[0] in linked:
                chain.append(after[chain[-1].outputs[0]])
            _place_chain(chain)
    return graph.copy(nodes=nodes).check()


def unlinked(graph):
    """``graph`` (stitched with a FIFO at every boundary: the throughput objective) with the link attributes a
    latency compile's folding.json carries undone where a FIFO stands: ``input_ns`` 0 after a FIFO (its
    register drives the input), ``output_fifo`` True before one. Such a folding compiled without
    ``--objective latency`` then plans its registers for the FIFOs it has (a layer planned for no FIFO's mux
    behind it would miss the clock by that mux)."""
    graph = graph.copy()
    producer = {t: n for n in graph.nodes for t in n.outputs}
    reader = {t: n for n in graph.nodes for t in n.inputs}
    for node in graph.nodes:
        if is_role(node, "fifo"):
            continue
        if node.folding.get("input_ns") and all(is_role(producer[t], "fifo") for t in node.inputs if t in producer):
            node.folding["input_ns"] = 0.0
        if not node.folding.get("output_fifo", True) and all(is_role(reader[t], "fifo") for t in node.outputs
                                                            if t in reader):
            node.folding["output_fifo"] = True
    return graph


IDLE_FRAMES = 3         # frames at full rate over which a FIFO must never hold a word to be dropped


def _idle_fifos(graph, producer, reader):
    """{output tensor: input tensor} of each FIFO (depth 2, between two layers, one stream on each side)
    behind a layer that ends in a FIFO of its own (``spec.ends_in_fifo``) whose reader takes every word the
    cycle the FIFO offers it, frame after frame at full rate (the composed timing models): the layer's own
    FIFO does its work (registered ``valid`` and ``ready``, words held while the reader stalls), so it only
    adds its cycle. Without it the reader takes each word a cycle earlier and nothing else moves (every
    stream after it a cycle earlier), so one timing run finds them all."""
    candidates = []
    for node in graph.nodes:
        if not is_role(node, "fifo") or len(node.inputs) != 1 or node.folding.get("depth", 2) != 2:
            continue
        before, after = producer.get(node.inputs[0]), reader.get(node.outputs[0])
        if before is None or after is None or is_role(before, "fifo") or is_role(after, "fifo"):
            continue
        if len(before.outputs) == 1 and len(after.inputs) == 1 and getattr(before.spec(), "ends_in_fifo", False):
            candidates.append(node)
    if not candidates:
        return {}
    words = tensor_words(graph)
    timing = graph_timing(graph, 1 + np.arange(IDLE_FRAMES * words[graph.input], dtype=np.int64))
    return {f.outputs[0]: f.inputs[0] for f in candidates
            if np.array_equal(timing.leave[f.outputs[0]], timing.leave[f.inputs[0]] + f.spec().latency)}


def _straight_out(before, after):
    """A layer whose FIFO behind was idle (:func:`_idle_fifos`) gives up its own output FIFO too
    (``output_fifo=False``, a cycle less) where its reader takes a word every cycle its pipeline may move
    (``spec.ready_is_advance``): the producer then advances on that ``ready``, so the two move as one and no
    word waits between them. Only under ``pipeline="latency"``, whose FIFO is the engine's last cycle."""
    spec = before.spec()
    if "output_fifo" in before.op.folding and getattr(spec, "pipeline", None) == "latency" \
            and getattr(after.spec(), "ready_is_advance", False):
        before.folding["output_fifo"] = False


def _place_chain(chain):
    """Each layer's ``input_ns`` (its producer's tail, ``spec.output_ns``) and ``output_fifo`` in a chain
    (FIFO in front of the first layer, behind the last): the fewest registers in all. A producer's
    registers placed as late as they can (``output_fifo=False``) leave the most logic in the boundary's
    cycle, so the consumer may have to register its input; placed leaving a FIFO's mux free
    (``output_fifo=True``) they may let it start in that cycle. Both tried at every boundary, the states
    (registers so far, tail) that no other beats in both kept; ties to the fewer LUTs and FFs."""
    states = [(0, 0.0, 0, ())]          # (registers, the tail into the next layer, LUT + FF, output_fifo choices)
    for k, node in enumerate(chain):
        grown = []
        for registers, tail, cost, choices in states:
            for output_fifo in ((True,) if k == len(chain) - 1 else (False, True)):
                spec = node.spec(input_ns=tail, output_fifo=output_fifo)
                used = spec.resource_estimate()
                grown.append((registers + spec.latency, round(float(spec.output_ns), 3), cost + used.lut + used.ff,
                              choices + (output_fifo,)))
        grown.sort(key=lambda s: (s[0], s[1], s[2]))
        states = []
        for state in grown:             # the fewest registers for each tail
            if not states or state[1] < states[-1][1]:
                states.append(state)
    best = min(states, key=lambda s: (s[0], s[2]))
    tail = 0.0
    for node, output_fifo in zip(chain, best[3]):
        node.folding["input_ns"], node.folding["output_fifo"] = tail, output_fifo
        tail = round(float(node.spec().output_ns), 3)
