#!/usr/bin/env python3
"""Time scripts/training/train.py's optimiser step on random patches, to choose batch size and precision.

    python3 scripts/training/bench_train.py --arch 9-1-5 9-5-5 --batch 128 32 --amp off fp16 bf16 [--steps 50]

Prints ms per step and scored megapixels per second for each combination (one process, whole GPU).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train import SRCNN, TrainStep, make_optimizer  # noqa: E402


def time_step(arch: str, batch: int, patch: int, amp: str, steps: int, device: torch.device) -> float:
    f1, f2, f3 = (int(v) for v in arch.split("-"))
    net = SRCNN(f1, f2, f3).to(device)
    step = TrainStep(net, make_optimizer(net, 1e-4), patch, amp, device)
    size = patch + 2 * net.halo
    x = torch.rand(batch, 1, size, size, device=device)
    y = torch.rand(batch, 1, patch, patch, device=device)
    for _ in range(5):  # cuDNN autotuning and allocator warm-up
        step(x, y)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step(x, y)
    sync()
    return (time.perf_counter() - t0) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", nargs="+", default=["9-1-5", "9-5-5"])
    ap.add_argument("--batch", type=int, nargs="+", default=[128, 32])
    ap.add_argument("--patch", type=int, nargs="+", default=[48])
    ap.add_argument("--amp", nargs="+", default=["off", "fp16", "bf16"], choices=["off", "fp16", "bf16"])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    device = torch.device(args.device)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = True  # train.py's default
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"{name}, torch {torch.__version__}, {args.steps} steps each")
    print(f"{'arch':<6} {'batch':>5} {'patch':>5} {'amp':<5} {'ms/step':>8} {'scored Mpx/s':>12}")
    for arch, batch, patch, amp in itertools.product(args.arch, args.batch, args.patch, args.amp):
        sec = time_step(arch, batch, patch, amp, args.steps, device)
        print(f"{arch:<6} {batch:>5} {patch:>5} {amp:<5} {1000 * sec:>8.2f} {batch * patch * patch / sec / 1e6:>12.1f}",
              flush=True)


if __name__ == "__main__":
    main()
