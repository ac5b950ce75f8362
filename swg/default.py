"""Default-style sliding-window generator: a circular buffer of input words and a window-read controller."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib.memory import Memory

from layers.datapath import StreamLayer, output_stage

__all__ = ["SlidingWindowBuffer"]


class SlidingWindowBuffer(StreamLayer):
    """ConvolutionInputGenerator, default style: one output word (SIMD channels) per cycle.

    Members
    -------
    i : In(stream.Signature(spec.in_width))
    o : Out(stream.Signature(spec.out_width))

    Input words are written into a circular buffer of ``spec.buffer_words`` words in arrival order;
    a controller walks the windows (pixel row-major; inside a window ky, kx, cf, or cf, ky, kx when
    depthwise) and reads each element's word. Both sides count words on one running index (modulo a
    power of two larger than a frame plus the buffer), so the rules are comparisons:

    - the reader issues element ``n`` once word ``n`` has been written;
    - the writer accepts word ``n`` while ``n < top-left of the current window + buffer_words``, so
      nothing the current or a later window needs is overwritten.

    Frames follow each other on the same index, so trailing rows and columns are consumed and the next
    frame's first window fills while the last one is read. ``i.ready`` depends on registers only; a
    stalled output freezes the read pipeline (memory read enable included) and nothing is lost.
    Steady-state cycles per frame are ``spec.exp_cycles``.
    """

    def __init__(self, spec):
        if spec.parallel_window:
            raise ValueError("SlidingWindowBuffer is the default style; use SlidingWindowRegisters for parallel_window")
        super().__init__(spec)

    def elaborate(self, platform):
        spec = self._spec
        m = Module()
        depth = spec.buffer_words
        frame = spec.in_words
        index_bits = (frame + depth).bit_length() + 2     # wrap-around compares need |difference| < 2^(bits-1)
        index = unsigned(index_bits)

        attrs = {} if spec.ram_style == "auto" else {"ram_style": spec.ram_style}
        m.submodules.buffer = buf = Memory(shape=unsigned(spec.in_width), depth=depth, init=[], attrs=attrs)
        wr = buf.write_port()
        rd = buf.read_port(domain="sync")

        def ahead(a, b, name):
            """a > b on the running index (wrap-around): a - b, taken modulo 2^bits, is in (0, 2^(bits-1))."""
            diff = Signal(index, name=name)
            m.d.comb += diff.eq(a - b)
            return ~diff[-1] & (diff != 0)

        def step_mod_depth(addr, step):
            nxt = addr + step % depth
            return Mux(nxt >= depth, nxt - depth, nxt)

        # --- writer ---
        written = Signal(index)                 # running index of the next word to write
        waddr = Signal(range(depth))
        top_left = Signal(index)                # running index of the current window's top-left word
        m.d.comb += self.i.ready.eq(ahead(top_left + depth, written, "room"))
        m.d.comb += [wr.addr.eq(waddr), wr.data.eq(self.i.payload), wr.en.eq(self.i.valid & self.i.ready)]
        with m.If(wr.en):
            m.d.sync += [written.eq(written + 1), waddr.eq(step_mod_depth(waddr, 1))]

        # --- reader: loop counters, innermost first, each with the index step it makes ---
        advance, out = output_stage(m, self.o, spec.out_width)
        kh, kw = spec.kernel
        ky_step, kx_step, cf_step = spec.tap_offset(1, 0), spec.tap_offset(0, 1), 1
        loops = [(spec.cf, cf_step), (kw, kx_step), (kh, ky_step)]
        if spec.depthwise:
            loops = [(kw, kx_step), (kh, ky_step), (spec.cf, cf_step)]
        counters = [Signal(range(n), name=f"loop{k}") for k, (n, _) in enumerate(loops)]
        (oh, ow), (column, row, frame_step) = spec.ofm_dim, spec.pixel_steps
        ox, oy = Signal(range(ow)), Signal(range(oh))
        tl_addr = Signal(range(depth))
        need, need_addr = Signal(index), Signal(range(depth))

        m.d.comb += rd.addr.eq(need_addr)
        issue = advance & ahead(written, need, "arrived")
        m.d.comb += rd.en.eq(advance)
        valid = Signal()
        with m.If(advance):
            m.d.sync += valid.eq(issue)
        m.d.comb += [out.valid.eq(valid), out.payload.eq(rd.data)]

        with m.If(issue):
            # the innermost loop that has not reached its end steps; the ones inside it restart
            done_inside = 1
            handled = None
            for k, (counter, (n, step)) in enumerate(zip(counters, loops)):
                jump = step - sum((nn - 1) * ss for nn, ss in loops[:k])
                cond = done_inside & (counter != n - 1)
                ctx = m.If(cond) if handled is None else m.Elif(cond)
                with ctx:
                    m.d.sync += [counter.eq(counter + 1), need.eq(need + jump),
                                 need_addr.eq(step_mod_depth(need_addr, jump))]
                    m.d.sync += [c.eq(0) for c in counters[:k]]
                handled = True
                done_inside = done_inside & (counter == n - 1)
            with m.Else():                      # window done: next pixel's top-left
                m.d.sync += [c.eq(0) for c in counters]
                at_row_end, at_frame_end = ox == ow - 1, (ox == ow - 1) & (oy == oh - 1)
                step = Mux(at_frame_end, frame_step, Mux(at_row_end, row, column))
                addr = Mux(at_frame_end, step_mod_depth(tl_addr, frame_step),
                           Mux(at_row_end, step_mod_depth(tl_addr, row), step_mod_depth(tl_addr, column)))
                m.d.sync += [top_left.eq(top_left + step), need.eq(top_left + step),
                             tl_addr.eq(addr), need_addr.eq(addr),
                             ox.eq(Mux(at_row_end, 0, ox + 1)),
                             oy.eq(Mux(at_frame_end, 0, Mux(at_row_end, oy + 1, oy)))]
        return m
