"""Interlaced sources (``--deinterlace``, srgpu.video.deinterlace): real field-coded H.264 and
MPEG-2, top and bottom field first, made here by ffmpeg from frames whose moving bar is in a
different place in each field; upscaled on the CPU with the real bundled ffmpeg and checked from
the files: frame counts, timestamps, the output's field order, the combing itself, the notes,
NVDEC kept out by construction, chunks, resume, and the command line."""

from __future__ import annotations

import json
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from test_video import decode, ff, frame_times
from typer.testing import CliRunner

from srgpu.batch.resume import folder_video_settings
from srgpu.manifest import model_identity, settings_fingerprint
from srgpu.cli import app
from srgpu.engine.cpu import CPUEngine
from srgpu.model import random_model
from srgpu.video import chunked
from srgpu.video.api import EncodeOptions, VideoError, VideoOptions, plan_video, upscale_video
from srgpu.video.deinterlace import INTERLACED_ORDERS
from srgpu.video.ffmpeg import ffmpeg_exe
from srgpu.video.probe import probe

W, H, FRAMES, RATE = 64, 48, 8, 25  # frames of the interlaced source (two fields each, 50 fields a second)
STEP = 6  # pixels the bar moves from one field to the next
FAST = EncodeOptions(preset="ultrafast")
IDENTITY = {"scale": 2, "arch": "9-1-5", "weights": "test", "label": "test"}


def fields_raw(path: Path, fields: int) -> Path:
    """``fields`` progressive 64x48 yuv420p pictures at 50/s: a white bar 8 pixels wide that moves
    STEP pixels a picture over a grey ramp; interleaved in pairs, they make combed frames."""
    ramp = np.tile(np.linspace(40, 120, W).astype(np.uint8), (H, 1))
    out = bytearray()
    for k in range(fields):
        y = ramp.copy()
        x = (k * STEP) % (W - 8)
        y[:, x:x + 8] = 235
        out += y.tobytes() + bytes([128]) * (W * H // 2)
    path.write_bytes(bytes(out))
    return path


def interlaced(path: Path, codec: str, top: bool, frames: int = FRAMES, gop: int | None = None) -> Path:
    """A field-coded source: pairs of pictures woven into frames (top or bottom field first, the
    frames flagged so) and encoded interlaced by x264 (``-flags +ilme+ildct`` and tff/bff) or
    ffmpeg's MPEG-2 encoder."""
    raw = fields_raw(path.with_suffix(".yuv"), 2 * frames)
    weave = "tinterlace=interleave_top,setfield=tff" if top else "tinterlace=interleave_bottom,setfield=bff"
    args = ["-flags", "+ilme+ildct"]
    if codec == "libx264":
        args += ["-x264-params", "tff=1" if top else "bff=1", "-preset", "ultrafast"]
    if gop:
        args += ["-g", str(gop)]
    ff("-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", f"{W}x{H}", "-r", str(2 * RATE), "-i", str(raw),
       "-vf", weave, "-frames:v", str(frames), "-c:v", codec, *args, str(path))
    raw.unlink()
    return path


def progressive(path: Path, frames: int = FRAMES) -> Path:
    raw = fields_raw(path.with_suffix(".yuv"), frames)
    ff("-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", f"{W}x{H}", "-r", str(RATE), "-i", str(raw),
       "-c:v", "libx264", "-preset", "ultrafast", str(path))
    raw.unlink()
    return path


SOURCES = {  # name: (file name, codec, top field first)
    "h264-tff": ("h264_tff.mp4", "libx264", True),
    "h264-bff": ("h264_bff.mkv", "libx264", False),
    "mpeg2-tff": ("mpeg2_tff.mpg", "mpeg2video", True),
    "mpeg2-bff": ("mpeg2_bff.mpg", "mpeg2video", False),
}


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("interlaced")
    made = {name: interlaced(folder / file, codec, top) for name, (file, codec, top) in SOURCES.items()}
    made["progressive"] = progressive(folder / "progressive.mp4")
    return made


@pytest.fixture(scope="module")
def engine() -> CPUEngine:
    return CPUEngine(random_model("9-1-5", seed=44), 2)


def combing(path: Path) -> float:
    """How combed a 2x output is: the mean distance of each source-scale line from the mean of its
    neighbours (an output row per source line), on the luma of every frame. Woven fields of the
    moving bar alternate line by line; whole pictures do not."""
    ys = np.stack([f[0].astype(np.float64) for f in decode(path, "yuv420p", 2 * W, 2 * H)])
    lines = ys[:, ::2, :]
    return float(np.mean(np.abs(lines[:, 1:-1] - (lines[:, :-2] + lines[:, 2:]) / 2)))


def field_order(path: Path) -> str | None:
    return probe(path).main_video().field_order


# ---------------------------------------------------------------- the sources are what they claim


def test_probe_sees_the_sources_interlaced(sources: dict[str, Path]) -> None:
    for name, (_, _, top) in SOURCES.items():
        order = field_order(sources[name])
        assert order in INTERLACED_ORDERS, (name, order)
        assert ("top" if top else "bottom") in order  # "top first", "bottom coded first (swapped)", ...
    assert field_order(sources["progressive"]) == "progressive"


# ---------------------------------------------------------------- upscaled, each mode


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SOURCES))
@pytest.mark.parametrize("mode", ["auto", "frame", "field", "no"])
def test_interlaced_sources_each_mode(tmp_path: Path, sources: dict[str, Path], engine: CPUEngine, name: str,
                                      mode: str) -> None:
    """auto and frame: one frame per frame, at the source's times; field: one per field, twice as
    many, spaced by a field's duration (20 ms), from the source's first frame's time; no: the
    woven fields as they were, with the note. Every output is tagged progressive, and deinterlaced
    ones are much less combed than the woven one."""
    src = sources[name]
    dst = tmp_path / "out.mkv"
    result = upscale_video(src, dst, engine, VideoOptions(FAST, deinterlace=mode))  # type: ignore[arg-type]
    times = frame_times(dst)
    src_times = frame_times(src)
    assert len(src_times) == FRAMES
    step = Fraction(1, 2 * RATE) if mode == "field" else Fraction(1, RATE)
    assert result.frames == len(times) == FRAMES * (2 if mode == "field" else 1)
    assert all(b > a for a, b in zip(times, times[1:]))  # strictly increasing
    assert [b - a for a, b in zip(times, times[1:])] == [step] * (len(times) - 1)  # (Matroska: ms, exact here)
    assert field_order(dst) == "progressive"
    woven = [n for n in result.notes if "upscaled frame by frame as progressive" in n]
    if mode == "no":
        assert woven and "--deinterlace auto" in woven[0]
        assert combing(dst) > 4.0  # the bar's edges alternate line by line
    else:
        assert not woven
        assert any("deinterlaced by bwdif" in n for n in result.notes), result.notes
        assert combing(dst) < 1.5
    if mode == "field":
        assert any("one frame per field (50 fps)" in n for n in result.notes)
        assert probe(dst).main_video().fps == 50
    else:
        assert probe(dst).main_video().fps == 25


