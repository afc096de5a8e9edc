#!/usr/bin/env python3
"""Runs each precision's default fused 9-1-5 kernel on a small frame with interior (fold) and edge
tiles, 8- and 10-bit, for compute-sanitizer to watch (GPU machine):

    compute-sanitizer --tool memcheck python3 dev/cuda/sanitize_fused.py
    compute-sanitizer --tool racecheck python3 dev/cuda/sanitize_fused.py

Random weights and samples; prints how many tiles took the fold path.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from srgpu.kernels import fused  # noqa: E402
from srgpu.model import random_model  # noqa: E402


def main() -> int:
    import cupy as cp

    from srgpu.engine.base import EngineError
    from srgpu.engine.gpu import require_gpu

    try:
        require_gpu(0)
    except EngineError as e:
        print(f"sanitize_fused: {e}", file=sys.stderr)
        return 1
    model = random_model("9-1-5", seed=1, scale=2)
    rng = np.random.default_rng(0)
    lr_shape, out_shape = (141, 131), (282, 262)
    for precision in fused.ARITHMETICS:
        net = fused.FusedSRCNN(model, precision)
        for dtype, max_value in ((np.uint8, 255), (np.uint16, 1023)):
            lr = cp.asarray(rng.integers(0, max_value + 1, lr_shape).astype(dtype))
            net.run(lr, out_shape, max_value)
            print(f"{net.name} {np.dtype(dtype).name}: {net.fold_tiles(lr_shape, out_shape)} fold tiles")
    cp.cuda.Device().synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
