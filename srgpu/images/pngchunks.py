"""The PNG chunks that change how an image looks and that OpenCV neither reports nor writes: a gray
image's tRNS (one gray level transparent), and the colour chunks gAMA, cHRM, sRGB and cICP (the
ICC profile, iCCP, OpenCV carries itself). Read with bounds checks: anything malformed reads as
absent; written by inserting whole chunks after IHDR, where the PNG specification allows them.
"""

from __future__ import annotations

import struct
import zlib
from typing import Iterator

SIGNATURE = b"\x89PNG\r\n\x1a\n"
# gamma, primaries, the sRGB intent, coding-independent code points: how the samples are shown
COLOUR_CHUNKS = (b"gAMA", b"cHRM", b"sRGB", b"cICP")
Chunk = tuple[bytes, bytes]  # (type, payload)
_IHDR_END = len(SIGNATURE) + 8 + 13 + 4  # signature, IHDR's length and type, its 13 bytes, its CRC


def chunks_before_image(data: bytes) -> Iterator[Chunk]:
    """The chunks of a PNG file before its image data (IDAT), in order; none where it is not one."""
    if data[:8] != SIGNATURE:
        return
    at = 8
    while at + 12 <= len(data):
        size, kind = struct.unpack(">I", data[at:at + 4])[0], data[at + 4:at + 8]
        if kind in (b"IDAT", b"IEND") or at + 12 + size > len(data):
            return
        yield kind, data[at + 8:at + 8 + size]
        at += 12 + size


def gray_transparent_level(data: bytes) -> int | None:
    """The gray level a gray PNG's tRNS chunk makes transparent (in the file's bit depth), or None."""
    for kind, payload in chunks_before_image(data):
        if kind == b"tRNS":
            return struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
    return None


def colour_chunks(data: bytes) -> tuple[Chunk, ...]:
    """The colour chunks of a PNG file (COLOUR_CHUNKS), as they are in it."""
    return tuple((k, p) for k, p in chunks_before_image(data) if k in COLOUR_CHUNKS)


def chunk_bytes(chunks: tuple[Chunk, ...]) -> bytes:
    """``chunks`` as they are stored: length, type, payload, CRC of type and payload."""
    return b"".join(struct.pack(">I", len(p)) + k + p + struct.pack(">I", zlib.crc32(k + p)) for k, p in chunks)


def insert_after_header(first: bytes | memoryview, chunks: tuple[Chunk, ...]) -> tuple[bytes | memoryview, ...] | None:
    """The pieces of a PNG file whose first piece is ``first``, with ``chunks`` after its IHDR; None
    where ``first`` does not begin with a whole signature and IHDR."""
    view = memoryview(first).cast("B")
    if len(view) < _IHDR_END or bytes(view[:8]) != SIGNATURE or bytes(view[12:16]) != b"IHDR":
        return None
    return view[:_IHDR_END], chunk_bytes(chunks), view[_IHDR_END:]
