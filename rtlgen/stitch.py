"""Stitching: a linear chain of HWNodes -> one accelerator with FINN's stitched-IP top-level ports.

The compiler calls, in this order::

    chain = insert_dwcs_and_fifos(nodes, size_fifos(nodes))
    verilog = to_verilog(chain)
    result = simulate_chain(verilog, input_words, output_count)

- :func:`insert_dwcs_and_fifos` is FINN's InsertDWC + InsertFIFO (with graph I/O FIFOs): a width converter
  wherever a producer's word width differs from its consumer's, and a FIFO on every stream.
- :class:`StitchedAccelerator` wires the chain behind FINN's ports ``ap_clk``, ``ap_rst_n`` (active low),
  ``s_axis_0_*`` and ``m_axis_0_*`` (``tdata`` byte-padded), reference/finn-conventions.md §2.
- :func:`size_fifos` is FINN's InsertAndSetFIFODepths (``largefifo_rtlsim``): simulate with deep FIFOs,
  read each FIFO's ``max_count``, round as FINN does (§11).
"""

import re
from math import prod

from amaranth.hdl import ClockDomain, ClockSignal, Module, ResetSignal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from memstream.packing import padded_width
from rtlgen.hwgraph import HWNode
from sim.compiled import network_engine
from sim.harness import FULL_RATE, simulate_streams

__all__ = ["DEFAULT_FIFO_DEPTH", "DEFAULT_TOP_NAME", "insert_dwcs_and_fifos", "StitchedAccelerator", "to_verilog",
           "finn_fifo_depth", "tensor_fifo_depths", "size_fifos", "strip_memory_init", "simulate_chain", "chain_report", "words_per_frame"]

DEFAULT_FIFO_DEPTH = 2
DEFAULT_TOP_NAME = "finn_design_wrapper"    # the top FINN simulates and drivers expect of a stitched IP
MAX_SIZING_DEPTH = 16384                # deepest FIFO size_fifos simulates with
DWC_OP, FIFO_OP = "StreamingDataWidthConverter", "StreamingFIFO"


# ---------------------------------------------------------------------------------------------- insertion

def output_dtype(spec):
    """The datatype of a spec's output elements (specs name it output_dtype, dtype or input_dtype)."""
    for attr in ("output_dtype", "dtype", "input_dtype"):
        dtype = getattr(spec, attr, None)
        if dtype is not None:
            return dtype
    raise ValueError(f"cannot tell the output datatype of {type(spec).__name__}")


def in_width(spec):
    """Input word width in bits (a FIFO has one ``width``)."""
    return spec.in_width if hasattr(spec, "in_width") else spec.width


def out_width(spec):
    return spec.out_width if hasattr(spec, "out_width") else spec.width


def exp_cycles(spec):
    """Cycles per frame in steady state; 0 for a FIFO (it never limits the rate)."""
    return getattr(spec, "exp_cycles", 0)


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


