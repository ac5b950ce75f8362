"""A partitioned network built and simulated: one Galapagos kernel per device, and the cluster in one run.

What `rtlgen partition` builds from a :class:`rtlgen.passes.partition.Partition` (after the plan):

- **Per device** ``d`` (kernel ID ``k = d + 1``; the host's software kernel is ``H = devices + 1``), in
  ``OUT/device{d}/``: its subgraph with the partition's folding, stitched as a compile stitches a
  whole network (DuplicateStreams, DWCs, FIFOs sized by simulation), top ``rtlgen_device{d}_accel``;
  around it the kernel top ``rtlgen_device{d}`` (:class:`DeviceKernel`): a
  :class:`galapagos.FromGalapagos` with ID ``k`` in front (packets for another ID are dropped) and a
  :class:`galapagos.ToGalapagos` behind (TDEST ``k + 1``, or ``H`` for the last device; TID ``k``),
  one frame in packets of at most ``max_packet_bytes``, the Galapagos AXI-Stream ports ``s_axis_0_*`` / ``m_axis_0_*`` (tdata, tkeep,
  tlast, tdest, tid, tvalid, tready) that ``cluster/logical.xml`` names. Files: ``rtlgen_device{d}.v``
  (kernel and accelerator), ``report.json`` (nodes, layers with cycles and estimates, bridges).
- **For the whole network**: ``io.json`` and the host ONNX models (as a compile writes them: the host
  encodes model inputs into the first device's words and decodes the last device's).

The multi-device simulation (:func:`simulate`) puts everything into one Verilog top,
:class:`ClusterSim`, with FINN's stream ports so that the compiled Verilator bench runs it like a single
design: the host's ToGalapagos (TID ``H``, TDEST 1) -> link -> device 0 -> link -> ... -> device
``m - 1`` -> link -> the host's FromGalapagos (ID ``H``). Every link is a :class:`galapagos.link.LinkModel`
(wire rate from the partition's ``link_gbps`` at its ``clock_mhz``, Ethernet header time per packet, a
latency in cycles). Its probes give each link's measured packet interval (the sending device's
measured II), its utilisation and the receive buffer it needed.
"""

import tempfile
from dataclasses import dataclass
from pathlib import Path

import onnx
from amaranth.hdl import ClockSignal, Instance, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from galapagos.bridges import flit_layout, max_packet_flits
from galapagos.from_galapagos import FromGalapagos, FromGalapagosSpec
from galapagos.to_galapagos import ToGalapagos, ToGalapagosSpec
from boards.yosys import XC7Z020, YosysError, check_fits, synthesize
from galapagos.cluster import Device, Kernel, check_cluster, logical_xml, map_xml, sw_kernel
from galapagos.link import DEFAULT_LATENCY, PROBES, LinkModel, LinkSpec
from memstream.packing import padded_width
from rtlgen.analyses.timing import tensor_words
from rtlgen.backend import stitch
from rtlgen.backend.compile import DEVICE
from rtlgen.backend.jobs import completed
from rtlgen.backend.layer_verilog import convert
from rtlgen.backend.simulate import simulate_chain
from rtlgen.costmodel import estimate
from rtlgen.errors import BuildError
from rtlgen.fit import BRAM18_PER_BRAM36
from rtlgen.ir.model_hw import model_hw
from rtlgen.flows import FRONT, Runner
from rtlgen.options import CompileOptions
from rtlgen.passes.to_hw import stream_io
from sim.outdir import OutDir
from sim.harness import FULL_RATE, cycle_budget

__all__ = ["DeviceKernel", "write_plan", "ClusterSim", "build_devices", "write_devices", "cluster_verilog", "simulate",
           "ClusterRun", "CLUSTER_TOP", "device_name", "load_cluster"]

CLUSTER_TOP = "rtlgen_cluster"
FLIT_FIELDS = ("tdata", "tkeep", "tlast", "tdest", "tid")


def device_name(index):
    return f"rtlgen_device{index}"


def _flit_members(prefix, flit_width, flow_in):
    """The Galapagos AXI-Stream ports ``{prefix}_tdata`` ... ``{prefix}_tready`` of a kernel."""
    fields = flit_layout(flit_width).members
    data, back = (In, Out) if flow_in else (Out, In)
    members = {f"{prefix}_{name}": data(shape) for name, shape in fields.items()}
    members[f"{prefix}_tvalid"] = data(1)
    members[f"{prefix}_tready"] = back(1)
    return members


