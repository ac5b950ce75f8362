"""The golden models agree with qonnx's own implementations and with textbook identities."""

import numpy as np
from qonnx.custom_op.general.multithreshold import multithreshold as qonnx_multithreshold

import golden
from layers.vvau import golden_depthwise_dot


def test_multithreshold_matches_qonnx():
    rng = np.random.default_rng(0)
    x = rng.integers(-40, 40, size=(3, 5, 7)).astype(np.float32)       # channels last
    t = np.sort(rng.integers(-50, 50, size=(7, 15)), axis=1).astype(np.float32)
    ours = golden.multithreshold(x, t, act_val=-8)
    theirs = qonnx_multithreshold(x, t, out_bias=-8, channels_last=True)
    assert np.array_equal(ours, theirs)
    per_tensor = t[:1]
    assert np.array_equal(golden.multithreshold(x, per_tensor),
                          qonnx_multithreshold(x, per_tensor, channels_last=True))


def test_bipolar_output_is_scaled_count():
    x = np.array([[-3, 0, 5]])
    t = np.array([[0], [0], [0]])
    assert golden.multithreshold(x, t, bipolar=True).tolist() == [[-1, 1, 1]]


def test_xnor_popcount_is_the_shifted_bipolar_dot_product():
    rng = np.random.default_rng(1)
    x = rng.choice([-1, 1], size=(4, 33))
    w = rng.choice([-1, 1], size=(33, 6))
    assert np.array_equal(2 * golden.xnor_popcount(x, w) - 33, x @ w)
    assert np.array_equal(golden.xnor_popcount((x + 1) // 2, (w + 1) // 2), golden.xnor_popcount(x, w))


def test_depthwise_is_a_per_channel_dot_product():
    rng = np.random.default_rng(2)
    windows = rng.integers(-8, 8, size=(2, 9, 4))
    w = rng.integers(-8, 8, size=(4, 9))
    expected = np.array([[windows[n, :, c] @ w[c] for c in range(4)] for n in range(2)])
    assert np.array_equal(golden_depthwise_dot(windows, w), expected)
    bits = rng.choice([-1, 1], size=(9, 4))
    wb = rng.choice([-1, 1], size=(4, 9))
    assert np.array_equal(2 * golden_depthwise_dot(bits, wb, xnor=True) - 9, golden_depthwise_dot(bits, wb))
