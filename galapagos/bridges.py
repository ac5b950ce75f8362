"""The two Galapagos bridges: a layer's word stream -> Galapagos packets of flits, and back.

A **frame** is ``words_per_frame`` layer words of ``word_width`` bits (typically the transfers of one
vector), packed densely LSB first: word ``k`` of the frame occupies bits ``[k * word_width, (k + 1) *
word_width)`` of the frame's bit string, and flit ``j`` carries bits ``[j * flit_width, (j + 1) *
flit_width)`` of it. A frame therefore has ``F = ceil(words_per_frame * word_width / flit_width)`` flits;
the last one carries the remaining ``last_flit_bits`` bits at its LSB, zeros above them, and a TKEEP
that marks ``ceil(last_flit_bits / 8)`` bytes; every other flit has all TKEEP bits set. Frames never
share a flit: every frame starts at bit 0 of a new flit. (Same bit order as FINN's word packing and
our DWC.)

A frame travels as Galapagos **packets** of at most ``max_packet_flits`` flits (a network packet must fit
the Ethernet MTU: :data:`MAX_PACKET_BYTES`; ``None``: the whole frame is one packet): packet ``p`` carries
flits ``[p * P, min((p + 1) * P, F))`` with ``P = packet_flits``, TLAST on its last flit. Every packet
carries TDEST and TID on all its flits.

A **flit** on the Amaranth side is one stream payload of :func:`flit_layout` (an
``amaranth.lib.data.StructLayout``), fields from the LSB: ``tdata`` (flit_width bits), ``tkeep``
(flit_width / 8), ``tlast`` (1), ``tdest`` (8), ``tid`` (8) -- the Galapagos kernel-side AXI-Stream
fields and widths (reference/galapagos.md: TDATA 512 with TKEEP 64, or 64 on the older HLS bridges;
TDEST and TID 8 bits). In Verilog the flit stream is the three ports ``<name>__payload`` (the fields
concatenated in that order), ``<name>__valid``, ``<name>__ready``, so the stitcher wires it like any
layer stream; a Galapagos kernel top splits ``payload`` into ``tdata``/``tkeep``/``tlast``/``tdest``/
``tid`` ports by field name.

Both bridges are width converters built like :class:`layers.dwc.StreamingDataWidthConverter`: a shift
buffer holding whole bits of the stream, filled at its fill level (a log-depth barrel shifter places the
incoming word or flit) and drained from the LSB. ``i.ready`` and ``o.valid`` are functions of registers
only (no combinational path from ``o.ready`` to ``i.ready`` or from any input to ``o.valid``); each
``buffer_bits`` is derived (in its docstring) so that this conservative ready still lets the busier side
move every cycle at full rate.
"""

from dataclasses import dataclass
from math import gcd

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from layers.op import Resources

__all__ = ["FLIT_WIDTHS", "ID_BITS", "MAX_PACKET_BYTES", "max_packet_flits", "flit_layout", "ToGalapagosSpec",
           "ToGalapagos", "FromGalapagosSpec",
           "FromGalapagos"]

FLIT_WIDTHS = (64, 512)     # Galapagos kernel streams: 512-bit TDATA; the older HLS bridges use 64
ID_BITS = 8                 # TDEST and TID: kernel IDs 0..255 (Galapagos numbers kernels from 1)
MAX_PACKET_BYTES = 1440     # libGalapagos without jumbo frames: 180 64-bit flits (1,124 with jumbo frames)


