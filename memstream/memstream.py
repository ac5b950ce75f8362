"""MemStream: a DEPTH x WIDTH memory streamed cyclically, optionally rewritten at run time over AXI-Lite."""

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Literal

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from memstream.axilite import OKAY, SLVERR, AXILiteSignature, accept_writes
from memstream.packing import write_memh

__all__ = ["MemStreamSpec", "MemStream", "rom_address_next", "rom_read_port", "check_lut_bits",
           "is_logic_rom"]

# ram_style, the one definition every memory's spec checks: where Yosys builds it (auto: the spec decides by
# its size, see each spec's rule), LUTs (LUTRAM / LUT ROM), block RAM, or UltraRAM (runtime-writable weights
# only); BRAM_OR_LUT_STYLES for the memories that cannot be UltraRAM (FIFOs, line buffers, thresholds) and
# what a folding file or the optimizer may choose
RAM_STYLES = ("auto", "distributed", "block", "ultra")
BRAM_OR_LUT_STYLES = RAM_STYLES[:3]


def _clog2(n):
    return max(0, (n - 1).bit_length())


def rom_address_next(addr, depth):
    """``addr + 1``, back to 0 after ``depth - 1``, built without a carry chain.

    Why not ``addr + 1``: Yosys 0.70's abc9 maps a distributed ROM whose address register is fed by a
    CARRY4 incrementer at about 3x the LUTs of the same ROM behind any other address logic (1024 x 10
    bits: 643 LUT against 226-247, no MUXF7/F8 used). Each bit here toggles when all the bits below it
    are 1, an AND tree that stays in LUT6s; it costs about as many LUTs as the carry chain's sum bits.
    """
    width = len(addr)
    ones_below = Const(1, 1)
    toggled = []
    for i in range(width):
        toggled.append(addr[i] ^ ones_below)
        ones_below = ones_below & addr[i]
    incremented = Cat(*toggled)
    if depth == 1 << width:         # wraps by itself
        return incremented
    return Mux(addr == depth - 1, 0, incremented)


def rom_read_port(m, name, depth, width, init, rom_style, lut_bits=0):
    """A synchronous read port (``addr``, ``en``, ``data``) over a ROM of ``depth`` x ``width`` bits holding
    ``init``. ``rom_style`` is passed on to Yosys (``auto``: no attribute). With ``lut_bits`` the word's top
    ``lut_bits`` bits are a second ROM built as logic and the rest keeps ``rom_style``: a memory too wide
    for the block RAM left spills only some of its bit columns into LUTs, at one shared address."""
    def rom(suffix, bits, words, style):
        attrs = {} if style == "auto" else {"rom_style": style}
        m.submodules[name + suffix] = mem = Memory(shape=unsigned(bits), depth=depth, init=words, attrs=attrs)
        return mem.read_port(domain="sync")
    if not lut_bits:
        return rom("", width, init, rom_style)
    kept = width - lut_bits
    low = rom("_ram", kept, [w & ((1 << kept) - 1) for w in init], rom_style)
    high = rom("_logic", lut_bits, [w >> kept for w in init], "distributed")
    port = SimpleNamespace(addr=Signal(range(depth), name=f"{name}_addr"), en=Signal(name=f"{name}_en"),
                           data=Cat(low.data, high.data))
    m.d.comb += [low.addr.eq(port.addr), high.addr.eq(port.addr), low.en.eq(port.en), high.en.eq(port.en)]
    return port


def is_logic_rom(ram_style, lut_bits=0, writeable=False):
    """Whether a memory's words are (partly) a ROM built as logic: then its address counter is
    :func:`rom_address_next`."""
    return not writeable and (ram_style == "distributed" or lut_bits > 0)


def check_lut_bits(owner, attr, lut_bits, width, ram_style, writeable):
    """Raise naming ``attr`` unless ``lut_bits`` can split a ``width``-bit ROM (see :func:`rom_read_port`)."""
    if not isinstance(lut_bits, int) or isinstance(lut_bits, bool) or not 0 <= lut_bits < width:
        raise ValueError(f"{owner} {attr} must be an integer in 0..{width - 1} (bits of the {width}-bit word "
                         f"built as LUT ROM), not {lut_bits!r}")
    if lut_bits and (writeable or ram_style != "block"):
        raise ValueError(f"{owner} {attr}={lut_bits} splits a block ROM: it needs ram_style=block"
                         f"{' and fixed weights' if writeable else ''}, not ram_style={ram_style}"
                         f"{' with runtime-writeable weights' if writeable else ''}")


