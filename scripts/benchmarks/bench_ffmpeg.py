#!/usr/bin/env python3
"""srgpu end to end against plain ffmpeg bicubic scaling, same source, same encoder settings.

For each preset P: `ffmpeg -i SRC -vf scale=W:H:flags=bicubic -c:v libx264 -preset P -crf 18
-c:a copy OUT` and `srgpu upscale SRC -o OUT --scale 2 --preset P --crf 18` (library call), frames
per second of each and the ratio. The default source is the Big Buck Bunny clip of
../shared/data/video scaled to 1920x1080 and encoded x264 crf 18, so the content is real.

    python3 scripts/benchmarks/bench_ffmpeg.py [--source SRC] [--presets veryfast ultrafast] [--repeats N]
                                    [--hwdec no auto] [--model 9-5-5] [--bits 10] [--json]

--bits 10: the default source is encoded 10-bit (x264 High 10, yuv420p10le) and both sides write
10-bit output (libx264 High 10: plain ffmpeg keeps the source's yuv420p10le through the scale
filter, srgpu keeps the source's depth), so srgpu runs the plan that meets the accuracy bar at
10 bits.

The plain ffmpeg command always decodes in software, as a user would type it; srgpu decodes as
--hwdec says (default auto, as the CLI: NVDEC takes over from the software decoder once it has
given the same frames; see srgpu.video.handover).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from srgpu.engine import GPUOptions, create_engine  # noqa: E402
from srgpu.model import resolve_model  # noqa: E402
from srgpu.video.api import EncodeOptions, VideoOptions, upscale_video  # noqa: E402
from srgpu.video.ffmpeg import ffmpeg_exe  # noqa: E402
from srgpu.video.probe import probe  # noqa: E402


def shared_clip(name: str) -> Path:
    for base in (ROOT / "shared" / "data", ROOT.parent / "shared" / "data"):
        if (base / "video" / name).is_file():
            return base / "video" / name
    raise SystemExit(f"cannot find {name} in shared/data or ../shared/data")


def ffmpeg(*args: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-y", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"ffmpeg failed: {proc.stderr[-1500:]}")
    return time.perf_counter() - t0


PIX_FMTS = {8: "yuv420p", 10: "yuv420p10le"}


def default_source(folder: Path, bits: int = 8) -> Path:
    """The benchmark's real content: the Big Buck Bunny clip scaled to 1920x1080, x264 crf 18, at
    ``bits`` (8: High, 10: High 10)."""
    src = folder / f"bbb_1080p24_x264_crf18_{bits}bit.mkv"
    ffmpeg("-i", str(shared_clip("bbb_720p24_vp8_vorbis.webm")), "-vf", "scale=1920:1080:flags=bicubic",
           "-c:v", "libx264", "-crf", "18", "-preset", "veryfast", "-pix_fmt", PIX_FMTS[bits], "-c:a", "copy", str(src))
    return src


def count_frames(path: Path) -> int:
    out = subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(path), "-map", "0:v:0", "-c", "copy", "-f",
                          "framecrc", "-"], capture_output=True, text=True, check=True).stdout
    return sum(1 for ln in out.splitlines() if ln and not ln.startswith("#"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path)
    ap.add_argument("--presets", nargs="+", default=["veryfast", "ultrafast"])
    ap.add_argument("--crf", type=int, default=18)
    ap.add_argument("--scale", type=int, default=2)
    ap.add_argument("--model", default="9-1-5")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", default="auto", choices=["fp32", "fp16", "auto"])
    ap.add_argument("--repeats", type=int, default=1, help="alternating rounds per preset (medians reported)")
    ap.add_argument("--hwdec", nargs="+", default=["auto"], choices=["no", "auto", "nvdec"],
                    help="srgpu's decoding, one row each (e.g. --hwdec no auto: the CPU decoder beside NVDEC)")
    ap.add_argument("--skip-nvdec-check", action="store_true",
                    help="with --hwdec nvdec: take NVDEC's frames as exact without the first-frames check")
    ap.add_argument("--bits", type=int, default=8, choices=sorted(PIX_FMTS),
                    help="depth of the default source and of both outputs")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.skip_nvdec_check:
        from srgpu.video import hwdecode

        hwdecode.decodes_like_software = lambda *a, **k: (True, "")  # what the check costs is not measured
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")

    with tempfile.TemporaryDirectory(prefix="srgpu-vs-ffmpeg-") as tmp:
        tmpdir = Path(tmp)
        src = args.source
        if src is None:
            src = default_source(tmpdir, args.bits)
        info = probe(src)
        v = info.main_video()
        frames = count_frames(src)
        W, H = v.width * args.scale, v.height * args.scale  # type: ignore[operator]
        model = resolve_model(args.model, args.scale)
        engine = create_engine(args.device, model, args.scale, GPUOptions(precision=args.precision))
        # choose (and cache) the plan for this frame size first: a fresh machine's autotune must not
        # be charged to the first preset's frames per second
        t0 = time.perf_counter()
        if hasattr(engine, "plan_for"):
            engine.plan_for((v.height, v.width), (H, W), args.bits)
        tune_s = time.perf_counter() - t0
        rows = []
        for preset, hwdec in [(p, h) for p in args.presets for h in args.hwdec]:
            # plain and srgpu alternate, so a slow spell of the machine hits both; the ratio is the
            # median of the rounds' ratios
            plain_s, ours_s = [], []
            for _ in range(args.repeats):
                plain_s.append(ffmpeg("-i", str(src), "-vf", f"scale={W}:{H}:flags=bicubic", "-c:v", "libx264",
                                      "-preset", preset, "-crf", str(args.crf), "-pix_fmt", PIX_FMTS[args.bits],
                                      "-c:a", "copy",
                                      str(tmpdir / f"plain_{preset}.mkv")))
                t0 = time.perf_counter()
                result = upscale_video(src, tmpdir / f"srgpu_{preset}.mkv", engine,
                                       VideoOptions(EncodeOptions(crf=args.crf, preset=preset,
                                                                  pix_fmt=PIX_FMTS[args.bits]), hwdec=hwdec),
                                       overwrite=True)
                ours_s.append(time.perf_counter() - t0)
                assert result.frames == frames, (result.frames, frames)
            ratios = [p / o for p, o in zip(plain_s, ours_s)]
            rows.append({"preset": preset, "hwdec": hwdec, "decoder": result.decoder, "frames": frames, "ffmpeg_fps": frames / statistics.median(plain_s),
                         "srgpu_fps": frames / statistics.median(ours_s), "ratio": statistics.median(ratios),
                         "rounds": [{"ffmpeg_fps": round(frames / p, 1), "srgpu_fps": round(frames / o, 1)}
                                    for p, o in zip(plain_s, ours_s)]})
        report = {"source": str(args.source or f"bbb_720p24_vp8_vorbis.webm scaled to 1080p, x264 crf 18, {args.bits}-bit"),
                  "bits": args.bits, "plan": engine.plan_for((v.height, v.width), (H, W), args.bits).describe()
                  if hasattr(engine, "plan_for") else "cpu",
                  "input": f"{v.width}x{v.height}", "output": f"{W}x{H}", "engine": getattr(engine, "description", "cpu"),
                  "model": model.name, "crf": args.crf, "plan_seconds": round(tune_s, 1), "rows": rows}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['source']}: {report['input']} -> {report['output']}, {report['engine']}, {model.name}, crf {args.crf}, "
          f"plan chosen in {report['plan_seconds']} s before timing: {report['plan']}")
    # with --repeats, each fps column is its own median and the ratio is the median of the rounds' ratios
    print(f"{'preset':<10} {'srgpu decoder':<14} {'frames':>6} {'ffmpeg fps':>11} {'srgpu fps':>10} "
          f"{'srgpu/ffmpeg':>13}")
    for r in rows:
        rounds = ", ".join(f"{x['srgpu_fps'] / x['ffmpeg_fps']:.1%}" for x in r["rounds"])
        print(f"{r['preset']:<10} {r['decoder']:<14} {r['frames']:>6} {r['ffmpeg_fps']:>11.1f} {r['srgpu_fps']:>10.1f} "
              f"{r['ratio']:>12.1%}"
              + (f"  (rounds: {rounds})" if len(r["rounds"]) > 1 else ""))


if __name__ == "__main__":
    main()
