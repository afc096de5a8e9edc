"""Resuming a video cut into chunks after any interruption, and the workers of this machine: the
parent killed (SIGKILL) at random points and the same command run again, a worker killed at
random points, chunk files damaged on disk, a changed source and other settings. Every time the
final output is the one an uninterrupted run makes (the same coded frames, the same audio), with
nothing left over. Real processes, real ffmpeg, the CPU engine, tiny clips."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from srgpu.model import random_model, save_npz
from srgpu.video import chunked, chunks
from srgpu.video.api import EncodeOptions, VideoOptions
from srgpu.video.ffmpeg import ffmpeg_exe
from srgpu.batch.pool import EngineSpec, InProcess, LocalPool, WorkerError, plan_workers
from test_chunks import IDENTITY, X264_GOP, shown
from test_video import BicubicEngine, leftovers, make_clip

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
OPTIONS = VideoOptions(EncodeOptions(preset="medium"))


def content(path: Path) -> list[str]:
    """Every packet of every stream (timestamps, sizes, MD5 of the data): two files that agree here
    hold the same coded frames and audio at the same times."""
    out = subprocess.run([ffmpeg_exe(), "-v", "error", "-copyts", "-i", str(path), "-map", "0", "-c", "copy",
                          "-f", "framemd5", "-"], capture_output=True, text=True, check=True).stdout
    return [ln for ln in out.splitlines() if not ln.startswith("#")]


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "m.npz"
    save_npz(random_model("9-1-5", seed=7, scale=2), path)
    return path


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_clip(tmp_path_factory.mktemp("resume") / "src.mp4", frames=60, codec="libx264", audio="aac",
                     out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6)))


def command(src: Path, dst: Path, model: Path, workers: int = 2) -> list[str]:
    return [sys.executable, "-m", "srgpu", "upscale", str(src), "-o", str(dst), "--model", str(model), "--device",
            "cpu", "--workers", str(workers), "--chunk-seconds", "0.3", "--preset", "medium"]


def no_workers_left() -> bool:
    """No srgpu worker process of this test process's run is still alive (they end with their parent)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"multiprocessing" in cmdline and b"spawn_main" in cmdline and str(os.getpid()).encode() not in cmdline:
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            if "PPid:\t1\n" in status:
                return False
    return True


@pytest.mark.slow
def test_resume_after_the_parent_is_killed(tmp_path: Path, clip: Path, model_file: Path) -> None:
    """SIGKILL of the whole run at random points (after a random number of chunks, plus a random
    part of the next), then the same command again: the chunks it had verified are kept, the rest
    made, and the result is the uninterrupted run's."""
    reference = tmp_path / "reference.mp4"
    subprocess.run(command(clip, reference, model_file), cwd=ROOT, env=ENV, check=True, capture_output=True)
    dst = tmp_path / "out.mp4"
    work = chunked.work_folder(dst)
    rng = random.Random(22)
    resumed = 0
    for attempt in range(3):
        proc = subprocess.Popen(command(clip, dst, model_file), cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        made = len(list(work.glob("chunk-*.json"))) if work.is_dir() else 0
        target = made + rng.randint(1, 2)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if work.is_dir() and len(list(work.glob("chunk-*.json"))) >= target:
                break
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.4))
        proc.kill()
        _, err = proc.communicate()
        resumed += "resuming:" in err
        if dst.exists():  # it finished before the kill
            break
    final = subprocess.run(command(clip, dst, model_file), cwd=ROOT, env=ENV, capture_output=True, text=True)
    if final.returncode != 0:  # killed between publishing the output and removing its work folder
        assert "exists" in final.stderr, final.stderr  # (test_killed_after_publishing)
    resumed += "resuming:" in final.stderr
    assert resumed, "no run found chunks of an earlier one"
    assert content(dst) == content(reference)
    assert not work.exists() and leftovers(tmp_path) == []
    deadline = time.monotonic() + 10
    while not no_workers_left() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert no_workers_left()


