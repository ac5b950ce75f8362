"""The stitched top: a dataflow graph of HWNodes -> one accelerator with FINN's stitched-IP top-level ports.

The compiler calls, in this order::

    graph = rtlgen.passes.insert.insert_duplicates(graph)
    graph = rtlgen.passes.insert.insert_dwcs_and_fifos(graph, rtlgen.passes.size_fifos.analytic_fifo_depths(...))
    verilog = to_verilog(graph)

- :class:`StitchedAccelerator` wires the graph behind FINN's ports ``ap_clk``, ``ap_rst_n`` (active low),
  ``s_axis_0_*`` and ``m_axis_0_*`` (``tdata`` byte-padded), reference/finn-conventions.md §2.
- :func:`to_verilog` is its Verilog, each layer converted on its own and cached
  (:mod:`rtlgen.backend.layer_verilog`).

Simulating it: :mod:`rtlgen.backend.simulate`. Every function takes a :class:`DataflowGraph`, or a list of
nodes as a chain.
"""

from amaranth.hdl import ClockDomain, ClockSignal, Instance, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from layers.op import input_widths
from memstream.packing import padded_width
from rtlgen.backend.layer_verilog import convert, layer_modules, unused
from rtlgen.ir.graph import as_graph, input_port, output_port
from sim.runner import wrap_long_lines

__all__ = ["DEFAULT_TOP_NAME", "ap_clock_domain", "StitchedAccelerator", "to_verilog"]

DEFAULT_TOP_NAME = "finn_design_wrapper"    # the top FINN simulates and drivers expect of a stitched IP


# ---------------------------------------------------------------------------------------------- top level

def ap_clock_domain(m, top):
    """The ``sync`` domain of ``m`` driven by ``top``'s FINN-style ``ap_clk`` and active-low ``ap_rst_n``."""
    m.domains.sync = ClockDomain("sync")
    m.d.comb += [ClockSignal("sync").eq(top.ap_clk), ResetSignal("sync").eq(~top.ap_rst_n)]


class StitchedAccelerator(wiring.Component):
    """A dataflow graph (with its DWCs and FIFOs, see :func:`rtlgen.passes.insert.insert_dwcs_and_fifos`) behind FINN's
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
            (a, _), (b, port) = producer, consumers[0]
            if spec_of[a.name].out_width != input_widths(spec_of[b.name])[port]:
                raise ValueError(f"{a.name} emits {spec_of[a.name].out_width}-bit words but {b.name} takes "
                                 f"{input_widths(spec_of[b.name])[port]}-bit words; use insert_dwcs_and_fifos")
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
                if node.op.role == "fifo":
                    members[f"{node.name}_max_count"] = Out(range(spec.capacity + 1))
        super().__init__(members)

    @property
    def graph(self):
        return self._graph

    @property
    def monitor(self):
        """Whether the FIFOs' ``max_count`` are top-level ports."""
        return self._monitor

    @property
    def nodes(self):
        return list(self._nodes)

    @property
    def specs(self):
        return list(self._specs)

    @property
    def fifo_names(self):
        return [n.name for n in self._nodes if n.op.role == "fifo"]

    def _layers(self, m):
        """{node name: {member name ("i", "o0", "max_count"...): the layer's member}}, with each layer added
        to ``m`` as a submodule: a stream member is an interface with the member's signature."""
        ports = {}
        for node, spec in zip(self._nodes, self._specs):
            layer = node.component(spec)
            _check_members(node, layer)
            m.submodules[node.name] = layer
            ports[node.name] = {name: getattr(layer, name) for name in layer.signature.members}
        return ports

    def elaborate(self, platform):
        m = Module()
        ap_clock_domain(m, self)
        ports = self._layers(m)
        graph = self._graph
        for node in self._nodes:
            if self._monitor and node.op.role == "fifo":
                m.d.comb += getattr(self, f"{node.name}_max_count").eq(ports[node.name]["max_count"])
        for tensor, producer, consumers in graph.edges():
            if producer is None:
                node, port = consumers[0]
                sink = ports[node.name][input_port(node, port)]
                m.d.comb += [sink.payload.eq(self.s_axis_0_tdata[:self._in_width]),
                             sink.valid.eq(self.s_axis_0_tvalid),
                             self.s_axis_0_tready.eq(sink.ready)]
                continue
            node, port = producer
            source = ports[node.name][output_port(node, port)]
            if not consumers:            # the graph output
                m.d.comb += [self.m_axis_0_tdata.eq(source.payload),     # zero-extended pad bits
                             self.m_axis_0_tvalid.eq(source.valid),
                             source.ready.eq(self.m_axis_0_tready)]
                continue
            cnode, cport = consumers[0]
            _connect(m, source, ports[cnode.name][input_port(cnode, cport)])
        return m


def _connect(m, source, sink):
    """``wiring.connect(m, source, sink)`` for two stream members, its statements in the order the
    signature declares its members (payload, valid, ready). ``wiring.connect`` itself sorts them by name:
    the same hardware, but the ``assign`` lines of every stitched top in another order."""
    if sink.signature != source.signature.flip():
        raise RuntimeError(f"stitching: cannot connect {source.signature!r} to {sink.signature!r}")
    for name, member in source.signature.members.items():
        ours, theirs = getattr(source, name), getattr(sink, name)
        m.d.comb += theirs.eq(ours) if member.flow == Out else ours.eq(theirs)


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
    top = graph if isinstance(graph, StitchedAccelerator) else StitchedAccelerator(graph, monitor=monitor)
    unused(top)                # it only lends its ports and checks to the top converted below
    signatures = []
    for node, spec in zip(top.nodes, top.specs):
        layer = unused(node.component(spec))
        _check_members(node, layer)
        signatures.append(layer.signature)
    modules = layer_modules(top.nodes, top.specs, prefix=name)
    text = convert(_InstanceTop(top, modules, signatures), name)
    return wrap_long_lines(text + "".join(module.text for module in modules))


class _InstanceTop(StitchedAccelerator):
    """:class:`StitchedAccelerator` with each layer an ``Instance`` of its separately converted module."""

    def __init__(self, top, modules, signatures):
        self._modules, self._signatures = modules, signatures
        super().__init__(top.graph, monitor=top.monitor)

    def _layers(self, m):
        ports = {}
        for node, module, signature in zip(self._nodes, self._modules, self._signatures):
            signals = {p: Signal(width, name=f"{node.name}__{p}") for p, (_, width) in module.ports.items()
                       if p not in ("clk", "rst")}
            args = {f"{'i' if module.ports[p][0] == 'input' else 'o'}_{p}": sig for p, sig in signals.items()}
            if "clk" in module.ports:
                args["i_clk"] = ClockSignal("sync")
            if "rst" in module.ports:
                args["i_rst"] = ResetSignal("sync")
            m.submodules[node.name] = Instance(module.name, **args)
            # the instance's ports ("i__payload"...: the Verilog names of the layer's signature members)
            # regrouped as the members themselves, so the top wires them as it wires the layers
            ports[node.name] = {name: _Bound(member.signature, {f: signals[f"{name}__{f}"] for f in member.signature.members})
                                if member.is_signature else signals[name]
                                for name, member in signature.members.items()}
        return ports


class _Bound:
    """An interface with ``signature`` whose members are the given signals (an ``Instance``'s ports)."""

    def __init__(self, signature, members):
        self.signature = signature
        for name, value in members.items():
            setattr(self, name, value)
