"""The chunks of a video as tasks of a Dask cluster (srgpu.batch.cluster): a LocalCluster of two worker
processes on the CPU makes the same output as this process alone, also when a worker is killed
while it makes a chunk (the scheduler gives the chunk to another worker)."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")

from srgpu.model import random_model  # noqa: E402
from srgpu.video import chunked  # noqa: E402
from srgpu.batch.pool import EngineSpec, InProcess  # noqa: E402
from test_chunks_resume import OPTIONS, content  # noqa: E402
from test_video import leftovers, make_clip  # noqa: E402
from test_chunks import X264_GOP  # noqa: E402

SPEC = EngineSpec(random_model("9-1-5", seed=7, scale=2), 2, device="cpu")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as local:
        with distributed.Client(local) as client:
            yield client


@pytest.fixture(scope="module")
def clip_and_reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("dask")
    src = make_clip(folder / "src.mp4", frames=48, codec="libx264", audio="aac",
                    out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6)))
    reference = folder / "reference.mp4"
    cj = chunked.plan_chunked(src, reference, SPEC.identity(), OPTIONS, workers=2, chunk_seconds=0.3)
    assert not isinstance(cj, str)
    with SPEC.create() as engine:
        chunked.upscale_chunked(cj, InProcess(engine), encoder_threads=2)
    return src, reference


@pytest.mark.slow
def test_dask_workers_make_the_same_output(tmp_path: Path, cluster, clip_and_reference) -> None:  # type: ignore[no-untyped-def]
    from srgpu.batch.cluster import DaskRunner

    src, reference = clip_and_reference
    runner = DaskRunner(cluster, SPEC)
    assert runner.workers == 2 and not runner.gpu
    dst = tmp_path / "out.mp4"
    cj = chunked.plan_chunked(src, dst, SPEC.identity(), OPTIONS, workers=runner.workers, chunk_seconds=0.3)
    assert not isinstance(cj, str) and len(cj.chunks) >= 4
    result = chunked.upscale_chunked(cj, runner, encoder_threads=2)
    assert result.frames == 48 and content(dst) == content(reference)
    assert not chunked.work_folder(dst).exists() and leftovers(tmp_path) == []


def test_a_dask_worker_killed_mid_chunk(tmp_path: Path, cluster, clip_and_reference) -> None:  # type: ignore[no-untyped-def]
    from srgpu.batch.cluster import DaskRunner

    src, reference = clip_and_reference
    runner = DaskRunner(cluster, SPEC)
    dst = tmp_path / "out.mp4"
    cj = chunked.plan_chunked(src, dst, SPEC.identity(), OPTIONS, workers=2, chunk_seconds=0.3)
    assert not isinstance(cj, str)
    rng = random.Random(9)
    killed: list[int] = []

    def kill_while_busy() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            busy = [w for w, tasks in cluster.processing().items() if tasks]
            if busy:
                time.sleep(rng.uniform(0.05, 0.4))  # a random point inside the chunk
                pids = cluster.run(os.getpid, workers=busy[:1])
                for pid in pids.values():
                    killed.append(pid)
                    os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_while_busy)
    killer.start()
    result = chunked.upscale_chunked(cj, runner, encoder_threads=2)
    killer.join()
    assert killed and result.frames == 48
    assert content(dst) == content(reference)
    assert not chunked.work_folder(dst).exists() and leftovers(tmp_path) == []
    cluster.wait_for_workers(2, timeout=60)  # the nanny started a new one


CLIPS = {
    "vfr": dict(frames=30, codec="libx264", audio="aac", vf="settb=1/90000,setpts=N*3003+mod(N*N*37\\,1500)",
                out_args=("-fps_mode", "passthrough", "-enc_time_base", "1/90000", "-preset", "medium",
                          "-x264-params", X264_GOP.format(k=6))),
    "10bit": dict(frames=24, codec="libx264", pix_fmt="yuv420p10le",
                  out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6))),
    "cut-on-the-last-frame": dict(frames=21, codec="libx264", audio="aac",
                                  out_args=("-preset", "medium", "-force_key_frames", "expr:eq(n,10)+eq(n,20)",
                                            "-x264-params", "keyint=100:min-keyint=100:scenecut=0:bframes=3")),
    "open-gop-hevc": dict(frames=24, codec="libx265", audio="libopus",
                          out_args=("-preset", "ultrafast", "-x265-params",
                                    "log-level=error:keyint=6:min-keyint=6:scenecut=0:open-gop=1:bframes=3")),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(CLIPS))
def test_dask_chunks_of_other_clips(tmp_path: Path, cluster, kind: str) -> None:  # type: ignore[no-untyped-def]
    """The same chunked job on the cluster and in this process: the same file content."""
    from srgpu.batch.cluster import DaskRunner

    src = make_clip(tmp_path / ("src.mkv" if "hevc" in kind else "src.mp4"), **CLIPS[kind])  # type: ignore[arg-type]
    outputs = {}
    for where in ("here", "dask"):
        dst = tmp_path / f"{where}.mkv"
        cj = chunked.plan_chunked(src, dst, SPEC.identity(), OPTIONS, workers=2, chunk_seconds=0.2)
        assert not isinstance(cj, str) and len(cj.chunks) >= 3
        assert cj.chunks[-1].frames == 1 or kind != "cut-on-the-last-frame"
        if where == "here":
            with SPEC.create() as engine:
                chunked.upscale_chunked(cj, InProcess(engine), encoder_threads=2)
        else:
            chunked.upscale_chunked(cj, DaskRunner(cluster, SPEC), encoder_threads=2)
        outputs[where] = content(dst)
    assert outputs["dask"] == outputs["here"]


@pytest.mark.slow
def test_the_command_line_sends_chunks_to_the_cluster(tmp_path: Path, cluster, clip_and_reference,  # type: ignore[no-untyped-def]
                                                      random_npz: Path) -> None:
    from typer.testing import CliRunner

    from srgpu.cli import app

    src, _ = clip_and_reference
    dst = tmp_path / "out.mp4"
    address = cluster.scheduler.address
    result = CliRunner().invoke(app, ["upscale", str(src), "-o", str(dst), "--model", str(random_npz), "--device",
                                      "cpu", "--chunk-seconds", "0.3", "--cluster", address, "--preset", "medium"])
    assert result.exit_code == 0, result.output
    assert f"on the Dask cluster at {address}" in result.output and "wrote" in result.output
    assert len(content(dst)) > 48 and not chunked.work_folder(dst).exists()
    import dask

    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        result = CliRunner().invoke(app, ["upscale", str(src), "-o", str(tmp_path / "x.mp4"), "--chunk-seconds",
                                          "0.3", "--cluster", "tcp://127.0.0.1:9", "--device", "cpu"])
    assert result.exit_code == 1 and "srgpu: error: cannot reach the Dask scheduler" in result.output, result.output


# ---------------------------------------------------------------- --cluster's messages (issue 39, item 12)


@pytest.mark.parametrize("address", ["garbage", "", "  ", "tcp://no-port"])
def test_a_bad_cluster_address_is_one_line(tmp_path: Path, address: str, random_npz: Path) -> None:
    """Not a traceback (garbage), not silently ignored (an empty string): one line, exit 1, nothing
    written."""
    from typer.testing import CliRunner

    from srgpu.cli import app

    src = make_clip(tmp_path / "src.mp4", frames=12, codec="libx264", out_args=("-g", "4"))
    dst = tmp_path / "out.mkv"
    result = CliRunner().invoke(app, ["upscale", str(src), "-o", str(dst), "--model", str(random_npz), "--device",
                                      "cpu", "--chunk-seconds", "0.2", "--cluster", address])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert lines[0].startswith("srgpu: error: --cluster") and "tcp://HOST:8786" in lines[0], lines[0]
    assert not dst.exists() and not chunked.work_folder(dst).exists()


def _cli_env() -> dict[str, str]:
    """The environment of an srgpu or dask process: this checkout first, quick to give up on a lost
    scheduler."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="3s")
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_lost_scheduler_is_one_line(tmp_path: Path, random_npz: Path) -> None:
    """The scheduler killed mid-run: srgpu's one line on stderr, none of distributed's log records or
    tracebacks, exit 1, and the chunks made so far kept for the next run."""
    import subprocess
    import sys

    src = make_clip(tmp_path / "src.mp4", frames=96, size="96x64", codec="libx264", out_args=("-g", "6"))
    dst = tmp_path / "out.mkv"
    port, env = _free_port(), _cli_env()
    address = f"tcp://127.0.0.1:{port}"
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port",
                                  str(port), "--dashboard-address", ":0"], env=env, cwd=tmp_path,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                               "--no-dashboard"], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        with distributed.Client(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
        run = subprocess.Popen([sys.executable, "-m", "srgpu", "upscale", str(src), "-o", str(dst), "--model",
                                str(random_npz), "--device", "cpu", "--chunk-seconds", "0.25", "--cluster", address,
                                "--quiet"], env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        first = chunked.chunk_path(chunked.work_folder(dst), 0)
        deadline = time.monotonic() + 120
        while not first.exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        scheduler.kill()
        out, err = run.communicate(timeout=120)
    finally:
        for p in (scheduler, worker):
            p.kill()
            p.wait(30)
    assert run.returncode == 1, (out, err)
    assert err.splitlines() == [f"srgpu: error: lost the connection to the Dask scheduler at {address}; what was "
                                "finished is kept for the next run"], err
    assert first.exists() and not dst.exists()


# ---------------------------------------------------------------- the workers' files (issue 39, item 2)


def _same_timing_clips(folder: Path) -> tuple[Path, Path]:
    """Two clips with the same frame timing and keyframes, but other pictures."""
    folder.mkdir(parents=True, exist_ok=True)
    args = dict(frames=24, size="64x48", codec="libx264", out_args=("-preset", "medium", "-x264-params",
                                                                      X264_GOP.format(k=6)))
    one = make_clip(folder / "one.mp4", **args)  # type: ignore[arg-type]
    other = make_clip(folder / "other.mp4", vf="negate,hflip", **args)  # type: ignore[arg-type]
    return one, other


@pytest.mark.slow
@pytest.mark.parametrize("output", ["absolute", "relative"])
def test_a_relative_input_on_the_cluster_is_the_coordinators_file(tmp_path: Path, cluster, random_npz: Path,  # type: ignore[no-untyped-def]
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   output: str) -> None:
    """``cd here && srgpu upscale clip.mp4 --cluster``: the workers (whose working directory holds
    another clip.mp4 with the same timing) upscale this directory's clip.mp4, into this directory."""
    from typer.testing import CliRunner

    from srgpu.cli import app

    here, there = tmp_path / "here", tmp_path / "there"
    one, other = _same_timing_clips(tmp_path / "clips")
    here.mkdir(), there.mkdir()
    os.link(one, here / "clip.mp4")
    os.link(other, there / "clip.mp4")
    reference = tmp_path / "reference.mkv"
    cj = chunked.plan_chunked(one, reference, SPEC.identity(), OPTIONS, workers=2, chunk_seconds=0.2)
    assert not isinstance(cj, str) and len(cj.chunks) >= 3
    with SPEC.create() as engine:
        chunked.upscale_chunked(cj, InProcess(engine), encoder_threads=2)

    before = cluster.run(os.getcwd)
    cluster.run(os.chdir, str(there))
    monkeypatch.chdir(here)
    dst = "out.mkv" if output == "relative" else str(here / "out.mkv")
    try:
        result = CliRunner().invoke(app, ["upscale", "clip.mp4", "-o", dst, "--model", str(random_npz), "--device",
                                          "cpu", "--chunk-seconds", "0.2", "--cluster", cluster.scheduler.address,
                                          "--preset", "medium", "--encoder-arg=-threads", "--encoder-arg=2"])
    finally:
        for worker, cwd in before.items():
            cluster.run(os.chdir, cwd, workers=[worker])
    assert result.exit_code == 0, result.output
    assert content(here / "out.mkv") == content(reference)
    assert sorted(p.name for p in there.iterdir()) == ["clip.mp4"]


def test_a_worker_that_finds_another_file_fails_naming_both(tmp_path: Path, cluster) -> None:  # type: ignore[no-untyped-def]
    """The source's path leads a worker to another file than the coordinator's (here: the link
    moved after planning, as a node whose mount or copy differs): that chunk fails before it decodes
    a frame, in one line naming the coordinator's file and the worker's, and nothing is published."""
    from srgpu.batch.cluster import DaskRunner
    from srgpu.batch.pool import WorkerError

    one, other = _same_timing_clips(tmp_path / "clips")
    src, dst = tmp_path / "clip.mp4", tmp_path / "out.mkv"
    src.symlink_to(one)
    cj = chunked.plan_chunked(src, dst, SPEC.identity(), OPTIONS, workers=2, chunk_seconds=0.2)
    assert not isinstance(cj, str)
    src.unlink()
    src.symlink_to(other)
    with pytest.raises((WorkerError, chunked.VideoError)) as caught:
        chunked.upscale_chunked(cj, DaskRunner(cluster, SPEC), encoder_threads=2)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message, message
    assert f"opened {other}, which is not the file the coordinator planned from ({one})" in message, message
    assert not dst.exists()
    assert not list(chunked.work_folder(dst).glob("chunk-*.mkv"))


# ---------------------------------------------------------------- a lost worker, a stopped run (issue 39, item 5)


class _Watch:
    """Watches a work folder while a run makes it: every name a chunk file ever had and the files
    (inode) it named; a name that comes to name another file is a verified chunk rewritten."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.seen: dict[str, int] = {}
        self.rewritten: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(0.01):
            self.look()

    def look(self) -> None:
        for p in self.work.glob("chunk-*.mkv") if self.work.is_dir() else ():
            try:
                inode = p.stat().st_ino
            except OSError:
                continue
            if self.seen.setdefault(p.name, inode) != inode:
                self.rewritten.add(p.name)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _snapshot(folder: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p.relative_to(folder)), p.stat().st_ino, p.stat().st_size) for p in folder.rglob("*")
                  if p.is_file())


def _ours(cluster) -> int:  # type: ignore[no-untyped-def]
    """srgpu's tasks the scheduler knows of (processing, or held in a worker's memory)."""
    keys = [k for ks in cluster.processing().values() for k in ks]
    keys += [k for ks in cluster.has_what().values() for k in ks]
    return sum(1 for k in keys if str(k).startswith("srgpu-"))


@pytest.mark.slow
def test_a_lost_worker_costs_only_the_chunk_it_was_making(tmp_path: Path, cluster, clip_and_reference) -> None:  # type: ignore[no-untyped-def]
    """A worker killed (SIGKILL) after it made chunks, while it makes another: no verified chunk is
    made again or rewritten, the output is the reference, and no task is left once srgpu is done."""
    from srgpu.batch.cluster import DaskRunner

    src, reference = clip_and_reference
    cluster.wait_for_workers(2, timeout=60)
    runner = DaskRunner(cluster, SPEC)
    dst = tmp_path / "out.mp4"
    cj = chunked.plan_chunked(src, dst, SPEC.identity(), OPTIONS, workers=2, chunk_seconds=0.3)
    assert not isinstance(cj, str) and len(cj.chunks) >= 4
    watch = _Watch(cj.work)
    killed: list[int] = []

    def kill_a_busy_worker_with_results() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            done = len(watch.seen)
            busy = [w for w, keys in cluster.processing().items() if keys]
            holding = {w for w, keys in cluster.has_what().items() if keys}
            if done >= 2 and busy:
                victim = next((w for w in busy if w in holding), busy[0])
                for pid in cluster.run(os.getpid, workers=[victim]).values():
                    killed.append(pid)
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)

    killer = threading.Thread(target=kill_a_busy_worker_with_results)
    killer.start()
    try:
        result = chunked.upscale_chunked(cj, runner, encoder_threads=2)
    finally:
        killer.join()
        watch.stop()
    assert killed and result.frames == 48
    assert not watch.rewritten, f"verified chunks rewritten: {sorted(watch.rewritten)}"
    assert content(dst) == content(reference)
    assert _ours(cluster) == 0  # nothing computed again behind the coordinator's back
    time.sleep(1.0)
    assert _ours(cluster) == 0 and not chunked.work_folder(dst).exists() and leftovers(tmp_path) == []
    cluster.wait_for_workers(2, timeout=60)


@pytest.mark.slow
def test_no_task_writes_after_a_run_stops(tmp_path: Path, cluster, clip_and_reference) -> None:  # type: ignore[no-untyped-def]
    """A run stopped (Ctrl-C) while the cluster makes its chunks: once upscale_chunked has raised,
    every task is cancelled or ended (nothing more is written), and a rerun resumes to the
    reference."""
    from srgpu.batch.cluster import DaskRunner

    src, reference = clip_and_reference
    cluster.wait_for_workers(2, timeout=60)
    dst = tmp_path / "out.mp4"
    cj = chunked.plan_chunked(src, dst, SPEC.identity(), OPTIONS, workers=2, chunk_seconds=0.3)
    assert not isinstance(cj, str) and len(cj.chunks) >= 4

    class Interrupt:
        def begin(self, *args: int) -> None: ...
        def frames(self, n: int) -> None: ...
        def joining(self) -> None: ...

        def chunk_done(self, done: int, total: int) -> None:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        chunked.upscale_chunked(cj, DaskRunner(cluster, SPEC), progress=Interrupt(), encoder_threads=2)
    at_exit = _snapshot(tmp_path)
    time.sleep(2.0)
    assert _snapshot(tmp_path) == at_exit and leftovers(cj.work) == []
    cj = chunked.plan_chunked(src, dst, SPEC.identity(), OPTIONS, workers=2, chunk_seconds=0.3)
    assert not isinstance(cj, str)
    chunked.upscale_chunked(cj, DaskRunner(cluster, SPEC), encoder_threads=2)
    assert content(dst) == content(reference)


def test_a_relative_folder_on_the_cluster_is_the_coordinators(tmp_path: Path, cluster, random_npz: Path,  # type: ignore[no-untyped-def]
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``cd here && srgpu upscale frames -o out --cluster``: a folder's files too are this
    directory's, not those of the same names in the workers' directory."""
    import cv2
    import numpy as np
    from typer.testing import CliRunner

    from srgpu.cli import app

    here, there = tmp_path / "here", tmp_path / "there"
    rng = np.random.default_rng(3)
    for folder in (here, there):
        (folder / "frames").mkdir(parents=True)
    for name in ("a.png", "b.png"):
        pixels = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
        cv2.imwrite(str(here / "frames" / name), pixels)
        cv2.imwrite(str(there / "frames" / name), 255 - pixels)
    common = ["--model", str(random_npz), "--device", "cpu", "--quiet"]
    result = CliRunner().invoke(app, ["upscale", str(here / "frames"), "-o", str(tmp_path / "reference"), *common])
    assert result.exit_code == 0, result.output

    before = cluster.run(os.getcwd)
    cluster.run(os.chdir, str(there))
    monkeypatch.chdir(here)
    try:
        result = CliRunner().invoke(app, ["upscale", "frames", "-o", "out", "--cluster", cluster.scheduler.address,
                                          *common])
    finally:
        for worker, cwd in before.items():
            cluster.run(os.chdir, cwd, workers=[worker])
    assert result.exit_code == 0, result.output
    for name in ("a.png", "b.png"):
        assert np.array_equal(cv2.imread(str(here / "out" / name)), cv2.imread(str(tmp_path / "reference" / name)))
    assert sorted(p.name for p in there.iterdir()) == ["frames"]
