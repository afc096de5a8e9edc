#!/usr/bin/env python3
"""How fast raw 4K frames go through srgpu's encoder pipe alone: Python writes yuv420p frames in
the Matroska framing the video writer uses into `ffmpeg -f matroska -i pipe:0 -f null -` (no
encoding). Prints frames per second and the Python side's CPU time per frame: with the default
64 KiB pipe, with srgpu's enlarged one, and with the planes lent by vmsplice (srgpu's writer)
instead of copied by write().

    python3 dev/bench_pipe.py [--frames 150] [--size 3840x2160]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from srgpu.video import ffmpeg, mkv  # noqa: E402
from srgpu.video.formats import LAYOUTS  # noqa: E402
from srgpu.video.pipesink import PipeSink  # noqa: E402


def run(frames: int, width: int, height: int, pipe_bytes: int, zero_copy: bool) -> tuple[float, float]:
    ffmpeg.PIPE_BYTES = pipe_bytes
    layout = LAYOUTS["yuv420p"]
    rng = np.random.default_rng(0)
    planes = [rng.integers(0, 256, s, dtype=np.uint8) for s in layout.plane_shapes(width, height)]
    payload = sum(p.nbytes for p in planes)
    proc = ffmpeg.popen(["-v", "error", "-f", "matroska", "-i", "pipe:0", "-f", "null", "-"], stdin=subprocess.PIPE)
    assert proc.stdin is not None
    sink = PipeSink(proc.stdin.fileno(), zero_copy=zero_copy)
    sink.write(mkv.header(width, height, layout))
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(frames):
        before, after = mkv.frame_prefix(i * 40_000_000, 40_000_000, payload)
        sink.write(before)
        for p in planes:
            sink.lend(p)  # the same planes every frame: nothing changes them while lent
        sink.write(after)
        sink.hold(None, planes)
    proc.stdin.close()
    proc.wait()
    sink.release_all()
    return frames / (time.perf_counter() - t0), 1000 * (time.process_time() - c0) / frames


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=150)
    ap.add_argument("--size", default="3840x2160")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    w, h = (int(v) for v in args.size.split("x"))
    cases = (("64 KiB pipe, write", 1 << 16, False), ("1 MiB pipe, write", 1 << 20, False),
             ("1 MiB pipe, vmsplice", 1 << 20, True))
    for label, size, zero_copy in cases * args.repeats:
        fps, cpu_ms = run(args.frames, w, h, size, zero_copy)
        print(f"{label:<22} {fps:7.1f} fps   Python writer CPU {cpu_ms:.2f} ms/frame")


if __name__ == "__main__":
    main()
