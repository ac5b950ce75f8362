"""The dot-product engine MVAU and VVAU share: :class:`UnitSpec` (folding checks, datatypes, weights and
their memory, accumulator, activation, resource estimate, timing) and :class:`DotProductUnit` (the
pipelined PE x SIMD datapath), with the hooks both ops declare alike (folding attributes, FINN import and
export, lowering, activation choices). ``layers.mvau`` and ``layers.vvau`` each add their geometry.
"""

import math
from dataclasses import replace
from math import prod

import numpy as np
from amaranth.hdl import Array, C, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from qonnx.core.datatype import DataType

from layers.datapath import (DSP_P_BITS, adder_tree, check_dtype, check_fits, dtype_for_range, dtype_range,
                             element_value, output_stage, packed_weight, packing_shift, product, product_rows,
                             register, shape_for_range, shifted, tree_register_bits, tree_stages, unpack_products,
                             wire, wrapping_increment)
from layers.fifo import output_fifo_spec
from layers.memcost import bram18_count, ram_cost, rom_bram_cost, rom_luts
from layers.thresholding import ThresholdTable, activation_lane, check_activation, threshold_search
from layers.timing import Timing, as_cycles, frames_of, take_in_turn, take_when_ready
from memstream.axilite import AXILiteSignature
from memstream.memstream import (BRAM_OR_LUT_STYLES, RAM_STYLES, MemStream, MemStreamSpec, check_lut_bits, is_logic_rom,
                                 rom_address_next, rom_read_port)
from memstream.packing import element_codes, pack_words
from layers.op import ArrayMemo, Resources, StreamContract
from layers.popcount import heap_cost, popcount_heap
from layers.requant import requant_form, requant_stages, requantize


__all__ = ["UnitSpec", "DotProductUnit", "UNIT_FOLDING", "check_positive", "canonical_digits",
           "activation_choices", "unit_finn_export", "lower_dot_product", "finn_import_unit"]

MEM_MODES = ("internal_embedded", "internal_decoupled", "external")
PIPELINES = ("throughput", "latency")   # pipeline: registers for the clock everywhere, or the fewest stages
RES_TYPES = ("auto", "lut", "dsp")
AUTO_DSP_BITS = 6               # resType auto: DSP48E1 multipliers when both operands are at least this wide
TREE_LEVELS_PER_STAGE = 2       # adder levels between pipeline registers
AUTO_BRAM_MIN_DEPTH = 65        # ram_style auto: weights in block RAM from this many words, else LUT ROM
XNOR_ROM_WORDS = (5, 32)        # weights_in_xnor: LUT ROMs of this many words read inside the XNOR's LUT6
XNOR_ROM_POPCOUNT_LUT = 1.5     # weights_in_xnor: LUTs per term of a lane's popcount of registered bits
POPCOUNTS = ("tree", "heap")    # popcount: a binary lane's sum as an adder tree or a registered compressor heap
# Yosys LUTs against layers.popcount.heap_cost's count, by the signals behind a term (PE 16, SIMD 144, 2,304
# terms: registered agreement bits 0.95, XNOR terms behind block RAM 1.17; BENCHMARKS.md, CNV-w1a1 at 20k)
HEAP_LUT_FACTOR = {1: 0.95, 2: 1.17}
WEIGHT_STREAM_FIRST_CYCLE = 2   # internal_decoupled: the MemStream offers its first word at this bench cycle
                                # (its read at the first cycle out of reset, a cycle in the read port)


def check_positive(owner, spec, *attrs):
    for attr in attrs:
        value = getattr(spec, attr)
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{owner} {attr} must be a positive integer, not {value!r}")


_WEIGHT_CHECKS = ArrayMemo()     # weights already checked against a datatype
_ACC_RANGES = ArrayMemo()       # accumulator ranges of weights, per input datatype
_CONST_ROWS = ArrayMemo()       # per output channel, the canonical signed digits of its weights


def _sign_bits(bits, elems):
    """The mask of the sign bit of each of ``elems`` packed ``bits``-bit elements."""
    return C(sum(1 << (e * bits + bits - 1) for e in range(elems)), bits * elems)


def csd_terms(value):
    """The canonical signed digits of an integer as (sign, k) pairs: value = sum sign * 2^k (7 = 8 - 1)."""
    terms, v, k = [], int(value), 0
    while v:
        if v & 1:
            digit = 2 - (v & 3)         # +1 if v = 1 mod 4, -1 if v = 3 mod 4
            terms.append((digit, k))
            v -= digit
        v >>= 1
        k += 1
    return terms


def canonical_digits(values):
    """The number of non-zero digits of each integer in its canonical signed-digit form (the fewest
    +-2^k terms that add up to it: 7 = 8 - 1 has two)."""
    v = np.abs(np.asarray(values, dtype=np.int64))
    count = np.zeros(v.shape, dtype=np.int64)
    while v.any():
        odd = (v & 1) == 1
        count += odd
        v = np.where(odd & ((v & 3) == 3), v + 1, np.where(odd, v - 1, v)) >> 1
    return count


