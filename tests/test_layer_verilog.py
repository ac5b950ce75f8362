"""Each layer's Verilog (rtlgen/backend/layer_verilog.py): identical layers convert once, and the text a
node gets is the one a conversion under its own name gives."""

from rtlgen.backend import layer_verilog
from rtlgen.ir.graph import HWNode


def _fifo(name, width, depth):
    return HWNode(name, "StreamingFIFO", {"width": width}, {"depth": depth}, inputs=(f"{name}_in",),
                  outputs=(f"{name}_out",))


def test_identical_layers_convert_once_under_each_name(tmp_path, monkeypatch):
    monkeypatch.setenv("RTLGEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(layer_verilog, "_MEMORY", {})
    converted = []
    convert = layer_verilog._convert
    monkeypatch.setattr(layer_verilog, "_convert", lambda job: converted.append(job[0].name) or convert(job))
    nodes = [_fifo("StreamingFIFO_2", 8, 32), _fifo("StreamingFIFO_4", 8, 32), _fifo("StreamingFIFO_5", 6, 32)]
    modules = layer_verilog.layer_modules(nodes, [n.spec() for n in nodes], prefix="top")

    assert len(converted) == 2          # FIFO_2 and FIFO_4 are one layer
    assert [m.name for m in modules] == ["top.StreamingFIFO_2", "top.StreamingFIFO_4", "top.StreamingFIFO_5"]
    for node, module in zip(nodes, modules):
        assert "placeholder" not in module.text
        assert module.text == layer_verilog.convert(node.component(), f"top.{node.name}")
    assert modules[0].ports == modules[1].ports != modules[2].ports

    # read back from the disk cache (a new process): nothing converted, the same texts
    monkeypatch.setattr(layer_verilog, "_MEMORY", {})
    again = layer_verilog.layer_modules(nodes, [n.spec() for n in nodes], prefix="other")
    assert len(converted) == 2
    assert [m.text for m in again] == [m.text.replace("top.", "other.") for m in modules]
