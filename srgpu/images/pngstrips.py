"""A large PNG encoded on several threads, as OpenCV's default setting encodes one.

OpenCV (libpng) compresses a file on one thread: a 12000x8000 output takes seconds whatever the GPU
does. A PNG's image data is one zlib stream of filtered rows, and deflate data can be cut where a
compressor flushes to a byte boundary (Z_SYNC_FLUSH), so strips of rows are filtered and
compressed at once, each on a thread (numpy and zlib release the GIL), each strip its own IDAT
chunk with its own CRC; the stream's one zlib header goes first and its Adler-32, combined from
the strips' own, last. The settings are OpenCV's default ones (zlib level 1, run-length strategy,
the Sub filter on every row), so the file is about as large as OpenCV's; the samples are the same
(tests/images/test_pngstrips.py decodes them back with OpenCV, and zlib checks the whole stream).
Explicit compression levels keep OpenCV's encoder (libpng's adaptive filters).
"""

from __future__ import annotations

import struct
import zlib
from concurrent.futures import Future

import cv2
import numpy as np

from ..cpus import cpu_cores, strip_pool
from .jpegstrips import MIN_STRIP_PIXELS

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_ADLER_BASE = 65521
_COLOUR_TYPE = {1: 0, 2: 4, 3: 2, 4: 6}  # channels -> gray, gray+alpha, RGB, RGBA
SCRATCH_BYTES = 8 * 2**20  # rows filtered at once per strip (each core holds a few such blocks)
SUB = 1  # the row filter: each byte less the same byte of the pixel to its left


def strip_rows(height: int, width: int, threads: int, strip_pixels: int = MIN_STRIP_PIXELS) -> list[tuple[int, int]]:
    """Rows [r0, r1) of each strip: up to ``threads`` strips of at least ``strip_pixels``."""
    n = max(1, min(threads, height, (height * width) // max(1, strip_pixels)))
    per = -(-height // n)
    return [(r, min(height, r + per)) for r in range(0, height, per)]


def splits(image: np.ndarray, threads: int | None = None) -> bool:
    """Whether encode_png would use several strips (else OpenCV's one call is as fast)."""
    return len(strip_rows(image.shape[0], image.shape[1], threads or cpu_cores())) > 1


def adler32_combine(adler1: int, adler2: int, len2: int) -> int:
    """The Adler-32 of A + B from A's, B's and B's length (zlib's adler32_combine)."""
    rem = len2 % _ADLER_BASE
    sum1 = adler1 & 0xFFFF
    sum2 = (rem * sum1) % _ADLER_BASE
    sum1 += (adler2 & 0xFFFF) + _ADLER_BASE - 1
    sum2 += (adler1 >> 16) + (adler2 >> 16) + _ADLER_BASE - rem
    return (sum1 % _ADLER_BASE) | ((sum2 % _ADLER_BASE) << 16)


def filtered_rows(rows: np.ndarray) -> np.ndarray:
    """PNG scanlines of ``rows`` (uint8 RGB(A)/gray, or uint16 as stored: big-endian): a filter-type
    byte, then each byte less the one a pixel to its left (Sub; the first pixel's bytes as they are)."""
    h = rows.shape[0]
    data = rows.reshape(h, -1).view(np.uint8) if rows.dtype == np.uint8 else \
        rows.astype(">u2").reshape(h, -1).view(np.uint8)
    bpp = (rows.shape[2] if rows.ndim == 3 else 1) * rows.dtype.itemsize
    out = np.empty((h, data.shape[1] + 1), np.uint8)
    out[:, 0] = SUB
    out[:, 1:1 + bpp] = data[:, :bpp]
    np.subtract(data[:, bpp:], data[:, :-bpp], out=out[:, 1 + bpp:])  # modulo 256, as PNG's arithmetic
    return out


def _chunk(kind: bytes, data: bytes) -> list[bytes]:
    """A chunk's pieces: length and type, data (not copied), CRC."""
    return [struct.pack(">I", len(data)) + kind, data, struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))]


def _strip(rows: np.ndarray, bgr: bool, last: bool, level: int | None = None) -> tuple[list[bytes], int, int]:
    """(the strip's IDAT chunk, its filtered bytes' Adler-32, their count), on a pool thread;
    ``bgr``: the colour channels are in OpenCV's order (swapped here, into PNG's). Filtered a block
    of rows at a time (the Sub filter looks along a row only), so that a strip's scratch memory is
    a block's, not the strip's: every core at once on a huge 16-bit output stays bounded."""
    compressor = (zlib.compressobj(1, zlib.DEFLATED, -15, 9, zlib.Z_RLE) if level is None
                  else zlib.compressobj(level, zlib.DEFLATED, -15, 9))
    deflated, adler, size = [], 1, 0
    step = max(1, SCRATCH_BYTES // max(1, rows[:1].nbytes))
    for r0 in range(0, rows.shape[0], step):
        block = rows[r0:r0 + step]
        if bgr and block.ndim == 3 and block.shape[2] in (3, 4):
            block = cv2.cvtColor(block, cv2.COLOR_BGRA2RGBA if block.shape[2] == 4 else cv2.COLOR_BGR2RGB)
        raw = filtered_rows(block).reshape(-1)
        deflated.append(compressor.compress(raw))
        adler, size = zlib.adler32(raw, adler), size + raw.size
    deflated.append(compressor.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH))
    return _chunk(b"IDAT", b"".join(deflated)), adler, size


def encode_png(image: np.ndarray, icc: bytes | None = None, bgr: bool = False, threads: int | None = None,
               strip_pixels: int = MIN_STRIP_PIXELS, level: int | None = None) -> list[bytes]:
    """The PNG file of ``image`` (uint8/uint16, gray, gray+alpha, RGB or RGBA; ``bgr``: BGR(A),
    OpenCV's order), with ``icc`` as its iCCP chunk when given, in strips of at least
    ``strip_pixels`` on up to ``threads`` threads (default: every core), as the pieces of the file;
    ``level``: a zlib level (libpng's default strategy) instead of OpenCV's fast default setting.
    (OpenCV cannot write gray+alpha at all: srgpu writes those files here, whatever their size.)"""
    if image.dtype not in (np.uint8, np.uint16) or (image.ndim == 3 and image.shape[2] not in (2, 3, 4)):
        raise ValueError(f"no PNG layout for a {image.dtype} image of shape {image.shape}")
    h, w = image.shape[:2]
    channels = image.shape[2] if image.ndim == 3 else 1
    strips = strip_rows(h, w, threads or cpu_cores(), strip_pixels)
    futures: list[Future] = [strip_pool().submit(_strip, image[r0:r1], bgr, i == len(strips) - 1, level)
                             for i, (r0, r1) in enumerate(strips)]
    pieces = [_SIGNATURE, *_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8 * image.dtype.itemsize,
                                                      _COLOUR_TYPE[channels], 0, 0, 0))]
    if icc:
        pieces += _chunk(b"iCCP", b"ICC Profile\x00\x00" + zlib.compress(icc))
    pieces += _chunk(b"IDAT", b"\x78\x01")  # the zlib header: deflate, 32 KiB window, fastest level
    adler = 1  # of no bytes
    for future in futures:
        chunk, part, size = future.result()
        pieces += chunk
        adler = adler32_combine(adler, part, size)
    pieces += _chunk(b"IDAT", struct.pack(">I", adler))
    return pieces + _chunk(b"IEND", b"")
