"""Where a long video is cut into chunks: the source's keyframes, read from its packets, and how
many chunks are worth making (a cost model), each a frame-exact window of the stream.

A chunk is the frames whose presentation timestamps lie in [start, end): cut at keyframes where
one lies near the ideal boundary, so that each chunk decodes on its own; where the keyframes are
too far apart for chunks of equal work (a 10 s GOP and 7 s chunks), inside a GOP: that chunk
decodes from the keyframe before its start and drops the frames before its start after decoding
(a few frames of decoding, against a worker idle while another finishes a longer chunk). The scan reads every packet of the video stream (demuxed,
not decoded: timestamps, durations, keyframe flags, in file order) once; a keyframe is a cut
point when every frame decoded before it is shown before it (otherwise a frame of the chunk
before would be decoded after the cut). An open-GOP keyframe (an HEVC CRA, an H.264 recovery
point) has leading pictures: decoded after it, shown before it, and referring to the GOP before.
They belong to the chunk before the cut, which decodes on past its end until they are out; the
chunk that starts there drops them before the decoder (srgpu.video.reader.FrameWindow), so it
decodes from the keyframe as from a fresh start and never needs the GOP before.

Cost model (frames of one worker's work): each chunk costs a fixed start-up and drain (ffmpeg
processes, the engine's buffers, the encoder's lookahead filling and emptying, an extra IDR),
``CHUNK_OVERHEAD_FRAMES``; with W workers the last round of chunks ends unevenly, which wastes
about ``IMBALANCE`` of one chunk's work. The job's time is then about N/W + n*c/W + b*N/n
(N frames, n chunks, c the overhead): n = sqrt(b*N*W/c) chunks, rounded up to a multiple of W,
each between MIN_CHUNK_SECONDS and MAX_CHUNK_SECONDS long (the longest also bounds what an
interruption costs), and still a multiple of W where those bounds clamp it. One worker has no imbalance: its chunks are MAX_CHUNK_SECONDS long, for
resume. ``chunk_seconds`` forces the length instead (tests, and users who know better).

The last round is shorter (``TAIL_SHARE`` of the others' length, never under MIN_CHUNK_SECONDS): the
workers' last encoders ended 2.1 s apart on 4 GPUs with rounds of equal 12.5 s chunks (BENCHMARKS.md,
issue 40), and what a round's end can waste is about one of its chunks; the count, and so the
chunks' fixed costs, stay the cost model's. Handed out largest first, the short ones come last.
"""

from __future__ import annotations

import hashlib
import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Sequence

from . import ffmpeg
from .errors import VideoError
from .reader import FrameWindow
from .verify import StreamPackets, stream_packets

CHUNK_OVERHEAD_FRAMES = 48  # start-up and drain of one chunk, in frames of work (see the docstring)
IMBALANCE = 0.3  # of one chunk's work, lost at the end of the last round when W > 1
MIN_CHUNK_SECONDS = 4.0
# a boundary moves to the nearest keyframe when that is within this share of a chunk's frames of
# the ideal cut; further away, it cuts inside the GOP (decoding from the keyframe before, which
# must lie within one chunk's frames of it: no chunk decodes more than twice its frames)
SNAP_SHARE = 0.1
MAX_CHUNK_SECONDS = 60.0
TAIL_SHARE = 0.5  # the last round's chunks, against the others' length (several workers, two rounds or more)
# shorter videos keep the single pipeline (unless chunk_seconds is given): it overlaps decoding,
# the engine and encoding already, and a short video is quickly redone; with one worker, chunks
# only serve resume
MIN_CHUNKED_SECONDS = 5 * MIN_CHUNK_SECONDS
MIN_CHUNKED_SECONDS_ONE_WORKER = 2 * MAX_CHUNK_SECONDS


def worth_chunking(seconds: float, workers: int) -> bool:
    """Whether a video of ``seconds`` is cut into chunks by default (no chunk_seconds given)."""
    return seconds >= (MIN_CHUNKED_SECONDS if workers > 1 else MIN_CHUNKED_SECONDS_ONE_WORKER)


