"""Long videos in chunks (srgpu.video.chunks, srgpu.video.chunked), on the CPU with the real
bundled ffmpeg and tiny clips cut into chunks of a few frames: the chunked output against the
single pipeline's output of the same source (frame count, every timestamp and duration, the
streams, audio), lossless output identical frame for frame, and the pieces (scan, cost model,
Matroska chunk reading)."""

from __future__ import annotations

import re
import subprocess
import time
from fractions import Fraction
from pathlib import Path

import pytest

from srgpu.model import random_model
from srgpu.video import chunked, chunks, mkv
from srgpu.video.api import EncodeOptions, VideoOptions, upscale_video
from srgpu.video.chunks import Chunk
from srgpu.video.ffmpeg import ffmpeg_exe
from srgpu.video.reader import FrameWindow, Reader
from srgpu.video.verify import StreamPackets, stream_packets
from srgpu.batch.pool import InProcess
from test_video import (BicubicEngine, assert_same_frames, decode, dump, duration, ff, leftovers, make_clip, packets,
                        rotation, stream_lines)

IDENTITY = {"scale": 2, "arch": "test", "weights": "bicubic"}
MEDIUM = VideoOptions(EncodeOptions(preset="medium"))  # B-frames and a lookahead in every chunk's encoder
FAST_X264 = VideoOptions(EncodeOptions(preset="ultrafast"))
X264_GOP = "keyint={k}:min-keyint={k}:scenecut=0:bframes=3"


@pytest.fixture(scope="module")
def engine() -> BicubicEngine:
    return BicubicEngine(random_model("9-1-5", seed=21), 2)


def shown(path: Path, spec: str = "v:0") -> list[tuple[Fraction, Fraction]]:
    """(pts, duration) of every frame of a stream, in presentation order."""
    return sorted((p[0], p[1]) for p in packets(path, spec))


def video_line(path: Path) -> str:
    """The output's video stream line without what differs between two encodes (bit rate)."""
    return re.sub(r", \d+ kb/s", "", stream_lines(path, "Video")[0])


def run_both(src: Path, tmp: Path, engine: BicubicEngine, options: VideoOptions = MEDIUM, suffix: str = ".mp4",
             chunk_seconds: float = 0.3, least: int = 2, workers: int = 1) -> tuple[Path, Path, chunked.ChunkedJob]:
    """The single pipeline's output and the chunked one's, of the same source and settings
    (``workers``: the count the chunks are planned for; they run in this process)."""
    single, parts = tmp / f"single{suffix}", tmp / f"chunked{suffix}"
    upscale_video(src, single, engine, options)
    cj = chunked.plan_chunked(src, parts, IDENTITY, options, chunk_seconds=chunk_seconds,
                              workers=workers)
    assert not isinstance(cj, str), cj
    assert len(cj.chunks) >= least
    result = chunked.upscale_chunked(cj, InProcess(engine))
    assert result.frames == cj.scan.frames and result.output == parts
    assert not chunked.work_folder(parts).exists() and leftovers(tmp) == []
    return single, parts, cj


def assert_same_timing(single: Path, parts: Path, audio: bool = False) -> None:
    """Frame count, every frame's time, when the last one ends, the streams, the audio and the
    duration. (Not every frame's duration: an MP4 file stores them as differences of decoding
    timestamps, which follow the encoder's choice of B-frames.)"""
    got, want = shown(parts), shown(single)
    assert [t for t, _ in got] == [t for t, _ in want]
    assert sum(got[-1]) == sum(want[-1])
    assert video_line(parts) == video_line(single)
    assert [ln.split(": ")[1] for ln in stream_lines(parts, r"\w+")] == \
        [ln.split(": ")[1] for ln in stream_lines(single, r"\w+")]
    if audio:
        assert packets(parts, "a:0") == packets(single, "a:0")  # the same audio at the same times: in sync
    assert rotation(parts) == rotation(single)
    assert duration(parts) == pytest.approx(duration(single), abs=0.002)


# ---------------------------------------------------------------- the pieces


def test_scan_finds_cuts_and_open_gops(tmp_path: Path) -> None:
    closed = make_clip(tmp_path / "closed.mp4", frames=20, codec="libx264",
                       out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=5)))
    found = chunks.scan(closed, 0)
    assert not isinstance(found, str)
    assert found.frames == 20 and found.cuts == (5, 10, 15) and not found.open_cuts
    assert list(found.pts) == sorted(found.pts) and found.time_base == Fraction(1, 12800)
    opened = make_clip(tmp_path / "open.mkv", frames=20, codec="libx265",
                       out_args=("-preset", "ultrafast", "-x265-params",
                                 "log-level=error:keyint=6:min-keyint=6:scenecut=0:open-gop=1:bframes=3"))
    found = chunks.scan(opened, 0)
    assert not isinstance(found, str) and found.cuts and found.open_cuts  # CRA keyframes with leading pictures


def test_packets_that_cannot_be_cut() -> None:
    tb = Fraction(1, 25)
    assert "fewer than two" in chunks.analyse(StreamPackets(tb, (0,), (1,), (0,), (True,)))  # type: ignore[operator]
    assert "no timestamp" in chunks.analyse(StreamPackets(tb, (0, None), (1, 1), (0, 1), (True, False)))  # type: ignore[operator]
    assert "same timestamp" in chunks.analyse(StreamPackets(tb, (0, 0), (1, 1), (0, 1), (True, True)))  # type: ignore[operator]
    # a keyframe decoded before a frame shown after it is no cut point
    scan = chunks.analyse(StreamPackets(tb, (0, 3, 1, 2, 4), (1,) * 5, (0, 1, 2, 3, 4), (True, False, False, True, True)))
    assert not isinstance(scan, str) and scan.cuts == (4,)


def test_cost_model() -> None:
    # one worker: chunks only for resume, as long as allowed
    assert chunks.chunk_count(25 * 600, 25.0, 1) == 10
    assert chunks.chunk_count(25 * 30, 25.0, 1) == 1
    # several workers: a multiple of the workers, between the shortest and the longest chunks
    for workers in (2, 4, 8):
        for seconds in (60, 600, 7200):
            n = chunks.chunk_count(25 * seconds, 25.0, workers)
            assert seconds / n <= chunks.MAX_CHUNK_SECONDS + 1e-9 and (seconds / n >= chunks.MIN_CHUNK_SECONDS or n == 1)
            if seconds / workers >= 2 * chunks.MIN_CHUNK_SECONDS and seconds / n < chunks.MAX_CHUNK_SECONDS:
                assert n % workers == 0
    assert chunks.chunk_count(25 * 60, 25.0, 4) == 8  # 60 s on 4 workers: 7.5 s chunks, two rounds
    assert chunks.chunk_count(100, 25.0, 4, chunk_seconds=1.0) == 4


