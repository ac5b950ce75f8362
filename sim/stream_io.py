"""A compiled accelerator as its user sees it: the model's own input in, the model's own output out.

:class:`StreamIO` turns model tensors into stream words and back (host pre ops, quantizer codes, NHWC
stream order, FINN word packing; then unpacking, scales, host post ops). It is all that ``rtlgen sim``
needs besides the Verilog, and :mod:`sim.outdir` saves it beside it (``io.json`` and the host's models)
and reads a compile's OUT back. This is the runtime that the compiler (``rtlgen``), the
board driver (``boards``) and the benches share, so it lives below all of them.
"""

import copy
from dataclasses import dataclass
from math import prod

import numpy as np
from qonnx.core.datatype import DataType

from memstream.packing import pack_words, unpack_words

__all__ = ["InputError", "InputWarning", "StreamEnd", "StreamIO", "input_batch", "run_submodel"]



class InputWarning(UserWarning):
    """Something about the input the user should know that does not stop the run (saturated values);
    the CLI prints it as one ``warning:`` line."""


class InputError(ValueError):
    """Model inputs that do not fit the accelerator (shape, range, codes); the message says what is legal."""


@dataclass
class StreamEnd:
    """One end of the accelerator: the model tensor it carries and how it is packed."""
    tensor: str
    shape: tuple            # model (logical) shape, batch 1
    dtype: DataType
    scale: object           # number or per-channel list (real = scale * code); 1 for indices
    lanes: int              # elements per stream word
    kind: str = "codes"
    gain: int = 1           # real = scale * (gain * code + offset)
    offset: int = 0
    rounding: bool = False  # the model computes it in float32 with non-power-of-two scales (see compare)
    fixed: str = None       # the model input annotated FIXED<w,i>: the host rounds floats onto its grid

    @property
    def spatial(self):
        return len(self.shape) == 4

    @property
    def elements(self):
        return prod(self.shape[1:])

    @property
    def words_per_frame(self):
        return self.elements // self.lanes

    def to_stream(self, x):
        x = np.asarray(x)
        if self.spatial:
            x = x.transpose(0, 2, 3, 1)
        return x.reshape(x.shape[0], -1)

    def from_stream(self, flat):
        flat = np.asarray(flat)
        if self.spatial:
            c, h, w = self.shape[1:]
            return flat.reshape(flat.shape[0], h, w, c).transpose(0, 3, 1, 2)
        return flat.reshape((flat.shape[0], *self.shape[1:]))

    def real(self, codes):
        if self.kind == "indices":
            return codes.astype(np.int64)
        scale = channel_scale(self.scale, codes.shape)
        return ((self.gain * codes + self.offset).astype(np.float64) * scale).astype(np.float32)

    def to_json(self):
        scale = np.asarray(self.scale, dtype=np.float64)
        return {"tensor": self.tensor, "shape": list(self.shape), "dtype": self.dtype.name,
                "scale": scale.tolist(), "lanes": self.lanes, "kind": self.kind, "gain": self.gain,
                "offset": self.offset, "rounding": self.rounding, "fixed": self.fixed}

    @classmethod
    def from_json(cls, d):
        return cls(d["tensor"], tuple(d["shape"]), DataType[d["dtype"]], d["scale"], d["lanes"], d["kind"],
                   d["gain"], d["offset"], d.get("rounding", False), d.get("fixed"))


