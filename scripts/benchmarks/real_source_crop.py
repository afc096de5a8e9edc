#!/usr/bin/env python3
"""A labelled PNG for the README: a crop of a compressed LR image upscaled by a clean model and by
a real-source model, beside the bicubic upscale of the same compressed input and the ground truth.

The input is made exactly as `srgpu eval --degrade` makes it (Y of the HR image, imresize 1/s,
8 bits, compressed and decompressed); each panel's label carries its Y-PSNR over the whole image
(the protocol's border shave). Panels show Y (what SRCNN changes), enlarged by pixel repetition.

    python3 scripts/benchmarks/real_source_crop.py --degrade jpeg:75 --scale 3 \
        --clean 9-5-5 --real 9-5-5-real -o docs/real_source_jpeg75_x3.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from srgpu.color import quantize  # noqa: E402
from srgpu.tools.degrade import DegradeError, parse_degradation  # noqa: E402
from srgpu.tools.evaluate import degrade_compressed, luma_uint8, modcrop  # noqa: E402
from srgpu.images.files import read_image  # noqa: E402
from srgpu.tools.metrics import psnr, shave  # noqa: E402
from srgpu.model import ModelError, resolve_model  # noqa: E402
from srgpu.reference import srcnn_forward  # noqa: E402

LABEL_HEIGHT = 44


def panel(image: np.ndarray, lines: list[str], zoom: int) -> np.ndarray:
    big = np.repeat(np.repeat(image, zoom, axis=0), zoom, axis=1)
    strip = np.full((LABEL_HEIGHT, big.shape[1]), 255, np.uint8)
    for i, text in enumerate(lines):
        cv2.putText(strip, text, (6, 18 + 20 * i), cv2.FONT_HERSHEY_SIMPLEX, 0.5, 0, 1, cv2.LINE_AA)
    return np.vstack([strip, big])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", type=Path, default=ROOT.parent / "shared/data/eval/Set5/butterfly_GT.bmp")
    ap.add_argument("--scale", type=int, default=3)
    ap.add_argument("--degrade", default="jpeg:75", help="one codec and quality, as srgpu eval --degrade")
    ap.add_argument("--clean", default="9-5-5", help="the clean model (a --model value)")
    ap.add_argument("--real", default="9-5-5-real", help="the real-source model (a --model value)")
    ap.add_argument("--crop", default=None, metavar="X,Y,W,H", help="HR pixels (default: 96x96 at the centre)")
    ap.add_argument("--zoom", type=int, default=3, help="pixel repetition of the panels")
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args()

    try:  # bad input: one line, no traceback
        degradation = parse_degradation(args.degrade)
        degradation.check_single()
        models = [(label, spec, resolve_model(spec, args.scale)) for label, spec in (("clean", args.clean),
                                                                                    ("real-source", args.real))]
    except (DegradeError, ModelError) as e:
        raise SystemExit(f"real_source_crop.py: {e}") from None
    gt = modcrop(luma_uint8(read_image(args.image)), args.scale)
    _, bic = degrade_compressed(gt, args.scale, degradation)
    h, w = gt.shape
    x, y, cw, ch = (int(v) for v in args.crop.split(",")) if args.crop else ((w - 96) // 2, (h - 96) // 2, 96, 96)
    if not (0 <= x and 0 <= y and x + cw <= w and y + ch <= h):
        raise SystemExit(f"--crop {args.crop}: outside the {w}x{h} image")

    def score(out: np.ndarray) -> str:
        return f"{psnr(shave(gt, args.scale), shave(out, args.scale)):.2f} dB"

    bic_q = quantize(bic, np.uint8)
    panels = [panel(gt[y:y + ch, x:x + cw], ["ground truth", f"{args.image.name} x{args.scale}"], args.zoom),
              panel(bic_q[y:y + ch, x:x + cw], [f"bicubic of {degradation}", score(bic_q)], args.zoom)]
    for label, spec, model in models:
        out = quantize(srcnn_forward(bic, model, dtype=np.float64), np.uint8)
        panels.append(panel(out[y:y + ch, x:x + cw], [f"{label}: {Path(spec).stem}", score(out)], args.zoom))
    gap = np.full((panels[0].shape[0], 6), 255, np.uint8)
    sheet = np.hstack([p for pair in zip(panels, [gap] * len(panels)) for p in pair][:-1])
    args.output.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(args.output), sheet):
        raise SystemExit(f"could not write {args.output}")
    print(f"wrote {args.output} ({sheet.shape[1]}x{sheet.shape[0]})")


if __name__ == "__main__":
    main()
