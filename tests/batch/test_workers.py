"""Worker processes of this machine (srgpu.batch.pool.LocalPool)."""

from __future__ import annotations

from pathlib import Path

import pytest


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


_SCRIPT = """
from pathlib import Path
import sys
from srgpu.batch.route import UpscaleOptions, upscale

result = upscale(UpscaleOptions(Path(sys.argv[1]), Path(sys.argv[2]), device="cpu", workers=2))
print("route", result.route, "exit", result.exit_code, "upscaled", len(result.batch.done))
"""


def _three_images(folder: Path) -> None:
    import cv2
    import numpy as np

    folder.mkdir()
    rng = np.random.default_rng(4)
    for k in range(3):
        cv2.imwrite(str(folder / f"im{k}.png"), rng.integers(0, 256, (24, 32, 3), dtype=np.uint8))


@pytest.mark.parametrize("how", ["stdin", "file without a main guard"])
def test_the_library_route_on_workers_runs_from_any_script(tmp_path: Path, how: str) -> None:
    """srgpu's workers need nothing of the caller's __main__: a script read from stdin (which spawn
    could not import again: the workers died and were started again, forever) and a script without
    the `if __name__ == "__main__"` guard (which would run itself again in each worker) both upscale
    a folder on two worker processes."""
    import subprocess
    import sys

    _three_images(tmp_path / "in")
    args = [str(tmp_path / "in"), str(tmp_path / "out")]
    if how == "stdin":
        proc = subprocess.run([sys.executable, "-", *args], input=_SCRIPT, capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)
    else:
        (tmp_path / "script.py").write_text(_SCRIPT)
        proc = subprocess.run([sys.executable, str(tmp_path / "script.py"), *args], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["route", "workers", "exit", "0", "upscaled", "3"], proc.stdout
    assert sorted(p.name for p in (tmp_path / "out").glob("*.png")) == ["im0.png", "im1.png", "im2.png"]


def test_a_worker_that_cannot_start_fails_the_run_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker process that ends before its engine is ready (here: its interpreter exits at start-up)
    is started again at most ``retries`` times, then the run fails with one line that says so; it was
    started again forever."""
    import os
    import time

    from srgpu.model import random_model
    from srgpu.batch.pool import EngineSpec, LocalPool, WorkerError

    (tmp_path / "sitecustomize.py").write_text("import os\nif os.environ.get('SRGPU_TEST_DIE'):\n    os._exit(3)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("SRGPU_TEST_DIE", "1")
    spec = EngineSpec(random_model("9-1-5", seed=3), 2)
    started = time.monotonic()
    with LocalPool(spec, ["cpu"], retries=2) as pool:
        with pytest.raises(WorkerError) as e:
            pool.run([_Square(2)], lambda n: None, lambda r: None)
    message = str(e.value)
    assert message == ("the worker on cpu could not start: it ended with exit status 3 before its engine was ready, "
                       "3 times")
    assert time.monotonic() - started < 60
