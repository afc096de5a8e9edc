"""The two pieces of image metadata that change how an image looks, read and written where OpenCV
does not: the EXIF orientation and a TIFF file's ICC colour profile.

OpenCV (4.13 and later) hands srgpu the EXIF block and the ICC profile of PNG, JPEG and WebP
files (``cv2.imdecodeWithMetadata``) and writes an ICC profile into them
(``cv2.imencodeWithMetadata``), but it neither tells the orientation in the EXIF block (it
applies it only when decoding to 8-bit colour, which would lose alpha and 16 bits) nor reads or
writes a TIFF's ICC profile. Both live in TIFF structures (an EXIF block is one: a header and an
IFD of 12-byte entries), read here with bounds checks: anything malformed reads as absent.
"""

from __future__ import annotations

import struct

import numpy as np

ORIENTATION_TAG = 0x0112
ICC_TAG = 34675  # InterColorProfile
_TYPE_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8}


def _header(data: bytes) -> tuple[str, int] | None:
    """(byte order, offset of the first IFD) of a classic TIFF structure, or None."""
    if data[:4] == b"II*\x00":
        order = "<"
    elif data[:4] == b"MM\x00*":
        order = ">"
    else:
        return None
    return order, struct.unpack(order + "I", data[4:8])[0]


def _entries(data: bytes) -> tuple[str, int, list[bytes]] | None:
    """(byte order, offset of the first IFD, its 12-byte entries), or None where malformed."""
    head = _header(data)
    if head is None:
        return None
    order, offset = head
    if offset < 8 or offset + 2 > len(data):
        return None
    count = struct.unpack(order + "H", data[offset:offset + 2])[0]
    end = offset + 2 + 12 * count
    if end + 4 > len(data):
        return None
    return order, offset, [data[offset + 2 + 12 * i:offset + 14 + 12 * i] for i in range(count)]


def tiff_tag(data: bytes, tag: int) -> tuple[int, bytes] | None:
    """(type, value bytes) of ``tag`` in the first IFD of a TIFF structure, or None."""
    parsed = _entries(data)
    if parsed is None:
        return None
    order, _, entries = parsed
    for entry in entries:
        found, kind, count = struct.unpack(order + "HHI", entry[:8])
        if found != tag:
            continue
        size = _TYPE_SIZES.get(kind, 0) * count
        if size <= 4:
            return kind, entry[8:8 + size]
        start = struct.unpack(order + "I", entry[8:12])[0]
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
    if parsed is None:
        return None
    order, offset, entries = parsed
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
