"""The dot-product engine's datapath, :class:`DotProductUnit`: the pipelined PE x SIMD Amaranth component
MVAU and VVAU build from their :class:`layers.dotproduct.UnitSpec` (operands, products or their rows, the
lanes' adder trees or popcount heaps, accumulators in fabric or in DSP48E1 pairs, the activation), with
the helpers only it needs. What it builds is decided by the spec; the spec's cost model is
:mod:`layers.dotproduct_cost`."""

import numpy as np
from amaranth.hdl import Array, C, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from qonnx.core.datatype import DataType

from layers.datapath import (adder_tree, booth_rows, element_value, fold_starts, output_stage, packed_weight, product, product_rows,
                             register, shifted, tree_stages, unpack_products, wire, wrapping_increment)
from layers.dotproduct_latency import csd_terms, digit_bits, lane_digit_rows, started_acc_shape, starts_requant, unregistered_operands
from layers.popcount import class_heaps, class_starts, counts_classes, heap_stages, heap_sum, popcount_heap, selected_elements
from layers.requant_hw import accumulator_offsets, requantize, requantize_started
from layers.thresholding import activation_lane, threshold_search
from memstream.axilite import AXILiteSignature
from memstream.memstream import MemStream, is_logic_rom, rom_address_next, rom_read_port

__all__ = ["DotProductUnit", "TREE_LEVELS_PER_STAGE", "chain_canary_bits", "csd_terms", "keeps_sums"]

TREE_LEVELS_PER_STAGE = 2       # adder levels between pipeline registers


def _sign_bits(bits, elems):
    """The mask of the sign bit of each of ``elems`` packed ``bits``-bit elements."""
    return C(sum(1 << (e * bits + bits - 1) for e in range(elems)), bits * elems)


def keeps_sums(spec):
    """Whether each lane's adder tree keeps every sum a carry chain of its own (``adder_tree(keep=True)``):
    where its terms are wide, partial-product rows of fabric products of 4+ rows (``product_rows``; two
    rows, an INT2 weight's, not measured) or DSP48E1 products split per lane pair, which Yosys would
    otherwise merge into carry-save LUT logic."""
    return spec.product_rows >= 4 or (spec.dsp_packing is not None and not spec.accumulates_in_dsp
                                      and not spec.chains_in_dsp)


