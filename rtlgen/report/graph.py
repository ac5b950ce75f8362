"""The per-node rows of ``report.json``: what each node of a dataflow graph is, and what it costs."""

from layers.requant import activation_summary
from rtlgen.costmodel import estimate

__all__ = ["graph_report"]


def graph_report(graph):
    """One row per node (name, op_type, inputs, outputs, folding, widths, exp_cycles, resources) and a
    ``TOTAL`` row (sum of the estimates; ``exp_cycles`` is the largest, the design's initiation interval
    per frame). ``graph``: the :class:`rtlgen.ir.graph.DataflowGraph` the compile made (a writer of OUT
    renders what the flow computed; it builds no graph of its own)."""
    rows = []
    totals = {}
    for node in graph.nodes:
        spec = node.spec()
        est = dict(estimate(spec))
        for key, value in est.items():
            totals[key] = totals.get(key, 0) + value
        row = {"name": node.name, "op_type": node.op_type, "inputs": list(node.inputs),
               "outputs": list(node.outputs), "folding": dict(node.folding),
               "in_width": spec.in_width, "out_width": spec.out_width,
               "exp_cycles": spec.exp_cycles, "resources": est}
        activation = activation_summary(spec)
        if activation is not None:
            row["activation"] = activation
        rows.append(row)
    first = graph.consumers(graph.input)[0][0].spec()
    last = graph.producer(graph.output)[0].spec()
    rows.append({"name": "TOTAL", "op_type": "", "inputs": [graph.input], "outputs": [graph.output], "folding": {},
                 "in_width": first.in_width, "out_width": last.out_width,
                 "exp_cycles": max(r["exp_cycles"] for r in rows), "resources": totals})
    return rows
