"""Nothing lost on any path: RGB sources, bit depth, concealed damage, encoder settings, the
default codec per container, cover art and chapters (kept, or a note says not), each checked on
tiny clips with the real bundled ffmpeg (CPU)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from test_video import BicubicEngine, decode, dump, ff, ffmpeg_children, leftovers, make_clip, stream_lines
from typer.testing import CliRunner

from srgpu.batch import local, plan as batch_plan
from srgpu.cli import app
from srgpu.model import random_model
from srgpu.video import ffmpeg
from srgpu.video.api import EncodeOptions, VideoError, VideoOptions, plan_video, upscale_video
from srgpu.video.containers import StreamPlan, container_for, plan_stream
from srgpu.video.ffmpeg import ffmpeg_exe
from srgpu.video.probe import StreamInfo


@pytest.fixture(scope="module")
def bicubic() -> BicubicEngine:
    """Bicubic on every plane: flat colours stay exactly themselves away from their edges."""
    return BicubicEngine(random_model("9-1-5", seed=21), 2)


def no_leftovers(folder: Path, dst: Path) -> None:
    assert not dst.exists() and leftovers(folder) == [] and ffmpeg_children() == []


# ---------------------------------------------------------------- 1. planar RGB sources

# four flat blocks: black, white, a bright red and a mid teal (R, G, B)
COLOURS = ((0, 0, 0), (255, 255, 255), (200, 0, 0), (40, 160, 90))


def rgb_blocks(path: Path, pix_fmt: str, codec: str, *args: str) -> Path:
    """Three 64x48 frames of COLOURS as 32x24 blocks, stored as ``pix_fmt`` by ``codec``."""
    frame = np.zeros((48, 64, 3), np.uint8)
    for k, colour in enumerate(COLOURS):
        frame[24 * (k // 2):24 * (k // 2 + 1), 32 * (k % 2):32 * (k % 2 + 1)] = colour
    raw = path.with_suffix(".rgb")
    raw.write_bytes(frame.tobytes() * 3)
    ff("-f", "rawvideo", "-pix_fmt", "rgb24", "-s", "64x48", "-r", "25", "-i", str(raw),
       "-pix_fmt", pix_fmt, "-c:v", codec, *args, str(path))
    return path


def decode_rgb(path: Path, width: int, height: int) -> np.ndarray:
    """Every frame as 8-bit RGB, converted by ffmpeg as the file's own tags say."""
    raw = subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(path), "-map", "0:v:0", "-f", "rawvideo",
                          "-pix_fmt", "rgb24", "-"], capture_output=True, check=True).stdout
    return np.frombuffer(raw, np.uint8).reshape(-1, height, width, 3)


