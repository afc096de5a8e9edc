"""Reader -> processing -> writer, each on its own thread, joined by bounded queues.

Frames keep their order (one processing thread, FIFO queues) and none is dropped: every stage
hands on exactly what it received. The first error in any stage stops the whole pipeline: the
other stages see the stop at their next queue operation, the child processes are killed (which
unblocks any pipe read or write), and the error is raised in the caller's thread. Ctrl-C in the
caller's thread does the same and re-raises KeyboardInterrupt.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..engine.base import Engine
from ..engine.frames import FrameFormat, FrameProcessor, PlaneSpec
from .errors import VideoError
from .reader import Frame, Reader
from .writer import Writer

Progress = Callable[[int, "int | None"], None]
_END = object()


class _Stopped(Exception):
    """Raised inside a stage when another stage has failed."""


class _Stop:
    def __init__(self) -> None:
        self.event = threading.Event()
        self._lock = threading.Lock()
        self.stage: str | None = None
        self.error: BaseException | None = None

    def fail(self, stage: str, error: BaseException) -> None:
        with self._lock:
            if self.error is None:
                self.stage, self.error = stage, error
        self.event.set()


class _Channel:
    """A bounded FIFO whose put/get give up as soon as the pipeline stops."""

    def __init__(self, size: int, stop: _Stop) -> None:
        self._q: queue.Queue = queue.Queue(maxsize=size)
        self._stop = stop

    def put(self, item: object) -> None:
        while not self._stop.event.is_set():
            try:
                self._q.put(item, timeout=0.05)
                return
            except queue.Full:
                pass
        raise _Stopped

    def get(self) -> object:
        while not self._stop.event.is_set():
            try:
                return self._q.get(timeout=0.05)
            except queue.Empty:
                pass
        raise _Stopped


@dataclass(frozen=True)
class PipelineStats:
    frames: int
    seconds: float


def run_pipeline(reader: Reader, engine: Engine, specs: Sequence[PlaneSpec], max_value: int, writer: Writer,
                 progress: Progress | None = None, total: int | None = None, depth: int = 4,
                 slots: int | None = None, engine_free: Callable[[], None] | None = None,
                 cancel: threading.Event | None = None) -> PipelineStats:
    """Decode, upscale and encode every frame; raises the first stage's error (after stopping
    everything) or KeyboardInterrupt. ``engine_free`` is called once the last frame is processed
    (from then on only the encoder works: a chunk worker may start its next chunk on the engine);
    ``cancel``, when set, stops the pipeline as Ctrl-C would (for a pipeline in a thread)."""
    stop = _Stop()
    decoded, upscaled = _Channel(depth, stop), _Channel(depth, stop)
    started = time.perf_counter()

    if reader.size is None:
        raise ValueError("run_pipeline needs the reader's frame size (the stream header's)")
    # the frame format is known before decoding, so frames are decoded straight into the engine's
    # input buffers (pinned memory on a GPU, uploaded with no host copy); the reader refuses
    # frames of another size. A slot is held by each frame in flight (<= 3), in the queue (depth)
    # and in the writer (2: the one being written, the one lent to the pipe until the next is
    # written): fewer slots than that could block submit forever.
    dtype = reader.layout.dtype
    fmt = FrameFormat(tuple((h, w) for h, w in reader.layout.plane_shapes(*reader.size)), dtype, tuple(specs),
                      max_value)
    processor: FrameProcessor | None = None

    def read() -> None:
        for frame in reader.frames():
            decoded.put(frame)
        decoded.put(_END)

    def process() -> None:
        # up to processor.in_flight frames are queued on the engine before the oldest is awaited,
        # so a GPU engine overlaps upload, compute and download; order is kept by the FIFO
        pending: deque[tuple[Frame, object]] = deque()
        assert processor is not None  # set before the threads start

        def to_writer() -> None:  # the oldest frame on the engine, waited for and queued for the writer
            frame, job = pending.popleft()
            frame.planes = job.wait()  # type: ignore[attr-defined]
            frame.release = job.release  # type: ignore[attr-defined]
            _check_planes(engine, frame, specs, dtype)
            upscaled.put(frame)

        try:
            while (item := decoded.get()) is not _END:
                frame: Frame = item  # type: ignore[assignment]
                while len(pending) >= processor.in_flight:
                    to_writer()
                job = processor.submit(frame.planes)
                if frame.recycle is not None:  # submit has consumed the input planes
                    frame.recycle()
                    frame.recycle = None
                pending.append((frame, job))
            while pending:
                to_writer()
        except BaseException:
            with contextlib.suppress(Exception):  # the first error is the one to report
                processor.close()
            raise
        processor.close()
        if engine_free is not None:
            engine_free()
        upscaled.put(_END)

    def write() -> None:
        started_writer = False
        while (item := upscaled.get()) is not _END:
            frame: Frame = item  # type: ignore[assignment]
            if not started_writer:
                writer.start(reader.time_base, frame.pts)  # type: ignore[arg-type]
                started_writer = True
            writer.write(frame)  # the writer calls frame.release once the encoder has the planes
            if progress is not None:
                progress(1, total)
        if started_writer:
            writer.finish()

    def stage(name: str, fn: Callable[[], None]) -> threading.Thread:
        def body() -> None:
            try:
                fn()
            except _Stopped:
                pass
            except BaseException as e:  # noqa: BLE001 - every failure must stop the pipeline
                stop.fail(name, e)

        t = threading.Thread(target=body, name=f"srgpu-video-{name}", daemon=True)
        t.start()
        return t

    threads: list[threading.Thread] = []
    try:
        # the decoder starts up (process, demuxer, its first frames) while the engine allocates
        # its pinned buffers: the two were in series, and both are fixed costs of every video
        reader.start()
        processor = engine.frame_processor(fmt, slots if slots is not None else depth + 5)
        reader.allocate = processor.input_buffer
        for name, fn in (("reader", read), ("processing", process), ("writer", write)):
            threads.append(stage(name, fn))
    except BaseException as e:  # Ctrl-C or a failure while starting: no child may outlive this
        stop.fail("start", e)
        _shutdown(reader, writer, threads)
        if processor is not None:
            with contextlib.suppress(Exception):
                processor.close()
        raise
    try:
        while any(t.is_alive() for t in threads):
            if stop.event.wait(0.05):
                break
            if cancel is not None and cancel.is_set():
                stop.fail("interrupt", KeyboardInterrupt())
                break
    except KeyboardInterrupt as e:
        stop.fail("interrupt", e)
    if stop.error is not None:
        _shutdown(reader, writer, threads)
        raise stop.error
    for t in threads:
        t.join()
    return PipelineStats(writer.frames_written, time.perf_counter() - started)


def _check_planes(engine: Engine, frame: Frame, specs: Sequence[PlaneSpec], dtype: np.dtype) -> None:
    """An engine that returns the wrong planes would make the encoder read garbage: stop instead."""
    got = [(p.shape, p.dtype) for p in frame.planes]
    want = [(tuple(s.out_shape), dtype) for s in specs]
    if got != want:
        raise VideoError(f"the {engine.name} engine returned planes {got} for frame {frame.index}, "
                         f"expected {want}")


def _shutdown(reader: Reader, writer: Writer, threads: list[threading.Thread]) -> None:
    """Kill both children (unblocking pipe I/O), then wait for the stages to notice. A second
    Ctrl-C during this does not cut it short: the steps are repeated until done."""
    deadline = time.monotonic() + 10.0
    steps: list[Callable[[], None]] = [reader.kill, writer.kill]
    steps += [lambda t=t: t.join(max(0.0, deadline - time.monotonic())) for t in threads]  # type: ignore[misc]
    for step in steps:
        while True:
            try:
                step()
                break
            except KeyboardInterrupt:
                continue
