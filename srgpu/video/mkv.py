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
from dataclasses import dataclass

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


def header(width: int, height: int, layout: PixelLayout, hdr: HdrMetadata | None = None,
           frame_duration_ns: int | None = None) -> bytes:
    """EBML header, an open-ended Segment, Info (1 ns ticks) and one raw video track (with the
    source's HDR static metadata, if any; ``frame_duration_ns``: the track's DefaultDuration, from
    which ffmpeg takes the frame rate it tells the encoder, instead of guessing it from the first
    frames)."""
    ebml = element(0x1A45DFA3, uint(0x4286, 1) + uint(0x42F7, 1) + uint(0x42F2, 4) + uint(0x42F3, 8)
                   + string(0x4282, "matroska") + uint(0x4287, 4) + uint(0x4285, 2))
    info = element(0x1549A966, uint(0x2AD7B1, 1) + string(0x4D80, "srgpu") + string(0x5741, "srgpu"))
    video = element(0xE0, uint(0xB0, width) + uint(0xBA, height) + string(0x2EB524, layout.fourcc)
                    + (colour(hdr) if hdr is not None else b""))
    default = uint(0x23E383, frame_duration_ns) if frame_duration_ns else b""
    track = element(0xAE, uint(0xD7, 1) + uint(0x73C5, 1) + uint(0x83, 1) + uint(0x9C, 0) + default
                    + string(0x86, "V_UNCOMPRESSED") + video)
    return ebml + _id(0x18538067) + UNKNOWN_SIZE + info + element(0x1654AE6B, track)


def frame_prefix(timestamp_ns: int, duration_ns: int | None, payload_size: int,
                 keyframe: bool = True) -> tuple[bytes, bytes]:
    """(bytes before the frame's payload, bytes after it) for one frame in its own Cluster, so the
    payload (the planes) can be written straight from their buffers without a copy. A frame that
    is not a keyframe carries a ReferenceBlock (coded frames of a joined stream)."""
    if timestamp_ns < 0:
        raise ValueError("Matroska cluster timestamps cannot be negative")
    block_head = bytes([0x81]) + struct.pack(">hB", 0, 0)  # track 1, +0 ticks (no ReferenceBlock: a keyframe)
    block_size = len(block_head) + payload_size
    after = uint(0x9B, duration_ns) if duration_ns and duration_ns > 0 else b""
    if not keyframe:
        after += element(0xFB, b"\xff")  # ReferenceBlock -1: depends on another frame
    group_size = len(_id(0xA1)) + len(_size(block_size)) + block_size + len(after)
    cluster_body = uint(0xE7, timestamp_ns)
    cluster_size = len(cluster_body) + len(_id(0xA0)) + len(_size(group_size)) + group_size
    before = (_id(0x1F43B675) + _size(cluster_size) + cluster_body + _id(0xA0) + _size(group_size)
              + _id(0xA1) + _size(block_size) + block_head)
    return before, after


# ---------------------------------------------------------------- coded frames (chunk files)
#
# A chunk of a long video is encoded into a Matroska file by ffmpeg; the join reads every chunk's
# coded frames back and writes them, each with its exact source timestamp, into one Matroska
# stream with 1 ns ticks (ffmpeg's own muxer rounds to milliseconds), which ffmpeg then remuxes
# with the source's other streams. Only what ffmpeg's muxer writes for one video track is read:
# one TrackEntry, SimpleBlocks or BlockGroups without lacing.

_SEGMENT, _CLUSTER, _TRACKS, _INFO = 0x18538067, 0x1F43B675, 0x1654AE6B, 0x1549A966
_TOP_LEVEL = {0x114D9B74, 0x1549A966, 0x1654AE6B, 0x1F43B675, 0x1C53BB6B, 0x1941A469, 0x1043A770, 0x1254C367}


class MatroskaError(ValueError):
    """A file that is not what srgpu's chunk reader takes (truncated, corrupt, or another layout)."""


