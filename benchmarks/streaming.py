"""Resources (Yosys synth_xilinx, xc7) of the sliding-window generators and the small streaming layers.

    python -m benchmarks.streaming            # SWG styles for a CNV-like layer, then the small layers
    python -m benchmarks.streaming swg        # only the SWG table
"""

import sys

from benchmarks.tables import write_section
from boards.yosys import synthesize
from swg import ConvolutionInputGenerator, SWGSpec


def _swg(simd, parallel=False, ram_style="auto", depthwise=False, dtype="UINT4"):
    spec = SWGSpec((32, 32), 64, (3, 3), dtype, simd=simd, depthwise=depthwise, parallel_window=parallel,
                   ram_style=ram_style)
    return spec, ConvolutionInputGenerator(spec)


# CNV's second convolution: 32x32x64 input (after padding), 3x3 kernel. The MVAU behind a default-style
# SWG reads SIMD channels per cycle; behind a parallel-window one it takes the whole 3x3x64 window.
SWG_CASES = [
    ("default SIMD8 UINT4", lambda: _swg(8)),
    ("default SIMD8 UINT4 block", lambda: _swg(8, ram_style="block")),
    ("default SIMD64 UINT4", lambda: _swg(64)),
    ("default SIMD8 UINT4 depthwise", lambda: _swg(8, depthwise=True)),
    ("default SIMD1 UINT8", lambda: _swg(1, dtype="UINT8")),
    ("parallel SIMD64 UINT4", lambda: _swg(64, parallel=True)),
    ("parallel SIMD64 UINT4 block", lambda: _swg(64, parallel=True, ram_style="block")),
    ("parallel SIMD8 UINT4 depthwise", lambda: _swg(8, parallel=True, depthwise=True)),
]


def _rows(cases, extra=lambda spec: {}):
    rows = []
    for name, make in cases:
        spec, component = make()
        est = spec.resource_estimate()
        r = synthesize(component)
        rows.append({"component": name, "LUT": r.lut, "est LUT": est["LUT"], "FF": r.ff, "est FF": est["FF"],
                     "LUTRAM": r.lutram, "SRL": r.srl, "BRAM36": r.bram36, "BRAM18": r.bram18,
                     "est BRAM18": est.get("BRAM18", 0), "cycles": spec.exp_cycles, **extra(spec),
                     "yosys s": round(r.seconds, 1)})
        print(rows[-1], flush=True)
    return rows


def swg():
    rows = _rows(SWG_CASES, lambda spec: {
        "out words": spec.out_words,
        "buffer words": spec.window_span if spec.parallel_window else spec.buffer_words})
    write_section("Sliding-window generators: Yosys resources (CNV-like 32x32x64, 3x3)",
                  "Yosys 0.70 `synth_xilinx -family xc7 -flatten`, cell counts, next to the spec's "
                  "`resource_estimate()` (`est`). `cycles` is `spec.exp_cycles` per 32x32 frame with frames back "
                  "to back; `out words` is the output words per frame (the default style emits one per cycle, "
                  "so its floor is max(in words, out words)). `buffer words` is the circular buffer (default) or "
                  "the delay line (parallel), in input words.", rows)


if __name__ == "__main__":
    swg()
