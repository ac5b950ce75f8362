"""Golden models: each op computed on plain numpy tensors from its mathematical definition.

Written independently of the hardware (no folding, no packing, no pipeline): these are what the
simulated layers are compared against. Values are real element values (BIPOLAR as -1/+1), integers
are exact (int64 accumulation; object arrays would be needed only beyond 63 bits).
The independent numpy reference of FINN's semantics that the layers' ``golden`` hooks and the simulators
compare against; it imports nothing of the project (numpy only).
"""

import numpy as np

__all__ = ["matmul", "xnor_popcount", "multithreshold", "mvau", "depthwise_dot", "vvau", "fm_padding", "pixel_padding",
           "add_streams",
           "concat_channels", "channelwise", "maxpool_nhwc", "label_select", "global_acc_pool", "im2col",
           "depthwise_windows", "matmul_streams", "quant_softmax"]


def _int(a):
    a = np.asarray(a)
    if not np.all(np.isfinite(a)) or not np.array_equal(a, np.round(a)):
        raise ValueError("golden integer ops need integer-valued tensors")
    return a.astype(np.int64)


def matmul(x, w):
    """y = x @ w exactly: x (..., MW), w (MW, MH) -> (..., MH)."""
    return np.einsum("...k,kn->...n", _int(x), _int(w))


def matmul_streams(a, b):
    """The product of two integer tensors exactly: a (..., M, K), b (..., K, P) -> (..., M, P)."""
    return np.matmul(_int(a), _int(b))


def quant_softmax(x, exp_table, numerator, shift, out_max):
    """Softmax over the last axis of integer codes, quantized, in integers: e = E[max - x], R = K // sum(e),
    min((e * R + 2^(shift-1)) >> shift, out_max). Python integers (e * R exceeds int64)."""
    x = _int(x)
    e = np.asarray(exp_table, dtype=object)[x.max(axis=-1, keepdims=True) - x]
    r = int(numerator) // e.sum(axis=-1, keepdims=True)
    codes = (e * r + (1 << (int(shift) - 1))) >> int(shift)
    return np.minimum(codes, int(out_max)).astype(np.int64)


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


# --- FMPadding, AddStreams, StreamingConcat, ChannelwiseOp (channels last, NHWC) ---

def fm_padding(x, padding, value=0):
    """Pad the two spatial axes of x (N, H, W, C) by padding = [top, left, bottom, right] with ``value``."""
    top, left, bottom, right = (int(p) for p in padding)
    x = np.asarray(x)
    out = np.full((x.shape[0], x.shape[1] + top + bottom, x.shape[2] + left + right, *x.shape[3:]), value,
                  dtype=x.dtype)
    out[:, top:top + x.shape[1], left:left + x.shape[2]] = x
    return out


def pixel_padding(x, stride):
    """FINN's FMPadding_Pixel on x (N, H, W, C): stride - 1 zero pixels between neighbouring pixels along each
    spatial axis, stride = (sy, sx); out[:, y * sy, x * sx] = x[:, y, x], zero elsewhere, shape
    (N, (H - 1) * sy + 1, (W - 1) * sx + 1, C)."""
    sy, sx = (int(s) for s in stride)
    x = np.asarray(x)
    out = np.zeros((x.shape[0], (x.shape[1] - 1) * sy + 1, (x.shape[2] - 1) * sx + 1, *x.shape[3:]), dtype=x.dtype)
    out[:, ::sy, ::sx] = x
    return out


def upsample_nearest(x, factor):
    """Nearest-neighbour upsampling of x (N, H, W, C) by integer factors (sy, sx): out[y, x] = x[y//sy, x//sx]."""
    sy, sx = factor
    return np.repeat(np.repeat(np.asarray(x), sy, axis=1), sx, axis=2)


def add_streams(a, b):
    """Elementwise a + b, exact."""
    return _int(a) + _int(b)


def concat_channels(xs):
    """Concatenate tensors along the last (channel) axis."""
    return np.concatenate([np.asarray(x) for x in xs], axis=-1)


