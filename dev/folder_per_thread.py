#!/usr/bin/env python3
"""Prototype for issue 23: each codec thread takes files whole (read, upscale through a GPU engine of
its own, write), the way the codec floor's threads take read, resize, write; against run_batch (one
engine thread between a reader pool and a writer pool) and the floor, in one process, round by round.

The three-stage design funnels every image through the engine's thread, and under 32 codec threads
that thread waits for the GIL at each CUDA call (BENCHMARKS.md: ~0.1 ms per wait, ~1 ms per small
image). Here nothing funnels: the GPU work of one file is queued by the thread that read it, on its
own engine's streams.

    python3 dev/folder_per_thread.py FOLDER [--threads 16 --threads 8] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from srgpu.tools.bench_folder import codec_floor  # noqa: E402
from srgpu.engine import GPUOptions, create_engine  # noqa: E402
from srgpu.images.files import read_image_data, write_image_atomic  # noqa: E402
from srgpu.batch.local import ImageOptions, run_batch
from srgpu.batch.plan import plan_batch  # noqa: E402
from srgpu.model import builtin_path, load_npz  # noqa: E402


def per_thread(pairs: list[tuple[Path, Path]], processors: list) -> float:
    """Every file whole on one of len(processors) threads, each with its own engine's image path."""
    free = list(processors)
    lock = threading.Lock()
    mine = threading.local()

    def one(pair: tuple[Path, Path]) -> None:
        proc = getattr(mine, "proc", None)
        if proc is None:
            with lock:
                proc = mine.proc = free.pop()
        src, dst = pair
        data = read_image_data(src, proc.order)
        pixels = proc.submit(data.pixels).wait()
        write_image_atomic(dst, pixels, replace=True, icc=data.icc, order=data.order, scratch=True)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(processors), thread_name_prefix="srgpu-file") as pool:
        list(pool.map(one, pairs))
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--threads", type=int, action="append", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--model", default="9-1-5")
    ap.add_argument("--scale", type=int, default=2)
    args = ap.parse_args()
    counts = args.threads or [os.cpu_count() or 1]
    model = load_npz(builtin_path(args.model, args.scale))
    images = ImageOptions()
    with tempfile.TemporaryDirectory(prefix="srgpu-per-thread-") as tmp:
        root = Path(tmp)
        options = GPUOptions(cache_dir=root / "plans")
        t0 = time.perf_counter()
        engines = [create_engine("cuda:0", model, args.scale, options) for _ in range(max(counts) + 1)]
        processors = [e.image_processor() for e in engines[1:]]
        print(f"{len(engines)} engines made in {time.perf_counter() - t0:.2f} s")
        plan = plan_batch(args.folder, root / "floor")
        pairs = [(j.src, j.dst) for j in plan.jobs if j.kind == "image"]
        for _, dst in pairs:
            dst.parent.mkdir(parents=True, exist_ok=True)
        for src, _ in pairs:
            src.read_bytes()
        per_thread(pairs, processors)  # every engine sees the sizes once (plans, tables)
        run_batch(plan_batch(args.folder, root / "warm"), engines[0], images=images)
        floors, batch = [], []
        threaded: dict[int, list[float]] = {n: [] for n in counts}
        for _ in range(args.rounds):
            floors.append(codec_floor(pairs, args.scale, images.threads, images.png_compression)[0])
            out = root / "run"
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.perf_counter()
            result = run_batch(plan_batch(args.folder, out), engines[0], images=images)
            batch.append(time.perf_counter() - t0)
            assert len(result.done) == len(pairs), result.summary()
            for n in counts:
                threaded[n].append(per_thread(pairs, processors[:n]))
        floor = statistics.median(floors)
        print(f"{len(pairs)} images: codec floor ({images.threads} threads) {floor:.3f} s; {[round(f, 3) for f in floors]}")
        b = statistics.median(batch)
        print(f"  run_batch (one engine thread, {images.threads} readers, {images.threads} writers): {b:.3f} s, "
              f"x{b / floor:.2f}; {[round(r, 3) for r in batch]}")
        for n, times in threaded.items():
            t = statistics.median(times)
            print(f"  files whole on {n} threads, an engine each: {t:.3f} s, x{t / floor:.2f}; {[round(r, 3) for r in times]}")
        for p in processors:
            p.close()
        for e in engines:
            e.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
