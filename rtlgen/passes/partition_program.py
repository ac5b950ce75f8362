"""The partitioner's search (:func:`rtlgen.passes.partition.partition`; the problem is in that module's
docstring): the II by bisection, at each II a greedy start and the 0/1 program.

The per-node options are :mod:`rtlgen.passes.optimize`'s (``fold_groups``, ``group_options``: non-dominated foldings
with their cycles and calibrated cost). The II is found by bisection over the candidate IIs (the
options' cycle counts and the cuts' link bounds, from the slowest group's fastest option up; the
program's feasibility is monotone in the II: a larger II allows every option and cut a smaller one
does; the check for DWCs and FIFOs below is taken as monotone too, as in the optimizer). At one II ``T`` the
partition is a 0/1 program, solved exactly by HiGHS (``scipy.optimize.milp``):

- ``w[g, k, d]`` in {0, 1}: group ``g`` takes option ``k`` (one with ``cycles <= T``) on device ``d``;
  ``sum_{k, d} w[g, k, d] = 1``. (``x[g, k] = sum_d w`` is the folding, ``y[g, d] = sum_k w`` the
  placement; a fixed node has columns on its device only.)
- contiguity: ``dev(n) = sum_{k, d} d * w[g(n), k, d]``; ``dev(n_0) = 0`` and ``0 <= dev(n_{i+1}) -
  dev(n_i) <= 1``, with equality to 0 where ``i`` is no legal cut or its link bound exceeds ``T``: the
  used devices are ``0 .. m-1`` in order, each one segment; devices ``m ..`` are left empty.
- bridges: for a cut after ``n_i`` and a bridge geometry ``s`` (the producer's word width and words per
  frame; the consumer's for the receiving bridge), ``b_to[i, s, d] >= sum_{k: s(k) = s} w[g(n_i), k, d] -
  y[g(n_{i+1}), d]`` (1 exactly when ``n_i`` is on ``d`` with that geometry and ``n_{i+1}`` is not), and
  ``b_from[i, s, d] >= sum_{k: s(k) = s} w[g(n_{i+1}), k, d] - y[g(n_i), d]``; ``0 <= b <= 1`` continuous.
- resources, per device ``d`` and resource ``r``: ``sum cost[k, r] w[., k, d] + sum bridge[s, r] b[., s, d]
  <= limit[d, r]``.

**Objective.** While bisecting: the total cost in units of the budgets, ``sum_{d, r} used[d, r] /
budget[d, r]`` (as :mod:`rtlgen.passes.optimize`; HiGHS solves it fast). At the II
found, once more for balance: the largest utilisation ``U >= used[d, r] / budget[d, r]`` over the
devices and the finite budgets, plus ``1e-3 / (devices * resources)`` times the total cost: the most
headroom on the fullest device, and among equally balanced partitions the cheapest (kept if it passes
the check below, else the probe's partition stands). The check, as in :mod:`rtlgen.passes.optimize`: the
DWCs, FIFOs and DuplicateStreams that stitching adds inside each device are estimated for the chosen
folding (``optimize.design_estimate`` of the device's subgraph, plus its bridges); while a device is over,
its node budget at that II shrinks by the overshoot and the program is solved again
(``optimize.MAX_ROUNDS`` rounds); where that fails, the balanced program's rounds are tried, and an II
where both fail counts as infeasible. Deterministic: the same graph, budgets and arguments give the
same :class:`Partition` (unless a time limit below is reached).

**Large problems.** The whole program grows with nodes x options x devices (MobileNet-v1 on nine boards:
40-60k columns, where HiGHS found no partition in 20 minutes). So at each II a greedy start comes first:
nodes go onto devices in order, each filled up to a target with its nodes' cheapest options
(:meth:`_Problem.greedy_placements`), and with that placement fixed only the folding is left (a program
per device in effect, under a second for MobileNet). A greedy placement that fits proves the II
feasible; only where none does, the whole program decides. Every program has a time limit
(``SOLVE_SECONDS``); a program stopped there without a partition proves nothing either way, and the
result says what is left unproven (:attr:`Partition.solver_note`, partition.json), as does the error
when nothing was found.
"""