@pytest.mark.slow
def test_a_worker_killed_mid_chunk_is_replaced(tmp_path: Path, clip: Path) -> None:
    """SIGKILL of a worker process at random points: its chunk is given to a new worker, frames it
    had counted are taken back, and the output is the uninterrupted run's."""
    spec = EngineSpec(random_model("9-1-5", seed=7, scale=2), 2)
    reference = tmp_path / "reference.mp4"
    cj = chunked.plan_chunked(clip, reference, spec.identity(), OPTIONS, workers=2, chunk_seconds=0.3)
    assert not isinstance(cj, str) and len(cj.chunks) >= 6
    with LocalPool(spec, ["cpu", "cpu"]) as pool:
        chunked.upscale_chunked(cj, pool, encoder_threads=2)
    rng = random.Random(5)
    for attempt in range(2):
        dst = tmp_path / f"out{attempt}.mp4"
        cj = chunked.plan_chunked(clip, dst, spec.identity(), OPTIONS, workers=2, chunk_seconds=0.3)
        assert not isinstance(cj, str)
        frames = [0]
        killed: list[int] = []

        class Counting:
            def begin(self, total, chunks, done_frames, done_chunks):  # type: ignore[no-untyped-def]
                pass

            def frames(self, n: int) -> None:
                frames[0] += n

            def chunk_done(self, done: int, total: int) -> None:
                pass

            def joining(self) -> None:
                pass

        with LocalPool(spec, ["cpu", "cpu"]) as pool:
            def kill_one() -> None:
                deadline = time.monotonic() + 30
                while frames[0] < rng.randint(3, 40) and time.monotonic() < deadline:
                    time.sleep(0.01)
                pids = pool.pids()
                if pids:
                    victim = rng.choice(pids)
                    killed.append(victim)
                    os.kill(victim, signal.SIGKILL)

            killer = threading.Thread(target=kill_one)
            killer.start()
            result = chunked.upscale_chunked(cj, pool, progress=Counting(), encoder_threads=2)
            killer.join()
        assert killed and frames[0] == cj.scan.frames == result.frames  # taken back, then counted once
        assert content(dst) == content(reference)
        assert not chunked.work_folder(dst).exists() and leftovers(tmp_path) == []


def test_a_chunk_found_verified_counts_its_frames(tmp_path: Path, clip: Path) -> None:
    """A task given again after its worker died (the pool took back the frames that worker had
    counted) finds the chunk that worker verified and published: it returns it without work and
    counts its frames, so the run's count ends at the source's."""
    engine = BicubicEngine(random_model("9-1-5", seed=3), 2)
    dst = tmp_path / "out.mp4"
    cj = plan(clip, dst)
    with pytest.raises(KeyboardInterrupt):
        chunked.upscale_chunked(cj, _Interrupted(engine, 1))
    made = next(c for c in cj.chunks if chunked.chunk_path(cj.work, c.index).exists())
    counted: list[int] = []
    result = chunked.run_chunk(cj.task(made), engine, counted.append)
    assert result.index == made.index and sum(counted) == made.frames == len(result.pts)


class _Interrupted(InProcess):
    """Makes ``chunks`` chunks, then stops as Ctrl-C would."""

    def __init__(self, engine, chunks: int) -> None:  # type: ignore[no-untyped-def]
        super().__init__(engine)
        self.chunks = chunks

    def run(self, tasks, on_frames, on_result):  # type: ignore[no-untyped-def]
        super().run(tasks[:self.chunks], on_frames, on_result)
        raise KeyboardInterrupt


def plan(src: Path, dst: Path, options: VideoOptions = OPTIONS) -> chunked.ChunkedJob:
    cj = chunked.plan_chunked(src, dst, IDENTITY, options, chunk_seconds=0.3)
    assert not isinstance(cj, str)
    return cj


class _Recording(InProcess):
    def __init__(self, engine) -> None:  # type: ignore[no-untyped-def]
        super().__init__(engine)
        self.made: list[int] = []

    def run(self, tasks, on_frames, on_result):  # type: ignore[no-untyped-def]
        self.made += [t.chunk.index for t in tasks]
        super().run(tasks, on_frames, on_result)


