"""The CPU engine in tiles of rows and columns: bit-identical to the whole-plane computation
(bicubic, the three layers with their replicate border at the real image edges, the conversion
back), whatever the tile's rows, columns and column chunk, scale, architecture or sample type, at
toy widths and at real ones; memory bounded by the budget, whatever the plane's width."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from srgpu.engine.base import from_unit_float, to_unit_float
from srgpu.engine.cpu import CPUEngine, srcnn_tile_bytes
from srgpu.model import random_model
from srgpu.reference import column_chunk, srcnn_forward, srcnn_layers
from srgpu.resize import imresize, imresize_region, imresize_rows

from conftest import centred_model

MAX = {np.uint8: 255, np.uint16: 65535, np.float32: 1.0}


@pytest.fixture
def poisoned(monkeypatch):
    """np.empty fills what it hands out (NaN, or 77 for integers): a sample that no tile writes,
    or an intermediate read before it is computed, shows in the result."""
    empty = np.empty

    def poisoned_empty(shape, dtype=float, *args, **kwargs):
        a = empty(shape, dtype, *args, **kwargs)
        a.fill(np.nan if np.issubdtype(a.dtype, np.floating) else 77)
        return a

    monkeypatch.setattr(np, "empty", poisoned_empty)


def random_plane(rng: np.random.Generator, shape: tuple[int, int], dtype: type) -> np.ndarray:
    if dtype is np.float32:
        return rng.random(shape, dtype=np.float32)
    return rng.integers(0, MAX[dtype] + 1, shape).astype(dtype)


def whole_srcnn(plane: np.ndarray, out_shape: tuple[int, int], model, max_value: float,
                chunk: int | None = None) -> np.ndarray:
    """The untiled definition: bicubic of the whole plane, the layers on the whole plane."""
    up = imresize(to_unit_float(plane, max_value), output_shape=out_shape)
    return from_unit_float(srcnn_layers(np.ascontiguousarray(up), model, chunk), plane.dtype, max_value)


def assert_identical(got: np.ndarray, expect: np.ndarray) -> None:
    assert got.dtype == expect.dtype and got.shape == expect.shape
    assert np.array_equal(got, expect), f"{np.count_nonzero(got != expect)} samples differ"


@pytest.mark.parametrize("in_shape,out_shape", [((7, 5), (14, 10)), ((5, 6), (15, 18)), ((3, 4), (12, 16)),
                                                ((9, 4), (13, 8)), ((4, 9), (12, 13)), ((16, 12), (7, 5))])
def test_imresize_regions_are_imresize_regions(in_shape, out_shape, rng):
    """Any block of the output, bit for bit, for up/down and unequal scales (either axis first)."""
    img = rng.random(in_shape, dtype=np.float32)
    whole = imresize(img, output_shape=out_shape)
    for rows in (1, 2, 3):
        parts = [imresize_rows(img, out_shape, r0, min(out_shape[0], r0 + rows))
                 for r0 in range(0, out_shape[0], rows)]
        assert_identical(np.concatenate(parts), whole)
        for cols in (1, 2, 5):
            blocks = [[imresize_region(img, out_shape, (r0, min(out_shape[0], r0 + rows)),
                                       (c0, min(out_shape[1], c0 + cols)))
                       for c0 in range(0, out_shape[1], cols)] for r0 in range(0, out_shape[0], rows)]
            assert_identical(np.block(blocks), whole)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["9-1-5", "9-5-5"])
@pytest.mark.parametrize("scale", [2, 3, 4])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_srcnn_tiles_bit_identical(arch, scale, dtype, rng, poisoned):
    """Tile edges at every phase of the scale and everywhere in the columns: 1..5 rows and 1..3
    chunks a tile, chunks of 1, 2, 3 and 7 columns (narrower than conv3's margin, and a last chunk
    of any width), odd sizes, a plane shorter and narrower than the halo, and a tile larger than
    the plane. Every output sample equals the whole plane's with the same chunk."""
    model = centred_model(arch, seed=3)
    for in_shape in ((7, 5), (1, 6), (4, 3)):
        plane = random_plane(rng, in_shape, dtype)
        out_shape = (in_shape[0] * scale, in_shape[1] * scale)
        for chunk in (1, 2, 3, 7):
            expect = whole_srcnn(plane, out_shape, model, MAX[dtype], chunk)
            assert len(np.unique(expect)) > 3  # not saturated or constant
            for rows, chunks in ((1, 1), (2, 3), (3, 2), (5, 1), (1000, 2), (2, 1000)):
                engine = CPUEngine(model, scale, tile_rows=rows, tile_chunks=chunks, chunk=chunk)
                assert_identical(engine.srcnn_plane(plane, out_shape, MAX[dtype]), expect)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["9-1-5", "9-5-5"])
