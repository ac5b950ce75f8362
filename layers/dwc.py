"""StreamingDataWidthConverter: re-cut a stream of words into words of another width, LSB first."""

from dataclasses import dataclass
from math import gcd, lcm, prod

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from qonnx.core.datatype import DataType

from layers.datapath import StreamLayer
import numpy as np

from layers.timing import Timing, as_cycles, take_in_turn, take_when_ready, take_when_ready_in_place
from layers.op import Example, OneDatatype, Op, Resources, StreamContract

__all__ = ["DWCSpec", "StreamingDataWidthConverter"]

GENERAL_TIMING_ROUNDS = 64     # rounds of the general converter's vectorized timing model before the word loop
_LONG_PAST = np.iinfo(np.int64).min // 4


@dataclass(frozen=True)
class DWCSpec(StreamContract, OneDatatype):
    """Contract of a width converter (FINN attributes ``shape``, ``inWidth``, ``outWidth``, ``dataType``)."""
    shape: tuple                # the producer's normal output shape (one frame)
    in_width: int               # bits per input word (unpadded)
    out_width: int              # bits per output word (unpadded)
    dtype: DataType = DataType["BINARY"]

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if isinstance(self.dtype, str):
            object.__setattr__(self, "dtype", DataType[self.dtype])
        bits = self.dtype.bitwidth()
        for name in ("in_width", "out_width"):
            w = getattr(self, name)
            if not isinstance(w, int) or w < 1:
                raise ValueError(f"DWC {name} must be a positive integer, not {w!r}")
            if w % bits:
                raise ValueError(f"DWC {name}={w} must be a multiple of the {self.dtype.name} element width {bits}")
        if not self.shape or min(self.shape) < 1:
            raise ValueError(f"DWC shape must be non-empty with positive dimensions, not {self.shape!r}")
        for name in ("in_width", "out_width"):
            if self.frame_bits % getattr(self, name):
                raise ValueError(f"DWC {name}={getattr(self, name)} must divide the frame of {self.frame_bits} bits "
                                 f"(shape {self.shape} x {bits} bits)")

    @property
    def folded_input_shape(self):
        return (self.in_words, self.in_width // self.dtype.bitwidth())

    @property
    def folded_output_shape(self):
        return (self.out_words, self.out_width // self.dtype.bitwidth())

    @property
    def lead_words(self):
        """Input words that complete the first output word."""
        return -(-self.out_width // self.in_width)

    latency = 1             # a word is offered one cycle after the input that completes it

    def timing(self, arrivals, taken=None):
        """When words move (:mod:`layers.timing`). A converter is the one layer the compiler puts right in
        front of its consumer, with no FIFO between (a narrowing one has its FIFO in front): ``taken[j]``,
        when given, is the cycle its consumer takes output word ``j`` (``writes[j]`` or later), and the
        reads and writes follow from that; by default its output is never stalled."""
        a = as_cycles(arrivals[0])
        return {"up": self._up_timing, "down": self._down_timing, "general": self._general_timing}[self.kind](
            a, None if taken is None else as_cycles(taken))

    def _up_timing(self, a, taken):
        # Input n, the k-th of output word j = n // r, moves when offered; the last one of a word (which
        # loads the output register) not before the cycle after word j - 1 was taken.
        r = self.out_width // self.in_width
        ready = None
        if taken is not None:
            ready = np.zeros(a.size, dtype=np.int64)
            ready[2 * r - 1::r] = taken[:-1][:len(ready[2 * r - 1::r])] + 1
        reads = take_when_ready(a, ready)
        return Timing((reads,), reads[r - 1::r] + 1)

    def _down_timing(self, a, taken):
        # Input n is loaded into the output register at L[n] = max(its move, the cycle the last part of
        # word n - 1 is taken); it moves at max(offered, L[n - 1] + 1) (one word held while one drains).
        # Part p of word n is offered at L[n] + 1 (p = 0), else the cycle after part p - 1 was taken.
        r = self.in_width // self.out_width
        if taken is None:
            loads = take_in_turn(a, np.full(a.size, r))
            writes = (loads[:, None] + 1 + np.arange(r)).reshape(-1)
        else:
            last_taken = np.concatenate([[np.iinfo(np.int64).min // 2], taken[r - 1::r][:-1]])
            loads = take_when_ready(a, last_taken)
            writes = np.empty(taken.size, dtype=np.int64)
            writes[::r] = loads + 1
            for p in range(1, r):
                writes[p::r] = taken[p - 1::r] + 1
        reads = np.maximum(a, np.concatenate([[a[0]], loads[:-1] + 1]))
        return Timing((reads,), writes)

    def _general_timing(self, a, taken):
        # A shift buffer of buffer_bits: input n moves when offered, the cycle after input n - 1, and once
        # the outputs up to room[n] have moved out to leave it room; output j is offered the cycle after
        # the input completing it, complete[j], moved (and after word j - 1 moved):
        #   reads[n] = max(a[n], reads[n - 1] + 1, moved[room[n]] + 1)
        #   moved[j] = max(taken[j], reads[complete[j]] + 1, moved[j - 1] + 1)
        # Given the other, each is a chain of +1 steps (take_when_ready, a cumulative maximum), so both are
        # raised from below, alternately, until the reads leave room for every word: a least fixed point,
        # the words' cycles. Each round settles the words whose critical path crosses between the chains
        # once more; while the narrow side runs every cycle (what buffer_bits is sized for) no path crosses
        # back, so a round or two suffice. Beyond GENERAL_TIMING_ROUNDS the word loop takes over.
        # complete and room repeat every lcm(in_width, out_width) bits (a frame is whole periods): the
        # gathers go period by period, with no index array as long as the stream.
        complete, room = self._general_periods()
        periods, rest = divmod(a.size, room.size)
        if rest or not periods:                         # not whole frames: the word loop
            return self._general_timing_loop(a, taken)
        reads = take_when_ready(a)
        for _ in range(GENERAL_TIMING_ROUNDS):
            moved = self._completing(reads, complete, periods)
            if taken is not None:
                np.maximum(moved, taken, out=moved)
            take_when_ready_in_place(moved)
            if self._has_room(reads, moved, room, periods):
                if taken is None:                       # then every word moves when offered
                    return Timing((reads,), moved)
                writes = self._completing(reads, complete, periods)
                np.maximum(writes[1:], moved[:-1] + 1, out=writes[1:])
                return Timing((reads,), writes)
            needs = self._room_needs(moved, room, periods)
            np.maximum(needs, a, out=needs)
            reads = take_when_ready_in_place(needs)
        return self._general_timing_loop(a, taken)

    def _general_periods(self):
        """One period of lcm(in_width, out_width) bits: per output word k, the input word completing it
        (``complete[k]``); per input word k, the output word that must have moved before it fits
        (``room[k]``: may lie in earlier periods, negative), as indices within the period."""
        iw, ow = self.in_width, self.out_width
        period = lcm(iw, ow)
        k = np.arange(period // ow, dtype=np.int64)
        complete = ((k + 1) * ow + iw - 1) // iw - 1
        k = np.arange(period // iw, dtype=np.int64)
        room = ((k + 1) * iw - self.buffer_bits + ow - 1) // ow - 1
        return complete, room

    @staticmethod
    def _completing(reads, complete, periods):
        """``reads[complete[j]] + 1`` for every output word ``j`` (a new array)."""
        ready = np.take(reads.reshape(periods, -1), complete, axis=1).reshape(-1)
        ready += 1
        return ready

    @staticmethod
    def _room_needs(moved, room, periods):
        """``moved[room[n]] + 1`` for every input word ``n`` (a cycle long past where ``room[n] < 0``)."""
        needs = np.empty((periods, room.size), dtype=np.int64)
        for k, back, waited in _room_columns(moved, room, periods):
            needs[:back, k] = _LONG_PAST
            needs[back:, k] = waited
        needs += 1
        return needs.reshape(-1)

    @staticmethod
    def _has_room(reads, moved, room, periods):
        """Whether every input word moved after the output words making room for it (``reads[n] >
        moved[room[n]]``), column by column of the periods (no array as long as the stream)."""
        grid = reads.reshape(periods, room.size)
        return not any((waited >= grid[back:, k]).any() for k, back, waited in _room_columns(moved, room, periods))

    def _general_timing_loop(self, a, taken):
        """:meth:`_general_timing` a word at a time (the reference its rounds are tested against)."""
        iw, ow, size = self.in_width, self.out_width, self.buffer_bits
        n_out = a.size * iw // ow
        reads = np.empty(a.size, dtype=np.int64)
        writes = np.empty(n_out, dtype=np.int64)
        moved = np.empty(n_out, dtype=np.int64)
        j = 0
        for n in range(a.size):
            t = a[n] if n == 0 else max(a[n], reads[n - 1] + 1)
            must_have_left = -(-((n + 1) * iw - size) // ow)     # outputs out before input n fits
            while j < min(must_have_left, n_out) or (j < n_out and (j + 1) * ow <= n * iw):
                writes[j] = reads[(j + 1) * ow // iw - (1 if (j + 1) * ow % iw == 0 else 0)] + 1
                if j:
                    writes[j] = max(writes[j], moved[j - 1] + 1)
                moved[j] = writes[j] if taken is None else max(writes[j], taken[j])
                j += 1
            if must_have_left > 0:
                t = max(t, moved[must_have_left - 1] + 1)
            reads[n] = t
        while j < n_out:
            writes[j] = reads[-(-(j + 1) * ow // iw) - 1] + 1
            if j:
                writes[j] = max(writes[j], moved[j - 1] + 1)
            moved[j] = writes[j] if taken is None else max(writes[j], taken[j])
            j += 1
        return Timing((reads,), writes)

    @property
    def frame_bits(self):
        return prod(self.shape) * self.dtype.bitwidth()

    @property
    def in_words(self):
        return self.frame_bits // self.in_width

    @property
    def out_words(self):
        return self.frame_bits // self.out_width

    @property
    def exp_cycles(self):
        """Cycles per frame in steady state: the narrow side moves a word every cycle."""
        return max(self.in_words, self.out_words)

    @property
    def buffer_bits(self):
        """Bits of the shift buffer: the least that lets the narrow side run every cycle with registered ready."""
        g = gcd(self.in_width, self.out_width)
        return self.in_width + self.out_width + min(self.in_width, self.out_width) - g

    @property
    def kind(self):
        """``"up"`` (out_width a multiple of in_width), ``"down"`` (the reverse) or ``"general"``."""
        iw, ow = self.in_width, self.out_width
        return "up" if ow > iw and ow % iw == 0 else "down" if iw > ow and iw % ow == 0 else "general"

    def resource_estimate(self):
        """7-series cost. The integer ratios are registers with clock enables (up) or one LUT5 per bit (down);
        the general buffer's per-bit multiplexers are fitted to Yosys 0.70 on the CNV/TFC converters."""
        iw, ow = self.in_width, self.out_width
        if self.kind == "up":
            count = (ow // iw).bit_length()
            return Resources(lut=2 * count + 1, ff=2 * ow - iw + count + 2, bram18=0)
        if self.kind == "down":
            count = (iw // ow + 1).bit_length()
            return Resources(lut=iw + 4 + 2 * count, ff=2 * iw + count + 2, bram18=0)
        positions = (self.buffer_bits - iw) // gcd(iw, ow) + 1
        return Resources(lut=self.buffer_bits * max(1, positions.bit_length()), ff=self.buffer_bits + 16, bram18=0)


def _room_columns(moved, room, periods):
    """Per input word ``k`` of a period: (k, the periods at the start with no output word to wait for, and
    for the others the cycles the output words making room for it moved: a strided view of ``moved``)."""
    per_out = moved.size // periods
    grid = moved.reshape(periods, per_out)
    for k, r in enumerate(room.tolist()):
        back, column = divmod(r, per_out)               # back <= 0: periods before this one
        back = min(-back, periods)
        yield k, back, grid[:periods - back, column]


class StreamingDataWidthConverter(StreamLayer):
    """Width converter for any pair of widths (integer ratios up or down, and ratios like 6->4 or 49->16).

    Members
    -------
    i : In(stream.Signature(in_width))
    o : Out(stream.Signature(out_width))

    Bits leave in the order they came: input bit 0 of the first word is output bit 0 of the first word
    (down-conversion emits bits [0, out_width) first; up-conversion puts the first input at the LSB).
    The narrow side transfers one word every cycle when the other side keeps up, so a frame takes
    ``spec.exp_cycles`` cycles and the wide side runs at the rate the narrow side allows. ``i.ready``
    and ``o.valid`` come from registers (no combinational path through the converter); a word is
    offered one cycle after the input that completes it.

    Integer ratios have their own datapaths, which map to clock-enabled registers (Yosys: CNV's 16 -> 128
    converter drops from 244 LUT to about 10, 128 -> 32 from 422 to about 140):

    - up (``out_width = r * in_width``): the first r - 1 inputs of a word shift into a collector on their
      clock enable; the r-th input loads collector and input into the output register at once. No
      multiplexer per bit.
    - down (``in_width = r * out_width``): the output register shifts ``out_width`` bits per word taken
      and loads a new input, or the one input held while it drained: one LUT5 per bit.

    Any other pair uses a shift buffer of ``spec.buffer_bits`` bits and its fill level: words are
    appended at the fill level and leave from the LSB. Bits above the fill level are kept zero so an
    input can be OR-ed in; the append offset takes only ``(buffer_bits - in_width) / gcd + 1`` values,
    which keeps the insertion multiplexer small.
    """

    def elaborate(self, platform):
        return {"up": self._up, "down": self._down, "general": self._general}[self._spec.kind]()

    def _up(self):
        iw, ow = self._spec.in_width, self._spec.out_width
        r = ow // iw
        m = Module()
        collected = Signal(ow - iw)                     # inputs 0 .. r-2 of the word, the first at the LSB
        count = Signal(range(r))                        # inputs in `collected`
        word = Signal(ow)
        valid, ready = Signal(), Signal(init=1)
        m.d.comb += [self.o.valid.eq(valid), self.o.payload.eq(word), self.i.ready.eq(ready)]
        take = self.o.valid & self.o.ready
        give = self.i.valid & self.i.ready
        last = count == r - 1
        count_next = Mux(give, Mux(last, 0, count + 1), count)
        valid_next = (give & last) | (valid & ~take)
        with m.If(give):
            m.d.sync += collected.eq(Cat(collected[iw:], self.i.payload) if r > 2 else self.i.payload)
        with m.If(give & last):                         # `ready` promised that `word` is free now
            m.d.sync += word.eq(Cat(collected, self.i.payload))
        m.d.sync += [count.eq(count_next), valid.eq(valid_next),
                     ready.eq(~((count_next == r - 1) & valid_next))]
        self.formal_state = dict(collected=collected, count=count, word=word, valid=valid, ready=ready)
        return m

    def _down(self):
        iw, ow = self._spec.in_width, self._spec.out_width
        r = iw // ow
        m = Module()
        word = Signal(iw)                               # the word being emitted, its next part at the LSB
        left = Signal(range(r + 1))                     # parts of `word` not yet taken
        held, held_valid = Signal(iw), Signal()         # an input that arrived while `word` drained
        ready = Signal(init=1)
        m.d.comb += [self.o.valid.eq(left != 0), self.o.payload.eq(word[:ow]), self.i.ready.eq(ready)]
        take = self.o.valid & self.o.ready
        give = self.i.valid & self.i.ready
        load = ((left == 0) | ((left == 1) & take)) & (held_valid | give)
        with m.If(load):
            m.d.sync += [word.eq(Mux(held_valid, held, self.i.payload)), left.eq(r)]
        with m.Elif(take):
            m.d.sync += [word.eq(word >> ow), left.eq(left - 1)]
        direct = load & ~held_valid                     # this cycle's input went straight into `word`
        held_next = Mux(give & ~direct, 1, Mux(load, 0, held_valid))
        with m.If(give & ~direct):
            m.d.sync += held.eq(self.i.payload)
        m.d.sync += [held_valid.eq(held_next), ready.eq(~held_next)]
        self.formal_state = dict(word=word, left=left, held=held, held_valid=held_valid, ready=ready)
        return m

    def _general(self):
        iw, ow, size = self._spec.in_width, self._spec.out_width, self._spec.buffer_bits
        step = gcd(iw, ow)
        m = Module()

        buf = Signal(size)
        fill = Signal(range(size // step + 1))          # in units of `step` bits
        m.d.comb += [
            self.o.valid.eq(fill >= ow // step),
            self.o.payload.eq(buf[:ow]),
            self.i.ready.eq(fill <= (size - iw) // step),
        ]
        take = self.o.valid & self.o.ready
        give = self.i.valid & self.i.ready

        kept = Mux(take, buf >> ow, buf)
        at = Signal.like(fill)                          # where the input lands, after this cycle's take
        m.d.comb += at.eq(fill - Mux(take, ow // step, 0))
        placed = Array(self.i.payload << (k * step) for k in range((size - iw) // step + 1))
        with m.If(give):
            m.d.sync += [buf.eq(kept | placed[at]), fill.eq(at + iw // step)]
        with m.Else():
            m.d.sync += [buf.eq(kept), fill.eq(at)]
        self.formal_state = dict(buf=buf, fill=fill, step=step)
        return m


def _golden(spec, xs, producer):
    """The words as they come: a width converter changes how they are cut, not their elements."""
    return xs[0]


def _small_instance(s):
    """At most two units of lcm(in, out) bits: every way words are cut and joined, twice."""
    unit = lcm(s.in_width, s.out_width)
    return dict(shape=(1, unit * min(2, s.frame_bits // unit) // s.dtype.bitwidth()))


def _examples():
    """Two 4-bit words into one of 8, then FINN's grid (shape, in and out width in bits, datatype) and
    non-integer and wide ratios; every third in the default suite."""
    grid = [((1, 24), 6, 4, "INT2"), ((1, 24), 4, 6, "INT2"), ((1, 4), 2, 4, "BIPOLAR"), ((1, 4), 4, 2, "INT2"),
            ((1, 2, 8), 4, 4, "INT2"), ((1, 2, 8), 8, 16, "INT2"),
            ((1, 784), 49, 16, "BINARY"), ((1, 784), 16, 49, "BINARY"), ((4, 64), 512, 8, "UINT8"),
            ((4, 64), 8, 512, "UINT8"), ((2, 30), 12, 45, "UINT3"), ((1, 36), 36, 8, "INT4")]
    return [(dict(shape=(1, 8), in_width=4, out_width=8, dtype="INT2"), {}),
            *(Example(dict(shape=shape, in_width=iw, out_width=ow, dtype=dtype), {}, slow=k % 3 != 0)
              for k, (shape, iw, ow, dtype) in enumerate(grid))]


OP = Op("StreamingDataWidthConverter", DWCSpec, StreamingDataWidthConverter,
        finn_names={"in_width": "inWidth", "out_width": "outWidth", "dtype": "dataType"},
        old_names=("StreamingDataWidthConverter_Batch",), role="dwc", golden=_golden, small_instance=_small_instance,
        examples=_examples)
