"""The CPU engine in horizontal strips: bit-identical to the whole-image computation (bicubic,
the three layers with their replicate border at the real image edges, the conversion back),
whatever the strip height, scale, architecture or sample type; memory bounded by the budget."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from srgpu.engine.base import PlaneSpec, from_unit_float, to_unit_float
from srgpu.engine.cpu import CPUEngine, srcnn_strip_bytes
from srgpu.model import random_model
from srgpu.reference import srcnn_forward, srcnn_layers
from srgpu.resize import imresize, imresize_rows

MAX = {np.uint8: 255, np.uint16: 65535, np.float32: 1.0}


def random_plane(rng: np.random.Generator, shape: tuple[int, int], dtype: type) -> np.ndarray:
    if dtype is np.float32:
        return rng.random(shape, dtype=np.float32)
    return rng.integers(0, MAX[dtype] + 1, shape).astype(dtype)


def whole_srcnn(plane: np.ndarray, out_shape: tuple[int, int], model, max_value: float) -> np.ndarray:
    """The unstriped definition: bicubic of the whole plane, the layers on the whole plane."""
    up = imresize(to_unit_float(plane, max_value), output_shape=out_shape)
    return from_unit_float(srcnn_layers(np.ascontiguousarray(up), model), plane.dtype, max_value)


def assert_identical(got: np.ndarray, expect: np.ndarray) -> None:
    assert got.dtype == expect.dtype and got.shape == expect.shape
    assert np.array_equal(got, expect), f"{np.count_nonzero(got != expect)} samples differ"


@pytest.mark.parametrize("in_shape,out_shape", [((7, 5), (14, 10)), ((5, 6), (15, 18)), ((3, 4), (12, 16)),
                                                ((9, 4), (13, 8)), ((4, 9), (12, 13)), ((16, 12), (7, 5))])
def test_imresize_rows_are_imresize_rows(in_shape, out_shape, rng):
    """Any row range of the output, bit for bit, for up/down and unequal scales (either axis first)."""
    img = rng.random(in_shape, dtype=np.float32)
    whole = imresize(img, output_shape=out_shape)
    for rows in (1, 2, 3):
        parts = [imresize_rows(img, out_shape, r0, min(out_shape[0], r0 + rows))
                 for r0 in range(0, out_shape[0], rows)]
        assert_identical(np.concatenate(parts), whole)


@pytest.mark.parametrize("arch", ["9-1-5", "9-5-5"])
@pytest.mark.parametrize("scale", [2, 3, 4])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_srcnn_strips_bit_identical(arch, scale, dtype, rng):
    """Strip edges at every phase of the scale (1..5 rows a strip), odd heights, a height below
    the halo, and a strip taller than the plane: every output sample equals the whole image's."""
    model = random_model(arch, seed=3)
    for in_shape in ((7, 5), (1, 6), (4, 3)):
        plane = random_plane(rng, in_shape, dtype)
        out_shape = (in_shape[0] * scale, in_shape[1] * scale)
        expect = whole_srcnn(plane, out_shape, model, MAX[dtype])
        assert len(np.unique(expect)) > 3  # not saturated or constant
        for rows in (1, 2, 3, 5, 1000):
            got = CPUEngine(model, scale, strip_rows=rows).srcnn_plane(plane, out_shape, MAX[dtype])
            assert_identical(got, expect)


def test_default_engine_equals_whole_and_budget_of_one_byte_still_runs(rng):
    """Float planes (what images.py passes) through the default budget (one strip here) and
    through a budget too small for even one row (a row a strip): both the whole image's."""
    model = random_model("9-5-5", seed=4)
    plane = random_plane(rng, (11, 9), np.float32)
    expect = whole_srcnn(plane, (33, 27), model, 1.0)
    assert_identical(CPUEngine(model, 3).srcnn_plane(plane, (33, 27), 1.0), expect)
    assert_identical(CPUEngine(model, 3, strip_budget_bytes=1).srcnn_plane(plane, (33, 27), 1.0), expect)


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
def test_bicubic_strips_bit_identical(dtype, rng):
    plane = random_plane(rng, (9, 7), dtype)
    expect = from_unit_float(imresize(to_unit_float(plane, MAX[dtype]), output_shape=(27, 21)), dtype, MAX[dtype])
    for rows in (1, 2, 4, 1000):
        got = CPUEngine(random_model("9-1-5"), 3, strip_rows=rows).bicubic_plane(plane, (27, 21), MAX[dtype])
        assert_identical(got, expect)


@pytest.mark.parametrize("arch", ["9-1-5", "9-5-5"])
def test_strip_height_follows_budget_and_width(arch):
    """512 MB at 12000 output columns (a 6000x4000 photo at x2): tens of rows whose estimated
    intermediates fit the budget; twice the width, about half the rows."""
    model = random_model(arch)
    engine = CPUEngine(model, 2, strip_budget_bytes=512 * 2**20)

    def strip_bytes(rows: int, width: int) -> int:
        return srcnn_strip_bytes(model, rows, width)

    rows = engine.kept_rows((8000, 12000), strip_bytes, model.halo) + 2 * model.halo
    assert strip_bytes(rows, 12000) <= 512 * 2**20 < strip_bytes(rows + 1, 12000)
    assert rows > 40
    assert abs(engine.kept_rows((8000, 24000), strip_bytes, model.halo) + 2 * model.halo - rows / 2) <= 2


@pytest.mark.parametrize("arch", ["9-1-5", "9-5-5"])
def test_peak_memory_within_budget(arch, rng):
    """Traced peak of a whole srcnn_plane call, less the plane's own input and output arrays,
    stays within the budget -- and far below what the unstriped computation takes."""
    model = random_model(arch, seed=1)
    plane = random_plane(rng, (96, 128), np.uint8)
    out_shape = (192, 256)
    budget = 4 * 2**20
    engine = CPUEngine(model, 2, strip_budget_bytes=budget)
    engine.srcnn_plane(plane[:8], (16, 256), 255)  # warm caches (bicubic coefficients)
    own = plane.size * 4 + 192 * 256  # float32 input, uint8 output
    tracemalloc.start()
    try:
        engine.srcnn_plane(plane, out_shape, 255)
        _, striped = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        whole_srcnn(plane, out_shape, model, 255)
        _, whole = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert striped - own <= budget
    assert striped < whole / 3
