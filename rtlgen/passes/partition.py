"""The partitioner (issue 16): a dataflow graph cut into contiguous segments, one per device, with every
node's folding chosen jointly with the cuts, for the lowest II that every device's budget and every
link's bandwidth allow.

The problem
-----------
The nodes are taken in the graph's (topological) order, ``n_0 .. n_{N-1}``; device ``d`` holds a
contiguous run of them, and the device index never decreases along the order: devices ``0 .. m-1`` hold
one segment each, and the last ``devices - m`` are left empty when a cut would not lower the II.
**Cuts are restricted** to the positions where exactly one stream crosses: between ``n_i`` and
``n_{i+1}`` only if the one tensor written by ``n_0 .. n_i`` (or the graph input) and read by
``n_{i+1} ..`` is the output of ``n_i`` (in a chain: everywhere; in a residual block: not inside the
block). A depthwise SWG and its VVAU, whose foldings the optimizer chooses together, stay together.
Each stream that crosses a cut leaves its device through a :class:`galapagos.ToGalapagosSpec` bridge
(word width: the producer's ``out_width``) and enters the next through a :class:`galapagos.FromGalapagosSpec`
(word width: the consumer's ``in_width``), one frame per packet, ``flit_width``-bit flits; both bridges'
estimates count against their devices. A cut carrying ``bits`` payload bits per frame at II ``T`` moves
``bits * clock_hz / T`` bits/s, at most ``link_bps``: the cut is usable only at ``T >= ceil(bits *
clock_hz / link_bps)`` (its *link bound*), where ``bits`` counts whole flits (the last one padded) plus
the header time of :func:`galapagos.link.header_flits` for each packet of at most ``max_packet_bytes``
(the Ethernet MTU: a frame travels as several packets when it is larger), as the simulation's link model
does. The host (Galapagos' software kernel, on another node) sends the graph input to device 0 and
receives the graph output from the last device over such links too: their bounds are a floor on the II.

The solver
----------
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
same :class:`Partition`.
"""

import json
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from math import ceil
from pathlib import Path

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from galapagos.bridges import FLIT_WIDTHS, MAX_PACKET_BYTES, FromGalapagosSpec, ToGalapagosSpec, max_packet_flits
from galapagos.cluster import Device, Kernel, check_cluster, logical_xml, map_xml, sw_kernel
from galapagos.link import header_flits
from rtlgen.costmodel import estimate
from rtlgen.fit import BOARD_NAMES
from rtlgen.ir.graph import DataflowGraph
from rtlgen.passes.optimize import (MAX_ROUNDS, RESOURCES, Budget, candidate_iis, describe_resources, design_estimate,
                                    fold_groups, group_options, least_cost, smallest_fitting)
from rtlgen.ir.graph import words_per_frame
from sim import out_files

__all__ = ["partition", "Partition", "DevicePlan", "Cut", "PartitionError", "legal_cuts", "DEFAULT_FLIT_WIDTH"]

DEFAULT_FLIT_WIDTH = 64         # the 64-bit flits of the HLS Galapagos bridges (1 Gbit/s boards such as the PYNQ-Z2)
BALANCE_TIE = 1e-3              # weight of the total cost next to the largest utilisation (final solve)
ORDER_TIE = 1e-9                # a fixed order among equal columns: deterministic


class PartitionError(ValueError):
    """The partition asked for is impossible: bad arguments, a bad partition map, or no fit."""


@dataclass(frozen=True)
class DevicePlan:
    """One device of a :class:`Partition`."""
    index: int
    nodes: tuple                    # node names, in graph order (empty: the device is unused)
    folding: dict                   # {node name: FINN folding attributes} (the node's folding with the choice applied)
    cycles: int                     # cycles per frame of its slowest node (0 if empty)
    resources: dict                 # estimate {LUT, FF, BRAM18, DSP}: nodes, DWCs, FIFOs, DuplicateStreams, bridges
    bridges: dict                   # the bridges' part of ``resources``
    budget: Budget
    binding: str                    # the resource closest to its budget: LUT, FF, BRAM36 or DSP
    utilization: float              # used / budget of the binding resource (0 for unlimited budgets)


