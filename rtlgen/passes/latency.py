"""The folding optimizer's latency objective (``--objective latency``, issue 33): the design with the fewest
cycles from a frame's first input word to its last output word, within the budget, at least as fast as
``--target-fps`` when given.

The latency of a folded chain is not a sum over its nodes: a consumer that takes its producer's words as
they come (its SF input words are the producer's NF output words, same width, no width converter between)
overlaps its reads with the producer's output, while a width converter between them makes the consumer
wait for the whole vector. So:

1. every node with a ``pipeline`` choice (the MVAU) is built for latency (``pipeline="latency"``: the
   fall-through output FIFO, no sum register at SF = 1, the 2-stage requantizer; never slower, never
   bigger); the FIFOs the stitcher inserts fall through (latency 1, :func:`fall_through_fifos`), and
   none stays between two layers that chain (:func:`rtlgen.passes.fifo_links.chain_layers`);
2. per node, every folding (the parallelism axes and the op's choices, as the throughput search) with its
   cycles, cost and latency terms: ``spec.latency`` + the steps after the first input word of a vector
   (SF * NF - 1); options dominated in (cycles, cost, terms) dropped;
3. per candidate II (each option's cycle count, from the fastest the budget could allow, at most the
   target), a 0/1 program (HiGHS through ``scipy.optimize.milp``) picks one option per node minimising
   the summed latency terms minus, for each producer -> consumer pair whose words match (same width and
   the consumer's SF its producer's NF), the overlap min(NF, SF) - 1, within the budget (the inserted
   FIFOs and converters counted after a solve and taken off the budget while it is over, as the
   throughput search does);
4. each solution's latency is the composed timing model's (:func:`rtlgen.analyses.timing.latency_cycles`,
   the figure report.json and the simulation give); the lowest wins, ties to the higher frame rate. The
   search stops where the II alone is above the best latency found (one frame takes at least an II).
"""

import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint
from scipy.sparse import coo_array

from layers.fifo import SRL_MAX_DEPTH
from rtlgen.analyses.timing import latency_cycles
from rtlgen.costmodel import estimate
from rtlgen.passes import optimize as _opt
from rtlgen.passes.insert import insert_duplicates, insert_dwcs_and_fifos
from rtlgen.passes.milp import milp
from rtlgen.passes.optimize import RESOURCES, NoFit, OptimizerResult
from rtlgen.passes.size_fifos import analytic_fifo_depths
from rtlgen.passes.fifo_links import chain_layers

__all__ = ["OBJECTIVES", "optimize_latency", "fall_through_fifos", "design_latency"]

OBJECTIVES = ("throughput", "latency")
MAX_IIS = 40            # candidate IIs solved at most (ascending); the search stops earlier, see above
MILP_SECONDS = 10       # per program; HiGHS returns its best feasible solution when the limit is reached


@dataclass(frozen=True)
class _Option:
    folding: dict
    cycles: int
    cost: tuple
    terms: int              # spec.latency + SF * NF - 1
    in_words: int           # words per vector in (SF) and out (NF), and the widths, for the overlap
    out_words: int
    in_width: int
    out_width: int


def fall_through_fifos(graph):
    """``graph`` (stitched, with its FIFOs) with every shift-register FIFO falling through (latency 1)."""
    graph = graph.copy()
    for node in graph.nodes:
        if node.op.role == "fifo" and "fall_through" in node.op.folding \
                and node.folding.get("depth", 2) <= SRL_MAX_DEPTH and node.folding.get("ram_style") != "block":
            node.folding = {**node.folding, "fall_through": True}
    return graph


def _stitched(graph):
    branched = insert_duplicates(graph)
    stitched = insert_dwcs_and_fifos(branched, analytic_fifo_depths(insert_dwcs_and_fifos(branched)))
    return chain_layers(fall_through_fifos(stitched))


def design_latency(graph):
    """Cycles from the first input word to the last output word of one frame of ``graph`` (folded, before
    stitching) as the latency objective builds it: stitched, with fall-through FIFOs."""
    return latency_cycles(_stitched(graph))


def _latency_pipeline(graph, clock_mhz):
    for node in graph.nodes:
        if "pipeline" in node.op.folding:
            node.folding["pipeline"] = "latency"
        if clock_mhz is not None and "clock_mhz" in node.op.folding:     # where its registers go
            node.folding["clock_mhz"] = float(clock_mhz)


def _pipelines(node):
    """The pipelines the latency objective tries for ``node``: its spec's ``LATENCY_PIPELINES`` (the MVAU:
    "latency", and "distributed" where its weights can be bit heaps), else the one it has."""
    return getattr(node.op.spec, "LATENCY_PIPELINES", None) or (None,)


