#!/usr/bin/env python3
"""Decoder frame threads: the CPU and speed of ffmpeg's software decoding alone (to raw yuv420p,
as srgpu's reader decodes) for each -threads value, 0 being ffmpeg's default (one per core).

    python3 dev/bench_decoder_threads.py [--source SRC] [--threads 1 2 4 8 0]

The default source is bench_ffmpeg.py's (the Big Buck Bunny clip at 1080p, x264 crf 18).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "benchmarks"))
import bench_ffmpeg  # noqa: E402
from srgpu.video.ffmpeg import ffmpeg_exe  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8, 0])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="srgpu-threads-") as tmp:
        src = args.source or bench_ffmpeg.default_source(Path(tmp))
        n = bench_ffmpeg.count_frames(src)
        for t in args.threads:
            p = subprocess.run(["/usr/bin/time", "-f", "%U %S %e", ffmpeg_exe(), "-hide_banner", "-nostdin", "-v",
                                "error", "-threads", str(t), "-i", str(src), "-map", "0:v:0", "-f", "rawvideo",
                                "-pix_fmt", "yuv420p", "-y", "/dev/null"], capture_output=True, text=True, check=True)
            user, system, wall = map(float, p.stderr.split()[-3:])
            print(f"decode -threads {t}: user {user:.2f} s, system {system:.2f} s, wall {wall:.2f} s = "
                  f"{1000 * (user + system) / n:.1f} ms CPU a frame, {n / wall:.0f} fps", flush=True)


if __name__ == "__main__":
    main()
