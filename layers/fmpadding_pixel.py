"""FMPadding_Pixel: stride - 1 zero pixels between the pixels of a folded NHWC feature-map stream (FINN
``FMPadding_Pixel``), and the lowering of ONNX ``ConvTranspose`` it serves.

A transposed convolution (deconvolution) with stride s, kernel k, pads (pb, pe) and output_padding op is,
per spatial axis, an ordinary stride-1 convolution of the input with s - 1 zeros inserted between its
pixels, k - 1 - pb zeros before and k - 1 - pe + op after, by the kernel flipped spatially with its input
and output channels swapped (FINN's InferPixelPaddingDeconv: FMPadding_Pixel + convolution; FINN pads
k - 1 - pad on all four sides and has no output_padding). So ConvTranspose lowers to FMPadding_Pixel +
FMPadding + ConvolutionInputGenerator + MVAU, bit-exact.
"""

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Module, Mux, Signal

from layers.datapath import PixelFolded, positive_pair, StreamLayer, check_dtype, legal_divisors, wrapping_increment
from layers.fifo import output_fifo_spec
from layers.fmpadding import PaddingWalk, pad_stream
from layers.mvau import conv_bias, lower_conv_windows, pad_borders
from layers.op import Lowering, OneDatatype, OneWidth, Op, Resources, divisors_of, grid_examples
from layers import small

__all__ = ["FMPaddingPixelSpec", "FMPaddingPixel", "deconv_padding", "deconv_weights"]

OWNER = "FMPadding_Pixel"


@dataclass(frozen=True)
class FMPaddingPixelSpec(PaddingWalk, PixelFolded, OneDatatype, OneWidth):
    """Contract of a pixel padding layer (FINN ``FMPadding_Pixel``: ImgDim, Stride, NumChannels, SIMD,
    inputDataType).

    Output pixel (y * sy, x * sx) is input pixel (y, x); every other output pixel is zero, so the output is
    ((H - 1) * sy + 1, (W - 1) * sx + 1) pixels of the same channels. The datatype must have a code for 0
    (not BIPOLAR), as FINN requires.
    """
    img_dim: tuple              # ImgDim: (H, W) of the input; an int means square
    stride: tuple               # Stride: (sy, sx); an int means both
    num_channels: int           # NumChannels: C
    simd: int = 1               # SIMD: channels per word, divides C
    dtype: object = "INT8"      # inputDataType (= output datatype)

    def __post_init__(self):
        object.__setattr__(self, "img_dim", positive_pair(OWNER, "img_dim", self.img_dim))
        object.__setattr__(self, "stride", positive_pair(OWNER, "stride", self.stride))
        for attr in ("num_channels", "simd"):
            v = getattr(self, attr)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{OWNER} {attr} must be a positive integer, not {v!r}")
        if self.num_channels % self.simd:
            raise ValueError(f"{OWNER} simd={self.simd} must divide num_channels={self.num_channels}; "
                             f"legal: {legal_divisors(self.num_channels)}")
        dtype = check_dtype(OWNER, "dtype", self.dtype)
        if not dtype.allowed(0):
            raise ValueError(f"{OWNER} dtype={dtype.name} has no code for 0 to pad with; legal: BINARY, "
                             f"TERNARY, INTn, UINTn")
        object.__setattr__(self, "dtype", dtype)

    @property
    def out_dim(self):
        (h, w), (sy, sx) = self.img_dim, self.stride
        return (h - 1) * sy + 1, (w - 1) * sx + 1

    in_image = property(lambda self: self.img_dim)
    out_image = property(lambda self: self.out_dim)

    latency = 2                 # cycles from an input transfer (or a pad position's turn) to the word being
                                # offered (the output FIFO)

    def inside(self):
        """Per output word of a frame (output order): whether it forwards an input word (else it pads)."""
        (oh, ow), (sy, sx) = self.out_dim, self.stride
        y, x, _ = np.indices((oh, ow, self.cf)).reshape(3, -1)
        return (y % sy == 0) & (x % sx == 0)

    def resource_estimate(self):
        """Five position counters (row, column, fold and the two stride phases), about a LUT per bit with
        their compares, and the output FIFO; the zero-select folds into the FIFO's input LUTs as Yosys maps
        it (Yosys 0.70: 31, 40, 60 LUT for INT8 x 1, UINT4 x 5, UINT4 x 8 lanes; this gives 28, 41, 58)."""
        counter_bits = sum(max(1, (n - 1).bit_length()) for n in (*self.out_dim, self.cf, *self.stride))
        fifo = output_fifo_spec(self.width).resource_estimate()
        return Resources(lut=counter_bits + fifo.lut, ff=counter_bits + fifo.ff, bram18=0)


