"""Models as people export them (issue 34): each compiled with ``--fit pynq-z2``, verified against qonnx on
a few inputs, and tabulated with its throughput and latency on the board.

    python -m benchmarks.user_models [NAME ...]

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


def main(names):
    rows = {r["model"]: r for r in section_rows(SECTION)}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names or CASES:
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
