"""Helpers for the ``Op.small_instance`` hooks: a layer too large to prove formally in seconds (``rtlgen
prove``) is proven as a small instance of the same generator, with the same datatypes and PE/SIMD/widths
but fewer channels, pixels and vectors. A hook returns the spec fields to change."""

import numpy as np

__all__ = ["fold", "vectors", "rows", "shrink_channels"]


def fold(total, per_word, keep=2):
    """``total`` shrunk to at most ``keep`` words of ``per_word`` lanes (``per_word`` divides ``total``)."""
    return per_word * min(total // per_word, keep)


def vectors(vecs):
    """numInputVectors shrunk to at most two vectors, the same number of dimensions."""
    vecs = tuple(vecs)
    return vecs[:-1] and tuple(1 for _ in vecs[:-1]) + (min(vecs[-1], 2),) or (min(vecs[0], 2),)


def rows(array, n):
    """The first ``n`` rows of a per-channel array (one row shared by every channel stays as it is)."""
    return None if array is None else np.asarray(array)[:n] if np.asarray(array).shape[0] > 1 else array


def shrink_channels(field_name, fold_name, arrays=()):
    """The hook of a channel-folded layer: ``field_name`` (its channels) to two words of ``fold_name`` lanes,
    the per-channel ``arrays`` cut to match, numInputVectors (where it has them) to two vectors."""
    def shrink(s):
        n = fold(getattr(s, field_name), getattr(s, fold_name))
        changes = {field_name: n, **{a: rows(getattr(s, a), n) for a in arrays}}
        if hasattr(s, "num_input_vectors"):
            changes["num_input_vectors"] = vectors(s.num_input_vectors)
        return changes
    return shrink
