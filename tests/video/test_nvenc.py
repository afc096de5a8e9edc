"""NVENC (h264_nvenc, hevc_nvenc, av1_nvenc) without NVENC hardware: the containers that hold its
bitstreams accept it, --crf and --preset map to its options, the formats it keeps are chosen, and
every argument srgpu builds passes ffmpeg's own option parsing (the real ffmpeg, which parses and
applies an encoder's options before it loads the driver: an invalid value is refused then, a valid
set gets as far as loading NVENC). On this machine, which has no NVIDIA driver, the trial encode
fails loading it: srgpu says so in one line, exits 1 and writes nothing. The GPU machine's case
(a GPU without NVENC: H100, H200) is tests/video/test_gpu_nvenc.py."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from srgpu.video import chunked, containers, ffmpeg, nvenc
from srgpu.video.api import EncodeOptions, VideoError, VideoOptions, plan_video
from srgpu.video.formats import LAYOUTS
from srgpu.batch.pool import default_workers
from test_video import make_clip

ROOT = Path(__file__).resolve().parents[2]
# (suffix, encoder) that the containers hold: the bitstreams of libx264, libx265 and libsvtav1
HELD = [(s, c) for s in (".mp4", ".m4v", ".mkv") for c in sorted(nvenc.NVENC_ENCODERS)] + \
       [(".mov", "h264_nvenc"), (".mov", "hevc_nvenc"), (".webm", "av1_nvenc")]


def _has_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


no_driver = pytest.mark.skipif(_has_driver(), reason="an NVIDIA driver is here: tests/video/test_gpu_nvenc.py covers it")


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_clip(tmp_path_factory.mktemp("nvenc") / "clip.mp4", codec="libx264", frames=4)


@pytest.fixture
def no_trial(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """plan_video without NVENC's trial encode (there is no NVENC here): the trials it asked for."""
    asked: list[tuple] = []
    monkeypatch.setattr(nvenc, "check", lambda *a: asked.append(a))
    return asked


def video_options(job) -> dict[str, str]:
    return dict(job.plan.streams[job.plan.video_index].options)


def reaches_the_driver(codec: str, options: tuple[str, ...], muxer: str, size: tuple[int, int] = (256, 144)) -> None:
    """ffmpeg parses and applies every option, converts to the pixel format, then fails only where it
    loads NVENC (no driver here), or encodes (NVENC here)."""
    try:
        ffmpeg.check_encoder(codec, options, muxer, size=size, loglevel="verbose")
    except ffmpeg.EncoderRefused as e:
        text = "\n".join(t for _, t in e.lines)
        assert "Error setting option" not in text and "Error applying encoder options" not in text, text
        assert nvenc.explain(codec, None, e.lines) is not None, text


@pytest.mark.parametrize("suffix, codec", HELD)
def test_nvenc_is_accepted_where_its_bitstream_fits(clip: Path, tmp_path: Path, no_trial: list, suffix: str,
                                                    codec: str) -> None:
    job = plan_video(clip, tmp_path / f"out{suffix}", 2, VideoOptions(EncodeOptions(codec=codec)))
    assert job.codec == codec and no_trial and no_trial[0][0] == codec
    assert no_trial[0][4] == job.plan.enc_size == (128, 96)  # tried at the output's size


@pytest.mark.parametrize("suffix, codec", [(".mov", "av1_nvenc"), (".webm", "h264_nvenc"), (".webm", "hevc_nvenc")])
def test_nvenc_is_refused_where_its_bitstream_does_not_fit(suffix: str, codec: str) -> None:
    with pytest.raises(VideoError, match=f"a {suffix} file cannot hold {codec} video"):
        containers.check_video_codec(containers.container_for(suffix), suffix, codec)


def test_crf_and_preset_map_to_nvencs_constant_quality_and_presets(clip: Path, tmp_path: Path, no_trial: list) -> None:
    job = plan_video(clip, tmp_path / "out.mp4", 2, VideoOptions(EncodeOptions(codec="hevc_nvenc")))
    opts = video_options(job)
    assert opts == {"-pix_fmt": "yuv420p", "-preset": "p5", "-tune": "hq", "-rc": "vbr", "-cq": "21", "-b": "0",
                    "-tag": "hvc1"}  # srgpu's defaults; no -gpu: a CPU engine leaves the GPU to ffmpeg
    job = plan_video(clip, tmp_path / "out.mkv", 2,
                     VideoOptions(EncodeOptions(codec="h264_nvenc", crf=23, preset="veryfast")), gpu=1)
    opts = video_options(job)
    assert (opts["-cq"], opts["-rc"], opts["-preset"], opts["-gpu"]) == ("23", "vbr", "p3", "1")
    assert "-crf" not in opts and "-tag" not in opts
    assert nvenc.preset(None) == "p5" and nvenc.preset("medium") == "p5"  # x264's default maps to p5
    assert [nvenc.preset(p) for p in nvenc.NVENC_PRESETS] == list(nvenc.NVENC_PRESETS)  # passed as they are
    assert [nvenc.preset(p) for p in ("ultrafast", "superfast", "veryfast", "faster", "fast", "slow", "slower",
                                      "veryslow", "placebo")] == ["p1", "p2", "p3", "p3", "p4", "p6", "p7", "p7", "p7"]


