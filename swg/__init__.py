"""Sliding-window generators (FINN ``ConvolutionInputGenerator``): default and parallel-window styles."""

from layers.op import Op, divisors_of
from swg.default import SlidingWindowBuffer
from swg.parallel import SlidingWindowRegisters
from swg.spec import SWGSpec

__all__ = ["SWGSpec", "ConvolutionInputGenerator", "SlidingWindowBuffer", "SlidingWindowRegisters"]


def ConvolutionInputGenerator(spec):
    """The generator ``spec`` asks for: parallel window (line buffers and a register window) or default."""
    return SlidingWindowRegisters(spec) if spec.parallel_window else SlidingWindowBuffer(spec)



OP = Op("ConvolutionInputGenerator", SWGSpec, ConvolutionInputGenerator,
        folding={"SIMD": "simd", "parallel_window": "parallel_window", "ram_style": "ram_style"},
        parallelism={"SIMD": divisors_of("ifm_channels")},
        finn_names={"ifm_dim": "IFMDim", "ifm_channels": "IFMChannels", "kernel": "ConvKernelDim",
                    "input_dtype": "inputDataType", "stride": "Stride", "dilation": "Dilation"},
        old_names=("ConvolutionInputGenerator_rtl",))