@dataclass(frozen=True)
class Cut:
    """A stream crossing from one device to a later one."""
    src: str                        # the node writing the tensor (last node of its device)
    dst: str                        # the first node of the receiving device (it reads the tensor)
    tensor: str
    src_device: int
    dst_device: int
    consumers: tuple                # every node reading the tensor (all on dst_device)
    bits_per_frame: int             # payload bits of one frame on the link
    link_ii: int                    # the link bound: the smallest II at which the link carries the stream
    link_utilization: float         # bits on the wire per frame (flits, headers) x frames/s, over the link rate


@dataclass(frozen=True)
class Partition:
    """A graph cut across devices with the folding of every node (see the module docstring)."""
    ii: int                         # cycles per frame: the slowest node, or a link bound if larger
    devices: tuple                  # DevicePlan per device, in order
    cuts: tuple                     # Cut per stream crossing devices, in graph order
    bound_by: str                   # what sets the II: "node MVAU_1 (device 0)" or "link MVAU_1 -> MVAU_2"
    host_links: dict                # {"link host -> device 0": link II, "link last device -> host": ..} ({} if off)
    clock_mhz: float
    link_gbps: float
    flit_width: int
    max_packet_bytes: int
    options: int = field(default=0, compare=False)          # options considered after pruning
    seconds: float = field(default=0.0, compare=False)

    @property
    def frames_per_second(self):
        return self.clock_mhz * 1e6 / self.ii

    @property
    def folding(self):
        """The FINN folding config of the whole graph: {node name: attributes}."""
        return {name: dict(f) for device in self.devices for name, f in device.folding.items()}

    def device_of(self, name):
        for device in self.devices:
            if name in device.nodes:
                return device.index
        raise KeyError(f"no node {name!r} in the partition")

    def apply(self, graph):
        """A copy of ``graph`` with this partition's folding on every node."""
        graph = graph.copy()
        folding = self.folding
        for node in graph.nodes:
            node.folding = dict(folding[node.name])
        return graph

    def split(self, graph):
        """Per device, the subgraph of its nodes with their folding (None for an unused device): its input
        is the stream entering the device (the graph input for the first), its output the stream leaving."""
        graph = self.apply(graph)
        device = {name: d.index for d in self.devices for name in d.nodes}
        return [_subgraph(graph, [k for k, n in enumerate(graph.nodes) if device[n.name] == d.index])
                for d in self.devices]


def legal_cuts(graph):
    """{i: tensor} for every position ``i`` where the graph may be cut between node ``i`` and node
    ``i + 1``: exactly one stream crosses (the output of node ``i``) and no depthwise SWG/VVAU pair
    straddles it."""
    nodes = graph.nodes
    together = set()
    for group in fold_groups(graph):
        together.update(range(min(group), max(group)))
    produced = {graph.input: -1}
    for k, n in enumerate(nodes):
        for t in n.outputs:
            produced[t] = k
    last_read = {}
    for k, n in enumerate(nodes):
        for t in n.inputs:
            last_read[t] = k
    cuts = {}
    for i in range(len(nodes) - 1):
        if i in together:
            continue
        crossing = [t for t, k in produced.items() if k <= i and last_read.get(t, -1) > i]
        if len(crossing) == 1 and produced[crossing[0]] == i:
            cuts[i] = crossing[0]
    return cuts


