"""Integer samples <-> unit floats: the one definition of both conversions, shared by the CPU
engine, the kernels' NumPy references and the GPU conversion kernels' checks."""

from __future__ import annotations

import numpy as np


def to_unit_float(plane: np.ndarray, max_value: float) -> np.ndarray:
    """uint8/uint16 -> float32 in [0, 1] by ``max_value``; float planes pass through as float32."""
    if np.issubdtype(plane.dtype, np.floating):
        return np.ascontiguousarray(plane, dtype=np.float32)
    return plane.astype(np.float32) * np.float32(1.0 / max_value)


def from_unit_float(values: np.ndarray, dtype: np.dtype, max_value: float) -> np.ndarray:
    """float in [0, 1] -> ``dtype``: integers rounded half away from zero and saturated at
    ``max_value``; floats clipped to [0, 1]."""
    if np.issubdtype(dtype, np.floating):
        return np.clip(values, 0.0, 1.0).astype(dtype)
    # values are non-negative after clipping, so floor(x + 0.5) is round-half-away-from-zero
    scaled = np.clip(values.astype(np.float32) * np.float32(max_value), 0.0, np.float32(max_value))
    return np.floor(scaled + np.float32(0.5)).astype(dtype)
