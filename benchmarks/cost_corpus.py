"""The cost model's corpus: Yosys syntheses of layer configurations that span the ops and the foldings the
folding optimizer can choose, kept as data (``rtlgen/data/cost_corpus.json``) so that the fit in
:mod:`rtlgen.costmodel` is reproducible without Yosys.

    python -m benchmarks.cost_corpus [--jobs N] [--only OP]     # synthesizes what is missing (resumable)
    python -m benchmarks.cost_corpus --cluster tcp://HOST:8786   # the syntheses on a Dask cluster
    python -m benchmarks.cost_corpus --redo-registered          # the records a datapath change made stale

Each configuration is drawn deterministically (fixed seeds) from a grid per op; a record holds the op, the
spec's parameters (JSON), the Yosys cell counts (``synth_xilinx -flatten``) and the Yosys run time.
Records already in the file are kept, so an interrupted run continues where it stopped.
"""

import argparse
import json
import random
from pathlib import Path

import numpy as np
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from rtlgen.backend import jobs

CORPUS = Path(__file__).resolve().parent.parent / "rtlgen" / "data" / "cost_corpus.json"
# (input, weight, output) datatypes and thresholds per output channel; None: no activation
MAC_TYPES = [("BIPOLAR", "BIPOLAR", "BIPOLAR", 1), ("UINT2", "INT2", "UINT2", 3), ("UINT4", "INT4", "UINT4", 15),
             ("UINT4", "INT2", "UINT4", 15), ("INT8", "INT8", None, 0), ("UINT8", "INT8", "UINT8", 255)]
SHAPES = [(64, 64), (256, 64), (576, 64), (784, 64), (288, 32), (512, 128), (1152, 128), (100, 256)]


def _divisors(n, limit):
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def configurations():
    """[(key, op, params)]: the corpus, deterministic."""
    rng = random.Random(2026)
    configs = []
    for k in range(64):
        mw, mh = rng.choice(SHAPES)
        idt, wdt, odt, steps = rng.choice(MAC_TYPES)
        bits = DataType[idt].bitwidth() * DataType[wdt].bitwidth()
        res_type = rng.choice(["lut", "dsp"]) if bits >= 16 else "lut"
        # MACs: keeps a Yosys run within a minute or two (8x8-bit multipliers in LUTs are the slow ones)
        budget = 2048 if bits == 1 else 256 if bits <= 8 else 64 if res_type == "dsp" else 16
        simd = rng.choice([d for d in _divisors(mw, 64) if d <= budget])
        pe = rng.choice([d for d in _divisors(mh, 32) if d * simd <= budget] or [1])
        params = dict(mw=mw, mh=mh, simd=simd, pe=pe, idt=idt, wdt=wdt, odt=odt, steps=steps,
                      mem_mode=rng.choice(["internal_embedded", "internal_decoupled"]), res_type=res_type,
                      ram_style=rng.choice(["auto", "auto", "distributed", "block"]))
        configs.append(("MVAU", params))
    for k in range(12):
        channels = rng.choice([32, 64, 128, 256])
        idt, odt, steps = rng.choice([("INT16", "UINT4", 15), ("INT12", "UINT2", 3), ("INT16", "UINT8", 255),
                                      ("INT10", "BIPOLAR", 1)])
        configs.append(("Thresholding", dict(channels=channels, pe=rng.choice(_divisors(channels, 16)), idt=idt,
                                             odt=odt, steps=steps)))
    for k in range(10):
        channels = rng.choice([32, 64, 128])
        configs.append(("VVAU", dict(channels=channels, kernel=3, dim=rng.choice([8, 16]),
                                     pe=rng.choice(_divisors(channels, 16)), simd=rng.choice([1, 3, 9]),
                                     idt="UINT4", wdt=rng.choice(["INT4", "INT2"]), odt="UINT4", steps=15,
                                     mem_mode=rng.choice(["internal_embedded", "internal_decoupled"]))))
    for k in range(10):
        channels, parallel = rng.choice([32, 64, 128]), rng.random() < 0.3
        configs.append(("ConvolutionInputGenerator", dict(dim=rng.choice([8, 16, 32]), channels=channels,
                                                          simd=channels if parallel else rng.choice(_divisors(channels, 64)),
                                                          dtype=rng.choice(["UINT2", "UINT4", "BIPOLAR"]),
                                                          parallel=parallel)))
    for k in range(12):
        configs.append(("StreamingFIFO", dict(width=rng.choice([8, 16, 32, 64, 128, 256]),
                                              depth=rng.choice([2, 8, 32, 64, 256, 1024, 4096]),
                                              ram_style=rng.choice(["auto", "auto", "distributed", "block"]))))
    for k in range(10):
        elems = rng.choice([64, 128, 576])
        a, b = rng.sample([d for d in _divisors(elems, 64)], 2)
        bits = rng.choice([1, 2, 4])
        configs.append(("StreamingDataWidthConverter", dict(elems=elems, in_elems=a, out_elems=b, bits=bits)))
    # signed x signed low-bit MACs (FINN's w2a2 networks: offset operands, layers/mvau.py), drawn apart so
    # that the draws above, and the keys of their records, stay as they were
    rng = random.Random(2027)
    for k in range(8):
        mw, mh = rng.choice(SHAPES)
        simd = rng.choice([d for d in _divisors(mw, 64) if d <= 64])
        pe = rng.choice([d for d in _divisors(mh, 32) if d * simd <= 256] or [1])
        configs.append(("MVAU", dict(mw=mw, mh=mh, simd=simd, pe=pe, idt="INT2", wdt="INT2", odt="INT2", steps=3,
                                     mem_mode=rng.choice(["internal_embedded", "internal_decoupled"]),
                                     res_type="lut", ram_style=rng.choice(["auto", "distributed", "block"]))))
    configs += _issue33_configurations()
    return [(_key(op, params), op, params) for op, params in configs]


