"""A folder's files on the chunk workers (srgpu.batch.pool_files, srgpu.batch.tasks): worker processes of
this machine and a Dask LocalCluster give the in-process batch's outputs (images byte for byte,
videos frame for frame at the same times with the same streams), a corrupt file fails alone, a
worker killed mid-file is replaced and the file made whole elsewhere, a task that keeps killing its
worker fails alone, and the command line resumes such a folder. Real processes, real ffmpeg, the
CPU engine, tiny files."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest

from srgpu.batch.pool_files import may_use_workers, run_files, use_workers
from srgpu.engine.cpu import CPUEngine
from srgpu.batch.plan import BatchResult, plan_batch
from srgpu.batch.local import run_batch
from srgpu.model import random_model
from srgpu.video.api import EncodeOptions, VideoOptions
from srgpu.batch.pool import EngineSpec, InProcess, LocalPool
from test_chunks import shown
from test_video import ff, leftovers, make_clip

MODEL = random_model("9-1-5", seed=7, scale=2)
SPEC = EngineSpec(MODEL, 2, device="cpu")
VIDEO = VideoOptions(EncodeOptions(preset="ultrafast"))
VIDEOS = {"v1.mp4": 10, "sub/v2.mp4": 14, "v3.mkv": 12}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three small videos (x264 with AAC, one in a subfolder), two images, a corrupt video and a
    corrupt image."""
    root = tmp_path_factory.mktemp("folder-workers") / "in"
    (root / "sub").mkdir(parents=True)
    for name, frames in VIDEOS.items():
        make_clip(root / name, frames=frames, codec="libx264", audio="aac", out_args=("-preset", "ultrafast"))
    ff("-f", "lavfi", "-i", "testsrc2=size=40x30", "-frames:v", "1", str(root / "a.png"))
    ff("-f", "lavfi", "-i", "testsrc2=size=50x30", "-frames:v", "1", str(root / "sub" / "b.jpg"))
    (root / "sub" / "broken.mp4").write_bytes((root / "v1.mp4").read_bytes()[:2000])
    (root / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    return root


def in_process(folder: Path, out: Path) -> BatchResult:
    with CPUEngine(MODEL, 2) as engine:
        return run_batch(plan_batch(folder, out), engine, VIDEO)


@pytest.fixture(scope="module")
def reference(folder: Path) -> Path:
    out = folder.parent / "reference"
    result = in_process(folder, out)
    assert len(result.done) == 5 and len(result.failed) == 2
    return out


def same_outputs(got: Path, want: Path) -> None:
    """Images byte for byte; videos: every frame at the same time, the same audio timing."""
    for name in ("a.png", "sub/b.jpg"):
        assert (got / name).read_bytes() == (want / name).read_bytes(), name
    for name, frames in VIDEOS.items():
        assert len(shown(got / name)) == frames
        assert shown(got / name) == shown(want / name), name
        assert shown(got / name, "a:0") == shown(want / name, "a:0"), name


def statuses(result: BatchResult) -> dict[str, str]:
    return {o.job.src.name: o.status for o in result.outcomes}


@pytest.mark.slow
def test_two_workers_give_the_in_process_outputs(folder: Path, reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    plan = plan_batch(folder, out)
    frames: list[int] = []
    done: list[str] = []
    with LocalPool(SPEC, ["cpu", "cpu"]) as pool:
        result = run_files(plan, pool, VIDEO, on_done=lambda o: done.append(o.job.src.name),
                           on_frames=frames.append)
    assert statuses(result) == {"a.png": "done", "b.jpg": "done", "v1.mp4": "done", "v2.mp4": "done",
                                "v3.mkv": "done", "broken.mp4": "failed", "bad.png": "failed"}
    assert [o.job for o in result.outcomes] == list(plan.jobs) and sorted(done) == sorted(statuses(result))
    assert "broken.mp4" in " ".join(o.message for o in result.failed) and result.exit_code == 1
    assert sum(frames) == sum(VIDEOS.values())
    same_outputs(out, reference)
    assert leftovers(out) == [] and leftovers(out / "sub") == []
    # the manifest records them as in-process runs do: the in-process batch skips them all now
    again = in_process(folder, out)
    assert len(again.skipped) == 5 and not again.done and len(again.failed) == 2


class Counting:
    def __init__(self) -> None:
        self.frames = 0

    def __call__(self, n: int) -> None:
        self.frames += n


def test_a_worker_killed_mid_file(folder: Path, reference: Path, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL of a worker while it makes a video: its file is made again by a new worker, the
    frames it had counted are taken back, and every output is whole, nothing left over."""
    from srgpu.batch.resume import Resume

    begun: list[str] = []
    begin = Resume.begin
    monkeypatch.setattr(Resume, "begin", lambda self, job: (begun.append(job.src.name), begin(self, job)))
    out = tmp_path / "out"
    frames = Counting()
    rng = random.Random(3)
    killed: list[str] = []
    with LocalPool(SPEC, ["cpu", "cpu"]) as pool:
        def kill_one() -> None:
            """A worker busy with the same task for a random 50-150 ms: inside a video (an image
            takes a few ms), the task known from the last one handed out."""
            deadline = time.monotonic() + 30
            seen: dict[int, tuple[int | None, float]] = {}
            wait = rng.uniform(0.05, 0.15)
            while time.monotonic() < deadline:
                for w in list(pool._pool.values()):
                    task, since = seen.get(w.wid, (None, 0.0))
                    if w.task != task:
                        seen[w.wid] = (w.task, time.monotonic())
                    elif task is not None and time.monotonic() - since > wait:
                        killed.append(begun[-1] if begun else "?")
                        os.kill(w.proc.pid, signal.SIGKILL)
                        return
                time.sleep(0.005)

        killer = threading.Thread(target=kill_one)
        killer.start()
        result = run_files(plan_batch(folder, out), pool, VIDEO, on_frames=frames)
        killer.join()
    assert killed and len(result.done) == 5 and len(result.failed) == 2
    assert len(begun) == 8, begun  # 7 files, one of them handed out again
    assert frames.frames == sum(VIDEOS.values())  # taken back, then counted once
    same_outputs(out, reference)
    assert leftovers(out) == [] and leftovers(out / "sub") == []


class _Suicidal:
    """A task whose worker always dies (a file that crashes whatever runs it)."""

    index = 0

    def execute(self, engine, progress=None):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGKILL)


class _Raising:
    index = 1

    def execute(self, engine, progress=None):  # type: ignore[no-untyped-def]
        raise RuntimeError("a bug in one task")


class _Fine:
    index = 2

    def execute(self, engine, progress=None):  # type: ignore[no-untyped-def]
        return "fine"


def test_tasks_that_fail_are_reported_and_the_others_run() -> None:
    """With on_error, a task that raises, and one whose workers die more than ``retries`` times,
    are reported there and the others finish (without it, the first failure stops the run)."""
    errors: dict[int, str] = {}
    results: list[str] = []
    started: list[int] = []
    with LocalPool(SPEC, ["cpu", "cpu"], retries=1) as pool:
        pool.run([_Suicidal(), _Raising(), _Fine()], lambda n: None, results.append,
                 on_start=lambda t: started.append(t.index), on_error=lambda t, why: errors.__setitem__(t.index, why))
    assert results == ["fine"] and sorted(errors) == [0, 1]
    assert "died 2 times" in errors[0] and "a bug in one task" in errors[1]
    assert sorted(started) == [0, 0, 1, 2]  # the task of the dead worker was handed out twice
    errors.clear()
    InProcess(CPUEngine(MODEL, 2)).run([_Raising(), _Fine()], lambda n: None, results.append,
                                       on_error=lambda t, why: errors.__setitem__(t.index, why))
    assert results == ["fine", "fine"] and list(errors) == [1]


def test_when_a_folder_uses_workers(folder: Path, tmp_path: Path) -> None:
    plan = plan_batch(folder, tmp_path / "out")
    images = tmp_path / "images"
    images.mkdir()
    (images / "a.png").write_bytes((folder / "a.png").read_bytes())
    only_images = plan_batch(images, tmp_path / "out2")
    single = plan_batch(folder / "v1.mp4", tmp_path / "v1.mp4")
    assert use_workers(plan, 4, explicit=False) and not use_workers(plan, 1, explicit=False)
    assert not use_workers(only_images, 4, explicit=False) and use_workers(only_images, 2, explicit=True)
    assert not may_use_workers(only_images, explicit=False) and may_use_workers(only_images, False, cluster=True)
    assert not use_workers(single, 4, explicit=True, cluster=True)


@pytest.mark.slow
def test_the_command_line_runs_a_folder_on_workers_and_resumes(folder: Path, reference: Path, tmp_path: Path,
                                                               random_npz: Path) -> None:
    from typer.testing import CliRunner

    from srgpu.cli import app

    out = tmp_path / "out"
    args = ["upscale", str(folder), "-o", str(out), "--model", str(random_npz), "--device", "cpu", "--workers", "2",
            "--preset", "ultrafast"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "7 files, one per task, on 2 CPU workers" in result.output
    assert "5 upscaled, 0 skipped (output exists), 2 failed" in result.output
    assert "srgpu: error: 2 of 7 files failed" in result.output and "broken.mp4" in result.output
    same_outputs(out, reference)
    (out / "v1.mp4").write_bytes(b"cut short")  # an output of srgpu's that was damaged since
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "1 upscaled (1 redone), 4 skipped (output exists), 2 failed" in result.output
    assert "redone: the output is incomplete or was changed" in result.output
    assert len(shown(out / "v1.mp4")) == VIDEOS["v1.mp4"]


@pytest.mark.slow
def test_dask_workers_on_a_folder(folder: Path, reference: Path, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    from srgpu.batch.cluster import DaskRunner

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as local, distributed.Client(local) as client:
        runner = DaskRunner(client, SPEC)
        frames = Counting()
        out = tmp_path / "out"
        result = run_files(plan_batch(folder, out), runner, VIDEO, on_frames=frames)
    assert len(result.done) == 5 and len(result.failed) == 2
    assert frames.frames == sum(VIDEOS.values())
    same_outputs(out, reference)
    assert leftovers(out) == [] and leftovers(out / "sub") == []


def test_the_default_worker_count_follows_the_folders_encoder(tmp_path: Path) -> None:
    """A folder's encoder is known where all its videos share one (the .mp4/.mkv default, libx264,
    has its own default worker count: srgpu.batch.pool.default_workers); mixed encoders get none."""
    from srgpu.cli.commands import _folder_encoder
    from srgpu.batch.plan import plan_batch
    from srgpu.video.options import EncodeOptions, VideoOptions

    src = tmp_path / "in"
    src.mkdir()
    for name in ("a.mp4", "b.mkv", "c.png"):
        (src / name).write_bytes(b"x")
    plan = plan_batch(src, tmp_path / "out")
    assert _folder_encoder(plan, VideoOptions()) == "libx264"
    assert _folder_encoder(plan, VideoOptions(encode=EncodeOptions(codec="libx265"))) == "libx265"
    (src / "d.webm").write_bytes(b"x")
    assert _folder_encoder(plan_batch(src, tmp_path / "out2"), VideoOptions()) is None
