"""Resources (Yosys synth_xilinx, xc7) of the sliding-window generators and the small streaming layers.

    python -m benchmarks.streaming            # SWG styles for a CNV-like layer, then the small layers
    python -m benchmarks.streaming swg        # only the SWG table
"""

import sys

import numpy as np

from benchmarks.tables import write_section
from boards.yosys import synthesize
from swg import ConvolutionInputGenerator, SWGSpec
from layers.channelwise import ChannelwiseOp, ChannelwiseOpSpec
from layers.fmpadding import FMPadding, FMPaddingSpec
from layers.globalaccpool import GlobalAccPool, GlobalAccPoolSpec
from layers.labelselect import LabelSelect, LabelSelectSpec
from layers.maxpool import StreamingMaxPool, StreamingMaxPoolSpec
from layers.upsample import UpsampleNearestNeighbour, UpsampleNearestNeighbourSpec
from layers.duplicate_streams import DuplicateStreams, DuplicateStreamsSpec
from layers.streams import AddStreams, AddStreamsSpec, StreamingConcat, StreamingConcatSpec


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


def _layer(component_class, spec):
    return spec, component_class(spec)


# Sizes from CNV / ResNet-like networks at 4-bit activations.
SMALL_CASES = [
    ("StreamingMaxPool 2D 28x28x64 k2 UINT4",
     lambda: _layer(StreamingMaxPool, StreamingMaxPoolSpec((28, 28), 2, 64, dtype="UINT4"))),
    ("StreamingMaxPool 1D 1x64 C64 PE8 k4 UINT4",
     lambda: _layer(StreamingMaxPool, StreamingMaxPoolSpec((1, 64), (1, 4), 64, pe=8, dtype="UINT4"))),
    ("FMPadding 30x30x64 pad 1 SIMD8 UINT4",
     lambda: _layer(FMPadding, FMPaddingSpec((30, 30), (1, 1, 1, 1), 64, simd=8, dtype="UINT4"))),
    ("LabelSelect 10 labels PE1 K1 INT16", lambda: _layer(LabelSelect, LabelSelectSpec(10, 1, 1, "INT16"))),
    ("LabelSelect 100 labels PE10 K5 UINT8", lambda: _layer(LabelSelect, LabelSelectSpec(100, 10, 5, "UINT8"))),
    ("AddStreams C64 PE8 UINT4", lambda: _layer(AddStreams, AddStreamsSpec(64, 8, "UINT4", (1, 16, 16)))),
    ("DuplicateStreams C64 PE8 UINT4 x2",
     lambda: _layer(DuplicateStreams, DuplicateStreamsSpec(64, 8, 2, "UINT4"))),
    ("StreamingConcat 32+32 SIMD8 UINT4",
     lambda: _layer(StreamingConcat, StreamingConcatSpec((32, 32), 8, "UINT4"))),
    ("ChannelwiseOp add C64 PE8 INT8+INT8",
     lambda: _layer(ChannelwiseOp, ChannelwiseOpSpec("add", 64, 8, "INT8", "INT8", "INT9",
                                                     np.arange(-32, 32)))),
    ("GlobalAccPool 7x7x64 PE8 UINT4",
     lambda: _layer(GlobalAccPool, GlobalAccPoolSpec(64, 8, "UINT4", (1, 7, 7)))),
    ("Upsample 16x16x64 x2 SIMD8 UINT4 (row in LUTRAM)",
     lambda: _layer(UpsampleNearestNeighbour, UpsampleNearestNeighbourSpec(16, 32, 64, 8, "UINT4"))),
    ("Upsample 16x16x64 x2 SIMD1 UINT4 (row in BRAM)",
     lambda: _layer(UpsampleNearestNeighbour, UpsampleNearestNeighbourSpec(16, 32, 64, 1, "UINT4"))),
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


def small_layers():
    write_section("Small streaming layers: Yosys resources",
                  "Yosys 0.70 `synth_xilinx -family xc7 -flatten`, cell counts, next to the spec's "
                  "`resource_estimate()` (`est`). `cycles` is `spec.exp_cycles` per frame.", _rows(SMALL_CASES))


if __name__ == "__main__":
    swg()
    if sys.argv[1:] != ["swg"]:
        small_layers()
