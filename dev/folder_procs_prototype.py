#!/usr/bin/env python3
"""Experiment: a folder's codecs in worker processes instead of threads (no shared GIL).

Readers and writers are processes of a forkserver pool (started once, like a long-lived engine);
decoded images and results pass through one shared-memory arena of fixed slots; the engine's
image path runs on this process's main thread as in run_batch. No manifest, no resume, no error
handling beyond an assert: this measures how fast the pipeline could be, against the codec floor
and run_batch (threads) on the same engine and folder, warm (plans chosen, pool started).

    python3 dev/folder_procs_prototype.py /tmp/f/small [--rounds 5] [--jobs 16]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import shutil
import statistics
import sys
import tempfile
import time
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import shared_memory
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SLOT = 8 * 2**20
_arena: shared_memory.SharedMemory | None = None


def _attach(name: str) -> None:
    global _arena
    _arena = shared_memory.SharedMemory(name=name)


def _read(src: str, slot: int) -> tuple[tuple[int, ...], str]:
    from srgpu.images.files import read_image_data

    data = read_image_data(src, "bgr")
    px = data.pixels
    assert px.nbytes <= SLOT
    view = np.ndarray(px.shape, px.dtype, buffer=_arena.buf, offset=slot * SLOT)  # type: ignore[union-attr]
    view[...] = px
    return px.shape, px.dtype.str


def _write(dst: str, slot: int, shape: tuple[int, ...], dtype: str) -> int:
    from srgpu.images.files import write_image_atomic

    px = np.ndarray(shape, np.dtype(dtype), buffer=_arena.buf, offset=slot * SLOT)  # type: ignore[union-attr]
    return write_image_atomic(Path(dst), px, replace=True, icc=None, order="bgr", scratch=True).size


def run_procs(pairs: list[tuple[Path, Path]], processor, pool: ProcessPoolExecutor, arena: shared_memory.SharedMemory,
              slots: int, reads_ahead: int) -> float:
    t0 = time.perf_counter()
    free = deque(range(slots))
    reads: deque[tuple[int, Future, int]] = deque()
    on_engine: deque[tuple[int, object, int]] = deque()
    writes: list[Future] = []
    nxt = 0

    def start_reads() -> None:
        nonlocal nxt
        while nxt < len(pairs) and len(reads) < reads_ahead and len(free) > 1:
            slot = free.popleft()
            reads.append((nxt, pool.submit(_read, str(pairs[nxt][0]), slot), slot))
            nxt += 1

    def to_writer(item: tuple[int, object, int]) -> None:
        index, ticket, in_slot = item
        out = ticket.wait()  # type: ignore[attr-defined]
        free.append(in_slot)
        while not free:
            _reap(writes, free, block=True)
        slot = free.popleft()
        np.ndarray(out.shape, out.dtype, buffer=arena.buf, offset=slot * SLOT)[...] = out
        f = pool.submit(_write, str(pairs[index][1]), slot, out.shape, out.dtype.str)
        f.slot = slot  # type: ignore[attr-defined]
        writes.append(f)

    start_reads()
    while reads:
        index, future, slot = reads.popleft()
        shape, dtype = future.result()
        start_reads()
        px = np.ndarray(shape, np.dtype(dtype), buffer=arena.buf, offset=slot * SLOT)
        on_engine.append((index, processor.submit(px), slot))
        while on_engine and (len(on_engine) > processor.in_flight or on_engine[0][1].ready()):
            to_writer(on_engine.popleft())
        _reap(writes, free, block=False)
    while on_engine:
        to_writer(on_engine.popleft())
    for f in writes:
        f.result()
    return time.perf_counter() - t0


def _reap(writes: list[Future], free: deque, block: bool) -> None:
    if block and writes:
        writes[0].result()
    for f in [f for f in writes if f.done()]:
        f.result()
        writes.remove(f)
        free.append(f.slot)  # type: ignore[attr-defined]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--model", default="9-1-5")
    ap.add_argument("--resize", action="store_true", help="cv2.resize as the engine (no GPU; to try it anywhere)")
    args = ap.parse_args()

    from srgpu.tools.bench_folder import codec_floor
    from srgpu.cpus import cpu_cores
    from srgpu.engine import GPUOptions, create_engine
    from srgpu.batch.local import ImageOptions, run_batch
    from srgpu.batch.plan import plan_batch
    from srgpu.model import resolve_model

    jobs = args.jobs or cpu_cores()
    slots = 4 * jobs + 16
    t0 = time.perf_counter()
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["numpy", "cv2", "srgpu.images.files"])
    arena = shared_memory.SharedMemory(create=True, size=slots * SLOT)
    pool = ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_attach, initargs=(arena.name,))
    list(pool.map(time.sleep, [0.0] * jobs * 4))
    started = time.perf_counter() - t0
    try:
        with tempfile.TemporaryDirectory(prefix="srgpu-procs-") as tmp:
            root = Path(tmp)
            if args.resize:
                sys.path.insert(0, str(ROOT / "dev"))
                from folder_pipeline_overhead import ResizeEngine
                engine = ResizeEngine(resolve_model(args.model, 2), 2)
            else:
                engine = create_engine("cuda", resolve_model(args.model, 2), 2, GPUOptions(cache_dir=root / "plans"))
            images = ImageOptions(jobs=jobs)
            plan = plan_batch(args.folder, root / "floor")
            pairs = [(j.src, j.dst) for j in plan.jobs if j.kind == "image"]
            for _, dst in pairs:
                dst.parent.mkdir(parents=True, exist_ok=True)
            run_batch(plan_batch(args.folder, root / "warmup"), engine, images=images)  # plans chosen
            floors, threads, procs = [], [], []
            for r in range(args.rounds):
                floors.append(codec_floor(pairs, 2, jobs, None)[0])
                out = root / "threads"
                shutil.rmtree(out, ignore_errors=True)
                t1 = time.perf_counter()
                run_batch(plan_batch(args.folder, out), engine, images=images)
                threads.append(time.perf_counter() - t1)
                out = root / "procs"
                shutil.rmtree(out, ignore_errors=True)
                mine = [(s, out / d.relative_to(root / "floor")) for s, d in pairs]
                for _, d in mine:
                    d.parent.mkdir(parents=True, exist_ok=True)
                processor = engine.image_processor()
                try:
                    procs.append(run_procs(mine, processor, pool, arena, slots, 2 * jobs))
                finally:
                    processor.close()
                if r == 0:  # the outputs match the threads' run
                    import cv2
                    for (_, d) in mine[:10]:
                        a = cv2.imread(str(d), cv2.IMREAD_UNCHANGED)
                        b = cv2.imread(str(root / "threads" / d.relative_to(out)), cv2.IMREAD_UNCHANGED)
                        assert a is not None and np.array_equal(a, b), d
        f, t, p = (statistics.median(x) for x in (floors, threads, procs))
        n = len(pairs)
        print(f"{n} images, {jobs} workers; pool started in {started:.3f} s")
        print(f"codec floor {f:.3f} s ({n / f:.0f}/s); run_batch threads {t:.3f} s (x{t / f:.2f}); "
              f"processes {p:.3f} s (x{p / f:.2f}, {n / p:.0f}/s)")
        print(f"  floors {[round(x, 3) for x in floors]}\n  threads {[round(x, 3) for x in threads]}\n"
              f"  procs {[round(x, 3) for x in procs]}")
    finally:
        pool.shutdown()
        arena.close()
        arena.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
