"""Image files too large to decode (a decompression bomb's header, a huge scan): each fails alone,
before it is decoded, in one line with its declared size and the limit, and the rest of the folder
is processed; --max-megapixels raises the limit."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest

from srgpu.batch.local import ImageOptions, run_batch
from srgpu.batch.plan import plan_batch
from srgpu.images.files import ImageFileError, read_image_data

from test_image_full_disk import srgpu


def png_declaring(path: Path, width: int, height: int) -> Path:
    """A small PNG file whose header declares ``width`` x ``height`` (its data is a few rows)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))

    rows = zlib.compress(b"\0" * (1 + 3 * width) * 4)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", rows) + chunk(b"IEND", b""))
    return path


def test_a_bomb_fails_alone_in_one_line_and_the_folder_goes_on(tmp_path, cpu_engine):
    src = tmp_path / "in"
    src.mkdir()
    png_declaring(src / "bomb.png", 50000, 50000)
    for name in ("a.png", "c.jpg"):
        cv2.imwrite(str(src / name), np.full((6, 5, 3), 90, np.uint8))
    result = run_batch(plan_batch(src, tmp_path / "out"), cpu_engine)
    assert [o.job.src.name for o in result.done] == ["a.png", "c.jpg"]
    (failed,) = result.failed
    assert failed.message == (f"{src / 'bomb.png'}: declares 50000x50000 pixels (2500 megapixels), more than the "
                              "limit of 256 megapixels (--max-megapixels raises it)")


def test_beyond_opencvs_own_limit_is_one_line_too(tmp_path):
    bomb = png_declaring(tmp_path / "bomb.png", 50000, 50000)
    with pytest.raises(ImageFileError) as e:
        read_image_data(bomb)  # no limit of srgpu's
    assert str(e.value).startswith(f"{bomb}: declares 50000x50000 pixels") and "OpenCV" in str(e.value)


@pytest.mark.parametrize("ext", [".png", ".jpg", ".bmp", ".tif", ".webp"])
def test_every_format_is_measured_before_decoding(ext, tmp_path):
    path = tmp_path / f"wide{ext}"
    cv2.imwrite(str(path), np.zeros((30, 400, 3), np.uint8))
    with pytest.raises(ImageFileError, match=r"declares 400x30 pixels .* limit of 0.01 megapixels"):
        read_image_data(path, max_pixels=10_000)
    assert read_image_data(path, max_pixels=12_000).pixels.shape == (30, 400, 3)


def test_the_limit_is_the_default_and_the_user_raises_it(tmp_path, random_npz):
    from srgpu.images.upscale import DEFAULT_MAX_PIXELS

    assert ImageOptions().max_pixels == DEFAULT_MAX_PIXELS == 256 * 10**6
    src = tmp_path / "in.png"
    cv2.imwrite(str(src), np.full((40, 30, 3), 90, np.uint8))
    small = srgpu("upscale", src, "-o", tmp_path / "a.png", "--model", random_npz, "-d", "cpu",
                  "--max-megapixels", "0.001")
    assert small.exit_code == 1 and "declares 30x40 pixels" in small.stderr and "limit of 0.001 megapixels" in small.stderr
    raised = srgpu("upscale", src, "-o", tmp_path / "b.png", "--model", random_npz, "-d", "cpu",
                   "--max-megapixels", "0.002")
    assert raised.exit_code == 0, raised.stderr


def test_a_limit_that_is_not_a_number_is_refused_and_a_tiny_one_still_applies(tmp_path, random_npz):
    src = tmp_path / "in.png"
    cv2.imwrite(str(src), np.full((4, 4, 3), 90, np.uint8))
    for bad in ("nan", "inf", "-1"):
        refused = srgpu("upscale", src, "-o", tmp_path / "a.png", "--model", random_npz, "-d", "cpu",
                        "--max-megapixels", bad)
        assert refused.exit_code == 2 and "--max-megapixels" in refused.stderr and "Traceback" not in refused.stderr
    tiny = srgpu("upscale", src, "-o", tmp_path / "b.png", "--model", random_npz, "-d", "cpu",
                 "--max-megapixels", "0.0000005")
    assert tiny.exit_code == 1 and "declares 4x4 pixels (1.6e-05 megapixels)" in tiny.stderr
    assert not (tmp_path / "b.png").exists()
