"""Host driver for the ``zynq`` shell: numpy batches in the model's own layout in, outputs out.

:class:`AcceleratorDriver` holds the logic (buffer layout, register sequence, timeouts, host pre/post
ops through the compile's ``io.json`` models); the board is behind the small :class:`Board` interface:

- :class:`PynqBoard`: the real one, on a PYNQ image (``pynq.Overlay``/``Bitstream``, ``MMIO`` on
  M_AXI_GP0 at 0x4000_0000, ``pynq.allocate`` for DMA buffers, ``Clocks.fclk0_mhz``). Imported lazily:
  this module imports without PYNQ.
- :class:`SimulatedBoard`: a faithful fake for tests and for trying the driver off-board: the same
  register map and memory layout, whose DMA runs the accelerator's Verilog on the compiled Verilator
  bench (``sim.harness.run_stitched``).

    driver = AcceleratorDriver.from_compile("OUT", PynqBoard("OUT/build/vivado/rtlgen_zynq.bit"))
    y = driver.run(x)                 # x: the model's input batch; y: the model's output batch
"""

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from boards.zynq import ERRORS, MAGIC, REGISTERS, word_bytes

__all__ = ["Board", "Buffer", "AcceleratorDriver", "DriverError", "PynqBoard", "SimulatedBoard",
           "pack_words_to_bytes", "unpack_bytes_to_words", "GP0_BASE"]

GP0_BASE = 0x4000_0000
STATUS_BUSY, STATUS_DONE, STATUS_ERROR = 0b1, 0b10, 0b100


class DriverError(RuntimeError):
    """The accelerator reported an error, timed out, or is not the expected shell."""


@dataclass
class Buffer:
    """DMA memory: ``array`` (uint8, host view) at ``address`` (physical, what the DMA uses)."""
    array: np.ndarray
    address: int


class Board(ABC):
    """What the driver needs of a board. Offsets are bytes from the control block's base."""

    @abstractmethod
    def read(self, offset):
        """The 32-bit register at ``offset``."""

    @abstractmethod
    def write(self, offset, value):
        """Write the 32-bit register at ``offset``."""

    @abstractmethod
    def allocate(self, nbytes):
        """A :class:`Buffer` of ``nbytes``, 8-byte aligned, reachable by the DMA."""

    def flush(self, buffer):
        """Make host writes visible to the DMA (cache flush)."""

    def invalidate(self, buffer):
        """Make DMA writes visible to the host (cache invalidate)."""


def pack_words_to_bytes(words, width):
    """Stream words of ``width`` bits -> the bytes the DMA reads (``word_bytes(width)`` each, little endian)."""
    nb = word_bytes(width)
    return b"".join(int(w).to_bytes(nb, "little") for w in words)


def unpack_bytes_to_words(data, width, count):
    """The bytes the DMA wrote -> ``count`` stream words of ``width`` bits."""
    nb = word_bytes(width)
    data = bytes(data)
    return [int.from_bytes(data[k * nb:(k + 1) * nb], "little") for k in range(count)]


class AcceleratorDriver:
    """Runs batches through the ``zynq`` shell of one compiled accelerator."""

    def __init__(self, board, io, report, *, timeout_s=10.0, poll_s=0.0):
        self.board, self.io, self.report = board, io, report
        self.in_width, self.out_width = report["input"]["width"], report["output"]["width"]
        self.timeout_s, self.poll_s = timeout_s, poll_s
        magic = board.read(REGISTERS["MAGIC"])
        if magic != MAGIC:
            raise DriverError(f"no rtlgen zynq shell at the control port: MAGIC reads {magic:#010x}, "
                              f"expected {MAGIC:#010x} (wrong bitstream?)")
        expect = (io.input.words_per_frame * word_bytes(self.in_width),
                  io.output.words_per_frame * word_bytes(self.out_width))
        found = (board.read(REGISTERS["IN_BYTES"]), board.read(REGISTERS["OUT_BYTES"]))
        if found != expect:
            raise DriverError(f"the bitstream's frame sizes {found} (in, out bytes) are not this compile's "
                              f"{expect}: bitstream and compile output differ")
        self.last_cycles = None

    @classmethod
    def from_compile(cls, out, board, **kwargs):
        from sim.outdir import OutDir
        _, io, report = OutDir(out).read_outputs()
        return cls(board, io, report, **kwargs)

    def run(self, x):
        """The model's output for the model input batch ``x`` (host pre ops, DMA, accelerator, host post ops)."""
        x = self.io.check_input(x)
        frames = len(x)
        data = pack_words_to_bytes(self.io.encode(x), self.in_width)
        out_bytes = frames * self.io.output.words_per_frame * word_bytes(self.out_width)
        src, dst = self.board.allocate(_beats(len(data))), self.board.allocate(_beats(out_bytes))
        src.array[:len(data)] = np.frombuffer(data, dtype=np.uint8)
        self.board.flush(src)
        self._start(frames, src.address, dst.address)
        self._wait(frames)
        self.board.invalidate(dst)
        words = unpack_bytes_to_words(dst.array[:out_bytes].tobytes(), self.out_width,
                                      frames * self.io.output.words_per_frame)
        return self.io.decode(words, frames)

    def _start(self, frames, src, dst):
        b = self.board
        if b.read(REGISTERS["STATUS"]) & STATUS_BUSY:
            raise DriverError("the accelerator is busy with another batch")
        b.write(REGISTERS["CTRL"], 0b010)                   # clear done/error
        b.write(REGISTERS["FRAMES"], frames)
        b.write(REGISTERS["SRC"], src)
        b.write(REGISTERS["DST"], dst)
        b.write(REGISTERS["CTRL"], 0b001)

    def _wait(self, frames):
        b = self.board
        deadline = time.monotonic() + self.timeout_s
        while True:
            status = b.read(REGISTERS["STATUS"])
            if status & STATUS_DONE:
                break
            if time.monotonic() > deadline:
                done = b.read(REGISTERS["DONE"])
                b.write(REGISTERS["CTRL"], 0b100)           # reset the accelerator: next batch starts clean
                raise DriverError(f"timed out after {self.timeout_s} s with {done} of {frames} frames done")
            if self.poll_s:
                time.sleep(self.poll_s)
        self.last_cycles = b.read(REGISTERS["CYCLES"])
        if status & STATUS_ERROR:
            code = (status >> 8) & 0xF
            b.write(REGISTERS["CTRL"], 0b110)
            raise DriverError(f"the accelerator refused or aborted the batch: {ERRORS.get(code, f'code {code}')}")