from dataclasses import dataclass
from fractions import Fraction
from math import ceil

import numpy as np
from scipy.optimize import Bounds, LinearConstraint
from scipy.sparse import coo_matrix

from galapagos.bridges import FLIT_WIDTHS, MAX_PACKET_BYTES, max_packet_flits
from galapagos.from_galapagos import FromGalapagosSpec
from galapagos.to_galapagos import ToGalapagosSpec
from galapagos.link import header_flits
from rtlgen.costmodel import estimate
from rtlgen.fit import BOARD_NAMES, Budget
from rtlgen.ir.graph import words_per_frame
from rtlgen.passes.milp import milp            # HiGHS's debug lines kept off the terminal
from rtlgen.passes.optimize import (MAX_ROUNDS, RESOURCES, candidate_iis, describe_resources, design_estimate,
                                    fold_groups, group_options, least_cost, smallest_fitting)
from rtlgen.passes.partition_plan import Cut, DevicePlan, Partition, PartitionError, legal_cuts, segment_graph

__all__ = ["PartitionProgram", "SOLVE_SECONDS"]

BALANCE_TIE = 1e-3              # weight of the total cost next to the largest utilisation (final solve)
ORDER_TIE = 1e-9                # a fixed order among equal columns: deterministic
SOLVE_SECONDS = 30.0            # HiGHS's time limit per program (module docstring: "Large problems")
GREEDY_FILLS = (1.0, 1.15, 1.3, 1.5, 2.0)   # greedy start: device fill targets, x the balanced share


@dataclass
class _CutSite:
    position: int                   # cut between node `position` and node `position + 1`
    tensor: str
    bits: int
    wire_bits: int                  # on the link: whole flits and the header time
    link_ii: int
    to_keys: list                   # per option of the producer's group: the ToGalapagos geometry
    from_keys: list                 # per option of the consumer's group: the FromGalapagos geometry


@dataclass
class _Solution:
    option: list                    # per group: option index
    device: list                    # per group: device index


