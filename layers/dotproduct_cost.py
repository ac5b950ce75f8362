"""The dot-product engine's cost model: 7-series LUTs, flip-flops, BRAM18 and DSPs before synthesis of what
:class:`layers.dotproduct_unit.DotProductUnit` builds for a :class:`layers.dotproduct.UnitSpec`, fitted to
Yosys counts (BENCHMARKS.md). ``UnitSpec.resource_estimate`` is :func:`unit_resource_estimate`."""

import math
from functools import lru_cache

from layers.datapath import booth_start_bits, tree_register_bits
from layers.dotproduct_unit import TREE_LEVELS_PER_STAGE, chain_canary_bits
from layers.fifo import output_fifo_spec
from layers.memcost import bram18_count, ram_cost, rom_bram_cost, rom_luts
from layers.op import Resources
from layers.popcount import (CLASS_CHAIN_FACTOR, CLASS_COUNTER_FACTOR, class_cost, counts_classes, heap_cost,
                             selection_cost)

__all__ = ["unit_resource_estimate"]

# popcount.heap_cost is pure and planned afresh on each call (its chains' LUTs and widths counted); the
# folding optimizer asks it for every folding of a binary MVAU it costs (CNV-w1a1: 57,000 candidates,
# 40 % of their cost before it was remembered here; issue 42)
_heap_cost = lru_cache(maxsize=None)(heap_cost)

XNOR_ROM_POPCOUNT_LUT = 1.5     # weights_in_xnor: LUTs per term of a lane's popcount of registered bits
# Yosys LUTs against layers.popcount.heap_cost's count (carry chains, issue 43), by the signals behind a
# term: registered agreement bits 1.12 (PE 2 x SIMD 144, 32 words in the XNOR's LUTs: 236 LUTs, 210
# planned); XNOR terms behind block RAM 1.35 (PE 2 x SIMD 144: 444, 328 planned): abc maps a first-level
# counter of three XNORs as one shared XNOR and two LUT5s (its area model: LUT6 5, LUT5 3, LUT2 2), 3 LUTs
# where 2 are planned; behind a folded ROM of up to 4 words 1.25 (PE 2 x SIMD 576: 1,653, 1,318 planned).
HEAP_LUT_FACTOR = {1: 1.12, 2: 1.35}
HEAP_LUT_FACTOR_FOLDED_ROM = 1.25
# Lanes of constant BIPOLAR weights (layers.popcount.selection_cost, heaps of plain input bits): CNV-w1a1's
# MVAU_0 at PE 64 x SIMD 27, its weights: 4,142 LUT of heaps by Yosys, 3,872 planned (the subtractions apart)
SELECTION_LUT_FACTOR = 1.07