def block_centres(frames: np.ndarray) -> np.ndarray:
    """The centre of each block (away from the bicubic ringing at its edges), per frame: (n, 4, 3)."""
    h, w = frames.shape[1] // 2, frames.shape[2] // 2
    return np.stack([frames[:, h * (k // 2) + h // 2, w * (k % 2) + w // 2] for k in range(4)], axis=1)


@pytest.mark.parametrize("src_fmt, src_codec, suffix, codec, want, tolerance", [
    ("rgb24", "libx264rgb", ".mp4", "libx264", "yuv444p", 2),  # decodes as gbrp, 8 bits
    ("gbrp10le", "ffv1", ".mkv", "ffv1", "yuv444p10le", 1),
    ("gbrp12le", "ffv1", ".mkv", "ffv1", "yuv444p12le", 1),
    ("gbrp12le", "ffv1", ".mp4", "libx264", "yuv444p10le", 1),  # x264's deepest 4:4:4
])
def test_planar_rgb_sources_keep_their_colours(tmp_path: Path, bicubic: BicubicEngine, src_fmt: str,
                                               src_codec: str, suffix: str, codec: str, want: str,
                                               tolerance: int) -> None:
    """A planar RGB source (gbrp*) is converted once to YUV 4:4:4 at its own depth with the
    BT.709 matrix in limited range, and tagged so: decoded back to RGB as its tags say, every
    colour is the source's within a level or two (black stays 0, white 255, red 200 ~200)."""
    src = rgb_blocks(tmp_path / "rgb.mkv", src_fmt, src_codec, *(("-qp", "0") if src_codec == "libx264rgb" else ()))
    assert "gbrp" in stream_lines(src, "Video")[0]
    dst = tmp_path / f"out{suffix}"
    crf = 0 if codec == "libx264" else None  # lossless: what is measured is the conversion
    result = upscale_video(src, dst, bicubic, VideoOptions(EncodeOptions(codec=codec, crf=crf, preset="ultrafast"
                                                                if codec == "libx264" else None)))
    assert result.pix_fmt == want, result.notes
    assert any(n.startswith(f"RGB source ({src_fmt.replace('rgb24', 'gbrp')})") for n in result.notes), result.notes
    assert f"{want}(tv, bt709" in stream_lines(dst, "Video")[0]
    source = block_centres(decode_rgb(src, 64, 48)).astype(int)
    assert (source == COLOURS).all()  # the source itself holds exactly COLOURS, in every frame
    got = block_centres(decode_rgb(dst, 128, 96)).astype(int)
    assert got.shape == (3, 4, 3) and np.abs(got - source).max() <= tolerance, got[0]


# ---------------------------------------------------------------- 2. bit depth


def test_12bit_sources_keep_the_most_depth_the_encoder_takes(tmp_path: Path, bicubic: BicubicEngine) -> None:
    """A 12-bit source into libx264 (10 bits at most) is encoded in 10 bits, not 8, and a note
    says what was lost; ffv1 and libx265 keep all 12."""
    src = make_clip(tmp_path / "twelve.mkv", frames=3, pix_fmt="yuv420p12le", codec="ffv1")
    x264 = upscale_video(src, tmp_path / "x264.mp4", bicubic, VideoOptions(EncodeOptions(preset="ultrafast")))
    assert x264.pix_fmt == "yuv420p10le"
    assert any("12 bits reduced to 10" in n and "libx264" in n for n in x264.notes), x264.notes
    line = stream_lines(tmp_path / "x264.mp4", "Video")[0]
    assert "High 10" in line and "yuv420p10le" in line
    y = decode(tmp_path / "x264.mp4", "yuv420p10le", 128, 96)[0][0]
    assert len(np.unique(y & 3)) == 4  # the two low bits carry information
    for codec, marker in (("ffv1", "ffv1"), ("libx265", "hevc")):
        dst = tmp_path / f"{codec}.mkv"
        result = upscale_video(src, dst, bicubic, VideoOptions(EncodeOptions(codec=codec, preset="ultrafast"
                                                                   if codec == "libx265" else None)))
        assert result.pix_fmt == "yuv420p12le" and not any("bits" in n for n in result.notes), result.notes
        assert marker in stream_lines(dst, "Video")[0] and "yuv420p12le" in stream_lines(dst, "Video")[0]


# ---------------------------------------------------------------- 3. concealed damage


def damaged_clip(folder: Path, lose: tuple[int, ...] = (3, 9)) -> Path:
    """12 frames of H.264 in three slices each, with one slice of each frame in ``lose`` missing
    (as a lost packet would leave it): the decoder conceals the gap, logs no error, and flags
    those frames corrupt."""
    annexb = folder / "clip.h264"
    ff("-f", "lavfi", "-i", "testsrc2=size=64x48:rate=25", "-frames:v", "12", "-c:v", "libx264",
       "-preset", "ultrafast", "-x264-params", "slices=3:keyint=100", "-bsf:v", "h264_mp4toannexb", str(annexb))
    data = bytearray(annexb.read_bytes())
    starts = [m.start() for m in re.finditer(b"\x00\x00\x01", data)] + [len(data)]
    frames: list[list[tuple[int, int]]] = []
    for start, end in zip(starts, starts[1:]):
        if data[start + 3] & 0x1F in (1, 5):  # a slice; first_mb_in_slice 0 (ue(v) "1") starts a frame
            if data[start + 4] & 0x80:
                frames.append([])
            frames[-1].append((start, end))
    assert len(frames) == 12 and all(len(f) == 3 for f in frames)
    for k in sorted(lose, reverse=True):
        start, end = frames[k][1]
        del data[start:end]
    damaged = folder / "damaged.h264"
    damaged.write_bytes(bytes(data))
    clip = folder / "damaged.mkv"
    ff("-r", "25", "-i", str(damaged), "-c", "copy", str(clip))
    return clip


def test_the_damaged_clip_is_concealed_without_an_error(tmp_path: Path) -> None:
    """What the tests below rely on: plain ffmpeg decodes all 12 frames, exit 0, no error line,
    and says it concealed damage in two frames."""
    clip = damaged_clip(tmp_path)
    log = ff("-v", "level+info", "-i", str(clip), "-f", "null", "-")
    assert log.count("corrupt decoded frame") == 2 and "concealing" in log
    assert not re.search(r"\[(error|fatal|panic)\]", log), log
    assert len(decode(clip, "yuv420p", 64, 48)) == 12


def test_concealed_damage_is_named_in_a_note(tmp_path: Path, bicubic: BicubicEngine) -> None:
    """Every frame is upscaled; one note counts the damaged frames and names the first three,
    exactly (the decoder runs frames ahead of what showinfo reports: the position is not guessed)."""
    clip = damaged_clip(tmp_path, lose=(3, 5, 7, 10))
    result = upscale_video(clip, tmp_path / "out.mkv", bicubic, VideoOptions(EncodeOptions(codec="ffv1")))
    assert result.frames == 12
    notes = [n for n in result.notes if "concealed" in n]
    assert notes == ["4 frame(s) with damaged data that the decoder concealed: frame 3 (0.120 s), frame 5 "
                     "(0.200 s), frame 7 (0.280 s) and 1 more (strict mode refuses such a source)"], result.notes


class _LosingALine:
    """ffmpeg's stderr with its first "decoder -> pts" line lost, as a line garbled by two of its threads
    writing at once is (seen on a loaded machine)."""

    def __init__(self, stream) -> None:
        self.stream, self.lost = stream, False

    def __iter__(self):
        for line in self.stream:
            if not self.lost and b"decoder -> pts:" in line:
                self.lost = True
                continue
            yield line

    def close(self) -> None:
        self.stream.close()


def test_concealed_frames_are_named_exactly_when_the_locating_log_loses_a_line(tmp_path: Path, bicubic: BicubicEngine,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The second decode that finds the damaged frames counts its log lines; with one lost the count is off
    by one, and the note still names frames 3, 5 and 7: their numbers come from the reader's own frame list."""
    clip = damaged_clip(tmp_path, lose=(3, 5, 7, 10))
    real = ffmpeg.popen

    def popen(args, **kwargs):
        proc = real(args, **kwargs)
        if "-debug_ts" in args:
            proc.stderr = _LosingALine(proc.stderr)
        return proc

    monkeypatch.setattr(ffmpeg, "popen", popen)
    result = upscale_video(clip, tmp_path / "out.mkv", bicubic, VideoOptions(EncodeOptions(codec="ffv1")))
    assert [n for n in result.notes if "concealed" in n] == [
        "4 frame(s) with damaged data that the decoder concealed: frame 3 (0.120 s), frame 5 (0.200 s), frame 7 "
        "(0.280 s) and 1 more (strict mode refuses such a source)"], result.notes


def test_strict_refuses_concealed_damage(tmp_path: Path, bicubic: BicubicEngine) -> None:
    clip = damaged_clip(tmp_path)
    dst = tmp_path / "out.mkv"
    with pytest.raises(VideoError, match=r"damaged data in frame 3 \(0\.120 s\), concealed by the decoder: "
                                         r"refused in strict mode") as err:
        upscale_video(clip, dst, bicubic, VideoOptions(EncodeOptions(codec="ffv1"), strict=True))
    assert "\n" not in str(err.value)
    no_leftovers(tmp_path, dst)
    with pytest.raises(VideoError, match="strict mode decodes on the CPU"):
        plan_video(clip, dst, 2, VideoOptions(EncodeOptions(codec="ffv1"), strict=True, hwdec="nvdec"))
    # a clean source passes in strict mode
    clean = make_clip(tmp_path / "clean.mkv", frames=3)
    assert upscale_video(clean, dst, bicubic, VideoOptions(EncodeOptions(codec="ffv1"), strict=True)).frames == 3


def test_cli_strict(tmp_path: Path, random_npz: Path) -> None:
    clip = damaged_clip(tmp_path)
    run = lambda *a: CliRunner().invoke(app, ["upscale", str(clip), "--model", str(random_npz),  # noqa: E731
                                              "--device", "cpu", "--codec", "ffv1", *a])
    out = tmp_path / "out.mkv"
    strict = run("-o", str(out), "--strict")
    assert strict.exit_code == 1
    errors = [ln for ln in strict.stderr.splitlines() if ln.startswith("srgpu: error: ")]
    assert len(errors) == 1 and "frame 3 (0.120 s)" in errors[0], strict.stderr
    no_leftovers(tmp_path, out)
    lenient = run("-o", str(out))
    assert lenient.exit_code == 0, lenient.stderr
    assert re.search(r"srgpu: note: .*2 frame\(s\) with damaged data that the decoder concealed", lenient.stderr)


# ---------------------------------------------------------------- 4. encoder settings, before any frame


@pytest.mark.parametrize("options, suffix, words", [
    (EncodeOptions(preset="warp9"), ".mp4", r"encoder libx264 refuses .*invalid preset 'warp9'"),
    (EncodeOptions(crf=99), ".mp4", r"--crf 99 is out of range for libx264: it takes 0 to 51"),
    (EncodeOptions(codec="libx265", crf=-3), ".mkv", r"--crf -3 is out of range for libx265"),
    (EncodeOptions(codec="libvpx-vp9", crf=99), ".webm", r"Value 99.* for parameter 'crf' out of range \[-1 - 63\]"),
    (EncodeOptions(extra_args=("-tune", "nonsense")), ".mp4", r"invalid tune 'nonsense'"),
    (EncodeOptions(extra_args=("-x264-params", "nosuchparam=1")), ".mp4", r"Error parsing option 'nosuchparam"),
    (EncodeOptions(extra_args=("-nosuchoption", "1")), ".mkv", r"Unrecognized option 'nosuchoption'"),
    (EncodeOptions(extra_args=("-profile:v", "baseline")), ".mkv", r"(baseline|profile).*4:4:4|4:4:4.*profile"),
    # settings an encoder does not use: ffmpeg only warns, and the run would report them as applied
    (EncodeOptions(codec="mjpeg", crf=10), ".mkv", r"encoder mjpeg refuses .*AVOption crf .*has not been used"),
    (EncodeOptions(codec="ffv1", preset="slow"), ".mkv", r"encoder ffv1 refuses .*AVOption preset .*has not been used"),
])
def test_bad_encoder_settings_fail_before_any_frame(tmp_path: Path, bicubic: BicubicEngine,
                                                    options: EncodeOptions, suffix: str, words: str) -> None:
    """Every encoder setting, srgpu's and the user's, is tried on one small frame while planning:
    a bad one is one line naming it in ffmpeg's words, before any frame is decoded."""
    src = make_clip(tmp_path / "s.mkv", frames=3, pix_fmt="yuv444p")
    dst = tmp_path / f"o{suffix}"
    with pytest.raises(VideoError, match=words) as err:
        plan_video(src, dst, 2, VideoOptions(options))
    assert "\n" not in str(err.value)
    frames: list[int] = []
    with pytest.raises(VideoError, match=words):
        upscale_video(src, dst, bicubic, VideoOptions(options), progress=lambda n, _t: frames.append(n))
    assert frames == []
    no_leftovers(tmp_path, dst)


def test_good_encoder_settings_are_tried_once(tmp_path: Path) -> None:
    src = make_clip(tmp_path / "s.mkv", frames=2)
    options = VideoOptions(EncodeOptions(preset="veryfast", crf=23,
                                         extra_args=("-tune", "film", "-x264-params", "keyint=50")))
    ffmpeg.check_encoder.cache_clear()
    t0 = time.perf_counter()
    plan_video(src, tmp_path / "o.mp4", 2, options)
    first = time.perf_counter() - t0
    assert ffmpeg.check_encoder.cache_info().misses == 1
    plan_video(src, tmp_path / "o.mp4", 2, options)
    assert ffmpeg.check_encoder.cache_info().hits == 1 and first < 5


# ---------------------------------------------------------------- 5. the default codec follows the container


def test_webm_default_codec_follows_the_container(tmp_path: Path, bicubic: BicubicEngine) -> None:
    src = make_clip(tmp_path / "s.mp4", frames=4, codec="libx264", audio="aac")
    result = upscale_video(src, tmp_path / "o.webm", bicubic)
    assert result.codec == "libvpx-vp9" and "vp9" in stream_lines(tmp_path / "o.webm", "Video")[0]
    assert upscale_video(src, tmp_path / "o.mp4", bicubic).codec == "libx264"
    with pytest.raises(VideoError, match=r"a \.webm file cannot hold libx264"):
        plan_video(src, tmp_path / "x.webm", 2, VideoOptions(EncodeOptions(codec="libx264")))
    # the batch library and its done line name the codec that was chosen
    plan = batch_plan.plan_batch(src, tmp_path / "batch.webm")
    batch = local.run_batch(plan, bicubic, VideoOptions())
    assert batch.exit_code == 0 and "libvpx-vp9" in batch.done[0].message


def test_cli_codec_default_is_the_containers(tmp_path: Path) -> None:
    help_text = " ".join(CliRunner().invoke(app, ["upscale", "--help"]).stdout.split())
    assert "follows the container" in help_text and "--strict" in help_text


# ---------------------------------------------------------------- 6. cover art and chapters, as the notes say


def covered_source(folder: Path) -> Path:
    """An MP4 of three 32x24 frames with a 16x16 PNG cover (an 'attached pic' stream) and two
    chapters, which the mov demuxer also shows as a data stream (the chapter text track)."""
    cover = folder / "cover.png"
    ff("-f", "lavfi", "-i", "color=red:s=16x16", "-frames:v", "1", str(cover))
    chapters = folder / "chapters.txt"
    chapters.write_text(";FFMETADATA1\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=0\nEND=100\ntitle=Opening\n"
                        "[CHAPTER]\nTIMEBASE=1/1000\nSTART=100\nEND=200\ntitle=Closing\n")
    src = folder / "covered.mp4"
    ff("-f", "lavfi", "-i", "testsrc=s=32x24:r=15", "-i", str(cover), "-f", "ffmetadata", "-i", str(chapters),
       "-map", "0:v", "-map", "1:v", "-map_chapters", "2", "-frames:v:0", "3", "-c:v:0", "libx264",
       "-preset", "ultrafast", "-c:v:1", "png", "-disposition:v:1", "attached_pic", str(src))
    assert "bin_data" in dump(src) and "(attached pic)" in dump(src)
    return src


@pytest.mark.parametrize("suffix, cover_kept", [(".mp4", True), (".mov", False), (".mkv", False),
                                                (".webm", False)])
def test_cover_art_and_chapter_notes_match_the_output(tmp_path: Path, bicubic: BicubicEngine, suffix: str,
                                                      cover_kept: bool) -> None:
    """Every container keeps the chapters, and no note says otherwise (the chapter text track is
    not 'left out': the muxer writes it again from the chapters). The cover art stays cover art
    (MP4) or a note says it was left out; it never becomes an ordinary second video track."""
    src = covered_source(tmp_path)
    dst = tmp_path / f"out{suffix}"
    notes = upscale_video(src, dst, bicubic).notes
    text = dump(dst)
    assert len(re.findall(r"Chapter #0:\d+", text)) == 2 and "Opening" in text and "Closing" in text, text
    assert not any("bin_data" in n or "chapter" in n for n in notes), notes
    videos = stream_lines(dst, "Video")
    covers = [ln for ln in videos if "(attached pic)" in ln]
    assert len(videos) - len(covers) == 1, videos  # the upscaled video alone, no ordinary cover track
    cover_notes = [n for n in notes if "cover art" in n]
    if cover_kept:
        assert len(covers) == 1 and "png" in covers[0] and "16x16" in covers[0] and cover_notes == [], (videos, notes)
    else:
        assert covers == [] and len(cover_notes) == 1 and "left out" in cover_notes[0], (videos, notes)


def test_a_data_stream_is_noted_unless_it_is_the_chapters_own_track() -> None:
    chapter_track = StreamInfo(1, "data", "bin_data", codec_tag="text")
    other = StreamInfo(2, "data", "bin_data", codec_tag="gpmd")  # e.g. a GoPro's telemetry
    mp4 = container_for(".mp4")
    assert plan_stream(mp4, ".mp4", chapter_track, chapters=True) == StreamPlan(chapter_track, None)
    assert "left out" in (plan_stream(mp4, ".mp4", chapter_track, chapters=False).note or "")
    assert "left out" in (plan_stream(mp4, ".mp4", other, chapters=True).note or "")
