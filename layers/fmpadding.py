"""FMPadding: zero-pad the two spatial dimensions of a folded NHWC feature-map stream."""

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from layers.datapath import PixelFolded, check_dtype, legal_divisors, output_stage, wrapping_increment
from layers.fifo import output_fifo_spec
from layers.op import OneDatatype, OneWidth, Op, Resources, divisors_of, grid_examples
from layers import small
from layers.timing import Timing, as_cycles, frames_of, take_when_ready_in_place


__all__ = ["FMPaddingSpec", "FMPadding", "PaddingWalk"]


def _positive(owner, attr, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{owner} {attr} must be a positive integer, not {value!r}")
    return value


class PaddingWalk:
    """Timing of a padding layer (FMPadding, FMPadding_Pixel): a walker over the output words that forwards
    the next input word where ``inside()`` says so and pads elsewhere. For specs with ``inside()`` (per
    output word of a frame: whether it forwards an input word), ``in_words``, ``out_words``, ``latency``."""

    @property
    def words_before_lead(self):
        """The pad words before the first input word (FMPadding's top rows, then the left pads of the first
        image row) may leave before that word is taken: once it is offered (see :meth:`timing`)."""
        return int(np.argmax(self.inside()))

    def timing(self, arrivals):
        """A walker steps through the output words, one a cycle with the output never stalled: a word
        inside the image waits until the next input word is offered and takes it; a frame's first word,
        if padding, waits until the frame's first input word is offered (without taking it); other pads
        go at once. ``step[j] = max(offered[j], step[j - 1] + 1)``, :func:`take_when_ready` over the
        output words; each is offered ``latency`` cycles after its step (:mod:`layers.timing`)."""
        arrivals = as_cycles(arrivals[0])
        frames = frames_of(arrivals, self.in_words)
        inside = np.tile(self.inside(), frames)
        offered = np.full(inside.size, np.iinfo(np.int64).min // 4)
        offered[inside] = arrivals                          # the input words, in order
        offered[::self.out_words] = arrivals[::self.in_words]   # a frame's first word waits for its first input
        steps = take_when_ready_in_place(offered)
        reads = steps[inside]
        steps += self.latency                               # now the cycles each word is offered
        return Timing((reads,), steps)


@dataclass(frozen=True)
class FMPaddingSpec(PaddingWalk, PixelFolded, OneDatatype, OneWidth):
    """Contract of a padding layer (FINN ``FMPadding``: ImgDim, Padding, NumChannels, SIMD, inputDataType).

    ``padding`` is FINN's order [top, left, bottom, right]; any non-negative amounts, asymmetric
    allowed. The pad value is the all-zero element code: 0 for INT/UINT/BINARY/TERNARY and -1 for
    BIPOLAR (code 0), which is what FINN pads with too.
    """
    img_dim: tuple              # ImgDim: (H, W) of the input; an int means square
    padding: tuple              # Padding: (top, left, bottom, right)
    num_channels: int           # NumChannels: C
    simd: int                   # SIMD: channels per word, divides C
    dtype: object = "INT8"      # inputDataType (= output datatype)

    def __post_init__(self):
        owner = "FMPadding"
        dim = self.img_dim
        if isinstance(dim, int):
            dim = (dim, dim)
        dim = tuple(dim)
        if len(dim) != 2:
            raise ValueError(f"{owner} img_dim must be (h, w), not {self.img_dim!r}")
        for d in dim:
            _positive(owner, "img_dim", d)
        object.__setattr__(self, "img_dim", dim)
        pad = tuple(self.padding)
        if len(pad) != 4 or any(not isinstance(p, int) or isinstance(p, bool) or p < 0 for p in pad):
            raise ValueError(f"{owner} padding must be 4 non-negative integers [top, left, bottom, right], "
                             f"not {self.padding!r}")
        object.__setattr__(self, "padding", pad)
        _positive(owner, "num_channels", self.num_channels)
        _positive(owner, "simd", self.simd)
        if self.num_channels % self.simd:
            raise ValueError(f"{owner} simd={self.simd} must divide num_channels={self.num_channels}; "
                             f"legal: {legal_divisors(self.num_channels)}")
        object.__setattr__(self, "dtype", check_dtype(owner, "dtype", self.dtype))

    @property
    def out_dim(self):
        top, left, bottom, right = self.padding
        return self.img_dim[0] + top + bottom, self.img_dim[1] + left + right

    in_image = property(lambda self: self.img_dim)
    out_image = property(lambda self: self.out_dim)

    @property
    def latency(self):
        """Cycles from an input transfer (or a pad position's turn) to the word being offered (output FIFO)."""
        return 2

    def inside(self):
        """Per output word of a frame (output order): whether it forwards an input word (else it pads)."""
        (h, w), (oh, ow) = self.img_dim, self.out_dim
        top, left, _, _ = self.padding
        y, x = np.arange(oh), np.arange(ow)
        pixels = ((y >= top) & (y < top + h))[:, None] & ((x >= left) & (x < left + w))[None, :]
        return np.repeat(pixels.reshape(-1), self.cf)

    def resource_estimate(self):
        """The zero-select per bit, three position counters with their compares, and the output FIFO."""
        counter_bits = sum(max(1, (n - 1).bit_length()) for n in (*self.out_dim, self.cf))
        fifo = output_fifo_spec(self.width).resource_estimate()
        return Resources(lut=self.width + 3 * counter_bits + fifo.lut, ff=counter_bits + fifo.ff, bram18=0)


class FMPadding(wiring.Component):
    """Pads each frame of an NHWC stream with zero pixels around the image.

    Members
    -------
    i : In(stream.Signature(spec.width))
    o : Out(stream.Signature(spec.width))

    The output is the padded tensor in row-major order (rows, then columns, then channel folds), one
    word per cycle: a frame takes ``spec.exp_cycles`` = padded pixels x C/SIMD cycles, and the next
    frame follows with no gap. A walker steps through the output positions; at a pad position it
    emits a zero word without touching the input, inside the image it forwards the next input word
    (waiting for it if needed). A frame's first output word waits until the frame's first input word
    is offered (not taken, unless it is the first inside word), so padding never runs ahead into a
    frame that has not started; the bottom padding of a frame follows its last input word. Words are
    offered ``spec.latency`` cycles after their turn. ``i.ready`` is the output FIFO's registered ready
    gated by position, never a function of ``o.ready``; a stall freezes the walker, so nothing is lost
    or repeated.
    """

    def __init__(self, spec):
        self._spec = spec
        super().__init__({
            "i": In(stream.Signature(spec.width)),
            "o": Out(stream.Signature(spec.width)),
        })

    @property
    def spec(self):
        return self._spec

    def elaborate(self, platform):
        spec = self._spec
        (h, w), (oh, ow) = spec.img_dim, spec.out_dim
        top, left, _, _ = spec.padding
        m = Module()
        row = Signal(range(oh))
        col = Signal(range(ow))
        fold = Signal(range(spec.cf))
        inside = (row >= top) & (row < top + h) & (col >= left) & (col < left + w)
        # A frame starts only once its first input word is there, so the walker never pads ahead into
        # a frame that may not come (and after the last frame the stream stays quiet).
        at_start = (row == 0) & (col == 0) & (fold == 0)
        step = pad_stream(m, self.i, self.o, spec.width, inside, waits=inside | at_start)
        with m.If(step):
            m.d.sync += fold.eq(wrapping_increment(fold, spec.cf))
            with m.If(fold == spec.cf - 1):
                m.d.sync += col.eq(wrapping_increment(col, ow))
                with m.If(col == ow - 1):
                    m.d.sync += row.eq(wrapping_increment(row, oh))
        return m



def pad_stream(m, i, o, width, inside, *, waits):
    """The stream side of a padding walker (FMPadding, FMPadding_Pixel): at the current output position,
    forward the next input word where ``inside`` (waiting for it), else emit a zero word; where ``waits``
    and not ``inside``, hold the position until an input word is there without taking it. Returns
    ``step``: the position is done this cycle (the walker advances on it). ``i.ready`` is the output
    FIFO's registered ready gated by ``inside``, never a function of ``o.ready``."""
    advance, fifo_in = output_stage(m, o, width)
    ready_to_emit = Mux(waits, i.valid, 1)
    m.d.comb += [
        i.ready.eq(advance & inside),
        fifo_in.valid.eq(ready_to_emit),
        fifo_in.payload.eq(Mux(inside, i.payload, 0)),
    ]
    return advance & ready_to_emit


# ---- the golden: this op on numpy from its definition, written apart from the hardware (no folding,
# packing or pipeline, no spec); the OP's golden hook applies it to a spec's streams
def golden_fm_padding(x, padding, value=0):
    """Pad the two spatial axes of x (N, H, W, C) by padding = [top, left, bottom, right] with ``value``."""
    top, left, bottom, right = (int(p) for p in padding)
    x = np.asarray(x)
    out = np.full((x.shape[0], x.shape[1] + top + bottom, x.shape[2] + left + right, *x.shape[3:]), value,
                  dtype=x.dtype)
    out[:, top:top + x.shape[1], left:left + x.shape[2]] = x
    return out


def _golden(spec, xs, producer):
    return golden_fm_padding(xs[0].reshape(xs[0].shape[0], *spec.img_dim, spec.num_channels), spec.padding)


def _small_instance(s):
    """At most a 2 x 2 image, two words of channels."""
    return dict(img_dim=tuple(min(i, 2) for i in s.img_dim), num_channels=small.fold(s.num_channels, s.simd))


def _examples():
    """One pixel of padding on every side, then FINN's grid (test_fpgadataflow_fmpadding) without its
    hls/rtl axis."""
    grid = dict(idim=[(8, 8), (10, 8)], pad=[(1, 1, 1, 1), (1, 1, 2, 2), (1, 3, 2, 3), (7, 0, 8, 0)],
                channels=[2, 4], simd=[1, 2], dtype=["INT2", "INT4"])
    return [(dict(img_dim=(3, 3), padding=(1, 1, 1, 1), num_channels=4, dtype="INT2"), {"SIMD": 2}),
            *grid_examples(grid, lambda c: (dict(img_dim=c["idim"], padding=c["pad"], num_channels=c["channels"],
                                                 dtype=c["dtype"]), {"SIMD": c["simd"]}), stride=43)]


OP = Op("FMPadding", FMPaddingSpec, FMPadding, folding={"SIMD": "simd"},
        parallelism={"SIMD": divisors_of("num_channels")},
        finn_names={"img_dim": "ImgDim", "padding": "Padding", "num_channels": "NumChannels", "dtype": "inputDataType"},
        old_names=("FMPadding_Batch",), golden=_golden, small_instance=_small_instance, examples=_examples)
