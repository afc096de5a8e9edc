"""What the fused kernels compute, on the CPU (the definition they are tested against)."""

from __future__ import annotations

import numpy as np

from ...model import SRCNNModel
from ...samples import from_unit_float, to_unit_float


def reference(plane: np.ndarray, out_shape: tuple[int, int], max_value: float, model: SRCNNModel,
              raw: bool = False, dtype: type = np.float32) -> np.ndarray:
    """What the fused kernels compute, on the CPU: imresize of the unit-float plane, the SRCNN
    reference, then the output conversion (or the unclipped network output with ``raw``)."""
    from ...reference import srcnn_forward
    from ...resize import imresize

    x = to_unit_float(plane, max_value).astype(dtype)
    y = srcnn_forward(imresize(x, output_shape=tuple(out_shape)), model, dtype=dtype)
    if raw:
        return y.astype(np.float32)
    return from_unit_float(y, plane.dtype, max_value)


def agreement(got: np.ndarray, expect: np.ndarray) -> tuple[float, int]:
    """(fraction of equal samples, max absolute difference) of two integer planes."""
    d = np.abs(got.astype(np.int64) - expect.astype(np.int64))
    return float(np.mean(d == 0)), int(d.max()) if d.size else 0
