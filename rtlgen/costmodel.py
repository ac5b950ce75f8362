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
from rtlgen.ir.graph import OPS

__all__ = ["estimate", "variant", "calibrated", "MODEL_PATH"]

MODEL_PATH = Path(__file__).resolve().parent / "data" / "cost_model.json"


def variant(spec):
    """The calibration group of ``spec``: its op's ``Op.cost_group`` (the MVAU's and VVAU's add the kind of
    multiplier: ``MVAU/dsp``), else the spec's class name without ``Spec`` (``SWG``, ``FIFO``, a Galapagos
    bridge's ``ToGalapagos``: the names ``data/cost_model.json`` uses)."""
    op = _op_of_spec().get(type(spec))
    if op is not None and op.cost_group is not None:
        return op.cost_group(spec)
    return type(spec).__name__.removesuffix("Spec")


@lru_cache(maxsize=1)
def _op_of_spec():
    return {op.spec: op for op in OPS.values()}


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