def test_the_last_round_is_shorter() -> None:
    """Several workers and the cost model's count: the last round's chunks are half the others' (the
    round's end wastes about one of its chunks), never under MIN_CHUNK_SECONDS; one worker, one
    round or a chunk length given: equal chunks."""
    tb = Fraction(1, 25)

    def lengths(seconds: int, workers: int, chunk_seconds: float | None = None) -> list[int]:
        n = 25 * seconds
        scan = chunks.analyse(StreamPackets(tb, tuple(range(n)), (1,) * n, tuple(range(n)), (True,) * n))
        assert not isinstance(scan, str)
        plan = chunks.plan(scan, workers, chunk_seconds)
        assert plan[0].first == 0 and plan[-1].last == n and all(a.last == b.first for a, b in zip(plan, plan[1:]))
        return [c.frames for c in plan]

    got = lengths(150, 4)  # 12 chunks (12.5 s each before): 8 of 15 s, then 4 of 7.5 s
    assert len(got) == chunks.chunk_count(25 * 150, 25.0, 4) == 12
    assert got[:8] == [375] * 8 and sorted(got[8:]) == [187, 187, 188, 188]
    got = lengths(60, 4)  # 8 chunks: 4 of 10 s, 4 of 5 s
    assert got == [250] * 4 + [125] * 4
    got = lengths(48, 4)  # 8 of 6 s before; half would be 4 s (the least): 4 of 8 s and 4 of 4 s
    assert got == [200] * 4 + [100] * 4
    got = lengths(40, 4)  # 8 of 5 s: 4 of 6 s and 4 of 4 s
    assert got == [150] * 4 + [100] * 4
    got = lengths(32, 4)  # 8 of 4 s: the least already, equal
    assert got == [100] * 8
    assert lengths(300, 1) == [25 * 60] * 5  # one worker: resume only
    assert len(set(lengths(150, 4, chunk_seconds=10.0))) == 1  # the user's length
    assert sorted(lengths(30, 4)) == [187, 187, 188, 188]  # one round of 4 (7.5 s chunks)


def test_plan_snaps_to_cut_points() -> None:
    tb = Fraction(1, 25)
    n = 50
    scan = chunks.analyse(StreamPackets(tb, tuple(range(n)), (1,) * n, tuple(range(n)),
                                        tuple(i % 7 == 0 for i in range(n))))
    assert not isinstance(scan, str)
    plan = chunks.plan(scan, 1, chunk_seconds=0.5)  # 4 chunks wanted, keyframes every 7 frames
    assert [(c.first, c.last) for c in plan] == [(0, 14), (14, 28), (28, 35), (35, 50)]
    assert plan[0].start is None and plan[0].seek_us is None and plan[-1].end is None
    assert [c.start for c in plan[1:]] == [14, 28, 35] and [c.end for c in plan[:-1]] == [14, 28, 35]
    assert plan[1].seek_us == 14 * 40_000
    assert Chunk.from_json(plan[2].as_json()) == plan[2]
    assert all(c.keyframe is None for c in plan)  # one worker: whole GOPs only


def test_plan_cuts_inside_gops_for_equal_chunks() -> None:
    """With several workers and keyframes too far apart for equal chunks, a boundary stays at the
    ideal frame: that chunk seeks to the keyframe before it and drops what precedes its start."""
    tb = Fraction(1, 25)
    n = 100
    scan = chunks.analyse(StreamPackets(tb, tuple(range(n)), (1,) * n, tuple(range(n)),
                                        tuple(i % 30 == 0 for i in range(n))))
    assert not isinstance(scan, str)
    plan = chunks.plan(scan, 4, chunk_seconds=1.0)  # 4 chunks of 25 frames, keyframes every 30
    assert [(c.first, c.last) for c in plan] == [(0, 25), (25, 50), (50, 75), (75, 100)]
    assert [c.keyframe for c in plan] == [None, None, 30, 60]  # the second decodes from the start of the file
    assert [c.seek_us for c in plan] == [None, None, 30 * 40_000, 60 * 40_000]
    window = plan[2].window()
    assert (window.start, window.end, window.keyframe) == (50, 75, 30) and window.seek == 1.2
    assert plan[2].window(from_start=True) == FrameWindow(50, 75, None, None)
    assert Chunk.from_json(plan[3].as_json()) == plan[3]
    old = {k: v for k, v in plan[1].as_json().items() if k != "keyframe"}  # a manifest of before
    assert Chunk.from_json(old).keyframe is None
    # a keyframe within a tenth of a chunk of the ideal boundary is taken
    near = chunks.analyse(StreamPackets(tb, tuple(range(n)), (1,) * n, tuple(range(n)),
                                        tuple(i in (0, 24, 51, 75) for i in range(n))))
    assert not isinstance(near, str)
    assert [c.first for c in chunks.plan(near, 4, chunk_seconds=1.0)] == [0, 24, 51, 75]
    # no keyframe within a chunk before the boundary (50, 75): the nearest keyframe, however far
    # (25 is within a chunk of the start of the file)
    sparse = chunks.analyse(StreamPackets(tb, tuple(range(n)), (1,) * n, tuple(range(n)),
                                          tuple(i in (0, 90) for i in range(n))))
    assert not isinstance(sparse, str)
    assert [c.first for c in chunks.plan(sparse, 4, chunk_seconds=1.0)] == [0, 25, 90]


def test_a_window_decodes_exactly_its_frames(tmp_path: Path) -> None:
    """A window of an open-GOP H.264 stream, decoded after a seek with the leading pictures dropped
    before the decoder, gives the same frames (samples and timestamps) as decoding it all."""
    src = make_clip(tmp_path / "og.mp4", frames=30, codec="libx264",
                    out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=10) + ":open-gop=1"))
    scan = chunks.scan(src, 0)
    assert not isinstance(scan, str) and 10 in scan.open_cuts
    from srgpu.video.formats import LAYOUTS

    def frames(window: FrameWindow | None) -> list[tuple[int, bytes]]:
        reader = Reader(src, 0, LAYOUTS["yuv420p"], "yuv420p", size=(64, 48), window=window)
        reader.start()
        return [(f.pts, b"".join(p.tobytes() for p in f.planes)) for f in reader.frames()]

    whole = frames(None)
    start, end = scan.pts[10], scan.pts[20]
    sought = frames(FrameWindow(start, end, float(start * scan.time_base)))
    assert sought == [f for f in whole if start <= f[0] < end] and len(sought) == 10
    assert frames(FrameWindow(start, end, None)) == sought  # the fallback: from the start of the file


