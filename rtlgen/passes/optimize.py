"""The folding optimizer: the highest throughput that fits a resource budget, or, given a target rate as
well, the cheapest design that reaches it.

The problem (``folding-optimizer.md``): every node has a set of legal foldings (the product of its
parallelism axes' legal values, ``Op.parallelism``, and, for MVAU/VVAU, the multiplier resource and the
weight memory style); each folding has a cycle count and a resource estimate (``spec.resource_estimate``).
The design's II is the largest cycle count; its cost is the sum over the nodes. FINN's ``SetFolding``
walks each node up its axes until a target is met and ignores the cost; here:

1. per node, the options are enumerated and those *dominated* (another option is no slower and no more
   expensive in every resource) dropped;
2. the lowest II that fits is found by bisection over the candidate IIs (the options' cycle counts);
   at one II, the design is a 0/1 program (one option per node, the options meeting the II, the summed
   resources within the budget), solved exactly by HiGHS through ``scipy.optimize.milp``, minimising the
   resources in units of the budget (so the result is also the cheapest design at that II);
3. the DuplicateStreams, width converters and FIFOs that stitching adds are not in the per-node costs
   (but what an option forces unless its consumer's option avoids it, ``Op.stitched_after``: a
   parallel-window SWG's wide FIFO and converter, is in the program: :mod:`rtlgen.passes.optimize_stitch`):
   after a solve they are estimated for the chosen folding (the analytic FIFO bounds, not the simulated
   depths); while the whole design is over, the node budget at that II shrinks by the overshoot and the
   program is solved again (a few rounds); where that fails, FINN's SetFolding at that II is tried (the
   widths between layers, which decide the inserted nodes, are outside the per-node program), so the
   optimizer never does worse than the naive folding at the IIs it visits.

A depthwise ConvolutionInputGenerator and the VVAU it feeds are chosen together (the generator's SIMD is
the VVAU's PE, as FINN requires). Deterministic: the same graph and budget give the same folding.
"""

import itertools
import math
import time
from dataclasses import dataclass, field, replace

import numpy as np
from qonnx.core.datatype import DataType

from rtlgen.costmodel import estimate
from rtlgen.fit import BOARD_NAMES, BRAM18_PER_BRAM36, Budget
from rtlgen.passes.optimize_stitch import forced_cost, stitch_charges
from rtlgen.passes.optimize_search import candidate_iis, smallest_fitting
from rtlgen.passes.optimize_workers import Forked, WorkerLost, cores, cost_on_workers
from rtlgen.passes.setfolding import FoldingContext, folded_with, set_folding
from sim import progress

__all__ = ["optimize_folding", "OptimizerResult", "NoFit", "RESOURCES", "MAX_ROUNDS", "Option", "fold_groups",
           "node_foldings", "group_options", "candidate_iis", "smallest_fitting", "least_cost", "describe_resources", "design_estimate",
           "inserted_estimate"]

RESOURCES = ("LUT", "FF", "BRAM18", "DSP")
SPILL_SHARES = (1 / 8, 1 / 4, 1 / 2)    # of a block-RAM weight word built as LUT ROM instead (weight_lut_bits)
MAX_ROUNDS = 6
IO_ROUNDS = 3           # cheapest-at-the-I/O-bound solves while the new folding's own bound moves


class NoFit(ValueError):
    """No folding fits the budget (or reaches the target within it)."""


@dataclass(frozen=True)
class Option:
    folding: tuple          # ((node index in the group, {attr: value}), ...)
    cycles: int
    cost: tuple             # (LUT, FF, BRAM18, DSP)
    forced: tuple = (0, 0, 0, 0)    # what stitching adds after it unless its consumer avoids it (optimize_stitch)


