"""Decoding that hands over from the software decoder to a cheaper one (NVDEC on the GPU machine:
tests/video/test_gpu_nvdec.py) once that one has given the same frames. Here the second decoder is
another ffmpeg software decoder: the same one (it takes over), one told to skip the loop filter (it
decodes differently: it must never take over), or one given an option that does not exist (it
fails: it must never take over). Either way every frame is the software decoder's, none lost or
repeated, and no decoder is left running."""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path

import pytest

from srgpu.model import random_model
from srgpu.video import api, hwdecode
from srgpu.video.api import EncodeOptions, VideoOptions, open_reader, plan_video, upscale_video
from srgpu.video.handover import AGREE_FRAMES, HandoverReader
from srgpu.video.pipeline import run_pipeline
from srgpu.video.reader import Reader
from srgpu.video.writer import Writer

from test_video import BicubicEngine, assert_same_frames, decode, expected_frames, make_clip

FRAMES = 60


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # B-frames (reordered output) and a loop filter that matters: what a real H.264 stream has
    return make_clip(tmp_path_factory.mktemp("handover") / "src.mp4", size="96x64", frames=FRAMES,
                     codec="libx264", out_args=("-crf", "23", "-bf", "2"))


def handover(src: Path, decoder: str, options: tuple[str, ...] = ()) -> HandoverReader:
    job = plan_video(src, src.with_name("unused.mkv"), 2)
    first = Reader(job.src, job.stream.index, job.layout, **job.reader_args)
    args = {**job.reader_args, "decoder": decoder, "decoder_options": options}
    return HandoverReader(first, Reader(job.src, job.stream.index, job.layout, **args), second_name=decoder)


def read_all(reader: Reader | HandoverReader, pace: float = 0.0) -> list[tuple[int, int, bytes]]:
    """(index, pts, samples) of every frame, taken ``pace`` seconds apart (a consumer slower than
    the decoders, as the encoder is)."""
    reader.start()
    got = []
    try:
        for f in reader.frames():
            got.append((f.index, f.pts, b"".join(p.tobytes() for p in f.planes)))
            if f.recycle is not None:
                f.recycle()
            time.sleep(pace)
    finally:
        reader.kill()
    return got


def software_frames(src: Path) -> list[tuple[int, int, bytes]]:
    job = plan_video(src, src.with_name("unused.mkv"), 2)
    return read_all(Reader(job.src, job.stream.index, job.layout, **job.reader_args))


def children_gone(reader: HandoverReader) -> bool:
    return all(r._proc is None or r._proc.poll() is not None for r in (reader.first, reader.second))


def test_an_identical_decoder_takes_over_and_the_frames_stay_the_same(clip: Path) -> None:
    reader = handover(clip, "h264")
    got = read_all(reader, pace=0.01)
    assert got == software_frames(clip)
    assert len(got) == reader.frames_read == FRAMES
    assert reader.note is None
    assert reader.handover_at is not None and AGREE_FRAMES <= reader.handover_at < FRAMES
    assert children_gone(reader)


@pytest.mark.parametrize("options, note", [
    (("-skip_loop_filter", "all"),  # decodes differently, as a hardware decoder with a flaw would
     r"h264 decodes frame \d+ differently from the software decoder: decoded on the CPU"),
    (("-no_such_option", "1"), r"h264 failed: .*: decoded on the CPU"),  # cannot start decoding
])
def test_a_decoder_that_differs_or_fails_never_takes_over(clip: Path, options: tuple[str, ...], note: str) -> None:
    reader = handover(clip, "h264", options)
    got = read_all(reader, pace=0.01)
    assert got == software_frames(clip)
    assert reader.handover_at is None
    assert re.fullmatch(note, reader.note or ""), reader.note
    assert children_gone(reader)


def test_a_fast_consumer_may_finish_on_the_first_decoder(clip: Path) -> None:
    """No pacing: whether the second decoder catches up is a race, but the frames never depend on it."""
    reader = handover(clip, "h264")
    assert read_all(reader) == software_frames(clip)
    assert reader.handover_at is None or reader.handover_at >= AGREE_FRAMES
    assert children_gone(reader)


