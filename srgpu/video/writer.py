"""The encoder: one ffmpeg with two inputs. Input 0 is our Matroska pipe of upscaled raw frames
with their exact timestamps; input 1 is the source file, from which every other stream, the
chapters and the metadata are mapped. Both sides run with -copyts, so the upscaled video and the
copied audio keep the source's own clock and stay in sync.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from . import ffmpeg, mkv
from .errors import VideoError
from .formats import PixelLayout
from .hdr import HdrMetadata
from .pipesink import PipeSink
from .reader import Frame


@dataclass(frozen=True)
class OutputStream:
    """One output stream, in output order: the upscaled video (source index ``src_index``, from
    the pipe) or a stream of the source file, with its codec arguments."""

    src_index: int
    upscaled: bool
    codec: str  # an encoder name or "copy"
    options: tuple[tuple[str, str], ...] = ()  # ("-crf", "18") becomes -crf:N 18 for output stream N


@dataclass(frozen=True)
class EncodePlan:
    src: Path
    tmp: Path
    muxer: str
    layout: PixelLayout  # what the pipe carries (the engine's output)
    out_size: tuple[int, int]  # (width, height) after upscaling
    enc_size: tuple[int, int]  # after padding to what the encoder needs
    streams: tuple[OutputStream, ...]
    video_filters: tuple[str, ...] = ()  # setparams (colour tags), setsar
    rotation: float = 0.0  # ffmpeg's display-matrix reading of the source
    upscaled_default: bool = True
    source_start: float = 0.0  # 'start:' of ffmpeg -i; subtracted from every stream, as ffmpeg does
    extra_args: tuple[str, ...] = ()  # the user's, last, so that they can override srgpu's
    hdr: HdrMetadata | None = None  # the source's HDR static metadata, passed on through the pipe
    source_streams: bool = True  # False: the upscaled video alone (a chunk of a long video), no
    # second input, no metadata or chapters
    muxer_args: tuple[str, ...] = ()  # the final file's muxer options (MP4's colr box), not a chunk's
    frame_duration_ns: int | None = None  # the frame rate the encoder is told (None: ffmpeg's guess
    # from the first frames); the chunks of a video are all told the same, so that their encoders'
    # headers (which carry it) are the same and the chunks join

    @property
    def video_index(self) -> int:
        """The upscaled video's stream index in the output file."""
        return next(i for i, s in enumerate(self.streams) if s.upscaled)

    def command(self, time_base: Fraction, pipe_offset: float, copy_video: bool = False) -> list[str]:
        """ffmpeg arguments, once the reader knows the exact time base. Both inputs keep their
        timestamps (-copyts) and are shifted by the same amount, the source's start time, as
        plain ffmpeg would; ``pipe_offset`` is what the pipe's own timestamps need added for that
        (they were written relative to an origin, Matroska holding no negative times).
        ``copy_video``: the pipe carries the upscaled video already encoded (the chunks of a long
        video, joined): it is copied, with only the options that are the muxer's (a codec tag), and
        its track keeps the clock an encoder in ``time_base`` would have given it."""
        args = ["-nostdin", "-hide_banner", "-nostats", "-loglevel", "level+warning", "-copyts"]
        args += ["-noautorotate"]
        if self.rotation:
            # -display_rotation takes the angle that ffmpeg -i then reports (checked: 90 and -180)
            args += ["-display_rotation:v:0", _num(self.rotation)]
        if pipe_offset:
            args += ["-itsoffset", _num(pipe_offset)]
        args += ["-f", "matroska", "-i", "pipe:0"]
        if self.source_streams:
            if self.source_start:
                args += ["-itsoffset", _num(-self.source_start)]
            args += ["-i", ffmpeg.file_arg(self.src)]
        video_index = self.video_index
        for out, s in enumerate(self.streams):
            if not self.source_streams and not s.upscaled:
                continue
            codec, options = s.codec, s.options
            if s.upscaled and copy_video:
                codec, options = "copy", tuple(o for o in s.options if o[0] in MUXER_OPTIONS)
            args += ["-map", "0:0" if s.upscaled else f"1:{s.src_index}", f"-c:{out}", codec]
            for key, value in options:
                args += [f"{key}:{out}", value]
            if self.source_streams:
                args += [f"-map_metadata:s:{out}", f"1:s:{s.src_index}"]
        if self.source_streams:
            args += ["-map_metadata", "1", "-map_chapters", "1"]
        args += [f"-disposition:{video_index}", "default" if self.upscaled_default else "0"]
        if copy_video:
            # the copied stream in the encoder's time base: the muxer then chooses its track's and the
            # movie's clock (MP4: their common multiple with the audio's) as for an encoded stream
            args += [f"-time_base:{video_index}", f"{time_base.numerator}/{time_base.denominator}"]
        else:
            args += [f"-fps_mode:{video_index}", "passthrough",
                     f"-enc_time_base:{video_index}", f"{time_base.numerator}/{time_base.denominator}"]
            if self.video_filters:
                args += [f"-filter:{video_index}", ",".join(self.video_filters)]
        if self.source_streams and not any(a.startswith("-movflags") for a in self.extra_args):
            args += self.muxer_args  # (the user's -movflags replace srgpu's: ffmpeg keeps the last)
        args += ["-max_muxing_queue_size", "4096", *(() if copy_video else self.extra_args)]
        return [*args, "-f", self.muxer, "-y", ffmpeg.file_arg(self.tmp)]


