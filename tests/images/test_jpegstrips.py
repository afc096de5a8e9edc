"""A large JPEG encoded in strips on several threads is the file one encoder call makes."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from srgpu.images import jpegstrips
from srgpu.cpus import cpu_cores
from srgpu.images.files import _decode, read_image_data, write_image_atomic
from test_images import make_icc


def _photo(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Noise blurred into something like a photo's texture (restart intervals of very different sizes)."""
    rng = np.random.default_rng(seed)
    img = cv2.GaussianBlur(rng.integers(0, 256, shape, dtype=np.uint8), (7, 7), 2.0)
    return np.ascontiguousarray(img)


def _whole(image: np.ndarray, icc: bytes | None = None) -> bytes:
    """One encoder call with the strips' parameters."""
    params = jpegstrips.jpeg_params(image, 95)
    if icc:
        ok, buf = cv2.imencodeWithMetadata(".jpg", image, [cv2.IMAGE_METADATA_ICCP], [np.frombuffer(icc, np.uint8)],
                                           params)
    else:
        ok, buf = cv2.imencode(".jpg", image, params)
    assert ok
    return buf.tobytes()


# heights that are and are not whole MCU rows (16 colour, 8 gray), widths likewise, thin and tall
SHAPES = [(333, 517, 3), (200, 100), (64, 64, 3), (17, 1000, 3), (1000, 17), (400, 304, 3), (999, 1001), (48, 40, 3)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("threads", [2, 3, 8])
def test_strips_are_the_single_call_file(shape, threads):
    image = _photo(shape, seed=sum(shape) + threads)
    strips = jpegstrips.strip_rows(image, threads, strip_pixels=1)
    pieces = jpegstrips.encode_jpeg(image, 95, threads=threads, strip_pixels=1)
    assert pieces is not None
    if len(strips) > 1:  # the strips were joined (a fallback to one call is one piece)
        assert len(pieces) >= len(strips) + 2
    assert b"".join(pieces) == _whole(image)


def test_strips_cover_the_image_in_whole_mcu_rows():
    for shape in SHAPES:
        image = np.zeros(shape, np.uint8)
        mh = jpegstrips.mcu_size(image)[0]
        strips = jpegstrips.strip_rows(image, 5, strip_pixels=1)
        assert strips[0][0] == 0 and strips[-1][1] == shape[0]
        assert all(a[1] == b[0] for a, b in zip(strips, strips[1:]))
        assert all(r0 % mh == 0 for r0, _ in strips)
        assert len(strips) <= 5


def test_small_images_are_one_piece():
    image = _photo((300, 400, 3), 1)
    assert not jpegstrips.splits(image, threads=16)
    assert jpegstrips.strip_rows(image, 16) == [(0, 300)]


def test_restart_markers_do_not_change_the_pixels():
    image = _photo((400, 624, 3), 7)
    joined = b"".join(jpegstrips.encode_jpeg(image, 95, threads=4, strip_pixels=1))
    plain = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 95])[1]
    decoded = cv2.imdecode(np.frombuffer(joined, np.uint8), cv2.IMREAD_UNCHANGED)
    assert np.array_equal(decoded, cv2.imdecode(plain, cv2.IMREAD_UNCHANGED))


def test_icc_profile_in_the_strips_file():
    icc = make_icc()
    image = _photo((160, 200, 3), 3)
    pieces = jpegstrips.encode_jpeg(image, 95, icc=icc, threads=3, strip_pixels=1)
    assert b"".join(pieces) == _whole(image, icc)
    assert _decode(np.frombuffer(b"".join(pieces), np.uint8))[2] == icc


@pytest.mark.skipif(cpu_cores() < 2, reason="one core: a large JPEG is written in one piece")
def test_a_large_jpeg_output_is_written_in_strips(tmp_path):
    image = _photo((1400, 2000, 3), 11)  # 2.8 Mpx: split on two cores or more
    assert jpegstrips.splits(image)
    icc = make_icc()
    out = write_image_atomic(tmp_path / "o.jpg", image.copy(), icc=icc, order="bgr")
    data = (tmp_path / "o.jpg").read_bytes()
    assert out.size == len(data) and out.notes == ()
    assert data == _whole(image, icc)
    assert read_image_data(tmp_path / "o.jpg").icc == icc
    back = read_image_data(tmp_path / "o.jpg", "bgr").pixels
    plain = cv2.imdecode(cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 95])[1], cv2.IMREAD_UNCHANGED)
    assert np.array_equal(back, plain)