def chain_canary_bits(spec):
    """Canary bits k of a ``chains_in_dsp`` pair: each step, the low field's carry into the high lane is
    floor((low + L) / 2^S) for the accumulator's low field (0 <= low < 2^S) plus the step's low-lane sum L
    (SIMD products of the low lane's weight); k two's-complement bits must hold every such carry."""
    shift, x, w = spec.dsp_packing, spec.input_dtype, spec.weight_dtype
    corners = [a * b for a in (int(x.min()), int(x.max())) for b in (int(w.min()), int(w.max()))]
    lo, hi = (spec.simd * min(corners)) >> shift, ((1 << shift) - 1 + spec.simd * max(corners)) >> shift
    k = 2
    while lo < -(1 << (k - 1)) or hi > (1 << (k - 1)) - 1:
        k += 1
    return k


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
        # output_fifo=False (no out_latency): straight into a layer that takes a word whenever this may advance
        advance, fifo_in = (output_stage(m, self.o, spec.out_width, fall_through=spec.pipeline == "latency")
                            if spec.out_latency else (self.o.ready, self.o))

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

        # Stage 1: operands (none with pipeline="latency" where the word and the weights come as they are)
        columns = self._column_weight_words(m, advance, issue) if spec.chain_column_roms else None
        if not spec.registers_input:
            v, x, w, first, last, nfr, self._step_addr = unregistered_operands(m, spec, self.i.payload, advance, issue, sf, nf)
        else:   # the word (or the replay buffer's), the weights, the step's flags: registered
            v = register(m, advance, issue, name="v1", reset_less=False)
            x = self._input_word(m, advance, issue, sf, nf)
            w = C(0, 1) if columns is not None else self._weight_word(m, advance, issue, weights)
            first, last = register(m, advance, sf == 0, name="first1"), register(m, advance, sf == spec.sf - 1, name="last1")
            nfr = register(m, advance, nf, name="nf1")
        if spec.registers_operands or spec.registers_replayed_input:
            v, x, w, first, last, nfr = (register(m, advance, sig, name=f"{name}1b", reset_less=name != "v")
                                         for sig, name in ((v, "v"), (x, "x"), (w, "w"), (first, "first"),
                                                           (last, "last"), (nfr, "nf")))

        xs = data.View(data.ArrayLayout(spec.input_dtype.bitwidth(), len(x) // spec.input_dtype.bitwidth()), x)
        # weights_in_xnor: w is the word's address, the products read the ROM
        ws = (w if spec.weights_in_xnor or columns is not None
              else data.View(data.ArrayLayout(spec.weight_dtype.bitwidth(), spec.pe * spec.simd), w))
        if spec.accumulates_in_dsp:
            v, accs, nfr = self._dsp_accumulators(m, advance, xs, ws, v, first, last, nfr)
        elif spec.chains_in_dsp:
            v, accs, nfr = self._dsp_chain(m, advance, xs, columns or self._skewed_columns(m, advance, ws),
                                           v, first, last, nfr)
        else:
            v, accs, nfr = self._fabric_accumulators(m, advance, xs, ws, v, first, last, nfr)

        if spec.table is None:
            payload = self._extend_lanes(m, accs)
        else:
            if spec.activation_groups > 1:
                v, accs, nfr = self._take_turns(m, advance, v, accs, nfr)
            if spec.requant is not None and starts_requant(spec):      # the offsets are in the accumulators
                v, counts = requantize_started(m, advance, v, accs, spec.requant)
            elif spec.requant is not None:
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
        # DSP48E1 and a carry chain into the RAMB36 address, ~178 MHz by boards.timing at G = 98); rom_address_next:
        # a LUT word ROM behind an incrementer's CARRY4 was the generator's MVAU_0 path (~174 MHz, 230 without)
        cf = Signal(range(spec.nf * g), name="turn_cf")
        with m.If(advance):
            with m.If(v):           # a fold's end (>= SF >= G cycles after the last): a new copy, turn 0
                m.d.sync += [c.eq(a) for c, a in zip(copies, accs)] + [busy.eq(1), turn.eq(0)]
            with m.Elif(busy):
                m.d.sync += [turn.eq(wrapping_increment(turn, g)), busy.eq(turn != g - 1)]
            with m.If(busy):
                m.d.sync += cf.eq(rom_address_next(cf, spec.nf * g))
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
        selects = spec.uses_heap and not spec.xnor or counts_classes(spec)
        if selects and counts_classes(spec):
            sums, stages = self._class_heaps(m, advance, xs, ws)
        elif selects:
            sums, stages = self._selected_heaps(m, advance, xs)
        correction = self._input_sum(m, advance, xs) if spec.offset_weights and not selects else None
        started = accumulator_offsets(spec.requant, spec.pe) if starts_requant(spec) else None
        acc_shape = started_acc_shape(spec) if started else spec.acc_shape
        c_starts = ([register(m, advance, c, name=f"c_start{p}") for p, c in    # SF = 1: the offsets in the DSPs' C
                     enumerate(fold_starts(spec, nfr, started, acc_shape))] if started and spec.sf == 1 else None)
        for p, prods in enumerate([] if selects else self._products(m, advance, xs, ws, c_starts)):
            if spec.uses_heap:
                total, stages = popcount_heap(m, advance, prods, term_inputs=spec.heap_term_inputs, name=f"sum{p}")
            else:
                total, stages = adder_tree(prods, m=m, advance=advance, levels_per_stage=spec.tree_levels_per_stage,
                                           name=f"sum{p}", keep=keeps_sums(spec))
            if spec.csd_products:           # lanes of fewer terms: delayed to the longest lane's stages
                full = tree_stages(spec.tree_terms, TREE_LEVELS_PER_STAGE)
                total, stages = self._delay(m, advance, total, full - stages, f"sum{p}_pad"), full
            if correction is not None:      # BIPOLAR: 2 sum b x - sum x
                total = (total << int(spec.selects_bipolar_weights)) - correction
            sums.append(register(m, advance, total, name=f"sum{p}_r") if spec.registers_sum else total)
        depth = spec.product_stages + stages + int(spec.registers_sum)
        v = self._delay(m, advance, v, depth, "v", reset_less=False)
        first, last = (self._delay(m, advance, sig, depth, name) for sig, name in ((first, "first"), (last, "last")))
        # Accumulate: clear on sf == 0 (acc <= Mux(clr, 0, acc) + sum maps into a DSP48E1 P register). Booth rows
        # start a fold from their channel's offset: a constant, or one per nf, a LUT ROM on nf read a stage early
        # and registered (read beside the accumulator, the ROM's LUTs and the accumulator's carry chain were one
        # cycle: ~189 MHz by the register-to-register estimate, the generator's MVAU_1)
        early = int(spec.booth_products and spec.nf > 1 and depth > 0)
        nf_early = self._delay(m, advance, nfr, depth - early, "nf")
        nfr = register(m, advance, nf_early, name=f"nf_d{depth - 1}") if early else nf_early
        starts = ([register(m, advance, s, name=f"acc_start{p}") for p, s in enumerate(fold_starts(spec, nf_early))]
                  if early else fold_starts(spec, nfr) if spec.booth_products
                  else fold_starts(spec, nfr, class_starts(spec)) if counts_classes(spec)
                  else fold_starts(spec, nfr, started, acc_shape) if started and spec.sf > 1 else [None] * spec.pe)
        accs = []
        for p, total in enumerate(sums):
            acc = Signal(acc_shape, name=f"acc{p}", reset_less=True)
            with m.If(advance & v):
                # SF = 1: every step starts a fold, the lane sum is the accumulator (no adder)
                m.d.sync += acc.eq(self._accumulated(acc, total, first, starts[p]))
            accs.append(acc)
        return (register(m, advance, v & last, name="v_acc", reset_less=False), accs,
                register(m, advance, nfr, name="nf_acc"))

    def _class_heaps(self, m, advance, xs, ws):
        """``counts_classes``: the lanes' terms counted by classes (:func:`layers.popcount.class_heaps`)."""
        spec = self._spec
        lanes = [[xs[spec.lane_input_index(p, s)] for s in range(spec.simd)] for p in range(spec.pe)]
        return class_heaps(m, advance, lanes, lambda i: ws[i], spec, spec.acc_shape.width)

    def _selected_heaps(self, m, advance, xs):
        """``uses_heap`` with constant BIPOLAR weights: lane p's sum_s w_s x_s as 2 S - X over its +1s or
        X - 2 S over its -1s (the smaller set, :func:`layers.popcount.selected_elements`), S a heap of the
        selected inputs' bits (plain bits: no AND, the weights are constants), X = sum_s x_s one heap all
        lanes share; every sum delayed to the deepest heap, then registered (``registers_sum``) after the
        subtraction. Returns (lane sums, register stages)."""
        spec = self._spec
        bits, depth = spec.lane_input_dtype.bitwidth(), heap_stages(spec)
        x_bits = lambda elems: [[xs[s][j] for s in elems] for j in range(bits)]
        shared, stages = heap_sum(m, advance, x_bits(range(spec.simd)), name="xsum")
        shared = self._delay(m, advance, shared, depth - stages, "xsum_pad")
        totals = []
        for p, (elems, plus) in enumerate(selected_elements(spec.weight_matrix())):
            total, stages = heap_sum(m, advance, x_bits(elems), name=f"sum{p}")
            total = self._delay(m, advance, total, depth - stages, f"sum{p}_pad") << 1
            total = total - shared if plus else shared - total
            totals.append(register(m, advance, total, name=f"sum{p}_r") if spec.registers_sum else total)
        return totals, depth

    def _accumulated(self, acc, total, first, start):
        """The accumulator's next value: the lane sum added to it, or on a fold's first step to ``start``
        (None: 0); SF = 1 or the lean accumulator: the lane sum (plus ``start``) is the accumulator."""
        spec = self._spec
        if spec.lean_accumulator or spec.sf == 1:
            return total if start is None else total + start
        return Mux(first, 0 if start is None else start, acc) + total

    def _dsp_accumulators(self, m, advance, xs, ws, v, first, last, nfr):
        """``accumulates_in_dsp``: per lane pair one DSP48E1 (A: the packed weight's register, B: the
        input's, M, and P accumulating the fold), then the canary carries' sum beside a copy of P, then
        the two lanes restored; returns (valid at the end of a fold, accumulators, nf) of that stage."""
        spec = self._spec
        width = spec.acc_shape.width
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
            accs[q], accs[q + 1] = self._lane_pair(m, advance, prod, high_mod4, 2, at_m, at_p, q, f"P_{q}_{q + 1}")
        accs = [a[:width].as_signed() if len(a) > width else a for a in accs]
        return (register(m, advance, at_k["v"] & at_k["last"], name="v_acc", reset_less=False), accs,
                register(m, advance, at_k["nf"], name="nf_acc"))

    def _lane_pair(self, m, advance, addend, rise, k, at_sum, at_carries, q, acc_name):
        """Two lanes packed in one sum (low field ``shift`` bits, the high lane above): ``addend`` summed
        over the fold, with k canary bits above the low field against ``rise`` (what they rise by without
        a carry from the low lane, mod 2^k); the carries' sum restores both lanes at the fold's end.
        Returns the (low, high) lane accumulators, registered."""
        spec = self._spec
        shift, width = spec.dsp_packing, spec.acc_shape.width
        acc = Signal(signed(shift + width), name=acc_name, reset_less=True)
        # the canaries without a carry (before the step plus its rise) summed beside the accumulator (speed)
        expected = Signal(k, name=f"canary_expected_{q}", reset_less=True)
        with m.If(advance & at_sum["v"]):
            m.d.sync += [acc.eq(Mux(at_sum["first"], 0, acc) + addend),
                         expected.eq(Mux(at_sum["first"], 0, acc[shift:shift + k]) + rise)]
        carry = (acc[shift:shift + k] - expected)[:k].as_signed()
        carries = Signal(signed(max(width - shift, k)), name=f"carries_{q}", reset_less=True)
        low_field, high_part = (Signal(bits, name=f"{name}_{q}", reset_less=True)
                                for bits, name in ((shift, "low_field"), (signed(width), "high_part")))
        with m.If(advance & at_carries["v"]):
            m.d.sync += [carries.eq(Mux(at_carries["first"], 0, carries) + carry),
                         low_field.eq(acc[:shift]), high_part.eq(acc[shift:])]
        return (register(m, advance, Cat(low_field, carries).as_signed(), name=f"acc{q}"),
                register(m, advance, high_part - carries, name=f"acc{q + 1}"))

    def _dsp_chain(self, m, advance, xs, columns, v, first, last, nfr):
        """``chains_in_dsp``: per lane pair, SIMD DSP48E1s in a chain. ``columns[s]`` is column s's weight
        word (PE elements), s cycles late (its own ROM read s cycles later, or delayed): with the input
        element delayed as much, it reaches the DSP's A register packed and B, its product the M
        register, and its P holds the previous column's P plus that product (the cascade: PCOUT to
        PCIN), so the last P is the step's sum Q = H 2^S + L of the pair's two lanes. A fabric
        accumulator sums Q over the fold; k canary bits above its low field, against the step's (sum_s
        w_hi x) mod 2^k, tell each step's carry from the low lane into the high one; the carries' sum
        restores both lanes at the fold's end (as ``_dsp_accumulators``). Returns (valid at the end of a
        fold, accumulators, nf) of that stage."""
        spec = self._spec
        shift, width, n = spec.dsp_packing, spec.acc_shape.width, spec.simd
        k = chain_canary_bits(spec)
        total = shift + width                   # the pair's sums, modulo 2^total (both lanes fit)
        # the skew: flip-flops with a reset, so that Yosys keeps them out of SRLs (LUTs)
        xd = [self._delay(m, advance, xs[s], s, f"x_skew{s}", reset_less=False) for s in range(n)]
        x_b = [register(m, advance, xd[s], name=f"x_b_{s}") for s in range(n)]     # the DSPs' B

        def at(ctl, stages, tag):
            return {key: self._delay(m, advance, sig, stages, f"{key}_{tag}", reset_less=key != "v")
                    for key, sig in ctl.items()}
        at_q = at({"v": v, "first": first, "last": last, "nf": nfr}, n + 2, "q")    # beside the chain's last P
        at_acc = at(at_q, 1, "acc")                                                 # beside the accumulator
        at_k = at(at_acc, 1, "k")                                                   # beside the carries' sum
        accs = [None] * spec.pe
        for q in range(0, spec.pe, 2):
            chain = rises = None
            for s in range(n):
                w_lo, w_hi = columns[s][q], columns[s][q + 1]
                a = register(m, advance, packed_weight(w_lo, w_hi, spec.weight_dtype, shift), name=f"w_a_{q}_{s}")
                prod = register(m, advance, a * element_value(x_b[s], spec.input_dtype), name=f"prod_{q}_{s}")
                step = prod if chain is None else (chain + prod)[:total].as_signed()
                chain = register(m, advance, step, name=f"P_{q}_{s}")                          # the DSP's P
                # (w_hi x) mod 2^k of column s registered (beside A), then added to the columns' before it (beside
                # P): not a SIMD-term tree in one cycle (Yosys sta: 8 LUT levels, ~134 MHz at SIMD 16)
                rise = register(m, advance, (self._low_bits(m, w_hi, spec.weight_dtype, k, f"canary_w_{q}_{s}")
                                             * self._low_bits(m, xd[s], spec.input_dtype, k, f"canary_x_{q}_{s}"))[:k],
                                name=f"canary_p_{q}_{s}")
                rises = register(m, advance, rise if rises is None else (rises + rise)[:k], name=f"canary_{q}_{s}")
            rise = self._delay(m, advance, rises, 1, f"canary_rise_{q}")   # (sum_s w_hi x) mod 2^k beside Q
            accs[q], accs[q + 1] = self._lane_pair(m, advance, chain, rise, k, at_q, at_acc, q, f"Q_acc_{q}")
        accs = [a[:width].as_signed() if len(a) > width else a for a in accs]
        return (register(m, advance, at_k["v"] & at_k["last"], name="v_acc", reset_less=False), accs,
                register(m, advance, at_k["nf"], name="nf_acc"))

    def _skewed_columns(self, m, advance, ws):
        """Column s's weights (lane p's element p SIMD + s of the word) delayed s cycles, in flip-flops with
        a reset (kept out of SRLs): the chain's weights where the word comes whole (block RAM split by
        ``weight_lut_bits``, a weight stream)."""
        spec = self._spec
        wb = spec.weight_dtype.bitwidth()
        layout = data.ArrayLayout(wb, spec.pe)
        return [data.View(layout, self._delay(m, advance, Cat(ws[p * spec.simd + s] for p in range(spec.pe)), s,
                                              f"w_skew{s}", reset_less=False))
                for s in range(spec.simd)]

    def _column_weight_words(self, m, advance, issue):
        """``chain_column_roms``: one ROM per weight column s (its PE elements of each word), read at the
        weight address delayed s cycles, so that column s's word comes s cycles after column 0's with no
        data flip-flops (a few address bits per column instead); each read like ``_weight_word``'s."""
        spec = self._spec
        wb, n = spec.weight_dtype.bitwidth(), spec.simd
        addr = Signal(range(spec.wmem), name="w_addr")
        logic_rom = is_logic_rom(spec.weight_ram_style)
        with m.If(issue):
            m.d.sync += addr.eq(rom_address_next(addr, spec.wmem) if logic_rom else wrapping_increment(addr, spec.wmem))
        image = spec.weight_memory_image()
        mask = (1 << wb) - 1
        layout = data.ArrayLayout(wb, spec.pe)
        columns = []
        for s in range(n):
            col_image = [sum(((word >> ((p * n + s) * wb)) & mask) << (p * wb) for p in range(spec.pe))
                         for word in image]
            rd = rom_read_port(m, f"weight_mem{s}", spec.wmem, spec.pe * wb, col_image, spec.weight_ram_style)
            m.d.comb += [rd.addr.eq(addr), rd.en.eq(advance)]
            word = register(m, advance, rd.data, name=f"w1b_{s}") if spec.registers_operands else rd.data
            columns.append(data.View(layout, word))
            addr = register(m, advance, addr, name=f"w_addr_skew{s + 1}", reset_less=False)
        return columns

    @staticmethod
    def _low_bits(m, bits, dtype, k, name):
        """The element's value modulo 2^k (sign- or zero-extended first where it has fewer than k bits)."""
        if len(bits) >= k:
            return bits[:k]
        sig = Signal(k, name=name)
        m.d.comb += sig.eq(element_value(bits, dtype))
        return sig

    def _products(self, m, advance, xs, ws, c_starts=None):
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
        if spec.booth_products:         # radix-4 Booth rows: half the shift-add rows
            return [[row for s in range(spec.simd) for row in booth_rows(xs[spec.lane_input_index(p, s)], weight(p, s))]
                    for p in range(spec.pe)]
        if digit_bits(spec):            # x's digits times the weight word read at the step: a LUT6 a row bit
            return lane_digit_rows(m, spec, xs, self._step_addr)
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
            single_dsp = spec.single_dsp_products()
            at_dsp = lambda value, name: register(m, advance, value, name=name) if spec.registers_dsp_operands else value
            inputs = {k: at_dsp(xs[k], f"x_b_{k}")
                      for k in {spec.lane_input_index(p, s) for p in range(spec.pe) for s in range(spec.simd)}}
            lanes = [[product(inputs[spec.lane_input_index(p, s)], spec.lane_input_dtype,
                              at_dsp(weight(p, s), f"w_a_{p}_{s}"), w_dtype, xnor=spec.xnor, res_type=spec.res_type)
                      for s in range(spec.simd)] for p in range(spec.pe)]
            for k in range(int(spec.registers_products) + int(single_dsp)):      # M, P (= M + C: c_starts)
                lanes = [[register(m, advance, x + c_starts[p] if c_starts and k == 1 and s == 0 else x,
                                   name=f"prod{k}_{p}_{s}") for s, x in enumerate(prods)] for p, prods in enumerate(lanes)]
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
        if spec.replays_input and spec.nf > 1 and spec.sf == 1:
            # One input word: the operand register holds it through the replays nf = 1 .. NF-1 (no
            # buffer, no mux: CNV-w1a1's MVAU_1 spent a LUT per input bit on the mux, 576)
            held = Signal(spec.in_width, name="x1", reset_less=True)
            with m.If(advance & issue & (nf == 0)):
                m.d.sync += held.eq(self.i.payload)
            return held
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
