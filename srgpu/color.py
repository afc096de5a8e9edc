"""BT.601 studio-range YCbCr, exactly as MATLAB's ``rgb2ycbcr``/``ycbcr2rgb`` (the authors' protocol).

Video never passes through here: it stays in its own planar YUV. Only RGB images are converted.
"""

from __future__ import annotations

import numpy as np

# rows: Y, Cb, Cr; columns: R, G, B in [0, 1]; result in [0, 255] before the offset
BT601_MATRIX = np.array(
    [
        [65.481, 128.553, 24.966],
        [-37.797, -74.203, 112.0],
        [112.0, -93.786, -18.214],
    ],
    dtype=np.float64,
)
BT601_OFFSET = np.array([16.0, 128.0, 128.0], dtype=np.float64)
_INVERSE = np.linalg.inv(BT601_MATRIX)


def rgb_to_ycbcr(rgb: np.ndarray) -> np.ndarray:
    """RGB float in [0, 1] (H, W, 3) -> YCbCr float in [0, 1] (H, W, 3), unrounded."""
    rgb = np.asarray(rgb, dtype=np.float64)
    return (rgb @ BT601_MATRIX.T + BT601_OFFSET) / 255.0


def ycbcr_to_rgb(ycbcr: np.ndarray) -> np.ndarray:
    """Inverse of :func:`rgb_to_ycbcr`; the result is not clipped."""
    ycbcr = np.asarray(ycbcr, dtype=np.float64)
    return (ycbcr * 255.0 - BT601_OFFSET) @ _INVERSE.T


def rgb_to_y_uint8(rgb: np.ndarray) -> np.ndarray:
    """MATLAB ``rgb2ycbcr`` on uint8 RGB, Y plane only, rounded to uint8 (the evaluation's Y)."""
    if rgb.dtype != np.uint8:
        raise TypeError(f"expected uint8 RGB, got {rgb.dtype}")
    y = rgb.astype(np.float64) / 255.0 @ BT601_MATRIX[0] + BT601_OFFSET[0]
    return quantize(y / 255.0, np.uint8)


def quantize(values: np.ndarray, dtype: type[np.integer], max_value: int | None = None) -> np.ndarray:
    """Float in [0, 1] -> integers: scale by ``max_value`` (default: the dtype's maximum),
    round half away from zero and saturate, as MATLAB's ``uint8()``/``uint16()``."""
    top = int(np.iinfo(dtype).max if max_value is None else max_value)
    scaled = np.asarray(values, dtype=np.float64) * top
    rounded = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)
    return np.clip(rounded, 0, top).astype(dtype)
