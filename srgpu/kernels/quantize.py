"""Float <-> sample conversions on the GPU (quantize.cu).

``from_unit``: an unclipped float plane -> uint8/uint16 against ``max_value`` (clip to [0, 1],
times max_value, round half up: :func:`srgpu.engine.base.from_unit_float`) or float32 clipped.
``to_unit``: uint8/uint16/float32 -> float32 in [0, 1] (``sample * float32(1 / max_value)``,
:func:`srgpu.engine.base.to_unit_float`). NumPy references are those two functions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..samples import from_unit_float, to_unit_float
from .bicubic import CLIP, IN_TYPES, QUANT, inv_max
from .launch import Launch, cdiv

SOURCE = "quantize.cu"
THREADS = 256
OUT_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.float32))


def from_unit_name(dtype: np.dtype) -> str:
    dtype = np.dtype(dtype)
    return f"from_unit<{IN_TYPES[dtype]}, {CLIP if dtype == np.float32 else QUANT}>"


def to_unit_name(dtype: np.dtype) -> str:
    return f"to_unit<{IN_TYPES[np.dtype(dtype)]}>"


def all_kernel_names() -> list[str]:
    return [from_unit_name(d) for d in OUT_DTYPES] + [to_unit_name(d) for d in OUT_DTYPES]


def reference_from_unit(values: np.ndarray, dtype: np.dtype, max_value: float) -> np.ndarray:
    return from_unit_float(values, np.dtype(dtype), max_value)


def reference_to_unit(plane: np.ndarray, max_value: float) -> np.ndarray:
    return to_unit_float(plane, max_value)


class Quantize:
    def __init__(self, device_index: int, limits: Any) -> None:
        from .build import compile_kernels

        self.kernels = compile_kernels(SOURCE, all_kernel_names(), device_index, limits)
        self.max_blocks = limits.multiprocessors * 32

    def _launch(self, name: str, n: int) -> Launch:
        return Launch(name, (max(1, min(cdiv(n, THREADS), self.max_blocks)), 1, 1), (THREADS, 1, 1))

    def from_unit(self, src: Any, dst: Any, max_value: float, stream: Any) -> None:
        """float32 ``src`` -> ``dst`` (same element count, contiguous)."""
        if src.size != dst.size or src.dtype != np.float32:
            raise ValueError("from_unit: float32 source and destination of equal size expected")
        name = from_unit_name(dst.dtype)
        self.kernels[name](self._launch(name, dst.size), (src, dst, np.int64(dst.size), np.float32(max_value)), stream)

    def to_unit(self, src: Any, dst: Any, max_value: float, stream: Any) -> None:
        if src.size != dst.size or dst.dtype != np.float32:
            raise ValueError("to_unit: float32 destination of the source's size expected")
        name = to_unit_name(src.dtype)
        self.kernels[name](self._launch(name, dst.size), (src, dst, np.int64(dst.size), inv_max(src.dtype, max_value)),
                           stream)


def self_check(device_index: int = 0, seed: int = 0) -> None:
    """Random values around [0, 1] (with out-of-range and exact half-level ties) through both
    directions against the CPU functions; raises on any mismatch."""
    import cupy as cp

    from .build import device_limits

    rng = np.random.default_rng(seed)
    q = Quantize(device_index, device_limits(device_index))
    stream = cp.cuda.Stream(non_blocking=True)
    for max_value, dtype in ((255, np.uint8), (1023, np.uint16), (65535, np.uint16), (1.0, np.float32)):
        levels = (np.arange(0, 2 * int(max_value) + 2) / 2 / max_value).astype(np.float32) if dtype != np.float32 else np.zeros(0, np.float32)
        values = np.concatenate([rng.uniform(-0.2, 1.2, 100_003).astype(np.float32), levels])
        dst = cp.full(values.shape, 0x5A, dtype=dtype)
        q.from_unit(cp.asarray(values), dst, max_value, stream)
        stream.synchronize()
        if not np.array_equal(cp.asnumpy(dst), reference_from_unit(values, dtype, max_value)):
            raise AssertionError(f"from_unit {np.dtype(dtype).name} max {max_value} differs from from_unit_float")
        if dtype != np.float32:
            samples = rng.integers(0, int(max_value) + 1, 70_001).astype(dtype)
            out = cp.full(samples.shape, np.nan, dtype=np.float32)
            q.to_unit(cp.asarray(samples), out, max_value, stream)
            stream.synchronize()
            if not np.array_equal(cp.asnumpy(out), reference_to_unit(samples, max_value)):
                raise AssertionError(f"to_unit {np.dtype(dtype).name} max {max_value} differs from to_unit_float")
