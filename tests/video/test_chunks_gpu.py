"""Chunked videos on the GPU machine: several chunk workers sharing one GPU (worker processes of
this machine, and a Dask LocalCluster whose two workers each hold the GPU resource), against the
single pipeline on the same GPU. Skipped where no CUDA GPU is usable."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from srgpu.model import random_model
from srgpu.video import chunked
from srgpu.video.api import EncodeOptions, VideoOptions, upscale_video
from srgpu.batch.pool import EngineSpec, InProcess, LocalPool
from test_chunks import shown
from test_video import decode, leftovers

pytestmark = pytest.mark.gpu

OPTIONS = VideoOptions(EncodeOptions(codec="ffv1"), hwdec="no")
SPEC = EngineSpec(random_model("9-1-5", seed=5, scale=2), 2, device="cuda:0", precision="fp32")


@pytest.fixture(scope="module")
def clip(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4 s of the 1080p clip (keyframes every 15 frames), with its audio."""
    from test_video import ff

    out = tmp_path_factory.mktemp("gpu-chunks") / "smpte.mp4"
    ff("-i", str(shared_data / "video" / "smpte_1080p25_h264_aac.mp4"), "-t", "4", "-map", "0", "-c", "copy", str(out))
    return out


@pytest.fixture(scope="module")
def single(clip: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dst = tmp_path_factory.mktemp("gpu-single") / "single.mkv"
    with SPEC.create() as engine:
        upscale_video(clip, dst, engine, OPTIONS)
    return dst


def close_enough(got: Path, want: Path) -> None:
    """Every frame at its time, and the pictures within the GPU plans' agreement (each process
    may pick its own plan): PSNR above 50 dB on every frame's luma."""
    assert [t for t, _ in shown(got)] == [t for t, _ in shown(want)]
    a, b = decode(got, "yuv420p", 3840, 2160), decode(want, "yuv420p", 3840, 2160)
    assert len(a) == len(b)
    for x, y in zip(a[::10], b[::10]):
        err = np.mean((x[0].astype(np.float64) - y[0]) ** 2)
        assert err == 0 or 10 * np.log10(255.0 ** 2 / err) > 50


def test_several_workers_share_one_gpu(tmp_path: Path, clip: Path, single: Path) -> None:
    dst = tmp_path / "chunked.mkv"
    cj = chunked.plan_chunked(clip, dst, SPEC.identity(), OPTIONS, workers=3, chunk_seconds=0.6)
    assert not isinstance(cj, str) and len(cj.chunks) >= 5
    with LocalPool(SPEC, ["cuda:0"] * 3) as pool:
        result = chunked.upscale_chunked(cj, pool)
    assert result.frames == cj.scan.frames
    close_enough(dst, single)
    assert leftovers(tmp_path) == [] and not chunked.work_folder(dst).exists()


def test_dask_workers_share_the_gpu(tmp_path: Path, clip: Path, single: Path) -> None:
    distributed = pytest.importorskip("distributed")
    from srgpu.batch.cluster import DaskRunner

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, resources={"GPU": 1},
                                  dashboard_address=None) as local, distributed.Client(local) as client:
        runner = DaskRunner(client, EngineSpec(SPEC.model, 2, device="auto", precision="fp32"))
        assert runner.gpu and runner.workers == 2
        dst = tmp_path / "dask.mkv"
        cj = chunked.plan_chunked(clip, dst, SPEC.identity(), OPTIONS, workers=2, chunk_seconds=0.6)
        assert not isinstance(cj, str)
        result = chunked.upscale_chunked(cj, runner)
    assert result.frames == cj.scan.frames
    close_enough(dst, single)


def on_nvdec(results: list[chunked.ChunkResult], engines: int) -> bool:
    """NVDEC decoded every chunk but each engine's first, which starts on the CPU's decoder and
    hands over to NVDEC once it is up (a chunk of 0.6 s may end before it is)."""
    started_on_cpu = [r for r in results if r.handover_at is not None or r.decoder is None]
    return (len(started_on_cpu) <= engines and len(results) > engines
            and all(r.decoder == "h264_cuvid" for r in results if r not in started_on_cpu)
            and all(r.decoder in ("h264_cuvid", None) for r in started_on_cpu))


