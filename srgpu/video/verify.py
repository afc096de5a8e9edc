"""Frame accounting read from files, not from what was sent: the video packets a file really
holds (what a player shows), with their timestamps, by demuxing it (stream copy, no decoding).

Every packet of a video stream is one frame of it for the codecs srgpu writes. A packet that
the demuxer marks to be discarded (an MP4 edit list that ends before it) is a frame no player
shows, so it does not count.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Sequence

from . import ffmpeg
from .errors import VideoError

_TIME_BASE = re.compile(r"^#tb (\d+): (\d+)/(\d+)$", re.M)
_KEY = 0x1  # AV_PKT_FLAG_KEY (framecrc prints no flags where they are exactly this)
_DISCARD = 0x4  # AV_PKT_FLAG_DISCARD


@dataclass(frozen=True)
class StreamPackets:
    """The packets of one stream, in file order: ``pts``, ``durations`` and ``dts`` in ticks of
    ``time_base`` (pts or dts None where a packet has none); ``keys``: whether each is a keyframe
    as the demuxer marks it; ``sizes``: each packet's bytes."""

    time_base: Fraction
    pts: tuple[int | None, ...]
    durations: tuple[int, ...] = ()
    dts: tuple[int | None, ...] = ()
    keys: tuple[bool, ...] = ()
    sizes: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.pts)

    def times(self) -> list[Fraction]:
        """Presentation times in seconds, in display order (packets without a pts left out)."""
        return sorted(p * self.time_base for p in self.pts if p is not None)


def stream_packets(path: Path, stream_index: int) -> StreamPackets:
    """The shown packets of stream ``stream_index`` of ``path``, timestamps as in the file
    (-copyts); VideoError if ffmpeg cannot read them."""
    proc = ffmpeg.run(["-hide_banner", "-nostdin", "-v", "error", "-copyts", "-i", ffmpeg.file_arg(path), "-map",
                       f"0:{stream_index}", "-c", "copy", "-f", "framecrc", "-"], timeout=3600)
    m = _TIME_BASE.search(proc.stdout)
    if proc.returncode != 0 or m is None:
        detail = " ".join((proc.stderr.strip().splitlines() or ["no packets"])[-1:])
        raise VideoError(f"{path}: cannot read the packets of stream #{stream_index} back: {detail}")
    pts: list[int | None] = []
    dts: list[int | None] = []
    durations: list[int] = []
    keys: list[bool] = []
    sizes: list[int] = []
    for line in proc.stdout.splitlines():
        if not line or line.startswith("#"):
            continue
        fields = [f.strip() for f in line.split(",")]
        flags = next((int(f[2:], 16) for f in fields[6:] if f.startswith("F=")), _KEY)
        if flags & _DISCARD:
            continue
        dts.append(None if fields[1] == "NOPTS" else int(fields[1]))
        pts.append(None if fields[2] == "NOPTS" else int(fields[2]))
        durations.append(int(fields[3]))
        keys.append(bool(flags & _KEY))
        sizes.append(int(fields[4]))
    return StreamPackets(Fraction(int(m.group(2)), int(m.group(3))), tuple(pts), tuple(durations), tuple(dts),
                         tuple(keys), tuple(sizes))


class SourceTiming:
    """The source stream's packets, read on a background thread from construction on: every
    frame's timestamp and duration as the container gives them (what the software decoder reports
    for each frame), for a decoder that does not report durations (NVDEC gives 0, and an encoder
    left to guess the last frame's duration can end an MP4 edit list before the last frame)."""

    def __init__(self, src: Path, stream_index: int) -> None:
        self._result: StreamPackets | VideoError | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._scan, args=(src, stream_index), name="srgpu-source-packets",
                                        daemon=True)
        self._thread.start()

    def _scan(self, src: Path, stream_index: int) -> None:
        try:
            self._result = stream_packets(src, stream_index)
        except VideoError as e:
            self._result = e
        finally:
            self._done.set()

    def ready(self) -> bool:
        return self._done.is_set()

    def packets(self) -> StreamPackets:
        """The packets (waiting for the scan); VideoError if they could not be read."""
        self._done.wait()
        if isinstance(self._result, VideoError):
            raise self._result
        assert self._result is not None
        return self._result

    def frames_after(self, time: Fraction) -> list[tuple[Fraction, Fraction]]:
        """(time, duration) in seconds of every frame presented after ``time`` seconds, in order."""
        p = self.packets()
        return sorted((t * p.time_base, d * p.time_base) for t, d in zip(p.pts, p.durations)
                      if t is not None and t * p.time_base > time)

    def duration_at(self, time: Fraction) -> Fraction | None:
        """The duration in seconds of the frame presented at ``time`` seconds (None: no such frame)."""
        if not hasattr(self, "_by_time"):
            p = self.packets()
            self._by_time = {t * p.time_base: d * p.time_base for t, d in zip(p.pts, p.durations) if t is not None}
        return self._by_time.get(time)


def check_frames(path: Path, stream_index: int, sent: Sequence[int], time_base: Fraction) -> int:
    """Check that the video stream ``stream_index`` of the finished file ``path`` holds exactly the
    frames that were sent to its encoder (``sent``: their pts in ticks of ``time_base``): as many,
    at the same times relative to the first (within the file's own time base), none twice.
    Returns the number of frames in the file; VideoError naming both counts otherwise."""
    got = stream_packets(path, stream_index)
    if len(got) != len(sent):
        raise VideoError(f"{path.name}: the encoded file holds {len(got)} video frames, but the decoder gave "
                         f"{len(sent)}")
    times = got.times()
    if len(times) != len(sent):
        raise VideoError(f"{path.name}: {len(sent) - len(times)} of the encoded file's {len(sent)} video frames "
                         "have no timestamp")
    want = sorted(p * time_base for p in sent)
    slack = got.time_base  # each side rounded to the file's time base: at most one tick apart
    for i, (a, b) in enumerate(zip(times, want)):
        if abs((a - times[0]) - (b - want[0])) > slack:
            raise VideoError(f"{path.name}: frame {i} of the encoded file is at {float(a - times[0]):.6f} s from "
                             f"the first, where the source has it at {float(b - want[0]):.6f} s")
    return len(got)


def check_layout(path: Path, kinds: Sequence[str], video_index: int, size: tuple[int, int]) -> None:
    """Check that the finished file ``path`` holds the streams srgpu planned (``kinds``: each
    one's kind, "video", "audio", ...; data streams a muxer adds of its own, MP4's chapter text or
    MOV's timecode track, are not counted) and that its video stream ``video_index`` has the
    planned ``size`` (width, height): what the done line and the --json summary report (an
    encoder argument that filters, scales or maps streams changes them). VideoError otherwise."""
    from .probe import probe

    info = probe(path)
    got = [s.kind for s in info.streams if s.kind != "data"]
    want = [k for k in kinds if k != "data"]
    if got != want:
        raise VideoError(f"{path.name}: the encoded file holds {len(got)} streams ({', '.join(got)}) where srgpu "
                         f"planned {len(want)} ({', '.join(want)}): an --encoder-arg changed them?")
    video = info.streams[video_index]
    if (video.width, video.height) != size:
        raise VideoError(f"{path.name}: the encoded video is {video.width}x{video.height} where srgpu planned "
                         f"{size[0]}x{size[1]}: an --encoder-arg changed it?")