def _node_options(node):
    found = {}
    foldings = ({**f, "pipeline": p} if p else f for f in _opt.node_foldings(node) for p in _pipelines(node))
    for folding in foldings:
        # fewer choices than the throughput search, to keep the pairwise program small: no lanes sharing
        # activation units (a cycle each, never shorter), weights in BRAM or as auto places them
        if folding.get("shared_activation") or folding.get("ram_style") == "distributed":
            continue
        try:
            spec = node.spec(**folding)
        except ValueError:
            continue
        est = estimate(spec)
        cost = tuple(int(est[r]) for r in RESOURCES)
        shape_in, shape_out = spec.folded_input_shape, spec.folded_output_shape
        sf = shape_in[-2] if shape_in and len(shape_in) > 1 else 1
        nf = shape_out[-2] if shape_out and len(shape_out) > 1 else 1
        steps = getattr(spec, "sf", sf) * getattr(spec, "nf", 1)
        option = _Option(dict(folding), spec.exp_cycles, cost, int(spec.latency) + steps - 1, int(sf), int(nf),
                         int(spec.in_width), int(spec.out_width))
        key = (option.cycles, option.cost, option.terms, option.in_words, option.out_words, option.in_width,
               option.out_width)
        found.setdefault(key, option)
    options = sorted(found.values(), key=lambda o: (o.cycles, o.terms, sum(o.cost)))
    kept = []
    for o in options:       # dominated: no faster, no cheaper, no shorter, and the same words at both ends
        if not any(k.cycles <= o.cycles and k.terms <= o.terms and all(a <= b for a, b in zip(k.cost, o.cost))
                   and (k.in_words, k.in_width, k.out_words, k.out_width) == (o.in_words, o.in_width, o.out_words,
                                                                          o.out_width) for k in kept):
            kept.append(o)
    return kept


def _pairs(graph):
    """(producer index, consumer index) of every stream between two nodes that has one consumer."""
    index = {id(n): k for k, n in enumerate(graph.nodes)}
    pairs = []
    for k, node in enumerate(graph.nodes):
        for tensor in node.outputs:
            consumers = graph.consumers(tensor)
            if len(consumers) == 1:
                pairs.append((k, index[id(consumers[0][0])]))
    return pairs


def _solve(choices, pairs, limit, ii):
    """The 0/1 program at one II (see the module docstring); the picked option per node, or None.

    The overlap is counted per stream and per word shape (words, width) rather than per pair of options:
    z[e, s] <= (the producer's options sending s) and z[e, s] <= (the consumer's options taking s), so it
    is 1 only where both chosen options agree on s (one option per node is chosen)."""
    allowed = [[k for k, o in enumerate(opts) if o.cycles <= ii] for opts in choices]
    if any(not a for a in allowed):
        return None
    columns = [(g, k) for g, a in enumerate(allowed) for k in a]
    col = {c: j for j, c in enumerate(columns)}
    costs = np.array([choices[g][k].cost for g, k in columns], dtype=float)
    finite = np.isfinite(limit)
    scale = np.where(finite & (limit > 0), limit, np.maximum(costs.max(axis=0), 1.0))
    objective = [choices[g][k].terms + 1e-3 * float((costs[j] / scale).sum()) + 1e-9 * j
                 for j, (g, k) in enumerate(columns)]
    shapes = []             # (producer, consumer, (words, width), bonus)
    for p, c in pairs:
        sent = {(choices[p][k].out_words, choices[p][k].out_width) for k in allowed[p]}
        taken = {(choices[c][k].in_words, choices[c][k].in_width) for k in allowed[c]}
        shapes += [(p, c, shape, shape[0] - 1) for shape in sorted(sent & taken) if shape[0] > 1]
    n = len(columns) + len(shapes)
    objective = np.concatenate([objective, [-bonus for *_, bonus in shapes]])
    entries, lo, hi = [], [], []            # (row, column, value)

    def row(items, low, high):
        r = len(lo)
        entries.extend((r, j, v) for j, v in items)
        lo.append(low), hi.append(high)
    for g in range(len(choices)):
        row([(col[(g, k)], 1.0) for k in allowed[g]], 1, 1)
    for e, (p, c, shape, _) in enumerate(shapes):
        z = len(columns) + e
        row([(z, 1.0)] + [(col[(p, k)], -1.0) for k in allowed[p]
                          if (choices[p][k].out_words, choices[p][k].out_width) == shape], -np.inf, 0)
        row([(z, 1.0)] + [(col[(c, k)], -1.0) for k in allowed[c]
                          if (choices[c][k].in_words, choices[c][k].in_width) == shape], -np.inf, 0)
    for r in np.flatnonzero(finite):
        row([(j, costs[j, r]) for j in range(len(columns)) if costs[j, r]], -np.inf, limit[r])
    rows, cols, vals = zip(*entries)
    matrix = coo_array((vals, (rows, cols)), shape=(len(lo), n)).tocsr()
    result = milp(objective, constraints=[LinearConstraint(matrix, lo, hi)], integrality=np.ones(n),
                  bounds=Bounds(0, 1), options={"time_limit": MILP_SECONDS})
    if result.x is None:
        return None
    chosen = {columns[j][0]: columns[j][1] for j in np.flatnonzero(result.x[:len(columns)] > 0.5)}
    return [chosen[g] for g in range(len(choices))]


