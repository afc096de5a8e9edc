"""The two pieces of image metadata that change how an image looks, read and written where OpenCV
does not: the EXIF orientation and a TIFF file's ICC colour profile; and what a file declares
before it is decoded (its size, its frames or pages).

OpenCV (4.13 and later) hands srgpu the EXIF block and the ICC profile of PNG, JPEG and WebP
files (``cv2.imdecodeWithMetadata``) and writes an ICC profile into them
(``cv2.imencodeWithMetadata``), but it neither tells the orientation in the EXIF block (it
applies it only when decoding to 8-bit colour, which would lose alpha and 16 bits) nor reads or
writes a TIFF's ICC profile. Both live in TIFF structures (an EXIF block is one: a header and an
IFD of 12-byte entries), read here with bounds checks: anything malformed reads as absent.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

ORIENTATION_TAG = 0x0112
ICC_TAG = 34675  # InterColorProfile
_TYPE_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 16: 8, 17: 8, 18: 8}


@dataclass(frozen=True)
class _Layout:
    """How a TIFF structure's numbers are laid out: classic TIFF (2-byte entry counts, 12-byte
    entries, 4-byte offsets) or BigTIFF (8-byte counts, 20-byte entries, 8-byte offsets)."""

    order: str  # "<" or ">"
    big: bool = False

    @property
    def count(self) -> str:
        return "Q" if self.big else "H"

    @property
    def offset(self) -> str:
        return "Q" if self.big else "I"

    @property
    def count_size(self) -> int:
        return 8 if self.big else 2

    @property
    def entry_size(self) -> int:
        return 20 if self.big else 12

    @property
    def offset_size(self) -> int:
        return 8 if self.big else 4


def _header(data: bytes) -> tuple[_Layout, int] | None:
    """(layout, offset of the first IFD) of a TIFF structure (classic or BigTIFF), or None."""
    if data[:4] in (b"II*\x00", b"MM\x00*"):
        layout = _Layout("<" if data[:2] == b"II" else ">")
        return layout, struct.unpack(layout.order + "I", data[4:8])[0]
    if data[:4] in (b"II+\x00", b"MM\x00+") and len(data) >= 16:
        layout = _Layout("<" if data[:2] == b"II" else ">", big=True)
        if struct.unpack(layout.order + "HH", data[4:8]) != (8, 0):  # offset size 8, then zero
            return None
        return layout, struct.unpack(layout.order + "Q", data[8:16])[0]
    return None


def is_tiff(data: bytes | memoryview) -> bool:
    """Whether ``data`` starts as a TIFF file (classic or BigTIFF)."""
    return bytes(data[:4]) in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")


def _entries(data: bytes) -> tuple[_Layout, int, list[bytes]] | None:
    """(layout, offset of the first IFD, its entries), or None where malformed."""
    head = _header(data)
    if head is None:
        return None
    layout, offset = head
    if offset < 8 or offset + layout.count_size > len(data):
        return None
    count = struct.unpack(layout.order + layout.count, data[offset:offset + layout.count_size])[0]
    first = offset + layout.count_size
    end = first + layout.entry_size * count
    if end + layout.offset_size > len(data):
        return None
    size = layout.entry_size
    return layout, offset, [data[first + size * i:first + size * (i + 1)] for i in range(count)]


def tiff_tag(data: bytes, tag: int) -> tuple[int, bytes] | None:
    """(type, value bytes) of ``tag`` in the first IFD of a TIFF structure, or None."""
    parsed = _entries(data)
    if parsed is None:
        return None
    layout, _, entries = parsed
    inline = layout.offset_size  # values this small are stored in the entry itself
    for entry in entries:
        found, kind = struct.unpack(layout.order + "HH", entry[:4])
        if found != tag:
            continue
        count = struct.unpack(layout.order + layout.offset, entry[4:4 + inline])[0]
        size = _TYPE_SIZES.get(kind, 0) * count
        value = entry[4 + inline:4 + 2 * inline]
        if size <= inline:
            return kind, value[:size]
        start = struct.unpack(layout.order + layout.offset, value)[0]
        return (kind, data[start:start + size]) if start + size <= len(data) else None
    return None


def exif_orientation(exif: bytes) -> int:
    """The orientation (1-8) an EXIF block gives, 1 where it gives none or is malformed."""
    if exif.startswith(b"Exif\x00\x00"):  # the APP1 marker's prefix, which some writers keep
        exif = exif[6:]
    found = tiff_tag(exif, ORIENTATION_TAG)
    if found is None or found[0] not in (3, 4) or not found[1]:
        return 1
    order = "<" if exif[:2] == b"II" else ">"
    value = struct.unpack(order + ("H" if found[0] == 3 else "I"), found[1])[0]
    return value if 1 <= value <= 8 else 1


def upright(image: np.ndarray, orientation: int) -> np.ndarray:
    """The pixels as a viewer shows an image with this EXIF orientation (rows, columns; channels kept)."""
    turned = {
        1: lambda a: a,
        2: lambda a: a[:, ::-1],  # mirrored left-right
        3: lambda a: a[::-1, ::-1],  # turned 180 degrees
        4: lambda a: a[::-1],  # mirrored top-bottom
        5: lambda a: a.swapaxes(0, 1),  # transposed
        6: lambda a: np.rot90(a, -1),  # shown turned 90 degrees clockwise
        7: lambda a: a.swapaxes(0, 1)[::-1, ::-1],  # transverse
        8: lambda a: np.rot90(a, 1),  # shown turned 90 degrees counter-clockwise
    }[orientation if 1 <= orientation <= 8 else 1](image)
    return np.ascontiguousarray(turned)


def tiff_icc(data: bytes) -> bytes | None:
    """The ICC profile of a TIFF file's first image, or None."""
    found = tiff_tag(data, ICC_TAG)
    return found[1] if found is not None and found[0] in (1, 7) and found[1] else None


