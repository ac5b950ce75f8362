"""FINN's ``SetFolding`` (a target throughput) over the op registry: each node's op folds it (``Op.fold``,
FINN's rule for that op) through a :class:`FoldingContext`, or, without a rule, each of its parallelism
axes goes up its legal values; a node another names in ``Op.folded_with`` (a depthwise SWG and its VVAU)
follows that one's folding (``Op.follower_folding``). Used by the fold pass (:mod:`rtlgen.passes.fold`) and
the optimizer (:mod:`rtlgen.passes.optimize`); it names no op type.
"""

from rtlgen.ir.graph import INSERTED_ROLES, DataflowGraph

__all__ = ["max_cycles", "set_folding", "FoldingContext", "folded_with", "spec_of"]


def spec_of(node, folding=None):
    """node.spec() with ``folding`` instead of node.folding; the message always names the node."""
    saved = node.folding
    if folding is not None:
        node.folding = folding
    try:
        return node.spec()
    except ValueError as exc:
        msg = str(exc)
        raise ValueError(msg if msg.startswith(node.name) else f"{node.name}: {msg}") from None
    finally:
        node.folding = saved


def max_cycles(nodes):
    """(max exp_cycles, name of that node) over the nodes whose spec has exp_cycles."""
    best = (0, None)
    for node in nodes:
        spec = spec_of(node)
        cyc = spec.exp_cycles
        if cyc > best[0]:
            best = (cyc, node.name)
    return best


class FoldingContext:
    """The :class:`layers.op.FoldContext` the ops' ``fold`` and ``folded_with`` hooks get: the graph, the
    target II (None where no target applies: the optimizer asks ``folded_with`` only) and FINN's options."""

    def __init__(self, graph, target=None, *, mvau_wwidth_max=36):
        self.graph, self.target, self.mvau_wwidth_max = graph, target, mvau_wwidth_max

    def spec(self, node):
        return spec_of(node)

    def cycles(self, node):
        return spec_of(node).exp_cycles

    def walk(self, node, attr, values):
        """FINN's optimize_attribute_val: the values ascending, stop at the first meeting the target."""
        for val in values:
            node.folding[attr] = val
            if self.cycles(node) < self.target:
                break

    def producer(self, node):
        """The node feeding ``node``'s first input, skipping the FIFOs and DWCs stitching inserts."""
        while True:
            found = self.graph.producer(node.inputs[0]) if node.inputs else None
            if found is None:
                return None
            node = found[0]
            if node.op.role not in INSERTED_ROLES:
                return node


def folded_with(ctx, node):
    """The node whose folding follows ``node``'s (``Op.folded_with``: a depthwise SWG follows its VVAU), or
    None."""
    return node.op.folded_with(ctx, node) if node.op.folded_with is not None else None


def _fold_axes(ctx, node, target):
    """An op without a fold rule: each parallelism axis it declares, in order, up its legal values."""
    for attr in node.op.parallelism:
        ctx.walk(node, attr, node.op.legal(attr, node.params))


def _fold_once(graph, target, mvau_wwidth_max):
    ctx = FoldingContext(graph, target, mvau_wwidth_max=mvau_wwidth_max)
    leaders = {node.name: follower for node in graph.nodes if (follower := folded_with(ctx, node)) is not None}
    following = {follower.name for follower in leaders.values()}
    for node in graph.nodes:
        if node.name in following:
            continue                # set by the node it is folded with
        (node.op.fold or _fold_axes)(ctx, node, target)
        if node.name in leaders:
            leaders[node.name].folding.update(node.op.follower_folding(node.folding))


def set_folding(graph, target_cycles, *, mvau_wwidth_max=36, two_pass_relaxation=True):
    """FINN's SetFolding on a :class:`DataflowGraph` (or a chain of nodes): the least parallelism that gets each node under
    ``target_cycles`` cycles per frame (see finn-conventions.md §11). Changes PE / SIMD / parallel_window
    in ``node.folding`` only. Returns the resulting maximum exp_cycles.

    Per node: its op's fold rule (``Op.fold``, FINN's special cases: the MVAU's weight-stream limit
    ``mvau_wwidth_max``, the SWG's parallel window, the VVAU's PE before SIMD), or, for an op without one,
    each parallelism axis it declares (``Op.parallelism``) in order, up its legal values. A node another
    names in ``Op.folded_with`` (the depthwise SWG of a VVAU) is not folded itself: it gets
    ``Op.follower_folding`` of the other's folding. With
    ``two_pass_relaxation``, a missed target is retried with the achieved maximum as the target, so
    the layers that are faster than the bottleneck get no more parallelism than they need.
    """
    if target_cycles is None or target_cycles <= 0:
        raise ValueError(f"target_cycles must be a positive number, not {target_cycles!r}")
    if not isinstance(graph, DataflowGraph):       # a chain: fold its nodes in place
        nodes = list(graph)
        graph = DataflowGraph.chain(nodes)
        graph.nodes = [_linked(n, g) for n, g in zip(nodes, graph.nodes)]
    _fold_once(graph, target_cycles, mvau_wwidth_max)
    worst, _ = max_cycles(graph.nodes)
    if two_pass_relaxation and worst > target_cycles:
        _fold_once(graph, worst, mvau_wwidth_max)
        worst, _ = max_cycles(graph.nodes)
    return worst


def _linked(node, linked):
    """``node`` itself (so its folding changes in place) with the tensors of its copy in a chain graph."""
    node.inputs, node.outputs = linked.inputs, linked.outputs
    return node
