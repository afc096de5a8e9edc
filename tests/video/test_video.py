"""Video upscaling end to end, on the CPU, with the real bundled ffmpeg.

Every claim is checked with ffmpeg's own output: stream lines of `ffmpeg -i`, and per-packet
timestamps and hashes from its framemd5 muxer. Clips are the shared ones (cut short with stream
copy where they are long) and tiny ones made here from ffmpeg's lavfi sources.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from srgpu.engine.frames import FrameProcessor, PlaneSpec
from srgpu.engine.cpu import CPUEngine
from srgpu.model import random_model
from srgpu.video import mkv
from srgpu.video.api import (VIDEO_EXTENSIONS, EncodeOptions, VideoError, VideoOptions, is_video_file, plan_video,
                             upscale_video)
from srgpu.video.ffmpeg import ffmpeg_exe
from srgpu.video.hdr import HdrMetadata, MasteringDisplay, parse_side_data
from srgpu.video.formats import LAYOUTS, choose_encoder_format, source_format
from srgpu.video.pipeline import run_pipeline
from srgpu.video.probe import probe
from srgpu.video.reader import Reader
from srgpu.video.writer import Writer

FAST = VideoOptions(EncodeOptions(preset="ultrafast"))


# ---------------------------------------------------------------- helpers


def ff(*args: str) -> str:
    """Run ffmpeg; its stderr on success, an assertion error with it otherwise."""
    proc = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-y", *args], capture_output=True,
                          text=True, errors="replace")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stderr


def dump(path: Path) -> str:
    """`ffmpeg -i` text (exit status 1: no output given)."""
    return subprocess.run([ffmpeg_exe(), "-hide_banner", "-i", str(path)], capture_output=True, text=True,
                          errors="replace").stderr


def stream_lines(path: Path, kind: str) -> list[str]:
    return [ln for ln in dump(path).splitlines() if re.search(rf"Stream #0:\d+.*: {kind}:", ln)]


def rotation(path: Path) -> float | None:
    m = re.search(r"rotation of (-?[\d.]+) degrees", dump(path))
    return float(m.group(1)) if m else None


def duration(path: Path) -> float:
    m = re.search(r"Duration: (\d+):(\d+):([\d.]+)", dump(path))
    assert m, dump(path)
    return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))


def packets(path: Path, spec: str) -> list[tuple[Fraction, Fraction, int, str]]:
    """(pts seconds, duration seconds, size, md5) of every packet of one stream, in file order,
    with the file's own timestamps (-copyts)."""
    out = subprocess.run([ffmpeg_exe(), "-v", "error", "-copyts", "-i", str(path), "-map", f"0:{spec}", "-c",
                          "copy", "-f", "framemd5", "-"], capture_output=True, text=True, check=True).stdout
    tb = Fraction(re.search(r"#tb 0: (\d+)/(\d+)", out).group(0).split()[-1])  # type: ignore[union-attr]
    rows = []
    for line in out.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        _, _, pts, dur, size, md5 = (f.strip() for f in line.split(",")[:6])
        rows.append((int(pts) * tb, int(dur) * tb, int(size), md5))
    return rows


def frame_times(path: Path, spec: str = "v:0") -> list[Fraction]:
    """Presentation times of a video stream's frames (packet pts in display order)."""
    return sorted(p[0] for p in packets(path, spec))


def decode(path: Path, layout_name: str, width: int, height: int, spec: str = "v:0",
           decoder: str | None = None) -> list[list[np.ndarray]]:
    """Every frame of a video stream as planes of ``layout_name`` (raw, in the pipe's layout;
    yuvj420p: yuv420p's layout, full range)."""
    layout = LAYOUTS[layout_name.replace("yuvj", "yuv")]
    raw = subprocess.run([ffmpeg_exe(), "-v", "error", "-noautorotate", *(["-c:v", decoder] if decoder else []),
                          "-i", str(path), "-map", f"0:{spec}", "-fps_mode", "passthrough", "-f", "rawvideo",
                          "-pix_fmt", layout_name, "-"], capture_output=True, check=True).stdout
    size = layout.frame_bytes(width, height)
    assert len(raw) % size == 0
    frames = []
    for k in range(len(raw) // size):
        flat = np.frombuffer(raw, dtype=layout.dtype, count=size // layout.dtype.itemsize,
                             offset=k * size)
        planes, off = [], 0
        for h, w in layout.plane_shapes(width, height):
            planes.append(flat[off:off + h * w].reshape(h, w))
            off += h * w
        frames.append(planes)
    return frames


def make_clip(path: Path, *, size: str = "64x48", rate: int = 25, frames: int = 8, pix_fmt: str = "yuv420p",
              codec: str = "ffv1", audio: str | None = None, vf: str | None = None,
              out_args: tuple[str, ...] = ()) -> Path:
    """A short testsrc2 clip (optionally with a sine tone encoded by ``audio``)."""
    args = ["-f", "lavfi", "-i", f"testsrc2=size={size}:rate={rate}"]
    if audio:
        args += ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000"]
    args += ["-frames:v", str(frames), "-map", "0:v"]
    if audio:
        args += ["-map", "1:a", "-c:a", audio, "-t", f"{frames / rate:.3f}"]
    w, h = size.split("x")  # testsrc2 rounds odd sizes down to even: scale to the exact size
    args += ["-vf", f"scale={w}:{h},setsar=1" + (f",{vf}" if vf else "")]
    args += ["-pix_fmt", pix_fmt, "-c:v", codec, *out_args, str(path)]
    ff(*args)
    return path


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".part" in p.name)


def ffmpeg_children() -> list[int]:
    """ffmpeg processes that are children of this test process (Linux /proc)."""
    if not Path("/proc").is_dir():
        return []
    found = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        if ppid == os.getpid() and comm.startswith("ffmpeg"):
            found.append(int(p.name))
    return found


class BicubicEngine(CPUEngine):
    """The CPU engine's bicubic for every plane: for the tests about streams and timing on clips
    too large for the CPU SRCNN (the SRCNN path is checked on the small clips)."""

    name = "cpu-bicubic"

    def srcnn_plane(self, plane, out_shape, max_value):  # type: ignore[no-untyped-def]
        return self.bicubic_plane(plane, out_shape, max_value)


@pytest.fixture(scope="module")
def engine2() -> CPUEngine:
    return CPUEngine(random_model("9-1-5", seed=11), 2)


@pytest.fixture(scope="module")
def engine3() -> CPUEngine:
    return CPUEngine(random_model("9-1-5", seed=12), 3)


@pytest.fixture(scope="module")
def bicubic2() -> BicubicEngine:
    return BicubicEngine(random_model("9-1-5", seed=13), 2)


@pytest.fixture(scope="module")
def video_dir(shared_data: Path) -> Path:
    return shared_data / "video"


def assert_same_frames(got: list[list[np.ndarray]], want: list[list[np.ndarray]]) -> None:
    """Frame for frame, plane for plane, the same samples (and as many of each)."""
    for g, e in zip(got, want, strict=True):
        for gp, ep in zip(g, e, strict=True):
            np.testing.assert_array_equal(gp, ep)


