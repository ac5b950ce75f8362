"""What the dot-product engine's ``pipeline="latency"`` builds differently (issues 33 and 43): the fewest
register stages from a word's arrival to its output, each cut only where the clock needs it.

- :func:`registers_input`: no issue register where the word comes from a register anyway (the FIFO in
  front, or the producer's output FIFO) and the step's weights are a LUT ROM read at the step's address:
  :func:`unregistered_operands` gives the products the word and the weights in the cycle the word is
  offered, and the pipeline a stage less; a DSP48E1's A and B registers likewise
  (:func:`registers_dsp_operands`).
- :func:`starts_requant`: the accumulators start a fold at the requantizer's offset (B / M), so the
  requantizer is one stage (the rounded level, clipped) instead of two: free where the accumulator adds
  anyway (SF > 1: the start replaces its 0) or a DSP48E1 takes it in its post-adder (SF = 1, one product
  a DSP: the first product's P = M + C).
- :func:`digit_bits`: fabric products of weights read from a LUT ROM of a few words as rows of the input's
  digits times the weight at the step's address: each row bit a function of the digit's bits and the
  address, one LUT6 (:func:`lane_digit_rows`), and fewer rows for the lane's tree (6-bit x 6-bit, 8
  words: 2 rows, not 6; the tree of SIMD 8 then 16 terms, a register stage less).
- constant weights as canonical signed digits (:func:`canonical_digits`, :func:`csd_terms`).
"""

import numpy as np
from amaranth.hdl import C, Cat, Mux, Signal, signed, unsigned
from amaranth.lib.memory import Memory

from layers.datapath import shifted
from layers.requant_hw import accumulator_offsets
from memstream.memstream import is_logic_rom, rom_address_next

__all__ = ["registers_input", "registers_dsp_operands", "unregistered_operands", "starts_requant",
           "started_acc_shape", "digit_bits", "lane_digit_rows", "canonical_digits", "csd_terms"]

LUT_INPUTS = 6


def registers_input(spec, packed_or_summed_in_heaps):
    """Whether ``spec``'s engine registers the input word and the weights at its head (the issue stage).

    ``pipeline="latency"`` leaves it out for an MVAU (lanes replay the input) with no replay buffer to read
    (NF = 1, or SF = 1: the word held for the replays nf > 0, a mux in front of the products at nf = 0) and
    its weights embedded as a LUT ROM (read combinationally at the step's address: a LUT level, where
    the registered word also leaves the ROM's register), none of the stages that want the word in a
    register of their own (block RAM operands, heaps, packed DSP pairs: ``packed_or_summed_in_heaps``).
    The word then comes from the FIFO's output register in front: the same path, a cycle earlier."""
    lean = (spec.pipeline == "latency" and spec.replays_input and (spec.nf == 1 or spec.sf == 1)
            and spec.mem_mode == "internal_embedded" and spec.weight_lut_bits == 0
            and is_logic_rom(spec.weight_ram_style, 0, spec.runtime_writeable_weights)
            and not (spec.registers_operands or spec.weights_in_xnor or packed_or_summed_in_heaps))
    return not lean


def registers_dsp_operands(spec):
    """Whether ``single_dsp_products``' operands get the DSP48E1's A and B registers; ``pipeline="latency"``
    leaves them out: a LUT ROM or the held word's mux and a net before the multiplier's M register (1.42
    ns setup by Yosys' DSP48E1 model) take ~3.3 of the 5 ns at 200 MHz."""
    return spec.single_dsp_products() and spec.pipeline != "latency"


def unregistered_operands(m, spec, payload, advance, issue, sf, nf):
    """The step's operands as they come (``registers_input`` False): (valid, input word, weight word,
    first, last, nf, weight address), all of the current step, combinational. ``payload`` is the input
    stream's; the weight address counts issued steps (None with one word)."""
    x = payload
    if spec.nf > 1:                 # SF = 1: the word held through the replays nf = 1 .. NF-1
        held = Signal(spec.in_width, name="x_held", reset_less=True)
        with m.If(advance & issue & (nf == 0)):
            m.d.sync += held.eq(payload)
        x = Mux(nf == 0, payload, held)
    image, addr = spec.weight_memory_image(), None
    if spec.wmem == 1:
        w = C(image[0], spec.weight_width)
    else:
        m.submodules.weight_mem = rom = Memory(shape=unsigned(spec.weight_width), depth=spec.wmem, init=image,
                                               attrs={"rom_style": "distributed"})
        rd = rom.read_port(domain="comb")
        addr = Signal(range(spec.wmem), name="w_addr")
        with m.If(issue):
            m.d.sync += addr.eq(rom_address_next(addr, spec.wmem))
        m.d.comb += rd.addr.eq(addr)
        w = rd.data
    return issue, x, w, sf == 0, sf == spec.sf - 1, nf, addr


