"""Image files decoded and encoded in worker processes, so that the codecs' Python, and the
interpreter lock each codec thread needs between its calls into OpenCV, is not shared with the
engine's thread. With threads, a folder of small photos on 16 cores ran at about 3x the codec
floor while the readers and writers mostly waited for the lock; with these processes about 1.5x
(BENCHMARKS.md, "Codecs in processes").

Pixels pass through one shared arena, not through pipes: an anonymous memory file (memfd) that
this process maps and every worker maps too (its descriptor is handed to each worker as it
starts). A decoded image is written by its worker into a block the caller reserved; an upscaled
one is copied by the caller into a block and encoded from there. Only a few hundred bytes per file
cross the pipes. Workers come from a forkserver (clean processes, never forks of one holding a CUDA
context and threads) with the codecs preloaded, ignore Ctrl-C (the caller decides what completes)
and live as long as this process, for the next batch.

srgpu.images decides which files go this way (small and medium images of large batches on a GPU
engine) and keeps the thread path for the rest; what is written is the same either way.
"""

from __future__ import annotations

import atexit
import mmap
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import types
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import reduction
from pathlib import Path
from typing import Any

import numpy as np

from .imagefile import ChannelOrder, ImageData, Written, read_image_data, write_image_atomic

ALIGN = 4096  # blocks start on a page: the encoder's and the engine's copies run at full speed


class ArenaFull(Exception):
    """No free block of the size asked for (the caller takes the thread path for that file)."""


