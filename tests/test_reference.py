"""The CPU reference (the oracle for every GPU kernel) against an independent naive float64
implementation: per output pixel, explicit clamped (replicate-border) indices, no padding,
no OpenCV."""

from __future__ import annotations

import numpy as np
import pytest

from srgpu.model import random_model
from srgpu.reference import srcnn_forward, srcnn_layers


def naive_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, relu: bool) -> np.ndarray:
    """x (Cin, H, W), w (Cout, Cin, k, k): correlation, 'same' size, replicate border."""
    cin, h, wd = x.shape
    k = w.shape[-1]
    r = k // 2
    out = np.empty((w.shape[0], h, wd))
    offsets = np.arange(k) - r
    for i in range(h):
        rows = np.clip(i + offsets, 0, h - 1)
        for j in range(wd):
            cols = np.clip(j + offsets, 0, wd - 1)
            patch = x[:, rows][:, :, cols]  # (Cin, k, k)
            out[:, i, j] = np.tensordot(w, patch, axes=([1, 2, 3], [0, 1, 2])) + b
    return np.maximum(out, 0) if relu else out


def naive_srcnn(y: np.ndarray, model) -> np.ndarray:
    a = model.arrays(np.float64)
    h = naive_conv(y[None].astype(np.float64), a["conv1_weight"], a["conv1_bias"], True)
    h = naive_conv(h, a["conv2_weight"], a["conv2_bias"], True)
    return naive_conv(h, a["conv3_weight"], a["conv3_bias"], False)[0]


@pytest.mark.parametrize("arch", ["9-1-5", "9-3-5", "9-5-5"])
@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (7, 13), (12, 5)])
def test_float64_matches_naive(arch, shape, rng):
    model = random_model(arch, seed=11)
    y = rng.random(shape)
    expect = naive_srcnn(y, model)
    got = srcnn_forward(y, model, dtype=np.float64)
    assert got.dtype == np.float64 and got.shape == shape
    assert np.abs(expect).max() > 1e-3  # the case is not degenerate (all-ReLU-dead)
    np.testing.assert_allclose(got, expect, rtol=0, atol=1e-11)


@pytest.mark.parametrize("arch", ["9-1-5", "9-5-5"])
@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64])
def test_column_chunks_match_naive(arch, chunk, rng):
    """The layers in column chunks (conv2 and conv3 per chunk, with conv3's margin from the
    neighbours): chunks narrower than the margin, a last chunk of any width, none at all. Seams
    computed without the neighbours' columns would be off by far more."""
    model = random_model(arch, seed=12)
    y = rng.random((9, 29))
    got = srcnn_layers(y, model, chunk)
    np.testing.assert_allclose(got, naive_srcnn(y, model), rtol=0, atol=1e-11)


def test_float32_close_to_float64(rng):
    model = random_model("9-5-5", seed=2)
    y = rng.random((19, 23))
    out32 = srcnn_forward(y, model, dtype=np.float32)
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, srcnn_forward(y, model, dtype=np.float64), atol=2e-5)


@pytest.mark.parametrize("arch", ["9-1-5", "9-5-5"])
@pytest.mark.parametrize("strip_pixels", [1, 37, 100, 290])
def test_strips_equal_unstriped(arch, strip_pixels, rng):
    model = random_model(arch, seed=5)
    y = rng.random((31, 17))
    whole = srcnn_forward(y, model, dtype=np.float64, strip_pixels=10**9)
    striped = srcnn_forward(y, model, dtype=np.float64, strip_pixels=strip_pixels)
    np.testing.assert_allclose(striped, whole, rtol=0, atol=1e-12)


def test_reference_weights_improve_on_bicubic(reference_mat, rng):
    """With the authors' weights the network is close to identity plus detail: on a smooth
    ramp it changes little (a sign that layout and scaling of the imported weights are right)."""
    from srgpu.model import load_mat

    model = load_mat(reference_mat("9-1-5", 2))
    y = np.add.outer(np.linspace(0.2, 0.6, 24), np.linspace(0, 0.2, 24))
    out = srcnn_forward(y, model, dtype=np.float64)
    assert np.abs(out - y)[6:-6, 6:-6].max() < 0.02