@dataclass
class OptimizerResult:
    ii: int                         # cycles per frame of the chosen folding (largest node)
    budget: Budget                  # what the nodes and the inserted DWCs/FIFOs had to fit
    used: dict                      # estimate of the whole design {LUT, FF, BRAM18, DSP}, DWCs and FIFOs included
    binding: str                    # the resource closest to its budget
    seconds: float
    options: int                    # options considered after pruning
    rounds: int = 1
    notes: list = field(default_factory=list)
    io_cycles: float = None         # cycles per frame the shell's data movement needs at this folding
    io_bound: bool = False          # the budget allowed a faster II than the shell can feed: stopped at its bound
    budget_ii: int = None           # the II the budget alone allowed (the design not built when io_bound)


def optimize_folding(graph, budget, *, target_cycles=None, io_cycles=None):
    """Set the folding of every node of ``graph`` (in place) to the fastest design within ``budget`` or,
    with ``target_cycles``, the cheapest with every node at most that many cycles per frame; returns an
    :class:`OptimizerResult`. Raises :class:`NoFit` when even the slowest design (or the target) does not fit.

    ``io_cycles(graph)``: the cycles per frame the board's shell needs to move a frame in and out at the
    graph's current folding (it follows the first and last layers' word widths). Where the fastest design
    is faster than that, resources spent on the difference buy nothing on the board: the optimizer takes
    instead the cheapest design at the I/O bound (``io_bound`` in the result, ``budget_ii`` the II it
    passed up), a few rounds while the new folding's own bound moves, keeping the one the board runs fastest.

    The search runs twice: without, then with weights spilled from block RAM into LUT ROM
    (``weight_lut_bits``, more MVAU options); the spilled design is kept only where it is faster (or, with
    a target, where it is the only one that fits). Fitting is not monotone in the options (the inserted
    DWCs and FIFOs follow the widths), so the larger search alone can land on a slower design."""
    global _COSTS, _INSERTED, _NAIVE, _SEARCH
    _COSTS, _INSERTED, _NAIVE = {}, {}, {}      # the searches share the options' and the foldings' costs
    try:                                        # and the naive foldings (both passes, every I/O round)
        with progress.step("folding optimizer") as update:
            _SEARCH = _Search(update)
            return _optimize_folding(graph, budget, target_cycles, io_cycles)
    finally:
        _COSTS = _INSERTED = _NAIVE = _SEARCH = None


class _Search:
    """What the optimizer has done so far, for the progress line (in a log, every 10 s while it runs)."""

    def __init__(self, update):
        self.update, self.tried, self.best, self.costed = update, 0, None, 0     # costed: nodes' options

    def attempted(self, ii, fits):
        self.tried += 1
        if fits and (self.best is None or ii < self.best):
            self.best = ii
        self._say()

    def options_costed(self):
        self.costed += 1
        self._say()

    def costing(self, candidates):
        """Said while the candidates are costed (on worker processes, before any II is tried)."""
        if not self.tried:
            self.update(description=f"folding optimizer: costing {candidates:,} candidate foldings")

    def _say(self):
        best = "none fits yet" if self.best is None else f"best II {self.best:,} so far"
        self.update(description=f"folding optimizer: {best}, {self.tried:,} candidate IIs tried (the options "
                                f"of {self.costed:,} node{'s' if self.costed != 1 else ''} costed)")


_COSTS = None       # within optimize_folding: ((node id, folding), ...) -> (cycles, cost), or None if illegal
_INSERTED = None    # within optimize_folding: the graph's wiring and foldings -> inserted_estimate
_NAIVE = None       # within optimize_folding: (target, the foldings it starts from) -> (II, foldings) of set_folding
_SEARCH = None      # within optimize_folding: its _Search (progress)


