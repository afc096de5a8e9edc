"""Decisions made once, where their input enters, and trusted below: a short single video is
probed and planned once per run (the chunked path's plan is handed to the single pipeline), and
the hwdec mode that applies is decided by srgpu.video.hwdecode.decide for the single pipeline and
the chunks alike. Real ffmpeg, real files, the CPU engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from srgpu.batch.route import UpscaleOptions, upscale
from srgpu.engine.cpu import CPUEngine
from srgpu.model import random_model
from srgpu.video import api, chunked, hwdecode
from srgpu.video.api import EncodeOptions, VideoOptions, for_engine, plan_video
from srgpu.video.errors import VideoError
from test_video import make_clip


def _count(monkeypatch: pytest.MonkeyPatch, module: object, name: str, calls: list[str]) -> None:
    original = getattr(module, name)

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(name)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)


@pytest.mark.parametrize("extra", [{}, {"workers": 2}])
def test_a_short_single_video_is_probed_and_planned_once(tmp_path: Path, random_npz: Path,
                                                         monkeypatch: pytest.MonkeyPatch, extra: dict) -> None:
    src = make_clip(tmp_path / "short.mkv", frames=6, codec="libx264")
    calls: list[str] = []
    _count(monkeypatch, api, "probe", calls)  # plan_video's and upscale_video's
    _count(monkeypatch, api, "plan_video", calls)
    _count(monkeypatch, chunked, "plan_video", calls)
    result = upscale(UpscaleOptions(src, tmp_path / "out.mkv", model=str(random_npz), device="cpu",
                                    video=VideoOptions(EncodeOptions(preset="ultrafast")), **extra))
    assert result.route == "in-process" and result.exit_code == 0 and result.batch.done[0].video.frames == 6
    assert calls == ["plan_video", "probe"]


def test_a_plan_for_another_engine_is_planned_again(tmp_path: Path) -> None:
    """The job handed down fits only the engine it was planned for (scale, GPU): else None, and
    upscale_video plans it again."""
    src = make_clip(tmp_path / "c.mkv", frames=3)
    job = plan_video(src, tmp_path / "o.mkv", 2, VideoOptions(hwdec="no"))
    two, three = CPUEngine(random_model("9-1-5", seed=1), 2), CPUEngine(random_model("9-1-5", seed=1, scale=3), 3)
    assert for_engine(job, VideoOptions(), three) is None
    again = for_engine(job, VideoOptions(), two)
    assert again is not None and again.hwdec == "no" and again.decoder == "software" and again.takeover is None
    fake_gpu = type("GPUEngine", (CPUEngine,), {"name": "cuda", "device_index": 0})(random_model("9-1-5", seed=1), 2)
    assert for_engine(job, VideoOptions(), fake_gpu) is None  # NVENC's device and NVDEC's are the engine's


def test_hwdec_is_decided_in_one_place() -> None:
    decide = hwdecode.decide
    assert decide("auto", False, None) == "no"  # a CPU engine keeps the GPU out of it
    assert decide("auto", False, 1) == "auto" and decide("nvdec", False, None) == "nvdec"
    assert decide("no", False, 0) == "no"
    assert decide("auto", True, 0) == "no"  # strict decodes on the CPU
    with pytest.raises(VideoError, match="strict mode decodes on the CPU"):
        decide("nvdec", True, 0)


def test_strict_nvdec_is_refused_for_chunks_as_for_the_single_pipeline(tmp_path: Path) -> None:
    """One decision for both paths: a long video cut into chunks is refused --strict with
    --hwdec nvdec before any work, in the single pipeline's words (it used to decode its chunks
    on the CPU without a word)."""
    src = make_clip(tmp_path / "long.mkv", frames=30, codec="libx264", out_args=("-g", "5"))
    options = VideoOptions(EncodeOptions(preset="ultrafast"), hwdec="nvdec", strict=True)
    with pytest.raises(VideoError, match="strict mode decodes on the CPU"):
        chunked.plan_chunked(src, tmp_path / "o.mkv", {"scale": 2}, options, chunk_seconds=0.3)
    with pytest.raises(VideoError, match="strict mode decodes on the CPU"):
        plan_video(src, tmp_path / "o.mkv", 2, options)
    assert not chunked.work_folder(tmp_path / "o.mkv").exists()


def test_a_job_planned_for_one_scale_is_refused_by_an_engine_of_another(tmp_path: Path) -> None:
    """The scale is decided once, when a video is planned; where the planned job meets the engine
    that runs it (the single pipeline's encode, a chunk's worker) another scale is refused in one
    line, before a frame is decoded (it used to fill the planned frame size with the x3 model)."""
    src = make_clip(tmp_path / "long.mkv", frames=30, codec="libx264", out_args=("-g", "5"))
    options = VideoOptions(EncodeOptions(preset="ultrafast"), hwdec="no")
    three = CPUEngine(random_model("9-1-5", seed=1, scale=3), 3)
    job = plan_video(src, tmp_path / "o.mkv", 2, options)
    with pytest.raises(VideoError) as refused:
        api.encode(job, three)
    assert str(refused.value) == f"{src}: planned for x2, but the engine upscales x3"
    assert not (tmp_path / "o.mkv").exists() and not job.plan.tmp.exists()
    cj = chunked.plan_chunked(src, tmp_path / "c.mkv", {"scale": 2}, options, chunk_seconds=0.3)
    assert isinstance(cj, chunked.ChunkedJob)
    with pytest.raises(VideoError) as refused:
        cj.task(cj.chunks[0]).execute(three)
    assert str(refused.value) == f"{cj.job.src}: planned for x2, but the engine upscales x3"
    assert "\n" not in str(refused.value) and not chunked.chunk_path(cj.work, 0).exists()


def test_a_worker_spec_of_a_model_made_for_another_scale_is_refused_where_it_is_made() -> None:
    """EngineSpec is where the model and the scale meet for the workers: refused there, in the
    caller, with the engine's own message, not in every worker that would make an engine of it."""
    from srgpu.batch.pool import EngineSpec
    from srgpu.model import ModelError

    model = random_model("9-1-5", seed=1, scale=3)
    with pytest.raises(ModelError) as refused:
        EngineSpec(model, 2)
    assert str(refused.value) == f"model {model.name} is trained for x3, not x2; choose --scale 3 or a model for x2"
    assert EngineSpec(model, 3).identity()["scale"] == 3
