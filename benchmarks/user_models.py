"""Models as people export them: each compiled with ``--fit pynq-z2``, verified against qonnx on a few
inputs, and tabulated with its throughput and latency on the board. CASES (issue 34): exporters' quirks;
EXAMPLES (issue 46): FINN's and hls4ml's own examples (1-D, per-channel activations, linear layers without a
quantizer, deconvolution, large feature maps, channels-last), also at the default folding.

    python -m benchmarks.user_models [NAME ...]        (names of CASES or EXAMPLES; none: all)

The models are the project's test models (tests/models/...; each directory has the script that made it).
The FINN-dialect and channels-last ones are written here from those, as the tests write them.
"""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

from benchmarks.tables import section_rows, write_section

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
SECTION = "Models as people export them (--fit pynq-z2)"


def _images(shape, n=8, seed=1):
    return np.random.default_rng(seed).uniform(-2, 2, (n, *shape)).astype(np.float32)


def _channels_last(tmp):
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
    from qonnx.util.cleanup import cleanup_model
    model = cleanup_model(ModelWrapper(str(MODELS / "small_cnn.onnx")))
    path = Path(tmp) / "small_cnn_channels_last.onnx"
    model.transform(ConvertToChannelsLastAndClean(make_input_channels_last=False)).save(str(path))
    return path


def _finn_dialect(tmp):
    sys.path.insert(0, str(ROOT))
    from tests.test_finn_dialect import finn_cnn
    return finn_cnn(Path(tmp) / "finn_dialect_cnn.onnx")


# name: (model path or a function of a temporary directory, source, input shape, extra compile options)
CASES = {
    "resnet_identity": (MODELS / "residual_float" / "resnet_identity.onnx",
                        "Brevitas, float scales, shared quantizer", (1, 3, 8, 8), []),
    "resnet_conv_shortcut": (MODELS / "residual_float" / "resnet_conv_shortcut.onnx",
                             "Brevitas, float scales, 1x1 conv shortcut", (1, 3, 8, 8), []),
    "resnet_unshared": (MODELS / "residual_float" / "resnet_unshared.onnx",
                        "Brevitas, float scales, unshared quantizers", (1, 3, 8, 8), []),
    "resnet26_w4a4": (MODELS / "resnet26" / "resnet26_w4a4.onnx",
                      "Brevitas, 28 Conv, 12 Add, float scales", (1, 3, 32, 32), []),
    "jet_tagger": (MODELS / "jet_tagger" / "jet_tagger.onnx",
                   "QKeras-shaped (Brevitas), FIXED<16,6> input", (1, 16), ["--input-dtype", "FIXED<16,6>"]),
    "grouped_cnn": (MODELS / "grouped" / "grouped_cnn.onnx",
                    "Brevitas, groups=4 (x2 multiplier) and groups=2", (1, 4, 8, 8), []),
    "small_cnn_channels_last": (_channels_last, "qonnx ConvertToChannelsLastAndClean", (1, 1, 8, 8), []),
    "finn_dialect_cnn": (_finn_dialect, "FINN dialect: MultiThreshold -> Add -> Mul", (1, 1, 8, 8), []),
}

