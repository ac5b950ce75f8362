"""ToGalapagos: a layer's word stream packed into Galapagos packets of flits (the format:
:mod:`galapagos.bridges`), its spec, component, golden and ``OP``. The compiler's scale-out puts one after a
device's last layer (:mod:`rtlgen.backend.scaleout`); `rtlgen prove` proves it like any node."""

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from galapagos.bridges import (ID_BITS, PacketGeometry, check_int, flit_layout, place, segment_end, small_frames,
                               wrap_increment)
from layers.op import Example, Op

__all__ = ["ToGalapagosSpec", "ToGalapagos", "golden_to_galapagos", "GRID", "DEFAULT", "OP"]


@dataclass(frozen=True)
class ToGalapagosSpec(PacketGeometry):
    """Contract of :class:`ToGalapagos`: words of ``word_width`` bits in, Galapagos flits out.

    Fields
    ------
    word_width : bits of one input word (the producing layer's unpadded ``out_width``), >= 1
    flit_width : TDATA bits of a flit: 64 or 512 (``FLIT_WIDTHS``)
    words_per_frame : input words per frame (e.g. the words of one vector), >= 1
    dest : TDEST of every flit, the destination kernel ID, 0..255
    source_id : TID of every flit, this kernel's ID, 0..255
    max_packet_flits : flits per packet at most (None: a frame is one packet), >= 1

    Guarantees (frame and packet format in the module docstring)
    ------------------------------------------------------------
    - Ordering: flits leave in the order of the bits they carry; nothing is dropped, duplicated or
      reordered; input TLAST does not exist (the frame boundary is the word count).
    - Throughput: at full rate (source always valid, sink always ready) a frame takes exactly
      ``exp_cycles = max(words_per_frame, flits_per_frame)`` cycles in steady state, frames back to
      back with no bubble (packet boundaries cost nothing). If ``word_width <= flit_width`` (then words >=
      flits) the input accepts one word every cycle without a pause, across frame boundaries too; if
      ``word_width > flit_width`` the output emits one flit every cycle without a pause and the input is
      accepted as room allows.
    - Latency: flit ``j`` of a frame is offered (``o.valid``) from the cycle after the later of (a) the
      input transfer of the word that completes it, word ``(min(P, (j + 1) * flit_width) - 1) //
      word_width`` of the frame (``P = frame_bits``), and (b) the output transfer of flit ``j - 1``.
      In harness stamps with an always-ready sink: ``out[j] = max(in[k_j], out[j - 1]) + 1``.
    - ``i.ready`` and ``o.valid`` depend on registers only.
    """
    word_width: int
    flit_width: int
    words_per_frame: int
    dest: int
    source_id: int
    max_packet_flits: int = None

    def __post_init__(self):
        self._check_geometry("ToGalapagos")
        check_int("ToGalapagos", "dest", self.dest, 0, (1 << ID_BITS) - 1)
        check_int("ToGalapagos", "source_id", self.source_id, 0, (1 << ID_BITS) - 1)

    @property
    def lead_words(self):
        """Words that complete the first flit: ``ceil(min(flit_width, frame_bits) / word_width)``."""
        return -(-min(self.flit_width, self.frame_bits) // self.word_width)

    @property
    def in_width(self):
        """Bits of an input word (the layer side)."""
        return self.word_width

    @property
    def out_width(self):
        """Bits of an output flit payload (:func:`flit_layout`: tdata, tkeep, tlast, tdest, tid)."""
        return self.flit_layout.size

    @property
    def folded_input_shapes(self):
        return (self._shapes[0],)

    @property
    def folded_output_shape(self):
        return self._shapes[1]

    def timing(self, arrivals):
        """When each word moves in and each flit is offered (:meth:`_fill_timing`)."""
        return self._fill_timing(arrivals, to_flits=True)

    @property
    def buffer_bits(self):
        """Bits of the shift buffer. The last word of a packet also books the packet's ``pad_bits`` zeros,
        so the next packet starts on a flit boundary. With ``w <= f`` (``w`` word, ``f`` flit width) the
        fill level at full rate never exceeds ``2f`` before a non-last word and ``f + w`` before a last
        word, so ``max(2f + w, f + 2w + pad)`` lets the input run every cycle; with ``w > f`` the input
        must be taken whenever less than two flits remain (fill <= ``2f - step``), so ``2f - step + w +
        pad`` keeps the output running every cycle."""
        w, f, pad = self.word_width, self.flit_width, self.pad_bits
        if w <= f:
            return max(2 * f + w, f + 2 * w + pad)
        return 2 * f - self.step + w + pad

    def resource_estimate(self):
        return self._estimate(self.word_width, (self.buffer_bits - self.word_width) // self.step,
                              (self.words_per_frame, self.flits_per_frame, *self._packet_counter))


class ToGalapagos(wiring.Component):
    """Packs a stream of layer words into Galapagos packets (format and guarantees: :class:`ToGalapagosSpec`).

    Members
    -------
    i : In(stream.Signature(unsigned(word_width)))
    o : Out(stream.Signature(flit_layout(flit_width)))
        ``tdest = spec.dest`` and ``tid = spec.source_id`` on every flit.

    State: a shift buffer of ``spec.buffer_bits`` bits and its fill level, a word counter (which word of
    the packet comes next) and a flit counter (which flit of the packet leaves next, for TLAST and
    TKEEP). A word is OR-ed in at the fill level; the last word of a packet raises the fill level by
    ``word_width + pad_bits``, so the packet's last flit is zero-padded and the next packet starts at
    a flit boundary. Flits leave from the LSB.
    """

    def __init__(self, spec):
        self._spec = spec
        super().__init__({
            "i": In(stream.Signature(unsigned(spec.word_width))),
            "o": Out(stream.Signature(flit_layout(spec.flit_width))),
        })

    @property
    def spec(self):
        return self._spec

    def elaborate(self, platform):
        spec = self._spec
        w, f, g, size = spec.word_width, spec.flit_width, spec.step, spec.buffer_bits
        words, flits = spec.words_per_frame, spec.flits_per_frame
        m = Module()

        buf = Signal(size)
        fill = Signal(range(size // g + 1))             # in units of `step` bits
        word = Signal(range(words))                     # index in the packet of the next input word
        flit = Signal(range(flits))                     # index in the packet of the next output flit
        last_word = word == words - 1
        last_flit = flit == flits - 1
        # the registers sim.formal's induction invariants read (this elaboration's)
        self.formal_state = dict(buf=buf, fill=fill, word=word, flit=flit)
        packet_end = last_flit | segment_end(m, spec, last_flit, self.o.valid & self.o.ready, self.formal_state)

        m.d.comb += [
            self.o.valid.eq(fill >= f // g),
            self.o.payload.tdata.eq(buf[:f]),
            self.o.payload.tkeep.eq(Mux(last_flit, spec.last_tkeep, spec.full_tkeep)),
            self.o.payload.tlast.eq(packet_end),
            self.o.payload.tdest.eq(spec.dest),
            self.o.payload.tid.eq(spec.source_id),
            self.i.ready.eq(Mux(last_word, fill <= (size - w - spec.pad_bits) // g, fill <= (size - w) // g)),
        ]
        take = self.o.valid & self.o.ready
        give = self.i.valid & self.i.ready

        at = Signal(range((size - w) // g + 1))         # where the word lands: the fill level after the take
        m.d.comb += at.eq(fill - Mux(take, f // g, 0))
        kept = Mux(take, buf >> f, buf)
        with m.If(give):
            m.d.sync += [
                buf.eq(kept | place(self.i.payload, at, g, size)),
                fill.eq(at + Mux(last_word, (w + spec.pad_bits) // g, w // g)),
                word.eq(wrap_increment(word, words)),
            ]
        with m.Else():
            m.d.sync += [buf.eq(kept), fill.eq(fill - Mux(take, f // g, 0))]
        with m.If(take):
            m.d.sync += flit.eq(wrap_increment(flit, flits))
        return m


def golden_to_galapagos(bits, word_width, flit_width, words_per_frame, dest, source_id, max_packet_flits=None):
    """The flits of frames of ``words_per_frame`` words of ``word_width`` bits, from the packet format:
    ``bits`` (batch, ..., the bits of its words, LSB first) -> (batch, the payload bits of its flits), a
    flit's payload from the LSB: TDATA (``flit_width`` bits, the frame's bits, zeros after its end), TKEEP
    (``flit_width / 8``: the bytes holding frame bits), TLAST (a packet's last flit: every
    ``max_packet_flits``-th and the frame's last), TDEST ``dest`` and TID ``source_id`` (8 bits each)."""
    frame_bits = words_per_frame * word_width
    frames = np.asarray(bits, dtype=np.int64).reshape(len(bits), -1, frame_bits)
    flits = -(-frame_bits // flit_width)
    per_packet = flits if max_packet_flits is None else min(flits, max_packet_flits)
    tdata = np.zeros(frames.shape[:2] + (flits * flit_width,), dtype=np.int64)
    tdata[..., :frame_bits] = frames
    tdata = tdata.reshape(frames.shape[:2] + (flits, flit_width))
    kept_bytes = np.full(flits, flit_width // 8)
    kept_bytes[-1] = -(-(frame_bits - (flits - 1) * flit_width) // 8)
    tkeep = (np.arange(flit_width // 8)[None, :] < kept_bytes[:, None]).astype(np.int64)
    index = np.arange(flits)
    tlast = ((index % per_packet == per_packet - 1) | (index == flits - 1)).astype(np.int64)[:, None]
    tdest = np.broadcast_to((dest >> np.arange(8)) & 1, (flits, 8))
    tid = np.broadcast_to((source_id >> np.arange(8)) & 1, (flits, 8))
    fields = np.concatenate([tkeep, tlast, tdest, tid], axis=1)
    payload = np.concatenate([tdata, np.broadcast_to(fields, tdata.shape[:3] + fields.shape[1:])], axis=-1)
    return payload.reshape(len(bits), -1)


def _golden(spec, xs, producer):
    return golden_to_galapagos(xs[0], spec.word_width, spec.flit_width, spec.words_per_frame, spec.dest,
                               spec.source_id, spec.max_packet_flits)


# (word_width, flit_width, words_per_frame, max_packet_flits): non-dividing and dividing widths, narrow and
# wide words, last flits with partial bytes (49 x 10 = 490 = 7 x 64 + 42), last words completing two flits
# (49 -> 64); frames cut into packets of 3 (3 + 3 + 2 flits), of 1, a 13-flit frame in packets of 4 and a
# limit that divides the frame (2 + 2)
GRID = [(49, 64, 10, None), (49, 512, 16, None), (8, 64, 10, None), (64, 64, 4, None), (784, 64, 1, None),
        (100, 512, 7, None), (49, 64, 10, 3), (49, 64, 10, 1), (784, 64, 1, 4), (8, 64, 32, 2)]


DEFAULT = (49, 64, 10, 3)       # of GRID, in the default suite: a frame of 8 flits in packets of 3, 3 and 2


def _examples():
    """Three 49-bit words in 64-bit flits, packets of two flits; then :data:`GRID` (:data:`DEFAULT` in the
    default suite, the rest slow)."""
    make = lambda w, f, n, p: dict(word_width=w, flit_width=f, words_per_frame=n, dest=5, source_id=2,
                                   max_packet_flits=p)
    return [Example(dict(make(49, 64, 3, 2), dest=2, source_id=1), {}),
            *(Example(make(*case), {}, slow=case != DEFAULT) for case in GRID)]


OP = Op("ToGalapagos", ToGalapagosSpec, ToGalapagos, role="to_galapagos", golden=_golden,
        small_instance=small_frames, examples=_examples)
