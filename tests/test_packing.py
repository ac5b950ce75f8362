"""Stream packing against a plain per-element reference of FINN's layout (finn-conventions.md §2).

qonnx 1.0 no longer ships FINN's data_packing helpers, so the reference is written here from the rule:
word = sum over j of code(x[j]) << (j * bits), code = two's complement / (x+1)/2 for BIPOLAR.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qonnx.core.datatype import DataType
from qonnx.util.basic import gen_finn_dt_tensor

from memstream.packing import (element_codes, pack_words, padded_width, read_memh, unpack_words,
                               write_memh)

DTYPES = ["BIPOLAR", "BINARY", "TERNARY", "INT2", "INT3", "INT4", "INT8", "INT9", "INT16", "INT32",
          "UINT1", "UINT2", "UINT4", "UINT7", "UINT8", "UINT16", "UINT32", "INT33", "UINT40", "FIXED<8,3>"]


def reference_words(x, dtype):
    dt = DataType[dtype]
    bits = dt.bitwidth()
    words = np.empty(x.shape[:-1], dtype=object)
    for index in np.ndindex(x.shape[:-1]):
        word = 0
        for j, value in enumerate(x[index]):
            if dt == DataType["BIPOLAR"]:
                code = int(value > 0)
            else:
                code = int(round(float(value) / dt.scale_factor() if dt.is_fixed_point() else float(value)))
                code %= 1 << bits
            word |= code << (j * bits)
        words[index] = word
    return words


def random_tensor(dtype, shape, seed):
    if dtype.startswith("FIXED"):
        dt = DataType[dtype]
        ints = np.random.default_rng(seed).integers(-(1 << 7), 1 << 7, shape)
        return (ints * dt.scale_factor()).astype(np.float32)
    np.random.seed(seed)
    return gen_finn_dt_tensor(DataType[dtype], shape)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (2, 4, 16), (5, 49)])
def test_pack_matches_reference_and_round_trips(dtype, shape):
    x = random_tensor(dtype, shape, seed=len(shape) * 31 + shape[-1])
    words = pack_words(x, dtype)
    assert (words == reference_words(x, dtype)).all()
    back = unpack_words(words, dtype, shape[-1])
    assert back.dtype == np.float32
    assert np.array_equal(back, x)


def test_element_zero_is_at_the_lsb():
    # Hand-worked: INT4 [1, -2, 7] -> 0x7e1; BIPOLAR [+1, -1, -1, +1] -> 0b1001.
    assert pack_words(np.array([1, -2, 7]), "INT4") == 0x7E1
    assert pack_words(np.array([1, -1, -1, 1]), "BIPOLAR") == 0b1001


def test_unpack_ignores_byte_padding():
    word = pack_words(np.array([3, -1, 0]), "INT3")      # 9 bits; the port is 16 bits wide
    assert padded_width(9) == 16
    assert np.array_equal(unpack_words(np.array([word | 0xFE00], dtype=object), "INT3", 3)[0], [3, -1, 0])


@pytest.mark.parametrize("dtype, value", [("INT4", 8), ("INT4", -9), ("UINT2", -1), ("BIPOLAR", 0),
                                          ("BINARY", 2), ("INT8", 0.5)])
def test_values_outside_the_datatype_are_rejected(dtype, value):
    with pytest.raises(ValueError, match=rf"^value .* is not representable in {dtype} \(legal: .*\)$"):
        pack_words(np.array([value]), dtype)


def test_float_datatype_is_rejected():
    with pytest.raises(ValueError, match=r"^datatype FLOAT32 cannot be packed into stream words; legal: "):
        element_codes(np.array([1.0]), "FLOAT32")


def test_memh_round_trip(tmp_path):
    words = [0, 1, (1 << 70) - 1, 0x123456789]
    write_memh(tmp_path / "w.dat", words, 70)
    text = (tmp_path / "w.dat").read_text().splitlines()
    assert text[2] == "3fffffffffffffffff" and len(text[0]) == 18
    assert read_memh(tmp_path / "w.dat") == words
    with pytest.raises(ValueError, match=r"does not fit in 8 bits"):
        write_memh(tmp_path / "x.dat", [256], 8)


@settings(max_examples=200, deadline=None)
@given(dtype=st.sampled_from(DTYPES[:-1]), lanes=st.integers(1, 40), rows=st.integers(1, 4), seed=st.integers(0, 10**6))
def test_pack_property(dtype, lanes, rows, seed):
    x = random_tensor(dtype, (rows, lanes), seed)
    words = pack_words(x, dtype)
    assert (words == reference_words(x, dtype)).all()
    assert all(0 <= int(w) < 1 << (lanes * DataType[dtype].bitwidth()) for w in words)
    assert np.array_equal(unpack_words(words, dtype, lanes), x)