class FMPaddingPixel(StreamLayer):
    """Inserts zero pixels between the pixels of each frame of an NHWC stream.

    Members
    -------
    i : In(stream.Signature(spec.width))
    o : Out(stream.Signature(spec.width))

    The output is the padded tensor in row-major order (rows, then columns, then channel folds), one word
    per cycle: a frame takes ``spec.exp_cycles`` = padded pixels x C/SIMD cycles, and the next frame follows
    with no gap. A walker steps through the output positions, with a phase counter per axis that is 0 on
    the rows and columns of input pixels; there it forwards the next input word (waiting for it), elsewhere
    it emits a zero word without touching the input. A frame begins and ends with an input pixel, so the
    walker never pads ahead into a frame that has not started. Words are offered ``spec.latency`` cycles
    after their turn. ``i.ready`` is the output FIFO's registered ready gated by position, never a function
    of ``o.ready``; a stall freezes the walker, so nothing is lost or repeated.
    """

    def elaborate(self, platform):
        spec = self._spec
        (oh, ow), (sy, sx) = spec.out_dim, spec.stride
        m = Module()
        row, col, fold = Signal(range(oh)), Signal(range(ow)), Signal(range(spec.cf))
        ry, rx = Signal(range(sy)), Signal(range(sx))       # phase within a stride: 0 on input pixels
        inside = (ry == 0) & (rx == 0)
        step = pad_stream(m, self.i, self.o, spec.width, inside, waits=inside)
        with m.If(step):
            m.d.sync += fold.eq(wrapping_increment(fold, spec.cf))
            with m.If(fold == spec.cf - 1):
                m.d.sync += col.eq(wrapping_increment(col, ow))
                # a row ends on an input pixel (ow - 1 = (W - 1) * sx): its phase restarts at 0 with the row
                m.d.sync += rx.eq(Mux(col == ow - 1, 0, wrapping_increment(rx, sx)))
                with m.If(col == ow - 1):
                    m.d.sync += row.eq(wrapping_increment(row, oh))
                    m.d.sync += ry.eq(Mux(row == oh - 1, 0, wrapping_increment(ry, sy)))
        return m


# ---- the golden: this op on numpy from its definition, written apart from the hardware (no folding,
# packing or pipeline, no spec); the OP's golden hook applies it to a spec's streams
def golden_pixel_padding(x, stride):
    """FINN's FMPadding_Pixel on x (N, H, W, C): stride - 1 zero pixels between neighbouring pixels along each
    spatial axis, stride = (sy, sx); out[:, y * sy, x * sx] = x[:, y, x], zero elsewhere, shape
    (N, (H - 1) * sy + 1, (W - 1) * sx + 1, C)."""
    sy, sx = (int(s) for s in stride)
    x = np.asarray(x)
    out = np.zeros((x.shape[0], (x.shape[1] - 1) * sy + 1, (x.shape[2] - 1) * sx + 1, *x.shape[3:]), dtype=x.dtype)
    out[:, ::sy, ::sx] = x
    return out


def _golden(spec, xs, producer):
    return golden_pixel_padding(xs[0].reshape(xs[0].shape[0], *spec.img_dim, spec.num_channels), spec.stride)


def _small_instance(s):
    """At most a 2 x 2 input image at the same stride, two words of channels."""
    return dict(img_dim=tuple(min(i, 2) for i in s.img_dim), num_channels=small.fold(s.num_channels, s.simd))


# --- ConvTranspose -------------------------------------------------------------------------------------

