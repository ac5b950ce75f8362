"""Board-level frames/s beside the accelerator's, for every design BENCHMARKS.md names: the accelerator's II
against the zynq shell's data movement (``boards.zynq_timing.shell_timing``: one 64-bit S_AXI_HP0 port, the DMA's
bursts, the DDR latency assumed), and the latency of one frame DDR to DDR. Analytic figures from the compiler's
passes (no Verilog is written); ``rtlgen sim OUT --input X.npy --shell zynq --json`` measures them
(tests/test_zynq_timing.py and tests/test_board_rate.py hold the model within 3 % and 10 % of the bench).

    python -m benchmarks.board [NAME ...]
"""

import sys
import time
from dataclasses import replace
import json
import tempfile
from pathlib import Path

from benchmarks.tables import write_section

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
FINN = ROOT / "examples" / "finn"

II_4_FOLDING = {"MVAU_0": {"PE": 32, "SIMD": 392}, "MVAU_1": {"PE": 16, "SIMD": 64},
                "MVAU_2": {"PE": 16, "SIMD": 64}, "MVAU_3": {"PE": 5, "SIMD": 32}}
DESIGNS = {     # name -> (model, options as CompileOptions fields, what the row says)
    "TFC-w1a1@1M": ("TFC_1W1A.onnx", {"target_fps": 1e6}, "--target-fps 1,000,000"),
    "TFC-w1a1@II4": ("TFC_1W1A.onnx", {"folding": "II4"}, "the II-4 folding the budget allows (MVAU_0 PE 32 SIMD 392)"),
    "TFC-w1a1-fit": ("TFC_1W1A.onnx", {"fit": "pynq-z2"}, "--fit pynq-z2"),
    "TFC-w2a2-fit": ("TFC_2W2A.onnx", {"fit": "pynq-z2"}, "--fit pynq-z2"),
    "TFC-w1a1-finn": ("TFC_1W1A.onnx", {"folding": str(FINN / "tfc-w1a1.json")}, "FINN's folding"),
    "TFC-w2a2-finn": ("TFC_2W2A.onnx", {"folding": str(FINN / "tfc-w2a2.json")}, "FINN's folding"),
    "CNV-w1a1-finn": ("cnv_1w1a_ts_clean.onnx", {"folding": str(FINN / "cnv-w1a1.json")}, "FINN's folding"),
    "CNV-w2a2-finn": ("cnv_2w2a_ts_clean.onnx", {"folding": str(FINN / "cnv-w2a2.json")}, "FINN's folding"),
    "CNV-w1a1-fit": ("cnv_1w1a_ts_clean.onnx", {"fit": "pynq-z2"}, "--fit pynq-z2"),
    "CNV-w1a1@3052": ("cnv_1w1a_ts_clean.onnx", {"fit": "pynq-z2", "target_fps": 3052}, "--fit pynq-z2 --target-fps 3052"),
    "CNV-w2a2-fit": ("cnv_2w2a_ts_clean.onnx", {"fit": "pynq-z2"}, "--fit pynq-z2"),
    "INT8-generator": ("gen_mlp_int8.onnx", {"folding": str(ROOT / "examples" / "gan" / "pynq_z2_folding.json"),
                                             "clock_mhz": 200.0}, "examples/gan folding, 200 MHz"),
    "digits-w1a1": ("digits_tfc_w1a1i1_clean.onnx", {}, "default folding"),
}


def figures(name):
    """The report's board figures for design ``name`` from the compiler's passes (no Verilog)."""
    from rtlgen.backend import compile as compile_flow
    from rtlgen.flows import Runner
    from rtlgen.analyses.board_rate import board_figures, graph_ports
    from rtlgen.analyses.timing import latency_cycles
    from rtlgen.passes.load import load_model

    model_name, fields, what = DESIGNS[name]
    if fields.get("folding") == "II4":
        path = Path(tempfile.mkdtemp()) / "folding.json"
        path.write_text(json.dumps(II_4_FOLDING))
        fields = dict(fields, folding=str(path))
    options = compile_flow.RoundOptions(**fields)
    options.check()
    start = time.perf_counter()
    runner = Runner()
    state = runner.run(compile_flow.COMPILE, str(MODELS / model_name), options, stop="insert_fifos")
    graphs = runner.results
    ii = max(n.spec().exp_cycles for n in state.nodes)
    in_width, out_width, in_words, out_words = graph_ports(graphs["fold"])
    pad = lambda width: -(-width // 8) * 8
    latency = latency_cycles(state)
    board = board_figures(ii=ii, latency=latency, clock_mhz=options.clock_mhz,
                          in_width=pad(in_width), out_width=pad(out_width), in_words=in_words,
                          out_words=out_words, dense_in_bits=in_words * in_width)
    chosen = graphs["fold"].optimizer
    shell = board["shell"]
    packing = shell["input_packing"]
    clock = options.clock_mhz * 1e6
    return {
        "design": name.split("@")[0].replace("-fit", "").replace("-finn", ""), "options": what,
        "MHz": f"{options.clock_mhz:g}", "II": f"{ii:,}", "accelerator fps": f"{clock / ii:,.0f}",
        "shell cycles/frame": f"{shell['cycles_per_frame']:,.4g}",
        "bytes in/out per frame": f"{shell['in_bytes_per_frame']:,} / {shell['out_bytes_per_frame']:,}",
        "board fps": f"{board['board_frames_per_second']:,.0f}", "I/O-bound": "yes" if board["io_bound"] else "no",
        "optimizer stopped at the I/O bound": (f"yes (budget allowed II {chosen.budget_ii:,})"
                                               if chosen is not None and chosen.io_bound else "-"),
        "latency (accelerator / DDR to DDR), cycles": f"{latency:,} / {board['board_latency_cycles']:,}",
        "dense input: board fps": ("-" if packing is None else
                                   f"{clock / max(packing['dense_cycles_per_frame'], 1e-9):,.0f} "
                                   f"({packing['dense_in_bits_per_frame']:,} bits)"),
        "s": f"{time.perf_counter() - start:.1f}",
    }


def main(names):
    rows = []
    for name in names or list(DESIGNS):
        row = figures(name)
        print(row, flush=True)
        rows.append(row)
    write_section(
        "Board: frames/s behind the zynq shell, beside the accelerator's",
        "Every design the tables above name, compiled as shown (`rtlgen compile`'s passes, no Verilog); *accelerator "
        "fps*: the clock over the II; *board fps*: the lower of that and the zynq shell's data movement "
        "(`report.json` `board_frames_per_second`: the accelerator's words as the shell packs them in DDR (1, 2, 4 "
        "or 8k bytes a word), over the one 64-bit S_AXI_HP0 port, bursts of 16 with up to 4 reads in flight and 4 "
        "writes awaiting their responses, an assumed DDR latency of 350 ns both ways); *latency*: one frame, "
        "the accelerator's from its first input word to its last output word, and DDR to DDR in the shell "
        "(`board_latency_cycles`: START to DONE of a one-frame batch). *optimizer stopped*: `--fit` builds the "
        "cheapest design at the shell's bound instead of the faster one the budget allows. *dense input*: the "
        "board rate if the host packed the input bits densely (not supported yet: the shell moves whole words). "
        "`rtlgen sim OUT --input X.npy --shell zynq --json` measures the board figures on the cocotb bench "
        "(TFC-w1a1 --fit: 14.22 cycles/frame measured against 14, latency 164 cycles against 165).",
        rows)


if __name__ == "__main__":
    main(sys.argv[1:])
