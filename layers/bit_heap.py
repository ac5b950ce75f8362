"""Bit heaps of constant weights (issue 43): one output channel's sum of constant multiples of the input
elements as columns of bits, and the levels of counters that take them down to the rows one carry chain
adds (each level's hardware a module: :class:`CounterLevel`). :mod:`layers.distributed` builds an MVAU of
them (``pipeline="distributed"``) and places its registers.

A channel's terms are an element's bits shifted (one canonical signed digit of a weight), a shared pair's
(x_i + sign x_j 2^k, added once for every channel holding both digits: :func:`choose_pairs`), or an
element's product by a weight's odd part (one LUT a bit where the element has at most 6 bits). Each enters
the heap as its bits alone, never sign-extended: a signed source offset to unsigned (its sign bit inverted),
a negative term as its inverted bits, every constant this leaves folded into one constant per channel whose
one-bits join the heap; the sum is taken modulo 2^W, W the channel's exact range.
"""

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from amaranth.hdl import C, Cat, Const, Elaboratable, Module, Signal

from layers.dotproduct_unit import csd_terms as csd_digits     # one CSD recoding for both

__all__ = ["Channel", "CounterLevel", "Pair", "PairAdder", "ProductLUTs", "RowAdder", "channel_heap", "choose_pairs", "chosen_products", "csd_digits", "product_width", "LUT_INPUTS", "ROWS"]

LUT_INPUTS = 6
ROWS = 3                        # the most rows the carry chain at the end of a heap adds (a ternary adder)
SHARE_WORK = 100_000            # the most sum over channels of digits^2 a layer's pair search takes on


@dataclass(frozen=True)
class Channel:
    """One output channel's heap: ``terms`` (element, shift, sign, odd: sign * (odd * x) << shift), the
    constant (mod 2^width), the width of its sum, and the heights of its columns level by level."""
    terms: tuple
    constant: int
    width: int
    levels: tuple           # per counter level, (the column heights before it, the groups per column)
    lo: int
    hi: int
    final: tuple = ()       # the column heights the carry chain adds (at most ``rows`` each)
    rows: int = ROWS
    mw: int = 0             # the elements: a term's source at or above is a shared pair

    @property
    def pairs(self):
        """The shared pairs' indices this channel's terms take."""
        return {src - self.mw for src, *_ in self.terms if src >= self.mw}

    @property
    def products(self):
        """Whether a term is a product (a LUT level before the heap)."""
        return any(odd > 1 for *_, odd in self.terms)


