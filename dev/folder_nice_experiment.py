#!/usr/bin/env python3
"""Is the engine's thread starved of CPU in a folder run? Warm run_batch on FOLDER with the GPU
engine under a few arrangements of the codec threads, interleaved with the codec floor, medians of
``--rounds``:

- ``base``: as the product runs (``workers`` readers and as many writers);
- ``nice N``: the same threads at nice N (Linux: per thread), so that the engine's thread, the
  batch's one serial stage, wins the cores when 2 x workers codec threads want them;
- ``jobs J``: fewer reader and writer threads.

    python3 dev/folder_nice_experiment.py /tmp/f/small --rounds 5 --nice 10 --jobs 8

Prints one line per arrangement: wall time, x floor, the engine stage's seconds (StageTimes.process).
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


def niced_pool(nice: int) -> type:
    class Niced(ThreadPoolExecutor):
        def __init__(self, workers: int, thread_name_prefix: str = "") -> None:
            super().__init__(workers, thread_name_prefix=thread_name_prefix,
                             initializer=lambda: os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice))
    return Niced


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--nice", type=int, action="append", default=[])
    ap.add_argument("--jobs", type=int, action="append", default=[])
    args = ap.parse_args()

    import srgpu.batch.local as images_mod
    from srgpu.tools.bench_folder import codec_floor
    from srgpu.cpus import cpu_cores
    from srgpu.engine import GPUOptions, create_engine
    from srgpu.batch.local import ImageOptions, run_batch
    from srgpu.batch.plan import plan_batch
    from srgpu.model import resolve_model

    arrangements = [("base", None, None)] + [(f"nice {n}", n, None) for n in args.nice] + \
        [(f"jobs {j}", None, j) for j in args.jobs]
    results: dict[str, list[tuple[float, float]]] = {a[0]: [] for a in arrangements}
    floors: list[float] = []
    plain = images_mod.ThreadPoolExecutor
    with tempfile.TemporaryDirectory(prefix="srgpu-nice-") as tmp:
        root = Path(tmp)
        engine = create_engine("cuda", resolve_model("9-1-5", 2), 2, GPUOptions(cache_dir=root / "plans"))
        plan0 = plan_batch(args.folder, root / "floor")
        pairs = [(j.src, j.dst) for j in plan0.jobs if j.kind == "image"]
        (root / "floor").mkdir()
        run_batch(plan_batch(args.folder, root / "first"), engine)  # plans chosen, kernels loaded
        for r in range(args.rounds):
            floors.append(codec_floor(pairs, 2, cpu_cores(), None)[0])
            for label, nice, jobs in arrangements:
                images_mod.ThreadPoolExecutor = niced_pool(nice) if nice is not None else plain
                out = root / "out"
                shutil.rmtree(out, ignore_errors=True)
                t0 = time.perf_counter()
                result = run_batch(plan_batch(args.folder, out), engine, images=ImageOptions(jobs=jobs))
                wall = time.perf_counter() - t0
                assert not result.failed, result.summary()
                results[label].append((wall, result.stages.process))
        images_mod.ThreadPoolExecutor = plain
        engine.close()
    floor = statistics.median(floors)
    print(f"{args.folder.name}: {len(pairs)} images, {cpu_cores()} cores, floor median {floor:.3f} s "
          f"({', '.join(f'{f:.3f}' for f in floors)})")
    for label, runs in results.items():
        walls = [w for w, _ in runs]
        engine_s = statistics.median(p for _, p in runs)
        print(f"  {label:8s} wall median {statistics.median(walls):.3f} s (x{statistics.median(walls) / floor:.2f}; "
              f"{', '.join(f'{w:.3f}' for w in walls)}), engine stage {engine_s:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
