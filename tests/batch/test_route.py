"""srgpu.batch.route.upscale, the library function behind ``srgpu upscale``, on the CPU with real
small inputs: an image, a folder, a short video, and a video cut into chunks (--chunk-seconds);
what it says through its callbacks, and that it is silent without them."""

from __future__ import annotations

from pathlib import Path

import pytest

from srgpu.batch.local import ImageOptions
from srgpu.engine import EngineError
from srgpu.batch.route import Callbacks, RunResult, UpscaleOptions, make_engine, upscale
from srgpu.images.files import read_image, write_image_atomic
from srgpu.model import load_npz
from srgpu.video import chunked
from srgpu.video.api import EncodeOptions, VideoOptions
from conftest import random_image
from test_video import frame_times, make_clip

X264_GOP = "keyint={k}:min-keyint={k}:scenecut=0:bframes=3"


class Heard(Callbacks):
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.engines: list[str] = []
        self.pools: list[tuple[str, bool]] = []
        self.plans: list = []
        self.models: list = []

    def say(self, message: str) -> None:
        self.lines.append(message)

    def planned(self, plan) -> None:
        self.plans.append(plan)

    def model(self, model) -> None:  # type: ignore[override]
        self.models.append(model)

    def engine(self, engine, description: str) -> None:  # type: ignore[override]
        self.engines.append(description)

    def workers(self, description: str, gpu: bool) -> None:  # type: ignore[override]
        self.pools.append((description, gpu))


def test_options_are_frozen(tmp_path: Path) -> None:
    options = UpscaleOptions(tmp_path / "a.png", tmp_path / "b.png")
    with pytest.raises(AttributeError):
        options.scale = 3  # type: ignore[misc]
    assert options.scale == 2 and options.device == "auto" and options.video == VideoOptions()


def test_an_image_in_process(tmp_path: Path, random_npz: Path, capsys) -> None:
    src, dst = tmp_path / "a.png", tmp_path / "a_x2.png"
    write_image_atomic(src, random_image((12, 17, 3)))
    heard = Heard()
    result = upscale(UpscaleOptions(src, dst, model=str(random_npz), device="cpu"), heard)
    assert isinstance(result, RunResult) and result.route == "in-process" and result.exit_code == 0
    assert result.batch is not None and [o.status for o in result.batch.outcomes] == ["done"]
    assert read_image(dst).shape == (24, 34, 3)
    assert heard.engines == ["CPU"] and heard.plans == [result.plan] and heard.models[0].arch == "9-1-5"
    assert heard.lines == [f"device: CPU; model: {heard.models[0].describe()}"]
    # make_engine, as the command's other subcommands use it: the device line said once
    said: list[str] = []
    with make_engine("cpu", load_npz(random_npz), 2, say=said.append) as engine:
        assert engine.name == "cpu" and said == heard.lines
    # silent without callbacks; an output that exists is refused as the command refuses it
    again = upscale(UpscaleOptions(src, dst, model=str(random_npz), device="cpu", overwrite=True))
    assert [o.status for o in again.batch.outcomes] == ["done"] and again.exit_code == 0
    assert capsys.readouterr().err == ""
    from srgpu.batch.plan import BatchError

    with pytest.raises(BatchError, match="output exists"):
        upscale(UpscaleOptions(src, dst, model=str(random_npz), device="cpu"))