@pytest.mark.parametrize("codec", sorted(nvenc.NVENC_ENCODERS))
def test_every_preset_and_quality_srgpu_builds_passes_ffmpegs_option_parsing(codec: str) -> None:
    low, high = nvenc.CQ_RANGE[codec]
    for preset in (*nvenc.NVENC_PRESETS, "medium"):
        for cq in (low, nvenc.DEFAULT_CQ[codec], high):
            options = nvenc.encoder_options(codec, cq, preset) + (("-gpu", "0"),)
            reaches_the_driver(codec, tuple(x for pair in options for x in pair), "matroska")


def test_ffmpeg_itself_refuses_what_srgpu_refuses() -> None:
    """srgpu's own checks say the same as ffmpeg's AVOption parsing, before any frame."""
    with pytest.raises(ffmpeg.EncoderRefused, match='Unable to parse "preset" option value "p9"'):
        ffmpeg.check_encoder("h264_nvenc", ("-preset", "p9"), "mp4", size=(256, 144))
    with pytest.raises(ffmpeg.EncoderRefused, match="out of range"):
        ffmpeg.check_encoder("hevc_nvenc", ("-cq", "52"), "mp4", size=(256, 144))
    with pytest.raises(VideoError, match="not an NVENC preset: use p1"):
        nvenc.preset("p9")


@pytest.mark.parametrize("codec, crf", [("h264_nvenc", 0), ("hevc_nvenc", 52), ("av1_nvenc", 64)])
def test_a_crf_nvenc_cannot_take_is_refused(clip: Path, tmp_path: Path, codec: str, crf: int) -> None:
    with pytest.raises(VideoError, match=f"--crf {crf} is out of range for {codec}"):
        plan_video(clip, tmp_path / "out.mkv", 2, VideoOptions(EncodeOptions(codec=codec, crf=crf)))


# source pixel format -> what (h264_nvenc, hevc_nvenc, av1_nvenc) encode it as; "!": a note says what is lost
FORMATS = {
    "yuv420p": ("yuv420p", "yuv420p", "yuv420p"),
    "yuv420p10le": ("yuv420p!", "p010le", "p010le"),
    "yuv444p": ("yuv444p", "yuv444p", "yuv420p!"),
    "yuv444p10le": ("yuv444p!", "yuv444p16le", "p010le!"),
    "yuv422p10le": ("yuv420p!", "p010le!", "p010le!"),
    "yuv444p12le": ("yuv444p!", "yuv444p16le!", "p010le!"),
    "gray": ("yuv420p!", "yuv420p!", "yuv420p!"),
}


@pytest.mark.parametrize("source", sorted(FORMATS))
def test_ten_bits_and_444_are_kept_where_the_encoder_takes_them(source: str) -> None:
    for codec, want in zip(("h264_nvenc", "hevc_nvenc", "av1_nvenc"), FORMATS[source]):
        name, note = nvenc.choose_format(LAYOUTS[source], codec)
        assert (name, note is not None and " encoded as " in note) == (want.rstrip("!"), want.endswith("!")), \
            (codec, source, note)
        reaches_the_driver(codec, ("-pix_fmt", name), "matroska")  # ffmpeg converts to it, NVENC takes it


def test_a_10bit_source_is_planned_in_p010_for_hevc(tmp_path: Path, no_trial: list) -> None:
    src = make_clip(tmp_path / "ten.mkv", pix_fmt="yuv420p10le", frames=2)
    job = plan_video(src, tmp_path / "out.mp4", 2, VideoOptions(EncodeOptions(codec="hevc_nvenc")))
    assert job.pix_fmt == "p010le" and not [n for n in job.notes if "bits" in n]
    job = plan_video(src, tmp_path / "out.mkv", 2, VideoOptions(EncodeOptions(codec="h264_nvenc")))
    assert job.pix_fmt == "yuv420p" and any("10 bits reduced to 8" in n for n in job.notes)


def test_each_chunk_encodes_on_its_workers_gpu(clip: Path, tmp_path: Path, no_trial: list) -> None:
    job = plan_video(clip, tmp_path / "out.mp4", 2, VideoOptions(EncodeOptions(codec="av1_nvenc")), gpu=0)
    stream = chunked._chunk_stream(job, None, 3)
    assert [v for k, v in stream.options if k == "-gpu"] == ["3"]
    assert not [k for k, _ in chunked._chunk_stream(job, None, None).options if k == "-gpu"]


def test_workers_per_gpu_follow_nvenc_not_the_cores() -> None:
    assert default_workers(1, 16, "hevc_nvenc") == nvenc.SESSIONS_PER_GPU == 2
    assert default_workers(2, 64, "h264_nvenc") == 4
    assert default_workers(0, 16, "av1_nvenc") == 2  # CPU engines: sessions on one GPU all the same
    assert default_workers(1, 16, "libx265") == 4  # software encoders: unchanged