def insert_dwcs_and_fifos(nodes, fifo_depths=None):
    """A new chain: ``nodes`` with a StreamingDataWidthConverter wherever a producer's ``out_width``
    differs from its consumer's ``in_width``, and a StreamingFIFO on every stream: graph input, between
    each pair (after the DWC if any) and graph output.

    FIFOs are named ``StreamingFIFO_0``... from input to output, DWCs ``StreamingDataWidthConverter_0``...
    (indices already used by ``nodes`` are skipped). Depth: ``fifo_depths[name]`` if given, else 2.
    The FIFOs are never optional: a parallel-window SWG's ``i.ready`` is combinational, and the FIFOs
    are what keeps combinational paths from running through the whole chain.
    """
    nodes = list(nodes)
    if not nodes:
        raise ValueError("cannot stitch an empty chain")
    fifo_depths = dict(fifo_depths or {})
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise ValueError(f"node names must be unique, got {names}")
    for n in nodes:
        if n.op_type == FIFO_OP:
            raise ValueError(f"{n.name}: the chain already has FIFOs; insert_dwcs_and_fifos adds them")
    taken = set(names)
    fifo_name, dwc_name = _unique_namer(taken, FIFO_OP), _unique_namer(taken, DWC_OP)
    specs = [n.spec() for n in nodes]
    used = set()

    def fifo(width):
        name = fifo_name()
        used.add(name)
        depth = int(fifo_depths.get(name, DEFAULT_FIFO_DEPTH))
        return HWNode(name, FIFO_OP, {"width": int(width)}, {"depth": depth})

    chain = [fifo(in_width(specs[0]))]
    for k, (node, spec) in enumerate(zip(nodes, specs)):
        chain.append(node)
        if k + 1 == len(nodes):
            break
        consumer = specs[k + 1]
        if out_width(spec) != in_width(consumer):
            shape = spec.folded_output_shape
            flat = (*shape[:-2], shape[-2] * shape[-1]) if len(shape) > 1 else tuple(shape)
            chain.append(HWNode(dwc_name(), DWC_OP,
                                {"shape": flat, "in_width": out_width(spec), "out_width": in_width(consumer),
                                 "dtype": output_dtype(spec).name}))
        chain.append(fifo(in_width(consumer)))
    chain.append(fifo(out_width(specs[-1])))
    unknown = sorted(set(fifo_depths) - used)
    if unknown:
        raise ValueError(f"fifo_depths names FIFOs this chain does not have: {', '.join(unknown)}")
    return chain


# ---------------------------------------------------------------------------------------------- top level

class StitchedAccelerator(wiring.Component):
    """A chain of HWNodes (with its DWCs and FIFOs, see :func:`insert_dwcs_and_fifos`) behind FINN's
    stitched-IP ports.

    Members
    -------
    ap_clk, ap_rst_n : In(1)
        The clock and the synchronous active-low reset; they drive the ``sync`` domain of every layer.
    s_axis_0_tdata : In(padded_width(first in_width))
        Input words; bits above the first layer's ``in_width`` are ignored.
    s_axis_0_tvalid : In(1); s_axis_0_tready : Out(1)
    m_axis_0_tdata : Out(padded_width(last out_width))
        Output words; bits above the last layer's ``out_width`` are zero.
    m_axis_0_tvalid : Out(1); m_axis_0_tready : In(1)
    <fifo name>_max_count : Out(range(capacity + 1))
        Only with ``monitor``: the largest occupancy each FIFO has seen since reset.

    Every node is a submodule named after it. Nodes must have exactly the stream members ``i`` and
    ``o`` as inputs and outputs that matter (MVAUs with ``mem_mode="external"`` or AXI-Lite slaves
    need top-level ports this top does not have).
    """

    def __init__(self, chain, *, monitor=False):
        self._nodes = list(chain)
        if not self._nodes:
            raise ValueError("cannot stitch an empty chain")
        self._specs = [n.spec() for n in self._nodes]
        self._monitor = monitor
        for a, b, sa, sb in zip(self._nodes, self._nodes[1:], self._specs, self._specs[1:]):
            if out_width(sa) != in_width(sb):
                raise ValueError(f"{a.name} emits {out_width(sa)}-bit words but {b.name} takes {in_width(sb)}-bit "
                                 f"words; use insert_dwcs_and_fifos")
        members = {
            "ap_clk": In(1), "ap_rst_n": In(1),
            "s_axis_0_tdata": In(padded_width(in_width(self._specs[0]))),
            "s_axis_0_tvalid": In(1), "s_axis_0_tready": Out(1),
            "m_axis_0_tdata": Out(padded_width(out_width(self._specs[-1]))),
            "m_axis_0_tvalid": Out(1), "m_axis_0_tready": In(1),
        }
        if monitor:
            for node, spec in zip(self._nodes, self._specs):
                if node.op_type == FIFO_OP:
                    members[f"{node.name}_max_count"] = Out(range(spec.capacity + 1))
        super().__init__(members)

    @property
    def nodes(self):
        return list(self._nodes)

    @property
    def specs(self):
        return list(self._specs)

    @property
    def fifo_names(self):
        return [n.name for n in self._nodes if n.op_type == FIFO_OP]

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = ClockDomain("sync")
        m.d.comb += [ClockSignal("sync").eq(self.ap_clk), ResetSignal("sync").eq(~self.ap_rst_n)]

        layers = []
        for node, spec in zip(self._nodes, self._specs):
            layer = node.component(spec)
            _check_members(node, layer)
            m.submodules[node.name] = layer
            layers.append(layer)
            if self._monitor and node.op_type == FIFO_OP:
                m.d.comb += getattr(self, f"{node.name}_max_count").eq(layer.max_count)

        first, last = layers[0], layers[-1]
        m.d.comb += [
            first.i.payload.eq(self.s_axis_0_tdata[:in_width(self._specs[0])]),
            first.i.valid.eq(self.s_axis_0_tvalid),
            self.s_axis_0_tready.eq(first.i.ready),
            self.m_axis_0_tdata.eq(last.o.payload),         # zero-extended: the pad bits are 0
            self.m_axis_0_tvalid.eq(last.o.valid),
            last.o.ready.eq(self.m_axis_0_tready),
        ]
        for a, b in zip(layers, layers[1:]):
            wiring.connect(m, a.o, b.i)
        return m


