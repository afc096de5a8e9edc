"""Issue 39, "nothing lost under new abuse", the video side: names at the file system's limit,
chunked outputs' frame rate, a run killed after publishing, colour range in MP4, transport streams
whose timestamps jump, and the messages of failures. Real ffmpeg, tiny clips made with it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from srgpu import outputs
from srgpu.model import random_model
from srgpu.video import chunked
from srgpu.video.api import EncodeOptions, VideoOptions, upscale_video
from srgpu.batch.pool import InProcess
from test_video import BicubicEngine, ffmpeg_children, leftovers, make_clip

FAST = VideoOptions(EncodeOptions(preset="ultrafast"))
LOSSLESS = VideoOptions(EncodeOptions(codec="ffv1"))
IDENTITY = {"scale": 2, "arch": "test", "weights": "bicubic"}
LONGEST = "a" * 251 + ".mkv"  # 255 bytes: the longest name ext4, XFS, btrfs take
JAPANESE = "長い名前の動画ファイル" * 7 + "テスト動画名" + ".mkv"  # 83 Japanese characters: 253 bytes in UTF-8


def name_max(folder: Path) -> int:
    return os.pathconf(folder, "PC_NAME_MAX")


@pytest.fixture(scope="module")
def engine() -> BicubicEngine:
    return BicubicEngine(random_model("9-1-5", seed=21), 2)


# ---------------------------------------------------------------- 8: names near the limit


@pytest.mark.parametrize("name", [LONGEST, JAPANESE], ids=["255-bytes", "japanese"])
def test_temporaries_fit_where_the_final_name_fits(tmp_path: Path, name: str) -> None:
    """A temporary of a final name at the limit can be created, published, and is found again as
    a stale one of that name once its owner is gone (and not as another name's)."""
    assert len(name.encode()) <= name_max(tmp_path)
    final = tmp_path / name
    tmp, fd = outputs.create_temp(final)
    os.write(fd, b"data")
    os.close(fd)
    assert len(tmp.name.encode()) <= name_max(tmp_path) and tmp.suffix == ".mkv"
    outputs.publish(tmp, final, replace=False)
    assert final.read_bytes() == b"data" and not tmp.exists()
    # a temporary of a killed srgpu (a pid that is gone) is recognised as this name's, not another's
    dead = tmp.with_name(re.sub(r"-(\d+)-([0-9a-f]+)\.part", "-999999999-\\2.part", outputs.temp_path(final).name))
    dead.write_bytes(b"half")
    assert outputs.stale_temps(tmp_path / ("b" + name[1:])) == []
    assert outputs.remove_stale_temps(final) == [dead] and not dead.exists()


@pytest.mark.parametrize("name", [LONGEST.replace(".mkv", ".png"), JAPANESE.replace(".mkv", ".png")],
                         ids=["255-bytes", "japanese"])
def test_an_image_with_the_longest_name_is_written(tmp_path: Path, name: str) -> None:
    import numpy as np

    from srgpu.images.files import read_image, write_image_atomic

    image = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
    write_image_atomic(tmp_path / name, image, replace=False)
    assert (read_image(tmp_path / name) == image).all() and os.listdir(tmp_path) == [name]


def test_a_video_with_the_longest_name_is_upscaled(tmp_path: Path, engine: BicubicEngine) -> None:
    src = make_clip(tmp_path / JAPANESE, frames=4)
    dst = tmp_path / "out" / LONGEST
    dst.parent.mkdir()
    result = upscale_video(src, dst, engine, FAST)
    assert result.frames == 4 and dst.is_file() and leftovers(dst.parent) == []


def test_a_chunked_video_with_the_longest_name(tmp_path: Path, engine: BicubicEngine) -> None:
    """The work folder ``.NAME.srgpu-chunks`` and its temporaries fit too."""
    src = make_clip(tmp_path / "src.mkv", frames=12, codec="libx264",
                    out_args=("-preset", "ultrafast", "-x264-params", "keyint=4:min-keyint=4:scenecut=0"))
    dst = tmp_path / "out" / JAPANESE
    dst.parent.mkdir()
    cj = chunked.plan_chunked(src, dst, IDENTITY, FAST, chunk_seconds=0.16)
    assert not isinstance(cj, str), cj
    assert len(cj.work.name.encode()) <= name_max(tmp_path)
    result = chunked.upscale_chunked(cj, InProcess(engine))
    assert result.frames == 12 and dst.is_file()
    assert os.listdir(dst.parent) == [JAPANESE]


# ---------------------------------------------------------------- 12: messages


def _encoder_pid() -> int | None:
    """The encoder ffmpeg of this test process: the child reading srgpu's Matroska pipe."""
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if f" {os.getpid()} " not in (p / "stat").read_text().split(")", 1)[1][:40]:
                continue
            args = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"pipe:0" in args and b"-c:0" in args:
            return int(p.name)
    return None


def test_a_killed_encoder_is_named_with_its_signal(tmp_path: Path, engine: BicubicEngine) -> None:
    import signal

    from srgpu.video.errors import VideoError

    src = make_clip(tmp_path / "src.mkv", frames=40)
    dst = tmp_path / "out.mkv"
    killed = []

    def progress(n: int, total: int | None) -> None:
        if not killed:
            pid = _encoder_pid()
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    with pytest.raises(VideoError) as e:
        upscale_video(src, dst, engine, FAST, progress=progress)
    assert killed
    assert "ffmpeg (encoder) was killed by SIGKILL" in str(e.value) and "printed nothing" not in str(e.value)
    assert "\n" not in str(e.value) and not dst.exists() and leftovers(tmp_path) == []


def test_a_failed_join_names_the_source_and_the_output(tmp_path: Path, engine: BicubicEngine) -> None:
    """The join's ffmpeg is killed while the chunks are made (it joins them as they come): the message
    says which join failed, for which output, and how it ended; the chunks stay for the next run."""
    from srgpu.video.errors import VideoError

    src = make_clip(tmp_path / "src.mkv", frames=12, codec="libx264",
                    out_args=("-preset", "ultrafast", "-x264-params", "keyint=4:min-keyint=4:scenecut=0"))
    dst = tmp_path / "out.mkv"
    cj = chunked.plan_chunked(src, dst, IDENTITY, FAST, chunk_seconds=0.16)
    assert not isinstance(cj, str), cj

    class JoinKilled(InProcess):
        def run(self, tasks, on_frames, on_result):  # type: ignore[no-untyped-def]
            tasks = sorted(tasks, key=lambda t: t.chunk.index)
            super().run(tasks[:-1], on_frames, on_result)
            joiners = [pid for pid in ffmpeg_children() if cj.job.plan.tmp.name.encode()
                       in Path(f"/proc/{pid}/cmdline").read_bytes()]
            assert len(joiners) == 1
            os.kill(joiners[0], signal.SIGKILL)
            super().run(tasks[-1:], on_frames, on_result)

    with pytest.raises(VideoError) as e:
        chunked.upscale_chunked(cj, JoinKilled(engine))
    message = str(e.value)
    assert message.startswith(f"{src}: joining its chunks into {dst}: the join ") and "\n" not in message
    assert "killed by SIGKILL" in message
    assert not dst.exists() and cj.work.is_dir() and leftovers(tmp_path) == []
    assert len(list(cj.work.glob("chunk-*.mkv"))) == len(cj.chunks)  # every chunk made, kept for the next run


def test_a_join_on_a_full_disk_says_so_and_the_rerun_completes(tmp_path: Path, engine: BicubicEngine) -> None:
    """The output's disk fills while the join writes (the chunks all made): one line naming the
    source, the output and ffmpeg's "No space left on device" (a CLI run under load said "ffmpeg
    printed nothing": the message was made before ffmpeg's stderr was read; that race did not come
    up here), nothing under the output's name or a temporary's, the chunks kept; with room again,
    the rerun joins them without making any."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("no tmpfs can be mounted here (root on Linux)")
    try:
        from srgpu.video.errors import VideoError

        src = make_clip(tmp_path / "src.mkv", size="640x360", frames=48, codec="libx264",
                        out_args=("-preset", "ultrafast", "-x264-params", "keyint=12:min-keyint=12:scenecut=0"))
        dst = disk / "out.mkv"
        # lossless chunks of a few MB: the join is still writing to its pipe when the disk fills
        cj = chunked.plan_chunked(src, dst, IDENTITY, LOSSLESS, chunk_seconds=0.48)
        assert not isinstance(cj, str), cj
        filler = disk / ".filler"

        class FillsTheDisk(InProcess):
            def run(self, tasks, on_frames, on_result):  # type: ignore[no-untyped-def]
                def filling(result):  # type: ignore[no-untyped-def]
                    if result.index == 0:  # the join takes nothing before chunk 0: it has written nothing yet
                        st = os.statvfs(disk)
                        with open(filler, "wb") as f:
                            os.posix_fallocate(f.fileno(), 0, st.f_bavail * st.f_frsize - 8192)
                    on_result(result)

                super().run(sorted(tasks, key=lambda t: t.chunk.index == 0), on_frames, filling)  # chunk 0 last

        with pytest.raises(VideoError) as e:
            chunked.upscale_chunked(cj, FillsTheDisk(engine))
        message = str(e.value)
        assert message.startswith(f"{src}: joining its chunks into {dst}: the join ") and "\n" not in message
        assert "No space left on device" in message, message
        assert sorted(p.name for p in disk.iterdir()) == [".filler", cj.work.name]
        assert len(list(cj.work.glob("chunk-*.mkv"))) == len(cj.chunks)
        filler.unlink()
        made: list[int] = []

        class Recording(InProcess):
            def run(self, tasks, on_frames, on_result):  # type: ignore[no-untyped-def]
                made.extend(t.chunk.index for t in tasks)
                super().run(tasks, on_frames, on_result)

        cj = chunked.plan_chunked(src, dst, IDENTITY, LOSSLESS, chunk_seconds=0.48)
        assert not isinstance(cj, str)
        result = chunked.upscale_chunked(cj, Recording(engine))
        assert made == [] and result.frames == 48 and dst.exists() and not cj.work.exists()
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


# ---------------------------------------------------------------- 6: a chunked .mkv's frame rate


def _rate_and_durations(path: Path) -> tuple[str, list]:
    from test_video import packets, stream_lines

    rate = re.search(r", ([\d.]+) fps, ([\d.]+) tbr", stream_lines(path, "Video")[0])
    assert rate is not None
    return rate.group(0), sorted((p[0], p[1]) for p in packets(path, "v:0"))


@pytest.mark.slow
@pytest.mark.parametrize("rate", ["24000/1001", "24", "vfr"])
def test_a_chunked_mkv_has_the_single_pipelines_rate_and_durations(tmp_path: Path, engine: BicubicEngine,
                                                                   rate: str) -> None:
    """The header's frame rate (24.42 fps for 23.976 and 24 before, 30.30 for a 30 fps VFR source)
    and every frame's time and duration (40 ms before) are the single pipeline's."""
    from test_video import ff

    src = tmp_path / ("src.mp4" if rate == "vfr" else "src.mkv")
    timing = ("-vf", "settb=1/90000,setpts=N*3003+mod(N*N*37\\,1500)", "-fps_mode", "passthrough",
              "-enc_time_base", "1/90000") if rate == "vfr" else ()
    ff("-f", "lavfi", "-i", f"testsrc2=size=64x48:rate={'30' if rate == 'vfr' else rate}", "-frames:v", "16",
       *timing, "-c:v", "libx264", "-preset", "ultrafast", "-x264-params", "keyint=4:min-keyint=4:scenecut=0", str(src))
    single, parts = tmp_path / "single.mkv", tmp_path / "chunked.mkv"
    upscale_video(src, single, engine, FAST)
    cj = chunked.plan_chunked(src, parts, IDENTITY, FAST, chunk_seconds=0.17)
    assert not isinstance(cj, str) and len(cj.chunks) >= 3
    chunked.upscale_chunked(cj, InProcess(engine))
    want = _rate_and_durations(single)
    if rate != "vfr":
        assert want[0] == (", 24 fps, 24 tbr" if rate == "24" else ", 23.98 fps, 23.98 tbr")
    assert _rate_and_durations(parts) == want


# ---------------------------------------------------------------- 7: killed after publishing


KILLED_AFTER_PUBLISHING = """
import os, signal, sys
from srgpu.video import chunked
chunked.WorkFolder.remove = lambda self: os.kill(os.getpid(), signal.SIGKILL)  # the kill, at that moment
from srgpu.cli import main
sys.argv = ["srgpu", *sys.argv[1:]]
main()
"""


def test_the_next_run_removes_the_chunks_of_a_published_output(tmp_path: Path, random_npz: Path) -> None:
    """srgpu killed (SIGKILL) after publishing a chunked output, before removing its work folder:
    the next run recognises the published, verified output, removes the folder and says so; the
    output is kept as it is (without --overwrite it exists, as after any finished run)."""
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    src = make_clip(tmp_path / "src.mkv", frames=12, codec="libx264",
                    out_args=("-preset", "ultrafast", "-x264-params", "keyint=4:min-keyint=4:scenecut=0"))
    dst = tmp_path / "out.mkv"
    args = ["upscale", str(src), "-o", str(dst), "--model", str(random_npz), "--device", "cpu", "--workers", "1",
            "--chunk-seconds", "0.16", "--preset", "ultrafast"]
    killed = subprocess.run([sys.executable, "-c", KILLED_AFTER_PUBLISHING, *args], cwd=root, env=env,
                            capture_output=True, text=True)
    work = chunked.work_folder(dst)
    assert killed.returncode == -9 and dst.is_file() and work.is_dir(), killed.stderr
    published = dst.read_bytes()
    again = subprocess.run([sys.executable, "-m", "srgpu", *args], cwd=root, env=env, capture_output=True, text=True)
    assert not work.exists(), again.stderr
    assert f"note: {dst}: complete" in again.stderr and "exists" in again.stderr and again.returncode != 0
    assert dst.read_bytes() == published


def test_a_work_folder_whose_output_was_replaced_is_kept(tmp_path: Path, engine: BicubicEngine) -> None:
    """Another file now at the output's name (the same size, even) is not the published one: the
    work folder is not taken for finished."""
    src = make_clip(tmp_path / "src.mkv", frames=12, codec="libx264",
                    out_args=("-preset", "ultrafast", "-x264-params", "keyint=4:min-keyint=4:scenecut=0"))
    dst = tmp_path / "out.mkv"
    cj = chunked.plan_chunked(src, dst, IDENTITY, FAST, chunk_seconds=0.16)
    assert not isinstance(cj, str)
    original = chunked.WorkFolder.remove
    chunked.WorkFolder.remove = chunked.WorkFolder.close  # type: ignore[method-assign]
    try:
        chunked.upscale_chunked(cj, InProcess(engine))
    finally:
        chunked.WorkFolder.remove = original  # type: ignore[method-assign]
    other = tmp_path / "other"
    other.write_bytes(dst.read_bytes())
    other.replace(dst)
    assert chunked.forget_finished_in(tmp_path) == [] and cj.work.is_dir()


# ---------------------------------------------------------------- 10: colour range in MP4


def test_limited_range_10bit_hevc_keeps_its_range_in_an_x264_mp4(tmp_path: Path, engine: BicubicEngine) -> None:
    """10-bit HEVC tagged tv (and nothing else) into libx264 .mp4, single and chunked: still tv."""
    from srgpu.video import ffmpeg
    from test_video import ff, stream_lines

    if "libx265" not in ffmpeg.video_codecs("encoders"):
        pytest.skip("this ffmpeg has no libx265 to make the 10-bit HEVC source")
    src = tmp_path / "hevc10.mkv"
    ff("-f", "lavfi", "-i", "testsrc2=size=64x48:rate=25", "-frames:v", "12", "-pix_fmt", "yuv420p10le",
       "-color_range", "tv", "-c:v", "libx265", "-x265-params", "log-level=error:keyint=4:min-keyint=4:scenecut=0",
       str(src))
    assert "yuv420p10le(tv, progressive)" in stream_lines(src, "Video")[0]
    options = VideoOptions(EncodeOptions(codec="libx264", preset="ultrafast"))
    single, parts = tmp_path / "single.mp4", tmp_path / "chunked.mp4"
    upscale_video(src, single, engine, options)
    cj = chunked.plan_chunked(src, parts, IDENTITY, options, chunk_seconds=0.16)
    assert not isinstance(cj, str), cj
    chunked.upscale_chunked(cj, InProcess(engine))
    for out in (single, parts):
        assert "yuv420p10le(tv, progressive)" in stream_lines(out, "Video")[0]


# ---------------------------------------------------------------- 11: transport streams whose clock jumps


def _jumping_ts(folder: Path) -> Path:
    """Three TS segments (video and audio) bound end to end: the clock at 10 s, then back to 2 s,
    then ahead to 30 s."""
    from test_video import ff

    parts = []
    for offset in (10, 2, 30):
        seg = folder / f"seg{offset}.ts"
        ff("-f", "lavfi", "-i", "testsrc2=size=64x48:rate=25", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
           "-frames:v", "8", "-t", "0.32", "-c:v", "libx264", "-preset", "ultrafast",
           "-x264-params", "keyint=4:min-keyint=4:scenecut=0", "-c:a", "aac", "-output_ts_offset", str(offset),
           "-f", "mpegts", str(seg))
        parts.append(seg.read_bytes())
    src = folder / "jumps.ts"
    src.write_bytes(b"".join(parts))
    return src


@pytest.mark.parametrize("suffix", [".mkv", ".mp4"])
def test_a_transport_stream_whose_clock_jumps_plays_continuously(tmp_path: Path, engine: BicubicEngine,
                                                                 suffix: str) -> None:
    """Every frame kept, each its own time 40 ms after the one before (no frames sharing a
    millisecond after the backwards jump, no 28 s frozen gap after the forward one), the audio
    moved alike, and a note saying what was done."""
    from test_video import packets

    src = _jumping_ts(tmp_path)
    dst = tmp_path / f"out{suffix}"
    result = upscale_video(src, dst, engine, FAST)
    times = sorted(p[0] for p in packets(dst, "v:0"))
    assert result.frames == 24 == len(times)
    steps = {round(float(b - a), 3) for a, b in zip(times, times[1:])}
    assert steps == {0.04}, steps
    audio = [p[0] for p in packets(dst, "a:0")]
    assert len(audio) >= 45 and max(audio) < times[-1] + 0.1
    assert any("timestamps jump 1 backwards" in n and "1 forwards" in n for n in result.notes), result.notes
    assert leftovers(tmp_path) == []
    cj = chunked.plan_chunked(src, tmp_path / f"chunked{suffix}", IDENTITY, FAST, chunk_seconds=0.16)
    assert isinstance(cj, str) and "timestamps jump" in cj
