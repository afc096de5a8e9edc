"""The CPU SRCNN forward pass: the oracle every GPU kernel is checked against, and the CPU engine.

Every convolution is a correlation with 'same' output size and replicate border (MATLAB's
``imfilter(..., 'same', 'replicate')``), ReLU after conv1 and conv2. float32 by default,
float64 for tests.

A plane is computed so that any tile of it (rows and columns, with a halo) gives exactly the
samples of the whole plane in float32, because every sample goes through the same operations
whatever the tile:

- conv1 and conv3 are OpenCV's direct filters, whose vector loop and scalar tail loop round
  differently: each call is widened to a multiple of FILTER_ALIGN columns (edge values, which the
  replicate border reads anyway), so no column is in the tail (:func:`filter_plane`).
- conv2 is BLAS GEMMs, whose rounding of a sample depends on the matrix's shape, the sample's
  place in it and BLAS's threads. So conv2 and conv3 run per *chunk* of :func:`column_chunk`
  columns at fixed places of the plane: chunk j's conv2 covers its columns plus conv3's margin
  (:func:`chunk_spans`) in GEMMs of one row and GEMM_COLUMNS columns from the span's first (small
  enough for BLAS to keep them on one thread), and its conv3 gives chunk j's output. A tile is a
  run of whole chunks and makes the very same GEMMs; rows never share one.

In float64 OpenCV filters 9x9 kernels by DFT, whose rounding depends on the plane's size: tiles
then agree to ~1e-15, not bit for bit.
"""

from __future__ import annotations

from typing import NamedTuple

import cv2
import numpy as np

from .model import SRCNNModel

STRIP_PIXELS = 1 << 19  # srcnn_forward: ~0.5 Mpx per strip keeps the 64-channel intermediate near 128 MB
# Width of every filter2D call, in columns: a multiple of 8 was enough on the development machine
# (OpenCV 5.0 on AVX-512; 4 was not), 64 leaves room for wider vector loops.
FILTER_ALIGN = 64
COLUMN_SPAN = 1024  # columns of one chunk's conv2 (a chunk and conv3's margins): a multiple of FILTER_ALIGN
# conv2's GEMMs are this many columns wide: 32 x 64 x 128 = 2^18 multiply-adds, which OpenBLAS
# runs on the calling thread (a GEMM split over its threads stalls when the machine is busy, and
# the CPU engine's own threads share the cores); a whole row single-threaded is no faster.
GEMM_COLUMNS = 128


def aligned_width(width: int) -> int:
    return -(-width // FILTER_ALIGN) * FILTER_ALIGN


def widen(x: np.ndarray) -> np.ndarray:
    """``x`` (..., W) with edge columns appended up to :func:`aligned_width` (itself if none)."""
    pad = aligned_width(x.shape[-1]) - x.shape[-1]
    return np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)], mode="edge") if pad else x


def filter_plane(x: np.ndarray, kernel: np.ndarray, width: int | None = None) -> np.ndarray:
    """Correlation of a plane whose width is a multiple of FILTER_ALIGN (see :func:`widen`) with
    replicate border; the first ``width`` columns of the result (all by default)."""
    assert x.shape[1] % FILTER_ALIGN == 0, x.shape
    return cv2.filter2D(x, -1, kernel, borderType=cv2.BORDER_REPLICATE)[:, :width]