def add_tiff_icc(data: bytes, icc: bytes) -> bytes | None:
    """The TIFF file ``data`` with ``icc`` as its first image's colour profile, or None where it is
    not a classic TIFF srgpu can extend. Nothing is moved: the profile and a copy of the first IFD
    with the profile's entry added go at the end, and the header points to the new IFD."""
    parsed = _entries(data)
    if parsed is None or parsed[0].big:
        return None
    layout, offset, entries = parsed
    order = layout.order
    count = len(entries)
    next_ifd = data[offset + 2 + 12 * count:offset + 6 + 12 * count]  # further pages stay linked
    out = bytearray(data)
    if len(out) % 2:
        out += b"\x00"  # TIFF offsets are word-aligned
    icc_at = len(out)
    out += icc
    if len(out) % 2:
        out += b"\x00"
    new = struct.pack(order + "HHII", ICC_TAG, 7, len(icc), icc_at)
    kept = [e for e in entries if struct.unpack(order + "H", e[:2])[0] != ICC_TAG]
    table = sorted(kept + [new], key=lambda e: struct.unpack(order + "H", e[:2])[0])
    ifd_at = len(out)
    out += struct.pack(order + "H", len(table)) + b"".join(table) + next_ifd
    out[4:8] = struct.pack(order + "I", ifd_at)
    return bytes(out)


def icc_colour_space(icc: bytes) -> str:
    """The data colour space an ICC profile describes ('RGB', 'GRAY', 'CMYK', ...), from its header."""
    return icc[16:20].decode("ascii", "replace").strip()


def icc_well_formed(icc: bytes) -> bool:
    """Whether an ICC profile's header holds together: its declared size, the 'acsp' signature, a
    tag table that fits (what libpng checks before it embeds one)."""
    if len(icc) < 132 or icc[36:40] != b"acsp" or struct.unpack(">I", icc[:4])[0] != len(icc):
        return False
    return 132 + 12 * struct.unpack(">I", icc[128:132])[0] <= len(icc)


# ---------------------------------------------------------------- what a file declares, before decoding

WIDTH_TAG, HEIGHT_TAG = 256, 257
_JPEG_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
MAX_PAGES = 10_000  # IFDs followed at most (a loop of IFD offsets is malformed, not endless)


def declared_size(data: bytes | memoryview) -> tuple[int, int] | None:
    """(width, height) a PNG, JPEG, WebP, BMP or TIFF file's header declares, read without
    decoding (a decompression bomb declares a size it would take gigabytes to decode), or None
    where the format is another or the header is malformed (the decoder then says what it thinks)."""
    try:
        if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
            w, h = struct.unpack(">II", data[16:24])
            return w, h
        if data[:2] == b"BM" and len(data) >= 26:
            if bmp_core_header(data):  # OS/2's BITMAPCOREHEADER: 16-bit width and height
                return struct.unpack("<HH", data[18:22])
            w, h = struct.unpack("<ii", data[18:26])
            return abs(w), abs(h)  # a negative height: rows stored top-down
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return _webp_size(data)
        if data[:2] == b"\xff\xd8":
            return _jpeg_size(data)
        if _header(bytes(data[:16])) is not None:
            return _tiff_size(data)
    except struct.error:
        return None
    return None


