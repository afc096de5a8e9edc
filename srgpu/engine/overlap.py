"""Several frames in flight on the GPU: upload, compute and download overlap.

Each slot owns pinned host output buffers (one per plane), device buffers and its own copy
stream. A frame's planes are uploaded on the slot's stream straight from where the caller holds
them (the video reader decodes into pinned buffers from ``input_buffer``, so the upload is a DMA
with no host copy), computed on the engine's stream (which waits for the upload's event), and
downloaded on the slot's stream (which waits for the compute's event). The host waits only for a
frame's upload (so the caller may reuse its buffer) and for the frame it hands on, never for the
device as a whole, and it waits asleep (blocking-sync events), not spinning a core that the
encoder could use; nothing is allocated per frame.

A result's planes are views of the slot's pinned output: the consumer (the video writer) calls
``release()`` once it has written them, and only then is the slot reused.

The mechanism (slots, their streams and events, queueing one job's upload / compute / download,
the waits) is ``SlotPipeline``, shared by the video frames' ``OverlappedGPU`` and the images'
srgpu.engine.imageproc.OverlappedImages, which differ only in their buffers and their compute.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ..errors import EngineError
from .frames import FrameFormat, FrameProcessor
from .pinned import empty_pinned

if TYPE_CHECKING:
    from .gpu import GPUEngine

DEFAULT_SLOTS = 9
IN_FLIGHT = 3  # frames queued on the GPU before the host waits for the oldest


@dataclass
class Slot:
    index: int
    host_out: list[np.ndarray]
    dev_in: list[Any]
    dev_out: list[Any]
    stream: Any
    uploaded: Any
    computed: Any
    downloaded: Any
    starts: tuple[Any, Any, Any] | None = None  # timed processors: upload, compute, download start events
    busy: bool = False
    store: Any = None  # a processor's own per-slot buffers (OverlappedImages: sized per image)


@dataclass
class Pending:
    """A submitted frame; ``wait()`` returns its upscaled planes (pinned views)."""

    slot: Slot
    owner: "OverlappedGPU"
    tag: Any = None
    _planes: list[np.ndarray] | None = field(default=None, repr=False)

    def wait(self) -> list[np.ndarray]:
        if self._planes is None:
            self.owner._wait(self.slot)
            self._planes = list(self.slot.host_out)
        return self._planes

    def stage_ms(self) -> dict[str, float]:
        """Timed processors, after ``wait()`` and before ``release()``: ms of this frame's upload,
        compute ("gpu") and download, by CUDA events around each."""
        from cupy.cuda import get_elapsed_time

        slot = self.slot
        if slot.starts is None:
            raise ValueError("stage times need a processor made with timed=True")
        self.wait()
        return {"upload": get_elapsed_time(slot.starts[0], slot.uploaded),
                "gpu": get_elapsed_time(slot.starts[1], slot.computed),
                "download": get_elapsed_time(slot.starts[2], slot.downloaded)}

    def release(self) -> None:
        """The planes have been consumed: the slot may take the next frame."""
        self.owner._release(self.slot)


class SlotPipeline:
    """Slots, each with its own copy stream and events, and the queueing of one job on a slot:
    ``upload`` on the slot's stream, ``compute`` on the engine's stream once the upload is done,
    ``download`` on the slot's stream once the compute is done. The host waits for the upload
    only (so that the caller may reuse its input at once), asleep on blocking-sync events."""

    engine: GPUEngine

    def _init_slots(self, engine: GPUEngine, count: int, timed: bool,
                    buffers: Callable[[int], tuple[list[Any], list[Any], list[Any]]]) -> None:
        """``count`` slots; ``buffers(i)``: slot i's (host outputs, device inputs, device outputs)."""
        import cupy as cp

        self._cp = cp
        self._cond = threading.Condition()
        self._free: deque[Slot] = deque()
        self._slots: list[Slot] = []  # all of them, free or not: close() waits for each one's copies
        with engine.device, engine._guard("allocating pinned frame buffers"):
            for i in range(count):
                host_out, dev_in, dev_out = buffers(i)
                stream = cp.cuda.Stream(non_blocking=True)
                # block=True: a host wait sleeps instead of spinning a CPU core (cudaEventBlockingSync)
                events = [cp.cuda.Event(block=True, disable_timing=not timed) for _ in range(3)]
                starts = tuple(cp.cuda.Event(block=True) for _ in range(3)) if timed else None
                self._slots.append(Slot(i, host_out, dev_in, dev_out, stream, *events, starts))
        self._free.extend(self._slots)

    def _queue(self, slot: Slot, upload: Callable[[Any], None], compute: Callable[[], None],
               download: Callable[[Any], None], what: str = "queueing a frame", wait_upload: bool = True) -> None:
        """Queue one job on ``slot`` (acquired); returns once its upload is done (at once without
        ``wait_upload``: the caller uploads from the slot's own memory). The slot is released
        again if queueing fails."""
        engine = self.engine
        try:
            with engine.device, engine._guard(what):
                if slot.starts:
                    slot.starts[0].record(slot.stream)
                upload(slot.stream)
                slot.uploaded.record(slot.stream)
                engine.stream.wait_event(slot.uploaded)
                if slot.starts:
                    slot.starts[1].record(engine.stream)
                with engine.stream:
                    compute()
                slot.computed.record(engine.stream)
                slot.stream.wait_event(slot.computed)
                if slot.starts:
                    slot.starts[2].record(slot.stream)
                download(slot.stream)
                slot.downloaded.record(slot.stream)
                # the caller reuses the input's memory as soon as this returns: wait for the upload
                # alone (its own stream, ~0.2 ms for 1080p), not for the compute queued behind it
                if wait_upload:
                    slot.uploaded.synchronize()
        except BaseException:
            self._release(slot)
            raise

    def _wait(self, slot: Slot) -> None:
        with self.engine.device, self.engine._guard("processing a frame"):
            slot.downloaded.synchronize()

    def _acquire(self) -> Slot:
        with self._cond:
            while not self._free:
                self._cond.wait()
            slot = self._free.popleft()
            slot.busy = True
            return slot

    def _release(self, slot: Slot) -> None:
        with self._cond:
            if slot.busy:
                slot.busy = False
                self._free.append(slot)
                self._cond.notify()

    def _close_slots(self) -> None:
        """Wait for everything queued (so no buffer is freed under a running copy): the compute
        stream, and every slot's copy stream, whose downloads may still be running on an error path
        where nobody waited for them."""
        try:
            with self.engine.device:
                self.engine.stream.synchronize()
                for slot in self._slots:
                    slot.stream.synchronize()
        except Exception as e:  # noqa: BLE001 - reported, not hidden: the caller is already failing or done
            raise EngineError(f"GPU error while finishing: {' '.join(str(e).split())}") from None
        # the device buffers go back to CuPy's pool now, not when this object is collected: a chunk
        # worker's next processor is made while this one's frames are still being written (their
        # pinned host copies stay), and took 144 MiB more of the GPU (BENCHMARKS.md issue 40)
        for slot in self._slots:
            slot.dev_in, slot.dev_out = [], []


