"""How many CPUs this process may use: one answer for every pool of threads or processes (the CPU
engine's tiles, the image codecs, the chunk workers and their encoders)."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

_strip_pool: ThreadPoolExecutor | None = None
_strip_pool_lock = threading.Lock()


def cpu_cores() -> int:
    """The cores this process may run on (a container's or taskset's share, not the host's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def strip_pool() -> ThreadPoolExecutor:
    """The threads a large image file is encoded on, in strips (srgpu.images.jpegstrips, srgpu.images.pngstrips):
    one per core, shared by every file being written (their tasks never wait on one another)."""
    global _strip_pool
    with _strip_pool_lock:
        if _strip_pool is None:
            _strip_pool = ThreadPoolExecutor(cpu_cores(), thread_name_prefix="srgpu-strip-encoder")
        return _strip_pool