def _optimize_folding(graph, budget, target_cycles, io_cycles):
    start = time.perf_counter()
    original = [dict(node.folding) for node in graph.nodes]
    result = _optimize_both(graph, budget, target_cycles)
    if io_cycles is None:
        return replace(result, seconds=time.perf_counter() - start)
    io = io_cycles(graph)
    result = replace(result, io_cycles=io, budget_ii=result.ii)
    if target_cycles is not None or io <= result.ii:
        return replace(result, seconds=time.perf_counter() - start)
    best, chosen = result, [dict(node.folding) for node in graph.nodes]
    bound, tried = io, set()
    for _ in range(IO_ROUNDS):
        target = math.ceil(bound - 1e-9)
        if target in tried:
            break
        tried.add(target)
        for node, folding in zip(graph.nodes, original):
            node.folding = dict(folding)
        try:
            slower = _optimize_both(graph, budget, target)
        except NoFit:           # cannot happen (the faster design meets the target), but never worse than it
            break
        bound = io_cycles(graph)
        slower = replace(slower, io_cycles=bound, io_bound=True, budget_ii=result.ii)
        if max(slower.ii, bound) <= max(best.ii, best.io_cycles):   # as fast on the board, and cheaper
            best, chosen = slower, [dict(node.folding) for node in graph.nodes]
        if bound <= slower.ii:
            break
    for node, folding in zip(graph.nodes, chosen):
        node.folding = folding
    if best is result:          # no slower design runs as fast on the board: keep the fastest, say why
        best = replace(result, io_bound=True)
    return replace(best, seconds=time.perf_counter() - start)


def _optimize_both(graph, budget, target_cycles):
    """:func:`_optimize` without and with weights spilled into LUT ROM; the better of the two applied.

    The two searches are independent (each starts from the folding as given, over options costed once):
    where they are large, the spilled one runs in a forked process while this one runs the plain one
    (each is a serial chain of MILP solves: CNV-w1a1's two, 8 s of HiGHS), with the answer and the
    folding left in the graph the same as one after the other."""
    start = time.perf_counter()
    original = [dict(node.folding) for node in graph.nodes]
    beside = _spilled_search_beside(graph, budget, target_cycles)
    try:
        plain, failure = _optimize(graph, budget, target_cycles, spill=False), None
    except NoFit as exc:
        plain, failure = None, exc
    except BaseException:
        if beside is not None:
            beside.cancel()
        raise
    chosen = [dict(node.folding) for node in graph.nodes]
    for node, folding in zip(graph.nodes, original):
        node.folding = dict(folding)
    spilled = _spilled_search(graph, budget, target_cycles, beside)
    if spilled is not None and (plain is None or (target_cycles is None and spilled.ii < plain.ii)):
        return replace(spilled, seconds=time.perf_counter() - start)
    if plain is None:
        raise failure
    for node, folding in zip(graph.nodes, chosen):
        node.folding = folding
    return replace(plain, seconds=time.perf_counter() - start)


SEARCH_BESIDE_FROM = 2000  # candidate foldings of the spilled search worth a forked process for it
_IN_WORKER = False          # in a forked search: no pools of its own


def _spilled_search_beside(graph, budget, target_cycles):
    """The spilled search started in a forked process (:class:`Forked`) after its candidates (the plain
    search's and more) are costed; None where it is small, on one core, or already in a worker."""
    if _COSTS is None or _IN_WORKER or cores() < 2:
        return None
    if _cost_on_workers(graph, fold_groups(graph), True) < SEARCH_BESIDE_FROM:
        return None
    return Forked(lambda: _spilled_in_worker(graph, budget, target_cycles))


def _spilled_in_worker(graph, budget, target_cycles):
    """In the forked process: (the spilled search's result or its NoFit, the folding it left in the graph,
    what it added to the optimizer's caches, for the I/O rounds that follow)."""
    global _SEARCH, _IN_WORKER
    _SEARCH, _IN_WORKER = None, True        # the progress line is the parent's
    caches = (_COSTS, _INSERTED, _NAIVE)
    sizes = [len(cache) for cache in caches]
    try:
        result = _optimize(graph, budget, target_cycles, spill=True)
    except NoFit as exc:
        result = exc
    added = [dict(itertools.islice(cache.items(), n, None)) for cache, n in zip(caches, sizes)]   # dicts keep
    return result, [dict(node.folding) for node in graph.nodes], added                          # their order


