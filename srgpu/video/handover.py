"""Decoding that starts on one decoder and hands over to a cheaper one once it has proved exact.

NVDEC frees about 8 ms of CPU per 1080p H.264 frame for the encoder, but ffmpeg's *_cuvid
decoders take about 0.6 s longer to start (a CUDA context), which a short video never earns back.
So both start at once: the software decoder delivers frames from the first one, while NVDEC,
once up, decodes the same stream from the start, its frames behind the software decoder's thrown
away. When it has caught up, each frame both decoders produced is compared, samples and
timestamp; after ``agree`` consecutive equal frames the software decoder is stopped and every
later frame comes from NVDEC. A frame that differs (or an NVDEC failure, or a frame it skips)
stops NVDEC instead, and the software decoder, which is always right, decodes the rest: the
output is the software decoder's either way (hwdecode's docstring says what it does not compare:
NVDEC derives a frame's duration from the frame rate, so the last frame's may differ by a tick).
"""

from __future__ import annotations

import queue
import threading
from fractions import Fraction
from typing import Any, Callable, Iterator

import numpy as np

from .errors import VideoError
from .hwdecode import TRIAL_FRAMES
from .reader import Frame, Reader
from .verify import SourceTiming

AGREE_FRAMES = TRIAL_FRAMES  # a decoder that differs at all (cropping, range, depth) differs on every frame
_QUEUE = 8  # frames the second decoder may run ahead of the first while they are compared
_END = object()


class TakeoverMismatch(VideoError):
    """The decoder that took over did not give the frames the source holds after the handover:
    the video must be decoded again by the first decoder alone."""


