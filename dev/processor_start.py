"""A worker's frame processor at its first chunk: from asking for it to the first 4K frame out, in N
processes at once (as the chunk workers' first chunks start together), with the product's slots
(srgpu.engine.overlap.SLOTS_MADE_NOW made at once, the others as frames need them) against every
slot made at once (SLOTS_MADE_NOW set to the slot count). 1080p yuv420p in, x2, the shipped 9-1-5.

    python3 dev/processor_start.py --procs 4 --rounds 3        # on the GPU machine

It measures bbe59d8's overlap change, taken back untried (5b2f22c: no GPU machine could be started);
bring that back first (git revert 5b2f22c), else both rows make every slot at once.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import time

SLOTS = 11  # srgpu.video.pipeline: depth + 5 with its default depth of 6


def one(eager: bool, barrier, out) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    from srgpu.engine import create_engine, overlap
    from srgpu.engine.frames import FrameFormat, PlaneSpec
    from srgpu.model import resolve_model

    engine = create_engine("cuda:0", resolve_model("9-1-5", 2), 2)
    in_shapes = ((1080, 1920), (540, 960), (540, 960))
    specs = (PlaneSpec((2160, 3840), True), PlaneSpec((1080, 1920), False), PlaneSpec((1080, 1920), False))
    fmt = FrameFormat(in_shapes, np.dtype(np.uint8), specs, 255)
    rng = np.random.default_rng(0)
    frames = [[rng.integers(0, 256, s, dtype=np.uint8) for s in in_shapes] for _ in range(SLOTS)]
    engine.upscale_frame(frames[0], specs, 255)  # the plan and kernels ready, as after a worker's engine start
    if eager:
        overlap.SLOTS_MADE_NOW = SLOTS
    barrier.wait()
    t0 = time.perf_counter()
    proc = engine.frame_processor(fmt, SLOTS)
    made = time.perf_counter() - t0
    first = proc.submit(frames[0])
    first.wait()
    first_out = time.perf_counter() - t0
    jobs = [first] + [proc.submit(f) for f in frames[1:proc.in_flight + 1]]
    for j in jobs:
        j.wait()
        j.release()
    for f in frames:  # every slot taken once: all made by the end
        j = proc.submit(f)
        j.wait()
        j.release()
    all_out = time.perf_counter() - t0
    proc.close()
    out.put({"eager": eager, "made_s": made, "first_out_s": first_out, "frames_s": all_out,
             "slots": len(proc._slots)})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    rows: dict[bool, list[dict]] = {True: [], False: []}
    for _ in range(args.rounds):
        for eager in (True, False):
            barrier, out = ctx.Barrier(args.procs), ctx.Queue()
            ps = [ctx.Process(target=one, args=(eager, barrier, out)) for _ in range(args.procs)]
            for p in ps:
                p.start()
            got = [out.get(timeout=120) for _ in ps]
            for p in ps:
                p.join()
            rows[eager] += got
    for eager, got in rows.items():
        summary = {k: round(statistics.median(r[k] for r in got), 4) for k in ("made_s", "first_out_s", "frames_s")}
        print(json.dumps({"row": "every slot at once" if eager else "slots as needed", "procs": args.procs,
                          "runs": len(got), **summary, "max_first_out_s": round(max(r["first_out_s"] for r in got), 4),
                          "slots": sorted({r["slots"] for r in got})}))


if __name__ == "__main__":
    main()
