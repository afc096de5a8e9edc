#!/usr/bin/env python3
"""A long video in chunks on every GPU and CPU of the machine, against one srgpu process and
against plain ffmpeg bicubic scaling, run as one process and in parallel chunks the same way.

For each encoder setting (default: x264 ultrafast, veryfast and medium, x265 medium), every round
times, on the same source (1080p, real content, --seconds long) to 2x:

- ``plain``: ``ffmpeg -i SRC -vf scale=W:H:flags=bicubic -c:v CODEC -preset P -crf C -c:a copy``;
- ``plain_chunks``: the same, as one ffmpeg per chunk, W at a time, each chunk decoded exactly as
  srgpu decodes it (the same chunk list, seek, leading pictures dropped, trim), encoded into its
  own file with the same encoder threads as srgpu's chunk encoders, then joined with ffmpeg's
  concat demuxer and the source's audio (what one would script by hand);
- ``srgpu``: one srgpu process (srgpu.video.api.upscale_video, --hwdec as given; the default
  auto has NVDEC take over the decoding);
- ``srgpu_chunks``: srgpu's chunked run on W worker processes spread over the GPUs
  (srgpu.batch.pool.LocalPool; the workers' start, the scan, the chunks and the join all counted).
  W is --workers, else the cores-based count (srgpu.batch.pool.default_workers without an encoder):
  the chunked path is what this measures, while `srgpu upscale`'s own default for libx264 is one
  worker per GPU (measured slower with more, BENCHMARKS.md).

It reports frames per second of each (median over the rounds), the ratios, whether the issue's
targets hold (chunks >= 1.25x plain at x264 medium, >= 1.4x at x265 medium, not slower than plain
chunks at any setting, not slower than one srgpu process at ultrafast), and two costs: resuming
(checking N verified chunks: certificates and hashes) and the join alone.

    python3 scripts/benchmarks/bench_chunks.py [--seconds 60] [--rounds 1] [--workers N]
        [--settings libx264:ultrafast libx264:veryfast libx264:medium libx265:medium] [--json OUT.json]

The default source is the Big Buck Bunny clip of ../shared/data/video (30 s, 720p) played twice,
scaled to 1920x1080 and encoded with x264 crf 18 (its own keyframes: every 10 s at most, and
at scene cuts).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from srgpu.engine import GPUOptions, create_engine  # noqa: E402
from srgpu.model import resolve_model  # noqa: E402
from srgpu.video import chunked  # noqa: E402
from srgpu.video.api import EncodeOptions, VideoOptions, upscale_video  # noqa: E402
from srgpu.video.ffmpeg import ffmpeg_exe  # noqa: E402
from srgpu.video.probe import probe  # noqa: E402
from srgpu.video.reader import decode_args  # noqa: E402
from srgpu.batch.pool import EngineSpec, LocalPool, encoder_threads, plan_workers  # noqa: E402

TARGETS = {("libx264", "medium"): 1.25, ("libx265", "medium"): 1.4}


def shared_clip(name: str) -> Path:
    for base in (ROOT / "shared" / "data", ROOT.parent / "shared" / "data"):
        if (base / "video" / name).is_file():
            return base / "video" / name
    raise SystemExit(f"cannot find {name} in shared/data or ../shared/data")


def ffmpeg(*args: str) -> None:
    proc = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-y", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"ffmpeg failed: {proc.stderr[-1500:]}")


def default_source(folder: Path, seconds: float, keyint: int | None = None) -> Path:
    src = folder / f"bbb_1080p24_{seconds:g}s.mkv"
    ffmpeg("-stream_loop", "-1", "-i", str(shared_clip("bbb_720p24_vp8_vorbis.webm")), "-t", f"{seconds}",
           "-vf", "scale=1920:1080:flags=bicubic", "-c:v", "libx264", "-crf", "18", "-preset", "veryfast",
           *(["-g", str(keyint)] if keyint else []),
           "-pix_fmt", "yuv420p", "-c:a", "libopus", "-b:a", "128k", str(src))
    return src


def count_frames(path: Path) -> int:
    out = subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(path), "-map", "0:v:0", "-c", "copy", "-f",
                          "framecrc", "-"], capture_output=True, text=True, check=True).stdout
    return sum(1 for ln in out.splitlines() if ln and not ln.startswith("#"))


def timed(fn) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def plain(src: Path, out: Path, size: tuple[int, int], codec: str, preset: str, crf: int) -> None:
    ffmpeg("-i", str(src), "-map", "0:v:0", "-map", "0:a?", "-vf", f"scale={size[0]}:{size[1]}:flags=bicubic",
           "-c:v", codec, "-preset", preset, "-crf", str(crf), *_quiet(codec), "-c:a", "copy", str(out))


def _quiet(codec: str) -> list[str]:
    return ["-x265-params", "log-level=error"] if codec == "libx265" else []


def plain_chunks(src: Path, out: Path, cj: chunked.ChunkedJob, size: tuple[int, int], codec: str, preset: str,
                 crf: int, workers: int, threads: int | None, folder: Path) -> None:
    """Plain ffmpeg per chunk (srgpu's chunk list and windows), W at a time, then concat + audio."""
    index = cj.job.stream.index
    files = [folder / f"plain-{c.index:05d}.mkv" for c in cj.chunks]

    def one(k: int) -> None:
        chunk = cj.chunks[k]
        args = decode_args(src, index, None, (), f"scale={size[0]}:{size[1]}:flags=bicubic", chunk.window())
        ffmpeg(*args, "-c:v", codec, "-preset", preset, "-crf", str(crf), *_quiet(codec),
               *(["-threads", str(threads)] if threads and codec == "libx264" else []), "-f", "matroska",
               str(files[k]))

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(len(files))))
    listing = folder / "plain-list.txt"
    listing.write_text("".join(f"file '{f}'\n" for f in files))
    ffmpeg("-f", "concat", "-safe", "0", "-i", str(listing), "-i", str(src), "-map", "0:v", "-map", "1:a?",
           "-c", "copy", str(out))
    for f in files:
        f.unlink(missing_ok=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, help="a 1080p video (default: Big Buck Bunny, see above)")
    ap.add_argument("--seconds", type=float, default=60.0, help="length of the default source")
    ap.add_argument("--keyint", type=int, default=None,
                    help="the default source's longest keyframe interval in frames (default: x264's 250)")
    ap.add_argument("--no-resume", action="store_true",
                    help="skip measuring resume and join (they make every chunk once more, untimed)")
    ap.add_argument("--settings", nargs="+", default=["libx264:ultrafast", "libx264:veryfast", "libx264:medium",
                                                       "libx265:medium"], help="CODEC:PRESET rows")
    ap.add_argument("--crf", type=int, default=18)
    ap.add_argument("--model", default="9-1-5")
    ap.add_argument("--device", default="auto", help="srgpu's device (the chunk workers use every usable GPU)")
    ap.add_argument("--gpus", default=None, help="the chunk workers' GPUs (default: every usable one)")
    ap.add_argument("--workers", type=int, default=None, help="chunk workers (default: srgpu's default)")
    ap.add_argument("--chunk-seconds", type=float, default=None, help="force the chunk length (default: cost model)")
    ap.add_argument("--precision", default="auto", choices=["fp32", "fp16", "auto"])
    ap.add_argument("--hwdec", default="auto", choices=["no", "auto", "nvdec"], help="the single srgpu process's")
    ap.add_argument("--chunk-hwdec", default="auto", choices=["no", "auto", "nvdec"],
                    help="the chunk workers' (auto: NVDEC where its first frames are the CPU decoder's)")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of all four runs per setting (medians)")
    ap.add_argument("--only", nargs="+", choices=["plain", "plain_chunks", "srgpu", "srgpu_chunks"],
                    default=["plain", "plain_chunks", "srgpu", "srgpu_chunks"])
    ap.add_argument("--json", type=Path, help="also write the report here")
    args = ap.parse_args()
    scale = 2

    with tempfile.TemporaryDirectory(prefix="srgpu-bench-chunks-") as tmp:
        folder = Path(tmp)
        src = args.source or default_source(folder, args.seconds, args.keyint)
        v = probe(src).main_video()
        frames = count_frames(src)
        size = (v.width * scale, v.height * scale)  # type: ignore[operator]
        model = resolve_model(args.model, scale)
        engine = create_engine(args.device, model, scale, GPUOptions(precision=args.precision))
        t0 = time.perf_counter()
        if hasattr(engine, "plan_for"):  # the plan is chosen and cached before anything is timed
            engine.plan_for((v.height, v.width), (size[1], size[0]), 8)  # 8-bit output, as the sources here
        plan_s = time.perf_counter() - t0
        wplan = plan_workers(args.device, args.gpus, args.workers)
        spec = EngineSpec(model, scale, precision=args.precision)
        threads = encoder_threads(wplan.workers)
        rows = []
        resume = join = None
        for setting in args.settings:
            codec, preset = setting.split(":")
            options = VideoOptions(EncodeOptions(codec=codec, preset=preset, crf=args.crf))
            runs: dict[str, list[float]] = {k: [] for k in args.only}
            chunks_n = chunk_decoder = None
            sizes: dict[str, int] = {}  # output bytes: SR output is sharper than bicubic, and costs the encoder more
            for _ in range(args.rounds):
                out = folder / "out.mkv"
                if "plain" in runs:
                    runs["plain"].append(timed(lambda: plain(src, out, size, codec, preset, args.crf)))
                    assert count_frames(out) == frames
                    sizes["plain"] = out.stat().st_size
                if "srgpu" in runs:
                    runs["srgpu"].append(timed(lambda: upscale_video(
                        src, out, engine, VideoOptions(options.encode, hwdec=args.hwdec), overwrite=True)))
                    sizes["srgpu"] = out.stat().st_size
                if "srgpu_chunks" in runs or "plain_chunks" in runs:
                    t0 = time.perf_counter()
                    gpu = int(wplan.gpus[0].split(":")[1]) if wplan.gpus else None
                    cj = chunked.plan_chunked(src, folder / "chunks.mkv", spec.identity(),
                                              VideoOptions(options.encode, hwdec=args.chunk_hwdec), overwrite=True,
                                              workers=wplan.workers, chunk_seconds=args.chunk_seconds, gpu=gpu)
                    if isinstance(cj, str):
                        raise SystemExit(f"the source is not cut into chunks: {cj}")
                    chunks_n = len(cj.chunks)
                    if "srgpu_chunks" in runs:
                        with LocalPool(spec, wplan.devices) as pool:
                            result = chunked.upscale_chunked(cj, pool, overwrite=True, encoder_threads=threads)
                        runs["srgpu_chunks"].append(time.perf_counter() - t0)
                        assert result.frames == frames
                        sizes["srgpu_chunks"] = (folder / "chunks.mkv").stat().st_size
                        chunk_decoder = result.decoder
                        if resume is None and not args.no_resume:
                            resume, join = measure_resume_and_join(cj, pool_spec=spec, devices=wplan.devices,
                                                                   threads=threads)
                    if "plain_chunks" in runs:
                        runs["plain_chunks"].append(timed(lambda: plain_chunks(
                            src, out, cj, size, codec, preset, args.crf, wplan.workers, threads, folder)))
                        sizes["plain_chunks"] = out.stat().st_size
            fps = {k: frames / statistics.median(v) for k, v in runs.items() if v}
            row = {"codec": codec, "preset": preset, "chunks": chunks_n, "chunk_decoder": chunk_decoder,
                   **{f"{k}_fps": round(x, 2) for k, x in fps.items()},
                   **{f"{k}_mbytes": round(b / 1e6, 1) for k, b in sizes.items()},
                   "rounds": {k: [round(frames / s, 2) for s in v] for k, v in runs.items()}}
            if "srgpu_chunks" in fps:
                ratios = {f"vs_{k}": round(fps["srgpu_chunks"] / x, 3) for k, x in fps.items() if k != "srgpu_chunks"}
                row["srgpu_chunks_ratios"] = ratios
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        report = {
            "date": time.strftime("%Y-%m-%d"), "host": platform.node(), "cpus": os.cpu_count(),
            "engine": getattr(engine, "description", engine.name), "workers": wplan.describe(),
            "encoder_threads": threads, "model": model.name, "crf": args.crf,
            "source": str(args.source or f"bbb_720p24_vp8_vorbis.webm looped, {args.seconds:g} s, 1080p x264 crf 18"
                          + (f", keyint {args.keyint}" if args.keyint else "")),
            "frames": frames, "input": f"{v.width}x{v.height}", "output": f"{size[0]}x{size[1]}",
            "plan_seconds": round(plan_s, 1), "rows": rows, "resume": resume, "join": join,
            "targets": targets(rows)}
        engine.close()
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