@pytest.mark.slow
def test_damaged_chunks_on_disk_are_redone(tmp_path: Path, clip: Path) -> None:
    engine = BicubicEngine(random_model("9-1-5", seed=3), 2)
    reference = tmp_path / "reference.mp4"
    chunked.upscale_chunked(plan(clip, reference), InProcess(engine))
    dst = tmp_path / "out.mp4"
    with pytest.raises(KeyboardInterrupt):
        chunked.upscale_chunked(plan(clip, dst), _Interrupted(engine, 5))
    work = chunked.work_folder(dst)
    cj = plan(clip, dst)
    order = [c.index for c in chunks.largest_first(cj.scan, cj.chunks)]  # the order they are made in
    made_before = order[:5]
    assert sorted(p.name for p in work.glob("chunk-*.mkv")) == sorted(f"chunk-{i:05d}.mkv" for i in made_before)
    a, b, c, kept_a, kept_b = made_before
    one = work / f"chunk-{a:05d}.mkv"
    data = bytearray(one.read_bytes())
    data[len(data) // 2] ^= 0x55  # same size, other bytes: a disk that went bad
    one.write_bytes(bytes(data))
    two = work / f"chunk-{b:05d}.mkv"
    two.write_bytes(two.read_bytes()[:-100])  # cut short
    (work / f"chunk-{c:05d}.json").unlink()  # killed between the certificate and the rename: no certificate
    runner = _Recording(engine)
    result = chunked.upscale_chunked(plan(clip, dst), runner)
    assert sorted(runner.made) == sorted([a, b, c] + order[5:])
    assert kept_a not in runner.made and kept_b not in runner.made
    notes = " | ".join(result.notes)
    assert f"chunk {a} redone: its file changed" in notes and f"chunk {b} redone: its file is" in notes
    assert f"chunk {c} redone: its file has no certificate" in notes
    assert content(dst) == content(reference)
    assert not work.exists() and leftovers(tmp_path) == []


@pytest.mark.slow
def test_a_changed_source_or_other_settings_start_over(tmp_path: Path, clip: Path) -> None:
    engine = BicubicEngine(random_model("9-1-5", seed=3), 2)
    src = tmp_path / "src.mp4"
    src.write_bytes(clip.read_bytes())
    dst = tmp_path / "out.mp4"
    with pytest.raises(KeyboardInterrupt):
        chunked.upscale_chunked(plan(src, dst), _Interrupted(engine, 3))
    # other settings: said, and every chunk made again
    crf = VideoOptions(EncodeOptions(preset="medium", crf=30))
    cj = plan(src, dst, crf)
    assert any("starting over" in n and "crf None (now 30)" in n for n in cj.notes), cj.notes
    with pytest.raises(KeyboardInterrupt):
        chunked.upscale_chunked(cj, _Interrupted(engine, 3))
    # a changed source: another clip under the same name
    make_clip(tmp_path / "other.mp4", frames=60, codec="libx264", audio="aac", vf="negate",
              out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6)))
    os.replace(tmp_path / "other.mp4", src)
    cj = plan(src, dst, crf)
    assert any("starting over" in n and "source changed" in n for n in cj.notes), cj.notes
    runner = _Recording(engine)
    result = chunked.upscale_chunked(cj, runner)
    assert sorted(runner.made) == list(range(len(cj.chunks))) and result.frames == 60  # each once
    reference = tmp_path / "reference.mp4"
    chunked.upscale_chunked(plan(src, reference, crf), InProcess(engine))
    assert content(dst) == content(reference)


def test_killed_after_publishing(tmp_path: Path, clip: Path) -> None:
    """Killed between the output's publication and the work folder's removal: the next run finds
    the output there (an error without --overwrite, as for any output) and removes the folder."""
    engine = BicubicEngine(random_model("9-1-5", seed=3), 2)
    dst = tmp_path / "out.mp4"
    cj = plan(clip, dst)
    removed = []
    original = chunked.WorkFolder.remove
    chunked.WorkFolder.remove = lambda self: removed.append(self.close())  # type: ignore[method-assign]
    try:
        chunked.upscale_chunked(cj, InProcess(engine))
    finally:
        chunked.WorkFolder.remove = original  # type: ignore[method-assign]
    assert removed and dst.is_file() and chunked.work_folder(dst).is_dir()
    with pytest.raises(chunked.VideoError, match="exists"):
        chunked.plan_chunked(clip, dst, IDENTITY, OPTIONS, chunk_seconds=0.3)
    assert not chunked.work_folder(dst).exists()


