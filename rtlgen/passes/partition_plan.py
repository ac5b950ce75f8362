"""What a partition is (:func:`rtlgen.passes.partition.partition` finds one): the devices with their nodes,
folding and estimates, the cuts with their link loads, and where a graph may be cut at all."""

from dataclasses import dataclass, field

from rtlgen.ir.graph import DataflowGraph
from rtlgen.fit import Budget
from rtlgen.passes.optimize import fold_groups

__all__ = ["PartitionError", "DevicePlan", "Cut", "Partition", "legal_cuts", "segment_graph"]


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
    solver_note: str = field(default="", compare=False)     # "" when every program was solved to optimality

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
        return [segment_graph(graph, [k for k, n in enumerate(graph.nodes) if device[n.name] == d.index])
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



def segment_graph(graph, positions):
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
