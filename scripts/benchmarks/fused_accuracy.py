#!/usr/bin/env python3
"""The accuracy bar, per output bit depth: which fused kernel arithmetics may serve 8-, 10-, 12-
and 16-bit outputs (srgpu.engine.plans.ACCURACY_BAR, DESIGN.md section 6).

A reduced-precision arithmetic serves a bit depth when, on the check set, (1) every output sample
is within ``max_level_difference`` levels of the fp32 kernel at that depth and (2) mean Y-PSNR
against ground truth moves by at most ``max_psnr_change_db`` from the fp32 kernel's.

The check set: the Set5 images degraded by the evaluation's protocol (srgpu.tools.evaluate.degrade) at
each scale and rounded to the bit depth as a decoded frame is, plus a synthetic 480x270 frame
(bench_peers.image_like, at the bit depth). (2) is measured on Set5 against its ground truth
(shaved by the scale, as the protocol does). A column "noise" gives the worst level difference on
uniform random samples, the input of the engine's start-up self-check (not part of the bar).

For each model (srgpu's shipped weights), scale and depth it runs the default tile of each
arithmetic (the first NOT_OFFERED tile, dev/cuda/fused_not_offered.py, where no offered tile of an
arithmetic fits, e.g. the streamed split fp16 9-5-5).

    python3 scripts/benchmarks/fused_accuracy.py [--arch 9-1-5 --arch 9-5-5] [--scale 2 ...]
        [--bits 8 --bits 10 ...] [--set5 DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dev.cuda.fused_not_offered import not_offered_configs  # noqa: E402
from srgpu.tools.evaluate import degrade, image_files, luma_uint8, modcrop  # noqa: E402
from srgpu.images.files import read_image  # noqa: E402
from srgpu.kernels import fused  # noqa: E402
from srgpu.tools.metrics import psnr, shave  # noqa: E402
from srgpu.model import resolve_model  # noqa: E402
from srgpu.engine.plans import ACCURACY_BAR  # noqa: E402

DEFAULT_SET5 = Path(__file__).resolve().parents[2] / "shared" / "data" / "eval" / "Set5"
if not DEFAULT_SET5.is_dir():
    DEFAULT_SET5 = Path(__file__).resolve().parents[3] / "shared" / "data" / "eval" / "Set5"


@dataclass(frozen=True)
class Row:
    arch: str
    scale: int
    bits: int
    arithmetic: str
    tile: str
    max_levels: int  # against the fp32 kernel, check set
    equal_fraction: float  # against the fp32 kernel, check set
    psnr_db: float  # mean Y-PSNR on Set5 against ground truth
    psnr_change_db: float  # against the fp32 kernel's
    noise_max_levels: int
    meets: bool


def to_depth(unit: np.ndarray, bits: int) -> np.ndarray:
    """[0, 1] floats as a decoded frame of ``bits`` holds them."""
    top = 2**bits - 1
    return np.round(np.clip(unit, 0, 1) * top).astype(np.uint8 if bits == 8 else np.uint16)


def check_set(set5: Path, scale: int, bits: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(LR planes at ``bits`` by name, Set5 ground truth Y (uint8) by name)."""
    lr, gt = {}, {}
    for p in image_files(set5):
        hr = modcrop(luma_uint8(read_image(p)), scale)
        low, _ = degrade(hr, scale)
        lr[p.stem], gt[p.stem] = to_depth(low, bits), hr
    lr["synthetic"] = to_depth(synthetic_unit((270, 480), seed=1), bits)
    return lr, gt


def synthetic_unit(shape: tuple[int, int], seed: int) -> np.ndarray:
    """bench_peers.image_like's frame (smooth gradient + noise) in [0, 1] floats, so that a deeper
    frame holds detail an 8-bit one cannot."""
    rng = np.random.default_rng(seed)
    h, w = shape
    base = np.add.outer(np.linspace(0, 0.6, h), np.linspace(0, 0.4, w))
    return np.clip(base * 0.8 + rng.random(shape) * 0.3, 0, 1)


def noise_plane(bits: int, seed: int = 3) -> np.ndarray:
    return to_depth(np.random.default_rng(seed).random((96, 128)), bits)


