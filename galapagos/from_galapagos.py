"""FromGalapagos: Galapagos packets addressed to this kernel unpacked into a layer's word stream (the
format: :mod:`galapagos.bridges`), its spec, component, golden and ``OP``. The compiler's scale-out puts one
before a device's first layer (:mod:`rtlgen.backend.scaleout`); `rtlgen prove` proves it like any node."""

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from galapagos.bridges import (ID_BITS, PacketGeometry, check_int, flit_layout, place, segment_end, small_frames,
                               wrap_increment)
from galapagos.to_galapagos import DEFAULT, GRID, golden_to_galapagos
from layers.op import Example, Op, Resources

__all__ = ["FromGalapagosSpec", "FromGalapagos", "golden_from_galapagos", "OP"]


@dataclass(frozen=True)
class FromGalapagosSpec(PacketGeometry):
    """Contract of :class:`FromGalapagos`: Galapagos flits in, the layer's words out.

    Fields
    ------
    word_width : bits of one output word (the consuming layer's unpadded ``in_width``), >= 1
    flit_width : TDATA bits of a flit: 64 or 512
    words_per_frame : words per frame, >= 1 (the sender's; fixes ``F = flits_per_frame``)
    kernel_id : this kernel's ID, 0..255; packets whose TDEST differs are dropped
    max_packet_flits : the sender's packet size limit (None: a frame is one packet)

    Guarantees
    ----------
    - Packets are delimited by TLAST. The TDEST of a packet's first flit decides: a packet whose TDEST
      is not ``kernel_id`` is consumed whole (up to and including its TLAST flit, any length) and
      produces nothing. Matching packets carry a frame's flits in order, ``packet_sizes()`` flits each
      (the frame format of the module docstring); each frame delivers exactly ``words_per_frame`` words,
      then the next frame starts on a word boundary. TKEEP and TID are not checked; bits above
      ``last_flit_bits`` in flit ``F - 1`` are ignored.
    - Malformed matching packets (never produced by :class:`ToGalapagos` with the same geometry): flits
      beyond the packet's expected size, up to TLAST, are consumed and dropped; a packet that ends
      (TLAST) before its expected size is completed with zero flits, generated internally one per
      cycle while the input is not ready, so the frame still delivers ``words_per_frame`` words (its
      missing bits read as 0).
    - Ordering: words leave in the order of their bits; nothing of a matching packet is lost or
      duplicated.
    - Throughput: at full rate a matching packet takes ``exp_cycles = max(words_per_frame,
      flits_per_frame)`` cycles in steady state, back to back: with ``word_width > flit_width`` the
      input takes one flit every cycle without a pause, otherwise the output emits one word every
      cycle without a pause. A dropped packet of ``n`` flits takes ``n`` cycles at the input (its
      first flit waits, like any first flit, until the buffer has room for a flit).
    - Latency: word ``j`` of a packet is offered (``o.valid``) from the cycle after the later of (a) the
      input transfer of the flit that completes it, flit ``((j + 1) * word_width - 1) // flit_width``,
      and (b) the output transfer of word ``j - 1``.
    - ``i.ready`` and ``o.valid`` depend on registers only. Because ``i.ready`` reserves room for a
      whole flit without counting the word leaving in the same cycle, a bursty source can cost cycles:
      fed directly by a ToGalapagos, 49-bit words in 64-bit flits take 12 cycles per 10-word packet
      instead of 10. A 2-deep FIFO in front (the output FIFO the stitcher puts behind every layer)
      restores ``exp_cycles`` (tests/test_galapagos_bridges.py, ``test_round_trip``).
    """
    word_width: int
    flit_width: int
    words_per_frame: int
    kernel_id: int
    max_packet_flits: int = None

    def __post_init__(self):
        self._check_geometry("FromGalapagos")
        check_int("FromGalapagos", "kernel_id", self.kernel_id, 0, (1 << ID_BITS) - 1)

    @property
    def lead_words(self):
        """Flits that complete the first word: ``ceil(word_width / flit_width)``."""
        return -(-self.word_width // self.flit_width)

    @property
    def out_width(self):
        """Bits of an output word (the layer side)."""
        return self.word_width

    @property
    def in_width(self):
        """Bits of an input flit payload (:func:`flit_layout`: tdata, tkeep, tlast, tdest, tid)."""
        return self.flit_layout.size

    @property
    def folded_input_shapes(self):
        return (self._shapes[1],)

    @property
    def folded_output_shape(self):
        return self._shapes[0]

    def timing(self, arrivals):
        """When each flit moves in and each word is offered, for matching, well-formed packets
        (:meth:`_fill_timing`)."""
        return self._fill_timing(arrivals, to_flits=False)

    @property
    def buffer_bits(self):
        """Bits of the shift buffer: ``f + w + min(f, w) - step``, as for the DWC (a packet's last flit
        adds only ``last_flit_bits <= f``, and a packet ends on a word boundary, so packet ends need
        no extra room)."""
        w, f = self.word_width, self.flit_width
        return f + w + min(f, w) - self.step

    def resource_estimate(self):
        base = self._estimate(self.flit_width, (self.buffer_bits - self.flit_width) // self.step,
                              (self.flits_per_frame, *self._packet_counter))
        # plus the last-flit mask (one LUT per masked bit, folded into the shifter's first stage when
        # it fits), the TDEST comparator and the three state flags
        masked = self.pad_bits if self.last_flit_bits < self.flit_width else 0
        return base + Resources(lut=masked // 2 + 6, ff=3)


class FromGalapagos(wiring.Component):
    """Unpacks Galapagos packets addressed to this kernel into layer words (contract: :class:`FromGalapagosSpec`).

    Members
    -------
    i : In(stream.Signature(flit_layout(flit_width)))
    o : Out(stream.Signature(unsigned(word_width)))

    State: a shift buffer of ``spec.buffer_bits`` bits and its fill level, the index of the next flit
    of the packet, and three flags: ``receiving`` (inside a matching packet), ``dropping`` (consuming
    up to TLAST without keeping: a packet to another kernel, or flits beyond the ``F``-th) and
    ``zero_fill`` (completing a short packet with zero flits). Neither flag set means the next flit
    starts a packet. A kept flit is OR-ed in at the fill level (the last flit of a packet masked to
    ``last_flit_bits``, which is also all the fill level rises by); words leave from the LSB.
    """

    def __init__(self, spec):
        self._spec = spec
        super().__init__({
            "i": In(stream.Signature(flit_layout(spec.flit_width))),
            "o": Out(stream.Signature(unsigned(spec.word_width))),
        })

    @property
    def spec(self):
        return self._spec

    def elaborate(self, platform):
        spec = self._spec
        w, f, g, size = spec.word_width, spec.flit_width, spec.step, spec.buffer_bits
        flits, r = spec.flits_per_frame, spec.last_flit_bits
        m = Module()

        buf = Signal(size)
        fill = Signal(range(size // g + 1))             # in units of `step` bits
        index = Signal(range(flits))                    # index in the packet of the next kept flit
        receiving = Signal()
        dropping = Signal()
        zero_fill = Signal()
        last = index == flits - 1
        room = fill <= (size - f) // g

        m.d.comb += [
            self.o.valid.eq(fill >= w // g),
            self.o.payload.eq(buf[:w]),
            self.i.ready.eq(dropping | (~zero_fill & room)),
        ]
        take = self.o.valid & self.o.ready
        accept = self.i.valid & self.i.ready
        starting = ~(receiving | dropping | zero_fill)
        tdata, tlast = self.i.payload.tdata, self.i.payload.tlast
        keep_flit = accept & (receiving | (starting & (self.i.payload.tdest == spec.kernel_id)))
        inject = zero_fill & room
        give = keep_flit | inject
        self.formal_state = dict(buf=buf, fill=fill, index=index, receiving=receiving, dropping=dropping,
                                 zero_fill=zero_fill)
        packet_end = last | segment_end(m, spec, last, give, self.formal_state)

        flit_bits = Mux(inject, 0, Mux(last, tdata[:r], tdata))
        at = Signal(range((size - f) // g + 1))         # where the flit lands: the fill level after the take
        m.d.comb += at.eq(fill - Mux(take, w // g, 0))
        kept = Mux(take, buf >> w, buf)
        with m.If(give):
            m.d.sync += [
                buf.eq(kept | place(flit_bits, at, g, size)),
                fill.eq(at + Mux(last, r // g, f // g)),
                index.eq(wrap_increment(index, flits)),
            ]
            with m.If(packet_end):                      # the packet is complete
                m.d.sync += [receiving.eq(0), zero_fill.eq(0), dropping.eq(keep_flit & ~tlast)]
            with m.Elif(keep_flit):
                m.d.sync += [receiving.eq(~tlast), zero_fill.eq(tlast)]
        with m.Else():
            m.d.sync += [buf.eq(kept), fill.eq(fill - Mux(take, w // g, 0))]
            with m.If(accept):                          # consumed, not kept: dropping, or a foreign first flit
                m.d.sync += dropping.eq(~tlast)
        return m


def golden_from_galapagos(bits, word_width, flit_width, words_per_frame, kernel_id, max_packet_flits=None):
    """The frames of words the packets in ``bits`` (the payload bits of a stream of flits, as
    :func:`golden_to_galapagos` gives them) carry to kernel ``kernel_id``: (frames, ``words_per_frame *
    word_width`` bits). A packet whose first flit's TDEST is another kernel's is dropped up to its TLAST;
    a frame's packets hold ``max_packet_flits`` flits (its last the rest); a packet ending early is
    completed with zero flits, one running long loses its flits beyond that up to its TLAST; bits of the
    frame's last flit above the frame's end are ignored."""
    frame_bits = words_per_frame * word_width
    flits = -(-frame_bits // flit_width)
    per_packet = flits if max_packet_flits is None else min(flits, max_packet_flits)
    sizes = [min(per_packet, flits - start) for start in range(0, flits, per_packet)]
    stream = np.asarray(bits, dtype=np.int64).reshape(-1, flit_width + flit_width // 8 + 17)
    tdata, tlast = stream[:, :flit_width], stream[:, flit_width + flit_width // 8]
    tdest = stream[:, flit_width + flit_width // 8 + 1:][:, :8] @ (1 << np.arange(8))
    frames, frame, k = [], [], 0
    while k < len(stream):
        if tdest[k] != kernel_id:               # another kernel's packet
            while not tlast[k] and k + 1 < len(stream):
                k += 1
            k += 1
            continue
        size = sizes[len(frame) // per_packet]         # the frame's next packet
        got, last = 0, False
        while got < size and not last and k < len(stream):
            frame.append(tdata[k])
            last, got, k = bool(tlast[k]), got + 1, k + 1
        frame += [np.zeros(flit_width, dtype=np.int64)] * (size - got)     # a packet ending early
        while not last and k < len(stream):                                 # one running long: to its TLAST
            last, k = bool(tlast[k]), k + 1
        if len(frame) == flits:
            frames.append(np.concatenate(frame)[:frame_bits])
            frame = []
    return np.array(frames, dtype=np.int64).reshape(len(frames), frame_bits)


def _golden(spec, xs, producer):
    return golden_from_galapagos(xs[0], spec.word_width, spec.flit_width, spec.words_per_frame, spec.kernel_id,
                                 spec.max_packet_flits)


def _stimulus(spec, frames, seed):
    """What a FromGalapagos is defined on: the packets a ToGalapagos of its geometry sends it (random
    words), with random bits above the frame's end in each last flit (the contract ignores them)."""
    rng = np.random.default_rng(seed)
    words = rng.integers(0, 2, (frames, spec.frame_bits))
    payload = golden_to_galapagos(words, spec.word_width, spec.flit_width, spec.words_per_frame, spec.kernel_id,
                                  int(rng.integers(256)), spec.max_packet_flits)
    payload = payload.reshape(frames, spec.flits_per_frame, -1)
    payload[:, -1, spec.last_flit_bits:spec.flit_width] = rng.integers(0, 2, (frames, spec.pad_bits))
    return [payload]


def _examples():
    """Three 49-bit words from 64-bit flits, packets of two flits; then the geometries of ToGalapagos's
    grid (its DEFAULT in the default suite, the rest slow)."""
    make = lambda w, f, n, p: dict(word_width=w, flit_width=f, words_per_frame=n, kernel_id=5, max_packet_flits=p)
    return [Example(dict(make(49, 64, 3, 2), kernel_id=2), {}),
            *(Example(make(*case), {}, slow=case != DEFAULT) for case in GRID)]


OP = Op("FromGalapagos", FromGalapagosSpec, FromGalapagos, role="from_galapagos", golden=_golden,
        small_instance=small_frames, examples=_examples, stimulus=_stimulus)
