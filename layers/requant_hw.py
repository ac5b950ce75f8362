"""The requantizer's hardware: the Amaranth pipeline that computes a :class:`layers.requant.RequantForm`'s
counts bit for bit (:func:`requantize`, six register stages; two where :func:`lean_requant` allows), and
the per-channel constant words it reads. The form itself, its fit and its cost are :mod:`layers.requant`."""

from amaranth.hdl import Cat, Const, Mux, Signal, signed, unsigned
from amaranth.lib.memory import Memory

from layers.datapath import register

__all__ = ["requantize", "lean_requant", "requant_stages", "pack_word", "REQUANT_STAGES", "LEAN_REQUANT_STAGES",
           "accumulator_offsets", "requantize_started"]

REQUANT_STAGES = 6              # register stages of :func:`requantize`
LEAN_REQUANT_STAGES = 2         # with ``lean`` where :func:`lean_requant` allows it
LEAN_MAX_WORDS = 8      # per-lane words read combinationally (LUT ROM) by the lean requantizer


def lean_requant(form, pe):
    """Whether the requantizer can be built in :data:`LEAN_REQUANT_STAGES` stages (a layer's
    ``pipeline="latency"``): one multiplier shared by every channel and a power of two (M * x is wiring),
    no corrected levels, and at most :data:`LEAN_MAX_WORDS` words per lane (read as LUT ROM, no cycle).
    Fixed-point (QKeras-style) scales give exactly this."""
    if form is None:
        return False
    m0 = int(form.multipliers[0])
    return (form.shared_multiplier and m0 > 0 and m0 & (m0 - 1) == 0
            and form.exception_slots == 0 and form.channels // pe <= LEAN_MAX_WORDS)


def requant_stages(form, pe, lean, started=False):
    """Register stages of :func:`requantize` for ``form`` (``lean``: the layer asks for the short one;
    ``started``: its accumulators start at :func:`accumulator_offsets`, :func:`requantize_started`)."""
    return 1 if started else LEAN_REQUANT_STAGES if lean and lean_requant(form, pe) else REQUANT_STAGES


def accumulator_offsets(form, pe):
    """Per channel B / M, where the lean requantizer's z = x M + B is (x + B / M) M: every B a multiple of
    the power-of-two M (QKeras-style fixed-point scales: B is the bias and the rounding half in M's
    units, finer than M only where the bias is), and the output's shift at least log2 M. An accumulator
    that starts its fold at B / M instead of 0 then holds z / M, and the requantizer's first stage (the
    addition of B) goes away (:func:`requantize_started`). None where that does not hold."""
    if not lean_requant(form, pe):
        return None
    m0 = int(form.multipliers[0])
    log2m = m0.bit_length() - 1
    offsets = [int(b) for b in form.offsets]
    if form.shift < log2m or any(b % m0 for b in offsets):
        return None
    return [b >> log2m for b in offsets]


def requantize_started(m, advance, valid, values, form, *, name="rq"):
    """One stage: the rounded level, clipped, of accumulators that hold z / M (:func:`accumulator_offsets`),
    as :func:`_requantize_lean`'s second stage computes it from z. Returns (valid, counts) a stage later."""
    sh = form.shift - (int(form.multipliers[0]).bit_length() - 1)
    counts = []
    for p, value in enumerate(values):
        counts.append(register(m, advance, _rounded_level(value[sh:].as_signed(), value[:sh], form),
                               name=f"{name}_count1_{p}"))
    return register(m, advance, valid, name=f"{name}_v1", reset_less=False), counts


def _rounded_level(q, rem, form):
    """clip(q - (q odd and rem = 0 under half_even), 0, levels), the lean requantizer's last stage. Where the
    levels are 2^k - 1 (k-bit outputs) in LUTs alone: q - 1 of an odd q only clears bit 0, and q - down > 2^k
    - 1 exactly when q > 2^k - 1 (2^k is even: no down), which is an OR of q's bits from k up; the
    subtraction and the two comparisons as carry chains after the accumulator's register were ~135 MHz
    (Yosys, the unpruned jet tagger's MVAU_1)."""
    k, down = form.levels.bit_length(), Const(0, 1) if form.rounding == "floor" else q[0] & (rem == 0)
    if k < 1 or form.levels != (1 << k) - 1 or len(q) <= k:
        return _clip(Mux(down, q - 1, q), form)
    level = Cat(q[0] & ~down, q[1:k])
    return Cat(Mux(q[-1], 0, Mux(q[k:-1].any(), form.levels, level))[:k], Const(0, form.level_bits - k))


def _lane_word(m, form, fields, pe, p, cf, name, *, enable=None):
    """Lane ``p``'s word (M, B, listed levels) of channel cf * pe + p: a constant when there is one fold,
    else a per-lane ROM read at ``cf``: combinationally (LUT ROM, no cycle) without ``enable``, or
    registered (one stage, held while ``enable`` is low)."""
    cfs = form.channels // pe
    image = [pack_word(form, f * pe + p, fields) for f in range(cfs)]
    if cfs == 1:
        return Const(image[0], form.word_width)
    m.submodules[f"{name}_words{p}"] = mem = Memory(shape=form.word_width, depth=cfs, init=image)
    if enable is None:
        rd = mem.read_port(domain="comb")
        m.d.comb += rd.addr.eq(cf)
    else:
        rd = mem.read_port(domain="sync")
        m.d.comb += [rd.addr.eq(cf), rd.en.eq(enable)]
    return rd.data


def _requantize_lean(m, advance, valid, values, cf, form, pe, name):
    """:data:`LEAN_REQUANT_STAGES` stages: 1. z = (x << log2 M) + B, B a constant or read from a LUT ROM at
    ``cf`` without a register; 2. the rounded level, clipped. Same function as :func:`requantize`."""
    fields = form.word_fields()
    log2m = int(form.multipliers[0]).bit_length() - 1
    counts = []
    for p, value in enumerate(values):
        word = _lane_word(m, form, fields, pe, p, cf, name)
        z = Signal(form.z_shape, name=f"{name}_z1_{p}", reset_less=True)
        with m.If(advance):
            m.d.sync += z.eq((value << log2m) + _unpack(word, fields, form)["b"])
        sh = form.shift
        counts.append(register(m, advance, _rounded_level(z[sh:].as_signed(), z[:sh], form), name=f"{name}_count2_{p}"))
    for s in range(1, LEAN_REQUANT_STAGES + 1):
        valid = register(m, advance, valid, name=f"{name}_v{s}", reset_less=False)
    return valid, counts


def requantize(m, advance, valid, values, cf, form, pe, *, name="rq", lean=False):
    """The requantizer pipeline for ``pe`` lanes (lane p of fold cf is channel cf * pe + p); returns
    (valid, counts) ``REQUANT_STAGES`` register stages later (as :func:`layers.thresholding.threshold_search`
    does, whose counts are combinational from its last stage; these are registered).

    Stage 1: the channel's word (M, B, listed levels) from a per-lane ROM read at cf. 2: M * x (a
    DSP48E1's M register). 3: + B (its P register). 4: the raw level, raw - 1 and raw + 1, and the
    first/last flags. 5: the corrections of listed levels, a selection among stage 4's three. 6: the clip.
    (The corrections and the clip in one stage were a path of two carry chains, 7 logic levels: about
    116 MHz by Yosys ``sta`` and ``boards.timing``; the corrections computing raw + 1 and raw - up + down
    in stage 5, two carry chains around the listed levels' comparisons, ~136 MHz by the
    register-to-register estimate.)

    ``lean`` (where :func:`lean_requant` allows): :data:`LEAN_REQUANT_STAGES` stages instead.
    """
    if lean and lean_requant(form, pe):
        return _requantize_lean(m, advance, valid, values, cf, form, pe, name)
    fields = form.word_fields()
    counts = []
    for p, value in enumerate(values):
        word = _lane_word(m, form, fields, pe, p, cf, name, enable=advance)
        x = register(m, advance, value, name=f"{name}_x1_{p}")
        words = [word]
        for s in (2, 3, 4):     # stage 4's copy has a reset: a flip-flop, not the end of an SRL16E (slow out)
            words.append(register(m, advance, words[-1], name=f"{name}_w{s}_{p}", reset_less=s < 4))
        w1, w2, w3, w4 = (_unpack(w, fields, form) for w in words)
        prod = register(m, advance, x * w1["m"], name=f"{name}_prod2_{p}")
        z = Signal(form.z_shape, name=f"{name}_z3_{p}", reset_less=True)
        with m.If(advance):
            m.d.sync += z.eq(prod + w2["b"])
        # M - 1 for stage 4's flags: a constant, or a register of stage 3 beside z's
        m_less_1 = (w3["m"] - 1 if form.shared_multiplier
                    else register(m, advance, w2["m"] - 1, name=f"{name}_m_less_1_3_{p}"))
        raws, first, last = _level(m, advance, z, w3["m"], m_less_1, form, f"{name}_{p}")
        count = register(m, advance, _correct(raws, first, last, w4, form), name=f"{name}_count5_{p}")
        counts.append(register(m, advance, _clip(count, form), name=f"{name}_count6_{p}"))
    for s in range(1, REQUANT_STAGES + 1):
        valid = register(m, advance, valid, name=f"{name}_v{s}", reset_less=False)
    return valid, counts


def pack_word(form, ch, fields):
    """Channel ``ch``'s constant word (M, B, listed levels) as an integer, ``fields`` low bits first."""
    parts = {"m": int(form.multipliers[ch]), "b": int(form.offsets[ch])}
    for e, (v, up, level) in enumerate(form.exceptions[ch]):
        parts.update({f"valid{e}": int(v), f"up{e}": int(up), f"level{e}": int(level)})
    value, offset = 0, 0
    for n, w in fields:
        value |= (parts[n] & ((1 << w) - 1)) << offset
        offset += w
    return value


def _unpack(word, fields, form):
    """The word's fields as Amaranth values (B signed when it can be negative; M a constant when shared)."""
    out, offset = {}, 0
    for n, w in fields:
        part = word[offset:offset + w]
        out[n] = part.as_signed() if n == "b" and form.offset_shape.signed else part
        offset += w
    if form.shared_multiplier:
        out["m"] = Const(int(form.multipliers[0]), unsigned(form.multiplier_bits))
    return out


def _level(m, advance, z, mult, mult_less_1, form, name):
    """Registered ((raw level - 1, raw, raw + 1), first, last) of z, as :meth:`RequantForm.raw_counts`
    defines them: the neighbours each a carry chain of their own from q beside raw's, so that stage 5
    only compares and selects. The flags compare rem itself (or its complement ~rem = 2^shift - 1 - rem,
    free) with M, and ``mult_less_1`` (M - 1, registered a stage before): one carry chain each, where d
    and u computed first were a subtraction's chain into the comparison's (~176 MHz by the register-to-
    register estimate, the generator's MVAU_1)."""
    sh = form.shift
    q, rem = z[sh:].as_signed(), z[:sh]
    rem_c = (~rem)[:sh]                         # 2^sh - 1 - rem
    if form.rounding == "floor":
        # d = rem < M; u = 2^sh - rem = ~rem + 1 <= M  <=>  ~rem < M
        down, first_x, last_x = Const(0, 1), rem < mult, rem_c < mult
    else:
        # not down: d = rem - q0 < M  <=>  rem < M + q0; u = 2^sh + 1 - q0 - rem = ~rem + 2 - q0 <= M  <=>
        # ~rem < M (q0 = 1) or ~rem < M - 1 (q0 = 0). Down (q odd, rem = 0): d = 2^sh, u = 1.
        down = q[0] & (rem == 0)
        first_x = Mux(down, (1 << sh) < mult, Mux(q[0], rem <= mult, rem < mult))
        last_x = Mux(down, mult != 0, Mux(q[0], rem_c < mult, rem_c < mult_less_1))
    raws = []
    for k, label in ((-1, "minus"), (0, "raw"), (1, "plus")):
        r = Signal(signed(len(q) + 1), name=f"{name}_{label}4", reset_less=True)
        raws.append(r)
        with m.If(advance):
            m.d.sync += r.eq(Mux(down, q + (k - 1), q + k) if form.rounding != "floor" else q + k)
    first = Signal(name=f"{name}_first4", reset_less=True)
    last = Signal(name=f"{name}_last4", reset_less=True)
    with m.If(advance):
        m.d.sync += [first.eq(first_x), last.eq(last_x)]
    return raws, first, last


def _correct(raws, first, last, word, form):
    """raw - up + down (clipped in stage 6): ``up`` if x is the first of level raw and raw is listed up,
    ``down`` if x is the last before level raw + 1 and that level is listed down. ``raws`` are stage 4's
    registered raw - 1, raw, raw + 1: equality tests and a three-way selection, no carry chain."""
    raw_minus, raw, raw_plus = raws
    minus, plus = Const(0, 1), Const(0, 1)
    for e in range(form.exception_slots):
        level, listed, up = word[f"level{e}"], word[f"valid{e}"], word[f"up{e}"]
        minus = minus | (listed & up & (raw == level))
        plus = plus | (listed & ~up & (raw_plus == level))
    up, down = first & minus, last & plus
    return Mux(up == down, raw, Mux(up, raw_minus, raw_plus))


def _clip(count, form):
    """clip(count, 0, levels), as the output level's bits."""
    return Mux(count < 0, 0, Mux(count > form.levels, form.levels, count))[:form.level_bits]