def _level_plan(heights, target=None, rows=ROWS):
    """One level of counters over columns of ``heights``: per column the sizes of its groups, and the
    heights after it (a group of s bits leaves one bit in its column and carries into the next one or two).

    With ``target``, only as many groups as bring each column (its bits left, the carries it takes from
    the columns below) down to ``target`` (Dadda's rule): columns already low pass untouched. A group of 3
    costs 2 LUTs and one of 4 to 6 bits 3, so a column short of 1 or 2 bits counts 3 of them and one short
    of more counts 6. Without it, every six bits counted (a rest of 3 to 5 too; toward two rows, the last
    level, of columns of at most 3, counts 2 as well, so that each keeps one bit and takes one carry)."""
    groups, after = [], [0] * (len(heights) + 3)
    last = rows == 2 and max(heights) <= 3
    for i, h in enumerate(heights):
        if target is None:
            sizes = [LUT_INPUTS] * (h // LUT_INPUTS)
            rest = h % LUT_INPUTS
            if rest >= 3 or (last and rest == 2):
                sizes.append(rest)
        else:
            sizes, avail, excess = [], h, h + after[i] - target
            while excess > 0 and avail >= 2:
                size = min(avail, 3 if excess <= 2 else LUT_INPUTS)
                sizes.append(size)
                avail, excess = avail - size, excess - (size - 1)
        after[i] += h - sum(sizes)
        for size in sizes:
            for j in range(size.bit_length()):
                after[i + j] += 1
        groups.append(tuple(sizes))
    return tuple(groups), after


@lru_cache(maxsize=None)
def _capacity(levels, rows=ROWS):
    """The tallest column a heap of any width takes to ``rows`` bits in ``levels`` levels of counters (every
    column counted in full)."""
    if levels <= 0:
        return rows
    below, h = _capacity(levels - 1, rows), _capacity(levels - 1, rows)
    while max(_level_plan([h + 1] * 24, rows=rows)[1][:24]) <= below:
        h += 1
    return h


def _heap_levels(heights, width, rows=ROWS):
    """The counter levels taking columns of ``heights`` (within ``width``) to at most ``rows`` bits each:
    the fewest levels, each counting only what keeps the next levels able to finish (Dadda's rule, by
    :func:`_capacity`), trying depths from what the tallest column needs up to what counting every column
    needs (carries piling up where columns are low can take a level more than the tallest column alone)."""
    heights = list(heights[:width])
    full, most = list(heights), 0
    while full and max(full) > rows:        # every column counted: never more levels than this
        full, most = _level_plan(full, rows=rows)[1][:width], most + 1
    least = next((d for d in range(most) if max(heights, default=0) <= _capacity(d, rows)), most)
    best = None
    for depth in range(least, most + 1):
        planned = _planned_levels(heights, width, rows, depth)
        luts = sum(size.bit_length() for _, groups in planned[0] for sizes in groups for size in sizes)
        if best is None or (len(planned[0]), luts) < best[0]:
            best = ((len(planned[0]), luts), planned)
    return best[1] if best else ((), tuple(heights))


def _planned_levels(heights, width, rows, depth):
    planned = []
    while heights and max(heights) > rows:
        left = depth - len(planned) - 1     # levels after this one
        groups, after = _level_plan(heights, _capacity(left, rows) if left >= 0 else rows)
        planned.append((tuple(heights), groups))
        heights = after[:width]
        if len(planned) > depth + 8:
            raise RuntimeError("bit heap does not converge")     # a bug, never a user's input
    return tuple(planned), tuple(heights)


def _signed_width(lo, hi):
    return max(int(hi).bit_length(), (-int(lo) - 1).bit_length()) + 1


@dataclass(frozen=True)
class Pair:
    """A sum that channels share (a common subexpression): x_i + sign * (x_j << shift), one adder (a carry
    chain) for every channel whose digits hold both terms; it enters their heaps as one term. Its bits:
    u = t + offset (t's sign bit inverted where it may be negative), ``width`` of them."""
    i: int
    j: int
    shift: int
    sign: int
    lo: int
    hi: int

    @property
    def width(self):
        return _signed_width(self.lo, self.hi) if self.lo < 0 else max(1, int(self.hi).bit_length())

    @property
    def offset(self):
        return 1 << (self.width - 1) if self.lo < 0 else 0

    @property
    def luts(self):
        """The adder's LUTs: a bit each above the shift (below it the sum is x_i's bits)."""
        return self.width - self.shift


def _element_range(n, signed_input):
    return (-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed_input else (0, (1 << n) - 1)


def channel_heap(weights_row, n, signed_input, offset, rows=ROWS, products=False, pairs=()):
    """The heap of one channel: weights (MW,), n-bit elements, the activation's offset, the rows its carry
    chain adds. A term (src, k, sign, odd) is sign * (odd * s) << k, s an element x_src or (src >= MW) the
    shared pair ``pairs[src - MW]``: a weight whose (element, odd part) is in ``products`` (True: every
    weight) is one term, its product with the element a LUT per bit (see :func:`product_width`); any other
    one a term per canonical signed digit (odd = 1), two digits replaced by a pair wherever the channel
    holds both."""
    x_lo, x_hi = _element_range(n, signed_input)
    w = np.asarray(weights_row, dtype=np.int64)
    mw = len(w)
    if products is True:
        products = frozenset((i, _odd_part(v)) for i, v in enumerate(w) if v)
    lo = int(np.minimum(w * x_lo, w * x_hi).sum()) + offset
    hi = int(np.maximum(w * x_lo, w * x_hi).sum()) + offset
    width = _signed_width(min(lo, 0), max(hi, 0))
    terms = []
    for i, value in enumerate(w):
        if value and products and (i, _odd_part(value)) in products:
            k = (int(abs(value)) & -int(abs(value))).bit_length() - 1
            terms.append((i, k, 1 if value > 0 else -1, int(abs(value)) >> k))
        else:
            terms.extend((i, k, sign, 1) for sign, k in csd_digits(value))
    for p, pair in enumerate(pairs):        # (pairs take digits only: never a product's term)
        terms = _take_pair(terms, pair, mw + p)

    def source(src):
        if src < mw:
            return n, (1 << (n - 1)) if signed_input else 0
        return pairs[src - mw].width, pairs[src - mw].offset

    constant = offset
    heights = [0] * width
    for src, k, sign, odd in terms:
        # odd s = P - odd off with P = odd u (m bits); -P = ~P - (2^m - 1)
        bits, off = source(src)
        m = product_width(odd, bits)
        constant += (-odd * off if sign > 0 else odd * off - ((1 << m) - 1)) << k
        for b in range(k, min(k + m, width)):
            heights[b] += 1
    constant %= 1 << width
    for b in range(width):
        heights[b] += constant >> b & 1
    levels, final = _heap_levels(heights, width, rows)
    return Channel(tuple(terms), constant, width, levels, lo, hi, final, rows, mw)


def _take_pair(terms, pair, src):
    """``terms`` with every two digits (i, k, s1) and (j, k + shift, s2), s1 s2 = the pair's sign, replaced
    by the pair's term (src, k, s1)."""
    terms = list(terms)
    while True:
        found = _find_pair(terms, pair)
        if found is None:
            return tuple(terms)
        a, b = found
        k, s1 = terms[a][1], terms[a][2]
        terms = [t for x, t in enumerate(terms) if x not in (a, b)] + [(src, k, s1, 1)]


def _find_pair(terms, pair):
    for a, (i, k1, s1, odd1) in enumerate(terms):
        if i != pair.i or odd1 != 1:
            continue
        for b, (j, k2, s2, odd2) in enumerate(terms):
            if b != a and j == pair.j and odd2 == 1 and k2 == k1 + pair.shift and s1 * s2 == pair.sign:
                return a, b
    return None


def choose_pairs(w, n, signed_input, most=400):
    """The shared pairs of a layer's weights w (channels, MW), greedily: the pattern of two element digits
    (x_i, x_j << shift, relative sign) that saves the most heap bits over the channels holding it, less its
    adder's LUTs, taken while that is positive (each pair of two elements, never of pairs: one adder deep)."""
    x_lo, x_hi = _element_range(n, signed_input)
    channels = [[(i, k, sign, 1) for i, value in enumerate(row) for sign, k in csd_digits(value)] for row in w]
    if sum(len(terms) ** 2 for terms in channels) > SHARE_WORK:
        return ()       # a search as long as a compile: not tried (a wide layer: not built at II 1 anyway)
    pairs = []
    while len(pairs) < most:
        counts = {}
        for terms in channels:
            seen = set()
            for a, (i, k1, s1, _) in enumerate(terms):
                if i >= w.shape[1]:
                    continue
                for j, k2, s2, _ in terms[a + 1:]:
                    if j >= w.shape[1]:
                        continue
                    key = (i, j, k2 - k1, s1 * s2) if (k1, i) <= (k2, j) else (j, i, k1 - k2, s1 * s2)
                    if key not in seen:
                        seen.add(key)
                        counts[key] = counts.get(key, 0) + 1
        best, gain = None, 0
        for (i, j, shift, sign), uses in counts.items():
            if uses < 2:
                continue
            ends = (x_lo + (x_lo << shift if sign > 0 else -(x_hi << shift)),
                    x_hi + (x_hi << shift if sign > 0 else -(x_lo << shift)))
            pair = Pair(i, j, shift, sign, *ends)
            value = uses * (2 * n - pair.width) - pair.luts
            if value > gain:
                best, gain = pair, value
        if best is None:
            return tuple(pairs)
        channels = [list(_take_pair(terms, best, w.shape[1] + len(pairs))) for terms in channels]
        pairs.append(best)
    return tuple(pairs)


def _odd_part(value):
    value = abs(int(value))
    return value >> ((value & -value).bit_length() - 1)


def chosen_products(w, n, bit_cost=1.0):
    """The (element, odd) products worth making for a layer's weights w (channels, MW) of n-bit elements
    (n <= 6: a product is a LUT a bit): odd * x_u costs its bits but the first, once, and saves each weight
    with that odd part its digits' bits less the product's, ``bit_cost`` LUTs a heap bit. Taken where the
    saving over the channels using it is larger than its LUTs."""
    uses = {}
    for row in np.asarray(w, dtype=np.int64):
        for i, value in enumerate(row):
            if value and _odd_part(value) > 1:
                key = (i, _odd_part(value))
                uses[key] = uses.get(key, 0) + 1
    chosen = set()
    for (i, odd), count in uses.items():
        width = product_width(odd, n)
        if count * (len(csd_digits(odd)) * n - width) * bit_cost > width - 1:
            chosen.add((i, odd))
    return frozenset(chosen)


def product_width(odd, n):
    """Bits of odd * x_u for an unsigned n-bit x_u."""
    return (odd * ((1 << n) - 1)).bit_length()


# --- the hardware of a counter level ----------------------------------------------------------------


def adder_counter(m, bits, name):
    """The number of ones among up to 6 bits as full and half adders (XOR, majority): plain logic that
    abc maps to LUTs however it likes (constant tables, one ``$shiftx`` an output bit, cost Yosys a 64-way
    mux each before it maps them)."""
    columns, j, k = [list(bits)], 0, 0
    while j < len(columns):
        col = columns[j]
        while len(col) > 1:
            if len(columns) == j + 1:
                columns.append([])
            if len(col) >= 3:
                a, b, c = col.pop(0), col.pop(0), col.pop(0)
                total, carry = a ^ b ^ c, (a & b) | (a & c) | (b & c)
            else:
                a, b = col.pop(0), col.pop(0)
                total, carry = a ^ b, a & b
            col.append(_wire(m, total, f"{name}_s{k}"))
            columns[j + 1].append(_wire(m, carry, f"{name}_c{k}"))
            k += 1
        j += 1
    return [columns[j][0] if j < len(columns) and columns[j] else C(0, 1) for j in range(len(bits).bit_length())]


def _inputs(i, groups):
    """A module's groups of (bit, inverted) as values inside it: each bit not a constant the next bit of its
    input ``i`` (in order), inverted here where its term is negative (in the LUT that takes it)."""
    taken = iter(range(len(i)))
    values = []
    for group in groups:
        values.append([])
        for bit, inv in group:
            value = bit if isinstance(bit, Const) else i[next(taken)]
            values[-1].append(~value if inv else value)
    return values


class CounterLevel(Elaboratable):
    """One level of a channel's counters in a module of its own: Yosys maps each module alone (``rtlgen
    build`` keeps the hierarchy), so its counters become the planned LUTs, a LUT an output bit; in one
    flat netlist abc merges counters across levels, 25-40 % more LUTs on the jet tagger's layers. Its inputs are the groups'
    bits as they come, each inverted here where its term is negative (in the counters' LUTs, not in an
    inverter before the module); constants stay inside."""

    def __init__(self, groups):
        self._groups = [[(bit, inv) for bit, inv in group] for group in groups]
        width = sum(1 for group in groups for bit, _ in group if not isinstance(bit, Const))
        self.i = Signal(max(1, width), name="i")
        self._outs = [Signal(len(group).bit_length(), name=f"o{g}") for g, group in enumerate(groups)]

    def counts(self):
        """Each group's count, as its bits (least significant first)."""
        return [[sig[j] for j in range(len(sig))] for sig in self._outs]

    def elaborate(self, platform):
        m = Module()
        for g, (bits, out) in enumerate(zip(_inputs(self.i, self._groups), self._outs)):
            m.d.comb += out.eq(Cat(*COUNTER(m, bits, f"g{g}")))
        return m


class PairAdder(Elaboratable):
    """A shared pair's adder, t = x_i + sign (x_j << shift) modulo 2^width, in a module of its own (as
    :class:`CounterLevel`): alone, Yosys maps it to one carry chain (a LUT a bit, the CARRY4s), the delay
    model's form. In the layer's own module it cut the chain after its first CARRY4 and made the bits above
    of LUTs on the carry out: two LUT levels more before the first counter (the pruned jet tagger's MVAU_2,
    ~173 MHz by parts where the model planned 200)."""

    def __init__(self, pair, n, signed):
        self._pair, self._signed = pair, signed
        self.a, self.b = Signal(n, name="a"), Signal(n, name="b")
        self.t = Signal(pair.width, name="t")

    def elaborate(self, platform):
        m = Module()
        p = self._pair
        a, b = (v.as_signed() if self._signed else v for v in (self.a, self.b))
        m.d.comb += self.t.eq((a + (b << p.shift)) if p.sign > 0 else (a - (b << p.shift)))
        return m


class ProductLUTs(Elaboratable):
    """An element's product by a weight's odd part, p = odd * x_u (x_u: the element as unsigned, a signed
    one's sign bit inverted here), ``product_width(odd, n)`` bits, in a module of its own (as
    :class:`PairAdder`): each bit is a function of the element's n <= 6 bits, so alone Yosys maps it to one
    LUT, the delay model's form. In the layer's module abc mapped the pruned jet tagger's MVAU_1 product bits
    as the ripple they are written as (LUT5 -> LUT4 -> LUT4 -> LUT4), three LUT levels more in a cycle."""

    def __init__(self, odd, n, signed):
        self._odd, self._signed = odd, signed
        self.x = Signal(n, name="x")
        self.p = Signal(product_width(odd, n), name="p")

    def elaborate(self, platform):
        m = Module()
        x_u = self.x ^ (1 << (len(self.x) - 1)) if self._signed else self.x
        m.d.comb += self.p.eq(Cat(*_times_odd(m, [x_u[b] for b in range(len(self.x))], self._odd, len(self.p), "p")))
        return m


def _times_odd(m, bits, odd, width, name):
    """The bits of odd * x (x unsigned: ``bits``), ``width`` of them, as gates: x shifted and added (or
    subtracted) by ripple-carry full adders written out bit by bit, so that Yosys makes no carry chain of
    them and abc maps each product bit, a function of x's bits alone, to one LUT."""
    total = None
    for d, (sign, k) in enumerate(csd_digits(odd)):
        term = ([C(0, 1)] * k + list(bits) + [C(0, 1)] * width)[:width]
        if sign < 0:        # subtracting: add the inverted term and one
            term = [~t for t in term]
        total = (term if sign > 0 else _ripple(m, [C(0, 1)] * width, term, C(1, 1), f"{name}_{d}")) \
            if total is None else _ripple(m, total, term, C(0, 1) if sign > 0 else C(1, 1), f"{name}_{d}")
    return total


def _ripple(m, a, b, cin, name):
    """a + b + cin, bit by bit (modulo 2^len(a)); each carry a wire (an expression used twice)."""
    out, carry = [], cin
    for j, (x, y) in enumerate(zip(a, b)):
        out.append(_wire(m, x ^ y ^ carry, f"{name}_s{j}"))
        carry = _wire(m, (x & y) | (x & carry) | (y & carry), f"{name}_c{j}")
    return out


class RowAdder(Elaboratable):
    """The carry chain at the end of a heap: columns of at most ``rows`` bits (2, or 3: a ternary adder)
    summed modulo 2^width, in a module of its own (as :class:`CounterLevel`; its inputs the columns' bits as
    they come, each inverted here where its term is negative, constants inside). Three rows: their parity
    plus their majority one column up, the chain's S from :class:`TernaryFront` (one LUT6 a bit) and its DI
    the majority (:class:`TernaryMajority`, a LUT3 a bit), each a module of its own: together, abc mapped
    the majority once for both, a LUT3 into an XOR LUT4 (two levels before the chain, the pruned jet
    tagger's MVAU_2 at ~194 MHz where the model counted one). The chain adds DI and S ^ DI, whose XOR,
    the chain's S, abc reduces to S itself."""

    def __init__(self, columns, width, rows):
        # a plain bit first in each column: with two rows the chain's DI takes the first row's bit as it is
        self.columns = [sorted(col, key=lambda e: e[1]) for col in columns]
        self._width, self._rows = width, rows
        self.sources = [bit for col in self.columns for bit, _ in col if not isinstance(bit, Const)]
        self.i = Signal(max(1, len(self.sources)), name="i")
        self.s = Signal(width, name="s")
        self.front_s, self.di = Signal(width, name="front_s"), Signal(width, name="di")     # three rows: S, DI

    def elaborate(self, platform):
        m = Module()
        if self._rows == 2:
            rows = _rows(_inputs(self.i, self.columns), 2)
            m.d.comb += self.s.eq((rows[0] + rows[1])[:self._width])
            return m
        front = m.submodules.front = TernaryFront(self.columns, self._width)
        carry = m.submodules.carry = TernaryMajority(self.columns, self._width)
        m.d.comb += [front.i.eq(self.i), carry.i.eq(self.i), self.front_s.eq(front.o), self.di.eq(carry.o)]
        m.d.comb += self.s.eq((carry.o + (front.o ^ carry.o))[:self._width])
        return m


class TieTest(Elaboratable):
    """Half-even's tie beside a heap's carry chain: ``zero`` = the chain's ``bits`` low bits all zero,
    from its operands X + Y rather than its sum (:func:`layers.delay_model.tie_ns`): sum bit i is zero iff
    X_i ^ Y_i equals the carry into i, which, the bits below being zero, is X_{i-1} | Y_{i-1}. Two rows:
    X, Y the rows (``i``: the chain's inputs, as :class:`RowAdder` takes them); three: from the chain's
    S = X ^ Y and DI = Y (``s``, ``di``), so X | Y = S | DI. The bits' tests in groups of at most six
    operand bits, each a module of its own (:class:`TieGroup`: one LUT), then their AND here: in one
    module, abc mapped eight bits' tests in three levels where two do."""

    def __init__(self, columns, bits, rows):
        self._columns, self._bits, self._rows = columns, bits, rows
        self.i = Signal(max(1, _source_count(columns)))
        self.s, self.di = Signal(bits), Signal(bits)
        self.zero = Signal()

    def elaborate(self, platform):
        m = Module()
        taken, zeros = 0, []
        for g, (lo, hi) in enumerate(tie_groups(self._bits)):
            first = max(0, lo - 1)
            if self._rows == 2:     # the rows' bits of columns first..hi-1, each inverted in the group
                columns = self._columns[first:hi]
                unit = m.submodules[f"g{g}"] = TieGroup(lo - first, columns)
                start = _source_count(self._columns[:first])
                m.d.comb += unit.i.eq(self.i[start:start + len(unit.i)])
            else:
                unit = m.submodules[f"g{g}"] = TieGroup(lo - first, None, hi - first)
                m.d.comb += [unit.s.eq(self.s[first:hi]), unit.di.eq(self.di[first:hi])]
            zeros.append(unit.zero)
        m.d.comb += self.zero.eq(Cat(*zeros).all())
        return m


def tie_groups(bits):
    """The :class:`TieTest` groups of ``bits`` bits' tests, (first bit, end): bits 0-2, then two bits each."""
    return [(lo, min(bits, 3 if lo == 0 else lo + 2)) for lo in [0] + list(range(3, bits, 2))]


def tie_luts(bits):
    """A :class:`TieTest`'s LUTs: one a group, and their AND (a LUT6 takes five more each)."""
    groups = len(tie_groups(bits))
    return groups + -(-(groups - 1) // (LUT_INPUTS - 1))


class TieGroup(Elaboratable):
    """A :class:`TieTest`'s tests of its bits from ``lo`` on, given the operands from the bit below lo (or
    from bit 0): two rows, the ``columns``' bits (``i``); three, ``s`` and ``di`` of ``width`` bits."""

    def __init__(self, lo, columns, width=None):
        self._lo, self._columns = lo, columns
        width = len(columns) if columns is not None else width
        self.i = Signal(max(1, _source_count(columns or ())))
        self.s, self.di = Signal(width), Signal(width)
        self.zero = Signal()

    def elaborate(self, platform):
        m = Module()
        if self._columns is not None:
            x, y = _rows(_inputs(self.i, self._columns), 2)
            parity, either = x ^ y, x | y
        else:
            parity, either = self.s, self.s | self.di
        tests = parity ^ Cat(C(0, 1), either)[:len(parity)]
        m.d.comb += self.zero.eq(tests[self._lo:] == 0)
        return m


def _rows(values, rows):
    return [Cat(*[col[r] if r < len(col) else C(0, 1) for col in values]) for r in range(rows)]


def _majority(rows):
    return (rows[0] & rows[1]) | (rows[0] & rows[2]) | (rows[1] & rows[2])


class _ThreeRowLUTs(Elaboratable):
    """A module of LUTs over a ternary adder's columns (``i``: their bits as :class:`RowAdder` takes them),
    one output word ``o`` of ``width`` bits from the three rows (:meth:`word`)."""

    def __init__(self, columns, width):
        self._columns = columns
        self.i = Signal(max(1, _source_count(columns)))
        self.o = Signal(width)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.o.eq(self.word(_rows(_inputs(self.i, self._columns), 3)))
        return m


class TernaryFront(_ThreeRowLUTs):
    """A ternary adder's S: bit b the parity of column b's three bits and the majority of column b-1's,
    a function of six bits: alone, one LUT6 a bit."""

    @staticmethod
    def word(rows):
        return rows[0] ^ rows[1] ^ rows[2] ^ Cat(C(0, 1), _majority(rows))


class TernaryMajority(_ThreeRowLUTs):
    """A ternary adder's carries into the chain's DI: bit b the majority of column b-1's three bits (a LUT3)."""

    @staticmethod
    def word(rows):
        return Cat(C(0, 1), _majority(rows))


def _source_count(columns):
    """The bits of ``columns`` a module takes as inputs (constants stay inside)."""
    return sum(1 for col in columns for bit, _ in col if not isinstance(bit, Const))


# Full and half adders, not tables and not kept outputs; each level of a channel a module of its own
# (CounterLevel). On the pruned jet tagger (2026-11-27), one flat netlist let abc merge counters across levels
# (MVAU_1: 10,712 LUT by Yosys where the plan counts 8,479; 4 LUT levels in a cycle where it counts 3). A
# 4-channel slice of MVAU_2 without its activation: 637 LUT flat, 470 with the levels as modules, 477
# planned; kept wires on the counters' outputs did not stop the merging (657 against 610 flat, no pairs)
COUNTER = adder_counter


def _wire(m, value, name):
    sig = Signal(value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig
