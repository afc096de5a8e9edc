"""GPU time of queued work, by CUDA events (the tuner, the engine's network timing, the benches)."""

from __future__ import annotations

import statistics
from typing import Any, Callable


def time_ms(fn: Callable[[], None], stream: Any, warmup: int = 2, min_reps: int = 5, max_reps: int = 50,
            target_ms: float = 150.0) -> float:
    """Median GPU time of ``fn`` in ms: CUDA events between back-to-back runs after warm-up
    (no host gap inside a measurement), as many runs as fit in ``target_ms`` within the bounds."""
    import cupy as cp

    for _ in range(warmup):
        fn()
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    e0.record(stream)
    fn()
    e1.record(stream)
    e1.synchronize()
    one = max(cp.cuda.get_elapsed_time(e0, e1), 1e-3)
    if one > 50.0:  # slow candidates (direct variants on big layers): fewer runs
        min_reps = 3
    reps = int(min(max_reps, max(min_reps, target_ms // one)))
    events = [cp.cuda.Event() for _ in range(reps + 1)]
    events[0].record(stream)
    for i in range(reps):
        fn()
        events[i + 1].record(stream)
    events[-1].synchronize()
    return float(statistics.median(cp.cuda.get_elapsed_time(a, b) for a, b in zip(events, events[1:])))