def test_a_folder_in_process_and_the_workers_note(tmp_path: Path, random_npz: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        write_image_atomic(folder / f"{i}.png", random_image((9, 11), seed=i))
    (folder / "sub").mkdir()
    write_image_atomic(folder / "sub" / "x.jpg", random_image((8, 8, 3), seed=9))
    heard = Heard()
    result = upscale(UpscaleOptions(folder, tmp_path / "out", model=str(random_npz), device="cpu",
                                    format="png", images=ImageOptions(jobs=1)), heard)
    assert result.route == "in-process" and result.exit_code == 0
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.png")) == \
        ["0.png", "1.png", "2.png", "sub/x.png"]
    assert read_image(tmp_path / "out" / "sub" / "x.png").shape == (16, 16, 3)
    # one image with --workers: said, and run here
    heard = Heard()
    one = upscale(UpscaleOptions(folder / "0.png", tmp_path / "one.png", model=str(random_npz), device="cpu",
                                 workers=2), heard)
    assert one.route == "in-process" and heard.lines[0].startswith("note: --workers and --cluster apply")
    assert "one image runs in this process" in heard.lines[0]
    # --gpus with --device cpu: refused, not ignored
    with pytest.raises(EngineError, match="--device cpu keeps the work on the CPU"):
        upscale(UpscaleOptions(folder / "0.png", tmp_path / "gpus.png", model=str(random_npz), device="cpu",
                               gpus="0"), Heard())
    assert not (tmp_path / "gpus.png").exists()


def test_a_folder_on_two_workers(tmp_path: Path, random_npz: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        write_image_atomic(folder / f"{i}.png", random_image((9, 11), seed=i))
    heard = Heard()
    result = upscale(UpscaleOptions(folder, tmp_path / "out", model=str(random_npz), device="cpu", workers=2), heard)
    assert result.route == "workers" and result.exit_code == 0
    assert sorted(o.status for o in result.batch.outcomes) == ["done"] * 3
    assert heard.pools == [("2 CPU workers", False)]
    assert any(line.startswith("3 files, one per task, on ") for line in heard.lines)
    for i in range(3):
        assert read_image(tmp_path / "out" / f"{i}.png").shape == (18, 22)


def test_a_short_video_stays_one_pipeline(tmp_path: Path, random_npz: Path) -> None:
    src = make_clip(tmp_path / "src.mp4", frames=8)
    heard = Heard()
    result = upscale(UpscaleOptions(src, tmp_path / "out.mp4", model=str(random_npz), device="cpu"), heard)
    assert result.route == "in-process" and result.exit_code == 0
    (outcome,) = result.batch.outcomes
    assert outcome.status == "done" and (tmp_path / "out.mp4").is_file()
    assert not any("chunks" in line for line in heard.lines)


def test_a_video_cut_into_chunks(tmp_path: Path, random_npz: Path) -> None:
    src = make_clip(tmp_path / "src.mp4", frames=30, codec="libx264",
                    out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6)))
    dst = tmp_path / "out.mp4"
    heard = Heard()
    video = VideoOptions(EncodeOptions(preset="medium"))
    result = upscale(UpscaleOptions(src, dst, model=str(random_npz), device="cpu", video=video, chunk_seconds=0.3),
                     heard)
    assert result.route == "chunks" and result.batch is None and result.exit_code == 0
    assert result.video is not None and result.video.output == dst and result.video.frames == 30
    assert result.chunks > 1 and result.reused_chunks == 0 and result.seconds > 0
    assert heard.engines == ["CPU"]  # one worker: this process's engine
    assert any(line.startswith(f"src.mp4: {result.chunks} chunks, 30 frames, on 1 CPU worker") for line in heard.lines)
    assert dst.is_file() and not chunked.work_folder(dst).exists()


def test_errors_are_raised(tmp_path: Path, random_npz: Path) -> None:
    from srgpu.batch.plan import BatchError

    with pytest.raises(BatchError):
        upscale(UpscaleOptions(tmp_path / "missing.png", tmp_path / "out.png", model=str(random_npz), device="cpu"))


@pytest.mark.gpu
def test_x264s_default_workers_take_a_24_s_video_on_the_gpus(tmp_path: Path, random_npz: Path) -> None:
    """With no flag given, libx264's default worker count on this host's GPUs (about one per 4 cores up to
    four, at least one per GPU: BENCHMARKS.md session 28) cuts a 24 s video into chunks for them; the run's
    one line says the workers and x264's threads, and the output holds every frame at the source's times."""
    from srgpu.batch.pool import default_workers, encoder_threads
    from srgpu.engine.gpuinfo import cuda_status

    status = cuda_status()
    if not status.usable:
        pytest.skip(f"no usable CUDA GPU: {status.reason}")
    workers = default_workers(len(status.devices), None, "libx264")
    if workers < 2:
        pytest.skip("this host's cores give x264 one worker")
    src = make_clip(tmp_path / "src.mp4", rate=5, frames=120, codec="libx264",
                    out_args=("-preset", "veryfast", "-x264-params", X264_GOP.format(k=10)))
    dst = tmp_path / "out.mp4"
    heard = Heard()
    result = upscale(UpscaleOptions(src, dst, model=str(random_npz)), heard)
    assert result.route == "chunks" and result.exit_code == 0 and result.chunks >= workers, heard.lines
    assert heard.pools and heard.pools[0][1] is True  # GPU workers
    line = next(line for line in heard.lines if " chunks, 120 frames, on " in line)
    assert f" on {workers} workers on cuda:" in line, line
    assert f"libx264 on {encoder_threads(workers)} threads each" in line, line
    assert frame_times(dst) == frame_times(src) and not chunked.work_folder(dst).exists()


@pytest.mark.gpu
def test_one_pipeline_runs_on_the_gpu_gpus_names(tmp_path: Path, random_npz: Path) -> None:
    """A single pipeline (one image here) runs on the GPU --gpus names, not on cuda:0."""
    from srgpu.engine.gpuinfo import cuda_status

    status = cuda_status()
    if len(status.devices) < 2:
        pytest.skip("needs two GPUs")
    write_image_atomic(tmp_path / "a.png", random_image((40, 50, 3), seed=1))
    heard = Heard()
    result = upscale(UpscaleOptions(tmp_path / "a.png", tmp_path / "b.png", model=str(random_npz), gpus="1,0"),
                     heard)
    assert result.exit_code == 0 and result.route == "in-process"
    assert any("on cuda:1, the first GPU of --gpus 1,0" in line for line in heard.lines), heard.lines
    assert len(heard.engines) == 1 and "cuda:1" in heard.engines[0], heard.engines