# FINN's and hls4ml's own examples as people export them (issue 46): name -> (model, source, extra options,
# inputs verified in RTL). The input shape is the model's own; inputs are a saved .npy beside the model when
# there is one (e.g. on a fixed-point grid), else uniform in [-2, 2).
ZOO = MODELS / "user_zoo"
EXAMPLES = {
    "vgg10_radioml": (ZOO / "vgg10_radioml.onnx", "finn-examples VGG10 (RadioML): Conv1d/BN1d/MaxPool1d, w4a4, "
                      "(1, 2, 1024)", [], 2),
    "mobilenet_v1_w4a4": (MODELS / "per_channel" / "mobilenet_v1_w4a4.onnx", "brevitas_examples "
                          "quant_mobilenet_v1_4b, 224x224, per-channel activations", ["--input-dtype", "UINT8"], 1),
    "tiny_mobilenet": (MODELS / "per_channel" / "tiny_mobilenet.onnx", "MobileNet-like, per-channel activations",
                       [], 8),
    "residual_per_channel": (MODELS / "per_channel" / "residual_per_channel.onnx", "residual Add of per-channel "
                             "quantizers", [], 8),
    "qkeras_dense": (MODELS / "no_act_quant" / "qkeras_dense.onnx", "QKeras-shaped QDense -> QDense, no "
                     "activation between, FIXED<16,6>", ["--input-dtype", "FIXED<16,6>"], 8),
    "brevitas_linear": (MODELS / "no_act_quant" / "brevitas_linear.onnx", "Brevitas QuantLinear -> QuantLinear, "
                        "no quantizer between", [], 8),
    "unet_head": (MODELS / "no_act_quant" / "unet_head.onnx", "conv head with a bias and no quantizer", [], 8),
    "nhwc_reshape": (ZOO / "nhwc_reshape.onnx", "QKeras' input reshape (1, 28, 28, 1) -> (1, 1, 28, 28)", [], 8),
    "deconv_s2k3": (MODELS / "deconv" / "deconv_s2k3.onnx", "Brevitas QuantConvTranspose2d k3 s2 p1 op1", [], 8),
    "deconv_s2k4": (MODELS / "deconv" / "deconv_s2k4.onnx", "Brevitas QuantConvTranspose2d k4 s2 p1, twice", [], 8),
    "espcn_128": (MODELS / "espcn" / "espcn_128.onnx", "super-resolution CNN like qonnx's ESPCN, 128x128, nearest "
                  "Resize", [], 1),
    "branched_cl_256": (ZOO / "branched_cl_256.onnx", "hls4ml-style branched CNN, channels-last, NHWC 256x256",
                        [], 1),
    "sepconv_cl_256": (ZOO / "sepconv_cl_256.onnx", "hls4ml-style separable convs, channels-last, NHWC 256x256",
                       [], 1),
    "unet_cl_512": (ZOO / "unet_cl_512.onnx", "hls4ml-style tiny U-Net, channels-last, NHWC 512x512", [], 1),
}
EXAMPLES_SECTION = "FINN's and hls4ml's examples as people export them (default and --fit pynq-z2)"


def _rtlgen(*args):
    run = subprocess.run([sys.executable, "-m", "rtlgen", *args], capture_output=True, text=True, cwd=ROOT)
    return run.returncode, run.stdout + run.stderr


def measure(name, tmp):
    model, source, shape, extra = CASES[name]
    path = model(tmp) if callable(model) else model
    out, x = Path(tmp) / name, Path(tmp) / f"{name}.npy"
    np.save(x, _images(shape))
    start = time.time()
    code, log = _rtlgen("compile", str(path), "-o", str(out), "--fit", "pynq-z2", "-q", *extra)
    seconds = time.time() - start
    if code != 0:
        return dict(model=name, source=source, compiles=f"no: {log.strip().splitlines()[-1][:80]}")
    report = json.loads((out / "report.json").read_text())
    code, log = _rtlgen("verify", str(out), "--input", str(x))
    verdict = next((line for line in log.splitlines() if line.startswith(("bit-exact", "equal", "MISMATCH"))), log[-80:])
    ops = sorted({layer["op_type"] for layer in report["layers"]} - {"StreamingFIFO", "StreamingDataWidthConverter"})
    totals = report["totals"]
    return {"model": name, "source": source, "hardware ops": ", ".join(ops),
            "compiles": f"yes ({seconds:.0f} s)", "verify (8 inputs)": verdict.split(":")[0],
            "frames/s": f"{report['frames_per_second']:,.0f}",
            "board frames/s": f"{report.get('board_frames_per_second', report['frames_per_second']):,.0f}",
            "latency": f"{report['latency_ns'] / 1000:,.1f} us",
            "LUT": f"{totals['LUT']:,}", "BRAM18": f"{totals['BRAM18']:,}", "DSP": f"{totals['DSP']:,}"}


def _example_inputs(path, n, tmp):
    saved = path.with_name(path.stem + "_inputs.npy")
    if saved.exists():
        x = np.load(saved)[:n]
    else:
        shape = [d.dim_value for d in onnx.load(str(path)).graph.input[0].type.tensor_type.shape.dim]
        x = _images(tuple(shape), n)
    where = Path(tmp) / f"{path.stem}_x.npy"
    np.save(where, x)
    return where


def _compile_row(path, out, extra):
    """(seconds, report or None, the last line of the log)."""
    start = time.time()
    code, log = _rtlgen("compile", str(path), "-o", str(out), "-q", *extra)
    seconds = time.time() - start
    last = log.strip().splitlines()[-1][:100] if log.strip() else ""
    if code != 0:
        return seconds, None, last
    return seconds, json.loads((out / "report.json").read_text()), last


