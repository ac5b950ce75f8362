"""The Galapagos packet format both bridges keep, and what they share: a layer's word stream ->
Galapagos packets of flits (:mod:`galapagos.to_galapagos`), and back (:mod:`galapagos.from_galapagos`),
each an op of its own (``OP``) like any layer.

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

from math import gcd

from amaranth.hdl import Cat, Const, Mux, Signal, unsigned
from amaranth.lib import data

from qonnx.core.datatype import DataType

from layers.op import Resources

__all__ = ["FLIT_WIDTHS", "ID_BITS", "MAX_PACKET_BYTES", "max_packet_flits", "flit_layout", "check_int",
           "PacketGeometry", "small_frames", "segment_end", "place", "wrap_increment"]

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


def check_int(owner, name, value, lo, hi=None, legal=None):
    if legal is not None:
        if value not in legal or not isinstance(value, int):
            raise ValueError(f"{owner} {name} must be one of {', '.join(map(str, legal))}, not {value!r}")
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < lo or (hi is not None and value > hi):
        bound = f"an integer >= {lo}" if hi is None else f"an integer in {lo}..{hi}"
        raise ValueError(f"{owner} {name} must be {bound}, not {value!r}")


class PacketGeometry:
    """Figures of a frame of ``words_per_frame`` words of ``word_width`` bits in ``flit_width``-bit flits,
    sent as packets of at most ``max_packet_flits`` flits."""

    def _check_geometry(self, owner):
        check_int(owner, "word_width", self.word_width, 1)
        check_int(owner, "flit_width", self.flit_width, None, legal=FLIT_WIDTHS)
        check_int(owner, "words_per_frame", self.words_per_frame, 1)
        if self.max_packet_flits is not None:
            check_int(owner, "max_packet_flits", self.max_packet_flits, 1)

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

    # the stream fields of :class:`layers.op.LayerSpec`: one stream in, one out; a frame is
    # ``words_per_frame`` words on the layer side and ``flits_per_frame`` flits on the network side, each
    # transfer a word of BINARY lanes (a word's bits, a flit payload's bits: tdata, tkeep, tlast, tdest,
    # tid), so the golden and the benches read any width bit by bit
    input_dtype = output_dtype = DataType["BINARY"]
    num_inputs = 1
    num_outputs = 1
    words_before_lead = 0           # (lead_words: each bridge's, the transfers completing its first output)

    @property
    def flit_layout(self):
        """The payload layout of a flit (:func:`flit_layout`)."""
        return flit_layout(self.flit_width)

    @property
    def _shapes(self):
        """(layer-side shape, network-side shape) of one frame: ``(1, transfers, bits of a transfer)``."""
        return (1, self.words_per_frame, self.word_width), (1, self.flits_per_frame, self.flit_layout.size)

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
        placed bit), plus the barrel shifter of :func:`place`, whose stage ``s`` has true 2:1 muxes
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


def small_frames(s):
    """The bridges' ``Op.small_instance`` (for `rtlgen prove`): frames of about two flits and a partial one
    (at most 40 words), cut into two packets where the node's own frame is several packets; the same word
    and flit widths."""
    words = min(s.words_per_frame, -(-(2 * s.flit_width + 1) // s.word_width), 40)
    flits = -(-words * s.word_width // s.flit_width)
    several = s.packets_per_frame > 1 and flits > 1
    return dict(words_per_frame=words, max_packet_flits=flits - 1 if several else s.max_packet_flits)


def segment_end(m, spec, frame_end, advance, state):
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


def place(value, position, step, width):
    """``value << (position * step)``, truncated to ``width`` bits, as a log-depth barrel shifter: one
    stage per bit of ``position`` (stage ``s`` shifts by ``step << s`` or not), no multiplier."""
    v = value
    for s in range(len(position)):
        shift = step << s
        v = Mux(position[s], Cat(Const(0, shift), v), v)
        if len(v) > width:
            v = v[:width]
    return v


def wrap_increment(counter, modulus):
    return Mux(counter == modulus - 1, 0, counter + 1)
