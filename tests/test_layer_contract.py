"""Every op a layer module declares keeps the :class:`layers.op.LayerSpec` contract, and its declaration
(FINN names, folding and parallelism axes, golden adapter) is consistent with its spec. The simulation
test measures what the contract says about timing: ``latency`` after ``lead_words`` input words."""

import dataclasses
import functools
from math import prod

import numpy as np
import pytest
from qonnx.core.datatype import DataType

from layers.op import LayerSpec, Op, Resources, examples_of, input_dtypes, input_widths
from memstream.packing import pack_words
from rtlgen.ir.graph import OPS, HWNode
from sim.harness import simulate_streams


# Every default example instance of every op (``Op.examples``; the slow ones are the rest of FINN's grids,
# simulated by tests/test_op_grid.py): (op type, index), the contract checked on each.
@functools.lru_cache(maxsize=None)
def examples(op_type):
    """``Op.examples`` of ``op_type``, made once (an MVAU's grid draws 324 weight matrices)."""
    return examples_of(OPS[op_type])


EXAMPLES = [(op_type, k) for op_type in sorted(OPS) for k, example in enumerate(examples(op_type)) if not example.slow]


def _node(op_type, k=0):
    """A node of ``op_type`` built from its op's example ``k`` (``Op.examples``)."""
    params, folding, _ = examples(op_type)[k]
    return HWNode(f"{op_type}_{k}", op_type, params, dict(folding))


def test_every_op_has_an_example_and_a_golden():
    assert all(callable(op.examples) and op.examples() for op in OPS.values())
    assert all(callable(op.golden) for op in OPS.values())


@pytest.mark.parametrize("op_type, k", EXAMPLES)
def test_spec_keeps_the_contract(op_type, k):
    op = OPS[op_type]
    assert isinstance(op, Op) and op.op_type == op_type
    spec = _node(op_type, k).spec()
    assert isinstance(spec, LayerSpec), type(spec)
    assert isinstance(spec.resource_estimate(), Resources)
    assert callable(spec.timing)                            # tests/test_timing_models.py: cycle-exact
    assert spec.in_width > 0 and spec.out_width > 0
    assert spec.num_inputs >= 1 and spec.num_outputs >= 1
    assert len(spec.folded_input_shapes) == spec.num_inputs
    assert spec.exp_cycles >= 0 and spec.latency >= 1 and spec.lead_words >= 1
    if op_type == "StreamingFIFO":      # carries any frame
        assert spec.input_dtype is None and spec.folded_output_shape is None
        return
    for shape, dtype, width in [*zip(spec.folded_input_shapes, input_dtypes(spec), input_widths(spec)),
                                (spec.folded_output_shape, spec.output_dtype, spec.out_width)]:
        assert hasattr(dtype, "bitwidth")
        assert shape[-1] * dtype.bitwidth() == width        # the lanes of a word fill its width


@pytest.mark.parametrize("op_type, k", EXAMPLES)
def test_declaration_matches_the_spec(op_type, k):
    op = OPS[op_type]
    fields = {f.name for f in dataclasses.fields(op.spec) if f.init}
    assert set(op.folding.values()) <= fields
    assert set(op.finn_names) <= fields
    assert set(op.parallelism) <= set(op.folding)
    node = _node(op_type, k)
    # legal values are a function of the params: each builds with the other folding attributes at their
    # defaults (a dense parallel window needs SIMD = C)
    node.folding = {attr: value for attr, value in node.folding.items() if attr in op.parallelism}
    for attr in op.parallelism:
        legal = op.legal(attr, node.params)
        assert legal and legal == sorted(legal)
        for value in legal:
            node.spec(**{attr: value})                      # every legal value builds
        if len(legal) > 1 or legal[-1] > 1:
            illegal = next(v for v in range(2, max(legal) + 2) if v not in legal)
            if op_type != "StreamingMaxPool":               # 2D max pool ignores PE
                with pytest.raises(ValueError, match=op.folding[attr].lower()):
                    node.spec(**{attr: illegal})
    assert set(op.finn_arrays) <= fields