@dataclass(frozen=True)
class CodedTrack:
    """The video track of a chunk file: how to decode its frames (codec and its private data) and
    the Video element (size, display size, colour, HDR metadata) as ffmpeg wrote it."""

    codec_id: str
    codec_private: bytes
    video: bytes  # the whole Video element, ID and size included

    def entry(self, frame_duration_ns: int | None = None) -> bytes:
        """A TrackEntry for this track as track 1 of a joined stream; ``frame_duration_ns``: its
        DefaultDuration, the frame rate ffmpeg reports and gives the output (without it, ffmpeg
        guesses one from the first timestamps: 24.42 fps for 23.976)."""
        default = uint(0x23E383, frame_duration_ns) if frame_duration_ns else b""
        body = (uint(0xD7, 1) + uint(0x73C5, 1) + uint(0x9C, 0) + uint(0x83, 1) + default + string(0x86, self.codec_id)
                + (element(0x63A2, self.codec_private) if self.codec_private else b"") + self.video)
        return element(0xAE, body)


@dataclass(frozen=True)
class CodedFrame:
    """One coded frame: where its bytes lie in the file, its timestamp (ns) and whether it is a keyframe."""

    offset: int
    size: int
    time_ns: int
    keyframe: bool


def _vint(buf: bytes | memoryview, pos: int, end: int, keep_marker: bool) -> tuple[int, int]:
    if pos >= end:
        raise MatroskaError("the file ends inside an element header")
    first = buf[pos]
    if first == 0:
        raise MatroskaError(f"invalid element header at byte {pos}")
    length = 8 - first.bit_length() + 1
    if pos + length > end:
        raise MatroskaError("the file ends inside an element header")
    value = first if keep_marker else first & ((1 << (8 - length)) - 1)
    unknown = value == (1 << (8 - length)) - 1 and not keep_marker
    for i in range(1, length):
        value = (value << 8) | buf[pos + i]
        unknown = unknown and buf[pos + i] == 0xFF
    return (-1 if unknown else value), pos + length


def _children(buf: bytes | memoryview, start: int, end: int):
    """(id, data start, data end) of each element in [start, end); an unknown size runs to the next
    top-level element or the end."""
    pos = start
    while pos < end:
        eid, pos = _vint(buf, pos, end, keep_marker=True)
        size, pos = _vint(buf, pos, end, keep_marker=False)
        if size < 0:
            stop = pos
            while stop < end:  # unknown size (a live stream): up to the next top-level element
                try:
                    inner, after = _vint(buf, stop, end, keep_marker=True)
                    if inner in _TOP_LEVEL or inner == _SEGMENT:
                        break
                    inner_size, after = _vint(buf, after, end, keep_marker=False)
                except MatroskaError:
                    stop = end
                    break
                if inner_size < 0:
                    stop = end
                    break
                stop = after + inner_size
            size = min(stop, end) - pos
        if pos + size > end:
            raise MatroskaError(f"element {eid:#x} at byte {pos} runs past the end of the file (truncated?)")
        yield eid, pos, pos + size
        pos += size


def _uint(buf: bytes | memoryview, start: int, end: int) -> int:
    return int.from_bytes(bytes(buf[start:end]), "big") if end > start else 0


def read_coded(buf: bytes | memoryview) -> tuple[CodedTrack, int, list[CodedFrame]]:
    """The video track, the timestamp scale (ns per tick) and every coded frame, in file order, of
    a one-track Matroska file as ffmpeg's muxer writes it; MatroskaError for anything else."""
    end = len(buf)
    segment = None
    for eid, a, b in _children(buf, 0, end):
        if eid == _SEGMENT:
            segment = (a, b)
            break
    if segment is None:
        raise MatroskaError("no Matroska segment")
    scale = 1_000_000
    track: CodedTrack | None = None
    frames: list[CodedFrame] = []
    for eid, a, b in _children(buf, *segment):
        if eid == _INFO:
            for cid, ca, cb in _children(buf, a, b):
                if cid == 0x2AD7B1:
                    scale = _uint(buf, ca, cb)
        elif eid == _TRACKS:
            entries = [(ca, cb) for cid, ca, cb in _children(buf, a, b) if cid == 0xAE]
            if len(entries) != 1:
                raise MatroskaError(f"{len(entries)} tracks, where a chunk has one")
            track = _track(buf, *entries[0])
        elif eid == _CLUSTER:
            frames += _cluster(buf, a, b, scale)
    if track is None:
        raise MatroskaError("no track")
    return track, scale, frames