def _percent(report, resource):
    used = report["fit"]["resources"][resource]
    return f"{used['used'] / used['available']:.0%}"


def measure_example(name, tmp):
    path, source, extra, n = EXAMPLES[name]
    row = {"model": name, "source": source}
    seconds, report, last = _compile_row(path, Path(tmp) / f"{name}_default", extra)
    if report is None:
        return {**row, "default": f"no: {last}"}
    fits = "fits" if report["fit"]["fits"] else "over: " + ", ".join(
        f"{k} {_percent(report, k)}" for k, v in report["fit"]["resources"].items() if v["used"] > v["available"])
    row["default"] = f"{report['frames_per_second']:,.0f} frames/s, LUT {_percent(report, 'LUT')}, {fits} " \
                     f"({seconds:.0f} s)"
    out = Path(tmp) / f"{name}_fit"
    seconds, report, last = _compile_row(path, out, [*extra, "--fit", "pynq-z2"])
    if report is None:
        return {**row, "--fit pynq-z2": f"no: {last}"}
    code, log = _rtlgen("verify", str(out), "--input", str(_example_inputs(path, n, tmp)))
    verdict = next((line for line in log.splitlines() if line.startswith(("bit-exact", "equal", "MISMATCH"))),
                   log.strip().splitlines()[-1][:100] if log.strip() else f"exit {code}")
    totals = report["totals"]
    return {**row, "--fit pynq-z2": f"yes ({seconds:.0f} s)", f"verify in RTL": f"{verdict.split(':')[0]} ({n})",
            "frames/s": f"{report['frames_per_second']:,.0f}",
            "board frames/s": f"{report.get('board_frames_per_second', report['frames_per_second']):,.0f}",
            "latency": f"{report['latency_ns'] / 1000:,.1f} us",
            "LUT": f"{totals['LUT']:,}", "FF": f"{totals['FF']:,}", "BRAM18": f"{totals['BRAM18']:,}",
            "DSP": f"{totals['DSP']:,}"}


def main_examples(names):
    rows = {r["model"]: r for r in section_rows(EXAMPLES_SECTION)}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            rows[name] = measure_example(name, tmp)
            print(rows[name], flush=True)
    keys = ["model", "source", "default", "--fit pynq-z2", "verify in RTL", "frames/s", "board frames/s", "latency",
            "LUT", "FF", "BRAM18", "DSP"]
    table = [{k: rows[n].get(k, "") for k in keys} for n in EXAMPLES if n in rows]
    write_section(EXAMPLES_SECTION, "Issue 46's families, each compiled at the default folding (FINN's SetFolding for 1,000 cycles per frame; \"over\": estimated over the board, the compile says so first and suggests --fit) "
                  "and with `--fit pynq-z2` at 100 MHz, then `rtlgen verify` of the `--fit` design in RTL (Verilator) "
                  "against qonnx's execute_onnx on the original model, on the number of inputs in brackets "
                  "(\"equal\": equal up to the float32 rounding of a float output). frames/s is the accelerator's "
                  "II at 100 MHz; board frames/s adds the zynq shell's DMA. Resources are the estimate "
                  "(Yosys figures for some of these designs are in the tables above).", table)


def main(names):
    examples = [n for n in names if n in EXAMPLES] if names else list(EXAMPLES)
    names = [n for n in names if n in CASES] if names else list(CASES)
    if names:
        _main_cases(names)
    if examples:
        main_examples(examples)


def _main_cases(names):
    rows = {r["model"]: r for r in section_rows(SECTION)}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            rows[name] = measure(name, tmp)
            print(rows[name], flush=True)
    keys = ["model", "source", "hardware ops", "compiles", "verify (8 inputs)", "frames/s", "board frames/s",
            "latency", "LUT", "BRAM18", "DSP"]
    table = [{k: rows[n].get(k, "") for k in keys} for n in CASES if n in rows]
    write_section(SECTION, "Each model compiled with `--fit pynq-z2` at 100 MHz (the folding optimizer's fastest "
                  "design within the board), then `rtlgen verify` on 8 random inputs against qonnx (\"equal\": "
                  "equal up to the float32 rounding of a float output). Resources are the estimate.", table)


if __name__ == "__main__":
    main(sys.argv[1:])