def _webp_size(data: bytes | memoryview) -> tuple[int, int] | None:
    kind = bytes(data[12:16])
    if kind == b"VP8X":
        w = int.from_bytes(bytes(data[24:27]), "little") + 1
        h = int.from_bytes(bytes(data[27:30]), "little") + 1
        return w, h
    if kind == b"VP8L":
        bits = struct.unpack("<I", data[21:25])[0]
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if kind == b"VP8 ":
        w, h = struct.unpack("<HH", data[26:30])
        return w & 0x3FFF, h & 0x3FFF
    return None


def _jpeg_size(data: bytes | memoryview) -> tuple[int, int] | None:
    at = 2
    while at + 9 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in _JPEG_SOF:
            h, w = struct.unpack(">HH", data[at + 5:at + 9])
            return w, h
        if marker == 0xD8 or 0xD0 <= marker <= 0xD7 or marker == 0x01:
            at += 2  # markers without a length
            continue
        if marker in (0xD9, 0xDA):  # end of image, start of scan before any frame header
            return None
        at += 2 + struct.unpack(">H", data[at + 2:at + 4])[0]
    return None


def bmp_core_header(data: bytes | memoryview) -> bool:
    """Whether a BMP file's header is OS/2's BITMAPCOREHEADER (12 bytes) rather than Windows' own."""
    return bytes(data[:2]) == b"BM" and len(data) >= 18 and struct.unpack("<I", data[14:18])[0] == 12


def _tiff_number(data: bytes, tag: int) -> int | None:
    found = tiff_tag(data, tag)
    if found is None or not found[1]:
        return None
    kind, value = found
    order = "<" if data[:2] == b"II" else ">"
    formats = {3: "H", 4: "I", 16: "Q"}
    if kind in formats and len(value) >= struct.calcsize(formats[kind]):
        return struct.unpack(order + formats[kind], value[:struct.calcsize(formats[kind])])[0]
    return None


def _tiff_size(data: bytes | memoryview) -> tuple[int, int] | None:
    data = bytes(data)
    w, h = _tiff_number(data, WIDTH_TAG), _tiff_number(data, HEIGHT_TAG)
    return (w, h) if w is not None and h is not None else None


def frame_count(data: bytes | memoryview) -> int:
    """How many frames or pages a file holds: an animated WebP's or PNG's (APNG) frames, a TIFF's
    pages; 1 for a still image (or a header srgpu cannot follow: the decoder reads its first)."""
    try:
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return _webp_frames(data)
        if data[:8] == b"\x89PNG\r\n\x1a\n":
            return _png_frames(data)
        if _header(bytes(data[:16])) is not None:
            return _tiff_pages(data)
    except struct.error:
        return 1
    return 1


def _webp_frames(data: bytes | memoryview) -> int:
    if bytes(data[12:16]) != b"VP8X" or not data[20] & 0x02:  # the animation flag
        return 1
    frames, at = 0, 12
    while at + 8 <= len(data):
        kind, size = bytes(data[at:at + 4]), struct.unpack("<I", data[at + 4:at + 8])[0]
        frames += kind == b"ANMF"
        at += 8 + size + (size & 1)
    return max(frames, 1)


def _png_frames(data: bytes | memoryview) -> int:
    """An APNG's images: acTL's frame count, plus one where the default image (IDAT) is not the
    animation's first frame (no fcTL before it), which viewers then never show but decoders read."""
    at, frames = 8, None
    while at + 8 <= len(data):
        size, kind = struct.unpack(">I", data[at:at + 4])[0], bytes(data[at + 4:at + 8])
        if kind == b"acTL":  # APNG's animation control: its frame count first
            frames = struct.unpack(">I", data[at + 8:at + 12])[0]
        elif kind == b"fcTL" and frames is not None:  # the default image is the animation's first frame
            return max(1, frames)
        elif kind in (b"IDAT", b"IEND"):  # acTL comes before the image data
            return 1 if frames is None else frames + 1
        at += 12 + size
    return max(1, frames or 1)


def _tiff_pages(data: bytes | memoryview) -> int:
    data = bytes(data)
    parsed = _entries(data)
    if parsed is None:
        return 1
    layout, offset, _ = parsed
    pages, seen = 0, set()
    while offset and offset not in seen and pages < MAX_PAGES and offset + layout.count_size <= len(data):
        seen.add(offset)
        pages += 1
        count = struct.unpack(layout.order + layout.count, data[offset:offset + layout.count_size])[0]
        end = offset + layout.count_size + layout.entry_size * count
        if end + layout.offset_size > len(data):
            break
        offset = struct.unpack(layout.order + layout.offset, data[end:end + layout.offset_size])[0]
    return max(pages, 1)