def unit_resource_estimate(spec):
    """7-series cost before synthesis, a model of what this engine builds (fitted to Yosys counts
    in BENCHMARKS.md within about 30 %): multipliers, adder trees at about one LUT per sum bit,
    accumulators, thresholds, weights in BRAM or LUT ROM, and the output FIFO."""
    wb, ib = spec.weight_dtype.bitwidth(), spec.input_dtype.bitwidth()
    macs, acc = spec.pe * spec.simd, spec.acc_shape.width
    dsp = spec.res_type == "dsp" and not spec.xnor and min(wb, ib) > 1
    product_bits = 1 if spec.xnor else wb + ib
    mult_lut = 0 if dsp or spec.xnor else wb * ib if min(wb, ib) > 1 else _select_lut(spec, wb, ib)
    if counts_classes(spec):    # classes of terms: chains of plain bits, counters of XOR'd bits (abc: 3 LUTs
        chains, firsts, _, _ = class_cost(spec)             # where 2 are planned), the start's adder (SF = 1)
        tree_lut = (CLASS_CHAIN_FACTOR * chains + CLASS_COUNTER_FACTOR * firsts) / spec.pe + (acc if spec.sf == 1 else 0)
    elif spec.uses_heap:        # the chains' LUTs as planned (layers.popcount), scaled to what Yosys maps
        folded = (spec.heap_term_inputs == 2 and _rom_folds_into_products(spec)
                  and spec.weight_ram_style == "distributed")
        factor = HEAP_LUT_FACTOR_FOLDED_ROM if folded else HEAP_LUT_FACTOR[spec.heap_term_inputs]
        tree_lut = factor * _heap_cost(spec.simd, spec.heap_term_inputs)[0]
    elif spec.weights_in_xnor:  # a popcount of registered bits: the XNORs are in the ROM's LUTs
        tree_lut = XNOR_ROM_POPCOUNT_LUT * (spec.simd - 1)
    elif spec.xnor:     # XNORs and popcount fuse into LUT6 counters: ~2 LUT per term (benchmarks/popcount.py)
        tree_lut = 2 * (spec.simd - 1)
    else:
        tree_lut = (spec.simd - 1) * (product_bits + spec.simd.bit_length() // 2)
    if spec.uses_heap and not spec.xnor:        # constant BIPOLAR weights: heaps and a subtraction a lane
        lut = SELECTION_LUT_FACTOR * selection_cost(spec.weight_matrix(), spec.lane_input_dtype.bitwidth())[0] + spec.pe * acc
    elif spec.constant_weights and not dsp:     # the accumulator's adder (none when it only registers)
        lut = _constant_weight_lut(spec) + (0 if spec.lean_accumulator else spec.pe * acc)
    else:
        # the accumulators' adders (SF = 1: none, the lane sum is loaded as it is)
        lut = (macs * mult_lut + spec.pe * tree_lut) * _lut_mac_factor(spec) + (spec.pe * acc if spec.sf > 1 else 0)
        if spec.offset_weights:     # the shared input sum, and a subtraction per lane
            lut += (spec.simd - 1) * (ib + spec.simd.bit_length() // 2) + spec.pe * acc
    if spec.booth_products and spec.nf > 4:     # the accumulators' start per nf: a LUT ROM bit a bit
        lut += spec.pe * acc
    dsp_macs = macs if dsp else 0
    ff = spec.pe * (acc * (2 + int(spec.registers_sum)) + (spec.simd * product_bits if spec.registers_products else 0))
    if spec.booth_products and spec.nf > 1:     # ... registered (DotProductUnit._fabric_accumulators): the bits
        ff += booth_start_bits(spec)            # that vary between folds
    if spec.chains_in_dsp:          # per pair: a DSP chain and one accumulator instead of trees and two
        dsp_macs = macs // 2
        lut, ff = _chain_cost(spec)
    elif spec.accumulates_in_dsp:     # per pair: no fabric accumulators; canaries, carries, one subtraction
        dsp_macs, carries = macs // 2, max(acc - spec.dsp_packing, 2)
        lut += (macs // 2) * (2 + carries) - spec.pe * acc / 2
        ff += (macs // 2) * (6 + carries + spec.dsp_packing) - spec.pe * acc / 2
    elif dsp and spec.dsp_packing is not None:      # half the DSPs; a borrow and an increment per pair
        # The increment (the high lane plus the low field's sign) is a carry chain whose other operand is
        # zero but for one bit: its LUTs are wires, about one LUT remains (Yosys, UINT8 x INT8, SIMD 24 x
        # PE 4, 48 DSPs, LUT-ROM weights, no activation: 3,014 LUT; estimated 2,956, 3,724 with S + 1
        # LUTs an increment)
        dsp_macs = macs // 2
        borrow = 0 if _rom_folds_into_packed_weights(spec) else wb
        lut += (macs // 2) * (borrow + 1)
        ff += macs * spec.dsp_packing       # the split products' register
    lut, ff = int(round(lut)), int(round(ff))
    if spec.csd_products:           # each lane's own terms, of about the input's width
        ff += sum(tree_register_bits(int(r), ib + 2, TREE_LEVELS_PER_STAGE) for r in spec.csd_lane_terms())
    elif spec.product_rows > 1:
        ff += spec.pe * tree_register_bits(spec.tree_terms, wb + ib - 3, spec.tree_levels_per_stage)
    if spec.registers_operands or spec.registers_replayed_input:
        ff += spec.weight_width + spec.in_width
    if spec.uses_heap and not spec.xnor:
        ff += selection_cost(spec.weight_matrix(), spec.lane_input_dtype.bitwidth())[1]
    elif counts_classes(spec):
        ff += class_cost(spec)[2]
    elif spec.uses_heap:
        ff += spec.pe * _heap_cost(spec.simd, spec.heap_term_inputs)[1]
    bram18 = dsp_act = 0
    if spec.requant is not None:
        act = spec.requant.resource_estimate(spec.activation_lanes, acc,
                                             lean=spec.pipeline == "latency")
        lut, ff, bram18, dsp_act = lut + act.lut, ff + act.ff, act.bram18, act.dsp
    elif spec.table is not None:
        t_lut, t_ff, bram18 = spec.activation_table().resource_estimate(spec.ram_style_thresholds)
        lut, ff = lut + t_lut, ff + t_ff
    if spec.activation_groups > 1:      # the accumulators' copy, a G:1 mux per unit bit (LUT6: 4:1),
        g, units = spec.activation_groups, spec.activation_lanes      # the output word's other turns
        lut += units * acc * math.ceil((g - 1) / 3) + 2 * g.bit_length()
        ff += spec.pe * acc + (spec.pe - units) * spec.output_dtype.bitwidth() + 2 * g.bit_length()
    logic_bits = spec.weight_width if spec.weight_ram_style == "distributed" else spec.weight_lut_bits
    columns = spec.simd if spec.chain_column_roms else 1     # ROMs side by side, each its share of the word
    if logic_bits and not _rom_folds_into_products(spec):
        lut += columns * rom_luts(logic_bits // columns, spec.wmem)
    if logic_bits < spec.weight_width and spec.runtime_writeable_weights:
        bram18 += bram18_count(spec.weight_width - logic_bits, spec.wmem)
    elif logic_bits < spec.weight_width:
        # the slice muxes' last level takes in the product or XNOR that reads the weight: about half
        # of their LUTs remain (CNV-w1a1's MVAU_4, 5 and 7 in the whole design, Yosys)
        blocks, mux = rom_bram_cost((spec.weight_width - logic_bits) // columns, spec.wmem)
        bram18, lut = bram18 + columns * blocks, lut + columns * mux // 2
    # control: the sf/nf/address counters, and the replay buffer's read mux (input read once per NF)
    lut += sum(max(n - 1, 1).bit_length() for n in (spec.sf, spec.nf, spec.wmem))
    if spec.replays_input and spec.nf > 1 and spec.sf > 1:     # the SF input words (SF = 1: held in x1)
        replay = ram_cost(spec.in_width, spec.sf, single_port=True)
        lut, bram18 = lut + spec.in_width + replay.lut, bram18 + replay.bram18
    if spec.mem_mode == "internal_decoupled":
        lut += spec.weight_width
        ff += 3 * spec.weight_width
    # the operand registers; csd_products' weights are constants in the terms, no register (Yosys, the
    # cost corpus' CSD records: the weight word's bits counted here made the estimate 70-130 % high)
    operands = spec.in_width + (0 if spec.csd_products else spec.weight_width)
    fifo = output_fifo_spec(spec.out_width).resource_estimate() if spec.out_latency else Resources(lut=0, ff=0, bram18=0)
    return Resources(lut=lut, ff=ff + operands, bram18=bram18, dsp=dsp_macs + dsp_act) + fifo


def _chain_cost(spec):
    """LUTs and flip-flops of ``chains_in_dsp``'s fabric (``DotProductUnit._dsp_chain``), before the
    activation, weights and control: per lane pair the packed weights' borrow (unless the LUT ROM folds it
    in), the k-bit canary products and their sum, the accumulator of the pair's sums (S + acc bits), the
    carries' sum and the high lane's subtraction; flip-flops: the skew (SIMD (SIMD - 1) / 2 packed
    weights per pair, inputs shared), the canaries' products and running sum, the accumulator and the restored lanes."""
    shift, acc, n = spec.dsp_packing, spec.acc_shape.width, spec.simd
    wb, ib = spec.weight_dtype.bitwidth(), spec.input_dtype.bitwidth()
    pairs, k = spec.pe // 2, chain_canary_bits(spec)
    carries = max(acc - shift, k)
    skew = n * (n - 1) // 2
    borrow = 0 if _rom_folds_into_packed_weights(spec) else wb
    # the canaries: Yosys, UINT8 x INT8, LUT-ROM weights, no activation, SIMD 8 x PE 16 (k = 4): 3,255 LUT,
    # 2,415 without them (105 LUTs a pair, 13 a column); SIMD 24 x PE 4 (k = 5): 2,343 LUT against 1,738
    # estimated with k - 1 LUTs a product and k an adder: about 13 more a column
    lut = pairs * (n * (borrow + k + 12) + (n - 1) * k + (shift + acc) + 2 * k + carries + acc)
    # the weights' skew: the column ROMs' addresses, or the weights themselves
    weights_skew = n * max(spec.wmem - 1, 1).bit_length() if spec.chain_column_roms else skew * spec.pe * wb
    ff = (weights_skew + pairs * (2 * n * k + k + (shift + acc) + carries + shift + acc + 2 * acc)
          + skew * ib + n * ib + 4 * (n + 4))
    return lut, ff


def _rom_folds_into_products(spec):
    """Whether the weight ROM's LUTs vanish into the products': up to 4 words always; and a LUT ROM
    feeding fabric products when its address bits and one input element make at most a LUT6's six
    inputs (each product bit is then one function of them). Yosys, INT2 x INT2, PE 10, SIMD 8: the
    ROM of 8 and 16 words costs nothing (TFC-w2a2 MVAU_3: 1,235 LUT, 1,447 estimated with it)."""
    if spec.wmem <= 4:
        return True
    fabric = spec.res_type == "lut" and not spec.xnor and spec.product_rows == 1
    whole_rom = spec.weight_ram_style == "distributed" and spec.mem_mode == "internal_embedded"
    return fabric and whole_rom and (spec.wmem - 1).bit_length() + spec.input_dtype.bitwidth() <= 6


def _rom_folds_into_packed_weights(spec):
    """Whether the packed weight's borrow (w_hi - [w_lo < 0], ``layers.datapath.packed_weight``) costs no
    LUTs of its own: a LUT ROM of at most 64 words read combinationally into the packed operand's register
    makes each packed bit one function of the address, one LUT6 like the ROM bit it replaces. Yosys, the
    W8A8 ResNet-8's MVAU_2 (UINT8 x INT8, SIMD 24 x PE 4, 24 words, 48 DSPs, no activation): 3,316 LUT
    against 4,108 estimated with the borrow's 8 LUTs a DSP, 3,724 without."""
    return (spec.mem_mode == "internal_embedded" and spec.weight_ram_style == "distributed"
            and not spec.weight_lut_bits and not spec.runtime_writeable_weights and spec.wmem <= 64)


def _constant_weight_lut(spec):
    """LUTs of the products and sums of constant weights. A lane sums one row of input bits per
    non-zero canonical signed digit of its weights (a zero weight costs nothing, a power of two is
    a wire), at about ``ib + wb/2 + log2(rows)/2`` LUTs a row (Yosys: UINT2 x INT2, INT4 x UINT2/4,
    24-49 rows a lane: -30 to +35 %, no better simple form found yet); an XNOR lane is a popcount of
    inputs, some inverted, about 1.06 LUTs a term (the cost corpus' two such layers: 1.05, 1.07)."""
    if spec.xnor:
        return 1.06 * spec.pe * spec.simd
    wb, ib = spec.weight_dtype.bitwidth(), spec.input_dtype.bitwidth()
    if spec.csd_products:
        # a term is the input shifted, no partial-product row: about 0.87 (ib + log2(terms)/2) + 1.3 LUTs
        # each (the cost corpus' CSD records synthesized without their activation, INT16 and UINT6 x
        # INT6, 8-70 terms a lane, 8.5-16.5 LUTs a term: within 3 %; a UINT4 x INT4 layer, 50 % pruned,
        # not fitted: +15 %; the former 0.75 (ib + ...) was 20-38 % low, offset on the whole jet tagger
        # by a requantizer estimate as much too high)
        return float(sum(r * (0.87 * (ib + math.log2(r) / 2) + 1.3) for r in spec.csd_lane_terms() if r > 0))
    return float(sum(r * (ib + wb / 2 + math.log2(r) / 2) for r in spec.csd_lane_terms() if r > 0))


def _select_lut(spec, wb, ib):
    """LUTs of a product with a 1-bit operand: a BIPOLAR one negates the other (x or -x: an inverter
    per bit, Yosys does not fold it into the adder tree: CNV-w1a1 MVAU_0, INT8 x BIPOLAR, 1,348 LUT by
    Yosys against 1,006 without it); a BINARY one is an AND that the tree's first LUTs absorb."""
    one_bit = spec.weight_dtype if wb == 1 else spec.input_dtype
    if spec.offset_weights:         # selects_bipolar_weights: an AND, like a BINARY weight
        return 0
    return max(wb, ib) if one_bit.name == "BIPOLAR" else 0


def _lut_mac_factor(spec):
    """How Yosys maps low-bit fabric products and their tree against the model's LUT count, by the
    signedness of the products the lanes sum (benchmarks/lowbit.py, 2- and 4-bit operands): signed
    x signed products are sign-extended through every tree level (about 1.5x at 2 bits, 1.23x at 4),
    unsigned ones (both offsets, or unsigned operands) fuse into LUT6s (0.77x at 2 bits, 1.13x at 4)."""
    wb, ib = spec.weight_dtype.bitwidth(), spec.input_dtype.bitwidth()
    if spec.booth_products:         # four Booth rows a product, counted as the eight rows' multiplier and
        # tree: Yosys, UINT8 x INT8, a lane of SIMD 8 with its tree, 554 LUT against 858 for the shift-add
        # rows (1.35x this count): 0.87x
        return 0.87
    if spec.product_rows > 1:       # rows of 5-8 bit products: Yosys 1.45-1.6x (PE 1-8, SIMD 4-64, INT8)
        # with the adders merged into carry-save logic; each a carry chain of its own (keeps_sums): 1.35x
        # (UINT8 x INT8, SIMD 24 x PE 4: 13,525 -> 11,996 LUT; SIMD 8 x PE 2: 2,986 -> 2,759); two rows
        # (an INT2 weight's: x and -2x) are no multiplier array: 1.2x (CNV-w2a2's MVAU_0, INT8 x INT2)
        return 1.35 if spec.product_rows >= 4 else 1.2
    if spec.xnor or spec.res_type == "dsp" or min(wb, ib) == 1 or max(wb, ib) > 4:
        return 1.0
    x_signed = spec.lane_input_dtype.signed()
    w_signed = spec.weight_dtype.signed() and not spec.offset_weights
    small = max(wb, ib) <= 2
    if x_signed and w_signed:
        return 1.5 if small else 1.23
    if not x_signed and not w_signed:
        return 0.77 if small else 1.13
    return 1.0