class OverlappedGPU(FrameProcessor, SlotPipeline):
    """Frames of one format through a GPUEngine with up to ``slots`` frames between submit and
    release. ``submit`` blocks while every slot is taken (backpressure from the consumer).
    ``timed``: record CUDA events around each stage of a frame (Pending.stage_ms; srgpu bench)."""

    engine: GPUEngine

    def __init__(self, engine: GPUEngine, fmt: FrameFormat, slots: int | None = None, timed: bool = False) -> None:
        slots = DEFAULT_SLOTS if slots is None else slots
        if slots < 2:
            raise ValueError("overlap needs at least 2 slots")
        import cupy as cp

        FrameProcessor.__init__(self, engine, fmt)
        self.in_flight = max(1, min(IN_FLIGHT, slots - 1))

        def buffers(_: int) -> tuple[list[Any], list[Any], list[Any]]:
            return ([empty_pinned(sp.out_shape, dtype=fmt.dtype) for sp in fmt.specs],
                    [cp.empty(s, dtype=fmt.dtype) for s in fmt.in_shapes],
                    [cp.empty(sp.out_shape, dtype=fmt.dtype) for sp in fmt.specs])

        self._init_slots(engine, slots, timed, buffers)

    def input_buffer(self, nbytes: int) -> np.ndarray:
        """Pinned host memory: planes decoded into it are uploaded by DMA, with no copy on the host."""
        with self.engine.device, self.engine._guard("allocating a pinned input buffer"):
            return empty_pinned(nbytes, dtype=np.uint8)

    def submit(self, planes: Sequence[np.ndarray], tag: Any = None) -> "Pending":
        """Queue one frame; returns once its planes are on the device (the base class's promise: the
        caller may reuse them), or later if every slot is in use. Planes in pinned memory (from
        ``input_buffer``) are uploaded by DMA; others are staged by the driver."""
        fmt = self.fmt
        if len(planes) != len(fmt.in_shapes):
            raise ValueError(f"{len(planes)} planes, expected {len(fmt.in_shapes)}")
        for p, shape in zip(planes, fmt.in_shapes):
            if p.shape != shape or p.dtype != fmt.dtype:
                raise ValueError(f"plane {p.shape} {p.dtype} does not match the stream's {shape} {fmt.dtype}")
        slot = self._acquire()
        engine = self.engine

        def upload(stream: Any) -> None:
            for dev, src in zip(slot.dev_in, planes):
                dev.set(np.ascontiguousarray(src), stream=stream)

        def compute() -> None:
            for src, out, spec in zip(slot.dev_in, slot.dev_out, fmt.specs):
                engine.plane_device(src, out, spec, fmt.max_value)

        def download(stream: Any) -> None:
            for dev, host in zip(slot.dev_out, slot.host_out):
                dev.get(stream=stream, out=host, blocking=False)

        self._queue(slot, upload, compute, download)
        return Pending(slot, self, tag)

    def close(self) -> None:
        """Wait for everything queued (SlotPipeline._close_slots)."""
        self._close_slots()
