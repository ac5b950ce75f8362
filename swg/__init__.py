"""Sliding-window generators (FINN ``ConvolutionInputGenerator``): default and parallel-window styles."""

from swg.default import SlidingWindowBuffer
from swg.parallel import SlidingWindowRegisters
from swg.spec import SWGSpec

__all__ = ["SWGSpec", "ConvolutionInputGenerator", "SlidingWindowBuffer", "SlidingWindowRegisters"]


def ConvolutionInputGenerator(spec):
    """The generator ``spec`` asks for: parallel window (line buffers and a register window) or default."""
    return SlidingWindowRegisters(spec) if spec.parallel_window else SlidingWindowBuffer(spec)
