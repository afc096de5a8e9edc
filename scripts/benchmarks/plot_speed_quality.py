#!/usr/bin/env python3
"""The speed/quality plot of BENCHMARKS.md (issue 20): ms per 1080p -> 4K frame (x) against Set5
Y-PSNR (y), one point per model and scale, drawn with OpenCV (no plotting dependency).

Input: a JSON list of measured points, each {"model": "9-5-5-binary", "scale": 2, "ms": 7.1,
"psnr": 35.9} ("ms" null for a model with no GPU time, e.g. bicubic at 0: give 0). Only measured
values belong there: the plot shows what the file says.

    python3 scripts/benchmarks/plot_speed_quality.py points.json -o docs/speed_quality.png
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import cv2
import numpy as np

COLOURS = {2: (200, 80, 30), 3: (40, 150, 40), 4: (30, 30, 200)}  # BGR per scale
SIZE = (900, 600)  # width, height
MARGIN = (90, 40, 130, 70)  # left, top, right, bottom


def nice_ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    step = 10 ** math.floor(math.log10(max(hi - lo, 1e-9) / n))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= n:
            step *= m
            break
    return [v * step for v in range(math.ceil(lo / step), math.floor(hi / step) + 1)]


def plot(points: list[dict], title: str) -> np.ndarray:
    w, h = SIZE
    left, top, right, bottom = MARGIN
    img = np.full((h, w, 3), 255, np.uint8)
    xs = [p["ms"] for p in points if p.get("ms") is not None]
    ys = [p["psnr"] for p in points]
    if not xs or not ys:
        raise SystemExit("no measured points to plot")
    x0, x1 = 0.0, max(xs) * 1.1 or 1.0
    y0, y1 = min(ys) - 0.3, max(ys) + 0.3

    def px(x: float, y: float) -> tuple[int, int]:
        return (int(left + (x - x0) / (x1 - x0) * (w - left - right)), int(h - bottom - (y - y0) / (y1 - y0) * (h - top - bottom)))

    cv2.rectangle(img, px(x0, y0), px(x1, y1), (0, 0, 0), 1)
    font = cv2.FONT_HERSHEY_SIMPLEX
    for t in nice_ticks(x0, x1):
        a = px(t, y0)
        cv2.line(img, a, (a[0], a[1] - 5), (0, 0, 0), 1)
        cv2.putText(img, f"{t:g}", (a[0] - 10, a[1] + 20), font, 0.45, (0, 0, 0), 1, cv2.LINE_AA)
    for t in nice_ticks(y0, y1):
        a = px(x0, t)
        cv2.line(img, a, (a[0] + 5, a[1]), (0, 0, 0), 1)
        cv2.putText(img, f"{t:.1f}", (a[0] - 50, a[1] + 5), font, 0.45, (0, 0, 0), 1, cv2.LINE_AA)
    cv2.putText(img, "ms per 1920x1080 -> 3840x2160 frame (GPU, network)", (left + 150, h - 20), font, 0.5, (0, 0, 0), 1,
                cv2.LINE_AA)
    cv2.putText(img, "Set5 Y-PSNR (dB)", (5, top - 15), font, 0.5, (0, 0, 0), 1, cv2.LINE_AA)
    cv2.putText(img, title, (left + 150, top - 15), font, 0.55, (0, 0, 0), 1, cv2.LINE_AA)
    for scale in sorted({p["scale"] for p in points}):
        mine = sorted((p for p in points if p["scale"] == scale and p.get("ms") is not None), key=lambda p: p["ms"])
        colour = COLOURS.get(scale, (90, 90, 90))
        for p in mine:
            c = px(p["ms"], p["psnr"])
            cv2.circle(img, c, 5, colour, -1, cv2.LINE_AA)
            cv2.putText(img, f"{p['model']} x{scale}", (c[0] + 7, c[1] - 6), font, 0.4, colour, 1, cv2.LINE_AA)
    return img


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("points", type=Path)
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--title", default="srgpu: speed and quality per model")
    args = ap.parse_args()
    img = plot(json.loads(args.points.read_text()), args.title)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(args.out), img):
        raise SystemExit(f"cannot write {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
