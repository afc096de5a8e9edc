"""A large JPEG encoded on several threads, byte for byte the file one encoder call makes.

OpenCV encodes a file on one thread: a 12000x8000 output at quality 95 takes about 0.3 s, longer
than the GPU's whole share of it. With a restart marker after every MCU row (the DC predictions
start again there) the rows of MCUs are independent, so strips of whole MCU rows are encoded at
once, each by its own OpenCV call on a thread (OpenCV releases the GIL), and their entropy-coded
data joined under the first strip's headers, the restart markers renumbered, the frame's height set
to the whole image's. The result is the file ``cv2.imencode`` makes of the whole image with the same
parameters (tests/images/test_jpegstrips.py checks the bytes); the encoder's choices (sampling, tables)
are read back from every strip's headers and anything unexpected falls back to one call.
"""

from __future__ import annotations

import cv2
import numpy as np

from ..cpus import cpu_cores, strip_pool

MIN_STRIP_PIXELS = 2**20  # below about a megapixel a strip costs more to hand out than to encode
_SOI, _EOI, _SOS, _DRI = 0xD8, 0xD9, 0xDA, 0xDD
_SOF = frozenset({0xC0, 0xC1})  # baseline and extended sequential Huffman: what libjpeg writes here
_STANDALONE = frozenset(range(0xD0, 0xDA)) | {0x01}

def mcu_size(image: np.ndarray) -> tuple[int, int]:
    """(rows, columns) of an MCU as ``jpeg_params`` makes the encoder use: 16x16 for colour (4:2:0),
    8x8 for gray (one component: an MCU is one block)."""
    return (8, 8) if image.ndim == 2 else (16, 16)