def test_field_mode_keeps_the_sources_clock_in_mp4(tmp_path: Path, sources: dict[str, Path],
                                                   engine: CPUEngine) -> None:
    """MPEG-2 in MPEG-PS starts at 0.54 s here, and MP4 holds ticks of its own: the fields land
    every 20 ms from the first frame's time, the encoder told 50 frames a second, every packet
    with a duration of one field."""
    dst = tmp_path / "fields.mp4"
    result = upscale_video(sources["mpeg2-tff"], dst, engine, VideoOptions(FAST, deinterlace="field"))
    assert result.frames == 2 * FRAMES
    times = frame_times(dst)
    assert [b - a for a, b in zip(times, times[1:])] == [Fraction(1, 50)] * (2 * FRAMES - 1)
    durations = subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(dst), "-map", "0:v", "-c", "copy", "-f",
                                "framecrc", "-"], capture_output=True, text=True, check=True).stdout
    tb = Fraction(*map(int, durations.split("#tb 0: ")[1].split()[0].split("/")))
    assert {int(line.split(",")[3]) * tb for line in durations.splitlines() if line and not line.startswith("#")} \
        == {Fraction(1, 50)}
    job = plan_video(sources["mpeg2-tff"], tmp_path / "again.mp4", 2, VideoOptions(FAST, deinterlace="field"))
    assert job.plan.frame_duration_ns == 20_000_000  # the encoder plans at 50 frames a second
    assert job.total_frames == 2 * job.info.estimated_frames(job.stream)  # (the progress bar's estimate)
    assert job.deinterlace == "field" and "send_field" in job.reader_args["vf_pre"]
    assert "setfield=prog" in job.plan.video_filters