def _spilled_search(graph, budget, target_cycles, beside):
    """The spilled search's result (None if nothing fits), the graph folded as it left it: from the forked
    process ``beside`` where one runs (its cache entries kept here too), else searched here."""
    if beside is not None:
        try:
            result, foldings, added = beside.result()
        except WorkerLost:
            pass                    # lost (memory): search here
        else:
            for cache, entries in zip((_COSTS, _INSERTED, _NAIVE), added):
                for key, value in entries.items():
                    cache.setdefault(key, value)
            for node, folding in zip(graph.nodes, foldings):
                node.folding = folding
            return None if isinstance(result, NoFit) else result
    try:
        return _optimize(graph, budget, target_cycles, spill=True)
    except NoFit:
        return None


def _optimize(graph, budget, target_cycles, spill):
    start = time.perf_counter()
    groups = fold_groups(graph)
    _cost_on_workers(graph, groups, spill)
    choices = []
    for group in groups:
        choices.append(group_options(graph, group, spill))
        if _SEARCH is not None:
            _SEARCH.options_costed()
    limit = budget.as_vector()
    original = [dict(node.folding) for node in graph.nodes]
    charges = stitch_charges(graph, groups, choices)

    start_key = _foldings_key(original)
    attempted = {}

    def naive(ii):
        """FINN's SetFolding for ``ii`` from the graph's own folding (resType, ram_style as given); each
        target folded once per optimizer run (the plain and spilled searches start from the same folding)."""
        key = (ii, start_key) if _NAIVE is not None and start_key is not None else None
        if key is not None and key in _NAIVE:
            reached, foldings = _NAIVE[key]
            for node, folding in zip(graph.nodes, foldings):
                node.folding = dict(folding)
            return reached
        for node, folding in zip(graph.nodes, original):
            node.folding = dict(folding)
        reached = set_folding(graph, ii)
        if key is not None:
            _NAIVE[key] = reached, [dict(node.folding) for node in graph.nodes]
        return reached

    def attempt(ii):
        """(picked, whole-design estimate, rounds): the cheapest design at ``ii`` whose estimate, inserted
        nodes included, fits; the node budget shrinks by what they overshoot, a few rounds. None if none.
        A function of ``ii`` alone (every attempt sets every option's attributes, or the naive folding
        from the original): the bisection's probes below its II are not solved again by LOOK_BELOW."""
        if ii not in attempted:
            attempted[ii] = _attempt(ii)
        return attempted[ii]

    def _attempt(ii):
        node_limit = limit.copy()
        for rounds in range(1, MAX_ROUNDS + 1):
            picked = _cheapest_within(choices, node_limit, ii, charges)
            if picked is None:
                return None
            _apply(graph, groups, choices, picked)
            used = design_estimate(graph)
            over = used - limit
            if (over <= 1e-9).all():
                return picked, used, rounds
            node_limit = node_limit - np.maximum(over, 0) - 1e-6
        # The inserted nodes depend on the neighbours' widths, which the per-node program does not see:
        # where it found no fitting design, FINN's SetFolding at this II still may (the optimizer must
        # never do worse than the naive folding).
        if naive(ii) <= ii:
            used = design_estimate(graph)
            if (used <= limit + 1e-9).all():
                return ("naive", ii), used, MAX_ROUNDS + 1
        return None

    def counted(ii):
        found = attempt(ii)
        if _SEARCH is not None:
            _SEARCH.attempted(ii, found is not None)
        return found

    candidates = [target_cycles] if target_cycles is not None else candidate_iis(choices)
    found = smallest_fitting(candidates, counted)
    if found is None:
        what = f"{target_cycles} cycles per frame" if target_cycles else "any folding"
        if _cheapest_within(choices, limit, candidates[-1], charges) is None:
            raise NoFit(f"no design fits the budget ({budget.describe()}) at {what}: its layers alone need "
                        f"at least {describe_resources(least_cost(choices, target_cycles))}")
        raise NoFit(f"no design fits the budget ({budget.describe()}) at {what} once the DWCs, FIFOs and "
                    f"DuplicateStreams between the layers are counted")
    ii, (picked, used, rounds) = found
    if target_cycles is None:
        # Fitting is not quite monotone in the II (the inserted nodes follow the widths), so bisection can
        # step over an II where the naive folding fits: try it at targets between the fastest II and ours.
        target = float(candidates[0])
        while target < ii:
            reached = naive(int(target))
            if reached < ii:
                naive_used = design_estimate(graph)
                if (naive_used <= limit + 1e-9).all():
                    ii, (picked, used, rounds) = reached, (("naive", int(target)), naive_used, MAX_ROUNDS + 1)
                    break
            target *= 2 ** 0.25
    if picked[0] == "naive":            # FINN's SetFolding at that target
        ii = naive(picked[1])
    else:
        _apply(graph, groups, choices, picked)
        ii = _ii(choices, picked)
    ratios = np.divide(used, limit, out=np.zeros_like(used), where=np.isfinite(limit) & (limit > 0))
    binding = BOARD_NAMES[RESOURCES[int(np.argmax(ratios))]]
    return OptimizerResult(ii, budget, dict(zip(RESOURCES, used.tolist())), binding,
                           time.perf_counter() - start, sum(len(c) for c in choices), rounds)


