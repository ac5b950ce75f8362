"""Attention in pure RTL (issue 41): Brevitas' quantized encoder block and the tiny ViT at the default
folding and at ``--fit pynq-z2``, simulated on Verilator and compared with qonnx, and (``--yosys``) each
design built by Yosys in the zynq shell beside the estimate.

    python -m benchmarks.attention [--yosys] [NAME ...]

The models are tests/models/attention/ (make_models.py, make_vit.py). A frame is one sequence (tokens x
features); the ViT's is one 8x8 digit. frames/s is the accelerator's II at 100 MHz (the board's behind
the zynq shell's DMA beside it); latency one frame through an idle pipeline. The ViT's accuracy is counted
on all 360 test digits, in qonnx (float32) and in the RTL simulation of each design.
"""

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks.tables import section_provenance, section_rows, write_section

MODELS = Path(__file__).resolve().parent.parent / "tests" / "models" / "attention"
SECTION = "Attention: a quantized encoder block and a tiny ViT (Brevitas), default and --fit pynq-z2"
CLOCK_MHZ = 100.0
FOLDINGS = {"default": {}, "--fit pynq-z2": {"fit": "pynq-z2"}}
_REFERENCES = {}                # (model, inputs) -> qonnx's outputs
FPS = "frames/s = sequences/s (board)"
INTRO = ("Each model compiled at the default folding (FINN's SetFolding) and with `--fit pynq-z2` at {clock:g} "
         "MHz, simulated on Verilator (cycles per frame measured between frames) and compared with qonnx's "
         "execute_onnx on the original model (\"bit-exact\", or \"equal up to float32 rounding\" where the model "
         "ends in a float MatMul: the ViT's head). A frame is one sequence (tokens x features), or one digit for "
         "the ViT: frames/s counts sequences; the encoder block's inputs are random sequences, the ViT's the 360 "
         "test digits of make_vit.py's split, its accuracy counted by argmax in qonnx and in the RTL simulation. "
         "Yosys: `synth_xilinx` of the whole design in the zynq shell (LUTs include LUTRAM) beside the "
         "compiler's estimate of the accelerator; the Fmax figure is Yosys' `sta` with `boards/timing.py`'s delay "
         "model, an estimate (Vivado's timing report is the real figure). QuantSoftmax sets the II of every "
         "design here (3n steps a row of n scores plus the divider's, rows not overlapped); the ViT's is at its "
         "widest divider already at the default folding, so `--fit` cannot lower it: the next step is "
         "overlapping rows.")
OLD_KEYS = {"frames/s (board)": FPS}     # earlier runs' column names, read back from BENCHMARKS.md


def _sequences(path, n, seed=11):
    from qonnx.core.modelwrapper import ModelWrapper
    model = ModelWrapper(str(path))
    shape = model.get_tensor_shape(model.graph.input[0].name)
    return (2 * np.random.default_rng(seed).standard_normal((n, *shape[1:]))).astype(np.float32), None


def _digits(n=None):
    data = np.load(MODELS / "digits_vit_testset.npz")
    images, labels = data["images"][:n], data["labels"][:n]
    return (images.astype(np.float32) / 16.0 - 0.5).reshape(len(images), 1, 8, 8), labels     # make_vit.pixels


MODELS_SHOWN = {    # name: (what it is, inputs and their labels (None: no labels))
    "encoder_block": ("2-head QuantMultiheadAttention (8 tokens x 16 features, biases), 2 residual Adds, "
                      "QuantReLU MLP; 4-bit weights and activations, 8-bit scores and softmax",
                      lambda: _sequences(MODELS / "encoder_block.onnx", 8)),
    "digits_vit": ("tiny ViT on 8x8 digits (make_vit.py): 3x3 conv stem, 4x4/2 padded patch conv, 16 tokens x "
                   "16 features, the encoder block, mean pooling, linear head; trained 30 epochs", _digits),
}


def _accuracy(outputs, labels):
    right = int(np.sum(np.asarray(outputs).reshape(len(labels), -1).argmax(1) == labels))
    return f"{100 * right / len(labels):.1f} % ({right}/{len(labels)})"


