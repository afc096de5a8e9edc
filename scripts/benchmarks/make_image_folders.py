"""Make the folders that ``srgpu bench FOLDER`` is measured on (BENCHMARKS.md, issue 23), from
synthetic but photo-like images: nothing third-party is needed or committed.

  small/   100 JPEGs, 50 of 480x320 and 50 of 320x480 (the issue's 100 small photos)
  mixed/   20 PNGs about 1024 wide, each of another height (the issue's 20 photos of ~1024x768)
  sizes/   200 JPEGs of 200 distinct sizes between 160 and 800 pixels a side (plans per size)
  large/   3 JPEGs of 6000x4000 (24 Mpx photos)

A photo here is a luminance field with a natural image's spectrum (amplitude falling as about
1/f^1.4, so it compresses as photos do), a few sharp-edged shapes, colour fields of lower frequency, and
sensor noise; seeded, so the same command makes the same files. ``--source DIR`` cuts and scales
real photos from DIR instead (e.g. ../shared/data/train/BSD200, read in place), with sensor noise.

    python3 scripts/benchmarks/make_image_folders.py --out /tmp/srgpu-folders
    python3 scripts/benchmarks/make_image_folders.py --out /tmp/srgpu-folders --only small --only mixed
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np

FOLDERS = ("small", "mixed", "sizes", "large")
JPEG_QUALITY = 92


def _field(rng: np.random.Generator, h: int, w: int, slope: float = 1.0) -> np.ndarray:
    """Gaussian noise whose amplitude spectrum falls as 1/f**slope, scaled to [0, 1]."""
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.rfftfreq(w)[None, :]
    f = np.sqrt(fy * fy + fx * fx)
    f[0, 0] = 1.0
    spectrum = (rng.normal(size=f.shape) + 1j * rng.normal(size=f.shape)) / f ** slope
    spectrum[0, 0] = 0
    field = np.fft.irfft2(spectrum, s=(h, w)).astype(np.float32)
    lo, hi = np.percentile(field[:: max(1, h // 256), :: max(1, w // 256)], (1, 99))
    return np.clip((field - lo) / max(hi - lo, 1e-6), 0, 1)


def synthetic_photo(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """A BGR uint8 image with a photo's statistics (module docstring)."""
    luma = 0.1 + 0.8 * _field(rng, h, w, 1.4)
    for _ in range(int(rng.integers(3, 9))):  # objects: sharp edges at random places
        mask = np.zeros((h, w), np.uint8)
        centre = (int(rng.integers(0, w)), int(rng.integers(0, h)))
        axes = (int(rng.integers(w // 20 + 1, w // 4 + 2)), int(rng.integers(h // 20 + 1, h // 4 + 2)))
        cv2.ellipse(mask, centre, axes, float(rng.uniform(0, 180)), 0, 360, 255, -1)
        luma = np.where(mask > 0, luma * 0.3 + float(rng.uniform(0.1, 0.7)), luma)
    small = (max(2, h // 8), max(2, w // 8))
    chroma = [cv2.resize(_field(rng, *small, 1.5) - 0.5, (w, h), interpolation=cv2.INTER_CUBIC) * 0.15
              for _ in range(2)]
    # BT.601-ish luma/chroma back to RGB, then sensor noise
    r = luma + 1.4 * chroma[1]
    b = luma + 1.77 * chroma[0]
    g = luma - 0.34 * chroma[0] - 0.71 * chroma[1]
    bgr = np.stack([b, g, r], axis=-1) * 255 + rng.normal(0, 2.0, (h, w, 3))
    return np.clip(bgr, 0, 255).astype(np.uint8)


def from_source(rng: np.random.Generator, sources: list[Path], h: int, w: int) -> np.ndarray:
    """A random real photo from ``sources``, cropped to the aspect and scaled to (h, w), with noise."""
    image = cv2.imread(str(sources[int(rng.integers(len(sources)))]), cv2.IMREAD_COLOR)
    sh, sw = image.shape[:2]
    if (sh > sw) != (h > w):
        image = np.ascontiguousarray(np.rot90(image))
        sh, sw = sw, sh
    aspect = w / h
    cw, ch = (sw, int(sw / aspect)) if sw / sh < aspect else (int(sh * aspect), sh)
    y0, x0 = int(rng.integers(0, sh - ch + 1)), int(rng.integers(0, sw - cw + 1))
    crop = image[y0:y0 + ch, x0:x0 + cw]
    scaled = cv2.resize(crop, (w, h), interpolation=cv2.INTER_AREA if w < cw else cv2.INTER_CUBIC)
    return np.clip(scaled + rng.normal(0, 2.0, scaled.shape), 0, 255).astype(np.uint8)


def sizes_of(name: str, rng: np.random.Generator) -> list[tuple[str, int, int]]:
    """(file name, height, width) of each image of a folder."""
    if name == "small":
        return [(f"small_{i:03d}.jpg", *((320, 480) if i % 2 == 0 else (480, 320))) for i in range(100)]
    if name == "mixed":
        heights = rng.permutation(np.arange(576, 896, 16))[:20]
        return [(f"mixed_{i:02d}.png", int(hh), 1024) if i % 4 else (f"mixed_{i:02d}.png", 1024, int(hh))
                for i, hh in enumerate(heights)]
    if name == "sizes":
        seen: set[tuple[int, int]] = set()
        while len(seen) < 200:
            seen.add((int(rng.integers(160, 801)), int(rng.integers(160, 801))))
        return [(f"size_{i:03d}_{w}x{h}.jpg", h, w) for i, (h, w) in enumerate(sorted(seen))]
    if name == "large":
        return [(f"large_{i}.jpg", 4000, 6000) for i in range(3)]
    raise ValueError(name)


def make(out: Path, only: list[str], source: Path | None, seed: int) -> None:
    sources = sorted(p for p in source.iterdir() if p.suffix.lower() in (".png", ".jpg", ".jpeg", ".bmp")) if source else []
    if source and not sources:
        raise SystemExit(f"{source}: no images to build from")
    for index, name in enumerate(FOLDERS):
        if only and name not in only:
            continue
        rng = np.random.default_rng(seed + index)
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        for file, h, w in sizes_of(name, rng):
            image = from_source(rng, sources, h, w) if sources else synthetic_photo(rng, h, w)
            params = [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY] if file.endswith(".jpg") else []
            if not cv2.imwrite(str(folder / file), image, params):
                raise SystemExit(f"cannot write {folder / file}")
        print(f"{folder}: {len(list(folder.iterdir()))} images")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder to make the image folders in")
    parser.add_argument("--only", action="append", choices=FOLDERS, default=[], help="make only this folder (repeatable)")
    parser.add_argument("--source", type=Path, help="cut the images from the photos in this folder instead")
    parser.add_argument("--seed", type=int, default=23)
    args = parser.parse_args()
    make(args.out, args.only, args.source, args.seed)


if __name__ == "__main__":
    main()