class UnitSpec(StreamContract):
    """What MVAU and VVAU specs share: folding checks, datatypes, weights, accumulator, activation.

    Subclasses define ``owner``, ``in_elems`` (rows of W per output channel), ``out_channels``,
    ``weight_matrix()`` as (out_channels, in_elems).
    """

    offset_operands = False     # MVAUSpec's field; a VVAU's lanes do not share inputs
    pipeline = "throughput"     # MVAUSpec's field
    weight_lut_bits = 0         # MVAUSpec's field; a VVAU's weights are never split
    shared_activation = False   # MVAUSpec's field; a VVAU has one activation per lane
    weights_in_xnor = False     # MVAUSpec's property
    popcount = "tree"           # MVAUSpec's field; a VVAU's lanes sum by the adder tree

    def _validate_common(self):
        owner = self.owner
        for attr in ("input_dtype", "weight_dtype"):
            object.__setattr__(self, attr, check_dtype(owner, attr, getattr(self, attr)))
        bipolar = DataType["BIPOLAR"]
        if self.binary_xnor_mode:
            for attr in ("input_dtype", "weight_dtype"):
                if getattr(self, attr).bitwidth() != 1:
                    raise ValueError(f"{owner} binary_xnor_mode needs 1-bit {attr}, not {getattr(self, attr).name}")
        if self.mem_mode not in MEM_MODES:
            raise ValueError(f"{owner} mem_mode must be one of {', '.join(MEM_MODES)}, not {self.mem_mode!r}")
        if self.ram_style not in RAM_STYLES:
            raise ValueError(f"{owner} ram_style must be one of {', '.join(RAM_STYLES)}, not {self.ram_style!r}")
        if self.ram_style_thresholds not in BRAM_OR_LUT_STYLES:
            raise ValueError(f"{owner} ram_style_thresholds must be one of auto, distributed, block, "
                             f"not {self.ram_style_thresholds!r}")
        if self.res_type not in RES_TYPES:
            raise ValueError(f"{owner} res_type must be one of {', '.join(RES_TYPES)}, not {self.res_type!r}")
        if self.pipeline not in PIPELINES:
            raise ValueError(f"{owner} pipeline must be one of {', '.join(PIPELINES)}, not {self.pipeline!r}")
        if self.runtime_writeable_weights and self.mem_mode != "internal_decoupled":
            raise ValueError(f"{owner} runtime_writeable_weights needs mem_mode=internal_decoupled, "
                             f"not {self.mem_mode}")
        if self.ram_style == "ultra" and not self.runtime_writeable_weights:
            raise ValueError(f"{owner} ram_style=ultra needs runtime_writeable_weights=True")
        if self.weight_lut_bits:
            if self.mem_mode == "external":
                raise ValueError(f"{owner} weight_lut_bits={self.weight_lut_bits} needs weights inside the layer "
                                 f"(mem_mode internal_embedded or internal_decoupled), not mem_mode=external")
            check_lut_bits(owner, "weight_lut_bits", self.weight_lut_bits, self.weight_width, self.weight_ram_style,
                           self.runtime_writeable_weights)
        vecs = tuple(int(v) for v in self.num_input_vectors)
        if not vecs or min(vecs) < 1:
            raise ValueError(f"{owner} num_input_vectors must be positive integers, not {self.num_input_vectors!r}")
        object.__setattr__(self, "num_input_vectors", vecs)
        # bipolar x bipolar is xnor-popcount in FINN whether or not the flag is set
        object.__setattr__(self, "xnor", bool(self.binary_xnor_mode) or
                           (self.input_dtype == bipolar and self.weight_dtype == bipolar))
        if self.res_type == "auto":     # FINN's default too; resolved here so reports show the choice
            narrow = min(self.input_dtype.bitwidth(), self.weight_dtype.bitwidth())
            object.__setattr__(self, "res_type", "dsp" if narrow >= AUTO_DSP_BITS and not self.xnor else "lut")
        self._validate_weights()
        lo, hi = self.acc_range()
        if self.thresholds is None:
            out = self.output_dtype if self.output_dtype is not None else self.acc_dtype()
            out = check_dtype(owner, "output_dtype", out)
            check_fits(owner, "output_dtype", out, lo, hi, "accumulators (noActivation)")
            object.__setattr__(self, "output_dtype", out)
            object.__setattr__(self, "table", None)
            object.__setattr__(self, "requant", requant_form(owner, self.activation_style, None, None))
        else:
            if self.output_dtype is None:
                raise ValueError(f"{owner} output_dtype is required with thresholds")
            out = check_dtype(owner, "output_dtype", self.output_dtype)
            object.__setattr__(self, "output_dtype", out)
            table = ThresholdTable(owner, self.thresholds, self.out_channels, self.pe, (lo, hi))
            object.__setattr__(self, "table", table)
            check_activation(owner, table, out, self.act_val)
            object.__setattr__(self, "requant", requant_form(owner, self.activation_style, self.thresholds, table,
                                                             pe=self.pe, acc_width=self.acc_shape.width))
        object.__setattr__(self, "offset_inputs", self._offsets_inputs())
        object.__setattr__(self, "datapath_table", self.table)
        if self.offset_inputs:      # the accumulator holds sum w x_u = sum w x + X0 rowsum(w): thresholds follow
            raised = self.table.thresholds + self._input_offset_per_channel()[:, None]
            object.__setattr__(self, "datapath_table", ThresholdTable(owner, raised, self.out_channels, self.pe,
                                                                      self.datapath_acc_range()))

    def _validate_weights(self):
        owner = self.owner
        if self.weights is None:
            if self.mem_mode != "external":
                raise ValueError(f"{owner} weights are required for mem_mode={self.mem_mode}")
            return
        w = np.asarray(self.weights)
        if w.shape != self.weights_shape:
            raise ValueError(f"{owner} weights must have shape {self.weights_shape}, not {w.shape}")
        # raises naming the legal values if any does not fit
        _WEIGHT_CHECKS.get(w, self.weight_dtype.name, lambda: element_codes(w, self.weight_dtype) is not None)

    def acc_range(self):
        """(lo, hi) over all output channels of the exact accumulator (FINN's MinimizeAccumulatorWidth)."""
        if self.xnor:
            return 0, self.in_elems
        xlo, xhi = dtype_range(self.input_dtype)
        if self.weights is None or self.runtime_writeable_weights:
            wlo, whi = dtype_range(self.weight_dtype)
            corners = [a * b for a in (xlo, xhi) for b in (wlo, whi)]
            return min(0, min(corners) * self.in_elems), max(0, max(corners) * self.in_elems)

        def extremes():
            w = self.weight_matrix().astype(np.int64)
            lo, hi = np.minimum(w * xlo, w * xhi).sum(axis=1), np.maximum(w * xlo, w * xhi).sum(axis=1)
            return min(0, int(lo.min())), max(0, int(hi.max()))
        # O(weights), and the folding optimizer asks for it with every folding it tries
        return _ACC_RANGES.get(self.weights, (type(self).__name__, "acc", self.input_dtype.name), extremes)

    def acc_dtype(self):
        return dtype_for_range(*self.acc_range())

    def datapath_acc_range(self):
        """(lo, hi) of what the accumulator register holds: :meth:`acc_range`, or with ``offset_inputs``
        the sums of w * x_u over x_u in [0, 2^m - 1]."""
        # offset_inputs is decided after the requantizer, which already asks for acc_shape: False until then
        if not getattr(self, "offset_inputs", False):
            return self.acc_range()

        def extremes():
            w = self.weight_matrix().astype(np.int64)
            xhi = (1 << self.input_dtype.bitwidth()) - 1
            lo, hi = np.minimum(w * xhi, 0).sum(axis=1), np.maximum(w * xhi, 0).sum(axis=1)
            return min(0, int(lo.min())), max(0, int(hi.max()))
        return _ACC_RANGES.get(self.weights, (type(self).__name__, "offset", self.input_dtype.name), extremes)

    @property
    def acc_shape(self):
        return shape_for_range(*self.datapath_acc_range())

    def _input_offset_per_channel(self):
        """X0 * rowsum(w) per output channel: what ``offset_inputs`` adds to each accumulator."""
        return (1 << (self.input_dtype.bitwidth() - 1)) * self.weight_matrix().astype(np.int64).sum(axis=1)

    def _offsets_inputs(self):
        x = self.input_dtype
        return (self._sums_unsigned_products() and x.is_integer() and x.signed() and x.bitwidth() >= 2
                and self.table is not None and self.requant is None and self.weights is not None
                and not self.runtime_writeable_weights)

    @property
    def sf(self):
        return self.in_elems // self.simd

    @property
    def nf(self):
        return self.out_channels // self.pe

    @property
    def wmem(self):
        return self.sf * self.nf

    @property
    def weight_width(self):
        return self.pe * self.simd * self.weight_dtype.bitwidth()

    @property
    def out_width(self):
        return self.pe * self.output_dtype.bitwidth()

    @property
    def no_activation(self):
        return self.thresholds is None

    def resource_estimate(self):
        """7-series cost before synthesis, a model of what this engine builds (fitted to Yosys counts
        in BENCHMARKS.md within about 30 %): multipliers, adder trees at about one LUT per sum bit,
        accumulators, thresholds, weights in BRAM or LUT ROM, and the output FIFO."""
        wb, ib = self.weight_dtype.bitwidth(), self.input_dtype.bitwidth()
        macs, acc = self.pe * self.simd, self.acc_shape.width
        dsp = self.res_type == "dsp" and not self.xnor and min(wb, ib) > 1
        product_bits = 1 if self.xnor else wb + ib
        mult_lut = 0 if dsp or self.xnor else wb * ib if min(wb, ib) > 1 else self._select_lut(wb, ib)
        if self.uses_heap:          # the counters' LUTs exactly (layers.popcount), as Yosys maps them
            tree_lut = HEAP_LUT_FACTOR[self.heap_term_inputs] * heap_cost(self.simd, self.heap_term_inputs)[0]
        elif self.weights_in_xnor:  # a popcount of registered bits: the XNORs are in the ROM's LUTs
            tree_lut = XNOR_ROM_POPCOUNT_LUT * (self.simd - 1)
        elif self.xnor:     # XNORs and popcount fuse into LUT6 counters: ~2 LUT per term (benchmarks/popcount.py)
            tree_lut = 2 * (self.simd - 1)
        else:
            tree_lut = (self.simd - 1) * (product_bits + self.simd.bit_length() // 2)
        if self.constant_weights and not dsp:       # the accumulator's adder (none when it only registers)
            lut = self._constant_weight_lut() + (0 if self.lean_accumulator else self.pe * acc)
        else:
            lut = (macs * mult_lut + self.pe * tree_lut) * self._lut_mac_factor() + self.pe * acc
            if self.offset_weights:     # the shared input sum, and a subtraction per lane
                lut += (self.simd - 1) * (ib + self.simd.bit_length() // 2) + self.pe * acc
        dsp_macs = macs if dsp else 0
        ff = self.pe * (acc * (2 + int(self.registers_sum)) + (self.simd * product_bits if self.registers_products else 0))
        if self.accumulates_in_dsp:     # per pair: no fabric accumulators; canaries, carries, one subtraction
            dsp_macs, carries = macs // 2, max(acc - self.dsp_packing, 2)
            lut += (macs // 2) * (2 + carries) - self.pe * acc / 2
            ff += (macs // 2) * (6 + carries + self.dsp_packing) - self.pe * acc / 2
        elif dsp and self.dsp_packing is not None:      # half the DSPs; a borrow and an increment per pair
            dsp_macs = macs // 2
            lut += (macs // 2) * (wb + self.dsp_packing + 1)
            ff += macs * self.dsp_packing       # the split products' register
        lut, ff = int(round(lut)), int(round(ff))
        if self.csd_products:           # each lane's own terms, of about the input's width
            ff += sum(tree_register_bits(int(r), ib + 2, TREE_LEVELS_PER_STAGE) for r in self.csd_lane_terms())
        elif self.product_rows > 1:
            ff += self.pe * tree_register_bits(self.tree_terms, wb + ib - 3, TREE_LEVELS_PER_STAGE)
        if self.registers_operands or self.registers_replayed_input:
            ff += self.weight_width + self.in_width
        if self.uses_heap:
            ff += self.pe * heap_cost(self.simd, self.heap_term_inputs)[1]
        bram18 = dsp_act = 0
        if self.requant is not None:
            act = self.requant.resource_estimate(self.activation_lanes, acc,
                                                 lean=self.pipeline == "latency")
            lut, ff, bram18, dsp_act = lut + act.lut, ff + act.ff, act.bram18, act.dsp
        elif self.table is not None:
            t_lut, t_ff, bram18 = self.activation_table().resource_estimate(self.ram_style_thresholds)
            lut, ff = lut + t_lut, ff + t_ff
        if self.activation_groups > 1:      # the accumulators' copy, a G:1 mux per unit bit (LUT6: 4:1),
            g, units = self.activation_groups, self.activation_lanes      # the output word's other turns
            lut += units * acc * math.ceil((g - 1) / 3) + 2 * g.bit_length()
            ff += self.pe * acc + (self.pe - units) * self.output_dtype.bitwidth() + 2 * g.bit_length()
        logic_bits = self.weight_width if self.weight_ram_style == "distributed" else self.weight_lut_bits
        if logic_bits and not self._rom_folds_into_products():
            lut += rom_luts(logic_bits, self.wmem)
        if logic_bits < self.weight_width and self.runtime_writeable_weights:
            bram18 += bram18_count(self.weight_width - logic_bits, self.wmem)
        elif logic_bits < self.weight_width:
            # the slice muxes' last level takes in the product or XNOR that reads the weight: about half
            # of their LUTs remain (CNV-w1a1's MVAU_4, 5 and 7 in the whole design, Yosys)
            blocks, mux = rom_bram_cost(self.weight_width - logic_bits, self.wmem)
            bram18, lut = bram18 + blocks, lut + mux // 2
        # control: the sf/nf/address counters, and the replay buffer's read mux (input read once per NF)
        lut += sum(max(n - 1, 1).bit_length() for n in (self.sf, self.nf, self.wmem))
        if self.replays_input and self.nf > 1:      # the SF input words, one address for read and write
            replay = ram_cost(self.in_width, self.sf, single_port=True)
            lut, bram18 = lut + self.in_width + replay.lut, bram18 + replay.bram18
        if self.mem_mode == "internal_decoupled":
            lut += self.weight_width
            ff += 3 * self.weight_width
        # the operand registers; csd_products' weights are constants in the terms, no register (Yosys, the
        # cost corpus' CSD records: the weight word's bits counted here made the estimate 70-130 % high)
        operands = self.in_width + (0 if self.csd_products else self.weight_width)
        return Resources(lut=lut, ff=ff + operands, bram18=bram18,
                         dsp=dsp_macs + dsp_act) + output_fifo_spec(self.out_width).resource_estimate()

    def _rom_folds_into_products(self):
        """Whether the weight ROM's LUTs vanish into the products': up to 4 words always; and a LUT ROM
        feeding fabric products when its address bits and one input element make at most a LUT6's six
        inputs (each product bit is then one function of them). Yosys, INT2 x INT2, PE 10, SIMD 8: the
        ROM of 8 and 16 words costs nothing (TFC-w2a2 MVAU_3: 1,235 LUT, 1,447 estimated with it)."""
        if self.wmem <= 4:
            return True
        fabric = self.res_type == "lut" and not self.xnor and self.product_rows == 1
        whole_rom = self.weight_ram_style == "distributed" and self.mem_mode == "internal_embedded"
        return fabric and whole_rom and (self.wmem - 1).bit_length() + self.input_dtype.bitwidth() <= 6

    @property
    def constant_weights(self):
        """One weight word, embedded: the weights are constants that Yosys folds into the products."""
        return self.wmem == 1 and self.mem_mode == "internal_embedded" and self.weights is not None

    @property
    def csd_products(self):
        """``pipeline="latency"`` with constant fabric weights of 2 bits and more: each lane's tree sums only
        the terms its weights need, +-(x << k) per non-zero canonical signed digit (a zero weight adds
        nothing, a power of two one term), so the tree is as deep as its longest lane's terms need, not
        SIMD x the weight's bits (the jet tagger's 64-input layer, 75 % pruned: 55 terms, 6 levels, instead
        of 384, 9). No offset operands (they serve multipliers, not constants)."""
        w, x = self.weight_dtype, self.input_dtype
        return (self.pipeline == "latency" and self.constant_weights and self.res_type == "lut" and not self.xnor
                and w.is_integer() and w.bitwidth() >= 2 and x.is_integer() and x.bitwidth() >= 2
                and w != DataType["BIPOLAR"] and x != DataType["BIPOLAR"])

    def csd_lane_terms(self):
        """Per output channel, the terms of its ``csd_products`` tree."""
        return _CONST_ROWS.get(self.weights, (type(self).__name__, "rows"),
                               lambda: canonical_digits(self.weight_matrix()).sum(axis=1))

    def _constant_weight_lut(self):
        """LUTs of the products and sums of constant weights. A lane sums one row of input bits per
        non-zero canonical signed digit of its weights (a zero weight costs nothing, a power of two is
        a wire), at about ``ib + wb/2 + log2(rows)/2`` LUTs a row (Yosys: UINT2 x INT2, INT4 x UINT2/4,
        24-49 rows a lane: -30 to +35 %, no better simple form found yet); an XNOR lane is a popcount of
        inputs, some inverted, about 1.06 LUTs a term (the cost corpus' two such layers: 1.05, 1.07)."""
        if self.xnor:
            return 1.06 * self.pe * self.simd
        wb, ib = self.weight_dtype.bitwidth(), self.input_dtype.bitwidth()
        if self.csd_products:
            # a term is the input shifted, no partial-product row: about 0.87 (ib + log2(terms)/2) + 1.3 LUTs
            # each (the cost corpus' CSD records synthesized without their activation, INT16 and UINT6 x
            # INT6, 8-70 terms a lane, 8.5-16.5 LUTs a term: within 3 %; a UINT4 x INT4 layer, 50 % pruned,
            # not fitted: +15 %; the former 0.75 (ib + ...) was 20-38 % low, offset on the whole jet tagger
            # by a requantizer estimate as much too high)
            return float(sum(r * (0.87 * (ib + math.log2(r) / 2) + 1.3) for r in self.csd_lane_terms() if r > 0))
        rows = _CONST_ROWS.get(self.weights, (type(self).__name__, "rows"),
                               lambda: canonical_digits(self.weight_matrix()).sum(axis=1))
        return float(sum(r * (ib + wb / 2 + math.log2(r) / 2) for r in rows if r > 0))

    def _select_lut(self, wb, ib):
        """LUTs of a product with a 1-bit operand: a BIPOLAR one negates the other (x or -x: an inverter
        per bit, Yosys does not fold it into the adder tree: CNV-w1a1 MVAU_0, INT8 x BIPOLAR, 1,348 LUT by
        Yosys against 1,006 without it); a BINARY one is an AND that the tree's first LUTs absorb."""
        one_bit = self.weight_dtype if wb == 1 else self.input_dtype
        if self.offset_weights:         # selects_bipolar_weights: an AND, like a BINARY weight
            return 0
        return max(wb, ib) if one_bit.name == "BIPOLAR" else 0

    def _lut_mac_factor(self):
        """How Yosys maps low-bit fabric products and their tree against the model's LUT count, by the
        signedness of the products the lanes sum (benchmarks/lowbit.py, 2- and 4-bit operands): signed
        x signed products are sign-extended through every tree level (about 1.5x at 2 bits, 1.23x at 4),
        unsigned ones (both offsets, or unsigned operands) fuse into LUT6s (0.77x at 2 bits, 1.13x at 4)."""
        wb, ib = self.weight_dtype.bitwidth(), self.input_dtype.bitwidth()
        if self.product_rows > 1:       # rows of 5-8 bit products: Yosys 1.45-1.6x (PE 1-8, SIMD 4-64, INT8);
            # two rows (an INT2 weight's: x and -2x) are no multiplier array: 1.2x (CNV-w2a2's MVAU_0, INT8 x INT2)
            return 1.5 if self.product_rows >= 4 else 1.2
        if self.xnor or self.res_type == "dsp" or min(wb, ib) == 1 or max(wb, ib) > 4:
            return 1.0
        x_signed = self.lane_input_dtype.signed()
        w_signed = self.weight_dtype.signed() and not self.offset_weights
        small = max(wb, ib) <= 2
        if x_signed and w_signed:
            return 1.5 if small else 1.23
        if not x_signed and not w_signed:
            return 0.77 if small else 1.13
        return 1.0

    @property
    def weight_ram_style(self):
        """Where the weights are built, as Yosys is told (``rom_style``/``ram_style``): ``block`` (BRAM),
        ``distributed`` (LUT ROM or LUTRAM), or ``ultra``. ``auto`` resolves here, so that the estimate
        and the hardware agree: block RAM from :data:`AUTO_BRAM_MIN_DEPTH` words (a shallow memory wastes
        a block's depth), LUTs below. The compiler may move shallow weights to BRAM while the board's
        BRAM allows (``rtlgen.passes.place_memories``)."""
        if self.ram_style != "auto":
            return self.ram_style
        return "block" if self.wmem >= AUTO_BRAM_MIN_DEPTH else "distributed"

    def weight_memory_image(self):
        """WMEM words; word ``nf*SF + sf`` has element ``p*SIMD + s`` = W of channel nf*PE+p, row sf*SIMD+s."""
        w = self.weight_matrix().reshape(self.nf, self.pe, self.sf, self.simd).transpose(0, 2, 1, 3)
        return [int(v) for v in pack_words(w.reshape(self.wmem, self.pe * self.simd), self.weight_dtype)]

    def weight_stream_spec(self):
        """The memstream of mem_mode internal_decoupled."""
        return MemStreamSpec(self.wmem, self.weight_width, tuple(self.weight_memory_image()),
                             self.weight_ram_style, self.runtime_writeable_weights, self.weight_lut_bits)

    def external_weight_words(self, vectors):
        """What a producer must send on ``w`` for ``vectors`` input vectors (the image, once per vector)."""
        return self.weight_memory_image() * vectors

    @property
    def dsp_packing(self):
        """The field shift S when two lanes share each DSP48E1 (resType dsp, an MVAU whose lanes see the
        same input element, an even PE, operands narrow enough: :func:`layers.datapath.packing_shift`),
        else None."""
        if self.res_type != "dsp" or self.xnor or not self.replays_input or self.pe % 2:
            return None
        return packing_shift(self.input_dtype, self.weight_dtype)

    @property
    def accumulates_in_dsp(self):
        """With ``dsp_packing`` and SIMD 1, each DSP48E1 accumulates its two lanes over the fold in its P
        register, as FINN's ``mvu_8sx8u_dsp48`` does: P = H 2^S + L, where the low lane L outgrows its S
        bits and borrows from the high lane H. Two "canary" bits of P above the low field tell, each
        step, the carry c in {-1, 0, 1} the low field gave: their change minus (w_hi x) mod 4. The
        carries' sum k restores both at the end of the fold: L = k 2^S + P mod 2^S, H = P div 2^S - k.
        This replaces, per DSP, a split per product and two fabric accumulators by a 2-bit canary, a
        small counter and one subtraction per fold. With SIMD > 1 the SIMD sum would then add
        accumulator-wide values instead of products, which costs more than it saves: those keep the
        split per product."""
        return (self.dsp_packing is not None and self.simd == 1
                and self.dsp_packing + self.acc_shape.width <= DSP_P_BITS)

    @property
    def product_rows(self):
        """Partial-product rows per product when a lane's tree sums rows instead of products: fabric
        products with an operand wider than 4 bits (INT8 x UINT8: 8 rows). A multiplier in front of the
        tree would be three levels of carry chains after the weight memory in one cycle (~128 MHz by
        ``boards.timing`` behind a BRAM); as rows, the tree's registers every two levels cut it. 1: the
        lanes sum whole products."""
        wb, ib = self.weight_dtype.bitwidth(), self.input_dtype.bitwidth()
        if self.res_type != "lut" or self.xnor or min(wb, ib) < 2 or max(wb, ib) <= 4:
            return 1
        return min(wb, ib)

    @property
    def registers_products(self):
        """Products get a register of their own when they come from a DSP48 (its M register) or a
        multiplier of 4x4 bits or more; narrower ones (xnor, +-w, 2-bit) merge into the adder LUTs, and
        wider fabric ones are rows of the tree (``product_rows``)."""
        if self.xnor or self.product_rows > 1:
            return False
        narrow = min(self.input_dtype.bitwidth(), self.weight_dtype.bitwidth())
        return self.res_type == "dsp" or (narrow > 1 and self.input_dtype.bitwidth() * self.weight_dtype.bitwidth() >= 16)

    @property
    def registers_sum(self):
        """The lane sum gets a register before the accumulator where products are wide (DSP48, 4x4
        bits and more, rows) and the tree adds: the tree's last adder and the accumulator's would
        otherwise share a cycle (two carry chains in series, ~100 MHz on the xc7z020 by
        ``boards.timing``); and with ``offset_weights``, whose correction is one more adder after the tree."""
        if self.lean_accumulator:
            return False
        return ((self.registers_products or self.offset_weights) and self.simd > 1) or self.product_rows > 1

    @property
    def lean_accumulator(self):
        """``pipeline="latency"`` with SF = 1: the accumulator register takes the lane sum as it is (no
        adder of its own: nothing to accumulate), so it is the register the sum needs and ``registers_sum``
        would only add a cycle."""
        return self.pipeline == "latency" and self.sf == 1 and not self.accumulates_in_dsp

    @property
    def out_latency(self):
        """Cycles of the output FIFO: 2, or 1 with ``pipeline="latency"`` (``fall_through``)."""
        return output_fifo_spec(self.out_width, self.pipeline == "latency").latency

    @property
    def registers_operands(self):
        """The operands get a second register after the weight memory when it is block RAM: its
        clock-to-out (~2.5 ns) would otherwise start the products' path (~130 MHz behind a RAMB36 by
        ``boards.timing``, 150 with rows)."""
        return self.mem_mode == "internal_embedded" and self.weight_ram_style == "block"

    @property
    def tree_terms(self):
        """Terms of one lane's adder tree (the longest lane's with ``csd_products``)."""
        if self.csd_products:
            return max(1, int(np.max(self.csd_lane_terms())))
        return self.simd * self.product_rows

    @property
    def offset_weights(self):
        """Signed weights summed as unsigned ones (fabric MACs of an MVAU, n >= 2-bit two's-complement
        weights, m >= 2-bit unsigned inputs): ``sum_s w_s x_s = sum_s (w_s + 2^(n-1)) x_s - 2^(n-1) sum_s
        x_s``. ``w + 2^(n-1)`` is ``w`` with its sign bit inverted, the unsigned products need no sign
        extension in the adder tree, and ``sum_s x_s`` is one tree shared by all PE lanes (they see the
        same input elements). Yosys: 17 % fewer LUTs and a tenth of the CARRY4s for INT2 x UINT2, 32
        terms, 4 lanes (benchmarks/popcount.py).

        Signed m-bit inputs join in with ``offset_inputs``: the lanes multiply x_u = x + 2^(m-1) (the
        sign bit inverted), so the accumulator holds sum w x + 2^(m-1) rowsum(w), a constant per output
        channel that the stored thresholds absorb (each channel's row is raised by it when the spec is
        made). Only with a stored threshold table, fixed weights, and everything above.

        BIPOLAR weights w = 2b - 1 (b their stored bit) with m >= 2-bit inputs likewise: ``sum_s w_s x_s =
        2 sum_s b_s x_s - sum_s x_s``, the lanes summing selected inputs (an AND that the tree's first
        LUTs absorb) instead of negated ones (an inverter per bit and a carry per product)."""
        x = self.input_dtype
        unsigned_x = x.is_integer() and not x.signed() and x.bitwidth() >= 2
        return self._sums_unsigned_products() and (unsigned_x or self.offset_inputs or self.selects_bipolar_weights)

    def _sums_unsigned_products(self):
        w = self.weight_dtype
        signed_int = w.is_integer() and w.signed() and w.bitwidth() >= 2 and w != DataType["BIPOLAR"]
        return (self.offset_operands and self.res_type == "lut" and not self.xnor and self.replays_input and self.pe > 1
                and (signed_int or self.selects_bipolar_weights) and not self.csd_products)

    @property
    def selects_bipolar_weights(self):
        """``offset_weights`` with BIPOLAR weights: each lane sums the inputs its weights select, doubled."""
        return (self.weight_dtype == DataType["BIPOLAR"] and not self.xnor and self.input_dtype.bitwidth() >= 2
                and self.input_dtype.is_integer())

    @property
    def lane_input_dtype(self):
        """The datatype the lanes multiply: the input's, or with ``offset_inputs`` UINTm, the input with
        its sign bit inverted (x_u = x + 2^(m-1))."""
        if self.offset_inputs:
            return DataType[f"UINT{self.input_dtype.bitwidth()}"]
        return self.input_dtype

    @property
    def pipeline_depth(self):
        """Register stages from issuing a (vector, nf, sf) step to its output reaching the FIFO."""
        tree = (heap_cost(self.simd, self.heap_term_inputs)[2] if self.uses_heap
                else tree_stages(self.tree_terms, TREE_LEVELS_PER_STAGE)) + int(self.registers_sum)
        accumulator = 3 if self.accumulates_in_dsp else 1       # P, the carries' sum, the two lanes restored
        operands = int(self.registers_operands or self.registers_replayed_input)
        return 1 + operands + self.product_stages + tree + accumulator + self.activation_stages

    @property
    def uses_heap(self):
        """``popcount="heap"`` on a binary layer: each lane's popcount is a registered compressor heap
        (:mod:`layers.popcount`), about one LUT a term where the adder tree takes 1.5-2."""
        return self.popcount == "heap" and self.xnor

    @property
    def heap_term_inputs(self):
        """Signals behind each of the heap's terms: 1 where the agreement bits are registered
        (``weights_in_xnor``) or the weights constant, else 2 (an XNOR of an input and a weight bit,
        three to a LUT6 at the heap's first level)."""
        return 1 if self.weights_in_xnor or self.constant_weights else 2

    @property
    def registers_replayed_input(self):
        """With the heap, a replayed input word (a mux of the input register and the replay buffer) gets
        a register of its own beside the weights, so that each term (its XNOR, and with
        ``weights_in_xnor`` the weight ROM) stays a LUT6 function of one input bit."""
        return self.uses_heap and self.nf > 1 and not self.registers_operands

    @property
    def product_stages(self):
        """Register stages of the products: their own register (``registers_products``: a DSP's M), and
        with ``dsp_packing`` the packed weight's (the DSP's A), and where the lanes are split per product
        the DSP's P before the split and a register after it."""
        packed = self.dsp_packing is not None
        split = packed and not self.accumulates_in_dsp
        return (int(self.registers_products) + int(packed) + 2 * int(split) + 2 * int(self._single_dsp_products())
                + int(self.weights_in_xnor))

    def _single_dsp_products(self):
        """One product per DSP48E1 (resType dsp without packing): the operands get a register right at
        the DSP (its A and B: the input replay's mux or a LUT ROM's output would otherwise sit in front of
        the multiplier) and the product the P register after M, so that the adder tree starts from P's
        fast clock-to-out (without: ~150 MHz, M's output into the tree's first carry chain; Yosys, INT8,
        SIMD 16)."""
        wb, ib = self.weight_dtype.bitwidth(), self.input_dtype.bitwidth()
        return self.res_type == "dsp" and not self.xnor and min(wb, ib) > 1 and self.dsp_packing is None

    @property
    def activation_stages(self):
        """Register stages of the activation: the requantizer's, or one per threshold search step; with
        ``activation_groups`` G > 1, G more (the accumulators' copy, then one group of lanes a cycle)."""
        serial = self.activation_groups if self.activation_groups > 1 else 0
        if self.requant is not None:
            return serial + requant_stages(self.requant, self.activation_lanes, self.pipeline == "latency")
        return serial + self.table.stages if self.table is not None else 0

    @property
    def activation_lanes(self):
        """Activation units (requantizers or threshold searches): one per PE lane, or with
        ``shared_activation`` the fewest U, a divisor of PE, whose PE / U turns fit in a fold (<= SF
        cycles). An activation unit is busy one cycle in SF otherwise: where the lanes are many and SF is
        long (SIMD 1 x PE 392: 392 requantizers of 2 DSP48E1 each, busy one cycle in 512) one unit serves
        them all. The fold's accumulators are copied at its end and go through U units, U lanes a cycle
        (lane p in turn p // U); the output word leaves once the last turn is through."""
        if not self.shared_activation or self.table is None:
            return self.pe
        return min(u for u in range(1, self.pe + 1) if self.pe % u == 0 and self.pe // u <= self.sf)

    @property
    def activation_groups(self):
        """G = PE / ``activation_lanes``: the turns the lanes take at the activation units, 1 if unshared."""
        return self.pe // self.activation_lanes

    def activation_table(self):
        """The threshold table the hardware searches: ``datapath_table``, laid out for
        ``activation_lanes`` units (lane u of virtual fold f: channel f * U + u)."""
        if self.activation_groups == 1:
            return self.datapath_table
        table = self.datapath_table     # from the caller's array: the tables' memos (checks, ROM bits) hit
        return replace(table, pe=self.activation_lanes, thresholds=table._source)

    @property
    def latency(self):
        """Cycles from the last input word of a vector to its first output word being offered (SF=NF=1)."""
        return self.pipeline_depth + self.out_latency

    def timing(self, arrivals):
        """One (nf, sf) step per cycle, nf outer, sf inner; output word nf of a vector is offered
        ``latency`` cycles after its step (nf, SF-1), the pipeline never stalling (:mod:`layers.timing`).

        A VVAU (and an MVAU with NF = 1) reads an input word at every step: it takes words as they come.
        An MVAU with NF > 1 reads the vector's SF words at nf = 0 and replays them from its buffer for
        nf = 1 .. NF-1, one step a cycle whatever the input does: between the vector's last word and the
        next vector's first, (NF-1)*SF + 1 cycles. With mem_mode internal_decoupled the weight MemStream
        offers its first word at bench cycle 2, and a step needs a weight word: none is taken earlier;
        after that it keeps up, one word per cycle. With mem_mode external, ``arrivals[1]`` is the
        weight stream ``w`` (one word per step): a step needs both its weight word and, where it reads
        one, its input word."""
        vectors_per_frame = prod(self.num_input_vectors)
        sf, nf = self.sf, self.nf
        words_per_vector = sf * nf if not self.replays_input else sf
        frames = frames_of(arrivals[0], vectors_per_frame * words_per_vector)
        a = as_cycles(arrivals[0])
        if self.mem_mode == "external":
            return self._external_timing(a, arrivals, frames * vectors_per_frame)
        if self.mem_mode == "internal_decoupled":
            a = np.maximum(a, WEIGHT_STREAM_FIRST_CYCLE)
        if self.replays_input and nf > 1:
            gaps = np.ones(a.size, dtype=np.int64)
            gaps[::sf] = (nf - 1) * sf + 1
            reads = take_in_turn(a, gaps)
            ends = reads[sf - 1::sf, None] + sf * np.arange(nf, dtype=np.int64)      # per vector, per nf
            return Timing((reads,), ends.reshape(-1) + self.latency)
        reads = take_when_ready(a)
        return Timing((reads,), reads[sf - 1::sf] + self.latency)

    def _external_timing(self, a, arrivals, vectors):
        if len(arrivals) < 2:
            raise ValueError(f"{self.owner} mem_mode=external: timing needs the arrivals of the weight stream w "
                             f"as arrivals[1]")
        sf, nf = self.sf, self.nf
        w = as_cycles(arrivals[1])
        if w.size != vectors * sf * nf:
            raise ValueError(f"{w.size} weight arrivals are not {vectors} vectors of {sf * nf} words")
        ready = w.copy().reshape(vectors, nf * sf)
        reading = slice(0, sf) if self.replays_input else slice(None)      # the steps that read an input word
        ready[:, reading] = np.maximum(ready[:, reading], a.reshape(vectors, -1))
        steps = take_when_ready(ready.reshape(-1))
        reads = steps.reshape(vectors, nf * sf)[:, reading].reshape(-1)
        return Timing((reads, steps), steps[sf - 1::sf] + self.latency)

class DotProductUnit(wiring.Component):
    """The pipelined PE x SIMD dot-product engine with accumulators and optional thresholds.

    Members
    -------
    i : In(stream.Signature(spec.in_width))
    o : Out(stream.Signature(spec.out_width))
    w : In(stream.Signature(spec.weight_width))
        Only with ``mem_mode="external"``: the weight image, once per input vector.
    s_axilite : In(AXILiteSignature(...))
        Only with ``runtime_writeable_weights`` (the weight memstream's slave, FINN's address map).

    Takes one (nf, sf) step per cycle: ``spec.exp_cycles`` cycles per frame in steady state, with no
    bubbles between vectors or frames. Loop order per vector: nf outer, sf inner; the input word sf is
    read at nf = 0 and replayed from an SF-word buffer for nf > 0 (MVAU). Weights come from a memory
    in the layer (internal_embedded), a memstream beside it (internal_decoupled) or the ``w`` port.
    Operands read from a block RAM get a second register (``registers_operands``); products are
    registered, or for fabric products wider than 4 bits their partial-product rows enter the lane's
    tree (``product_rows``); the adder tree has a register every two levels, and the accumulator clears
    on sf = 0. ``i.ready`` and ``w.ready`` depend on the output FIFO's registered
    ready and on each other's ``valid`` (both are needed for a step), never on ``o.ready``.
    """

    def __init__(self, spec):
        self._spec = spec
        members = {
            "i": In(stream.Signature(spec.in_width)),
            "o": Out(stream.Signature(spec.out_width)),
        }
        if spec.mem_mode == "external":
            members["w"] = In(stream.Signature(spec.weight_width))
        if spec.runtime_writeable_weights:
            members["s_axilite"] = In(AXILiteSignature(spec.weight_stream_spec().axilite_addr_width))
        super().__init__(members)

    @property
    def spec(self):
        return self._spec

    def elaborate(self, platform):
        spec = self._spec
        m = Module()
        advance, fifo_in = output_stage(m, self.o, spec.out_width, fall_through=spec.pipeline == "latency")

        weights = self._weight_stream(m)
        sf, nf = Signal(range(spec.sf)), Signal(range(spec.nf))
        reads_input = (nf == 0) if spec.replays_input else C(1, 1)
        in_ok = ~reads_input | self.i.valid
        w_ok = weights.valid if weights is not None else C(1, 1)
        issue = advance & in_ok & w_ok
        m.d.comb += self.i.ready.eq(advance & reads_input & w_ok)
        if weights is not None:
            m.d.comb += weights.ready.eq(advance & in_ok)
        with m.If(issue):
            m.d.sync += sf.eq(wrapping_increment(sf, spec.sf))
            with m.If(sf == spec.sf - 1):
                m.d.sync += nf.eq(wrapping_increment(nf, spec.nf))

        # Stage 1: operands.
        v = register(m, advance, issue, name="v1", reset_less=False)
        x = self._input_word(m, advance, issue, sf, nf)
        w = self._weight_word(m, advance, issue, weights)
        first, last = register(m, advance, sf == 0, name="first1"), register(m, advance, sf == spec.sf - 1, name="last1")
        nfr = register(m, advance, nf, name="nf1")
        if spec.registers_operands or spec.registers_replayed_input:
            v, x, w, first, last, nfr = (register(m, advance, sig, name=f"{name}1b", reset_less=name != "v")
                                         for sig, name in ((v, "v"), (x, "x"), (w, "w"), (first, "first"),
                                                           (last, "last"), (nfr, "nf")))

        xs = data.View(data.ArrayLayout(spec.input_dtype.bitwidth(), len(x) // spec.input_dtype.bitwidth()), x)
        # weights_in_xnor: w is the word's address, the products read the ROM
        ws = w if spec.weights_in_xnor else data.View(data.ArrayLayout(spec.weight_dtype.bitwidth(), spec.pe * spec.simd), w)
        if spec.accumulates_in_dsp:
            v, accs, nfr = self._dsp_accumulators(m, advance, xs, ws, v, first, last, nfr)
        else:
            v, accs, nfr = self._fabric_accumulators(m, advance, xs, ws, v, first, last, nfr)

        if spec.table is None:
            payload = self._extend_lanes(m, accs)
        else:
            if spec.activation_groups > 1:
                v, accs, nfr = self._take_turns(m, advance, v, accs, nfr)
            if spec.requant is not None:
                v, counts = requantize(m, advance, v, accs, nfr, spec.requant, spec.activation_lanes,
                                       lean=spec.pipeline == "latency")
            else:
                v, counts = threshold_search(m, advance, v, accs, nfr, spec.activation_table(),
                                             ram_style=spec.ram_style_thresholds)
            outs = [activation_lane(c, spec.output_dtype, spec.act_val) for c in counts]
            v, payload = self._gather_turns(m, advance, v, outs) if spec.activation_groups > 1 else (v, Cat(outs))
        m.d.comb += [fifo_in.valid.eq(v), fifo_in.payload.eq(payload)]
        return m

    def _take_turns(self, m, advance, v, accs, nfr):
        """``shared_activation``: the fold's accumulators copied at its end, then U of them a cycle (lane
        p in turn p // U, unit p % U) for G turns; returns (valid, the U values, virtual fold nf * G +
        turn: lane u of it is channel (nf * G + turn) * U + u, as the activation's U-lane tables read)."""
        spec = self._spec
        g, units = spec.activation_groups, spec.activation_lanes
        copies = [Signal(a.shape(), name=f"turn_acc{p}", reset_less=True) for p, a in enumerate(accs)]
        turn, busy = Signal(range(g), name="turn"), Signal(name="turn_busy")
        # the virtual fold as a counter (folds come in order: fold nf's turns are nf * G .. nf * G + G - 1):
        # nf * G + turn computed would be a multiplier in front of the activation's word ROM (Yosys: a
        # DSP48E1 and a carry chain into the RAMB36 address, ~178 MHz by boards.timing at G = 98)
        cf = Signal(range(spec.nf * g), name="turn_cf")
        with m.If(advance):
            with m.If(v):           # a fold's end (>= SF >= G cycles after the last): a new copy, turn 0
                m.d.sync += [c.eq(a) for c, a in zip(copies, accs)] + [busy.eq(1), turn.eq(0)]
            with m.Elif(busy):
                m.d.sync += [turn.eq(wrapping_increment(turn, g)), busy.eq(turn != g - 1)]
            with m.If(busy):
                m.d.sync += cf.eq(wrapping_increment(cf, spec.nf * g))
        values = [Array(copies[k * units + u] for k in range(g))[turn] for u in range(units)]
        return busy, values, cf

    def _gather_turns(self, m, advance, v, outs):
        """The activation's outputs of turns 0 .. G-2 kept until the last turn's complete the word;
        returns (valid, payload)."""
        g = self._spec.activation_groups
        turn = Signal(range(g), name="turn_out")
        done = [Signal(len(Cat(outs)), name=f"turn_word{k}", reset_less=True) for k in range(g - 1)]
        with m.If(advance & v):
            m.d.sync += turn.eq(wrapping_increment(turn, g))
            with m.Switch(turn):
                for k in range(g - 1):
                    with m.Case(k):
                        m.d.sync += done[k].eq(Cat(outs))
        return v & (turn == g - 1), Cat(*done, *outs)

    def _fabric_accumulators(self, m, advance, xs, ws, v, first, last, nfr):
        """Products, the lanes' adder trees (registered every TREE_LEVELS_PER_STAGE levels) and one
        accumulator per lane; returns (valid at the end of a fold, accumulators, nf) of that stage."""
        spec = self._spec
        sums = []
        xs = self._lane_inputs(m, xs)
        correction = self._input_sum(m, advance, xs) if spec.offset_weights else None
        for p, prods in enumerate(self._products(m, advance, xs, ws)):
            if spec.uses_heap:
                total, stages = popcount_heap(m, advance, prods, term_inputs=spec.heap_term_inputs, name=f"sum{p}")
            else:
                total, stages = adder_tree(prods, m=m, advance=advance, levels_per_stage=TREE_LEVELS_PER_STAGE,
                                           name=f"sum{p}")
            if spec.csd_products:           # lanes of fewer terms: delayed to the longest lane's stages
                full = tree_stages(spec.tree_terms, TREE_LEVELS_PER_STAGE)
                total, stages = self._delay(m, advance, total, full - stages, f"sum{p}_pad"), full
            if correction is not None:      # BIPOLAR: 2 sum b x - sum x
                total = (total << int(spec.selects_bipolar_weights)) - correction
            sums.append(register(m, advance, total, name=f"sum{p}_r") if spec.registers_sum else total)
        depth = spec.product_stages + stages + int(spec.registers_sum)
        v = self._delay(m, advance, v, depth, "v", reset_less=False)
        first, last, nfr = (self._delay(m, advance, sig, depth, name)
                            for sig, name in ((first, "first"), (last, "last"), (nfr, "nf")))

        # Accumulate: clear on sf == 0 (acc <= Mux(clr, 0, acc) + sum maps into a DSP48E1 P register).
        accs = []
        for p, total in enumerate(sums):
            acc = Signal(spec.acc_shape, name=f"acc{p}", reset_less=True)
            with m.If(advance & v):
                m.d.sync += acc.eq(total if spec.lean_accumulator else Mux(first, 0, acc) + total)
            accs.append(acc)
        return (register(m, advance, v & last, name="v_acc", reset_less=False), accs,
                register(m, advance, nfr, name="nf_acc"))

    def _dsp_accumulators(self, m, advance, xs, ws, v, first, last, nfr):
        """``accumulates_in_dsp``: per lane pair one DSP48E1 (A: the packed weight's register, B: the
        input's, M, and P accumulating the fold), then the canary carries' sum beside a copy of P, then
        the two lanes restored; returns (valid at the end of a fold, accumulators, nf) of that stage."""
        spec = self._spec
        shift, width = spec.dsp_packing, spec.acc_shape.width
        carries_width = max(width - shift, 2)
        x = xs[0]
        x_a = register(m, advance, x, name="x_a")       # beside A, the packed weights' register

        def next_stage(ctl, tag):
            return {k: register(m, advance, sig, name=f"{k}_{tag}", reset_less=k != "v") for k, sig in ctl.items()}
        at_a = next_stage({"v": v, "first": first, "last": last, "nf": nfr}, "a")
        at_m = next_stage(at_a, "m")                                                  # beside the M register
        at_p = next_stage(at_m, "p")                                                  # beside P
        at_k = next_stage(at_p, "k")                                                  # beside the carries' sum
        accs = [None] * spec.pe
        for q in range(0, spec.pe, 2):
            w_lo, w_hi = ws[q], ws[q + 1]
            packed = self._packed_operand(m, advance, w_lo, w_hi, q)
            prod = register(m, advance, packed * element_value(x_a, spec.input_dtype), name=f"prod_{q}_{q + 1}")
            # (w_hi x) mod 4 from the operands' two low bits: what the canaries rise by without a carry
            high_mod4 = register(m, advance, register(m, advance, (w_hi[:2] * x[:2])[:2], name=f"canary_rise_a_{q}"),
                                 name=f"canary_rise_m_{q}")
            acc = Signal(signed(shift + width), name=f"P_{q}_{q + 1}", reset_less=True)
            before, rise = (Signal(2, name=f"{n}_{q}", reset_less=True) for n in ("canary_before", "canary_rise"))
            with m.If(advance & at_m["v"]):
                m.d.sync += [acc.eq(Mux(at_m["first"], 0, acc) + prod),
                             before.eq(Mux(at_m["first"], 0, acc[shift:shift + 2])), rise.eq(high_mod4)]
            carry = (acc[shift:shift + 2] - before - rise)[:2].as_signed()      # 0, 1 or 3 (-1)
            carries = Signal(signed(carries_width), name=f"carries_{q}", reset_less=True)
            low_field, high_part = (Signal(n, name=f"{name}_{q}", reset_less=True)
                                    for n, name in ((shift, "low_field"), (signed(width), "high_part")))
            with m.If(advance & at_p["v"]):
                m.d.sync += [carries.eq(Mux(at_p["first"], 0, carries) + carry),
                             low_field.eq(acc[:shift]), high_part.eq(acc[shift:])]
            accs[q] = register(m, advance, Cat(low_field, carries).as_signed(), name=f"acc{q}")
            accs[q + 1] = register(m, advance, high_part - carries, name=f"acc{q + 1}")
        accs = [a[:width].as_signed() if len(a) > width else a for a in accs]
        return (register(m, advance, at_k["v"] & at_k["last"], name="v_acc", reset_less=False), accs,
                register(m, advance, at_k["nf"], name="nf_acc"))

    def _products(self, m, advance, xs, ws):
        """Per lane, the SIMD products (registered where ``registers_products``), or with ``product_rows``
        their partial-product rows, product by product. With ``dsp_packing``
        lanes 2q and 2q+1 share one DSP48E1 per element: (w_{2q+1} 2^S + w_{2q}) * x, split after its
        register."""
        spec = self._spec
        w_dtype = spec.weight_dtype
        if spec.offset_weights and spec.selects_bipolar_weights:     # b = (w + 1) / 2: the stored bit
            w_dtype = DataType["BINARY"]
        elif spec.offset_weights:       # w + 2^(n-1): the sign bit inverted, read as unsigned
            n = w_dtype.bitwidth()
            ws = data.View(ws.shape(), wire(m, ws.as_value() ^ _sign_bits(n, len(ws)), name="w_offset"))
            w_dtype = DataType[f"UINT{n}"]
        weight = lambda p, s: ws[p * spec.simd + s]
        if spec.csd_products:           # constant weights: +-(x << k) per canonical signed digit
            w = spec.weight_matrix().astype(np.int64)       # (channels, elements), PE = channels here
            return [[(-t if sign < 0 else t)
                     for s in range(spec.simd)
                     for sign, k in csd_terms(int(w[p, s]))
                     for t in [shifted(element_value(xs[spec.lane_input_index(p, s)], spec.lane_input_dtype), k)]]
                    or [C(0, 1)] for p in range(spec.pe)]
        if spec.product_rows > 1:       # wide fabric products: their rows join the lane's pipelined tree
            return [[row for s in range(spec.simd)
                     for row in product_rows(xs[spec.lane_input_index(p, s)], spec.lane_input_dtype,
                                             weight(p, s), w_dtype)]
                    for p in range(spec.pe)]
        if spec.xnor:       # all lanes' agreement bits ~(x ^ w) as one XNOR of the words, on a wire
            x_lanes = Cat(xs[spec.lane_input_index(p, s)] for p in range(spec.pe) for s in range(spec.simd))
            if spec.weights_in_xnor:    # ROM read and XNOR in one LUT6 a bit, then a register
                m.submodules.weight_mem = rom = Memory(shape=unsigned(spec.weight_width), depth=spec.wmem,
                                                       init=spec.weight_memory_image(),
                                                       attrs={"rom_style": "distributed"})
                rd = rom.read_port(domain="comb")
                m.d.comb += rd.addr.eq(ws)
                agree = register(m, advance, ~(x_lanes ^ rd.data), name="agree")
            else:
                agree = wire(m, ~(x_lanes ^ ws.as_value()), name="agree")
            return [[agree[p * spec.simd + s] for s in range(spec.simd)] for p in range(spec.pe)]
        if spec.dsp_packing is None:
            # one product per DSP48E1: the operands registered right at the DSP (its A and B) and the
            # product twice (its M and P); fabric products get one register where registers_products
            single_dsp = spec._single_dsp_products()
            at_dsp = lambda value, name: register(m, advance, value, name=name) if single_dsp else value
            inputs = {k: at_dsp(xs[k], f"x_b_{k}")
                      for k in {spec.lane_input_index(p, s) for p in range(spec.pe) for s in range(spec.simd)}}
            lanes = [[product(inputs[spec.lane_input_index(p, s)], spec.lane_input_dtype,
                              at_dsp(weight(p, s), f"w_a_{p}_{s}"), w_dtype, xnor=spec.xnor, res_type=spec.res_type)
                      for s in range(spec.simd)] for p in range(spec.pe)]
            for k in range(int(spec.registers_products) + int(single_dsp)):
                lanes = [[register(m, advance, x, name=f"prod{k}_{p}_{s}") for s, x in enumerate(prods)]
                         for p, prods in enumerate(lanes)]
            return lanes
        shift, lanes = spec.dsp_packing, [[] for _ in range(spec.pe)]
        x_a = [register(m, advance, xs[s], name=f"x_a_{s}") for s in range(spec.simd)]    # beside A
        for q in range(0, spec.pe, 2):
            for s in range(spec.simd):
                packed = self._packed_operand(m, advance, weight(q, s), weight(q + 1, s), f"{q}_{s}")
                at_m = register(m, advance, packed * element_value(x_a[s], spec.input_dtype), name=f"prod_{q}_{q + 1}_{s}")
                at_p = register(m, advance, at_m, name=f"prod_p_{q}_{q + 1}_{s}")     # the DSP's P: faster out
                low, high = unpack_products(at_p, shift)
                # registered again: the split's borrow chain after the DSP's clock-to-out and the tree's
                # first two levels would be ~160 MHz (boards.timing)
                lanes[q].append(register(m, advance, low, name=f"prod_{q}_{s}"))
                lanes[q + 1].append(register(m, advance, high, name=f"prod_{q + 1}_{s}"))
        return lanes

    def _packed_operand(self, m, advance, w_lo, w_hi, tag):
        """The packed weight of a DSP pair, registered: its borrow is computed in fabric, so without a
        register of its own the DSP's A register could not be used (AREG=0, the borrow chain in front of
        the multiplier)."""
        spec = self._spec
        return register(m, advance, packed_weight(w_lo, w_hi, spec.weight_dtype, spec.dsp_packing), name=f"w_a_{tag}")

    def _lane_inputs(self, m, xs):
        """The input elements as the lanes multiply them: with ``offset_inputs`` their sign bits inverted
        (one XOR of the word, on a wire the lanes share)."""
        if not self._spec.offset_inputs:
            return xs
        n = self._spec.input_dtype.bitwidth()
        return data.View(xs.shape(), wire(m, xs.as_value() ^ _sign_bits(n, len(xs)), name="x_offset"))

    def _input_sum(self, m, advance, xs):
        """``2^(n-1) * sum_s x_s`` for ``offset_weights``, through the same register stages as a lane's
        products and tree."""
        spec = self._spec
        terms = [element_value(xs[s], spec.lane_input_dtype) for s in range(spec.simd)]
        if spec.registers_products:
            terms = [register(m, advance, t, name=f"x_{s}") for s, t in enumerate(terms)]
        total, stages = adder_tree(terms, m=m, advance=advance, levels_per_stage=TREE_LEVELS_PER_STAGE, name="xsum")
        total = self._delay(m, advance, total, tree_stages(spec.tree_terms, TREE_LEVELS_PER_STAGE) - stages, "xsum")
        return total if spec.selects_bipolar_weights else total << (spec.weight_dtype.bitwidth() - 1)

    def _extend_lanes(self, m, accs):
        """Accumulators sign- or zero-extended to the output element width."""
        ob = self._spec.output_dtype.bitwidth()
        lanes = []
        for p, acc in enumerate(accs):
            lane = Signal(ob, name=f"out{p}")
            m.d.comb += lane.eq(acc)        # Amaranth extends by the accumulator's signedness
            lanes.append(lane)
        return Cat(*lanes)

    def _weight_stream(self, m):
        spec = self._spec
        if spec.mem_mode == "external":
            return self.w
        if spec.mem_mode == "internal_decoupled":
            m.submodules.weights = streamer = MemStream(spec.weight_stream_spec())
            if spec.runtime_writeable_weights:
                wiring.connect(m, wiring.flipped(self.s_axilite), streamer.s_axilite)
            return streamer.o
        return None

    def _weight_word(self, m, advance, issue, weights):
        spec = self._spec
        if weights is not None:
            return register(m, advance, weights.payload, name="w1")
        if spec.weights_in_xnor:    # the address the word is read at (the products read it, in the XNOR's LUTs)
            addr = Signal(range(spec.wmem))
            with m.If(issue):
                m.d.sync += addr.eq(rom_address_next(addr, spec.wmem))
            return register(m, advance, addr, name="w_addr1")
        rd = rom_read_port(m, "weight_mem", spec.wmem, spec.weight_width, spec.weight_memory_image(),
                           spec.weight_ram_style, spec.weight_lut_bits)
        addr = Signal(range(spec.wmem))
        with m.If(issue):
            logic_rom = is_logic_rom(spec.weight_ram_style, spec.weight_lut_bits)
            m.d.sync += addr.eq(rom_address_next(addr, spec.wmem) if logic_rom else wrapping_increment(addr, spec.wmem))
        m.d.comb += [rd.addr.eq(addr), rd.en.eq(advance)]
        return rd.data

    def _input_word(self, m, advance, issue, sf, nf):
        spec = self._spec
        fresh = register(m, advance, self.i.payload, name="x1")
        if not spec.replays_input or spec.nf == 1:
            return fresh
        # The input vector's SF words, kept for the replays nf = 1 .. NF-1.
        m.submodules.replay = buf = Memory(shape=spec.in_width, depth=spec.sf, init=[])
        wr, rd = buf.write_port(), buf.read_port(domain="sync")
        m.d.comb += [wr.addr.eq(sf), wr.data.eq(self.i.payload), wr.en.eq(issue & (nf == 0)),
                     rd.addr.eq(sf), rd.en.eq(advance)]
        from_input = register(m, advance, nf == 0, name="from_input1")
        return wire(m, Mux(from_input, fresh, rd.data), name="x_word")

    @staticmethod
    def _delay(m, advance, signal, stages, name, reset_less=True):
        # The last stage has a reset, so that Yosys keeps it a flip-flop: a delay line mapped whole into
        # an SRL16E would start the accumulator's path with the SRL's slow clock-to-out (~1.5 ns).
        for k in range(stages):
            signal = register(m, advance, signal, name=f"{name}_d{k}", reset_less=reset_less and k < stages - 1)
        return signal

UNIT_FOLDING = {"PE": "pe", "SIMD": "simd", "mem_mode": "mem_mode", "ram_style": "ram_style",
                "ram_style_thresholds": "ram_style_thresholds", "resType": "res_type",
                "activation_style": "activation_style"}

REQUANT_CHOICE_STEPS = 15       # activation_style is an optimizer choice from 4-bit activations up (fewer: thresholds)


def activation_choices(params):
    """The optimizer's activation_style values for an MVAU/VVAU with ``params``: both forms where the
    thresholds have at least :data:`REQUANT_CHOICE_STEPS` steps, else none (thresholds, the default)."""
    thresholds = params.get("thresholds")
    if thresholds is None or np.shape(thresholds)[-1] < REQUANT_CHOICE_STEPS:
        return ()
    return ("thresholds", "requant")


def multiplier_kind(spec):
    """The kind of multiplier an MVAU / VVAU builds, as the cost model's calibration groups name it
    (``MVAU/lut``...): xnor (binary xnor-popcount), dsp (DSP48 products), select (1-bit operand: an adder
    of selected terms), or lut (LUT multipliers)."""
    if spec.xnor:
        return "xnor"
    bits = min(spec.input_dtype.bitwidth(), spec.weight_dtype.bitwidth())
    if spec.res_type == "dsp" and bits > 1:
        return "dsp"
    return "select" if bits == 1 else "lut"

def unit_finn_export(spec):
    """The FINN attributes an MVAU / VVAU derives (``model_hw.onnx``): its output datatype, whether it has
    an activation, whether its weights are XNOR."""
    return {"outputDataType": spec.output_dtype.name, "noActivation": int(spec.table is None),
            "binaryXnorMode": int(bool(spec.xnor))}

def lower_dot_product(ctx, node, t, op_type, codes, wscale, wdtype, geometry, *, spatial, bias, channel_axis):
    """A dot-product layer (MVAU, VVAU: spec fields ``geometry``, input_dtype, weight_dtype, weights and the
    activation's) for ``node`` on stream ``t``, with the float ops after it as thresholds (ctx.dot_product)."""
    def params(weights, weight_dtype, **fields):
        return dict(geometry, input_dtype=t.dtype, weight_dtype=weight_dtype, weights=weights, **fields)
    return ctx.dot_product(node, t, op_type, codes, wscale, wdtype, params, spatial=spatial, bias=bias,
                           channel_axis=channel_axis)

def finn_import_unit(ctx, attrs, params, folding):
    """MVAU's and VVAU's FINN attributes: noActivation=1 drops the thresholds and ActVal; the weights (and
    thresholds, with an activation) must be initializers."""
    if attrs.get("noActivation", 0):
        params.pop("thresholds", None)
        params.pop("act_val", None)
    elif "thresholds" not in params:
        raise ctx.error("noActivation=0 but no thresholds on input 2; legal: thresholds as an initializer, "
                        "or noActivation=1")
    if "weights" not in params:
        raise ctx.error("no weights; legal: the weight tensor as an initializer on input 1 (mem_mode "
                        "internal_embedded, internal_decoupled (const, decoupled in older FINN))")