class DeviceKernel(wiring.Component):
    """One device's Galapagos kernel: flits in -> :class:`FromGalapagos` -> the device's stitched
    accelerator (an instance of module ``accel``, FINN's stream ports) -> :class:`ToGalapagos` -> flits out.

    Members: ``ap_clk``, ``ap_rst_n``; ``s_axis_0_{tdata,tkeep,tlast,tdest,tid,tvalid}`` in and
    ``s_axis_0_tready`` out; ``m_axis_0_*`` the other way round. The accelerator's input word is the
    FromGalapagos word zero-extended to its padded port width; its output word's pad bits are dropped.
    """

    def __init__(self, accel, receive, send):
        assert receive.flit_width == send.flit_width
        self._accel, self._receive, self._send = accel, receive, send
        super().__init__({"ap_clk": In(1), "ap_rst_n": In(1),
                          **_flit_members("s_axis_0", receive.flit_width, True),
                          **_flit_members("m_axis_0", send.flit_width, False)})

    def elaborate(self, platform):
        m = Module()
        stitch.ap_clock_domain(m, self)
        m.submodules.from_galapagos = receive = FromGalapagos(self._receive)
        m.submodules.to_galapagos = send = ToGalapagos(self._send)
        _flits_from_ports(m, self, "s_axis_0", receive.i)
        _flits_to_ports(m, send.o, self, "m_axis_0")
        in_width, out_width = padded_width(self._receive.word_width), padded_width(self._send.word_width)
        s_data, m_data = Signal(in_width), Signal(out_width)
        s_ready, m_valid = Signal(), Signal()
        m.d.comb += [s_data.eq(receive.o.payload), send.i.payload.eq(m_data[:self._send.word_width]),
                     receive.o.ready.eq(s_ready), send.i.valid.eq(m_valid)]
        m.submodules.accel = Instance(self._accel, i_ap_clk=ClockSignal("sync"), i_ap_rst_n=self.ap_rst_n,
                                      i_s_axis_0_tdata=s_data, i_s_axis_0_tvalid=receive.o.valid,
                                      o_s_axis_0_tready=s_ready, o_m_axis_0_tdata=m_data,
                                      o_m_axis_0_tvalid=m_valid, i_m_axis_0_tready=send.i.ready)
        return m


def _flits_from_ports(m, owner, prefix, sink):
    """Drive the flit stream ``sink`` from ``owner``'s ``{prefix}_*`` ports."""
    for name in FLIT_FIELDS:
        m.d.comb += getattr(sink.payload, name).eq(getattr(owner, f"{prefix}_{name}"))
    m.d.comb += [sink.valid.eq(getattr(owner, f"{prefix}_tvalid")), getattr(owner, f"{prefix}_tready").eq(sink.ready)]


def _flits_to_ports(m, source, owner, prefix):
    for name in FLIT_FIELDS:
        m.d.comb += getattr(owner, f"{prefix}_{name}").eq(getattr(source.payload, name))
    m.d.comb += [getattr(owner, f"{prefix}_tvalid").eq(source.valid), source.ready.eq(getattr(owner, f"{prefix}_tready"))]


