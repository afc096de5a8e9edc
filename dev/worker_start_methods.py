#!/usr/bin/env python3
"""Seconds from Process.start to a worker having imported what a chunk worker imports
(srgpu.batch.pool, srgpu.video.chunked, srgpu.engine.gpu: CuPy's import, no CUDA context), with
multiprocessing's spawn (srgpu's LocalPool today) against a forkserver that preloaded those modules
(started once, ``--server-head-start`` seconds before the workers, as a coordinator could start it
at its own start). N workers started together, ``--rounds`` times; CPU only.

    python3 dev/worker_start_methods.py [--workers 4] [--rounds 3] [--server-head-start 1.0]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import time

MODULES = ("srgpu.batch.pool", "srgpu.video.chunked", "srgpu.engine.gpu")


def _child(started: float, conn) -> None:  # type: ignore[no-untyped-def]
    import importlib

    for m in MODULES:
        importlib.import_module(m)
    conn.send(time.time() - started)
    conn.close()


def round_of(ctx, workers: int) -> list[float]:  # type: ignore[no-untyped-def]
    pipes, procs = [], []
    for _ in range(workers):
        parent, child = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_child, args=(time.time(), child))
        p.start()
        child.close()
        pipes.append(parent)
        procs.append(p)
    out = [c.recv() for c in pipes]
    for p in procs:
        p.join()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server-head-start", type=float, default=1.0)
    a = ap.parse_args()
    report: dict = {}
    spawn = mp.get_context("spawn")
    times = [t for _ in range(a.rounds) for t in round_of(spawn, a.workers)]
    report["spawn"] = {"median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3)}
    fs = mp.get_context("forkserver")
    fs.set_forkserver_preload(list(MODULES))
    t0 = time.time()
    from multiprocessing import forkserver

    forkserver.ensure_running()
    report["forkserver_ensure_running_s"] = round(time.time() - t0, 3)
    time.sleep(a.server_head_start)
    first = round_of(fs, a.workers)  # the server may still be importing
    times = [t for _ in range(a.rounds - 1) for t in round_of(fs, a.workers)]
    report["forkserver"] = {"first_round_s": [round(t, 3) for t in first],
                            "later_median_s": round(statistics.median(times), 3) if times else None}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
