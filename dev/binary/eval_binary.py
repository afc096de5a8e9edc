#!/usr/bin/env python3
"""Set5 (or any folder) Y-PSNR / SSIM of binarized SRCNN files (dev/binary/model.py) by the
authors' protocol on the CPU, as `srgpu eval` does for the float models (which the engines run;
binarized ones they do not yet). conv2 is computed exactly as the GPU kernels compute it.

    python3 dev/binary/eval_binary.py ../shared/data/eval/Set5 runs/b/srcnn_9-5-5-binary_x2.npz ...
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dev.binary.model import binary_forward, load_binary_npz  # noqa: E402
from srgpu.tools.evaluate import evaluate_folder, mean_scores  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("models", type=Path, nargs="+")
    args = ap.parse_args()
    for path in args.models:
        model = load_binary_npz(path)
        if model.scale is None:
            raise SystemExit(f"{path}: no scale in its metadata")
        results = list(evaluate_folder(args.folder, model, model.scale,
                                       lambda bic: binary_forward(bic, model, np.float32).astype(np.float64)))
        bic, sr = mean_scores(results)
        print(json.dumps({"model": str(path), "label": model.label, "scale": model.scale, "images": len(results),
                          "bicubic_psnr": round(bic.psnr, 4), "psnr": round(sr.psnr, 4), "ssim": round(sr.ssim, 5)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