def _beats(nbytes):
    return max(8, -(-nbytes // 8) * 8)


class PynqBoard(Board):
    """A PYNQ-Z2 running a PYNQ image, with the ``zynq`` shell's bitstream (and its .hwh if any)."""

    def __init__(self, bitstream, *, clock_mhz=100.0):
        import pynq                                     # only on the board

        self._pynq = pynq
        pynq.Bitstream(str(bitstream)).download()
        pynq.ps.Clocks.fclk0_mhz = clock_mhz
        self._mmio = pynq.MMIO(GP0_BASE, 0x1000)
        self._buffers = []

    def read(self, offset):
        return int(self._mmio.read(offset))

    def write(self, offset, value):
        self._mmio.write(offset, int(value))

    def allocate(self, nbytes):
        buf = self._pynq.allocate(shape=(nbytes,), dtype=np.uint8)
        self._buffers.append(buf)
        return Buffer(buf, int(buf.physical_address))

    def flush(self, buffer):
        buffer.array.flush()

    def invalidate(self, buffer):
        buffer.array.invalidate()


class SimulatedBoard(Board):
    """The ``zynq`` shell's register map and DMA in Python over a byte-array DDR, running the accelerator's
    Verilog (compiled Verilator bench) on the words it reads. ``fail_next`` makes the next batch end in
    an error (``code``), ``hang`` makes batches never finish (for the driver's timeout)."""

    def __init__(self, out, *, ddr_size=1 << 22):
        from sim.outdir import OutDir

        self.verilog, self.io, self.report = OutDir(out).read_outputs()
        self.ddr = bytearray(ddr_size)
        self.regs = {name: 0 for name in REGISTERS}
        self.in_width, self.out_width = self.report["input"]["width"], self.report["output"]["width"]
        self.regs["MAGIC"] = MAGIC
        self.regs["IN_BYTES"] = self.io.input.words_per_frame * word_bytes(self.in_width)
        self.regs["OUT_BYTES"] = self.io.output.words_per_frame * word_bytes(self.out_width)
        self._next = 64
        self.fail_next, self.hang, self.batches = None, False, 0

    def read(self, offset):
        name = _register(offset)
        return self.regs[name]

    def write(self, offset, value):
        name = _register(offset)
        if name == "CTRL":
            if value & 0b110:
                self.regs["STATUS"] &= STATUS_BUSY
            if value & 0b001 and not self.regs["STATUS"] & STATUS_BUSY:
                self._batch()
        elif name in ("FRAMES", "SRC", "DST"):
            self.regs[name] = int(value) & 0xFFFF_FFFF
        else:
            raise DriverError(f"register {name} is read-only")

    def allocate(self, nbytes):
        address = self._next
        self._next = -(-(address + nbytes) // 64) * 64
        if self._next > len(self.ddr):
            raise MemoryError("simulated DDR is full")
        return Buffer(np.frombuffer(memoryview(self.ddr)[address:address + nbytes], dtype=np.uint8), address)

    def _batch(self):
        from sim.harness import cycle_budget, run_stitched

        frames, src, dst = self.regs["FRAMES"], self.regs["SRC"], self.regs["DST"]
        in_bytes, out_bytes = frames * self.regs["IN_BYTES"], frames * self.regs["OUT_BYTES"]
        code = 1 if frames == 0 else 2 if (src | dst) % 8 else \
            3 if max(src + in_bytes, dst + out_bytes) > len(self.ddr) else self.fail_next
        self.fail_next = None
        self.batches += 1
        if self.hang:
            self.regs["STATUS"] = STATUS_BUSY
            return
        if code:
            self.regs["STATUS"] = STATUS_DONE | STATUS_ERROR | code << 8
            return
        in_words = frames * self.io.input.words_per_frame
        words = unpack_bytes_to_words(self.ddr[src:src + in_bytes], self.in_width, in_words)
        count = frames * self.io.output.words_per_frame
        result = run_stitched(self.verilog, words, count, compiled=True,
                              max_cycles=cycle_budget([r["exp_cycles"] for r in self.report["layers"]],
                                                      self.report["analytic_cycles_per_frame"], frames,
                                                      in_words + count))
        self.ddr[dst:dst + out_bytes] = pack_words_to_bytes(result.words("m_axis_0"), self.out_width)
        self.regs.update(STATUS=STATUS_DONE, DONE=frames, CYCLES=result.cycles)


def _register(offset):
    for name, address in REGISTERS.items():
        if address == offset:
            return name
    raise DriverError(f"no register at offset {offset:#x}")
