#!/usr/bin/env python3
"""Runs each precision's default fused 9-1-5 kernel on a small frame with interior (fold) and edge
tiles, 8- and 10-bit, for compute-sanitizer to watch (GPU machine):

    compute-sanitizer --tool memcheck python3 dev/cuda/sanitize_fused.py
    compute-sanitizer --tool racecheck python3 dev/cuda/sanitize_fused.py
    compute-sanitizer --tool racecheck python3 dev/cuda/sanitize_fused.py \
        --tile fp16-fast:9-5-5:th=110,rw=64,r=3,nt=384,fold=1,wg=1,rows=1 --lr 135x240

Random weights and samples; prints how many tiles took the fold path. --tile: that tile (of a random model of
its architecture) instead, on an LR frame of --lr rows x columns (exact x2).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from srgpu.kernels import fused  # noqa: E402
from srgpu.model import random_model  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tile", help="PRECISION:ARCH:k=v,... (default: each precision's default 9-1-5 tile)")
    ap.add_argument("--lr", default="141x131", help="LR rows x columns")
    args = ap.parse_args()
    import cupy as cp

    from srgpu.engine.base import EngineError
    from srgpu.engine.gpu import require_gpu

    try:
        require_gpu(0)
    except EngineError as e:
        print(f"sanitize_fused: {e}", file=sys.stderr)
        return 1
    rng = np.random.default_rng(0)
    lr_shape = tuple(int(v) for v in args.lr.split("x"))
    out_shape = (2 * lr_shape[0], 2 * lr_shape[1])
    if args.tile:
        precision, arch, params = args.tile.split(":")
        model = random_model(arch, seed=1, scale=2)
        kv = {k: int(v) for k, v in (item.split("=") for item in params.split(",") if item)}
        nets = [fused.FusedSRCNN(model, precision, config=fused.config_for(precision, model.f2, **kv))]
    else:
        model = random_model("9-1-5", seed=1, scale=2)
        nets = [fused.FusedSRCNN(model, precision) for precision in fused.ARITHMETICS]
    for net in nets:
        for dtype, max_value in ((np.uint8, 255), (np.uint16, 1023)):
            lr = cp.asarray(rng.integers(0, max_value + 1, lr_shape).astype(dtype))
            net.run(lr, out_shape, max_value)
            print(f"{net.name} {np.dtype(dtype).name}: {net.fold_tiles(lr_shape, out_shape)} fold tiles")
    cp.cuda.Device().synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
