"""ONNX in, stitched accelerator out: the compiler's passes in order, and what ``rtlgen compile`` writes.

load -> lower (to_finn + streamline + to_hw) -> fold -> insert DWC/FIFO (depths by simulation) -> stitch
-> emit (Verilog, memory images, model_hw.onnx, io.json + host models, folding.json, report.json).
"""

import time
from dataclasses import dataclass, field

from rtlgen.accelerator import StreamEnd, StreamIO
from rtlgen.frontend import CompileError, load_model
from rtlgen.host import submodel
from rtlgen.lower import lower

__all__ = ["CompileOptions", "Compiled", "compile_model", "DEFAULT_TARGET_CYCLES"]

DEFAULT_TARGET_CYCLES = 1000        # naive folding target when neither a folding file nor a target fps is given


@dataclass
class CompileOptions:
    folding: str = None             # FINN folding JSON
    target_fps: float = None        # naive folding (FINN SetFolding) for this many frames/s
    clock_mhz: float = 100.0
    board: str = "pynq-z2"
    fifo_sizing: str = "sim"        # "sim": depths from a simulation of the stitched design; "none": depth 2
    simulator: str = None

    def target_cycles(self):
        if self.target_fps is None:
            return DEFAULT_TARGET_CYCLES
        if not self.target_fps > 0:
            raise CompileError(f"--target-fps must be positive, not {self.target_fps}")
        from rtlgen.folding import target_cycles
        return target_cycles(self.target_fps, self.clock_mhz)


@dataclass
class Compiled:
    """Everything a compile produced."""
    model_path: str
    nodes: list                     # compute layers, folded
    chain: list                     # with DWCs and FIFOs
    io: StreamIO
    host_ops: dict                  # {"pre": [onnx node names], "post": [...]}
    verilog: str
    seconds: dict = field(default_factory=dict)

    @property
    def analytic_cycles(self):
        """Cycles per frame of the slowest layer: the design's II."""
        return max(n.spec().exp_cycles for n in self.nodes)


def compile_model(model_path, options=None, *, say=lambda text: None):
    """Compile ``model_path``; ``say`` receives one line per finished step."""
    from rtlgen import stitch
    from rtlgen.folding import apply_folding_config, load_folding_config, set_folding

    options = options or CompileOptions()
    seconds = {}

    def step(name, start):
        seconds[name] = time.perf_counter() - start
        say(f"{name}: {seconds[name]:.1f} s")

    t = time.perf_counter()
    model = load_model(model_path)
    step("load", t)
    t = time.perf_counter()
    flow = lower(model)
    step(f"lower ({len(flow.nodes)} layers, host ops: {len(flow.host_pre)} before, {len(flow.host_post)} after)", t)
    t = time.perf_counter()
    if options.folding:
        if options.target_fps is not None:
            raise CompileError("give either --folding or --target-fps, not both")
        apply_folding_config(flow.nodes, load_folding_config(options.folding))
    else:
        set_folding(flow.nodes, options.target_cycles())
    step(f"fold (II {max(n.spec().exp_cycles for n in flow.nodes)} cycles)", t)
    t = time.perf_counter()
    depths = stitch.size_fifos(flow.nodes, simulator=options.simulator) if options.fifo_sizing == "sim" else None
    chain = stitch.insert_dwcs_and_fifos(flow.nodes, depths)
    step("insert DWC/FIFO" + (" (depths by simulation)" if depths else ""), t)
    t = time.perf_counter()
    verilog = stitch.to_verilog(chain)
    step("stitch + Verilog", t)
    io = _stream_io(model, flow)
    return Compiled(str(model_path), flow.nodes, chain, io, {"pre": flow.host_pre, "post": flow.host_post},
                    verilog, seconds)


def _stream_io(model, flow):
    from rtlgen.stitch import in_width, out_width

    first, last = flow.nodes[0].spec(), flow.nodes[-1].spec()
    in_bits, out_bits = flow.input.dtype.bitwidth(), flow.output.dtype.bitwidth()
    graph_in, graph_out = model.graph.input[0].name, model.graph.output[0].name
    ends = []
    for t, lanes in ((flow.input, in_width(first) // in_bits), (flow.output, out_width(last) // out_bits)):
        ends.append(StreamEnd(t.name, tuple(t.shape), t.dtype, t.scale, lanes, t.kind, t.gain, t.offset,
                              getattr(t, "rounding", False)))
    pre = submodel(model, flow.host_pre, [graph_in], [flow.input.name], "host_pre")
    post = submodel(model, flow.host_post, [flow.output.name], [graph_out], "host_post")
    return StreamIO(graph_in, tuple(model.get_tensor_shape(graph_in)), graph_out, *ends, pre, post)