def starts_requant(spec):
    """Whether ``spec``'s accumulators start at the lean requantizer's offsets
    (:func:`layers.requant_hw.accumulator_offsets`): ``pipeline="latency"``, one activation unit a lane,
    accumulators that add (SF > 1) or products from one DSP48E1 each (SF = 1), none of the forms that start
    their accumulators elsewhere (Booth rows, heaps, packed DSP pairs)."""
    return (spec.pipeline == "latency" and spec.requant is not None and spec.activation_groups == 1
            and not (spec.booth_products or spec.uses_heap or spec.dsp_packing is not None)
            and (spec.sf > 1 or spec.single_dsp_products())
            and accumulator_offsets(spec.requant, spec.pe) is not None)


def started_acc_shape(spec):
    """The accumulator of :func:`starts_requant`: the sum's range widened by the offsets'."""
    widest = max(abs(b) for b in accumulator_offsets(spec.requant, spec.pe)).bit_length()
    return signed(max(spec.acc_shape.width, widest + 1) + 1)


def digit_bits(spec):
    """The input digit's width d of :func:`lane_digit_rows` for ``spec``'s products (0: not built so): without the
    issue register (:func:`registers_input`: the weight word a LUT ROM of 2 .. 2^a words read at the
    step's a address bits), d = 6 - a >= 2 bits, where that gives fewer rows than one a bit of the
    narrower operand. No DSPs, XNORs, Booth or CSD rows."""
    ib, wb = spec.input_dtype.bitwidth(), spec.weight_dtype.bitwidth()
    # the operands' widths first: registers_input asks uses_heap, whose constant BIPOLAR selections ask
    # offset_weights, which asks this again (a 1-bit operand never takes digit rows)
    if min(wb, ib) < 2 or spec.wmem < 2 or spec.res_type != "lut" or spec.xnor or spec.csd_products \
            or spec.booth_products or spec.registers_input:
        return 0
    d = LUT_INPUTS - (spec.wmem - 1).bit_length()
    return d if d >= 2 and -(-ib // d) < min(wb, ib) else 0


def lane_digit_rows(m, spec, xs, addr):
    """Per lane p, the rows of its SIMD products as :func:`digit_bits` builds them: for each d-bit digit of
    an input element (the top one signed for a signed input), a ROM of digit x weight indexed by the digit
    and the step's weight address ``addr``, one LUT6 a bit: the weights are constants at each address, so
    the ROM holds the products themselves (a $mul here would be mapped to a DSP48E1 by Yosys). With
    ``offset_weights`` the weight is w + 2^(n-1), as the other rows take it."""
    d, wb = digit_bits(spec), spec.weight_dtype.bitwidth()
    ib, signed_x = spec.lane_input_dtype.bitwidth(), spec.lane_input_dtype.signed()
    steps = np.arange(spec.wmem)
    w = spec.weight_matrix().astype(np.int64) + ((1 << (wb - 1)) if spec.offset_weights else 0)
    addr_slots = 1 << len(addr)
    lanes = []
    for p in range(spec.pe):
        rows = []
        for s in range(spec.simd):
            per_step = w[(steps // spec.sf) * spec.pe + p, (steps % spec.sf) * spec.simd + s]
            x = xs[spec.lane_input_index(p, s)]
            for j in range(0, ib, d):
                n = min(d, ib - j)
                codes = np.arange(1 << n)
                values = codes - ((codes >> (n - 1)) << n) if signed_x and j + n == ib else codes
                table = [int(v * wk) for wk in per_step for v in values] + [0] * ((addr_slots - spec.wmem) << n)
                width = max(int(abs(t)).bit_length() for t in table) + 1
                rom = Memory(shape=signed(width), depth=len(table), init=table, attrs={"rom_style": "distributed"})
                m.submodules[f"digit_rom_{p}_{s}_{j}"] = rom
                rd = rom.read_port(domain="comb")
                m.d.comb += rd.addr.eq(Cat(x[j:j + n], addr))
                rows.append(shifted(rd.data, j))
        lanes.append(rows)
    return lanes


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
