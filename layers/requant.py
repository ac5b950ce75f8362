"""An exact requantizer: many-level thresholds as one multiply-add, a shift, and a few corrected levels.

A threshold table with S levels per channel (:class:`layers.thresholding.ThresholdTable`) stores S
numbers per channel: for an 8-bit activation 255 numbers of 20-25 bits. When the activation is an
affine map of the accumulator followed by rounding (a float scale, bias and quantizer, which is what
an INT8 network has) the thresholds lie on a line, except where the model's float32 arithmetic rounds a
near-tie the other way. :class:`RequantForm` computes the same counts as the table with

    z = M[c] * x + B[c]                                  (integers; M >= 0)
    q = floor(z / 2^shift),  rem = z mod 2^shift
    raw = q                                  rounding "floor":     raw >= k  <=>  z >= k * 2^shift
    raw = q - [q odd and rem == 0]           rounding "half_even": raw >= k  <=>  z >= k * 2^shift + (k & 1)
    count = clip(raw - up + down, 0, S)

where ``up`` is 1 when x is the first accumulator of level ``raw`` and ``raw`` is listed as an "up" level
of channel c (its true threshold is one higher than the line's), and ``down`` is 1 when x is the last
accumulator before level ``raw + 1`` and that level is listed as "down" (one lower). Per channel: M (or
one M for all), B, and at most ``MAX_EXCEPTIONS`` listed levels, instead of S thresholds.

:func:`fit_requant` finds such a form for a table, or returns None. It never returns an inexact one: the
form's counts are compared with the table's at every accumulator where either function can change
(see :meth:`RequantForm.equals_table`), which proves equality on the whole range. The hardware that
computes a form's counts is :mod:`layers.requant_hw`.
"""

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import signed

from layers.datapath import shape_for_range
from layers.memcost import rom_bram_cost, rom_luts
from layers.op import ArrayMemo, Resources
from layers.requant_hw import lean_requant, pack_word

__all__ = ["RequantForm", "fit_requant", "requant_form", "activation_summary", "ACTIVATION_STYLES", "MAX_EXCEPTIONS",
           "MULTIPLIER_BITS", "REQUANT_MIN_STEPS"]

MAX_EXCEPTIONS = 32             # corrected levels per channel the hardware may list
MULTIPLIER_BITS = (17, 24, 32)  # M widths tried, narrowest first (17: one DSP48E1 B port, unsigned)
MAX_PRODUCT_BITS = 60           # |M * x| + |B| stays inside int64 in the numpy model
ROUNDINGS = ("floor", "half_even")
ACTIVATION_STYLES = ("auto", "thresholds", "requant")
REQUANT_MIN_STEPS = 63          # activation_style="auto" requantizes from 6-bit activations up
# The per-lane word ROM (registered read, no rom_style): Yosys 0.70 builds it in block RAM from this many words
# (the cost corpus: 256 x 176 bits in 5 RAMB18, the shared requantizer of a 256-channel INT8 layer; 128 and
# 64 words stay LUTs)
REQUANT_BRAM_MIN_DEPTH = 256
_FITS = ArrayMemo()             # thresholds -> their exact requantizer (or None)
_WORD_BITS = ArrayMemo()        # offsets -> {("varying", pe): the bits of the lanes' words that vary}