def test_srcnn_tiles_bit_identical_at_real_widths(arch, rng, poisoned):
    """Where BLAS and OpenCV's vector loops show (a GEMM's rounding depends on its shape and a
    sample's place in it; a filter's on whether the column is in the call's vector body or its
    tail): planes of several default chunks, the last one narrower than conv3's margin or not,
    in tiles of one and two chunks and a few rows, and in the plan the budget makes."""
    model = centred_model(arch, seed=5)
    chunk = column_chunk(model)
    for width in (2 * chunk + 1, 3 * chunk - 37):
        plane = random_plane(rng, (5, -(-width // 2)), np.uint16)
        out_shape = (10, width)
        expect = whole_srcnn(plane, out_shape, model, 65535)
        for rows, chunks in ((3, 1), (4, 2), (None, None)):
            engine = CPUEngine(model, 2, tile_rows=rows, tile_chunks=chunks, tile_budget_bytes=8 * 2**20)
            assert_identical(engine.srcnn_plane(plane, out_shape, 65535), expect)


def test_default_engine_equals_whole_and_budget_of_one_byte_still_runs(rng, poisoned):
    """Float planes (what images.py passes) through the default budget (one tile here) and
    through a budget too small for even one row (a row and a chunk a tile): both the whole
    image's."""
    model = centred_model("9-5-5", seed=4)
    plane = random_plane(rng, (11, 9), np.float32)
    expect = whole_srcnn(plane, (33, 27), model, 1.0)
    assert_identical(CPUEngine(model, 3).srcnn_plane(plane, (33, 27), 1.0), expect)
    assert_identical(CPUEngine(model, 3, tile_budget_bytes=1).srcnn_plane(plane, (33, 27), 1.0), expect)


@pytest.mark.parametrize("arch", ["9-1-5", "9-5-5"])
def test_reference_float32_strips_bit_identical(arch, rng):
    """srcnn_forward's own strips (the oracle the GPU is checked against) in float32, at a
    width where one-GEMM-per-strip would round differently."""
    model = random_model(arch, seed=6)
    y = rng.random((29, 53), dtype=np.float32)
    whole = srcnn_forward(y, model, strip_pixels=10**9)
    for strip_pixels in (1, 60, 300):
        assert_identical(srcnn_forward(y, model, strip_pixels=strip_pixels), whole)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_bicubic_strips_bit_identical(dtype, rng, poisoned):
    plane = random_plane(rng, (9, 7), dtype)
    expect = from_unit_float(imresize(to_unit_float(plane, MAX[dtype]), output_shape=(27, 21)), dtype, MAX[dtype])
    for rows in (1, 2, 4, 1000):
        got = CPUEngine(random_model("9-1-5"), 3, tile_rows=rows).bicubic_plane(plane, (27, 21), MAX[dtype])
        assert_identical(got, expect)


@pytest.mark.parametrize("arch", ["9-1-5", "9-5-5"])
@pytest.mark.parametrize("threads", [1, 2])
def test_tile_follows_budget_not_width(arch, threads):
    """128 MB at 12000, 24000 and 48000 output columns (a 6000x4000 photo at x2 and x4, and
    wider): the same tile, whose estimated intermediates fit each thread's share of the budget,
    a hundred rows tall or more and whole chunks wide, whatever the width; a small plane is one
    tile."""
    model = random_model(arch)
    budget = 128 * 2**20
    engine = CPUEngine(model, 2, tile_budget_bytes=budget, threads=threads)
    plans = {engine.tile_plan((8000, width)) for width in (12000, 24000, 48000)}
    assert len(plans) == 1
    plan = plans.pop()
    columns = plan.chunks * plan.chunk + 2 * model.halo
    assert srcnn_tile_bytes(model, plan.rows + 2 * model.halo, columns) <= budget // threads
    assert plan.rows > 160 // threads and plan.chunk == column_chunk(model)
    assert engine.tile_plan((100, 500)) == (100, 1, plan.chunk)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["9-1-5", "9-5-5"])
def test_peak_memory_within_budget_whatever_the_width(arch, rng):
    """Traced peak of a whole srcnn_plane call, less the plane's own input and output arrays,
    stays within the budget on one thread and on two -- far below what the untiled computation
    takes, and on one thread about the same for a plane four times as wide."""
    model = random_model(arch, seed=1)
    budget = 4 * 2**20

    def peak(engine: CPUEngine, plane: np.ndarray, out_shape: tuple[int, int]) -> int:
        own = plane.size * 4 + out_shape[0] * out_shape[1]  # float32 input, uint8 output
        tracemalloc.start()
        try:
            engine.srcnn_plane(plane, out_shape, 255)
            return tracemalloc.get_traced_memory()[1] - own
        finally:
            tracemalloc.stop()

    narrow, wide = random_plane(rng, (64, 128), np.uint8), random_plane(rng, (64, 512), np.uint8)
    peaks = {}
    for threads in (1, 2):
        engine = CPUEngine(model, 2, tile_budget_bytes=budget, chunk=64, threads=threads)
        engine.srcnn_plane(random_plane(rng, (8, 32), np.uint8), (16, 64), 255)  # warm caches
        for name, plane in (("narrow", narrow), ("wide", wide)):
            peaks[threads, name] = peak(engine, plane, (128, 2 * plane.shape[1]))
            assert peaks[threads, name] <= budget
    tracemalloc.start()
    try:
        whole_srcnn(narrow, (128, 256), model, 255, 64)
        whole = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peaks[1, "narrow"] < whole / 3
    assert peaks[1, "wide"] < peaks[1, "narrow"] * 1.2
