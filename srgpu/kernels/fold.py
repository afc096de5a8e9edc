"""conv1 with the bicubic upscale folded in: one linear map of the low-resolution samples.

The luma path upscales the LR plane bicubically (symmetric border at the LR edge), then conv1
reads the upscale with a replicate border at its own edge. Both steps are linear, so along one
axis, for output index y::

    upscaled[clamp(y + d - k//2)] = sum_a V_y[d, a] * lr[mirror(start_y + a)]     (d < k)

and conv1's channel c at (y, x) is ``sum_ab (V_y^T W_c H_x)[a, b] * lr[mirror(start_y + a),
mirror(start_x + b)]``: a filter on a small window of LR samples. Away from the upscaled frame's
edge (more than k//2 samples) V_y depends only on the phase y mod s and start_y = y // s +
offset[phase], so s*s filters serve the whole interior; only the k//2 rows and columns at each
edge have filters of their own (the LR mirror needs none: it is applied when reading).

Why it matters for the fused kernels (issue 6): reading the LR samples they skip the bicubic pass
and read 8x8 LR samples per output instead of 9x9 upscaled ones at x2 (7x7 at x3, 6x6 at x4).
On tensor cores, raw integer samples of up to 11 bits are exact in fp16 (1/max_value is applied
to the sum), so only the weights need the hi/lo split: two MMAs, not three. Samples of 12
bits or more, or samples divided by max_value first, are not exact and need the split too.
This module holds the tables and the float64 reference such a kernel is checked against;
fused_tc.cu's FOLD path (x2) reads the phase filters of :func:`phase_filters` for the positions
:func:`regular_range` names.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..resize import contributions, mirror


@dataclass(frozen=True)
class AxisFold:
    """One axis of a k-tap filter on a bicubic upscale: output y reads LR window
    ``mirror(starts[y] + arange(taps))`` with weights ``weights[y]`` (k, taps), one row per tap d."""

    starts: np.ndarray  # (out_len,) int64, unfolded (may lie outside [0, in_len): mirror when reading)
    weights: np.ndarray  # (out_len, k, taps) float64

    @property
    def taps(self) -> int:
        return int(self.weights.shape[2])

    def windows(self, in_len: int) -> np.ndarray:
        """(out_len, taps) LR indices each output reads, the symmetric border applied."""
        return mirror(self.starts[:, None] + np.arange(self.taps)[None, :], in_len)


def axis_fold(in_len: int, out_len: int, k: int = 9, outputs: np.ndarray | None = None) -> AxisFold:
    """The fold of a k-tap filter (replicate border) over the bicubic upscale in_len -> out_len;
    with ``outputs``, for those output indices only (row i of the result is output outputs[i])."""
    c = contributions(in_len, out_len, out_len / in_len, True)
    r = k // 2
    ys = np.arange(out_len) if outputs is None else np.asarray(outputs, dtype=np.int64)
    rows = np.clip(ys[:, None] + np.arange(-r, r + 1)[None, :], 0, out_len - 1)  # (out, k)
    idx = c.unfolded[rows]  # (out, k, bicubic taps), unfolded LR indices
    starts = idx.min(axis=(1, 2))
    taps = int((idx.max(axis=(1, 2)) - starts).max()) + 1
    n = len(ys)
    # each (out, d, bicubic tap) lands in a slot of its own, so a bincount over flat slots is the
    # scatter (np.add.at, its equal, is ~20x slower, and this runs for every new frame size)
    slots = ((np.arange(n)[:, None, None] * k + np.arange(k)[None, :, None]) * taps
             + (idx - starts[:, None, None]))
    weights = np.bincount(slots.ravel(), c.weights[rows].ravel(), n * k * taps).reshape(n, k, taps)
    return AxisFold(starts, weights)


@dataclass(frozen=True)
class PhaseFilters:
    """conv1 folded for the interior of a frame: output (y, x) of phase (y % s, x % s) reads LR
    rows y // s + offsets[y % s] + a and columns x // s + offsets[x % s] + b (a, b < taps)."""

    scale: int
    offsets: np.ndarray  # (s,) int64
    filters: np.ndarray  # (s, s, cout, taps, taps) float64: [phase y, phase x, channel, a, b]

    @property
    def taps(self) -> int:
        return int(self.filters.shape[-1])


def _fold2d(v: np.ndarray, weight: np.ndarray, h: np.ndarray) -> np.ndarray:
    """(k, ty) x (cout, k, k) x (k, tx) -> (cout, ty, tx)."""
    return np.einsum("da,cde,eb->cab", v, weight, h)


