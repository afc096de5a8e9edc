"""A minimal Matroska writer for the pipe into the encoder: raw planar frames, each with its own
presentation time and duration.

Why a container at all: a bare rawvideo pipe has no timestamps, so ffmpeg would invent a
constant rate and variable-frame-rate sources would be re-timed. ffmpeg's Matroska demuxer reads
'V_UNCOMPRESSED' tracks whose ColourSpace is a raw fourcc (I420, Y42B, 'Y3' 11 10 = yuv420p10le,
...), from a pipe, with nanosecond timestamps (TimestampScale = 1) and per-frame BlockDuration.
The encoder is told the source's time base, so the nanosecond values round back to the exact
source ticks.
"""

from __future__ import annotations

import struct

from .formats import PixelLayout
from .hdr import HdrMetadata

UNKNOWN_SIZE = bytes.fromhex("01ffffffffffffff")  # a Segment whose end is the end of the stream


def _size(n: int) -> bytes:
    for length in range(1, 9):
        if n < (1 << (7 * length)) - 1:  # all-ones is reserved for 'unknown'
            return ((1 << (7 * length)) | n).to_bytes(length, "big")
    raise ValueError(f"element too large: {n}")


def _id(element_id: int) -> bytes:
    return element_id.to_bytes((element_id.bit_length() + 7) // 8, "big")


def element(element_id: int, data: bytes) -> bytes:
    return _id(element_id) + _size(len(data)) + data


def uint(element_id: int, value: int) -> bytes:
    return element(element_id, value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big"))


def string(element_id: int, value: str | bytes) -> bytes:
    return element(element_id, value.encode() if isinstance(value, str) else value)


def double(element_id: int, value: float) -> bytes:
    return element(element_id, struct.pack(">d", value))


def colour(hdr: HdrMetadata) -> bytes:
    """The Colour element with HDR static metadata (ffmpeg's demuxer turns it into stream side data,
    which reaches the encoder and the output muxer)."""
    body = b""
    if hdr.max_cll is not None:
        body += uint(0x55BC, hdr.max_cll) + uint(0x55BD, hdr.max_fall or 0)
    m = hdr.mastering
    if m is not None:
        mastering = b""
        if m.primaries is not None and m.white_point is not None:
            (rx, ry), (gx, gy), (bx, by) = m.primaries
            for eid, v in zip(range(0x55D1, 0x55D9), (rx, ry, gx, gy, bx, by, *m.white_point)):
                mastering += double(eid, v)
        if m.max_luminance is not None and m.min_luminance is not None:
            mastering += double(0x55D9, m.max_luminance) + double(0x55DA, m.min_luminance)
        if mastering:
            body += element(0x55D0, mastering)
    return element(0x55B0, body) if body else b""


def header(width: int, height: int, layout: PixelLayout, hdr: HdrMetadata | None = None) -> bytes:
    """EBML header, an open-ended Segment, Info (1 ns ticks) and one raw video track (with the
    source's HDR static metadata, if any)."""
    ebml = element(0x1A45DFA3, uint(0x4286, 1) + uint(0x42F7, 1) + uint(0x42F2, 4) + uint(0x42F3, 8)
                   + string(0x4282, "matroska") + uint(0x4287, 4) + uint(0x4285, 2))
    info = element(0x1549A966, uint(0x2AD7B1, 1) + string(0x4D80, "srgpu") + string(0x5741, "srgpu"))
    video = element(0xE0, uint(0xB0, width) + uint(0xBA, height) + string(0x2EB524, layout.fourcc)
                    + (colour(hdr) if hdr is not None else b""))
    track = element(0xAE, uint(0xD7, 1) + uint(0x73C5, 1) + uint(0x83, 1) + uint(0x9C, 0)
                    + string(0x86, "V_UNCOMPRESSED") + video)
    return ebml + _id(0x18538067) + UNKNOWN_SIZE + info + element(0x1654AE6B, track)


def frame_prefix(timestamp_ns: int, duration_ns: int | None, payload_size: int) -> tuple[bytes, bytes]:
    """(bytes before the frame's payload, bytes after it) for one frame in its own Cluster, so the
    payload (the planes) can be written straight from their buffers without a copy."""
    if timestamp_ns < 0:
        raise ValueError("Matroska cluster timestamps cannot be negative")
    block_head = bytes([0x81]) + struct.pack(">hB", 0, 0)  # track 1, +0 ticks (no ReferenceBlock: a keyframe)
    block_size = len(block_head) + payload_size
    after = uint(0x9B, duration_ns) if duration_ns and duration_ns > 0 else b""
    group_size = len(_id(0xA1)) + len(_size(block_size)) + block_size + len(after)
    cluster_body = uint(0xE7, timestamp_ns)
    cluster_size = len(cluster_body) + len(_id(0xA0)) + len(_size(group_size)) + group_size
    before = (_id(0x1F43B675) + _size(cluster_size) + cluster_body + _id(0xA0) + _size(group_size)
              + _id(0xA1) + _size(block_size) + block_head)
    return before, after