class ClusterSim(wiring.Component):
    """The cluster for simulation (module docstring): FINN's stream ports ``s_axis_0_*`` / ``m_axis_0_*``
    (host words), ``ap_clk``/``ap_rst_n``, and per link ``j`` (link 0 from the host, link ``m`` to it) the
    probes ``link{j}_flits`` ... ``link{j}_max_level`` of :class:`LinkModel`. ``kernels``: the device
    kernel module names in stream order; ``host_send``/``host_receive``: the host's bridges."""

    def __init__(self, kernels, host_send, host_receive, links):
        assert len(links) == len(kernels) + 1
        self._kernels, self._send, self._receive, self._links = kernels, host_send, host_receive, links
        members = {"ap_clk": In(1), "ap_rst_n": In(1),
                   "s_axis_0_tdata": In(padded_width(host_send.word_width)), "s_axis_0_tvalid": In(1),
                   "s_axis_0_tready": Out(1),
                   "m_axis_0_tdata": Out(padded_width(host_receive.word_width)), "m_axis_0_tvalid": Out(1),
                   "m_axis_0_tready": In(1)}
        for j, link in enumerate(links):
            for name in PROBES:
                members[f"link{j}_{name}"] = Out(32 if name != "max_level" else range(link.depth + 1))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        stitch.ap_clock_domain(m, self)
        m.submodules.host_send = send = ToGalapagos(self._send)
        m.submodules.host_receive = receive = FromGalapagos(self._receive)
        m.d.comb += [send.i.payload.eq(self.s_axis_0_tdata[:self._send.word_width]),
                     send.i.valid.eq(self.s_axis_0_tvalid), self.s_axis_0_tready.eq(send.i.ready),
                     self.m_axis_0_tdata.eq(receive.o.payload), self.m_axis_0_tvalid.eq(receive.o.valid),
                     receive.o.ready.eq(self.m_axis_0_tready)]
        links = []
        for j, spec in enumerate(self._links):
            m.submodules[f"link{j}"] = link = LinkModel(spec)
            for name in PROBES:
                m.d.comb += getattr(self, f"link{j}_{name}").eq(getattr(link, name))
            links.append(link)
        wiring.connect(m, send.o, links[0].i)
        wiring.connect(m, links[-1].o, receive.i)
        for k, kernel in enumerate(self._kernels):
            fw = self._send.flit_width
            ports = {name: Signal(shape, name=f"k{k}_m_{name}") for name, shape in flit_layout(fw).members.items()}
            m_valid, s_ready = Signal(name=f"k{k}_m_tvalid"), Signal(name=f"k{k}_s_tready")
            incoming, outgoing = links[k].o, links[k + 1].i
            args = {"i_ap_clk": ClockSignal("sync"), "i_ap_rst_n": self.ap_rst_n,
                    "i_s_axis_0_tvalid": incoming.valid, "o_s_axis_0_tready": s_ready,
                    "o_m_axis_0_tvalid": m_valid, "i_m_axis_0_tready": outgoing.ready}
            for name in FLIT_FIELDS:
                args[f"i_s_axis_0_{name}"] = getattr(incoming.payload, name)
                args[f"o_m_axis_0_{name}"] = ports[name]
                m.d.comb += getattr(outgoing.payload, name).eq(ports[name])
            m.d.comb += [incoming.ready.eq(s_ready), outgoing.valid.eq(m_valid)]
            m.submodules[f"device{k}"] = Instance(kernel, **args)
        return m


# ---------------------------------------------------------------------------------------------- build

@dataclass
class DeviceBuild:
    """One device of a built partition."""
    index: int
    kernel_id: int
    name: str                       # the kernel's top module
    graph: object                   # its stitched subgraph
    receive: FromGalapagosSpec
    send: ToGalapagosSpec
    verilog: str                    # the kernel top and its accelerator


def build_devices(model_path, part, *, options=None, say=lambda line: None):
    """Per used device of ``part`` (a :class:`rtlgen.passes.partition.Partition` of ``model_path``'s lowered
    graph): its stitched subgraph and kernel Verilog; and the whole network's :class:`sim.stream_io.StreamIO`.
    Returns ``(devices, io)``."""
    options = options or CompileOptions(clock_mhz=part.clock_mhz)
    runner = Runner()
    lowered = runner.run(FRONT, model_path, options)
    model = runner.results["load"]
    names = [n.name for n in lowered.nodes]
    planned = [name for d in part.devices for name in d.nodes]
    if sorted(names) != sorted(planned):
        raise ValueError(f"the partition's nodes {planned} are not the model's layers {names}")
    used = [(plan, sub) for plan, sub in zip(part.devices, part.split(lowered)) if sub is not None]
    host = len(used) + 1
    packet_flits = max_packet_flits(part.flit_width, part.max_packet_bytes)
    stitched = []
    for plan, sub in used:
        say(f"device {plan.index}: stitching {', '.join(plan.nodes)}")
        stitched.append(runner.run(DEVICE, sub, options, stop="insert_fifos"))
    devices = []
    for k, ((plan, _), graph) in enumerate(zip(used, stitched)):
        first = graph.consumers(graph.input)[0][0].spec()
        last = graph.producer(graph.output)[0].spec()
        words = tensor_words(graph)
        in_words, out_words = words[graph.input], words[graph.output]
        receive = FromGalapagosSpec(first.in_width, part.flit_width, in_words, kernel_id=k + 1,
                                    max_packet_flits=packet_flits)
        send = ToGalapagosSpec(last.out_width, part.flit_width, out_words, dest=k + 2 if k + 1 < len(used) else host,
                               source_id=k + 1, max_packet_flits=packet_flits)
        name = device_name(plan.index)
        accel = stitch.to_verilog(graph, name=f"{name}_accel")
        kernel = convert(DeviceKernel(f"{name}_accel", receive, send), name)
        devices.append(DeviceBuild(plan.index, k + 1, name, graph, receive, send, kernel + accel))
    io = stream_io(model, stitched[0].copy(host_pre=lowered.host_pre, host_post=lowered.host_post),
                    last=stitched[-1])
    return devices, io


