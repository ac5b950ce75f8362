"""The :class:`layers.op.Op` hooks MVAU and VVAU declare alike: their folding attributes, the optimizer's
activation-style choices, the cost model's multiplier groups, the FINN attributes they export and import,
and their lowering through ``LoweringContext.dot_product``."""

import numpy as np
from qonnx.core.datatype import DataType

__all__ = ["UNIT_FOLDING", "activation_choices", "multiplier_kind", "unit_finn_export", "lower_dot_product",
           "finn_import_unit", "example_activation"]


UNIT_FOLDING = {"PE": "pe", "SIMD": "simd", "mem_mode": "mem_mode", "ram_style": "ram_style",
                "ram_style_thresholds": "ram_style_thresholds", "resType": "res_type",
                "activation_style": "activation_style"}

REQUANT_CHOICE_STEPS = 15       # activation_style is an optimizer choice from 4-bit activations up (fewer: thresholds)


def activation_choices(params):
    """The optimizer's activation_style values for an MVAU/VVAU with ``params``: both forms where the
    thresholds have at least :data:`REQUANT_CHOICE_STEPS` steps, else none (thresholds, the default)."""
    thresholds = params.get("thresholds")
    if thresholds is None or np.shape(thresholds)[-1] < REQUANT_CHOICE_STEPS:
        return ()
    return ("thresholds", "requant")


def multiplier_kind(spec):
    """The kind of multiplier an MVAU / VVAU builds, as the cost model's calibration groups name it
    (``MVAU/lut``...): xnor (binary xnor-popcount), dsp (DSP48 products), select (1-bit operand: an adder
    of selected terms), or lut (LUT multipliers)."""
    if spec.xnor:
        return "xnor"
    bits = min(spec.input_dtype.bitwidth(), spec.weight_dtype.bitwidth())
    if spec.res_type == "dsp" and bits > 1:
        return "dsp"
    return "select" if bits == 1 else "lut"

def unit_finn_export(spec):
    """The FINN attributes an MVAU / VVAU derives (``model_hw.onnx``): its output datatype, whether it has
    an activation, whether its weights are XNOR."""
    return {"outputDataType": spec.output_dtype.name, "noActivation": int(spec.table is None),
            "binaryXnorMode": int(bool(spec.xnor))}

def lower_dot_product(ctx, node, t, op_type, codes, wscale, wdtype, geometry, *, spatial, bias, channel_axis):
    """A dot-product layer (MVAU, VVAU: spec fields ``geometry``, input_dtype, weight_dtype, weights and the
    activation's) for ``node`` on stream ``t``, with the float ops after it as thresholds (ctx.dot_product)."""
    def params(weights, weight_dtype, **fields):
        return dict(geometry, input_dtype=t.dtype, weight_dtype=weight_dtype, weights=weights, **fields)
    return ctx.dot_product(node, t, op_type, codes, wscale, wdtype, params, spatial=spatial, bias=bias,
                           channel_axis=channel_axis)

def finn_import_unit(ctx, attrs, params, folding):
    """MVAU's and VVAU's FINN attributes: noActivation=1 drops the thresholds and ActVal; the weights (and
    thresholds, with an activation) must be initializers."""
    if attrs.get("noActivation", 0):
        params.pop("thresholds", None)
        params.pop("act_val", None)
    elif "thresholds" not in params:
        raise ctx.error("noActivation=0 but no thresholds on input 2; legal: thresholds as an initializer, "
                        "or noActivation=1")
    if "weights" not in params:
        raise ctx.error("no weights; legal: the weight tensor as an initializer on input 1 (mem_mode "
                        "internal_embedded, internal_decoupled (const, decoupled in older FINN))")


def example_activation(act, acc_range, channels, seed):
    """The spec fields (thresholds, output_dtype, act_val) of FINN's activation grid value ``act`` for an
    example MVAU / VVAU: None (no activation), BIPOLAR or an INTn / UINTn quantizer whose ascending random
    thresholds span the accumulator range ``acc_range`` (FINN's tests sort random integers)."""
    if act is None:
        return {}
    odt = DataType[act]
    steps = 1 if odt.name == "BIPOLAR" else (1 << odt.bitwidth()) - 1
    lo, hi = acc_range
    thresholds = np.sort(np.random.default_rng(seed).integers(lo, hi + 2, size=(channels, steps)), axis=1)
    return dict(thresholds=thresholds, output_dtype=act, act_val=0 if odt.name == "BIPOLAR" else int(odt.min()))
