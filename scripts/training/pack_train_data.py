#!/usr/bin/env python3
"""Pack the training images' Y planes (MATLAB rgb2ycbcr, uint8) into one compressed .npz.

A GPU-machine run carries at most 64 MiB, so the training folders (66 MB of PNG/BMP) travel as
their Y planes only. The .npz holds `y` (all planes concatenated, flat uint8), `shapes` (N, 2),
`names` (N,) — train.py reads it in place of the folders.

    python3 scripts/training/pack_train_data.py ../shared/data/train/T91 ../shared/data/train/BSD200 -o .pack/train_y.npz
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from srgpu.tools.evaluate import image_files, luma_uint8  # noqa: E402
from srgpu.images.files import read_image  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args()
    planes, names = [], []
    for folder in args.folders:
        for path in image_files(folder):
            image = read_image(path)
            if image.dtype != np.uint8:
                raise SystemExit(f"{path}: expected an 8-bit image")
            planes.append(luma_uint8(image))
            names.append(f"{folder.name}/{path.name}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        args.output,
        y=np.concatenate([p.ravel() for p in planes]),
        shapes=np.array([p.shape for p in planes], dtype=np.int64),
        names=np.array(names),
    )
    print(f"{len(planes)} planes, {sum(p.size for p in planes) / 1e6:.1f} Mpx -> {args.output} "
          f"({args.output.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
