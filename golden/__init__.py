"""The arithmetic FINN's semantics share, on plain numpy tensors from its mathematical definition: exact
integers, dot products (and XNOR-popcount), multi-thresholding, sliding windows.

Each op's own golden (what its simulated layer is compared against) sits in its op module beside its
``OP`` (``golden_<op>`` in ``layers/<op>.py``, ``swg``), built from this math; like this module, it is
written independently of the hardware (no folding, no packing, no pipeline, no spec: tests/test_op_grid.py
checks what a golden reads). Values are real element values (BIPOLAR as -1/+1), integers are exact (int64
accumulation; object arrays would be needed only beyond 63 bits). It imports nothing of the project.
"""

import numpy as np

__all__ = ["integers", "bits", "matmul", "xnor_popcount", "multithreshold", "im2col"]


def integers(a):
    """``a`` as exact int64, or a ValueError if any element is not a whole number."""
    a = np.asarray(a)
    if not np.all(np.isfinite(a)) or not np.array_equal(a, np.round(a)):
        raise ValueError("golden integer ops need integer-valued tensors")
    return a.astype(np.int64)


def matmul(x, w):
    """y = x @ w exactly: x (..., MW), w (MW, MH) -> (..., MH)."""
    return np.einsum("...k,kn->...n", integers(x), integers(w))


def bits(a):
    """BIPOLAR (-1/+1) or BINARY (0/1) values -> bits (+1 and 1 -> 1)."""
    a = integers(a)
    return (a > 0).astype(np.int64)


def xnor_popcount(x, w):
    """Number of positions where the x and w bits agree: x (..., MW), w (MW, MH) -> (..., MH)."""
    xb, wb = bits(x), bits(w)
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


