"""GPU bicubic resize (bicubic.cu): MATLAB ``imresize`` as two separable passes.

The canonical GPU definition, shared bit for bit with the fused kernels: coefficients from
:func:`srgpu.resize.contributions` (weights float32, indices int32, same tap order); the pass
order is imresize's (the axis with the smaller scale first, rows on ties: for an upscale, rows
then columns); each output sample is ``acc = 0; acc = fmaf(w[t], x[idx[t]], acc)`` over the taps
in order, integer input read as ``sample * float32(1 / max_value)``. :func:`reference` is that
definition in NumPy (the FMA emulated in float64, which rounds the same but for double-rounding
corner cases far below the tests' tolerance).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..resize import contributions
from .launch import Launch, cdiv

SOURCE = "bicubic.cu"
BLOCK = (32, 8, 1)
IN_TYPES = {np.dtype(np.uint8): "unsigned char", np.dtype(np.uint16): "unsigned short",
            np.dtype(np.float32): "float"}
# output modes of common.cuh's store_unit: raw float, float clipped to [0, 1], integer
RAW, CLIP, QUANT = 0, 1, 2


def out_mode(dtype: np.dtype, final: bool) -> int:
    """The store mode of a pass writing ``dtype``: intermediates raw, final floats clipped."""
    if not final:
        return RAW
    return CLIP if np.dtype(dtype) == np.float32 else QUANT


def kernel_name(axis: int, in_dtype: np.dtype, out_dtype: np.dtype, mode: int) -> str:
    fn = "resample_rows" if axis == 0 else "resample_cols"
    return f"{fn}<{IN_TYPES[np.dtype(in_dtype)]}, {IN_TYPES[np.dtype(out_dtype)]}, {mode}>"


def all_kernel_names() -> list[str]:
    """Every instantiation an engine can need: integer/float first pass, any final output."""
    names = []
    for axis in (0, 1):
        for t in IN_TYPES:
            names.append(kernel_name(axis, t, np.float32, RAW))
        names.append(kernel_name(axis, np.float32, np.float32, CLIP))
        names.append(kernel_name(axis, np.float32, np.uint8, QUANT))
        names.append(kernel_name(axis, np.float32, np.uint16, QUANT))
    return sorted(set(names))


def pass_order(in_shape: tuple[int, int], out_shape: tuple[int, int]) -> tuple[int, int]:
    """imresize's order: the axis with the smaller scale first, rows first on ties."""
    s0, s1 = out_shape[0] / in_shape[0], out_shape[1] / in_shape[1]
    return (0, 1) if s0 <= s1 else (1, 0)


def intermediate_shape(in_shape: tuple[int, int], out_shape: tuple[int, int]) -> tuple[int, int]:
    first, _ = pass_order(in_shape, out_shape)
    return (out_shape[0], in_shape[1]) if first == 0 else (in_shape[0], out_shape[1])


