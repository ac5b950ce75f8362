"""Resources (Yosys synth_xilinx, xc7) of the compute layers next to their estimates and analytic cycles.

    python -m benchmarks.compute
"""

import numpy as np
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from benchmarks.tables import write_section
from boards.yosys import synthesize
from layers.mvau import MVAU, MVAUSpec
from layers.thresholding import Thresholding, ThresholdingSpec
from layers.vvau import VVAU, VVAUSpec


def _weights(dtype, shape, seed=0):
    np.random.seed(seed)
    return gen_finn_dt_tensor(DataType[dtype], shape).astype(np.int64)


def _thresholds(lo, hi, rows, steps, seed=0):
    """(rows, steps) ascending integer thresholds in [lo, hi + 1]."""
    return np.sort(np.random.default_rng(seed).integers(lo, hi + 2, size=(rows, steps)), axis=1)


def _mvau(mw, mh, simd, pe, idt, wdt, odt=None, steps=0, **kw):
    weights = _weights(wdt, (mw, mh))
    spec = MVAUSpec(mw, mh, simd, pe, DataType[idt], DataType[wdt], weights, **kw)
    if steps:
        lo, hi = spec.acc_range()
        spec = MVAUSpec(mw, mh, simd, pe, DataType[idt], DataType[wdt], weights,
                        thresholds=_thresholds(lo, hi, mh, steps), output_dtype=DataType[odt], **kw)
    return spec, MVAU(spec)


def _thresholding(channels, pe, idt, odt, steps):
    lo, hi = int(DataType[idt].min()), int(DataType[idt].max())
    spec = ThresholdingSpec(channels, pe, DataType[idt], DataType[odt], _thresholds(lo, hi, channels, steps))
    return spec, Thresholding(spec)


def _vvau(channels, kernel, dim, pe, simd, idt, wdt, odt, steps, **kw):
    weights = _weights(wdt, (channels, 1, *kernel))
    spec = VVAUSpec(channels, kernel, dim, pe, simd, DataType[idt], DataType[wdt], weights, **kw)
    lo, hi = spec.acc_range()
    spec = VVAUSpec(channels, kernel, dim, pe, simd, DataType[idt], DataType[wdt], weights,
                    thresholds=_thresholds(lo, hi, channels, steps), output_dtype=DataType[odt], **kw)
    return spec, VVAU(spec)


CASES = [
    ("MVAU w1a1 784x64 SIMD49 PE16 decoupled",
     lambda: _mvau(784, 64, 49, 16, "BIPOLAR", "BIPOLAR", "BIPOLAR", 1, mem_mode="internal_decoupled")),
    ("MVAU w1a1 784x64 SIMD49 PE16 embedded",
     lambda: _mvau(784, 64, 49, 16, "BIPOLAR", "BIPOLAR", "BIPOLAR", 1, mem_mode="internal_embedded")),
    ("MVAU w2a2 64x64 SIMD8 PE8 lut",
     lambda: _mvau(64, 64, 8, 8, "UINT2", "INT2", "UINT2", 3, mem_mode="internal_decoupled", res_type="lut")),
    ("MVAU int8 512x784 SIMD16 PE8 dsp block",
     lambda: _mvau(512, 784, 16, 8, "INT8", "INT8", mem_mode="internal_decoupled", res_type="dsp",
                   ram_style="block")),
    # The SIMD8 PE4 variant of the int8 layer is left out: its Yosys run did not finish in 20 minutes.
    ("Thresholding C64 PE8 INT16->UINT8 (255 thr)", lambda: _thresholding(64, 8, "INT16", "UINT8", 255)),
    ("Thresholding C64 PE8 INT16->UINT4 (15 thr)", lambda: _thresholding(64, 8, "INT16", "UINT4", 15)),
    ("VVAU C64 3x3 PE8 SIMD9 w4a4 16x16 embedded",
     lambda: _vvau(64, (3, 3), (16, 16), 8, 9, "UINT4", "INT4", "UINT4", 15, mem_mode="internal_embedded")),
]


def resources():
    rows = []
    for name, make in CASES:
        spec, component = make()
        est = spec.resource_estimate()
        r = synthesize(component, sta=True)
        rows.append({"component": name, "LUT": r.lut, "est LUT": est["LUT"], "FF": r.ff, "est FF": est["FF"],
                     "LUTRAM": r.lutram, "SRL": r.srl, "BRAM36": r.bram36, "BRAM18": r.bram18,
                     "DSP": r.dsp, "est DSP": est.get("DSP", 0), "CARRY": r.carry,
                     "sta ns": r.critical_path_ns, "cycles": spec.exp_cycles, "yosys s": round(r.seconds, 1)})
        print(rows[-1], flush=True)
    write_section("Compute layers: Yosys resources",
                  "Yosys 0.70 `synth_xilinx -family xc7 -flatten`, cell counts, next to the spec's "
                  "`resource_estimate()` (`est`); `sta ns` is the cell-delay-only critical path (no routing), "
                  "a lower bound; `cycles` is `spec.exp_cycles`, per input vector (MVAU, Thresholding) or per "
                  "16x16 frame (VVAU).", rows)


if __name__ == "__main__":
    resources()
