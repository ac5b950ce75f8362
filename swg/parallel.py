"""Parallel-window sliding-window generator: line buffers and a register window, one window per word."""

from amaranth.hdl import Cat, Const, Module, Signal, unsigned
from amaranth.lib.memory import Memory

from layers.datapath import StreamLayer, wrapping_increment
from swg.spec import SHIFT_REGISTER_MAX

__all__ = ["SlidingWindowRegisters"]



class SlidingWindowRegisters(StreamLayer):
    """ConvolutionInputGenerator, parallel-window style: one input word per cycle, whole windows out.

    Members
    -------
    i : In(stream.Signature(spec.in_width))
    o : Out(stream.Signature(spec.out_width))

    The input runs through one delay line of ``spec.window_span`` words with a tap at each kernel
    position's distance from the window's bottom-right word: registers where taps are close, line
    buffers (circular memories, ``ram_style``) across the rest of a row. When the word just accepted is
    the bottom-right word of a window (the right row and column for the stride and dilation), the taps
    hold that window and it is emitted as one word, kernel position 0 (top-left) at the LSB.

    So the layer consumes one word per cycle whatever the stride (``spec.exp_cycles`` = input words per
    frame), frames follow each other without a gap, and the output is at most one word per input word.
    A window stays on ``o`` until taken; meanwhile the delay line is frozen. ``i.ready`` is
    ``~o.valid | o.ready`` (one gate from ``o.ready``; see ``elaborate``).
    """

    def __init__(self, spec):
        if not spec.parallel_window:
            raise ValueError("SlidingWindowRegisters is the parallel_window style; use SlidingWindowBuffer")
        super().__init__(spec)

    def elaborate(self, platform):
        spec = self._spec
        m = Module()
        # The taps are the output register: a window stays on ``o`` until taken, and the line moves
        # when the output is free or being taken. A skid buffer would break the o.ready -> i.ready
        # path but costs a whole window of flip-flops (and a window-wide mux); the stitched design's
        # FIFO in front of the consumer breaks it instead.
        shift = Signal()
        m.d.comb += [self.i.ready.eq(~self.o.valid | self.o.ready), shift.eq(self.i.valid & self.i.ready)]

        kh, kw = spec.kernel
        delays = spec.tap_delays()
        taps = self._delay_line(m, shift, sorted(set(delays.values())))
        m.d.comb += self.o.payload.eq(Cat(taps[delays[ky, kx]] for ky in range(kh) for kx in range(kw)))

        # Is the word just accepted the bottom-right word of a window? Per-row and per-column tables.
        (h, w), (oh, ow), (sh, sw) = spec.ifm_dim, spec.ofm_dim, spec.stride
        reach = [d * (k - 1) for d, k in zip(spec.dilation, spec.kernel)]
        row_ends = [y >= reach[0] and (y - reach[0]) % sh == 0 and (y - reach[0]) // sh < oh for y in range(h)]
        col_ends = [x >= reach[1] and (x - reach[1]) % sw == 0 and (x - reach[1]) // sw < ow for x in range(w)]
        y, x, cf = Signal(range(h), name="y"), Signal(range(w), name="x"), Signal(range(spec.cf), name="cf")
        with m.If(shift):
            m.d.sync += cf.eq(wrapping_increment(cf, spec.cf))
            with m.If(cf == spec.cf - 1):
                m.d.sync += x.eq(wrapping_increment(x, w))
                with m.If(x == w - 1):
                    m.d.sync += y.eq(wrapping_increment(y, h))
        row_mask = Const(sum(1 << k for k, v in enumerate(row_ends) if v), h)
        col_mask = Const(sum(1 << k for k, v in enumerate(col_ends) if v), w)
        window_end = row_mask.bit_select(y, 1) & col_mask.bit_select(x, 1)
        with m.If(shift):
            m.d.sync += self.o.valid.eq(window_end)
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        return m

    def _delay_line(self, m, shift, delays):
        """{delay: signal holding the input word from ``delay`` accepted words ago} for each tap delay.

        Each signal holds its value between shifts. A gap of g words between taps is a register chain
        (small g) or a memory of g - 1 words read and written at the same address (non-transparent),
        whose read register is the next tap.
        """
        spec = self._spec
        width = spec.in_width
        attrs = {} if spec.ram_style == "auto" else {"ram_style": spec.ram_style}
        head = Signal(width, name="tap0", reset_less=True)
        with m.If(shift):
            m.d.sync += head.eq(self.i.payload)
        taps, prev, prev_delay = {0: head}, head, 0
        for delay in delays:
            gap = delay - prev_delay
            if gap == 0:
                continue
            if gap <= SHIFT_REGISTER_MAX:
                for k in range(gap):
                    reg = Signal(width, name=f"tap{prev_delay + k + 1}", reset_less=True)
                    with m.If(shift):
                        m.d.sync += reg.eq(prev)
                    prev = reg
            else:
                mem = Memory(shape=unsigned(width), depth=gap - 1, init=[], attrs=attrs)
                m.submodules[f"line{delay}"] = mem
                wr, rd = mem.write_port(), mem.read_port(domain="sync")
                pointer = Signal(range(gap - 1), name=f"line{delay}_at")
                with m.If(shift):
                    m.d.sync += pointer.eq(wrapping_increment(pointer, gap - 1))
                m.d.comb += [wr.addr.eq(pointer), rd.addr.eq(pointer), wr.data.eq(prev),
                             wr.en.eq(shift), rd.en.eq(shift)]
                prev = rd.data
            taps[delay], prev_delay = prev, delay
        return taps
