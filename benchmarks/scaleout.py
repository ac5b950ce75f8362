"""Scale-out across PYNQ-Z2 boards (Galapagos): frames/s against the number of devices, simulated.

    python -m benchmarks.scaleout [--only NAME ...] [--devices 1 2 4 8] [--yosys]

For each network and device count: `rtlgen partition` under the PYNQ-Z2 budget per device (80 % of
the xc7z020, the compiler's default), 1 Gbit/s Ethernet links (the host's too), 64-bit flits; each
device's Galapagos kernel built (its layers stitched, FIFOs sized by simulation, the bridges); the
cluster simulated on Verilator with the link model of :mod:`galapagos.link` (500 cycles of latency,
Ethernet/IP/UDP header time per packet), bit-exact against qonnx; the steady-state cycles per frame
measured at the host's receiving end. What binds: the link or the slowest device's resource. The
same partition with 10 Gbit/s links is planned (not simulated) for comparison. ``--yosys``
synthesizes every device's kernel (accelerator and bridges, out of context: there is no Galapagos
network shell for the PYNQ-Z2) and checks it fits the xc7z020.
"""

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks.tables import section_rows, write_section
from rtlgen.backend import scaleout
from rtlgen.options import CompileOptions
from rtlgen.passes.load import load_model
from rtlgen.passes.lower import lower
from rtlgen.fit import Budget
from rtlgen.backend.scaleout import write_plan
from rtlgen.passes.partition import PartitionError, partition
from rtlgen.check.verify import verify_outputs
from sim.outdir import OutDir

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
SCALING = "Scale-out: frames/s against PYNQ-Z2 boards (Galapagos, simulated)"
DEVICES_TABLE = "Scale-out: each device's kernel by Yosys"
XC7Z020 = {"LUT": 53_200, "FF": 106_400, "BRAM36": 140, "DSP": 220}


def cifar(n):
    x = np.load(MODELS / "cifar10_cifar10-test-data-class3.npz")["arr_0"][0].astype(np.float32)
    variants = [x, x[:, :, ::-1], x[:, ::-1, :], np.roll(x, 5, axis=2), np.roll(x, -7, axis=1)]
    return np.stack(variants[:n])


def gan_inputs(n):
    return np.random.default_rng(1).uniform(-3.8, 3.8, size=(n, 100)).astype(np.float32)


NETWORKS = {    # model, inputs, frames simulated, clock MHz
    "CNV-w1a1": (MODELS / "cnv_1w1a_ts_clean.onnx", cifar, 3, 100.0),
    "INT8 generator MLP": (MODELS / "gen_mlp_int8.onnx", gan_inputs, 4, 200.0),
}