def test_matroska_chunks_read_back(tmp_path: Path) -> None:
    src = make_clip(tmp_path / "c.mkv", frames=12, codec="libx264",
                    out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6)))
    data = src.read_bytes()
    track, scale, frames = mkv.read_coded(data)
    assert track.codec_id == "V_MPEG4/ISO/AVC" and track.codec_private and scale == 1_000_000
    want = packets(src, "v:0")
    assert [(Fraction(f.time_ns, 10**9), f.size) for f in frames] == [(p[0], p[2]) for p in want]
    assert [f.keyframe for f in frames] == [k for k in stream_packets(src, 0).keys]
    with pytest.raises(mkv.MatroskaError):
        mkv.read_coded(data[: len(data) // 2])


# ---------------------------------------------------------------- chunked against single


def test_b_frames_and_audio(tmp_path: Path, engine: BicubicEngine) -> None:
    src = make_clip(tmp_path / "src.mp4", frames=40, codec="libx264", audio="aac",
                    out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6)))
    single, parts, cj = run_both(src, tmp_path, engine, least=4)
    assert_same_timing(single, parts, audio=True)
    assert sum(1 for p in stream_packets(parts, 0).keys if p) >= len(cj.chunks)  # each chunk starts with a keyframe


def test_vfr(tmp_path: Path, engine: BicubicEngine) -> None:
    src = make_clip(tmp_path / "vfr.mp4", frames=36, codec="libx264", audio="aac",
                    vf="settb=1/90000,setpts=N*3003+mod(N*N*37\\,1500)",
                    out_args=("-fps_mode", "passthrough", "-enc_time_base", "1/90000", "-preset", "medium",
                              "-x264-params", X264_GOP.format(k=6)))
    times = [t for t, _ in shown(src)]
    assert len({b - a for a, b in zip(times, times[1:])}) > 5  # really variable
    single, parts, _ = run_both(src, tmp_path, engine)
    assert_same_timing(single, parts, audio=True)
    assert [t for t, _ in shown(parts)] == times


def test_rotated(tmp_path: Path, engine: BicubicEngine) -> None:
    plain = make_clip(tmp_path / "plain.mp4", frames=24, codec="libx264",
                      vf="setparams=color_primaries=bt709:color_trc=bt709:colorspace=bt709:range=tv",
                      out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6)))
    src = tmp_path / "rot.mp4"
    ff("-display_rotation", "90", "-i", str(plain), "-c", "copy", str(src))
    single, parts, _ = run_both(src, tmp_path, engine)
    assert_same_timing(single, parts)
    assert rotation(parts) in (90.0, -90.0) and "bt709" in video_line(parts)


def test_10bit(tmp_path: Path, engine: BicubicEngine) -> None:
    src = make_clip(tmp_path / "ten.mp4", frames=24, codec="libx264", pix_fmt="yuv420p10le",
                    out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6)))
    single, parts, _ = run_both(src, tmp_path, engine)
    assert_same_timing(single, parts)
    assert "yuv420p10le" in video_line(parts) and "High 10" in video_line(parts)


def test_open_gop_hevc(tmp_path: Path, engine: BicubicEngine) -> None:
    """x265 with open GOPs (CRA keyframes with leading pictures) into HEVC again: every frame,
    at its time; the cuts fall at open-GOP keyframes."""
    src = make_clip(tmp_path / "og.mkv", frames=30, codec="libx265", audio="libopus",
                    out_args=("-preset", "ultrafast", "-x265-params",
                              "log-level=error:keyint=6:min-keyint=6:scenecut=0:open-gop=1:bframes=3"))
    options = VideoOptions(EncodeOptions(codec="libx265", preset="ultrafast"))
    single, parts, cj = run_both(src, tmp_path, engine, options, suffix=".mkv")
    assert any(c.first in cj.scan.open_cuts for c in cj.chunks[1:])
    assert_same_timing(single, parts, audio=True)
    assert "hevc" in video_line(parts)
    # both encoders planned at the same rate, the source's 25 frames a second (x265's own settings)
    rates = [re.search(rb"x265 \(build.*?fps=(\d+/\d+)", f.read_bytes(), re.S) for f in (single, parts)]
    assert [m.group(1) if m else None for m in rates] == [b"25/1", b"25/1"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["h264-open-gop", "hevc-open-gop"])
def test_chunks_that_start_inside_a_gop(tmp_path: Path, engine: BicubicEngine, kind: str) -> None:
    """Keyframes every 12 frames, chunks of 7-8 planned for two workers: boundaries fall inside
    GOPs (open ones, with B-frames), each such chunk decodes from the keyframe before it and drops
    what precedes its start. ffv1: the decoded output is the single pipeline's, sample for sample,
    every frame at its time, the audio the same."""
    if kind == "h264-open-gop":
        src = make_clip(tmp_path / "og.mp4", frames=40, codec="libx264", audio="aac",
                        out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=12) + ":open-gop=1"))
    else:
        src = make_clip(tmp_path / "og.mkv", frames=40, codec="libx265", audio="libopus",
                        out_args=("-preset", "ultrafast", "-x265-params",
                                  "log-level=error:keyint=12:min-keyint=12:scenecut=0:open-gop=1:bframes=3"))
    options = VideoOptions(EncodeOptions(codec="ffv1"))
    single, parts, cj = run_both(src, tmp_path, engine, options, suffix=".mkv", workers=2)
    inside = [c for c in cj.chunks if c.keyframe is not None]
    assert len(inside) >= 2 and all(c.first not in cj.scan.cuts for c in inside)
    assert any(c.seek_us is None for c in cj.chunks[1:] if c.first < 12)  # the first GOP: from the start
    assert_same_timing(single, parts, audio=True)
    got, want = decode(parts, "yuv420p", 128, 96), decode(single, "yuv420p", 128, 96)
    assert len(got) == len(want) == 40
    assert_same_frames(got, want)


