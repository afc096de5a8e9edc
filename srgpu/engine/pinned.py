"""Page-locked host arrays (uploaded and downloaded by DMA).

What ``cupyx.empty_pinned`` does, without importing ``cupyx``: that package imports its sparse
linear algebra (cupyx.scipy.sparse) on import, about 0.1 s of a process's start-up."""

from __future__ import annotations

from typing import Any

import numpy as np


def empty_pinned(shape: int | tuple[int, ...], dtype: Any = np.uint8) -> np.ndarray:
    """An uninitialised NumPy array of ``shape`` in pinned memory from CuPy's pinned pool (the
    memory goes back to the pool when the array is collected)."""
    import cupy as cp

    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return np.ndarray(shape, dtype=dtype, buffer=cp.cuda.alloc_pinned_memory(nbytes))