def _issue33_configurations():
    """The MVAU datapaths of issue 33 (drawn apart, after the rest, so that earlier keys stay): shapes of
    CNV-w1a1 (binary, UINT8 x BIPOLAR), the INT8 generator (UINT8/INT8 x INT8, requantizers) and the jet
    tagger (6-bit, constant weights at full unroll, pipeline latency). Each entry: (mw, mh, simd, pe, idt,
    wdt, odt, steps, extra params); mem_mode, res_type lut and ram_style auto unless extra says."""
    rng = random.Random(2028)
    xnor = ("BIPOLAR", "BIPOLAR", "BIPOLAR", 1)
    int8 = ("UINT8", "INT8", "UINT8", 255)
    jet = ("UINT6", "INT6", "UINT6", 63)
    table = [
        # popcount="heap": XNOR terms behind block RAM or the decoupled stream, registered agreement bits
        # (weights_in_xnor), constant weights
        (576, 64, 32, 16, *xnor, dict(popcount="heap", mem_mode="internal_decoupled", ram_style="block")),
        (1152, 128, 64, 16, *xnor, dict(popcount="heap", mem_mode="internal_embedded", ram_style="block")),
        (2304, 256, 64, 8, *xnor, dict(popcount="heap", mem_mode="internal_decoupled")),
        (288, 64, 32, 32, *xnor, dict(popcount="heap", mem_mode="internal_embedded", ram_style="distributed")),
        (256, 64, 32, 16, *xnor, dict(popcount="heap", mem_mode="internal_embedded", ram_style="distributed")),
        (128, 16, 128, 16, *xnor, dict(popcount="heap", mem_mode="internal_embedded")),
        # weights_in_xnor with the adder tree: 5-32 word LUT ROMs
        (576, 64, 64, 32, *xnor, dict(mem_mode="internal_embedded", ram_style="distributed")),
        (256, 64, 32, 16, *xnor, dict(mem_mode="internal_embedded", ram_style="distributed")),
        (288, 64, 48, 16, *xnor, dict(mem_mode="internal_embedded")),
        (64, 64, 8, 16, *xnor, dict(mem_mode="internal_embedded", ram_style="distributed")),
        # selects_bipolar_weights: CNV-w1a1's first layer (UINT8 pixels x BIPOLAR), and narrower inputs
        (27, 64, 27, 8, "UINT8", "BIPOLAR", "BIPOLAR", 1, {}),
        (27, 64, 9, 16, "UINT8", "BIPOLAR", "BIPOLAR", 1, {}),
        (27, 64, 3, 32, "UINT8", "BIPOLAR", "BIPOLAR", 1, dict(mem_mode="internal_embedded")),
        (256, 64, 16, 4, "UINT4", "BIPOLAR", "UINT4", 15, {}),
        # shared_activation: the generator's layers (requantizers, DSP lanes), and a shared threshold search
        (100, 256, 4, 2, "INT8", "INT8", "UINT8", 255, dict(res_type="dsp", act="requant", shared_activation=True)),
        (256, 128, 4, 8, *int8, dict(res_type="dsp", act="requant", shared_activation=True)),
        (512, 112, 4, 28, "UINT8", "INT8", "INT8", 255, dict(res_type="dsp", act="requant", shared_activation=True)),
        (256, 64, 1, 16, *int8, dict(res_type="dsp", act="requant", shared_activation=True)),
        (100, 256, 2, 4, *int8, dict(act="requant", shared_activation=True)),
        (64, 64, 4, 16, "UINT4", "INT4", "UINT4", 15, dict(shared_activation=True)),
        (256, 128, 8, 4, *int8, dict(res_type="dsp", act="requant")),     # the requantizer unshared
        # csd_products: the jet tagger's layers at full unroll (75 % pruned), a dense one, no activation
        (16, 16, 16, 16, "INT16", "INT6", "UINT6", 63, dict(pipeline="latency", act="requant", prune=0.75)),
        (16, 32, 16, 32, "INT16", "INT6", None, 0, dict(pipeline="latency", prune=0.75)),
        (64, 8, 64, 8, *jet, dict(pipeline="latency", act="requant", prune=0.75)),
        (64, 16, 64, 16, "UINT6", "INT6", None, 0, dict(pipeline="latency", prune=0.75)),
        (32, 5, 32, 5, "UINT6", "INT6", None, 0, dict(pipeline="latency", prune=0.75)),
        (32, 8, 32, 8, *jet, dict(pipeline="latency", act="requant")),
        # constant weights without csd (pipeline throughput, XNOR lanes)
        (64, 32, 64, 32, *xnor, dict(mem_mode="internal_embedded")),
        (32, 8, 32, 8, "UINT4", "INT4", "UINT4", 15, dict(mem_mode="internal_embedded")),
        (64, 16, 64, 16, "UINT2", "INT2", "UINT2", 3, dict(mem_mode="internal_embedded", prune=0.5)),
        # weight_lut_bits: the top bits of a block ROM's word as LUT ROM
        (576, 64, 32, 8, *xnor, dict(mem_mode="internal_embedded", ram_style="block", weight_lut_bits=40)),
        (512, 128, 8, 8, "UINT4", "INT4", "UINT4", 15, dict(ram_style="block", weight_lut_bits=28)),
        (576, 64, 16, 8, "UINT2", "INT2", "UINT2", 3, dict(ram_style="block", weight_lut_bits=40)),
    ]
    configs = []
    for mw, mh, simd, pe, idt, wdt, odt, steps, extra in table:
        params = dict(mw=mw, mh=mh, simd=simd, pe=pe, idt=idt, wdt=wdt, odt=odt, steps=steps,
                      mem_mode=rng.choice(["internal_embedded", "internal_decoupled"]), res_type="lut",
                      ram_style="auto")
        params.update(extra)
        if simd == mw and pe == mh:     # constant weights: one word, embedded
            params["mem_mode"] = "internal_embedded"
        configs.append(("MVAU", params))
    return configs


