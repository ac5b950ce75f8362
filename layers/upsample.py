"""UpsampleNearestNeighbour: nearest-neighbour upsampling by integer factors of a channels-last pixel stream
(FINN ``UpsampleNearestNeighbour``, ONNX ``Resize`` mode nearest as U-Net decoders export it).

Output pixel (y, x) is input pixel (y // sy, x // sx). Every input word is taken once, forwarded as the
first copy and written to a row buffer; the other copies of a pixel and the other copies of a row are
read back from the buffer, so the output runs at one word per cycle and the input waits meanwhile.
"""

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib.memory import Memory

from layers.datapath import PixelFolded, positive_pair, StreamLayer, check_dtype, legal_divisors, output_stage, register, wrapping_increment
from layers.fifo import output_fifo_spec
from layers.memcost import bram18_count
from layers.op import Example, Lowering, OneDatatype, OneWidth, Op, Resources, divisors_of
from layers import small
from layers.timing import Timing, as_cycles, frames_of, take_when_ready_in_place

__all__ = ["UpsampleNearestNeighbourSpec", "UpsampleNearestNeighbour"]

OWNER = "UpsampleNearestNeighbour"
LUTRAM_MAX_DEPTH = 256          # a deeper row buffer goes to BRAM (the same cut-off Yosys' memory mapper makes)


