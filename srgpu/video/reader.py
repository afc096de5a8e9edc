"""The decoder: ffmpeg decodes one video stream to raw planar frames on its stdout; the
``showinfo`` filter logs each frame's exact pts and duration (in the stream's time base) on
stderr, just before that frame is written, so frame n and its timestamp pair up by order.

A filter that changes the frames' count or timing (``vf_pre``: bwdif, srgpu.video.deinterlace)
runs before showinfo, so that the frames and timestamps the reader gives are that filter's output
(bwdif gives its output half the source's time base, which the reader then counts in).

Decoding runs with -copyts (timestamps as in the file, as the writer uses them for the other
streams) and -noautorotate (frames as stored; the display matrix is copied to the output instead)
and -fps_mode passthrough (no frame dropped or duplicated).

A reader may decode only a window of the stream (``FrameWindow``, srgpu.video.chunks): the frames
whose timestamps lie in [start, end), the demuxer sought to a keyframe at or before the start,
every packet presented before the start dropped before the decoder (the leading pictures of an
open-GOP keyframe, which belong to the window before), and decoding stopped at the end.

Damaged data that the decoder concealed (no error logged, the frame flagged corrupt) is counted
from ffmpeg's "corrupt decoded frame" warnings; which frames they were is found afterwards, only
where there were any (Reader.locate_concealed), as showinfo runs on another thread several frames
behind the decoder and cannot say.
"""

from __future__ import annotations

import queue
import re
from array import array
import subprocess
import time
from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from . import ffmpeg
from .errors import VideoError
from .formats import PixelLayout
from .verify import SourceTiming

_SHOWINFO = "[Parsed_showinfo_"
_FRAME = re.compile(r"\bn:\s*(\d+)\s+pts:\s*(-?\d+|NOPTS)\b")
_DURATION = re.compile(r"\bduration:\s*(-?\d+|NOPTS)\b")
_SIZE = re.compile(r"\bs:(\d+)x(\d+)\b")
_TIME_BASE = re.compile(r"config in time_base: (\d+)/(\d+)")
_POOL_LIMIT = 16  # recycled frame buffers kept; more than the pipeline ever has in flight
_BENIGN = "non monotonically increasing dts to muxer"
_NO_PTS = -(2**63)
_SAME_TIME = 5e-4  # seconds: a frame's logged time against the pts_time ffmpeg prints (6 decimals)
_CORRUPT = "corrupt decoded frame"  # ffmpeg's warning for a frame whose damage the decoder concealed
# with -debug_ts the decoder's thread logs each frame it outputs ("decoder -> pts:..."), a corrupt
# one right after the warning: one thread writes both, in order, so the count of those lines names
# the frame exactly (either may come glued to another thread's unfinished line)
_DECODER_EVENT = re.compile(rf"{_CORRUPT}|\bdecoder -> pts:(-?\d+|NOPTS) pts_time:(\S+)")


# where decoding starts at a keyframe after the stream's start, x264's open-GOP I-frames (and
# others) release reference frames of the GOP before, which the decoder never saw: it says so at
# error level and decodes every later frame exactly as from the start (tests/video/test_chunks.py)
_BENIGN_AFTER_SEEK = "mmco: unref short failure"


@dataclass(frozen=True)
class FrameWindow:
    """The frames of a stream whose timestamps (ticks of its time base) are ``start <= pts <
    end`` (None: from the first, to the last). ``seek``: seconds (the stream's own timestamps) to
    seek the demuxer to first, at or before the keyframe where decoding starts: ``keyframe`` (its
    pts; None: ``start``, the window starts at a keyframe). Every packet presented before that
    keyframe is dropped before the decoder, so that decoding starts there without the leading
    pictures of an open GOP (they belong to the window before, which decodes past its end for
    them); frames decoded from the keyframe up to ``start`` are dropped after decoding (a window
    that starts inside a GOP). ``seek`` None: decode from the start of the file and drop the frames
    before ``start`` after decoding (always right, slower)."""

    start: int | None = None
    end: int | None = None
    seek: float | None = None
    keyframe: int | None = None

    def input_args(self, stream_index: int) -> list[str]:
        if self.seek is None:
            return []
        args = ["-seek_timestamp", "1", "-noaccurate_seek", "-ss", f"{max(self.seek, 0.0):.6f}"]
        first = self.keyframe if self.keyframe is not None else self.start
        if first is not None:
            args += [f"-bsf:{stream_index}", f"noise=drop=lt(pts\\,{first})"]
        return args

    def trim(self) -> str | None:
        parts = ([f"start_pts={self.start}"] if self.start is not None else []) + \
                ([f"end_pts={self.end}"] if self.end is not None else [])
        return "trim=" + ":".join(parts) if parts else None