def _key(op, params):
    return op + " " + " ".join(f"{k}={v}" for k, v in sorted(params.items()))


def build(op, params):
    """(spec, component) of one configuration (random weights and thresholds, fixed seeds)."""
    if op in ("MVAU", "VVAU"):
        return _dot(op, params)
    if op == "Thresholding":
        from layers.thresholding import Thresholding, ThresholdingSpec
        lo, hi = int(DataType[params["idt"]].min()), int(DataType[params["idt"]].max())
        thr = _thresholds(lo, hi, params["channels"], params["steps"])
        spec = ThresholdingSpec(params["channels"], params["pe"], DataType[params["idt"]], DataType[params["odt"]],
                                thr)
        return spec, Thresholding(spec)
    if op == "ConvolutionInputGenerator":
        from swg import ConvolutionInputGenerator, SWGSpec
        spec = SWGSpec((params["dim"], params["dim"]), params["channels"], (3, 3), params["dtype"],
                       simd=params["simd"], parallel_window=params["parallel"])
        return spec, ConvolutionInputGenerator(spec)
    if op == "StreamingFIFO":
        from layers.fifo import FIFOSpec, StreamingFIFO
        spec = FIFOSpec(params["width"], params["depth"], params["ram_style"])
        return spec, StreamingFIFO(spec)
    if op == "StreamingDataWidthConverter":
        from layers.dwc import DWCSpec, StreamingDataWidthConverter
        dtype = {1: "BINARY", 2: "UINT2", 4: "UINT4"}[params["bits"]]
        spec = DWCSpec((1, params["elems"]), params["in_elems"] * params["bits"], params["out_elems"] * params["bits"],
                       DataType[dtype])
        return spec, StreamingDataWidthConverter(spec)
    raise ValueError(f"unknown op {op}")


