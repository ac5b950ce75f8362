"""The contract of a sliding-window generator (FINN ``ConvolutionInputGenerator``), shared by both styles."""

from dataclasses import dataclass
from typing import Literal

import numpy as np

from layers.datapath import check_dtype, legal_divisors
from layers.memcost import ram_cost
from layers.op import Resources, StreamContract
from memstream.memstream import BRAM_OR_LUT_STYLES
from layers.timing import Timing, as_cycles, counting, frames_of, take_when_ready

__all__ = ["SWGSpec"]

RAM_STYLES = BRAM_OR_LUT_STYLES
TIMING_CHUNK = 16384        # default style's timing model: output words per chunk of windows
SHIFT_REGISTER_MAX = 4      # parallel style: gaps up to this many words are register chains, longer ones line buffers


def _pair(owner, attr, value):
    value = (value, value) if isinstance(value, int) else tuple(value)
    if len(value) != 2 or any(not isinstance(v, int) or v < 1 for v in value):
        raise ValueError(f"{owner} {attr} must be a positive integer or a (height, width) pair, not {value!r}")
    return value


@dataclass(frozen=True)
class SWGSpec(StreamContract):
    """Contract of a ConvolutionInputGenerator (FINN attribute names in snake case).

    The generator turns an (H, W, C) image, streamed pixel by pixel in words of ``simd`` channels, into
    the windows of a kernel sliding with ``stride`` and ``dilation`` over it (no padding: that is a
    separate FMPadding). Output order per output pixel, row-major:

    - standard: for ky, kx, channel fold cf: one word of SIMD channels (qonnx ``Im2Col`` order);
    - depthwise: for cf, ky, kx (what a VVAU with PE = ``simd`` reads);
    - parallel window: one word per (pixel, cf) holding all kh*kw*SIMD elements, kernel position 0
      (top-left) at the LSB.

    Every input frame is consumed whole, unused trailing rows and columns included.
    """
    ifm_dim: tuple                      # IFMDim: (H, W); 1D is H = 1 with kh = 1
    ifm_channels: int                   # IFMChannels: C
    kernel: tuple                       # ConvKernelDim: (kh, kw)
    input_dtype: object                 # inputDataType (= outputDataType)
    simd: int = 1                       # SIMD: channels per input word, divides C
    stride: tuple = (1, 1)              # Stride: (sh, sw)
    dilation: tuple = (1, 1)            # Dilation: (dh, dw)
    depthwise: bool = False
    parallel_window: bool = False
    ram_style: Literal["auto", "distributed", "block"] = "auto"

    owner = "ConvolutionInputGenerator"

    def __post_init__(self):
        owner = self.owner
        for attr in ("ifm_dim", "kernel", "stride", "dilation"):
            object.__setattr__(self, attr, _pair(owner, attr, getattr(self, attr)))
        for attr in ("ifm_channels", "simd"):
            if not isinstance(getattr(self, attr), int) or getattr(self, attr) < 1:
                raise ValueError(f"{owner} {attr} must be a positive integer, not {getattr(self, attr)!r}")
        if self.ifm_channels % self.simd:
            raise ValueError(f"{owner} simd={self.simd} must divide ifm_channels={self.ifm_channels}; "
                             f"legal simd: {legal_divisors(self.ifm_channels)}")
        object.__setattr__(self, "input_dtype", check_dtype(owner, "input_dtype", self.input_dtype))
        if self.ram_style not in RAM_STYLES:
            raise ValueError(f"{owner} ram_style must be one of {', '.join(RAM_STYLES)}, not {self.ram_style!r}")
        for axis, name in enumerate(("height", "width")):
            span = self.dilation[axis] * (self.kernel[axis] - 1) + 1
            if span > self.ifm_dim[axis]:
                raise ValueError(f"{owner} kernel {name} {self.kernel[axis]} with dilation {self.dilation[axis]} "
                                 f"spans {span} pixels but ifm_dim {name} is {self.ifm_dim[axis]}")
        if self.parallel_window and not (self.depthwise or self.kernel == (1, 1)) and self.simd != self.ifm_channels:
            raise ValueError(f"{owner} parallel_window needs simd=ifm_channels={self.ifm_channels} "
                             f"(got simd={self.simd}) unless depthwise or the kernel is 1x1: each output word is "
                             f"a whole window, so all channels of a pixel must arrive in one word")

    # ---- shapes and widths ----
    @property
    def ofm_dim(self):
        """OFM = floor((IFM - d(k-1) - 1) / s) + 1 per axis."""
        return tuple((self.ifm_dim[a] - self.dilation[a] * (self.kernel[a] - 1) - 1) // self.stride[a] + 1
                     for a in range(2))

    @property
    def cf(self):
        """Channel folds: words per pixel."""
        return self.ifm_channels // self.simd

    @property
    def kernel_positions(self):
        return self.kernel[0] * self.kernel[1]

    @property
    def output_dtype(self):
        return self.input_dtype

    @property
    def in_width(self):
        return self.simd * self.input_dtype.bitwidth()

    @property
    def out_lanes(self):
        return self.simd * (self.kernel_positions if self.parallel_window else 1)

    @property
    def out_width(self):
        return self.out_lanes * self.input_dtype.bitwidth()

    @property
    def folded_input_shape(self):
        return (1, *self.ifm_dim, self.cf, self.simd)

    @property
    def folded_output_shape(self):
        if self.parallel_window:
            return (1, *self.ofm_dim, self.cf, self.out_lanes)
        return (1, *self.ofm_dim, self.kernel_positions * self.cf, self.simd)

    @property
    def in_words(self):
        """Input words per frame."""
        return self.ifm_dim[0] * self.ifm_dim[1] * self.cf

    @property
    def out_words(self):
        """Output words per frame."""
        oh, ow = self.ofm_dim
        return oh * ow * self.cf * (1 if self.parallel_window else self.kernel_positions)

    # ---- the window in input-word indices (both styles derive their addressing from these) ----
    def tap_offset(self, ky, kx, cf=0):
        """Input-word index of window element (ky, kx, cf) relative to the window's top-left word."""
        (_, w), (dh, dw) = self.ifm_dim, self.dilation
        return ((ky * dh * w) + kx * dw) * self.cf + cf

    @property
    def window_span(self):
        """BUF_min: input words from a window's top-left word to its bottom-right word, inclusive."""
        kh, kw = self.kernel
        return self.tap_offset(kh - 1, kw - 1, self.cf - 1) + 1

    def tap_delays(self):
        """Parallel style: {(ky, kx): input words between that window element and the bottom-right one}."""
        kh, kw = self.kernel
        last = self.tap_offset(kh - 1, kw - 1)
        return {(ky, kx): last - self.tap_offset(ky, kx) for ky in range(kh) for kx in range(kw)}

    def line_buffer_depths(self):
        """Parallel style: depth of each memory in the delay line (a gap of g words is g - 1 words + a tap)."""
        delays = sorted(set(self.tap_delays().values()))
        return [b - a - 1 for a, b in zip([0] + delays, delays) if b - a > SHIFT_REGISTER_MAX]

    @property
    def pixel_steps(self):
        """How far the window's top-left word moves: to the next column, next row, next frame's first window."""
        (h, w), (oh, ow), (sh, sw) = self.ifm_dim, self.ofm_dim, self.stride
        column = sw * self.cf
        row = (sh * w - (ow - 1) * sw) * self.cf
        frame = h * w * self.cf - ((oh - 1) * sh * w + (ow - 1) * sw) * self.cf
        return column, row, frame

    @property
    def lead_words(self):
        """Input words taken before the first window is complete (FIFO bounds on reconvergent paths)."""
        return self.window_span

    @property
    def words_before_lead(self):
        """The default style offers each word of the first window as soon as its input word arrived: all
        but the window's last word may leave before input word ``lead_words``."""
        return 0 if self.parallel_window else self.kernel_positions * self.cf - 1

    @property
    def buffer_words(self):
        """Default style: circular buffer depth. BUF_min plus the headroom that lets the next window's
        words arrive while the current window is read (a column step, or a row step when larger)."""
        column, row, _ = self.pixel_steps
        headroom = max(column, row if self.ofm_dim[0] > 1 else 0)
        return self.window_span + headroom

    def read_offsets(self):
        """Default style: the window's elements in read order, as input-word offsets from its top-left."""
        kh, kw = self.kernel
        if self.depthwise:
            return [self.tap_offset(ky, kx, cf) for cf in range(self.cf) for ky in range(kh) for kx in range(kw)]
        return [self.tap_offset(ky, kx, cf) for ky in range(kh) for kx in range(kw) for cf in range(self.cf)]

    @property
    def exp_cycles(self):
        """Cycles per frame in steady state (frames back to back, no backpressure).

        Parallel: one input word per cycle. Default: one output word per cycle, unless the input is the
        bottleneck, plus the stalls where a window needs words the writer could not fetch early. While
        window k is read, the writer may run X = buffer_words - window_span words past its bottom-right
        word; when the reader moves on (the window's top-left steps by D words), element j (offset o_j
        from the top-left) waits for its word, which arrives D - span - X + 1 + o_j - j cycles after
        the reader would have read it. That happens at most once per step kind (column, row, frame).
        """
        if self.parallel_window:
            return self.in_words
        oh, ow = self.ofm_dim
        headroom = self.buffer_words - self.window_span
        lag = max(o - j for j, o in enumerate(self.read_offsets()))

        def stall(step):
            return max(0, step - self.window_span - headroom + 1 + lag)

        column, row, frame = self.pixel_steps
        stalls = oh * (ow - 1) * stall(column) + (oh - 1) * stall(row) + stall(frame)
        return max(self.in_words, self.out_words + stalls)

    @property
    def latency(self):
        """Cycles from the input word completing a window to its last output word being offered."""
        return 1 if self.parallel_window else 4

    def window_top_lefts(self):
        """Input-word index of each window's top-left word in one frame, windows in output order."""
        (_, w), (oh, ow), (sh, sw) = self.ifm_dim, self.ofm_dim, self.stride
        oy, ox = np.divmod(np.arange(oh * ow, dtype=np.int64), ow)
        return (oy * sh * w + ox * sw) * self.cf

    def timing(self, arrivals):
        """When each input word moves and each output word is offered (:mod:`layers.timing`).

        Parallel: ``i.ready`` is ``~o.valid | o.ready``, always high with the output never stalled, so
        a word moves when offered; a word that completes a window (every channel fold of a window's
        bottom-right pixel) has that window offered the next cycle.

        Default: on the running index (frames back to back), the reader issues output word ``j``
        (element ``e`` of window ``w``, input word ``tl[w] + read_offsets()[e]``) the cycle after that
        word moved, and after issuing ``j - 1``; it is offered 3 cycles after its issue (memory read
        register, valid register, output FIFO). The writer takes word ``n`` once the current window's
        top-left ``tl`` satisfies ``n < tl + buffer_words``: ``tl`` moves to window ``w + 1`` the cycle
        after window ``w``'s last issue, so word ``n`` waits for the end of the last window whose
        top-left is at most ``n - buffer_words``. Both recurrences are cumulative maxima (as in
        :func:`take_when_ready`) over chunks of windows (:meth:`_buffer_timing`).
        """
        arrivals = as_cycles(arrivals[0])
        frames = frames_of(arrivals, self.in_words)
        if self.parallel_window:
            reads = take_when_ready(arrivals)
            ends = self.window_top_lefts() + self.tap_offset(self.kernel[0] - 1, self.kernel[1] - 1)
            ends = (ends[:, None] + np.arange(self.cf)).reshape(-1)
            ends = (ends[None, :] + self.in_words * np.arange(frames)[:, None]).reshape(-1)
            return Timing((reads,), reads[ends] + 1)
        return self._buffer_timing(arrivals, frames)

    def _buffer_timing(self, arrivals, frames):
        """Default style (see :meth:`timing`). Block ``k`` of input words, ``[tl[k - 1] + depth,
        tl[k] + depth)``, waits for room until window ``k - 1`` has ended; window ``k`` reads words of
        blocks up to ``k`` only. Windows go in chunks of about ``TIMING_CHUNK`` output words: a chunk's
        blocks are first taken with room from the windows before it only, then, while some word was
        taken before the room its chunk's own windows give, again with that room; the room only grows,
        so this ends, exact, at the least fixed point (one pass when the room never binds)."""
        depth, total = self.buffer_words, arrivals.size
        offsets = np.asarray(self.read_offsets(), dtype=np.int64)
        per_window = offsets.size
        tops = (self.window_top_lefts()[None, :] + self.in_words * np.arange(frames)[:, None]).reshape(-1)
        windows = tops.size
        ends = np.minimum(tops + depth, total)             # block k: [ends[k - 1], ends[k])
        chunk = max(1, TIMING_CHUNK // per_window)
        count = counting(max(total, chunk * per_window))
        reads = np.empty(total, dtype=np.int64)
        writes = np.empty(windows * per_window, dtype=np.int64)

        def take(lo, hi, ready):                            # take_when_ready after word lo - 1
            x = np.maximum(arrivals[lo:hi], ready) - count[:hi - lo]
            if lo > 0:
                x[0] = max(x[0], reads[lo - 1] + 1)
            reads[lo:hi] = np.maximum.accumulate(x) + count[:hi - lo]

        room = 0                                            # cycle from which the next block may be taken
        for w0 in range(0, windows, chunk):
            w1 = min(w0 + chunk, windows)
            lo, hi = (ends[w0 - 1] if w0 else 0), ends[w1 - 1]
            sizes = np.diff(ends[w0:w1], prepend=lo)
            need = (tops[w0:w1, None] + offsets).reshape(-1)
            j0, j1 = w0 * per_window, w1 * per_window
            rooms = np.full(w1 - w0, room)                  # block w0's room is known; the others' guessed
            ready = np.repeat(rooms, sizes)
            while True:
                if hi > lo:
                    take(lo, hi, ready)
                x = reads[need] + 1 - count[:j1 - j0]
                if j0:
                    x[0] = max(x[0], writes[j0 - 1] + 1)
                writes[j0:j1] = np.maximum.accumulate(x) + count[:j1 - j0]
                rooms[1:] = writes[j0 + per_window - 1:j1 - 1:per_window] + 1
                ready = np.repeat(rooms, sizes)
                if np.all(reads[lo:hi] >= ready):
                    break
            room = writes[j1 - 1] + 1
        if windows and ends[-1] < total:                    # the last frame's tail: room from its last window
            take(ends[-1], total, room)
        return Timing((reads,), writes + 3)

    def resource_estimate(self):
        """LUT/FF/BRAM18 of buffers and controller; with ``auto`` a memory is in LUTRAM or BRAM as Yosys
        chooses (:func:`layers.memcost.ram_cost`).

        Default: the circular buffer, ~12 LUT/FF per index bit for the loop counters and compares, and
        the depth-2 output FIFO. Parallel: the kh*kw taps are registers (they are the output word),
        the gaps between them register chains or line buffers.
        """
        width = self.simd * self.input_dtype.bitwidth()
        if self.parallel_window:            # line buffers read and write one address: single-port RAMs
            memories, single_port = self.line_buffer_depths(), True
            registers, control = (self.window_span - sum(memories)) * width, 4 * self.in_words.bit_length()
            lut = 3 * self.in_words.bit_length() // 2
        else:                               # the circular buffer, and the output word's multiplexer
            memories, single_port = [self.buffer_words], False
            registers, control = 3 * width, 12 * (self.in_words + self.buffer_words).bit_length()
            lut = control + width
        storage = sum((ram_cost(width, depth, self.ram_style, single_port) for depth in memories), Resources())
        lut, bram18 = lut + storage.lut, storage.bram18
        return Resources(lut=lut, ff=registers + control, bram18=bram18)
