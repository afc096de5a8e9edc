"""NVDEC decoding (ffmpeg's *_cuvid decoders) on the GPU machine: a video decoded on NVDEC is
upscaled to exactly the file the software decoder gives, frames and timestamps, and "auto" lets
NVDEC take over from the software decoder on a GPU engine. Skipped, saying why, where this ffmpeg
or this machine has no NVDEC."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from srgpu.video import hwdecode
from srgpu.video.api import EncodeOptions, VideoOptions, engine_gpu, plan_video, upscale_video
from srgpu.video.ffmpeg import ffmpeg_exe, video_codecs

from test_handover import handover, read_all, software_frames
from test_video import make_clip

pytestmark = pytest.mark.gpu


def frame_list(path: Path) -> list[tuple[str, ...]]:
    """Every frame of the output's video stream: timestamp, size and checksum (not the duration,
    which NVDEC derives from the frame rate: hwdecode's docstring)."""
    out = subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(path), "-map", "0:v:0", "-c:v", "rawvideo",
                          "-f", "framemd5", "-"], capture_output=True, text=True, check=True).stdout
    rows = [[x.strip() for x in ln.split(",")] for ln in out.splitlines() if ln and not ln.startswith("#")]
    return [(r[2], r[4], r[5]) for r in rows]


def need_nvdec(clip: Path, codec: str, pix_fmt: str) -> None:
    cuvid = hwdecode.CUVID_DECODERS[codec]
    if cuvid not in video_codecs("decoders"):
        pytest.skip(f"this ffmpeg has no {cuvid}")
    same, why = hwdecode.decodes_like_software(clip, 0, pix_fmt, None, cuvid, ("-gpu", "0"))
    if same is None:
        pytest.skip(f"NVDEC cannot run here: {why}")
    assert same, why


@pytest.mark.parametrize("name, size, rate, pix_fmt, codec, encoder, args", [
    # 180 rows are coded as 192: the decoder must crop exactly; B-frames reorder the output;
    # 24 fps in Matroska's millisecond time base: timestamps that do not fall on whole ticks
    ("h264", "320x180", 24, "yuv420p", "h264", "libx264", ("-crf", "20", "-bf", "3")),
    ("hevc-10bit", "320x240", 25, "yuv420p10le", "hevc", "libx265", ("-crf", "24", "-x265-params", "log-level=error")),
])
def test_nvdec_output_is_bit_identical_to_software(random_gpu_engine, tmp_path: Path, name: str, size: str, rate: int,
                                                    pix_fmt: str, codec: str, encoder: str,
                                                    args: tuple[str, ...]) -> None:
    src = make_clip(tmp_path / "src.mkv", size=size, rate=rate, frames=40, pix_fmt=pix_fmt, codec=encoder,
                    audio="aac", out_args=args)
    need_nvdec(src, codec, pix_fmt)
    ffv1 = EncodeOptions(codec="ffv1")
    hw = upscale_video(src, tmp_path / "hw.mkv", random_gpu_engine, VideoOptions(ffv1, hwdec="nvdec"))
    sw = upscale_video(src, tmp_path / "sw.mkv", random_gpu_engine, VideoOptions(ffv1, hwdec="no"))
    assert (hw.decoder, sw.decoder) == (hwdecode.CUVID_DECODERS[codec], "software")
    assert hw.frames == sw.frames == 40
    a, b = frame_list(tmp_path / "hw.mkv"), frame_list(tmp_path / "sw.mkv")
    assert len(a) == 40 and a == b


def test_nvdec_takes_over_from_the_software_decoder(tmp_path: Path) -> None:
    """"auto": the software decoder gives the first frames while NVDEC starts; NVDEC takes over
    once it has caught up and agreed, and every frame is still the software decoder's."""
    src = make_clip(tmp_path / "src.mp4", size="640x360", frames=240, codec="libx264", out_args=("-crf", "20", "-bf", "3"))
    need_nvdec(src, "h264", "yuv420p")
    reader = handover(src, "h264_cuvid", ("-gpu:0", "0"))
    got = read_all(reader, pace=0.01)  # an encoder's pace: NVDEC, about 0.6 s late, catches up
    assert got == software_frames(src)
    assert reader.note is None
    assert reader.handover_at is not None and reader.handover_at < 240


