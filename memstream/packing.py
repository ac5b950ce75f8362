"""Folded tensors <-> stream words, and memory-image files.

The one place that knows FINN's word layout (reference/finn-conventions.md §2): the innermost dimension
of a folded tensor is packed into one word, element ``j`` at bits ``[j*b, (j+1)*b)`` (element 0 at the
LSB), two's complement for signed types, BIPOLAR stored as bit 1 = +1, FIXED<w,i> as INTw of
``value / scale``. It lives in ``memstream`` (the lowest package) because layers pack their weight and
threshold images with it and ``sim`` packs and unpacks streams with it.

Words are Python ints (any width). Arrays of words are numpy ``object`` arrays of shape
``folded_shape[:-1]``.
"""

import numpy as np
from qonnx.core.datatype import DataType

__all__ = [
    "element_codes",
    "element_values",
    "pack_words",
    "unpack_words",
    "padded_width",
    "write_memh",
    "read_memh",
]


def _dtype(dtype):
    if isinstance(dtype, str):
        try:
            return DataType[dtype]
        except KeyError:
            raise ValueError(f"datatype must be a qonnx DataType name, not {dtype!r}") from None
    return dtype


def _check_packable(dtype):
    if not (dtype.is_integer() or dtype.is_fixed_point()):
        raise ValueError(f"datatype {dtype.name} cannot be packed into stream words; "
                         f"legal: BINARY, BIPOLAR, TERNARY, INTn, UINTn, FIXED<w,i>")


def element_codes(values, dtype):
    """The unsigned b-bit code of each value (``uint64`` array, same shape), checking every value is legal."""
    dtype = _dtype(dtype)
    _check_packable(dtype)
    values = np.asarray(values)
    bits = dtype.bitwidth()
    lo, hi = dtype.min(), dtype.max()
    if dtype.is_fixed_point():      # FIXED<w,i> is stored as INTw of value / scale
        values = values / dtype.scale_factor()
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if bits > 64:
        raise ValueError(f"datatype {dtype.name} is wider than 64 bits; legal: up to 64 bits per element")
    as_float = np.asarray(values, dtype=np.float64)
    ints = np.rint(as_float)
    bad = (ints != as_float) | (ints < lo) | (ints > hi)
    if dtype == DataType["BIPOLAR"]:
        bad = bad | (ints == 0)
    if bad.any():
        first = float(np.asarray(values, dtype=np.float64)[bad].flat[0])
        if dtype.is_fixed_point():
            first *= dtype.scale_factor()
        raise ValueError(f"value {first!r} is not representable in {dtype.name} "
                         f"(legal: {_legal_range(dtype)})")
    if dtype == DataType["BIPOLAR"]:
        return ((ints + 1) // 2).astype(np.uint64)
    mask = np.uint64((1 << bits) - 1) if bits < 64 else np.uint64(0xFFFF_FFFF_FFFF_FFFF)
    return ints.astype(np.int64).astype(np.uint64) & mask


def element_values(codes, dtype):
    """Inverse of :func:`element_codes`: float32 values, as qonnx holds them."""
    dtype = _dtype(dtype)
    _check_packable(dtype)
    codes = np.asarray(codes, dtype=np.uint64)
    bits = dtype.bitwidth()
    if dtype == DataType["BIPOLAR"]:
        return codes.astype(np.float32) * 2 - 1
    values = codes.astype(np.int64) if bits == 64 else codes.astype(np.int64)
    if dtype.signed():
        values = np.where(values >= (1 << (bits - 1)), values - (1 << bits), values)
    values = values.astype(np.float64)
    if dtype.is_fixed_point():
        values = values * dtype.scale_factor()
    return values.astype(np.float32)


def _legal_range(dtype):
    if dtype == DataType["BIPOLAR"]:
        return "-1, +1"
    if dtype.is_fixed_point():
        return f"multiples of {dtype.scale_factor()} in [{dtype.min()}, {dtype.max()}]"
    return f"integers in [{dtype.min()}, {dtype.max()}]"


def pack_words(folded, dtype):
    """Pack the innermost dimension of ``folded`` into words (element 0 at the LSB).

    Returns an object array of Python ints with shape ``folded.shape[:-1]``.
    """
    dtype = _dtype(dtype)
    folded = np.asarray(folded)
    if folded.ndim == 0:
        raise ValueError("folded tensor must have at least one dimension (the packed one)")
    codes = element_codes(folded, dtype)
    bits = dtype.bitwidth()
    lanes = folded.shape[-1]
    flat = codes.reshape(-1, lanes)
    # Vectorised for any word width: spread each code into its bits, then regroup bytes little-endian.
    code_bytes = np.ascontiguousarray(flat, dtype="<u8").view(np.uint8).reshape(len(flat), lanes, 8)
    code_bits = np.unpackbits(code_bytes, axis=-1, bitorder="little")[..., :bits]
    word_bits = code_bits.reshape(len(flat), lanes * bits)
    word_bytes = np.packbits(word_bits, axis=-1, bitorder="little")
    words = np.empty(len(flat), dtype=object)
    for k, row in enumerate(word_bytes):
        words[k] = int.from_bytes(row.tobytes(), "little")
    return words.reshape(folded.shape[:-1])


def unpack_words(words, dtype, lanes):
    """Inverse of :func:`pack_words`: words -> values with a new innermost dimension of ``lanes``.

    Bits above ``lanes * bitwidth`` (the byte padding of top-level ports) are ignored.
    """
    dtype = _dtype(dtype)
    words = np.asarray(words, dtype=object)
    bits = dtype.bitwidth()
    width = lanes * bits
    nbytes = (width + 7) // 8
    mask = (1 << width) - 1
    flat = words.reshape(-1)
    raw = b"".join((int(w) & mask).to_bytes(nbytes, "little") for w in flat)
    word_bytes = np.frombuffer(raw, dtype=np.uint8).reshape(len(flat), nbytes)
    word_bits = np.unpackbits(word_bytes, axis=-1, bitorder="little")[:, :width]
    code_bits = np.zeros((len(flat), lanes, 64), dtype=np.uint8)
    code_bits[..., :bits] = word_bits.reshape(len(flat), lanes, bits)
    codes = np.packbits(code_bits, axis=-1, bitorder="little").view("<u8")[..., 0]
    return element_values(codes, dtype).reshape(words.shape + (lanes,))


def padded_width(width):
    """Width of an AXI-Stream port carrying ``width`` bits: the next multiple of 8."""
    return (width + 7) // 8 * 8


def write_memh(path, words, width):
    """Write a ``$readmemh`` image: one word per line, ``ceil(width/4)`` hex digits, no address marks."""
    digits = max(1, (width + 3) // 4)
    limit = 1 << width
    with open(path, "w") as f:
        for w in np.asarray(words, dtype=object).reshape(-1):
            w = int(w)
            if not 0 <= w < limit:
                raise ValueError(f"memory word {w:#x} does not fit in {width} bits")
            f.write(f"{w:0{digits}x}\n")


def read_memh(path):
    """Read a ``$readmemh`` image written by :func:`write_memh` (``//`` comments and blank lines allowed)."""
    words = []
    with open(path) as f:
        for line in f:
            line = line.split("//", 1)[0].strip()
            if not line:
                continue
            if line.startswith("@"):
                raise ValueError(f"{path}: address marks (@...) are not supported")
            words.extend(int(tok, 16) for tok in line.split())
    return words