class Arena:
    """Blocks of one shared memory file, handed out first fit and given back in any order (by the
    calling process only; workers just read and write the blocks they are told of)."""

    def __init__(self, size: int) -> None:
        if not hasattr(os, "memfd_create"):
            raise OSError("shared memory files (memfd) need Linux")
        self.size = -(-size // ALIGN) * ALIGN
        self.fd = os.memfd_create("srgpu-codec-arena", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, self.size)
            self.map = mmap.mmap(self.fd, self.size)
        except BaseException:
            os.close(self.fd)
            raise
        self._lock = threading.Lock()
        self._free: list[tuple[int, int]] = [(0, self.size)]  # (offset, size), by offset
        self._used: dict[int, int] = {}

    def alloc(self, nbytes: int) -> int:
        size = max(ALIGN, -(-nbytes // ALIGN) * ALIGN)
        with self._lock:
            for i, (offset, free) in enumerate(self._free):
                if free >= size:
                    if free == size:
                        del self._free[i]
                    else:
                        self._free[i] = (offset + size, free - size)
                    self._used[offset] = size
                    return offset
        raise ArenaFull(nbytes)

    def free(self, offset: int) -> None:
        with self._lock:
            size = self._used.pop(offset)
            blocks = self._free
            i = 0
            while i < len(blocks) and blocks[i][0] < offset:
                i += 1
            blocks.insert(i, (offset, size))
            if i + 1 < len(blocks) and offset + size == blocks[i + 1][0]:  # join the next
                blocks[i] = (offset, size + blocks.pop(i + 1)[1])
            if i > 0 and blocks[i - 1][0] + blocks[i - 1][1] == offset:  # and the previous
                prev = blocks.pop(i - 1)
                blocks[i - 1] = (prev[0], prev[1] + blocks[i - 1][1])

    @property
    def used(self) -> int:
        with self._lock:
            return sum(self._used.values())

    def view(self, offset: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.ndarray(shape, np.dtype(dtype), buffer=self.map, offset=offset)

    def close(self) -> None:
        try:
            self.map.close()
        except BufferError:  # arrays still view it: the memory goes when they do
            pass
        os.close(self.fd)


class _ArenaHandle:
    """The arena's descriptor as a worker receives it: duplicated into the worker by
    multiprocessing as it starts the process (reduction.DupFd), mapped there by ``_start_worker``."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size

    def __reduce__(self) -> tuple[Any, ...]:
        return (_ArenaHandle._rebuild, (reduction.DupFd(self.fd), self.size))

    @staticmethod
    def _rebuild(dup: Any, size: int) -> "_ArenaHandle":
        return _ArenaHandle(dup.detach(), size)


_worker_map: mmap.mmap | None = None  # in a worker: the arena


def _start_worker(handle: _ArenaHandle) -> None:
    global _worker_map
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_map = mmap.mmap(handle.fd, handle.size)
    os.close(handle.fd)


@dataclass(frozen=True)
class Decoded:
    """What a worker's read sends back: the image's metadata, its pixels in the arena at the block
    the caller gave (``pixels`` None), or, when they did not fit the block, the pixels themselves."""

    shape: tuple[int, ...]
    dtype: str
    icc: bytes | None
    orientation: int
    order: ChannelOrder
    seconds: float  # the worker's time on it
    pixels: np.ndarray | None = None


def _pid_after(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def _read(path: str, order: ChannelOrder, offset: int, capacity: int) -> Decoded:
    t0 = time.perf_counter()
    data = read_image_data(path, order)
    px = data.pixels
    if px.nbytes > capacity:
        return Decoded(px.shape, px.dtype.str, data.icc, data.orientation, data.order, time.perf_counter() - t0, px)
    np.copyto(np.ndarray(px.shape, px.dtype, buffer=_worker_map, offset=offset), px)  # type: ignore[arg-type]
    return Decoded(px.shape, px.dtype.str, data.icc, data.orientation, data.order, time.perf_counter() - t0)


def _write(dst: str, offset: int, shape: tuple[int, ...], dtype: str, replace: bool, icc: bytes | None,
           order: ChannelOrder, png_compression: int | None) -> tuple[Written, float]:
    t0 = time.perf_counter()
    px = np.ndarray(shape, np.dtype(dtype), buffer=_worker_map, offset=offset)  # type: ignore[arg-type]
    written = write_image_atomic(Path(dst), px, replace=replace, icc=icc, order=order,
                                 png_compression=png_compression, scratch=True)
    return written, time.perf_counter() - t0


class CodecProcesses:
    """``workers`` codec processes and their arena of ``arena_bytes``."""

    def __init__(self, workers: int, arena_bytes: int) -> None:
        self.workers = workers
        self.arena = Arena(arena_bytes)
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload([__name__])
        self._pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_start_worker,
                                         initargs=(_ArenaHandle(self.arena.fd, self.arena.size),))
        self.broken = False
        self.pids: set[int] = set()

    @property
    def is_broken(self) -> bool:
        """A worker died: the pool takes no more work (ProcessPoolExecutor's own flag, or ours)."""
        return self.broken or bool(getattr(self._pool, "_broken", False))

    def read(self, path: Path, order: ChannelOrder, offset: int, capacity: int) -> Future:
        """Decode ``path`` into the arena at ``offset`` (``capacity`` bytes): a Future of Decoded."""
        return self._pool.submit(_read, str(path), order, offset, capacity)

    def pixels(self, decoded: Decoded, offset: int) -> np.ndarray:
        """A decoded image's pixels: a view of its block (valid until the block is freed)."""
        if decoded.pixels is not None:
            return decoded.pixels
        return self.arena.view(offset, decoded.shape, decoded.dtype)

    def write(self, dst: Path, offset: int, pixels_shape: tuple[int, ...], dtype: Any, replace: bool,
              icc: bytes | None, order: ChannelOrder, png_compression: int | None) -> Future:
        """Encode the image at ``offset`` and publish it at ``dst`` (write_image_atomic): a Future
        of (Written, the worker's seconds)."""
        return self._pool.submit(_write, str(dst), offset, tuple(pixels_shape), np.dtype(dtype).str, replace,
                                 icc, order, png_compression)

    def start(self) -> None:
        """Start every worker now, each busy a moment so that the pool starts the next. The
        workers need nothing of the caller's main module, so multiprocessing is shown an empty one
        meanwhile: a script without a ``__main__`` guard is not run again in each of them."""
        main = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            self.pids = {f.result() for f in [self._pool.submit(_pid_after, 0.02) for _ in range(self.workers)]}
        finally:
            sys.modules["__main__"] = main

    def stop(self, timeout: float = 10.0) -> None:
        """After a worker died: end the others now and wait until they are gone, so that none can
        still publish a file the caller is about to write again."""
        self.broken = True
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while self.pids and time.monotonic() < deadline:
            for pid in list(self.pids):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    self.pids.discard(pid)
            if self.pids:
                time.sleep(0.005)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.arena.close()


_shared: CodecProcesses | None = None
_shared_lock = threading.Lock()


def codec_processes(workers: int, arena_bytes: int) -> CodecProcesses:
    """This process's codec workers: started on first use, kept for later batches of the same
    shape (a new pool when the worker count or arena size differs, or after one broke)."""
    global _shared
    with _shared_lock:
        if _shared is not None and (_shared.is_broken or _shared.workers != workers or _shared.arena.size < arena_bytes
                                    or _shared.arena.used):
            old, _shared = _shared, None
            old.close()
        if _shared is None:
            _shared = CodecProcesses(workers, arena_bytes)
            try:
                _shared.start()
            except BaseException:
                _shared.close()
                _shared = None
                raise
        return _shared


def discard(procs: CodecProcesses) -> None:
    """Mark ``procs`` broken (a worker died): the next batch starts new ones."""
    procs.broken = True


@atexit.register
def _close_shared() -> None:
    global _shared
    if _shared is not None:
        _shared.close()
        _shared = None
