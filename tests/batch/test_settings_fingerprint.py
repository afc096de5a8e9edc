"""One settings fingerprint (srgpu.manifest.settings_fingerprint) for a folder's images and videos
and a video's chunks, and the records earlier srgpus wrote in their own forms: a folder's video
recorded the user's codec (None where srgpu chose the container's default), a chunked job named
the model (``label``) and no pipeline. Such a record resumes where it means this run's settings
(nothing finished is made again) and is redone where the settings really differ. Real ffmpeg,
real files, the CPU engine, tiny clips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import pytest

from srgpu.batch.local import run_batch
from srgpu.batch.plan import plan_batch
from srgpu.batch.pool import EngineSpec, InProcess
from srgpu.batch.resume import Resume
from srgpu.engine.cpu import CPUEngine
from srgpu.images.files import write_image_atomic
from srgpu.manifest import MANIFEST_NAME, Settings, model_identity, settings_fingerprint, weights_hash
from srgpu.model import random_model
from srgpu.video import chunked
from srgpu.video.api import EncodeOptions, VideoJob, VideoOptions
from test_chunks import X264_GOP
from test_chunks_resume import _Interrupted, _Recording, content
from test_video import BicubicEngine, make_clip

FAST = VideoOptions(EncodeOptions(preset="ultrafast"))
MEDIUM = VideoOptions(EncodeOptions(preset="medium"))


# ------------------------------------------------ the previous srgpu's forms, as it wrote them (71fce58)

def previous_image_settings(model: Any, scale: int) -> Settings:
    """srgpu.batch.resume._image_settings before this change, verbatim."""
    return Settings.of({"scale": scale, "arch": model.arch, "weights": weights_hash(model.arrays()),
                        "pipeline": 1}, label=model.name)


def previous_folder_video_settings(image: Settings, video: VideoOptions) -> Settings:
    """srgpu.batch.resume._video_settings before this change, verbatim: the user's codec."""
    enc = video.encode
    encoder = {"codec": enc.codec, "crf": enc.crf, "preset": enc.preset, "pix_fmt": enc.pix_fmt,
               "encoder_args": list(enc.extra_args), "video_stream": video.video_stream}
    if video.deinterlace != "auto":
        encoder["deinterlace"] = video.deinterlace
    return Settings.of({**dict(image.values), **encoder}, label=image.label)


def previous_chunk_settings(job: VideoJob, options: VideoOptions, identity: Mapping[str, Any]) -> Settings:
    """srgpu.video.chunked.video_settings before this change, verbatim: the label in the key, no pipeline."""
    enc = options.encode
    values = {**identity, "codec": job.codec, "crf": enc.crf, "preset": enc.preset, "pix_fmt": job.pix_fmt,
              "encoder_args": list(enc.extra_args), "video_stream": job.stream.index}
    if job.deinterlace is not None:
        values["deinterlace"] = job.reader_args.get("vf_pre")
    return Settings.of(values, label=str(identity.get("label", "")))


# ------------------------------------------------ one form

def test_images_videos_and_chunks_share_one_form(tmp_path: Path) -> None:
    """The model's part is the same for images, a folder's videos and chunks (the name of the model
    only labels it; the pipeline is in each), and a video's codec is the one it gets, never None."""
    model = random_model("9-1-5", seed=4, scale=2)
    identity = EngineSpec(model, 2).identity()
    image = settings_fingerprint(identity)
    assert image == previous_image_settings(model, 2)  # an image's record is what it was: no migration
    clip = make_clip(tmp_path / "c.mkv", frames=4)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "c.mkv").write_bytes(clip.read_bytes())
    plan = plan_batch(tmp_path / "in", tmp_path / "out")
    resume = Resume(plan, model_identity(model, 2), FAST)
    try:
        folder = dict(resume._settings(plan.jobs[0]).values)
    finally:
        resume.close()
    job = chunked.plan_video(clip, tmp_path / "o.mkv", 2, FAST)
    chunk = dict(chunked.video_settings(job, FAST, identity).values)
    for values in (folder, chunk):
        assert {k: values[k] for k in dict(image.values)} == dict(image.values)
        assert values["codec"] == "libx264" and "label" not in values
    # the choices made from the source: resolved for a chunk (its job is planned first), the options
    # for a folder (decided before any source is read; the source's fingerprint is beside them)
    assert (chunk["pix_fmt"], chunk["video_stream"]) == ("yuv420p", 0)
    assert (folder["pix_fmt"], folder["video_stream"]) == (None, None)


# ------------------------------------------------ a folder's manifest

def _to_previous_form(out: Path, name: str, model: Any, video: VideoOptions) -> str:
    """Rewrite the record of ``name`` in ``out``'s manifest as the previous srgpu wrote it for the
    same run; the old settings' key."""
    path = out / MANIFEST_NAME
    data = json.loads(path.read_text())
    old = previous_folder_video_settings(previous_image_settings(model, 2), video)
    assert data["outputs"][name]["settings"] != old.key  # really another form
    data["outputs"][name]["settings"] = old.key
    data["settings"][old.key] = old.as_json()
    path.write_text(json.dumps(data))
    return old.key