def test_chunks_decode_on_nvdec(tmp_path: Path, clip: Path, single: Path) -> None:
    """With hwdec auto and GPU workers, NVDEC decodes the chunks (its first frames having come out
    as the CPU decoder's; each worker's first chunk from the CPU's decoder until NVDEC is up), and
    the output is the same as the CPU-decoded single pipeline's."""
    from test_chunks_resume import recording

    dst = tmp_path / "nvdec.mkv"
    options = VideoOptions(OPTIONS.encode, hwdec="auto")
    cj = chunked.plan_chunked(clip, dst, SPEC.identity(), options, workers=2, chunk_seconds=0.6, gpu=0)
    assert not isinstance(cj, str) and cj.nvdec == "h264_cuvid", cj
    results: list[chunked.ChunkResult] = []
    with recording(LocalPool, [], results)(SPEC, ["cuda:0"] * 2) as pool:
        result = chunked.upscale_chunked(cj, pool)
    assert result.decoder.startswith("h264_cuvid") and result.frames == cj.scan.frames, result.decoder
    assert on_nvdec(results, 2), results
    close_enough(dst, single)


@pytest.mark.parametrize("gpu", [0, 1])
def test_one_worker_in_process_overlaps_its_chunks_on_nvdec(tmp_path: Path, clip: Path, single: Path, gpu: int) -> None:
    """One worker (`--workers 1`) makes the chunks in this process, each in a thread
    of its own, the next started while the last one drains: NVDEC decodes them, every change of chunk
    overlaps, and the output is the single pipeline's; on the second GPU too (a thread's current
    device is GPU 0 until it says otherwise: a machine with one GPU skips that case)."""
    from srgpu.engine.gpuinfo import cuda_status
    from test_chunks_resume import every_change_overlapped, recording

    if gpu >= len(cuda_status().devices):
        pytest.skip(f"no cuda:{gpu} here")
    dst = tmp_path / "in_process.mkv"
    options = VideoOptions(OPTIONS.encode, hwdec="auto")
    spec = EngineSpec(SPEC.model, SPEC.scale, device=f"cuda:{gpu}", precision=SPEC.precision)
    cj = chunked.plan_chunked(clip, dst, spec.identity(), options, workers=1, chunk_seconds=0.6, gpu=gpu)
    assert not isinstance(cj, str) and cj.nvdec == "h264_cuvid" and len(cj.chunks) >= 4, cj
    events: list[tuple[str, int]] = []
    results: list[chunked.ChunkResult] = []
    with spec.create() as engine:
        result = chunked.upscale_chunked(cj, recording(InProcess, events, results)(engine))
    assert result.decoder.startswith("h264_cuvid") and result.frames == cj.scan.frames, result.decoder
    assert on_nvdec(results, 1), results
    assert every_change_overlapped(events, cj), events
    close_enough(dst, single)
    assert leftovers(tmp_path) == [] and not chunked.work_folder(dst).exists()


def test_chunks_on_two_gpus(tmp_path: Path, clip: Path, single: Path) -> None:
    """One chunk worker on each of two GPUs (a machine with one GPU skips this)."""
    from srgpu.engine.gpuinfo import cuda_status

    if len(cuda_status().devices) < 2:
        pytest.skip("one usable GPU: nothing to spread over")
    dst = tmp_path / "two_gpus.mkv"
    cj = chunked.plan_chunked(clip, dst, SPEC.identity(), OPTIONS, workers=2, chunk_seconds=0.6)
    assert not isinstance(cj, str) and len(cj.chunks) >= 4
    with LocalPool(SPEC, ["cuda:0", "cuda:1"]) as pool:
        result = chunked.upscale_chunked(cj, pool)
    assert result.frames == cj.scan.frames
    close_enough(dst, single)
    assert leftovers(tmp_path) == [] and not chunked.work_folder(dst).exists()
