"""Simulate a compiled accelerator on model inputs, and compare with qonnx's execution of the model."""

from dataclasses import dataclass, replace

import numpy as np

from rtlgen.backend.simulate import simulate_chain
from rtlgen.backend.stitch import DEFAULT_TOP_NAME
from sim import progress
from sim.compiled import network_engine
from sim.harness import FULL_RATE, cycle_budget

__all__ = ["SimulationRun", "simulate_model", "qonnx_reference", "Comparison", "compare", "tolerance", "FLOAT32_RTOL",
           "verify_outputs"]


@dataclass
class SimulationRun:
    outputs: np.ndarray
    frames: int
    cycles: int                     # whole simulation, reset to last output
    cycles_per_frame: float         # steady state: spacing of frame ends at m_axis_0 (None for 1 frame)
    latency: int                    # first input word to first frame's last output word


def simulate_model(verilog, io, x, report, *, simulator=None, backpressure=FULL_RATE, waves=None):
    """Model input batch ``x`` through host pre ops, the RTL simulation and host post ops; ``report`` is
    the compile's report.json (its layer cycles bound the simulation time). Verilator (default) runs
    the compiled harness of :mod:`sim.compiled`; Icarus the cocotb bench. ``waves``: write a VCD of the
    run to this path (Verilator only)."""
    x = io.check_input(x)
    words = io.encode(x)
    frames = x.shape[0]
    per_frame = io.output.words_per_frame
    max_cycles = cycle_budget([layer["exp_cycles"] for layer in report["layers"]],
                              report["analytic_cycles_per_frame"], frames, len(words) + frames * per_frame,
                              backpressure)
    simulator, compiled = network_engine(simulator)
    if waves is not None and not compiled:
        raise ValueError("--waves needs the Verilator bench (--simulator verilator)")
    result = simulate_chain(verilog, words, frames * per_frame, simulator=simulator, backpressure=backpressure,
                            toplevel=DEFAULT_TOP_NAME, max_cycles=max_cycles, compiled=compiled, waves=waves)
    outputs = io.decode(result.words("m_axis_0"), frames)
    steady = result.steady_cycles("m_axis_0", per_frame) if frames >= 2 else None
    first_end = result.out_cycles("m_axis_0")[per_frame - 1]
    return SimulationRun(outputs, frames, result.cycles, steady, first_end - result.in_cycles("s_axis_0")[0] + 1)


def qonnx_reference(model_path, x):
    """qonnx ``execute_onnx`` of the model (after qonnx's cleanup, which only infers shapes and folds
    constants), one sample at a time as exported (batch 1)."""
    # start-up (the CLI imports this module): qonnx's onnx_exec and cleanup (onnxruntime) ~0.15 s
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.util.cleanup import cleanup_model

    model = cleanup_model(ModelWrapper(str(model_path)))
    name, out = model.graph.input[0].name, model.graph.output[0].name
    shape = model.get_tensor_shape(name)
    samples = progress.over(np.asarray(x, dtype=np.float32), "qonnx execute_onnx")
    return np.concatenate([execute_onnx(model, {name: s.reshape(shape)})[out] for s in samples], axis=0)


FLOAT32_RTOL = 1e-5     # ~80 float32 ulps of a sample's largest value; one output code is far more


