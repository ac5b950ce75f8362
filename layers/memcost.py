"""What memories cost on the xc7z020 as Yosys 0.70 maps them: block RAM (RAMB18 / RAMB36 tiling, ROMs folded
into a block's depth), LUTRAM and LUT ROMs. Every layer that stores words (FIFOs, weights, thresholds, line
buffers, parameters) estimates its storage here."""

import math
from functools import lru_cache

from layers.op import Resources

__all__ = ["BRAM18_SHAPES", "BRAM36_SHAPES", "bram18_count", "ram_cost", "ram_in_block", "rom_bram_cost", "rom_luts"]


# RAMB18E1 aspect ratios (depth, width) on 7-series, simple dual port.
BRAM18_SHAPES = ((512, 36), (1024, 18), (2048, 9), (4096, 4), (8192, 2), (16384, 1))


def bram18_count(width, depth):
    """Fewest RAMB18s holding ``depth`` words of ``width`` bits, over the block's aspect ratios."""
    return min(-(-width // w) * -(-depth // d) for d, w in BRAM18_SHAPES)


# RAMB36E1 aspect ratios, two RAMB18s' worth each
BRAM36_SHAPES = ((512, 72), (1024, 36), (2048, 18), (4096, 9), (8192, 4), (16384, 2), (32768, 1))
# (depth, width, RAMB18s) of every block shape Yosys maps a memory into
_BLOCK_SHAPES = tuple((d, w, 1) for d, w in BRAM18_SHAPES) + tuple((d, w, 2) for d, w in BRAM36_SHAPES)


@lru_cache(maxsize=4096)        # pure; the folding optimizer asks for the same few shapes thousands of times
def rom_bram_cost(width, depth):
    """(RAMB18 count, LUTs) of a ``depth`` x ``width`` ROM in block RAM as Yosys 0.70 maps it.

    Yosys folds a deep ROM into a block's depth D: the n = ceil(depth / D) slices of the address
    range sit side by side in one D-deep row of n * width bits, packed over the block's full width
    (parity bits included), and an n:1 mux per output bit picks the slice. It takes the aspect
    ratio with the fewest blocks, then the smallest mux. Measured (random contents, registered read):
    2304 x 128: 9 BRAM36 + 256 LUT; 18432 x 32: 16 + 160; 9216 x 32: 8 + 160; 4608 x 64: 8 + 320;
    1152 x 256: 11 + 256; 2304 x 64: 9 RAMB18 + 128; 32768 x 8: 15 RAMB18 + 64; 32768 x 4: 4 BRAM36;
    288 x 512: 15 RAMB18; this model gives exactly these. Per-block tiling (:func:`bram18_count`, what
    a RAM with a write port gets) would give 10, 18, 8, 9, 12 BRAM36, 10, 16 RAMB18, 4 and 15."""
    def cost(d, w, units):
        slices = -(-depth // d)
        return -(-(slices * width) // w) * units, slices
    blocks, slices = min(cost(*shape) for shape in _BLOCK_SHAPES)
    return blocks, width * _mux_luts(slices)


def _ram_tiling(width, depth):
    """(RAMB18 count, blocks stacked in depth) of a RAM with a write port in block RAM, as Yosys tiles it:
    whole blocks side by side and stacked, the fewest blocks, then the fewest stacked (each stacked block
    is one more input of the read mux: CNV-w2a2's 2,456 x 32 FIFO takes 5 RAMB18 and 119 LUT, its
    2,592 x 32 one 3 BRAM36 and 80)."""
    return min((-(-width // w) * -(-depth // d) * units, -(-depth // d)) for d, w, units in _BLOCK_SHAPES)


def _mux_luts(n):
    """LUTs of an n:1 mux of registered block outputs, per bit (LUT6 and MUXF7/F8; abc9 on Yosys 0.70)."""
    return 0 if n == 1 else 1 if n <= 4 else 2 if n <= 6 else -(-n // 2)


def rom_luts(width, depth):
    """LUTs of a ``depth`` x ``width`` ROM built as logic (rom_style distributed).

    Per bit: one LUT6 per 64 words, and up to four of them joined by MUXF7/F8 for free. Deeper
    ROMs add a LUT mux tree and whatever abc9 spends beyond the ideal; fitted to Yosys 0.70 on random
    contents behind a registered address (1024 x 10: 188 LUT, 4096 x 4: 334, 16384 x 4: 1,368,
    65536 x 4: 5,692; this gives 200, 324, 1,352 and 5,656). One or two words cost nothing.
    """
    if depth <= 2:      # each bit is a constant, the address bit or its inverse: its reader's LUTs absorb it
        return 0
    luts_per_bit = -(-depth // 64)
    if luts_per_bit > 4:
        luts_per_bit = math.ceil(luts_per_bit * (1.08 + 0.03 * math.log2(luts_per_bit)))
    return width * luts_per_bit


def ram_in_block(width, depth, ram_style="auto", single_port=False):
    """Whether Yosys puts a ``depth`` x ``width`` RAM in BRAM: ``block``, or ``auto`` where its memory_libmap
    finds RAMB18s cheaper than LUTRAM (its 7-series costs: 8 per LUTRAM cell of 4 LUTs, 129 per RAMB18).
    ``single_port``: read and write share one address (a line buffer)."""
    if ram_style != "auto":
        return ram_style == "block"
    return 8 * _lutram_cells(width, depth, single_port) > 129 * bram18_count(width, depth)


def _lutram_cells(width, depth, single_port):
    """LUTRAM cells of 4 LUTs: simple dual port RAM32M / RAM64M hold 6 bits x 32 words or 3 x 64; single
    port, 8 bits x 32, 4 x 64, 2 x 128 or 1 x 256 words, in banks of 256 words beyond that."""
    if not single_port:
        return -(-width // 6) if depth <= 32 else -(-width // 3) * -(-depth // 64)
    per_cell = next((bits for words, bits in ((32, 8), (64, 4), (128, 2)) if depth <= words), 1)
    return -(-width // per_cell) * -(-depth // 256)


@lru_cache(maxsize=4096)        # pure (a frozen Resources); asked for every folding the optimizer costs
def ram_cost(width, depth, ram_style="auto", single_port=False):
    """Storage of a ``depth`` x ``width`` RAM with a synchronous read port, as Yosys 0.70 maps it: BRAM18s,
    or LUTRAM cells (see :func:`_lutram_cells`) with a read multiplexer over their banks."""
    if ram_in_block(width, depth, ram_style, single_port):
        blocks, slices = _ram_tiling(width, depth)
        return Resources(lut=width * _mux_luts(slices), ff=0, bram18=blocks)
    banks = -(-depth // (256 if single_port else 64))
    read_mux = width * -(-(banks - 1) // 3)
    return Resources(lut=4 * _lutram_cells(width, depth, single_port) + read_mux, ff=0, bram18=0)
