#!/usr/bin/env python3
"""The row-streamed 9-5-5 tile beside others on one 1920x1080 -> 3840x2160 uint8 frame (ab_tiles.py's frame): each
tile's 8-bit output against the fp32 kernel's (share of equal samples, largest difference in levels: the accuracy
bar's first measure), then median ms of CUDA-event timings, the tiles alternating over ``--rounds``.

    PYTHONPATH=$PWD python3 dev/cuda/rows_compare.py --reps 30 --rounds 2 \\
        --tile fp16-fast:9-5-5:th=110,rw=64,r=3,nt=384,fold=1,wg=1,rows=1 --tile fp16-fast:9-5-5:th=108,...
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dev.cuda.ab_tiles import build_tile, image_like  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tile", action="append", required=True, help="PRECISION:ARCH:k=v,...")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    import cupy as cp

    from srgpu.kernels import fused

    lr = cp.asarray(image_like((1080, 1920), seed=1))
    shape = (2160, 3840)
    nets = [build_tile(spec) for spec in args.tile]
    ref = fused.FusedSRCNN(nets[0][1].model, "fp32").run(lr, shape, 255).get()
    for cfg, net in nets:
        out = net.run(lr, shape, 255, out=cp.full(shape, 0xAB, np.uint8)).get()
        diff = np.abs(out.astype(np.int16) - ref)
        print(f"{cfg.label}: {np.mean(diff == 0):.4%} of samples equal to the fp32 kernel's, max {int(diff.max())} "
              f"levels; {net.fold_tiles((1080, 1920), shape)} fold tiles; regs {net.kernel.registers} "
              f"local {net.kernel.local_bytes}", flush=True)
    for r in range(args.rounds):
        for cfg, net in nets:
            out = cp.empty(shape, np.uint8)
            for _ in range(3):
                net.run(lr, shape, 255, out=out)
            ev = [cp.cuda.Event() for _ in range(args.reps + 1)]
            ev[0].record()
            for i in range(args.reps):
                net.run(lr, shape, 255, out=out)
                ev[i + 1].record()
            ev[-1].synchronize()
            times = [cp.cuda.get_elapsed_time(a, b) for a, b in zip(ev, ev[1:])]
            print(f"round {r + 1} | {cfg.label} | median {statistics.median(times):.4f} ms | min {min(times):.4f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
