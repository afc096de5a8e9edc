#!/usr/bin/env python3
"""Issue 42: the pack's held-out validation splits scored with srgpu's own evaluation (the authors'
protocol on each plane: modcrop, imresize 1/s then s, SRCNN, 8-bit, border shaved; float32 CPU
forward, the mean of per-plane Y-PSNR as train.py's validation), for any models: our files, the
authors' .mat files, earlier files. Usage (this machine, repo root):
    python3 dev/i42_split_eval.py .pack/i42_crops.npz --split val2 --model NAME=PATH:SCALE ...
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "training"))
from crop_pack import read_pack  # noqa: E402

from srgpu.model import load_mat, load_npz  # noqa: E402
from srgpu.reference import srcnn_forward  # noqa: E402
from srgpu.tools.evaluate import evaluate_y  # noqa: E402


def score(job: tuple[str, str, int, list[np.ndarray]]) -> tuple[str, float, float]:
    name, path, scale, planes = job
    model = load_mat(path, scale) if path.endswith(".mat") else load_npz(path)
    fwd = lambda bic: srcnn_forward(bic, model, dtype=np.float32).astype(np.float64)  # noqa: E731
    results = [evaluate_y(p, model, scale, fwd) for p in planes]
    return name, float(np.mean([b.psnr for b, _ in results])), float(np.mean([s.psnr for _, s in results]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("pack", type=Path)
    ap.add_argument("--split", default="val2", choices=["val", "val2"])
    ap.add_argument("--model", action="append", required=True, metavar="NAME=PATH:SCALE")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    planes = read_pack(args.pack).splits[args.split].planes
    jobs = []
    for spec in args.model:
        name, rest = spec.split("=", 1)
        path, scale = rest.rsplit(":", 1)
        jobs.append((name, path, int(scale), planes))
    with ProcessPoolExecutor(args.jobs) as pool:
        for name, bic, sr in pool.map(score, jobs):
            print(json.dumps({"model": name, "split": args.split, "planes": len(planes), "bicubic": round(bic, 4),
                              "srcnn": round(sr, 4)}), flush=True)


if __name__ == "__main__":
    main()
