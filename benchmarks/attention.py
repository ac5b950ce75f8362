"""Attention in pure RTL (issue 41): Brevitas' quantized attention models at the default folding and at
``--fit pynq-z2``, simulated and compared with qonnx, and (``--yosys``) the ``--fit`` design built by Yosys in
the zynq shell beside the estimate.

    python -m benchmarks.attention [--yosys] [NAME ...]

The models are tests/models/attention/ (make_models.py, make_vit.py). A frame is one sequence (tokens x
features); the ViT's is one 8x8 digit. frames/s is the accelerator's II at 100 MHz (the board's behind
the zynq shell's DMA beside it); latency one sequence through an idle pipeline.
"""

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks.tables import section_rows, write_section

MODELS = Path(__file__).resolve().parent.parent / "tests" / "models" / "attention"
SECTION = "Attention: quantized encoder blocks and a tiny ViT (Brevitas), default and --fit pynq-z2"
CLOCK_MHZ = 100.0


def _sequences(path, n, seed=11):
    from qonnx.core.modelwrapper import ModelWrapper
    model = ModelWrapper(str(path))
    shape = model.get_tensor_shape(model.graph.input[0].name)
    return (2 * np.random.default_rng(seed).standard_normal((n, *shape[1:]))).astype(np.float32)


def _digits(n):
    data = np.load(MODELS / "digits_vit_testset.npz")
    return (data["images"][:n].astype(np.float32) / 16.0).reshape(n, 1, 8, 8)


MODELS_SHOWN = {    # name: (what it is, inputs)
    "encoder_block": ("2-head QuantMultiheadAttention (8 tokens x 16 features, biases), 2 residual Adds, "
                      "QuantReLU MLP", lambda n: _sequences(MODELS / "encoder_block.onnx", n)),
    "attention_2heads": ("2 heads, split and merged as torch does", lambda n: _sequences(MODELS / "attention_2heads.onnx", n)),
    "digits_vit": ("tiny ViT on 8x8 digits: patch conv, 16 tokens, the encoder block, mean pooling, linear "
                   "head (trained: 46 % accuracy)", _digits),
}


def measure(name, work, yosys):
    from rtlgen import api
    from rtlgen.check.verify import verify_outputs
    what, inputs = MODELS_SHOWN[name]
    path = MODELS / f"{name}.onnx"
    default = api.compile(path, work / "default", clock_mhz=CLOCK_MHZ, warn=lambda line: None).report
    start = time.perf_counter()
    design = api.compile(path, work / "fit", fit="pynq-z2", clock_mhz=CLOCK_MHZ, warn=lambda line: None)
    seconds = time.perf_counter() - start
    x = inputs(4)
    run = design.simulate(x)
    comparison = verify_outputs(design.model, x, run.outputs, design.io)
    report, est = design.report, design.report["totals"]
    row = {"model": name, "what": what,
           "default: II / frames/s": f"{default['analytic_cycles_per_frame']:,} / {default['frames_per_second']:,.0f}",
           "--fit: II / frames/s (board)": f"{report['analytic_cycles_per_frame']:,} / "
                                           f"{report['frames_per_second']:,.0f} "
                                           f"({report.get('board_frames_per_second', report['frames_per_second']):,.0f})",
           "measured cycles/frame": f"{run.cycles_per_frame:,.0f}",
           "latency": f"{report['latency_ns'] / 1000:,.2f} us",
           "against qonnx (4 frames, RTL)": comparison.summary().split(":")[0],
           "estimate LUT/FF/BRAM36/DSP": f"{est['LUT']:,} / {est['FF']:,} / {est['BRAM18'] / 2:g} / {est['DSP']:,}",
           "compile s": f"{seconds:.1f}"}
    if yosys:
        synth = design.build(shell="zynq", say=lambda line: None)
        t = synth["totals"]
        row["Yosys LUT/FF/BRAM36/DSP (zynq shell)"] = \
            f"{synth['lut_including_memory']:,} / {t['ff']:,} / {t['bram36'] + t['bram18'] / 2:g} / {t['dsp']:,}"
        layers = synth["timing"]["layers"]
        slowest = min(layers, key=lambda n: layers[n]["fmax_mhz_estimate"], default=None)
        path = layers[slowest] if slowest else synth["timing"]["design"]
        row["Fmax estimate"] = (f"~{path['fmax_mhz_estimate']:.0f} MHz ({slowest or 'design'}: {path['through']})"
                                if path else "-")
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"of {', '.join(MODELS_SHOWN)} (none: all)")
    parser.add_argument("--yosys", action="store_true", help="build each --fit design by Yosys in the zynq shell")
    args = parser.parse_args()
    for name in args.names:
        if name not in MODELS_SHOWN:
            parser.error(f"{name}: unknown model; known: {', '.join(MODELS_SHOWN)}")
    rows = {r["model"]: r for r in section_rows(SECTION)}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in args.names or list(MODELS_SHOWN):
            work = Path(tmp) / name
            rows[name] = measure(name, work, args.yosys)
            print(rows[name], flush=True)
    keys = list(dict.fromkeys(k for r in rows.values() for k in r))
    write_section(SECTION, "Each model compiled at the default folding (FINN's SetFolding) and with `--fit pynq-z2` "
                  f"at {CLOCK_MHZ:g} MHz; the `--fit` design simulated on Verilator (cycles per frame measured "
                  "between frames) and compared with qonnx's execute_onnx on the original model (\"bit-exact\", or "
                  "\"equal\" up to float32 rounding where the model ends in float ops). A frame is one sequence "
                  "(tokens x features), or one digit for the ViT. With `--yosys`, the `--fit` design built by Yosys "
                  "`synth_xilinx` in the zynq shell beside the estimate; the Fmax figure is Yosys' `sta` with "
                  "`boards/timing.py`'s delay model, an estimate (Vivado's timing report is the real figure).",
                  [{k: rows[n].get(k, "-") for k in keys} for n in MODELS_SHOWN if n in rows])


if __name__ == "__main__":
    main()
