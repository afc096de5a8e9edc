#!/usr/bin/env python3
"""Which SRCNN layers can run in plain fp16 and still meet the 8-bit accuracy bar (>= 99.9 % of
pixels equal to the fp32 result, never more than one level apart)? A CPU emulation for designing
the fused tensor-core kernels (issue 6): a layer in plain fp16 has its input activations and its
weights rounded to fp16 and accumulates in fp32 (as mma.sync with fp32 accumulators); the other
layers stay fp32 (what the hi/lo split achieves). Input: the evaluation images degraded by the
protocol and quantised to 8 bits (a decoded frame), upscaled as the engine does.

    python3 dev/cuda/fp16_error_study.py [--images ../shared/data/eval/Set5] [--scale 2]

Needs PyTorch (CPU is enough).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from srgpu.color import quantize  # noqa: E402
from srgpu.engine.base import from_unit_float, to_unit_float  # noqa: E402
from srgpu.tools.evaluate import degrade, image_files, luma_uint8, modcrop  # noqa: E402
from srgpu.images.files import read_image  # noqa: E402
from srgpu.model import SRCNNModel, resolve_model  # noqa: E402
from srgpu.resize import imresize  # noqa: E402


MODES = {"fp16": "inputs and weights in fp16", "act16": "inputs in fp16, weights split",
         "w16": "weights in fp16, inputs split"}


def forward(y: np.ndarray, model: SRCNNModel, modes: dict[int, str]) -> np.ndarray:
    """SRCNN with replicate borders; layer i (1..3) rounds its inputs and/or weights to fp16 as
    ``modes[i]`` says (MODES); a layer not in ``modes`` is fp32 (the hi/lo split of both)."""
    a = model.arrays(np.float32)
    x = torch.from_numpy(y)[None, None]
    for i in (1, 2, 3):
        w, b = torch.from_numpy(a[f"conv{i}_weight"]), torch.from_numpy(a[f"conv{i}_bias"])
        mode = modes.get(i)
        if mode in ("fp16", "act16"):
            x = x.half().float()
        if mode in ("fp16", "w16"):
            w = w.half().float()
        r = w.shape[-1] // 2
        x = F.conv2d(F.pad(x, (r, r, r, r), mode="replicate") if r else x, w, b)
        if i < 3:
            x = F.relu(x)
    return x[0, 0].numpy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=Path, default=ROOT.parent / "shared" / "data" / "eval" / "Set5")
    ap.add_argument("--scale", type=int, default=2)
    ap.add_argument("--arch", nargs="+", default=["9-1-5", "9-5-5"])
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    inputs = []
    for p in image_files(args.images):
        gt = modcrop(luma_uint8(read_image(p)), args.scale)
        lr = quantize(degrade(gt, args.scale)[0], np.uint8)  # an 8-bit decoded frame
        inputs.append(imresize(to_unit_float(lr, 255), output_shape=gt.shape).astype(np.float32))
    pixels = sum(y.size for y in inputs)
    print(f"{len(inputs)} images from {args.images}, x{args.scale}, {pixels} output pixels")
    print(f"{'arch':<6} {'reduced layers':<26} {'equal 8-bit':>12} {'max diff':>9}  bar")
    for arch in args.arch:
        model = resolve_model(arch, args.scale)
        refs = [from_unit_float(forward(y, model, {}), np.uint8, 255) for y in inputs]
        # every single layer in every mode, then every combination of two or three layers in one mode
        trials = [{i: m} for m in MODES for i in (1, 2, 3)]
        trials += [dict.fromkeys(layers, m) for m in MODES for n in (2, 3)
                   for layers in itertools.combinations((1, 2, 3), n)]
        for modes in trials:
            equal, worst = 0, 0
            for y, ref in zip(inputs, refs):
                got = from_unit_float(forward(y, model, modes), np.uint8, 255)
                d = np.abs(got.astype(np.int16) - ref.astype(np.int16))
                equal += int((d == 0).sum())
                worst = max(worst, int(d.max()))
            share = equal / pixels
            ok = share >= 0.999 and worst <= 1
            label = " ".join(f"conv{i}:{m}" for i, m in modes.items())
            print(f"{arch:<6} {label:<26} {share:>11.3%} {worst:>9}  {'meets' if ok else 'fails'}", flush=True)


if __name__ == "__main__":
    main()
