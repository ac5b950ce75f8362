"""The ``zynq`` shell: a stitched accelerator behind an AXI-Lite control block and an AXI DMA master.

:class:`ZynqShell` is everything but the processor, so it simulates on its own: its boundary is the
PS7's (an AXI-Lite slave for M_AXI_GP0, an AXI master for S_AXI_HP0, one clock and reset).
:class:`ZynqTop` instantiates the PS7 primitive directly (no block design), clocks the fabric from
FCLK_CLK0 and adapts GP0's AXI3 (IDs, single beats) to the control block.

Memory layout (DDR): frames back to back; each stream word takes ``word_bytes`` bytes, little endian
(its padded width rounded up to 1, 2, 4 or a multiple of 8 bytes). A batch of N frames reads
``N * in_frame_bytes`` from SRC and writes ``N * out_frame_bytes`` to DST (both rounded up to the
8-byte beat); addresses must be 8-byte aligned and the whole buffer inside the DDR window.

Registers (32 bit, byte addresses):

==== ============ ===================================================================================
0x00 CTRL (W)     bit 0 START (ignored while busy), bit 1 CLEAR (done/error), bit 2 RESET (accelerator)
0x04 STATUS (R)   bit 0 BUSY, bit 1 DONE, bit 2 ERROR; bits 11:8 error code (:data:`ERRORS`)
0x08 FRAMES (RW)  frames in the batch
0x0C SRC (RW)     input buffer address;  0x10 DST (RW): output buffer address
0x14 DONE (R)     frames the accelerator has finished in this batch
0x18 CYCLES (R)   cycles from START to the last write response (counting while busy)
0x1C IN_BYTES     bytes per input frame (R); 0x20 OUT_BYTES: per output frame (R)
0x24 MAGIC (R)    0x52544C47 ("RTLG")
==== ============ ===================================================================================

DMA: bursts of up to 16 beats of 8 bytes (AXI3 as HP0 takes them), never across a 4 KB boundary; up to 4
read bursts in flight (as many as the 64-beat read FIFO has room for) and up to 4 write bursts awaiting
their responses, so the DDR's latency is hidden and HP0 moves a beat a cycle each way; the gearboxes move a
stream word a cycle (words wider than a beat: one beat a cycle). A SLVERR/DECERR response ends the batch
with an error. :func:`boards.zynq_timing.shell_timing` is the analytic model of this data movement (cycles per
frame, latency).
"""

from amaranth.hdl import (Cat, ClockSignal, Const, Elaboratable, Instance, Module, Mux, ResetInserter, ResetSignal,
                          Signal)
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from memstream.axilite import OKAY, SLVERR, AXILiteSignature

__all__ = ["AXIMasterSignature", "ZynqShell", "ZynqTop", "ERRORS", "REGISTERS", "MAGIC", "word_bytes", "BEAT_BYTES"]

MAGIC = 0x52544C47
REGISTERS = {"CTRL": 0x00, "STATUS": 0x04, "FRAMES": 0x08, "SRC": 0x0C, "DST": 0x10, "DONE": 0x14,
             "CYCLES": 0x18, "IN_BYTES": 0x1C, "OUT_BYTES": 0x20, "MAGIC": 0x24}
ERRORS = {1: "zero frames", 2: "address not 8-byte aligned", 3: "buffer outside the DDR window",
          4: "AXI read error response", 5: "AXI write error response"}
BEAT_BYTES = 8
MAX_BURST = 16                      # AXI3 (HP0): AxLEN is 4 bits
READ_FIFO_DEPTH = 64                # beats: room for the 4 bursts in flight that hide ~50 cycles of DDR latency
WRITE_FIFO_DEPTH = 32               # beats: a burst being written and the next one gathering
MAX_WRITES = 4                      # write bursts awaiting their response
PYNQ_Z2_DDR = (0x0000_0000, 512 << 20)


