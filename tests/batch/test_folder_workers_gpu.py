"""A folder of videos (and an image) on two worker processes sharing one GPU, one file per task
(srgpu.batch.pool_files), against the in-process batch on the same GPU: every file done, every frame
at its time, the pictures within the GPU plans' agreement. Skipped where no CUDA GPU is usable."""

from __future__ import annotations

from pathlib import Path

import pytest

from srgpu.batch.pool_files import run_files
from srgpu.batch.plan import plan_batch
from srgpu.batch.local import run_batch
from srgpu.video.api import EncodeOptions, VideoOptions
from srgpu.batch.pool import LocalPool
from test_chunks_gpu import SPEC, close_enough
from test_video import ff, leftovers

pytestmark = pytest.mark.gpu

OPTIONS = VideoOptions(EncodeOptions(codec="ffv1"), hwdec="auto")  # ffv1: the frames, not x264's choices
NAMES = ("a.mkv", "b.mkv", "c.mkv", "d.mkv")


@pytest.fixture(scope="module")
def folder(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four 1 s cuts of the 1080p clip (with its audio) and one of its frames as a PNG."""
    root = tmp_path_factory.mktemp("gpu-folder") / "in"
    root.mkdir()
    src = shared_data / "video" / "smpte_1080p25_h264_aac.mp4"
    for k, name in enumerate(NAMES):
        ff("-ss", str(k), "-i", str(src), "-t", "1", "-map", "0", "-c", "copy", str(root / name))
    ff("-i", str(src), "-frames:v", "1", str(root / "frame.png"))
    return root


def test_a_folder_of_videos_on_two_workers_of_one_gpu(folder: Path, tmp_path: Path) -> None:
    single = tmp_path / "single"
    with SPEC.create() as engine:
        reference = run_batch(plan_batch(folder, single), engine, OPTIONS)
    assert len(reference.done) == 5
    out = tmp_path / "workers"
    frames: list[int] = []
    with LocalPool(SPEC, ["cuda:0", "cuda:0"]) as pool:
        result = run_files(plan_batch(folder, out), pool, OPTIONS, on_frames=frames.append)
    assert len(result.done) == 5 and not result.failed, [o.message for o in result.failed]
    for name in NAMES:
        close_enough(out / name, single / name)
    assert sum(frames) > 0 and leftovers(out) == []
    assert (out / "frame.png").stat().st_size > 0
