"""Rarer image files, each made here byte by byte as its format's specification lays it out, where
OpenCV reads them but something of them was lost on the way: BigTIFF's pages and size, OS/2
bitmaps' colours and size, a gray PNG's transparent level, a PNG's colour chunks, an APNG whose
default image is not one of its frames; and a 16-bit image written to an 8-bit format."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest

from srgpu.batch.local import run_batch
from srgpu.batch.plan import plan_batch
from srgpu.images import pngchunks
from srgpu.images.files import ImageFileError, read_image_data, write_image_atomic
from srgpu.images.meta import declared_size


def pixels(h: int = 20, w: int = 30, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def bigtiff(pages: list[np.ndarray]) -> bytes:
    """An uncompressed little-endian BigTIFF of RGB pages (8-byte counts and offsets, 20-byte entries)."""
    out = bytearray(b"II+\x00" + struct.pack("<HHQ", 8, 0, 0))
    data_at = []
    for p in pages:
        data_at.append(len(out))
        out += p.tobytes() + b"\0" * (-p.nbytes % 8)
    next_ptr = 8
    for p, at in zip(pages, data_at):
        h, w, _ = p.shape
        bits = struct.unpack("<Q", struct.pack("<HHHH", 8, 8, 8, 0))[0]
        entries = [(256, 4, 1, w), (257, 4, 1, h), (258, 3, 3, bits), (259, 3, 1, 1), (262, 3, 1, 2),
                   (273, 16, 1, at), (277, 3, 1, 3), (278, 4, 1, h), (279, 16, 1, p.nbytes)]
        out[next_ptr:next_ptr + 8] = struct.pack("<Q", len(out))
        out += struct.pack("<Q", len(entries)) + b"".join(struct.pack("<HHQQ", *e) for e in entries)
        next_ptr = len(out)
        out += struct.pack("<Q", 0)
    return bytes(out)


def os2_bmp(bgr: np.ndarray) -> bytes:
    """A 24-bit OS/2 1.x bitmap: BITMAPCOREHEADER (12 bytes, 16-bit width and height), rows bottom-up."""
    h, w, _ = bgr.shape
    rows = b"".join(r.tobytes() + b"\0" * (-r.nbytes % 4) for r in bgr[::-1])
    head = struct.pack("<IHHHH", 12, w, h, 1, 24)
    return b"BM" + struct.pack("<IHHI", 14 + 12 + len(rows), 0, 0, 26) + head + rows


def chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def gray_png(gray: np.ndarray, extra: tuple[tuple[bytes, bytes], ...] = ()) -> bytes:
    """An 8-bit gray PNG (colour type 0) with ``extra`` chunks before its image data."""
    h, w = gray.shape
    raw = b"".join(b"\0" + row.tobytes() for row in gray)
    return (pngchunks.SIGNATURE + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + b"".join(chunk(k, p) for k, p in extra) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def test_a_bigtiff_of_two_pages_is_refused_and_one_of_one_page_reads_with_its_size(tmp_path):
    a, b = pixels(seed=1), pixels(seed=2)
    two, one = tmp_path / "two.tif", tmp_path / "one.tif"
    two.write_bytes(bigtiff([a, b]))
    one.write_bytes(bigtiff([a]))
    with pytest.raises(ImageFileError, match=r"two.tif: a multi-page TIFF of 2 pages: .*only the first"):
        read_image_data(two)
    assert declared_size(one.read_bytes()) == (30, 20)
    with pytest.raises(ImageFileError, match=r"declares 30x20 pixels .* more than the limit"):
        read_image_data(one, max_pixels=500)
    np.testing.assert_array_equal(read_image_data(one).pixels, a)  # the samples are stored R, G, B


def test_an_os2_bitmap_keeps_its_colours_and_size(tmp_path, cpu_engine):
    bgr = pixels(seed=3)
    path = tmp_path / "in" / "os2.bmp"
    path.parent.mkdir()
    path.write_bytes(os2_bmp(bgr))
    assert declared_size(path.read_bytes()) == (30, 20)
    np.testing.assert_array_equal(read_image_data(path, order="bgr").pixels, bgr)
    result = run_batch(plan_batch(path.parent, tmp_path / "out"), cpu_engine)
    assert [o.status for o in result.outcomes] == ["done"]
    out = cv2.imread(str(tmp_path / "out" / "os2.bmp"), cv2.IMREAD_UNCHANGED)
    assert out.shape == (40, 60, 3) and not np.array_equal(out[..., 0], out[..., 1])  # colour, not gray


def test_a_gray_pngs_transparent_level_becomes_its_alpha(tmp_path, cpu_engine):
    gray = np.random.default_rng(4).integers(1, 256, (16, 20), dtype=np.uint8)
    gray[3:6, 4:9] = 0  # the level tRNS makes transparent
    src = tmp_path / "in"
    src.mkdir()
    (src / "keyed.png").write_bytes(gray_png(gray, ((b"tRNS", struct.pack(">H", 0)),)))
    data = read_image_data(src / "keyed.png")
    assert data.gray_alpha and data.pixels.shape == (16, 20, 4)
    np.testing.assert_array_equal(data.pixels[..., 3], np.where(gray == 0, 0, 255))
    result = run_batch(plan_batch(src, tmp_path / "out"), cpu_engine)
    assert [o.status for o in result.outcomes] == ["done"]
    written = (tmp_path / "out" / "keyed.png").read_bytes()
    assert written[25] == 4  # gray+alpha
    out = cv2.imread(str(tmp_path / "out" / "keyed.png"), cv2.IMREAD_UNCHANGED)
    assert out.shape == (32, 40, 4) and (out[8:10, 10:16, 3] < 128).all() and (out[20:, :, 3] == 255).all()


def test_a_gray_png_without_trns_stays_gray(tmp_path):
    path = tmp_path / "g.png"
    path.write_bytes(gray_png(np.full((4, 4), 7, np.uint8)))
    data = read_image_data(path)
    assert data.pixels.shape == (4, 4) and not data.gray_alpha


COLOUR = ((b"gAMA", struct.pack(">I", 100000)), (b"cHRM", struct.pack(">8I", *range(31270, 31278))))


def test_a_pngs_colour_chunks_are_written_into_a_png_and_said_lost_in_a_jpeg(tmp_path, cpu_engine):
    src = tmp_path / "in"
    src.mkdir()
    gray = np.random.default_rng(5).integers(0, 256, (12, 14), dtype=np.uint8)
    (src / "g.png").write_bytes(gray_png(gray, COLOUR + ((b"tEXt", b"Comment\0x"),)))
    assert read_image_data(src / "g.png").png_colour == COLOUR
    result = run_batch(plan_batch(src, tmp_path / "png"), cpu_engine)
    assert [o.notes for o in result.outcomes] == [()]
    kept = [c for c in pngchunks.chunks_before_image((tmp_path / "png" / "g.png").read_bytes())
            if c[0] in pngchunks.COLOUR_CHUNKS]
    assert tuple(kept) == COLOUR
    assert cv2.imread(str(tmp_path / "png" / "g.png"), cv2.IMREAD_UNCHANGED).shape == (24, 28)  # still a PNG
    result = run_batch(plan_batch(src, tmp_path / "jpg", fmt="jpg"), cpu_engine)
    assert result.outcomes[0].status == "done"
    assert any("PNG colour chunks (gAMA, cHRM) are not kept: .jpg files cannot hold them" in n
               for n in result.outcomes[0].notes)


def test_a_large_png_in_strips_keeps_its_colour_chunks(tmp_path):
    image = np.random.default_rng(6).integers(0, 256, (1200, 1100, 3), dtype=np.uint8)
    path = tmp_path / "big.png"
    written = write_image_atomic(path, image, png_colour=COLOUR)
    data = path.read_bytes()
    assert written.size == len(data) and written.notes == ()
    assert tuple(c for c in pngchunks.chunks_before_image(data) if c[0] in pngchunks.COLOUR_CHUNKS) == COLOUR
    np.testing.assert_array_equal(cv2.imread(str(path))[..., ::-1], image)


def test_an_apng_whose_default_image_is_not_a_frame_is_refused(tmp_path):
    plain = gray_png(np.full((4, 4), 9, np.uint8))
    ihdr_end = 8 + 25
    actl = chunk(b"acTL", struct.pack(">II", 1, 0))
    fctl = chunk(b"fcTL", struct.pack(">IIIIIHHBB", 0, 4, 4, 0, 0, 1, 10, 0, 0))
    fdat = chunk(b"fdAT", struct.pack(">I", 1) + zlib.compress(b"".join(b"\0" + bytes([200] * 4) for _ in range(4))))
    idat_and_end = plain[ihdr_end:]
    hidden = plain[:ihdr_end] + actl + idat_and_end[:-12] + fctl + fdat + idat_and_end[-12:]
    path = tmp_path / "hidden.png"
    path.write_bytes(hidden)
    with pytest.raises(ImageFileError, match=r"an animated PNG \(APNG\) of 2 frames"):
        read_image_data(path)
    shown = plain[:ihdr_end] + actl + fctl + idat_and_end  # one frame, which is the default image
    path.write_bytes(shown)
    assert read_image_data(path).pixels.shape == (4, 4)


def test_a_16_bit_image_written_to_an_8_bit_format_says_so(tmp_path, cpu_engine):
    src = tmp_path / "in"
    src.mkdir()
    deep = np.random.default_rng(7).integers(0, 65536, (10, 12, 3), dtype=np.uint16)
    assert cv2.imwrite(str(src / "deep.png"), deep)
    (src / "named.bmp").write_bytes((src / "deep.png").read_bytes())  # a 16-bit PNG named .bmp
    result = run_batch(plan_batch(src, tmp_path / "out"), cpu_engine)
    notes = {o.job.src.name: o.notes for o in result.outcomes}
    assert [o.status for o in result.outcomes] == ["done", "done"]
    assert notes["deep.png"] == ()
    assert notes["named.bmp"] == ("its 16-bit samples are rounded to 8 bits: .bmp files hold 8",)
    assert cv2.imread(str(tmp_path / "out" / "named.bmp"), cv2.IMREAD_UNCHANGED).dtype == np.uint8


def test_a_manifest_of_a_newer_srgpu_is_not_rewritten_and_a_misshapen_one_is_ignored(tmp_path, cpu_engine):
    import json

    from srgpu.manifest import MANIFEST_NAME, ManifestError

    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    cv2.imwrite(str(src / "a.png"), pixels())
    run_batch(plan_batch(src, out), cpu_engine)
    manifest = out / MANIFEST_NAME
    data = json.loads(manifest.read_text())
    for shape in ({"outputs": "x"}, {"pending": 5}, {"settings": [1]}):
        manifest.write_text(json.dumps({**data, **shape}))
        result = run_batch(plan_batch(src, out), cpu_engine)  # no traceback: the record is unreadable
        assert [o.status for o in result.outcomes] in (["skipped"], ["done"])
    newer = {**data, "version": data["version"] + 1}
    manifest.write_text(json.dumps(newer))
    with pytest.raises(ManifestError, match=r"written by a newer srgpu \(manifest version 2"):
        run_batch(plan_batch(src, out), cpu_engine)
    assert json.loads(manifest.read_text()) == newer


def test_a_mat_model_whose_arrays_are_not_numbers_is_one_line(tmp_path):
    from scipy.io import savemat

    from srgpu.model import ModelError, load_mat

    path = tmp_path / "str_x2.mat"
    savemat(str(path), {n: "hello" for n in ("weights_conv1", "biases_conv1", "weights_conv2", "biases_conv2",
                                              "weights_conv3", "biases_conv3")})
    with pytest.raises(ModelError, match=r"str_x2.mat: not an SRCNN model, its arrays are not numbers"):
        load_mat(path)
