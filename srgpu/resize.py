"""MATLAB-compatible bicubic resize (``imresize(..., 'bicubic')``).

Keys cubic with a = -0.5, MATLAB's pixel-centre mapping ``u = x/s + 0.5 (1 - 1/s)``,
antialiasing on downscale (kernel stretched by 1/s) and symmetric border handling.
This one function makes the evaluation data, the training data and the inference upscale;
the GPU kernels take their coefficients from :func:`contributions` so every engine agrees.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

KERNEL_WIDTH = 4.0  # support of the cubic kernel, in input pixels, before any antialias stretch


def cubic(x: np.ndarray) -> np.ndarray:
    """Keys cubic convolution kernel with a = -0.5 (MATLAB's ``cubic``)."""
    ax = np.abs(x)
    ax2 = ax * ax
    ax3 = ax2 * ax
    return (1.5 * ax3 - 2.5 * ax2 + 1.0) * (ax <= 1) + (
        -0.5 * ax3 + 2.5 * ax2 - 4.0 * ax + 2.0
    ) * ((ax > 1) & (ax <= 2))


@dataclass(frozen=True)
class Contributions:
    """Per output sample: the input indices it reads and their weights (rows sum to 1)."""

    weights: np.ndarray  # (out_length, taps) float64
    indices: np.ndarray  # (out_length, taps) int64, already folded into [0, in_length)
    unfolded: np.ndarray  # (out_length, taps) int64, the same 0-based indices before the border fold

    @property
    def taps(self) -> int:
        return int(self.weights.shape[1])


@lru_cache(maxsize=256)
def contributions(in_length: int, out_length: int, scale: float, antialias: bool = True) -> Contributions:
    """MATLAB ``contributions()``: the 1-D resampling matrix in gather form."""
    if in_length < 1 or out_length < 1:
        raise ValueError(f"resize lengths must be positive, got {in_length} -> {out_length}")
    width = KERNEL_WIDTH
    if scale < 1 and antialias:
        def kernel(x: np.ndarray) -> np.ndarray:
            return scale * cubic(scale * x)
        width = KERNEL_WIDTH / scale
    else:
        kernel = cubic
    x = np.arange(1, out_length + 1, dtype=np.float64)
    u = x / scale + 0.5 * (1.0 - 1.0 / scale)
    left = np.floor(u - width / 2.0)
    taps = int(np.ceil(width)) + 2
    idx = left[:, None] + np.arange(taps)[None, :]  # 1-based, may fall outside the image
    w = kernel(u[:, None] - idx)
    w = w / w.sum(axis=1, keepdims=True)
    keep = np.any(w != 0, axis=0)
    w, unfolded = w[:, keep], idx[:, keep].astype(np.int64) - 1  # 0-based
    folded = mirror(unfolded, in_length)
    for a in (w, folded, unfolded):
        a.setflags(write=False)
    return Contributions(weights=w, indices=folded, unfolded=unfolded)


def mirror(index: np.ndarray, length: int) -> np.ndarray:
    """0-based indices folded into [0, length) by the symmetric border of :func:`contributions`
    (..., 1, 0 | 0, 1, ..., n-1 | n-1, n-2, ...)."""
    aux = np.concatenate([np.arange(length), np.arange(length - 1, -1, -1)])
    return aux[np.mod(np.asarray(index, dtype=np.int64), aux.size)]


def output_size(in_hw: tuple[int, int], scale: float) -> tuple[int, int]:
    """MATLAB's output size for a scale factor: ceil(in * scale) per dimension."""
    return (int(np.ceil(in_hw[0] * scale - 1e-9)), int(np.ceil(in_hw[1] * scale - 1e-9)))


def _resize_axis(a: np.ndarray, axis: int, out_length: int, scale: float, antialias: bool) -> np.ndarray:
    c = contributions(a.shape[axis], out_length, float(scale), antialias)
    moved = np.moveaxis(a, axis, 0)
    out = np.zeros((out_length,) + moved.shape[1:], dtype=a.dtype)
    for t in range(c.taps):
        wt = c.weights[:, t].astype(a.dtype)
        out += wt.reshape((-1,) + (1,) * (moved.ndim - 1)) * moved[c.indices[:, t]]
    return np.moveaxis(out, 0, axis)


def imresize(
    image: np.ndarray,
    scale: float | None = None,
    output_shape: tuple[int, int] | None = None,
    antialias: bool = True,
) -> np.ndarray:
    """Bicubic resize of a float image (H, W) or (H, W, C), as MATLAB's ``imresize``.

    Give either ``scale`` (output size ceil(in * scale), as MATLAB) or ``output_shape``
    (per-axis scale out/in). Computation is in the input's float dtype (float32 or float64);
    integers are refused so no caller gets MATLAB's per-pass uint8 rounding by accident.
    """
    if not np.issubdtype(image.dtype, np.floating):
        raise TypeError(f"imresize expects a float image, got {image.dtype}")
    in_hw = image.shape[:2]
    if output_shape is None:
        if scale is None:
            raise ValueError("imresize needs scale or output_shape")
        out_hw = output_size(in_hw, scale)
        scales = (float(scale), float(scale))
    else:
        out_hw = (int(output_shape[0]), int(output_shape[1]))
        scales = (out_hw[0] / in_hw[0], out_hw[1] / in_hw[1])
    # MATLAB resizes the dimension with the smaller scale first (rows first on ties)
    order = (0, 1) if scales[0] <= scales[1] else (1, 0)
    out = image
    for axis in order:
        out = _resize_axis(out, axis, out_hw[axis], scales[axis], antialias)
    return out
