#!/usr/bin/env python3
"""Where one video upscale spends its wall time: timestamps (seconds from the upscale_video call)
of the plan, the engine's buffer allocation, the decoder's start and first frame, the encoder's
start, the first and last frame written, the encoder's finish and the completeness check, for a
few runs in one process, each after plain ffmpeg's bicubic scaling of the same clip.

    python3 scripts/benchmarks/trace_upscale.py [--source SRC] [--preset ultrafast] [--runs 3] [--hwdec auto no ...]

The default source is bench_ffmpeg.py's (the Big Buck Bunny clip at 1080p, x264 crf 18).
"""

from __future__ import annotations

import argparse
import functools
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "benchmarks"))
import bench_ffmpeg  # noqa: E402
from srgpu.engine import GPUOptions, create_engine  # noqa: E402
from srgpu.model import resolve_model  # noqa: E402
from srgpu.video import api, reader, writer  # noqa: E402
from srgpu.video.ffmpeg import ffmpeg_exe  # noqa: E402
from srgpu.video.probe import probe  # noqa: E402

marks: dict[str, float] = {}
origin = [0.0]


def mark(key: str) -> None:
    marks.setdefault(key, time.perf_counter() - origin[0])


def traced(owner: object, name: str, before: str | None = None, after: str | None = None) -> None:
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def wrapper(*args: object, **kwargs: object) -> object:
        if before:
            mark(before)
        result = fn(*args, **kwargs)
        if after:
            mark(after)
        return result

    setattr(owner, name, wrapper)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path)
    ap.add_argument("--preset", default="ultrafast")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--hwdec", nargs="+", default=["auto"], choices=["no", "auto", "nvdec"],
                    help="one series of runs each")
    args = ap.parse_args()

    traced(reader.Reader, "start", "reader.start", "reader.started")
    traced(writer.Writer, "start", "writer.start", "writer.started")
    traced(writer.Writer, "finish", "writer.finish", "writer.finished")
    traced(api, "plan_video", None, "planned")
    traced(api, "_check_complete", "check_complete", "checked")
    frames = reader.Reader.frames

    def traced_frames(self: reader.Reader):  # type: ignore[no-untyped-def]
        for i, frame in enumerate(frames(self)):
            if i == 0:
                mark("first frame decoded")
            yield frame
        mark("last frame decoded")

    reader.Reader.frames = traced_frames  # type: ignore[method-assign]
    write = writer.Writer.write

    def traced_write(self: writer.Writer, frame: reader.Frame) -> None:
        mark("first write")
        write(self, frame)
        marks["last write"] = time.perf_counter() - origin[0]

    writer.Writer.write = traced_write  # type: ignore[method-assign]

    with tempfile.TemporaryDirectory(prefix="srgpu-trace-") as tmp:
        tmpdir = Path(tmp)
        src = args.source or bench_ffmpeg.default_source(tmpdir)
        v = probe(src).main_video()
        n = bench_ffmpeg.count_frames(src)
        engine = create_engine(args.device, resolve_model("9-1-5", 2), 2, GPUOptions(precision="auto"))
        if hasattr(engine, "plan_for"):  # the GPU's plan is chosen (and cached) before any timing
            engine.plan_for((v.height, v.width), (2 * v.height, 2 * v.width), 8)  # the 8-bit default source
        allocate = engine.frame_processor

        def traced_allocate(*a: object, **k: object) -> object:
            mark("processor.alloc")
            result = allocate(*a, **k)
            mark("processor.ready")
            return result

        engine.frame_processor = traced_allocate  # type: ignore[method-assign]
        for hwdec in args.hwdec:
            for _ in range(args.runs):
                t0 = time.perf_counter()
                subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-y", "-i", str(src), "-vf",
                                f"scale={2 * v.width}:{2 * v.height}:flags=bicubic", "-c:v", "libx264", "-preset",
                                args.preset, "-crf", "18", "-c:a", "copy", str(tmpdir / "plain.mkv")],
                               capture_output=True, check=True)
                plain = time.perf_counter() - t0
                marks.clear()
                origin[0] = time.perf_counter()
                result = api.upscale_video(src, tmpdir / "out.mkv", engine,
                                           api.VideoOptions(api.EncodeOptions(crf=18, preset=args.preset), hwdec=hwdec),
                                           overwrite=True)
                total = time.perf_counter() - origin[0]
                steady = (result.frames - 1) / (marks["last write"] - marks["first write"])
                print(f"{args.preset} hwdec={hwdec} decoder={result.decoder}: plain {plain:.3f} s ({n / plain:.1f} fps), "
                      f"srgpu {total:.3f} s ({n / total:.1f} fps), steady {steady:.1f} fps")
                print("   ", "  ".join(f"{k} {t:.3f}" for k, t in sorted(marks.items(), key=lambda kv: kv[1])))


if __name__ == "__main__":
    main()
