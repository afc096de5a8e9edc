"""Tiles and row chunks on a few threads: every piece done once, and the first error raised,
with the pieces not yet started dropped."""

from __future__ import annotations

import threading
import time

import pytest

from srgpu.cpus import cpu_cores
from srgpu.engine.workers import run_all


@pytest.mark.parametrize("workers", [1, 2, 5])
def test_every_item_once(workers: int) -> None:
    done: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        time.sleep(0.001 * (i % 3))
        with lock:
            done.append(i)

    run_all(work, range(23), workers)
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


def test_a_pool_started_early_runs_its_tasks_on_those_workers() -> None:
    """LocalPool.start brings the workers up before any task (the command line starts them while
    it scans the source); run then uses them, starting none again."""
    from srgpu.model import random_model
    from srgpu.batch.pool import EngineSpec, LocalPool

    spec = EngineSpec(random_model("9-1-5", seed=3), 2)
    with LocalPool(spec, ["cpu", "cpu"]) as pool:
        pool.start()
        early = sorted(pool.pids())
        assert len(early) == 2
        results: list[int] = []
        pool.run([_Square(i) for i in range(5)], lambda n: None, results.append)
        assert sorted(results) == [0, 1, 4, 9, 16] and sorted(pool.pids()) == early


class _Square:
    def __init__(self, x: int) -> None:
        self.x = x

    def execute(self, engine: object, progress: object) -> int:
        return self.x * self.x