def decode_args(src: Path, stream_index: int, decoder: str | None, decoder_options: Sequence[str],
                filters: str | None, window: FrameWindow | None = None) -> list[str]:
    """ffmpeg arguments, input to filters, that decode stream ``stream_index`` of ``src`` as the
    reader does (the output format is the caller's): timestamps as in the file, frames as stored,
    none dropped or duplicated, no re-timing (the raw output sees the exact pts); only the frames
    of ``window`` where one is given."""
    trim = window.trim() if window is not None else None
    filters = ",".join(f for f in (trim, filters) if f) or None
    return ["-copyts", "-noautorotate", *(window.input_args(stream_index) if window is not None else []),
            *ffmpeg.decoder_args(stream_index, decoder, decoder_options),
            "-i", ffmpeg.file_arg(src), "-map", f"0:{stream_index}", *(["-vf", filters] if filters else []),
            "-fps_mode", "passthrough", "-enc_time_base:v", "demux"]


@dataclass
class Frame:
    """One frame in flight: its position, exact timing (ticks of the reader's time base) and planes."""

    index: int
    pts: int
    duration: int | None
    planes: list[np.ndarray]
    release: Callable[[], None] | None = None  # called once the planes are written (pinned slots)
    recycle: Callable[[], None] | None = None  # gives the decoded buffer back to the reader; call it
    # once nothing reads the input planes any more (an engine's submit has copied or consumed them)


@dataclass(frozen=True)
class _Meta:
    index: int
    pts: int | None
    duration: int | None
    width: int
    height: int