@dataclass(frozen=True)
class MemStreamSpec:
    """Contract of a weight streamer (FINN's memstream: DEPTH, WIDTH, INIT_FILE, RAM_STYLE)."""
    depth: int                  # words in the memory, streamed 0 .. depth-1, then again from 0
    width: int                  # bits per word
    init: tuple = ()            # initial words (Python ints), len == depth; empty = all zero
    ram_style: Literal["auto", "distributed", "block", "ultra"] = "auto"
    runtime_writeable: bool = False   # add an AXI-Lite slave that reads and writes the memory
    lut_bits: int = 0           # the word's top bits built as LUT ROM, the rest in block RAM (0: none)

    def __post_init__(self):
        if not isinstance(self.depth, int) or self.depth < 1:
            raise ValueError(f"memstream depth must be a positive integer, not {self.depth!r}")
        if not isinstance(self.width, int) or self.width < 1:
            raise ValueError(f"memstream width must be a positive integer, not {self.width!r}")
        if self.ram_style not in RAM_STYLES:
            raise ValueError(f"memstream ram_style must be one of {', '.join(RAM_STYLES)}, not {self.ram_style!r}")
        init = tuple(int(w) for w in self.init)
        object.__setattr__(self, "init", init)
        if init and len(init) != self.depth:
            raise ValueError(f"memstream init must have depth={self.depth} words, not {len(init)}")
        bad = next((w for w in init if not 0 <= w < 1 << self.width), None)
        if bad is not None:
            raise ValueError(f"memstream init word {bad:#x} does not fit in width={self.width} bits")
        check_lut_bits("memstream", "lut_bits", self.lut_bits, self.width, self.ram_style, self.runtime_writeable)

    @property
    def logic_rom(self):
        """Whether some of the words are a ROM built as logic (its address counter avoids carry chains)."""
        return is_logic_rom(self.ram_style, self.lut_bits, self.runtime_writeable)

    @property
    def chunks(self):
        """32-bit AXI-Lite words per memory line."""
        return (self.width + 31) // 32

    @property
    def chunk_bits(self):
        """Address bits selecting a chunk: each line takes the next power of two of 32-bit words."""
        return _clog2(self.chunks)

    @property
    def axilite_addr_width(self):
        """FINN's AXILITE_ADDR_WIDTH: clog2(depth * 2**chunk_bits) + 2."""
        return _clog2(self.depth * (1 << self.chunk_bits)) + 2

    def write_init_file(self, path):
        """Write the initial image as a ``$readmemh`` file (FINN's INIT_FILE), one word per line."""
        write_memh(path, self.init or (0,) * self.depth, self.width)

    def address_of(self, line, chunk=0):
        """Byte address of 32-bit chunk ``chunk`` (0 = least significant) of memory line ``line``."""
        return ((line << self.chunk_bits) | chunk) << 2


