"""Frame accounting read from the output: a file that does not hold every decoded frame, at its
time, is never published; and a decoder that took over (NVDEC; here a software stand-in reading a
copy of the clip that lacks its last frame) and then ends a frame early is caught and the video
decoded again, so the output is still complete. Real ffmpeg throughout."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import time
from fractions import Fraction
from pathlib import Path

import pytest

from srgpu.model import random_model
from srgpu.video import api, hwdecode
from srgpu.video.api import EncodeOptions, VideoOptions, plan_video, upscale_video
from srgpu.video.errors import VideoError
from srgpu.video.ffmpeg import ffmpeg_exe
from srgpu.video.handover import HandoverReader, TakeoverMismatch
from srgpu.video.reader import Reader
from srgpu.video.verify import SourceTiming, check_frames, stream_packets

from test_handover import SlowBicubic, read_all, software_frames
from test_video import BicubicEngine, frame_times, leftovers, make_clip

FRAMES = 40


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A clip with B-frames ending on a P frame (x264 never ends on a B), and the same stream with
    its last packet cut off: the stand-in for a decoder that loses the last frame."""
    folder = tmp_path_factory.mktemp("accounting")
    clip = make_clip(folder / "src.mp4", size="96x64", frames=FRAMES, codec="libx264",
                     out_args=("-crf", "23", "-bf", "3", "-x264-params", "b-pyramid=normal",
                               "-video_track_timescale", "10240"))
    short = folder / "short.mp4"
    subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(clip), "-map", "0:v", "-c", "copy", "-frames:v",
                    str(FRAMES - 1), str(short)], check=True)
    assert len(stream_packets(short, 0)) == FRAMES - 1
    return clip, short


def losing_handover(clip: Path, short: Path) -> HandoverReader:
    job = plan_video(clip, clip.with_name("unused.mkv"), 2)
    first = Reader(job.src, job.stream.index, job.layout, **job.reader_args)
    second = Reader(short, job.stream.index, job.layout, **{**job.reader_args, "decoder": "h264"})
    return HandoverReader(first, second, second_name="h264", timing=SourceTiming(clip, job.stream.index))


class NoDurations(Reader):
    """A decoder that reports no frame durations, as NVDEC (h264_cuvid) does: 0 on every frame."""

    def _next_meta(self):  # type: ignore[no-untyped-def]
        meta = super()._next_meta()
        return None if meta is None else dataclasses.replace(meta, duration=0)


def durations(reader: Reader) -> list[tuple[int, int | None]]:
    reader.start()
    try:
        got = []
        for f in reader.frames():
            got.append((f.pts, f.duration))
            f.recycle()
        return got
    finally:
        reader.kill()


def test_a_decoder_without_durations_gets_the_sources_own(clips: tuple[Path, Path]) -> None:
    """NVDEC's frames all say duration 0; an encoder left to guess the last one's can end an MP4
    edit list before the last frame (seen on the H100: 279 of 280 frames shown). Such a decoder's
    frames take the container's durations, exactly what the software decoder reports."""
    clip, _ = clips
    job = plan_video(clip, clip.with_name("unused.mkv"), 2)
    plain = durations(Reader(job.src, job.stream.index, job.layout, **job.reader_args))
    assert all(d for _, d in plain)
    bare = durations(NoDurations(job.src, job.stream.index, job.layout, **job.reader_args))
    assert all(not d for _, d in bare)
    timed = NoDurations(job.src, job.stream.index, job.layout, **job.reader_args,
                        timing=SourceTiming(job.src, job.stream.index))
    assert durations(timed) == plain


def test_a_decoder_that_loses_the_last_frame_after_taking_over_is_caught(clips: tuple[Path, Path]) -> None:
    clip, short = clips
    reader = losing_handover(clip, short)
    with pytest.raises(TakeoverMismatch, match=r"after the handover h264 gave \d+ frames where the source "
                                               r"holds \d+: it is missing the frame at [\d.]+ s"):
        read_all(reader, pace=0.03)  # an encoder's pace, slow enough on a loaded machine for a takeover
    assert reader.handover_at is not None  # it did take over: the loss came after


class Slower(SlowBicubic):
    """30 ms a frame: the second decoder catches up and takes over even on a loaded machine."""

    def upscale_frame(self, planes, specs, max_value):  # type: ignore[no-untyped-def]
        time.sleep(0.02)
        return super().upscale_frame(planes, specs, max_value)


@pytest.mark.slow
def test_upscale_decodes_again_when_the_takeover_lost_a_frame(clips: tuple[Path, Path], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    clip, short = clips

    def open_reader(job: api.VideoJob) -> Reader | HandoverReader:
        first = Reader(job.src, job.stream.index, job.layout, **job.reader_args)
        return first if job.takeover is None else losing_handover(clip, short)

    monkeypatch.setattr(api, "choose_decoder", lambda *a, **k: hwdecode.DecoderChoice(takeover=("h264", ())))
    monkeypatch.setattr(api, "open_reader", open_reader)
    told: list[int] = []
    dst = tmp_path / "out.mkv"
    result = upscale_video(clip, dst, Slower(random_model("9-1-5", seed=3), 2),
                           VideoOptions(EncodeOptions(codec="ffv1"), hwdec="auto"),
                           progress=lambda n, total: told.append(n))
    assert result.frames == FRAMES and result.decoder == "software"
    got, want = frame_times(dst), frame_times(clip)
    assert len(got) == len(want) and max(abs(a - b) for a, b in zip(got, want)) <= Fraction(1, 1000)  # Matroska: ms
    assert any(re.search(r"h264 gave \d+ frames where the source holds \d+.*; decoded again on the CPU", n)
               for n in result.notes), result.notes
    assert sum(told) == FRAMES  # the progress told of the first attempt is taken back
    assert leftovers(tmp_path) == []


def test_the_software_decoder_alone_matches_the_source(clips: tuple[Path, Path]) -> None:
    clip, _ = clips
    frames = software_frames(clip)
    assert len(frames) == FRAMES


@pytest.mark.parametrize("encoder_args, message", [
    (("-frames:v", "7"), r"the encoded file holds 7 video frames, but the decoder gave 8"),
    (("-filter:0", "setpts=PTS*2"), r"frame 1 of the encoded file is at 0\.08\d* s from the first, where the "
                                    r"source has it at 0\.04\d* s"),
])
def test_an_output_missing_or_moving_frames_is_never_published(tmp_path: Path, encoder_args: tuple[str, ...],
                                                               message: str) -> None:
    src = make_clip(tmp_path / "src.mp4", frames=8, codec="libx264", out_args=("-preset", "ultrafast"))
    dst = tmp_path / "out.mp4"
    engine = BicubicEngine(random_model("9-1-5", seed=1), 2)
    with pytest.raises(VideoError, match=message):
        upscale_video(src, dst, engine, VideoOptions(EncodeOptions(preset="ultrafast", extra_args=encoder_args)))
    assert leftovers(tmp_path) == [] and not dst.exists()


def test_check_frames_counts_what_the_file_holds(tmp_path: Path) -> None:
    src = make_clip(tmp_path / "src.mkv", frames=6, codec="ffv1")
    packets = stream_packets(src, 0)
    sent = [round(t / packets.time_base) for t in packets.times()]
    assert check_frames(src, 0, sent, packets.time_base) == 6
    with pytest.raises(VideoError, match="holds 6 video frames, but the decoder gave 7"):
        check_frames(src, 0, sent + [sent[-1] + 40], packets.time_base)