def test_a_second_run_on_the_same_output_is_refused(tmp_path: Path, clip: Path) -> None:
    engine = BicubicEngine(random_model("9-1-5", seed=3), 2)
    dst = tmp_path / "out.mp4"
    cj = plan(clip, dst)
    first = chunked.WorkFolder(cj)
    first.open()
    try:
        with pytest.raises(chunked.VideoError, match="another srgpu is working on this output"):
            chunked.upscale_chunked(plan(clip, dst), InProcess(engine))
    finally:
        first.close()
    assert not dst.exists()


def test_a_failing_worker_fails_the_run_in_one_line(tmp_path: Path, clip: Path) -> None:
    """A chunk that fails in a worker (here: the source vanished) ends the run with the worker's
    own one-line error, every worker ended, the output not written; the work folder stays."""
    spec = EngineSpec(random_model("9-1-5", seed=7, scale=2), 2)
    src = tmp_path / "src.mp4"
    src.write_bytes(clip.read_bytes())
    dst = tmp_path / "out.mp4"
    cj = plan(src, dst)
    src.unlink()
    with LocalPool(spec, ["cpu", "cpu"]) as pool:
        with pytest.raises(WorkerError, match=re.escape(str(src))):
            chunked.upscale_chunked(cj, pool)
        assert pool.pids() == []
    assert not dst.exists() and chunked.work_folder(dst).is_dir()


def test_worker_plans() -> None:
    plan_cpu = plan_workers("cpu", None, 3)
    assert plan_cpu.devices == ("cpu", "cpu", "cpu") and plan_cpu.describe() == "3 CPU workers"
    auto = plan_workers("auto", None, None, cores=16)
    assert auto.workers >= 1 and (auto.gpus or auto.why_cpu)
    from srgpu.errors import EngineError
    with pytest.raises(EngineError, match="--device cpu"):
        plan_workers("cpu", "0", 2)
    with pytest.raises(EngineError, match="at least one"):
        plan_workers("cpu", None, 0)
    from srgpu.batch.pool import default_workers, devices_for, encoder_threads
    assert default_workers(0, cores=16) == 4 and default_workers(2, cores=2) == 2 and default_workers(1, 64) == 4
    # x264: about one per 4 cores up to four encoders, at least one per GPU, one on the CPU engine
    # (BENCHMARKS.md sessions 27-28); the others share the cores out
    assert default_workers(1, 16, "libx264") == 4 and default_workers(2, 16, "libx264") == 4
    assert default_workers(4, 64, "libx264") == 4 and default_workers(8, 16, "libx264") == 8
    assert default_workers(1, 8, "libx264") == 2 and default_workers(1, 4, "libx264") == 1
    assert default_workers(0, 16, "libx264") == 1 and default_workers(1, 16, "libx265") == 4
    assert plan_workers("cpu", None, None, cores=16, encoder="libx264").workers == 1
    assert plan_workers("cpu", None, None, cores=16, encoder="libx265").workers == 4
    assert devices_for(3, (0, 1)) == ["cuda:0", "cuda:1", "cuda:0"]
    # each x264 keeps what it would pick alone on this host up to 24 threads, or its share where more
    assert encoder_threads(1, 16) is None and encoder_threads(4, 16) == 24 and encoder_threads(4, 64) == 24
    assert encoder_threads(2, 8) == 12 and encoder_threads(2, 64) == 48 and encoder_threads(2, 2) == 3
    assert shown  # (imported for the shared helpers' sake)


