"""The dataflow graph the compiler works on: hardware nodes (FINN ops with their attributes) joined by
stream tensors.

A :class:`DataflowGraph` is a DAG: each :class:`HWNode` names the tensors it reads (``inputs``, in port
order: a one-input layer has the stream member ``i``, an n-input one ``i0`` .. ``i{n-1}``) and writes
(``outputs``: ``o`` or ``o0`` ..). Every tensor has one producer (a node, or the graph's input) and, once
:func:`rtlgen.passes.insert_duplicates` has run, one consumer (a node, or the graph's output). The
compiler's passes take a graph and return a new one (:meth:`DataflowGraph.copy`), never changing theirs.

A :class:`HWNode` keeps what the network fixed (``params``: shapes, datatypes, weights, thresholds) apart
from what folding chooses (``folding``: FINN's attribute names ``PE``, ``SIMD``, ``mem_mode``,
``ram_style``, ``resType``, ``parallel_window``), so the folding passes can rebuild its spec with other
choices. :data:`OPS` says, per FINN op type, which layer implements it (:class:`layers.op.Op`, declared in the
layer's own module).
"""

from dataclasses import dataclass, field, replace
from math import prod

import numpy as np
from qonnx.core.datatype import DataType

import galapagos
import layers
import swg
from layers.op import Op, discover

__all__ = ["OPS", "ops_with_role", "op_with_role", "INSERTED_ROLES", "HWNode", "StreamTensor", "DataflowGraph", "canonical_op_type", "MEM_MODE_ALIASES",
           "input_port", "output_port", "as_graph", "words_per_frame", "is_role"]

# Every op a module declares (``OP`` / ``OPS`` in :mod:`layers`, :mod:`swg` and :mod:`galapagos`, whose
# bridges the scale-out places): op type -> Op.
OPS = discover(layers, swg, galapagos)


def ops_with_role(*roles):
    """The ops whose ``role`` is one of ``roles`` (registry order)."""
    return tuple(op for op in OPS.values() if op.role in roles)


def op_with_role(role):
    """The one op with ``role`` (``"fifo"``, ``"dwc"``, ``"fanout"``): the compiler's passes insert it."""
    found = ops_with_role(role)
    if len(found) != 1:
        raise LookupError(f"expected one op with role {role!r}, the registry has {[op.op_type for op in found]}")
    return found[0]


# The ops the compiler's own passes insert (not the network's): FIFOs, width converters, fan-outs.
INSERTED_ROLES = ("fifo", "dwc", "fanout")

# Older FINN names of the same ops (v0.7 .. v0.9); the SpecializeLayers suffixes are handled below.
MEM_MODE_ALIASES = {"const": "internal_embedded", "decoupled": "internal_decoupled"}


def is_role(node, role):
    """Whether ``node``'s op has ``role`` (``"fifo"``, ``"dwc"``, ``"fanout"``, ``"join"``, ``"layer"``)."""
    return node.op.role == role


def canonical_op_type(op_type):
    """FINN op type of any generation (``MatrixVectorActivation``, ``MVAU_hls``...) -> ours (``MVAU``)."""
    for suffix in ("_hls", "_rtl"):
        if op_type.endswith(suffix) and op_type[:-len(suffix)] in OPS:
            return op_type[:-len(suffix)]
    old_names = {old: op.op_type for op in OPS.values() for old in op.old_names}     # plug-ins registered late too
    return old_names.get(op_type, op_type)


@dataclass
class HWNode:
    """One dataflow layer: FINN ``op_type``, unique ``name`` (FINN style, e.g. ``MVAU_0``), the spec
    fields the network fixes (``params``) and the FINN folding attributes (``folding``).

    ``sources`` names the ONNX nodes it implements (for reports and error messages).
    """
    name: str
    op_type: str
    params: dict
    folding: dict = field(default_factory=dict)
    sources: tuple = ()
    inputs: tuple = ()              # tensor names, in port order
    outputs: tuple = ()

    @property
    def op(self) -> Op:
        return OPS[self.op_type]

    def spec(self, **folding):
        """The spec with this node's folding, overridden by ``folding`` (FINN attribute names)."""
        chosen = {**self.folding, **folding}
        unknown = sorted(set(chosen) - set(self.op.folding))
        if unknown:
            raise ValueError(f"{self.name} ({self.op_type}) has no folding attribute {unknown[0]!r}; "
                             f"legal: {', '.join(self.op.folding) or 'none'}")
        kwargs = {self.op.folding[a]: MEM_MODE_ALIASES.get(v, v) if a == "mem_mode" else v
                  for a, v in chosen.items()}
        try:
            return self.op.spec(**self.params, **kwargs)
        except ValueError as exc:
            raise ValueError(f"{self.name}: {exc}") from None

    def component(self, spec=None):
        return self.op.component(spec or self.spec())

    def copy(self):
        """A node whose folding can change without touching this one (params are shared: never mutated)."""
        return replace(self, folding=dict(self.folding))


def input_port(node, k):
    """The stream member of ``node`` that reads its ``k``-th input: ``i``, or ``i{k}`` for n-input ops."""
    return "i" if len(node.inputs) <= 1 else f"i{k}"


def output_port(node, k):
    return "o" if len(node.outputs) <= 1 else f"o{k}"


