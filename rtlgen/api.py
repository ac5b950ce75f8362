"""The Python API: what the `rtlgen` command line does, as functions and one object.

    from rtlgen import api
    design = api.compile("model.onnx", "out", target_fps=10_000)   # writes out/ as `rtlgen compile`
    design.report["frames_per_second"], design.fits
    run = design.simulate(x)                 # x: model inputs, batch first -> run.outputs, run.cycles_per_frame
    result = design.verify(x)                # the simulation against qonnx's execution of the model
    assert result.passed, result.summary()
    design.build(shell="zynq")               # Yosys report (and a bitstream with toolchain="vivado")
    same = api.open_design("out")         # a Design for an existing compile output

Errors are the command line's: :class:`rtlgen.frontend.CompileError` (bad model or options),
:class:`sim.stream_io.InputError` (bad inputs), :class:`rtlgen.build.BuildError`.
"""

from pathlib import Path

__all__ = ["compile", "open_design", "Design"]


class Design:
    """A compiled accelerator in its output directory ``out`` (``verilog``, ``io``, ``report`` as written
    there). ``compiled`` is the compiler's :class:`rtlgen.compiler.Compiled` when this process made it."""

    def __init__(self, out, compiled=None):
        from sim.stream_io import read_outputs
        self.out = Path(out)
        self.verilog, self.io, self.report = read_outputs(self.out)
        self.compiled = compiled

    @property
    def model(self):
        """The ONNX model the design was compiled from (as given to compile)."""
        return self.report["model"]

    @property
    def fits(self):
        """Whether the estimate fits the board the design was compiled for."""
        return self.report["fit"]["fits"]

    def simulate(self, x, *, simulator=None, backpressure=None, waves=None):
        """Model inputs ``x`` (the model's input shape, or a batch of it) through the host ops and the RTL
        simulation: a :class:`rtlgen.verify.SimulationRun` (outputs, cycles, cycles_per_frame, latency)."""
        from rtlgen.verify import simulate_model
        from sim.harness import FULL_RATE
        return simulate_model(self.verilog, self.io, x, self.report, simulator=simulator,
                              backpressure=backpressure or FULL_RATE, waves=waves)

    def verify(self, x, *, simulator=None):
        """Simulate ``x`` and compare with qonnx's execution of :attr:`model`: a
        :class:`rtlgen.verify.Comparison` (``passed``, ``exact``, ``summary()``)."""
        from rtlgen.verify import verify_outputs
        x = self.io.check_input(x)
        run = self.simulate(x, simulator=simulator)
        return verify_outputs(self.model, x, run.outputs, self.io)

    def build(self, *, shell="standalone", toolchain="yosys", inputs=None, force=False, say=print):
        """Synthesize in a board shell (see :func:`rtlgen.build.build`); returns the Yosys report dict."""
        from rtlgen.build import build
        return build(self.out, shell=shell, toolchain=toolchain, board=self.report["fit"]["board"],
                     inputs=inputs, force=force, say=say)


def compile(model, out, *, folding=None, target_fps=None, clock_mhz=100.0, board="pynq-z2", fifo_sizing="analytic",
            simulator=None, input_dtype=None, strict=False, fit=None, max_utilization=0.8, budget=None,
            keep_intermediate=None, say=None):
    """Compile ``model`` (a QONNX / FINN-ONNX file) into the directory ``out`` (created; a previous compile
    there is cleared) and return its :class:`Design`. The options are `rtlgen compile`'s; ``say`` gets one
    line per compiler pass."""
    from rtlgen.compiler import CompileOptions, compile_model
    from rtlgen.emit import prepare_out, write_outputs

    options = CompileOptions(folding=folding, target_fps=target_fps, clock_mhz=clock_mhz, board=board,
                             fifo_sizing=fifo_sizing, simulator=simulator, input_dtype=input_dtype, strict=strict,
                             fit=fit, max_utilization=max_utilization, budget=budget)
    options.check()
    prepare_out(out)
    compiled = compile_model(model, options, say=say or (lambda line: None), keep=keep_intermediate)
    write_outputs(compiled, out)
    return Design(out, compiled)


def open_design(out):
    """The :class:`Design` in ``out``, a directory written by `rtlgen compile` or :func:`compile`."""
    return Design(out)
