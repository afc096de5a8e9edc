"""Sources a hostile trial brought (session 27), each made here with real ffmpeg and upscaled by
the real pipeline: a Matroska file whose first timestamp is not 0 (its Duration counts from 0),
a stream left out that lasts longer than the kept ones, a file name with a newline, a phone's
reverse-DNS tags in MOV/MP4, and alpha in a codec that decodes it itself (FFV1 yuva420p)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from srgpu.model import random_model
from srgpu.video.api import EncodeOptions, VideoOptions, upscale_video
from srgpu.video.chunked import plan_chunked, upscale_chunked
from srgpu.video.probe import probe
from srgpu.batch.pool import InProcess

from test_video import BicubicEngine, decode, dump, expected_frames, ff, frame_times, make_clip

FAST = VideoOptions(EncodeOptions(preset="ultrafast"))
FFV1 = VideoOptions(EncodeOptions(codec="ffv1"))


@pytest.fixture(scope="module")
def bicubic2() -> BicubicEngine:
    return BicubicEngine(random_model("9-1-5", seed=13), 2)


def late_mkv(tmp_path: Path, offset: float = 5.0) -> Path:
    base = make_clip(tmp_path / "base.mkv", frames=30, codec="libx264", audio="aac",
                     out_args=("-preset", "ultrafast", "-g", "5"))
    src = tmp_path / "late.mkv"
    ff("-i", str(base), "-map", "0", "-c", "copy", "-output_ts_offset", str(offset), str(src))
    return src


def test_a_matroska_file_starting_late_is_not_taken_for_truncated(tmp_path: Path, bicubic2: BicubicEngine) -> None:
    src = late_mkv(tmp_path)
    info = probe(src)
    assert info.start == pytest.approx(5.0) and info.duration == pytest.approx(1.2, abs=0.05)  # not 6.2
    result = upscale_video(src, tmp_path / "out.mkv", bicubic2, FAST)
    assert result.frames == 30
    src_times, out_times = frame_times(src), frame_times(tmp_path / "out.mkv")
    assert [t - src_times[0] for t in src_times] == [t - out_times[0] for t in out_times]


def test_a_matroska_file_starting_late_is_cut_into_chunks_too(tmp_path: Path, bicubic2: BicubicEngine) -> None:
    src = late_mkv(tmp_path)
    cj = plan_chunked(src, tmp_path / "chunked.mkv", {"scale": 2, "arch": "test", "weights": "bicubic"}, FAST,
                      chunk_seconds=0.4)
    assert not isinstance(cj, str), cj
    result = upscale_chunked(cj, InProcess(bicubic2))
    assert result.frames == 30 and len(cj.chunks) >= 2


def test_a_longer_stream_left_out_is_not_taken_for_truncation(tmp_path: Path, bicubic2: BicubicEngine) -> None:
    main = make_clip(tmp_path / "main.mkv", frames=20, codec="libx264", out_args=("-preset", "ultrafast"))
    second = make_clip(tmp_path / "second.mkv", frames=80, rate=10, size="32x32")  # ffv1, 8 s
    src = tmp_path / "two.mkv"
    ff("-i", str(main), "-i", str(second), "-map", "0:v", "-map", "1:v", "-c", "copy",
       "-disposition:v:1", "0", str(src))
    result = upscale_video(src, tmp_path / "two.mp4", bicubic2, FAST)  # MP4 cannot hold FFV1
    assert result.frames == 20
    assert any("left out" in n for n in result.notes)


def test_a_file_name_with_a_newline_is_read(tmp_path: Path, bicubic2: BicubicEngine) -> None:
    src = make_clip(tmp_path / "new\nline.mkv", frames=6)
    assert probe(src).main_video().width == 64
    result = upscale_video(src, tmp_path / "out\nname.mkv", bicubic2, FFV1)
    assert result.frames == 6 and (tmp_path / "out\nname.mkv").is_file()


@pytest.mark.parametrize("suffix", [".mov", ".mp4"])
def test_a_phones_reverse_dns_tags_are_kept(tmp_path: Path, bicubic2: BicubicEngine, suffix: str) -> None:
    base = make_clip(tmp_path / "base.mkv", frames=6, codec="libx264", out_args=("-preset", "ultrafast"))
    src = tmp_path / f"phone{suffix}"
    ff("-i", str(base), "-c", "copy", "-metadata", "com.apple.quicktime.make=Apple",
       "-metadata", "com.apple.quicktime.location.ISO6709=+35.6586+139.7454+040.000/",
       "-metadata", "title=holiday", "-movflags", "use_metadata_tags", str(src))
    assert ("com.apple.quicktime.make", "Apple") in probe(src).metadata
    dst = tmp_path / f"out{suffix}"
    upscale_video(src, dst, bicubic2, FAST)
    tags = dict(probe(dst).metadata)
    assert tags["com.apple.quicktime.make"] == "Apple"
    assert tags["com.apple.quicktime.location.ISO6709"] == "+35.6586+139.7454+040.000/"
    assert tags["title"] == "holiday"
    plain = tmp_path / f"plain{suffix}"
    ff("-i", str(base), "-c", "copy", "-metadata", "title=holiday", str(plain))
    upscale_video(plain, tmp_path / f"plain_out{suffix}", bicubic2, FAST)
    assert dict(probe(tmp_path / f"plain_out{suffix}").metadata)["title"] == "holiday"


def test_ffv1_alpha_is_kept_into_ffv1_and_said_lost_into_x264(tmp_path: Path, bicubic2: BicubicEngine) -> None:
    src = make_clip(tmp_path / "alpha.mkv", frames=4, pix_fmt="yuva420p",
                    vf="format=yuva420p,geq=lum='lum(X,Y)':cb='cb(X,Y)':cr='cr(X,Y)':a='X*4'")
    dst = tmp_path / "out.mkv"
    result = upscale_video(src, dst, bicubic2, FFV1)
    assert result.pix_fmt == "yuva420p" and "yuva420p" in dump(dst)
    want = expected_frames(bicubic2, src, "yuva420p", 64, 48, 2)
    got = decode(dst, "yuva420p", 128, 96)
    assert len(got) == len(want) == 4
    np.testing.assert_array_equal(got[-1][3], want[-1][3])
    assert got[-1][3].min() < 64 and got[-1][3].max() > 192  # a real alpha plane, not all opaque
    lost = upscale_video(src, tmp_path / "lost.mp4", bicubic2, FAST)
    assert any("alpha channel left out: libx264 cannot store it" in n for n in lost.notes)


def test_a_gray_alpha_source_says_its_alpha_is_left_out(tmp_path: Path, bicubic2: BicubicEngine) -> None:
    src = make_clip(tmp_path / "ya.mkv", frames=3, pix_fmt="ya8")
    result = upscale_video(src, tmp_path / "out.mkv", bicubic2, FFV1)
    assert any("alpha channel left out" in n and "ya8" in n for n in result.notes)


# ---------------------------------------------------------------- what the user's encoder arguments may do


@pytest.mark.parametrize("args, message", [
    (("victim.mkv",), r"--encoder-arg 'victim.mkv': not an option or an option's value"),
    (("-c:v", "libx265"), r"srgpu sets the video codec itself; use --codec"),
    (("-crf", "45"), r"use --crf"),
    (("-preset", "slow"), r"use --preset"),
    (("-an",), r"srgpu keeps every stream of the source"),
    (("-map", "0:v"), r"srgpu keeps every stream of the source"),
])
def test_encoder_arguments_that_would_change_the_output_are_refused(args: tuple[str, ...], message: str) -> None:
    from srgpu.video.options import BadEncoderArg

    with pytest.raises(BadEncoderArg, match=message):
        EncodeOptions(extra_args=args)
    EncodeOptions(extra_args=("-tune", "film", "-c:a", "libopus", "-threads", "0", "-qp", "-1"))  # these are fine


@pytest.mark.parametrize("exists", [True, False])
def test_an_option_given_a_file_name_replaces_nothing_and_makes_nothing(tmp_path: Path, bicubic2: BicubicEngine,
                                                                       exists: bool) -> None:
    from srgpu.video.api import VideoError

    src = make_clip(tmp_path / "src.mp4", frames=4, codec="libx264", out_args=("-preset", "ultrafast"))
    before = src.read_bytes()
    victim = tmp_path / "victim.mkv"
    if exists:
        victim.write_bytes(b"mine")
    options = VideoOptions(EncodeOptions(preset="ultrafast", extra_args=("-shortest", str(victim))))
    with pytest.raises(VideoError, match=r"name another output file \(.*victim\.mkv\)"):
        upscale_video(src, tmp_path / "out.mp4", bicubic2, options)
    assert (victim.read_bytes() == b"mine") if exists else not victim.exists()
    assert src.read_bytes() == before and not (tmp_path / "out.mp4").exists()


@pytest.mark.parametrize("args", [("-vf", "scale=10:10"), ("-s", "16x16")])
def test_an_output_of_another_size_than_planned_is_never_published(tmp_path: Path, bicubic2: BicubicEngine,
                                                                   args: tuple[str, ...]) -> None:
    from srgpu.video.api import VideoError

    src = make_clip(tmp_path / "src.mp4", frames=4, codec="libx264", out_args=("-preset", "ultrafast"))
    with pytest.raises(VideoError, match=r"the encoded video is \d+x\d+ where srgpu planned 128x96"):
        upscale_video(src, tmp_path / "out.mp4", bicubic2,
                      VideoOptions(EncodeOptions(preset="ultrafast", extra_args=args)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src.mp4"]


def test_names_that_look_like_ffmpeg_protocols_are_the_files_they_name(tmp_path: Path, bicubic2: BicubicEngine,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    make_clip(tmp_path / "a.mp4", frames=9)
    make_clip(tmp_path / "b.mp4", frames=9)
    named = make_clip(tmp_path / "concat:a.mp4|b.mp4", frames=5)  # a file of its own, 5 frames
    result = upscale_video(Path("concat:a.mp4|b.mp4"), Path("x:y.mkv"), bicubic2, FFV1)  # relative names
    assert result.frames == 5 and named.is_file() and (tmp_path / "x:y.mkv").is_file()
    assert probe(Path("x:y.mkv")).main_video().width == 128


def test_a_pipe_given_as_the_source_is_named_for_what_it_is(tmp_path: Path, bicubic2: BicubicEngine) -> None:
    import os

    from srgpu.video.api import VideoError

    fifo = tmp_path / "fifo.mp4"
    os.mkfifo(fifo)
    with pytest.raises(VideoError, match=r"fifo.mp4: not a regular file"):
        upscale_video(fifo, tmp_path / "out.mp4", bicubic2, FAST)
