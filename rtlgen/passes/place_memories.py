"""The ``place_memories`` pass: weights left at ``ram_style`` auto that auto would build as LUT ROM move to
block RAM, the most LUTs saved per RAMB18 first, while the layers' BRAM stays within ``max_utilization``'s
BRAM36 share of the board's: BRAM left unused is wasted, while LUTs are what every datapath and the glue need. A folding
that names the style keeps it; after the optimizer (which chose every style under its budget) nothing
moves."""

from rtlgen.costmodel import estimate
from rtlgen.fit import BOARDS, BRAM18_PER_BRAM36, utilization_shares

__all__ = ["place_memories"]


def place_memories(graph, options):
    if graph.optimizer is not None:
        return graph
    _, capacity = BOARDS[options.board]
    share = utilization_shares(options.max_utilization)["BRAM36"]
    room = BRAM18_PER_BRAM36 * capacity["BRAM36"] * share - sum(estimate(n.spec()).bram18 for n in graph.nodes)
    moves = []
    for node in graph.nodes:
        if node.folding.get("ram_style", "auto") != "auto" or "ram_style" not in node.op.folding:
            continue
        spec = node.spec()
        if getattr(spec, "weight_ram_style", None) != "distributed" or spec.mem_mode == "external":
            continue
        here, there = estimate(spec), estimate(node.spec(ram_style="block"))
        saved, cost = here.lut - there.lut, there.bram18 - here.bram18
        if saved > 0:
            moves.append((-saved / max(cost, 1), node.name, cost))
    chosen = set()
    for _, name, cost in sorted(moves):
        if cost <= room:
            chosen.add(name)
            room -= cost
    if not chosen:
        return graph            # unchanged (and not saved again under --keep-intermediate)
    graph = graph.copy()
    for node in graph.nodes:
        if node.name in chosen:
            node.folding["ram_style"] = "block"
    return graph