@functools.lru_cache(maxsize=4096)
def coefficients(in_len: int, out_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(weights float32 (out, taps), indices int32 (out, taps)) exactly as imresize uses them;
    read-only, kept per axis length (a folder's sizes share widths and heights)."""
    c = contributions(in_len, out_len, out_len / in_len, True)
    out = (np.ascontiguousarray(c.weights, dtype=np.float32), np.ascontiguousarray(c.indices, dtype=np.int32))
    for a in out:
        a.setflags(write=False)
    return out


def inv_max(dtype: np.dtype, max_value: float) -> np.float32:
    """The input scale: float32(1 / max_value) for integers (as to_unit_float), 1 for floats."""
    return np.float32(1.0) if np.dtype(dtype) == np.float32 else np.float32(1.0 / max_value)


# ---------------------------------------------------------------- NumPy reference


def _fma32(w: np.ndarray, x: np.ndarray, acc: np.ndarray) -> np.ndarray:
    return (w.astype(np.float64) * x.astype(np.float64) + acc.astype(np.float64)).astype(np.float32)


def reference_pass(x: np.ndarray, axis: int, out_len: int) -> np.ndarray:
    """One canonical pass on a float32 plane."""
    w, idx = coefficients(x.shape[axis], out_len)
    moved = np.moveaxis(x, axis, 0)
    acc = np.zeros((out_len,) + moved.shape[1:], dtype=np.float32)
    for t in range(w.shape[1]):
        acc = _fma32(w[:, t][:, None], moved[idx[:, t]], acc)
    return np.moveaxis(acc, 0, axis)


def reference(plane: np.ndarray, out_shape: tuple[int, int], max_value: float) -> np.ndarray:
    """The canonical GPU bicubic in NumPy: float32 (H, W), unclipped."""
    x = plane.astype(np.float32) * inv_max(plane.dtype, max_value) if plane.dtype != np.float32 else plane
    for axis in pass_order(plane.shape, out_shape):
        x = reference_pass(x, axis, out_shape[axis])
    return x


# ---------------------------------------------------------------- GPU


@dataclass
class _Tables:
    weights: Any  # cupy (out, taps) float32
    indices: Any  # cupy (out, taps) int32
    taps: int


class Bicubic:
    """Bicubic resize on one device: compiled kernels plus cached coefficient tables."""

    def __init__(self, device_index: int, limits: Any) -> None:
        from .build import compile_kernels

        self.device_index = device_index
        self.kernels = compile_kernels(SOURCE, all_kernel_names(), device_index, limits)
        self._tables: dict[tuple[int, int], _Tables] = {}

    def tables(self, in_len: int, out_len: int) -> _Tables:
        from .tables import upload

        key = (in_len, out_len)
        if key not in self._tables:
            w, idx = coefficients(in_len, out_len)
            d_w, d_idx = upload(w, idx)
            self._tables[key] = _Tables(d_w, d_idx, int(w.shape[1]))
        return self._tables[key]

    def known(self, in_len: int, out_len: int) -> _Tables | None:
        """The device tables of this axis, if uploaded already."""
        return self._tables.get((in_len, out_len))

    def adopt(self, in_len: int, out_len: int, weights: Any, indices: Any) -> None:
        """Device tables of :func:`coefficients` uploaded by someone else (the fused kernels, with
        their own tables in one copy), kept for this axis: a frame size's tables go up once."""
        self._tables.setdefault((in_len, out_len), _Tables(weights, indices, int(weights.shape[1])))

    def resize(self, src: Any, dst: Any, tmp: Any, max_value: float, final: bool, stream: Any) -> None:
        """``src`` (h, w) uint8/uint16/float32 -> ``dst`` (H, W), or a batch of planes of one size
        (N, h, w) -> (N, H, W) in one launch per pass (C-contiguous). ``tmp`` is the float32
        intermediate (:func:`intermediate_shape`, with the batch's N in front). ``final``: dst is
        an output plane (clipped or quantised); otherwise dst is float32 and unclipped (the SRCNN
        input)."""
        in_shape, out_shape = tuple(src.shape[-2:]), tuple(dst.shape[-2:])
        batch = tuple(src.shape[:-2])
        if src.ndim not in (2, 3) or tuple(dst.shape[:-2]) != batch:
            raise ValueError(f"bicubic: {src.shape} -> {dst.shape} is not a plane or a batch of planes")
        if batch and not (src.flags.c_contiguous and dst.flags.c_contiguous and tmp.flags.c_contiguous):
            raise ValueError("bicubic: a batch of planes must be C-contiguous")
        first, second = pass_order(in_shape, out_shape)
        need = batch + intermediate_shape(in_shape, out_shape)
        if tuple(tmp.shape) != need or tmp.dtype != np.float32:
            raise ValueError(f"bicubic intermediate must be float32 {need}")
        scale_in = inv_max(src.dtype, max_value)
        self._pass(first, src, tmp, RAW, scale_in, max_value, stream)
        self._pass(second, tmp, dst, out_mode(dst.dtype, final), np.float32(1.0), max_value, stream)

    def _pass(self, axis: int, src: Any, dst: Any, mode: int, scale_in: np.float32, max_value: float,
              stream: Any) -> None:
        name = kernel_name(axis, src.dtype, dst.dtype, mode)
        rows, cols = dst.shape[-2:]
        in_rows, in_cols = src.shape[-2:]
        tab = self.tables((in_rows, in_cols)[axis], (rows, cols)[axis])
        planes = int(src.shape[0]) if src.ndim == 3 else 1
        launch = Launch(name, (cdiv(cols, BLOCK[0]), cdiv(rows, BLOCK[1]), planes), BLOCK)
        if axis == 0:
            args = (src, dst, tab.weights, tab.indices, np.int32(tab.taps), np.int32(cols), np.int32(rows),
                    np.int32(in_rows), scale_in, np.float32(max_value))
        else:
            args = (src, dst, tab.weights, tab.indices, np.int32(tab.taps), np.int32(in_cols),
                    np.int32(rows), np.int32(cols), scale_in, np.float32(max_value))
        self.kernels[name](launch, args, stream)


def self_check(device_index: int = 0, seed: int = 0) -> float:
    """Random planes of awkward sizes and every input type through the GPU kernels against
    :func:`reference`; returns the max abs error of the float outputs (raises if over 1e-6)."""
    import cupy as cp

    from .build import device_limits

    rng = np.random.default_rng(seed)
    bic = Bicubic(device_index, device_limits(device_index))
    stream = cp.cuda.Stream(non_blocking=True)
    worst = 0.0
    for in_shape, out_shape in (((1, 1), (2, 2)), ((7, 13), (21, 39)), ((17, 33), (68, 132)), ((5, 9), (11, 16))):
        for dtype, max_value in ((np.uint8, 255), (np.uint16, 1023), (np.float32, 1.0)):
            plane = (rng.integers(0, max_value + 1, in_shape).astype(dtype) if dtype != np.float32
                     else rng.random(in_shape, dtype=np.float32))
            src = cp.asarray(plane)
            dst = cp.full(out_shape, np.nan, dtype=np.float32)
            tmp = cp.full(intermediate_shape(in_shape, out_shape), np.nan, dtype=np.float32)
            bic.resize(src, dst, tmp, max_value, False, stream)
            stream.synchronize()
            err = float(np.max(np.abs(cp.asnumpy(dst) - reference(plane, out_shape, max_value))))
            if not err <= 1e-6:
                raise AssertionError(f"bicubic {in_shape}->{out_shape} {np.dtype(dtype).name}: max error {err}")
            worst = max(worst, err)
    return worst
