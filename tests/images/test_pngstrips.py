"""A large PNG encoded in strips on several threads holds the image's samples exactly, in a valid
file (every CRC, one zlib stream whose Adler-32 zlib checks), about as large as OpenCV's."""

from __future__ import annotations

import struct
import zlib

import cv2
import numpy as np
import pytest

from srgpu.images import pngstrips
from srgpu.cpus import cpu_cores
from srgpu.images.files import read_image_data, write_image_atomic
from test_images import make_icc


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """(type, data) of every chunk, each CRC checked."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    out, i = [], 8
    while i < len(data):
        n, kind = struct.unpack(">I4s", data[i:i + 8])
        body = data[i + 8:i + 8 + n]
        assert struct.unpack(">I", data[i + 8 + n:i + 12 + n])[0] == zlib.crc32(body, zlib.crc32(kind)), kind
        out.append((kind, body))
        i += 12 + n
    return out


def _image(shape: tuple[int, ...], dtype: type, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    top = np.iinfo(dtype).max
    smooth = cv2.GaussianBlur(rng.integers(0, top, shape, dtype=dtype), (5, 5), 1.5)
    return np.ascontiguousarray(smooth)


@pytest.mark.parametrize("seed", range(3))
def test_adler32_combine_is_zlibs(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, int(rng.integers(0, 200_000)), dtype=np.uint8).tobytes()
    b = rng.integers(0, 256, int(rng.integers(0, 200_000)), dtype=np.uint8).tobytes()
    assert pngstrips.adler32_combine(zlib.adler32(a), zlib.adler32(b), len(b)) == zlib.adler32(a + b)
    assert pngstrips.adler32_combine(zlib.adler32(a), 1, 0) == zlib.adler32(a)


SHAPES = [(333, 517, 3), (200, 100), (64, 64, 4), (17, 1000, 3), (999, 1001), (50, 70, 4), (1, 5, 3), (7, 1)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("threads", [1, 3, 8])
def test_strips_hold_the_samples_exactly(shape, dtype, threads):
    bgr = _image(shape, dtype, seed=sum(shape) + threads)
    data = b"".join(pngstrips.encode_png(bgr, bgr=True, threads=threads, strip_pixels=1))
    back = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)  # OpenCV gives BGR(A) back
    assert back.dtype == dtype and np.array_equal(back, bgr)
    chunks = _chunks(data)
    assert [k for k, _ in chunks][:1] == [b"IHDR"] and chunks[-1][0] == b"IEND"
    strips = pngstrips.strip_rows(shape[0], shape[1], threads, strip_pixels=1)
    idat = [body for kind, body in chunks if kind == b"IDAT"]
    assert len(idat) == len(strips) + 2  # the zlib header, a chunk per strip, the Adler-32
    raw = zlib.decompress(b"".join(idat))  # zlib checks the combined Adler-32
    rgb = cv2.cvtColor(bgr, cv2.COLOR_BGRA2RGBA if shape[2:] == (4,) else cv2.COLOR_BGR2RGB) if len(shape) == 3 else bgr
    assert raw == pngstrips.filtered_rows(rgb).tobytes()


def test_icc_profile_is_carried():
    icc = make_icc()
    image = _image((120, 90, 3), np.uint8, 5)
    data = b"".join(pngstrips.encode_png(image, icc=icc, bgr=True, threads=3, strip_pixels=1))
    kinds = [k for k, _ in _chunks(data)]
    assert kinds.index(b"iCCP") < kinds.index(b"IDAT")


def test_other_layouts_are_refused():
    with pytest.raises(ValueError):
        pngstrips.encode_png(np.zeros((4, 4, 5), np.uint8))
    with pytest.raises(ValueError):
        pngstrips.encode_png(np.zeros((4, 4), np.float32))


@pytest.mark.skipif(cpu_cores() < 2, reason="one core: a large PNG is written by OpenCV in one call")
@pytest.mark.parametrize("channels,dtype", [((3,), np.uint8), ((4,), np.uint16), ((), np.uint8)])
def test_a_large_png_output_is_written_in_strips(tmp_path, channels, dtype):
    image = _image((1200, 1800) + channels, dtype, 9)  # 2.2 Mpx: split on two cores or more
    assert pngstrips.splits(image)
    icc = make_icc() if channels == (3,) else None
    out = write_image_atomic(tmp_path / "o.png", image.copy(), icc=icc, order="bgr")
    assert out.notes == ()
    data = (tmp_path / "o.png").read_bytes()
    assert out.size == len(data) and len([k for k, _ in _chunks(data) if k == b"IDAT"]) > 3
    back = read_image_data(tmp_path / "o.png", "bgr")
    assert back.pixels.dtype == dtype and np.array_equal(back.pixels, image)
    assert back.icc == icc
    opencv = cv2.imencode(".png", image)[1]
    assert len(data) <= 1.05 * len(opencv)  # OpenCV's default settings: about the same size


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_strips_in_blocks_of_rows(monkeypatch, dtype):
    """A strip filtered and deflated a few rows at a time (bounded scratch) is the same file."""
    image = _image((97, 131, 4), dtype, 13)
    whole = b"".join(pngstrips.encode_png(image, bgr=True, threads=3, strip_pixels=1))
    monkeypatch.setattr(pngstrips, "SCRATCH_BYTES", 3 * image[:1].nbytes)  # three rows a block
    blocks = b"".join(pngstrips.encode_png(image, bgr=True, threads=3, strip_pixels=1))
    assert blocks == whole
    assert np.array_equal(cv2.imdecode(np.frombuffer(blocks, np.uint8), cv2.IMREAD_UNCHANGED), image)


@pytest.mark.parametrize("dtype,level", [(np.uint8, None), (np.uint16, 9)])
def test_gray_alpha_is_written_as_gray_alpha(dtype, level):
    """OpenCV cannot write gray+alpha (colour type 4): srgpu's encoder does, at any zlib level."""
    import cv2

    la = np.random.default_rng(3).integers(0, np.iinfo(dtype).max, (37, 29, 2), dtype=dtype)
    data = b"".join(pngstrips.encode_png(la, threads=2, strip_pixels=100, level=level))
    assert data[25] == 4
    back = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)  # as BGRA, B = G = R
    np.testing.assert_array_equal(back, la[..., [0, 0, 0, 1]])
