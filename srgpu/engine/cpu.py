"""The CPU engine: MATLAB-compatible bicubic and the reference SRCNN forward pass, float32.

SRCNN planes are upscaled in tiles of output rows and columns, so memory stays within a budget
however large the image: a 6000x4000 photo at x4 is 24000 columns wide, and a strip of whole rows
would hold ~10 MB of 64-channel intermediates per row. Each tile is bit-identical to the same
samples of the whole-plane computation (:func:`srgpu.reference.srcnn_layers`):

- bicubic: :func:`srgpu.resize.imresize_region` computes exactly the tile's samples from the whole
  plane's coefficients (so its input support, and the symmetric border at the real image edges,
  are the whole image's);
- SRCNN rows: a tile's rows [r0, r1) are computed from bicubic rows [r0 - halo, r1 + halo)
  clipped to the image, halo = f1//2 + f2//2 + f3//2. The replicate border a layer applies at a
  cut edge is false, and each layer spreads it by its radius, so after the three layers exactly
  the ``halo`` outermost rows are wrong, and they are the ones dropped;
- SRCNN columns: a tile is a run of whole column chunks (:func:`srgpu.reference.column_chunk`),
  computed from the halo columns either side by the same filters and GEMMs as the whole plane
  (:func:`srgpu.reference.srcnn_columns` says how).

Bicubic-only planes (chroma, alpha) go in strips of whole rows: a few float32 rows per output row.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from ..model import SRCNNModel
from ..reference import COLUMN_SPAN, aligned_width, column_chunk, input_columns, srcnn_columns
from ..resize import imresize_region, imresize_rows
from .bands import Band, bands
from .base import Engine, from_unit_float, to_unit_float
from ..cpus import cpu_cores
from .threads import run_all

TILE_BUDGET_BYTES = 256 * 2**20  # intermediates of the tiles being computed, all threads together
MIN_TILE_BYTES = 64 * 2**20  # a thread's share no smaller: ~100 rows of a chunk, so the halo rows cost ~10 %
FLOAT_BYTES = 4  # float32 throughout
BICUBIC_ROW_COPIES = 8  # float32 rows live per output row in bicubic + conversion (temporaries incl.)
CONV1_COPIES = 3  # conv1: the widened input, one channel's filter output and its biased copy
CONV3_COPIES = 3  # per chunk: conv3's sum, one channel's filter output, the stacked conv2 product's row


class Tile(NamedTuple):
    """Output rows ``rows.k0..k1`` and columns [c0, c1), from upscaled rows ``rows.b0..b1`` (plus
    the halo)."""

    rows: Band
    c0: int
    c1: int


class TilePlan(NamedTuple):
    """Output rows kept per tile and column chunks per tile (columns: chunks x chunk)."""

    rows: int
    chunks: int
    chunk: int


def srcnn_tile_bytes(model: SRCNNModel, rows: int, columns: int) -> int:
    """Bytes live at the peak of one tile of ``rows`` x ``columns`` upscaled samples (halo
    included) in :func:`srgpu.reference.srcnn_columns`: the bicubic rows and their temporaries,
    conv1's output as conv2 reads it (n1 channels, the largest), conv1's temporaries; one chunk's
    conv2 output (n2 channels), its stacked product and conv3's temporaries; two copies of the
    weights (one value per MAC a pixel). Affine in rows."""
    pad = model.f2 // 2 * 2
    wide = aligned_width(columns)
    tile = (BICUBIC_ROW_COPIES + CONV1_COPIES) * rows * wide + model.n1 * (rows + pad) * (columns + pad)
    chunk = (2 * model.n2 + CONV3_COPIES) * rows * min(wide, COLUMN_SPAN)
    return FLOAT_BYTES * (tile + chunk + 2 * model.macs_per_pixel)


def bicubic_strip_bytes(rows: int, width: int) -> int:
    return FLOAT_BYTES * BICUBIC_ROW_COPIES * rows * width


class CPUEngine(Engine):
    """tile_budget_bytes: memory the tiles' intermediates may take, all threads together; a tile's
    rows and columns follow from its share and the plane's size. threads: tiles computed at once
    (default: one per CPU, as many as the budget gives MIN_TILE_BYTES each). tile_rows /
    tile_chunks: force this many output rows / column chunks per tile instead (tests put tile
    edges everywhere). chunk: the column chunk (default :func:`srgpu.reference.column_chunk`); it
    is part of what is computed, like the GEMMs' shapes, so tests compare against
    :func:`srgpu.reference.srcnn_layers` with the same."""

    name = "cpu"

    def __init__(self, model: SRCNNModel, scale: int, *, tile_budget_bytes: int = TILE_BUDGET_BYTES,
                 threads: int | None = None, tile_rows: int | None = None, tile_chunks: int | None = None,
                 chunk: int | None = None) -> None:
        super().__init__(model, scale)
        for name, value in (("threads", threads), ("tile_rows", tile_rows), ("tile_chunks", tile_chunks),
                            ("chunk", chunk)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        self.tile_budget_bytes = tile_budget_bytes
        self.threads = threads or max(1, min(cpu_cores(), tile_budget_bytes // MIN_TILE_BYTES))
        self.tile_rows = tile_rows
        self.tile_chunks = tile_chunks
        self.chunk = chunk or column_chunk(model)

    def srcnn_plane(self, plane: np.ndarray, out_shape: tuple[int, int], max_value: float) -> np.ndarray:
        x = to_unit_float(plane, max_value)
        width = out_shape[1]
        out = np.empty(out_shape, dtype=plane.dtype)

        def one(t: Tile) -> None:
            r = t.rows
            up = imresize_region(x, out_shape, (r.b0, r.b1), input_columns(self.model, width, t.c0, t.c1))
            y = srcnn_columns(up, self.model, width, t.c0, t.c1, self.chunk)[r.kept()]
            out[r.k0 : r.k1, t.c0 : t.c1] = from_unit_float(y, plane.dtype, max_value)

        run_all(one, self.tiles(out_shape), self.threads)
        return out

    def tiles(self, out_shape: tuple[int, int]) -> list[Tile]:
        """The plane's tiles, row by row: bands of :meth:`tile_plan`'s rows (plus the halo,
        srgpu.engine.bands), each cut into runs of its chunks."""
        plan = self.tile_plan(out_shape)
        columns = plan.chunks * plan.chunk
        return [Tile(band, c0, min(out_shape[1], c0 + columns))
                for band in bands(out_shape[0], plan.rows, self.model.halo)
                for c0 in range(0, out_shape[1], columns)]

    def bicubic_plane(self, plane: np.ndarray, out_shape: tuple[int, int], max_value: float) -> np.ndarray:
        x = to_unit_float(plane, max_value)
        out = np.empty(out_shape, dtype=plane.dtype)

        def one(band: Band) -> None:  # no halo: imresize_rows reads the whole plane's support itself
            out[band.k0 : band.k1] = from_unit_float(imresize_rows(x, out_shape, band.k0, band.k1), plane.dtype,
                                                     max_value)

        rows = self.tile_rows or max(1, self.rows_in_budget(out_shape[1], bicubic_strip_bytes, 0, self.threads))
        run_all(one, bands(out_shape[0], rows, 0), self.threads)
        return out

    def tile_plan(self, out_shape: tuple[int, int]) -> TilePlan:
        """Rows and chunks per tile: forced, or of the tiles that fit the budget with their halo,
        the one that computes the fewest samples per output sample (halo rows and columns are
        computed twice); at least a row and a chunk (a budget too small still runs)."""
        height, width = out_shape
        halo, chunk = self.model.halo, self.chunk
        best = (float("inf"), 1, 1)
        for chunks in [self.tile_chunks] if self.tile_chunks else range(1, -(-width // chunk) + 1):
            columns = min(width, chunks * chunk)
            computed = min(width, columns + 2 * halo)
            fit = self.tile_rows or self.rows_in_budget(computed, self.srcnn_tile_bytes, halo, self.threads)
            if fit < 1 and chunks > 1:
                break  # wider tiles fit even fewer rows
            rows = min(height, max(1, fit))
            work = min(height, rows + 2 * halo) * computed / (rows * columns)
            if work < best[0]:
                best = (work, rows, chunks)
        _, rows, chunks = best
        return TilePlan(rows, chunks, chunk)

    def srcnn_tile_bytes(self, rows: int, columns: int) -> int:
        return srcnn_tile_bytes(self.model, rows, columns)

    def rows_in_budget(self, width: int, strip_bytes: Callable[[int, int], int], halo: int, share: int = 1) -> int:
        """Output rows a strip ``width`` samples wide may keep: as many as fit 1/share of the
        budget with ``2 * halo`` more (< 1: not even one).
        ``strip_bytes(rows, width)`` is affine in rows."""
        fixed = strip_bytes(0, max(width, 1))
        per_row = strip_bytes(1, max(width, 1)) - fixed
        return (self.tile_budget_bytes // share - fixed) // per_row - 2 * halo