def _apply(graph, choices, picked):
    for node, opts, k in zip(graph.nodes, choices, picked):
        node.folding.pop("weight_lut_bits", None)
        node.folding.update(opts[k].folding)


def optimize_latency(graph, budget, *, target_cycles=None, clock_mhz=None):
    """Set the folding of every node of ``graph`` (in place) to the lowest-latency design within ``budget``
    (every node at most ``target_cycles`` cycles per frame when given); returns an
    :class:`rtlgen.passes.optimize.OptimizerResult` whose ``latency`` is the design's (stitched, in cycles).
    Raises :class:`NoFit` when no folding fits. ``clock_mhz``: the clock the layers that place their registers
    by a timing model (``clock_mhz`` in their folding) are built for."""
    start = time.perf_counter()
    paired = [g for g in _opt.fold_groups(graph) if len(g) > 1]
    if paired:      # a depthwise window generator folded with its VVAU: not in this search yet
        names = " and ".join(graph.nodes[k].name for k in paired[0])
        raise NoFit(f"--objective latency: {names} must be folded together, which the latency search does not do "
                    f"yet; use --objective throughput for this model")
    _latency_pipeline(graph, clock_mhz)
    choices = [_node_options(node) for node in graph.nodes]
    if any(not c for c in choices):
        bad = graph.nodes[[not c for c in choices].index(True)]
        raise NoFit(f"{bad.name}: no legal folding")
    pairs = _pairs(graph)
    limit = budget.as_vector()
    floor = max(min(o.cycles for o in opts) for opts in choices)
    iis = sorted({o.cycles for opts in choices for o in opts if o.cycles >= floor})
    if target_cycles is not None:
        iis = [ii for ii in iis if ii <= target_cycles]
    best, tried = None, 0
    for ii in iis:
        if best is not None and ii >= best[0] or tried >= MAX_IIS:
            break
        node_limit, tried = limit.copy(), tried + 1
        for rounds in range(1, _opt.MAX_ROUNDS + 1):
            picked = _solve(choices, pairs, node_limit, ii)
            if picked is None:
                break
            _apply(graph, choices, picked)
            used = _opt.design_estimate(graph)
            over = used - limit
            if (over <= 1e-9).all():
                latency = design_latency(graph)
                design_ii = max(choices[g][k].cycles for g, k in enumerate(picked))
                if best is None or (latency, design_ii) < (best[0], best[1]):
                    best = (latency, design_ii, list(picked), used, rounds)
                break
            # the inserted FIFOs and converters are over: the nodes must cost that much less than these did
            nodes = np.sum([choices[g][k].cost for g, k in enumerate(picked)], axis=0).astype(float)
            node_limit = np.where(over > 0, np.minimum(node_limit, nodes) - over - 1e-6, node_limit)
    if best is None:
        what = f"{target_cycles} cycles per frame" if target_cycles else "any folding"
        raise NoFit(f"no design fits the budget ({budget.describe()}) at {what}: its layers alone need at least "
                    f"{_opt.describe_resources(_least(choices, target_cycles))}")
    latency, ii, picked, used, rounds = best
    _apply(graph, choices, picked)
    ratios = np.divide(used, limit, out=np.zeros_like(used), where=np.isfinite(limit) & (limit > 0))
    binding = RESOURCES[int(np.argmax(ratios))].replace("BRAM18", "BRAM36")
    result = OptimizerResult(ii, budget, dict(zip(RESOURCES, used.tolist())), binding, time.perf_counter() - start,
                             sum(len(c) for c in choices), rounds,
                             notes=[f"objective latency: {latency} cycles (II {ii}), {tried} IIs solved"])
    result.objective, result.latency = "latency", latency
    return result


def _least(choices, target_cycles):
    total = np.zeros(len(RESOURCES))
    for opts in choices:
        usable = [o for o in opts if target_cycles is None or o.cycles <= target_cycles] or opts
        total += np.array([min(o.cost[r] for o in usable) for r in range(len(RESOURCES))], dtype=float)
    return total
