"""Stitching: a dataflow graph of HWNodes -> one accelerator with FINN's stitched-IP top-level ports.

The compiler calls, in this order::

    graph = insert_duplicates(graph)
    graph = insert_dwcs_and_fifos(graph, size_fifos(graph))
    verilog = to_verilog(graph)
    result = simulate_chain(verilog, input_words, output_count)

- :func:`insert_duplicates` is FINN's InsertDuplicateStreams: a DuplicateStreams where a tensor fans out.
- :func:`insert_dwcs_and_fifos` is FINN's InsertDWC + InsertFIFO (with graph I/O FIFOs): a width converter
  wherever a producer's word width differs from its consumer's, and a FIFO on every stream.
- :class:`StitchedAccelerator` wires the graph behind FINN's ports ``ap_clk``, ``ap_rst_n`` (active low),
  ``s_axis_0_*`` and ``m_axis_0_*`` (``tdata`` byte-padded), reference/finn-conventions.md §2.
- :func:`size_fifos` is FINN's InsertAndSetFIFODepths (``largefifo_rtlsim``): simulate with deep FIFOs,
  read each FIFO's ``max_count``, round as FINN does (§11); never below the analytic bound of
  :func:`branch_fifo_bounds` on reconvergent paths (the short branch buffers the long one's lead).

Every function takes a :class:`DataflowGraph`, or a list of nodes as a chain.
"""

import re
from math import prod

from amaranth.hdl import ClockDomain, ClockSignal, Module, ResetSignal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from layers.requant import activation_summary
from memstream.packing import padded_width
from rtlgen.costmodel import estimate
from rtlgen.ir.graph import DataflowGraph, HWNode, input_port, output_port
from sim.compiled import network_engine
from sim.harness import FULL_RATE, cycle_budget, run_stitched
from sim.runner import SimulationError, wrap_long_lines

__all__ = ["DEFAULT_FIFO_DEPTH", "DEFAULT_TOP_NAME", "as_graph", "insert_duplicates", "insert_dwcs_and_fifos",
           "StitchedAccelerator", "to_verilog", "finn_fifo_depth", "branch_fifo_bounds", "check_fifo_depths",
           "tensor_fifo_depths", "size_fifos", "join_fifo_depths", "strip_memory_init", "simulate_chain",
           "graph_report", "chain_report", "words_per_frame"]

DEFAULT_FIFO_DEPTH = 2
DEFAULT_TOP_NAME = "finn_design_wrapper"    # the top FINN simulates and drivers expect of a stitched IP
MAX_SIZING_DEPTH = 16384                # deepest FIFO size_fifos simulates with
DWC_OP, FIFO_OP = "StreamingDataWidthConverter", "StreamingFIFO"
JOIN_OPS = ("AddStreams", "StreamingConcat")   # ops that take their inputs in lockstep
JOIN_SLACK = 8                          # words of pipeline registers a join bound leaves out


# ---------------------------------------------------------------------------------------------- insertion

def words_per_frame(folded_shape):
    """Stream words of one frame of a folded tensor (all but the innermost, packed, dimension)."""
    return prod(folded_shape[:-1])


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


def as_graph(graph_or_nodes):
    """A :class:`DataflowGraph`; a list of nodes is taken as a chain."""
    if isinstance(graph_or_nodes, DataflowGraph):
        return graph_or_nodes
    nodes = list(graph_or_nodes)
    if not nodes:
        raise ValueError("cannot stitch an empty chain")
    return DataflowGraph.chain(nodes)