def _track(buf: bytes | memoryview, start: int, end: int) -> CodedTrack:
    codec_id, private, video, kind = None, b"", None, None
    for eid, a, b in _children(buf, start, end):
        if eid == 0x86:
            codec_id = bytes(buf[a:b]).decode("ascii", "replace").rstrip("\0")
        elif eid == 0x63A2:
            private = bytes(buf[a:b])
        elif eid == 0xE0:
            header = _id(0xE0) + _size(b - a)
            video = header + bytes(buf[a:b])
        elif eid == 0x83:
            kind = _uint(buf, a, b)
        elif eid == 0x6D80:
            raise MatroskaError("the track's frames are stored compressed (ContentEncoding)")
    if kind != 1 or codec_id is None or video is None:
        raise MatroskaError("the track is not a video track")
    return CodedTrack(codec_id, private, video)


def _cluster(buf: bytes | memoryview, start: int, end: int, scale: int) -> list[CodedFrame]:
    base = 0
    out: list[CodedFrame] = []
    for eid, a, b in _children(buf, start, end):
        if eid == 0xE7:
            base = _uint(buf, a, b)
        elif eid == 0xA3:  # SimpleBlock
            out.append(_block(buf, a, b, base, scale, None))
        elif eid == 0xA0:  # BlockGroup: a keyframe unless it has a ReferenceBlock
            block, referenced = None, False
            for gid, ga, gb in _children(buf, a, b):
                if gid == 0xA1:
                    block = (ga, gb)
                elif gid == 0xFB:
                    referenced = True
            if block is None:
                raise MatroskaError(f"a BlockGroup without a Block at byte {a}")
            out.append(_block(buf, *block, base, scale, not referenced))
    return out


def _block(buf: bytes | memoryview, start: int, end: int, base: int, scale: int, keyframe: bool | None) -> CodedFrame:
    track, pos = _vint(buf, start, end, keep_marker=False)
    if pos + 3 > end:
        raise MatroskaError(f"a block cut short at byte {start}")
    relative = struct.unpack(">h", bytes(buf[pos:pos + 2]))[0]
    flags = buf[pos + 2]
    if track != 1:
        raise MatroskaError(f"a block of track {track}, where a chunk has track 1 only")
    if flags & 0x06:
        raise MatroskaError("laced blocks are not read")
    key = bool(flags & 0x80) if keyframe is None else keyframe
    return CodedFrame(pos + 3, end - pos - 3, (base + relative) * scale, key)


def coded_header(track: CodedTrack, frame_duration_ns: int | None = None) -> bytes:
    """EBML header, an open-ended Segment, Info (1 ns ticks) and ``track`` as track 1 (with
    ``frame_duration_ns`` as its DefaultDuration, as the raw pipe's header): the head of a joined
    stream, whose frames follow as frame_prefix(..., keyframe) + data + after."""
    ebml = element(0x1A45DFA3, uint(0x4286, 1) + uint(0x42F7, 1) + uint(0x42F2, 4) + uint(0x42F3, 8)
                   + string(0x4282, "matroska") + uint(0x4287, 4) + uint(0x4285, 2))
    info = element(0x1549A966, uint(0x2AD7B1, 1) + string(0x4D80, "srgpu") + string(0x5741, "srgpu"))
    return ebml + _id(0x18538067) + UNKNOWN_SIZE + info + element(0x1654AE6B, track.entry(frame_duration_ns))
