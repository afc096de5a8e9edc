"""How many CPUs this process may use: one answer for every pool of threads or processes (the CPU
engine's tiles, the image codecs, the chunk workers and their encoders)."""

from __future__ import annotations

import os


def cpu_cores() -> int:
    """The cores this process may run on (a container's or taskset's share, not the host's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)
