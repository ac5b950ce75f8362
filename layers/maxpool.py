"""StreamingMaxPool: max pooling with stride = kernel on a channels-last pixel stream (FINN ``StreamingMaxPool``).

Every input word updates one running maximum kept in a small memory and is then dropped; a window's
maximum leaves as soon as its last element arrives. So one input word per cycle, no line of pixels is
buffered, and only the partial maxima of one row of windows are stored.
"""

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data
from amaranth.lib.memory import Memory

from layers.datapath import positive_pair, StreamLayer, check_dtype, element_value, legal_divisors, output_stage, register, wrapping_increment
from layers.fifo import output_fifo_spec
from layers.op import Lowering, OneDatatype, Op, Resources, StreamContract, divisors_of, grid_examples
from layers import small
import golden
from layers.timing import Timing, as_cycles, frames_of, take_when_ready


__all__ = ["StreamingMaxPoolSpec", "StreamingMaxPool"]

OWNER = "StreamingMaxPool"


@dataclass(frozen=True)
class StreamingMaxPoolSpec(StreamContract, OneDatatype):
    """Contract of a max pool (FINN attributes ImgDim, PoolDim, NumChannels, PE, CeilMode, dataType).

    The stride equals the pool size. 1D (a 1 x W image with a 1 x k kernel, or W x 1 with k x 1) streams
    words of ``pe`` channels (C/PE words per pixel) and may use ``ceil_mode``; 2D streams one word per
    pixel holding all C channels (FINN ignores PE in 2D, and so does this layer) and needs the image
    to be a multiple of the kernel. BIPOLAR is legal in 2D only (FINN has no 1D bipolar max pool).
    """
    img_dim: tuple              # ImgDim (h, w); an int means square
    pool_dim: tuple             # PoolDim (kh, kw) = stride; an int means square
    num_channels: int           # NumChannels: C
    pe: int = 1                 # PE: channels per word in 1D (ignored in 2D)
    ceil_mode: bool = False     # CeilMode: 1D only; a trailing partial window gives an output pixel
    dtype: object = "INT8"      # dataType: of input and output

    def __post_init__(self):
        img, pool = positive_pair(OWNER, "img_dim", self.img_dim), positive_pair(OWNER, "pool_dim", self.pool_dim)
        object.__setattr__(self, "img_dim", img)
        object.__setattr__(self, "pool_dim", pool)
        for attr in ("num_channels", "pe"):
            v = getattr(self, attr)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{OWNER} {attr} must be a positive integer, not {v!r}")
        object.__setattr__(self, "ceil_mode", bool(self.ceil_mode))
        object.__setattr__(self, "dtype", check_dtype(OWNER, "dtype", self.dtype))
        if img[0] < pool[0] or img[1] < pool[1]:
            raise ValueError(f"{OWNER} pool_dim={self._pool_text} must not exceed img_dim={img}")
        if self.is_1d:
            if self.num_channels % self.pe:
                raise ValueError(f"{OWNER} pe={self.pe} must divide num_channels={self.num_channels} in 1D; "
                                 f"legal pe: {legal_divisors(self.num_channels)}")
            if self.dtype.name == "BIPOLAR":
                raise ValueError(f"{OWNER} dtype=BIPOLAR is only supported in 2D (FINN has no 1D bipolar max pool)")
        elif img[0] % pool[0] or img[1] % pool[1]:
            raise ValueError(f"{OWNER} img_dim={img} must be a multiple of pool_dim={self._pool_text} in 2D")

    @property
    def _pool_text(self):
        kh, kw = self.pool_dim
        return str(kh) if kh == kw else str(self.pool_dim)

    @property
    def is_1d(self):
        """FINN's rule: a dummy dimension of size 1 in both image and kernel (either axis)."""
        (h, w), (kh, kw) = self.img_dim, self.pool_dim
        return (h == 1 and kh == 1) or (w == 1 and kw == 1)

    @property
    def _line(self):
        """(rows, cols, kh, kw) in stream order, a 1D W x 1 image turned into 1 x W (same stream)."""
        (h, w), (kh, kw) = self.img_dim, self.pool_dim
        if self.is_1d and h != 1:
            return w, h, kw, kh
        return h, w, kh, kw

    @property
    def lanes(self):
        """Channels per word: PE in 1D, all C in 2D."""
        return self.pe if self.is_1d else self.num_channels

    @property
    def nf(self):
        """Words per pixel."""
        return self.num_channels // self.lanes

    @property
    def out_img_dim(self):
        (h, w), (kh, kw) = self.img_dim, self.pool_dim
        if self.ceil_mode:
            return -(-h // kh), -(-w // kw)
        return h // kh, w // kw

    @property
    def width(self):
        """Bits of an input and of an output word."""
        return self.lanes * self.dtype.bitwidth()

    in_width = out_width = width

    @property
    def normal_input_shape(self):
        return (1, *self.img_dim, self.num_channels)

    @property
    def normal_output_shape(self):
        return (1, *self.out_img_dim, self.num_channels)

    @property
    def folded_input_shape(self):
        return (1, *self.img_dim, self.nf, self.lanes)

    @property
    def folded_output_shape(self):
        return (1, *self.out_img_dim, self.nf, self.lanes)

    @property
    def in_words(self):
        return self.img_dim[0] * self.img_dim[1] * self.nf

    @property
    def out_words(self):
        return self.out_img_dim[0] * self.out_img_dim[1] * self.nf

    @property
    def exp_cycles(self):
        """Cycles per frame in steady state: one input word per cycle (FINN: 1D OFM*NF*(k+1), 2D ~W^2(1+1/k^2))."""
        return self.in_words

    @property
    def lead_words(self):
        """Input words taken before the first output word can leave: the first window's last pixel."""
        rows, cols, kh, kw = self._line
        return ((kh - 1) * cols + kw) * self.nf

    @property
    def buffer_depth(self):
        """Partial maxima kept: one per window column of a row (2D with kh > 1), else one per word of a pixel."""
        rows, cols, kh, kw = self._line
        return -(-cols // kw) if kh > 1 else self.nf

    latency = 3                 # cycles from a window's last pixel to its maximum being offered

    def window_last_words(self):
        """Input-word index, in one frame, of each output word's last element (output order): the words
        of a window's last pixel (a ceil-mode partial window's: the row's last), trailing pixels that
        make no window (floor mode) excepted."""
        rows, cols, kh, kw = self._line
        y, x, _ = np.indices((rows, cols, self.nf)).reshape(3, -1)
        ocols = -(-cols // kw) if self.ceil_mode else cols // kw
        last = (y % kh == kh - 1) & ((x % kw == kw - 1) | (x == cols - 1)) & (x // kw < ocols)
        return np.flatnonzero(last)

    def timing(self, arrivals):
        """``i.ready`` is the output FIFO's registered ready, always high with the output never stalled:
        a word moves when offered, and a window's maximum is offered ``latency`` cycles after its last
        word moved (:mod:`layers.timing`)."""
        arrivals = as_cycles(arrivals[0])
        frames = frames_of(arrivals, self.in_words)
        reads = take_when_ready(arrivals)
        last = (self.window_last_words()[None, :] + self.in_words * np.arange(frames)[:, None]).reshape(-1)
        return Timing((reads,), reads[last] + self.latency)

    def resource_estimate(self):
        """A compare and select per bit of the word, the partial-maximum memory (LUT RAM below 512 entries,
        else BRAM18), the pipeline register, the read register and the 2-word output FIFO."""
        width, depth = self.width, self.buffer_depth
        lut, ff, bram18 = 2 * width + 24, 3 * width + 24, 0
        if depth == 1:
            ff += width
        elif depth >= 512:
            bram18 += -(-width // 18) * -(-depth // 1024)
        else:
            lut += width * -(-depth // 64)
        # the output FIFO's LUTs (Yosys on CNV's two pools: 260 and 494 LUT, 216 and 408 without them)
        return Resources(lut=lut + output_fifo_spec(width).resource_estimate().lut, ff=ff + width, bram18=bram18)


class StreamingMaxPool(StreamLayer):
    """Max pooling of a stream of pixels (stride = kernel), in the order FINN streams them.

    Members
    -------
    i : In(stream.Signature(spec.in_width))
    o : Out(stream.Signature(spec.out_width))

    Input: pixels row by row, each as ``spec.nf`` words of ``spec.lanes`` channels (lane p of word f
    is channel f * lanes + p). Output: the pooled pixels in the same order and format. A window's
    maximum is offered two cycles after its last element is taken (a register stage, then the output
    FIFO); partial windows (1D ``ceil_mode``) take the max of their valid elements, and in floor mode
    the trailing pixels that make no full window are consumed and dropped. The input takes one word
    per cycle whenever the consumer keeps up, so a frame takes ``spec.exp_cycles`` cycles and frames
    follow back to back. ``i.ready`` is the output FIFO's registered ready; a stalled consumer freezes
    the pipeline (memory reads included) without losing or repeating a word.

    The running maxima sit in a memory of ``spec.buffer_depth`` words: in 2D one per window column
    (read when a window row starts, written back when it ends), in 1D one per word of a pixel. The
    read for a word is issued when it is taken and is transparent to the write-back of the word
    before it, which may update the same entry.
    """

    def elaborate(self, platform):
        spec = self._spec
        rows, cols, kh, kw = spec._line
        ocols = -(-cols // kw) if spec.ceil_mode else cols // kw
        nf, bits = spec.nf, spec.dtype.bitwidth()
        m = Module()
        advance, fifo_in = output_stage(m, self.o, spec.width)

        # Position of the word on the input: fold, column, column within the window, window column,
        # row within the window. The row of windows needs no counter: frames end with all at 0.
        f, x = Signal(range(nf)), Signal(range(cols))
        kx, ox, kr = Signal(range(kw)), Signal(range(ocols + 1)), Signal(range(kh))
        take = self.i.valid & advance
        m.d.comb += self.i.ready.eq(advance)
        with m.If(take):
            m.d.sync += f.eq(wrapping_increment(f, nf))
            with m.If(f == nf - 1):
                with m.If(x == cols - 1):
                    m.d.sync += [x.eq(0), kx.eq(0), ox.eq(0), kr.eq(wrapping_increment(kr, kh))]
                with m.Else():
                    m.d.sync += [x.eq(x + 1), kx.eq(wrapping_increment(kx, kw))]
                    with m.If(kx == kw - 1):
                        m.d.sync += ox.eq(ox + 1)

        first = (kr == 0) & (kx == 0)
        last = (kr == kh - 1) & ((kx == kw - 1) | (x == cols - 1))     # x == cols - 1: a ceil-mode partial window
        dropped = ox >= ocols                                           # floor mode: past the last full window
        addr = ox if kh > 1 else f

        mem = Memory(shape=spec.width, depth=spec.buffer_depth, init=[])
        m.submodules.partial = mem
        wr = mem.write_port()
        rd = mem.read_port(domain="sync", transparent_for=(wr,))
        m.d.comb += [rd.addr.eq(addr), rd.en.eq(advance)]

        v1 = register(m, advance, take, name="v1", reset_less=False)
        x1 = register(m, advance, self.i.payload, name="x1")
        first1 = register(m, advance, first, name="first1")
        last1 = register(m, advance, last, name="last1")
        dropped1 = register(m, advance, dropped, name="dropped1")
        addr1 = register(m, advance, addr, name="addr1")

        layout = data.ArrayLayout(bits, spec.lanes)
        new_lanes, old_lanes = data.View(layout, x1), data.View(layout, rd.data)
        merged = Cat(Mux(first1 | (element_value(new_lanes[p], spec.dtype) > element_value(old_lanes[p], spec.dtype)),
                         new_lanes[p], old_lanes[p]) for p in range(spec.lanes))
        m.d.comb += [
            wr.addr.eq(addr1), wr.data.eq(merged), wr.en.eq(advance & v1 & ~last1 & ~dropped1),
            fifo_in.valid.eq(v1 & last1 & ~dropped1), fifo_in.payload.eq(merged),
        ]
        return m



# PE is a parallelism axis in 1D only: a 2D pool streams whole pixels (SetFolding leaves it alone).
# ---- the golden: this op on numpy from its definition, written apart from the hardware (no folding,
# packing or pipeline, no spec); the OP's golden hook applies it to a spec's streams
def golden_maxpool(x, k, ceil_mode=False):
    """Max pooling with stride = kernel on (N, H, W, C); ``k`` is an int or (kh, kw).

    Without ``ceil_mode`` the output has floor(H/kh) x floor(W/kw) pixels (trailing rows and columns
    are dropped); with it ceil(...) pixels, a partial window taking the max of its valid elements.
    BIPOLAR inputs (-1/+1) need nothing special.
    """
    x = golden.integers(x)
    kh, kw = (k, k) if np.isscalar(k) else (int(k[0]), int(k[1]))
    _, h, w, _ = x.shape
    oh, ow = (-(-h // kh), -(-w // kw)) if ceil_mode else (h // kh, w // kw)
    y = np.empty((x.shape[0], oh, ow, x.shape[3]), dtype=np.int64)
    for r in range(oh):
        for c in range(ow):
            y[:, r, c, :] = x[:, r * kh:(r + 1) * kh, c * kw:(c + 1) * kw, :].max(axis=(1, 2))
    return y


def _golden(spec, xs, producer):
    return golden_maxpool(xs[0].reshape(xs[0].shape[0], *spec.img_dim, spec.num_channels), spec.pool_dim,
                               spec.ceil_mode)


def _lower(ctx, node):
    """MaxPool of a feature map with kernel = stride (no padding, ceil mode, dilation)."""
    t = ctx.input(node)
    attrs = ctx.attrs(node)
    kernel = tuple(attrs["kernel_shape"])
    strides = tuple(attrs.get("strides", kernel))
    if strides != kernel or any(attrs.get("pads", [0])) or attrs.get("ceil_mode", 0) or \
            any(d != 1 for d in attrs.get("dilations", [1])) or not t.spatial:
        raise ctx.error(f"node {node.name} (MaxPool): only kernel = stride, no padding, no ceil mode, "
                        f"no dilation on a feature map is supported; got kernel {kernel}, strides {strides}")
    if np.any(np.asarray(t.scale) <= 0):
        raise ctx.error(f"node {node.name} (MaxPool) reads {t.name}, whose scale is not positive in every channel; "
                        f"the max of the codes is the max of the values only where it is (legal: positive scales)")
    c, h, w = t.shape[1:]
    ctx.add("StreamingMaxPool", dict(img_dim=(h, w), pool_dim=kernel, num_channels=c, dtype=t.dtype), [node])
    return ctx.tensor(node.output[0], t.dtype, t.scale)


def _finn_import(ctx, attrs, params, folding):
    """Older FINN names the datatype ``inputDataType``."""
    if "dataType" not in attrs and "inputDataType" in attrs:
        params["dtype"] = ctx.value("dtype", "inputDataType")


def _small_instance(s):
    """Two pools each way, two words of channels."""
    return dict(img_dim=tuple(min(i, 2 * p) for i, p in zip(s.img_dim, s.pool_dim)),
                num_channels=small.fold(s.num_channels, s.pe))


def _examples():
    """2x2 pooling of a 4x4 map, then FINN's grid plus floor mode in 1D. Left out: BIPOLAR in 1D and a k
    that does not divide the image in 2D (illegal); PE other than 1 in 2D (ignored there) and floor mode
    in 2D (the same as ceil there)."""
    def legal(c):
        if c["dim"] == "1d":
            return c["dtype"] != "BIPOLAR" and c["ch"] % c["pe"] == 0
        return c["ifm"] % c["k"] == 0 and c["pe"] == 1 and c["ceil"]

    def case(c):
        img, pool = ((1, c["ifm"]), (1, c["k"])) if c["dim"] == "1d" else ((c["ifm"],) * 2, (c["k"],) * 2)
        return dict(img_dim=img, pool_dim=pool, num_channels=c["ch"], ceil_mode=c["ceil"], dtype=c["dtype"]), \
            {"PE": c["pe"]}
    grid = dict(dim=["1d", "2d"], dtype=["BIPOLAR", "INT4"], k=[2, 4], ifm=[4, 10], ch=[1, 3], pe=[1, 3],
                ceil=[True, False])
    return [(dict(img_dim=(4, 4), pool_dim=(2, 2), num_channels=4, dtype="INT2"), {}),
            *grid_examples(grid, case, stride=13, legal=legal)]


OP = Op("StreamingMaxPool", StreamingMaxPoolSpec, StreamingMaxPool, folding={"PE": "pe"},
        parallelism={"PE": lambda p: divisors_of("num_channels")(p)
                     if StreamingMaxPoolSpec(**p).is_1d else [p.get("pe", 1)]},
        finn_names={"img_dim": "ImgDim", "pool_dim": "PoolDim", "num_channels": "NumChannels", "dtype": "dataType"},
        old_names=("StreamingMaxPool_Batch",), golden=_golden, small_instance=_small_instance, lowers=(Lowering(("MaxPool",), _lower),),
        finn_import=_finn_import, examples=_examples)
