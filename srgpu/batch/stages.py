"""Plumbing for a batch whose files are decoded and encoded on worker threads: how many threads, a
byte budget for the images in flight, results handed on in submission order, and the time each
stage took. Nothing here knows about images or engines (srgpu.batch.local runs the stages)."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
MAX_DEFAULT_BUDGET = 4 * 2**30  # bytes of images in flight by default, at most
MIN_DEFAULT_BUDGET = 256 * 2**20


def default_budget() -> int:
    """A quarter of the machine's memory, between 256 MiB and 4 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return MAX_DEFAULT_BUDGET // 2
    return int(min(MAX_DEFAULT_BUDGET, max(MIN_DEFAULT_BUDGET, total // 4)))


class Budget:
    """Bytes of images in flight: decoded ones read ahead of the engine, upscaled ones waiting for a
    writer. Only the calling thread takes; writers give back. One image always gets through,
    however large (a 24000x16000 output must not wait forever), and the calling thread never
    waits for room that only it could free: it reads ahead only while there is room (never
    blocking), and waits for writers only while writers hold something."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the memory budget must be at least one byte")
        self.limit = limit
        self._cond = threading.Condition()
        self.reads = 0  # estimated or actual bytes of decoded images not yet upscaled
        self.writes = 0  # bytes of upscaled images handed to writers, not yet written

    def room_for_read(self, nbytes: int) -> bool:
        with self._cond:
            used = self.reads + self.writes
            return used == 0 or used + nbytes <= self.limit

    def take_read(self, nbytes: int) -> None:
        with self._cond:
            self.reads += nbytes

    def give_read(self, nbytes: int) -> None:
        with self._cond:
            self.reads -= nbytes
            self._cond.notify_all()

    def take_write(self, nbytes: int) -> None:
        """Blocks while writers hold bytes and ``nbytes`` more would not fit."""
        with self._cond:
            while self.writes > 0 and self.reads + self.writes + nbytes > self.limit:
                self._cond.wait()
            self.writes += nbytes

    def give_write(self, nbytes: int) -> None:
        with self._cond:
            self.writes -= nbytes
            self._cond.notify_all()


class InOrder(Generic[T]):
    """Results put by any thread under their submission index, taken in index order: results
    come out in the order the work was handed in, whichever worker finished first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._results: dict[int, T] = {}
        self._next = 0

    def put(self, index: int, result: T) -> None:
        with self._lock:
            self._results[index] = result

    def ready(self) -> list[T]:
        """The results from the next index on that are in, up to the first one missing."""
        out = []
        with self._lock:
            while self._next in self._results:
                out.append(self._results.pop(self._next))
                self._next += 1
        return out


class StageClock:
    """Seconds spent in each stage, added up over the threads that ran it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def add(self, stage: str, seconds: float, count: int = 0) -> None:
        with self._lock:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds
            self.counts[stage] = self.counts.get(stage, 0) + count


@dataclass(frozen=True)
class StageTimes:
    """Where a batch's images spent their time, in seconds: reading (decode, orientation) and
    writing (format conversion, encode, publish, manifest) summed over the reader and writer threads; the
    engine's stage (upload, upscale, download, or the CPU engine's whole work) and the calling
    thread's waits, on the calling thread."""

    threads: int  # reader threads, and as many writer threads
    read: float
    process: float
    write: float
    waiting_for_reads: float  # the engine idle until the next image was decoded
    waiting_for_writes: float  # the engine held back until writers freed memory
    images: int  # upscaled (read, processed and handed to a writer)
    input_pixels: int
    output_pixels: int

    @classmethod
    def of(cls, clock: StageClock, threads: int) -> "StageTimes":
        s, c = clock.seconds, clock.counts
        return cls(threads, s.get("read", 0.0), s.get("process", 0.0), s.get("write", 0.0),
                   s.get("wait_read", 0.0), s.get("wait_write", 0.0), c.get("process", 0),
                   c.get("input_pixels", 0), c.get("output_pixels", 0))

    def to_dict(self) -> dict[str, float | int]:
        # "workers": the key srgpu bench FOLDER --json has always written for the reader threads
        return {"workers": self.threads, "read_s": round(self.read, 4), "process_s": round(self.process, 4),
                "write_s": round(self.write, 4), "waiting_for_reads_s": round(self.waiting_for_reads, 4),
                "waiting_for_writes_s": round(self.waiting_for_writes, 4), "images": self.images,
                "input_pixels": self.input_pixels, "output_pixels": self.output_pixels}