@dataclass(frozen=True, eq=False)
class RequantForm:
    """The requantizer's constants for ``channels`` channels of ``levels`` levels over ``value_range``.

    ``multipliers`` and ``offsets`` are (C,) int64; ``exceptions`` is (C, E, 3) int64 rows
    (valid, up, level); ``shared_multiplier`` says every channel has the same M (a constant in hardware).
    """
    multipliers: np.ndarray
    offsets: np.ndarray
    shift: int
    rounding: str
    exceptions: np.ndarray
    levels: int
    value_range: tuple
    shared_multiplier: bool

    @property
    def channels(self):
        return len(self.multipliers)

    @property
    def exception_slots(self):
        return self.exceptions.shape[1]

    @property
    def multiplier_bits(self):
        return max(1, int(self.multipliers.max()).bit_length())

    @property
    def offset_shape(self):
        return shape_for_range(min(0, int(self.offsets.min())), max(0, int(self.offsets.max())))

    @property
    def level_bits(self):
        return (self.levels + 1).bit_length()

    @property
    def z_shape(self):
        """Signed shape holding M * x + B for every x in range, and at least two bits above the shift."""
        lo, hi = self.value_range
        m = self.multipliers
        ends = np.concatenate([m * lo + self.offsets, m * hi + self.offsets])
        width = shape_for_range(min(-1, int(ends.min())), max(0, int(ends.max()))).width
        return signed(max(width, self.shift + 2))

    # -- the function -------------------------------------------------------------------------------

    def raw_counts(self, z):
        """(raw, d, u): the rounded level of z and z's distance above that level's boundary and below the
        next one's (numpy, elementwise)."""
        one = np.int64(1)
        q, rem = z >> self.shift, z & ((one << self.shift) - 1)
        if self.rounding == "floor":
            return q, rem, (one << self.shift) - rem
        down = (q & 1 == 1) & (rem == 0)
        raw = q - down
        d = np.where(down, one << self.shift, rem - (q & 1))
        u = np.where(down, 1, (one << self.shift) + ((q + 1) & 1) - rem)
        return raw, d, u

    def counts(self, x):
        """Counts 0..levels for accumulators ``x`` (N, C) int: the hardware's function, bit for bit."""
        x = np.asarray(x, dtype=np.int64)
        m, b = self.multipliers[None, :], self.offsets[None, :]
        raw, d, u = self.raw_counts(m * x + b)
        first, last = d < m, u <= m
        ex = self.exceptions[None]                                   # (1, C, E, 3)
        valid, up, level = ex[..., 0] == 1, ex[..., 1] == 1, ex[..., 2]
        minus = first & np.any(valid & up & (level == raw[..., None]), axis=-1)
        plus = last & np.any(valid & ~up & (level == raw[..., None] + 1), axis=-1)
        return np.clip(raw - minus + plus, 0, self.levels)

    def equals_table(self, thresholds):
        """True iff :meth:`counts` equals the table's counts #{k : T[c, k] <= x} for every x in range.

        Both are step functions of x: the table's changes only at its thresholds, the form's only where
        the line crosses a level boundary (A_k) and one accumulator either side (where ``first`` and
        ``last`` switch). Equal at the range's start and at every such point means equal everywhere.
        """
        lo, hi = self.value_range
        t = np.clip(np.asarray(thresholds, dtype=np.int64), lo, hi + 1)
        line = self.line_thresholds()
        points = np.concatenate([np.full((self.channels, 1), lo), t, line - 1, line, line + 1], axis=1)
        points = np.clip(points, lo, hi)                              # (C, P)
        truth = np.stack([np.searchsorted(row, p, side="right") for row, p in zip(t, points)])
        return bool(np.array_equal(self.counts(points.T).T, truth))

    def line_thresholds(self):
        """(C, levels): A[c, k-1] = the smallest x with raw count >= k (unclipped; M = 0 gives
        lo or hi + 1)."""
        lo, hi = self.value_range
        k = np.arange(1, self.levels + 1, dtype=np.int64)
        t = _boundaries(k, self.shift, self.rounding)[None, :] - self.offsets[:, None]
        m = self.multipliers[:, None]
        safe = np.maximum(m, 1)
        line = -((-t) // safe)
        return np.where(m > 0, line, np.where(t <= 0, lo, hi + 1))

    # -- cost -----------------------------------------------------------------------------------------

    def word_fields(self):
        """(name, width) of a per-channel constant word, low bits first."""
        fields = [] if self.shared_multiplier else [("m", self.multiplier_bits)]
        fields.append(("b", self.offset_shape.width))
        for e in range(self.exception_slots):
            fields += [(f"valid{e}", 1), (f"up{e}", 1), (f"level{e}", self.level_bits)]
        return fields

    @property
    def word_width(self):
        return sum(w for _, w in self.word_fields())

    def lane_cost(self, acc_width):
        """What one lane costs per channel, to choose between forms: its multiplier, rounding and compares
        (:func:`_score` of one lane with its constants fixed) plus the bits of one channel's word."""
        return _score(self.resource_estimate(self.channels, acc_width, constant_words=False)) / self.channels \
            + self.word_width

    def resource_estimate(self, pe, acc_width, lean=False, *, constant_words=None):
        """(Resources) of ``pe`` lanes: the multiplier in DSP48E1s (25 x 18 signed each), the rounding,
        flags and exception compares in LUTs, the per-channel words in LUT ROM (BRAM18 when deep).
        ``lean`` (where :func:`lean_requant` allows): no multiplier (M is a shift), z = x + B on a carry
        chain, the rounding's zero test over the bits between M's shift and the level's, the clip.
        ``constant_words`` (default: one channel per lane): the words are constants Yosys folds in."""
        depth = self.channels // pe
        if lean and lean_requant(self, pe):
            log2m = int(self.multipliers[0]).bit_length() - 1
            lut = acc_width + (self.shift - log2m) // 4 + 3 * self.level_bits
            lut += rom_luts(self.word_width, depth) if depth > 1 else 0
            return Resources(lut=pe * lut, ff=pe * (self.z_shape.width - log2m + self.level_bits), bram18=0, dsp=0)
        dsp = dsp48_multiplier_count(acc_width, self.multiplier_bits + 1)     # x signed, M unsigned
        zbits, rbits = self.z_shape.width, self.shift
        # stage 4's raw - 1 and raw + 1 beside raw (layers.requant_hw._level), and M - 1 where M varies
        neighbours = 2 * (zbits - rbits + 1) + (0 if self.shared_multiplier else self.multiplier_bits + 1)
        if depth == 1 if constant_words is None else constant_words:
            # constant words (a lane per channel): Yosys folds M, B and the listed levels in; the first/last
            # flags and a level compare remain only for the valid exceptions. The cost
            # corpus' three such layers (8 and 16 lanes, 0.1-4 valid exceptions a channel) without their
            # activation: 12-43 LUT a lane (this: 15-44; the general form below said 131-192)
            valid = float(self.exceptions[..., 0].sum()) / self.channels
            lut = 2 * self.level_bits + 7.4 * valid + (0 if self.rounding == "floor" else rbits / 4)
            listing = float(self.exceptions[..., 0].any(axis=1).mean())    # lanes that keep the neighbours
            ff = acc_width + zbits + 2 * self.level_bits + listing * neighbours
            return Resources(lut=int(round(pe * lut)), ff=int(round(pe * ff)), bram18=0, dsp=pe * dsp)
        lut = zbits + 2 * rbits + self.exception_slots * (self.level_bits // 2 + 2) + 2 * self.level_bits
        ff = acc_width + 2 * zbits + 4 * self.level_bits + neighbours
        bram18 = 0
        if depth >= REQUANT_BRAM_MIN_DEPTH:     # the registered word ROM: Yosys makes it block RAM, of the
            # bits that vary (the 256 x 264 bit words of a UINT8 layer's shared requantizer: 230, 7 RAMB18)
            bram18 = sum(rom_bram_cost(bits, depth)[0] for bits in self._varying_word_bits(pe) if bits) / pe
        elif depth > 1:
            lut += self._word_rom_luts(pe) / pe
        return Resources(lut=int(round(pe * lut)), ff=pe * ff, bram18=int(round(pe * bram18)), dsp=pe * dsp)

    def _word_rom_luts(self, pe):
        """LUTs of the ``pe`` lanes' registered word ROMs in logic (read enable: held while the pipeline
        stalls), as Yosys 0.70 maps them: per bit that varies over a lane's channels, about one LUT up to 32
        words, then depth / 19: abc9 decomposes the 64- and 128-word functions into small shared LUTs, no
        LUT6 + MUXF7 per 64 words (:func:`layers.memcost.rom_luts`, 1 and 2). Measured, a counter-addressed
        ROM of 397-bit words, requantizer and random contents: 16 words 1.0 LUT a varying bit, 32 words 1.2
        and 1.4, 64 words 3.1 and 3.4, 128 words 6.8; the cost corpus' shared requantizers (64, 112 and
        128 words: 1.0k, 1.8k and 2.0k LUTs) were -33 to -45 % LUT with the LUT6 count."""
        depth = self.channels // pe
        return sum(self._varying_word_bits(pe)) * (1.0 if depth <= 32 else depth / 19)

    def _varying_word_bits(self, pe):
        """Per lane of ``pe``, the bits of its words that are not the same in every channel it serves
        (the others are constants, no ROM)."""
        def varying():
            fields, lanes = self.word_fields(), []
            for p in range(pe):
                words = [pack_word(self, f * pe + p, fields) for f in range(self.channels // pe)]
                changed = 0
                for w in words:
                    changed |= w ^ words[0]
                lanes.append(changed.bit_count())
            return tuple(lanes)
        return _WORD_BITS.get(self.offsets, ("varying", pe), varying)


def dsp48_multiplier_count(a_bits, b_bits):
    """DSP48E1s of a signed ``a_bits`` x ``b_bits`` multiplier as Yosys 0.70 splits it (``mul2dsp``: the
    wider operand on the 25-bit A port, the other on the 18-bit B port, each beyond them in 17-bit slices,
    a product per pair of slices): 23 x 33 bits takes 4, 21 x 25 bits 2 (the cost corpus' requantizers)."""
    wide, narrow = max(a_bits, b_bits), min(a_bits, b_bits)
    return (1 + -(-max(wide - 25, 0) // 17)) * (1 + -(-max(narrow - 18, 0) // 17))


def _boundaries(k, shift, rounding):
    """z at which the raw count reaches k."""
    return (k << shift) + ((k & 1) if rounding == "half_even" else 0)


# ------------------------------------------------------------------------------------------------ fit

def fit_requant(thresholds, value_range, *, max_exceptions=MAX_EXCEPTIONS, multiplier_bits=MULTIPLIER_BITS):
    """The cheapest exact :class:`RequantForm` (:meth:`RequantForm.lane_cost`) for ``thresholds`` (C, S)
    ascending ints over the accumulators ``value_range``, or None when no M of the given widths needs at
    most ``max_exceptions`` corrected levels per channel. A wider M costs DSPs but leaves fewer levels to
    correct where float32 rounding is the only reason a threshold is off the line."""
    t = np.asarray(thresholds, dtype=np.int64)
    lo, hi = (int(v) for v in value_range)
    acc_bits = max(abs(lo), abs(hi) + 1).bit_length() + 1
    u = np.clip(t, lo, hi + 1)
    slope, intercept = _line_fit(u, lo, hi)
    forms = [form for bits in multiplier_bits if acc_bits + bits <= MAX_PRODUCT_BITS
             for rounding in ROUNDINGS for form in _fits_at(u, lo, hi, slope, intercept, bits, rounding, max_exceptions)]
    return min(forms, key=lambda form: form.lane_cost(acc_bits), default=None)


def _score(resources):
    """One number to compare two implementations of an activation: LUT-equivalents (a BRAM18 or a DSP
    counted as 100 LUTs, a flip-flop as half of one)."""
    return resources.lut + resources.ff / 2 + 100 * (resources.bram18 + resources.dsp)


def requant_form(owner, style, thresholds, table, *, pe=1, acc_width=32, writable=False):
    """The exact requantizer replacing ``table`` (a :class:`layers.requant.RequantForm`), or None for the
    threshold search. ``style``: "thresholds" never requantizes; "requant" must (an error if no exact form
    exists); "auto" requantizes tables of at least REQUANT_MIN_STEPS levels that have an exact form when
    its estimate (``pe`` lanes, ``acc_width``-bit inputs) is below the table's, LUTs, BRAM and DSPs weighed
    as :func:`_score` says.
    Run-time writable thresholds stay thresholds; no ``table`` (no activation) gives None."""
    if style not in ACTIVATION_STYLES:
        raise ValueError(f"{owner} activation_style must be one of {', '.join(ACTIVATION_STYLES)}, not {style!r}")
    if table is None or style == "thresholds" or (style == "auto" and (table.steps < REQUANT_MIN_STEPS or writable)):
        return None
    if writable:
        raise ValueError(f"{owner} activation_style=requant cannot rewrite thresholds at run time; "
                         f"legal with runtime writes: thresholds, auto")
    form = _FITS.get(thresholds, table.value_range, lambda: fit_requant(table.thresholds, table.value_range))
    if form is not None and style == "auto" and _score(form.resource_estimate(pe, acc_width)) > \
            _score(Resources(*table.resource_estimate())):
        return None
    if form is None and style == "requant":
        raise ValueError(f"{owner} activation_style=requant: these {table.steps} thresholds per channel have no "
                         f"exact requantizer (a line with at most {MAX_EXCEPTIONS} corrected levels per channel); "
                         f"legal here: thresholds, auto")
    return form


def activation_summary(spec):
    """A layer's activation as report.json shows it: None without thresholds; else the style in use, its
    levels and, for the requantizer, its constants; ``note`` says why many levels stayed a table."""
    table = getattr(spec, "table", None)
    if table is None:
        return None
    form = spec.requant
    if form is not None:
        return {"style": "requant", "levels": form.levels, "rounding": form.rounding, "shift": form.shift,
                "multiplier_bits": form.multiplier_bits, "shared_multiplier": form.shared_multiplier,
                "corrected_levels": form.exception_slots, "word_bits": form.word_width}
    summary = {"style": "thresholds", "levels": table.steps, "threshold_bits": table.storage_shape.width}
    if spec.activation_style == "auto" and table.steps >= REQUANT_MIN_STEPS:
        summary["note"] = (f"{table.steps} thresholds per channel stored: no exact requantizer (a line with at "
                           f"most {MAX_EXCEPTIONS} corrected levels per channel)"
                           if not getattr(spec, "runtime_writeable", False) else
                           f"{table.steps} thresholds per channel stored: they are writable at run time")
    return summary


def _line_fit(u, lo, hi):
    """Per channel, least squares of level k against the midpoint U_k - 1/2 of its boundary (interior
    thresholds only): (slope, intercept) in levels per accumulator. Channels with fewer than two
    interior thresholds get a slope too flat to cross more than one level boundary in the range."""
    c, s = u.shape
    k = np.arange(1, s + 1, dtype=np.float64)
    inner = (u > lo) & (u <= hi)
    n = inner.sum(axis=1)
    x = np.where(inner, u - 0.5, 0.0)
    y = np.where(inner, k[None, :], 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx, my = x.sum(1) / n, y.sum(1) / n
        cov = (np.where(inner, (x - mx[:, None]) * (y - my[:, None]), 0)).sum(1)
        var = (np.where(inner, (x - mx[:, None]) ** 2, 0)).sum(1)
        slope = cov / var
    good = (n >= 2) & (var > 0) & np.isfinite(slope)
    # at most one level inside the range: a slope that crosses one boundary at most over [lo, hi]
    flat = 1.0 / (hi - lo + 2)
    fallback = min(np.median(slope[good]), flat) if good.any() else flat
    slope = np.where(good, slope, fallback)
    intercept = np.where(n >= 1, my - slope * mx, 0.0)
    return slope, intercept


def _fits_at(u, lo, hi, slope, intercept, bits, rounding, max_exceptions):
    """The exact forms with M below 2^bits: one M for every channel when the slopes agree, and per channel
    M at the fitted slope and a step or two either side."""
    c, s = u.shape
    top = float(slope.max())
    if top <= 0:
        return []
    shift = int(np.floor(np.log2(((1 << bits) - 1) / top)))
    if shift < 1:
        return []
    exact = np.round(slope * 2.0 ** shift).astype(np.int64)
    shared = np.ptp(slope) <= 1e-6 * top
    candidates = [np.full(c, int(np.round(np.median(slope) * 2.0 ** shift)))] if shared else []
    candidates += [exact + d for d in (0, -1, 1, -2, 2)]
    tk = _boundaries(np.arange(1, s + 1, dtype=np.int64), shift, rounding)
    forms = []
    for m in candidates:
        m = np.clip(m, 0, (1 << bits) - 1)
        b, _ = _best_offsets(u, lo, hi, m, tk)
        form = _with_exceptions(u, lo, hi, m, b, shift, rounding, s, max_exceptions, shared=bool(np.all(m == m[0])))
        if form is not None:
            forms.append(form)
    return forms


def _best_offsets(u, lo, hi, m, tk):
    """Per channel the B matching the most levels exactly for multiplier ``m`` (C,): level k matches
    iff B lies in [t_k - M U_k, t_k - M (U_k - 1) - 1] (one-sided for thresholds clipped to the range);
    the point covered by most intervals, by a sweep over sorted end points."""
    big = np.int64(1) << 62
    lower = np.where(u <= hi, tk[None, :] - m[:, None] * u, -big)
    upper = np.where(u > lo, tk[None, :] - m[:, None] * (u - 1) - 1, big - 1)
    ok = lower <= upper
    pos = np.concatenate([np.where(ok, lower, big), np.where(ok, upper + 1, big)], axis=1)
    delta = np.concatenate([ok.astype(np.int64), -ok.astype(np.int64)], axis=1)
    # at equal positions the interval that ends (-1) sorts before the one that starts (+1)
    order = np.stack([np.lexsort((d, p)) for p, d in zip(pos, delta)])
    pos_sorted = np.take_along_axis(pos, order, axis=1)
    cover = np.cumsum(np.take_along_axis(delta, order, axis=1), axis=1)
    j = np.argmax(cover, axis=1)
    rows = np.arange(len(m))
    best = np.where(cover[rows, j] > 0, pos_sorted[rows, j], 0)
    return best, cover[rows, j]


def _with_exceptions(u, lo, hi, m, b, shift, rounding, levels, max_exceptions, *, shared):
    """The form for (m, b) with its mismatched levels listed, if each is off by one accumulator, at most
    ``max_exceptions`` per channel, and the result is proven equal to the table."""
    trial = RequantForm(m, b, shift, rounding, np.zeros((len(m), 0, 3), dtype=np.int64), levels, (lo, hi), shared)
    line = np.clip(trial.line_thresholds(), lo, hi + 1)
    diff = u - line
    if np.abs(diff).max(initial=0) > 1:
        return None
    wrong = diff != 0
    slots = int(wrong.sum(axis=1).max(initial=0))
    if slots > max_exceptions:
        return None
    ex = np.zeros((len(m), slots, 3), dtype=np.int64)
    for ch, level in zip(*np.nonzero(wrong)):
        e = int(np.count_nonzero(ex[ch, :, 0]))
        ex[ch, e] = (1, int(diff[ch, level] > 0), level + 1)
    form = RequantForm(m, b, shift, rounding, ex, levels, (lo, hi), shared)
    return form if form.equals_table(u) else None
