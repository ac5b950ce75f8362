"""The nodes the compiler adds to a folded graph before stitching it: fan-outs, width converters and FIFOs.

- :func:`insert_duplicates` is FINN's InsertDuplicateStreams: the op with role ``"fanout"``
  (DuplicateStreams) where a tensor feeds several nodes.
- :func:`insert_dwcs_and_fifos` is FINN's InsertDWC + InsertFIFO (with graph I/O FIFOs): the op with role
  ``"dwc"`` wherever a producer's word width differs from its consumer's, and the op with role ``"fifo"``
  on every stream.

- :func:`stream_plan` is both, without building a graph: the inserted nodes a folded graph gets, in the
  order and with the names, widths and wiring the two passes give them, so the fold pass can cost them
  (:func:`rtlgen.passes.optimize.inserted_estimate`). The passes materialize the same plan (the same
  ``_fanouts`` and ``_dwcs_and_fifos``), so the estimate and the stitched design cannot disagree.

Which ops these are the registry says (:func:`rtlgen.ir.graph.op_with_role`); this module names none.
Every function takes a :class:`DataflowGraph`, or a list of nodes as a chain.
"""

from dataclasses import dataclass, replace

from layers.op import input_widths
from rtlgen.ir.graph import DataflowGraph, HWNode, as_graph, is_role, op_with_role

__all__ = ["DEFAULT_FIFO_DEPTH", "insert_duplicates", "insert_dwcs_and_fifos", "StreamPlan", "stream_plan"]

DEFAULT_FIFO_DEPTH = 2


def _unique_namer(taken, op_type):
    index = 0

    def fresh():
        nonlocal index
        while f"{op_type}_{index}" in taken:
            index += 1
        name = f"{op_type}_{index}"
        taken.add(name)
        return name
    return fresh


def insert_duplicates(graph):
    """A new graph where every tensor read by n > 1 nodes first goes through a fan-out (DuplicateStreams)
    with n outputs (FINN's InsertDuplicateStreams), one lane per word as its producer emits them."""
    graph = as_graph(graph).copy()
    graph.nodes = _fanouts(graph)
    return graph.check()


