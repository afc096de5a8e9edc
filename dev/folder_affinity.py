#!/usr/bin/env python3
"""Does the engine's thread of a folder run lose its speed to the codec threads sharing its core?
Warm run_batch on FOLDER (GPU engine), rounds alternating two ways of placing the threads, beside
the codec floor (bench_folder.codec_floor) of the same round:

- free: the scheduler places every thread (as srgpu runs);
- pinned: the calling thread (the engine's) alone on CPU 0, every thread started after it (the
  readers and writers) on the CPUs that are not CPU 0 or its SMT siblings.

Pinning is done per thread with sched_setaffinity(0, ...), which on Linux moves only the calling
thread; a thread started while pinning is on sets its own mask first (threading.Thread's
bootstrap wrapped), so it does not inherit CPU 0 from the engine's thread.

    python3 dev/folder_affinity.py /tmp/f/small --rounds 6
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def siblings(cpu: int) -> set[int]:
    """cpu and its SMT siblings (itself alone where the kernel does not say)."""
    path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
    if not path.exists():
        return {cpu}
    out: set[int] = set()
    for part in path.read_text().strip().split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


class Placement:
    """Switches the calling thread and the threads started afterwards between free and pinned."""

    def __init__(self) -> None:
        self.all = os.sched_getaffinity(0)
        self.engine = {min(self.all)}
        self.codecs = self.all - siblings(min(self.all)) or self.all
        self.pinned = False
        inner = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]
        placement = self

        def bootstrap(thread: threading.Thread) -> None:
            os.sched_setaffinity(0, placement.codecs if placement.pinned else placement.all)
            inner(thread)

        threading.Thread._bootstrap_inner = bootstrap  # type: ignore[attr-defined]

    def set(self, pinned: bool) -> None:
        self.pinned = pinned
        os.sched_setaffinity(0, self.engine if pinned else self.all)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", type=Path)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--device", default="cuda", help="cuda, or cpu to try the script where there is no GPU")
    args = ap.parse_args()

    import srgpu.cpus
    import srgpu.batch.local as images
    from srgpu.tools.bench_folder import codec_floor
    from srgpu.engine import GPUOptions, create_engine
    from srgpu.batch.plan import plan_batch
    from srgpu.batch.local import run_batch
    from srgpu.model import resolve_model

    cores = srgpu.cpus.cpu_cores()  # the process's share, read before the engine's thread is pinned to one CPU
    srgpu.batch.local.cpu_cores = lambda: cores  # type: ignore[assignment]  # (the codec pools' size)
    place = Placement()
    print(f"CPUs {len(place.all)}; CPU 0's SMT siblings {sorted(siblings(min(place.all)))}; "
          f"codec CPUs when pinned {len(place.codecs)}")
    sources = sorted(p for p in args.folder.iterdir() if p.is_file())
    with tempfile.TemporaryDirectory(prefix="srgpu-affinity-") as tmp:
        root = Path(tmp)
        engine = create_engine(args.device, resolve_model("9-1-5", 2), 2,
                               GPUOptions(cache_dir=root / "plans"))
        run_batch(plan_batch(args.folder, root / "first"), engine)  # plans chosen, kernels loaded
        walls: dict[str, list[float]] = {"free": [], "pinned": []}
        stages: dict[str, list[float]] = {"free": [], "pinned": []}
        floors = []
        for i in range(args.rounds):
            floor_dir = root / "floor"
            shutil.rmtree(floor_dir, ignore_errors=True)
            floor_dir.mkdir()
            floors.append(codec_floor([(s, floor_dir / s.name) for s in sources], 2, cores, None)[0])
            for mode in (("free", "pinned") if i % 2 == 0 else ("pinned", "free")):
                place.set(mode == "pinned")
                out = root / "out"
                shutil.rmtree(out, ignore_errors=True)
                t0 = time.perf_counter()
                result = run_batch(plan_batch(args.folder, out), engine)
                walls[mode].append(time.perf_counter() - t0)
                stages[mode].append(result.stages.process)
                assert not result.failed, result.summary()
            place.set(False)
        engine.close()
    med = statistics.median
    print(f"{args.folder.name} ({len(sources)} images), {args.rounds} rounds: codec floor median {med(floors):.3f} s "
          f"({', '.join(f'{f:.3f}' for f in floors)})")
    for mode in ("free", "pinned"):
        print(f"  {mode:6s}: wall median {med(walls[mode]):.3f} s (x{med(walls[mode]) / med(floors):.2f} floor; "
              f"{', '.join(f'{w:.3f}' for w in walls[mode])}), engine stage median {med(stages[mode]):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
