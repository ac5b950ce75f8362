"""The dot-product engine MVAU and VVAU share, as a spec: :class:`UnitSpec` (folding checks, datatypes,
weights and their memory, accumulator, activation, the datapath's structure as the spec decides it, timing).
Its datapath is :mod:`layers.dotproduct_unit`, its cost model :mod:`layers.dotproduct_cost`, the hooks both
ops declare alike :mod:`layers.dotproduct_hooks`. ``layers.mvau`` and ``layers.vvau`` each add their geometry.
"""

from functools import lru_cache
from math import prod

import numpy as np
from qonnx.core.datatype import DataType

from layers.datapath import (DSP_P_BITS, check_dtype, check_fits, dtype_for_range, dtype_range, packing_shift,
                             shape_for_range, tree_stages)
from layers.dotproduct_cost import unit_resource_estimate
from layers.dotproduct_latency import canonical_digits, digit_bits, registers_dsp_operands, registers_input, starts_requant
from layers.dotproduct_unit import TREE_LEVELS_PER_STAGE
from layers.fifo import output_fifo_spec
from layers.op import ArrayMemo, StreamContract
from layers.popcount import heap_stages, selects_constants
from layers.requant import requant_form
from layers.requant_hw import requant_stages
from layers.thresholding import ThresholdTable, check_activation
from layers.timing import Timing, as_cycles, frames_of, take_in_turn, take_when_ready
from memstream.memstream import BRAM_OR_LUT_STYLES, RAM_STYLES, MemStreamSpec, check_lut_bits
from memstream.packing import element_codes, pack_words

__all__ = ["UnitSpec", "threshold_table", "check_positive", "canonical_digits", "MEM_MODES", "POPCOUNTS", "XNOR_ROM_WORDS"]

MEM_MODES = ("internal_embedded", "internal_decoupled", "external")
PIPELINES = ("throughput", "latency", "distributed")   # pipeline: registers for the clock everywhere, the fewest
                                        # stages, or an MVAU's constant weights as bit heaps (layers.distributed)
RES_TYPES = ("auto", "lut", "dsp")
AUTO_DSP_BITS = 6               # resType auto: DSP48E1 multipliers when both operands are at least this wide
AUTO_BRAM_MIN_DEPTH = 65        # ram_style auto: weights in block RAM from this many words, else LUT ROM
XNOR_ROM_WORDS = (5, 32)        # weights_in_xnor: LUT ROMs of this many words read inside the XNOR's LUT6
POPCOUNTS = ("tree", "heap")    # popcount: a binary lane's sum as an adder tree or a registered compressor heap
BIPOLAR = DataType["BIPOLAR"]   # looked up once (a qonnx DataType[...] builds a new object each time)
WEIGHT_STREAM_FIRST_CYCLE = 2   # internal_decoupled: the MemStream offers its first word at this bench cycle
                                # (its read at the first cycle out of reset, a cycle in the read port)


def check_positive(owner, spec, *attrs):
    for attr in attrs:
        value = getattr(spec, attr)
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{owner} {attr} must be a positive integer, not {value!r}")


# What a spec derives from its node's weights and thresholds alone, whatever the folding: computed with
# a node's first spec and shared by the thousands the folding optimizer builds for its other foldings
# (keyed by the very arrays, :class:`layers.op.ArrayMemo`; a failed check is never remembered: it raises
# again with every spec).
_WEIGHT_CHECKS = ArrayMemo()     # weights already checked against a datatype
_ACC_RANGES = ArrayMemo()       # accumulator ranges of weights, per input datatype
_CONST_ROWS = ArrayMemo()       # per output channel, the canonical signed digits of its weights
_INPUT_OFFSETS = ArrayMemo()    # per weights: X0 * rowsum(w), what offset_inputs adds to each accumulator
_RAISED = ArrayMemo()           # per weights: {thresholds: the thresholds raised by those offsets}
_TABLES = ArrayMemo()           # per thresholds array: its ThresholdTable per channels, PE and value range


def threshold_table(owner, thresholds, channels, pe, value_range):
    """``ThresholdTable(owner, thresholds, channels, pe, value_range)``, one per thresholds array and the
    rest (a table is frozen: the specs of a node's foldings with one PE share it)."""
    key = (owner, channels, pe, tuple(value_range))
    return _TABLES.get(thresholds, key, lambda: ThresholdTable(owner, thresholds, channels, pe, value_range))