def phase_filters(conv1_weight: np.ndarray, scale: int) -> PhaseFilters:
    """The s*s interior filters of conv1 (weight (cout, 1, k, k)) folded with the x``scale`` upscale."""
    k = conv1_weight.shape[-1]
    n = 4 * k  # long enough that the middle outputs are interior
    fold = axis_fold(n, n * scale, k)
    mid = (n // 2) * scale  # phase 0, far from both edges
    ys = [mid + p for p in range(scale)]
    offsets = np.array([fold.starts[y] - y // scale for y in ys], dtype=np.int64)
    weight = conv1_weight[:, 0].astype(np.float64)
    filters = np.stack([np.stack([_fold2d(fold.weights[y], weight, fold.weights[x]) for x in ys]) for y in ys])
    return PhaseFilters(scale, offsets, filters)


def conv1_folded_reference(lr: np.ndarray, conv1_weight: np.ndarray, conv1_bias: np.ndarray,
                           out_shape: tuple[int, int]) -> np.ndarray:
    """conv1 (before ReLU) of the bicubic upscale of ``lr`` (h, w) to ``out_shape``, computed the
    folded way: every output from its own folded filter on its mirrored LR window. float64,
    (cout, H, W); equal to conv1 on the upscaled plane, edges included."""
    lr = np.asarray(lr, dtype=np.float64)
    (h, w), (H, W) = lr.shape, out_shape
    k = conv1_weight.shape[-1]
    fy, fx = axis_fold(h, H, k), axis_fold(w, W, k)
    rows, cols = fy.windows(h), fx.windows(w)
    weight = conv1_weight[:, 0].astype(np.float64)
    out = np.empty((weight.shape[0], H, W))
    for y in range(H):
        filters = np.einsum("da,cde,xeb->xcab", fy.weights[y], weight, fx.weights)  # (W, cout, ty, tx)
        window = lr[rows[y]][:, cols].transpose(1, 0, 2)  # (W, ty, tx)
        out[:, y, :] = np.einsum("xcab,xab->cx", filters, window)
    return out + np.asarray(conv1_bias, dtype=np.float64)[:, None, None]


@functools.lru_cache(maxsize=4096)  # per axis length: a folder's sizes share widths and heights
def regular_range(in_len: int, out_len: int, scale: int, k: int = 9) -> tuple[int, int]:
    """[lo, hi): the outputs along one axis of an exact x``scale`` upscale whose fold is the interior
    phase fold (window start ``y // scale + offsets[y % scale]``, the same weights), i.e. where the
    phase filters of :func:`phase_filters` hold; (0, 0) if none (or the size is not exact)."""
    if out_len != in_len * scale or in_len < 1:
        return (0, 0)
    return _longest_run(regular_outputs(in_len, out_len, scale, k, edges_only=True))


def regular_outputs(in_len: int, out_len: int, scale: int, k: int = 9, edges_only: bool = False) -> np.ndarray:
    """Which outputs (bool, out_len) of an exact x``scale`` upscale have the interior phase fold.
    ``edges_only``: check only the outputs near either edge and take the others as regular: away
    from the edges the fold is periodic by construction (it is the phase filter), and this runs
    for every new frame size (a test checks it against the full check)."""
    phase_w, offsets = _interior(scale, k)
    edge = 2 * k * scale
    full = not edges_only or out_len <= 4 * edge
    ys = np.arange(out_len) if full else np.concatenate([np.arange(edge), np.arange(out_len - edge, out_len)])
    fold = axis_fold(in_len, out_len, k, ys)
    w = fold.weights
    taps = phase_w.shape[2]
    if w.shape[2] < taps:
        w = np.pad(w, ((0, 0), (0, 0), (0, taps - w.shape[2])))
    phase = ys % scale
    ok = ((fold.starts == ys // scale + np.asarray(offsets)[phase])
          & np.all(np.abs(w[:, :, :taps] - phase_w[phase]) <= 1e-12, axis=(1, 2))
          & np.all(w[:, :, taps:] == 0, axis=(1, 2)))
    if full:
        return ok
    mask = np.ones(out_len, dtype=bool)
    mask[ys] = ok
    return mask


def _longest_run(ok: np.ndarray) -> tuple[int, int]:
    if not ok.any():
        return (0, 0)
    # the longest run of regular outputs (the interior: one run); the first such run on ties
    edges = np.diff(np.concatenate([[0], ok.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    i = int(np.argmax(ends - starts))
    return (int(starts[i]), int(ends[i]))


def interior_offsets(scale: int, k: int = 9) -> list[int]:
    """The interior window offsets per phase (what :func:`phase_filters` gives as ``offsets``)."""
    return list(_interior(scale, k)[1])


@functools.lru_cache(maxsize=None)
def _interior(scale: int, k: int) -> tuple[np.ndarray, list[int]]:
    """The interior phase weights (scale, k, taps) and window offsets of an exact x``scale`` fold."""
    n = 4 * k
    ref = axis_fold(n, n * scale, k)
    mid = (n // 2) * scale
    phase_w = np.stack([ref.weights[mid + p] for p in range(scale)])
    phase_w.setflags(write=False)
    return phase_w, [int(ref.starts[mid + p] - (mid + p) // scale) for p in range(scale)]