def fold_groups(graph):
    """Lists of node indices chosen together: ``[follower, leader]`` where a node's op names another in
    ``Op.folded_with`` (a depthwise SWG and the VVAU it feeds), at the leader's place; every other node alone."""
    index = {id(node): k for k, node in enumerate(graph.nodes)}
    ctx = FoldingContext(graph)
    paired, groups = set(), []
    for k, node in enumerate(graph.nodes):
        follower = folded_with(ctx, node)
        if follower is not None:
            paired.add(index[id(follower)])
            groups.append([index[id(follower)], k])
        else:
            groups.append([k])
    return [g for g in groups if len(g) > 1 or g[0] not in paired]


def node_foldings(node, spill=False):
    """Every combination of the node's parallelism axes and its op's other choices (``Op.choices``, FINN
    attribute dicts)."""
    axes = {attr: node.op.legal(attr, node.params) for attr in node.op.parallelism}
    for attr, values in node.op.choices.items():
        values = values(node.params) if callable(values) else values
        if attr in node.op.folding and values:
            axes[attr] = values
    names = list(axes)
    for values in itertools.product(*(axes[n] for n in names)):
        folding = dict(zip(names, values))
        yield folding
        if spill and "weight_lut_bits" in node.op.folding and folding.get("ram_style") == "block":
            # BRAM spilled into LUTs a bit column at a time: what fits a design whose weights outgrow the
            # block RAM (the generator MLP under the 0.8 cap)
            width = folding["PE"] * folding["SIMD"] * DataType[str(node.params["weight_dtype"])].bitwidth()
            for share in SPILL_SHARES:
                if int(width * share):
                    yield {**folding, "weight_lut_bits": int(width * share)}


def _candidates(graph, group, spill):
    """(nodes, candidates) of a group: each candidate ((index in the group, folding), ...)."""
    nodes = [graph.nodes[k] for k in group]
    if len(nodes) == 2:             # [follower, leader]: the follower's folding follows the leader's
        leader = nodes[1]
        return nodes, [((0, leader.op.follower_folding(f)), (1, f)) for f in node_foldings(leader, spill)]
    return nodes, [((0, f),) for f in node_foldings(nodes[0], spill)]


def _memo_key(nodes, candidate):
    """The candidate's key in ``_COSTS`` (None where a folding value is not hashable: not remembered)."""
    key = tuple((id(nodes[i]), tuple(sorted(f.items()))) for i, f in candidate)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _cost(nodes, candidate):
    """(cycles, (LUT, FF, BRAM18, DSP)) of a candidate, None if illegal."""
    try:
        specs = [nodes[i].spec(**f) for i, f in candidate]
    except ValueError:      # an illegal combination (e.g. parallel_window here, dsp with 1-bit weights)
        return None
    est = sum((estimate(s) for s in specs), start=0)
    return max(s.exp_cycles for s in specs), tuple(int(est[r]) for r in RESOURCES)


