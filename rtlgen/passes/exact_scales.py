"""Exact integer arithmetic for the float scales of quantized streams, used while lowering: the common
scale of two scales in small integer ratios, the order-preserving integer grid of a sum of streams whose
scales are unrelated, whether the model's float32 sum equals the exact one, the integer grid a carried
accumulator (a dot product with no quantizer after it) travels on, and a per-channel input scale folded
into a dot product's weights. Pure functions of scales, datatypes and codes: no model, no graph."""

from dataclasses import replace
from fractions import Fraction
from math import gcd, lcm

import numpy as np

from layers.datapath import dtype_for_range
from rtlgen.errors import CompileError

__all__ = ["common_scale", "integer_grid", "order_preserving_factors", "sum_values", "float32_sum_is_exact",
           "power_of_two", "sum_grid", "per_channel_sum_grid", "input_scale_per_output_channel", "MAX_RESCALE"]

MAX_SUM_CHECK = 1 << 22             # code pairs checked one by one to find a residual sum exact
MAX_RESCALE = 1 << 8                # largest integer factor a branch's codes are multiplied by
OFFSET_RTOL = 2.0 ** -22            # a bias on an integer grid up to float32 rounding (relative)


def common_scale(scales, where):
    """(s, factors): every scale is ``factors[k] * s`` with small positive integer factors (gcd 1)."""
    base = scales[0]
    ratios = [Fraction(x / base).limit_denominator(MAX_RESCALE) for x in scales]
    den = lcm(*(r.denominator for r in ratios))
    factors = [int(r * den) for r in ratios]
    g = gcd(*factors)
    factors = [f // g for f in factors]
    s = base * g / den
    if max(factors) > MAX_RESCALE or any(abs(f * s - x) > 1e-12 * x for f, x in zip(factors, scales)):
        raise CompileError(f"{where}: input scales {scales} are not small integer multiples of one common scale; "
                           f"quantize the inputs onto scales whose ratio is an integer up to {MAX_RESCALE} "
                           f"(e.g. powers of two, or one shared quantizer)")
    return s, factors


def integer_grid(gain, offset, reads):
    """(scale, F, B): ``gain[c] * acc + offset[c] == scale * (F[c] * acc + B[c])`` with small integers F
    (gain's ratios to one common scale, times the factor f that puts the offsets on a grid) and integers B.
    The offsets must lie on that grid up to float32 rounding (a bias quantized on the accumulator's scale,
    Brevitas' Int32Bias, or on a power-of-two one, as QKeras' quantized_bits); a float bias does not."""
    if np.any(gain == 0):
        raise CompileError(f"{reads}: a channel is multiplied by 0; legal: a quantizer between the layers")
    try:
        s, ks = common_scale([abs(float(g)) for g in gain], reads)
    except CompileError:
        raise CompileError(f"{reads}: its channels have the scales {sorted(set(np.abs(gain).tolist()))[:4]}"
                           f"{'...' if len(set(gain.tolist())) > 4 else ''}, which are not small integer multiples "
                           f"(up to {MAX_RESCALE}) of one common scale, so no integer stream carries them exactly; "
                           f"legal: per-tensor (or power-of-two) weight scales, or an activation quantizer between "
                           f"the layers") from None
    ks = np.asarray(ks, dtype=np.int64) * np.sign(gain).astype(np.int64)
    steps = np.asarray(offset, dtype=np.float64) / s
    for f in range(1, MAX_RESCALE + 1):         # the coarsest grid that holds every offset
        codes = np.round(steps * f)
        off = np.abs(steps * f - codes) > OFFSET_RTOL * np.abs(steps * f)
        if not off.any():
            break
    else:
        c = int(np.flatnonzero(np.abs(steps - np.round(steps)) > OFFSET_RTOL * np.abs(steps))[0])
        raise CompileError(f"{reads}: its float bias {float(offset[c]):.9g} (channel {c}) is not on the "
                           f"accumulator's integer grid (scale {s:.9g}) nor on one up to {MAX_RESCALE}x finer, "
                           f"so no integer stream carries it exactly; legal: quantize the bias on the "
                           f"accumulator's scale (input scale x weight scale, as Brevitas' Int32Bias does) or on a "
                           f"power-of-two scale, or put an activation quantizer between the layers")
    return s / f, ks * f, codes.astype(np.int64)


def _pair_grid(a, b, factors):
    """Every pair of codes (ca, cb): the integer sum fa*ca + fb*cb and the exact real sum sa*ca + sb*cb."""
    ca = np.arange(int(a.dtype.min()), int(a.dtype.max()) + 1, dtype=np.int64)[:, None]
    cb = np.arange(int(b.dtype.min()), int(b.dtype.max()) + 1, dtype=np.int64)[None, :]
    x = (factors[0] * ca + factors[1] * cb).ravel()
    real = (float(np.float32(a.scale)) * ca + float(np.float32(b.scale)) * cb).ravel()
    return x, real


def order_preserving_factors(a, b, refusal):
    """Integer factors (fa, fb) such that the integer sum fa*ca + fb*cb orders every pair of codes as
    the real sum sa*ca + sb*cb does (a larger real sum never gets a smaller or equal integer sum). Then
    any quantizer of the real sum is a quantizer of the integer sum, with thresholds found from the
    pairs (:func:`sum_values`). The candidates are the best rational approximations fb/fa of sb/sa
    with growing denominators; ``refusal`` is raised where none up to 2^16 keeps the order."""
    if (int(a.dtype.max()) - int(a.dtype.min()) + 1) * (int(b.dtype.max()) - int(b.dtype.min()) + 1) > MAX_SUM_CHECK:
        raise refusal
    ratio = float(np.float32(b.scale)) / float(np.float32(a.scale))
    tried = set()
    for bits in range(0, 17):
        r = Fraction(ratio).limit_denominator(1 << bits)
        factors = (r.denominator, r.numerator)
        if r.numerator == 0 or factors in tried:
            continue
        tried.add(factors)
        x, real = _pair_grid(a, b, factors)
        order = np.lexsort((x, real))
        x, real = x[order], real[order]
        rises = np.flatnonzero(real[1:] > real[:-1])
        if (np.maximum.accumulate(x)[rises] < x[rises + 1]).all():
            return list(factors)
    raise refusal


def sum_values(a, b, factors, dtype):
    """The real value of every integer sum in ``dtype``'s range: the exact sum of the pair of codes that
    gives it, or, for a sum no pair gives, of the largest one below it (any value between its neighbours
    would do: no pair lands there)."""
    x, real = _pair_grid(a, b, factors)
    order = np.argsort(x, kind="stable")
    x, real = x[order], real[order]
    codes = np.arange(int(dtype.min()), int(dtype.max()) + 1, dtype=np.int64)
    below = np.maximum(np.searchsorted(x, codes, side="right") - 1, 0)
    return real[below]


def float32_sum_is_exact(a, b, factors, s):
    """Whether the model's float32(sa * ca) + float32(sb * cb), added in float32, is exactly the integer
    sum fa*ca + fb*cb at scale s for every pair of codes (checked pair by pair; for huge ranges only
    power-of-two scales count as exact)."""
    (alo, ahi), (blo, bhi) = [(int(t.dtype.min()), int(t.dtype.max())) for t in (a, b)]
    sa, sb = float(np.float32(a.scale)), float(np.float32(b.scale))
    if (ahi - alo + 1) * (bhi - blo + 1) <= MAX_SUM_CHECK:
        ca = np.arange(alo, ahi + 1, dtype=np.float64)[:, None]
        cb = np.arange(blo, bhi + 1, dtype=np.float64)[None, :]
        model = (ca * sa).astype(np.float32) + (cb * sb).astype(np.float32)
        ours = (s * (factors[0] * ca + factors[1] * cb)).astype(np.float32)
        return bool((model == ours).all())
    return all(power_of_two(x) for x in (sa, sb)) and max(abs(alo), ahi, abs(blo), bhi) < 1 << 23


def power_of_two(x):
    """Whether ``x`` is a positive power of two (a scale that float32 products and sums keep exact)."""
    mantissa, _ = np.frexp(x)
    return x > 0 and mantissa == 0.5


def sum_grid(a, b, where):
    """The hardware adds the integer codes exactly. The model adds two float32 products in float32:
    with float (not power-of-two) scales that sum is only the exact one up to rounding (``rounding``),
    so where a quantizer after the Add sits on a round-half-even tie, qonnx and the accelerator may
    pick neighbouring codes. ``rtlgen verify`` compares against the exact semantics
    (:mod:`rtlgen.check.exact`, which adds exactly too) and names those ties, as for the float32 dot
    products of MatMul and Conv. Scales with no common integer grid get an order-preserving one
    (``grid``: the sum's real values are :func:`sum_values`). Per-channel scales: :func:`per_channel_sum_grid`
    (``s`` and the factors per channel)."""
    if np.ndim(a.scale) or np.ndim(b.scale):
        return per_channel_sum_grid(a, b, where)
    try:
        s, factors = common_scale([float(a.scale), float(b.scale)], where)
        grid = False
    except CompileError as unrelated:
        factors = order_preserving_factors(a, b, unrelated)
        s, grid = float(a.scale) / factors[0], True
    rounding = a.rounding or b.rounding or grid or not float32_sum_is_exact(a, b, factors, s)
    return s, factors, grid, rounding


def per_channel_sum_grid(a, b, where):
    """(s, factors, grid, rounding) of :func:`sum_grid` for streams of which one or both have a scale
    per channel: channel c's codes add exactly on scale s[c] where sa[c] = fa * s[c] and sb[c] = fb * s[c]
    with small integer factors; ``factors`` is (fa, fb) as numbers when every channel has the same pair (one
    quantizer shared by both branches: (1, 1)), else as (C,) arrays (a per-channel multiply of a branch).
    A channel whose two scales have no such common scale is refused: the order-preserving grid of
    unrelated per-tensor scales has no per-channel form."""
    channels = a.shape[1]
    sa, sb = (np.broadcast_to(np.asarray(t.scale, dtype=np.float64).reshape(-1), (channels,)) for t in (a, b))
    s, fa, fb = np.empty(channels), np.empty(channels, np.int64), np.empty(channels, np.int64)
    for c in range(channels):
        try:
            s[c], (fa[c], fb[c]) = common_scale([float(sa[c]), float(sb[c])], where)
        except CompileError:
            raise CompileError(f"{where}: in channel {c} the inputs' scales {sa[c]:.6g} and {sb[c]:.6g} are not small "
                               f"integer multiples (up to {MAX_RESCALE}) of one scale; per-channel scaled inputs "
                               f"add exactly only when each channel's scales are; legal: one (shared) quantizer on "
                               f"both branches, or scales whose ratio per channel is an integer (e.g. powers of "
                               f"two)") from None
    same = len(set(fa.tolist())) == 1 and len(set(fb.tolist())) == 1
    factors = [int(fa[0]), int(fb[0])] if same else [fa, fb]
    rounding = a.rounding or b.rounding or not _float32_sums_exact_per_channel(a, b, sa, sb, fa, fb, s)
    return s, factors, False, rounding


def _float32_sums_exact_per_channel(a, b, sa, sb, fa, fb, s):
    """:func:`float32_sum_is_exact` for every distinct channel (its scales and factors)."""
    seen = set()
    for c in range(len(s)):
        key = (sa[c], sb[c], fa[c], fb[c])
        if key in seen:
            continue
        seen.add(key)
        if not float32_sum_is_exact(replace(a, scale=float(sa[c])), replace(b, scale=float(sb[c])),
                                    (int(fa[c]), int(fb[c])), float(s[c])):
            return False
    return True


def input_scale_per_output_channel(node, t, codes, wdtype, channel_axis):
    """(weights, weight datatype, the input's scale per output channel) of a dot product over stream ``t``.

    A per-tensor ``t`` changes nothing. A per-channel one (real = scale[c] * code) is exact when every
    output channel's sum reads channels whose scales are integer multiples k[c] * s of one scale s (its
    own): the real sum is then s * sum(w * k[c] * code), so the factors k join the weights (wider weights)
    and s is the scale of the output channel. A depthwise layer (weights (C, 1, kh, kw): output channel c
    reads input channel c only) needs no factor; a dense one (a weight matrix whose rows are in stream
    order, the channel fastest: a convolution's (ky, kx, c) windows, a flattened map's (h, w, c) pixels)
    does unless its channels share one scale. Anything else is refused, naming the node."""
    channels = codes.shape[channel_axis]
    if np.ndim(t.scale) == 0:
        return codes, wdtype, np.full(channels, float(t.scale))
    scale = np.asarray(t.scale, dtype=np.float64).reshape(-1)
    where = f"node {node.name} ({node.op_type})"
    if codes.ndim == 4 and channel_axis == 0 and codes.shape[1] == 1 and channels == scale.size:
        return codes, wdtype, scale.copy()
    if codes.ndim != 2 or codes.shape[0] % scale.size or len(t.shape) not in (2, 4):
        raise CompileError(f"{where} reads {t.name}, whose scale is per channel ({scale.size} scales), with weights "
                           f"of shape {codes.shape}; legal readers of per-channel scaled data: a depthwise "
                           f"convolution, or a MatMul/Conv when the scales are integer multiples of one scale")
    row_channel = np.arange(codes.shape[0]) % scale.size
    reads = np.zeros((scale.size, channels), dtype=bool)            # input channel c feeds output channel o
    np.logical_or.at(reads, row_channel, codes != 0)
    factors = np.ones((scale.size, channels), dtype=np.int64)
    base = np.full(channels, scale[0])
    patterns, group = np.unique(reads, axis=1, return_inverse=True)
    for k, pattern in enumerate(patterns.T):
        used = np.flatnonzero(pattern)
        if not len(used):
            continue                                    # an all-zero output channel: any scale will do
        try:
            s, ks = common_scale([float(x) for x in scale[used]], where)
        except CompileError:
            shown = ", ".join(f"{x:.6g}" for x in scale[used][:4]) + (", ..." if len(used) > 4 else "")
            raise CompileError(f"{where} reads {t.name}, whose scale is per channel ({shown}), and adds channels "
                               f"whose scales are not small integer multiples (up to {MAX_RESCALE}) of one scale, "
                               f"so the sum has no exact integer form; legal: a depthwise convolution reading it, "
                               f"per-channel scales that are integer multiples of one scale (e.g. powers of two), "
                               f"or a per-tensor quantizer before this layer") from None
        columns = np.flatnonzero(group.reshape(-1) == k)
        factors[np.ix_(used, columns)] = np.asarray(ks, dtype=np.int64)[:, None]
        base[columns] = s
    if (factors == 1).all():
        return codes, wdtype, base
    weights = codes * factors[row_channel, :]
    return weights, dtype_for_range(int(weights.min()), int(weights.max())), base
