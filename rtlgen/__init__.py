"""rtlgen: quantized neural networks (QONNX / FINN-ONNX) to streaming dataflow accelerators in pure RTL."""

__version__ = "0.1.0"
