"""The CPU SRCNN forward pass: the oracle every GPU kernel is checked against, and the CPU engine.

Every convolution is a correlation with 'same' output size and replicate border (MATLAB's
``imfilter(..., 'same', 'replicate')``), ReLU after conv1 and conv2. float32 by default,
float64 for tests. Large planes are processed in horizontal strips with a halo, which gives
exactly the unstripped result: each layer's replicate border applies only at the image edge,
and (float32) every sample is computed by the same operations either way -- OpenCV's direct
filters are per pixel and conv2 is one GEMM per image row (see :func:`conv_multi`). In float64
OpenCV filters 9x9 kernels by DFT, whose rounding depends on the plane's size.
"""

from __future__ import annotations

import cv2
import numpy as np

from .model import SRCNNModel

STRIP_PIXELS = 1 << 19  # ~0.5 Mpx per strip keeps the 64-channel intermediate near 128 MB (fp32)


def conv_single_in(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """(H, W) -> (Cout, H, W) for weight (Cout, 1, k, k)."""
    out = np.empty((weight.shape[0],) + x.shape, dtype=x.dtype)
    for o in range(weight.shape[0]):
        out[o] = cv2.filter2D(x, -1, weight[o, 0], borderType=cv2.BORDER_REPLICATE) + bias[o]
    return out


def conv_multi(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """(Cin, H, W) -> (Cout, H, W): per output row, one GEMM per filter tap over a
    replicate-padded input, accumulated in tap order.

    One image row per GEMM, never more: BLAS may round a sample differently depending on the
    matrix's size and the sample's place in it, and a row is the same GEMM whether the plane is
    whole or a strip of it, so strips give bit-identical results."""
    cout, _, k, _ = weight.shape
    _, h, w = x.shape
    r = k // 2
    padded = np.pad(x, ((0, 0), (r, r), (r, r)), mode="edge") if r else x
    taps = [(dy, dx, np.ascontiguousarray(weight[:, :, dy, dx])) for dy in range(k) for dx in range(k)]
    out = np.empty((cout, h, w), dtype=x.dtype)
    out[:] = bias[:, None, None]
    for i in range(h):
        row = out[:, i]
        for dy, dx, wt in taps:
            row += wt @ padded[:, i + dy, dx : dx + w]
    return out


def conv_single_out(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """(Cin, H, W) -> (H, W) for weight (1, Cin, k, k): one 2-D filter per input channel, summed."""
    out = np.full(x.shape[1:], bias[0], dtype=x.dtype)
    for i in range(weight.shape[1]):
        out += cv2.filter2D(x[i], -1, weight[0, i], borderType=cv2.BORDER_REPLICATE)
    return out


def srcnn_layers(y: np.ndarray, model: SRCNNModel) -> np.ndarray:
    """The three layers on one (H, W) plane, no striping. Returns (H, W), unclipped."""
    a = model.arrays(y.dtype)
    # ReLU in place and intermediates dropped once used: the same values, less peak memory
    h1 = conv_single_in(y, a["conv1_weight"], a["conv1_bias"])
    np.maximum(h1, 0, out=h1)
    h2 = conv_multi(h1, a["conv2_weight"], a["conv2_bias"])
    del h1
    np.maximum(h2, 0, out=h2)
    return conv_single_out(h2, a["conv3_weight"], a["conv3_bias"])


def srcnn_forward(y: np.ndarray, model: SRCNNModel, dtype: type = np.float32,
                  strip_pixels: int = STRIP_PIXELS) -> np.ndarray:
    """SRCNN on the bicubic-upscaled luma ``y`` (H, W) in [0, 1]; output (H, W), unclipped."""
    y = np.ascontiguousarray(y, dtype=dtype)
    h, w = y.shape
    rows = max(1, strip_pixels // max(w, 1))
    if rows >= h:
        return srcnn_layers(y, model)
    halo = model.halo
    out = np.empty_like(y)
    for r0 in range(0, h, rows):
        r1 = min(h, r0 + rows)
        a0, a1 = max(0, r0 - halo), min(h, r1 + halo)
        out[r0:r1] = srcnn_layers(y[a0:a1], model)[r0 - a0 : r0 - a0 + (r1 - r0)]
    return out
