"""The CPU engine: MATLAB-compatible bicubic and the reference SRCNN forward pass, float32.

Planes are upscaled in horizontal strips of output rows, so memory stays within a budget however
large the image (a 6000x4000 photo at x2 would otherwise hold several GB of whole-image
float32/64-channel intermediates). Each strip is bit-identical to the same rows of the
whole-image computation:

- bicubic: :func:`srgpu.resize.imresize_rows` computes exactly the needed output rows from the
  whole plane's coefficients (so its input support, and the symmetric border at the real image
  edges, are the whole image's);
- SRCNN: a strip's rows [r0, r1) are computed from bicubic rows [r0 - halo, r1 + halo) clipped
  to the image, halo = f1//2 + f2//2 + f3//2. The replicate border a layer applies at a strip's
  cut edge is false, and each layer spreads it by its radius, so after the three layers exactly
  the ``halo`` outermost rows are wrong, and they are the ones dropped. Where the strip touches
  the real top or bottom edge the halo is clipped and the replicate border is the true one.
"""

from __future__ import annotations

from typing import Callable, Iterator, NamedTuple

import numpy as np

from ..model import SRCNNModel
from ..reference import srcnn_layers
from ..resize import imresize_rows
from .base import Engine, from_unit_float, to_unit_float

STRIP_BUDGET_BYTES = 512 * 2**20  # intermediates of one strip: big enough that the halo rows cost
# ~10-30 % extra work at 12000 columns, small enough that a plane's upscale stays under 1 GB
FLOAT_BYTES = 4  # float32 throughout
BICUBIC_ROW_COPIES = 8  # float32 rows live per output row in bicubic + conversion (temporaries incl.)


class Strip(NamedTuple):
    """Output rows [r0, r1), computed from upscaled rows [a0, a1) (r0..r1 plus the halo)."""

    r0: int
    r1: int
    a0: int
    a1: int


def row_strips(height: int, kept: int, halo: int) -> Iterator[Strip]:
    """Strips of ``kept`` output rows covering ``height``, each widened by ``halo`` rows either
    side as far as the image goes."""
    for r0 in range(0, height, kept):
        r1 = min(height, r0 + kept)
        yield Strip(r0, r1, max(0, r0 - halo), min(height, r1 + halo))


def srcnn_strip_bytes(model: SRCNNModel, rows: int, width: int) -> int:
    """Bytes live at the peak of one strip of :func:`srgpu.reference.srcnn_layers` (conv2): its
    input h1 (n1 channels), its replicate-padded copy when f2 > 1, its output (n2), the strip's
    bicubic rows and temporaries, and two copies of the weights (one value per MAC a pixel)."""
    pad = model.f2 - 1
    padded = model.n1 * (rows + pad) * (width + pad) if pad else 0
    weights = 2 * model.macs_per_pixel
    return FLOAT_BYTES * ((model.n1 + model.n2 + BICUBIC_ROW_COPIES) * rows * width + padded + weights)


def bicubic_strip_bytes(rows: int, width: int) -> int:
    return FLOAT_BYTES * BICUBIC_ROW_COPIES * rows * width


class CPUEngine(Engine):
    """strip_budget_bytes: memory one strip's intermediates may take; the strip height follows
    from it and the plane width. strip_rows: force this many output rows per strip instead
    (tests use 1..few rows to put strip edges everywhere)."""

    name = "cpu"

    def __init__(self, model: SRCNNModel, scale: int, *, strip_budget_bytes: int = STRIP_BUDGET_BYTES,
                 strip_rows: int | None = None) -> None:
        super().__init__(model, scale)
        if strip_rows is not None and strip_rows < 1:
            raise ValueError(f"strip_rows must be at least 1, got {strip_rows}")
        self.strip_budget_bytes = strip_budget_bytes
        self.strip_rows = strip_rows

    def srcnn_plane(self, plane: np.ndarray, out_shape: tuple[int, int], max_value: float) -> np.ndarray:
        x = to_unit_float(plane, max_value)
        halo = self.model.halo
        out = np.empty(out_shape, dtype=plane.dtype)
        kept = self.kept_rows(out_shape, lambda rows, width: srcnn_strip_bytes(self.model, rows, width), halo)
        for s in row_strips(out_shape[0], kept, halo):
            up = np.ascontiguousarray(imresize_rows(x, out_shape, s.a0, s.a1))
            y = srcnn_layers(up, self.model)[s.r0 - s.a0 : s.r1 - s.a0]
            out[s.r0 : s.r1] = from_unit_float(y, plane.dtype, max_value)
        return out

    def bicubic_plane(self, plane: np.ndarray, out_shape: tuple[int, int], max_value: float) -> np.ndarray:
        x = to_unit_float(plane, max_value)
        out = np.empty(out_shape, dtype=plane.dtype)
        for s in row_strips(out_shape[0], self.kept_rows(out_shape, bicubic_strip_bytes, 0), 0):
            out[s.r0 : s.r1] = from_unit_float(imresize_rows(x, out_shape, s.r0, s.r1), plane.dtype, max_value)
        return out

    def kept_rows(self, out_shape: tuple[int, int], strip_bytes: Callable[[int, int], int], halo: int) -> int:
        """Output rows each strip keeps: forced, or as many as fit the budget together with
        their halo (at least one: a plane too wide for the budget still runs, a row at a time).
        ``strip_bytes(rows, width)`` is affine in rows."""
        if self.strip_rows is not None:
            return self.strip_rows
        width = max(out_shape[1], 1)
        fixed = strip_bytes(0, width)
        per_row = strip_bytes(1, width) - fixed
        return max(1, (self.strip_budget_bytes - fixed) // per_row - 2 * halo)