MUXER_OPTIONS = frozenset({"-tag"})  # options of the upscaled stream that are the muxer's, not the encoder's


def pipe_origin(source_start: float, time_base: Fraction, first_pts: int) -> tuple[int, float]:
    """(origin, pipe_offset): the pipe's timestamps are written as ticks after ``origin`` (Matroska
    holds no negative times), and ``pipe_offset`` seconds added back on reading put them where
    plain ffmpeg would, shifted by the source's start time like every other stream."""
    start = round(source_start / time_base)  # the source's start, in ticks
    origin = min(first_pts, start)
    return origin, round(float(origin * time_base) - source_start, 6)


def _num(x: float) -> str:
    return f"{x:.6f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


class Writer(ffmpeg.Child):
    """Feeds frames to the encoder; started on the first frame, when the time base is known."""

    role = "encoder"

    def __init__(self, plan: EncodePlan) -> None:
        self.plan = plan
        self.frames_written = 0
        self.sent_pts: list[int] = []  # every frame's pts as handed to the encoder (the reader's ticks)
        self.sent_durations: list[int | None] = []  # and its duration
        super().__init__()
        self._ns_per_tick: Fraction | None = None
        self._origin = 0  # ticks subtracted so that the pipe's timestamps are not negative
        self._sink: PipeSink | None = None

    def start(self, time_base: Fraction, first_pts: int) -> None:
        self._ns_per_tick = time_base * 1_000_000_000
        self._origin, pipe_offset = pipe_origin(self.plan.source_start, time_base, first_pts)
        cmd = self.plan.command(time_base, pipe_offset)
        self._launch(cmd, str(self.plan.src), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        w, h = self.plan.enc_size
        self._write(mkv.header(w, h, self.plan.layout, self.plan.hdr, self.plan.frame_duration_ns))

    def _ns(self, ticks: int) -> int:
        return round(ticks * self._ns_per_tick)  # type: ignore[operator]

    def write(self, frame: Frame) -> None:
        """Queue one frame for the encoder. The writer owns ``frame.release`` from here: it is
        called once the encoder has read the planes (they are lent to the pipe, not copied)."""
        planes = [np.ascontiguousarray(p) for p in self._pad(frame.planes)]
        payload = sum(p.nbytes for p in planes)
        before, after = mkv.frame_prefix(self._ns(frame.pts - self._origin),
                                         self._ns(frame.duration) if frame.duration else None, payload)
        # lend (no copy) only frames at least as large as the pipe: then the next frame's write
        # proves this one was read, so at most one frame is ever held (small frames are copied)
        lend = payload >= self._sink.capacity
        try:
            self._sink.write(before)
            for p in planes:
                if lend:
                    self._sink.lend(p)
                else:
                    self._sink.write(memoryview(p).cast("B"))
            self._sink.write(after)
        except (BrokenPipeError, ValueError, OSError):
            raise self._failure("the encoder stopped accepting frames") from None
        finally:
            if lend:
                self._sink.hold(frame.release, planes)
            elif frame.release is not None:
                frame.release()
        self.frames_written += 1
        self.sent_pts.append(frame.pts)
        self.sent_durations.append(frame.duration)

    def _pad(self, planes: list[np.ndarray]) -> list[np.ndarray]:
        """Repeat the last row/column where the encoder needs even sizes (odd output sizes)."""
        if self.plan.enc_size == self.plan.out_size:
            return planes
        shapes = self.plan.layout.plane_shapes(*self.plan.enc_size)
        return [p if p.shape == s else np.pad(p, ((0, s[0] - p.shape[0]), (0, s[1] - p.shape[1])), mode="edge")
                for p, s in zip(planes, shapes)]

    def _write(self, data: bytes | memoryview) -> None:
        try:
            self._sink.write(data)
        except (BrokenPipeError, ValueError, OSError):
            raise self._failure("the encoder stopped accepting frames") from None

    def finish(self) -> None:
        proc = self._proc
        assert proc is not None and self._log is not None
        try:
            proc.stdin.close()  # type: ignore[union-attr]
        except (BrokenPipeError, OSError):
            pass
        rc = proc.wait()
        self._sink.release_all()
        self.stderr_read()
        if rc != 0:
            raise self._failure(f"the encoder failed ({ffmpeg.describe_exit(rc)})")

    def _failure(self, what: str) -> VideoError:
        if self._proc is not None:
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self.stderr_read(2.0)
        detail = self.detail()
        return VideoError(f"{self.plan.src}: {what} after {self.frames_written} frames: {detail}")

    def _started(self, proc: subprocess.Popen) -> None:
        self._sink = PipeSink(proc.stdin.fileno())  # type: ignore[union-attr]

    def _on_kill(self) -> None:
        if self._sink is not None:
            self._sink.release_all()  # the reader is gone: give back what was lent (GPU slots)
