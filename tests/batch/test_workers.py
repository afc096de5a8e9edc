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