def deconv_padding(kernel, pads, output_padding):
    """The border padding (top, left, bottom, right) of the pixel-padded image that makes a stride-1
    convolution by the flipped kernel a ConvTranspose with ``pads`` (top, left, bottom, right) and
    ``output_padding`` (h, w): k - 1 - pad on each side, output_padding more at the bottom and right."""
    (kh, kw), (top, left, bottom, right), (oph, opw) = kernel, pads, output_padding
    return kh - 1 - top, kw - 1 - left, kh - 1 - bottom + oph, kw - 1 - right + opw


def deconv_weights(codes):
    """ConvTranspose weights (C, OC, KH, KW) as the Conv weights (OC, C, KH, KW) of the equivalent
    convolution: input and output channels swapped, the kernel turned by 180 degrees."""
    return np.ascontiguousarray(np.flip(np.asarray(codes), (2, 3)).transpose(1, 0, 2, 3))


def _decoded(value):
    return value.decode() if isinstance(value, bytes) else value


def _pads(ctx, node, attrs, dim, kernel, strides, output_padding):
    """The node's pads (top, left, bottom, right), each in 0..kernel - 1. With ``output_shape``, ONNX ignores
    pads and splits the total padding the shape implies between the two sides: the pads must be that split,
    and the total even (ONNX and onnxruntime split an odd total differently)."""
    where = f"node {node.name} (ConvTranspose)"
    pads = tuple(attrs.get("pads", (0, 0, 0, 0)))
    if "output_shape" in attrs:
        shape = tuple(attrs["output_shape"])[-2:]
        total = [s * (i - 1) + p + k - o for s, i, p, k, o in zip(strides, dim, output_padding, kernel, shape)]
        if len(shape) != 2 or any(t % 2 or t < 0 for t in total) or \
                ("pads" in attrs and pads != tuple(t // 2 for t in total * 2)):
            raise ctx.error(f"{where}: output_shape={list(attrs['output_shape'])} disagrees with pads={list(pads)}, "
                            f"strides={list(strides)} and output_padding={list(output_padding)}; legal: "
                            f"output_shape = strides * (input - 1) + output_padding + kernel - pads (begin + end) "
                            f"with equal pads at both ends, or explicit pads without output_shape")
        pads = tuple(t // 2 for t in total * 2)
    if len(pads) != 4 or any(not 0 <= p <= k - 1 for p, k in zip(pads, kernel * 2)):
        raise ctx.error(f"{where}: pads={list(pads)}; legal: 4 pads, each in 0..kernel - 1 = "
                        f"0..{kernel[0] - 1} (top, bottom), 0..{kernel[1] - 1} (left, right)")
    return pads


def _lower_conv_transpose(ctx, node):
    """ConvTranspose (group 1, dilation 1) -> [FMPadding_Pixel] + [FMPadding] + ConvolutionInputGenerator +
    MVAU: zeros between the input pixels and around them, then a stride-1 convolution by the flipped kernel."""
    where = f"node {node.name} (ConvTranspose)"
    t = ctx.input(node)
    ctx.require_codes(t, node)
    if not t.spatial or node.input[0] != t.name:
        raise ctx.error(f"{where} reads a stream of shape {list(t.shape)} on input {list(node.input).index(t.name)}; "
                        f"legal: a 2D transposed convolution of a feature map (N, C, H, W) on input 0")
    codes, wscale, wdtype = ctx.weights(node, 1)
    c, h, w = t.shape[1:]
    if codes.ndim != 4 or codes.shape[0] != c:
        raise ctx.error(f"{where}: weights of shape {codes.shape}; legal: (C={c}, OC, KH, KW)")
    strides, pads, output_padding = _geometry(ctx, node, codes.shape, (h, w))
    border = deconv_padding(codes.shape[2:], pads, output_padding)
    if (strides != (1, 1) or any(border)) and not t.dtype.allowed(0):
        raise ctx.error(f"{where}: zeros between and around the pixels of {t.dtype.name} data have no code; "
                        f"legal: an input datatype with a code for 0 (not BIPOLAR)")
    bias = conv_bias(ctx, node)
    dim = (h, w)
    if strides != (1, 1):
        pixel = ctx.add("FMPadding_Pixel", dict(img_dim=dim, stride=strides, num_channels=c, dtype=t.dtype), [node])
        dim = pixel.spec().out_dim
    dim = pad_borders(ctx, node, t, dim, border)
    return lower_conv_windows(ctx, node, t, deconv_weights(codes), wscale, wdtype, bias, dim, (1, 1), (1, 1),
                              depthwise=False)


def _geometry(ctx, node, weights_shape, dim):
    """(strides, pads, output_padding) of the ConvTranspose ``node`` with weights of ``weights_shape``
    (C, OC, KH, KW) on an image of (h, w) = ``dim``; an error naming the node for what has no hardware
    here (groups, dilation, auto_pad) or disagrees with the weights or the model's output shape."""
    where = f"node {node.name} (ConvTranspose)"
    attrs = ctx.attrs(node)
    _, oc, kh, kw = weights_shape
    group = attrs.get("group", 1)
    if group != 1:
        raise ctx.error(f"{where}: group={group}; legal: group=1 (grouped transposed convolutions are not "
                        f"supported)")
    dilations = tuple(attrs.get("dilations", (1, 1)))
    if dilations != (1, 1):
        raise ctx.error(f"{where}: dilations={list(dilations)}; legal: [1, 1]")
    auto_pad = _decoded(attrs.get("auto_pad", "NOTSET"))
    if auto_pad != "NOTSET":
        raise ctx.error(f"{where}: auto_pad={auto_pad}; legal: NOTSET with explicit pads")
    if tuple(attrs.get("kernel_shape", (kh, kw))) != (kh, kw):
        raise ctx.error(f"{where}: kernel_shape={list(attrs['kernel_shape'])} but weights of shape "
                        f"{tuple(weights_shape)}; legal: kernel_shape=[{kh}, {kw}]")
    strides = tuple(attrs.get("strides", (1, 1)))
    output_padding = tuple(attrs.get("output_padding", (0, 0)))
    if len(strides) != 2 or len(output_padding) != 2 or min(strides) < 1:
        raise ctx.error(f"{where}: strides={list(strides)}, output_padding={list(output_padding)}; legal: 2 "
                        f"positive strides, 2 output paddings")
    if any(not 0 <= p < s for p, s in zip(output_padding, strides)):
        raise ctx.error(f"{where}: output_padding={list(output_padding)}; legal: each in 0..stride - 1 "
                        f"(strides={list(strides)})")
    pads = _pads(ctx, node, attrs, dim, (kh, kw), strides, output_padding)
    out_dim = tuple(s * (i - 1) + p + k - b - e for s, i, p, k, b, e in
                    zip(strides, dim, output_padding, (kh, kw), pads[:2], pads[2:]))
    out_shape = tuple(ctx.shape(node.output[0]))
    if out_shape[1:] != (oc, *out_dim):
        raise ctx.error(f"{where}: the model's output shape {list(out_shape)} disagrees with the weights and "
                        f"attributes, which give {[oc, *out_dim]} channels x rows x columns")
    return strides, pads, output_padding


def _examples():
    """Zeros between the pixels along both axes, two words per pixel; then a grid of strides, images,
    foldings and datatypes."""
    grid = dict(idim=[(3, 3), (2, 4), (1, 3)], stride=[(2, 2), (2, 3), (1, 2), (3, 1)], channels=[2, 4],
                simd=[1, 2], dtype=["INT2", "UINT4", "TERNARY"])
    return [(dict(img_dim=(2, 3), stride=(2, 3), num_channels=4, dtype="INT2"), {"SIMD": 2}),
            *grid_examples(grid, lambda c: (dict(img_dim=c["idim"], stride=c["stride"], num_channels=c["channels"],
                                                 dtype=c["dtype"]), {"SIMD": c["simd"]}), stride=59)]


OP = Op("FMPadding_Pixel", FMPaddingPixelSpec, FMPaddingPixel, folding={"SIMD": "simd"},
        parallelism={"SIMD": divisors_of("num_channels")},
        finn_names={"img_dim": "ImgDim", "stride": "Stride", "num_channels": "NumChannels", "dtype": "inputDataType"},
        golden=_golden, small_instance=_small_instance,
        lowers=(Lowering(("ConvTranspose",), _lower_conv_transpose),), examples=_examples)
