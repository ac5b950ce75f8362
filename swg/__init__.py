"""Sliding-window generators (FINN ``ConvolutionInputGenerator``): default and parallel-window styles."""

from dataclasses import replace

from layers.op import Op, divisors_of, grid_examples
from layers import small
import golden
from swg.default import SlidingWindowBuffer
from swg.parallel import SlidingWindowRegisters
from swg.spec import SHIFT_REGISTER_MAX, SWGSpec

__all__ = ["SWGSpec", "ConvolutionInputGenerator", "SlidingWindowBuffer", "SlidingWindowRegisters"]


def ConvolutionInputGenerator(spec):
    """The generator ``spec`` asks for: parallel window (line buffers and a register window) or default."""
    return SlidingWindowRegisters(spec) if spec.parallel_window else SlidingWindowBuffer(spec)



# ---- the golden: this op on numpy from its definition, written apart from the hardware (no folding,
# packing or pipeline, no spec); the OP's golden hook applies it to a spec's streams
def golden_depthwise_windows(x, kernel, simd, stride=(1, 1), dilation=(1, 1)):
    """Windows in FINN's depthwise order: (N, OH, OW, C/simd, kh*kw, simd), flattened per pixel."""
    cols = golden.im2col(x, kernel, stride, dilation)
    n, oh, ow, _ = cols.shape
    c = x.shape[-1]
    k = kernel[0] * kernel[1]
    return cols.reshape(n, oh, ow, k, c // simd, simd).transpose(0, 1, 2, 4, 3, 5).reshape(n, oh, ow, -1)


def _golden(spec, xs, producer):
    x = xs[0].reshape(xs[0].shape[0], *spec.ifm_dim, spec.ifm_channels)
    if spec.depthwise:
        return golden_depthwise_windows(x, spec.kernel, spec.simd, spec.stride, spec.dilation)
    return golden.im2col(x, spec.kernel, spec.stride, spec.dilation)


def _fold(ctx, node, target):
    """FINN's SetFolding rule: SIMD, then the parallel window when SIMD = C is still too slow (where the
    spec allows it). A depthwise generator is not folded on its own: it follows its VVAU."""
    f = node.folding
    f["parallel_window"] = False
    legal = node.op.legal("SIMD", node.params)
    ctx.walk(node, "SIMD", legal)
    if f["SIMD"] == legal[-1] and ctx.cycles(node) > target:
        f["parallel_window"] = True
        try:
            ctx.spec(node)
        except ValueError:          # the spec does not allow it here: stay in the default style
            f["parallel_window"] = False


def _parallel_window_choice(params):
    """The optimizer's parallel_window values: both, but for a depthwise generator (it follows its VVAU)."""
    return () if params.get("depthwise") else (False, True)


def _stitched_after(spec):
    """What stitching puts after a dense parallel-window generator unless its consumer reads whole windows:
    its word is a window (kh*kw*C elements; 1,152 bits for ResNet-8's 16 channels at 8 bits), and a
    consumer reading less a cycle gets a width converter narrowing it with the FIFO on the wide side
    (layers.dwc: one LUT and two FFs per bit; the FIFO one LUT and three FFs per bit): about 2,400 LUT
    against the 143 the generator saves over the default style's. Priced as a converter down to the
    default style's word (C elements; any integer ratio costs about the same); the optimizer charges it
    where the consumer's option reads less than the window (rtlgen.passes.optimize_stitch)."""
    from layers.dwc import DWCSpec
    from layers.fifo import FIFOSpec
    if not spec.parallel_window or spec.depthwise or spec.out_width == spec.in_width:
        return ()
    shape = spec.folded_output_shape
    flat = (*shape[:-2], shape[-2] * shape[-1])
    return (FIFOSpec(spec.out_width, 2),
            DWCSpec(flat, spec.out_width, spec.in_width, spec.output_dtype))


def _finn_import(ctx, attrs, params, folding):
    """FINN's RTL generator without a parallel_window attribute: FINN's default, 0."""
    if ctx.op_type.endswith("_rtl") and "parallel_window" not in attrs:
        folding.setdefault("parallel_window", False)


def _small_instance(s):
    """Instances that between them step and wrap every loop of the real generator. The image is the window
    and one stride more each way: the output column steps along a row and wraps to the next row, the
    output row steps, the frame ends, and the default style's circular buffer wraps within the frame. A
    parallel-window generator keeps at most two words of channels per pixel (its channel-fold counter
    steps and wraps), and each gap of its delay line the kind it is in the real one (a register chain up
    to SHIFT_REGISTER_MAX words, a line buffer beyond): the image is widened, never past the real width,
    until it does. A default-style generator with several words per pixel is proven as two instances,
    because its read loop at two words per pixel on that image is a frame of 72 words whose bounded check
    costs minutes: that image at one word per pixel (every pixel and window step, the kernel loops, the
    frame end), and a one-window image at two words per pixel (the channel-fold loop inside the kernel
    loops, the frame end after it)."""
    eff = tuple((k - 1) * d + 1 for k, d in zip(s.kernel, s.dilation))
    dims = tuple(min(i, e + st) for i, e, st in zip(s.ifm_dim, eff, s.stride))
    if not s.parallel_window:
        slides = dict(ifm_dim=dims, ifm_channels=s.simd)
        if s.cf == 1:
            return slides
        return [slides, dict(ifm_dim=eff, ifm_channels=2 * s.simd)]
    changes = dict(ifm_dim=dims, ifm_channels=small.fold(s.ifm_channels, s.simd))
    kinds = _gap_kinds(s)
    for width in range(dims[1], s.ifm_dim[1] + 1):
        changes["ifm_dim"] = (dims[0], width)
        if _gap_kinds(replace(s, **changes)) == kinds:
            break
    return changes


def _gap_kinds(s):
    """The parallel style's delay line: for each gap between taps, whether it is a line buffer."""
    delays = sorted(set(s.tap_delays().values()))
    return [b - a > SHIFT_REGISTER_MAX for a, b in zip([0] + delays, delays)]


def _examples():
    """2x2 windows of a 4x4 map, then FINN's grid (unlike FINN's, the default style also takes stride >
    kernel). Left out: SIMD not dividing C, a window wider than the image, and the parallel style of a
    dense generator with SIMD < C (refused with a clear error)."""
    def legal(c):
        (kh, kw), (h, w), (dh, dw) = c["k"], c["ifm"], c["dilation"]
        if c["c"] % c["simd"] or dh * (kh - 1) + 1 > h or dw * (kw - 1) + 1 > w:
            return False
        return not (c["parallel"] and not c["dw"] and c["simd"] != c["c"])

    def case(c):
        return dict(ifm_dim=c["ifm"], ifm_channels=c["c"], kernel=c["k"], input_dtype=c["idt"], stride=c["stride"],
                    dilation=c["dilation"], depthwise=c["dw"]), {"SIMD": c["simd"], "parallel_window": c["parallel"]}
    grid = dict(idt=["INT2", "UINT4"], k=[(2, 2), (3, 3), (1, 5)], ifm=[(8, 8), (1, 21)], c=[2, 4],
                stride=[(1, 1), (2, 2), (2, 1)], dilation=[(1, 1), (2, 2), (2, 1)], simd=[1, 2, 4],
                dw=[False, True], parallel=[False, True])
    return [(dict(ifm_dim=(4, 4), ifm_channels=4, kernel=(2, 2), input_dtype="INT2"), {"SIMD": 2}),
            *grid_examples(grid, case, stride=149, legal=legal)]


OP = Op("ConvolutionInputGenerator", SWGSpec, ConvolutionInputGenerator,
        folding={"SIMD": "simd", "parallel_window": "parallel_window", "ram_style": "ram_style"},
        parallelism={"SIMD": divisors_of("ifm_channels")},
        finn_names={"ifm_dim": "IFMDim", "ifm_channels": "IFMChannels", "kernel": "ConvKernelDim",
                    "input_dtype": "inputDataType", "stride": "Stride", "dilation": "Dilation"},
        old_names=("ConvolutionInputGenerator_rtl", "ConvolutionInputGenerator1D"), golden=_golden,
        small_instance=_small_instance,
        fold=_fold, choices={"parallel_window": _parallel_window_choice}, finn_import=_finn_import, examples=_examples,
        stitched_after=_stitched_after)