@dataclass(frozen=True)
class UpsampleNearestNeighbourSpec(PixelFolded, OneDatatype, OneWidth):
    """Contract of an upsampler (FINN attributes IFMDim, OFMDim, NumChannels, inputDataType).

    ``ofm_dim`` must be a whole multiple of ``ifm_dim`` on each axis (FINN's HLS layer also centres
    non-integer factors; ONNX exports of ``nn.Upsample(scale_factor=k)`` never need that). ``simd``
    channels travel per word (FINN streams whole pixels: simd = C); C/SIMD words per pixel.
    """
    ifm_dim: tuple              # IFMDim (h, w); an int means square
    ofm_dim: tuple              # OFMDim (h, w); an int means square
    num_channels: int           # NumChannels: C
    simd: int = 1               # channels per word, divides C (an rtlgen folding axis)
    dtype: object = "INT8"      # inputDataType (= output datatype)

    def __post_init__(self):
        ifm, ofm = positive_pair(OWNER, "ifm_dim", self.ifm_dim), positive_pair(OWNER, "ofm_dim", self.ofm_dim)
        object.__setattr__(self, "ifm_dim", ifm)
        object.__setattr__(self, "ofm_dim", ofm)
        if ofm[0] % ifm[0] or ofm[1] % ifm[1]:
            raise ValueError(f"{OWNER} ofm_dim={ofm} must be a whole multiple of ifm_dim={ifm} on each axis")
        for attr in ("num_channels", "simd"):
            v = getattr(self, attr)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{OWNER} {attr} must be a positive integer, not {v!r}")
        if self.num_channels % self.simd:
            raise ValueError(f"{OWNER} simd={self.simd} must divide num_channels={self.num_channels}; "
                             f"legal: {legal_divisors(self.num_channels)}")
        object.__setattr__(self, "dtype", check_dtype(OWNER, "dtype", self.dtype))

    @property
    def factor(self):
        """(sy, sx): copies of each row and of each pixel."""
        return self.ofm_dim[0] // self.ifm_dim[0], self.ofm_dim[1] // self.ifm_dim[1]

    in_image = property(lambda self: self.ifm_dim)
    out_image = property(lambda self: self.ofm_dim)

    latency = 3                 # cycles from taking an input word to offering it (measured: a register, the output FIFO)

    def fresh(self):
        """Per output word of a frame (output order): whether it is a first copy, taken from the input
        (the others are read back from the row buffer)."""
        (h, w), (sy, sx) = self.ifm_dim, self.factor
        first = (np.arange(sy) == 0)[:, None, None] & (np.arange(sx) == 0)[None, None, :]    # (ry, column, rx)
        return np.repeat(np.broadcast_to(first, (sy, w, sx)).reshape(-1), self.cf).reshape(1, -1).repeat(h, 0).reshape(-1)

    def timing(self, arrivals):
        """A walker steps through the output words, one a cycle with the output never stalled; a first
        copy waits until the next input word is offered and takes it: ``step[j] = max(offered[j],
        step[j - 1] + 1)``, :func:`take_when_ready` over the output words. Each word is offered
        ``latency`` cycles after its step (:mod:`layers.timing`)."""
        arrivals = as_cycles(arrivals[0])
        frames = frames_of(arrivals, self.in_words)
        fresh = np.tile(self.fresh(), frames)
        offered = np.full(fresh.size, np.iinfo(np.int64).min // 4)
        offered[fresh] = arrivals
        steps = take_when_ready_in_place(offered)
        reads = steps[fresh]
        steps += self.latency                               # now the cycles each word is offered
        return Timing((reads,), steps)

    @property
    def buffer_depth(self):
        """Words kept for the copies: a row of input pixels if rows repeat, else one pixel (0: no copies)."""
        sy, sx = self.factor
        if sy > 1:
            return self.ifm_dim[1] * self.cf
        return self.cf if sx > 1 else 0

    def resource_estimate(self):
        """The copy-or-forward select per bit, five position counters and the buffer address adder, the
        row buffer (LUT RAM up to 256 words, else BRAM18), the forward register and the output FIFO."""
        width, depth = self.width, self.buffer_depth
        (h, w), (sy, sx) = self.ifm_dim, self.factor
        counter_bits = sum(max(1, (n - 1).bit_length()) for n in (h, w, sy, sx, self.cf))
        addr_bits = max(1, (depth - 1).bit_length()) if depth else 0
        lut, ff, bram18 = width + 2 * counter_bits + addr_bits, counter_bits + addr_bits + width + 2, 0
        if depth > LUTRAM_MAX_DEPTH:
            bram18 = bram18_count(width, depth)
        elif depth:
            lut += width * -(-depth // 64)
        return Resources(lut=lut, ff=ff, bram18=bram18) + output_fifo_spec(width).resource_estimate()


class UpsampleNearestNeighbour(StreamLayer):
    """Nearest-neighbour upsampling of a stream of pixels, in the order FINN streams them.

    Members
    -------
    i : In(stream.Signature(spec.width))
    o : Out(stream.Signature(spec.width))

    Input: pixels row by row, each as ``spec.cf`` words of ``spec.simd`` channels. Output: the
    upsampled image in the same order and format, one word per cycle whenever the consumer keeps up,
    so a frame takes ``spec.exp_cycles`` cycles and frames follow back to back. A walker steps through
    the output positions (input row, row copy, input column, column copy, fold); the first copy of a
    word takes it from the input (waiting for it) and writes it to the row buffer at (column, fold),
    every other copy reads it back from there. Words are offered ``spec.latency`` cycles after their
    turn. ``i.ready`` is the output FIFO's registered ready gated by position; a stall freezes the
    walker and the buffer read, so nothing is lost or repeated.
    """

    def elaborate(self, platform):
        spec = self._spec
        (h, w), (sy, sx), cf = spec.ifm_dim, spec.factor, spec.cf
        m = Module()
        advance, fifo_in = output_stage(m, self.o, spec.width)

        f, rx, ix = Signal(range(cf)), Signal(range(sx)), Signal(range(w))
        ry, iy = Signal(range(sy)), Signal(range(h))
        base = Signal(range(max(spec.buffer_depth, 1)))        # ix * cf in a row buffer, else 0
        fresh = (ry == 0) & (rx == 0)
        step = advance & Mux(fresh, self.i.valid, 1)
        m.d.comb += self.i.ready.eq(advance & fresh)
        with m.If(step):
            m.d.sync += f.eq(wrapping_increment(f, cf))
            with m.If(f == cf - 1):
                m.d.sync += rx.eq(wrapping_increment(rx, sx))
                with m.If(rx == sx - 1):
                    m.d.sync += ix.eq(wrapping_increment(ix, w))
                    if sy > 1:
                        m.d.sync += base.eq(Mux(ix == w - 1, 0, base + cf))
                    with m.If(ix == w - 1):
                        m.d.sync += ry.eq(wrapping_increment(ry, sy))
                        with m.If(ry == sy - 1):
                            m.d.sync += iy.eq(wrapping_increment(iy, h))

        v1 = register(m, advance, step, name="v1", reset_less=False)
        x1 = register(m, advance, self.i.payload, name="x1")
        if not spec.buffer_depth:
            m.d.comb += [fifo_in.valid.eq(v1), fifo_in.payload.eq(x1)]
            return m

        m.submodules.row = row = Memory(shape=spec.width, depth=spec.buffer_depth, init=[])
        wr, rd = row.write_port(), row.read_port(domain="sync")
        addr = base + f
        m.d.comb += [
            wr.addr.eq(addr), wr.data.eq(self.i.payload), wr.en.eq(step & fresh),
            rd.addr.eq(addr), rd.en.eq(advance),
        ]
        fresh1 = register(m, advance, fresh, name="fresh1")
        m.d.comb += [fifo_in.valid.eq(v1), fifo_in.payload.eq(Mux(fresh1, x1, rd.data))]
        return m


# ---- the golden: this op on numpy from its definition, written apart from the hardware (no folding,
# packing or pipeline, no spec); the OP's golden hook applies it to a spec's streams
def golden_upsample(x, factor):
    """Nearest-neighbour upsampling of x (N, H, W, C) by integer factors (sy, sx): out[y, x] = x[y//sy, x//sx]."""
    sy, sx = factor
    return np.repeat(np.repeat(np.asarray(x), sy, axis=1), sx, axis=2)


def _golden(spec, xs, producer):
    return golden_upsample(xs[0].reshape(xs[0].shape[0], *spec.ifm_dim, spec.num_channels), spec.factor)


def _lower(ctx, node):
    """Nearest-neighbour upsampling by whole factors (Resize, Upsample). Whatever the node's modes say, the
    node itself is run on a tensor of pixel indices and must copy each pixel sy x sx times (ONNX Resize's
    coordinate modes can shift or round differently; none of that is guessed)."""
    t = ctx.input(node)
    out_shape = ctx.shape(node.output[0])
    legal = "legal: nearest-neighbour upsampling of a feature map by whole factors of H and W"
    if not t.spatial or len(out_shape) != 4 or out_shape[:2] != t.shape[:2] or \
            out_shape[2] % t.shape[2] or out_shape[3] % t.shape[3]:
        raise ctx.error(f"node {node.name} ({node.op_type}) resizes {t.shape} to {out_shape}; {legal}")
    c, h, w = t.shape[1:]
    sy, sx = out_shape[2] // h, out_shape[3] // w
    index = np.arange(c * h * w, dtype=np.float32).reshape(1, c, h, w)
    if not np.array_equal(ctx.run_alone(node, index), index.repeat(sy, 2).repeat(sx, 3)):
        attrs = ctx.attrs(node)
        modes = ", ".join(f"{k}={v.decode() if isinstance(v, bytes) else v}" for k, v in sorted(attrs.items())
                          if k in ("mode", "coordinate_transformation_mode", "nearest_mode"))
        raise ctx.error(f"node {node.name} ({node.op_type}) with {modes or 'default modes'} does not copy "
                        f"each pixel {sy} x {sx} times; {legal} (e.g. mode=nearest, "
                        f"coordinate_transformation_mode=asymmetric, nearest_mode=floor)")
    ctx.add("UpsampleNearestNeighbour", dict(ifm_dim=(h, w), ofm_dim=out_shape[2:], num_channels=c, dtype=t.dtype),
            [node])
    return ctx.tensor(node.output[0], t.dtype, t.scale, out_shape, kind=t.kind)


def _finn_import(ctx, attrs, params, folding):
    """DimMode=1 (1D): IFMDim and OFMDim are H only, W = 1."""
    if attrs.get("DimMode", 0) == 1:
        params["ifm_dim"], params["ofm_dim"] = (params["ifm_dim"][0], 1), (params["ofm_dim"][0], 1)


def _small_instance(s):
    """At most a 2 x 2 input image at the same factor, two words of channels."""
    ifm = tuple(min(i, 2) for i in s.ifm_dim)
    return dict(ifm_dim=ifm, ofm_dim=tuple(n * (o // i) for n, o, i in zip(ifm, s.ofm_dim, s.ifm_dim)),
                num_channels=small.fold(s.num_channels, s.simd))


def _examples():
    """Twice the size along both axes; then (input map, output map, channels, SIMD, datatype) of U-Net's x2
    (slow: the first example is one), different factors per axis with 3 words a pixel, rows only, columns
    only (the buffer holds one pixel), one pixel of one word (a copy read right after its write)."""
    cases = [((4, 4), (8, 8), 4, 1, "UINT3"), ((3, 5), (6, 15), 6, 2, "INT4"), ((2, 2), (6, 2), 2, 2, "BIPOLAR"),
             ((1, 3), (1, 6), 4, 4, "INT2"), ((1, 1), (2, 2), 1, 1, "UINT8")]
    return [(dict(ifm_dim=(2, 3), ofm_dim=(4, 6), num_channels=4, dtype="INT2"), {"SIMD": 2}),
            *(Example(dict(ifm_dim=ifm, ofm_dim=ofm, num_channels=c, dtype=dtype), {"SIMD": simd}, slow=k == 0)
              for k, (ifm, ofm, c, simd, dtype) in enumerate(cases))]


OP = Op("UpsampleNearestNeighbour", UpsampleNearestNeighbourSpec, UpsampleNearestNeighbour,
        folding={"SIMD": "simd"}, parallelism={"SIMD": divisors_of("num_channels")},
        finn_names={"ifm_dim": "IFMDim", "ofm_dim": "OFMDim", "num_channels": "NumChannels",
                    "dtype": "inputDataType"},
        old_names=("UpsampleNearestNeighbour_Batch",), golden=_golden, small_instance=_small_instance,
        lowers=(Lowering(("Resize", "Upsample"), _lower),), finn_import=_finn_import, examples=_examples)
