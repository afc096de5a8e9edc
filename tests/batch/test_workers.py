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
    """Running (an ended process not reaped yet, a zombie, is not)."""
    import os

    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


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


class _DiesAtStart:
    """An engine spec whose worker process exits (status 3) where it would make its engine."""

    device = "cpu"

    def on(self, device: str) -> "_DiesAtStart":
        return self

    def create(self) -> None:
        import os

        os._exit(3)


def test_a_worker_that_cannot_start_fails_the_run_in_one_line() -> None:
    """A worker process that ends before its engine is ready (here: it exits where it would make its
    engine) is started again at most ``retries`` times, then the run fails with one line that says
    so; it was started again forever."""
    import time

    from srgpu.batch.pool import LocalPool, WorkerError

    spec = _DiesAtStart()
    started = time.monotonic()
    with LocalPool(spec, ["cpu"], retries=2) as pool:
        with pytest.raises(WorkerError) as e:
            pool.run([_Square(2)], lambda n: None, lambda r: None)
    message = str(e.value)
    assert message == ("the worker on cpu could not start: it ended with exit status 3 before its engine was ready, "
                       "3 times")
    assert time.monotonic() - started < 60


class _Env:
    def __init__(self, name: str) -> None:
        self.name = name

    def execute(self, engine: object, progress: object) -> str | None:
        import os

        return os.environ.get(self.name)


def test_workers_see_the_callers_environment_of_their_own_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker has the caller's environment as it is when the worker starts, not as it was when an
    earlier pool started: a variable set after the first pool reaches a later pool's workers, one
    removed is gone."""
    from srgpu.model import random_model
    from srgpu.batch.pool import EngineSpec, LocalPool

    spec = EngineSpec(random_model("9-1-5", seed=3), 2)
    monkeypatch.setenv("SRGPU_TEST_GONE", "before")
    seen: list[list[str | None]] = []
    for step in range(2):
        with LocalPool(spec, ["cpu"]) as pool:
            got: list[str | None] = []
            pool.run([_Env("SRGPU_TEST_SET"), _Env("SRGPU_TEST_GONE")], lambda n: None, got.append)
            seen.append(sorted(got, key=str))
        monkeypatch.setenv("SRGPU_TEST_SET", "after")
        monkeypatch.delenv("SRGPU_TEST_GONE", raising=False)
    assert seen == [[None, "before"], [None, "after"]]


_SLEEPER = """
import os, time

class Sleeper:  # a task that keeps its worker's main thread busy: only a signal ends it
    def execute(self, engine, progress):
        open(f"started-{os.getpid()}", "w").close()
        time.sleep(600)
"""

_KILLED_CALLER = """
import sys
sys.path.insert(0, ".")
from sleeper import Sleeper
from srgpu.model import random_model
from srgpu.batch.pool import EngineSpec, LocalPool

pool = LocalPool(EngineSpec(random_model("9-1-5", seed=3), 2), ["cpu", "cpu"])
pool.run([Sleeper(), Sleeper()], lambda n: None, lambda r: None)
"""


def test_workers_end_when_their_caller_is_killed(tmp_path: Path) -> None:
    """SIGKILL of the process that started the workers (nothing of it can clean up) ends them too,
    within seconds, even in the middle of a task: they are not left holding a GPU."""
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "sleeper.py").write_text(_SLEEPER)
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_CALLER], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while len(started := list(tmp_path.glob("started-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = [int(p.name.split("-")[1]) for p in started]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)