def jpeg_params(image: np.ndarray, quality: int) -> list[int]:
    """OpenCV's parameters for ``image`` with a restart marker after every MCU row (4:2:0 stated
    outright for colour: the strips' cut depends on the MCU's height)."""
    mh, mw = mcu_size(image)
    params = [cv2.IMWRITE_JPEG_QUALITY, int(quality), cv2.IMWRITE_JPEG_RST_INTERVAL, -(-image.shape[1] // mw)]
    if image.ndim == 3:
        params += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420]
    return params


def strip_rows(image: np.ndarray, threads: int, strip_pixels: int = MIN_STRIP_PIXELS) -> list[tuple[int, int]]:
    """The strips ``image`` is encoded in: (first row, end row) each, whole MCU rows but the last,
    of at least ``strip_pixels`` pixels; one strip where splitting would not pay."""
    h, w = image.shape[:2]
    mh = mcu_size(image)[0]
    mcu_rows = -(-h // mh)
    n = max(1, min(threads, mcu_rows, (h * w) // max(1, strip_pixels)))
    per = -(-mcu_rows // n)
    return [(r * mh, min(h, (r + per) * mh)) for r in range(0, mcu_rows, per)]


def splits(image: np.ndarray, threads: int | None = None) -> bool:
    """Whether encode_jpeg would encode ``image`` in several strips (else a file as OpenCV's
    defaults make it, without restart markers, is as fast)."""
    return len(strip_rows(image, threads or cpu_cores())) > 1


def encode_jpeg(image: np.ndarray, quality: int, icc: bytes | None = None, threads: int | None = None,
                strip_pixels: int = MIN_STRIP_PIXELS) -> list[bytes | memoryview] | None:
    """The JPEG file of ``image`` (OpenCV's channel order, uint8 gray or BGR), with ``icc`` embedded
    when given, encoded in strips of at least ``strip_pixels`` on up to ``threads`` threads (default:
    every core), as the pieces to write one after another (no copy of a large file is made to join
    them); None where the encoder refuses the image (as cv2.imencode's failure)."""
    params = jpeg_params(image, quality)
    strips = strip_rows(image, threads or cpu_cores(), strip_pixels)
    if len(strips) > 1:
        mh = mcu_size(image)[0]
        encoded = list(strip_pool().map(lambda rows: _strip(image, rows, params, icc, mh), strips))
        joined = _join(encoded, image.shape[0]) if all(e is not None for e in encoded) else None
        if joined is not None:
            return joined
    whole = _encode(image, params, icc)  # one piece, or what the strips did not allow
    return None if whole is None else [whole.data]


def _encode(image: np.ndarray, params: list[int], icc: bytes | None) -> np.ndarray | None:
    """The encoded file as OpenCV returns it (a writable uint8 array, not copied), or None."""
    try:
        if icc:
            ok, buf = cv2.imencodeWithMetadata(".jpg", image, [cv2.IMAGE_METADATA_ICCP],
                                               [np.frombuffer(icc, np.uint8)], params)
        else:
            ok, buf = cv2.imencode(".jpg", image, params)
    except cv2.error:
        return None
    return buf.reshape(-1) if ok and buf is not None else None


def _segments(data: memoryview) -> tuple[list[tuple[int, int, int]], int] | None:
    """(marker, start, end) of every segment before the scan, and where the scan's data starts; None
    for a file not laid out as libjpeg writes one (SOI, segments, one scan, EOI)."""
    if bytes(data[:2]) != b"\xff\xd8" or bytes(data[-2:]) != b"\xff\xd9":
        return None
    out, i = [], 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker in _STANDALONE:
            return None  # not before the scan in libjpeg's files
        end = i + 2 + int.from_bytes(data[i + 2:i + 4], "big")
        out.append((marker, i, end))
        if marker == _SOS:
            return out, end
        i = end
    return None


class _Strip:
    """A strip's file: its headers (the frame's height not yet the image's), and its entropy-coded
    data with the restart markers numbered as in the whole image's file."""

    def __init__(self, buf: np.ndarray, segments: list[tuple[int, int, int]], scan0: int, first_mcu_row: int) -> None:
        self.buf, self.segments, self.scan0, self.first_mcu_row = buf, segments, scan0, first_mcu_row

    def header(self, height: int) -> bytes | None:
        """The headers with the frame's height set to ``height``; None unless they are a baseline
        frame with restart markers (what jpeg_params asks for)."""
        sof = [s for s in self.segments if s[0] in _SOF]
        if len(sof) != 1 or not any(s[0] == _DRI for s in self.segments):
            return None
        header = bytearray(self.buf[:self.scan0].tobytes())
        at = sof[0][1] + 5
        header[at:at + 2] = height.to_bytes(2, "big")
        return bytes(header)

    @property
    def scan(self) -> memoryview:
        return self.buf[self.scan0:-2].data


def _strip(image: np.ndarray, rows: tuple[int, int], params: list[int], icc: bytes | None,
           mcu_height: int) -> _Strip | None:
    """Encode rows [r0, r1) of ``image`` and number its restart markers as the whole file's (on a
    pool thread: the search runs beside the other strips' encoding)."""
    r0, r1 = rows
    buf = _encode(image[r0:r1], params, icc)
    found = _segments(buf.data) if buf is not None else None
    if found is None:
        return None
    segments, scan0 = found
    sof = [s for s in segments if s[0] in _SOF]
    if len(sof) != 1:
        return None
    comps = int(buf[sof[0][1] + 9])
    if max(int(buf[sof[0][1] + 11 + 3 * c]) & 15 for c in range(comps)) * 8 != mcu_height:
        return None  # another MCU height than the strips were cut by
    scan = buf[scan0:-2]
    # in entropy-coded data 0xFF is followed by a stuffed 0x00 or by a marker: 0xD0-0xD7 are the
    # restart markers, numbered modulo 8 from the strip's start; they become the whole file's
    ff = np.flatnonzero(scan[:-1] == 0xFF)
    at = ff[(scan[ff + 1] & 0xF8) == 0xD0]
    first = r0 // mcu_height
    if len(at) != -(-(r1 - r0) // mcu_height) - 1:
        return None
    scan[at + 1] = 0xD0 + (first + np.arange(len(at))) % 8
    return _Strip(buf, segments, scan0, first)


def _join(strips: list[_Strip], height: int) -> list[bytes | memoryview] | None:
    """The pieces of one file of the strips' files (module docstring), or None if they are not what
    was asked for (then the caller encodes in one piece)."""
    header = strips[0].header(height)
    if header is None:
        return None
    out: list[bytes | memoryview] = [header]
    for strip in strips:
        if strip.header(height) != header:  # other tables or settings than the first strip's
            return None
        if strip.first_mcu_row:
            out.append(bytes((0xFF, 0xD0 + (strip.first_mcu_row - 1) % 8)))  # the restart before its first row
        out.append(strip.scan)
    out.append(b"\xff\xd9")
    return out