class Reader(ffmpeg.Child):
    """Decodes stream ``stream_index`` of ``src`` into frames of ``layout``."""

    role = "decoder"

    def __init__(self, src: Path, stream_index: int, layout: PixelLayout, pipe_pix_fmt: str,
                 decoder: str | None = None, vf_extra: str | None = None,
                 size: tuple[int, int] | None = None, decoder_options: tuple[str, ...] = (),
                 strict: bool = False, timing: SourceTiming | None = None,
                 window: FrameWindow | None = None, vf_pre: str | None = None) -> None:
        self.src = src
        self.window = window  # only these frames (a chunk), None: all
        self.timing = timing  # the source's own frame durations, for a decoder that gives none (NVDEC)
        self.stream_index = stream_index
        self.size = size  # (width, height) the stream header promised; frames must match it
        self.layout = layout
        self.strict = strict  # a frame with concealed damage is an error, not a note
        self.concealed = 0  # frames the decoder flagged corrupt: damaged data it concealed
        self._input = (stream_index, decoder, tuple(decoder_options))  # for locate_concealed
        # ``vf_pre`` (a deinterlacer) runs before showinfo: the frames and their timing are its output's
        filters = (f"{vf_pre}," if vf_pre else "") + "showinfo=checksum=0" + (f",{vf_extra}" if vf_extra else "")
        self.args = ["-nostdin", "-hide_banner", "-nostats", "-loglevel", "level+info",
                     *decode_args(src, stream_index, decoder, decoder_options, filters, window),
                     "-f", "rawvideo", "-pix_fmt", pipe_pix_fmt, "pipe:1"]
        self.time_base: Fraction | None = None
        self.frames_read = 0
        self.repaired = 0  # frames whose timestamp did not increase (broken files), moved forward
        self.last_time: float | None = None  # seconds, of the last frame read
        self._pool: deque = deque()  # frame buffers given back by Frame.recycle
        self.buffers_allocated = 0
        # makes a frame buffer of n bytes; the pipeline sets the engine's (pinned memory on a GPU,
        # from which frames are uploaded without a copy)
        self.allocate: Callable[[int], Any] = bytearray
        self._meta: queue.Queue = queue.Queue()
        super().__init__()
        # where the decoder was when ffmpeg first logged an error: stderr is one ordered stream,
        # so the frame lines seen before the error line say how far decoding had got
        self._logged = 0
        self._logged_pts: int | None = None
        self._frame_pts = array("q")  # every logged frame's pts in order (NO_PTS where it had none): locate_concealed
        self._error_at: tuple[int, int | None] | None = None
        self.duration: float | None = None  # of the source, for error messages
        self.fps: float | None = None

    # ---------------------------------------------------------------- stderr side

    def _on_line(self, line: str) -> bool:
        # a message from another thread may come glued to showinfo's unfinished line: each is
        # looked for anywhere in the line, and the frame line is parsed whatever is glued to it
        if _CORRUPT in line:
            self.concealed += line.count(_CORRUPT)
        if _SHOWINFO not in line:
            if _BENIGN in line:  # our raw pipe's muxer on out-of-order source timestamps (repaired below)
                return True
            if _BENIGN_AFTER_SEEK in line and self.window is not None and self.window.seek is not None:
                return True
            if self._error_at is None and ffmpeg.split_level(line)[0] in ffmpeg.ERROR_LEVELS:
                self._error_at = (self._logged, self._logged_pts)
            return False
        m = _FRAME.search(line)
        size = _SIZE.search(line) if m else None
        if m and size:
            pts = None if m.group(2) == "NOPTS" else int(m.group(2))
            d = _DURATION.search(line)
            dur = None if d is None or d.group(1) == "NOPTS" else int(d.group(1))
            self._meta.put(_Meta(int(m.group(1)), pts, dur, int(size.group(1)), int(size.group(2))))
            self._logged += 1
            self._logged_pts = pts if pts is not None else self._logged_pts
            self._frame_pts.append(_NO_PTS if pts is None else pts)
        elif self.time_base is None:
            tb = _TIME_BASE.search(line)
            if tb and int(tb.group(1)) > 0 and int(tb.group(2)) > 0:
                self.time_base = Fraction(int(tb.group(1)), int(tb.group(2)))
        return True

    # ---------------------------------------------------------------- frames

    def start(self) -> None:
        self._launch(self.args, str(self.src), on_line=self._on_line, stdin=subprocess.DEVNULL,
                     stdout=subprocess.PIPE, bufsize=0)
        self._log_done = self._log.thread  # type: ignore[union-attr]  # stderr at EOF: no more frame lines will come

    def _next_meta(self) -> _Meta | None:
        while True:
            try:
                return self._meta.get(timeout=0.1)
            except queue.Empty:
                if not self._log_done.is_alive():
                    try:
                        return self._meta.get_nowait()
                    except queue.Empty:
                        return None

    def _frame_buffer(self, size: int) -> Any:
        """A recycled buffer of ``size`` bytes, or a new one: the pool grows to the number of frames
        between decoding and processing, then no frame allocates."""
        while self._pool:
            buf = self._pool.pop()
            if memoryview(buf).nbytes == size:
                return buf
        self.buffers_allocated += 1
        return self.allocate(size)

    def _recycler(self, buf: Any) -> Callable[[], None]:
        given = [False]

        def recycle() -> None:  # once: a buffer twice in the pool would be shared by two frames
            if not given[0] and len(self._pool) < _POOL_LIMIT:
                given[0] = True
                self._pool.append(buf)
        return recycle

    def _read_exact(self, size: int, buf: Any = None) -> Any:
        buf = bytearray(size) if buf is None else buf
        view = memoryview(buf)
        got = 0
        stdout = self._proc.stdout  # type: ignore[union-attr]
        while got < size:
            n = stdout.readinto(view[got:])  # type: ignore[union-attr]
            if not n:
                if got == 0:
                    return None
                raise self._failure(f"the decoder's output ended inside frame {self.frames_read}")
            got += n
        return buf

    def frames(self) -> Iterator[Frame]:
        """Frames in presentation order; VideoError when decoding fails anywhere."""
        assert self._proc is not None, "start() first"
        first: _Meta | None = None
        prev_pts: int | None = None
        prev_dur: int | None = None
        while True:
            meta = self._next_meta()
            self._check_errors(meta)
            if meta is None:
                if self._read_exact(1) is not None:
                    raise self._failure("the decoder wrote more frames than it reported")
                break
            if first is None:
                first = meta
                if self.time_base is None:
                    raise self._failure("ffmpeg reported no time base for the video stream")
                if self.size is not None and (meta.width, meta.height) != self.size:
                    raise self._failure(f"frames decode as {meta.width}x{meta.height}, not the "
                                        f"{self.size[0]}x{self.size[1]} the stream header gives")
            elif (meta.width, meta.height) != (first.width, first.height):
                raise self._failure(f"the frame size changes from {first.width}x{first.height} to "
                                    f"{meta.width}x{meta.height} at frame {meta.index}; videos whose "
                                    f"resolution changes are not supported")
            size = self.layout.frame_bytes(meta.width, meta.height)
            data = self._read_exact(size, self._frame_buffer(size))
            if data is None:
                self._check_errors()
                raise self._failure(f"the decoder reported frame {meta.index} but did not deliver it")
            pts = meta.pts
            if pts is None:  # no timestamp from the demuxer: continue the previous frame's timing
                pts = 0 if prev_pts is None else prev_pts + (prev_dur or 1)
            elif prev_pts is not None and pts <= prev_pts:
                # a broken file whose timestamps go backwards: keep the frame (never drop one) one
                # tick after the previous, so the encoder sees time moving forward
                pts = prev_pts + 1
                self.repaired += 1
            planes = self._split(data, meta.width, meta.height)
            self.frames_read += 1
            self.last_time = float(pts * self.time_base)  # type: ignore[operator]
            duration = meta.duration or self._source_duration(pts)
            prev_pts, prev_dur = pts, duration
            yield Frame(meta.index, pts, duration, planes, recycle=self._recycler(data))
        self._finish()

    def _source_duration(self, pts: int) -> int | None:
        """The container's duration of the frame at ``pts`` (what the software decoder reports)."""
        if self.timing is None or self.time_base is None:
            return None
        seconds = self.timing.duration_at(pts * self.time_base)
        return None if seconds is None else round(seconds / self.time_base)

    def _split(self, data: Any, width: int, height: int) -> list[np.ndarray]:
        flat = np.frombuffer(data, dtype=self.layout.dtype)
        planes, offset = [], 0
        for h, w in self.layout.plane_shapes(width, height):
            planes.append(flat[offset:offset + h * w].reshape(h, w))
            offset += h * w
        return planes

    def _finish(self) -> None:
        proc = self._proc
        assert proc is not None and self._log is not None
        try:
            rc = proc.wait(30)
        except subprocess.TimeoutExpired:
            raise self._failure("the decoder did not exit after its last frame") from None
        proc.stdout.close()  # type: ignore[union-attr]  # read to its end; else it waits for the garbage collector
        self.stderr_read()
        self._check_errors()
        if rc != 0 and not self._killed:
            raise self._failure(f"the decoder failed ({ffmpeg.describe_exit(rc)})")

    def _check_errors(self, pending: _Meta | None = None) -> None:
        if self._log is not None and self._log.first_error is not None:
            raise self._decode_failure(pending)
        if self.strict and self.concealed:  # logged before that frame's showinfo line: not yet read
            found = self.locate_concealed(1)
            at = frame_at(*found[0]) if found else f"a frame at or after frame {self._logged}"
            raise VideoError(f"{self.src}: damaged data in {at}, concealed by the decoder: refused in strict mode")

    def locate_concealed(self, limit: int) -> list[tuple[int, float | None]]:
        """(frame index, seconds) of the first ``limit`` frames whose damage the decoder concealed:
        a second decode (no filters, no output) with -debug_ts, stopped once they are found; run
        only where the reader counted any: in the reader itself that logging (ten lines a frame)
        cost ~0.7 ms of CPU per frame (measured on 64x48 and 1080p H.264)."""
        stream_index, decoder, options = self._input
        args = ["-nostdin", "-hide_banner", "-nostats", "-loglevel", "level+info", "-debug_ts",
                *decode_args(self.src, stream_index, decoder, options, None), "-f", "null", "-"]
        proc = ffmpeg.popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        found: list[tuple[int, float | None]] = []
        decoded, flagged = 0, False
        try:
            for raw in proc.stderr:  # type: ignore[union-attr]
                for m in _DECODER_EVENT.finditer(raw.decode("utf-8", "replace")):
                    if m.group(1) is None:  # the warning: about the decoder's next frame
                        flagged = True
                        continue
                    if flagged:
                        found.append((decoded, None if m.group(1) == "NOPTS" else _seconds(m.group(2))))
                        flagged = False
                    decoded += 1
                if len(found) >= limit:
                    break
        finally:
            ffmpeg.stop_process(proc)
            proc.stderr.close()  # type: ignore[union-attr]
        return [self._frame_at_time(i, t) for i, t in found[:limit]]

    def _frame_at_time(self, counted: int, seconds: float | None) -> tuple[int, float | None]:
        """The index of the frame this reader logged at ``seconds``: exact, where counting the second
        decode's log lines is not (ffmpeg's threads write that log at once; under load a line can be
        lost or garbled, and every later count is off). The count where the reader has no such frame:
        a window of the stream (a chunk counts from the stream's start), or a frame not logged yet."""
        if seconds is None or self.window is not None or self.time_base is None or not self._frame_pts:
            return counted, seconds
        pts = np.frombuffer(bytes(self._frame_pts), dtype=np.int64)  # a copy: the log thread may append
        gap = np.where(pts != _NO_PTS, np.abs(pts * float(self.time_base) - seconds), np.inf)
        best = int(np.argmin(gap))
        return (best, seconds) if gap[best] <= _SAME_TIME else (counted, seconds)

    def _decode_failure(self, pending: _Meta | None, drain_seconds: float = 3.0) -> VideoError:
        """ffmpeg logged an error. Where it happened is not exact (its demuxer reads ahead and
        its decoder runs several frames in parallel), so let the decoder run on for a moment,
        discarding frames: a file that is cut short then shows where its decodable video ends."""
        frames, end = self.frames_read, self.last_time
        deadline = time.monotonic() + drain_seconds
        try:
            while time.monotonic() < deadline:
                meta, pending = (pending, None) if pending is not None else (self._next_meta(), None)
                if meta is None or self._read_exact(self.layout.frame_bytes(meta.width, meta.height)) is None:
                    break
                frames += 1
                if meta.pts is not None and self.time_base is not None:
                    end = float((meta.pts + (meta.duration or 0)) * self.time_base)
            else:
                end = None  # still going: it did not end early
        except VideoError:
            pass
        error = self._log.first_error if self._log is not None else None
        slack = max(0.5, 3.0 / self.fps) if self.fps else 0.5
        if self.duration and end is not None and end < self.duration - slack:
            return VideoError(f"{self.src}: decoding failed after {frames} frames ({end:.3f} s of "
                              f"{self.duration:.3f} s): the rest of the file is missing or unreadable: {error}")
        count, pts = self._error_at or (0, None)
        near = (f"near frame {count} ({float(pts * self.time_base):.3f} s)"
                if count and pts is not None and self.time_base is not None else "near the start")
        return VideoError(f"{self.src}: decoding failed {near}: {error}")

    def _failure(self, what: str | None) -> VideoError:
        frames, pts = (self._error_at if what is None and self._error_at is not None
                       else (self.frames_read, None))
        seconds = (float(pts * self.time_base) if pts is not None and self.time_base is not None
                   else self.last_time if frames else None)
        total = f" of {self.duration:.3f} s" if self.duration else ""
        where = (f"after {frames} frames ({seconds:.3f} s{total})" if frames and seconds is not None
                 else f"after {frames} frames" if frames else "before the first frame")
        detail = self.detail()
        head = what or "decoding failed"
        return VideoError(f"{self.src}: {head} {where}: {detail}" if detail else f"{self.src}: {head} {where}")


def frame_at(index: int, seconds: float | None) -> str:
    """'frame 3 (0.120 s)', for messages and notes."""
    return f"frame {index}" + (f" ({seconds:.3f} s)" if seconds is not None else "")


def _seconds(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