def test_boundary_on_the_last_frame(tmp_path: Path, engine: BicubicEngine) -> None:
    """A keyframe on the last frame, and a cut there: the last chunk is one frame long."""
    src = make_clip(tmp_path / "last.mp4", frames=21, codec="libx264", audio="aac",
                    out_args=("-preset", "medium", "-force_key_frames", "expr:eq(n,20)",
                              "-x264-params", "keyint=100:min-keyint=100:scenecut=0:bframes=3"))
    single, parts, cj = run_both(src, tmp_path, engine, chunk_seconds=0.4)
    assert [c.frames for c in cj.chunks] == [20, 1]
    assert_same_timing(single, parts, audio=True)


def test_lossless_frames_identical(tmp_path: Path, engine: BicubicEngine) -> None:
    """ffv1: the decoded output of the chunked run is the single pipeline's, sample for sample,
    from an open-GOP H.264 source (the hardest cut)."""
    src = make_clip(tmp_path / "og.mp4", frames=30, codec="libx264", audio="aac",
                    out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6) + ":open-gop=1"))
    options = VideoOptions(EncodeOptions(codec="ffv1"))
    single, parts, cj = run_both(src, tmp_path, engine, options, suffix=".mkv")
    assert any(c.first in cj.scan.open_cuts for c in cj.chunks[1:])
    assert_same_timing(single, parts, audio=True)
    got, want = decode(parts, "yuv420p", 128, 96), decode(single, "yuv420p", 128, 96)
    assert len(got) == len(want) == 30
    assert_same_frames(got, want)
    assert len({g[0].tobytes() for g in got}) > 10  # real content, not one frame repeated


def test_chapters_metadata_and_subtitles_once(tmp_path: Path, engine: BicubicEngine) -> None:
    clip = make_clip(tmp_path / "c.mp4", frames=30, codec="libx264", audio="aac",
                     out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6)))
    srt = tmp_path / "s.srt"
    srt.write_text("1\n00:00:00,000 --> 00:00:00,500\nhello\n\n2\n00:00:00,600 --> 00:00:01,100\nworld\n")
    meta = tmp_path / "meta.txt"
    meta.write_text(";FFMETADATA1\ntitle=Chunked\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=0\nEND=600\ntitle=first\n"
                    "[CHAPTER]\nTIMEBASE=1/1000\nSTART=600\nEND=1200\ntitle=second\n")
    src = tmp_path / "src.mkv"
    ff("-i", str(clip), "-i", str(srt), "-i", str(meta), "-map", "0", "-map", "1", "-map_metadata", "2",
       "-map_chapters", "2", "-c", "copy", "-c:s", "srt", str(src))
    single, parts, _ = run_both(src, tmp_path, engine, suffix=".mkv")
    assert_same_timing(single, parts, audio=True)
    text = dump(parts)
    assert len(re.findall(r"Chapter #0:\d+", text)) == 2 and "Chunked" in text
    assert packets(parts, "s:0") == packets(single, "s:0") and len(packets(parts, "s:0")) == 2


def test_short_videos_keep_the_single_pipeline(tmp_path: Path) -> None:
    src = make_clip(tmp_path / "s.mp4", frames=10, codec="libx264", out_args=("-preset", "ultrafast"))
    reason = chunked.plan_chunked(src, tmp_path / "o.mp4", IDENTITY, MEDIUM)
    assert isinstance(reason, str) and "short" in reason
    one_gop = make_clip(tmp_path / "g.mp4", frames=10, codec="libx264",
                        out_args=("-preset", "ultrafast", "-x264-params", "keyint=100:scenecut=0"))
    reason = chunked.plan_chunked(one_gop, tmp_path / "o.mp4", IDENTITY, MEDIUM, chunk_seconds=0.1)
    assert isinstance(reason, str) and "no keyframe" in reason


def test_the_join_refuses_a_chunk_that_changed(tmp_path: Path, engine: BicubicEngine) -> None:
    """A chunk file changed after it was verified (same size, other bytes) is found by its hash at
    the join, made again, and the output is still complete."""
    src = make_clip(tmp_path / "src.mp4", frames=30, codec="libx264",
                    out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6)))
    dst = tmp_path / "out.mp4"
    cj = chunked.plan_chunked(src, dst, IDENTITY, MEDIUM, chunk_seconds=0.3)
    assert not isinstance(cj, str)
    calls = []

    class Damaging(InProcess):
        def run(self, tasks, on_frames, on_result):  # type: ignore[no-untyped-def]
            calls.append([t.chunk.index for t in tasks])

            def damaging(result):  # type: ignore[no-untyped-def]
                on_result(result)
                if len(calls) == 1 and result.index == 1:  # the join takes it once chunk 0 is made
                    path = next(t.path for t in tasks if t.chunk.index == 1)
                    data = bytearray(path.read_bytes())
                    data[-10] ^= 0xFF
                    path.write_bytes(bytes(data))

            super().run(sorted(tasks, key=lambda t: t.chunk.index == 0), on_frames, damaging)  # chunk 0 last

    result = chunked.upscale_chunked(cj, Damaging(engine))
    assert calls[1] == [1] and any("chunk 1 changed" in n for n in result.notes)
    assert len(shown(dst)) == 30


def test_the_output_name_stays_free_until_the_join_is_verified(tmp_path: Path, engine: BicubicEngine,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    src = make_clip(tmp_path / "src.mp4", frames=24, codec="libx264",
                    out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6)))
    dst = tmp_path / "out.mp4"
    cj = chunked.plan_chunked(src, dst, IDENTITY, MEDIUM, chunk_seconds=0.3)
    assert not isinstance(cj, str)
    from srgpu.video import verify

    def lost_frame(path, stream_index, sent, time_base):  # type: ignore[no-untyped-def]
        raise chunked.VideoError(f"{path.name}: the encoded file holds {len(sent) - 1} video frames")

    monkeypatch.setattr(verify, "check_frames", lost_frame)
    with pytest.raises(chunked.VideoError, match="holds"):
        chunked.upscale_chunked(cj, InProcess(engine))
    assert not dst.exists() and leftovers(tmp_path) == []
    assert chunked.work_folder(dst).is_dir()  # kept for the next run