def word_bytes(width):
    """Bytes one stream word of ``width`` bits takes in DDR: 1, 2, 4, 8 or a multiple of 8."""
    n = -(-width // 8)
    if n <= BEAT_BYTES:
        return 1 << (n - 1).bit_length()
    return -(-n // BEAT_BYTES) * BEAT_BYTES


class AXIMasterSignature(wiring.Signature):
    """AXI4 (AXI3-compatible: AxLEN < 16) manager, 32-bit addresses, ``data_width`` data; member names are
    the AXI ones in lower case."""

    def __init__(self, data_width=64, id_width=6):
        self.data_width, self.id_width = data_width, id_width
        super().__init__({
            "awid": Out(id_width), "awaddr": Out(32), "awlen": Out(8), "awsize": Out(3), "awburst": Out(2),
            "awcache": Out(4), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wlast": Out(1), "wvalid": Out(1),
            "wready": In(1),
            "bid": In(id_width), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "arid": Out(id_width), "araddr": Out(32), "arlen": Out(8), "arsize": Out(3), "arburst": Out(2),
            "arcache": Out(4), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
            "rid": In(id_width), "rdata": In(data_width), "rresp": In(2), "rlast": In(1), "rvalid": In(1),
            "rready": Out(1),
        })


class ZynqShell(wiring.Component):
    """The accelerator (Verilog module ``accelerator`` with FINN's ports), fed from and written back to
    memory by the DMA engines, under the control registers of the module docstring.

    Guarantees: a batch ends (DONE, or ERROR with a code) for every START, whatever the length or the
    addresses: bad ones are refused before any transfer; an error response stops new bursts and the
    batch ends once the outstanding one has completed. After a successful batch the accelerator holds
    no data (it consumed and produced whole frames); after an AXI error, write CTRL.RESET before the
    next START (it resets the accelerator and the DMA FIFOs).

    Members
    -------
    s_axi_control : In(AXILiteSignature(6))
    m_axi_hp0 : Out(AXIMasterSignature(64))
    """

    def __init__(self, *, in_width, out_width, in_words_per_frame, out_words_per_frame,
                 accelerator="finn_design_wrapper", ddr=PYNQ_Z2_DDR):
        self.in_width, self.out_width = in_width, out_width
        self.in_word_bytes, self.out_word_bytes = word_bytes(in_width), word_bytes(out_width)
        self.in_words_per_frame, self.out_words_per_frame = in_words_per_frame, out_words_per_frame
        self.in_frame_bytes = in_words_per_frame * self.in_word_bytes
        self.out_frame_bytes = out_words_per_frame * self.out_word_bytes
        self.accelerator, self.ddr = accelerator, ddr
        super().__init__({"s_axi_control": In(AXILiteSignature(6)), "m_axi_hp0": Out(AXIMasterSignature(64))})

    def elaborate(self, platform):
        m = Module()
        regs = _Registers()
        start, clear, soft_reset = Signal(), Signal(), Signal()
        self._control(m, regs, start, clear, soft_reset)

        busy, done, error, code = regs.busy, regs.done, regs.error, regs.code
        in_beats, out_beats = Signal(32), Signal(32)
        in_words, out_words = Signal(32), Signal(32)

        # ---- the accelerator and its streams ----
        s_data, s_valid, s_ready = Signal(-(-self.in_width // 8) * 8), Signal(), Signal()
        m_data, m_valid, m_ready = Signal(-(-self.out_width // 8) * 8), Signal(), Signal()
        accel_reset = Signal()
        m.d.sync += accel_reset.eq(soft_reset)
        m.submodules.accelerator = Instance(
            self.accelerator, i_ap_clk=ClockSignal("sync"), i_ap_rst_n=~(ResetSignal("sync") | accel_reset),
            i_s_axis_0_tdata=s_data, i_s_axis_0_tvalid=s_valid, o_s_axis_0_tready=s_ready,
            o_m_axis_0_tdata=m_data, o_m_axis_0_tvalid=m_valid, i_m_axis_0_tready=m_ready)

        # ---- start: check the request, size the transfers ----
        frames = regs.frames
        in_bytes = Signal(64)
        out_bytes = Signal(64)
        m.d.comb += [in_bytes.eq(frames * self.in_frame_bytes), out_bytes.eq(frames * self.out_frame_bytes)]
        base, size = self.ddr
        end = base + size

        def outside(addr, nbytes):
            return (addr < base) | (addr + nbytes > end)

        read_error, write_error = Signal(), Signal()
        reader_idle, writer_idle = Signal(), Signal()
        with m.If(clear & ~busy):
            m.d.sync += [done.eq(0), error.eq(0), code.eq(0)]
        with m.If(start & ~busy):
            m.d.sync += [done.eq(0), error.eq(0), code.eq(0), regs.frames_done.eq(0), regs.cycles.eq(0)]
            with m.If(frames == 0):
                m.d.sync += [error.eq(1), done.eq(1), code.eq(1)]
            with m.Elif((regs.src | regs.dst)[:3] != 0):
                m.d.sync += [error.eq(1), done.eq(1), code.eq(2)]
            with m.Elif(outside(regs.src, in_bytes) | outside(regs.dst, out_bytes)):
                m.d.sync += [error.eq(1), done.eq(1), code.eq(3)]
            with m.Else():
                m.d.sync += [busy.eq(1), in_beats.eq((in_bytes + BEAT_BYTES - 1) >> 3),
                             out_beats.eq((out_bytes + BEAT_BYTES - 1) >> 3),
                             in_words.eq(frames * self.in_words_per_frame),
                             out_words.eq(frames * self.out_words_per_frame)]
        launch = Signal()
        m.d.sync += launch.eq(start & ~busy & (frames != 0) & ((regs.src | regs.dst)[:3] == 0) &
                              ~outside(regs.src, in_bytes) & ~outside(regs.dst, out_bytes))
        with m.If(busy):
            m.d.sync += regs.cycles.eq(regs.cycles + 1)
            with m.If(~launch & reader_idle & writer_idle):
                m.d.sync += [busy.eq(0), done.eq(1)]
                with m.If(read_error):
                    m.d.sync += [error.eq(1), code.eq(4)]
                with m.Elif(write_error):
                    m.d.sync += [error.eq(1), code.eq(5)]

        bus = self.m_axi_hp0
        m.d.comb += [bus.awid.eq(0), bus.arid.eq(0), bus.awsize.eq(3), bus.arsize.eq(3), bus.awburst.eq(1),
                     bus.arburst.eq(1), bus.awcache.eq(0b0011), bus.arcache.eq(0b0011)]

        # ---- read engine: bursts into a beat FIFO, beats -> words -> s_axis_0 ----
        rfifo = SyncFIFOBuffered(width=64, depth=READ_FIFO_DEPTH)
        m.submodules.rfifo = ResetInserter(accel_reset)(rfifo)
        self._reader(m, bus, launch, regs.src, in_beats, rfifo, read_error, write_error, reader_idle)
        self._beats_to_words(m, launch, rfifo, in_words, s_data, s_valid, s_ready)

        # ---- write engine: m_axis_0 words -> beats (with strobes) -> bursts ----
        wfifo = SyncFIFOBuffered(width=64 + 8, depth=WRITE_FIFO_DEPTH)
        m.submodules.wfifo = ResetInserter(accel_reset)(wfifo)
        self._words_to_beats(m, launch, out_words, m_data, m_valid, m_ready, wfifo, regs)
        self._writer(m, bus, launch, regs.dst, out_beats, wfifo, read_error, write_error, writer_idle)
        return m

    # ---- control registers ----
    def _control(self, m, regs, start, clear, soft_reset):
        bus = self.s_axi_control
        # writes: AW and W together, one at a time
        accept = bus.awvalid & bus.wvalid & ~bus.bvalid
        m.d.comb += [bus.awready.eq(accept), bus.wready.eq(accept)]
        offset = bus.awaddr[2:6]
        writable = {REGISTERS["FRAMES"] >> 2: regs.frames, REGISTERS["SRC"] >> 2: regs.src,
                    REGISTERS["DST"] >> 2: regs.dst}
        legal_write = Signal()
        m.d.comb += legal_write.eq((offset == 0) | (offset == 2) | (offset == 3) | (offset == 4))
        with m.If(accept):
            m.d.sync += [bus.bvalid.eq(1), bus.bresp.eq(Mux(legal_write, OKAY, SLVERR))]
            with m.Switch(offset):
                with m.Case(0):
                    m.d.comb += [start.eq(bus.wdata[0]), clear.eq(bus.wdata[1])]
                    m.d.sync += soft_reset.eq(bus.wdata[2])
                for index, reg in writable.items():
                    with m.Case(index):
                        with m.If(~regs.busy):
                            m.d.sync += reg.eq(bus.wdata)
        with m.Elif(bus.bready):
            m.d.sync += bus.bvalid.eq(0)
        with m.If(~accept):
            m.d.sync += soft_reset.eq(0)
        # reads: one at a time
        take = bus.arvalid & ~bus.rvalid
        m.d.comb += bus.arready.eq(take)
        values = {
            REGISTERS["STATUS"]: Cat(regs.busy, regs.done, regs.error, Const(0, 5), regs.code),
            REGISTERS["FRAMES"]: regs.frames, REGISTERS["SRC"]: regs.src, REGISTERS["DST"]: regs.dst,
            REGISTERS["DONE"]: regs.frames_done, REGISTERS["CYCLES"]: regs.cycles,
            REGISTERS["IN_BYTES"]: Const(self.in_frame_bytes, 32),
            REGISTERS["OUT_BYTES"]: Const(self.out_frame_bytes, 32), REGISTERS["MAGIC"]: Const(MAGIC, 32),
        }
        with m.If(take):
            m.d.sync += [bus.rvalid.eq(1), bus.rresp.eq(SLVERR), bus.rdata.eq(0)]
            with m.Switch(bus.araddr[2:6]):
                for address, value in values.items():
                    with m.Case(address >> 2):
                        m.d.sync += [bus.rdata.eq(value), bus.rresp.eq(OKAY)]
        with m.Elif(bus.rready):
            m.d.sync += bus.rvalid.eq(0)

    # ---- DMA engines ----
    @staticmethod
    def _burst_beats(addr, beats_left):
        """Beats of the next burst: at most 16, what is left, and not past the next 4 KB boundary."""
        to_boundary = (4096 - addr[:12]) >> 3
        first = Mux(beats_left < MAX_BURST, beats_left, MAX_BURST)
        return Mux(to_boundary < first, to_boundary, first)

    def _reader(self, m, bus, launch, src, beats, fifo, read_error, write_error, idle):
        """Read bursts, several in flight: a burst is asked for while the beat FIFO has room for it on top
        of every beat still to arrive, so R never waits on the accelerator and the DDR's latency is hidden
        behind the bursts already asked for (:data:`READ_FIFO_DEPTH` beats: up to 4 bursts of 16)."""
        addr, left, burst = Signal(32), Signal(32), Signal(5)
        arvalid = Signal()
        outstanding = Signal(range(READ_FIFO_DEPTH + MAX_BURST + 1))   # beats asked for, not yet arrived
        m.d.comb += idle.eq(~arvalid & (outstanding == 0) & ((left == 0) | read_error | write_error))
        with m.If(launch):
            m.d.sync += [addr.eq(src), left.eq(beats), read_error.eq(0)]
        n = self._burst_beats(addr, left)
        room = fifo.level + outstanding <= READ_FIFO_DEPTH - MAX_BURST
        ask = ~arvalid & (left != 0) & ~read_error & ~write_error & ~launch & room
        arrive = bus.rvalid & bus.rready
        with m.If(ask):
            m.d.sync += [arvalid.eq(1), burst.eq(n)]
        m.d.sync += outstanding.eq(outstanding + Mux(ask, n, 0) - arrive)
        m.d.comb += [bus.araddr.eq(addr), bus.arlen.eq(burst - 1), bus.arvalid.eq(arvalid)]
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [arvalid.eq(0), addr.eq(addr + (burst << 3)), left.eq(left - burst)]
        # after an error response the rest of the bursts in flight is taken and dropped
        m.d.comb += [bus.rready.eq(fifo.w_rdy | read_error), fifo.w_data.eq(bus.rdata),
                     fifo.w_en.eq(arrive & ~read_error)]
        with m.If(arrive & bus.rresp[1]):
            m.d.sync += read_error.eq(1)

    def _writer(self, m, bus, launch, dst, beats, fifo, read_error, write_error, idle):
        """Write bursts of beats already in the FIFO (so W never waits), the next burst's address and data
        while earlier ones still wait for their responses (up to :data:`MAX_WRITES` of them)."""
        addr, left, burst = Signal(32), Signal(32), Signal(5)
        phase = Signal(2)                       # 0 idle, 1 address, 2 data
        sent = Signal(5)
        pending = Signal(range(MAX_WRITES + 1))     # bursts written, response not yet received
        m.d.comb += idle.eq((phase == 0) & (pending == 0) & ((left == 0) | read_error | write_error))
        with m.If(launch):
            m.d.sync += [addr.eq(dst), left.eq(beats), write_error.eq(0)]
        n = self._burst_beats(addr, left)
        with m.If((phase == 0) & (left != 0) & ~read_error & ~write_error & ~launch & (fifo.level >= n) &
                  (pending < MAX_WRITES)):
            m.d.sync += [phase.eq(1), burst.eq(n), sent.eq(0)]
        m.d.comb += [bus.awaddr.eq(addr), bus.awlen.eq(burst - 1), bus.awvalid.eq(phase == 1)]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += phase.eq(2)
        m.d.comb += [bus.wdata.eq(fifo.r_data[:64]), bus.wstrb.eq(fifo.r_data[64:]),
                     bus.wlast.eq(sent == burst - 1), bus.wvalid.eq((phase == 2) & fifo.r_rdy),
                     fifo.r_en.eq(bus.wvalid & bus.wready)]
        written = bus.wvalid & bus.wready & bus.wlast
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += sent.eq(sent + 1)
            with m.If(bus.wlast):
                m.d.sync += [phase.eq(0), addr.eq(addr + (burst << 3)), left.eq(left - burst)]
        m.d.comb += bus.bready.eq(pending != 0)
        answered = bus.bvalid & bus.bready
        m.d.sync += pending.eq(pending + written - answered)
        with m.If(answered & bus.bresp[1]):
            m.d.sync += write_error.eq(1)

    # ---- gearboxes ----
    def _beats_to_words(self, m, launch, fifo, words, s_data, s_valid, s_ready):
        """64-bit beats -> words of ``in_word_bytes``; the beats' tail after the batch's last word is
        dropped."""
        nb = self.in_word_bytes
        left = Signal(32)
        with m.If(launch):
            m.d.sync += left.eq(words)
        fire = s_valid & s_ready
        with m.If(fire):
            m.d.sync += left.eq(left - 1)
        if nb <= BEAT_BYTES:
            per_beat = BEAT_BYTES // nb
            index = Signal(range(per_beat))
            lanes = [fifo.r_data[k * nb * 8:(k + 1) * nb * 8] for k in range(per_beat)]
            word = Signal(nb * 8)
            with m.Switch(index):
                for k, lane in enumerate(lanes):
                    with m.Case(k):
                        m.d.comb += word.eq(lane)
            last_of_beat = (index == per_beat - 1) | (left == 1)
            m.d.comb += [s_valid.eq(fifo.r_rdy & (left != 0)), s_data.eq(word[:len(s_data)]),
                         fifo.r_en.eq(fire & last_of_beat | fifo.r_rdy & (left == 0))]
            with m.If(launch):
                m.d.sync += index.eq(0)
            with m.Elif(fire):
                m.d.sync += index.eq(Mux(last_of_beat, 0, index + 1))
        else:
            per_word = nb // BEAT_BYTES
            gathered = Signal(nb * 8)
            count = Signal(range(per_word + 1))
            full = count == per_word
            # a word every per_word cycles: the next word's first beat enters as the full word leaves
            m.d.comb += [s_valid.eq(full & (left != 0)), s_data.eq(gathered[:len(s_data)]),
                         fifo.r_en.eq(~full | fire)]
            beat = fifo.r_en & fifo.r_rdy
            shifted = Cat(gathered[64:], fifo.r_data)
            with m.If(launch):
                m.d.sync += count.eq(0)
            with m.Elif(fire):
                with m.If(beat & (left != 1)):
                    m.d.sync += [gathered.eq(shifted), count.eq(1)]
                with m.Else():
                    m.d.sync += count.eq(0)
            with m.Elif(beat & (left != 0)):                        # with no word left: drop the beat
                m.d.sync += [gathered.eq(shifted), count.eq(count + 1)]

    def _words_to_beats(self, m, launch, words, m_data, m_valid, m_ready, fifo, regs):
        """m_axis_0 words -> 64-bit beats with byte strobes into ``fifo`` (data, strobe); the batch's last
        beat may be partial. Counts finished frames into ``regs.frames_done``."""
        nb = self.out_word_bytes
        left = Signal(32)
        in_frame = Signal(range(self.out_words_per_frame))
        with m.If(launch):
            m.d.sync += [left.eq(words), in_frame.eq(0)]
        fire = m_valid & m_ready
        with m.If(fire):
            m.d.sync += left.eq(left - 1)
            with m.If(in_frame == self.out_words_per_frame - 1):
                m.d.sync += [in_frame.eq(0), regs.frames_done.eq(regs.frames_done + 1)]
            with m.Else():
                m.d.sync += in_frame.eq(in_frame + 1)
        word = Signal(nb * 8)
        m.d.comb += word.eq(m_data)
        if nb <= BEAT_BYTES:
            per_beat = BEAT_BYTES // nb
            beat, strobe = Signal(64), Signal(8)
            index = Signal(range(per_beat))
            last = (index == per_beat - 1) | (left == 1)
            m.d.comb += m_ready.eq(fifo.w_rdy & (left != 0))
            new_beat, new_strobe = Signal(64), Signal(8)
            with m.Switch(index):
                for k in range(per_beat):
                    with m.Case(k):
                        m.d.comb += [new_beat.eq(beat | (word << (k * nb * 8))),
                                     new_strobe.eq(strobe | (((1 << nb) - 1) << (k * nb)))]
            m.d.comb += [fifo.w_data.eq(Cat(new_beat, new_strobe)), fifo.w_en.eq(fire & last)]
            with m.If(launch):
                m.d.sync += [index.eq(0), beat.eq(0), strobe.eq(0)]
            with m.Elif(fire):
                m.d.sync += [index.eq(Mux(last, 0, index + 1)), beat.eq(Mux(last, 0, new_beat)),
                             strobe.eq(Mux(last, 0, new_strobe))]
        else:
            per_word = nb // BEAT_BYTES
            held, count = Signal(nb * 8), Signal(range(per_word + 1))
            # a word every per_word cycles: the next word is taken as the last beat of this one leaves
            m.d.comb += m_ready.eq(((count == 0) | (count == 1) & fifo.w_rdy) & (left != 0))
            m.d.comb += [fifo.w_data.eq(Cat(held[:64], Const(0xFF, 8))), fifo.w_en.eq(count != 0)]
            with m.If(launch):
                m.d.sync += count.eq(0)
            with m.Elif(fire):
                m.d.sync += [held.eq(word), count.eq(per_word)]
            with m.Elif(fifo.w_en & fifo.w_rdy):
                m.d.sync += [held.eq(held >> 64), count.eq(count - 1)]


class _Registers:
    def __init__(self):
        self.busy, self.done, self.error, self.code = Signal(), Signal(), Signal(), Signal(4)
        self.frames, self.src, self.dst = Signal(32), Signal(32), Signal(32)
        self.frames_done, self.cycles = Signal(32), Signal(32)


class ZynqTop(Elaboratable):
    """:class:`ZynqShell` wired to the PS7 primitive: FCLK_CLK0 (through a BUFG) clocks the fabric and
    FCLK_RESET0_N resets it; M_AXI_GP0 (AXI3, single-beat CPU accesses) drives the control block with
    its IDs echoed; the DMA master is S_AXI_HP0 (64 bit). The accelerator's Verilog is added to the
    platform's sources."""

    def __init__(self, shell, accelerator_verilog):
        self.shell, self.verilog = shell, accelerator_verilog

    def elaborate(self, platform):
        from amaranth.hdl import ClockDomain

        m = Module()
        if platform is not None:
            platform.add_file("accelerator.v", self.verilog)
        m.domains.sync = ClockDomain("sync")
        m.submodules.shell = shell = self.shell
        fclk, fclk_resetn = Signal(4), Signal(4)
        m.submodules.bufg = Instance("BUFG", i_I=fclk[0], o_O=ClockSignal("sync"))
        reset_sync = Signal(2, init=0b11)
        m.d.sync += reset_sync.eq(Cat(~fclk_resetn[0], reset_sync[0]))
        m.d.comb += ResetSignal("sync").eq(reset_sync[1])

        ctl, hp = shell.s_axi_control, shell.m_axi_hp0
        awid, arid = Signal(12), Signal(12)
        gp_awid, gp_arid = Signal(12), Signal(12)
        with m.If(ctl.awvalid & ctl.awready):
            m.d.sync += awid.eq(gp_awid)
        with m.If(ctl.arvalid & ctl.arready):
            m.d.sync += arid.eq(gp_arid)
        gp = dict(
            i_MAXIGP0ACLK=ClockSignal("sync"),
            o_MAXIGP0AWADDR=Signal(32, name="gp0_awaddr"), o_MAXIGP0AWVALID=ctl.awvalid, i_MAXIGP0AWREADY=ctl.awready,
            o_MAXIGP0AWID=gp_awid, o_MAXIGP0WDATA=ctl.wdata, o_MAXIGP0WSTRB=ctl.wstrb,
            o_MAXIGP0WVALID=ctl.wvalid, i_MAXIGP0WREADY=ctl.wready,
            i_MAXIGP0BID=awid, i_MAXIGP0BRESP=ctl.bresp, i_MAXIGP0BVALID=ctl.bvalid, o_MAXIGP0BREADY=ctl.bready,
            o_MAXIGP0ARADDR=Signal(32, name="gp0_araddr"), o_MAXIGP0ARVALID=ctl.arvalid,
            i_MAXIGP0ARREADY=ctl.arready, o_MAXIGP0ARID=gp_arid,
            i_MAXIGP0RDATA=ctl.rdata, i_MAXIGP0RID=arid, i_MAXIGP0RRESP=ctl.rresp, i_MAXIGP0RLAST=1,
            i_MAXIGP0RVALID=ctl.rvalid, o_MAXIGP0RREADY=ctl.rready,
        )
        m.d.comb += [ctl.awaddr.eq(gp["o_MAXIGP0AWADDR"][:6]), ctl.araddr.eq(gp["o_MAXIGP0ARADDR"][:6])]
        hp_ports = dict(
            i_SAXIHP0ACLK=ClockSignal("sync"),
            i_SAXIHP0AWID=hp.awid, i_SAXIHP0AWADDR=hp.awaddr, i_SAXIHP0AWLEN=hp.awlen[:4],
            i_SAXIHP0AWSIZE=hp.awsize, i_SAXIHP0AWBURST=hp.awburst, i_SAXIHP0AWCACHE=hp.awcache,
            i_SAXIHP0AWPROT=hp.awprot, i_SAXIHP0AWLOCK=0, i_SAXIHP0AWQOS=0,
            i_SAXIHP0AWVALID=hp.awvalid, o_SAXIHP0AWREADY=hp.awready,
            i_SAXIHP0WID=hp.awid, i_SAXIHP0WDATA=hp.wdata, i_SAXIHP0WSTRB=hp.wstrb, i_SAXIHP0WLAST=hp.wlast,
            i_SAXIHP0WVALID=hp.wvalid, o_SAXIHP0WREADY=hp.wready,
            o_SAXIHP0BID=hp.bid, o_SAXIHP0BRESP=hp.bresp, o_SAXIHP0BVALID=hp.bvalid, i_SAXIHP0BREADY=hp.bready,
            i_SAXIHP0ARID=hp.arid, i_SAXIHP0ARADDR=hp.araddr, i_SAXIHP0ARLEN=hp.arlen[:4],
            i_SAXIHP0ARSIZE=hp.arsize, i_SAXIHP0ARBURST=hp.arburst, i_SAXIHP0ARCACHE=hp.arcache,
            i_SAXIHP0ARPROT=hp.arprot, i_SAXIHP0ARLOCK=0, i_SAXIHP0ARQOS=0,
            i_SAXIHP0ARVALID=hp.arvalid, o_SAXIHP0ARREADY=hp.arready,
            o_SAXIHP0RID=hp.rid, o_SAXIHP0RDATA=hp.rdata, o_SAXIHP0RRESP=hp.rresp, o_SAXIHP0RLAST=hp.rlast,
            o_SAXIHP0RVALID=hp.rvalid, i_SAXIHP0RREADY=hp.rready,
            i_SAXIHP0RDISSUECAP1EN=0, i_SAXIHP0WRISSUECAP1EN=0,
        )
        m.submodules.ps7 = Instance("PS7", o_FCLKCLK=fclk, o_FCLKRESETN=fclk_resetn, **gp, **hp_ports)
        return m