def _thresholds(lo, hi, rows, steps, seed=0):
    return np.sort(np.random.default_rng(seed).integers(lo, hi + 2, size=(rows, steps)), axis=1)


def _affine_thresholds(lo, hi, rows, qmin, steps, seed=0):
    """Thresholds of a float32 per-channel scale and bias, then a quantizer's rounding and clip (what an INT8
    network's layer runs between its accumulator and its output codes): they have an exact requantizer."""
    from rtlgen.passes.thresholds import derive_thresholds
    rng = np.random.default_rng(seed)
    scale = np.float32(steps * 0.1 / ((hi - lo) * rng.uniform(0.2, 0.6, size=rows)))
    bias = np.float32(rng.normal(0, 3, size=rows))

    def codes(acc):
        y = np.asarray(acc, dtype=np.float32) * scale + bias
        return np.clip(np.round(y / np.float32(0.1)), qmin, qmin + steps).astype(np.int64)
    return derive_thresholds(codes, lo, hi, rows, qmin, steps)


def _dot(op, p):
    from layers.mvau import MVAU, MVAUSpec
    from layers.vvau import VVAU, VVAUSpec
    np.random.seed(0)
    idt, wdt = DataType[p["idt"]], DataType[p["wdt"]]
    common = dict(mem_mode=p["mem_mode"])
    if op == "MVAU":
        w = gen_finn_dt_tensor(wdt, (p["mw"], p["mh"])).astype(np.int64)
        if p.get("prune"):      # the jet tagger's pruned weights: this fraction zero
            w[np.random.default_rng(1).random(w.shape) < p["prune"]] = 0
        # the datapath choices of issue 33, in a record's params only where not the default
        common.update({k: p[k] for k in ("popcount", "shared_activation", "pipeline", "weight_lut_bits") if k in p})
        make = lambda **kw: MVAUSpec(p["mw"], p["mh"], p["simd"], p["pe"], idt, wdt, w, res_type=p["res_type"],
                                     ram_style=p["ram_style"], **common, **kw)
        component = MVAU
    else:
        w = gen_finn_dt_tensor(wdt, (p["channels"], 1, p["kernel"], p["kernel"])).astype(np.int64)
        make = lambda **kw: VVAUSpec(p["channels"], (p["kernel"],) * 2, (p["dim"],) * 2, p["pe"], p["simd"], idt,
                                     wdt, w, **common, **kw)
        component = VVAU
    spec = make()
    if p.get("odt"):
        lo, hi = spec.acc_range()
        odt = DataType[p["odt"]]
        act_val = 0 if spec.xnor or not odt.signed() or odt.name == "BIPOLAR" else int(odt.min())    # INT2 -2
        rows = spec.mh if op == "MVAU" else p["channels"]
        if p.get("act") == "requant":       # an INT8 network's affine activation: a requantizer
            spec = make(thresholds=_affine_thresholds(lo, hi, rows, act_val, p["steps"]), output_dtype=odt,
                        act_val=act_val, activation_style="requant")
        else:
            spec = make(thresholds=_thresholds(lo, hi, rows, p["steps"]), output_dtype=odt, act_val=act_val)
    return spec, component(spec)


