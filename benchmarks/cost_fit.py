"""Fit the calibrated cost model (:mod:`rtlgen.costmodel`) to the Yosys corpus and report held-out errors.

    python -m benchmarks.cost_fit

Per variant (op type plus multiplier kind) and resource (LUT, FF): ``yosys ~ a * analytic + b`` with
a, b >= 0, least squares on the *relative* error (each record weighted by 1 / its Yosys count), on the
records whose index in the sorted corpus is not a multiple of 4; every 4th record is held out and only
used for the error table. A resource of a variant is calibrated only where that beats the analytic figure
in leave-one-out over the training records (else its coefficients are 1, 0). A variant needs MIN_RECORDS fitted records, else it stays analytic. LUT counts
include the LUTs Yosys uses as LUTRAM/SRL (Vivado's "Slice LUTs"). BRAM (BRAM18-equivalents) and DSP are
compared exactly. Writes ``rtlgen/data/cost_model.json`` and a section of BENCHMARKS.md; ship the model
file only when the calibrated held-out errors beat the analytic ones.
"""

import json

import numpy as np
from scipy.optimize import nnls

from benchmarks.cost_corpus import build, load
from benchmarks.tables import write_section
from rtlgen.costmodel import MODEL_PATH, variant

MIN_RECORDS = 4
HOLD_OUT_EVERY = 4


def _observations():
    """[(key, variant, analytic Resources, yosys dict)] for every corpus record."""
    rows = []
    for key, record in sorted(load().items()):
        spec, _ = build(record["op"], record["params"])
        y = record["yosys"]
        built = {"LUT": y["lut"] + record.get("lut_as_memory", 0), "FF": y["ff"],
                 "BRAM18": y["bram18"] + 2 * y["bram36"], "DSP": y["dsp"]}
        rows.append((key, variant(spec), spec.resource_estimate(), built))
    return rows


def fit(rows):
    model = {}
    for name in sorted({r[1] for r in rows}):
        train = [r for k, r in enumerate(rows) if r[1] == name and k % HOLD_OUT_EVERY]
        if len(train) < MIN_RECORDS:
            continue
        fitted = {}
        for resource in ("LUT", "FF"):
            x = np.array([float(r[2][resource]) for r in train])
            y = np.array([float(r[3][resource]) for r in train])
            # leave-one-out on the training records: calibrate only where it beats the analytic figure
            loo = [abs(_line(np.delete(x, k), np.delete(y, k)) @ [x[k], 1.0] - y[k]) / max(y[k], 1.0)
                   for k in range(len(x))]
            plain = np.abs(x - y) / np.maximum(y, 1.0)
            a, b = _line(x, y)
            fitted[resource] = [round(float(a), 4), round(float(b), 2)] if np.median(loo) < np.median(plain) \
                else [1.0, 0.0]
        if fitted != {"LUT": [1.0, 0.0], "FF": [1.0, 0.0]}:
            model[name] = fitted
    return model


def _line(x, y):
    """(a, b) >= 0 minimising the relative error of a * x + b against y."""
    weight = 1.0 / np.maximum(y, 1.0)
    coef, _ = nnls(np.stack([x * weight, weight], axis=1), y * weight)
    return coef


def _predict(model, name, analytic, resource):
    if name in model and resource in model[name]:
        a, b = model[name][resource]
        return a * analytic[resource] + b
    return float(analytic[resource])


def errors(rows, model):
    """Held-out relative errors per resource, analytic and calibrated; BRAM/DSP exact matches."""
    held = [r for k, r in enumerate(rows) if k % HOLD_OUT_EVERY == 0]
    table = []
    for resource in ("LUT", "FF"):
        for label, predict in (("analytic", lambda n, a, res: float(a[res])), ("calibrated", lambda n, a, res: _predict(model, n, a, res))):
            rel = np.array([abs(predict(n, a, resource) - y[resource]) / max(y[resource], 1) for _, n, a, y in held])
            table.append({"resource": resource, "model": label, "held-out configs": len(held),
                          "median |error|": f"{100 * np.median(rel):.1f} %" if len(rel) else "-",
                          "90th percentile": f"{100 * np.percentile(rel, 90):.1f} %" if len(rel) else "-"})
    for resource in ("BRAM18", "DSP"):
        exact = sum(1 for _, _, a, y in held if a[resource] == y[resource])
        table.append({"resource": resource + " (exact)", "model": "analytic", "held-out configs": len(held),
                      "median |error|": f"{exact} of {len(held)} exact", "90th percentile": "-"})
    return table


def main():
    rows = _observations()
    model = fit(rows)
    MODEL_PATH.parent.mkdir(parents=True, exist_ok=True)
    MODEL_PATH.write_text(json.dumps(model, indent=1, sort_keys=True) + "\n")
    counts = {}
    for _, name, _, _ in rows:
        counts[name] = counts.get(name, 0) + 1
    write_section("Cost model: held-out error against Yosys",
                  f"Corpus: {len(rows)} Yosys syntheses (`rtlgen/data/cost_corpus.json`, made by `python -m "
                  f"benchmarks.cost_corpus`), per variant: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
                  + f". Every {HOLD_OUT_EVERY}th record is held out of the fit. *analytic*: the layers' "
                  f"`resource_estimate()`; *calibrated*: `rtlgen.costmodel` (a * analytic + b per variant; "
                  f"fitted variants: {', '.join(sorted(model)) or 'none yet'}). LUT includes LUTRAM/SRL.",
                  errors(rows, model))
    print(json.dumps(model, indent=1))


if __name__ == "__main__":
    main()
