"""Y-channel PSNR and SSIM with a border shave, as the authors' evaluation computes them."""

from __future__ import annotations

import cv2
import numpy as np


def shave(image: np.ndarray, border: int) -> np.ndarray:
    return image[border:-border, border:-border] if border > 0 else image


def psnr(reference: np.ndarray, test: np.ndarray, peak: float = 255.0) -> float:
    """PSNR in dB of two same-shaped images (the authors' ``compute_psnr``)."""
    if reference.shape != test.shape:
        raise ValueError(f"shape mismatch: {reference.shape} vs {test.shape}")
    diff = reference.astype(np.float64) - test.astype(np.float64)
    mse = float(np.mean(diff * diff))
    if mse == 0:
        return float("inf")
    return float(20.0 * np.log10(peak / np.sqrt(mse)))


def ssim(reference: np.ndarray, test: np.ndarray, peak: float = 255.0) -> float:
    """Mean SSIM (Wang et al. 2004): 11x11 Gaussian window, sigma 1.5, K1 0.01, K2 0.03, 'valid'."""
    if reference.shape != test.shape:
        raise ValueError(f"shape mismatch: {reference.shape} vs {test.shape}")
    x = reference.astype(np.float64)
    y = test.astype(np.float64)
    c1, c2 = (0.01 * peak) ** 2, (0.03 * peak) ** 2
    g = cv2.getGaussianKernel(11, 1.5)
    window = g @ g.T

    def filt(a: np.ndarray) -> np.ndarray:
        return cv2.filter2D(a, -1, window, borderType=cv2.BORDER_REFLECT)[5:-5, 5:-5]

    mx, my = filt(x), filt(y)
    sxx = filt(x * x) - mx * mx
    syy = filt(y * y) - my * my
    sxy = filt(x * y) - mx * my
    num = (2 * mx * my + c1) * (2 * sxy + c2)
    den = (mx * mx + my * my + c1) * (sxx + syy + c2)
    return float(np.mean(num / den))