# ffmpeg's own log lines (libavcodec/nvenc.c's format strings) for what cannot happen here
H200 = [("verbose", "[h264_nvenc] [ GPU #0 - < NVIDIA H200 > has Compute SM 9.0 ]"),
        ("error", "[h264_nvenc] OpenEncodeSessionEx failed: unsupported device (2): (no details)"),
        ("fatal", "[h264_nvenc] No capable devices found")]


def test_the_refusals_of_a_gpu_or_driver_in_one_line() -> None:
    assert nvenc.explain("h264_nvenc", 0, H200) == \
        "cuda:0 (NVIDIA H200) has no NVENC encoder (h264_nvenc): choose a software encoder such as libx264"
    busy = [H200[0], ("error", "[h264_nvenc] OpenEncodeSessionEx failed: out of memory (10): (no details)"), H200[2]]
    assert nvenc.explain("h264_nvenc", 0, busy).startswith(
        "the NVIDIA driver refuses another NVENC session on cuda:0 (NVIDIA H200)")
    ampere = [("verbose", "[av1_nvenc] [ GPU #1 - < NVIDIA GeForce RTX 3080 > has Compute SM 8.6 ]"),
              ("warning", "[av1_nvenc] Codec not supported"), ("fatal", "[av1_nvenc] No capable devices found")]
    assert nvenc.explain("av1_nvenc", 1, ampere).startswith(
        "cuda:1 (NVIDIA GeForce RTX 3080) has no NVENC encoder for av1_nvenc (AV1 encoding needs an RTX 40")
    # what the H200 machine's driver gave (2026-11-28): NVENC's API older than ffmpeg's, before any GPU is named
    old_api = [("error", "[h264_nvenc] Driver does not support the required nvenc API version. Required: 13.1 "
                         "Found: 13.0"), ("error", "[h264_nvenc] The minimum required Nvidia driver for nvenc is "
                                                   "570.0 or newer")]
    line = nvenc.explain("h264_nvenc", 0, [H200[0], *old_api])
    assert line.startswith("cuda:0 (NVIDIA H200): h264_nvenc cannot start: the NVIDIA driver is too old for this "
                           "ffmpeg's NVENC (Driver does not support the required nvenc API version. Required: 13.1 "
                           "Found: 13.0): update the driver") and line.endswith("such as libx264"), line
    wide = [("warning", "[h264_nvenc] Width 7680 exceeds 4096")]
    assert "width 7680 exceeds 4096" in nvenc.explain("h264_nvenc", 0, wide)
    assert nvenc.explain("h264_nvenc", 0, [("error", '[h264_nvenc] Unable to parse "preset" option value "x"')]) is None


@no_driver
def test_without_a_driver_the_trial_says_so_in_one_line(clip: Path, tmp_path: Path) -> None:
    with pytest.raises(VideoError) as e:
        plan_video(clip, tmp_path / "out.mp4", 2, VideoOptions(EncodeOptions(codec="hevc_nvenc")))
    assert str(e.value) == ("hevc_nvenc needs an NVIDIA GPU: there is no NVIDIA driver with NVENC here; "
                            "choose a software encoder such as libx265")


def _srgpu(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "srgpu", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


@no_driver
@pytest.mark.parametrize("extra", [(), ("--workers", "2", "--chunk-seconds", "0.08")])
def test_the_cli_exits_1_with_one_line_and_writes_nothing(clip: Path, tmp_path: Path, extra: tuple[str, ...]) -> None:
    """`srgpu upscale clip.mp4 -o out.mp4 --codec hevc_nvenc`, as a new user types it (CPU engine
    here); chunked too: the coordinator's trial fails before any worker or work folder."""
    out = tmp_path / "out.mp4"
    run = _srgpu("upscale", str(clip), "-o", str(out), "--codec", "hevc_nvenc", "--device", "cpu", *extra, cwd=tmp_path)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines() == ["srgpu: error: hevc_nvenc needs an NVIDIA GPU: there is no NVIDIA "
                                               "driver with NVENC here; choose a software encoder such as libx265"]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no output, no temporary, no work folder


def test_an_option_error_keeps_ffmpegs_words(clip: Path, tmp_path: Path) -> None:
    """A bad --encoder-arg for NVENC fails on ffmpeg's option parsing, not as a missing GPU."""
    with pytest.raises(VideoError, match="refuses the settings.*multipass"):
        plan_video(clip, tmp_path / "out.mkv", 2,
                   VideoOptions(EncodeOptions(codec="h264_nvenc", extra_args=("-multipass", "9"))))


def test_settings_key_does_not_depend_on_the_gpu(clip: Path, tmp_path: Path, no_trial: list) -> None:
    """A chunked run resumed on another GPU keeps its chunks: -gpu is not a setting of the video."""
    options = VideoOptions(EncodeOptions(codec="hevc_nvenc"))
    keys = {chunked.video_settings(plan_video(clip, tmp_path / "o.mkv", 2, options, gpu=g), options, {"scale": 2}).key
            for g in (None, 0, 1)}
    assert len(keys) == 1
