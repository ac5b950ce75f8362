"""Resources (Yosys synth_xilinx, xc7) of the foundation components, and simulator speed.

    python -m benchmarks.foundation
"""

import time

import numpy as np

from benchmarks.tables import write_section
from boards.yosys import synthesize
from layers.dwc import DWCSpec, StreamingDataWidthConverter
from layers.fifo import FIFOSpec, StreamingFIFO
from memstream import MemStream, MemStreamSpec
from sim.harness import FULL_RATE, simulate_streams
from sim.runner import available_simulators

CASES = [
    ("FIFO 64b x 16 (SRL)", lambda: StreamingFIFO(FIFOSpec(64, 16))),
    ("FIFO 64b x 32 (SRL)", lambda: StreamingFIFO(FIFOSpec(64, 32))),
    ("FIFO 64b x 512 auto", lambda: StreamingFIFO(FIFOSpec(64, 512))),
    ("FIFO 64b x 512 distributed", lambda: StreamingFIFO(FIFOSpec(64, 512, "distributed"))),
    ("FIFO 64b x 512 block", lambda: StreamingFIFO(FIFOSpec(64, 512, "block"))),
    ("FIFO 8b x 4096 block", lambda: StreamingFIFO(FIFOSpec(8, 4096, "block"))),
    ("DWC 6->4", lambda: StreamingDataWidthConverter(DWCSpec((1, 24), 6, 4, "INT2"))),
    ("DWC 49->16", lambda: StreamingDataWidthConverter(DWCSpec((1, 784), 49, 16))),
    ("DWC 16->49", lambda: StreamingDataWidthConverter(DWCSpec((1, 784), 16, 49))),
    ("DWC 512->8", lambda: StreamingDataWidthConverter(DWCSpec((1, 512), 512, 8, "BINARY"))),
    ("DWC 8->64", lambda: StreamingDataWidthConverter(DWCSpec((1, 512), 8, 64, "BINARY"))),
    ("memstream 1024 x 36 block", lambda: MemStream(MemStreamSpec(1024, 36, tuple(range(1024)), "block"))),
    ("memstream 1024 x 36 block + AXI-Lite", lambda: MemStream(MemStreamSpec(1024, 36, tuple(range(1024)), "block", True))),
    ("memstream 64 x 128 distributed", lambda: MemStream(MemStreamSpec(64, 128, tuple(range(64)), "distributed"))),
]


def resources():
    rows = []
    for name, make in CASES:
        r = synthesize(make(), sta=True)
        rows.append({"component": name, "LUT": r.lut, "FF": r.ff, "LUTRAM": r.lutram, "SRL": r.srl,
                     "BRAM36": r.bram36, "BRAM18": r.bram18, "sta ns": r.critical_path_ns, "yosys s": round(r.seconds, 1)})
        print(rows[-1], flush=True)
    write_section("Foundation components: Yosys resources",
                  "Yosys 0.70 `synth_xilinx -family xc7 -flatten`, cell counts; `sta ns` is the cell-delay-only "
                  "critical path (no routing), a lower bound.", rows)


def sim_speed():
    rows = []
    words = [int(w) for w in np.random.default_rng(0).integers(0, 1 << 62, 20000)]
    for simulator in available_simulators():
        spec = FIFOSpec(64, 512)
        simulate_streams(StreamingFIFO(spec), inputs={"i": words[:10]}, outputs={"o": 10}, simulator=simulator)
        start = time.perf_counter()
        result = simulate_streams(StreamingFIFO(spec), inputs={"i": words}, outputs={"o": len(words)},
                                  backpressure=FULL_RATE, simulator=simulator)
        seconds = time.perf_counter() - start
        rows.append({"simulator": simulator, "design": "FIFO 64b x 512", "cycles": result.cycles,
                     "seconds (incl. start-up)": round(seconds, 2), "cycles/s": int(result.cycles / seconds)})
        print(rows[-1], flush=True)
    write_section("Simulation speed (cocotb stream bench)",
                  "20,000 words through a FIFO with the per-cycle Python driver and monitor, build cached.", rows)


if __name__ == "__main__":
    resources()
    sim_speed()