def insert_duplicates(graph):
    """A new graph where every tensor read by n > 1 nodes first goes through a DuplicateStreams with n
    outputs (FINN's InsertDuplicateStreams), one lane per word as its producer emits them."""
    graph = as_graph(graph).copy()
    names = _unique_namer({n.name for n in graph.nodes}, "DuplicateStreams")
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
        dup = HWNode(name, "DuplicateStreams",
                     {"num_channels": shape[-2] * lanes, "num_output_streams": len(consumers),
                      "dtype": _dtype_of_width(spec, width // lanes, producer is None),
                      "num_input_vectors": tuple(shape[:-2]) or (1,)},
                     {"PE": lanes}, inputs=(tensor,),
                     outputs=tuple(f"{name}_out{k}" for k in range(len(consumers))))
        for k, (consumer, port) in enumerate(consumers):
            ins = list(consumer.inputs)
            ins[port] = dup.outputs[k]
            consumer.inputs = tuple(ins)
        at = graph.nodes.index(producer[0]) + 1 if producer is not None else 0
        graph.nodes.insert(at, dup)
    return graph.check()


def _dtype_of_width(spec, bits, at_input):
    dtype = spec.input_dtype if at_input else spec.output_dtype
    if dtype.bitwidth() != bits:
        raise ValueError(f"cannot tell the datatype of {bits}-bit lanes from {type(spec).__name__}")
    return dtype.name


def insert_dwcs_and_fifos(graph, fifo_depths=None):
    """A new graph: on every stream a StreamingFIFO, and a StreamingDataWidthConverter where the producer's
    word width differs from its consumer's: the FIFO in front of the consumer, or in front of the DWC
    where the DWC narrows the words (its wide side: see below); a FIFO on the graph input and the graph
    output too (FINN's InsertDWC + InsertFIFO with I/O FIFOs).

    ``graph`` is a :class:`DataflowGraph` where every tensor has one consumer (see
    :func:`insert_duplicates`), or a list of nodes taken as a chain. FIFOs are named ``StreamingFIFO_0``...
    and DWCs ``StreamingDataWidthConverter_0``... in graph order, each node's inputs in port order, the
    output FIFO last (indices already used are skipped). Depth: ``fifo_depths[name]`` if given, else 2.
    The FIFOs are never optional: a parallel-window SWG's ``i.ready`` is combinational, and the FIFOs
    are what keeps combinational paths from running through the whole design.
    """
    graph = as_graph(graph).copy()
    graph.check()
    fifo_depths = dict(fifo_depths or {})
    for n in graph.nodes:
        if n.op_type == FIFO_OP:
            raise ValueError(f"{n.name}: the graph already has FIFOs; insert_dwcs_and_fifos adds them")
    for tensor, _, consumers in graph.edges():
        if len(consumers) > 1:
            raise ValueError(f"tensor {tensor} feeds {len(consumers)} nodes; run insert_duplicates first")
    taken = {n.name for n in graph.nodes}
    fifo_name, dwc_name = _unique_namer(taken, FIFO_OP), _unique_namer(taken, DWC_OP)
    used = set()

    def fifo(tensor, width):
        name = fifo_name()
        used.add(name)
        depth = int(fifo_depths.get(name, DEFAULT_FIFO_DEPTH))
        return HWNode(name, FIFO_OP, {"width": int(width)}, {"depth": depth}, inputs=(tensor,),
                      outputs=(f"{name}_out",))

    nodes = []
    for node in graph.nodes:
        spec = node.spec()
        ins = list(node.inputs)
        for k, tensor in enumerate(node.inputs):
            want = spec.in_width
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
                nodes.append(dwc := HWNode(name, DWC_OP, {"shape": flat, "in_width": have, "out_width": want,
                                                          "dtype": pspec.output_dtype.name},
                                           inputs=(tensor,), outputs=(f"{name}_out",)))
                tensor = dwc.outputs[0]
            if have <= want:
                nodes.append(f := fifo(tensor, want))
                tensor = f.outputs[0]
            ins[k] = tensor
        node.inputs = tuple(ins)
        nodes.append(node)
    last = graph.producer(graph.output)[0]
    out_fifo = fifo(graph.output, last.spec().out_width)
    nodes.append(out_fifo)
    unknown = sorted(set(fifo_depths) - used)
    if unknown:
        raise ValueError(f"fifo_depths names FIFOs this graph does not have: {', '.join(unknown)}")
    tensors = dict(graph.tensors)
    if graph.output in tensors:
        tensors[out_fifo.outputs[0]] = tensors[graph.output]
    return graph.copy(nodes=nodes, output=out_fifo.outputs[0], tensors=tensors).check()


# ---------------------------------------------------------------------------------------------- top level

def ap_clock_domain(m, top):
    """The ``sync`` domain of ``m`` driven by ``top``'s FINN-style ``ap_clk`` and active-low ``ap_rst_n``."""
    m.domains.sync = ClockDomain("sync")
    m.d.comb += [ClockSignal("sync").eq(top.ap_clk), ResetSignal("sync").eq(~top.ap_rst_n)]


class StitchedAccelerator(wiring.Component):
    """A dataflow graph (with its DWCs and FIFOs, see :func:`insert_dwcs_and_fifos`) behind FINN's
    stitched-IP ports.

    Members
    -------
    ap_clk, ap_rst_n : In(1)
        The clock and the synchronous active-low reset; they drive the ``sync`` domain of every layer.
    s_axis_0_tdata : In(padded_width(input width))
        Input words; bits above the width of the layer reading the graph input are ignored.
    s_axis_0_tvalid : In(1); s_axis_0_tready : Out(1)
    m_axis_0_tdata : Out(padded_width(output width))
        Output words; bits above the last layer's ``out_width`` are zero.
    m_axis_0_tvalid : Out(1); m_axis_0_tready : In(1)
    <fifo name>_max_count : Out(range(capacity + 1))
        Only with ``monitor``: the largest occupancy each FIFO has seen since reset.

    Every node is a submodule named after it; each tensor connects its producer's output stream
    (``o`` / ``o{k}``) to its consumer's input stream (``i`` / ``i{k}``). Nodes must have no other
    inputs (MVAUs with ``mem_mode="external"`` or AXI-Lite slaves need top-level ports this top does not
    have), and every tensor exactly one consumer.
    """

    def __init__(self, graph, *, monitor=False):
        self._graph = as_graph(graph).check()
        self._nodes = list(self._graph.nodes)
        self._specs = [n.spec() for n in self._nodes]
        self._monitor = monitor
        spec_of = dict(zip((n.name for n in self._nodes), self._specs))
        for tensor, producer, consumers in self._graph.edges():
            if len(consumers) > 1:
                raise ValueError(f"tensor {tensor} feeds {len(consumers)} nodes; use insert_duplicates")
            if producer is None or not consumers:
                continue
            (a, _), (b, _) = producer, consumers[0]
            if spec_of[a.name].out_width != spec_of[b.name].in_width:
                raise ValueError(f"{a.name} emits {spec_of[a.name].out_width}-bit words but {b.name} takes "
                                 f"{spec_of[b.name].in_width}-bit words; use insert_dwcs_and_fifos")
        first = self._graph.consumers(self._graph.input)[0][0]
        last = self._graph.producer(self._graph.output)[0]
        self._in_width, self._out_width = spec_of[first.name].in_width, spec_of[last.name].out_width
        members = {
            "ap_clk": In(1), "ap_rst_n": In(1),
            "s_axis_0_tdata": In(padded_width(self._in_width)),
            "s_axis_0_tvalid": In(1), "s_axis_0_tready": Out(1),
            "m_axis_0_tdata": Out(padded_width(self._out_width)),
            "m_axis_0_tvalid": Out(1), "m_axis_0_tready": In(1),
        }
        if monitor:
            for node, spec in zip(self._nodes, self._specs):
                if node.op_type == FIFO_OP:
                    members[f"{node.name}_max_count"] = Out(range(spec.capacity + 1))
        super().__init__(members)

    @property
    def graph(self):
        return self._graph

    @property
    def nodes(self):
        return list(self._nodes)

    @property
    def specs(self):
        return list(self._specs)

    @property
    def fifo_names(self):
        return [n.name for n in self._nodes if n.op_type == FIFO_OP]

    def _layers(self, m):
        """{node name: {port signal name ("i__payload", "o0__valid", "max_count"...): signal}}, with each
        layer added to ``m`` as a submodule."""
        ports = {}
        for node, spec in zip(self._nodes, self._specs):
            layer = node.component(spec)
            _check_members(node, layer)
            m.submodules[node.name] = layer
            signals = {}
            for name, member in layer.signature.members.items():
                if member.is_signature:
                    for field in ("payload", "valid", "ready"):
                        signals[f"{name}__{field}"] = getattr(getattr(layer, name), field)
                else:
                    signals[name] = getattr(layer, name)
            ports[node.name] = signals
        return ports

    def elaborate(self, platform):
        m = Module()
        ap_clock_domain(m, self)
        ports = self._layers(m)
        graph = self._graph
        for node in self._nodes:
            if self._monitor and node.op_type == FIFO_OP:
                m.d.comb += getattr(self, f"{node.name}_max_count").eq(ports[node.name]["max_count"])
        for tensor, producer, consumers in graph.edges():
            if producer is None:
                node, port = consumers[0]
                sink = ports[node.name]
                ip = input_port(node, port)
                m.d.comb += [sink[f"{ip}__payload"].eq(self.s_axis_0_tdata[:self._in_width]),
                             sink[f"{ip}__valid"].eq(self.s_axis_0_tvalid),
                             self.s_axis_0_tready.eq(sink[f"{ip}__ready"])]
                continue
            node, port = producer
            source, op = ports[node.name], output_port(node, port)
            if not consumers:            # the graph output
                m.d.comb += [self.m_axis_0_tdata.eq(source[f"{op}__payload"]),     # zero-extended pad bits
                             self.m_axis_0_tvalid.eq(source[f"{op}__valid"]),
                             source[f"{op}__ready"].eq(self.m_axis_0_tready)]
                continue
            cnode, cport = consumers[0]
            sink, ip = ports[cnode.name], input_port(cnode, cport)
            m.d.comb += [sink[f"{ip}__payload"].eq(source[f"{op}__payload"]),
                         sink[f"{ip}__valid"].eq(source[f"{op}__valid"]),
                         source[f"{op}__ready"].eq(sink[f"{ip}__ready"])]
        return m


def _check_members(node, layer):
    ins = {input_port(node, k) for k in range(max(1, len(node.inputs)))}
    outs = {output_port(node, k) for k in range(max(1, len(node.outputs)))}
    extra = [name for name, member in layer.signature.members.items()
             if name not in ins | outs and (member.is_signature or member.flow == In)]
    if extra:
        raise ValueError(f"{node.name} ({node.op_type}) has interface members {', '.join(extra)} besides its "
                         f"streams {', '.join(sorted(ins | outs))}; the stitched top only wires stream layers "
                         f"(no external weights or AXI-Lite)")


def to_verilog(graph, *, name=DEFAULT_TOP_NAME, monitor=False):
    """Verilog text of the stitched graph (top module ``name``, FINN's port names).

    Each layer is converted on its own (module ``{name}.{node}``, as in a single conversion of
    :class:`StitchedAccelerator`), in parallel, and cached by its spec (:mod:`rtlgen.backend.layer_verilog`):
    Amaranth spends seconds per big layer, and FIFO sizing and the final design share every layer but
    the FIFOs. The top only instantiates and wires them.
    """
    from amaranth.back import verilog
    from rtlgen.backend.layer_verilog import layer_modules, unused

    top = graph if isinstance(graph, StitchedAccelerator) else StitchedAccelerator(graph, monitor=monitor)
    unused(top)                # it only lends its ports and checks to the top converted below
    for node, spec in zip(top.nodes, top.specs):
        _check_members(node, unused(node.component(spec)))
    modules = layer_modules(top.nodes, top.specs, prefix=name)
    text = verilog.convert(_InstanceTop(top, modules), name=name, emit_src=False)
    return wrap_long_lines(text + "".join(module.text for module in modules))


class _InstanceTop(StitchedAccelerator):
    """:class:`StitchedAccelerator` with each layer an ``Instance`` of its separately converted module."""

    def __init__(self, top, modules):
        self._modules = modules
        super().__init__(top.graph, monitor=top._monitor)

    def _layers(self, m):
        from amaranth.hdl import Instance, Signal

        ports = {}
        for node, module in zip(self._nodes, self._modules):
            signals = {p: Signal(width, name=f"{node.name}__{p}") for p, (_, width) in module.ports.items()
                       if p not in ("clk", "rst")}
            args = {f"{'i' if module.ports[p][0] == 'input' else 'o'}_{p}": sig for p, sig in signals.items()}
            if "clk" in module.ports:
                args["i_clk"] = ClockSignal("sync")
            if "rst" in module.ports:
                args["i_rst"] = ResetSignal("sync")
            m.submodules[node.name] = Instance(module.name, **args)
            ports[node.name] = signals
        return ports


# ---------------------------------------------------------------------------------------------- simulation

def tensor_words(graph):
    """{tensor: words per frame} for every stream of ``graph`` (FIFOs pass their neighbours' counts on)."""
    words = {}
    for node in graph.nodes:
        spec = node.spec()
        if node.op_type == FIFO_OP:
            continue
        if node.op_type == DWC_OP:
            words[node.inputs[0]], words[node.outputs[0]] = spec.in_words, spec.out_words
            continue
        for k, t in enumerate(node.inputs):
            words.setdefault(t, words_per_frame(spec.folded_input_shapes[k]))
        for t in node.outputs:
            words[t] = words_per_frame(spec.folded_output_shape)
    fifos = [n for n in graph.nodes if n.op_type == FIFO_OP]
    changed = True
    while changed:
        changed = False
        for f in fifos:
            a, b = f.inputs[0], f.outputs[0]
            if (a in words) != (b in words):
                words[a] = words[b] = words.get(a, words.get(b))
                changed = True
    return words


def _words_in(graph):
    return tensor_words(graph)[graph.input]


def _words_out(graph):
    return tensor_words(graph)[graph.output]


def simulate_chain(design, input_words, output_count, *, backpressure=FULL_RATE, simulator=None,
                   monitor=False, probes=(), toplevel=DEFAULT_TOP_NAME, max_cycles=None, drain=None, check=True,
                   compiled=False, blank_memories=False, waves=None):
    """Stream ``input_words`` into ``s_axis_0`` until ``output_count`` words leave ``m_axis_0``.

    ``design`` is a graph (or chain) of HWNodes with DWCs and FIFOs, a :class:`StitchedAccelerator` or
    the Verilog text of :func:`to_verilog` (then ``toplevel`` must be its module name). With a graph,
    ``monitor`` adds the FIFOs' ``max_count`` ports and reads them (``result.probe(f"{fifo}_max_count")``)
    and the cycle limit is :func:`sim.harness.cycle_budget` of its layers. ``compiled`` runs it on the
    C++ Verilator bench of :mod:`sim.compiled` (whole networks, long runs). ``blank_memories`` drops the
    initial contents of every memory (weights, thresholds): for timing-only runs, where they cost build
    time and change nothing. Returns :class:`sim.harness.StreamResult`; words are read on the port
    ``"m_axis_0"``.
    """
    probes = list(probes)
    if not isinstance(design, str):
        top = design if isinstance(design, StitchedAccelerator) else StitchedAccelerator(design, monitor=monitor)
        if top._monitor:
            probes += [f"{name}_max_count" for name in top.fifo_names if f"{name}_max_count" not in probes]
        if max_cycles is None:
            cycles = [s.exp_cycles for s in top.specs]
            frames = -(-len(input_words) // _words_in(top.graph))
            max_cycles = cycle_budget(cycles, max(cycles), frames, len(input_words) + output_count, backpressure)
        design = to_verilog(top, name=toplevel)
        if blank_memories:
            design = strip_memory_init(design)
    return run_stitched(design, input_words, output_count, backpressure=backpressure, simulator=simulator,
                        toplevel=toplevel, probes=probes, max_cycles=max_cycles, drain=drain, check=check,
                        compiled=compiled, waves=waves)


_MEMORY_INIT = re.compile(r"^[ \t]*initial begin\n(?:[ \t]*[\w$\\.]+\[\d+\] = [^;\n]+;\n)+[ \t]*end\n", re.M)


def strip_memory_init(verilog):
    """``verilog`` without the ``initial`` blocks that load memory contents (``mem[3] = 8'h5a;`` lines,
    as Yosys writes Amaranth memories); registers keep their reset values."""
    return _MEMORY_INIT.sub("", verilog)


# ---------------------------------------------------------------------------------------------- FIFO sizing

def finn_fifo_depth(max_count):
    """FINN's rounding of an observed occupancy: <= 2 -> 2, <= 32 -> 32 (one SRL), else exact.

    Our FIFO holds ``depth + 1`` words (storage plus output register) but its ``i.ready`` drops when
    the storage holds ``depth``. An occupancy of ``n >= 2`` always means ``n - 1`` words in storage and
    a full output register, and reaching it took a write while storage held ``n - 2``... up to ``n - 1``
    with a simultaneous read; so ``depth = n`` (not ``n - 1``) is what keeps ``i.ready`` high in every
    cycle it was high in the deep simulation, and the sized design repeats its timing exactly.
    """
    n = int(max_count)
    if n <= 2:
        return 2
    if n <= 32:
        return 32
    return n


def branch_fifo_bounds(graph):
    """{FIFO name: words} the FIFO in front of each input of a join (AddStreams, StreamingConcat) must
    hold at least, or the design deadlocks: an analytic lower bound from the layers' lead.

    For every tensor, ``lead`` counts the graph-input words that must enter before its first word can
    appear: a layer taking ``L`` input words (``spec.lead_words``) before its first output adds
    ``(L - 1)`` of its input words, each worth ``ratio`` graph-input words (input words per frame over
    that tensor's words per frame). A join takes its inputs in lockstep, so while its slowest input's
    first word is on its way, each faster input's words pile up: ``(lead(slow) - lead(fast)) /
    ratio(fast)`` words, all of which sit in the FIFO in front of the join when the paths have no other
    buffering (pipeline registers of a few words are left out, so this is a lower bound). ``graph`` has
    its FIFOs (:func:`insert_dwcs_and_fifos`).
    """
    words = tensor_words(graph)
    frame_in = words[graph.input]
    lead = {graph.input: 0.0}
    bounds = {}
    for node in graph.nodes:
        spec = node.spec()
        ratios = [frame_in / words[t] for t in node.inputs]
        leads = [lead[t] for t in node.inputs]
        if node.op_type in JOIN_OPS:
            slow = max(leads)
            for t, l, r in zip(node.inputs, leads, ratios):
                fifo = graph.producer(t)[0]
                if fifo.op_type == FIFO_OP:
                    bounds[fifo.name] = max(bounds.get(fifo.name, 0), int((slow - l) / r))
        start = max(l + (spec.lead_words - 1) * r for l, r in zip(leads, ratios))
        for t in node.outputs:
            lead[t] = start
    return bounds


def check_fifo_depths(graph):
    """Raise ValueError naming the first FIFO in front of a join shallower than :func:`branch_fifo_bounds`."""
    for name, bound in branch_fifo_bounds(graph).items():
        depth = graph.node(name).spec().depth
        if depth < bound:
            raise ValueError(f"{name} (depth {depth}) in front of a join holds fewer words than the other "
                             f"branch's lead ({bound} words): the design would deadlock")
    return graph


def tensor_fifo_depths(graph, *, max_depth=MAX_SIZING_DEPTH):
    """The deep FIFOs :func:`size_fifos` starts from: each FIFO as deep as one frame of its tensor
    (words per frame of what its consumer takes; the graph output FIFO: of what the last layer emits),
    or its join bound if larger, at most ``max_depth``, at least 2. ``graph`` has no FIFOs yet."""
    fifoed = insert_dwcs_and_fifos(graph)
    bounds, words = branch_fifo_bounds(fifoed), tensor_words(fifoed)
    deep = {}
    for node in fifoed.nodes:
        if node.op_type == FIFO_OP:
            frame = words[node.inputs[0]]
            deep[node.name] = max(DEFAULT_FIFO_DEPTH, min(int(max_depth), max(frame, 2 * bounds.get(node.name, 0))))
    return deep


def size_fifos(graph, *, frames=3, simulator=None, max_depth=MAX_SIZING_DEPTH):
    """FIFO depths by simulation (FINN's InsertAndSetFIFODepths): ``{fifo name: depth}``.

    ``graph`` (or a chain) has no DWCs and FIFOs yet. Every FIFO is first made deep (see
    :func:`tensor_fifo_depths`); ``frames`` frames of zero words stream in at full rate (every layer's
    timing is data independent, so on Verilator the memories are left blank) and out at full rate;
    then each FIFO gets :func:`finn_fifo_depth` of the largest occupancy it saw (at most its deep
    depth), and never less than its join bound (:func:`branch_fifo_bounds`). The sized design then
    repeats the deep design's timing cycle for cycle. The names match ``insert_dwcs_and_fifos(graph)``.
    A deep design that still deadlocks is an error naming the joins' FIFOs.

    As in FINN, the input arrives as fast as the design takes it, so the FIFO in front of the slowest
    layer fills with the backlog up to its deep depth: in a linear chain that depth usually buys nothing
    (the slowest layer is never starved either way) and can be trimmed by hand.
    """
    graph = as_graph(graph)
    deep = tensor_fifo_depths(graph, max_depth=max_depth)
    sized = insert_dwcs_and_fifos(graph, deep)
    in_words, out_words = _words_in(sized) * frames, _words_out(sized) * frames
    simulator, compiled = network_engine(simulator)
    try:
        result = simulate_chain(sized, [0] * in_words, out_words, simulator=simulator, monitor=True,
                                toplevel="fifo_sizing", compiled=compiled,
                                blank_memories=compiled)         # Verilator reads them as 0, Icarus as X
    except SimulationError as exc:
        raise ValueError(f"FIFO sizing: the design with deep FIFOs ({', '.join(f'{k}={v}' for k, v in deep.items() if v > 2)}) "
                         f"does not finish ({str(exc).splitlines()[0]})") from None
    bounds = branch_fifo_bounds(sized)
    # A FIFO that filled up (count = depth + 1) was holding back its producer in the deep run already;
    # its deep depth repeats that run exactly, so no FIFO grows beyond its deep depth.
    return {name: max(finn_fifo_depth(min(result.probe(f"{name}_max_count"), depth)), bounds.get(name, 0))
            for name, depth in deep.items()}


def join_fifo_depths(graph):
    """FIFO depths without simulation: 2, and in front of joins their bound (:func:`branch_fifo_bounds`)
    with FINN's rounding and room for the layers' pipeline registers (not proven by simulation)."""
    graph = as_graph(graph)
    bounds = branch_fifo_bounds(insert_dwcs_and_fifos(graph))
    return {name: finn_fifo_depth(bound + JOIN_SLACK) for name, bound in bounds.items() if bound > 0}


# ---------------------------------------------------------------------------------------------- report

def graph_report(graph):
    """One row per node (name, op_type, inputs, outputs, folding, widths, exp_cycles, resources) and a
    ``TOTAL`` row (sum of the estimates; ``exp_cycles`` is the largest, the design's initiation interval
    per frame)."""
    graph = as_graph(graph)
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


chain_report = graph_report