class HandoverReader:
    """Frames of ``first`` until ``second`` has given ``agree`` frames equal to first's, then
    ``second``'s. The pipeline's Reader interface: start, frames, kill and the attributes it reads.
    After the run, ``handover_at`` is the position of the first frame ``second`` gave (None if it
    never took over) and ``note`` says why it did not, where that is worth telling the user."""

    def __init__(self, first: Reader, second: Reader, agree: int = AGREE_FRAMES,
                 second_name: str | None = None, timing: SourceTiming | None = None) -> None:
        if agree < 1:
            raise ValueError("agree must be at least 1")
        self.first, self.second = first, second
        self.agree = agree
        self.second_name = second_name or "the second decoder"
        self.timing = timing  # the source's packets: the second decoder's frames after a handover must be these
        self.handover_at: int | None = None
        self.note: str | None = None
        self.frames_read = 0
        self.last_time: float | None = None
        self._queue: queue.Queue = queue.Queue(maxsize=_QUEUE)
        self._stop = threading.Event()
        self._pump: threading.Thread | None = None
        self._head: Any = None  # the second decoder's oldest frame not yet compared

    # ------------------------------------------------------------ what the pipeline reads

    @property
    def src(self) -> Any:
        return self.first.src

    @property
    def size(self) -> tuple[int, int] | None:
        return self.first.size

    @property
    def layout(self) -> Any:
        return self.first.layout

    @property
    def time_base(self) -> Fraction | None:
        return self.first.time_base

    @property
    def repaired(self) -> int:
        # after the handover the second decoder has read every frame, with the first's timestamps
        return self.second.repaired if self.handover_at is not None else self.first.repaired

    @property
    def concealed(self) -> int:
        # frames flagged as concealed damage: before a handover both decoded the same frames
        return max(self.first.concealed, self.second.concealed)

    @property
    def allocate(self) -> Callable[[int], Any]:
        return self.first.allocate

    @allocate.setter
    def allocate(self, fn: Callable[[int], Any]) -> None:
        self.first.allocate = self.second.allocate = fn

    @property
    def duration(self) -> float | None:
        return self.first.duration

    @duration.setter
    def duration(self, value: float | None) -> None:
        self.first.duration = self.second.duration = value

    @property
    def fps(self) -> float | None:
        return self.first.fps

    @fps.setter
    def fps(self, value: float | None) -> None:
        self.first.fps = self.second.fps = value

    # ------------------------------------------------------------ running

    def start(self) -> None:
        self.first.start()
        try:
            self.second.start()
        except VideoError as e:
            self._give_up(f"{self.second_name} did not start: {e}")

    def kill(self) -> None:
        self._stop.set()
        self.first.kill()
        self.second.kill()

    def frames(self) -> Iterator[Frame]:
        """Frames in presentation order, first's then (from the handover) second's."""
        if not self._stop.is_set() and self.note is None:
            # started here, not in start(): the pipeline sets ``allocate`` in between
            self._pump = threading.Thread(target=self._run_second, name="srgpu-video-handover", daemon=True)
            self._pump.start()
        trial = self._pump is not None
        agreed = 0
        first_frames = self.first.frames()
        try:
            for frame in first_frames:
                if trial:
                    verdict = self._compare(frame)
                    if verdict is False:
                        trial = False
                    elif verdict:
                        agreed += 1
                self._count(frame)
                yield frame
                if trial and agreed >= self.agree and self._source_read():
                    break
            else:
                return  # the first decoder gave every frame
            self.handover_at = self.frames_read
            self.first.kill()
            first_frames.close()
            yield from self._second_frames(frame)
        finally:
            if self.handover_at is None:
                self._stop_second()

    def _source_read(self) -> bool:
        """Whether the source's packets are known, which the frames after a handover are checked
        against (read in the background meanwhile; the first decoder goes on until then)."""
        if self.timing is None or not self.timing.ready():
            return self.timing is None
        try:
            self.timing.packets()
        except VideoError as e:
            self._give_up(f"cannot read the source's packets to check {self.second_name}'s frames: {e}")
            return False
        return True

    def _second_frames(self, last: Frame) -> Iterator[Frame]:
        """The second decoder's frames after ``last``, each checked against the source's own frames
        after it (timestamps; the second Reader took durations from them too): nothing compares
        these frames with the first decoder's any more, and a decoder that ends a frame early ends
        as quietly as one that is done."""
        expect = last.index + 1
        tb = self.first.time_base
        due = self.timing.frames_after(last.pts * tb) if self.timing is not None else None  # type: ignore[operator]
        given = 0
        while (item := self._take()) is not _END:
            if isinstance(item, BaseException):
                raise item
            if item.index != expect:  # cannot happen while both number frames alike: say so if it does
                raise VideoError(f"{self.src}: {self.second_name} gave frame {item.index} where frame "
                                 f"{expect} was due after the handover")
            if due is not None:
                at = item.pts * tb  # type: ignore[operator]
                if given >= len(due) or due[given][0] != at:
                    where = (f"the source's next frame is at {float(due[given][0]):.3f} s" if given < len(due)
                             else "the source has no more frames")
                    raise TakeoverMismatch(f"{self.src}: after the handover {self.second_name} gave a frame at "
                                           f"{float(at):.3f} s where {where}")
            expect += 1
            given += 1
            self._count(item)
            yield item
        if due is not None and not self._stop.is_set() and given != len(due):
            raise TakeoverMismatch(f"{self.src}: after the handover {self.second_name} gave {given} frames where the "
                                   f"source holds {len(due)}: it is missing the frame at {float(due[given][0]):.3f} s")

    # ------------------------------------------------------------ the second decoder

    def _run_second(self) -> None:
        try:
            for frame in self.second.frames():
                if not self._put(frame):
                    return
            self._put(_END)
        except BaseException as e:  # noqa: BLE001 - handed to frames(), which decides what it means
            self._put(e)

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                pass
        return False

    def _take(self) -> Any:
        """The second decoder's next item, waiting for it (the first decoder is gone by now)."""
        while not self._stop.is_set():
            try:
                return self._queue.get(timeout=0.05)
            except queue.Empty:
                if self._pump is not None and not self._pump.is_alive() and self._queue.empty():
                    raise VideoError(f"{self.src}: {self.second_name} stopped without a word") from None
        return _END  # killed: the pipeline is stopping and reports its own error

    def _compare(self, frame: Frame) -> bool | None:
        """True if the second decoder's frame of the same position equals ``frame``; None if it has
        not decoded that far yet (its earlier frames are dropped); False if the trial is over."""
        while True:
            if self._head is None:
                try:
                    self._head = self._queue.get_nowait()
                except queue.Empty:
                    return None
            other = self._head
            if other is _END:
                return self._give_up(f"{self.second_name} gives fewer frames than the software decoder")
            if isinstance(other, BaseException):
                return self._give_up(f"{self.second_name} failed: {other}")
            if other.index < frame.index:
                self._drop_head()
                continue
            if other.index > frame.index:
                return self._give_up(f"{self.second_name} skips frame {frame.index}")
            same_time = other.pts == frame.pts and self.second.time_base == self.first.time_base
            same = same_time and all(np.array_equal(a, b) for a, b in zip(other.planes, frame.planes))
            self._drop_head()
            if not same:
                what = "decodes" if same_time else "times"
                return self._give_up(f"{self.second_name} {what} frame {frame.index} differently from the "
                                     "software decoder")
            return True

    def _drop_head(self) -> None:
        if self._head is not None and self._head is not _END and not isinstance(self._head, BaseException):
            if self._head.recycle is not None:
                self._head.recycle()
        self._head = None

    def _give_up(self, why: str) -> bool:
        self.note = f"{why}: decoded on the CPU"
        self._stop_second()
        return False

    def _stop_second(self) -> None:
        self._stop.set()
        self.second.kill()
        self._drop_head()

    def _count(self, frame: Frame) -> None:
        self.frames_read += 1
        if self.time_base is not None:
            self.last_time = float(frame.pts * self.time_base)