def test_a_progressive_source_is_untouched_by_auto(tmp_path: Path, sources: dict[str, Path],
                                                   engine: CPUEngine) -> None:
    """auto leaves a progressive source exactly as "no" does (same frames out, no filter, no
    note); frame and field deinterlace it all the same, as asked, and say so."""
    src = sources["progressive"]
    auto = plan_video(src, tmp_path / "a.mkv", 2, VideoOptions(FAST))
    assert auto.deinterlace is None and auto.reader_args["vf_pre"] is None and auto.notes == ()
    assert "setfield=prog" not in auto.plan.video_filters
    a = upscale_video(src, tmp_path / "a.mkv", engine, VideoOptions(FAST))
    n = upscale_video(src, tmp_path / "n.mkv", engine, VideoOptions(FAST, deinterlace="no"))
    assert a.frames == n.frames == FRAMES and a.notes == n.notes == ()
    for x, y in zip(decode(tmp_path / "a.mkv", "yuv420p", 2 * W, 2 * H),
                    decode(tmp_path / "n.mkv", "yuv420p", 2 * W, 2 * H)):
        assert all(np.array_equal(p, q) for p, q in zip(x, y))
    forced = upscale_video(src, tmp_path / "f.mkv", engine, VideoOptions(FAST, deinterlace="field"))
    assert forced.frames == 2 * FRAMES
    assert any("not flagged interlaced (progressive)" in note and "else top field first" in note
               for note in forced.notes)


def test_a_stream_without_a_field_order_goes_by_its_frames_flags(tmp_path: Path, engine: CPUEngine) -> None:
    """MPEG-4 Part 2 in AVI (as DV, and DivX camcorder files): the stream gives no field order, so
    auto looks at its first frame as the decoder flags it: interlaced (bottom first) is
    deinterlaced, progressive is not touched."""
    woven = interlaced(tmp_path / "woven.avi", "mpeg4", False)
    assert field_order(woven) is None
    result = upscale_video(woven, tmp_path / "woven_x2.mkv", engine, VideoOptions(FAST))
    assert result.frames == FRAMES and combing(tmp_path / "woven_x2.mkv") < 1.5
    assert any("interlaced source (bottom first, flagged on its frames) deinterlaced by bwdif" in n
               for n in result.notes), result.notes
    no = plan_video(woven, tmp_path / "n.mkv", 2, VideoOptions(FAST, deinterlace="no"))
    assert no.deinterlace is None and no.notes == ()  # "no" is the old behaviour: no frame is decoded to look

    plain = tmp_path / "plain.avi"
    ff("-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", f"{W}x{H}", "-r", str(RATE), "-i",
       str(fields_raw(tmp_path / "plain.yuv", FRAMES)), "-c:v", "mpeg4", str(plain))
    assert field_order(plain) is None
    job = plan_video(plain, tmp_path / "p.mkv", 2, VideoOptions(FAST))
    assert job.deinterlace is None and job.notes == ()


# ---------------------------------------------------------------- NVDEC, by construction (no GPU here)


def test_a_deinterlaced_source_decodes_on_the_cpu(tmp_path: Path, sources: dict[str, Path]) -> None:
    """bwdif runs in the CPU decoder's filters: with a GPU engine (gpu=0 here; nothing runs on it),
    hwdec auto decodes an interlaced source in software, no NVDEC takeover, and says why; hwdec
    nvdec is refused in one line before anything is decoded; with --deinterlace no the old choice
    stands."""
    src = sources["h264-tff"]
    job = plan_video(src, tmp_path / "o.mkv", 2, VideoOptions(FAST), gpu=0)
    assert job.decoder == "software" and job.takeover is None and job.reader_args["decoder"] is None
    assert any("decoded on the CPU, not NVDEC" in n for n in job.notes)
    with pytest.raises(VideoError, match=r"deinterlacing \(bwdif\) runs on the CPU decoder, not on NVDEC: use "
                                         r"--hwdec auto or no, or --deinterlace no") as e:
        plan_video(src, tmp_path / "o.mkv", 2, VideoOptions(FAST, hwdec="nvdec"), gpu=0)
    assert "\n" not in str(e.value)
    # a CPU engine never used NVDEC: no note about it
    cpu = plan_video(src, tmp_path / "o.mkv", 2, VideoOptions(FAST))
    assert not any("NVDEC" in n for n in cpu.notes)
    kept = plan_video(src, tmp_path / "o.mkv", 2, VideoOptions(FAST, deinterlace="no"))
    assert kept.deinterlace is None and kept.reader_args["vf_pre"] is None


