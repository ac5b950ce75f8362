"""Every op's examples (``Op.examples``: its small example, grown to FINN's test grid where FINN has one)
simulated as a stream layer: bit-exact against the op's independent golden (its ``golden`` hook, numpy
math from :mod:`golden`), at exactly its analytic cycles per frame (``exp_cycles``) at full rate, every word
at the cycle its timing model says (``spec.timing``) at full rate, and bit-exact again under random
backpressure on every port. An example marked slow runs in the slow suite.

An op's own behaviour beyond this (corner values, errors, timing details, other simulators) stays in its
test file."""

from math import prod

import numpy as np
import pytest
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from layers.op import input_dtypes
from memstream.packing import pack_words, unpack_words
from rtlgen.ir.graph import OPS, HWNode
from sim.harness import FULL_RATE, Backpressure, simulate_streams
from sim.runner import to_verilog
from tests.test_layer_contract import examples

FRAMES = 3                  # the steady state is measured over the later frames
STALLED_FRAMES = 2


def _cases():
    return [pytest.param(op_type, k, id=f"{op_type}-{k}", marks=[pytest.mark.slow] if example.slow else [])
            for op_type in sorted(OPS) for k, example in enumerate(examples(op_type))]


def _ports(prefix, count):
    return [prefix] if count == 1 else [f"{prefix}{k}" for k in range(count)]


def _input_tensors(op, spec, frames, seed):
    """Elements for each input stream, (frames, words, lanes): the op's ``stimulus`` where it declares one,
    else random elements of its input datatypes; a FIFO (no shape or datatype) carries eight words of its
    width."""
    if op.stimulus is not None:
        return op.stimulus(spec, frames, seed)
    np.random.seed(seed)
    tensors = []
    for shape, dtype in zip(spec.folded_input_shapes, input_dtypes(spec)):
        if shape is None:
            shape, dtype = (8, 1), DataType[f"UINT{spec.in_width}"]
        tensors.append(gen_finn_dt_tensor(dtype, (frames, prod(shape[:-1]), shape[-1])))
    return tensors


def _expected(op, spec, xs):
    """The golden's outputs, one (frames, elements) array per output port."""
    golden_inputs = [x if shape is None else x.reshape(x.shape[0], -1, shape[-2] * shape[-1])
                     for x, shape in zip(xs, spec.folded_input_shapes)]
    outs = op.golden(spec, golden_inputs, None)
    outs = outs if isinstance(outs, list) else [outs] * spec.num_outputs
    return [np.asarray(y).reshape(len(xs[0]), -1) for y in outs]


def _weight_stream(spec, frames):
    """Weights a layer reads from a stream of its own (mem_mode external): the image once per input vector."""
    if getattr(spec, "mem_mode", None) != "external":
        return {}
    return {"w": spec.external_weight_words(frames * prod(spec.num_input_vectors))}


def run(op, spec, verilog, frames, backpressure, seed):
    """Simulate ``frames`` random frames; assert every output equals the golden's; return the result."""
    xs = _input_tensors(op, spec, frames, seed)
    dtypes = [DataType[f"UINT{spec.in_width}"] if d is None else d for d in input_dtypes(spec)]
    inputs = {port: [int(w) for w in pack_words(x.reshape(-1, x.shape[-1]), dtype)]
              for port, x, dtype in zip(_ports("i", spec.num_inputs), xs, dtypes)}
    inputs.update(_weight_stream(spec, frames))
    expected = _expected(op, spec, xs)
    out_shape = spec.folded_output_shape
    words, lanes = (len(inputs["i"]), 1) if out_shape is None else (frames * prod(out_shape[:-1]), out_shape[-1])
    out_dtype = spec.output_dtype or dtypes[0]
    slack = 1.0 / min(backpressure.valid_prob, backpressure.ready_prob)
    budget = int(slack * (frames * spec.exp_cycles + sum(map(len, inputs.values())) + words)) + 2000
    ports = _ports("o", spec.num_outputs)
    result = simulate_streams(verilog, inputs=inputs, outputs=dict.fromkeys(ports, words),
                              backpressure=backpressure, max_cycles=budget)
    for port, y in zip(ports, expected):
        got = unpack_words(np.array(result.words(port), dtype=object), out_dtype, lanes).reshape(y.shape)
        if not np.array_equal(got, y):
            bad = tuple(np.argwhere(got != y)[0])
            raise AssertionError(f"{port}: {int((got != y).sum())} of {y.size} elements differ from the golden; "
                                 f"first at {bad}: got {got[bad]}, expected {y[bad]}")
    return result, ports, words // frames


@pytest.mark.sim
@pytest.mark.parametrize("op_type, k", _cases())
def test_example_bit_exact_at_its_ii_under_backpressure(op_type, k):
    op = OPS[op_type]
    example = examples(op_type)[k]
    spec = HWNode(f"{op_type}_{k}", op_type, example.params, dict(example.folding)).spec()
    verilog = to_verilog(op.component(spec), "top")        # one conversion for both runs
    full, ports, words_per_frame = run(op, spec, verilog, FRAMES, FULL_RATE, seed=k + 1)
    if spec.exp_cycles:                 # 0: never limits the rate (a FIFO)
        for port in ports:
            assert full.steady_cycles(port, words_per_frame) == spec.exp_cycles, port
    _assert_timing_model(spec, full, ports)
    run(op, spec, verilog, STALLED_FRAMES, Backpressure(seed=k + 7), seed=k + 2)


def _assert_timing_model(spec, result, ports):
    """The layer's timing model (``spec.timing``, :mod:`layers.timing`) at full rate: it takes and offers
    every word at exactly the cycles the model predicts from the cycles the bench offered the input words
    (with random gaps: tests/test_timing_models.py). A layer reading a weight stream of its own is left to
    its own tests (its model times the activation inputs)."""
    if not hasattr(spec, "timing") or getattr(spec, "mem_mode", None) == "external":
        return
    inputs = _ports("i", spec.num_inputs)
    model = spec.timing([np.array(result.offered_cycles(port)) for port in inputs])
    for k, port in enumerate(inputs):
        np.testing.assert_array_equal(model.reads[k], result.in_cycles(port), err_msg=f"timing model: reads of {port}")
    for port in ports:
        np.testing.assert_array_equal(model.writes, result.out_cycles(port), err_msg=f"timing model: writes of {port}")


def _golden_functions():
    """(module path, function AST) of every op module's golden function (``golden_*`` at module level)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for path in sorted(path for package in ("layers", "swg", "galapagos") for path in (root / package).glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("golden_"):
                yield path.relative_to(root).as_posix(), node


def test_goldens_are_independent_of_the_hardware():
    """An op's golden sits in its module beside the hardware, but reads none of it: only its arguments,
    numpy, the shared math of :mod:`golden` and the module's other goldens (no spec, no component, no
    helper the hardware uses), so the simulation is compared against math written apart from it."""
    import ast
    import builtins

    found = list(_golden_functions())
    allowed = set(dir(builtins)) | {"np", "golden"} | {node.name for _, node in found}
    for path, function in found:
        bound = {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
        bound |= {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        bound |= {n.name for n in ast.walk(function) if isinstance(n, ast.FunctionDef) and n is not function}
        read = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        assert read <= allowed | bound, f"{path}: {function.name} reads {sorted(read - allowed - bound)}"
    assert len(found) >= 15             # every op with arithmetic of its own has one