def configs(arithmetic: str, f2: int, limits: object) -> list[fused.FusedConfig]:
    runs = [c for c in fused.candidate_configs(arithmetic, f2)
            if c.runs_on(limits.compute_capability)][:1]  # type: ignore[attr-defined]
    offered = [c for c in runs
               if fused.shared_bytes(c, f2) <= limits.max_shared_per_block_optin]  # type: ignore[attr-defined]
    return offered or not_offered_configs(arithmetic, f2)[:1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", action="append", help="9-1-5 and/or 9-5-5 (default both)")
    ap.add_argument("--scale", action="append", type=int, help="2, 3, 4 (default all)")
    ap.add_argument("--bits", action="append", type=int, help="8, 10, 12, 16 (default all)")
    ap.add_argument("--set5", type=Path, default=DEFAULT_SET5)
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()
    import cupy as cp

    from srgpu.engine.base import EngineError
    from srgpu.engine.gpu import require_gpu
    from srgpu.kernels.build import device_limits

    try:
        require_gpu(0)
    except EngineError as e:
        print(f"fused_accuracy: {e}", file=sys.stderr)
        return 1
    if not args.set5.is_dir() or not image_files(args.set5):
        print(f"error: no images in {args.set5}", file=sys.stderr)
        return 1
    limits = device_limits(0)
    rows: list[Row] = []
    print(f"bar: within {ACCURACY_BAR.max_level_difference} level of fp32, mean Y-PSNR within "
          f"{ACCURACY_BAR.max_psnr_change_db} dB; device {limits.name}")
    print("| model | scale | bits | arithmetic | tile | max levels vs fp32 | equal to fp32 | Y-PSNR (dB) | "
          "change vs fp32 (dB) | noise: max levels | meets the bar |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for arch in args.arch or ["9-1-5", "9-5-5"]:
        for scale in args.scale or [2, 3, 4]:
            model = resolve_model(arch, scale)
            nets = {}
            for a in fused.ARITHMETICS:
                for cfg in configs(a, model.f2, limits):
                    try:
                        nets[a] = fused.FusedSRCNN(model, a, config=cfg, limits=limits)
                    except EngineError as e:
                        print(f"| {arch} | x{scale} | | {a} | {cfg.label} | not available: {str(e)[:80]} |||||")
            for bits in args.bits or [8, 10, 12, 16]:
                top = 2**bits - 1
                lr, gt = check_set(args.set5, scale, bits)
                lr_noise = noise_plane(bits)

                def run(net: fused.FusedSRCNN, plane: np.ndarray) -> np.ndarray:
                    shape = (plane.shape[0] * scale, plane.shape[1] * scale)
                    out = cp.full(shape, 0xAB, dtype=plane.dtype)  # poisoned
                    return net.run(cp.asarray(plane), shape, top, out=out).get()

                base = {k: run(nets["fp32"], v) for k, v in lr.items()}
                base_noise = run(nets["fp32"], lr_noise)

                def mean_psnr(outs: dict[str, np.ndarray]) -> float:
                    return float(np.mean([psnr(shave(gt[k] / 255.0, scale), shave(outs[k] / top, scale), peak=1.0)
                                          for k in gt]))

                base_psnr = mean_psnr(base)
                for a, net in nets.items():
                    outs = base if a == "fp32" else {k: run(net, v) for k, v in lr.items()}
                    diffs = [np.abs(outs[k].astype(np.int64) - base[k]) for k in lr]
                    worst = max(int(d.max()) for d in diffs)
                    equal = sum(int((d == 0).sum()) for d in diffs) / sum(d.size for d in diffs)
                    p = mean_psnr(outs)
                    noise = int(np.abs(run(net, lr_noise).astype(np.int64) - base_noise).max())
                    meets = ACCURACY_BAR.met(worst, p - base_psnr)
                    row = Row(arch, scale, bits, a, net.config.label, worst, equal, p, p - base_psnr, noise, meets)
                    rows.append(row)
                    print(f"| {arch} | x{scale} | {bits} | {a} | {row.tile} | {worst} | {equal:.4%} | {p:.4f} | "
                          f"{row.psnr_change_db:+.5f} | {noise} | {'yes' if meets else '**no**'} |", flush=True)
    print("\nserves (every model and scale measured):")
    for a in fused.ARITHMETICS:
        by_bits = {}
        for r in rows:
            if r.arithmetic == a:
                by_bits[r.bits] = by_bits.get(r.bits, True) and r.meets
        print(f"  {a}: " + ", ".join(f"{b}-bit {'yes' if ok else 'no'}" for b, ok in sorted(by_bits.items())))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