@pytest.mark.parametrize("op_type, k", [case for case in EXAMPLES if OPS[case[0]].small_instance is not None])
def test_small_instance_is_the_same_generator_smaller(op_type, k):
    """``rtlgen prove``'s stand-in for a large node: spec fields only, a valid spec of the same input
    datatype and folding, no more cycles per frame and no larger than the node's frame."""
    op = OPS[op_type]
    spec = _node(op_type, k).spec()
    changes = op.small_instance(spec)
    for change in changes if isinstance(changes, list) else [changes]:      # (several: each an instance)
        assert set(change) <= {f.name for f in dataclasses.fields(op.spec) if f.init}
        small = dataclasses.replace(spec, **change)
        assert small.input_dtype == spec.input_dtype
        assert all(getattr(small, f) == getattr(spec, f) for f in op.folding.values() if f in ("pe", "simd"))
        assert small.exp_cycles <= spec.exp_cycles
        if spec.folded_input_shapes[0] is not None:
            assert prod(small.folded_input_shapes[0]) <= prod(spec.folded_input_shapes[0])


def _words(spec, k, rng):
    """One frame of input words for input ``k``: random elements, or the op's ``stimulus``."""
    op = next((op for op in OPS.values() if op.spec is type(spec)), None)
    if op is not None and op.stimulus is not None:
        x = op.stimulus(spec, 1, int(rng.integers(1 << 31)))[k]
        return [int(w) for w in pack_words(x.reshape(-1, x.shape[-1]), input_dtypes(spec)[k])]
    shape = spec.folded_input_shapes[k] or (8, 1)
    dtype = input_dtypes(spec)[k] or DataType["UINT6"]
    lanes = shape[-1]
    x = rng.integers(int(dtype.min()), int(dtype.max()) + 1, (prod(shape[:-1]), lanes))
    return [int(w) for w in pack_words(x, dtype)]


def _out_words(spec, words_in):
    shape = spec.folded_output_shape
    return len(words_in) if shape is None else prod(shape[:-1])


TIMING_CASES = [(op_type, {}) for op_type in sorted(OPS)] + [
    ("ConvolutionInputGenerator", {"SIMD": 4, "parallel_window": True}),
    ("ConvolutionInputGenerator", {"SIMD": 1}), ("MVAU", {"SIMD": 8, "PE": 4}),
    ("MVAU", {"SIMD": 1, "PE": 2, "resType": "dsp"}),      # two lanes accumulated in one DSP48E1
    ("MVAU", {"SIMD": 4, "PE": 1, "resType": "dsp"}), ("VVAU", {"resType": "dsp"}),     # one product per DSP
    ("GlobalAccPool", {"PE": 1}), ("GlobalAccPool", {"PE": 4})]                           # CF 4 and CF 1


@pytest.mark.sim
@pytest.mark.parametrize("op_type, folding", TIMING_CASES)
def test_latency_after_lead_words(op_type, folding, simulator):
    """At full rate the first output word leaves ``latency`` cycles after input word ``lead_words``."""
    node = _node(op_type)
    node.folding.update(folding)
    if op_type == "FMPadding":      # padding at the top or left leaves before any input: none there
        node.params = dict(node.params, padding=(0, 0, 1, 1))
    spec = node.spec()
    rng = np.random.default_rng(3)
    ins = {("i" if spec.num_inputs == 1 else f"i{k}"): _words(spec, k, rng) for k in range(spec.num_inputs)}
    outs = {("o" if spec.num_outputs == 1 else f"o{k}"): _out_words(spec, ins[next(iter(ins))])
            for k in range(spec.num_outputs)}
    result = simulate_streams(node.component(spec), inputs=ins, outputs=outs, simulator=simulator)
    # A window generator's first output word leaves before its window is complete: lead_words is the
    # window's span, and the word it completes is the window's last.
    first = spec.kernel_positions * spec.cf \
        if op_type == "ConvolutionInputGenerator" and not spec.parallel_window else 1
    first_out = min(result.out_cycles(p)[first - 1] for p in outs)
    lead_in = result.in_cycles(next(iter(ins)))[spec.lead_words - 1]
    assert first_out - lead_in == spec.latency
