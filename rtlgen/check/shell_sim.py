"""``rtlgen sim OUT --input X.npy --shell zynq``: the compiled accelerator inside the whole zynq shell
(:class:`boards.zynq.ZynqShell`: AXI-Lite control, the DMA on HP0) on the cocotb bench ``boards.tb_zynq``, where
cocotbext-axi's AxiRam is the DDR, answering with a fixed latency (the shell model's assumption,
:data:`boards.zynq_timing.DDR_READ_LATENCY_NS` at the report's clock), and an AxiLiteMaster is the CPU.

Two batches run, as the host driver would start them: the first frame alone (its CYCLES register is the
board latency, DDR to DDR) and then the whole input; the measured cycles per frame is the difference of the
two runs' cycles over the extra frames (the fill and drain of a batch cancel), the outputs are the whole
batch's, read back from the simulated DDR.
"""

import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from boards.driver import pack_words_to_bytes, unpack_bytes_to_words
from boards.zynq import ZynqShell
from rtlgen.analyses.board_rate import shell_timing_of
from sim import progress
from sim.runner import SimulationError, build, run_cocotb, to_verilog

__all__ = ["ShellRun", "simulate_in_shell"]

SRC = 0x1000                # 128-byte aligned buffers, as the analytic model takes them


@dataclass
class ShellRun:
    frames: int
    cycles: int                     # START to DONE of the whole batch
    latency: int                    # START to DONE of a one-frame batch
    cycles_per_frame: float         # None with one frame
    outputs: np.ndarray             # model outputs (host post ops applied)
    read_latency: int               # the DDR's, in cycles, as simulated
    write_latency: int


@contextmanager
def _frames_done(path, update):
    """While the body runs, the frames the bench reports done in the batch of many (its ``progress`` file:
    ``batch index, frames``) passed on to ``update``."""
    stop = threading.Event()

    def watch():
        while not stop.wait(0.5):
            try:
                index, done = map(int, path.read_text().split())
            except (OSError, ValueError):
                continue
            if index == 1:
                update(done)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def simulate_in_shell(design, x, *, simulator=None):
    """Run the model inputs ``x`` (already checked against the design's input) through ``design`` (an
    :class:`rtlgen.api.Design`) inside the zynq shell; a :class:`ShellRun`."""

    report, io = design.report, design.io
    in_width, out_width = report["input"]["width"], report["output"]["width"]
    in_words, out_words = io.input.words_per_frame, io.output.words_per_frame
    timing = shell_timing_of(in_width, out_width, in_words, out_words, report["clock_mhz"])
    frames = len(x)
    words = io.encode(x)
    data = pack_words_to_bytes(words, in_width)
    in_frame = len(data) // frames
    out_bytes = frames * out_words * -(-out_width // 8)
    dst = SRC + (-(-len(data) // 4096) + 1) * 4096      # the next 4 KB page after the input, and one spare
    ddr = 1 << max(20, (dst + 8 * out_bytes + 8).bit_length())
    shell = ZynqShell(in_width=in_width, out_width=out_width, in_words_per_frame=in_words,
                      out_words_per_frame=out_words, ddr=(0, ddr))
    out_frame = shell.out_frame_bytes
    batches = [{"src": SRC, "dst": dst, "frames": 1, "input": data[:in_frame].hex(),
                "out_bytes": max(8, out_frame), "reset_after": False},
               {"src": SRC, "dst": dst, "frames": frames, "input": data.hex(),
                "out_bytes": max(8, frames * out_frame), "reset_after": False}]
    with progress.task("zynq shell: building the simulation"):
        built = build(to_verilog(shell, "top") + design.verilog, toplevel="top", simulator=simulator)
    with tempfile.TemporaryDirectory(prefix="rtlgen-shell-") as tmp, \
            progress.task(f"zynq shell: simulating {frames:,} frame(s) DDR to DDR (after one alone)",
                          total=frames) as update, _frames_done(Path(tmp) / "progress", update):
        one, batch = run_cocotb(built, "boards.tb_zynq", {
            "ddr_size": ddr, "stalls": False, "read_latency": timing.read_latency,
            "write_latency": timing.write_latency, "batches": batches,
            "progress": str(Path(tmp) / "progress")})["batches"]
    for result, n in ((one, 1), (batch, frames)):
        if result["status"] & 0b111 != 0b010 or result["done"] != n:
            raise SimulationError(f"the zynq shell ended a {n}-frame batch with status {result['status']:#x} "
                                  f"after {result['done']} frame(s) (a bug: the request was legal)")
    out = unpack_bytes_to_words(bytes.fromhex(batch["output"]), out_width, frames * out_words)
    outputs = io.decode(out, frames)
    per_frame = None if frames < 2 else (batch["cycles"] - one["cycles"]) / (frames - 1)
    return ShellRun(frames, batch["cycles"], one["cycles"], per_frame, outputs, timing.read_latency,
                    timing.write_latency)