def test_hwdec_auto_plans_a_takeover_with_a_gpu_engine(random_gpu_engine, tmp_path: Path) -> None:
    src = make_clip(tmp_path / "src.mp4", size="320x240", frames=12, codec="libx264", out_args=("-crf", "20"))
    need_nvdec(src, "h264", "yuv420p")
    job = plan_video(src, tmp_path / "out.mp4", 2, VideoOptions(hwdec="auto"), gpu=engine_gpu(random_gpu_engine))
    assert job.takeover is not None and job.takeover[0] == "h264_cuvid" and job.decoder == "software"
    result = upscale_video(src, tmp_path / "out.mp4", random_gpu_engine,
                           VideoOptions(EncodeOptions(crf=18), hwdec="auto"))
    assert result.frames == 12 and result.decoder.startswith("software")


# Clips built like the real ones that came out one frame short with NVDEC taking over: H.264 High
# with a B-pyramid (x264 ends every stream on a P frame after B-frames, so the last packets have
# pts > dts), MP4 time bases of 1/10240 and 1/15360 and others, full range, short enough that the
# takeover (after 12 agreeing frames) falls near the end; and HEVC at 8 and 10 bits.
REAL_LIKE = [
    # name, rate, frames, timescale, pix_fmt, codec, extra encoder args
    ("h264-20fps-30", 20, 30, 10240, "yuvj420p", "libx264", ("-profile:v", "high", "-bf", "3", "-x264-params", "b-pyramid=normal")),
    ("h264-30fps-280", 30, 280, 15360, "yuvj420p", "libx264", ("-profile:v", "high", "-bf", "3", "-x264-params", "b-pyramid=normal")),
    ("h264-25fps-20", 25, 20, 12800, "yuv420p", "libx264", ("-profile:v", "high", "-bf", "3", "-x264-params", "b-pyramid=normal")),
    ("h264-30fps-14", 30, 14, 90000, "yuv420p", "libx264", ("-profile:v", "high", "-bf", "2")),
    ("hevc-8bit-30", 30, 30, 15360, "yuv420p", "libx265", ("-x265-params", "log-level=error:bframes=4")),
    ("hevc-10bit-25", 25, 30, 12800, "yuv420p10le", "libx265", ("-x265-params", "log-level=error:bframes=4")),
]


@pytest.mark.parametrize("name, rate, frames, timescale, pix_fmt, encoder, args", REAL_LIKE, ids=[c[0] for c in REAL_LIKE])
def test_nvdec_takeover_keeps_every_frame_and_timestamp(random_gpu_engine, tmp_path: Path, name: str, rate: int,
                                                         frames: int, timescale: int, pix_fmt: str, encoder: str,
                                                         args: tuple[str, ...]) -> None:
    """The CLI's default decoding (auto: NVDEC takes over) and default encoder: the output holds
    every frame of the source at its exact time, read back from the file."""
    from test_video import frame_times

    src = make_clip(tmp_path / "src.mp4", size="1280x720", rate=rate, frames=frames, pix_fmt=pix_fmt, codec=encoder,
                    vf="noise=alls=12:allf=t", out_args=(*args, "-video_track_timescale", str(timescale)))
    codec = "hevc" if encoder == "libx265" else "h264"
    need_nvdec(src, codec, pix_fmt)
    dst = tmp_path / "out.mp4"
    result = upscale_video(src, dst, random_gpu_engine, VideoOptions(hwdec="auto"))
    assert result.frames == frames
    assert frame_times(dst) == frame_times(src), result.decoder
    if frames >= 280:  # long enough for NVDEC to catch up and take over (short ones: it may or may not)
        assert result.decoder.startswith(f"software, then {hwdecode.CUVID_DECODERS[codec]}"), (result.decoder,
                                                                                               result.notes)
