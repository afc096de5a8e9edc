"""The chunks of a video as tasks of a Dask cluster (srgpu.cluster): a LocalCluster of two worker
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
from srgpu.workers import EngineSpec, InProcess  # noqa: E402
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
    cj = chunked.plan_chunked(src, reference, 2, SPEC.identity(), OPTIONS, workers=2, chunk_seconds=0.3)
    assert not isinstance(cj, str)
    with SPEC.create() as engine:
        chunked.upscale_chunked(cj, InProcess(engine), encoder_threads=2)
    return src, reference


def test_dask_workers_make_the_same_output(tmp_path: Path, cluster, clip_and_reference) -> None:  # type: ignore[no-untyped-def]
    from srgpu.cluster import DaskRunner

    src, reference = clip_and_reference
    runner = DaskRunner(cluster, SPEC)
    assert runner.workers == 2 and not runner.gpu
    dst = tmp_path / "out.mp4"
    cj = chunked.plan_chunked(src, dst, 2, SPEC.identity(), OPTIONS, workers=runner.workers, chunk_seconds=0.3)
    assert not isinstance(cj, str) and len(cj.chunks) >= 4
    result = chunked.upscale_chunked(cj, runner, encoder_threads=2)
    assert result.frames == 48 and content(dst) == content(reference)
    assert not chunked.work_folder(dst).exists() and leftovers(tmp_path) == []


def test_a_dask_worker_killed_mid_chunk(tmp_path: Path, cluster, clip_and_reference) -> None:  # type: ignore[no-untyped-def]
    from srgpu.cluster import DaskRunner

    src, reference = clip_and_reference
    runner = DaskRunner(cluster, SPEC)
    dst = tmp_path / "out.mp4"
    cj = chunked.plan_chunked(src, dst, 2, SPEC.identity(), OPTIONS, workers=2, chunk_seconds=0.3)
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