def partition(graph, devices, budgets, *, link_gbps=1.0, clock_mhz=100.0, fixed=None,
              flit_width=DEFAULT_FLIT_WIDTH, host_links=True, max_packet_bytes=MAX_PACKET_BYTES):
    """Cut ``graph`` into at most ``devices`` contiguous segments and fold every node, for the lowest II
    (cycles per frame at ``clock_mhz``) that fits each device's :class:`~rtlgen.passes.optimize.Budget` (``budgets``:
    one per device, or one for all) and each cut's link (``link_gbps`` Gbit/s of payload per link).
    ``fixed`` maps node names to device indices (a user's partition file): honoured as constraints.
    ``host_links``: the host's links (graph input and output) bound the II too; off when the host
    feeds the first and drains the last device some other way (e.g. the PS's DMA on a one-board run).
    ``max_packet_bytes``: the largest network packet (1,440 B; 8,992 B with jumbo frames).
    ``graph`` is not changed. Formulation and objective: the module docstring.

    Raises :class:`PartitionError` (one line) for more devices than the graph has legal parts, a budget
    list of the wrong length, a partition map naming an unknown node, a device out of range or breaking
    contiguity, or when no partition fits at any II."""
    start = time.perf_counter()
    problem = _Problem.build(graph, devices, budgets, link_gbps=link_gbps, clock_mhz=clock_mhz,
                             fixed=fixed, flit_width=flit_width, host_links=host_links,
                             max_packet_bytes=max_packet_bytes)
    found = problem.smallest()
    if found is None:
        raise PartitionError(problem.no_fit_message())
    ii, (solution, _) = found
    balanced = problem.attempt(ii, balance=True)
    if balanced is not None:
        solution = balanced[0]
    return problem.result(solution, time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------- internals

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


class _Problem:
    """Everything one partition needs: groups and options, legal cuts with their link bounds and bridge
    geometries, budgets, and the fixed placements."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    @classmethod
    def build(cls, graph, devices, budgets, *, link_gbps, clock_mhz, fixed, flit_width, choices=None,
              host_links=True, max_packet_bytes=MAX_PACKET_BYTES):
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
                      bridge_cost={}, spec_cache={})
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

    def attempt(self, ii, balance=False):
        """(solution, rounds) at ``ii`` whose devices, with their DWCs, FIFOs and bridges, fit; each
        round shrinks the node budget of the devices that were over by their overshoot. Where the
        cheapest partitions fill devices to the brim and the rounds do not settle, the balanced ones
        (more headroom for what the program does not see) are tried."""
        limits = self.limit.copy()
        for rounds in range(1, MAX_ROUNDS + 1):
            solution = self.solve(ii, limits, balance)
            if solution is None:
                break
            whole = np.array([self.whole(solution, d)[0] for d in range(self.devices)])
            over = whole - self.limit
            if (over <= 1e-9).all():
                return solution, rounds
            limits = limits - np.maximum(over, 0) - 1e-6 * (over > 1e-9)
        if balance or rounds == 1:      # already balanced, or not even the layers and bridges fit
            return None
        return self.attempt(ii, balance=True)

    def solve(self, ii, limits, balance=False):
        """The 0/1 program at one II (module docstring): the cheapest partition, or with ``balance`` the
        most balanced one; None if infeasible."""
        D, R = self.devices, len(RESOURCES)
        allowed = [[k for k, o in enumerate(options) if o.cycles <= ii] for options in self.choices]
        if any(not a for a in allowed):
            return None
        columns = []                    # ("w", g, k, d) | ("b", kind, position, key, d) | ("U",)
        where = {}
        for g, ks in enumerate(allowed):
            places = [self.fixed[g]] if g in self.fixed else [0] if g == self.group_of[0] else range(D)
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
        with _quiet_stdout():           # some HiGHS builds print a debug line per improving solution
            result = milp(objective, constraints=[LinearConstraint(A, lo, hi)], integrality=integrality,
                          bounds=Bounds(np.zeros(n), upper))
        if result.status != 0 or result.x is None:
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
        return design_estimate(_subgraph(graph, positions)) + bridges, bridges

    def result(self, solution, seconds):
        folding = self.foldings(solution)
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
                         sum(len(c) for c in self.choices), seconds)

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
        return (f"{head} at any folding once the Galapagos bridges, DWCs and FIFOs on each device are counted "
                f"(the layers alone need at least {describe_resources(least)})")


@contextmanager
def _quiet_stdout():
    """File descriptor 1 to /dev/null for the duration (HiGHS writes there from C++, past sys.stdout)."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):       # no real fd 1 (e.g. an embedding host): leave it
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _subgraph(graph, positions):
    """The graph of the nodes at ``positions`` (contiguous, in order): its input is the one stream
    entering them, its output the one leaving; None if ``positions`` is empty."""
    if not positions:
        return None
    nodes = [graph.nodes[k] for k in positions]
    first, last = positions[0], positions[-1]
    inside = {t for n in nodes for t in n.outputs}
    entering = [t for n in nodes for t in n.inputs if t not in inside]
    source = graph.input if first == 0 else entering[0]
    sink = graph.output if last == len(graph.nodes) - 1 else nodes[-1].outputs[0]
    tensors = {t: v for t, v in graph.tensors.items() if t in inside or t == source}
    return DataflowGraph([n.copy() for n in nodes], source, sink, tensors=tensors, model=graph.model).check()


def write_plan(part, out, *, board="pynq-z2"):
    """Write what `rtlgen partition` leaves in ``out``: ``partition.json`` (II, frames/s, what binds, per
    device its nodes, folding, estimate and Galapagos kernel ID, per cut its link load), ``folding.json``
    (the whole graph's folding, FINN's format) and the Galapagos cluster files ``cluster/logical.xml``
    and ``cluster/map.xml``: one Verilog kernel per used device (IDs from 1, in stream order) and the
    host's pre/post ops as a software kernel on a ``sw`` node. Returns the paths written."""
    out = Path(out)
    (out / "cluster").mkdir(parents=True, exist_ok=True)
    used = [d for d in part.devices if d.nodes]
    host = len(used) + 1
    kernels = [Kernel(id=k + 1, name=f"rtlgen_device{d.index}") for k, d in enumerate(used)] + [sw_kernel(host)]
    nodes = [Device(index=k + 1, type="hw", kernels=(k + 1,), board=board) for k in range(len(used))]
    nodes.append(Device(index=host, type="sw", kernels=(host,)))
    edges = [(host, 1)] + [(k, k + 1) for k in range(1, len(used))] + [(len(used), host)]
    check_cluster(kernels, nodes, edges)
    plan = {
        "ii": part.ii, "frames_per_second": part.frames_per_second, "bound_by": part.bound_by,
        "clock_mhz": part.clock_mhz, "link_gbps": part.link_gbps, "flit_width": part.flit_width,
        "max_packet_bytes": part.max_packet_bytes,
        "seconds": round(part.seconds, 2),
        "devices": [{"index": d.index, "kernel_id": k + 1, "nodes": list(d.nodes), "cycles": d.cycles,
                     "resources": {r: int(v) for r, v in d.resources.items()}, "binding": d.binding,
                     "utilization": round(d.utilization, 4)} for k, d in enumerate(used)],
        "cuts": [{"src": c.src, "dst": c.dst, "tensor": c.tensor, "src_device": c.src_device,
                  "dst_device": c.dst_device, "bits_per_frame": c.bits_per_frame, "link_ii": c.link_ii,
                  "link_utilization": round(c.link_utilization, 4)} for c in part.cuts],
        "host_links": {name.removeprefix("link "): ii for name, ii in part.host_links.items()},
    }
    paths = {"partition": out / out_files.PARTITION, "folding": out / out_files.FOLDING,
             "logical": out / "cluster" / "logical.xml", "map": out / "cluster" / "map.xml"}
    paths["partition"].write_text(json.dumps(plan, indent=2) + "\n")
    paths["folding"].write_text(json.dumps(part.folding, indent=2) + "\n")
    paths["logical"].write_text(logical_xml(kernels))
    paths["map"].write_text(map_xml(nodes))
    return paths