@dataclass
class Comparison:
    exact: bool                     # every value bit-equal
    samples: int
    bad_samples: int
    bad_elements: int
    elements: int
    max_abs_diff: float
    first_bad: list                 # up to 5 (sample, element index, ours, qonnx)
    rtol: float = 0.0               # the rounding allowed (0: none)
    against_exact: "Comparison" = None  # where qonnx differs: ours against the model's exact semantics
    ties: object = None             # where qonnx differs: its differences, classified (rtlgen.check.exact.TieReport)
    reference: str = "qonnx"        # what the outputs were compared with

    @property
    def passed(self):
        """Bit-exact, or (where the model itself rounds in float32) equal up to that rounding, or equal to
        the model's exact semantics where qonnx differs from them only by float32 rounding ties."""
        return self.exact or self.bad_elements == 0 or self.at_ties

    @property
    def at_ties(self):
        """Every difference from qonnx is qonnx's: ours equal the exact semantics, qonnx's differences
        from them all come from rounding ties in its float32 arithmetic."""
        return self.against_exact is not None and self.against_exact.passed and self.ties.explained

    def summary(self):
        if self.at_ties:
            return (f"equal to the model's exact semantics: {self.samples} samples, {self.elements} output values; "
                    f"qonnx differs in {self.bad_elements} values of {self.bad_samples} samples, all from "
                    f"{self.ties.summary()} and what they change downstream ({self.ties.downstream} codes); "
                    f"the accelerator computes dot products exactly (README, 'Verification')")
        if self.exact:
            return f"bit-exact: {self.samples} samples, {self.elements} output values equal {self.reference}"
        if self.passed:
            return (f"equal up to float32 rounding: {self.samples} samples, {self.elements} output values match "
                    f"qonnx within {self.rtol:g} of each sample's largest value (max |diff| {self.max_abs_diff:g}; "
                    f"the model computes its float output in float32, the accelerator exactly)")
        rows = "; ".join(f"sample {s} [{i}]: {a} vs {b}" for s, i, a, b in self.first_bad)
        text = (f"MISMATCH: {self.bad_samples} of {self.samples} samples, {self.bad_elements} of {self.elements} "
                f"values differ from {self.reference} (max |diff| {self.max_abs_diff:g}); first: {rows}")
        if self.against_exact is not None:
            text += (f"; against the model's exact semantics: {self.against_exact.bad_elements} of {self.elements} "
                     f"values differ"
                     f"{'' if self.ties.explained else '; qonnx: ' + self.ties.summary()}")
        return text


def compare(ours, reference, *, rtol=0.0):
    """Element-wise comparison. ``rtol`` > 0 (for outputs the model computes as float32 dot products with
    arbitrary scales, ``StreamEnd.rounding``) accepts differences up to ``rtol`` times the largest
    magnitude of the same sample: float32 rounding, never a different integer result."""
    ref = np.asarray(reference)
    ours = np.asarray(ours).reshape(ref.shape)
    flat_ours = ours.reshape(len(ref), -1).astype(np.float64)
    flat_ref = ref.reshape(len(ref), -1).astype(np.float64)
    diff = np.abs(flat_ours - flat_ref)
    allowed = rtol * np.abs(flat_ref).max(axis=1, keepdims=True) if flat_ref.size else 0.0
    bad = diff > allowed
    first = [(int(s), int(i), flat_ours[s, i].item(), flat_ref[s, i].item()) for s, i in zip(*np.nonzero(bad))][:5]
    return Comparison(not (diff > 0).any(), len(ref), int(bad.any(axis=1).sum()), int(bad.sum()), bad.size,
                      float(diff.max()) if diff.size else 0.0, first, rtol)


def tolerance(io):
    """The rtol for :func:`compare` of this accelerator's outputs."""
    return FLOAT32_RTOL if io.output.rounding else 0.0


def verify_outputs(model_path, x, outputs, io):
    """The accelerator's ``outputs`` for model inputs ``x`` against qonnx's execution of ``model_path``;
    where they differ, also against the model's exact semantics (:mod:`rtlgen.check.exact`)."""
    # start-up (the CLI imports this module): exact ~0.18 s (qonnx, onnxruntime), finn_hw ~0.06 s
    from rtlgen.check.exact import exact_reference
    from rtlgen.passes.finn_hw import finn_reference, is_finn_hw_file

    if is_finn_hw_file(model_path):     # FINN's custom ops: numpy executors of FINN's semantics (sim.finn_exec)
        return replace(compare(outputs, finn_reference(model_path, x), rtol=tolerance(io)),
                       reference="FINN's semantics (sim.finn_exec)")

    x = io.on_input_grid(x)         # a fixed-point input: the model run on the values the accelerator gets
    result = compare(outputs, qonnx_reference(model_path, x), rtol=tolerance(io))
    if result.passed:
        return result
    exact, ties = exact_reference(model_path, x)
    return replace(result, against_exact=compare(outputs, exact, rtol=tolerance(io)), ties=ties)
