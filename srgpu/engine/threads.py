"""Independent pieces of CPU work on a few threads: NumPy, OpenCV and BLAS release the GIL while
they compute, so tiles run side by side on the cores. (Threads of this process; "workers" in
srgpu are worker processes, srgpu.batch.pool.)"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")


def run_all(work: Callable[[T], None], items: Sequence[T], threads: int) -> None:
    """``work(item)`` for every item, at most ``threads`` at a time. The first error is raised
    once the pieces running finish; the ones not started are dropped (Ctrl-C stops promptly)."""
    if threads <= 1 or len(items) <= 1:
        for item in items:
            work(item)
        return
    pool = ThreadPoolExecutor(max_workers=min(threads, len(items)), thread_name_prefix="srgpu-cpu")
    try:
        for future in [pool.submit(work, item) for item in items]:
            future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