MASTER_DISPLAY = "G(13250,34500)B(7500,3000)R(34000,16000)WP(15635,16450)L(10000000,1)"


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".mkv", ".mp4"])
def test_hdr10_and_aspect_ratio(tmp_path: Path, engine: BicubicEngine, suffix: str) -> None:
    """HDR10 static metadata, PQ colour tags, 10 bits and a non-square pixel aspect ratio reach
    the joined output as they reach the single pipeline's."""
    from test_video import first_frame_side_data

    src = make_clip(tmp_path / "hdr.mkv", frames=24, codec="libx265", pix_fmt="yuv420p10le",
                    vf="setparams=color_primaries=bt2020:color_trc=smpte2084:colorspace=bt2020nc,setsar=4/3",
                    out_args=("-x265-params", "log-level=error:keyint=6:min-keyint=6:scenecut=0:"
                              f"master-display={MASTER_DISPLAY}:max-cll=1000,400"))
    options = VideoOptions(EncodeOptions(codec="libx265", preset="ultrafast"))
    single, parts, _ = run_both(src, tmp_path, engine, options, suffix=suffix)
    assert_same_timing(single, parts)
    want = first_frame_side_data(single)
    assert want is not None and want.max_cll == 1000 and first_frame_side_data(parts) == want
    line = video_line(parts)
    assert "bt2020nc/bt2020/smpte2084" in line and "yuv420p10le" in line and "SAR 4:3" in line


def test_the_command_line_cuts_a_video_into_chunks(tmp_path: Path, random_npz: Path) -> None:
    from typer.testing import CliRunner

    from srgpu.cli import app

    src = make_clip(tmp_path / "src.mp4", frames=30, codec="libx264", audio="aac",
                    out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6)))
    dst = tmp_path / "out.mp4"
    args = ["upscale", str(src), "-o", str(dst), "--model", str(random_npz), "--device", "cpu", "--preset", "medium"]
    result = CliRunner().invoke(app, [*args, "--chunk-seconds", "0.3"])
    assert result.exit_code == 0, result.output
    assert re.search(r"src\.mp4: \d+ chunks, 30 frames, on 1 CPU worker", result.output)
    assert re.search(r"\[joining\]: 30/30 frames", result.output) and "wrote" in result.output
    assert len(shown(dst)) == 30 and not chunked.work_folder(dst).exists()
    # --chunk-seconds 0: the single pipeline
    single = tmp_path / "single.mp4"
    result = CliRunner().invoke(app, [*args[:3], str(single), *args[4:], "--chunk-seconds", "0"])
    assert result.exit_code == 0 and "chunks" not in result.output
    assert [t for t, _ in shown(single)] == [t for t, _ in shown(dst)]
    # a GPU that cannot be had: one line, exit status 1, nothing written
    result = CliRunner().invoke(app, [*args[:3], str(tmp_path / "x.mp4"), *args[4:], "--gpus", "0"])
    assert result.exit_code == 1 and "srgpu: error: --gpus" in result.output
    assert not (tmp_path / "x.mp4").exists()


@pytest.mark.slow
@pytest.mark.parametrize("name, first, last", [("smpte_1080p25_h264_aac.mp4", 90, 120),
                                               ("bbb_720p24_vp8_vorbis.webm", 267, 283),
                                               ("nasa_2video_2audio_2subs.mp4", 202, 230)])
def test_windows_of_the_shared_clips(shared_data: Path, name: str, first: int, last: int) -> None:
    """A chunk's window of a real clip (H.264 in MP4, VP8 in WebM, a clip with two video streams)
    holds exactly the frames decoding the whole stream gives there, sample for sample."""
    import hashlib

    from srgpu.video.formats import LAYOUTS
    from srgpu.video.probe import probe

    src = shared_data / "video" / name
    scan = chunks.scan(src, 0)
    assert not isinstance(scan, str) and first in scan.cuts
    stream = probe(src).streams[0]
    size = (stream.width, stream.height)

    def frames(window: FrameWindow) -> list[tuple[int, str]]:
        reader = Reader(src, 0, LAYOUTS["yuv420p"], "yuv420p", size=size, window=window)
        reader.start()
        return [(f.pts, hashlib.md5(b"".join(p.tobytes() for p in f.planes)).hexdigest()) for f in reader.frames()]

    start, end = scan.pts[first], scan.pts[last] if last < scan.frames else None
    sought = frames(FrameWindow(start, end, float(start * scan.time_base)))
    whole = frames(FrameWindow(None, end, None))[first:]
    assert sought == whole and len(sought) == last - first


def test_a_chunk_that_seeking_gets_wrong_is_decoded_from_the_start(tmp_path: Path, engine: BicubicEngine,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the demuxer's seek lands after the chunk's keyframe (an unusual file), the chunk's
    frames do not match the source's: it is decoded again from the start of the file, said in a
    note, and the output is still the single pipeline's in every timestamp."""
    src = make_clip(tmp_path / "src.mp4", frames=30, codec="libx264", audio="aac",
                    out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6)))
    original = Chunk.window

    def late(self: Chunk, from_start: bool = False) -> FrameWindow:
        window = original(self, from_start)
        return window if window.seek is None else FrameWindow(window.start, window.end, window.seek + 0.3)

    monkeypatch.setattr(Chunk, "window", late)
    single, parts = tmp_path / "single.mp4", tmp_path / "chunked.mp4"
    upscale_video(src, single, engine, MEDIUM)
    cj = chunked.plan_chunked(src, parts, IDENTITY, MEDIUM, chunk_seconds=0.3)
    assert not isinstance(cj, str)
    result = chunked.upscale_chunked(cj, InProcess(engine))
    assert any("decoded from the start of the file" in n for n in result.notes)
    assert_same_timing(single, parts, audio=True)


def test_transport_stream_with_a_start_time(tmp_path: Path, engine: BicubicEngine) -> None:
    """MPEG-TS (starts at 1.4 s, 90 kHz, seeking by timestamp search): the chunked output is the
    single pipeline's, shifted alike."""
    base = make_clip(tmp_path / "base.mp4", frames=36, codec="libx264", audio="aac",
                     out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6)))
    src = tmp_path / "clip.ts"
    ff("-i", str(base), "-c", "copy", "-f", "mpegts", str(src))
    if subprocess.run([ffmpeg_exe(), "-i", str(src)], capture_output=True).returncode < 0:
        pytest.skip("this ffmpeg build crashes on MPEG-TS input")
    assert re.search(r"start: 1\.4", dump(src))
    single, parts, _ = run_both(src, tmp_path, engine)
    assert_same_timing(single, parts, audio=True)