def group_options(graph, group, spill=False):
    """The non-dominated options (:class:`Option`) of a group of nodes (:func:`fold_groups`)."""
    nodes, candidates = _candidates(graph, group, spill)
    hooked = any(node.op.stitched_after is not None for node in nodes)
    found = {}
    for candidate in candidates:
        memo = _memo_key(nodes, candidate) if _COSTS is not None else None
        known = _COSTS.get(memo, False) if memo is not None else False
        if known is False:
            known = _cost(nodes, candidate)
            if memo is not None:
                _COSTS[memo] = known
        if known is None:
            continue
        cycles, cost = known
        forced = forced_cost(nodes, candidate) if hooked else (0, 0, 0, 0)
        key = (cycles, cost, forced)
        if key not in found:        # the first of equal options: the order of the legal values decides
            found[key] = Option(tuple((i, dict(f)) for i, f in candidate), cycles, cost, forced)
    return _pareto(list(found.values()))


def _cost_on_workers(graph, groups, spill):
    """Cost the candidates of ``groups`` not yet in ``_COSTS`` on worker processes
    (:func:`rtlgen.passes.optimize_workers.cost_on_workers`: a CNN's MVAUs have 50,000 foldings, each a
    spec built and estimated); :func:`group_options` then finds every cost in ``_COSTS``, the same as it
    would compute them. Returns the number of candidates of ``groups`` (costed now or before)."""
    if _COSTS is None or _IN_WORKER:
        return 0
    candidates = [_candidates(graph, group, spill) for group in groups]
    if _SEARCH is not None:
        _SEARCH.costing(sum(len(folds) for _, folds in candidates))
    return cost_on_workers(_COSTS, candidates, _memo_key, _cost)


def _pareto(options):
    """Drop every option that another is no slower than and no more expensive in any resource."""
    options.sort(key=lambda o: (o.cycles, sum(o.cost) + sum(o.forced), o.cost))
    kept, rows = [], np.empty((len(options), 1 + len(RESOURCES)))      # rows: the kept ones' cycles, cost
    for option in options:      # (with what it forces, as if always paid: no option pruned for a saving
        row = np.array((option.cycles, *np.add(option.cost, option.forced)), dtype=float)   # it may not make)
        if not (rows[:len(kept)] <= row).all(axis=1).any():
            rows[len(kept)] = row
            kept.append(option)
    return kept


def _ii(choices, picked):
    return max(choices[g][k].cycles for g, k in enumerate(picked))


def _cheapest_within(choices, limit, ii, charges=()):
    """The 0/1 program at one II: one option per group with cycles <= ii, sum of costs <= limit, minimum
    cost in units of the limit. None if infeasible. ``charges`` (:mod:`rtlgen.passes.optimize_stitch`):
    a column z per charged option, z >= x(option) - x(the consumer's options that avoid it), its cost."""
    from scipy.optimize import Bounds, LinearConstraint

    from rtlgen.passes.milp import milp        # HiGHS's stray prints kept off the terminal

    allowed = [[k for k, o in enumerate(options) if o.cycles <= ii] for options in choices]
    if any(not a for a in allowed):
        return None
    columns = [(g, k) for g, a in enumerate(allowed) for k in a]
    at = {c: j for j, c in enumerate(columns)}
    live = [c for c in charges if (c.group, c.option) in at]
    n = len(columns) + len(live)
    costs = np.array([choices[g][k].cost for g, k in columns] + [c.cost for c in live],
                     dtype=float).reshape(n, len(RESOURCES))                 # (options + charges, resources)
    finite = np.isfinite(limit)
    scale = np.where(finite & (limit > 0), limit, np.maximum(costs.max(axis=0), 1.0))
    objective = (costs / scale).sum(axis=1)
    objective += 1e-9 * np.arange(n)                    # a fixed order among equal costs: deterministic
    one_each = np.zeros((len(choices), n))
    for j, (g, _) in enumerate(columns):
        one_each[g, j] = 1
    constraints = [LinearConstraint(one_each, 1, 1)]
    if live:
        link = np.zeros((len(live), n))
        for r, c in enumerate(live):
            link[r, at[c.group, c.option]], link[r, len(columns) + r] = 1, -1
            for k in c.avoided_by:
                if (c.consumer, k) in at:
                    link[r, at[c.consumer, k]] = -1
        constraints.append(LinearConstraint(link, -np.inf, 0))
    if finite.any():
        constraints.append(LinearConstraint(costs[:, finite].T, -np.inf, limit[finite]))
    integrality = np.r_[np.ones(len(columns)), np.zeros(len(live))]
    result = milp(objective, constraints=constraints, integrality=integrality, bounds=Bounds(0, 1))
    if result.status != 0 or result.x is None:
        return None
    chosen = {columns[j][0]: columns[j][1] for j in np.flatnonzero(result.x[:len(columns)] > 0.5)}
    return [chosen[g] for g in range(len(choices))]