@dataclass(frozen=True)
class SourceScan:
    """The video stream's frames in presentation order (pts and durations in ticks of
    ``time_base``), where a chunk may start (indices into ``pts``), and a digest of it all (two
    scans with the same digest are the same stream's timing)."""

    time_base: Fraction
    pts: tuple[int, ...]
    durations: tuple[int, ...]
    cuts: tuple[int, ...]
    open_cuts: frozenset[int]  # the cuts at keyframes with leading pictures (open GOP)
    digest: str
    sizes: tuple[int, ...] = ()  # each frame's coded bytes, in presentation order (not in the digest)

    @property
    def frames(self) -> int:
        return len(self.pts)

    def typical_duration(self) -> int:
        """The median interval between frames (ticks): the frame rate every chunk's encoder is told."""
        steps = sorted(b - a for a, b in zip(self.pts, self.pts[1:]))
        return max(1, steps[len(steps) // 2]) if steps else max(1, self.durations[0] if self.durations else 1)

    def seconds(self) -> float:
        if not self.pts:
            return 0.0
        return float((self.pts[-1] + (self.durations[-1] or 0) - self.pts[0]) * self.time_base)


@dataclass(frozen=True)
class Chunk:
    """Frames ``first`` to ``last`` (exclusive; positions in presentation order) of the stream,
    whose timestamps are ``start <= pts < end`` (None: from the first, to the last)."""

    index: int
    first: int
    last: int
    start: int | None
    end: int | None
    seek_us: int | None  # where the demuxer seeks (microseconds, the stream's own clock); None: from the start
    keyframe: int | None = None  # the pts decoding starts at, for a chunk that starts inside a GOP

    @property
    def frames(self) -> int:
        return self.last - self.first

    def window(self, from_start: bool = False) -> FrameWindow:
        """The reader's window for this chunk; ``from_start``: decode from the start of the file (the
        fallback where seeking did not give the chunk's frames)."""
        seek = None if from_start or self.seek_us is None else self.seek_us / 1_000_000
        return FrameWindow(self.start, self.end, seek, None if seek is None else self.keyframe)

    def as_json(self) -> dict:
        return {"index": self.index, "first": self.first, "last": self.last, "start": self.start,
                "end": self.end, "seek_us": self.seek_us, "keyframe": self.keyframe}

    @classmethod
    def from_json(cls, data: dict) -> "Chunk":
        fields = ("index", "first", "last", "start", "end", "seek_us", "keyframe")
        if isinstance(data, dict) and "keyframe" not in data:
            data = {**data, "keyframe": None}  # written before chunks could start inside a GOP
        if not isinstance(data, dict) or set(data) != set(fields):
            raise ValueError("not a chunk")
        for k in fields:
            v = data[k]
            if not (v is None and k in ("start", "end", "seek_us", "keyframe")) and (
                    not isinstance(v, int) or isinstance(v, bool)):
                raise ValueError(f"bad chunk field {k}")
        return cls(**data)


def scan(src: Path, stream_index: int) -> SourceScan | str:
    """The stream's frames and cut points; a reason (str) where it cannot be cut frame-exactly."""
    packets = stream_packets(src, stream_index)
    return analyse(packets)


def analyse(packets: StreamPackets) -> SourceScan | str:
    """SourceScan from the packets in file (decoding) order; a reason where chunks cannot work."""
    n = len(packets.pts)
    if n < 2:
        return "it has fewer than two frames"
    if any(p is None for p in packets.pts):
        return "some of its frames have no timestamp"
    pts: list[int] = list(packets.pts)  # type: ignore[arg-type]
    if len(set(pts)) != n:
        return "two of its frames have the same timestamp"
    keys = packets.keys or (False,) * n
    order = sorted(range(n), key=lambda i: pts[i])
    shown = [pts[i] for i in order]
    durations = [packets.durations[i] if packets.durations else 0 for i in order]
    sizes = tuple(packets.sizes[i] for i in order) if packets.sizes else ()
    # a keyframe at decode position i cuts the stream when everything decoded before it is shown
    # before it; it is open when something decoded after it is shown before it (leading pictures)
    suffix_min = [0] * (n + 1)
    suffix_min[n] = math.inf  # type: ignore[call-overload]
    for i in range(n - 1, -1, -1):
        suffix_min[i] = min(pts[i], suffix_min[i + 1])
    cuts, open_cuts = [], set()
    prefix_max = -math.inf
    for i in range(n):
        if keys[i] and i > 0 and prefix_max < pts[i]:
            position = bisect_left(shown, pts[i])
            if position > 0:
                cuts.append(position)
                if suffix_min[i + 1] < pts[i]:
                    open_cuts.add(position)
        prefix_max = max(prefix_max, pts[i])
    digest = hashlib.sha256(repr((str(packets.time_base), pts, list(packets.durations), list(keys))).encode())
    return SourceScan(packets.time_base, tuple(shown), tuple(durations), tuple(sorted(set(cuts))),
                      frozenset(open_cuts), digest.hexdigest()[:24], sizes)


def chunk_count(frames: int, fps: float, workers: int, chunk_seconds: float | None = None) -> int:
    """How many chunks to cut ``frames`` frames into (before snapping to keyframes): the cost model
    of the module docstring, or ``chunk_seconds`` long chunks where given."""
    fps = fps if fps > 0 else 25.0
    seconds = frames / fps
    if chunk_seconds is not None:
        return max(1, round(seconds / chunk_seconds))
    most = max(1, math.floor(seconds / MIN_CHUNK_SECONDS))
    least = max(1, math.ceil(seconds / MAX_CHUNK_SECONDS))
    if workers <= 1:
        return least
    n = math.sqrt(IMBALANCE * frames * workers / CHUNK_OVERHEAD_FRAMES)
    n = math.ceil(max(n, workers) / workers) * workers
    if n > most:  # chunks this short are not worth it: fewer, still whole rounds where possible
        n = most // workers * workers or most
    return max(least, n)


def plan(scan: SourceScan, workers: int, chunk_seconds: float | None = None) -> tuple[Chunk, ...]:
    """The chunks: the ideal cuts (equal chunks, the last round shorter: chunk_lengths), each snapped
    to the nearest cut point within SNAP_SHARE of its chunk, else (several workers) kept where it
    is, inside a GOP whose keyframe lies within a chunk before it, else snapped to the nearest cut
    point however far (a keyframe serves one boundary only, and chunks never come out empty)."""
    fps = scan.frames / scan.seconds() if scan.seconds() > 0 else 25.0
    n = chunk_count(scan.frames, fps, workers, chunk_seconds)
    body, tail, tails = chunk_lengths(scan.frames, n, workers, fps if chunk_seconds is None else None)
    first = n - tails  # chunks of ``body`` frames, then ``tails`` of ``tail``
    bounds: list[int] = []
    if n > 1 and scan.cuts:
        for k in range(1, n):
            ideal = k * body if k <= first else first * body + (k - first) * tail
            length = body if k < first else tail  # of the chunk that starts at this boundary
            j = bisect_left(scan.cuts, ideal)
            near = [c for c in (scan.cuts[j - 1] if j > 0 else None, scan.cuts[j] if j < len(scan.cuts) else None)
                    if c is not None]
            best = min(near, key=lambda c: (abs(c - ideal), c))
            inside = round(ideal)
            before = _cut_at_or_before(scan, inside) or 0  # 0: decoded from the start of the file
            if (workers > 1 and abs(best - ideal) > SNAP_SHARE * length
                    and inside - before <= length):  # one worker: chunks serve resume, not balance
                best = inside
            if (not bounds or best > bounds[-1]) and 0 < best < scan.frames:
                bounds.append(best)
    edges = [0, *bounds, scan.frames]
    chunks = []
    for index, (first, last) in enumerate(zip(edges, edges[1:])):
        start = scan.pts[first] if first > 0 else None
        end = scan.pts[last] if last < scan.frames else None
        key = _cut_at_or_before(scan, first) if first > 0 else None
        keyframe = scan.pts[key] if key is not None and key != first else None
        # at a cut: seek to it; inside a GOP: to its keyframe, else (the first GOP) no seek at all
        seek_from = start if key == first else keyframe
        seek_us = None if seek_from is None else math.floor(seek_from * scan.time_base * 1_000_000)
        chunks.append(Chunk(index, first, last, start, end, seek_us, keyframe))
    return tuple(chunks)


def chunk_lengths(frames: int, n: int, workers: int, fps: float | None) -> tuple[float, float, int]:
    """The ideal lengths (frames) of ``n`` chunks of ``frames``: (the others', the last ones', how many
    last ones). Equal (no last ones), or (``fps`` given: the cost model's count, several workers, two
    rounds or more) the last round's ``workers`` chunks TAIL_SHARE of the others' and at least
    MIN_CHUNK_SECONDS long, where the others are longer still."""
    equal = frames / n
    if fps is None or workers <= 1 or n < 2 * workers:
        return equal, equal, 0
    body = frames / (n - workers * (1 - TAIL_SHARE))
    tail = TAIL_SHARE * body
    if tail < MIN_CHUNK_SECONDS * fps:
        tail = min(MIN_CHUNK_SECONDS * fps, equal)
        body = (frames - workers * tail) / (n - workers)
    return body, tail, workers


def largest_first(scan: SourceScan, chunks: Sequence[Chunk]) -> list[Chunk]:
    """The order to hand chunks to workers: the most coded bytes of the source first (a proxy for
    the encoder's work, which varied twofold between equal-length chunks of one film), so that
    the last round is made of the cheapest chunks and the workers finish together (BENCHMARKS.md,
    issue 40). Equal or unknown sizes keep the chunks' own order."""
    if not scan.sizes:
        return list(chunks)
    return sorted(chunks, key=lambda c: (-sum(scan.sizes[c.first:c.last]), c.index))


def _cut_at_or_before(scan: SourceScan, position: int) -> int | None:
    """The last cut point at or before ``position`` (a frame's place in presentation order)."""
    j = bisect_right(scan.cuts, position)
    return scan.cuts[j - 1] if j > 0 else None


def decoder_time_base(src: Path, stream_index: int, decoder: str | None = None) -> Fraction | None:
    """The time base in which the decoder's frames reach the filters (the reader's clock): one frame
    decoded. None where ffmpeg does not say."""
    import re

    args = ["-hide_banner", "-nostdin", "-loglevel", "info", "-copyts",
            *ffmpeg.decoder_args(stream_index, decoder), "-i", ffmpeg.file_arg(src), "-map", f"0:{stream_index}",
            "-frames:v", "1", "-vf", "showinfo=checksum=0", "-f", "null", "-"]
    proc = ffmpeg.run(args)
    m = re.search(r"config in time_base: (\d+)/(\d+)", proc.stderr)
    if m is None or int(m.group(1)) <= 0 or int(m.group(2)) <= 0:
        return None
    return Fraction(int(m.group(1)), int(m.group(2)))


def chunkable(src: Path, stream_index: int, decoder: str | None = None) -> SourceScan | str:
    """scan(), plus the check that the decoder's clock is the container's (the windows are in ticks
    of the container's time base): a SourceScan, or why the video is not cut into chunks."""
    try:
        found = scan(src, stream_index)
    except VideoError as e:
        return f"its packets could not be read ({e})"
    if isinstance(found, str):
        return found
    if not found.cuts:
        return "it has no keyframe to cut at after the first frame"
    tb = decoder_time_base(src, stream_index, decoder)
    if tb != found.time_base:
        return f"its decoder counts time in {tb} where the container uses {found.time_base}"
    return found