def _geometry(spec):
    return {"word_width": spec.word_width, "words_per_frame": spec.words_per_frame,
            "flits_per_frame": spec.flits_per_frame, "max_packet_flits": spec.max_packet_flits,
            "packet_sizes": spec.packet_sizes()}


def write_devices(devices, io, out):
    """``OUT/device{d}/`` per device (kernel Verilog, report.json, and ``model_hw.onnx``: its nodes with the
    attributes and memory images they were built with, for `rtlgen prove`) and the network's ``io.json``
    with the host models; returns the kernel Verilog paths."""
    out = OutDir(out)
    out.write_io(io)
    paths = []
    for device in devices:
        where = out.device(device.index)
        path = where.kernel(device.name)
        where.write_text(path, device.verilog)
        onnx.save(model_hw(device.graph), str(where.model_hw))
        layers = [{"name": n.name, "op_type": n.op_type, "in_width": n.spec().in_width,
                   "out_width": n.spec().out_width, "exp_cycles": n.spec().exp_cycles,
                   "estimate": dict(estimate(n.spec()))} for n in device.graph.nodes]
        bridges = {"receive": dict(estimate(device.receive)), "send": dict(estimate(device.send))}
        report = {"index": device.index, "kernel_id": device.kernel_id, "top": device.name,
                  "accelerator": f"{device.name}_accel", "flit_width": device.send.flit_width,
                  "receive": _geometry(device.receive), "send": dict(_geometry(device.send), dest=device.send.dest),
                  "cycles": max(layer["exp_cycles"] for layer in layers), "layers": layers, "bridges": bridges}
        where.write_json(where.report, report)
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------- simulation

@dataclass
class LinkRun:
    """One link of a cluster run, measured from its probes."""
    src: str                        # "host" or a kernel module name
    dst: str
    packets: int                    # that entered the link: packets_per_frame per frame
    packets_per_frame: int
    flits_per_frame: int
    interval: float                 # measured cycles per frame between packet ends (None for one packet)
    wire_cycles: float              # wire time of one frame, its packets' headers included
    utilization: float              # wire time per frame / measured cycles per frame: busy share (steady state)
    max_level: int                  # most flits its far-end buffer held
    depth: int


@dataclass
class ClusterRun:
    outputs: object                 # model outputs (after the host post ops)
    frames: int
    cycles: int
    cycles_per_frame: float         # steady state at the host's receiving end (None for one frame)
    latency: int                    # first input word to the first frame's last output word
    devices: list                   # per device: {"name", "analytic_ii", "measured_ii"}
    links: list                     # LinkRun per link, host -> device 0 first

    def as_dict(self):
        return {"frames": self.frames, "cycles": self.cycles, "cycles_per_frame": self.cycles_per_frame,
                "latency": self.latency, "devices": self.devices,
                "links": [dict(vars(link)) for link in self.links]}


def load_cluster(out):
    """(partition.json as a dict, [(device report dict, kernel Verilog)]) of an `rtlgen partition` OUT;
    FileNotFoundError naming what is missing."""
    out = OutDir(out)
    if not out.is_partition():
        raise FileNotFoundError(f"{out}: not an `rtlgen partition` output (missing {OutDir.partition})")
    plan = out.read_json(out.partition)
    devices = []
    for device in plan["devices"]:
        where = out.device(device['index'])
        if not where.report.is_file():
            raise FileNotFoundError(f"{out}: device {device['index']} was not built (missing {where.report}); "
                                    f"run `rtlgen partition` without --plan-only")
        report = where.read_json(where.report)
        devices.append((report, where.kernel(report['top']).read_text()))
    return plan, devices


