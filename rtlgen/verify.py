"""Simulate a compiled accelerator on model inputs, and compare with qonnx's execution of the model."""

from dataclasses import dataclass

import numpy as np

from rtlgen.stitch import DEFAULT_TOP_NAME, simulate_chain
from sim.harness import FULL_RATE

__all__ = ["SimulationRun", "simulate_model", "qonnx_reference", "Comparison", "compare"]


@dataclass
class SimulationRun:
    outputs: np.ndarray
    frames: int
    cycles: int                     # whole simulation, reset to last output
    cycles_per_frame: float         # steady state: spacing of frame ends at m_axis_0 (None for 1 frame)
    latency: int                    # first input word to first frame's last output word


def simulate_model(verilog, io, x, report, *, simulator=None, backpressure=FULL_RATE):
    """Model input batch ``x`` through host pre ops, the RTL simulation and host post ops; ``report`` is
    the compile's report.json (its layer cycles bound the simulation time)."""
    x = io.check_input(x)
    words = io.encode(x)
    frames = x.shape[0]
    per_frame = io.output.words_per_frame
    slack = 1.0 / min(backpressure.valid_prob, backpressure.ready_prob)
    pipeline = sum(layer["exp_cycles"] for layer in report["layers"])
    max_cycles = int(10_000 + 2 * slack * (pipeline + frames * report["analytic_cycles_per_frame"] + len(words)))
    result = simulate_chain(verilog, words, frames * per_frame, simulator=simulator, backpressure=backpressure,
                            toplevel=DEFAULT_TOP_NAME, max_cycles=max_cycles)
    outputs = io.decode(result.words("m_axis_0"), frames)
    steady = result.steady_cycles("m_axis_0", per_frame) if frames >= 2 else None
    first_end = result.out_cycles("m_axis_0")[per_frame - 1]
    return SimulationRun(outputs, frames, result.cycles, steady, first_end - result.in_cycles("s_axis_0")[0] + 1)


def qonnx_reference(model_path, x, *, progress=None):
    """qonnx ``execute_onnx`` of the model (after qonnx's cleanup, which only infers shapes and folds
    constants), one sample at a time as exported (batch 1)."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.util.cleanup import cleanup_model

    model = cleanup_model(ModelWrapper(str(model_path)))
    name, out = model.graph.input[0].name, model.graph.output[0].name
    shape = model.get_tensor_shape(name)
    samples = np.asarray(x, dtype=np.float32)
    if progress is not None:
        samples = progress(samples)
    return np.concatenate([execute_onnx(model, {name: s.reshape(shape)})[out] for s in samples], axis=0)


@dataclass
class Comparison:
    exact: bool
    samples: int
    bad_samples: int
    bad_elements: int
    elements: int
    max_abs_diff: float
    first_bad: list                 # up to 5 (sample, element index, ours, qonnx)

    def summary(self):
        if self.exact:
            return f"bit-exact: {self.samples} samples, {self.elements} output values equal qonnx"
        rows = "; ".join(f"sample {s} [{i}]: {a} vs {b}" for s, i, a, b in self.first_bad)
        return (f"MISMATCH: {self.bad_samples} of {self.samples} samples, {self.bad_elements} of {self.elements} "
                f"values differ (max |diff| {self.max_abs_diff:g}); first: {rows}")


def compare(ours, reference):
    ours = np.asarray(ours).reshape(np.shape(reference))
    ref = np.asarray(reference)
    bad = ours.astype(np.float64) != ref.astype(np.float64)
    flat_bad = bad.reshape(bad.shape[0], -1)
    first = []
    for s, i in zip(*np.nonzero(flat_bad)):
        if len(first) == 5:
            break
        first.append((int(s), int(i), ours.reshape(len(ours), -1)[s, i].item(), ref.reshape(len(ref), -1)[s, i].item()))
    diff = np.abs(ours.astype(np.float64) - ref.astype(np.float64))
    return Comparison(not bad.any(), len(ref), int(flat_bad.any(axis=1).sum()), int(bad.sum()), bad.size,
                      float(diff.max()) if diff.size else 0.0, first)