@lru_cache(maxsize=None)
def _fewest_units(pe, sf):
    """The fewest activation units U, a divisor of ``pe``, whose PE / U turns fit in ``sf`` cycles."""
    return min(u for u in range(1, pe + 1) if pe % u == 0 and pe // u <= sf)


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
        bipolar = BIPOLAR
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
            table = threshold_table(owner, self.thresholds, self.out_channels, self.pe, (lo, hi))
            object.__setattr__(self, "table", table)
            check_activation(owner, table, out, self.act_val)
            object.__setattr__(self, "requant", requant_form(owner, self.activation_style, self.thresholds, table,
                                                             pe=self.pe, acc_width=self.acc_shape.width))
        object.__setattr__(self, "offset_inputs", self._offsets_inputs())
        object.__setattr__(self, "datapath_table", self.table)
        if self.offset_inputs:      # the accumulator holds sum w x_u = sum w x + X0 rowsum(w): thresholds follow
            object.__setattr__(self, "datapath_table", threshold_table(owner, self._raised_thresholds(),
                                                                       self.out_channels, self.pe,
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
        bits = self.input_dtype.bitwidth()
        return _INPUT_OFFSETS.get(self.weights, (type(self).__name__, "input offsets", bits),
                                  lambda: (1 << (bits - 1)) * self.weight_matrix().astype(np.int64).sum(axis=1))

    def _raised_thresholds(self):
        """The table's thresholds raised by :meth:`_input_offset_per_channel`: one array per weights and
        thresholds, so that the datapath table's own memos (checks, ROM bits, costs) hit for every folding."""
        offsets = self._input_offset_per_channel()
        per_weights = _RAISED.get(self.weights, (type(self).__name__, "raised", self.input_dtype.bitwidth()),
                                  ArrayMemo)
        return per_weights.get(self.thresholds, (self.owner, self.out_channels),
                               lambda: self.table.thresholds + offsets[:, None])

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

    @property
    def registers_input(self):  # the issue stage's register (:func:`layers.dotproduct_latency.registers_input`)
        return registers_input(self, self.dsp_packing is not None or self.uses_heap)

    def resource_estimate(self):
        """7-series cost before synthesis (:func:`layers.dotproduct_cost.unit_resource_estimate`)."""
        return unit_resource_estimate(self)

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
                and w != BIPOLAR and x != BIPOLAR)

    def csd_lane_terms(self):
        """Per output channel, the terms of its ``csd_products`` tree."""
        return _CONST_ROWS.get(self.weights, (type(self).__name__, "rows"),
                               lambda: canonical_digits(self.weight_matrix()).sum(axis=1))

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
    def chains_in_dsp(self):
        """With ``dsp_packing``, SIMD > 1 and the throughput pipeline, a lane pair's SIMD DSP48E1s form a
        chain (``DotProductUnit._dsp_chain``): each adds its packed product to the previous one's P (the
        cascade), so the pair's step sum needs no fabric adder tree; one fabric accumulator per pair, and
        canary bits restore the two lanes (as ``accumulates_in_dsp``)."""
        return (self.dsp_packing is not None and self.simd > 1 and self.pipeline == "throughput"
                and self.dsp_packing + self.acc_shape.width <= DSP_P_BITS)

    @property
    def chain_column_roms(self):
        """A ``chains_in_dsp`` layer's embedded weights as one ROM per column, read at the address delayed a
        cycle per column: the skew costs address flip-flops, not the weights'."""
        return (self.chains_in_dsp and self.mem_mode == "internal_embedded" and not self.weight_lut_bits
                and not self.runtime_writeable_weights)

    @property
    def booth_products(self):
        """Fabric products of 8-bit two's-complement weights and unsigned inputs (res_type lut, fixed weights) as
        radix-4 Booth rows (:func:`layers.datapath.booth_rows`): four rows a product instead of eight, the lanes'
        trees summing them; what the rows leave out depends on the weights alone, so each lane's accumulator
        starts a fold at its channel's sum of :func:`layers.datapath.booth_offset` instead of 0. Yosys, UINT8 x
        INT8, a lane of SIMD 8 with its tree: 554 LUT against 858."""
        w, x = self.weight_dtype, self.input_dtype
        return (self.res_type == "lut" and not self.xnor and self.pipeline == "throughput"
                and self.offset_operands and self.replays_input and self.mem_mode != "external"
                and self.weights is not None and not self.runtime_writeable_weights
                and w.is_integer() and w.signed() and w.bitwidth() == 8 and w != BIPOLAR
                and x.is_integer() and not x.signed() and x.bitwidth() >= 2)

    @property
    def product_rows(self):
        """Partial-product rows per product when a lane's tree sums rows instead of products: fabric
        products with an operand wider than 4 bits (INT8 x UINT8: 8 rows). A multiplier in front of the
        tree would be three levels of carry chains after the weight memory in one cycle (~128 MHz by
        ``boards.timing`` behind a BRAM); as rows, the tree's registers every two levels cut it. 1: the
        lanes sum whole products."""
        wb, ib = self.weight_dtype.bitwidth(), self.input_dtype.bitwidth()
        if self.booth_products:         # a row per radix-4 digit
            return wb // 2
        if self.res_type != "lut" or self.xnor or min(wb, ib) < 2 or max(wb, ib) <= 4:
            return 1
        return -(-ib // digit_bits(self)) if digit_bits(self) else min(wb, ib)    # fewer: x's digits x w

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
        if self.lean_accumulator or self.chains_in_dsp:
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
        """The operands get a second register after the weight memory when it is block RAM: its clock-to-out
        (~2.5 ns) would otherwise start the products' path (~130 MHz behind a RAMB36 by ``boards.timing``)."""
        return self.mem_mode == "internal_embedded" and self.weight_ram_style == "block"

    @property
    def tree_levels_per_stage(self):    # Booth rows (LUT, ~20-bit sums): an adder a cycle (two, and the row: ~163 MHz)
        return 1 if self.booth_products else TREE_LEVELS_PER_STAGE

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
        signed_int = w.is_integer() and w.signed() and w.bitwidth() >= 2 and w != BIPOLAR
        return (self.offset_operands and self.res_type == "lut" and not self.xnor and self.replays_input and self.pe > 1
                and (signed_int or self.selects_bipolar_weights)      # digit rows: signed ROM rows, no correction
                and not (self.csd_products or self.booth_products or digit_bits(self)))

    @property
    def selects_bipolar_weights(self):
        """``offset_weights`` with BIPOLAR weights: each lane sums the inputs its weights select, doubled."""
        return (self.weight_dtype == BIPOLAR and not self.xnor and self.input_dtype.bitwidth() >= 2
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
        tree = (heap_stages(self) if self.uses_heap
                else 0 if self.chains_in_dsp else tree_stages(self.tree_terms, self.tree_levels_per_stage)) + int(self.registers_sum)
        # P (or the chain's sum accumulated in fabric), the carries' sum, the two lanes restored
        accumulator = 3 if self.accumulates_in_dsp or self.chains_in_dsp else 1
        operands = int(self.registers_operands or self.registers_replayed_input)
        return int(self.registers_input) + operands + self.product_stages + tree + accumulator + self.activation_stages

    @property
    def uses_heap(self):
        """``popcount="heap"`` on a binary layer (or of constant BIPOLAR weights: ``selects_constants``): each
        lane's sum is a registered compressor heap (:mod:`layers.popcount`), fewer LUTs than the tree's."""
        return self.popcount == "heap" and (self.xnor or selects_constants(self))

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
        split = packed and not self.accumulates_in_dsp and not self.chains_in_dsp
        chain = self.simd if self.chains_in_dsp else 0      # the skew (SIMD - 1) and the last DSP's P
        return (int(self.registers_products) + int(packed) + 2 * int(split) + chain + int(self.single_dsp_products())
                + int(self.registers_dsp_operands) + int(self.weights_in_xnor))

    @property
    def registers_dsp_operands(self):   # :func:`layers.dotproduct_latency.registers_dsp_operands`
        return registers_dsp_operands(self)

    def single_dsp_products(self):
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
            return serial + requant_stages(self.requant, self.activation_lanes, self.pipeline == "latency", starts_requant(self))
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
        return _fewest_units(self.pe, self.sf)

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
        return threshold_table(table.owner, table._source, table.channels, self.activation_lanes, table.value_range)

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
