#!/usr/bin/env python3
"""What srgpu's folder pipeline costs around the engine: run_batch with the upscale replaced by
OpenCV's bicubic (cv2.resize, the codec floor's own), against the codec floor, on the same folder.

The GPU engine hands results back in well under a millisecond per small image, so a folder of
small photos is paced by what the reader, writer and engine threads do in Python around the
codecs (and by how they share the GIL). This isolates that: same files, same threads, same
outputs, no GPU.

    python3 dev/folder_pipeline_overhead.py FOLDER [--jobs N] [--rounds 3] [--strip read,write,journal,look]

``--strip`` runs variants beside the plain one, each with parts of srgpu's own file handling replaced
by the codec floor's bare calls, to find which part costs: ``read`` (read_image_data -> imdecode of
np.fromfile), ``write`` (the atomic publish -> one cv2.imwrite to the final name), ``journal`` (the
manifest's begin/finish records -> nothing), ``look`` (the two os.stat per job -> one stat before the
run). Variants are interleaved with the floor, round by round.
"""

from __future__ import annotations

import argparse
import os
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

import contextlib  # noqa: E402

import srgpu.batch.local as images_mod
from srgpu.tools.bench_folder import codec_floor  # noqa: E402
from srgpu.engine.base import Engine  # noqa: E402
from srgpu.images.files import ImageData, encode_params  # noqa: E402
from srgpu.batch.local import ImageOptions, run_batch
from srgpu.batch.plan import Outcome, plan_batch
from srgpu.images.upscale import _Ticket  # noqa: E402
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


def three_stages(pairs: list[tuple[Path, Path]], scale: int, workers: int, free_engine: bool = False) -> float:
    """The codec floor as three stages joined by futures (module docstring): seconds. ``free_engine``:
    the resize is done by the readers, the calling thread passes images on."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    def resize(image: np.ndarray) -> np.ndarray:
        h, w = image.shape[:2]
        return cv2.resize(image, (w * scale, h * scale), interpolation=cv2.INTER_CUBIC)

    def read(src: Path) -> np.ndarray:
        image = cv2.imdecode(np.fromfile(str(src), np.uint8), cv2.IMREAD_UNCHANGED)
        return resize(image) if free_engine else image

    def write(dst: Path, image: np.ndarray) -> None:
        cv2.imwrite(str(dst), image, encode_params(dst.suffix.lower(), 95, None))

    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as readers, ThreadPoolExecutor(workers) as writers:
        ahead: deque = deque()
        todo = iter(pairs)
        writes = []
        while True:
            while len(ahead) < 2 * workers and (pair := next(todo, None)) is not None:
                ahead.append((pair[1], readers.submit(read, pair[0])))
            if not ahead:
                break
            dst, future = ahead.popleft()
            image = future.result()
            writes.append(writers.submit(write, dst, image if free_engine else resize(image)))
        for f in writes:
            f.result()
    return time.perf_counter() - t0


@contextlib.contextmanager
def stripped(parts: frozenset[str], stats: dict):
    """srgpu's file handling with ``parts`` replaced by the floor's bare calls (module docstring)."""
    saved = []

    def patch(obj, name, value):
        saved.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    if "read" in parts:
        def read(self, job):
            return ImageData(cv2.imdecode(np.fromfile(str(job.src), np.uint8), cv2.IMREAD_UNCHANGED), order="bgr")
        patch(images_mod._Readers, "_read", read)
    if "write" in parts:
        def write(self, job, data, go):
            cv2.imwrite(str(job.dst), data.pixels, encode_params(job.dst.suffix.lower(), 95, None))
            return Outcome(job, "done")
        patch(images_mod._Writers, "_write", write)
    if "journal" in parts:
        for name in ("begin", "finish", "abandon"):
            patch(images_mod.Resume, name, lambda self, *a: None)
    if "look" in parts:
        patch(images_mod.JobStat, "at", classmethod(lambda cls, job: cls(stats[job.src], None)))
    try:
        yield
    finally:
        for obj, name, value in reversed(saved):
            setattr(obj, name, value)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", type=int, default=2)
    ap.add_argument("--strip", action="append", default=[],
                    help="a variant: comma-separated parts (read, write, journal, look); repeatable")
    ap.add_argument("--bare", action="store_true", help="also the floor as three bare stages")
    args = ap.parse_args()
    variants = [frozenset()] + [frozenset(v.split(",")) for v in args.strip]
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
        stats = {src: os.stat(src) for src, _ in pairs}
        floors: list[float] = []
        bare: list[float] = []
        bare_free: list[float] = []
        runs: dict[frozenset[str], list[float]] = {v: [] for v in variants}
        for _ in range(args.rounds):
            floors.append(codec_floor(pairs, args.scale, images.threads, images.png_compression)[0])
            if args.bare:
                bare.append(three_stages(pairs, args.scale, images.threads))
                bare_free.append(three_stages(pairs, args.scale, images.threads, free_engine=True))
            for variant in variants:
                out = root / "run"
                shutil.rmtree(out, ignore_errors=True)
                batch = plan_batch(args.folder, out)
                with stripped(variant, stats):
                    t0 = time.perf_counter()
                    result = run_batch(batch, engine, images=images)
                    runs[variant].append(time.perf_counter() - t0)
                assert len(result.done) == len(pairs), result.summary()
        floor = statistics.median(floors)
        print(f"{len(pairs)} images, {images.threads} threads each way: codec floor {floor:.3f} s "
              f"({len(pairs) / floor:.0f}/s); floors {[round(f, 3) for f in floors]}")
        if bare:
            b = statistics.median(bare)
            print(f"  the floor as three bare stages: {b:.3f} s, x{b / floor:.2f}; runs {[round(r, 3) for r in bare]}")
            b = statistics.median(bare_free)
            print(f"  ... resized on the readers (a free engine): {b:.3f} s, x{b / floor:.2f}; "
                  f"runs {[round(r, 3) for r in bare_free]}")
        for variant, times in runs.items():
            run = statistics.median(times)
            what = "stripped of " + "+".join(sorted(variant)) if variant else "as shipped"
            print(f"  pipeline with cv2.resize, {what}: {run:.3f} s ({len(pairs) / run:.0f}/s), x{run / floor:.2f}; "
                  f"per image {(run - floor) / len(pairs) * 1e3:.3f} ms over the floor; runs {[round(r, 3) for r in times]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
