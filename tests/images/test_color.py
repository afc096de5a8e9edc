"""BT.601 studio-range YCbCr as MATLAB's rgb2ycbcr, and MATLAB-style rounding."""

from __future__ import annotations

import numpy as np
import pytest

from srgpu.color import quantize, rgb_to_y_uint8, rgb_to_ycbcr, ycbcr_to_rgb


@pytest.mark.parametrize("rgb,ycc", [
    ((0, 0, 0), (16, 128, 128)),
    ((1, 1, 1), (235, 128, 128)),
    ((1, 0, 0), (16 + 65.481, 128 - 37.797, 240)),
    ((0, 1, 0), (16 + 128.553, 128 - 74.203, 128 - 93.786)),
    ((0, 0, 1), (16 + 24.966, 240, 128 - 18.214)),
])
def test_known_values(rgb, ycc):
    np.testing.assert_allclose(rgb_to_ycbcr(np.array([[rgb]], float))[0, 0] * 255, ycc, atol=1e-10)


def test_round_trip(rng):
    rgb = rng.random((7, 9, 3))
    np.testing.assert_allclose(ycbcr_to_rgb(rgb_to_ycbcr(rgb)), rgb, atol=1e-12)


def test_gray_has_neutral_chroma(rng):
    g = rng.random((5, 6, 1)).repeat(3, axis=2)
    np.testing.assert_allclose(rgb_to_ycbcr(g)[..., 1:] * 255, 128, atol=1e-10)


def test_y_uint8_is_rounded_formula(rng):
    rgb = rng.integers(0, 256, (31, 17, 3), dtype=np.uint8)
    r, g, b = (rgb[..., i].astype(np.float64) / 255 for i in range(3))
    y = 16 + 65.481 * r + 128.553 * g + 24.966 * b
    np.testing.assert_array_equal(rgb_to_y_uint8(rgb), np.floor(y + 0.5).astype(np.uint8))
    assert rgb_to_y_uint8(np.full((1, 1, 3), 255, np.uint8))[0, 0] == 235
    with pytest.raises(TypeError):
        rgb_to_y_uint8(rgb.astype(np.uint16))


def test_quantize_rounds_half_away_and_saturates():
    v = np.array([-0.2, 0.0, 0.5 / 255, 1.49 / 255, 1.5 / 255, 254.5 / 255, 1.0, 1.7])
    np.testing.assert_array_equal(quantize(v, np.uint8), [0, 0, 1, 1, 2, 255, 255, 255])
    np.testing.assert_array_equal(quantize(np.array([0.5, 1.0, 2.0]), np.uint16, 1023), [512, 1023, 1023])
    assert quantize(np.array([1.0]), np.uint16).tolist() == [65535]