def measure(name, devices, work, yosys):
    model, data, frames, clock = NETWORKS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = lower(load_model(str(model)))
    budget = Budget.for_board("pynq-z2", 0.8)
    try:
        part = partition(graph, devices, budget, link_gbps=1.0, clock_mhz=clock)
    except PartitionError as exc:
        return {"network": name, "devices": devices, "used": "-", "plan II": "-", "measured cycles/frame": "-",
                "frames/s": "-", "bound by": str(exc).split(":")[0], "fullest device": "-",
                "link utilisation": "-", "II at 10 Gbit/s (plan)": "-", "partition s": "-"}, []
    fast = partition(graph, devices, budget, link_gbps=10.0, clock_mhz=clock)
    out = work / f"{name.replace(' ', '_')}-{devices}"
    write_plan(part, out)
    built, io = scaleout.build_devices(str(model), part, options=CompileOptions(clock_mhz=clock))
    scaleout.write_devices(built, io, out)
    x = data(frames)
    run = scaleout.simulate(out, x)
    comparison = verify_outputs(str(model), x, run.outputs, OutDir(out).read_io())
    assert comparison.passed, f"{name} on {devices}: {comparison.summary()}"
    used = [d for d in part.devices if d.nodes]
    fullest = max(used, key=lambda d: d.utilization)
    bound = part.bound_by if part.bound_by.startswith("link") else \
        f"{part.bound_by}; {fullest.binding} {100 * fullest.utilization:.0f} % on device {fullest.index}"
    row = {"network": name, "devices": devices, "used": len(used), "plan II": f"{part.ii:,}",
           "measured cycles/frame": f"{run.cycles_per_frame:,.1f}",
           "frames/s": f"{clock * 1e6 / run.cycles_per_frame:,.0f} @{clock:g} MHz", "bound by": bound,
           "fullest device": f"{fullest.binding} {100 * fullest.utilization:.0f} % (estimate)",
           "link utilisation": " / ".join(f"{100 * link.utilization:.0f} %" for link in run.links),
           "II at 10 Gbit/s (plan)": f"{fast.ii:,} ({fast.bound_by})", "partition s": f"{part.seconds:.1f}"}
    print(row, flush=True)
    rows = []
    if yosys:
        for result in scaleout.build_kernels(out, say=print, check=False):
            t = result["totals"]
            got = {"LUT": result["lut_including_memory"], "FF": t["ff"], "BRAM36": t["bram36"] + t["bram18"] / 2,
                   "DSP": t["dsp"]}
            plan = part.devices[result["index"]]
            share = {k: got[k] / XC7Z020[k] for k in got}
            rows.append({"network": name, "devices": devices, "device": result["index"],
                         "layers": ", ".join(plan.nodes), "II": f"{plan.cycles:,}",
                         **{k: f"{got[k]:,g} ({100 * share[k]:.0f} %)" for k in got},
                         "estimate LUT/BRAM36/DSP": f"{plan.resources['LUT']:,.0f} / {plan.resources['BRAM18'] / 2:g}"
                                                    f" / {plan.resources['DSP']:.0f}",
                         "fits": "yes" if result["fits"] else "NO", "Yosys s": f"{result['yosys_seconds']:.0f}"})
            print(rows[-1], flush=True)
    return row, rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", default=list(NETWORKS), choices=list(NETWORKS))
    parser.add_argument("--devices", nargs="*", type=int, default=[1, 2, 4, 8])
    parser.add_argument("--yosys", action="store_true", help="synthesize every device's kernel (slow)")
    args = parser.parse_args()
    measured = {(name, str(devices)) for name in args.only for devices in args.devices}
    keep = [r for r in section_rows(SCALING) if (r["network"], r["devices"]) not in measured]
    keep_devices = [r for r in section_rows(DEVICES_TABLE) if (r["network"], r["devices"]) not in measured]
    rows, device_rows = [], []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rtlgen-scaleout-") as tmp:
        for name in args.only:
            for devices in args.devices:
                row, more = measure(name, devices, Path(tmp), args.yosys)
                rows.append(row)
                device_rows += more
                write_section(SCALING, INTRO, _ordered(keep + rows))
                if device_rows:
                    write_section(DEVICES_TABLE, DEVICES_INTRO, _ordered(keep_devices + device_rows))
    print(f"done in {time.perf_counter() - start:.0f} s")


def _ordered(rows):
    order = list(NETWORKS)
    return sorted(rows, key=lambda r: (order.index(r["network"]) if r["network"] in order else len(order),
                                       int(r["devices"]), int(r.get("device", 0))))


INTRO = (__doc__.split("\n\n", 2)[2].strip() + "\n\n"
         "Columns: `devices` asked, `used` (the partitioner leaves a device empty when a cut would not lower "
         "the II); `plan II` the partition's cycles per frame (slowest layer, or a link's bound: whole "
         "64-bit flits plus 9 flit times of header per packet); `measured` the simulated steady state; "
         "`link utilisation` per link from the host to the host, measured; `fullest device` the estimate of "
         "the device closest to its budget. Rows that could not be partitioned give the reason.")
DEVICES_INTRO = ("Every device's Galapagos kernel (its layers with DWCs and FIFOs, FromGalapagos and ToGalapagos) "
                 "synthesized by Yosys `synth_xilinx` out of context, against the xc7z020; the estimate is the "
                 "partitioner's (layers, stitching, bridges). No Galapagos network shell exists for the PYNQ-Z2, "
                 "so the network core's resources are not included.")


if __name__ == "__main__":
    main()
