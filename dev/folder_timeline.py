#!/usr/bin/env python3
"""Where a folder run's wall time goes: run_batch on FOLDER with the GPU engine (as `srgpu bench`'s
warm run: a fresh engine on the plan cache a first run left), with every stage's start and end
recorded on its thread, then printed as a timeline: the engine's set-up (processor, plan, first
kernels), the reads, the groups sent and waited for, the writes, and the end of the run.

    python3 dev/folder_timeline.py /tmp/f/small [--runs 2] [--model 9-1-5] [--profile 30]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from srgpu.batch import local as images_mod  # noqa: E402
from srgpu.batch.plan import plan_batch  # noqa: E402
from srgpu.engine import GPUOptions, create_engine  # noqa: E402
from srgpu.engine import imageproc  # noqa: E402
from srgpu.model import resolve_model  # noqa: E402

EVENTS: list[tuple[float, str, str, float]] = []  # (start, thread, what, seconds)
_lock = threading.Lock()


def timed(owner: object, name: str, label: str) -> None:
    inner = getattr(owner, name)

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            with _lock:
                EVENTS.append((t0, threading.current_thread().name, label, time.perf_counter() - t0))

    setattr(owner, name, wrapper)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--model", default="9-1-5")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--switch", type=float, default=None, help="sys.setswitchinterval (seconds) for the runs")
    ap.add_argument("--profile", type=int, default=0, help="print a cProfile of the last run's main thread (top N)")
    args = ap.parse_args()
    if args.switch is not None:
        sys.setswitchinterval(args.switch)
    timed(imageproc.OverlappedImages, "__init__", "processor set-up")
    timed(imageproc.OverlappedImages, "_send", "group sent")
    timed(imageproc.OverlappedImages, "_result", "group waited")
    timed(images_mod._Readers, "_read", "read")
    timed(images_mod._Writers, "_write", "write")
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "plans"
        for run in range(args.runs):
            engine = create_engine("cuda", resolve_model(args.model, 2), 2, GPUOptions(precision="auto", cache_dir=cache))
            timed(engine, "plan_for", "plan_for")
            EVENTS.clear()
            plan = plan_batch(args.folder, Path(tmp) / f"out{run}")
            prof = cProfile.Profile() if args.profile and run == args.runs - 1 else None
            t0 = time.perf_counter()
            if prof:
                prof.enable()
            result = images_mod.run_batch(plan, engine)
            if prof:
                prof.disable()
            end = time.perf_counter() - t0
            engine.close()
            by: dict[str, list[tuple[float, float]]] = defaultdict(list)
            for start, _thread, what, seconds in EVENTS:
                by[what].append((start - t0, seconds))
            print(f"run {run}: {len(result.done)} done in {end:.3f} s")
            for what, spans in sorted(by.items(), key=lambda kv: min(s for s, _ in kv[1])):
                first = min(s for s, _ in spans)
                last = max(s + d for s, d in spans)
                total = sum(d for _, d in spans)
                print(f"  {what:18s} x{len(spans):4d}: from {first * 1e3:7.1f} to {last * 1e3:7.1f} ms, "
                      f"{total * 1e3:8.1f} ms in all, longest {max(d for _, d in spans) * 1e3:6.1f} ms")
            if prof:
                pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