class SlowBicubic(BicubicEngine):
    """Bicubic at an encoder's pace, so that the second decoder catches up."""

    def upscale_frame(self, planes, specs, max_value):  # type: ignore[no-untyped-def]
        time.sleep(0.01)
        return super().upscale_frame(planes, specs, max_value)


def test_upscale_video_says_which_decoders_decoded(clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the whole pipeline (decoded into the engine's buffers, recycled): the output is the
    engine's on the software decoder's frames, and the result names both decoders. NVDEC is stood
    in for by ffmpeg's h264 decoder (choose_decoder's "auto" answer, patched)."""
    engine = SlowBicubic(random_model("9-1-5", seed=13), 2)
    monkeypatch.setattr(api, "choose_decoder", lambda *a, **k: hwdecode.DecoderChoice(takeover=("h264", ())))
    result = upscale_video(clip, tmp_path / "out.mkv", engine, VideoOptions(EncodeOptions(codec="ffv1"), hwdec="auto"))
    m = re.fullmatch(r"software, then h264 from frame (\d+)", result.decoder)
    assert m and AGREE_FRAMES <= int(m.group(1)) < FRAMES, result.decoder
    assert result.frames == FRAMES
    assert_same_frames(decode(tmp_path / "out.mkv", "yuv420p", 192, 128),
                       expected_frames(engine, clip, "yuv420p", 96, 64, 2))


def test_a_pipeline_failure_stops_both_decoders(clip: Path, tmp_path: Path) -> None:
    class Failing(SlowBicubic):
        calls = 0

        def upscale_frame(self, planes, specs, max_value):  # type: ignore[no-untyped-def]
            Failing.calls += 1
            if Failing.calls == 20:
                raise RuntimeError("engine broke")
            return super().upscale_frame(planes, specs, max_value)

    job = dataclasses.replace(plan_video(clip, tmp_path / "out.mkv", 2, VideoOptions(EncodeOptions(codec="ffv1"))),
                              takeover=("h264", ()))
    reader = open_reader(job)
    assert isinstance(reader, HandoverReader)
    with pytest.raises(RuntimeError, match="engine broke"):
        run_pipeline(reader, Failing(random_model("9-1-5", seed=13), 2), job.specs, job.layout.max_value,
                     Writer(job.plan))
    deadline = time.monotonic() + 5
    while not children_gone(reader) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert children_gone(reader)


def test_auto_offers_nvdec_to_take_over_without_a_trial(clip: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """"auto" starts nothing while planning: NVDEC is checked while the video decodes."""
    if "h264_cuvid" not in hwdecode.ffmpeg.video_codecs("decoders"):
        pytest.skip("this ffmpeg has no h264_cuvid")
    monkeypatch.setattr(hwdecode, "nvcuvid_loadable", lambda: True)
    monkeypatch.setattr(hwdecode.ffmpeg, "run", lambda *a, **k: pytest.fail("no trial should run"))
    choice = hwdecode.choose_decoder(clip, 0, "h264", "auto", 1, "yuv420p", None)
    assert choice == hwdecode.DecoderChoice(takeover=("h264_cuvid", ("-gpu:0", "1")))


def test_the_cli_says_when_nvdec_decoded(clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The done line names the decoders when one took over (the CPU SRCNN sets a slow enough pace)."""
    from typer.testing import CliRunner

    from srgpu.cli import app

    monkeypatch.setattr(api, "choose_decoder", lambda *a, **k: hwdecode.DecoderChoice(takeover=("h264", ())))
    result = CliRunner().invoke(app, ["upscale", str(clip), "-o", str(tmp_path / "out.mkv"), "--device", "cpu",
                                      "--codec", "ffv1"])
    assert result.exit_code == 0, result.output
    assert re.search(rf"{FRAMES} frames, 192x128, ffv1 .*, decoded by software, then h264 from frame \d+", result.output), \
        result.output