def expected_frames(engine: CPUEngine, src: Path, layout_name: str, width: int, height: int,
                    scale: int, decoder: str | None = None, limit: int | None = None) -> list[list[np.ndarray]]:
    """What the engine makes of the source's decoded frames (the first ``limit``), plane by plane."""
    layout = LAYOUTS[layout_name.replace("yuvj", "yuv")]
    specs = [PlaneSpec(s, i == 0) for i, s in enumerate(layout.plane_shapes(width * scale, height * scale))]
    return [engine.upscale_frame(planes, specs, layout.max_value)
            for planes in decode(src, layout_name, width, height, decoder=decoder)[:limit]]


# ---------------------------------------------------------------- pieces


def test_is_video_file() -> None:
    assert is_video_file("a/b/clip.MP4") and is_video_file(Path("x.webm")) and is_video_file("x.mkv")
    assert not is_video_file("photo.png") and not is_video_file("notes.txt") and not is_video_file("noext")
    assert {".mp4", ".mov", ".mkv", ".webm", ".avi", ".ts"} <= VIDEO_EXTENSIONS


def test_probe_shared_clips(video_dir: Path) -> None:
    fire = probe(video_dir / "fire_720p_rotated180_vfr_aac.mp4")
    v = fire.main_video()
    assert (v.width, v.height, v.pix_fmt, v.rotation) == (1280, 720, "yuv420p", -180.0)
    assert [s.kind for s in fire.streams] == ["video", "audio"] and fire.duration == pytest.approx(2.38)
    nasa = probe(video_dir / "nasa_2video_2audio_2subs.mp4")
    assert [s.kind for s in nasa.streams] == ["video", "audio", "subtitle", "video", "audio", "subtitle"]
    assert nasa.main_video().index == 0 and len(nasa.video_streams) == 2
    assert (nasa.streams[0].color_range, nasa.streams[0].color_space) == ("tv", "bt709")
    ten = probe(video_dir / "h264_10bit_200x200.mp4").main_video()
    assert (ten.pix_fmt, ten.width, ten.height, ten.fps) == ("yuv420p10le", 200, 200, 30.0)
    vp9 = probe(video_dir / "transparent_vp9.webm").main_video()
    assert vp9.meta("alpha_mode") == "1"
    assert (vp9.color_space, vp9.color_primaries, vp9.color_trc) == ("bt470bg", "bt709", "bt709")
    hd = probe(video_dir / "smpte_1080p25_h264_aac.mp4")
    assert (hd.main_video().width, hd.main_video().height, hd.streams[1].codec) == (1920, 1080, "aac")


def test_source_formats_stay_in_their_family() -> None:
    assert source_format("yuv420p").layout.name == "yuv420p"
    assert source_format("yuvj420p").layout.name == "yuv420p" and source_format("yuvj420p").full_range
    assert source_format("yuv420p10le").layout.name == "yuv420p10le"
    assert source_format("yuv422p10be").layout.name == "yuv422p10le"
    assert source_format("yuv444p12le").layout.name == "yuv444p12le"
    assert source_format("nv12").layout.name == "yuv420p" and source_format("p010le").layout.name == "yuv420p10le"
    assert source_format("gray10le").layout.name == "gray10le"
    assert source_format("yuva420p").layout.name == "yuva420p"
    assert source_format("yuva420p", keep_alpha=False).layout.name == "yuv420p"
    rgb = source_format("rgb24")
    assert rgb.rgb and rgb.layout.name == "yuv444p" and "RGB" in (rgb.note or "")
    # the encoder's nearest format never loses bits or chroma when one that keeps them exists
    assert choose_encoder_format(LAYOUTS["yuv420p10le"], ("yuv420p", "yuv420p10le"))[0] == "yuv420p10le"
    assert choose_encoder_format(LAYOUTS["yuv420p"], ("yuv422p10le", "yuv444p10le"))[0] == "yuv422p10le"
    name, note = choose_encoder_format(LAYOUTS["yuv444p"], ("yuv420p", "yuv420p10le"))
    assert name == "yuv420p" and "cannot store" in (note or "")


def test_odd_plane_shapes() -> None:
    assert LAYOUTS["yuv420p"].plane_shapes(33, 21) == [(21, 33), (11, 17), (11, 17)]
    assert LAYOUTS["yuv422p10le"].plane_shapes(33, 21) == [(21, 33), (21, 17), (21, 17)]
    assert LAYOUTS["yuv420p10le"].frame_bytes(33, 21) == (21 * 33 + 2 * 11 * 17) * 2


@pytest.mark.parametrize("name", ["yuv420p", "yuv422p", "yuv444p", "yuv420p10le", "yuv444p12le", "gray",
                                  "gray10le", "yuva420p"])
def test_matroska_pipe_round_trips_through_ffmpeg(tmp_path: Path, name: str) -> None:
    """Our Matroska writer: ffmpeg reads back the pixel format, every byte and every irregular
    timestamp and duration (ns) exactly."""
    layout = LAYOUTS[name]
    w, h = 7, 5
    rng = np.random.default_rng(1)
    times = [0, 33_366_667, 66_733_333, 150_000_000, 151_000_000]
    payloads = [rng.integers(0, layout.max_value + 1, layout.frame_bytes(w, h) // layout.dtype.itemsize)
                .astype(layout.dtype).tobytes() for _ in times]
    data = mkv.header(w, h, layout)
    for k, t in enumerate(times):
        dur = (times[k + 1] if k + 1 < len(times) else t + 40_000_000) - t
        before, after = mkv.frame_prefix(t, dur, len(payloads[k]))
        data += before + payloads[k] + after
    src = tmp_path / "pipe.mkv"
    src.write_bytes(data)
    assert "rawvideo" in stream_lines(src, "Video")[0] and name in stream_lines(src, "Video")[0]
    got = packets(src, "v:0")
    assert [p[0] for p in got] == [Fraction(t, 10**9) for t in times]
    assert [p[1] for p in got][:-1] == [Fraction(times[k + 1] - times[k], 10**9) for k in range(len(times) - 1)]
    raw = subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(src), "-fps_mode", "passthrough",
                          "-f", "rawvideo", "-c:v", "rawvideo", "-"], capture_output=True, check=True).stdout
    assert raw == b"".join(payloads)


# ---------------------------------------------------------------- pixels


@pytest.mark.parametrize("pix_fmt, size", [("yuv420p", "64x48"), ("yuv420p10le", "33x21"), ("yuv422p", "40x30"),
                                           ("yuv444p", "31x17"), ("gray", "24x16")])
