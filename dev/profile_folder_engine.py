#!/usr/bin/env python3
"""The GPU engine stage of a folder alone (no reading or writing): every image of FOLDER decoded
first, then submitted to engine.image_processor() in the pipeline's order, twice (the second pass
with every size known); prints the per-image time of each pass and a cProfile of one (main
thread: the stage that runs the engine).

    python3 dev/profile_folder_engine.py /tmp/srgpu-folders/small [--model 9-1-5] [--passes 2]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections import deque
from pathlib import Path

import cv2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from srgpu.engine import GPUOptions, create_engine  # noqa: E402
from srgpu.model import resolve_model  # noqa: E402


def one_pass(processor, images) -> float:
    started = time.perf_counter()
    pending: deque = deque()
    for img in images:
        pending.append(processor.submit(img))
        while len(pending) > processor.in_flight:
            pending.popleft().wait()
    while pending:
        pending.popleft().wait()
    return time.perf_counter() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--model", default="9-1-5")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--profile-pass", type=int, default=0, help="the pass profiled (0: every size new)")
    args = ap.parse_args()
    images = [cv2.imread(str(p), cv2.IMREAD_UNCHANGED) for p in sorted(args.folder.iterdir())]
    engine = create_engine("cuda", resolve_model(args.model, 2), 2, GPUOptions(precision="auto"))
    processor = engine.image_processor()
    prof = cProfile.Profile()
    for i in range(args.passes):
        if i == args.profile_pass:  # pass 0 meets every size anew
            prof.enable()
        took = one_pass(processor, images)
        prof.disable()
        print(f"pass {i}: {took:.3f} s, {took / len(images) * 1000:.2f} ms per image", flush=True)
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)
    processor.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