# ---------------------------------------------------------------- chunks and resume


def test_bwdif_at_a_chunks_start_differs_from_the_single_pipeline(sources: dict[str, Path]) -> None:
    """Why a deinterlaced video is not cut into chunks: bwdif looks at the frame before, so the
    first frame of a window (a chunk) is not the frame the whole stream gives there."""
    src = sources["h264-tff"]

    def md5s(vf: str) -> list[str]:
        out = subprocess.run([ffmpeg_exe(), "-v", "error", "-copyts", "-i", str(src), "-vf", vf, "-f", "framemd5",
                              "-"], capture_output=True, text=True, check=True).stdout
        return [line.split(",")[5].strip() for line in out.splitlines() if line and not line.startswith("#")]

    whole = md5s("bwdif=mode=send_frame:deint=all")
    tb = probe(src)  # the mp4's clock: 1/12800, 512 ticks a frame
    assert tb.main_video().fps == 25
    window = md5s("trim=start_pts=2048,bwdif=mode=send_frame:deint=all")  # from frame 4
    assert len(whole) == FRAMES and len(window) == FRAMES - 4
    assert window[0] != whole[4]
    assert window[1:] == whole[5:]


@pytest.fixture(scope="module")
def long_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 s of interlaced H.264, a keyframe every 10 frames: long enough for chunks of 0.5 s."""
    return interlaced(tmp_path_factory.mktemp("long") / "long.mkv", "libx264", True, frames=50, gop=10)


@pytest.mark.parametrize("mode", ["auto", "frame", "field"])
def test_a_deinterlaced_video_keeps_the_single_pipeline(tmp_path: Path, long_source: Path, mode: str) -> None:
    why = chunked.plan_chunked(long_source, tmp_path / "o.mkv", IDENTITY,
                               VideoOptions(FAST, deinterlace=mode), chunk_seconds=0.5)  # type: ignore[arg-type]
    assert isinstance(why, str) and why.startswith("not cut into chunks: it is deinterlaced")
    assert not chunked.work_folder(tmp_path / "o.mkv").exists()


def test_woven_fields_still_cut_into_chunks_and_the_settings_say_how(tmp_path: Path, long_source: Path,
                                                                       engine: CPUEngine) -> None:
    """--deinterlace no: chunks as before (one frame per packet, no filter), with the same work-folder
    settings as before deinterlacing existed (no key for it); a deinterlaced job's settings carry
    its mode, so a work folder of woven chunks is never resumed into a deinterlaced output."""
    from srgpu.batch.pool import InProcess

    cj = chunked.plan_chunked(long_source, tmp_path / "o.mkv", IDENTITY,
                              VideoOptions(FAST, deinterlace="no"), chunk_seconds=0.5)
    assert isinstance(cj, chunked.ChunkedJob) and len(cj.chunks) >= 2
    assert "deinterlace" not in dict(cj.settings.values)
    result = chunked.upscale_chunked(cj, InProcess(engine))
    assert result.frames == 50 and any("upscaled frame by frame as progressive" in n for n in result.notes)
    keys = set()
    for mode, want in (("auto", "send_frame:parity=auto:deint=interlaced"), ("frame", "send_frame:parity=auto:deint=all"),
                       ("field", "send_field:parity=auto:deint=all")):
        job = plan_video(long_source, tmp_path / "x.mkv", 2, VideoOptions(FAST, deinterlace=mode))  # type: ignore[arg-type]
        settings = chunked.video_settings(job, VideoOptions(FAST, deinterlace=mode), IDENTITY)  # type: ignore[arg-type]
        assert dict(settings.values)["deinterlace"] == "bwdif=mode=" + want and settings.key != cj.settings.key
        keys.add(settings.key)
    assert len(keys) == 3


def test_folder_resume_redoes_an_output_made_with_another_deinterlace(tmp_path: Path, sources: dict[str, Path]) -> None:
    """A folder run's manifest records the deinterlace mode (not the default, auto: a folder made
    before --deinterlace existed still resumes): rerun with another mode, the video is redone, and
    the new output has one frame per field; rerun with the same, it is skipped."""
    image = model_identity(random_model("9-1-5", seed=1), 2)

    def _video_settings(image: dict, video: VideoOptions) -> object:
        return settings_fingerprint(image, folder_video_settings(video, "libx264"))

    keys = {m: _video_settings(image, VideoOptions(deinterlace=m)).key for m in ("auto", "no", "frame", "field")}  # type: ignore[arg-type,attr-defined]
    assert len(set(keys.values())) == 4
    assert "deinterlace" not in dict(_video_settings(image, VideoOptions()).values)  # type: ignore[attr-defined]

    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    (folder / "clip.mkv").write_bytes(sources["h264-bff"].read_bytes())
    base = ["upscale", str(folder), "-o", str(out), "--device", "cpu", "--preset", "ultrafast", "--json"]

    def run(*extra: str) -> dict:
        r = CliRunner().invoke(app, [*base, *extra])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["inputs"][0]

    first = run("--deinterlace", "no")
    assert first["status"] == "written" and first["output_frames"] == FRAMES
    again = run("--deinterlace", "field")
    assert again["status"] == "redone" and "deinterlace no (now field)" in again["reason"]
    assert again["output_frames"] == 2 * FRAMES and len(frame_times(out / "clip.mkv")) == 2 * FRAMES
    assert run("--deinterlace", "field")["status"] == "skipped"


# ---------------------------------------------------------------- the command line


def test_the_cli_deinterlaces_and_refuses_an_unknown_mode(tmp_path: Path, sources: dict[str, Path]) -> None:
    src = sources["mpeg2-bff"]
    r = CliRunner().invoke(app, ["upscale", str(src), "-o", str(tmp_path / "o.mkv"), "--device", "cpu",
                                 "--deinterlace", "bogus"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "unknown value 'bogus': use auto, no, field, frame" in r.output and "--deinterlace" in r.output
    assert not list(tmp_path.iterdir())
    with pytest.raises(VideoError, match=r"^unknown deinterlace mode 'bogus': use auto, no, field, frame$"):
        VideoOptions(deinterlace="bogus")  # type: ignore[arg-type]

    r = CliRunner().invoke(app, ["upscale", str(src), "-o", str(tmp_path / "o.mkv"), "--device", "cpu",
                                 "--preset", "ultrafast", "--deinterlace", "field"])
    assert r.exit_code == 0, r.output
    assert "deinterlaced by bwdif" in r.output and "one frame per field (50 fps)" in r.output
    assert len(frame_times(tmp_path / "o.mkv")) == 2 * FRAMES and field_order(tmp_path / "o.mkv") == "progressive"


# ---------------------------------------------------------------- on the GPU


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(SOURCES))
@pytest.mark.parametrize("mode", ["auto", "field"])
def test_the_gpu_engine_deinterlaces_as_the_cpu_engine_does(tmp_path: Path, sources: dict[str, Path],
                                                           random_gpu_engine, name: str, mode: str) -> None:
    """The GPU path (its engine, NVDEC allowed: hwdec auto) gives what the CPU engine gives: the
    same frames at the same times, one per field in field mode, tagged progressive, and pictures
    within a level of the exact engine's (both through the same x264 settings)."""
    cpu = CPUEngine(random_model("9-1-5", seed=5, scale=2), 2)  # random_gpu_engine's model
    src = sources[name]
    on_gpu = upscale_video(src, tmp_path / "gpu.mkv", random_gpu_engine, VideoOptions(FAST, deinterlace=mode))
    on_cpu = upscale_video(src, tmp_path / "cpu.mkv", cpu, VideoOptions(FAST, deinterlace=mode))
    n = FRAMES * (2 if mode == "field" else 1)
    assert on_gpu.frames == on_cpu.frames == n
    assert frame_times(tmp_path / "gpu.mkv") == frame_times(tmp_path / "cpu.mkv")
    assert field_order(tmp_path / "gpu.mkv") == "progressive"
    assert combing(tmp_path / "gpu.mkv") < 1.5
    pairs = list(zip(decode(tmp_path / "gpu.mkv", "yuv420p", 2 * W, 2 * H),
                     decode(tmp_path / "cpu.mkv", "yuv420p", 2 * W, 2 * H)))
    assert len(pairs) == n
    for g, c in pairs:
        assert np.abs(g[0].astype(np.int16) - c[0].astype(np.int16)).mean() < 1.0
