"""PNG encoding speed and size by compression setting (BENCHMARKS.md, issue 23): OpenCV's default
(what srgpu writes unless --png-compression is given) against zlib levels 0-9, one thread, best of
``--repeats``, on photos as taken and upscaled x2 (cv2.resize bicubic, standing in for an output).

    python3 scripts/benchmarks/bench_png_levels.py --images ../shared/data/train/BSD200
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import cv2
import numpy as np


def timed(images: list[np.ndarray], params: list[int], repeats: int) -> tuple[float, int]:
    best, size = float("inf"), 0
    for _ in range(repeats):
        t0, size = time.perf_counter(), 0
        for image in images:
            ok, buf = cv2.imencode(".png", image, params)
            assert ok
            size += len(buf)
        best = min(best, time.perf_counter() - t0)
    return best, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=Path, required=True, help="a folder of photos (PNG/JPEG/BMP)")
    parser.add_argument("--count", type=int, default=6, help="photos of each kind")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cv2.setNumThreads(1)
    files = sorted(p for p in args.images.iterdir() if p.suffix.lower() in (".png", ".jpg", ".jpeg", ".bmp"))
    taken = [cv2.imread(str(p)) for p in files[10:10 + args.count]]
    upscaled = [cv2.resize(im, (im.shape[1] * 2, im.shape[0] * 2), interpolation=cv2.INTER_CUBIC)
                for im in (cv2.imread(str(p)) for p in files[:args.count])]
    settings = [("OpenCV default", [])] + [(f"level {n}", [cv2.IMWRITE_PNG_COMPRESSION, n]) for n in range(10)]
    for label, images in (("photos as taken", taken), ("photos upscaled x2", upscaled)):
        pixels = sum(im.shape[0] * im.shape[1] for im in images)
        raw = sum(im.nbytes for im in images)
        print(f"{label}: {len(images)} images, {pixels / 1e6:.2f} Mpx")
        for name, params in settings:
            seconds, size = timed(images, params, args.repeats)
            print(f"  {name:16s} {pixels / seconds / 1e6:7.1f} Mpx/s  size {size / raw:.3f} of raw")


if __name__ == "__main__":
    main()
