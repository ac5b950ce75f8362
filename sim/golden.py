"""Golden models: each op computed on plain numpy tensors from its mathematical definition.

Written independently of the hardware (no folding, no packing, no pipeline): these are what the
simulated layers are compared against. Values are real element values (BIPOLAR as -1/+1), integers
are exact (int64 accumulation; object arrays would be needed only beyond 63 bits).
"""

import numpy as np

__all__ = ["matmul", "xnor_popcount", "multithreshold", "mvau", "depthwise_dot", "vvau"]


def _int(a):
    a = np.asarray(a)
    if not np.all(np.isfinite(a)) or not np.array_equal(a, np.round(a)):
        raise ValueError("golden integer ops need integer-valued tensors")
    return a.astype(np.int64)


def matmul(x, w):
    """y = x @ w exactly: x (..., MW), w (MW, MH) -> (..., MH)."""
    return np.einsum("...k,kn->...n", _int(x), _int(w))


def _bits(a):
    """BIPOLAR (-1/+1) or BINARY (0/1) values -> bits (+1 and 1 -> 1)."""
    a = _int(a)
    return (a > 0).astype(np.int64)


def xnor_popcount(x, w):
    """Number of positions where the x and w bits agree: x (..., MW), w (MW, MH) -> (..., MH)."""
    xb, wb = _bits(x), _bits(w)
    agree = xb[..., :, None] == wb            # (..., MW, MH)
    return agree.sum(axis=-2).astype(np.int64)


def multithreshold(x, thresholds, act_val=0, bipolar=False):
    """ActVal + #{i : T[c, i] <= x[..., c]} with channels last; T is (C, S) or (1, S).

    ``bipolar`` gives FINN's BIPOLAR output 2*count - 1 (count is 0 or 1).
    """
    x = np.asarray(x)
    t = np.asarray(thresholds, dtype=np.float64)
    if t.shape[0] == 1:
        t = np.repeat(t, x.shape[-1], axis=0)
    count = (x[..., :, None] >= t).sum(axis=-1).astype(np.int64)
    return 2 * count - 1 if bipolar else act_val + count


def mvau(x, w, thresholds=None, act_val=0, xnor=False, bipolar_out=False):
    """Matrix-vector-activation: accumulate (matmul, or xnor-popcount), then optionally threshold."""
    acc = xnor_popcount(x, w) if xnor else matmul(x, w)
    if thresholds is None:
        return acc
    return multithreshold(acc, thresholds, act_val, bipolar_out)


def depthwise_dot(windows, w, xnor=False):
    """Depthwise accumulation: windows (..., K, C) with K kernel positions, w (C, K) -> (..., C).

    acc[c] = sum_k windows[k, c] * w[c, k]; with ``xnor``, the number of agreeing bits instead.
    """
    windows, w = _int(windows), _int(w)
    if xnor:
        return (_bits(windows) == _bits(w).T).sum(axis=-2).astype(np.int64)
    return np.einsum("...kc,ck->...c", windows, w)


def vvau(windows, w, thresholds=None, act_val=0, xnor=False, bipolar_out=False):
    """Vector-vector-activation (depthwise conv on im2col windows), then optionally threshold."""
    acc = depthwise_dot(windows, w, xnor)
    if thresholds is None:
        return acc
    return multithreshold(acc, thresholds, act_val, bipolar_out)