def channelwise(x, params, func):
    """p[c] OP x[..., c] with channels last: cmp_le -> [p <= x], cmp_ge -> [p >= x] (0/1), add, mul."""
    x, p = _int(x), _int(params)
    ops = {"cmp_le": lambda: (p <= x).astype(np.int64), "cmp_ge": lambda: (p >= x).astype(np.int64),
           "add": lambda: p + x, "mul": lambda: p * x}
    if func not in ops:
        raise ValueError(f"channelwise func must be one of {', '.join(ops)}, not {func!r}")
    return ops[func]()


def maxpool_nhwc(x, k, ceil_mode=False):
    """Max pooling with stride = kernel on (N, H, W, C); ``k`` is an int or (kh, kw).

    Without ``ceil_mode`` the output has floor(H/kh) x floor(W/kw) pixels (trailing rows and columns
    are dropped); with it ceil(...) pixels, a partial window taking the max of its valid elements.
    BIPOLAR inputs (-1/+1) need nothing special.
    """
    x = _int(x)
    kh, kw = (k, k) if np.isscalar(k) else (int(k[0]), int(k[1]))
    _, h, w, _ = x.shape
    oh, ow = (-(-h // kh), -(-w // kw)) if ceil_mode else (h // kh, w // kw)
    y = np.empty((x.shape[0], oh, ow, x.shape[3]), dtype=np.int64)
    for r in range(oh):
        for c in range(ow):
            y[:, r, c, :] = x[:, r * kh:(r + 1) * kh, c * kw:(c + 1) * kw, :].max(axis=(1, 2))
    return y


def label_select(x, k, dtype_min):
    """Indices of the ``k`` largest values of the last axis, largest first: (..., L) -> (..., k).

    Equal values rank by lower index first (ONNX TopK). Only values strictly above ``dtype_min`` are
    ranked; if fewer than ``k`` are, the remaining outputs are index 0 (FINN's LabelSelect starts its
    list as k entries of (dtype_min, index 0) and inserts with a strict >).
    """
    x = _int(x)
    flat = x.reshape(-1, x.shape[-1])
    out = np.zeros((flat.shape[0], k), dtype=np.int64)
    for r, row in enumerate(flat):
        ranked = [i for i in np.argsort(-row, kind="stable") if row[i] > dtype_min][:k]
        out[r, :len(ranked)] = ranked
    return out.reshape(*x.shape[:-1], k)


def global_acc_pool(x):
    """Sum over the spatial axes: (N, H, W, C) -> (N, 1, 1, C)."""
    return _int(x).sum(axis=(1, 2), keepdims=True)


def im2col(x, kernel, stride=(1, 1), dilation=(1, 1)):
    """Sliding windows of an NHWC tensor, no padding: (N, OH, OW, kh*kw*C), element (ky*kw + kx)*C + c."""
    x = np.asarray(x)
    n, h, w, c = x.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
    out = np.empty((n, oh, ow, kh * kw, c), dtype=x.dtype)
    for ky in range(kh):
        for kx in range(kw):
            rows = slice(ky * dh, ky * dh + (oh - 1) * sh + 1, sh)
            cols = slice(kx * dw, kx * dw + (ow - 1) * sw + 1, sw)
            out[:, :, :, ky * kw + kx, :] = x[:, rows, cols, :]
    return out.reshape(n, oh, ow, kh * kw * c)


def depthwise_windows(x, kernel, simd, stride=(1, 1), dilation=(1, 1)):
    """Windows in FINN's depthwise order: (N, OH, OW, C/simd, kh*kw, simd), flattened per pixel."""
    cols = im2col(x, kernel, stride, dilation)
    n, oh, ow, _ = cols.shape
    c = x.shape[-1]
    k = kernel[0] * kernel[1]
    return cols.reshape(n, oh, ow, k, c // simd, simd).transpose(0, 1, 2, 4, 3, 5).reshape(n, oh, ow, -1)