def _synthesize(config):
    return synthesize_one(*config)


def synthesize_one(key, op, params):
    from boards.yosys import synthesize
    spec, component = build(op, params)
    report = synthesize(component)
    row = report.as_row()
    return key, {"op": op, "params": params, "exp_cycles": spec.exp_cycles,
                 "yosys": {k: row[k] for k in ("lut", "ff", "bram36", "bram18", "dsp", "lutram", "srl", "carry")},
                 "lut_as_memory": report.lut_as_memory, "seconds": row["seconds"]}


def _registered(spec):
    return spec.product_rows > 1 or spec.registers_operands or spec.dsp_packing is not None


def load():
    return json.loads(CORPUS.read_text()) if CORPUS.exists() else {}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--cluster", metavar="ADDRESS", help="synthesize on the Dask scheduler at ADDRESS "
                        "(rtlgen.backend.jobs; default: $RTLGEN_CLUSTER, else --jobs processes here)")
    parser.add_argument("--only", help="one op type")
    parser.add_argument("--redo-registered", action="store_true",
                        help="synthesize again the MVAU records whose datapath gained registers on 2026-11-24 "
                             "(operands behind block RAM, fabric products as rows, split DSP lanes)")
    parser.add_argument("--issue33", action="store_true",
                        help="only the draws of issue 33's MVAU datapaths (heap popcount, weights in the XNOR, "
                             "bipolar weights selecting, shared activations, CSD and constant weights, "
                             "weight_lut_bits)")
    args = parser.parse_args(argv)
    corpus = load()
    todo = [c for c in configurations() if c[0] not in corpus and (args.only is None or c[1] == args.only)]
    if args.issue33:
        keys = {_key(op, params) for op, params in _issue33_configurations()}
        todo = [c for c in todo if c[0] in keys]
    if args.redo_registered:
        todo = [c for c in configurations() if c[0] in corpus and c[1] == "MVAU" and _registered(build(*c[1:])[0])]
    print(f"{len(corpus)} records, {len(todo)} to synthesize", flush=True)
    for _, (key, record) in jobs.completed(_synthesize, todo, jobs=args.jobs, cluster=args.cluster):
        corpus[key] = record
        CORPUS.parent.mkdir(parents=True, exist_ok=True)
        CORPUS.write_text(json.dumps(dict(sorted(corpus.items())), indent=1) + "\n")
        print(f"{record['seconds']:6.1f} s  {key}: {record['yosys']}", flush=True)


if __name__ == "__main__":
    main()
