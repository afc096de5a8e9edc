"""srgpu.tools.degrade: degradation specs, and JPEG / all-intra H.264 and HEVC through the real OpenCV and
ffmpeg (no mocks): they change the image, deterministically, at any size, and a batch of planes
through one ffmpeg call comes back as one call per plane would, in order."""

from __future__ import annotations

import numpy as np
import pytest

from srgpu.tools.degrade import Degradation, DegradeError, compress, compress_batch, parse_degradation
from srgpu.tools.evaluate import luma_uint8
from srgpu.images.files import read_image


@pytest.mark.parametrize("text, expected", [
    ("jpeg:75", Degradation("jpeg", 75, 75)),
    ("h264:23", Degradation("h264", 23, 23)),
    ("HEVC:28", Degradation("hevc", 28, 28)),
    (" jpeg:60-95 ", Degradation("jpeg", 60, 95)),
    ("h264:18-30", Degradation("h264", 18, 30)),
])
def test_parse(text: str, expected: Degradation) -> None:
    d = parse_degradation(text)
    assert d == expected
    assert parse_degradation(str(d)) == d
    assert d.is_range == (d.low != d.high)


@pytest.mark.parametrize("text, fragment", [
    ("jpeg", "expected CODEC:QUALITY"),
    ("jpeg:", "expected CODEC:QUALITY"),
    ("jpeg:high", "expected CODEC:QUALITY"),
    ("jpeg:7.5", "expected CODEC:QUALITY"),
    ("png:75", "unknown codec 'png'"),
    ("jpeg:0", "quality must be within 1-100"),
    ("jpeg:101", "quality must be within 1-100"),
    ("h264:52", "CRF must be within 0-51"),
    ("jpeg:95-60", "low before high"),
])
def test_bad_specs_say_why_in_one_line(text: str, fragment: str) -> None:
    with pytest.raises(DegradeError, match=fragment) as e:
        parse_degradation(text)
    assert "\n" not in str(e.value)


def test_a_range_draws_within_it_and_cannot_be_applied() -> None:
    d = parse_degradation("h264:18-30")
    draws = {d.draw(np.random.default_rng(i)) for i in range(200)}
    assert draws == set(range(18, 31))
    with pytest.raises(DegradeError, match="is a range"):
        d.apply(np.zeros((8, 8), np.uint8))


@pytest.fixture(scope="module")
def plane(shared_data) -> np.ndarray:
    """A detailed LR-sized Y plane (butterfly) with odd height and width."""
    y = luma_uint8(read_image(shared_data / "eval" / "Set5" / "butterfly_GT.bmp"))
    return np.ascontiguousarray(y[10:73, 20:99])  # 63 x 79


@pytest.mark.parametrize("spec", ["jpeg:75", "jpeg:95", "h264:23", "h264:30", "hevc:28"])
def test_compression_changes_the_plane_deterministically(plane: np.ndarray, spec: str) -> None:
    d = parse_degradation(spec)
    out = d.apply(plane)
    assert out.shape == plane.shape and out.dtype == np.uint8  # odd sizes come back whole
    err = np.abs(out.astype(int) - plane).mean()
    assert 0.3 < err < 12, err  # changed, and still the same picture
    np.testing.assert_array_equal(out, d.apply(plane))


def test_lower_quality_loses_more(plane: np.ndarray) -> None:
    def err(spec: str) -> float:
        return float(np.abs(parse_degradation(spec).apply(plane).astype(int) - plane).mean())

    assert err("jpeg:60") > err("jpeg:95")
    assert err("h264:30") > err("h264:18")


@pytest.mark.parametrize("codec, quality", [("h264", 23), ("hevc", 28), ("jpeg", 70)])
def test_a_batch_equals_one_call_per_plane_in_order(plane: np.ndarray, codec: str, quality: int) -> None:
    # distinct frames (shifted crops, one flat): a reordered, dropped or merged frame would show
    frames = [np.ascontiguousarray(np.roll(plane, 7 * i, axis=1)) for i in range(4)]
    frames.append(np.full_like(plane, 90))
    batch = compress_batch(frames, codec, quality)
    assert batch.shape == (5, *plane.shape)
    for i, f in enumerate(frames):
        np.testing.assert_array_equal(batch[i], compress(f, codec, quality), err_msg=f"frame {i}")


def test_tiny_and_even_sizes(plane: np.ndarray) -> None:
    for h, w in ((1, 1), (2, 3), (17, 16), (16, 17)):
        p = np.ascontiguousarray(plane[:h, :w])
        for spec in ("jpeg:75", "h264:23"):
            assert parse_degradation(spec).apply(p).shape == (h, w)


def test_batch_needs_one_size() -> None:
    with pytest.raises(DegradeError, match="one size"):
        compress_batch([np.zeros((8, 8), np.uint8), np.zeros((8, 10), np.uint8)], "h264", 23)


def test_jpeg_rgb(plane: np.ndarray) -> None:
    rgb = np.stack([plane, plane[::-1], np.flip(plane, 1)], axis=-1)
    out = compress(rgb, "jpeg", 75)
    assert out.shape == rgb.shape and not np.array_equal(out, rgb)
    assert np.abs(out.astype(int) - rgb).mean() < 12
