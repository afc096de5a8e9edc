"""srgpu.engine.bands, the one cut of rows with a halo (the image paths' bands, the CPU engine's tile
strips, the GPU engine's strips): exhaustively over small heights, band sizes and halos against a
brute-force reference (every row kept exactly once, in order; a band reads exactly the rows within
the halo of its own, clipped at the image's edges), and a local filter computed band by band equals
the whole."""

from __future__ import annotations

import numpy as np
import pytest

from srgpu.engine.bands import Band, bands, bands_within, halo_rows
from srgpu.model import random_model
from srgpu.reference import srcnn_layers

HEIGHTS = range(1, 26)
HALOS = range(0, 7)


def reference_read(height: int, k0: int, k1: int, halo: int) -> tuple[int, int]:
    """Rows a band keeping [k0, k1) must read, by brute force: every row of the image within
    ``halo`` of one it keeps (the image has no rows outside [0, height))."""
    near = [i for i in range(height) if any(abs(i - k) <= halo for k in range(k0, k1))]
    assert near == list(range(near[0], near[-1] + 1))  # (a run of rows)
    return near[0], near[-1] + 1


def check_cover(height: int, parts: list[Band], halo: int) -> None:
    kept = [row for b in parts for row in range(b.k0, b.k1)]
    assert kept == list(range(height)), "every row kept exactly once, in order"
    for b in parts:
        assert b.k0 < b.k1, "no empty band"
        assert (b.b0, b.b1) == reference_read(height, b.k0, b.k1, halo)
        assert b.kept() == slice(b.k0 - b.b0, b.k1 - b.b0)


@pytest.mark.parametrize("halo", HALOS)
def test_bands_keep_every_row_once_and_read_their_halo_clipped(halo: int) -> None:
    for height in HEIGHTS:
        for rows in range(1, height + 3):
            parts = bands(height, rows, halo)
            check_cover(height, parts, halo)
            # each keeps ``rows`` rows, the last what is left (one band when they all fit)
            sizes = [rows] * (height // rows) + ([height % rows] if height % rows else []) if rows < height else [height]
            assert [b.k1 - b.k0 for b in parts] == sizes
            assert parts[0].b0 == 0 and parts[-1].b1 == height


@pytest.mark.parametrize("halo", HALOS)
def test_bands_within_read_at_most_their_rows(halo: int) -> None:
    for height in HEIGHTS:
        for rows in range(1, height + 3):
            if rows < height and rows - 2 * halo < 1:
                with pytest.raises(ValueError):
                    bands_within(height, rows, halo)
                continue
            parts = bands_within(height, rows, halo)
            check_cover(height, parts, halo)
            assert all(b.b1 - b.b0 <= rows for b in parts)
            if rows >= height:
                assert parts == [Band(0, height, 0, height)]
            else:  # as many rows kept as the buffer holds besides the halos (the last: what is left)
                assert all(b.k1 - b.k0 == rows - 2 * halo for b in parts[:-1])


def test_bands_refuse_no_rows() -> None:
    with pytest.raises(ValueError):
        bands(10, 0, 2)
    with pytest.raises(ValueError):
        bands(10, 3, -1)


def test_kept_scales_to_the_bands_output() -> None:
    b = Band(10, 14, 7, 17)
    assert b.kept() == slice(3, 7) and b.kept(3) == slice(9, 21)


def replicate_box(x: np.ndarray, radius: int) -> np.ndarray:
    """Sum over rows i-radius..i+radius, the border replicated: a false border at a cut edge
    reaches ``radius`` rows, as one layer of the network's does."""
    padded = np.pad(x, ((radius, radius), (0, 0)), mode="edge")
    return sum(padded[d:d + len(x)] for d in range(2 * radius + 1))


@pytest.mark.parametrize("halo", range(0, 5))
def test_a_local_filter_band_by_band_equals_the_whole(halo: int) -> None:
    rng = np.random.default_rng(halo)
    for height in range(1, 20):
        x = rng.integers(0, 1000, (height, 3)).astype(np.int64)
        whole = replicate_box(x, halo)
        for rows in range(1, height + 2):
            out = np.full_like(whole, -1)
            for b in bands(height, rows, halo):
                out[b.k0:b.k1] = replicate_box(x[b.b0:b.b1], halo)[b.kept()]
            assert np.array_equal(out, whole)


def test_halo_rows_covers_the_network_and_the_bicubic_support() -> None:
    assert halo_rows(0, 2) == 3 and halo_rows(6, 2) == 6 and halo_rows(7, 2) == 7 and halo_rows(8, 3) == 6


# the GPU engine's strips (moved from tests/engine/test_gpu_plan.py, where they tested srgpu.engine.gpu.strips)


@pytest.mark.parametrize("H, rows, halo", [(100, 100, 8), (100, 1000, 8), (100, 40, 8), (101, 17, 8), (33, 19, 9)])
def test_strips_cover_every_row_once_with_halos(H: int, rows: int, halo: int) -> None:
    parts = bands_within(H, rows, halo)
    kept = np.concatenate([np.arange(s.k0, s.k1) for s in parts])
    assert np.array_equal(kept, np.arange(H))
    for s in parts:
        assert s.b1 - s.b0 <= rows
        assert s.b0 == max(0, s.k0 - halo) and s.b1 == min(H, s.k1 + halo)


def test_strips_refuse_a_strip_smaller_than_its_halos() -> None:
    with pytest.raises(ValueError):
        bands_within(100, 16, 8)


def test_stripped_network_equals_the_whole_frame() -> None:
    """The engine's tiling, run with the CPU layers (float64): the untiled result, up to the CPU
    GEMM's size-dependent rounding; a wrong halo would be off by far more."""
    model = random_model("9-5-5", seed=3)
    y = np.random.default_rng(0).random((61, 23))
    whole = srcnn_layers(y, model)
    out = np.full_like(whole, np.nan)
    for s in bands_within(61, 2 * model.halo + 5, model.halo):
        out[s.k0:s.k1] = srcnn_layers(y[s.b0:s.b1], model)[s.k0 - s.b0:s.k1 - s.b0]
    assert np.max(np.abs(out - whole)) < 1e-12