def _fanouts(graph):
    """The nodes of ``graph`` with a fan-out after each tensor read by several nodes (the fan-out right after
    its producer, or first for the graph input) and its readers rewired to the fan-out's outputs: new node
    objects where they change (``graph`` is not changed)."""
    fanout = op_with_role("fanout").op_type
    names = _unique_namer({n.name for n in graph.nodes}, fanout)
    nodes, rewired = list(graph.nodes), {}         # node name -> its new inputs
    for tensor, producer, consumers in graph.edges():
        if len(consumers) < 2:
            continue
        if producer is not None:
            node, port = producer
            spec = node.spec()
            shape, width = spec.folded_output_shape, spec.out_width
        else:
            spec = consumers[0][0].spec()
            shape, width = spec.folded_input_shapes[consumers[0][1]], spec.in_width
        lanes = shape[-1]
        name = names()
        dup = HWNode(name, fanout,
                     {"num_channels": shape[-2] * lanes, "num_output_streams": len(consumers),
                      "dtype": _dtype_of_width(spec, width // lanes, producer is None),
                      "num_input_vectors": tuple(shape[:-2]) or (1,)},
                     {"PE": lanes}, inputs=(tensor,),
                     outputs=tuple(f"{name}_out{k}" for k in range(len(consumers))))
        for k, (consumer, port) in enumerate(consumers):
            ins = list(rewired.get(consumer.name, consumer.inputs))
            ins[port] = dup.outputs[k]
            rewired[consumer.name] = tuple(ins)
        at = nodes.index(producer[0]) + 1 if producer is not None else 0
        nodes.insert(at, dup)
    return [replace(n, inputs=rewired[n.name]) if n.name in rewired else n for n in nodes]


def _dtype_of_width(spec, bits, at_input):
    dtype = spec.input_dtype if at_input else spec.output_dtype
    if dtype.bitwidth() != bits:
        raise ValueError(f"cannot tell the datatype of {bits}-bit lanes from {type(spec).__name__}")
    return dtype.name


def insert_dwcs_and_fifos(graph, fifo_depths=None):
    """A new graph: on every stream a FIFO, and a width converter (DWC) where the producer's word width
    differs from its consumer's: the FIFO in front of the consumer, or in front of the DWC where the DWC
    narrows the words (its wide side: see below); a FIFO on the graph input and the graph output too
    (FINN's InsertDWC + InsertFIFO with I/O FIFOs).

    ``graph`` is a :class:`DataflowGraph` where every tensor has one consumer (see
    :func:`insert_duplicates`), or a list of nodes taken as a chain. FIFOs are named ``StreamingFIFO_0``...
    and DWCs ``StreamingDataWidthConverter_0``... (their op types) in graph order, each node's inputs in
    port order, the output FIFO last (indices already used are skipped). Depth: ``fifo_depths[name]`` if
    given, else 2. The FIFOs are never optional: a parallel-window SWG's ``i.ready`` is combinational, and
    the FIFOs are what keeps combinational paths from running through the whole design.
    """
    graph = as_graph(graph).copy()
    graph.check()
    nodes = _dwcs_and_fifos(graph.nodes, graph.input, graph.output, fifo_depths)
    tensors = dict(graph.tensors)
    if graph.output in tensors:
        tensors[nodes[-1].outputs[0]] = tensors[graph.output]
    return graph.copy(nodes=nodes, output=nodes[-1].outputs[0], tensors=tensors).check()


def _dwcs_and_fifos(nodes, input, output, fifo_depths=None):
    """The nodes of the graph ``nodes`` (topological order, between tensors ``input`` and ``output``) with
    the DWCs and FIFOs of :func:`insert_dwcs_and_fifos`, the output FIFO last: new node objects where they
    change (the nodes given are not changed)."""
    graph = _Plain(list(nodes), input, output)
    fifo_op, dwc_op = op_with_role("fifo").op_type, op_with_role("dwc").op_type
    fifo_depths = dict(fifo_depths or {})
    for n in graph.nodes:
        if is_role(n, "fifo"):
            raise ValueError(f"{n.name}: the graph already has FIFOs; insert_dwcs_and_fifos adds them")
    for tensor, _, consumers in graph.edges():
        if len(consumers) > 1:
            raise ValueError(f"tensor {tensor} feeds {len(consumers)} nodes; run insert_duplicates first")
    taken = {n.name for n in graph.nodes}
    fifo_name, dwc_name = _unique_namer(taken, fifo_op), _unique_namer(taken, dwc_op)
    used = set()

    def fifo(tensor, width):
        name = fifo_name()
        used.add(name)
        depth = int(fifo_depths.get(name, DEFAULT_FIFO_DEPTH))
        return HWNode(name, fifo_op, {"width": int(width)}, {"depth": depth}, inputs=(tensor,),
                      outputs=(f"{name}_out",))

    nodes = []
    for node in graph.nodes:
        spec = node.spec()
        ins = list(node.inputs)
        for k, tensor in enumerate(node.inputs):
            want = input_widths(spec)[k]
            producer = graph.producer(tensor)
            have = producer[0].spec().out_width if producer is not None else want
            # A narrowing DWC gets its FIFO on the wide side: it takes a word only every few cycles, at
            # the consumer's pace, so behind it no FIFO could let the producer run ahead (a parallel-window
            # SWG must, across the rows that make no window).
            if have > want:
                nodes.append(f := fifo(tensor, have))
                tensor = f.outputs[0]
            if have != want:
                pspec = producer[0].spec()
                shape = pspec.folded_output_shape
                flat = (*shape[:-2], shape[-2] * shape[-1]) if len(shape) > 1 else tuple(shape)
                name = dwc_name()
                nodes.append(dwc := HWNode(name, dwc_op, {"shape": flat, "in_width": have, "out_width": want,
                                                          "dtype": pspec.output_dtype.name},
                                           inputs=(tensor,), outputs=(f"{name}_out",)))
                tensor = dwc.outputs[0]
            if have <= want:
                nodes.append(f := fifo(tensor, want))
                tensor = f.outputs[0]
            ins[k] = tensor
        nodes.append(replace(node, inputs=tuple(ins)) if tuple(ins) != node.inputs else node)
    last = graph.producer(graph.output)[0]
    out_fifo = fifo(graph.output, last.spec().out_width)
    nodes.append(out_fifo)
    unknown = sorted(set(fifo_depths) - used)
    if unknown:
        raise ValueError(f"fifo_depths names FIFOs this graph does not have: {', '.join(unknown)}")
    return nodes


@dataclass(frozen=True)
class _Plain:
    """Nodes in topological order between two tensors: what the planning needs of a graph (the wiring
    queries of :class:`DataflowGraph`), without copying, checking or carrying the model."""
    nodes: list
    input: str
    output: str

    producer = DataflowGraph.producer
    consumers = DataflowGraph.consumers
    edges = DataflowGraph.edges


@dataclass(frozen=True)
class StreamPlan(_Plain):
    """The design as stitched, as :func:`stream_plan` plans it: ``nodes`` the layers (rewired to read
    through the inserted nodes) and the inserted fan-outs, DWCs and FIFOs (FIFOs at the default depth),
    in the order :func:`insert_duplicates` then :func:`insert_dwcs_and_fifos` give them; ``inserted``
    the names of the inserted ones. Not a :class:`DataflowGraph`: only the wiring the timing model and
    the FIFO bounds read (:mod:`rtlgen.passes.size_fifos` takes either). The layers not rewired are the
    folded graph's own node objects: read only."""
    inserted: frozenset = frozenset()

    def inserted_nodes(self):
        return [n for n in self.nodes if n.name in self.inserted]


def stream_plan(graph):
    """The fan-outs, width converters and FIFOs (at depth 2) the insertion passes add to the folded
    ``graph``, as a :class:`StreamPlan`: per stream a fan-out where a tensor has several readers
    (DuplicateStreams: lanes, outputs, dtype), a DWC where widths differ (in/out width, dtype, shape) and
    its FIFOs (width). A pure function of ``graph``, by the same code the passes materialize."""
    graph = as_graph(graph)
    duplicated = _fanouts(graph)
    nodes = _dwcs_and_fifos(duplicated, graph.input, graph.output)
    layers = {n.name for n in graph.nodes}
    return StreamPlan(nodes, graph.input, nodes[-1].outputs[0],
                      frozenset(n.name for n in nodes if n.name not in layers))