def channel_scale(scale, shape):
    """A stream end's scale (a number, or one per channel) shaped to multiply a batch of ``shape`` in the
    model's layout: channels on axis 1 (on the last axis of a sequence); a flattened feature map (N, C*H*W) holds each channel's H*W values
    together."""
    scale = np.asarray(scale, dtype=np.float64)
    if not scale.ndim or scale.size == 1:
        return float(scale.reshape(-1)[0])
    scale = scale.reshape(-1)
    if len(shape) == 3:     # a sequence (N, tokens, features) streams token vectors: channels are the features
        return scale.reshape(1, 1, -1)
    if len(shape) > 1 and shape[1] != scale.size and shape[1] % scale.size == 0:
        scale = np.repeat(scale, shape[1] // scale.size)
    return scale.reshape((1, -1) + (1,) * (len(shape) - 2))


def input_batch(x, name, shape):
    """``x`` as a float32 batch of the model input ``name`` of ``shape`` (batch 1): ``shape`` itself, a
    batch (N, ...) of it, or (N, *shape); anything else is an error naming both shapes."""
    x = np.asarray(x)
    want = tuple(shape)
    if x.dtype.kind not in "biuf":
        raise InputError(f"input of dtype {x.dtype} is not numbers; give a numeric .npy array")
    if x.shape == want or (x.shape[1:] == want[1:] and x.ndim == len(want)):
        return _finite(x.astype(np.float32))
    if x.shape[1:] == want and x.ndim == len(want) + 1:
        return _finite(x.reshape(-1, *want[1:]).astype(np.float32))
    raise InputError(f"input of shape {x.shape} does not match the model input {name} of shape {want} "
                       f"(a batch (N, {', '.join(map(str, want[1:]))}) is also accepted)")


def _finite(x):
    """``x`` (a batch) if it has samples and no NaN or infinity; else an error naming the first bad sample."""
    if len(x) == 0:
        raise InputError(f"input of shape {x.shape} has no samples")
    bad = ~np.isfinite(x.reshape(len(x), -1)).all(axis=1)
    if bad.any():
        raise InputError(f"input sample {int(np.flatnonzero(bad)[0])} has NaN or infinite values "
                         f"({int(bad.sum())} of {len(x)} samples)")
    return x


@dataclass
class StreamIO:
    """Model input <-> ``s_axis_0`` words and ``m_axis_0`` words <-> model output."""
    model_input: str
    model_input_shape: tuple
    model_output: str
    input: StreamEnd
    output: StreamEnd
    host_pre: object = None         # ModelWrapper or None (identity)
    host_post: object = None

    def check_input(self, x):
        """``x`` as a batch: the model's input shape, or a batch of it (first axis); else a clear error."""
        return input_batch(x, self.model_input, self.model_input_shape)

    def input_codes(self, x):
        """Model input batch -> (batch, elements) integer codes in stream order."""
        if self.input.fixed:
            return self.input.to_stream(self._fixed_codes(self.check_input(x))).astype(np.int64)
        real = run_submodel(self.host_pre, self.check_input(x))
        scale = channel_scale(self.input.scale, real.shape)
        codes = np.round(real.astype(np.float64) / scale)
        # the host's quantizer computes scale * code in float32: off by its rounding (relative 2^-24 of the
        # value), never by a sizable part of a step, which only a value that is not a code can be
        if not np.allclose(codes * scale, real, rtol=0, atol=1e-3 * scale):
            raise InputError(f"input values are not integers of {self.input.dtype.name}"
                               + (" (the model input is annotated as such)" if self.host_pre is None else ""))
        lo, hi = self.input.dtype.min(), self.input.dtype.max()
        if codes.min() < lo or codes.max() > hi:
            raise InputError(f"input values must lie in {lo}..{hi} ({self.input.dtype.name}), "
                               f"got {codes.min():g}..{codes.max():g}")
        return self.input.to_stream(codes).astype(np.int64)

    def _fixed_codes(self, x):
        """Float inputs onto the FIXED<w,i> grid, as hls4ml's ap_fixed with AP_RND_CONV and AP_SAT: the
        nearest grid point (ties to even), values beyond the range saturated (with a warning counting them)."""
        import warnings
        scale = float(np.asarray(self.input.scale).reshape(-1)[0])
        codes = np.round(x.astype(np.float64) / scale)
        lo, hi = self.input.dtype.min(), self.input.dtype.max()
        outside = int(((codes < lo) | (codes > hi)).sum())
        if outside:
            warnings.warn(InputWarning(f"{outside} of {codes.size} input values lie outside {self.input.fixed} "
                                       f"({lo * scale:g}..{hi * scale:g}) and were saturated"))
        return np.clip(codes, lo, hi)

    def on_input_grid(self, x):
        """``x`` as the accelerator sees it: for a FIXED<w,i> input, rounded and saturated onto the grid
        (the model's own semantics for an input of that type); otherwise ``x`` itself."""
        if not self.input.fixed:
            return x
        import warnings
        batch = self.check_input(x)
        with warnings.catch_warnings():         # input_codes warns once; this is the same conversion
            warnings.simplefilter("ignore", InputWarning)
            codes = self._fixed_codes(batch)
        return (codes * float(np.asarray(self.input.scale).reshape(-1)[0])).astype(np.float32)

    def encode(self, x):
        """Model input batch -> list of ``s_axis_0`` words (frames back to back)."""
        codes = self.input_codes(x)
        return [int(w) for w in pack_words(codes.reshape(-1, self.input.lanes), self.input.dtype)]

    def output_from_codes(self, codes):
        """(batch, elements) output codes in stream order -> the model's output (host post ops run)."""
        logical = self.output.from_stream(np.asarray(codes))
        return run_submodel(self.host_post, self.output.real(logical))

    def decode(self, words, batch):
        """``m_axis_0`` words of ``batch`` frames -> the model's output."""
        codes = unpack_words(np.array(words, dtype=object), self.output.dtype, self.output.lanes)
        return self.output_from_codes(np.asarray(codes, dtype=np.int64).reshape(batch, -1))

    # ---- io.json (written and read by sim.outdir, which names OUT's files) ----
    def to_json(self):
        """What io.json holds of it (sim.outdir adds the names of the host models' files)."""
        return {"model_input": self.model_input, "model_input_shape": list(self.model_input_shape),
                "model_output": self.model_output, "input": self.input.to_json(), "output": self.output.to_json()}

    @classmethod
    def from_json(cls, meta, host_pre=None, host_post=None):
        return cls(meta["model_input"], tuple(meta["model_input_shape"]), meta["model_output"],
                   StreamEnd.from_json(meta["input"]), StreamEnd.from_json(meta["output"]), host_pre, host_post)


# ---- the host's share: small qonnx models run in batches ----

BATCH = 256        # samples per execute_onnx call on the host models


def run_submodel(sub, x):
    """Run ``sub`` (or the identity for None) on ``x`` (batch first; the models are built for batch 1,
    as exported) and stack the results.

    Batches of :data:`BATCH` samples go through one ``execute_onnx`` (qonnx's ChangeBatchSize; the
    per-call overhead is ~10 ms, far more than the work); a model that does not take a batch (e.g. a
    Reshape to a shape computed at run time) runs one sample at a time. The host ops are elementwise
    or reshapes, so the batch changes no value (and verify compares every one with qonnx).
    """
    if sub is None:
        return np.asarray(x)
    x = np.asarray(x, dtype=np.float32)
    rows = []
    for start in range(0, len(x), BATCH):
        chunk = x[start:start + BATCH]
        try:
            rows.append(_execute(_batched(sub, len(chunk)), chunk))
        except Exception:               # the model does not take a batch: one sample at a time
            rows.extend(_execute(sub, sample[None]) for sample in chunk)
    return np.concatenate(rows, axis=0)


def _execute(sub, x):
    from qonnx.core.onnx_exec import execute_onnx

    in_name, out_name = sub.graph.input[0].name, sub.graph.output[0].name
    shape = list(sub.get_tensor_shape(in_name))
    out = execute_onnx(sub, {in_name: x.reshape([len(x)] + shape[1:])})[out_name]
    if len(out) != len(x):
        raise ValueError(f"host model {sub.graph.name}: {len(out)} results for {len(x)} samples")
    return out


_BATCHED = {}


def _batched(sub, n):
    """``sub`` with batch size ``n`` (cached per model object and size)."""
    from qonnx.transformation.change_batchsize import ChangeBatchSize
    from qonnx.transformation.infer_shapes import InferShapes

    key = (id(sub), n)
    if key not in _BATCHED or _BATCHED[key][0] is not sub:
        if n == 1:
            return sub
        model = copy.deepcopy(sub).transform(ChangeBatchSize(n)).transform(InferShapes())
        _BATCHED[key] = (sub, model)
    return _BATCHED[key][1]

