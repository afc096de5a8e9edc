#!/usr/bin/env python3
"""Seconds from LocalPool(...) to every worker ready (its engine made: a trivial task per worker
comes back), N workers on DEVICE; the pool is made --head seconds before start(), as the command
line makes it before it probes and scans its video. Run from a tree's root (that tree's srgpu):

    python3 dev/pool_start.py [--workers 4] [--device cuda:0] [--rounds 3] [--head 0.3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class Nothing:
    def execute(self, engine: object, progress: object) -> float:
        return time.time()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--head", type=float, default=0.3)
    a = ap.parse_args()
    from pool_start import Nothing as Task  # importable by the workers under this name
    from srgpu.batch.pool import EngineSpec, LocalPool
    from srgpu.model import random_model

    spec = EngineSpec(random_model("9-1-5", seed=1), 2, device=a.device)
    rounds = []
    for _ in range(a.rounds):
        t0 = time.time()
        with LocalPool(spec, [a.device] * a.workers) as pool:
            method = pool._ctx.get_start_method()
            time.sleep(a.head)
            done: list[float] = []
            pool.run([Task() for _ in range(a.workers)], lambda n: None, done.append)
            rounds.append({"method": method, "all_ready_s": round(max(done) - t0, 3),
                           "first_ready_s": round(min(done) - t0, 3)})
    print(json.dumps({"workers": a.workers, "device": a.device, "head_s": a.head, "rounds": rounds,
                      "median_all_ready_s": statistics.median(r["all_ready_s"] for r in rounds)}))


if __name__ == "__main__":
    main()