def cluster_verilog(out, *, latency=None, header_flits=None):
    """(Verilog of :class:`ClusterSim` over the devices built in ``out``, its link specs, the plan, the
    device reports)."""
    plan, devices = load_cluster(out)
    fw, host = plan["flit_width"], len(devices) + 1
    first, last = devices[0][0], devices[-1][0]
    host_send = ToGalapagosSpec(first["receive"]["word_width"], fw, first["receive"]["words_per_frame"], dest=1,
                                source_id=host, max_packet_flits=first["receive"]["max_packet_flits"])
    host_receive = FromGalapagosSpec(last["send"]["word_width"], fw, last["send"]["words_per_frame"],
                                     kernel_id=host, max_packet_flits=last["send"]["max_packet_flits"])
    links = [LinkSpec.ethernet(fw, plan["link_gbps"], plan["clock_mhz"],
                               latency=DEFAULT_LATENCY if latency is None else latency, header_flits=header_flits)
             for _ in range(len(devices) + 1)]
    top = ClusterSim([report["top"] for report, _ in devices], host_send, host_receive, links)
    text = convert(top, CLUSTER_TOP) + "".join(verilog for _, verilog in devices)
    return text, links, plan, [report for report, _ in devices]


def simulate(out, x, *, latency=None, header_flits=None, backpressure=None):
    """Model inputs ``x`` through the host ops and the cluster of ``out`` (an `rtlgen partition` output),
    on the compiled Verilator bench: a :class:`ClusterRun`."""
    text, links, plan, reports = cluster_verilog(out, latency=latency, header_flits=header_flits)
    io = OutDir(out).read_io()
    x = io.check_input(x)
    words = io.encode(x)
    frames, per_frame = x.shape[0], io.output.words_per_frame
    sizes = [reports[0]["receive"]["packet_sizes"]] + [r["send"]["packet_sizes"] for r in reports]
    wire = [float(link.frame_cycles(s)) for link, s in zip(links, sizes)]
    layer_cycles = [layer["exp_cycles"] for r in reports for layer in r["layers"]]
    ii = max([plan["ii"], *wire])
    backpressure = backpressure or FULL_RATE
    max_cycles = cycle_budget(layer_cycles + [int(w) + 1 for w in wire], ii, frames,
                              len(words) + frames * per_frame, backpressure) \
        + sum(link.latency + int(w) + 1 for link, w in zip(links, wire))
    probes = [f"link{j}_{name}" for j in range(len(links)) for name in PROBES]
    result = simulate_chain(text, words, frames * per_frame, toplevel=CLUSTER_TOP, compiled=True,
                                   probes=probes, max_cycles=max_cycles, backpressure=backpressure)
    steady = result.steady_cycles("m_axis_0", per_frame) if frames >= 2 else None
    ends = ["host"] + [r["top"] for r in reports] + ["host"]
    runs = []
    for j, (link, s, w) in enumerate(zip(links, sizes, wire)):
        probe = lambda name: result.probe(f"link{j}_{name}")
        packets = probe("packets")
        interval = (probe("last_end") - probe("first_end")) * len(s) / (packets - 1) if packets >= 2 else None
        # busy share in the steady state: wire time per frame over the measured cycles per frame (the
        # packet interval of a short run still carries the pipeline's start: FIFOs fill ahead of it)
        runs.append(LinkRun(ends[j], ends[j + 1], packets, len(s), sum(s), interval, w,
                            None if steady is None else w / steady, probe("max_level"), link.depth))
    devices = [{"name": r["top"], "nodes": [layer["name"] for layer in r["layers"]], "analytic_ii": r["cycles"],
                "measured_ii": runs[k + 1].interval} for k, r in enumerate(reports)]
    first_end = result.out_cycles("m_axis_0")[per_frame - 1]
    return ClusterRun(io.decode(result.words("m_axis_0"), frames), frames, result.cycles, steady,
                      first_end - result.in_cycles("s_axis_0")[0] + 1, devices, runs)


# ---------------------------------------------------------------------------------------------- synthesis

