#!/usr/bin/env python3
"""Issue 17: time a few fp16-fast 9-5-5 tiles (1920x1080 -> 3840x2160, x2, uint8 luma, as bench_peers.py) in the
srgpu tree on PYTHONPATH, so that an untouched tree and a branch can be timed alternately on one machine (one
process per tree and round), and check each tile's 8-bit output against the fp32 kernel's (the accuracy bar:
within one level), whose output the first process saves for the others.

    PYTHONPATH=TREE python3 dev/cuda/fold955_ab.py --label NAME --ref /tmp/ref8.npy \
        --tile th=60,rw=32,r=16,nt=256,mb1=2,mb2=4,stream=1,spart=1,wg=1 [--tile ...] [--reps 20]

Per tile one line: label, tile, median ms of --reps CUDA-event timings after warm-up (--repeat such medians, the
tiles interleaved), fold tiles of the frame, 8-bit agreement with fp32.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np


def image_like(shape: tuple[int, int], seed: int) -> np.ndarray:  # as bench_peers.image_like
    rng = np.random.default_rng(seed)
    h, w = shape
    base = np.add.outer(np.linspace(0, 0.6, h), np.linspace(0, 0.4, w))
    return np.round(np.clip(base * 0.8 + rng.random(shape) * 0.3, 0, 1) * 255).astype(np.uint8)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True)
    ap.add_argument("--tile", action="append", required=True)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ref", type=Path, required=True)
    args = ap.parse_args()
    import cupy as cp

    import srgpu
    from srgpu.kernels import fused
    from srgpu.model import random_model, resolve_model

    print(f"{args.label}: srgpu from {srgpu.__file__}", flush=True)
    try:
        model = resolve_model("9-5-5", 2)
    except Exception:
        model = random_model("9-5-5", seed=0, scale=2)
    lr = cp.asarray(image_like((1080, 1920), seed=1))
    shape = (2160, 3840)
    if not args.ref.exists():
        ref = fused.FusedSRCNN(model, "fp32").run(lr, shape, 255, out=cp.empty(shape, np.uint8)).get()
        np.save(args.ref, ref)
    ref = np.load(args.ref)
    nets = []
    for text in args.tile:
        params = {k: int(v) for k, v in (item.split("=") for item in text.split(","))}
        net = fused.FusedSRCNN(model, "fp16-fast", config=fused.config_for("fp16-fast", 5, **params))
        out = cp.full(shape, 0xAB, np.uint8)
        net.run(lr, shape, 255, out=out)
        frac, worst = fused.agreement(out.get(), ref)
        nets.append((net, out, frac, worst, []))
    for _ in range(args.repeat):
        for net, out, *_, times in nets:
            for _ in range(3):
                net.run(lr, shape, 255, out=out)
            ev = [cp.cuda.Event() for _ in range(args.reps + 1)]
            ev[0].record()
            for i in range(args.reps):
                net.run(lr, shape, 255, out=out)
                ev[i + 1].record()
            ev[-1].synchronize()
            times.append(statistics.median(cp.cuda.get_elapsed_time(a, b) for a, b in zip(ev, ev[1:])))
    for net, out, frac, worst, times in nets:
        ft = net.fold_tiles((1080, 1920), shape) if hasattr(net, "fold_tiles") else 0
        print(f"{args.label} | {net.config.label} | ms {' '.join(f'{t:.3f}' for t in times)} | min {min(times):.3f} | "
              f"regs {net.kernel.registers} | smem {net.layout.shared_bytes} | fold tiles {ft} | "
              f"8-bit = fp32 {frac:.4%} (max {worst})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
