"""Run a dataflow graph on numpy: each layer's independent golden model (:mod:`golden`, through
each op's ``golden`` hook) applied in stream order, node by node in topological order. It checks lowering
against qonnx without building hardware, and it is what the RTL simulation of the same graph must equal."""

from math import prod

import numpy as np

from rtlgen.ir.graph import INSERTED_ROLES, DataflowGraph

__all__ = ["run_golden"]


def run_golden(graph, codes):
    """``codes`` (batch, elements) in the graph input's stream order -> the graph output, same form.
    ``graph`` is a :class:`DataflowGraph` (or a list of nodes, run as a chain)."""
    if not isinstance(graph, DataflowGraph):
        graph = DataflowGraph.chain(graph)
    values = {graph.input: np.asarray(codes, dtype=np.int64)}
    for node in graph.nodes:
        spec = node.spec()
        ins = [_shaped(values[t], shape) for t, shape in zip(node.inputs, spec.folded_input_shapes)]
        first = _layer_before(graph, node)
        outs = node.op.golden(spec, ins, first.spec() if first is not None else None)
        outs = outs if isinstance(outs, list) else [outs] * len(node.outputs)
        for t, x in zip(node.outputs, outs):
            values[t] = x.reshape(x.shape[0], -1)
    return values[graph.output]


def _layer_before(graph, node):
    """The layer producing ``node``'s first input, through the FIFOs, width converters and fan-outs the
    compiler inserted (they move words, not elements: a VVAU's golden reads the element order of the
    window generator before its width converter)."""
    first = graph.predecessors(node)[0] if node.inputs else None
    while first is not None and first.op.role in INSERTED_ROLES and first.inputs:
        first = graph.predecessors(first)[0]
    return first


def _shaped(x, folded):
    """(batch, elements) -> (batch, vectors, elements per vector): the folded shape, last two dims merged
    (a FIFO, shape None, takes the words as they come)."""
    if folded is None:
        return x
    if x.shape[1] != prod(folded):
        raise ValueError(f"golden graph: {x.shape[1]} elements do not fill the folded shape {folded}")
    return x.reshape(x.shape[0], -1, folded[-2] * folded[-1])