class PartitionProgram:
    """Everything one partition needs: groups and options, legal cuts with their link bounds and bridge
    geometries, budgets, and the fixed placements."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    @classmethod
    def build(cls, graph, devices, budgets, *, link_gbps, clock_mhz, fixed, flit_width, choices=None,
              host_links=True, max_packet_bytes=MAX_PACKET_BYTES, solve_seconds=SOLVE_SECONDS):
        if isinstance(devices, bool) or not isinstance(devices, (int, np.integer)) or devices < 1:
            raise PartitionError(f"devices must be an integer >= 1, not {devices!r}")
        devices = int(devices)
        if isinstance(budgets, Budget):
            budgets = [budgets] * devices
        budgets = list(budgets)
        if len(budgets) != devices or not all(isinstance(b, Budget) for b in budgets):
            raise PartitionError(f"give one budget, or one per device ({devices}), not {len(budgets)}")
        for name, value in (("link_gbps", link_gbps), ("clock_mhz", clock_mhz)):
            if not (isinstance(value, (int, float)) and value > 0 and np.isfinite(value)):
                raise PartitionError(f"{name} must be a positive number, not {value!r}")
        if flit_width not in FLIT_WIDTHS:
            raise PartitionError(f"flit_width must be one of {', '.join(map(str, FLIT_WIDTHS))}, not {flit_width!r}")
        if isinstance(max_packet_bytes, bool) or not isinstance(max_packet_bytes, int) \
                or max_packet_bytes < flit_width // 8:
            raise PartitionError(f"max_packet_bytes must be an integer of at least one flit ({flit_width // 8} "
                                 f"bytes), not {max_packet_bytes!r}")
        graph = graph.copy()            # the options' specs are built from it; the caller's graph stays as is
        nodes = graph.nodes
        names = [n.name for n in nodes]
        cuts = legal_cuts(graph)
        if devices > len(cuts) + 1:
            where = ", ".join(f"after {names[i]}" for i in cuts) or "none"
            raise PartitionError(f"{devices} devices for {len(nodes)} layers: the graph can be cut into at most "
                                 f"{len(cuts) + 1} parts (legal cuts, where exactly one stream crosses: {where})")
        groups = fold_groups(graph)
        group_of, member = {}, {}
        for g, group in enumerate(groups):
            for i, k in enumerate(group):
                group_of[k], member[k] = g, i
        problem = cls(graph=graph, nodes=nodes, names=names, groups=groups, group_of=group_of, member=member,
                      devices=devices, budgets=budgets, limit=np.array([b.as_vector() for b in budgets]),
                      link_gbps=float(link_gbps), clock_mhz=float(clock_mhz), flit_width=flit_width,
                      max_packet_bytes=max_packet_bytes, packet_flits=max_packet_flits(flit_width, max_packet_bytes),
                      bridge_cost={}, spec_cache={}, solve_seconds=solve_seconds, undecided=[], unproven=[])
        problem.fixed = problem._fixed(fixed or {}, cuts)          # checked before the (slow) options
        problem.choices = choices if choices is not None else [group_options(graph, g) for g in groups]
        rate = Fraction(str(float(clock_mhz))) * 10 ** 6 / (Fraction(str(float(link_gbps))) * 10 ** 9)
        problem.sites = {i: problem._site(i, t, rate) for i, t in cuts.items()}
        problem.host_links = problem._host_links(rate) if host_links else {}
        return problem

    # -------------------------------------------------------------------------------------- set-up

    def _spec(self, position, option):
        """The spec of node ``position`` under option ``option`` of its group."""
        key = (position, option)
        if key not in self.spec_cache:
            g, i = self.group_of[position], self.member[position]
            folding = dict(self.choices[g][option].folding)[i]
            self.spec_cache[key] = self.nodes[position].spec(**folding)
        return self.spec_cache[key]

    def _bridge(self, kind, width, words):
        key = (kind, width, words)
        if key not in self.bridge_cost:
            if kind == "to":
                spec = ToGalapagosSpec(width, self.flit_width, words, dest=1, source_id=1,
                                       max_packet_flits=self.packet_flits)
            else:
                spec = FromGalapagosSpec(width, self.flit_width, words, kernel_id=1,
                                         max_packet_flits=self.packet_flits)
            r = estimate(spec)
            self.bridge_cost[key] = np.array([float(r[name]) for name in RESOURCES])
        return key

    def _site(self, i, tensor, rate):
        port = self.nodes[i + 1].inputs.index(tensor)
        to_keys, from_keys, bits = [], [], set()
        for k in range(len(self.choices[self.group_of[i]])):
            spec = self._spec(i, k)
            words = words_per_frame(spec.folded_output_shape)
            bits.add(spec.out_width * words)
            to_keys.append(self._bridge("to", spec.out_width, words))
        for k in range(len(self.choices[self.group_of[i + 1]])):
            spec = self._spec(i + 1, k)
            from_keys.append(self._bridge("from", spec.in_width, words_per_frame(spec.folded_input_shapes[port])))
        bits = max(bits)            # the same for every folding (elements x bits per element)
        return _CutSite(i, tensor, bits, self._wire_bits(bits), self._link_ii(bits, rate), to_keys, from_keys)

    def _wire_bits(self, bits):
        """Bits a link carries for one ``bits``-bit frame: whole flits (the last one padded), in packets of
        at most ``packet_flits``, each with its header time."""
        flits = ceil(bits / self.flit_width)
        return (flits + ceil(flits / self.packet_flits) * header_flits(self.flit_width)) * self.flit_width

    def _link_ii(self, bits, rate):
        """The smallest II at which a link carries one ``bits``-bit frame (``rate``: cycles per bit of the
        link)."""
        return max(1, ceil(self._wire_bits(bits) * rate))

    def _host_links(self, rate):
        """{name: link II} of the host's links (Galapagos' software kernel on another node of the network):
        the graph input into device 0 and the graph output back from the last device."""
        first, last = self._spec(0, 0), self._spec(len(self.nodes) - 1, 0)
        port = self.nodes[0].inputs.index(self.graph.input)
        bits_in = first.in_width * words_per_frame(first.folded_input_shapes[port])
        bits_out = last.out_width * words_per_frame(last.folded_output_shape)
        return {"link host -> device 0": self._link_ii(bits_in, rate),
                "link last device -> host": self._link_ii(bits_out, rate)}

    def _fixed(self, fixed, cuts):
        """{group: device} from {node name: device}, checked against the legal ``cuts``."""
        if not hasattr(fixed, "items"):
            raise PartitionError(f"the partition map must map node names to device indices, not "
                                 f"{type(fixed).__name__}")
        position = {name: k for k, name in enumerate(self.names)}
        placed = {}
        for name, device in fixed.items():
            if name not in position:
                raise PartitionError(f"partition map names unknown node {name!r}; the nodes are "
                                     f"{', '.join(self.names)}")
            if isinstance(device, bool) or not isinstance(device, (int, np.integer)) \
                    or not 0 <= device < self.devices:
                raise PartitionError(f"partition map puts {name} on device {device!r}; devices are 0.."
                                     f"{self.devices - 1}")
            placed[position[name]] = int(device)
        order = sorted(placed)
        where = ", ".join(f"after {self.names[i]}" for i in cuts) or "none"
        for a, b in zip([None] + order, order):
            da, db = (0 if a is None else placed[a]), placed[b]
            if db < da:
                raise PartitionError(f"partition map puts {self.names[b]} on device {db} after {self.names[a]} on "
                                     f"device {da}: device indices must not decrease along the graph order "
                                     f"({', '.join(self.names)})")
            room = sum(1 for i in cuts if (a is None or a <= i) and i < b)
            if db - da > room:
                between = (f"before {self.names[b]}" if a is None else
                           f"between {self.names[a]} (device {da}) and {self.names[b]}")
                raise PartitionError(f"partition map puts {self.names[b]} on device {db}, but {room} legal "
                                     f"cut{'s' if room != 1 else ''} lie{'s' if room == 1 else ''} {between} and "
                                     f"devices are used in order from 0, one per segment (legal cuts, where "
                                     f"exactly one stream crosses: {where})")
        groups = {}
        for k, device in placed.items():
            g = self.group_of[k]
            if groups.setdefault(g, device) != device:
                a, b = (self.names[self.groups[g][i]] for i in (0, 1))
                raise PartitionError(f"partition map splits {a} and {b}, which are folded together; put them "
                                     f"on the same device")
        return groups

    # -------------------------------------------------------------------------------------- search

    def candidates(self):
        host = max(self.host_links.values(), default=1)
        floor = max(host, max(min(o.cycles for o in options) for options in self.choices))
        links = {s.link_ii for s in self.sites.values() if s.link_ii >= floor}
        return sorted({c for c in candidate_iis(self.choices) if c >= floor} | links | {floor})

    def smallest(self, rounds=True):
        """(II, (solution, rounds)) for the smallest feasible candidate II, or None. Without ``rounds``,
        the program alone (nodes and bridges against the budgets; no DWCs or FIFOs)."""
        def program(ii):
            solution = self.solve(ii, self.limit)
            return None if solution is None else (solution, 1)
        return smallest_fitting(self.candidates(), self.attempt if rounds else program)

    def attempt(self, ii, balance=False, placement=None):
        """(solution, rounds) at ``ii`` whose devices, with their DWCs, FIFOs and bridges, fit; each
        round shrinks the node budget of the devices that were over by their overshoot. Where the
        cheapest partitions fill devices to the brim and the rounds do not settle, the balanced ones
        (more headroom for what the program does not see) are tried. Without ``placement``, the greedy
        placements (:meth:`greedy_placements`) are tried first, then the whole program."""
        if placement is None and not balance:
            for greedy in self.greedy_placements(ii):
                found = self.attempt(ii, placement=greedy)
                if found is not None:
                    return found
        limits = self.limit.copy()
        for rounds in range(1, MAX_ROUNDS + 1):
            solution = self.solve(ii, limits, balance, placement)
            if solution is None:
                break
            whole = np.array([self.whole(solution, d)[0] for d in range(self.devices)])
            over = whole - self.limit
            if (over <= 1e-9).all():
                return solution, rounds
            limits = limits - np.maximum(over, 0) - 1e-6 * (over > 1e-9)
        if balance or rounds == 1 or placement is not None:     # balanced, or not even layers and bridges fit
            return None
        return self.attempt(ii, balance=True)

    def greedy_placements(self, ii):
        """Contiguous placements {group: device} at ``ii`` to try before the whole program: nodes go in
        graph order onto device 0, 1, ..., each filled with its nodes' cheapest options at ``ii`` (in units
        of its budget, the binding resource) up to a fill target, then cut at the last legal cut before the
        node that overflows it. The targets are the balanced share (the total over the devices) x
        ``GREEDY_FILLS``, at most the whole budget. Placements that use more devices than there are, or
        contradict the partition map, are skipped; each is tried once."""
        allowed = [[o for o in options if o.cycles <= ii] for options in self.choices]
        if any(not a for a in allowed):
            return
        finite = np.isfinite(self.limit) & (self.limit > 0)
        if not finite.any():            # unlimited budgets: the whole program is small work
            return
        scale = np.where(finite, self.limit, np.inf)
        cost = np.zeros((len(self.nodes), len(RESOURCES)))     # per node: its group's cheapest option, once
        for g, options in enumerate(allowed):
            cost[self.groups[g][0]] = min((o.cost for o in options), key=lambda c: float((c / scale).max()))
        share = float(np.max(cost.sum(axis=0) / scale.sum(axis=0)))
        cuts = {i for i, s in self.sites.items() if s.link_ii <= ii}
        tried = set()
        for fill in GREEDY_FILLS:
            placement = self._greedy(cost, scale, cuts, min(1.0, share * fill))
            if placement is not None and tuple(placement.values()) not in tried:
                tried.add(tuple(placement.values()))
                yield placement

    def _greedy(self, cost, scale, cuts, fill):
        device, start, used = [0] * len(self.nodes), 0, np.zeros(cost.shape[1])
        d = 0
        for k in range(len(self.nodes)):
            used = used + cost[k]
            if k > start and (used / scale[d] > fill + 1e-9).any():
                last = max((i for i in cuts if start <= i < k), default=None)
                if last is not None:
                    d += 1
                    if d >= self.devices:
                        return None
                    start = last + 1
                    used = cost[start:k + 1].sum(axis=0)
                    for j in range(start, k):
                        device[j] = d
            device[k] = d
        placement = {}
        for g, members in enumerate(self.groups):
            on = {device[k] for k in members}
            if len(on) > 1 or self.fixed.get(g, device[members[0]]) != device[members[0]]:
                return None
            placement[g] = device[members[0]]
        return placement

    def solve(self, ii, limits, balance=False, placement=None):
        """The 0/1 program at one II (module docstring): the cheapest partition, or with ``balance`` the
        most balanced one; None if infeasible, or if HiGHS found no partition within its time limit
        (counted in ``self.undecided``). ``placement``: {group: device} for every group (a greedy start's),
        leaving only the folding to choose."""
        D, R = self.devices, len(RESOURCES)
        allowed = [[k for k, o in enumerate(options) if o.cycles <= ii] for options in self.choices]
        if any(not a for a in allowed):
            return None
        columns = []                    # ("w", g, k, d) | ("b", kind, position, key, d) | ("U",)
        where = {}
        for g, ks in enumerate(allowed):
            places = ([placement[g]] if placement is not None else [self.fixed[g]] if g in self.fixed else
                      [0] if g == self.group_of[0] else range(D))
            for k in ks:
                for d in places:
                    where[("w", g, k, d)] = len(columns)
                    columns.append(("w", g, k, d))
        usable = [s for s in self.sites.values() if s.link_ii <= ii]
        bridge_rows = []                # (b column, [(column, coefficient)])
        for s in usable:
            i = s.position
            gp, gc = self.group_of[i], self.group_of[i + 1]
            for kind, keys, ga, gb, options in (("to", s.to_keys, gp, gc, allowed[gp]),
                                                ("from", s.from_keys, gc, gp, allowed[gc])):
                by_key = {}
                for k in options:
                    by_key.setdefault(keys[k], []).append(k)
                for key, ks in by_key.items():
                    for d in range(D):
                        own = [where[("w", ga, k, d)] for k in ks if ("w", ga, k, d) in where]
                        if not own:
                            continue
                        other = [j for j, c in enumerate(columns[:len(where)]) if c[1] == gb and c[3] == d]
                        col = len(columns)
                        columns.append(("b", kind, i, key, d))
                        bridge_rows.append((col, [(j, -1.0) for j in own] + [(j, 1.0) for j in other]))
        u = len(columns)
        columns.append(("U",))
        n = len(columns)

        cost = np.zeros((n, R))
        device_of = np.full(n, -1)
        for j, c in enumerate(columns):
            if c[0] == "w":
                cost[j] = self.choices[c[1]][c[2]].cost
                device_of[j] = c[3]
            elif c[0] == "b":
                cost[j] = self.bridge_cost[c[3]]
                device_of[j] = c[4]

        rows, cols, vals, lo, hi = [], [], [], [], []

        def add(entries, lower, upper):
            r = len(lo)
            for j, v in entries:
                rows.append(r)
                cols.append(j)
                vals.append(v)
            lo.append(lower)
            hi.append(upper)

        w_columns = [(j, c) for j, c in enumerate(columns) if c[0] == "w"]
        for g in range(len(self.choices)):
            add([(j, 1.0) for j, c in w_columns if c[1] == g], 1, 1)
        for i in range(len(self.nodes) - 1):
            ga, gb = self.group_of[i], self.group_of[i + 1]
            if ga == gb:
                continue
            entries = [(j, float(c[3])) for j, c in w_columns if c[1] == gb] + \
                      [(j, -float(c[3])) for j, c in w_columns if c[1] == ga]
            cut_ok = i in self.sites and self.sites[i].link_ii <= ii
            add(entries, 0, 1 if cut_ok else 0)
        for col, entries in bridge_rows:
            add([(col, 1.0)] + entries, 0, np.inf)
        budget = self.limit
        for d in range(D):
            on = np.flatnonzero(device_of == d)
            for r in range(R):
                if np.isfinite(limits[d, r]):
                    add([(j, cost[j, r]) for j in on if cost[j, r]], -np.inf, limits[d, r])
                if balance and np.isfinite(budget[d, r]) and budget[d, r] > 0:
                    add([(j, cost[j, r] / budget[d, r]) for j in on if cost[j, r]] + [(u, -1.0)], -np.inf, 0)

        finite = np.isfinite(budget) & (budget > 0)
        scale = np.where(finite, budget, np.maximum(cost.max(axis=0), 1.0))
        objective = np.zeros(n)
        for j in range(n):
            if device_of[j] >= 0:
                objective[j] = float((cost[j] / scale[device_of[j]]).sum())
        if balance:
            objective *= BALANCE_TIE / (D * R)
            objective[u] = 1.0
        objective[:u] += ORDER_TIE * np.arange(u) / max(u, 1)
        integrality = np.array([1 if c[0] == "w" else 0 for c in columns])
        upper = np.ones(n)
        upper[u] = np.inf
        A = coo_matrix((vals, (rows, cols)), shape=(len(lo), n)).tocsr()
        result = milp(objective, constraints=[LinearConstraint(A, lo, hi)], integrality=integrality,
                      bounds=Bounds(np.zeros(n), upper), options={"time_limit": self.solve_seconds})
        timed_out = result.status == 1     # HiGHS stopped at its time limit: no proof either way
        if timed_out:
            (self.undecided if result.x is None else self.unproven).append(ii)
        if result.x is None or result.status not in (0, 1):
            return None
        option, device = [None] * len(self.choices), [None] * len(self.choices)
        for j, c in w_columns:
            if result.x[j] > 0.5:
                option[c[1]], device[c[1]] = c[2], c[3]
        return _Solution(option, device)

    # -------------------------------------------------------------------------------------- results

    def node_devices(self, solution):
        return [solution.device[self.group_of[k]] for k in range(len(self.nodes))]

    def active_cuts(self, solution):
        dev = self.node_devices(solution)
        return [self.sites[i] for i in range(len(self.nodes) - 1) if dev[i + 1] != dev[i]]

    def foldings(self, solution):
        """{node name: folding} with the solution's options applied."""
        out = {}
        for k, node in enumerate(self.nodes):
            g = self.group_of[k]
            chosen = dict(self.choices[g][solution.option[g]].folding)[self.member[k]]
            out[node.name] = {**node.folding, **chosen}
        return out

    def _resolved(self, foldings):
        """``foldings`` with each weight memory's ``ram_style`` ``auto`` replaced by the style its spec
        resolves it to, as :func:`rtlgen.passes.fold.resolve_weight_styles` does after the optimizer: the
        plan's folding.json, compiled again, then builds the memories the plan costed."""
        for node in self.nodes:
            folding = foldings[node.name]
            if "ram_style" in node.op.folding and folding.get("ram_style", "auto") == "auto":
                resolved = getattr(node.spec(**folding), "weight_ram_style", None)
                if resolved is not None:
                    folding["ram_style"] = resolved
        return foldings

    def bridges(self, solution, d):
        total = np.zeros(len(RESOURCES))
        for s in self.active_cuts(solution):
            i = s.position
            dev = self.node_devices(solution)
            if dev[i] == d:
                total += self.bridge_cost[s.to_keys[solution.option[self.group_of[i]]]]
            if dev[i + 1] == d:
                total += self.bridge_cost[s.from_keys[solution.option[self.group_of[i + 1]]]]
        return total

    def whole(self, solution, d):
        """(estimate of device ``d`` as stitched: nodes, DWCs, FIFOs, duplicates, bridges; bridges alone)."""
        dev = self.node_devices(solution)
        positions = [k for k in range(len(self.nodes)) if dev[k] == d]
        bridges = self.bridges(solution, d)
        if not positions:
            return bridges, bridges
        graph = self.graph.copy()
        for node, folding in zip(graph.nodes, self.foldings(solution).values()):
            node.folding = folding
        return design_estimate(segment_graph(graph, positions)) + bridges, bridges

    def result(self, solution, seconds):
        folding = self._resolved(self.foldings(solution))
        dev = self.node_devices(solution)
        cycles = [self._spec(k, solution.option[self.group_of[k]]).exp_cycles for k in range(len(self.nodes))]
        plans = []
        for d in range(self.devices):
            here = [k for k in range(len(self.nodes)) if dev[k] == d]
            used, bridges = self.whole(solution, d)
            budget = self.limit[d]
            ratios = np.divide(used, budget, out=np.zeros_like(used), where=np.isfinite(budget) & (budget > 0))
            binding = BOARD_NAMES[RESOURCES[int(np.argmax(ratios))]]
            plans.append(DevicePlan(d, tuple(self.names[k] for k in here),
                                    {self.names[k]: folding[self.names[k]] for k in here},
                                    max((cycles[k] for k in here), default=0),
                                    dict(zip(RESOURCES, used.tolist())), dict(zip(RESOURCES, bridges.tolist())),
                                    self.budgets[d], binding, float(ratios.max())))
        active = self.active_cuts(solution)
        slowest = int(np.argmax(cycles))
        ii, bound_by = cycles[slowest], f"node {self.names[slowest]} (device {dev[slowest]})"
        for s in active:
            if s.link_ii > ii:
                ii, bound_by = s.link_ii, f"link {self.names[s.position]} -> {self.names[s.position + 1]}"
        for name, link_ii in self.host_links.items():
            if link_ii > ii:
                ii, bound_by = link_ii, name
        link_bps, clock_hz = self.link_gbps * 1e9, self.clock_mhz * 1e6
        cuts = tuple(Cut(self.names[s.position], self.names[s.position + 1], s.tensor, dev[s.position],
                         dev[s.position + 1], tuple(n.name for n, _ in self.graph.consumers(s.tensor)), s.bits,
                         s.link_ii, s.wire_bits * clock_hz / ii / link_bps) for s in active)
        return Partition(ii, tuple(plans), cuts, bound_by, dict(self.host_links), self.clock_mhz, self.link_gbps,
                         self.flit_width, self.max_packet_bytes,
                         sum(len(c) for c in self.choices), seconds, self.solver_note(ii))

    def solver_note(self, ii):
        """What the time limit left unproven ("" if nothing): an II below ``ii`` where HiGHS found no
        partition in time, or programs stopped with a partition not proved the cheapest or most balanced."""
        notes = []
        below = sorted({t for t in self.undecided if t < ii})
        if below:
            notes.append(f"the II is not proved the smallest: at II {', '.join(f'{t:,}' for t in below)} HiGHS "
                         f"found no partition within its {self.solve_seconds:g} s limit, nor proved there is none")
        if ii in self.undecided:        # only the final, balanced program runs at the II found and fails
            notes.append(f"the most balanced partition was not found within the {self.solve_seconds:g} s limit: "
                         f"the first that fits stands")
        if self.unproven:
            notes.append(f"{len(self.unproven)} program{'s' if len(self.unproven) > 1 else ''} stopped at the "
                         f"{self.solve_seconds:g} s limit with a partition not proved the cheapest or most balanced")
        return "; ".join(notes)

    def no_fit_message(self):
        budgets = {b.describe() or "unlimited" for b in self.budgets}
        what = (f"the budget ({budgets.pop()}) on each device" if len(budgets) == 1 else
                "the budgets (" + "; ".join(f"device {d}: {b.describe() or 'unlimited'}"
                                            for d, b in enumerate(self.budgets)) + ")")
        head = f"no partition over {self.devices} device{'s' if self.devices > 1 else ''} fits {what}"
        if self.fixed:
            head += " with the partition map"
        for g, options in enumerate(self.choices):
            least = least_cost([options], None)
            room = [self.limit[self.fixed[g]]] if g in self.fixed else list(self.limit)
            if not any((least <= r + 1e-9).all() for r in room):
                name = " + ".join(self.names[k] for k in self.groups[g])
                return f"{head} at any folding: {name} alone needs at least {describe_resources(least)}"
        least = least_cost(self.choices, None)
        if not (least <= self.limit.sum(axis=0) + 1e-9).all():
            return f"{head} at any folding: the layers alone need at least {describe_resources(least)} in total"
        if self.undecided:
            return (f"{head} that HiGHS found within its {self.solve_seconds:g} s limit per program, nor did it "
                    f"prove there is none (at II {', '.join(f'{t:,}' for t in sorted(set(self.undecided)))}): give "
                    f"a partition map (node -> device) to pin the cuts, or a longer time limit")
        return (f"{head} at any folding once the Galapagos bridges, DWCs and FIFOs on each device are counted "
                f"(the layers alone need at least {describe_resources(least)})")

