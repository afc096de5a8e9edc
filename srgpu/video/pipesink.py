"""The encoder's input pipe, written without copying frame data where Linux allows it.

A raw 4K frame is 12 MB. ``write()`` copies it into the kernel, which costs the writer thread
3-4 ms of CPU per frame, CPU the encoder then lacks. ``vmsplice()`` lends the pages to the pipe
instead; the encoder's read() then copies them out once. A lent buffer must not change or be
freed until the reader has taken it. It has when at least the pipe's capacity has been written
after it: the pipe never holds more than its capacity, and it is a FIFO. So each frame's planes
(and the callback that gives its GPU slot back) are held until then, or until the pipe is closed
and the reader has exited.

Where vmsplice is missing or refuses a buffer, the sink falls back to write() for good.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from collections import deque
from typing import Any, Callable

import numpy as np

F_GETPIPE_SZ = 1032
DEFAULT_PIPE_BYTES = 1 << 16


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def _load_vmsplice() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.vmsplice
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.POINTER(_IoVec), ctypes.c_size_t, ctypes.c_uint]
    fn.restype = ctypes.c_ssize_t
    return fn


_VMSPLICE = _load_vmsplice() if os.name == "posix" else None


def pipe_capacity(fd: int) -> int:
    try:
        import fcntl

        return int(fcntl.fcntl(fd, F_GETPIPE_SZ))
    except (ImportError, OSError):
        return DEFAULT_PIPE_BYTES


class PipeSink:
    """Writes to pipe ``fd``. ``write`` copies; ``lend`` passes an array's pages without a copy
    where it can; ``hold`` keeps objects (and calls a release callback) until the reader has
    consumed everything written before it. OSError (EPIPE: the reader is gone) propagates."""

    def __init__(self, fd: int, zero_copy: bool = True) -> None:
        self.fd = fd
        self.capacity = pipe_capacity(fd)
        self.written = 0
        self.zero_copy = zero_copy and _VMSPLICE is not None
        self._held: deque[tuple[int, Callable[[], None] | None, Any]] = deque()
        self._lock = threading.Lock()  # release_all() may come from another thread (a kill)
        self._closed = False  # after release_all(): the reader is gone, nothing needs holding

    def write(self, data: bytes | memoryview) -> None:
        view = memoryview(data).cast("B")
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
            self.written += n
        self._reap()

    def lend(self, array: np.ndarray) -> None:
        """Put a C-contiguous array's bytes into the pipe; the caller must ``hold`` it afterwards
        (its memory must stay unchanged until the reader has it)."""
        if not array.flags.c_contiguous:
            raise ValueError("lend() needs a C-contiguous array")
        base, size = array.ctypes.data, array.nbytes
        done = 0
        while done < size and self.zero_copy:
            iov = _IoVec(base + done, size - done)
            n = _VMSPLICE(self.fd, ctypes.byref(iov), 1, 0)
            if n < 0:
                err = ctypes.get_errno()
                if err == errno.EINTR:
                    continue
                if err in (errno.EPIPE, errno.EBADF):
                    raise OSError(err, os.strerror(err))
                self.zero_copy = False  # e.g. memory the kernel will not lend: copy from now on
                break
            done += n
            self.written += n
        if done < size:
            self.write(memoryview(array.reshape(-1).view(np.uint8))[done:])
        self._reap()

    def hold(self, release: Callable[[], None] | None, keep: Any = None) -> None:
        """Call ``release`` and drop ``keep`` once everything written so far has been read."""
        with self._lock:
            self._held.append((self.written, release, keep))
        self._reap(everything=self._closed)

    def release_all(self) -> None:
        """The reader has exited (or been killed): nothing lent is in use any more, and whatever
        is held later (a frame whose write failed) is released at once."""
        self._closed = True
        self._reap(everything=True)

    def _reap(self, everything: bool = False) -> None:
        while True:
            with self._lock:
                if not self._held or not (everything or self.written - self._held[0][0] >= self.capacity):
                    return
                _, release, _ = self._held.popleft()
            if release is not None:
                release()
