"""PSNR and SSIM as the authors compute them; SSIM against a naive per-window implementation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from srgpu.tools.metrics import psnr, shave, ssim


def naive_ssim(x: np.ndarray, y: np.ndarray, peak: float = 255.0) -> float:
    """Wang et al. 2004: 11x11 Gaussian (sigma 1.5) weighted statistics per 'valid' window."""
    g = np.exp(-((np.arange(11) - 5) ** 2) / (2 * 1.5**2))
    win = np.outer(g, g) / np.outer(g, g).sum()
    c1, c2 = (0.01 * peak) ** 2, (0.03 * peak) ** 2
    x, y = x.astype(np.float64), y.astype(np.float64)
    vals = []
    for i in range(x.shape[0] - 10):
        for j in range(x.shape[1] - 10):
            a, b = x[i:i + 11, j:j + 11], y[i:i + 11, j:j + 11]
            ma, mb = (win * a).sum(), (win * b).sum()
            va, vb = (win * a * a).sum() - ma**2, (win * b * b).sum() - mb**2
            cov = (win * a * b).sum() - ma * mb
            vals.append((2 * ma * mb + c1) * (2 * cov + c2) / ((ma**2 + mb**2 + c1) * (va + vb + c2)))
    return float(np.mean(vals))


def test_psnr_known_values():
    a = np.zeros((8, 8), np.uint8)
    assert psnr(a, a) == math.inf
    assert psnr(a, a + 1) == pytest.approx(20 * math.log10(255))
    b = a.copy()
    b[0, 0] = 64  # MSE = 64^2 / 64 = 64
    assert psnr(a, b) == pytest.approx(10 * math.log10(255**2 / 64))
    with pytest.raises(ValueError, match="shape mismatch"):
        psnr(a, a[:4])


def test_ssim_matches_naive(rng):
    x = rng.integers(0, 256, (20, 23)).astype(np.uint8)
    y = np.clip(x.astype(int) + rng.integers(-30, 31, x.shape), 0, 255).astype(np.uint8)
    assert ssim(x, y) == pytest.approx(naive_ssim(x, y), abs=1e-10)
    assert ssim(x, x) == pytest.approx(1.0, abs=1e-12)
    z = np.clip(x.astype(int) + rng.integers(-90, 91, x.shape), 0, 255).astype(np.uint8)
    assert ssim(x, z) < ssim(x, y) < 0.99  # more noise, less similar
    assert ssim(x, y) == pytest.approx(ssim(y, x), abs=1e-12)


def test_shave():
    a = np.arange(36).reshape(6, 6)
    np.testing.assert_array_equal(shave(a, 2), a[2:4, 2:4])
    assert shave(a, 0) is a