def least_cost(choices, target_cycles):
    """A lower bound on the layers' cost: per resource, the sum of every group's smallest figure (at the
    target, if any)."""
    total = np.zeros(len(RESOURCES))
    for options in choices:
        usable = [o for o in options if target_cycles is None or o.cycles <= target_cycles] or options
        total += np.array([min(o.cost[r] for o in usable) for r in range(len(RESOURCES))], dtype=float)
    return total


def describe_resources(vector):
    lut, ff, bram18, dsp = vector
    return f"LUT {lut:,.0f}, FF {ff:,.0f}, BRAM36 {bram18 / BRAM18_PER_BRAM36:,.1f}, DSP {dsp:,.0f}"


def _apply(graph, groups, choices, picked):
    for group, options, k in zip(groups, choices, picked):
        for i, folding in options[k].folding:
            node = graph.nodes[group[i]]
            node.folding.pop("weight_lut_bits", None)       # only the options that spill carry it
            node.folding.update(folding)


def design_estimate(graph):
    """Estimate (LUT, FF, BRAM18, DSP) of the design as stitched: the nodes plus the DuplicateStreams, DWCs
    and FIFOs between them (:func:`inserted_estimate`), so the design the optimizer accepts is the design
    the compile builds. A pure function of the folded graph (``graph`` is not changed)."""
    total = sum(estimate(node.spec()) for node in graph.nodes)
    return np.array([float(total[r]) for r in RESOURCES]) + inserted_estimate(graph)


def inserted_estimate(graph):
    """Estimate (LUT, FF, BRAM18, DSP) of the nodes stitching adds to the folded ``graph``: the fan-outs,
    DWCs and FIFOs of :func:`rtlgen.passes.insert.stream_plan` (the plan the insertion passes materialize),
    the FIFOs at the depths the compile will give them (:func:`rtlgen.passes.size_fifos.analytic_fifo_depths`
    of the plan: the composed timing model), however deep (in block RAM beyond a few hundred words; see
    :mod:`layers.fifo`). No graph is built. Within :func:`optimize_folding`, a folding already costed is
    not modelled again (the bisection, the naive fallback and the spilled pass revisit foldings)."""
    from rtlgen.passes.size_fifos import analytic_fifo_depths
    from rtlgen.passes.insert import stream_plan
    key = _folding_key(graph) if _INSERTED is not None else None
    if key is not None and key in _INSERTED:
        return _INSERTED[key].copy()
    plan = stream_plan(graph)
    depths = analytic_fifo_depths(plan)
    vector = np.zeros(len(RESOURCES))
    for node in plan.inserted_nodes():
        used = estimate(node.spec(depth=depths[node.name]) if node.name in depths else node.spec())
        vector += [float(used[r]) for r in RESOURCES]
    if key is not None:
        _INSERTED[key] = vector.copy()
    return vector


def _foldings_key(foldings):
    """A list of foldings, hashable (None where a value is not)."""
    key = tuple(tuple(sorted(folding.items())) for folding in foldings)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _folding_key(graph):
    """The graph's wiring and every node's folding, hashable (None where a folding value is not)."""
    key = (graph.input, graph.output, tuple((n.name, n.op_type, n.inputs, n.outputs, tuple(sorted(n.folding.items())))
                                          for n in graph.nodes))
    try:
        hash(key)
    except TypeError:
        return None
    return key