def build_kernels(out, *, say=lambda line: None, device_capacity=None, check=True):
    """`rtlgen build` of an `rtlgen partition` OUT: every device's kernel (its layers and both bridges)
    by Yosys ``synth_xilinx``, out of context (there is no Galapagos network shell for the PYNQ-Z2 to
    put it in). Writes ``OUT/device{d}/build/yosys/report.json``; returns ``[{index, top, totals,
    layers, fits, over}]``. With ``check``, a kernel over the device is an error
    (:class:`rtlgen.errors.BuildError`) after every kernel has been reported."""
    capacity = device_capacity or XC7Z020
    plan, devices = load_cluster(out)
    for report, _ in devices:
        say(f"device {report['index']}: Yosys synth_xilinx of {report['top']} (kernel and bridges)")
    results = [None] * len(devices)
    # the kernels synthesize in parallel (rtlgen.backend.jobs: a process each, or --cluster)
    kernels = [(verilog, report["top"], report["accelerator"]) for report, verilog in devices]
    for k, (synth, files, failure) in completed(synthesize_kernel, kernels):
        report = devices[k][0]
        device = OutDir(out).device(report['index'])
        where = device.yosys_dir
        where.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():         # Yosys's own files, as it named them
            (where / name).write_bytes(data)
        if failure is not None:
            raise BuildError(f"device {report['index']}: {failure}; log: {where / 'yosys.log'}")
        over = check_fits(synth, capacity)
        row = synth.as_row()
        estimates = {layer["name"]: layer["estimate"] for layer in report["layers"]}
        result = {"index": report["index"], "top": report["top"], "totals": row,
                  "lut_including_memory": row["lut"] + row["lut_as_memory"],
                  "layers": {name: dict(sub.as_row(), estimate=estimates.get(name, {}))
                             for name, sub in (synth.modules or {}).items()},
                  "fits": not over, "over": over, "yosys_seconds": round(synth.seconds, 1)}
        device.write_json(device.yosys_report, result)
        say(f"device {report['index']}: LUT {result['lut_including_memory']:,} (incl. LUTRAM/SRL), FF {row['ff']:,}, "
            f"BRAM36 {row['bram36'] + row['bram18'] / BRAM18_PER_BRAM36:g}, DSP {row['dsp']} -> "
            + ("fits the xc7z020" if not over else "OVER: " + "; ".join(over)))
        results[k] = result
    bad = [r for r in results if not r["fits"]]
    if bad and check:
        raise BuildError(f"device {bad[0]['index']} does not fit the xc7z020: {'; '.join(bad[0]['over'])}")
    return results


def synthesize_kernel(kernel):
    """(SynthReport or None, {file name: bytes}, Yosys's error line or None) of one device's kernel
    ``(verilog, top, accelerator)`` synthesized in a temporary directory: a job that may run on another
    machine, the caller writing the files (the log of a failed run too) into OUT."""
    verilog, top, accelerator = kernel
    with tempfile.TemporaryDirectory(prefix="rtlgen-kernel-") as tmp:
        try:
            synth, failure = synthesize(verilog, top=top, workdir=tmp, hierarchy=True, children_of=accelerator), None
        except YosysError as exc:
            synth, failure = None, f"yosys failed on {top!r} during {exc.step}: {exc.error}"  # its log: in OUT
        return synth, {p.name: p.read_bytes() for p in sorted(Path(tmp).iterdir()) if p.is_file()}, failure


def write_plan(part, out, *, board="pynq-z2"):
    """Write what `rtlgen partition` leaves in ``out``: ``partition.json`` (II, frames/s, what binds, per
    device its nodes, folding, estimate and Galapagos kernel ID, per cut its link load), ``folding.json``
    (the whole graph's folding, FINN's format) and the Galapagos cluster files ``cluster/logical.xml``
    and ``cluster/map.xml``: one Verilog kernel per used device (IDs from 1, in stream order) and the
    host's pre/post ops as a software kernel on a ``sw`` node. Returns the paths written."""
    out = OutDir(out)
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
        "solver_note": part.solver_note,
        "devices": [{"index": d.index, "kernel_id": k + 1, "nodes": list(d.nodes), "cycles": d.cycles,
                     "resources": {r: int(v) for r, v in d.resources.items()}, "binding": d.binding,
                     "utilization": round(d.utilization, 4)} for k, d in enumerate(used)],
        "cuts": [{"src": c.src, "dst": c.dst, "tensor": c.tensor, "src_device": c.src_device,
                  "dst_device": c.dst_device, "bits_per_frame": c.bits_per_frame, "link_ii": c.link_ii,
                  "link_utilization": round(c.link_utilization, 4)} for c in part.cuts],
        "host_links": {name.removeprefix("link "): ii for name, ii in part.host_links.items()},
    }
    paths = {"partition": out.partition, "folding": out.folding, "logical": out.cluster_logical,
             "map": out.cluster_map}
    out.write_json(out.partition, plan)
    out.write_json(out.folding, part.folding)
    out.write_text(out.cluster_logical, logical_xml(kernels))
    out.write_text(out.cluster_map, map_xml(nodes))
    return paths
