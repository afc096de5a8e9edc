#!/usr/bin/env python3
"""Time fused tiles of the srgpu tree on PYTHONPATH, for A/B comparisons of two trees in one device call
(run it once per tree, alternating, and compare the lines): 1920x1080 -> 3840x2160 uint8 (bench_peers.py's
frame and timing: median of CUDA-event timings after 3 warm-up launches). Per tile it prints the median ms,
the kernel's registers and local bytes, and SHA-256 digests of the uint8 output and of the raw float32
output, so that two trees whose kernels should compute the same sums can be checked bit for bit.

    PYTHONPATH=TREE python3 dev/cuda/ab_tiles.py --tree TREE [--reps 30] \
        --tile fp16-fast:9-1-5:th=66,rw=64,r=24,nt=512,mb1=1,mb2=1,fold=1,wg=1 [--tile ...]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
from pathlib import Path

import numpy as np


def image_like(shape: tuple[int, int], seed: int) -> np.ndarray:
    """As bench_peers.image_like: smooth gradient + noise, full 8-bit range."""
    rng = np.random.default_rng(seed)
    h, w = shape
    base = np.add.outer(np.linspace(0, 0.6, h), np.linspace(0, 0.4, w))
    return np.round(np.clip(base * 0.8 + rng.random(shape) * 0.3, 0, 1) * 255).astype(np.uint8)


def build_tile(spec: str):
    """PRECISION:ARCH:k=v,... -> (config, FusedSRCNN) with the shipped x2 weights (random ones where none ship)."""
    from srgpu.kernels import fused
    from srgpu.model import random_model, resolve_model

    precision, arch, params = spec.split(":")
    try:
        model = resolve_model(arch, 2)
    except Exception:
        model = random_model(arch, seed=0, scale=2)
    kv = {k: int(v) for k, v in (item.split("=") for item in params.split(",") if item)}
    cfg = fused.config_for(precision, model.f2, **kv)
    return cfg, fused.FusedSRCNN(model, precision, config=cfg)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", required=True, help="the tree srgpu must come from (checked)")
    ap.add_argument("--tile", action="append", required=True, help="PRECISION:ARCH:k=v,...")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--lr", default="1920x1080")
    args = ap.parse_args()

    import cupy as cp

    import srgpu

    tree = Path(args.tree).resolve()
    if not Path(srgpu.__file__).resolve().is_relative_to(tree):
        sys.exit(f"srgpu comes from {srgpu.__file__}, not from {tree}")
    w, h = (int(v) for v in args.lr.lower().split("x"))
    out_shape = (2 * h, 2 * w)
    lr_dev = cp.asarray(image_like((h, w), seed=1))
    for spec in args.tile:
        cfg, net = build_tile(spec)
        out = cp.empty(out_shape, np.uint8)
        raw = cp.full(out_shape, np.nan, np.float32)
        net.run(lr_dev, out_shape, 255, out=raw, raw=True)
        net.run(lr_dev, out_shape, 255, out=out)
        cp.cuda.Device().synchronize()
        d8 = hashlib.sha256(out.get().tobytes()).hexdigest()[:16]
        draw = hashlib.sha256(raw.get().tobytes()).hexdigest()[:16]
        nan = int(cp.isnan(raw).sum())
        fn = lambda: net.run(lr_dev, out_shape, 255, out=out)  # noqa: E731
        for _ in range(3):
            fn()
        ev = [cp.cuda.Event() for _ in range(args.reps + 1)]
        ev[0].record()
        for i in range(args.reps):
            fn()
            ev[i + 1].record()
        ev[-1].synchronize()
        times = [cp.cuda.get_elapsed_time(a, b) for a, b in zip(ev, ev[1:])]
        k = net.kernel
        print(f"{tree.name} | {cfg.label} | median {statistics.median(times):.4f} ms | min {min(times):.4f} | "
              f"regs {k.registers} local {k.local_bytes} | u8 {d8} raw {draw} nan {nan}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
