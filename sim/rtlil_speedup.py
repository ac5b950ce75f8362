"""Memory contents written to RTLIL as one constant, not one net per bit.

Amaranth 0.5's RTLIL backend (``ModuleEmitter.emit_memory``) builds the ``$meminit_v2`` data of a memory
as a netlist value with one constant net per bit, then folds it back into a string bit by bit. A
layer's weights are megabits (the INT8 generator: 4.5 Mbit, CNV: 1.5 Mbit), so that loop was ~60 % of
converting such a design to Verilog (40 of 79 s for the generator's three MVAUs). :func:`install`
replaces it with a method that writes the same RTLIL text directly from the rows; ``tests/test_stitch.py``
checks the text is byte-identical to Amaranth's own on memories of every shape. Amaranth is pinned
(pyproject), and :func:`install` refuses any other version rather than patch code it has not been
checked against.
"""

__all__ = ["install"]

_CHECKED_AGAINST = "0.5.10"
_original = None


def install():
    """Replace Amaranth's ``emit_memory`` by :func:`_emit_memory` (idempotent). Returns True when
    installed, False for an Amaranth version this was not checked against (the original is kept)."""
    global _original
    from importlib.metadata import version

    from amaranth.back import rtlil
    if _original is not None:
        return True
    if version("amaranth") != _CHECKED_AGAINST:
        return False
    _original = rtlil.ModuleEmitter.emit_memory
    rtlil.ModuleEmitter.emit_memory = _emit_memory
    return True


def uninstall():
    """Put Amaranth's own ``emit_memory`` back (for the test that compares the two)."""
    global _original
    from amaranth.back import rtlil
    if _original is not None:
        rtlil.ModuleEmitter.emit_memory, _original = _original, None


def _emit_memory(self, cell_idx, cell):
    # The same cell as Amaranth's emit_memory; only DATA is built differently. Amaranth's sigspec of an
    # all-constant value is "<width>'<bits, most significant first>", the first row in the low bits.
    from amaranth.hdl import _nir

    memory_info = self.memories[cell_idx]
    mask = (1 << cell.width) - 1
    bits = "".join(format(row & mask, f"0{cell.width}b") for row in reversed(cell.init)) if cell.width else ""
    self.builder.cell("$meminit_v2", ports={
        "ADDR": self.sigspec(),
        "DATA": f"{len(bits)}'{bits}" if bits else self.sigspec(),
        "EN": self.sigspec(_nir.Value.ones(cell.width)),
    }, parameters={
        "MEMID": memory_info.memid,
        "ABITS": 0,
        "WIDTH": cell.width,
        "WORDS": cell.depth,
        "PRIORITY": 0,
    }, src_loc=cell.src_loc)
