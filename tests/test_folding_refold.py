"""Issue 42 (known gap): a compile from a ``--fit`` design's own folding.json is that design. The optimizer
puts weights in LUTs where ``ram_style`` ``auto`` in a folding file would let ``place_memories`` move them to
free block RAM; folding.json now records where each memory is, and a layer's spec read back from the file
has the same cache key (so the same Verilog, and the layer and by-parts caches hit)."""

from pathlib import Path

from rtlgen.backend.compile import COMPILE
from rtlgen.backend.layer_verilog import _key
from rtlgen.flows import Runner
from rtlgen.options import CompileOptions
from rtlgen.passes.fold import write_folding_config
from rtlgen.passes.place_memories import place_memories

MODELS = Path(__file__).parent / "models"


def _compile_to_memories(options):
    """(the fold pass's graph: what OUT/folding.json is written from, the graph after place_memories)."""
    runner = Runner(say=lambda *_: None)
    placed = runner.run(COMPILE, MODELS / "small_cnn.onnx", options, stop="place_memories")
    return runner.results["fold"], placed


def test_a_compile_from_a_fit_designs_folding_json_is_the_same_design(tmp_path):
    fitted, design = _compile_to_memories(CompileOptions(fit="pynq-z2"))
    in_luts = [n.name for n in design.nodes if getattr(n.spec(), "weight_ram_style", None) == "distributed"]
    # the case: weights the optimizer left in LUTs that place_memories moves to block RAM under auto
    as_auto = design.copy()
    for node in as_auto.nodes:
        if node.name in in_luts:
            node.folding["ram_style"] = "auto"
    as_auto.optimizer = None
    moved = [n.name for n in place_memories(as_auto, CompileOptions()).nodes
             if n.name in in_luts and n.spec().weight_ram_style == "block"]
    assert moved, in_luts

    folding = tmp_path / "folding.json"
    written = write_folding_config(fitted.nodes, folding)
    assert all(written[name]["ram_style"] == "distributed" for name in in_luts)
    _, again = _compile_to_memories(CompileOptions(folding=str(folding)))
    assert [n.name for n in again.nodes] == [n.name for n in design.nodes]
    for a, b in zip(design.nodes, again.nodes):
        assert _key(a, a.spec()) == _key(b, b.spec()), a.name
