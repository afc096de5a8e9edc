"""Small constant tables (resampling weights, indices, fold bounds) onto the device without
waiting for the work queued before them.

A copy from pageable host memory on a stream returns only once that stream has reached it: on the
compute stream of a busy pipeline, after every image queued before it, so each new frame size
(a folder of photos of many sizes) drained the pipeline. The tables go over a side stream of
their own instead, and the stream current at the call waits for them on the device, not on the
host. Callers keep the tables for the life of their engine (never freed while queued kernels may
still read them)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

_side: dict[int, Any] = {}
_lock = threading.Lock()


def _side_stream(device: int) -> Any:
    import cupy as cp

    with _lock:
        stream = _side.get(device)
        if stream is None:
            stream = _side[device] = cp.cuda.Stream(non_blocking=True)
        return stream


def upload(*tables: np.ndarray) -> tuple[Any, ...]:
    """The host arrays on the current device, ordered before whatever the current stream runs next."""
    import cupy as cp

    consumer = cp.cuda.get_current_stream()
    side = _side_stream(cp.cuda.Device().id)
    with side:
        out = tuple(cp.asarray(np.ascontiguousarray(t)) for t in tables)
    consumer.wait_event(side.record())
    return out
