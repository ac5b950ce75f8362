"""Board-level frames/s: the accelerator behind the zynq shell's DMA (one 64-bit S_AXI_HP0 port).

The board delivers a frame every ``max(II, shell cycles per frame)`` cycles, where the shell's figure is
:func:`boards.zynq_timing.shell_timing` (the analytic model of its data movement, checked against the cocotb bench):
the accelerator's input and output words as the shell packs them in DDR, over HP0 at the fabric clock, with
its bursts. A design whose II is shorter than the shell's is I/O-bound: its extra speed is never seen.
"""

import math
from math import prod

from boards.zynq import BEAT_BYTES
from boards.zynq_timing import shell_timing

__all__ = ["shell_timing_of", "board_figures", "graph_shell_cycles", "graph_ports", "top_width", "SHELL"]

SHELL = "zynq"


def top_width(bits):
    """A stream's width on the stitched top's port: whole bytes, as AXI-Stream's TDATA carries it."""
    return -(-bits // 8) * 8


def shell_timing_of(in_width, out_width, in_words, out_words, clock_mhz):
    """The shell's :class:`boards.zynq_timing.ShellTiming` for these accelerator ports (widths in bits as the
    stitched top has them, words per frame)."""
    return shell_timing(in_width=in_width, out_width=out_width, in_words_per_frame=in_words,
                        out_words_per_frame=out_words, clock_mhz=clock_mhz)


def board_figures(*, ii, latency, clock_mhz, in_width, out_width, in_words, out_words, dense_in_bits):
    """The report's board-level keys: ``board_frames_per_second`` (the lower of the accelerator's rate and the
    shell's), ``board_cycles_per_frame``, ``io_bound``, ``board_latency_cycles`` / ``_ns`` (a one-frame batch,
    START to DONE, with the DDR's assumed latency) and ``shell`` (the model's figures, and what the input would
    cost packed densely: ``dense_in_bits`` per frame, as the host could pack it)."""
    timing = shell_timing_of(in_width, out_width, in_words, out_words, clock_mhz)
    cycles = max(ii, timing.cycles_per_frame)
    board_latency = timing.latency(latency)
    dense_bytes = math.ceil(dense_in_bits / 8)
    packing = None
    if dense_bytes < timing.in_frame_bytes:
        # the same frame moved as a dense bit string: what the read side would then cost (not built: the shell
        # moves whole words of 1, 2, 4 or 8k bytes)
        dense = shell_timing(in_width=8 * BEAT_BYTES, out_width=out_width,
                             in_words_per_frame=dense_bytes / BEAT_BYTES, out_words_per_frame=out_words,
                             clock_mhz=clock_mhz)
        dense_read = max(dense.read_cycles, in_words)
        packing = {"in_bits_per_frame": 8 * timing.in_frame_bytes, "dense_in_bits_per_frame": dense_in_bits,
                   "dense_cycles_per_frame": round(max(ii, dense_read, timing.write_cycles), 3),
                   "supported": False}
    shell = {"name": SHELL, "port": "S_AXI_HP0 (64 bit)", **timing.as_dict(), "input_packing": packing}
    return {
        "board_cycles_per_frame": round(cycles, 3),
        "board_frames_per_second": round(clock_mhz * 1e6 / cycles, 1),
        "io_bound": timing.cycles_per_frame > ii,
        "board_latency_cycles": board_latency,
        "board_latency_ns": round(board_latency * 1e3 / clock_mhz, 1),
        "shell": shell,
    }


def graph_shell_cycles(graph, clock_mhz):
    """The shell's cycles per frame for ``graph`` at its current folding: the first layer's input words and
    the last layer's output words as the stitched top's ports carry them (the folding optimizer's I/O bound)."""
    in_width, out_width, in_words, out_words = graph_ports(graph)
    return shell_timing_of(in_width, out_width, in_words, out_words, clock_mhz).cycles_per_frame


def graph_ports(graph):
    """(input width, output width, input words, output words) per frame of a folded graph (before FIFOs and
    DWCs are inserted): its first layer's input and last layer's output, widths in bits as the layers have them."""
    node, port = graph.consumers(graph.input)[0]
    first, last = node.spec(), graph.producer(graph.output)[0].spec()
    return (first.in_width, last.out_width, prod(first.folded_input_shapes[port][:-1]),
            prod(last.folded_output_shape[:-1]))