def measure_resume_and_join(cj: chunked.ChunkedJob, pool_spec: EngineSpec, devices: list[str] | tuple[str, ...],
                            threads: int | None) -> tuple[dict, dict]:
    """Make every chunk of ``cj`` again (into a work folder that stays), then time what a rerun
    spends checking them (certificates, sizes, hashes) and the join alone."""
    import shutil

    folder = chunked.WorkFolder(cj)
    folder.open()
    results: dict[int, chunked.ChunkResult] = {}
    with LocalPool(pool_spec, devices) as pool:
        pool.run([cj.task(c, threads) for c in cj.chunks], lambda n: None, lambda r: results.__setitem__(r.index, r))
    folder.close()
    size = sum(r.size for r in results.values())
    again = chunked.WorkFolder(cj)
    t0 = time.perf_counter()
    done, _ = again.open()
    resume_s = time.perf_counter() - t0
    assert len(done) == len(cj.chunks)
    t0 = time.perf_counter()
    chunked.join(cj, [done[c.index] for c in cj.chunks], overwrite=True)
    join_s = time.perf_counter() - t0
    again.close()
    shutil.rmtree(cj.work, ignore_errors=True)
    return ({"chunks": len(done), "bytes": size, "seconds": round(resume_s, 3)},
            {"chunks": len(done), "bytes": size, "seconds": round(join_s, 3)})


def targets(rows: list[dict]) -> dict:
    out = {}
    for r in rows:
        key = (r["codec"], r["preset"])
        c = r.get("srgpu_chunks_fps")
        if c is None:
            continue
        if key in TARGETS and "plain_fps" in r:
            out[f"{r['codec']} {r['preset']}: chunks >= {TARGETS[key]}x plain"] = c >= TARGETS[key] * r["plain_fps"]
        if "plain_chunks_fps" in r:
            out[f"{r['codec']} {r['preset']}: chunks >= plain chunks"] = c >= r["plain_chunks_fps"]
        if r["preset"] == "ultrafast" and "srgpu_fps" in r:
            out[f"{r['codec']} ultrafast: chunks >= one srgpu process"] = c >= r["srgpu_fps"]
    return out


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    main()
