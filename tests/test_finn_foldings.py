"""FINN's own folding configs (examples/finn, from finn-examples) on FINN's BNN-PYNQ networks: bit-exact
against qonnx, FINN's cycles per frame, and where the compiler puts the weights."""

from pathlib import Path

import numpy as np
import pytest

from rtlgen import api
from rtlgen.backend.compile import COMPILE
from rtlgen.flows import Runner
from rtlgen.options import CompileOptions
from rtlgen.passes.place_memories import place_memories
from rtlgen.check.verify import verify_outputs

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
FOLDINGS = ROOT / "examples" / "finn"


def mnist(n):
    d = np.load(MODELS / "mnist_test_1000.npz")
    return (d["x"][:n].astype(np.float32) / 255).reshape(n, 1, 28, 28)


def cifar(n):
    """The one CIFAR-10 test image shipped, then its mirror images and shifts (real image statistics)."""
    x = np.load(MODELS / "cifar10_cifar10-test-data-class3.npz")["arr_0"][0].astype(np.float32)
    variants = [x, x[:, :, ::-1], x[:, ::-1, :], np.roll(x, 5, axis=2), np.roll(x, -7, axis=1)]
    return np.stack(variants[:n])


def check(design, x, cycles):
    """Bit-exact against qonnx, with and without random backpressure; FINN's II, measured."""
    from sim.harness import Backpressure
    run = design.simulate(x)
    assert verify_outputs(design.model, x, run.outputs, design.io).passed
    assert design.report["analytic_cycles_per_frame"] == cycles
    assert abs(run.cycles_per_frame - cycles) <= 0.02 * cycles
    stalled = design.simulate(x, backpressure=Backpressure(seed=3))
    assert np.array_equal(stalled.outputs, run.outputs)


@pytest.mark.sim
@pytest.mark.parametrize("name, folding", [pytest.param("TFC_1W1A", "tfc-w1a1", marks=pytest.mark.slow),   # CI
                                           ("TFC_2W2A", "tfc-w2a2")])                   # time (58 s): one of the two
def test_tfc_at_finn_folding(tmp_path, name, folding):
    folding = FOLDINGS / f"{folding}.json"
    design = api.compile(MODELS / f"{name}.onnx", tmp_path / "out", folding=str(folding))
    # FINN's figure for this folding (examples/finn/README.md): 64 cycles per frame
    check(design, mnist(12), 64)


@pytest.mark.slow
# FINN's cycles per frame, by hand from each folding (MW/SIMD * MH/PE * OH*OW of the slowest layer):
# w1a1: MVAU_6 256x512 SIMD 4 PE 1 and MVAU_7 512x512 SIMD 8 PE 1 -> 32,768;
# w2a2: the 4th conv 1152x128 SIMD 16 PE 8 on 10x10 pixels -> 72 * 16 * 100 = 115,200
@pytest.mark.parametrize("name, folding, cycles", [("cnv_1w1a", "cnv-w1a1", 32768), ("cnv_2w2a", "cnv-w2a2", 115200)])
def test_cnv_at_finn_folding(tmp_path, name, folding, cycles):
    folding = FOLDINGS / f"{folding}.json"
    design = api.compile(MODELS / f"{name}_ts_clean.onnx", tmp_path / "out", folding=str(folding))
    check(design, cifar(3), cycles)


def test_place_memories_moves_shallow_weights_to_free_bram(tmp_path):
    """CNV-w1a1 at FINN's folding: MVAU_1's weights (36 words of 1,024 bits) would be LUT ROM under
    ram_style auto; with BRAM free they move to block RAM, and stay in LUTs when the BRAM cap is tiny."""
    # the passes up to the stitched graph, not its Verilog (CI time: converting CNV costs ~40 s)
    graph = Runner().run(COMPILE, MODELS / "cnv_1w1a_ts_clean.onnx",
                         CompileOptions(folding=str(FOLDINGS / "cnv-w1a1.json"), fifo_sizing="none"),
                         stop="insert_fifos")
    mvau1 = next(n for n in graph.nodes if n.name == "MVAU_1")
    assert mvau1.spec().wmem == 36 and mvau1.spec().weight_width == 1024
    assert mvau1.spec().weight_ram_style == "block"
    assert mvau1.spec().mem_mode == "internal_embedded"         # the compiler's default, read in place
    assert mvau1.spec().resource_estimate().bram18 == 29        # ceil(1024 / 36) RAMB18 at 512 x 36

    tight = CompileOptions(max_utilization=0.01)
    shallow = graph.copy()
    for node in shallow.nodes:
        node.folding.pop("ram_style", None)
    again = place_memories(shallow, tight)
    assert next(n for n in again.nodes if n.name == "MVAU_1").spec().weight_ram_style == "distributed"
    assert again is shallow         # nothing moved: the pass returns its input
    roomy = place_memories(shallow, CompileOptions())
    assert roomy is not shallow and next(n for n in roomy.nodes if n.name == "MVAU_1").folding["ram_style"] == "block"
    assert next(n for n in shallow.nodes if n.name == "MVAU_1").spec().weight_ram_style == "distributed"
