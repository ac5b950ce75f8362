"""The files of an rtlgen OUT directory, named once. The compiler writes them (:mod:`rtlgen.backend.emit`,
:mod:`rtlgen.backend.scaleout`, :mod:`rtlgen.ir.outdir`); the runtime (:mod:`sim.stream_io`, ``boards``) and
the compiler's own readers (``rtlgen verify|sim|build|prove``) find them by these names. A module of the
runtime, so that it imports nothing of the compiler."""

from pathlib import Path

__all__ = ["VERILOG", "IO", "REPORT", "MODEL_HW", "FOLDING", "PARTITION", "CLUSTER_SIM", "VERIFY", "HOST_PRE",
           "HOST_POST", "REQUIRED", "missing"]

VERILOG = "finn_design_wrapper.v"       # the stitched top (FINN's name)
IO = "io.json"                          # how the model's tensors meet the streams (sim.stream_io.StreamIO)
REPORT = "report.json"                  # the compile's figures (rtlgen.backend.emit)
MODEL_HW = "model_hw.onnx"              # the dataflow graph in FINN's hardware-layer ONNX
FOLDING = "folding.json"                # the folding, in FINN's format
PARTITION = "partition.json"            # `rtlgen partition`'s plan (its OUT has no top of its own)
CLUSTER_SIM = "cluster_sim.json"        # `rtlgen sim` of a partition: the last run's figures
VERIFY = "verify.json"                  # `rtlgen verify OUT`: the last comparison
HOST_PRE, HOST_POST = "host_pre.onnx", "host_post.onnx"     # the host's ONNX before and after the accelerator
REQUIRED = (VERILOG, IO, REPORT)        # a compile's OUT has at least these


def missing(out):
    """The names of :data:`REQUIRED` that ``out`` lacks."""
    return [name for name in REQUIRED if not (Path(out) / name).is_file()]