def test_planes_are_exactly_the_engines(tmp_path: Path, engine2: CPUEngine, pix_fmt: str, size: str) -> None:
    """Lossless output (ffv1): every decoded output plane equals the engine's output on the
    decoded source planes, bit for bit: same family and depth, no RGB or range conversion, odd
    sizes included."""
    src = make_clip(tmp_path / "src.mkv", size=size, frames=4, pix_fmt=pix_fmt)
    dst = tmp_path / "out.mkv"
    result = upscale_video(src, dst, engine2, VideoOptions(EncodeOptions(codec="ffv1")))
    w, h = (int(v) for v in size.split("x"))
    assert result.frames == 4 and result.output_size == (2 * w, 2 * h) and result.pix_fmt == pix_fmt
    line = stream_lines(dst, "Video")[0]
    assert pix_fmt in line and f"{2 * w}x{2 * h}" in line
    want = expected_frames(engine2, src, pix_fmt, w, h, 2)
    got = decode(dst, pix_fmt, 2 * w, 2 * h)
    assert len(got) == len(want) == 4
    for g, e in zip(got, want):
        for gp, ep in zip(g, e):
            np.testing.assert_array_equal(gp, ep)
    assert leftovers(tmp_path) == []


def test_decoded_frame_buffers_are_recycled(tmp_path: Path, bicubic2: BicubicEngine) -> None:
    """The reader reuses the buffers the processing stage gives back (no allocation per frame),
    and reuse never changes a frame: every output frame is still the engine's output on its own
    source frame (a buffer recycled too early would mix frames)."""
    src = make_clip(tmp_path / "src.mkv", size="40x30", frames=60)
    job = plan_video(src, tmp_path / "out.mkv", 2, VideoOptions(EncodeOptions(codec="ffv1")))
    reader = Reader(job.src, job.stream.index, job.layout, **job.reader_args)
    depth = 4
    stats = run_pipeline(reader, bicubic2, job.specs, job.layout.max_value, Writer(job.plan), depth=depth)
    os.replace(job.plan.tmp, job.dst)
    assert stats.frames == reader.frames_read == 60
    # a buffer is out while its frame waits in the queue, is being put in it, or is being submitted
    assert reader.buffers_allocated <= depth + 3
    want = expected_frames(bicubic2, src, "yuv420p", 40, 30, 2)
    got = decode(job.dst, "yuv420p", 80, 60)
    assert len(got) == len(want) == 60
    for g, e in zip(got, want):
        for gp, ep in zip(g, e):
            np.testing.assert_array_equal(gp, ep)


class _BufferTrackingEngine(BicubicEngine):
    """Hands out its own input buffers (as the GPU engine hands out pinned ones) and records which
    memory each submitted frame's planes live in."""

    def frame_processor(self, fmt, slots=None):  # type: ignore[no-untyped-def]
        engine = self

        class Processor(FrameProcessor):
            def input_buffer(self, nbytes: int) -> np.ndarray:
                buf = np.empty(nbytes, np.uint8)
                engine.handed_out.append(buf)
                return buf

            def submit(self, planes):  # type: ignore[no-untyped-def]
                engine.submitted.append([any(np.shares_memory(p, b) for b in engine.handed_out) for p in planes])
                return super().submit(planes)

        self.handed_out: list[np.ndarray] = []
        self.submitted: list[list[bool]] = []
        return Processor(self, fmt)


def test_frames_are_decoded_into_the_engines_input_buffers(tmp_path: Path) -> None:
    """The reader decodes every frame straight into memory the engine handed out (pinned on a GPU,
    uploaded with no host copy), a bounded number of buffers in all, and the frames stay right."""
    engine = _BufferTrackingEngine(random_model("9-1-5", seed=13), 2)
    src = make_clip(tmp_path / "src.mkv", size="40x30", frames=24)
    dst = tmp_path / "out.mkv"
    result = upscale_video(src, dst, engine, VideoOptions(EncodeOptions(codec="ffv1")))
    assert result.frames == len(engine.submitted) == 24
    assert all(all(in_buffer) and len(in_buffer) == 3 for in_buffer in engine.submitted)
    assert 1 <= len(engine.handed_out) <= 4 + 3  # recycled: the queue's depth plus the frames being moved
    want = expected_frames(engine, src, "yuv420p", 40, 30, 2)
    got = decode(dst, "yuv420p", 80, 60)
    assert_same_frames(got, want)


def test_the_pipeline_needs_the_frame_size_before_decoding(tmp_path: Path, bicubic2: BicubicEngine) -> None:
    """Frames are decoded into the engine's buffers, so the format must be known up front: a reader
    without the stream header's size is refused before anything starts."""
    src = make_clip(tmp_path / "src.mkv", size="40x30", frames=2)
    job = plan_video(src, tmp_path / "out.mkv", 2, VideoOptions(EncodeOptions(codec="ffv1")))
    args = {k: v for k, v in job.reader_args.items() if k != "size"}
    reader = Reader(job.src, job.stream.index, job.layout, **args)
    with pytest.raises(ValueError, match="frame size"):
        run_pipeline(reader, bicubic2, job.specs, job.layout.max_value, Writer(job.plan))
    assert reader._proc is None and not job.plan.tmp.exists()


def test_a_finished_run_leaves_no_pipe_open(tmp_path: Path, bicubic2: BicubicEngine) -> None:
    """Every pipe to ffmpeg is closed when a video is done, not when the garbage collector finds it:
    the decoder's stdout, read to its end, stayed open in a reference cycle (a folder of videos
    held one descriptor per finished video until a collection; under pytest 9 its ResourceWarning
    failed whichever test ran then)."""
    import gc

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("counts this process's open descriptors in /proc")
    src = make_clip(tmp_path / "src.mkv", size="320x240", frames=10)
    options = VideoOptions(EncodeOptions(codec="ffv1"))
    upscale_video(src, tmp_path / "warm.mkv", bicubic2, options)
    gc.collect()
    gc.disable()
    try:
        before = set(os.listdir("/proc/self/fd"))
        upscale_video(src, tmp_path / "out.mkv", bicubic2, options)
        left = set(os.listdir("/proc/self/fd")) - before
    finally:
        gc.enable()
    assert left == set()


