"""Sliding-window generators (FINN ``ConvolutionInputGenerator``): default and parallel-window styles."""

from layers.op import Op, divisors_of
from sim import golden
from swg.default import SlidingWindowBuffer
from swg.parallel import SlidingWindowRegisters
from swg.spec import SWGSpec

__all__ = ["SWGSpec", "ConvolutionInputGenerator", "SlidingWindowBuffer", "SlidingWindowRegisters"]


def ConvolutionInputGenerator(spec):
    """The generator ``spec`` asks for: parallel window (line buffers and a register window) or default."""
    return SlidingWindowRegisters(spec) if spec.parallel_window else SlidingWindowBuffer(spec)


def _golden(spec, xs, producer):
    x = xs[0].reshape(xs[0].shape[0], *spec.ifm_dim, spec.ifm_channels)
    if spec.depthwise:
        return golden.depthwise_windows(x, spec.kernel, spec.simd, spec.stride, spec.dilation)
    return golden.im2col(x, spec.kernel, spec.stride, spec.dilation)


OP = Op("ConvolutionInputGenerator", SWGSpec, ConvolutionInputGenerator, _golden,
        folding={"SIMD": "simd", "parallel_window": "parallel_window", "ram_style": "ram_style"},
        parallelism={"SIMD": divisors_of("ifm_channels")},
        finn_names={"ifm_dim": "IFMDim", "ifm_channels": "IFMChannels", "kernel": "ConvKernelDim",
                    "input_dtype": "inputDataType", "stride": "Stride", "dilation": "Dilation"},
        old_names=("ConvolutionInputGenerator_rtl",))