def _check_members(node, layer):
    extra = [name for name, member in layer.signature.members.items()
             if name not in ("i", "o") and (member.is_signature or member.flow == In)]
    if extra:
        raise ValueError(f"{node.name} ({node.op_type}) has interface members {', '.join(extra)} besides i and o; "
                         f"the stitched top only wires single-stream layers (no external weights or AXI-Lite)")


def to_verilog(chain, *, name=DEFAULT_TOP_NAME, monitor=False):
    """Verilog text of the stitched chain (top module ``name``, FINN's port names).

    Each layer is converted on its own (module ``{name}.{node}``, as in a single conversion of
    :class:`StitchedAccelerator`), in parallel, and cached by its spec (:mod:`rtlgen.layer_verilog`):
    Amaranth spends seconds per big layer, and FIFO sizing and the final design share every layer but
    the FIFOs. The top only instantiates and wires them.
    """
    from amaranth.back import verilog
    from rtlgen.layer_verilog import _unused, layer_modules

    top = chain if isinstance(chain, StitchedAccelerator) else StitchedAccelerator(chain, monitor=monitor)
    _unused(top)                # it only lends its ports and checks to the top converted below
    modules = layer_modules(top.nodes, top.specs, prefix=name)
    text = verilog.convert(_InstanceTop(top, modules, name), name=name, emit_src=False)
    return text + "".join(module.text for module in modules)


class _InstanceTop(StitchedAccelerator):
    """:class:`StitchedAccelerator` with each layer an ``Instance`` of its separately converted module."""

    def __init__(self, top, modules, name):
        self._modules, self._name = modules, name
        super().__init__(top.nodes, monitor=top._monitor)

    def elaborate(self, platform):
        from amaranth.hdl import Instance, Signal

        m = Module()
        m.domains.sync = ClockDomain("sync")
        m.d.comb += [ClockSignal("sync").eq(self.ap_clk), ResetSignal("sync").eq(~self.ap_rst_n)]
        nets = []
        for node, module in zip(self._nodes, self._modules):
            ports = {p: Signal(width, name=f"{node.name}__{p}") for p, (_, width) in module.ports.items()
                     if p not in ("clk", "rst")}
            args = {f"{'i' if module.ports[p][0] == 'input' else 'o'}_{p}": sig for p, sig in ports.items()}
            if "clk" in module.ports:
                args["i_clk"] = ClockSignal("sync")
            if "rst" in module.ports:
                args["i_rst"] = ResetSignal("sync")
            m.submodules[node.name] = Instance(module.name, **args)
            nets.append(ports)
            if self._monitor and node.op_type == FIFO_OP:
                m.d.comb += getattr(self, f"{node.name}_max_count").eq(ports["max_count"])
        first, last = nets[0], nets[-1]
        m.d.comb += [
            first["i__payload"].eq(self.s_axis_0_tdata[:in_width(self._specs[0])]),
            first["i__valid"].eq(self.s_axis_0_tvalid),
            self.s_axis_0_tready.eq(first["i__ready"]),
            self.m_axis_0_tdata.eq(last["o__payload"]),         # zero-extended: the pad bits are 0
            self.m_axis_0_tvalid.eq(last["o__valid"]),
            last["o__ready"].eq(self.m_axis_0_tready),
        ]
        for a, b in zip(nets, nets[1:]):
            m.d.comb += [b["i__payload"].eq(a["o__payload"]), b["i__valid"].eq(a["o__valid"]),
                         a["o__ready"].eq(b["i__ready"])]
        return m


