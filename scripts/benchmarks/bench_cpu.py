#!/usr/bin/env python3
"""Seconds per frame of srgpu's CPU engine: one 960x540 yuv420p frame -> 1920x1080 at x2
(Y through SRCNN, Cb/Cr 480x270 -> 960x540 bicubic), the work one video frame costs.

    python3 scripts/benchmarks/bench_cpu.py [--arch 9-1-5 --arch 9-5-5] [--runs 3] [--json]

Weights are seeded random ones of the right shape (the arithmetic does not depend on their
values); the input is image-like (gradient + noise), never constant. Median of --runs after
one warm-up run."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np

from srgpu.engine.frames import PlaneSpec
from srgpu.engine.cpu import CPUEngine
from srgpu.model import random_model


def frame(h: int, w: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    def plane(ph: int, pw: int) -> np.ndarray:
        base = np.add.outer(np.linspace(16, 180, ph), np.linspace(0, 50, pw))
        return np.clip(base + rng.normal(0, 12, (ph, pw)), 0, 255).astype(np.uint8)
    return [plane(h, w), plane(h // 2, w // 2), plane(h // 2, w // 2)]


def bench(arch: str, runs: int, h: int = 540, w: int = 960, scale: int = 2) -> dict:
    engine = CPUEngine(random_model(arch, seed=0, scale=scale), scale)
    planes = frame(h, w)
    specs = [PlaneSpec((h * scale, w * scale), True)] + [PlaneSpec((h * scale // 2, w * scale // 2), False)] * 2
    engine.upscale_frame(planes, specs, 255)  # warm-up (allocations, OpenCV threads)
    times, luma = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        engine.upscale_frame(planes, specs, 255)
        times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        engine.srcnn_plane(planes[0], specs[0].out_shape, 255)
        luma.append(time.perf_counter() - t0)
    return {"arch": arch, "input": f"{w}x{h}", "output": f"{w * scale}x{h * scale}", "runs": runs,
            "seconds_per_frame": statistics.median(times), "seconds_luma_srcnn": statistics.median(luma),
            "all_frame_seconds": [round(t, 4) for t in times]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", action="append", help="9-1-5 (default) and/or 9-5-5; repeatable")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import cv2

    results = [bench(a, args.runs) for a in (args.arch or ["9-1-5"])]
    env = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
           "numpy": np.__version__, "opencv": cv2.__version__, "opencv_threads": cv2.getNumThreads()}
    if args.json:
        print(json.dumps({"env": env, "results": results}, indent=2))
        return
    print(f"CPU engine, {env['cores']} cores, numpy {env['numpy']}, opencv {env['opencv']}")
    for r in results:
        print(f"{r['arch']}: {r['input']} -> {r['output']} yuv420p frame: {r['seconds_per_frame']:.3f} s "
              f"(luma SRCNN alone {r['seconds_luma_srcnn']:.3f} s; median of {r['runs']}: {r['all_frame_seconds']})")


if __name__ == "__main__":
    main()
