"""Choosing the decoder: NVDEC only where it decodes exactly as the software decoder does, a
clear error when it is asked for and cannot be had, and the software decoder otherwise. These run
without a GPU; tests/video/test_gpu_nvdec.py checks NVDEC itself on the GPU machine."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from srgpu.video import hwdecode
from srgpu.video.api import EncodeOptions, VideoOptions, plan_video, upscale_video
from srgpu.video.errors import VideoError
from srgpu.video.ffmpeg import ffmpeg_exe, video_codecs
from srgpu.video.reader import Reader

from test_video import make_clip

NO_NVDEC = not Path("/dev/nvidiactl").exists()  # no NVIDIA driver: NVDEC cannot open here


@pytest.fixture(scope="module")
def h264_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # baseline profile: what libopenh264 decodes (tests/video/test_gpu_nvdec.py uses B-frames)
    return make_clip(tmp_path_factory.mktemp("hw") / "src.mp4", size="96x64", frames=20, codec="libx264",
                     out_args=("-crf", "23", "-profile:v", "baseline"))


def test_no_means_the_software_decoder_and_runs_nothing(h264_clip: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hwdecode.ffmpeg, "run", lambda *a, **k: pytest.fail("no trial should run"))
    choice = hwdecode.choose_decoder(h264_clip, 0, "h264", "no", 0, "yuv420p", None)
    assert choice == hwdecode.DecoderChoice()


def test_a_decoder_that_decodes_the_same_frames_passes_the_trial(h264_clip: Path) -> None:
    """libopenh264 (a second software H.264 decoder) gives the same frames as ffmpeg's h264 on a
    baseline-profile stream: the trial must accept it."""
    if "libopenh264" not in video_codecs("decoders"):
        pytest.skip("this ffmpeg has no libopenh264")
    assert hwdecode.decodes_like_software(h264_clip, 0, "yuv420p", None, "libopenh264") == (True, "")


def test_the_chosen_decoder_decodes_only_the_upscaled_stream(h264_clip: Path, tmp_path: Path) -> None:
    """An H.264 file with a cover image (a PNG attached picture): the decoder the trial chose is
    named for the video stream alone, in the trial and in the reader. Forced on every video
    stream (-c:v), an H.264 decoder would probe the PNG, log errors and fail the real decode
    after a trial that passed."""
    if "libopenh264" not in video_codecs("decoders"):
        pytest.skip("this ffmpeg has no libopenh264")
    cover = make_clip(tmp_path / "cover.png", size="32x32", frames=1, codec="png", pix_fmt="rgb24")
    src = tmp_path / "with_cover.mp4"
    subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(h264_clip), "-i", str(cover), "-map", "0", "-map", "1",
                    "-c", "copy", "-disposition:v:1", "attached_pic", str(src)], check=True)
    assert hwdecode.decodes_like_software(src, 0, "yuv420p", None, "libopenh264") == (True, "")
    job = plan_video(src, tmp_path / "out.mp4", 2)
    reader = Reader(src, 0, job.layout, "yuv420p", decoder="libopenh264", size=(96, 64))
    reader.start()
    assert sum(1 for _ in reader.frames()) == 20


def test_a_cpu_engine_never_tries_nvdec(h264_clip: Path, tmp_path: Path, cpu_engine,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hwdecode, "decodes_like_software", lambda *a, **k: pytest.fail("no trial with a CPU engine"))
    result = upscale_video(h264_clip, tmp_path / "out.mkv", cpu_engine,
                           VideoOptions(EncodeOptions(codec="ffv1"), hwdec="auto"))
    assert result.decoder == "software" and result.frames == 20


def test_a_decoder_that_differs_fails_the_trial(h264_clip: Path) -> None:
    """ffmpeg's own h264 decoder told to skip the loop filter decodes differently (as a hardware
    decoder with a flaw would): the trial must see it and say which frame differs first."""
    same, why = hwdecode.decodes_like_software(h264_clip, 0, "yuv420p", None, "h264",
                                               ("-skip_loop_filter", "all"))
    assert same is False
    assert "decodes frame" in why and "differently" in why


def test_a_decoder_that_cannot_open_is_reported_not_used(h264_clip: Path) -> None:
    same, why = hwdecode.decodes_like_software(h264_clip, 0, "yuv420p", None, "h264", ("-no_such_option", "1"))
    assert same is None and why.startswith("h264 failed")


@pytest.mark.skipif(not NO_NVDEC, reason="an NVIDIA driver is present: NVDEC may work here")
def test_without_nvdec_auto_decodes_in_software_and_nvdec_says_why(h264_clip: Path) -> None:
    assert hwdecode.choose_decoder(h264_clip, 0, "h264", "auto", 0, "yuv420p", None) == hwdecode.DecoderChoice()
    with pytest.raises(VideoError, match=r"cannot decode on NVDEC: (this ffmpeg has no h264_cuvid|h264_cuvid failed: "
                                         r"\[h264_cuvid\] Cannot load libnvcuvid)"):
        hwdecode.choose_decoder(h264_clip, 0, "h264", "nvdec", 0, "yuv420p", None)


def test_nvdec_refuses_codecs_it_lacks_and_alpha(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "src.mkv")  # ffv1
    with pytest.raises(VideoError, match="NVDEC has no decoder for ffv1"):
        plan_video(clip, tmp_path / "out.mkv", 2, VideoOptions(hwdec="nvdec"))
    assert plan_video(clip, tmp_path / "out.mkv", 2, VideoOptions(hwdec="auto"), gpu=0).reader_args["decoder"] is None
    with pytest.raises(VideoError, match="needs the libvpx decoder"):
        hwdecode.choose_decoder(clip, 0, "vp8", "nvdec", 0, "yuva420p", None, software="libvpx")
    assert hwdecode.choose_decoder(clip, 0, "vp8", "auto", 0, "yuva420p", None,
                                   software="libvpx") == hwdecode.DecoderChoice("libvpx")


def test_an_unknown_mode_is_refused_where_the_options_are_made() -> None:
    with pytest.raises(VideoError, match=r"unknown hwdec mode 'gpu': use auto, nvdec, no"):
        VideoOptions(hwdec="gpu")  # type: ignore[arg-type]
    assert VideoOptions().hwdec == "auto"  # one default, the CLI's


def test_the_cli_refuses_an_unknown_hwdec(h264_clip: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from srgpu.cli import app

    result = CliRunner().invoke(app, ["upscale", str(h264_clip), "-o", str(tmp_path / "o.mp4"), "--device", "cpu",
                                      "--hwdec", "gpu"])
    assert result.exit_code == 2
    assert "unknown value 'gpu': use auto, nvdec, no" in result.output and "--hwdec" in result.output
    assert not list(tmp_path.iterdir())
    # the pipeline bench: refused before any engine or clip is made
    result = CliRunner().invoke(app, ["bench", "--pipeline", "--device", "cpu", "--hwdec", "gpu"])
    assert result.exit_code == 2 and "unknown value 'gpu': use auto, nvdec, no" in result.output