def _short_path(through):
    """A timing path's cells with runs folded: "DSP48E1 -> LUT2 -> 13 x CARRY4"."""
    cells, runs = through.split(" -> "), []
    for cell in cells:
        if runs and runs[-1][0] == cell:
            runs[-1][1] += 1
        else:
            runs.append([cell, 1])
    return " -> ".join(cell if count == 1 else f"{count} x {cell}" for cell, count in runs)


def measure(name, folding, work, yosys):
    from rtlgen import api
    from rtlgen.check.verify import compare, qonnx_reference, tolerance
    what, inputs = MODELS_SHOWN[name]
    path = MODELS / f"{name}.onnx"
    start = time.perf_counter()
    design = api.compile(path, work, clock_mhz=CLOCK_MHZ, warn=lambda line: None, **FOLDINGS[folding])
    seconds = time.perf_counter() - start
    x, labels = inputs()
    x = design.io.check_input(x)
    run = design.simulate(x)
    x_grid = design.io.on_input_grid(x)
    if (name, x_grid.tobytes()) not in _REFERENCES:         # qonnx on 360 digits: minutes; once per model
        _REFERENCES[(name, x_grid.tobytes())] = qonnx_reference(path, x_grid)
    reference = _REFERENCES[(name, x_grid.tobytes())]
    comparison = compare(run.outputs, reference, rtol=tolerance(design.io))
    report, est = design.report, design.report["totals"]
    row = {"model": name, "folding": folding, "what": what,
           "II cycles": f"{report['analytic_cycles_per_frame']:,}",
           "measured cycles/frame": f"{run.cycles_per_frame:,.0f}",
           FPS: f"{report['frames_per_second']:,.0f} "
                               f"({report.get('board_frames_per_second', report['frames_per_second']):,.0f})",
           "latency": f"{report['latency_ns'] / 1000:,.2f} us",
           "RTL against qonnx": f"{comparison.summary().split(':')[0]} ({len(x)} frames)",
           "accuracy qonnx / RTL": (f"{_accuracy(reference, labels)} / {_accuracy(run.outputs, labels)}"
                                    if labels is not None else "-"),
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
        row["Fmax estimate"] = (f"~{path['fmax_mhz_estimate']:.0f} MHz ({slowest or 'design'}: "
                                f"{_short_path(path['through'])})"
                                if path else "-")
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"of {', '.join(MODELS_SHOWN)} (none: all)")
    parser.add_argument("--yosys", action="store_true", help="build each design by Yosys in the zynq shell")
    parser.add_argument("--table-only", action="store_true",
                        help="measure nothing: rewrite the section from its rows in BENCHMARKS.md")
    parser.add_argument("--folding", choices=list(FOLDINGS), action="append",
                        help="only this folding (repeatable; none: both)")
    args = parser.parse_args()
    for name in args.names:
        if name not in MODELS_SHOWN:
            parser.error(f"{name}: unknown model; known: {', '.join(MODELS_SHOWN)}")
    key = lambda r: (r["model"], r["folding"])
    rows = {key(r): {OLD_KEYS.get(k, k): v for k, v in r.items()} for r in section_rows(SECTION)}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in [] if args.table_only else args.names or list(MODELS_SHOWN):
            for folding in args.folding or list(FOLDINGS):
                row = measure(name, folding, Path(tmp) / name / folding.strip("-").replace(" ", "_"), args.yosys)
                rows[key(row)] = row
                print(row, flush=True)
    for row in rows.values():            # rows kept from the file, or this run's
        row["what"] = MODELS_SHOWN[row["model"]][0]
        fmax = row.get("Fmax estimate", "-")
        if ": " in fmax:
            head, through = fmax.split(": ", 1)
            row["Fmax estimate"] = f"{head}: {_short_path(through.rstrip(')'))})"
    keys = list(dict.fromkeys(k for r in rows.values() for k in r))
    order = [(n, f) for n in MODELS_SHOWN for f in FOLDINGS]
    write_section(SECTION, INTRO.format(clock=CLOCK_MHZ),
                  [{k: rows[o].get(k, "-") for k in keys} for o in order if o in rows],
                  provenance=section_provenance(SECTION) if args.table_only else None)


if __name__ == "__main__":
    main()