class MemStream(wiring.Component):
    """Streams memory words 0, 1, ..., depth-1, 0, 1, ... forever on ``o``.

    Members
    -------
    o : Out(stream.Signature(width))
    s_axilite : In(AXILiteSignature(spec.axilite_addr_width))
        Only when ``spec.runtime_writeable``.

    One word per cycle while ``o.ready`` is high; under backpressure no word is skipped or repeated.
    ``o.valid`` comes from a register and never depends on ``o.ready``. The memory has one synchronous
    read port (shared by the stream and AXI-Lite reads, which take priority for one cycle) and one write
    port (AXI-Lite writes), so it maps to a simple dual-port BRAM or LUTRAM (``ram_style`` is passed on as
    a Verilog attribute). Two output registers hold words already read while the consumer stalls.

    AXI-Lite (FINN's layout): line ``n`` chunk ``c`` is at byte address ``(n << chunk_bits | c) << 2``,
    chunk 0 holding bits [0, 32). Writes to chunks below the last are staged; the write to the last
    chunk commits the whole line. ``wstrb`` is ignored (whole 32-bit writes). An address beyond the
    memory (line >= depth or chunk >= chunks) gets SLVERR and changes nothing. Streaming words
    already read keep their old value: flush the stream after rewriting, as with FINN.
    """

    def __init__(self, spec):
        self._spec = spec
        members = {"o": Out(stream.Signature(spec.width))}
        if spec.runtime_writeable:
            members["s_axilite"] = In(AXILiteSignature(spec.axilite_addr_width))
        super().__init__(members)

    @property
    def spec(self):
        return self._spec

    def elaborate(self, platform):
        spec = self._spec
        m = Module()
        steal = Signal()        # an AXI-Lite read uses the read port this cycle
        if spec.runtime_writeable:
            attrs = {} if spec.ram_style == "auto" else {"ram_style": spec.ram_style}
            m.submodules.mem = mem = Memory(shape=unsigned(spec.width), depth=spec.depth, init=spec.init, attrs=attrs)
            rd = mem.read_port(domain="sync")
            self._axilite(m, mem.write_port(), rd, steal)
        else:
            rd = rom_read_port(m, "mem", spec.depth, spec.width, spec.init or (0,) * spec.depth, spec.ram_style,
                               spec.lut_bits)
        self._stream(m, rd, steal)
        return m

    def _stream(self, m, rd, steal):
        spec = self._spec
        addr = Signal(range(spec.depth))
        arriving = Signal()                 # a stream read issued last cycle: its word is on rd.data now
        held = Signal(range(3))             # words in the two output registers
        head = Signal(spec.width, reset_less=True)
        spare = Signal(spec.width, reset_less=True)

        m.d.comb += [self.o.valid.eq(held != 0), self.o.payload.eq(head)]
        taken = self.o.valid & self.o.ready
        after = Signal(range(4))
        m.d.comb += after.eq(held - taken + arriving)
        issue = (after <= 1) & ~steal       # the word read now arrives next cycle: keep a register free
        with m.If(~steal):
            m.d.comb += [rd.addr.eq(addr), rd.en.eq(issue)]
        with m.If(issue):
            if spec.logic_rom:
                m.d.sync += addr.eq(rom_address_next(addr, spec.depth))
            else:
                m.d.sync += addr.eq(Mux(addr == spec.depth - 1, 0, addr + 1))
        m.d.sync += [arriving.eq(issue), held.eq(after)]

        with m.If(taken):
            m.d.sync += head.eq(spare)
        with m.If(arriving):
            with m.If(held - taken == 0):
                m.d.sync += head.eq(rd.data)
            with m.Else():
                m.d.sync += spare.eq(rd.data)

    def _axilite(self, m, wr, rd, steal):
        spec = self._spec
        bus = self.s_axilite
        cb = spec.chunk_bits

        def decode(address):
            line, chunk = address[2 + cb:], address[2:2 + cb] if cb else Const(0, 1)
            return line, chunk, (line < spec.depth) & (chunk < spec.chunks)

        # Writes: take AW and W together, one at a time (the response must be accepted first).
        staged = Signal(32 * spec.chunks, reset_less=True)
        line, chunk, legal = decode(bus.awaddr)
        accept = accept_writes(m, bus, legal)
        with m.If(accept & legal):
            m.d.sync += staged.word_select(chunk, 32).eq(bus.wdata)
        commit = accept & legal & (chunk == spec.chunks - 1)
        m.d.comb += [
            wr.addr.eq(line), wr.en.eq(commit),
            wr.data.eq(Cat(staged[:32 * (spec.chunks - 1)], bus.wdata)),   # the last chunk comes straight from W
        ]

        # Reads: one at a time; a legal read borrows the memory read port for one cycle.
        r_line, r_chunk, r_legal = decode(bus.araddr)
        r_pending = Signal()
        r_chunk_q = Signal.like(r_chunk)
        m.d.comb += bus.arready.eq(~bus.rvalid & ~r_pending)
        take_ar = bus.arvalid & bus.arready
        m.d.comb += steal.eq(take_ar & r_legal)
        with m.If(steal):
            m.d.comb += [rd.addr.eq(r_line), rd.en.eq(1)]
        m.d.sync += r_pending.eq(steal)
        with m.If(take_ar):
            m.d.sync += r_chunk_q.eq(r_chunk)
            with m.If(~r_legal):
                m.d.sync += [bus.rvalid.eq(1), bus.rresp.eq(SLVERR), bus.rdata.eq(0)]
        with m.Elif(r_pending):
            padded = Signal(32 * spec.chunks)
            m.d.comb += padded.eq(rd.data)
            m.d.sync += [bus.rvalid.eq(1), bus.rresp.eq(OKAY), bus.rdata.eq(padded.word_select(r_chunk_q, 32))]
        with m.Elif(bus.rready):
            m.d.sync += bus.rvalid.eq(0)