def test_a_folder_video_recorded_by_the_previous_srgpu_resumes(tmp_path: Path, make_image) -> None:  # type: ignore[no-untyped-def]
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    make_clip(src / "clip.mkv", frames=4)
    write_image_atomic(src / "still.png", make_image((6, 5, 3), seed=2))
    model = random_model("9-1-5", seed=5, scale=2)
    engine = CPUEngine(model, 2)
    first = run_batch(plan_batch(src, out), engine, FAST)
    assert first.exit_code == 0 and len(first.done) == 2
    made = (out / "clip.mkv").stat().st_mtime_ns
    _to_previous_form(out, "clip.mkv", model, FAST)

    # the same settings (the default codec, as before: None then, libx264 now): nothing is made again
    again = run_batch(plan_batch(src, out), engine, FAST)
    assert not again.done and len(again.skipped) == 2
    assert all("done by an earlier run with the same settings" in o.message for o in again.skipped)
    # naming the codec the container gave is the same settings too
    named = VideoOptions(EncodeOptions(codec="libx264", preset="ultrafast"))
    assert not run_batch(plan_batch(src, out), engine, named).done
    assert (out / "clip.mkv").stat().st_mtime_ns == made

    # really other settings: redone, and the note names what differs (not the codec, which does not)
    other = run_batch(plan_batch(src, out), engine, VideoOptions(EncodeOptions(preset="ultrafast", crf=30)))
    assert [o.job.src.name for o in other.done] == ["clip.mkv"] and other.done[0].redone
    assert other.done[0].notes[0] == "redone: the output was made with crf None (now 30)"
    assert [o.job.src.name for o in other.skipped] == ["still.png"]


def test_a_folder_video_recorded_by_the_previous_srgpu_with_the_default_codec_is_redone_for_another(
        tmp_path: Path) -> None:
    """The previous srgpu's None is the codec the output's container gave (libx264 for .mkv): an
    explicit libx265 now is another codec, and the note says which it was."""
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    make_clip(src / "clip.mkv", frames=4)
    model = random_model("9-1-5", seed=5, scale=2)
    engine = CPUEngine(model, 2)
    assert run_batch(plan_batch(src, out), engine, FAST).exit_code == 0
    _to_previous_form(out, "clip.mkv", model, FAST)
    x265 = VideoOptions(EncodeOptions(codec="libx265", preset="ultrafast"))
    redone = run_batch(plan_batch(src, out), engine, x265)
    assert redone.done[0].redone and redone.done[0].notes[0] == "redone: the output was made with codec libx264 (now libx265)"
    assert not run_batch(plan_batch(src, out), engine, x265).done  # recorded in today's form: skipped


# ------------------------------------------------ a chunked job's work folder

@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_clip(tmp_path_factory.mktemp("fingerprint") / "src.mp4", frames=60, codec="libx264", audio="aac",
                     out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6)))


@pytest.mark.slow
def test_a_work_folder_made_by_the_previous_srgpu_keeps_its_chunks(tmp_path: Path, clip: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks made and recorded by the previous srgpu (its job.json and certificates, from its own
    settings function) are kept by this one with the same settings, and the output is the one an
    uninterrupted run makes; with really other settings they are all made again."""
    model = random_model("9-1-5", seed=3, scale=2)
    engine = BicubicEngine(model, 2)
    identity = EngineSpec(model, 2).identity()
    assert identity["label"]  # the previous form put it in the key

    def plan(dst: Path, options: VideoOptions = MEDIUM) -> chunked.ChunkedJob:
        cj = chunked.plan_chunked(clip, dst, identity, options, chunk_seconds=0.3)
        assert not isinstance(cj, str)
        return cj

    reference = tmp_path / "reference.mp4"
    chunked.upscale_chunked(plan(reference), InProcess(engine))
    dst = tmp_path / "out.mp4"
    with monkeypatch.context() as m:
        m.setattr(chunked, "video_settings", previous_chunk_settings)
        old = plan(dst)
        with pytest.raises(KeyboardInterrupt):
            chunked.upscale_chunked(old, _Interrupted(engine, 3))
    work = chunked.work_folder(dst)
    recorded = json.loads((work / "job.json").read_text())
    assert "label" in recorded["settings"]["values"] and "pipeline" not in recorded["settings"]["values"]

    cj = plan(dst)
    assert cj.settings.key != recorded["settings"]["key"]  # this srgpu's own form differs...
    assert cj.key == old.key == recorded["key"] and not cj.notes  # ...and means the same: kept, nothing said
    runner = _Recording(engine)
    result = chunked.upscale_chunked(cj, runner)
    assert len(runner.made) == len(cj.chunks) - 3 and result.frames == 60
    assert content(dst) == content(reference)

    # really other settings over the previous srgpu's chunks: every chunk made again, and said why
    again = tmp_path / "again.mp4"
    with monkeypatch.context() as m:
        m.setattr(chunked, "video_settings", previous_chunk_settings)
        with pytest.raises(KeyboardInterrupt):
            chunked.upscale_chunked(plan(again), _Interrupted(engine, 3))
    crf = VideoOptions(EncodeOptions(preset="medium", crf=30))
    cj = plan(again, crf)
    assert any("starting over" in n and "crf None (now 30)" in n and "label" not in n for n in cj.notes), cj.notes
    runner = _Recording(engine)
    chunked.upscale_chunked(cj, runner)
    assert sorted(runner.made) == list(range(len(cj.chunks)))