@dataclass
class StreamTensor:
    """An integer tensor on a hardware stream (an edge of the graph): real value = scale * code.

    ``shape`` is the model's (logical) shape; 4D tensors stream NHWC. ``row_order`` (after a flatten of
    a feature map) maps stream position -> logical flat index. ``scale`` is a number, or (C,) per channel
    for an accelerator output that feeds host ops.
    """
    name: str
    dtype: DataType
    scale: object
    shape: tuple
    row_order: np.ndarray = None
    kind: str = "codes"             # "codes", or "indices" (LabelSelect output: ints, no scale)
    offset: int = 0                 # real = scale * (gain * code + offset): xnor popcounts give
    gain: int = 1                   # the bipolar dot product as 2 * popcount - MW
    rounding: bool = False          # the model computes this tensor as a float32 dot product with scales
                                    # that are not powers of two: equal to scale * code only up to rounding
    bias: np.ndarray = None         # per element: real = scale * code + bias. Only on an integer graph input
                                    # that float ops move before its first MatMul, which absorbs the bias
    fixed: str = None               # the graph input annotated FIXED<w,i>: the host rounds floats to this grid
    values: np.ndarray = None       # real = values[code - dtype.min()], not scale * code: a residual sum of
                                    # branches whose float scales have no common integer grid; only a
                                    # quantizer (Thresholding) may read it

    @property
    def spatial(self):
        return len(self.shape) == 4


@dataclass
class DataflowGraph:
    """Hardware nodes in topological order between the stream tensors ``input`` (``s_axis_0``) and
    ``output`` (``m_axis_0``).

    ``tensors`` describes the model tensors that travel on streams (name -> :class:`StreamTensor`);
    tensors the passes create between inserted nodes need no entry. ``model`` is the cleaned ONNX model
    the graph was lowered from, ``host_pre`` / ``host_post`` the names of its nodes that run on the host
    before and after the accelerator.
    """
    nodes: list
    input: str
    output: str
    tensors: dict = field(default_factory=dict)
    model: object = None
    host_pre: list = field(default_factory=list)
    host_post: list = field(default_factory=list)
    optimizer: object = None        # the folding optimizer's result (rtlgen.passes.optimize.OptimizerResult), if it chose

    @classmethod
    def chain(cls, nodes, **kwargs):
        """A graph of ``nodes`` one after the other (their own ``inputs``/``outputs`` are replaced)."""
        nodes = [replace(n, folding=dict(n.folding)) for n in nodes]
        if not nodes:
            raise ValueError("cannot build a graph of no nodes")
        tensor = "global_in"
        for k, node in enumerate(nodes):
            out = "global_out" if k == len(nodes) - 1 else f"{node.name}_out"
            node.inputs, node.outputs = (tensor,), (out,)
            tensor = out
        return cls(nodes, "global_in", "global_out", **kwargs)

    def copy(self, **changes):
        """A new graph with copies of the nodes (and ``changes`` to its fields)."""
        fields = dict(nodes=[n.copy() for n in self.nodes], input=self.input, output=self.output,
                      tensors=dict(self.tensors), model=self.model, host_pre=list(self.host_pre),
                      host_post=list(self.host_post), optimizer=self.optimizer)
        fields.update(changes)
        return DataflowGraph(**fields)

    def __iter__(self):
        """The nodes, in topological order."""
        return iter(self.nodes)

    def __len__(self):
        return len(self.nodes)

    def __getitem__(self, index):
        return self.nodes[index]

    def node(self, name):
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node {name!r} in the dataflow graph")

    def producer(self, tensor):
        """(node, output index) writing ``tensor``; None for the graph input."""
        for n in self.nodes:
            if tensor in n.outputs:
                return n, n.outputs.index(tensor)
        if tensor == self.input:
            return None
        raise KeyError(f"no node writes tensor {tensor!r}")

    def consumers(self, tensor):
        """[(node, input index)] reading ``tensor``, in graph order."""
        return [(n, k) for n in self.nodes for k, t in enumerate(n.inputs) if t == tensor]

    def predecessors(self, node):
        """The nodes feeding ``node``, in port order (graph input: None)."""
        return [(self.producer(t) or (None, 0))[0] for t in node.inputs]

    def edges(self):
        """Every tensor as (tensor, (producer node or None, port), [(consumer node, port)...]) in graph order."""
        names = [self.input] + [t for n in self.nodes for t in n.outputs]
        return [(t, self.producer(t), self.consumers(t)) for t in names]

    def check(self):
        """Raise ValueError unless every tensor has one producer, is read at least once (or is the
        output), and the nodes are in topological order with unique names."""
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"node names must be unique, got {names}")
        written = {self.input}
        for n in self.nodes:
            for t in n.inputs:
                if t not in written:
                    raise ValueError(f"{n.name} reads {t!r}, which no earlier node writes")
            for t in n.outputs:
                if t in written:
                    raise ValueError(f"tensor {t!r} is written twice ({n.name})")
                written.add(t)
        if self.output not in written:
            raise ValueError(f"no node writes the graph output {self.output!r}")
        for t in written:
            if t != self.output and not self.consumers(t):
                raise ValueError(f"tensor {t!r} is read by no node")
        return self


def as_graph(graph_or_nodes):
    """A :class:`DataflowGraph`; a list of nodes is taken as a chain."""
    if isinstance(graph_or_nodes, DataflowGraph):
        return graph_or_nodes
    nodes = list(graph_or_nodes)
    if not nodes:
        raise ValueError("cannot stitch an empty chain")
    return DataflowGraph.chain(nodes)


def words_per_frame(folded_shape):
    """Stream words of one frame of a folded tensor (all but the innermost, packed, dimension)."""
    return prod(folded_shape[:-1])
