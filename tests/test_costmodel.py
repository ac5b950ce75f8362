"""The calibrated cost model (issue 15 item 1): which variant a spec belongs to, the fitted scaling
applied to LUT/FF only, and the analytic figure where no fit exists."""

import numpy as np
from qonnx.core.datatype import DataType

from layers.fifo import FIFOSpec
from layers.mvau import MVAUSpec
from rtlgen import costmodel


def mvau(idt, wdt, res_type="lut"):
    w = np.ones((16, 8), dtype=np.int64)
    return MVAUSpec(16, 8, 4, 2, DataType[idt], DataType[wdt], w, res_type=res_type)


def test_variants():
    assert costmodel.variant(mvau("BIPOLAR", "BIPOLAR")) == "MVAU/xnor"
    assert costmodel.variant(mvau("INT4", "INT4")) == "MVAU/lut"
    assert costmodel.variant(mvau("INT8", "INT8", "dsp")) == "MVAU/dsp"
    assert costmodel.variant(mvau("INT4", "BIPOLAR")) == "MVAU/select"
    assert costmodel.variant(FIFOSpec(8, 32)) == "FIFO"


def test_fitted_scaling_applies_to_lut_and_ff_only(monkeypatch):
    spec = mvau("INT4", "INT4")
    analytic = spec.resource_estimate()
    monkeypatch.setattr(costmodel, "_model", lambda: {})
    assert costmodel.estimate(spec) == analytic and not costmodel.calibrated(spec)
    monkeypatch.setattr(costmodel, "_model", lambda: {"MVAU/lut": {"LUT": [2.0, 10.0], "FF": [0.5, 0.0]}})
    calibrated = costmodel.estimate(spec)
    assert calibrated.lut == round(2 * analytic.lut + 10) and calibrated.ff == round(0.5 * analytic.ff)
    assert (calibrated.bram18, calibrated.dsp) == (analytic.bram18, analytic.dsp)
    assert costmodel.calibrated(spec) and not costmodel.calibrated(FIFOSpec(8, 32))
