"""Resource estimates calibrated against Yosys.

Every layer's spec has an analytic ``resource_estimate()`` (a model of what its component builds). Yosys
maps some of that structure better or worse than the model says (adder trees, ROMs, multipliers), by a
factor that depends on the kind of datapath. This module scales the analytic LUT and FF figures per
*variant* (op type plus the datapath kind, :func:`variant`) with coefficients ``a * analytic + b``
fitted to a corpus of Yosys syntheses (``benchmarks/cost_corpus.py`` makes the corpus,
``benchmarks/cost_fit.py`` fits and writes ``data/cost_model.json`` and the held-out errors into
BENCHMARKS.md). BRAM and DSP counts stay analytic: they are structural (memory shapes, one DSP per
multiplier) and checked exactly against Yosys by the same script.

A variant without enough corpus records keeps the analytic figure (``calibrated`` says which).
"""

import json
from functools import lru_cache
from pathlib import Path

from layers.op import Resources

__all__ = ["estimate", "variant", "calibrated", "MODEL_PATH"]

MODEL_PATH = Path(__file__).resolve().parent / "data" / "cost_model.json"


def variant(spec):
    """The calibration group of ``spec``: its op type, and for MVAU/VVAU the kind of multiplier."""
    name = type(spec).__name__.removesuffix("Spec")
    if hasattr(spec, "res_type") and hasattr(spec, "weight_dtype"):
        if getattr(spec, "xnor", False):
            return f"{name}/xnor"
        bits = min(spec.input_dtype.bitwidth(), spec.weight_dtype.bitwidth())
        if spec.res_type == "dsp" and bits > 1:
            return f"{name}/dsp"
        return f"{name}/{'select' if bits == 1 else 'lut'}"
    return name


@lru_cache(maxsize=1)
def _model():
    return json.loads(MODEL_PATH.read_text()) if MODEL_PATH.exists() else {}


def calibrated(spec):
    """True if the LUT/FF figures of ``spec`` come from a fitted variant."""
    return variant(spec) in _model()


def estimate(spec):
    """The calibrated :class:`Resources` of ``spec`` (the analytic one where no fit exists)."""
    analytic = spec.resource_estimate()
    fit = _model().get(variant(spec))
    if fit is None:
        return analytic
    lut = fit["LUT"][0] * analytic.lut + fit["LUT"][1]
    ff = fit["FF"][0] * analytic.ff + fit["FF"][1]
    return Resources(lut=int(round(lut)), ff=int(round(ff)), bram18=analytic.bram18, dsp=analytic.dsp)