def conv_single_in(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """(H, W) -> (Cout, H, W) for weight (Cout, 1, k, k)."""
    wide = widen(x)
    out = np.empty((weight.shape[0],) + x.shape, dtype=x.dtype)
    for o in range(weight.shape[0]):
        out[o] = filter_plane(wide, weight[o, 0], x.shape[1]) + bias[o]
    return out


def conv_multi(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """(Cin, H, W) -> (Cout, H, W) over a replicate-padded input (:func:`conv2_span` on the whole
    width: the layer on its own, for the kernels' layer checks; :func:`srcnn_columns` runs it per
    chunk)."""
    r = weight.shape[-1] // 2
    padded = np.pad(x, ((0, 0), (r, r), (r, r)), mode="edge") if r else x
    out = np.empty((weight.shape[0],) + x.shape[1:], dtype=x.dtype)
    conv2_span(padded, weight, bias, 0, out)
    return out


def conv2_span(padded: np.ndarray, weight: np.ndarray, bias: np.ndarray, x0: int, out: np.ndarray) -> None:
    """conv2 into ``out`` (Cout, H, n) from ``padded`` (Cin, H + 2r, >= x0 + n + 2r), the input
    padded by r = k//2 rows and columns, whose column x0 is the first output column's left tap.
    Per row and block of GEMM_COLUMNS columns (from the first; the last may be narrower), one
    (Cout x Cin) @ (Cin x block) GEMM per tap, summed in tap order after the bias:
    ``(bias + p0) + p1 + ...``; the first product is written straight into ``out`` and the bias
    added to it (the same sum: addition commutes)."""
    k = weight.shape[-1]
    n = out.shape[2]
    product: list[np.ndarray | None] = [None, None]  # per piece, reused tap after tap
    for t, (dy, dx) in enumerate((dy, dx) for dy in range(k) for dx in range(k)):
        tap = np.ascontiguousarray(weight[:, :, dy, dx])
        src = padded[:, dy:dy + out.shape[1], x0 + dx:x0 + dx + n]
        for i, (lo, hi) in enumerate(gemm_pieces(n)):
            a, b = gemm_stack(src, lo, hi), gemm_stack(out, lo, hi)
            if t == 0:
                np.matmul(tap, a, out=b)
            else:
                product[i] = np.matmul(tap, a, out=product[i])
                b += product[i]
        if t == 0:
            out += bias[:, None, None]


def gemm_pieces(n: int) -> list[tuple[int, int]]:
    """Columns [0, n) as the whole GEMM blocks and the narrower rest."""
    full = n // GEMM_COLUMNS * GEMM_COLUMNS
    return [(lo, hi) for lo, hi in ((0, full), (full, n)) if hi > lo]


def gemm_stack(a: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Columns [lo, hi) of ``a`` (C, H, n), a whole number of GEMM blocks or one narrower, as a
    stack of (C x block) matrices (H, blocks, C, block): a view, so matmul reads and writes ``a``."""
    c, h, _ = a.shape
    block = min(hi - lo, GEMM_COLUMNS)
    stack = a[:, :, lo:hi].reshape(c, h, (hi - lo) // block, block).transpose(1, 2, 0, 3)
    assert np.may_share_memory(stack, a)  # splitting the unit-stride axis never copies
    return stack


def conv_single_out(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, width: int | None = None) -> np.ndarray:
    """(Cin, H, W) -> (H, W) for weight (1, Cin, k, k): one 2-D filter per input channel, summed.
    With ``width``, x's columns beyond it are its replicated edge (:func:`widen`), and only those
    ``width`` columns come back."""
    wide = widen(x)
    out = np.full((x.shape[1], width or x.shape[2]), bias[0], dtype=x.dtype)
    for i in range(weight.shape[1]):
        out += filter_plane(wide[i], weight[0, i], out.shape[1])
    return out


def column_chunk(model: SRCNNModel) -> int:
    """Output columns per chunk: a chunk and conv3's margins either side make one COLUMN_SPAN."""
    return COLUMN_SPAN - 2 * (model.f3 // 2)


class Span(NamedTuple):
    """Chunk output columns [c0, c1), its conv2 GEMM over columns [s0, s1) (plus conv3's margin)."""

    c0: int
    c1: int
    s0: int
    s1: int


def chunk_spans(model: SRCNNModel, width: int, c0: int, c1: int, chunk: int) -> list[Span]:
    """The chunks of a plane ``width`` wide that make output columns [c0, c1) (chunk-aligned)."""
    r3 = model.f3 // 2
    if c0 % chunk or (c1 % chunk and c1 != width):
        raise ValueError(f"columns [{c0}, {c1}) are not whole chunks of {chunk} (plane {width} wide)")
    return [Span(a, min(a + chunk, c1), max(0, a - r3), min(width, a + chunk + r3)) for a in range(c0, c1, chunk)]


def input_columns(model: SRCNNModel, width: int, c0: int, c1: int) -> tuple[int, int]:
    """Upscaled columns [u0, u1) that output columns [c0, c1) read: the halo, clipped to the plane."""
    return max(0, c0 - model.halo), min(width, c1 + model.halo)


def srcnn_columns(up: np.ndarray, model: SRCNNModel, width: int, c0: int, c1: int, chunk: int) -> np.ndarray:
    """Output columns [c0, c1) (whole chunks) of the three layers on a plane ``width`` wide, of
    which ``up`` holds the rows to compute and the columns :func:`input_columns`. Returns (H, c1 -
    c0), unclipped. The replicate border applies at ``up``'s top and bottom rows and at the plane's
    left and right edges; at a tile's cut edges the halo columns keep it away from the result."""
    a = model.arrays(up.dtype)
    r2 = model.f2 // 2
    u0, u1 = input_columns(model, width, c0, c1)
    if up.shape[1] != u1 - u0:
        raise ValueError(f"up holds {up.shape[1]} columns, the columns [{c0}, {c1}) need [{u0}, {u1})")
    spans = chunk_spans(model, width, c0, c1, chunk)
    h1 = conv1_padded(up, a["conv1_weight"], a["conv1_bias"], u0, spans[0].s0 - r2, spans[-1].s1 + r2, width, r2)
    out = np.empty((up.shape[0], c1 - c0), dtype=up.dtype)
    for s in spans:
        n = s.s1 - s.s0
        h2 = np.empty((model.n2, up.shape[0], aligned_width(n)), dtype=up.dtype)
        real = h2[:, :, :n]
        conv2_span(h1, a["conv2_weight"], a["conv2_bias"], s.s0 - spans[0].s0, real)
        np.maximum(real, 0, out=real)
        h2[:, :, n:] = h2[:, :, n - 1:n]  # widened for conv3 by its replicate border's values
        y = conv_single_out(h2, a["conv3_weight"], a["conv3_bias"], n)
        out[:, s.c0 - c0:s.c1 - c0] = y[:, s.c0 - s.s0:s.c1 - s.s0]
    return out


def conv1_padded(up: np.ndarray, weight: np.ndarray, bias: np.ndarray, u0: int, p0: int, p1: int,
                 width: int, r: int) -> np.ndarray:
    """conv1 + ReLU of ``up`` (columns [u0, ...) of a plane ``width`` wide) as conv2 reads it: the
    plane's columns [p0, p1) and r replicated rows above and below; columns outside the plane
    replicate its edge column (conv2's border there). Written straight into that layout, so conv2
    needs no padded copy of the largest intermediate."""
    h = up.shape[0]
    g0, g1 = max(0, p0), min(width, p1)  # the plane's own columns
    out = np.empty((weight.shape[0], h + 2 * r, p1 - p0), dtype=up.dtype)
    wide = widen(up)
    inner = out[:, r:r + h]
    for o in range(weight.shape[0]):
        v = filter_plane(wide, weight[o, 0])[:, g0 - u0:g1 - u0] + bias[o]
        np.maximum(v, 0, out=inner[o, :, g0 - p0:g1 - p0])
    inner[:, :, :g0 - p0] = inner[:, :, g0 - p0:g0 - p0 + 1]
    inner[:, :, g1 - p0:] = inner[:, :, g1 - p0 - 1:g1 - p0]
    out[:, :r] = out[:, r:r + 1]
    out[:, r + h:] = out[:, r + h - 1:r + h]
    return out


def srcnn_layers(y: np.ndarray, model: SRCNNModel, chunk: int | None = None) -> np.ndarray:
    """The three layers on one whole (H, W) plane, in column chunks (default
    :func:`column_chunk`). Returns (H, W), unclipped."""
    w = y.shape[1]
    return srcnn_columns(y, model, w, 0, w, chunk or column_chunk(model))


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
