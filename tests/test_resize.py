"""MATLAB-compatible bicubic: against a naive float64 implementation written from MATLAB's
definition, and against behaviour MATLAB's imresize is known to have."""

from __future__ import annotations

import math

import numpy as np
import pytest

from srgpu.resize import contributions, cubic, imresize, output_size


def keys(t: float) -> float:
    t = abs(t)
    if t <= 1:
        return 1.5 * t**3 - 2.5 * t**2 + 1
    if t <= 2:
        return -0.5 * t**3 + 2.5 * t**2 - 4 * t + 2
    return 0.0


def symmetric(j: int, n: int) -> int:
    """1-based MATLAB index j folded into 1..n by mirror symmetry (1..n, n..1, ...)."""
    j = (j - 1) % (2 * n)
    return j + 1 if j < n else 2 * n - j


def naive_resize_1d(v: np.ndarray, out_len: int, scale: float, antialias: bool = True) -> np.ndarray:
    n = len(v)
    aa = scale < 1 and antialias
    support = 2.0 / scale if aa else 2.0
    out = np.empty(out_len)
    for i in range(out_len):
        u = (i + 1) / scale + 0.5 * (1 - 1 / scale)
        acc = total = 0.0
        for j in range(math.floor(u - support) - 1, math.ceil(u + support) + 2):
            w = scale * keys(scale * (u - j)) if aa else keys(u - j)
            acc += w * v[symmetric(j, n) - 1]
            total += w
        out[i] = acc / total
    return out


def naive_imresize(img: np.ndarray, out_hw: tuple[int, int], scales: tuple[float, float]) -> np.ndarray:
    out = img.astype(np.float64)
    for axis in ((0, 1) if scales[0] <= scales[1] else (1, 0)):
        out = np.apply_along_axis(naive_resize_1d, axis, out, out_hw[axis], scales[axis])
    return out


@pytest.mark.parametrize("shape,scale", [((1, 1), 2), ((5, 7), 2), ((6, 5), 3), ((4, 9), 4),
                                         ((12, 10), 0.5), ((13, 11), 1 / 3), ((16, 9), 0.25)])
def test_matches_naive_definition(shape, scale, rng):
    img = rng.random(shape)
    got = imresize(img, scale)
    out_hw = (math.ceil(shape[0] * scale - 1e-9), math.ceil(shape[1] * scale - 1e-9))
    assert got.shape == out_hw
    np.testing.assert_allclose(got, naive_imresize(img, out_hw, (scale, scale)), rtol=0, atol=1e-12)


def test_output_shape_with_unequal_scales_matches_naive(rng):
    img = rng.random((7, 5))
    got = imresize(img, output_shape=(15, 4))
    np.testing.assert_allclose(got, naive_imresize(img, (15, 4), (15 / 7, 4 / 5)), atol=1e-12)


@pytest.mark.parametrize("scale", [2, 3, 4, 0.5, 1 / 3])
def test_constant_image_stays_constant(scale):
    img = np.full((9, 14, 3), 0.3125)
    np.testing.assert_allclose(imresize(img, scale), 0.3125, atol=1e-14)


def test_output_sizes_follow_matlab():
    assert output_size((10, 7), 1 / 3) == (4, 3)  # ceil(10/3), ceil(7/3)
    assert output_size((256, 256), 1 / 3) == (86, 86)
    assert output_size((5, 5), 2) == (10, 10)
    assert imresize(np.zeros((9, 6)), 1 / 3).shape == (3, 2)
    assert imresize(np.zeros((5, 5)), output_shape=(7, 9)).shape == (7, 9)


def test_upscale_reproduces_a_ramp_in_the_interior():
    # Keys' a = -0.5 cubic reproduces polynomials up to degree 2 exactly: away from the border,
    # an upscaled ramp samples the ramp at MATLAB's source coordinate u = x/s + 0.5(1 - 1/s).
    n, s = 12, 3
    v = np.arange(1, n + 1, dtype=np.float64)[None, :]
    out = imresize(v, output_shape=(1, n * s))[0]
    u = np.arange(1, n * s + 1) / s + 0.5 * (1 - 1 / s)
    interior = (u > 3) & (u < n - 2)
    np.testing.assert_allclose(out[interior], u[interior], atol=1e-12)
    q = (v**2)
    outq = imresize(q, output_shape=(1, n * s))[0]
    np.testing.assert_allclose(outq[interior], u[interior] ** 2, atol=1e-9)


def test_symmetric_border():
    # MATLAB's first x2 output sample sits at u = 0.75 and reads indices -1..2; 0 mirrors to 1
    # and -1 to 2 (symmetric, not replicate: a replicate border would read 1.0 there).
    v = np.array([[1.0, 5.0, 2.0, 7.0]])
    first = imresize(v, output_shape=(1, 8))[0, 0]
    w = [keys(0.75 - j) for j in (-1, 0, 1, 2)]
    assert w[0] != 0
    expect = (w[0] * 5.0 + w[1] * 1.0 + w[2] * 1.0 + w[3] * 5.0) / sum(w)
    assert first == pytest.approx(expect, abs=1e-14)
    c = contributions(4, 8, 2.0, True)
    assert c.indices.min() >= 0 and c.indices.max() <= 3


def test_antialiased_downscale():
    c = contributions(40, 20, 0.5, True)
    np.testing.assert_allclose(c.weights.sum(axis=1), 1.0, atol=1e-14)
    assert c.taps >= 8  # the kernel is stretched to 8 input pixels at 1/2
    plain = contributions(40, 20, 0.5, False)
    assert plain.taps <= 6
    # pixel-wide stripes are above the new Nyquist limit: antialiasing removes them, while plain
    # sampling at 1/3 (u = 3x - 1 lands on whole pixels) aliases them at full contrast
    stripes = np.tile(np.arange(48) % 2, (6, 1)).astype(np.float64)
    assert np.ptp(imresize(stripes, 1 / 3)[:, 3:-3]) < 0.05
    assert np.ptp(imresize(stripes, 1 / 3, antialias=False)[:, 3:-3]) > 0.99
    # and the downscale keeps the mean of a smooth image
    ramp = np.add.outer(np.linspace(0, 1, 40), np.linspace(0, 0.5, 40))
    assert imresize(ramp, 0.5).mean() == pytest.approx(ramp.mean(), abs=1e-3)


def test_cubic_kernel_values():
    np.testing.assert_allclose(cubic(np.array([0.0, 0.5, 1.0, 1.5, 2.0, 2.5])),
                               [1.0, 0.5625, 0.0, -0.0625, 0.0, 0.0])


def test_float32_close_to_float64_and_integers_refused(rng):
    img = rng.random((11, 8))
    np.testing.assert_allclose(imresize(img.astype(np.float32), 3), imresize(img, 3), atol=2e-6)
    assert imresize(img.astype(np.float32), 3).dtype == np.float32
    with pytest.raises(TypeError):
        imresize(np.zeros((4, 4), np.uint8), 2)
