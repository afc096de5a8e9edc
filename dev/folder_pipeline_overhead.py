#!/usr/bin/env python3
"""What srgpu's folder pipeline costs around the engine: run_batch with the upscale replaced by
OpenCV's bicubic (cv2.resize, the codec floor's own), against the codec floor, on the same folder.

The GPU engine hands results back in well under a millisecond per small image, so a folder of
small photos is paced by what the reader, writer and engine threads do in Python around the
codecs (and by how they share the GIL). This isolates that: same files, same threads, same
outputs, no GPU.

    python3 dev/folder_pipeline_overhead.py FOLDER [--jobs N] [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from srgpu.bench_folder import codec_floor  # noqa: E402
from srgpu.engine.base import Engine  # noqa: E402
from srgpu.images import ImageOptions, _Ticket, plan_batch, run_batch  # noqa: E402
from srgpu.model import builtin_path, load_npz  # noqa: E402


class ResizeProcessor:
    """The image path of an engine that costs what cv2.resize costs (OpenCV's channel order)."""

    order = "bgr"
    in_flight = 4

    def __init__(self, scale: int) -> None:
        self.scale = scale

    def submit(self, image: np.ndarray, progress=None) -> _Ticket:
        h, w = image.shape[:2]
        return _Ticket(cv2.resize(image, (w * self.scale, h * self.scale), interpolation=cv2.INTER_CUBIC))

    def close(self) -> None:
        pass


class ResizeEngine(Engine):
    name = "resize"

    def srcnn_plane(self, plane, out_shape, max_value):  # pragma: no cover - images use image_processor
        raise NotImplementedError

    def bicubic_plane(self, plane, out_shape, max_value):  # pragma: no cover
        raise NotImplementedError

    def image_processor(self):
        return ResizeProcessor(self.scale)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", type=int, default=2)
    args = ap.parse_args()
    images = ImageOptions(jobs=args.jobs)
    engine = ResizeEngine(load_npz(builtin_path("9-1-5", args.scale)), args.scale)
    with tempfile.TemporaryDirectory(prefix="srgpu-overhead-") as tmp:
        root = Path(tmp)
        plan = plan_batch(args.folder, root / "floor")
        pairs = [(j.src, j.dst) for j in plan.jobs if j.kind == "image"]
        for _, dst in pairs:
            dst.parent.mkdir(parents=True, exist_ok=True)
        for src, _ in pairs:  # page cache
            src.read_bytes()
        floors, runs = [], []
        for _ in range(args.rounds):
            floors.append(codec_floor(pairs, args.scale, images.workers, images.png_compression)[0])
            out = root / "run"
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.perf_counter()
            result = run_batch(plan_batch(args.folder, out), engine, images=images)
            runs.append(time.perf_counter() - t0)
            assert len(result.done) == len(pairs), result.summary()
        floor, run = statistics.median(floors), statistics.median(runs)
        print(f"{len(pairs)} images, {images.workers} threads each way: codec floor {floor:.3f} s "
              f"({len(pairs) / floor:.0f}/s), pipeline with cv2.resize {run:.3f} s ({len(pairs) / run:.0f}/s), "
              f"x{run / floor:.2f}; per image {(run - floor) / len(pairs) * 1e3:.3f} ms over the floor")
        print(f"  floors {[round(f, 3) for f in floors]}, runs {[round(r, 3) for r in runs]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