def max_packet_flits(flit_width, max_bytes=MAX_PACKET_BYTES):
    """The most flits of ``flit_width`` bits a packet of at most ``max_bytes`` bytes holds (at least 1)."""
    return max(1, 8 * max_bytes // flit_width)


def flit_layout(flit_width):
    """The payload layout of a Galapagos flit stream: ``tdata``, ``tkeep``, ``tlast``, ``tdest``, ``tid``
    from the LSB, in that order."""
    return data.StructLayout({
        "tdata": unsigned(flit_width),
        "tkeep": unsigned(flit_width // 8),
        "tlast": unsigned(1),
        "tdest": unsigned(ID_BITS),
        "tid": unsigned(ID_BITS),
    })


def _check_int(owner, name, value, lo, hi=None, legal=None):
    if legal is not None:
        if value not in legal or not isinstance(value, int):
            raise ValueError(f"{owner} {name} must be one of {', '.join(map(str, legal))}, not {value!r}")
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < lo or (hi is not None and value > hi):
        bound = f"an integer >= {lo}" if hi is None else f"an integer in {lo}..{hi}"
        raise ValueError(f"{owner} {name} must be {bound}, not {value!r}")


class _PacketGeometry:
    """Figures of a frame of ``words_per_frame`` words of ``word_width`` bits in ``flit_width``-bit flits,
    sent as packets of at most ``max_packet_flits`` flits."""

    def _check_geometry(self, owner):
        _check_int(owner, "word_width", self.word_width, 1)
        _check_int(owner, "flit_width", self.flit_width, None, legal=FLIT_WIDTHS)
        _check_int(owner, "words_per_frame", self.words_per_frame, 1)
        if self.max_packet_flits is not None:
            _check_int(owner, "max_packet_flits", self.max_packet_flits, 1)

    @property
    def packet_flits(self):
        """``P``: flits of every packet of a frame but the last (which has ``F - (packets - 1) * P``)."""
        return min(self.flits_per_frame, self.max_packet_flits or self.flits_per_frame)

    @property
    def packets_per_frame(self):
        return -(-self.flits_per_frame // self.packet_flits)

    def packet_sizes(self):
        """Flits of each packet of a frame, in order."""
        F, P = self.flits_per_frame, self.packet_flits
        return [min(P, F - p * P) for p in range(self.packets_per_frame)]

    @property
    def _packet_counter(self):
        """The modulus of the flit-in-packet counter, when a frame is several packets."""
        return (self.packet_flits,) if self.packets_per_frame > 1 else ()

    @property
    def frame_bits(self):
        """Payload bits of one frame: ``words_per_frame * word_width``."""
        return self.words_per_frame * self.word_width

    @property
    def flits_per_frame(self):
        """``F = ceil(frame_bits / flit_width)``."""
        return -(-self.frame_bits // self.flit_width)

    @property
    def last_flit_bits(self):
        """Payload bits in the last flit of a frame: 1..flit_width."""
        return self.frame_bits - (self.flits_per_frame - 1) * self.flit_width

    @property
    def pad_bits(self):
        """Zero bits above the payload in the last flit: ``flit_width - last_flit_bits``."""
        return self.flit_width - self.last_flit_bits

    @property
    def full_tkeep(self):
        return (1 << (self.flit_width // 8)) - 1

    @property
    def last_tkeep(self):
        """TKEEP of the last flit: its ``ceil(last_flit_bits / 8)`` low bytes."""
        return (1 << -(-self.last_flit_bits // 8)) - 1

    @property
    def step(self):
        """Granule of every fill level and offset in the buffer: ``gcd(word_width, flit_width)`` bits."""
        return gcd(self.word_width, self.flit_width)

    @property
    def exp_cycles(self):
        """Cycles per frame in steady state at full rate: ``max(words_per_frame, flits_per_frame)``
        (the side that moves more transfers per frame moves one every cycle)."""
        return max(self.words_per_frame, self.flits_per_frame)

    latency = 1     # an output transfer is offered the cycle after the input transfer that completes it

    # the stream fields of :class:`layers.op.LayerSpec` (what `rtlgen prove` and the formal harness read):
    # one stream in, one out; a frame is ``words_per_frame`` words on the layer side and
    # ``flits_per_frame`` flits on the network side, one "lane" per transfer
    num_inputs = 1
    num_outputs = 1
    lead_words = 1
    words_before_lead = 0

    @property
    def _shapes(self):
        """(layer-side shape, network-side shape) of one frame: ``(1, transfers, 1)``."""
        return (1, self.words_per_frame, 1), (1, self.flits_per_frame, 1)

    def _fill_timing(self, arrivals, to_flits):
        """The exact timing model (:mod:`layers.timing`), the RTL's fill level stepped cycle by cycle:
        an output transfer whenever the buffer holds one (never stalled), an input transfer when it
        arrived and ``i.ready`` (the thresholds of ``elaborate``) allows it. FromGalapagos: matching,
        well-formed packets (the only ones a ToGalapagos of the same geometry sends)."""
        import numpy as np
        from layers.timing import Timing, as_cycles
        arrivals = as_cycles(arrivals[0])
        w, f, g, size = self.word_width, self.flit_width, self.step, self.buffer_bits
        n_in = self.words_per_frame if to_flits else self.flits_per_frame
        reads, writes = [], []
        fill, index, t = 0, 0, 0
        while len(reads) < len(arrivals) or fill >= (f if to_flits else w) // g:
            last = index == n_in - 1
            out_unit = (f if to_flits else w) // g
            take = fill >= out_unit
            if to_flits:
                ready = fill <= ((size - w - self.pad_bits) if last else (size - w)) // g
                grow = ((w + self.pad_bits) if last else w) // g
            else:
                ready = fill <= (size - f) // g
                grow = (self.last_flit_bits if last else f) // g
            give = len(reads) < len(arrivals) and ready and arrivals[len(reads)] <= t
            if take:
                writes.append(t)
            fill -= out_unit if take else 0
            if give:
                reads.append(t)
                fill += grow
                index = 0 if last else index + 1
            t += 1
        return Timing((np.array(reads, dtype=np.int64),), np.array(writes, dtype=np.int64))

    def _estimate(self, insert_bits, max_position, counters):
        """Analytic 7-series estimate from the structure, not a synthesis result. FFs: the buffer, its
        fill level and the counters (Yosys agrees to within 3). LUTs: one per buffer bit (drain mux OR
        placed bit), plus the barrel shifter of :func:`_place`, whose stage ``s`` has true 2:1 muxes
        where both the unshifted and the shifted value have a bit and AND gates (a bit or zero)
        elsewhere, counted 3/4 LUT per mux and 1/4 per AND gate (a LUT6 holds a 4:1 mux, ANDs merge
        along a bit's path), plus a few LUTs per control bit. The weights are fitted by hand to Yosys
        0.70 ``synth_xilinx`` on the test widths (49->64, 8->64, 784->64, 100->512, 49->512, both
        bridges): the estimate is within -22 % .. +38 % of Yosys's LUT count there."""
        size, step = self.buffer_bits, self.step
        muxes = ands = 0
        width = insert_bits
        for s in range(max_position.bit_length()):
            shift = step << s
            out = min(size, width + shift)
            both = max(0, min(width, out) - shift)
            muxes, ands, width = muxes + both, ands + out - both, out
        fill_bits = (size // step).bit_length()
        ctrl = sum(max(1, (c - 1).bit_length()) for c in counters) + fill_bits
        return Resources(lut=size + (3 * muxes + ands + 3) // 4 + 3 * ctrl + 8, ff=size + ctrl, bram18=0)


def _segment_end(m, spec, frame_end, advance, state):
    """True on the last flit of a packet that is not the frame's last (a counter of the flits of the
    packet, stepped by ``advance``, back to 0 after a packet's last flit, named in ``state``); constant 0
    when a frame is one packet."""
    if spec.packets_per_frame == 1:
        return Const(0, 1)
    index = state["packet_flit"] = Signal(range(spec.packet_flits), name="packet_flit")
    end = index == spec.packet_flits - 1
    with m.If(advance):
        m.d.sync += index.eq(Mux(end | frame_end, 0, index + 1))
    return end


def _place(value, position, step, width):
    """``value << (position * step)``, truncated to ``width`` bits, as a log-depth barrel shifter: one
    stage per bit of ``position`` (stage ``s`` shifts by ``step << s`` or not), no multiplier."""
    v = value
    for s in range(len(position)):
        shift = step << s
        v = Mux(position[s], Cat(Const(0, shift), v), v)
        if len(v) > width:
            v = v[:width]
    return v


def _wrap_increment(counter, modulus):
    return Mux(counter == modulus - 1, 0, counter + 1)


# ---------------------------------------------------------------------------------------- to Galapagos

@dataclass(frozen=True)
class ToGalapagosSpec(_PacketGeometry):
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
        _check_int("ToGalapagos", "dest", self.dest, 0, (1 << ID_BITS) - 1)
        _check_int("ToGalapagos", "source_id", self.source_id, 0, (1 << ID_BITS) - 1)

    @property
    def in_width(self):
        """Bits of an input word (the layer side)."""
        return self.word_width

    @property
    def out_width(self):
        """Bits of an output flit payload (:func:`flit_layout`: tdata, tkeep, tlast, tdest, tid)."""
        return self.flit_layout.size

    @property
    def flit_layout(self):
        return flit_layout(self.flit_width)

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
        packet_end = last_flit | _segment_end(m, spec, last_flit, self.o.valid & self.o.ready, self.formal_state)

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
                buf.eq(kept | _place(self.i.payload, at, g, size)),
                fill.eq(at + Mux(last_word, (w + spec.pad_bits) // g, w // g)),
                word.eq(_wrap_increment(word, words)),
            ]
        with m.Else():
            m.d.sync += [buf.eq(kept), fill.eq(fill - Mux(take, f // g, 0))]
        with m.If(take):
            m.d.sync += flit.eq(_wrap_increment(flit, flits))
        return m


# -------------------------------------------------------------------------------------- from Galapagos

@dataclass(frozen=True)
class FromGalapagosSpec(_PacketGeometry):
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
        _check_int("FromGalapagos", "kernel_id", self.kernel_id, 0, (1 << ID_BITS) - 1)

    @property
    def out_width(self):
        """Bits of an output word (the layer side)."""
        return self.word_width

    @property
    def in_width(self):
        """Bits of an input flit payload (:func:`flit_layout`: tdata, tkeep, tlast, tdest, tid)."""
        return self.flit_layout.size

    @property
    def flit_layout(self):
        return flit_layout(self.flit_width)

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
        packet_end = last | _segment_end(m, spec, last, give, self.formal_state)

        flit_bits = Mux(inject, 0, Mux(last, tdata[:r], tdata))
        at = Signal(range((size - f) // g + 1))         # where the flit lands: the fill level after the take
        m.d.comb += at.eq(fill - Mux(take, w // g, 0))
        kept = Mux(take, buf >> w, buf)
        with m.If(give):
            m.d.sync += [
                buf.eq(kept | _place(flit_bits, at, g, size)),
                fill.eq(at + Mux(last, r // g, f // g)),
                index.eq(_wrap_increment(index, flits)),
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
