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


ALIGN = 256  # bytes: each table starts where any kernel may read it with vector loads


def upload(*tables: np.ndarray) -> tuple[Any, ...]:
    """The host arrays on the current device (views of one buffer: one copy, not one per table),
    ordered before whatever the current stream runs next: a kernel reading them must be queued on
    the stream current at this call (every engine path launches on its own stream, made current
    by GPUEngine._on_device), or after it."""
    import cupy as cp

    arrays = [np.ascontiguousarray(t) for t in tables]
    offsets, end = [], 0
    for a in arrays:
        offsets.append(end)
        end += -(-a.nbytes // ALIGN) * ALIGN
    packed = np.zeros(max(end, 1), dtype=np.uint8)
    for a, off in zip(arrays, offsets):
        packed[off:off + a.nbytes] = a.reshape(-1).view(np.uint8)
    consumer = cp.cuda.get_current_stream()
    side = _side_stream(cp.cuda.Device().id)
    with side:
        buffer = cp.asarray(packed)
    consumer.wait_event(side.record())
    return tuple(buffer[off:off + a.nbytes].view(a.dtype).reshape(a.shape) for a, off in zip(arrays, offsets))
