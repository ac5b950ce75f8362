"""The links between two layers that need no FIFO (the latency objective, issue 43): :func:`chain_layers`.

A FIFO between two layers lets the producer run ahead of a stalled consumer and registers the boundary;
between two layers that take one word a cycle whenever their output is ready and whose registers follow
the clock from the input's arrival on (``spec.chains``: distributed arithmetic's bit heaps), neither is
needed, and the FIFO's register costs a cycle of latency. This module names no op type: the specs say
whether they chain (``chains``), what logic their output carries into the next cycle (``output_ns``), and
take ``input_ns`` / ``output_fifo`` as folding attributes.
"""

from rtlgen.ir.graph import is_role

__all__ = ["chain_layers"]


def _chains(node):
    return not is_role(node, "fifo") and bool(getattr(node.spec(), "chains", False))


def chain_layers(graph):
    """``graph`` (stitched, with its FIFOs) without the FIFOs between two layers whose specs say they chain
    (``spec.chains``: one word a cycle, ``i.ready`` is ``o.ready``, registers placed from the input's arrival
    on, as distributed arithmetic's bit heaps): such a producer never needs its consumer to wait, and the
    FIFO's register only cost a cycle. The FIFOs on the graph's input and output stay (a chain's ready is
    the last FIFO's), and every FIFO next to a layer that does not chain. Where the registers go across
    each boundary: :func:`_place_chain`."""
    graph = graph.copy()
    producer = {t: n for n in graph.nodes for t in n.outputs}
    reader = {t: n for n in graph.nodes for t in n.inputs}
    bypass = {}                         # a dropped FIFO's output tensor -> its input tensor
    for node in graph.nodes:
        if not is_role(node, "fifo") or len(node.inputs) != 1:
            continue
        before, after = producer.get(node.inputs[0]), reader.get(node.outputs[0])
        if before is not None and after is not None and _chains(before) and _chains(after) \
                and len(before.outputs) == 1 and len(after.inputs) == 1 \
                and "input_ns" in after.op.folding and "output_fifo" in before.op.folding:
            bypass[node.outputs[0]] = node.inputs[0]
    if not bypass:
        return graph
    dropped = {producer[t].name for t in bypass}
    nodes = [n for n in graph.nodes if n.name not in dropped]
    for node in nodes:
        node.inputs = tuple(bypass.get(t, t) for t in node.inputs)
    linked = set(bypass.values())       # tensors from one chained layer straight into the next
    after = {t: n for n in nodes for t in n.inputs}
    for head in nodes:
        if head.outputs[0] in linked and not set(head.inputs) & linked:
            chain = [head]
            while chain[-1].outputs[0] in linked:
                chain.append(after[chain[-1].outputs[0]])
            _place_chain(chain)
    return graph.copy(nodes=nodes).check()


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
