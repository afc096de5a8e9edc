"""The CPU engine: MATLAB-compatible bicubic and the reference SRCNN forward pass, float32."""

from __future__ import annotations

import numpy as np

from ..reference import srcnn_forward
from ..resize import imresize
from .base import Engine, from_unit_float, to_unit_float


class CPUEngine(Engine):
    name = "cpu"

    def srcnn_plane(self, plane: np.ndarray, out_shape: tuple[int, int], max_value: float) -> np.ndarray:
        up = imresize(to_unit_float(plane, max_value), output_shape=out_shape)
        return from_unit_float(srcnn_forward(up, self.model), plane.dtype, max_value)

    def bicubic_plane(self, plane: np.ndarray, out_shape: tuple[int, int], max_value: float) -> np.ndarray:
        up = imresize(to_unit_float(plane, max_value), output_shape=out_shape)
        return from_unit_float(up, plane.dtype, max_value)