def test_the_nvdec_path_with_a_stand_in(tmp_path: Path, engine: BicubicEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The path NVDEC takes, on the CPU: a named decoder on the worker's GPU whose frames carry no
    durations (as NVDEC's), which take the source's own from the scan; and a chunk it gets wrong
    (here: every other one) is decoded again on the CPU decoder. The output's timing is the single
    pipeline's."""
    src = make_clip(tmp_path / "src.mp4", frames=30, codec="libx264", audio="aac",
                    out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=6)))
    single, parts = tmp_path / "single.mp4", tmp_path / "chunked.mp4"
    upscale_video(src, single, engine, MEDIUM)
    cj = chunked.plan_chunked(src, parts, IDENTITY, MEDIUM, chunk_seconds=0.3)
    assert not isinstance(cj, str)
    from dataclasses import replace

    cj = replace(cj, nvdec="h264")  # ffmpeg's software H.264 decoder, named as NVDEC's would be
    monkeypatch.setattr(chunked, "engine_gpu", lambda engine: 0)
    monkeypatch.setattr(chunked, "nvdec_options", lambda index, gpu: ())
    original = Reader._on_line

    def no_durations(self: Reader, line: str) -> bool:  # what NVDEC reports: duration 0
        if self.args.count("h264") and "[Parsed_showinfo_" in line:
            line = re.sub(r"\bduration:\s*\d+", "duration: 0", line)
            if self.window is not None and self.window.start is not None and (self.window.start // 512) % 12 == 6:
                line = re.sub(r"\bpts:\s*(\d+)", lambda m: f"pts: {int(m.group(1)) + 1}", line)  # a wrong frame
        return original(self, line)

    monkeypatch.setattr(Reader, "_on_line", no_durations)
    chunked._engines_with_a_chunk.add(engine)  # every chunk from NVDEC's first frame (the handover: tests below)
    result = chunked.upscale_chunked(cj, InProcess(engine))
    assert result.decoder == "h264 and software"
    assert_same_timing(single, parts, audio=True)
    assert shown(parts)[-1][1] == shown(single)[-1][1]  # the last frame's duration: the source's


def _nvdec_stand_in(monkeypatch: pytest.MonkeyPatch, wrong_pts_at: int | None = None) -> list[tuple[int, str | None, bool]]:
    """ffmpeg's software H.264 decoder named as NVDEC's (``-c:0 h264``) on a worker's GPU 0, with
    what NVDEC reports (no frame durations); ``wrong_pts_at``: its frame at that pts (ticks) is
    given a tick later (a decoder that goes wrong). Returns the attempts made, as (chunk, decoder,
    handover)."""
    monkeypatch.setattr(chunked, "engine_gpu", lambda engine: 0)
    monkeypatch.setattr(chunked, "nvdec_options", lambda index, gpu: ())
    original, make = Reader._on_line, chunked._make_chunk
    attempts: list[tuple[int, str | None, bool]] = []

    def stand_in(self: Reader, line: str) -> bool:
        if self.args.count("h264") and "[Parsed_showinfo_" in line:
            line = re.sub(r"\bduration:\s*\d+", "duration: 0", line)
            if wrong_pts_at is not None:
                line = re.sub(rf"\bpts:\s*{wrong_pts_at}\b", f"pts: {wrong_pts_at + 1}", line)
        return original(self, line)

    def recorded(task, engine, progress, from_start, nvdec=None, gpu=None, turn=None, handover=False):  # type: ignore[no-untyped-def]
        attempts.append((task.chunk.index, nvdec, handover))
        return make(task, engine, progress, from_start, nvdec, gpu, turn, handover=handover)

    monkeypatch.setattr(Reader, "_on_line", stand_in)
    monkeypatch.setattr(chunked, "_make_chunk", recorded)
    return attempts


class PacedEngine(BicubicEngine):
    """10 ms a frame, as a worker's pipeline is paced by its encoder: a second decoder started beside
    the first catches up with it (unpaced, 64x48 frames go through faster than it starts)."""

    def srcnn_plane(self, plane, out_shape, max_value):  # type: ignore[no-untyped-def]
        time.sleep(0.01)
        return super().srcnn_plane(plane, out_shape, max_value)


def _handover_clip(tmp_path: Path) -> tuple[Path, Path, VideoOptions]:
    """96 frames (keyframes every 12) and the single pipeline's lossless output of them."""
    src = make_clip(tmp_path / "src.mp4", frames=96, codec="libx264", audio="aac",
                    out_args=("-preset", "medium", "-x264-params", X264_GOP.format(k=12)))
    options = VideoOptions(EncodeOptions(codec="ffv1"))
    single = tmp_path / "single.mkv"
    upscale_video(src, single, BicubicEngine(random_model("9-1-5", seed=21), 2), options)
    return src, single, options


def test_an_engines_first_chunk_starts_on_the_cpu_and_hands_over(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine's first chunk starts on the CPU's decoder while NVDEC (a stand-in) starts, and
    NVDEC takes over once its frames are the CPU's; the engine's later chunks decode on NVDEC
    alone. The run's result says so, and the output is the single pipeline's, sample for sample,
    every frame at its time."""
    from dataclasses import replace

    src, single, options = _handover_clip(tmp_path)
    parts = tmp_path / "chunked.mkv"
    cj = chunked.plan_chunked(src, parts, IDENTITY, options, chunk_seconds=1.92)
    assert not isinstance(cj, str) and [c.frames for c in cj.chunks] == [48, 48], cj
    attempts = _nvdec_stand_in(monkeypatch)
    done: list[chunked.ChunkResult] = []
    run = chunked.run_chunk
    monkeypatch.setattr(chunked, "run_chunk", lambda *a, **k: done.append(run(*a, **k)) or done[-1])
    engine = PacedEngine(random_model("9-1-5", seed=21), 2)  # its own: it has made no chunk yet
    result = chunked.upscale_chunked(replace(cj, nvdec="h264"), InProcess(engine))
    assert attempts == [(0, "h264", True), (1, "h264", False)]
    first = next(r for r in done if r.index == 0)
    assert first.decoder == "h264" and first.handover_at is not None and 12 <= first.handover_at < 48, first
    assert all(r.decoder == "h264" and r.handover_at is None for r in done if r.index != 0)
    assert result.decoder == "h264 (the first frames of 1 chunk by software while NVDEC started)"
    assert_same_timing(single, parts, audio=True)
    got, want = decode(parts, "yuv420p", 128, 96), decode(single, "yuv420p", 128, 96)
    assert len(got) == len(want) == 96
    assert_same_frames(got, want)


def test_a_first_chunk_whose_nvdec_goes_wrong_after_the_handover_is_decoded_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NVDEC (a stand-in) takes over the first chunk, then times a frame wrong (frame 40): the
    chunk is decoded again on the CPU, from its start, and the output is still the single
    pipeline's, sample for sample."""
    from dataclasses import replace

    src, single, options = _handover_clip(tmp_path)
    parts = tmp_path / "chunked.mkv"
    cj = chunked.plan_chunked(src, parts, IDENTITY, options, chunk_seconds=1.92)
    assert not isinstance(cj, str) and len(cj.chunks) == 2
    attempts = _nvdec_stand_in(monkeypatch, wrong_pts_at=40 * 512)
    engine = PacedEngine(random_model("9-1-5", seed=21), 2)
    result = chunked.upscale_chunked(replace(cj, nvdec="h264"), InProcess(engine))
    assert attempts == [(0, "h264", True), (0, None, False), (1, "h264", False)], attempts
    assert result.decoder == "h264 and software"
    assert_same_timing(single, parts, audio=True)
    assert_same_frames(decode(parts, "yuv420p", 128, 96), decode(single, "yuv420p", 128, 96))


def _slow_trial(monkeypatch: pytest.MonkeyPatch, seconds: float, same: bool | None,
                why: str = "") -> list[float]:
    """NVDEC's trial on the source's first frames as a stand-in that answers (``same``, ``why``)
    after ``seconds``; returns the time it answered (perf_counter), once it has."""
    from srgpu.video import hwdecode

    answered: list[float] = []

    def trial(*args, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(seconds)
        answered.append(time.perf_counter())
        return same, why

    monkeypatch.setattr(hwdecode, "decodes_like_software", trial)
    return answered


def test_nvdecs_trial_runs_beside_the_first_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NVDEC's trial on the source's first frames no longer holds up the first chunk: the chunk starts
    (on the CPU's decoder, handing over to NVDEC) while the trial runs; the engine's next chunk
    waits for its yes and decodes on NVDEC from its first frame. The output is the single
    pipeline's, sample for sample."""
    from dataclasses import replace

    src, single, options = _handover_clip(tmp_path)
    parts = tmp_path / "chunked.mkv"
    cj = chunked.plan_chunked(src, parts, IDENTITY, options, chunk_seconds=1.92)
    assert not isinstance(cj, str) and len(cj.chunks) == 2
    attempts = _nvdec_stand_in(monkeypatch)
    answered = _slow_trial(monkeypatch, 1.0, True)
    started: list[float] = []
    make = chunked._make_chunk
    monkeypatch.setattr(chunked, "_make_chunk", lambda *a, **k: started.append(time.perf_counter()) or make(*a, **k))
    engine = PacedEngine(random_model("9-1-5", seed=21), 2)
    pending = replace(cj, nvdec="h264", nvdec_check=chunked.NvdecCheck((), said=True))
    result = chunked.upscale_chunked(pending, InProcess(engine))
    assert attempts == [(0, "h264", True), (1, "h264", False)], attempts
    assert started[0] < answered[0] < started[1], (started, answered)  # the first chunk did not wait; the second did
    assert result.decoder.startswith("h264") and not any("CPU" in n for n in result.notes), result
    assert_same_frames(decode(parts, "yuv420p", 128, 96), decode(single, "yuv420p", 128, 96))
    assert_same_timing(single, parts, audio=True)


def test_a_no_from_nvdecs_trial_redoes_what_nvdec_decoded_on_the_cpu(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Where NVDEC's trial says no after the first chunk was handed over to NVDEC, that chunk is
    decoded again on the CPU, and the next chunk decodes on the CPU; with --hwdec nvdec the run
    says why. A yes left in the work folder by an earlier run is not taken for this run's."""
    from dataclasses import replace
    from srgpu.manifest import write_json
    from srgpu.video import nvdec_trial

    src, single, _ = _handover_clip(tmp_path)
    options = VideoOptions(EncodeOptions(codec="ffv1"), hwdec="nvdec")
    parts = tmp_path / "chunked.mkv"
    cj = chunked.plan_chunked(src, parts, IDENTITY, options, chunk_seconds=1.92)
    assert not isinstance(cj, str) and len(cj.chunks) == 2
    cj.work.mkdir()
    write_json(nvdec_trial.verdict_path(cj.work), {"format": nvdec_trial.FORMAT, "version": nvdec_trial.VERSION,
                                                    "key": cj.key, "same": True, "why": ""})
    attempts = _nvdec_stand_in(monkeypatch)
    _slow_trial(monkeypatch, 1.5, False, "h264_cuvid decodes frame 3 differently from the software decoder")
    engine = PacedEngine(random_model("9-1-5", seed=21), 2)
    pending = replace(cj, nvdec="h264", nvdec_check=chunked.NvdecCheck((), said=True))
    result = chunked.upscale_chunked(pending, InProcess(engine))
    assert sorted(attempts, key=repr) == [(0, "h264", True), (0, None, False), (1, None, False)], attempts
    assert result.decoder == "software", result.decoder
    assert "chunks are decoded on the CPU: h264_cuvid decodes frame 3 differently from the software decoder" \
        in result.notes, result.notes
    assert_same_frames(decode(parts, "yuv420p", 128, 96), decode(single, "yuv420p", 128, 96))
    assert_same_timing(single, parts, audio=True)
    assert not cj.work.exists()


def test_nvdec_verdicts_are_read_for_their_job_and_waited_for_within_bounds(tmp_path: Path) -> None:
    """A worker reads only its job's verdict; one that does not come in time, or a trial that
    breaks, is a no."""
    from srgpu.video import nvdec_trial

    path = nvdec_trial.verdict_path(tmp_path)
    assert nvdec_trial.read(path, "k") is None
    t = time.monotonic()
    assert nvdec_trial.wait(path, "k", seconds=0.2).same is False and time.monotonic() - t >= 0.2
    assert nvdec_trial.Trial(path, "k", lambda: (True, "")).start().result() == nvdec_trial.Verdict(True)
    assert nvdec_trial.read(path, "other") is None and nvdec_trial.read(path, "k") == nvdec_trial.Verdict(True)

    def broken() -> tuple[bool | None, str]:
        raise RuntimeError("no such device")

    assert nvdec_trial.Trial(path, "k", broken).start().result().same is False
    assert nvdec_trial.wait(path, "k").why == "NVDEC's check failed: no such device"
    assert nvdec_trial.Trial(path, "k", lambda: (None, "h264_cuvid failed: x")).start().result() == \
        nvdec_trial.Verdict(False, "h264_cuvid failed: x")


# ---------------------------------------------------------------- the order chunks are made in


def test_the_join_takes_each_chunk_while_the_rest_are_made(tmp_path: Path, engine: BicubicEngine,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk goes to the join as soon as those before it are made: with every chunk but the last
    made, the join has taken all of them (what is left to join at the end is the last chunk, not
    the whole video), the runner is released once all are made, and the output is the source's,
    frame for frame."""
    src = make_clip(tmp_path / "src.mp4", frames=30, codec="libx264", audio="aac",
                    out_args=("-preset", "ultrafast", "-x264-params", X264_GOP.format(k=6)))
    dst = tmp_path / "out.mp4"
    cj = chunked.plan_chunked(src, dst, IDENTITY, FAST_X264, chunk_seconds=0.3)
    assert not isinstance(cj, str) and len(cj.chunks) >= 4
    sent: list[int] = []
    send = chunked._send_chunk

    def recorded(cj_, result, *args):  # type: ignore[no-untyped-def]
        first = send(cj_, result, *args)
        sent.append(result.index)
        return first

    monkeypatch.setattr(chunked, "_send_chunk", recorded)
    joined_before_the_last: list[int] = []

    class LastChunkLast(InProcess):
        def run(self, tasks, on_frames, on_result, on_start=None, on_error=None):  # type: ignore[no-untyped-def]
            tasks = sorted(tasks, key=lambda t: t.chunk.index)
            super().run(tasks[:-1], on_frames, on_result, on_start, on_error)
            deadline = time.monotonic() + 30
            while len(sent) < len(tasks) - 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            joined_before_the_last.extend(sent)
            super().run(tasks[-1:], on_frames, on_result, on_start, on_error)

        def release(self) -> None:
            released.append(dst.exists())

    released: list[bool] = []
    result = chunked.upscale_chunked(cj, LastChunkLast(engine))
    last = len(cj.chunks) - 1
    assert joined_before_the_last == list(range(last)) and sent == list(range(last + 1))
    assert released == [False]  # the workers may end once the chunks are made, before the output is
    assert result.frames == 30 and shown(dst) == shown(src) and len(shown(dst, "a:0")) == len(shown(src, "a:0"))
    assert not chunked.work_folder(dst).exists() and leftovers(tmp_path) == []


def test_chunks_are_made_largest_first(tmp_path: Path, engine: BicubicEngine) -> None:
    """The workers get the chunks with the most coded bytes first (the encoder's work varies
    twofold between equal chunks of a film; the cheapest last make the workers finish together),
    and the output is the same as in the chunks' own order."""
    # a still first half (cheap) and noise in the second (expensive)
    src = tmp_path / "mixed.mkv"
    subprocess.run([ffmpeg_exe(), "-v", "error", "-y", "-f", "lavfi", "-i", "color=gray:s=64x48:r=24:d=1",
                    "-f", "lavfi", "-i", "nullsrc=s=64x48:r=24:d=1,geq=random(1)*255:128:128",
                    "-filter_complex", "[0][1]concat=n=2:v=1[v]", "-map", "[v]", "-c:v", "libx264", "-preset",
                    "ultrafast", "-x264-params", X264_GOP.format(k=6), str(src)], check=True)
    packets_in_file = stream_packets(src, 0)
    assert len(packets_in_file.sizes) == len(packets_in_file.pts) == 48
    assert sum(packets_in_file.sizes) == sum(int(ln.split(",")[4]) for ln in subprocess.run(
        [ffmpeg_exe(), "-v", "error", "-i", str(src), "-c", "copy", "-f", "framecrc", "-"],
        capture_output=True, text=True, check=True).stdout.splitlines() if ln and not ln.startswith("#"))
    cj = chunked.plan_chunked(src, tmp_path / "out.mkv", IDENTITY, MEDIUM, chunk_seconds=0.5, workers=2)
    assert not isinstance(cj, str) and len(cj.chunks) == 4
    order = [c.index for c in chunks.largest_first(cj.scan, cj.chunks)]
    assert sorted(order[:2]) == [2, 3] and sorted(order[2:]) == [0, 1]  # the noisy half first
    made: list[int] = []

    class Recording(InProcess):
        def run(self, tasks, on_frames, on_result, on_start=None, on_error=None):  # type: ignore[no-untyped-def]
            made.extend(t.chunk.index for t in tasks)
            super().run(tasks, on_frames, on_result, on_start, on_error)

    result = chunked.upscale_chunked(cj, Recording(engine))
    assert made == order and result.frames == 48
    assert [t for t, _ in shown(tmp_path / "out.mkv")] == [t for t, _ in shown(src)]


def test_workers_start_only_once_a_video_is_long(tmp_path: Path) -> None:
    """plan_chunked calls ``when_long`` (the command line starts its workers there) for a video that
    will be cut into chunks, before the scan, and never for one that keeps the single pipeline."""
    calls: list[str] = []
    short = make_clip(tmp_path / "s.mp4", frames=10, codec="libx264", out_args=("-preset", "ultrafast"))
    assert isinstance(chunked.plan_chunked(short, tmp_path / "o.mp4", IDENTITY, MEDIUM, workers=2,
                                           when_long=lambda: calls.append("short")), str)
    long = make_clip(tmp_path / "l.mp4", frames=24, codec="libx264",
                     out_args=("-preset", "ultrafast", "-x264-params", X264_GOP.format(k=6)))
    cj = chunked.plan_chunked(long, tmp_path / "o.mp4", IDENTITY, MEDIUM, workers=2, chunk_seconds=0.3,
                              when_long=lambda: calls.append("long"))
    assert not isinstance(cj, str) and calls == ["long"]


@pytest.mark.slow
def test_the_run_says_its_workers_and_encoder_threads_in_one_line(tmp_path: Path, random_npz: Path) -> None:
    """The line that starts a chunked run says the chunks, the workers and each x264's share of
    the cores (what the defaults chose); a user's own -threads is said as the encoder's choice."""
    from typer.testing import CliRunner

    from srgpu.cli import app
    from srgpu.batch.pool import encoder_threads

    src = make_clip(tmp_path / "src.mp4", frames=30, codec="libx264",
                    out_args=("-preset", "ultrafast", "-x264-params", X264_GOP.format(k=6)))
    args = ["upscale", str(src), "--model", str(random_npz), "--device", "cpu", "--preset", "ultrafast",
            "--chunk-seconds", "0.3", "--workers", "2"]
    result = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "a.mkv")])
    assert result.exit_code == 0, result.output
    assert re.search(rf"\d+ chunks, 30 frames, on 2 CPU workers, libx264 on {encoder_threads(2)} threads each;",
                     result.output), result.output
    result = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "b.mkv"), "--encoder-arg=-threads",
                                      "--encoder-arg=3"])
    assert result.exit_code == 0, result.output
    assert re.search(r"on 2 CPU workers, libx264; ", result.output), result.output