def test_a_failure_while_the_pipeline_starts_leaves_no_decoder_running(tmp_path: Path, bicubic2: BicubicEngine,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The decoder is started before the engine allocates its buffers: if that allocation fails
    (or Ctrl-C comes then), the decoder, already running, must be stopped, not left blocked on
    its full pipe."""
    src = make_clip(tmp_path / "src.mkv", size="320x240", frames=30)
    job = plan_video(src, tmp_path / "out.mkv", 2, VideoOptions(EncodeOptions(codec="ffv1")))
    reader = Reader(job.src, job.stream.index, job.layout, **job.reader_args)

    def no_memory(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(bicubic2, "frame_processor", no_memory)
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(reader, bicubic2, job.specs, job.layout.max_value, Writer(job.plan))
    assert reader._proc is not None and reader._proc.poll() is not None  # it was started, and ended
    assert ffmpeg_children() == [] and not job.plan.tmp.exists()


@pytest.mark.parametrize("rate", ["25", "30000/1001"])
def test_the_encoder_plans_at_the_sources_frame_rate(tmp_path: Path, bicubic2: BicubicEngine, rate: str) -> None:
    """x265 is told the source's frame rate (its settings, written into the stream, say so), not
    the pipe's nanosecond clock: its rate control spends the bits its CRF asks for at that rate."""
    src = make_clip(tmp_path / "src.mkv", frames=6, vf=f"fps={rate}")
    dst = tmp_path / "out.mkv"
    upscale_video(src, dst, bicubic2, VideoOptions(EncodeOptions(codec="libx265", preset="ultrafast")))
    settings = re.search(rb"x265 \(build.*?fps=(\d+)/(\d+)", dst.read_bytes(), re.S)
    assert settings is not None
    fps = Fraction(int(settings.group(1)), int(settings.group(2)))
    assert abs(fps - Fraction(rate)) < Fraction(1, 1000), fps


def test_full_range_kept_exactly(tmp_path: Path, engine2: CPUEngine) -> None:
    """A full-range (yuvj420p, 'pc') H.264 source stays full range: no range squeeze on the way
    in or out (lossless x264 on both ends shows the pixels are exactly the engine's)."""
    src = make_clip(tmp_path / "full.mp4", frames=3, pix_fmt="yuvj420p", codec="libx264", out_args=("-qp", "0"))
    assert "yuvj420p(pc" in stream_lines(src, "Video")[0]
    dst = tmp_path / "full_out.mp4"
    upscale_video(src, dst, engine2, VideoOptions(EncodeOptions(crf=0, preset="ultrafast")))
    assert "yuvj420p(pc" in stream_lines(dst, "Video")[0]
    want = expected_frames(engine2, src, "yuvj420p", 64, 48, 2)
    got = decode(dst, "yuvj420p", 128, 96)
    assert_same_frames(got, want)


def test_rgb_source_goes_through_yuv444(tmp_path: Path, engine2: CPUEngine) -> None:
    """An RGB-coded source (here ffv1 bgr0) is converted once to BT.709 YUV 4:4:4 so that SRCNN
    works on luma, tagged so, and said."""
    src = make_clip(tmp_path / "rgb.mkv", frames=2, pix_fmt="bgr0")
    dst = tmp_path / "rgb_out.mkv"
    result = upscale_video(src, dst, engine2, VideoOptions(EncodeOptions(codec="ffv1")))
    assert result.pix_fmt == "yuv444p" and any("RGB source" in n for n in result.notes)
    assert "yuv444p(tv, bt709" in stream_lines(dst, "Video")[0]


def test_odd_output_padded_for_x264(tmp_path: Path, engine3: CPUEngine) -> None:
    """x3 of 33x21 is 99x63; x264 4:2:0 needs even sizes: padded to 100x64 by repeating the last
    column and row, and said so. Lossless x264 (crf 0) shows the pixels are the engine's."""
    src = make_clip(tmp_path / "odd.mkv", size="33x21", frames=3)
    dst = tmp_path / "odd.mp4"
    result = upscale_video(src, dst, engine3, VideoOptions(EncodeOptions(crf=0, preset="ultrafast")))
    assert result.output_size == (100, 64)
    assert any("99x63 padded to 100x64" in n for n in result.notes), result.notes
    assert "100x64" in stream_lines(dst, "Video")[0]
    want = expected_frames(engine3, src, "yuv420p", 33, 21, 3)
    got = decode(dst, "yuv420p", 100, 64)
    for g, e in zip(got, want):
        np.testing.assert_array_equal(g[0][:63, :99], e[0])
        np.testing.assert_array_equal(g[0][:63, 99], e[0][:, 98])  # the repeated column
        np.testing.assert_array_equal(g[0][63, :99], e[0][62])
        np.testing.assert_array_equal(g[1], e[1])  # chroma of 99x63 is already 50x32
    # where the encoder takes odd sizes (ffv1), nothing is padded
    result = upscale_video(src, tmp_path / "odd.mkv.mkv", engine3, VideoOptions(EncodeOptions(codec="ffv1")))
    assert result.output_size == (99, 63) and not any("padded" in n for n in result.notes)


# ---------------------------------------------------------------- the shared clips


@pytest.mark.slow
def test_10bit_stays_10bit(tmp_path: Path, video_dir: Path, engine2: CPUEngine) -> None:
    src = video_dir / "h264_10bit_200x200.mp4"
    dst = tmp_path / "ten.mp4"
    seen: list[tuple[int, int | None]] = []
    result = upscale_video(src, dst, engine2, FAST, progress=lambda n, total: seen.append((n, total)))
    line = stream_lines(dst, "Video")[0]
    assert "High 10" in line and "yuv420p10le" in line and "400x400" in line
    assert result.frames == 30 == len(frame_times(dst)) and result.pix_fmt == "yuv420p10le"
    assert frame_times(dst) == frame_times(src)
    assert sum(n for n, _ in seen) == 30 and seen[0][1] == 30
    # the content is the engine's 10-bit output, not something 8-bit in disguise
    want = expected_frames(engine2, src, "yuv420p10le", 200, 200, 2, limit=3)
    got = decode(dst, "yuv420p10le", 400, 400)[:3]
    for g, e in zip(got, want):
        err = g[0].astype(np.float64) - e[0]
        psnr = 10 * np.log10(1023.0 ** 2 / np.mean(err ** 2))
        assert psnr > 40, psnr
        assert len(np.unique(g[0] & 3)) == 4  # the two low bits carry information
    # and with x265: main10
    short = tmp_path / "short.mp4"
    ff("-i", str(src), "-t", "0.2", "-c", "copy", str(short))
    dst265 = tmp_path / "ten265.mkv"
    opts = VideoOptions(EncodeOptions(codec="libx265", preset="ultrafast"))
    upscale_video(short, dst265, BicubicEngine(random_model("9-1-5", 1), 2), opts)
    assert "Main 10" in stream_lines(dst265, "Video")[0] and "yuv420p10le" in stream_lines(dst265, "Video")[0]


@pytest.mark.slow
def test_fire_vfr_rotation_audio(tmp_path: Path, video_dir: Path, bicubic2: BicubicEngine) -> None:
    """The VFR, rotated phone clip: every frame keeps its own timestamp and duration, the
    -180 degree display matrix is kept, the AAC audio is bit-identical with the same times."""
    src = video_dir / "fire_720p_rotated180_vfr_aac.mp4"
    dst = tmp_path / "fire.mp4"
    result = upscale_video(src, dst, bicubic2, FAST)
    assert result.frames == 25 and result.notes == ()
    assert "2560x1440" in stream_lines(dst, "Video")[0]
    src_v, dst_v = packets(src, "v:0"), packets(dst, "v:0")
    assert sorted(p[0] for p in dst_v) == sorted(p[0] for p in src_v)  # VFR: 0.1 s, 0.09 s, 0.08 s ... steps
    assert len({b[0] - a[0] for a, b in zip(sorted(src_v), sorted(src_v)[1:])}) > 3
    last = max(src_v)
    assert max(dst_v)[0] + max(dst_v)[1] == last[0] + last[1]  # the last frame lasts as long
    assert rotation(dst) == rotation(src) == -180.0
    assert packets(dst, "a:0") == packets(src, "a:0")
    assert abs(duration(dst) - duration(src)) < 1 / 10.5
    text = dump(dst)
    assert "location" in text and "2017-01-05T18:32:43" in text  # global and stream metadata


@pytest.mark.slow
def test_nasa_streams_and_second_video(tmp_path: Path, video_dir: Path, engine2: CPUEngine) -> None:
    """Policy: the default video stream is upscaled; the second video stream, both audio tracks
    and both subtitle tracks are copied unchanged, in their order, bit-identical."""
    src = tmp_path / "nasa_start.mp4"
    ff("-i", str(video_dir / "nasa_2video_2audio_2subs.mp4"), "-t", "0.5", "-map", "0", "-c", "copy", str(src))
    dst = tmp_path / "nasa.mp4"
    result = upscale_video(src, dst, engine2, FAST)
    assert [ln.split(": ")[1] for ln in stream_lines(dst, r"\w+")] == \
        ["Video", "Audio", "Subtitle", "Video", "Audio", "Subtitle"]
    videos = stream_lines(dst, "Video")
    assert "640x360" in videos[0] and "480x270" in videos[1]
    assert any("second video stream" in n and "#3" in n for n in result.notes)
    for spec in ("1", "2", "3", "4", "5"):
        assert packets(dst, spec) == packets(src, spec), spec
    assert frame_times(dst) == frame_times(src) and result.frames == len(frame_times(src))
    assert "(tv, bt709, progressive)" in videos[0]  # colour tags copied
    assert all("(eng)" in ln for ln in stream_lines(dst, r"\w+"))  # languages kept
    # into Matroska the mov_text subtitles become SubRip (said), everything else is copied
    mkv_out = tmp_path / "nasa.mkv"
    result = upscale_video(src, mkv_out, BicubicEngine(random_model("9-1-5", 2), 2), FAST)
    assert [ln.split(": ")[2].split()[0].rstrip(",") for ln in stream_lines(mkv_out, "Subtitle")] == \
        ["subrip", "subrip"]
    assert sum("converted to srt" in n for n in result.notes) == 2
    assert packets(mkv_out, "a:1")[0][2:] == packets(src, "a:1")[0][2:]
    # the other video stream can be chosen instead; the first is then the one copied
    second = tmp_path / "second.mp4"
    result = upscale_video(src, second, BicubicEngine(random_model("9-1-5", 2), 2),
                           VideoOptions(FAST.encode, video_stream=1))
    videos = stream_lines(second, "Video")
    assert "320x180" in videos[0] and "960x540" in videos[1] and any("#0" in n for n in result.notes)
    assert frame_times(second, "3") == frame_times(src, "3") and packets(second, "0") == packets(src, "0")
    with pytest.raises(VideoError, match="no video stream 2"):
        upscale_video(src, tmp_path / "x.mp4", engine2, VideoOptions(FAST.encode, video_stream=2))


def test_alpha_kept_where_the_codec_can(tmp_path: Path, video_dir: Path, bicubic2: BicubicEngine) -> None:
    src = tmp_path / "alpha.webm"
    ff("-i", str(video_dir / "transparent_vp9.webm"), "-t", "0.2", "-map", "0", "-c", "copy", str(src))
    dst = tmp_path / "alpha.mkv"
    result = upscale_video(src, dst, bicubic2, VideoOptions(EncodeOptions(codec="ffv1")))
    assert result.pix_fmt == "yuva420p" and "yuva420p" in stream_lines(dst, "Video")[0]
    want = expected_frames(bicubic2, src, "yuva420p", 200, 200, 2, decoder="libvpx-vp9")
    got = decode(dst, "yuva420p", 400, 400)
    assert len(got) == len(want) == result.frames
    np.testing.assert_array_equal(got[-1][3], want[-1][3])  # the alpha plane
    assert got[-1][3].min() < 128 < got[-1][3].max()
    result = upscale_video(src, tmp_path / "noalpha.mp4", bicubic2, FAST)
    assert any("alpha channel left out" in n for n in result.notes)
    assert any("vorbis" in n and "re-encoded to aac" in n for n in result.notes)
    assert "aac" in stream_lines(tmp_path / "noalpha.mp4", "Audio")[0]


def test_large_clip_plans_without_decoding(video_dir: Path, tmp_path: Path) -> None:
    job = plan_video(video_dir / "smpte_1080p25_h264_aac.mp4", tmp_path / "4k.mp4", 2,
                     VideoOptions(EncodeOptions(codec="libx265")))
    assert job.plan.out_size == (3840, 2160) and job.pix_fmt == "yuv420p"
    assert "setparams=color_primaries=bt709:color_trc=bt709:colorspace=bt709:range=tv" in job.plan.video_filters
    assert [s.codec for s in job.plan.streams] == ["libx265", "copy"]
    assert job.total_frames == 251 and job.notes == ()


# ---------------------------------------------------------------- timing, rotation, colour, chapters


def test_synthetic_vfr_timestamps_exact(tmp_path: Path, engine2: CPUEngine) -> None:
    src = make_clip(tmp_path / "vfr.mp4", frames=12, codec="libx264", audio="aac",
                    vf="settb=1/90000,setpts=N*3003+mod(N*N*37\\,1500)",
                    out_args=("-fps_mode", "passthrough", "-enc_time_base", "1/90000", "-preset", "ultrafast"))
    times = frame_times(src)
    assert len({b - a for a, b in zip(times, times[1:])}) > 5  # really variable
    dst = tmp_path / "vfr_out.mp4"
    upscale_video(src, dst, engine2, FAST)
    assert frame_times(dst) == times
    assert packets(dst, "a:0") == packets(src, "a:0")


def test_transport_stream_start_time_handled_like_ffmpeg(tmp_path: Path, engine2: CPUEngine) -> None:
    """MPEG-TS starts at 1.4 s: the output starts at 0 with every stream shifted alike, exactly as
    ffmpeg's own remux of the same file."""
    base = make_clip(tmp_path / "base.mp4", frames=10, codec="libx264", audio="aac",
                     out_args=("-preset", "ultrafast"))
    src = tmp_path / "clip.ts"
    ff("-i", str(base), "-c", "copy", "-f", "mpegts", str(src))
    if subprocess.run([ffmpeg_exe(), "-i", str(src)], capture_output=True).returncode < 0:
        with pytest.raises(VideoError, match=r"crashed \(SIGSEGV\).*cannot read this file"):
            upscale_video(src, tmp_path / "x.mp4", engine2, FAST)
        pytest.skip("this ffmpeg build crashes on MPEG-TS input (the static 7.0.2 of imageio-ffmpeg 0.6.0)")
    assert re.search(r"start: 1\.4", dump(src))
    ref = tmp_path / "ref.mp4"
    ff("-i", str(src), "-c", "copy", str(ref))
    dst = tmp_path / "ts_out.mp4"
    upscale_video(src, dst, engine2, FAST)
    assert frame_times(dst) == frame_times(ref) and packets(dst, "a:0") == packets(ref, "a:0")
    assert abs(duration(dst) - duration(ref)) < 0.04


def test_rotation_90_and_colour_tags_kept(tmp_path: Path, engine2: CPUEngine) -> None:
    plain = make_clip(tmp_path / "plain.mp4", frames=3, codec="libx264",
                      vf="setparams=color_primaries=bt2020:color_trc=smpte2084:colorspace=bt2020nc:range=pc")
    assert "pc, bt2020nc/bt2020/smpte2084" in stream_lines(plain, "Video")[0]
    src = tmp_path / "rot.mp4"
    ff("-display_rotation", "90", "-i", str(plain), "-c", "copy", str(src))
    assert rotation(src) in (90.0, -90.0)
    dst = tmp_path / "rot_out.mp4"
    upscale_video(src, dst, engine2, FAST)
    assert rotation(dst) == rotation(src)
    line = stream_lines(dst, "Video")[0]
    assert "pc, bt2020nc/bt2020/smpte2084" in line and "128x96" in line  # stored size, not rotated


MASTER_DISPLAY = "G(13250,34500)B(7500,3000)R(34000,16000)WP(15635,16450)L(10000000,1)"  # x265 units


def first_frame_side_data(path: Path) -> HdrMetadata | None:
    out = subprocess.run([ffmpeg_exe(), "-hide_banner", "-i", str(path), "-vf", "showinfo", "-frames:v", "1",
                          "-f", "null", "-"], capture_output=True, text=True).stderr
    return parse_side_data(out.splitlines())


@pytest.mark.parametrize("codec, container", [("libx265", ".mkv"), ("libx265", ".mp4"), ("libx264", ".mkv")])
def test_hdr_static_metadata_kept(tmp_path: Path, bicubic2: BicubicEngine, codec: str, container: str) -> None:
    """An HDR10 source's mastering display and content light levels (here only in the HEVC
    bitstream's SEI) reach the upscaled file, as ffmpeg itself keeps them, with its PQ tags."""
    src = make_clip(tmp_path / "hdr.mkv", frames=5, codec="libx265", pix_fmt="yuv420p10le",
                    vf="setparams=color_primaries=bt2020:color_trc=smpte2084:colorspace=bt2020nc",
                    out_args=("-x265-params", f"log-level=error:master-display={MASTER_DISPLAY}:max-cll=1000,400"))
    want = first_frame_side_data(src)
    assert want is not None and want.max_cll == 1000 and want.max_fall == 400
    assert want.mastering is not None and want.mastering.max_luminance == 1000.0
    dst = tmp_path / f"out{container}"
    result = upscale_video(src, dst, bicubic2, VideoOptions(EncodeOptions(codec=codec)))
    assert first_frame_side_data(dst) == want
    assert "bt2020nc/bt2020/smpte2084" in stream_lines(dst, "Video")[0]
    assert not any("banding" in n for n in result.notes)  # 10 bits in, 10 bits out


def test_hdr_into_8_bits_is_noted(tmp_path: Path, bicubic2: BicubicEngine) -> None:
    src = make_clip(tmp_path / "pq.mkv", frames=2, codec="libx265", pix_fmt="yuv420p10le",
                    vf="setparams=color_primaries=bt2020:color_trc=smpte2084:colorspace=bt2020nc",
                    out_args=("-x265-params", "log-level=error"))
    result = upscale_video(src, tmp_path / "out.mkv", bicubic2, VideoOptions(EncodeOptions(pix_fmt="yuv420p")))
    assert any("HDR (smpte2084) video reduced from 10 to 8 bits" in n for n in result.notes)


def test_hdr_side_data_parsing() -> None:
    lines = ["[Parsed_showinfo_0 @ 0x1]   side data - Mastering display metadata: has_primaries:0 has_luminance:1 "
             "r(0.0000,0.0000) g(0.0000,0.0000) b(0.0000 0.0000) wp(0.0000, 0.0000) min_luminance=0.005000, "
             "max_luminance=4000.000000",
             "[Parsed_showinfo_0 @ 0x1]   side data - HDR10+ Dynamic Metadata (SMPTE 2094-40): ..."]
    got = parse_side_data(lines)
    assert got is not None and got.dynamic and got.max_cll is None
    assert got.mastering == MasteringDisplay(None, None, 0.005, 4000.0)
    assert parse_side_data(["[Parsed_showinfo_0 @ 0x1] n:   0 pts:      0 pts_time:0"]) is None
    cll = parse_side_data(["  side data - Content light level metadata: MaxCLL=600, MaxFALL=120"])
    assert cll == HdrMetadata(None, 600, 120, False) and cll.static


def test_chapters_and_metadata_kept(tmp_path: Path, engine2: CPUEngine) -> None:
    clip = make_clip(tmp_path / "c.mp4", frames=10, codec="libx264", audio="aac")
    meta = tmp_path / "meta.txt"
    meta.write_text(";FFMETADATA1\ntitle=Upscale me\nartist=srgpu tests\n[CHAPTER]\nTIMEBASE=1/1000\n"
                    "START=0\nEND=200\ntitle=first\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=200\nEND=400\n"
                    "title=second\n")
    src = tmp_path / "chapters.mp4"
    ff("-i", str(clip), "-i", str(meta), "-map", "0", "-map_metadata", "1", "-map_chapters", "1",
       "-c", "copy", str(src))
    for dst in (tmp_path / "out.mp4", tmp_path / "out.mkv"):
        upscale_video(src, dst, engine2, FAST)
        text = dump(dst)
        assert len(re.findall(r"Chapter #0:\d+", text)) == 2 and "second" in text, text
        assert re.search(r"title\s*: Upscale me", text) and "srgpu tests" in text


def test_attachments_copied_where_the_container_holds_them(tmp_path: Path, engine2: CPUEngine) -> None:
    font = tmp_path / "font.ttf"
    font.write_bytes(np.random.default_rng(3).integers(0, 256, 3000, dtype=np.uint8).tobytes())
    src = tmp_path / "att.mkv"
    ff("-f", "lavfi", "-i", "testsrc2=size=64x48", "-frames:v", "3", "-c:v", "ffv1", "-attach", str(font),
       "-metadata:s:t", "mimetype=application/x-truetype-font", str(src))
    dst = tmp_path / "att_out.mkv"
    upscale_video(src, dst, engine2, FAST)
    dumped = tmp_path / "dumped.ttf"
    subprocess.run([ffmpeg_exe(), "-v", "error", "-dump_attachment:t:0", str(dumped), "-i", str(dst), "-f",
                    "null", "-"], capture_output=True)
    assert dumped.read_bytes() == font.read_bytes() and "font.ttf" in dump(dst)
    result = upscale_video(src, tmp_path / "att_out.mp4", engine2, FAST)
    assert any("attachment" in n and "left out" in n for n in result.notes)


def test_backward_timestamps_of_a_broken_file_are_repaired(tmp_path: Path, engine2: CPUEngine) -> None:
    """ffmpeg's Matroska muxer, told not to avoid negative times, writes a file whose first
    frames' times go backwards: every frame is kept, time moves forward, and it is said."""
    base = make_clip(tmp_path / "base.mp4", frames=12, codec="libx264", out_args=("-preset", "ultrafast"))
    src = tmp_path / "broken.mkv"
    ff("-i", str(base), "-c", "copy", "-output_ts_offset", "-0.2", "-avoid_negative_ts", "disabled", str(src))
    times = [p[0] for p in packets(src, "v:0")]
    assert any(b <= a for a, b in zip(times, times[1:]))
    dst = tmp_path / "fixed.mp4"
    result = upscale_video(src, dst, engine2, FAST)
    assert result.frames == 12 == len(frame_times(dst))
    assert any("went backwards" in n for n in result.notes)


# ---------------------------------------------------------------- encoder options


def test_encoder_options_reach_the_encoder(tmp_path: Path, engine2: CPUEngine) -> None:
    src = make_clip(tmp_path / "s.mkv", frames=3)
    dst = tmp_path / "opts.mkv"
    result = upscale_video(src, dst, engine2, VideoOptions(EncodeOptions(codec="libx264", crf=30, preset="veryfast",
                                                               pix_fmt="yuv444p",
                                                               extra_args=("-tune", "grain"))))
    line = stream_lines(dst, "Video")[0]
    assert "High 4:4:4" in line and "yuv444p" in line and result.pix_fmt == "yuv444p"
    sei = dst.read_bytes()  # x264 writes its settings into the stream (an SEI)
    assert b"crf=30.0" in sei and b"deadzone=6,6" in sei  # --crf, and -tune grain's dead zones


@pytest.mark.parametrize("codec, container, marker", [
    ("libx265", ".mp4", "hevc"), ("ffv1", ".mkv", "ffv1"), ("prores_ks", ".mov", "prores"),
])
def test_other_codecs(tmp_path: Path, engine2: CPUEngine, codec: str, container: str, marker: str) -> None:
    src = make_clip(tmp_path / "s.mkv", frames=2, audio="libvorbis")
    dst = tmp_path / f"o{container}"
    opts = VideoOptions(EncodeOptions(codec=codec, preset="ultrafast" if codec == "libx265" else None))
    result = upscale_video(src, dst, engine2, opts)
    line = stream_lines(dst, "Video")[0]
    assert marker in line and "128x96" in line and result.frames == 2
    if codec == "prores_ks":  # ProRes is 4:2:2 10-bit: the nearest format that loses nothing
        assert "yuv422p10le" in line and any("nothing lost" in n for n in result.notes)
    if container == ".mkv":  # vorbis fits in Matroska: copied (same times, sizes and bytes)
        assert [(p[0], p[2], p[3]) for p in packets(dst, "a:0")] == [(p[0], p[2], p[3]) for p in packets(src, "a:0")]
    else:
        assert any("re-encoded" in n for n in result.notes)


# ---------------------------------------------------------------- bad input


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return make_clip(tmp_path / "tiny.mp4", frames=6, codec="libx264", audio="aac",
                     out_args=("-movflags", "+faststart"))


def expect_error(tmp_path: Path, src: Path, dst: Path, engine: CPUEngine, match: str, keeps: bool = False,
                 **kw: object) -> None:
    """upscale_video fails with a one-line VideoError matching ``match``, leaving no output (or
    the existing file untouched: ``keeps``), no temporary file and no ffmpeg process."""
    with pytest.raises(VideoError, match=match) as err:
        upscale_video(src, dst, engine, **kw)  # type: ignore[arg-type]
    assert "\n" not in str(err.value)
    assert keeps or not dst.exists()
    assert leftovers(tmp_path) == []
    assert ffmpeg_children() == []


def test_not_a_video(tmp_path: Path, engine2: CPUEngine) -> None:
    fake = tmp_path / "fake.mp4"
    fake.write_text("this is not a video\n")
    expect_error(tmp_path, fake, tmp_path / "o.mp4", engine2, "not a readable video file")
    audio = tmp_path / "audio.mp4"
    ff("-f", "lavfi", "-i", "sine=d=0.5", "-c:a", "aac", str(audio))
    expect_error(tmp_path, audio, tmp_path / "o.mp4", engine2, "not a video: no video stream")
    expect_error(tmp_path, tmp_path / "missing.mp4", tmp_path / "o.mp4", engine2, "no such file")


def test_truncated_file(tmp_path: Path, engine2: CPUEngine) -> None:
    full = make_clip(tmp_path / "full.mp4", frames=50, codec="libx264", audio="aac",
                     out_args=("-movflags", "+faststart", "-preset", "ultrafast"))
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(full.read_bytes()[: full.stat().st_size * 2 // 3])
    expect_error(tmp_path, cut, tmp_path / "o.mp4", engine2,
                 r"decoding failed after \d+ frames \([\d.]+ s of 2\.000 s\).*(partial file|ends early)")
    # the message names where the decodable video ends, whatever the decoder's timing
    with pytest.raises(VideoError) as err:
        upscale_video(cut, tmp_path / "o.mp4", engine2)
    frames = int(re.search(r"after (\d+) frames", str(err.value)).group(1))  # type: ignore[union-attr]
    assert frames == len(decode(cut, "yuv420p", 64, 48))


@pytest.mark.parametrize("suffix, codec, audio", [(".mp4", "libx264", "aac"), (".mkv", "ffv1", "flac"),
                                                (".webm", "libvpx-vp9", "libopus"), (".mov", "prores_ks", "pcm_s16le")])
def test_the_completeness_check_reads_each_containers_duration(tmp_path: Path, suffix: str, codec: str,
                                                               audio: str) -> None:
    """The check after encoding reads the output's duration from its header alone (no stream
    probing): it must be the duration a full probe gives, for every container srgpu writes."""
    from srgpu.video.probe import container_duration

    clip = make_clip(tmp_path / f"c{suffix}", frames=30, codec=codec, audio=audio)
    assert container_duration(clip) == pytest.approx(probe(clip).duration, abs=1e-6)
    assert container_duration(clip) == pytest.approx(1.2, abs=0.05)


def test_an_output_shorter_than_its_source_is_refused(tmp_path: Path) -> None:
    """The last guard against a truncated source that ffmpeg did not report: an output that ends
    early is an error, not a file under the final name."""
    from srgpu.video.api import _check_complete

    src = make_clip(tmp_path / "src.mp4", frames=50, codec="libx264", audio="aac")
    job = plan_video(src, tmp_path / "o.mp4", 2)
    make_clip(job.plan.tmp, frames=20, codec="libx264", audio="aac")  # what a cut-short encode leaves
    reader = Reader(src, 0, job.layout, "yuv420p")
    reader.frames_read, reader.last_time = 20, 0.76
    with pytest.raises(VideoError, match=r"decoding failed after 20 frames \(0\.760 s of 2\.000 s\).*ends early"):
        _check_complete(job, reader)
    make_clip(job.plan.tmp, frames=50, codec="libx264", audio="aac")
    _check_complete(job, reader)  # a complete output passes


def test_corrupt_data_mid_file(tmp_path: Path, engine2: CPUEngine) -> None:
    full = make_clip(tmp_path / "full.mp4", frames=50, codec="libx264",
                     out_args=("-movflags", "+faststart", "-preset", "ultrafast"))
    data = bytearray(full.read_bytes())
    rng = np.random.default_rng(5)
    start = len(data) // 2
    data[start:start + 3000] = rng.integers(0, 256, 3000, dtype=np.uint8).tobytes()
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(bytes(data))
    expect_error(tmp_path, bad, tmp_path / "o.mp4", engine2, r"decoding failed near (frame \d+|the start).*\[h264\]")


def test_zero_video_frames(tmp_path: Path, engine2: CPUEngine) -> None:
    src = tmp_path / "zero.mkv"
    ff("-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", "64x48", "-i", os.devnull, "-f", "lavfi", "-i",
       "sine=d=0.5", "-map", "0", "-map", "1", "-c:v", "copy", "-c:a", "libvorbis", str(src))
    assert stream_lines(src, "Video")
    expect_error(tmp_path, src, tmp_path / "o.mkv", engine2, "the video stream has no frames")


def test_output_is_input_or_exists(tmp_path: Path, tiny: Path, engine2: CPUEngine) -> None:
    before = tiny.read_bytes()
    expect_error(tmp_path, tiny, tiny, engine2, "replace its input", keeps=True)
    expect_error(tmp_path, tiny, tmp_path / "." / "tiny.mp4", engine2, "replace its input", keeps=True)
    assert tiny.read_bytes() == before
    exists = tmp_path / "exists.mp4"
    exists.write_bytes(b"keep me")
    expect_error(tmp_path, tiny, exists, engine2, r"exists \(use --overwrite", keeps=True)
    assert exists.read_bytes() == b"keep me"
    upscale_video(tiny, exists, engine2, FAST, overwrite=True)
    assert "128x96" in stream_lines(exists, "Video")[0]
    expect_error(tmp_path, tiny, tmp_path / "no" / "dir.mp4", engine2, "output directory does not exist")
    dangling = tmp_path / "dangling.mp4"  # a link to nothing: said before any frame is made, not after
    dangling.symlink_to(tmp_path / "nowhere.mp4")
    expect_error(tmp_path, tiny, dangling, engine2, r"exists \(use --overwrite", keeps=True)
    assert dangling.is_symlink() and not (tmp_path / "nowhere.mp4").exists()


def test_bad_codec_choices(tmp_path: Path, tiny: Path, engine2: CPUEngine) -> None:
    o = tmp_path / "o.mp4"
    expect_error(tmp_path, tiny, o, engine2, "unknown video codec 'nosuchcodec'",
                 options=VideoOptions(EncodeOptions(codec="nosuchcodec")))
    expect_error(tmp_path, tiny, o, engine2, "audio encoder", options=VideoOptions(EncodeOptions(codec="aac")))
    expect_error(tmp_path, tiny, tmp_path / "o.webm", engine2, r"\.webm file cannot hold libx264",
                 options=VideoOptions(EncodeOptions(codec="libx264")))
    expect_error(tmp_path, tiny, tmp_path / "o.mp4", engine2, r"\.mp4 file cannot hold prores_ks",
                 options=VideoOptions(EncodeOptions(codec="prores_ks")))
    expect_error(tmp_path, tiny, tmp_path / "o.avi", engine2, "unsupported output container '.avi'")
    expect_error(tmp_path, tiny, tmp_path / "o.mkv", engine2, "--crf does not apply to ffv1",
                 options=VideoOptions(EncodeOptions(codec="ffv1", crf=10)))
    expect_error(tmp_path, tiny, o, engine2, "cannot encode pixel format 'rgb24'",
                 options=VideoOptions(EncodeOptions(pix_fmt="rgb24")))


def test_encoder_failure_reports_ffmpeg(tmp_path: Path, tiny: Path, engine2: CPUEngine) -> None:
    expect_error(tmp_path, tiny, tmp_path / "o.mp4", engine2, r"encoder.*(preset|nosuchpreset)",
                 options=VideoOptions(EncodeOptions(preset="nosuchpreset")))


class FailingEngine(CPUEngine):
    def __init__(self, *args: object, fail_at: int) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.calls = 0
        self.fail_at = fail_at

    def upscale_frame(self, planes, specs, max_value):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("engine exploded on purpose")
        return super().upscale_frame(planes, specs, max_value)


def test_engine_error_stops_everything(tmp_path: Path) -> None:
    src = make_clip(tmp_path / "s.mp4", frames=40, codec="libx264", audio="aac")
    engine = FailingEngine(random_model("9-1-5", 3), 2, fail_at=5)
    dst = tmp_path / "o.mp4"
    with pytest.raises(RuntimeError, match="exploded on purpose"):
        upscale_video(src, dst, engine, FAST)
    assert engine.calls == 5  # stopped at once: nothing processed after the failure
    assert not dst.exists() and leftovers(tmp_path) == [] and ffmpeg_children() == []


def test_ctrl_c_stops_everything(tmp_path: Path, engine2: CPUEngine) -> None:
    src = make_clip(tmp_path / "s.mp4", frames=60, codec="libx264", audio="aac")
    dst = tmp_path / "o.mp4"

    sent = []

    def interrupt(n: int, total: int | None) -> None:  # Ctrl-C, twice, while frames are in flight
        if len(sent) < 2:
            sent.append(n)
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        upscale_video(src, dst, engine2, FAST, progress=interrupt)
    assert not dst.exists() and leftovers(tmp_path) == [] and ffmpeg_children() == []


def test_cli_upscales_a_video_and_fails_clearly(tmp_path: Path, tiny: Path, random_npz: Path) -> None:
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    run = lambda *a: subprocess.run([sys.executable, "-m", "srgpu", "upscale", *a], capture_output=True,  # noqa: E731
                                    text=True, env=env, timeout=300)
    out = tmp_path / "cli.mp4"
    ok = run(str(tiny), "-o", str(out), "--model", str(random_npz), "--device", "cpu", "--quiet",
             "--preset", "ultrafast", "--crf", "20")
    assert ok.returncode == 0, ok.stderr
    assert "128x96" in stream_lines(out, "Video")[0] and stream_lines(out, "Audio")
    bad = run(str(tiny), "-o", str(tmp_path / "x.webm"), "--model", str(random_npz), "--device", "cpu",
              "--codec", "libx264")
    assert bad.returncode != 0 and "cannot hold libx264" in bad.stderr
    assert len([ln for ln in bad.stderr.splitlines() if "error" in ln]) >= 1
