"""The GPU colour kernels' arithmetic (srgpu.kernels.colour), checked where no GPU is needed: their
NumPy definition against srgpu.color's CPU path on random images of every depth, channel count and
order; the kernels compile with the NVRTC a pip install brings; bad arrays are refused. The GPU
kernels themselves are tested against the definition in test_gpu_colour.py."""

from __future__ import annotations

import numpy as np
import pytest

from srgpu.kernels import colour

CASES = [(np.uint8, 3, "rgb"), (np.uint8, 4, "bgr"), (np.uint16, 3, "bgr"), (np.uint16, 4, "rgb")]


def _ulps(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want).astype(np.float32))))


@pytest.mark.parametrize("dtype, channels, order", CASES)
def test_the_kernels_definition_is_the_cpu_path(dtype, channels, order) -> None:
    """Planes within one float32 ulp of rgb_to_ycbcr's, samples those of ycbcr_to_rgb + quantize
    (equal here; a BLAS that sums the 3x3 product another way may move a plane by an ulp)."""
    rng = np.random.default_rng(channels * 10 + np.dtype(dtype).itemsize)
    top = np.iinfo(dtype).max
    image = rng.integers(0, top + 1, (211, 173, channels)).astype(dtype)
    image[0, 0, :3], image[0, 1, :3] = 0, top  # black and white
    got, want = colour.definition_to_planes(image, order), colour.reference_to_planes(image, order)
    for g, w in zip(got[:3], want[:3]):
        assert g.dtype == np.float32 and g.shape == image.shape[:2]
        assert _ulps(g, w) <= 1.0
    if channels == 4:
        np.testing.assert_array_equal(got[3], image[..., 3])
    # the way back, on the planes themselves (a round trip) and on planes as an upscale leaves them
    back = colour.definition_from_planes(*got[:3], got[3], np.dtype(dtype), order)
    np.testing.assert_array_equal(back, image)
    planes = [np.clip(p + rng.normal(0, 0.01, p.shape), 0, 1).astype(np.float32) for p in got[:3]]
    a = colour.definition_from_planes(*planes, got[3], np.dtype(dtype), order)
    b = colour.reference_from_planes(*planes, got[3], np.dtype(dtype), order)
    diff = np.abs(a.astype(np.int64) - b.astype(np.int64))
    assert diff.max() <= 1 and np.mean(diff == 0) >= 0.99999


def test_the_channel_order_only_swaps_red_and_blue() -> None:
    rng = np.random.default_rng(2)
    rgb = rng.integers(0, 256, (9, 11, 3)).astype(np.uint8)
    bgr = np.ascontiguousarray(rgb[..., ::-1])
    for a, b in zip(colour.definition_to_planes(rgb, "rgb")[:3], colour.definition_to_planes(bgr, "bgr")[:3]):
        np.testing.assert_array_equal(a, b)
    y, cb, cr, _ = colour.definition_to_planes(rgb, "rgb")
    np.testing.assert_array_equal(colour.definition_from_planes(y, cb, cr, None, np.dtype(np.uint8), "bgr"), bgr)


def test_bad_arrays_are_refused_before_any_launch() -> None:
    img = np.zeros((4, 5, 3), np.uint8)
    planes = [np.zeros((4, 5), np.float32) for _ in range(3)]
    assert colour._check(img, *planes, None) == (4, 5, 3)
    with pytest.raises(ValueError, match="3 or 4"):
        colour._check(np.zeros((4, 5, 2), np.uint8), *planes, None)
    with pytest.raises(ValueError, match="float32"):
        colour._check(img, np.zeros((4, 5), np.float64), *planes[1:], None)
    with pytest.raises(ValueError, match="alpha"):
        colour._check(np.zeros((4, 5, 4), np.uint8), *planes, None)
    with pytest.raises(ValueError, match="alpha"):
        colour._check(np.zeros((4, 5, 4), np.uint8), *planes, np.zeros((4, 5), np.uint16))
    with pytest.raises(ValueError, match="contiguous"):
        colour._check(np.zeros((5, 4, 3), np.uint8).transpose(1, 0, 2), *planes, None)
    with pytest.raises(ValueError, match="order"):
        colour.to_planes_name(np.uint8, 3, "grb")
    assert len(set(colour.all_kernel_names())) == 16
