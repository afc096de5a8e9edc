"""Worker processes of this machine (srgpu.batch.pool.LocalPool)."""

from __future__ import annotations


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


def test_released_workers_end_by_themselves_and_a_later_run_starts_new_ones() -> None:
    """LocalPool.release tells the workers to stop without waiting (a chunked video's workers end
    while its last chunks are joined): they exit on their own, before close; a run after it starts
    new workers and gets every result; close then ends those and reaps the released ones."""
    import time

    from srgpu.model import random_model
    from srgpu.batch.pool import EngineSpec, LocalPool

    spec = EngineSpec(random_model("9-1-5", seed=3), 2)
    with LocalPool(spec, ["cpu", "cpu"]) as pool:
        results: list[int] = []
        pool.run([_Square(i) for i in range(4)], lambda n: None, results.append)
        first = sorted(pool.pids())
        released = list(pool._pool.values())
        pool.release()
        assert pool.pids() == []
        deadline = time.monotonic() + 30
        while any(w.proc.is_alive() for w in released) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [w.proc.exitcode for w in released] == [0, 0]  # ended on their own, cleanly
        pool.run([_Square(i) for i in range(4, 7)], lambda n: None, results.append)
        again = sorted(pool.pids())
        assert sorted(results) == [0, 1, 4, 9, 16, 25, 36] and len(again) == 2 and not set(again) & set(first)
    assert all(not _alive(pid) for pid in again)


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
