"""Tiles and row chunks on a few threads: every piece done once, and the first error raised,
with the pieces not yet started dropped."""

from __future__ import annotations

import threading
import time

import pytest

from srgpu.cpus import cpu_cores
from srgpu.engine.threads import run_all


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_every_item_once(threads: int) -> None:
    done: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        time.sleep(0.001 * (i % 3))
        with lock:
            done.append(i)

    run_all(work, range(23), threads)
    assert sorted(done) == list(range(23))


def test_first_error_raised_and_the_rest_dropped() -> None:
    started: list[int] = []

    def work(i: int) -> None:
        started.append(i)
        if i == 1:
            raise ValueError("tile 1 failed")
        time.sleep(0.01)

    with pytest.raises(ValueError, match="tile 1 failed"):
        run_all(work, range(200), 2)
    assert len(started) < 200


def test_cpu_cores_is_positive() -> None:
    assert cpu_cores() >= 1
