#!/usr/bin/env python3
"""What super-resolved frames cost the encoder against plain ffmpeg's bicubic frames.

The same source frames are scaled x2 both ways and stored raw (yuv420p): ``bicubic`` with
ffmpeg's ``scale=W:H:flags=bicubic`` (what plain ffmpeg encodes), ``srgpu`` with
``srgpu upscale --codec ffv1`` (lossless) decoded back to raw. Each raw file is then encoded
with the same encoder settings (``-f rawvideo`` in, one ffmpeg, its own thread count), and the
encoder's CPU seconds (user + system, from the kernel's accounting of the child), its wall time
and its output size are reported per frame.

    python3 scripts/benchmarks/bench_encoder_cost.py [--source SRC] [--seconds 10]
        [--settings libx264:veryfast libx264:medium libx265:medium] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_chunks import default_source  # noqa: E402
from srgpu.video.ffmpeg import ffmpeg_exe  # noqa: E402
from srgpu.video.probe import probe  # noqa: E402


def run(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path)
    ap.add_argument("--seconds", type=float, default=10.0, help="frames taken from the source's start")
    ap.add_argument("--settings", nargs="+", default=["libx264:veryfast", "libx264:medium", "libx265:medium"])
    ap.add_argument("--crf", type=int, default=18)
    ap.add_argument("--srgpu-arg", action="append", default=[], help="extra argument to srgpu upscale")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    ff = [ffmpeg_exe(), "-hide_banner", "-nostdin", "-y", "-v", "error"]
    with tempfile.TemporaryDirectory(prefix="srgpu-enc-cost-") as tmp:
        folder = Path(tmp)
        full = args.source or default_source(folder, max(args.seconds, 10.0))
        src = folder / "src.mkv"
        subprocess.run(ff + ["-i", str(full), "-map", "0:v:0", "-t", f"{args.seconds}", "-c", "copy", str(src)],
                       check=True)
        v = probe(src).main_video()
        w, h = v.width * 2, v.height * 2  # type: ignore[operator]
        raw = {"bicubic": folder / "bicubic.yuv", "srgpu": folder / "srgpu.yuv"}
        subprocess.run(ff + ["-i", str(src), "-vf", f"scale={w}:{h}:flags=bicubic", "-pix_fmt", "yuv420p",
                             "-fps_mode", "passthrough", "-f", "rawvideo", str(raw["bicubic"])], check=True)
        lossless = folder / "srgpu.mkv"
        subprocess.run([sys.executable, "-m", "srgpu", "upscale", str(src), "-o", str(lossless), "--codec", "ffv1",
                        "--pix-fmt", "yuv420p", "--quiet", *args.srgpu_arg], check=True)
        subprocess.run(ff + ["-i", str(lossless), "-pix_fmt", "yuv420p", "-fps_mode", "passthrough", "-f", "rawvideo",
                             str(raw["srgpu"])],
                       check=True)
        # every frame once (passthrough: a raw file has no timestamps, and ffmpeg would otherwise
        # repeat frames to a constant rate), the same frames both ways
        sizes = {k: p.stat().st_size for k, p in raw.items()}
        frames = sizes["bicubic"] // (w * h * 3 // 2)
        assert len(set(sizes.values())) == 1 and sizes["bicubic"] % (w * h * 3 // 2) == 0, (sizes, w, h)
        rows = []
        for setting in args.settings:
            codec, preset = setting.split(":")
            row: dict = {"codec": codec, "preset": preset}
            for kind, path in raw.items():
                out = folder / f"{kind}.mkv"
                quiet = ["-x265-params", "log-level=error"] if codec == "libx265" else []
                wall, cpu = run(ff + ["-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", f"{w}x{h}", "-r", "24", "-i",
                                      str(path), "-c:v", codec, "-preset", preset, "-crf", str(args.crf), *quiet,
                                      str(out)])
                row[kind] = {"cpu_s_per_frame": round(cpu / frames, 4), "wall_s": round(wall, 2),
                             "fps": round(frames / wall, 2), "kbytes_per_frame": round(out.stat().st_size / frames / 1e3, 1)}
            row["srgpu_over_bicubic_cpu"] = round(row["srgpu"]["cpu_s_per_frame"] / row["bicubic"]["cpu_s_per_frame"], 3)
            row["srgpu_over_bicubic_bytes"] = round(row["srgpu"]["kbytes_per_frame"] / row["bicubic"]["kbytes_per_frame"], 3)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    report = {"date": time.strftime("%Y-%m-%d %H:%M"), "frames": frames, "size": f"{w}x{h}", "crf": args.crf,
              "source": str(args.source or "bbb looped, 1080p x264 crf 18"), "rows": rows}
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
