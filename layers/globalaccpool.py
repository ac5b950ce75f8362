"""GlobalAccPool: per-channel sum over all pixels of an image (FINN ``GlobalAccPool``).

One accumulator word (PE lanes) per channel fold sits in a small memory; every input word adds to
its fold's entry, and the last pixel's words leave as the sums, so outputs overlap the input.
"""

import numpy as np
from dataclasses import dataclass, field

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data
from amaranth.lib.memory import Memory
from qonnx.core.datatype import DataType

from layers.datapath import (ChannelFolded, StreamLayer, check_dtype, dtype_for_range, dtype_range, element_value, legal_divisors, output_stage,
                             register, wrapping_increment)
from layers.op import Example, Lowering, Op, Resources, divisors_of
from layers.small import shrink_channels
import golden
from layers.timing import Timing, frames_of, take_when_ready


__all__ = ["GlobalAccPoolSpec", "GlobalAccPool"]

OWNER = "GlobalAccPool"
SUM_DELAY = 3       # cycles from taking a last-pixel word to offering its sum word (timing model)


@dataclass(frozen=True)
class GlobalAccPoolSpec(ChannelFolded):
    """Contract of a global sum pool (FINN attributes NumChannels, PE, inputDataType, numInputVectors;
    the output datatype is derived as FINN does: the smallest INT holding H*W*min for signed inputs,
    else the smallest UINT holding H*W*max). ``exp_cycles`` is the input words: the sums leave alongside
    the last pixel's words (FINN: N*H*W*C/PE + N*C/PE)."""
    num_channels: int                       # NumChannels: C
    pe: int                                 # PE: channels per word, divides C
    input_dtype: object                     # inputDataType
    num_input_vectors: tuple = (1, 1, 1)    # numInputVectors: (N, H, W), input (N, H, W, C)
    output_dtype: DataType = field(init=False)

    def __post_init__(self):
        for attr in ("num_channels", "pe"):
            v = getattr(self, attr)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{OWNER} {attr} must be a positive integer, not {v!r}")
        if self.num_channels % self.pe:
            raise ValueError(f"{OWNER} pe={self.pe} must divide num_channels={self.num_channels}; "
                             f"legal pe: {legal_divisors(self.num_channels)}")
        idt = check_dtype(OWNER, "input_dtype", self.input_dtype)
        object.__setattr__(self, "input_dtype", idt)
        vecs = tuple(self.num_input_vectors)
        if len(vecs) != 3 or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in vecs):
            raise ValueError(f"{OWNER} num_input_vectors must be (N, H, W) of positive integers, "
                             f"not {self.num_input_vectors!r}")
        object.__setattr__(self, "num_input_vectors", vecs)
        # FINN's rule (INT for H*W*min if signed, else UINT for H*W*max) is the type of this range for
        # INTn and UINTn; for BIPOLAR it also covers +H*W.
        lo, hi = dtype_range(idt)
        object.__setattr__(self, "output_dtype", dtype_for_range(self.pixels * min(lo, 0), self.pixels * hi))

    @property
    def pixels(self):
        """H * W: values summed per output element."""
        return self.num_input_vectors[1] * self.num_input_vectors[2]

    @property
    def normal_input_shape(self):
        return (*self.num_input_vectors, self.num_channels)

    @property
    def normal_output_shape(self):
        return (self.num_input_vectors[0], 1, 1, self.num_channels)

    @property
    def folded_output_shape(self):
        return (self.num_input_vectors[0], 1, 1, self.cf, self.pe)

    @property
    def lead_words(self):
        """Input words taken before the first output word can leave (FIFO bounds on reconvergent paths):
        up to word 0 of the first image's last pixel, which completes sum word 0."""
        return (self.pixels - 1) * self.cf + 1

    @property
    def out_words(self):
        return self.num_input_vectors[0] * self.cf


    latency = SUM_DELAY         # cycles from a last-pixel word to its sum word being offered

    def timing(self, arrivals):
        """Takes a word whenever one is offered; the last pixel's word f of an image gives sum word f,
        offered 3 cycles after it is taken: the register stage (``v1``), then the output FIFO's two
        (:mod:`layers.timing`)."""
        images = frames_of(arrivals[0], self.words) * self.num_input_vectors[0]
        reads = take_when_ready(arrivals[0])
        last_pixel = reads.reshape(images, self.pixels, self.cf)[:, -1, :]
        return Timing((reads,), last_pixel.reshape(-1) + SUM_DELAY)

    def resource_estimate(self):
        """An adder per output bit, the accumulator memory (LUT RAM below 512 entries, else BRAM18; a
        register when NF = 1), the pipeline and read registers and the 2-word output FIFO."""
        ow, depth = self.out_width, self.cf
        lut, ff, bram18 = ow + ow + 24, self.in_width + 3 * ow + 24, 0
        if depth == 1:
            ff += ow
        elif depth >= 512:
            bram18 += -(-ow // 18) * -(-depth // 1024)
        else:
            lut += ow * -(-depth // 64)
        return Resources(lut=lut, ff=ff, bram18=bram18)


class GlobalAccPool(StreamLayer):
    """Sum of every pixel of each image, per channel.

    Members
    -------
    i : In(stream.Signature(spec.in_width))
    o : Out(stream.Signature(spec.out_width))

    Input: images of H*W pixels, each as ``spec.cf`` words of PE channels (lane p of word f is channel
    f * PE + p). Output: per image ``spec.cf`` words of PE sums (``spec.output_dtype``), same channel
    order; sum word f is offered two cycles after the last pixel's word f is taken (a register stage,
    then the output FIFO). One input word per cycle whenever the consumer keeps up, so a frame takes
    ``spec.exp_cycles`` cycles, and images and frames follow back to back. ``i.ready`` is the output
    FIFO's registered ready; a stall freezes the pipeline (memory reads included), losing nothing.

    The partial sums sit in a memory of NF words; the read for a word is issued when it is taken and
    is transparent to the write-back of the word before it (the same entry when NF = 1).
    """

    def elaborate(self, platform):
        spec = self._spec
        idt, ob, pe = spec.input_dtype, spec.output_dtype.bitwidth(), spec.pe
        m = Module()
        advance, fifo_in = output_stage(m, self.o, spec.out_width)

        f, pixel = Signal(range(spec.cf)), Signal(range(spec.pixels))
        take = self.i.valid & advance
        m.d.comb += self.i.ready.eq(advance)
        with m.If(take):
            m.d.sync += f.eq(wrapping_increment(f, spec.cf))
            with m.If(f == spec.cf - 1):
                m.d.sync += pixel.eq(wrapping_increment(pixel, spec.pixels))

        mem = Memory(shape=spec.out_width, depth=spec.cf, init=[])
        m.submodules.sums = mem
        wr = mem.write_port()
        rd = mem.read_port(domain="sync", transparent_for=(wr,))
        m.d.comb += [rd.addr.eq(f), rd.en.eq(advance)]

        v1 = register(m, advance, take, name="v1", reset_less=False)
        x1 = register(m, advance, self.i.payload, name="x1")
        first1 = register(m, advance, pixel == 0, name="first1")
        last1 = register(m, advance, pixel == spec.pixels - 1, name="last1")
        f1 = register(m, advance, f, name="f1")

        xs = data.View(data.ArrayLayout(idt.bitwidth(), pe), x1)
        sums = data.View(data.ArrayLayout(ob, pe), rd.data)
        lanes = []
        for p in range(pe):
            x = Mux(xs[p], 1, -1) if idt.name == "BIPOLAR" else element_value(xs[p], idt)
            old = sums[p].as_signed() if spec.output_dtype.signed() else sums[p]
            lanes.append(Mux(first1, x, old + x)[:ob])      # the sum fits ob bits by construction
        total = Cat(lanes)
        m.d.comb += [
            wr.addr.eq(f1), wr.data.eq(total), wr.en.eq(advance & v1 & ~last1),
            fifo_in.valid.eq(v1 & last1), fifo_in.payload.eq(total),
        ]
        return m



# ---- the golden: this op on numpy from its definition, written apart from the hardware (no folding,
# packing or pipeline, no spec); the OP's golden hook applies it to a spec's streams
def golden_global_acc_pool(x):
    """Sum over the spatial axes: (N, H, W, C) -> (N, 1, 1, C)."""
    return golden.integers(x).sum(axis=(1, 2), keepdims=True)


def _golden(spec, xs, producer):
    # a frame may hold several maps (num_input_vectors (N, H, W)): each is summed on its own
    maps = xs[0].reshape(-1, *spec.num_input_vectors[1:], spec.num_channels)
    return golden_global_acc_pool(maps).reshape(len(xs[0]), -1, spec.num_channels)


def whole_map(ctx, node):
    """An AveragePool whose kernel is its whole input (a global average), or that reads no feature map."""
    t = ctx.input(node)
    return not t.spatial or tuple(ctx.attrs(node)["kernel_shape"]) == tuple(t.shape[2:])


def check_pool_attrs(ctx, node):
    """AveragePool without padding or ceil mode."""
    attrs = ctx.attrs(node)
    if any(attrs.get("pads", [0])) or attrs.get("ceil_mode", 0):
        raise ctx.error(f"node {node.name} (AveragePool): padding and ceil_mode are not supported; "
                        f"got pads {list(attrs.get('pads', [0, 0, 0, 0]))}, ceil_mode "
                        f"{attrs.get('ceil_mode', 0)}; legal: pads 0, ceil_mode 0")


def _lower(ctx, node):
    """An average over the whole feature map: the stream carries the per-channel sum, so the average is that
    code at scale / (H*W); the quantizer (e.g. Trunc) after it becomes a Thresholding layer on the sum."""
    t = ctx.input(node)
    if node.op_type == "AveragePool":
        check_pool_attrs(ctx, node)
    ctx.require_codes(t, node)
    if not t.spatial:
        raise ctx.error(f"node {node.name} ({node.op_type}) needs a feature map (N, C, H, W), not shape {t.shape}")
    c, h, w = t.shape[1:]
    pool = ctx.add("GlobalAccPool", dict(num_channels=c, input_dtype=t.dtype, num_input_vectors=(1, h, w)), [node])
    return ctx.tensor(node.output[0], pool.spec().output_dtype, t.scale / (h * w))     # (per channel too)


def reduces_tokens(ctx, node):
    """A ReduceMean over the tokens (axis 1) of a (1, tokens, features) sequence: a transformer's mean pooling."""
    shape = tuple(ctx.shape(node.input[0]))
    axes = ctx.attrs(node).get("axes")
    if axes is None and len(node.input) > 1 and node.input[1]:          # opset 18: axes as an input
        value = ctx.initializer(node.input[1])
        axes = None if value is None else [int(a) for a in np.ravel(value)]
    return len(shape) == 3 and shape[0] == 1 and axes is not None and [a % 3 for a in axes] == [1]


def _lower_token_mean(ctx, node):
    """The mean over a sequence's tokens: the per-feature sum (a GlobalAccPool over tokens x 1 pixels), the
    code at scale / tokens; the quantizer after it thresholds the sum."""
    t = ctx.input(node)
    ctx.require_codes(t, node)
    if t.row_order is not None or np.ndim(t.scale):
        raise ctx.error(f"node {node.name} (ReduceMean): its input {t.name} must be a per-tensor quantized sequence "
                        f"in its own order")
    _, tokens, features = t.shape
    pool = ctx.add("GlobalAccPool", dict(num_channels=features, input_dtype=t.dtype, num_input_vectors=(1, tokens, 1)),
                   [node])
    return ctx.tensor(node.output[0], pool.spec().output_dtype, t.scale / tokens)


def _examples():
    """Sums over a 2x2 map; FINN's 7x7x64 case at a few PEs, then small images, signed and unsigned,
    NF = 1 and NF > 1 (channels, PE, datatype, input vectors; the first two in the default suite)."""
    cases = [(6, 2, "INT8", (2, 3, 3)), (64, 16, "UINT4", (1, 7, 7)), (3, 3, "UINT8", (2, 2, 5)),
             (4, 1, "BIPOLAR", (1, 4, 4)), (64, 64, "INT4", (1, 7, 7)), (64, 1, "INT8", (1, 7, 7)),
             (64, 4, "UINT8", (2, 7, 7)), (64, 32, "BIPOLAR", (1, 7, 7)), (5, 5, "UINT1", (3, 1, 1)),
             (8, 2, "INT2", (1, 1, 9))]
    return [(dict(num_channels=4, input_dtype="UINT2", num_input_vectors=(1, 2, 2)), {"PE": 2}),
            *(Example(dict(num_channels=ch, input_dtype=dtype, num_input_vectors=vecs), {"PE": pe}, slow=k >= 2)
              for k, (ch, pe, dtype, vecs) in enumerate(cases))]


OP = Op("GlobalAccPool", GlobalAccPoolSpec, GlobalAccPool, folding={"PE": "pe"},
        parallelism={"PE": divisors_of("num_channels")},
        finn_names={"num_channels": "NumChannels", "input_dtype": "inputDataType",
                    "num_input_vectors": "numInputVectors"},
        old_names=("GlobalAccPool_Batch",), golden=_golden, small_instance=shrink_channels("num_channels", "pe"),
        lowers=(Lowering(("GlobalAveragePool",), _lower), Lowering(("AveragePool",), _lower, when=whole_map),
                Lowering(("ReduceMean",), _lower_token_mean, when=reduces_tokens,
                         legal="ReduceMean (over a sequence's tokens)")),
        examples=_examples)