@pytest.mark.slow
def test_sigterm_ends_every_worker_and_leaves_the_chunks(tmp_path: Path, clip: Path, model_file: Path) -> None:
    """SIGTERM (as Ctrl-C) while chunks are being made: exit status 143, one line, every worker and
    ffmpeg child ended, no temporary left in the output's folder or the work folder; the verified
    chunks stay, and the same command then finishes the job."""
    dst = tmp_path / "out.mp4"
    work = chunked.work_folder(dst)
    proc = subprocess.Popen(command(clip, dst, model_file), cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (work.is_dir() and list(work.glob("chunk-*.mkv"))) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "srgpu: error: terminated (SIGTERM)" in err, err
    assert leftovers(tmp_path) == [] and not dst.exists()
    assert [p.name for p in work.iterdir() if ".part" in p.name] == []
    assert list(work.glob("chunk-*.mkv"))
    deadline = time.monotonic() + 10
    while not no_workers_left() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert no_workers_left()
    final = subprocess.run(command(clip, dst, model_file), cwd=ROOT, env=ENV, capture_output=True, text=True)
    assert final.returncode == 0 and "resuming:" in final.stderr, final.stderr
    assert len(shown(dst)) == 60 and not work.exists()


def test_a_work_folder_that_cannot_be_written_is_one_line(tmp_path: Path, clip: Path, read_only_dir: Path) -> None:
    engine = BicubicEngine(random_model("9-1-5", seed=3), 2)
    cj = plan(clip, tmp_path / "out.mp4")
    cj = chunked.replace(cj, work=read_only_dir / "work")
    with pytest.raises(chunked.VideoError, match="cannot create the work folder"):
        chunked.upscale_chunked(cj, InProcess(engine))


def test_an_output_that_appeared_meanwhile_is_kept(tmp_path: Path, clip: Path) -> None:
    engine = BicubicEngine(random_model("9-1-5", seed=3), 2)
    dst = tmp_path / "out.mp4"
    cj = plan(clip, dst)

    class Racing(InProcess):
        def run(self, tasks, on_frames, on_result):  # type: ignore[no-untyped-def]
            super().run(tasks, on_frames, on_result)
            dst.write_bytes(b"someone else's")

    with pytest.raises(chunked.VideoError, match="appeared there while srgpu was working"):
        chunked.upscale_chunked(cj, Racing(engine))
    assert dst.read_bytes() == b"someone else's" and leftovers(tmp_path) == []


def recording(runner: type, events: list[tuple[str, int]], results: list | None = None) -> type:
    """``runner`` (InProcess or LocalPool) that records when each chunk starts and when its result
    comes back, in ``events``, and each result in ``results``."""

    class Recording(runner):  # type: ignore[misc, valid-type]
        def run(self, tasks, on_frames, on_result, on_start=None, on_error=None):  # type: ignore[no-untyped-def]
            def started(task):  # type: ignore[no-untyped-def]
                events.append(("start", task.chunk.index))
                if on_start is not None:
                    on_start(task)

            def done(result):  # type: ignore[no-untyped-def]
                events.append(("done", result.index))
                if results is not None:
                    results.append(result)
                on_result(result)

            super().run(tasks, on_frames, done, started, on_error)

    return Recording


def every_change_overlapped(events: list[tuple[str, int]], cj: chunked.ChunkedJob) -> bool:
    """Each chunk after the first started before the result of the chunk started before it."""
    starts = [i for kind, i in events if kind == "start"]
    assert sorted(starts) == sorted(c.index for c in cj.chunks)
    overlapped = [k for k in range(1, len(starts))
                  if events.index(("start", starts[k])) < events.index(("done", starts[k - 1]))]
    return len(overlapped) == len(starts) - 1


@pytest.mark.slow
def test_the_next_chunk_starts_while_the_last_one_drains(tmp_path: Path, clip: Path) -> None:
    """One worker, in a pool and in this process (one GPU and x264: the default): each chunk after
    the first starts once the one before has processed its last frame (the engine is free) and
    before that one's result comes back (its encoder drained, its file checked and published), and
    the two outputs are the same, packet for packet."""
    spec = EngineSpec(random_model("9-1-5", seed=7, scale=2), 2)
    outputs = []
    for name in ("pool", "in-process"):
        dst = tmp_path / f"{name}.mp4"
        cj = chunked.plan_chunked(clip, dst, spec.identity(), OPTIONS, workers=1, chunk_seconds=0.3)
        assert not isinstance(cj, str) and len(cj.chunks) >= 6
        events: list[tuple[str, int]] = []
        if name == "pool":
            with recording(LocalPool, events)(spec, ["cpu"]) as pool:
                chunked.upscale_chunked(cj, pool, encoder_threads=2)
        else:
            chunked.upscale_chunked(cj, recording(InProcess, events)(spec.create()), encoder_threads=2)
        assert every_change_overlapped(events, cj), (name, events)
        assert not chunked.work_folder(dst).exists()
        outputs.append(content(dst))
    assert outputs[0] == outputs[1] and leftovers(tmp_path) == []


def test_ctrl_c_in_process_ends_the_chunks_in_flight(tmp_path: Path, clip: Path) -> None:
    """Ctrl-C while a chunk is made in this process, the one before perhaps still draining: the
    interrupt reaches the caller once both chunks' pipelines are ended (no ffmpeg left, no
    temporary), the chunks already made are kept, and the same run then finishes the video as an
    uninterrupted one makes it."""
    from test_video import ffmpeg_children

    spec = EngineSpec(random_model("9-1-5", seed=7, scale=2), 2)
    reference = tmp_path / "reference.mp4"
    chunked.upscale_chunked(plan(clip, reference), InProcess(spec.create()), encoder_threads=2)
    dst = tmp_path / "out.mp4"
    cj = plan(clip, dst)

    class Progress:
        frames_made = 0
        reused: list[int] = []

        def begin(self, frames: int, chunks: int, frames_done: int, chunks_done: int) -> None:
            self.reused.append(chunks_done)

        def frames(self, n: int) -> None:  # called in the caller's thread, where a signal's handler runs
            self.frames_made += n
            if interrupt and self.frames_made >= len(cj.scan.pts) // 2:
                raise KeyboardInterrupt

        def chunk_done(self, done: int, total: int) -> None: ...

        def joining(self) -> None: ...

    engine, progress, interrupt = spec.create(), Progress(), True
    with pytest.raises(KeyboardInterrupt):
        chunked.upscale_chunked(cj, InProcess(engine), progress=progress, encoder_threads=2)
    assert ffmpeg_children() == [] and leftovers(tmp_path) == [] and not dst.exists()
    assert [t.name for t in threading.enumerate() if t.name.startswith(("srgpu-task-", "srgpu-join"))] == []
    interrupt = False
    chunked.upscale_chunked(plan(clip, dst), InProcess(engine), progress=progress, encoder_threads=2)
    assert 0 < progress.reused[1] < len(cj.chunks)  # the chunks made before Ctrl-C, kept
    assert content(dst) == content(reference) and leftovers(tmp_path) == []


def test_a_local_worker_trusts_the_coordinators_scan_of_the_same_file(tmp_path: Path, clip: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker on the coordinator's host that finds the very file it scanned (same device, inode,
    size and time) does not scan its packets again; the same path on another host, or a file put
    in its place, is scanned and checked."""
    import dataclasses
    import shutil

    spec = EngineSpec(random_model("9-1-5", seed=7, scale=2), 2)
    src = tmp_path / "src.mp4"
    shutil.copy2(clip, src)
    cj = chunked.plan_chunked(src, tmp_path / "out.mp4", spec.identity(), OPTIONS, workers=2, chunk_seconds=0.3)
    assert not isinstance(cj, str)
    task = cj.task(cj.chunks[1])
    scans: list[Path] = []
    real_scan = chunks.scan
    monkeypatch.setattr(chunks, "scan", lambda path, *a, **k: (scans.append(path), real_scan(path, *a, **k))[1])
    chunked._source_digests.clear()
    chunked.check_source(task)
    assert scans == []
    elsewhere = dataclasses.replace(task, source_at=("another-host", *task.source_at[1:]))
    chunked.check_source(elsewhere)
    assert scans == [src]
    # the same bytes and times under the same path, but another file (a copy moved into place)
    shutil.copy2(clip, tmp_path / "copy.mp4")
    os.utime(tmp_path / "copy.mp4", ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns))
    os.replace(tmp_path / "copy.mp4", src)
    chunked._source_digests.clear()
    chunked.check_source(task)  # scanned, and the digest agrees: the same content is accepted
    assert scans == [src, src]
