"""The analytic model of the ``zynq`` shell's data movement (:class:`boards.zynq.ZynqShell`'s DMA on HP0):
cycles per frame and a one-frame batch's latency, from the DMA's parameters and an assumed DDR latency,
checked against the cocotb bench (tests/test_zynq_timing.py). The report's board rate is built on it."""

from dataclasses import dataclass

from boards.zynq import BEAT_BYTES, MAX_BURST, MAX_WRITES, READ_FIFO_DEPTH, word_bytes

__all__ = ["ShellTiming", "shell_timing", "DDR_READ_LATENCY_NS", "DDR_WRITE_LATENCY_NS"]

# An assumption, not a measurement: what the DDR behind the PS's interconnect takes to answer HP0, from a
# read burst's address to its first beat and from a write burst's last beat to its response (~35 cycles
# at 100 MHz). The DMA keeps enough bursts in flight that up to ~46 cycles of it cost no throughput.
DDR_READ_LATENCY_NS = 350
DDR_WRITE_LATENCY_NS = 350
# From the DMA engines' state machines (checked against the cocotb bench, tests/test_zynq_shell.py):
READ_LOOP = MAX_BURST + 2           # cycles from asking for a burst to room for the next, beyond the latency
WRITE_BURST = MAX_BURST + 2         # cycles per write burst: the decision, the address, 16 beats
WRITE_LOOP = MAX_BURST + 1          # cycles from a burst's address to its response, beyond the latency
LATENCY_OVERHEAD = 7                # cycles of START, launch, FIFOs and the DONE update in a one-frame batch


@dataclass(frozen=True)
class ShellTiming:
    """What the shell's data movement costs per frame, in cycles of the fabric clock (the analytic model of
    the DMA of :class:`ZynqShell`; :func:`shell_timing` makes one).

    Reads: every input beat crosses HP0 once, a beat a cycle, while the bursts in flight (the room in the
    64-beat read FIFO: 4 bursts of 16) cover the DDR's read latency; past that the reader waits, 4 bursts per
    latency + :data:`READ_LOOP` cycles. The input gearbox hands the accelerator a word a cycle, or a wide word
    (more than 8 bytes) every ``beats`` cycles. Writes: a burst of 16 beats takes :data:`WRITE_BURST` cycles
    (the decision and the address are not overlapped with the previous burst's data), at most
    :data:`MAX_WRITES` bursts awaiting their responses. Reads and writes use independent AXI channels and
    engines, so they overlap: the shell's cycles per frame are the larger of the two."""
    in_frame_bytes: int
    out_frame_bytes: int
    in_words: int
    out_words: int
    read_cycles: float          # per frame: HP0 reads and the input gearbox
    write_cycles: float         # per frame: the output gearbox and HP0 writes
    read_latency: int           # cycles of DDR latency assumed (the bench's, in simulation)
    write_latency: int
    read_cycles_per_beat: float     # in a long batch
    write_cycles_per_beat: float

    @property
    def in_beats(self):
        return self.in_frame_bytes / BEAT_BYTES

    @property
    def out_beats(self):
        return self.out_frame_bytes / BEAT_BYTES

    @property
    def cycles_per_frame(self):
        return max(self.read_cycles, self.write_cycles)

    def latency(self, accelerator_latency):
        """Cycles of a one-frame batch, START to DONE (the CYCLES register), around an accelerator that takes
        ``accelerator_latency`` cycles from its first input word to its last output word when fed and drained
        a word a cycle: the DDR's latency both ways, the time the shell needs beyond a word a cycle to bring the
        frame in and take it out, and the write of the last burst (the earlier ones overlap the accelerator)."""
        # one frame: what fits in flight moves a beat a cycle (16 beats per write burst), the rest as in a batch
        first_in = min(self.in_beats, READ_FIFO_DEPTH)
        read = first_in + (self.in_beats - first_in) * self.read_cycles_per_beat
        first_out = min(self.out_beats, MAX_WRITES * MAX_BURST)
        write = first_out * WRITE_BURST / MAX_BURST + (self.out_beats - first_out) * self.write_cycles_per_beat
        stretch_in = max(0.0, read - self.in_words)
        stretch_out = max(0.0, write - self.out_words)
        beats = -(-self.out_frame_bytes // BEAT_BYTES)
        tail = 2 + (beats - 1) % MAX_BURST + 1          # the last burst, once all its beats are in: address, data
        return round(LATENCY_OVERHEAD + self.read_latency + self.write_latency + stretch_in + accelerator_latency +
                     stretch_out + tail)

    def as_dict(self):
        return {"in_bytes_per_frame": self.in_frame_bytes, "out_bytes_per_frame": self.out_frame_bytes,
                "read_cycles_per_frame": round(self.read_cycles, 3),
                "write_cycles_per_frame": round(self.write_cycles, 3),
                "cycles_per_frame": round(self.cycles_per_frame, 3),
                "ddr_read_latency_cycles": self.read_latency, "ddr_write_latency_cycles": self.write_latency}


def shell_timing(*, in_width, out_width, in_words_per_frame, out_words_per_frame, clock_mhz=100.0,
                 read_latency=None, write_latency=None):
    """The :class:`ShellTiming` of a :class:`ZynqShell` of these streams (widths in bits, as the accelerator's
    ports have them) at ``clock_mhz``; the DDR latencies in cycles default to :data:`DDR_READ_LATENCY_NS` and
    :data:`DDR_WRITE_LATENCY_NS` at that clock. Batches are taken as long, their buffers 128-byte aligned (no
    burst split at a 4 KB boundary)."""
    if read_latency is None:
        read_latency = round(DDR_READ_LATENCY_NS * clock_mhz / 1000)
    if write_latency is None:
        write_latency = round(DDR_WRITE_LATENCY_NS * clock_mhz / 1000)
    in_bytes, out_bytes = word_bytes(in_width), word_bytes(out_width)
    in_frame, out_frame = in_words_per_frame * in_bytes, out_words_per_frame * out_bytes
    bursts_in_flight = READ_FIFO_DEPTH // MAX_BURST
    read_per_burst = max(MAX_BURST, (read_latency + READ_LOOP) / bursts_in_flight)
    write_per_burst = max(WRITE_BURST, (write_latency + WRITE_LOOP) / MAX_WRITES)
    # a gearbox moves a word a cycle, or a beat a cycle of a word wider than one
    read = max(in_frame / BEAT_BYTES * read_per_burst / MAX_BURST, in_words_per_frame)
    write = max(out_frame / BEAT_BYTES * write_per_burst / MAX_BURST, out_words_per_frame)
    return ShellTiming(in_frame, out_frame, in_words_per_frame, out_words_per_frame, read, write, read_latency,
                       write_latency, read_per_burst / MAX_BURST, write_per_burst / MAX_BURST)
