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


def _resize_axis(a: np.ndarray, axis: int, out_length: int, scale: float, antialias: bool,
                 in_length: int | None = None, span: tuple[int, int] | None = None,
                 first: int = 0) -> np.ndarray:
    """Resample ``a`` along ``axis`` to ``out_length``. With ``span`` (r0, r1), only output
    samples [r0, r1) of an axis ``in_length`` long, of which ``a`` holds samples from ``first``
    on: each output sample is the same float operations in the same order either way."""
    c = contributions(in_length or a.shape[axis], out_length, float(scale), antialias)
    r0, r1 = span or (0, out_length)
    moved = np.moveaxis(a, axis, 0)
    out = np.zeros((r1 - r0,) + moved.shape[1:], dtype=a.dtype)
    for t in range(c.taps):
        wt = c.weights[r0:r1, t].astype(a.dtype)
        out += wt.reshape((-1,) + (1,) * (moved.ndim - 1)) * moved[c.indices[r0:r1, t] - first]
    return np.moveaxis(out, 0, axis)


def source_rows(in_length: int, out_length: int, r0: int, r1: int, antialias: bool = True) -> tuple[int, int]:
    """Input samples [lo, hi) that output samples [r0, r1) of a resize along one axis read."""
    c = contributions(in_length, out_length, out_length / in_length, antialias)
    used = c.indices[r0:r1]
    return int(used.min()), int(used.max()) + 1


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


def imresize_rows(image: np.ndarray, output_shape: tuple[int, int], r0: int, r1: int,
                  antialias: bool = True) -> np.ndarray:
    """Rows [r0, r1) of ``imresize(image, output_shape=output_shape)``, bit for bit."""
    return imresize_region(image, output_shape, (r0, r1), (0, int(output_shape[1])), antialias)


def imresize_region(image: np.ndarray, output_shape: tuple[int, int], rows: tuple[int, int],
                    cols: tuple[int, int], antialias: bool = True) -> np.ndarray:
    """Rows [r0, r1) x columns [c0, c1) of ``imresize(image, output_shape=output_shape)``, bit for
    bit, computing only those samples (tiles of a large image). Same axis order, coefficients and
    per-sample operation order as :func:`imresize`; only the input samples they read are touched."""
    if not np.issubdtype(image.dtype, np.floating):
        raise TypeError(f"imresize_region expects a float image, got {image.dtype}")
    (in_h, in_w), (out_h, out_w) = image.shape[:2], (int(output_shape[0]), int(output_shape[1]))
    (r0, r1), (c0, c1) = rows, cols
    if not (0 <= r0 < r1 <= out_h and 0 <= c0 < c1 <= out_w):
        raise ValueError(f"rows [{r0}, {r1}) x columns [{c0}, {c1}) outside an output {out_h}x{out_w}")
    sh, sw = out_h / in_h, out_w / in_w
    lo, hi = source_rows(in_h, out_h, r0, r1, antialias)
    left, right = source_rows(in_w, out_w, c0, c1, antialias)

    def along_rows(a: np.ndarray) -> np.ndarray:
        return _resize_axis(a, 0, out_h, sh, antialias, in_length=in_h, span=(r0, r1), first=lo)

    def along_cols(a: np.ndarray) -> np.ndarray:
        return _resize_axis(a, 1, out_w, sw, antialias, in_length=in_w, span=(c0, c1), first=left)

    part = image[lo:hi, left:right]
    return along_cols(along_rows(part)) if sh <= sw else along_rows(along_cols(part))  # MATLAB's order
