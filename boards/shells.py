"""Shells: top-level wrappers that put a stitched accelerator on a board.

``standalone`` (:class:`SelfTest` + :class:`StandaloneTop`): a built-in self-test that needs no processor.
Input words and the words the accelerator must answer with sit in ROMs; the frames stream in a loop,
every output word is compared with its expected word, and LEDs show the result: the first bitstream to
try on a new board. The ``zynq`` shell (PS7, AXI-Lite control, AXI DMA) is not written yet.

The accelerator enters as Verilog text (``finn_design_wrapper`` with FINN's ports) through an
``Instance``; the shell adds its file to the platform.
"""

from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, Instance, Module, Mux, ResetSignal, Signal
from amaranth.lib import io, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import Out

__all__ = ["SelfTest", "StandaloneTop"]

HEARTBEAT_BIT = 24          # led 0 toggles every 2**24 cycles: ~3.7 Hz at 125 MHz


class SelfTest(wiring.Component):
    """Stream ``in_words`` into the accelerator forever (frame after frame, wrapping) and check every word
    it emits against ``expected_words`` (also wrapping), ``out_per_frame`` words a frame.

    Guarantees: ``s_axis_0`` follows AXI-Stream (a word is held until taken); ``m_axis_0_tready`` is always
    high, so the accelerator never stalls on the shell; ``failed`` latches on the first mismatch and
    stays until reset; ``frames`` counts frames whose last word arrived; ``passed`` = at least one frame
    and no mismatch. ``leds``: 0 heartbeat, 1 passed, 2 failed, 3 frame activity (bit 4 of ``frames``);
    ``rgb``: (r, g, b) = (failed, passed, 0). ``expected_words=None`` (``rtlgen build --no-self-test``): no
    expected words and no check: ``frames`` counts, ``passed`` and ``failed`` stay low.

    Members
    -------
    leds : Out(4)
    rgb : Out(3)
    passed, failed : Out(1)
    frames : Out(32)
    """

    def __init__(self, *, in_words, in_width, expected_words, out_width, out_per_frame,
                 accelerator="finn_design_wrapper"):
        if not in_words or expected_words is not None and not expected_words:
            raise ValueError("the self-test needs input words and expected words")
        if expected_words is not None and len(expected_words) % out_per_frame:
            raise ValueError(f"{len(expected_words)} expected words are not whole frames of {out_per_frame}")
        self._in = [int(w) for w in in_words]
        self._expected = None if expected_words is None else [int(w) for w in expected_words]
        self._in_width, self._out_width, self._per_frame = in_width, out_width, out_per_frame
        self._accelerator = accelerator
        super().__init__({"leds": Out(4), "rgb": Out(3), "passed": Out(1), "failed": Out(1), "frames": Out(32)})

    def elaborate(self, platform):
        m = Module()
        s_data, s_valid, s_ready = Signal(self._in_width), Signal(), Signal()
        m_data, m_valid = Signal(self._out_width), Signal()
        m.submodules.accelerator = Instance(
            self._accelerator, i_ap_clk=ClockSignal("sync"), i_ap_rst_n=~ResetSignal("sync"),
            i_s_axis_0_tdata=s_data, i_s_axis_0_tvalid=s_valid, o_s_axis_0_tready=s_ready,
            o_m_axis_0_tdata=m_data, o_m_axis_0_tvalid=m_valid, i_m_axis_0_tready=1)

        # source: a registered read port is the output register; it loads whenever it is empty or taken
        m.submodules.inputs = inputs = Memory(shape=self._in_width, depth=len(self._in), init=self._in)
        rd = inputs.read_port(domain="sync")
        addr = Signal(range(len(self._in)))
        load = ~s_valid | s_ready
        m.d.comb += [rd.addr.eq(addr), rd.en.eq(load), s_data.eq(rd.data)]
        with m.If(load):
            m.d.sync += [s_valid.eq(1), addr.eq(Mux(addr == len(self._in) - 1, 0, addr + 1))]

        in_frame = Signal(range(self._per_frame))
        if self._expected is not None:
            self._check(m, m_data, m_valid)
        with m.If(m_valid):
            with m.If(in_frame == self._per_frame - 1):
                m.d.sync += [in_frame.eq(0), self.frames.eq(self.frames + 1)]
            with m.Else():
                m.d.sync += in_frame.eq(in_frame + 1)

        heartbeat = Signal(HEARTBEAT_BIT + 1)
        m.d.sync += heartbeat.eq(heartbeat + 1)
        m.d.comb += [
            self.passed.eq((self.frames != 0) & ~self.failed if self._expected is not None else 0),
            self.leds.eq(heartbeat[-1] | (self.passed << 1) | (self.failed << 2) | (self.frames[4] << 3)),
            self.rgb.eq(self.failed | (self.passed << 1)),
        ]
        return m

    def _check(self, m, m_data, m_valid):
        """The sink: the expected word of the next output is always in the read port's register."""
        m.submodules.expected = expected = Memory(shape=self._out_width, depth=len(self._expected),
                                                  init=self._expected)
        ex = expected.read_port(domain="sync")
        k = Signal(range(len(self._expected)))
        k_next = Mux(k == len(self._expected) - 1, 0, k + 1)
        m.d.comb += [ex.en.eq(1), ex.addr.eq(Mux(m_valid, k_next, k))]
        with m.If(m_valid):
            m.d.sync += k.eq(k_next)
            with m.If(m_data != ex.data):
                m.d.sync += self.failed.eq(1)


class StandaloneTop(Elaboratable):
    """:class:`SelfTest` on a board: LEDs 0-3 and RGB LED 0 show it, button 0 resets it (so does power-on);
    the accelerator's Verilog is added to the platform's sources. Runs on the board's 125 MHz clock."""

    def __init__(self, selftest, accelerator_verilog):
        self.selftest, self.verilog = selftest, accelerator_verilog

    def elaborate(self, platform):
        m = Module()
        platform.add_file("accelerator.v", self.verilog)
        # our own "sync": the 125 MHz pin through a BUFG, reset by a power-on counter or button 0
        m.domains.sync = ClockDomain("sync")
        m.domains.por = ClockDomain("por", reset_less=True)
        clk = self._buffer(m, "i", platform.request(platform.default_clk, 0, dir="-"), "clk_buf")
        m.submodules.bufg = Instance("BUFG", i_I=clk, o_O=ClockSignal("por"))
        por = Signal(4)             # reset-less, starts at 0 (FPGA configuration)
        with m.If(~por.all()):
            m.d.por += por.eq(por + 1)
        button = self._buffer(m, "i", platform.request("button", 0, dir="-"), "button_buf")
        m.d.comb += [ClockSignal("sync").eq(ClockSignal("por")), ResetSignal("sync").eq(~por.all() | button)]
        m.submodules.selftest = self.selftest
        for n in range(4):
            m.d.comb += self._buffer(m, "o", platform.request("led", n, dir="-"), f"led{n}_buf").eq(
                self.selftest.leds[n])
        rgb = platform.request("rgb_led", 0, dir="-")
        for k, color in enumerate("rgb"):
            m.d.comb += self._buffer(m, "o", getattr(rgb, color), f"rgb_{color}_buf").eq(self.selftest.rgb[k])
        return m

    @staticmethod
    def _buffer(m, direction, port, name):
        """An ``amaranth.lib.io.Buffer`` on a board pin; its ``i`` or ``o``."""
        m.submodules[name] = buffer = io.Buffer(direction, port)
        return buffer.i if direction == "i" else buffer.o