# ---------------------------------------------------------------------------------------------- simulation

def _frames_in(specs, n_words):
    shaped = [s for s in specs if hasattr(s, "folded_input_shape")]
    per_frame = words_per_frame(shaped[0].folded_input_shape) if shaped else 1
    return -(-n_words // per_frame)


def simulate_chain(chain_or_verilog, input_words, output_count, *, backpressure=FULL_RATE, simulator=None,
                   monitor=False, probes=(), toplevel=DEFAULT_TOP_NAME, max_cycles=None, drain=None, check=True,
                   compiled=False, blank_memories=False, waves=None):
    """Stream ``input_words`` into ``s_axis_0`` until ``output_count`` words leave ``m_axis_0``.

    ``chain_or_verilog`` is a chain of HWNodes (with DWCs and FIFOs), a :class:`StitchedAccelerator`
    or the Verilog text of :func:`to_verilog` (then ``toplevel`` must be its module name). With a chain,
    ``monitor`` adds the FIFOs' ``max_count`` ports and reads them (``result.probe(f"{fifo}_max_count")``)
    and the cycle limit is set from the chain's slowest layer. ``compiled`` runs it on the C++ Verilator
    bench of :mod:`sim.compiled` (whole networks, long runs). ``blank_memories`` drops the initial
    contents of every memory (weights, thresholds): for timing-only runs, where they cost build time
    and change nothing. Returns :class:`sim.harness.StreamResult`;
    words are read on the port ``"m_axis_0"``.
    """
    probes = list(probes)
    if isinstance(chain_or_verilog, str):
        design = chain_or_verilog
    else:
        top = chain_or_verilog if isinstance(chain_or_verilog, StitchedAccelerator) else \
            StitchedAccelerator(chain_or_verilog, monitor=monitor)
        if top._monitor:
            probes += [f"{name}_max_count" for name in top.fifo_names if f"{name}_max_count" not in probes]
        if max_cycles is None:
            specs = top.specs
            ii = max(exp_cycles(s) for s in specs)
            slack = 1.0 / min(backpressure.valid_prob, backpressure.ready_prob)
            latency = sum(exp_cycles(s) for s in specs)          # generous: every layer's frame time once
            frames = _frames_in(specs, len(input_words))
            max_cycles = int(2000 + slack * (4 * latency + 2 * frames * ii + 8 * (len(input_words) + output_count)))
        design = to_verilog(top, name=toplevel)
        if blank_memories:
            design = strip_memory_init(design)
    return simulate_streams(design, inputs={"s_axis_0": list(input_words)}, outputs={"m_axis_0": int(output_count)},
                            backpressure=backpressure, simulator=simulator, toplevel=toplevel, port_style="axis",
                            clock="ap_clk", reset="ap_rst_n", reset_active_high=False, probes=probes,
                            max_cycles=max_cycles, drain=drain, check=check, compiled=compiled, waves=waves)


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
    cycle it was high in the deep simulation, and the sized chain repeats its timing exactly.
    """
    n = int(max_count)
    if n <= 2:
        return 2
    if n <= 32:
        return 32
    return n


def tensor_fifo_depths(nodes, *, max_depth=MAX_SIZING_DEPTH):
    """The deep FIFOs :func:`size_fifos` starts from: each FIFO as deep as one frame of its tensor
    (words per frame of what its consumer takes; the graph output FIFO: of what the last layer emits),
    at most ``max_depth``, at least 2."""
    chain = insert_dwcs_and_fifos(nodes)
    deep = {}
    for k, node in enumerate(chain):
        if node.op_type != FIFO_OP:
            continue
        if k + 1 < len(chain):
            words = words_per_frame(chain[k + 1].spec().folded_input_shape)
        else:
            words = words_per_frame(chain[k - 1].spec().folded_output_shape)
        deep[node.name] = max(DEFAULT_FIFO_DEPTH, min(int(max_depth), words))
    return deep


def size_fifos(nodes, *, frames=3, simulator=None, max_depth=MAX_SIZING_DEPTH):
    """FIFO depths by simulation (FINN's InsertAndSetFIFODepths): ``{fifo name: depth}``.

    ``nodes`` is the chain without DWCs and FIFOs. Every FIFO is first made as deep as its tensor's
    words per frame (at most ``max_depth``); ``frames`` frames of zero words stream in at full rate
    (every layer's timing is data independent, so on Verilator the memories are left blank) and out at full rate;
    then each FIFO gets
    :func:`finn_fifo_depth` of the largest occupancy it saw (at most its deep depth). The sized chain
    then repeats the deep chain's timing cycle for cycle. The names match ``insert_dwcs_and_fifos(nodes, ...)``.

    As in FINN, the input arrives as fast as the chain takes it, so the FIFO in front of the slowest
    layer fills with the backlog up to its deep depth: in a linear chain that depth usually buys nothing
    (the slowest layer is never starved either way) and can be trimmed by hand.
    """
    nodes = list(nodes)
    deep = tensor_fifo_depths(nodes, max_depth=max_depth)
    chain = insert_dwcs_and_fifos(nodes, deep)
    in_words = words_per_frame(nodes[0].spec().folded_input_shape) * frames
    out_words = words_per_frame(nodes[-1].spec().folded_output_shape) * frames
    simulator, compiled = network_engine(simulator)
    result = simulate_chain(chain, [0] * in_words, out_words, simulator=simulator, monitor=True,
                            toplevel="fifo_sizing", compiled=compiled,
                            blank_memories=compiled)         # Verilator reads them as 0, Icarus as X
    # A FIFO that filled up (count = depth + 1) was holding back its producer in the deep run already;
    # its deep depth repeats that run exactly, so no FIFO grows beyond a frame of its tensor.
    return {name: finn_fifo_depth(min(result.probe(f"{name}_max_count"), depth)) for name, depth in deep.items()}


# ---------------------------------------------------------------------------------------------- report

def chain_report(chain):
    """One row per node (name, op_type, folding, widths, exp_cycles, resources) and a ``TOTAL`` row
    (sum of the estimates; ``exp_cycles`` is the largest, the chain's initiation interval per frame)."""
    rows = []
    totals = {}
    for node in chain:
        spec = node.spec()
        est = dict(spec.resource_estimate())
        for key, value in est.items():
            totals[key] = totals.get(key, 0) + value
        rows.append({"name": node.name, "op_type": node.op_type, "folding": dict(node.folding),
                     "in_width": in_width(spec), "out_width": out_width(spec),
                     "exp_cycles": exp_cycles(spec), "resources": est})
    rows.append({"name": "TOTAL", "op_type": "", "folding": {}, "in_width": rows[0]["in_width"],
                 "out_width": rows[-1]["out_width"], "exp_cycles": max(r["exp_cycles"] for r in rows),
                 "resources": totals})
    return rows

