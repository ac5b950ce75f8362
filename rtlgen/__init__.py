"""rtlgen: quantized neural networks (QONNX / FINN-ONNX) to streaming dataflow accelerators in pure RTL."""

__version__ = "0.1.0"

from rtlgen.api import Design, compile, open_design  # noqa: E402  (the Python API; see rtlgen.api)

__all__ = ["compile", "open_design", "Design"]
