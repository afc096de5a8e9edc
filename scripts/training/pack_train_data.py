#!/usr/bin/env python3
"""Pack the training images' Y planes (MATLAB rgb2ycbcr, uint8) for a GPU-machine run, which carries
at most 64 MiB (the repository and shared/ included).

Whole planes (the pack runs 1-21 used): `y` (all planes concatenated, flat uint8), `shapes` (N, 2),
`names` (N,) in one compressed .npz; train.py holds every --val-every-nth plane out for validation:

    python3 scripts/training/pack_train_data.py ../shared/data/train/T91 ../shared/data/train/BSD200 -o .pack/train_y.npz

Crops (--crops, issue 42: train/ + train-extra/, about 300 Mpx, do not fit whole): a crop pack
(scripts/training/crop_pack.py) of

- validation split 1: every --val-every-nth image (sorted by folder/name) of those not in split 2,
  its centre up to --val-max-side pixels a side; it alone chooses the kept iteration;
- validation split 2: every --val2-every-th image of each section of --val2-list (images unlike the
  rest: architecture, text, graphics), the same way; reported beside split 1, never chosen on;
- training crops of --crop pixels a side (smaller images whole) from every other image, drawn in rounds
  until the pack reaches --max-mb: round 1 takes one crop of each image (in a seeded order), round 2
  a second one of each image that has room for it, and so on. An image's crops are tiles of a grid at
  a random offset, so they never overlap; the draw depends only on the seed and the image's name.

No validation image gives a training crop. Identical planes are packed once (T91's t36 and t65 are the
same image). Any plane identical to an evaluation image (--eval, its eight flips/transposes) or to a
plane excluded below refuses the pack.

    python3 scripts/training/pack_train_data.py --crops ../shared/data/train ../shared/data/train-extra \\
        -o .pack/i42_crops.npz --max-mb 48 --seed 42
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
import zlib
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
from srgpu.tools.evaluate import image_files, luma_uint8  # noqa: E402
from srgpu.images.files import read_image  # noqa: E402
from crop_pack import Split, encode_plane, min_crop_side, patch_input_side, write_pack  # noqa: E402

# Planes no pack may hold (digest of the Y plane, see plane_digest), with the reason.
EXCLUDED = {
    # train/BSD200/302003.png (jiny2001/dcscn-super-resolution data/bsd200/302003.png, file SHA-256
    # 79353f24845b8c2041afb1ddc08c47f22dc2e15817fb7c0265424965c7e1ca88): the photograph Set5's woman
    # was cut from; removed from ../shared/data/train/BSD200 (issue 42)
    "5e44ca98cc8c919e55a2caefce156b29a4c2e14c6b074aac045e18f55be7a76e": "BSD200/302003.png, the photograph Set5's woman was cut from",
}

UNLIKE_LIST = HERE / "unlike_images.txt"


def plane_digest(plane: np.ndarray) -> str:
    """SHA-256 of a uint8 plane's shape and bytes."""
    h = hashlib.sha256(f"{plane.shape[0]}x{plane.shape[1]}:".encode())
    h.update(np.ascontiguousarray(plane, dtype=np.uint8).tobytes())
    return h.hexdigest()


def dihedral_digests(plane: np.ndarray) -> set[str]:
    out = set()
    for p in (plane, plane.T):
        for q in (p, p[::-1], p[:, ::-1], p[::-1, ::-1]):
            out.add(plane_digest(q))
    return out


def default_eval_dir() -> Path | None:
    for d in (ROOT / "shared" / "data" / "eval", ROOT.parent / "shared" / "data" / "eval"):
        if d.is_dir():
            return d
    return None


def eval_digests(folder: Path | None) -> dict[str, str]:
    """Digests of every evaluation image's Y plane under ``folder`` (recursively), flips and
    transposes included -> its path."""
    if folder is None:
        return {}
    out = {}
    for sub in sorted({p.parent for p in folder.rglob("*") if p.is_file()}):
        for path in image_files(sub):
            image = read_image(path)
            if image.dtype == np.uint8:
                for d in dihedral_digests(luma_uint8(image)):
                    out[d] = str(path.relative_to(folder.parent))
    return out


def read_plane(path: Path) -> np.ndarray:
    image = read_image(path)
    if image.dtype != np.uint8:
        raise SystemExit(f"{path}: expected an 8-bit image")
    return np.ascontiguousarray(luma_uint8(image))


def image_folders(folders: list[Path]) -> list[Path]:
    """Each folder that holds images directly, and its subfolders that do (one level down)."""
    out = []
    for folder in folders:
        if not folder.is_dir():
            raise SystemExit(f"{folder}: not a folder")
        found = [folder] if image_files(folder) else []
        found += [sub for sub in sorted(folder.iterdir()) if sub.is_dir() and image_files(sub)]
        if not found:
            raise SystemExit(f"{folder}: no images in it or in its subfolders")
        out += found
    names = [f.name for f in out]
    if len(set(names)) != len(names):
        raise SystemExit(f"image folders with the same name: {sorted(n for n, k in Counter(names).items() if k > 1)}")
    return out


def check_planes(named: list[tuple[str, np.ndarray]], evals: dict[str, str]) -> tuple[list[tuple[str, np.ndarray]], list[str]]:
    """Refuses a plane identical to an evaluation image or an EXCLUDED one; packs identical planes once.
    Returns the planes kept and a note for each dropped duplicate."""
    seen: dict[str, str] = {}
    kept, notes = [], []
    for name, plane in named:
        d = plane_digest(plane)
        if d in EXCLUDED:
            raise SystemExit(f"{name}: refused, it is {EXCLUDED[d]}")
        if d in evals:
            raise SystemExit(f"{name}: refused, it is the evaluation image {evals[d]} (or a flip/transpose of it)")
        if d in seen:
            notes.append(f"{name} (identical to {seen[d]})")
            continue
        seen[d] = name
        kept.append((name, plane))
    return kept, notes


def unlike_sections(path: Path) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = None
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
        elif current is None:
            raise SystemExit(f"{path}: {line!r} comes before any [section]")
        else:
            current.append(line)
    return sections


def centre_box(shape: tuple[int, int], side: int) -> tuple[int, int, int, int]:
    h, w = shape
    ch, cw = min(h, side), min(w, side)
    return (h - ch) // 2, (w - cw) // 2, ch, cw


def tiles(name: str, shape: tuple[int, int], crop: int, seed: int) -> list[tuple[int, int, int, int]]:
    """The image's crops, non-overlapping, in the order they are taken: tiles of a grid at a random
    offset, shuffled; a side shorter than ``crop`` is taken whole. Depends only on the seed and name."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])

    def starts(length: int) -> tuple[list[int], int]:
        if length <= crop:
            return [0], length
        n = length // crop
        offset = int(rng.integers(0, length - n * crop + 1))
        return [offset + i * crop for i in range(n)], crop

    rows, ch = starts(shape[0])
    cols, cw = starts(shape[1])
    boxes = [(r, c, ch, cw) for r in rows for c in cols]
    return [boxes[i] for i in rng.permutation(len(boxes))]


def _encode(plane: np.ndarray) -> bytes:
    return encode_plane(plane)


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except Exception:
        return "unknown"


def pack_whole(args: argparse.Namespace, evals: dict[str, str]) -> None:
    named = []
    for folder in args.folders:
        for path in image_files(folder):
            named.append((f"{folder.name}/{path.name}", read_plane(path)))
    kept, dropped = check_planes(named, evals)
    for note in dropped:
        print(f"not packed twice: {note}")
    planes = [p for _, p in kept]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        args.output,
        y=np.concatenate([p.ravel() for p in planes]),
        shapes=np.array([p.shape for p in planes], dtype=np.int64),
        names=np.array([n for n, _ in kept]),
    )
    print(f"{len(planes)} planes, {sum(p.size for p in planes) / 1e6:.1f} Mpx -> {args.output} "
          f"({args.output.stat().st_size / 1e6:.1f} MB)")


def pack_crops(args: argparse.Namespace, evals: dict[str, str]) -> None:
    t0 = time.time()
    folders = image_folders(args.folders)
    paths = {f"{folder.name}/{path.name}": path for folder in folders for path in image_files(folder)}
    with ProcessPoolExecutor(args.workers) as pool:
        planes = list(pool.map(read_plane, paths.values(), chunksize=16))
    named = sorted(zip(paths, planes), key=lambda kv: kv[0])
    kept, dropped = check_planes(named, evals)
    planes_by_name = dict(kept)
    names = sorted(planes_by_name)
    print(f"{len(named)} images from {len(folders)} folders ({sum(p.size for p in planes) / 1e6:.1f} Mpx) read in "
          f"{time.time() - t0:.1f}s; {len(dropped)} identical to an earlier one, not packed twice")

    # the splits
    val2: list[str] = []
    sections = unlike_sections(args.val2_list) if args.val2_list else {}
    for section, listed in sections.items():
        missing = [n for n in listed if n not in planes_by_name]
        if missing:
            raise SystemExit(f"{args.val2_list} [{section}]: not among the images: {missing[:5]}")
        val2 += [n for n in listed[:: args.val2_every] if n not in val2]
    held2 = set(val2)
    rest = [n for n in names if n not in held2]
    val1 = rest[:: args.val_every_nth]
    held1 = set(val1)
    train = [n for n in rest if n not in held1]

    def val_split(chosen: list[str]) -> tuple[Split, list[bytes]]:
        split = Split()
        for n in sorted(chosen):
            p = planes_by_name[n]
            r, c, h, w = centre_box(p.shape, args.val_max_side)
            split.planes.append(np.ascontiguousarray(p[r : r + h, c : c + w]))
            split.names.append(n)
            split.boxes.append((r, c, h, w))
            split.sources.append(p.shape)
        return split, list(pool.map(_encode, split.planes, chunksize=4))

    with ProcessPoolExecutor(args.workers) as pool:
        vals = {"val": val_split(val1), "val2": val_split(val2)}
        val_bytes = sum(len(b) for _, blobs in vals.values() for b in blobs)

        # training crops, round by round, until the budget
        longest = max(len(n.encode()) for n in names)
        per_plane = 9 * 8 + longest  # a plane's entries besides its stream: end, shape, box, source, name
        budget = int(args.max_mb * 1e6) - val_bytes - per_plane * (len(val1) + len(val2)) - 65536  # npz headers, meta
        order = [train[i] for i in np.random.default_rng(args.seed).permutation(len(train))]
        boxes = {n: tiles(n, planes_by_name[n].shape, args.crop, args.seed) for n in train}
        queue = [(n, boxes[n][k]) for k in range(max(len(b) for b in boxes.values())) for n in order
                 if k < len(boxes[n])]
        crops = Split()
        blobs: list[bytes] = []
        used = 0
        chunk = 256
        for start in range(0, len(queue), chunk):
            part = queue[start : start + chunk]
            cut = [planes_by_name[n][r : r + h, c : c + w] for n, (r, c, h, w) in part]
            encoded = list(pool.map(_encode, cut, chunksize=8))
            full = False
            for (n, box), plane, blob in zip(part, cut, encoded):
                cost = len(blob) + per_plane
                if used + cost > budget:
                    full = True
                    break
                used += cost
                crops.planes.append(np.ascontiguousarray(plane))
                crops.names.append(n)
                crops.boxes.append(box)
                crops.sources.append(planes_by_name[n].shape)
                blobs.append(blob)
            if full:
                break

    covered = Counter(n.split("/")[0] for n in set(crops.names))
    images_per_folder = Counter(n.split("/")[0] for n in train)
    crops_per_folder = Counter(n.split("/")[0] for n in crops.names)
    rounds = Counter()
    taken = defaultdict(int)
    for n in crops.names:
        taken[n] += 1
        rounds[taken[n]] += 1
    meta = {
        "seed": args.seed, "crop": args.crop, "max_mb": args.max_mb, "val_every_nth": args.val_every_nth,
        "val2_list": str(args.val2_list) if args.val2_list else None,
        "val2_list_sha256": hashlib.sha256(args.val2_list.read_bytes()).hexdigest() if args.val2_list else None,
        "val2_every": args.val2_every, "val2_sections": {s: len(v[:: args.val2_every]) for s, v in sections.items()},
        "val_max_side": args.val_max_side, "folders": [str(f) for f in args.folders],
        "images": len(named), "duplicates_dropped": dropped,
        "excluded_digests": EXCLUDED, "eval_checked": sorted(set(evals.values())),
        "train_images": len(train), "train_images_cropped": len(set(crops.names)),
        "train_crops_per_round": {str(k): v for k, v in sorted(rounds.items())},
        "train_crops_per_folder": dict(sorted(crops_per_folder.items())),
        "train_images_per_folder": dict(sorted(images_per_folder.items())),
        "megapixels": {"train": round(crops.megapixels(), 3), "val": round(vals["val"][0].megapixels(), 3),
                       "val2": round(vals["val2"][0].megapixels(), 3)},
        "commit": git_commit(),
    }
    write_pack(args.output, {"train": (crops, blobs), **vals}, meta)
    size = args.output.stat().st_size
    bits = 8 * (sum(len(b) for b in blobs) + val_bytes) / max(1, sum(s.megapixels() for s in
                                                                    (crops, vals["val"][0], vals["val2"][0])) * 1e6)
    print(f"validation split 1: {len(val1)} images (every {args.val_every_nth}th), "
          f"{vals['val'][0].megapixels():.1f} Mpx; split 2: {len(val2)} images {meta['val2_sections']}, "
          f"{vals['val2'][0].megapixels():.1f} Mpx; {val_bytes / 1e6:.1f} MB")
    print(f"training: {len(crops)} crops of up to {args.crop} px ({crops.megapixels():.1f} Mpx) from "
          f"{len(set(crops.names))} of {len(train)} images; crops per round {meta['train_crops_per_round']}")
    for folder in sorted(images_per_folder):
        print(f"  {folder:18s} {covered[folder]:4d} of {images_per_folder[folder]:4d} images, "
              f"{crops_per_folder[folder]:5d} crops")
    print(f"-> {args.output}: {size / 1e6:.2f} MB ({size / 2**20:.2f} MiB), {bits:.2f} bits a pixel; "
          f"{time.time() - t0:.0f}s")
    if size > args.max_mb * 1e6:
        raise SystemExit(f"{args.output}: {size / 1e6:.2f} MB is over --max-mb {args.max_mb}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path,
                    help="image folders (with --crops also folders of image folders, e.g. ../shared/data/train)")
    ap.add_argument("-o", "--output", type=Path, required=True)
    ap.add_argument("--eval", type=Path, default=default_eval_dir(),
                    help="refuse any plane identical to an image under this folder (default: shared/data/eval)")
    crops = ap.add_argument_group("crop packs (issue 42)")
    crops.add_argument("--crops", action="store_true", help="write a crop pack (above) instead of whole planes")
    crops.add_argument("--max-mb", type=float, default=48.0, help="the pack's size in MB (1e6 bytes; default 48)")
    crops.add_argument("--crop", type=int, default=192,
                       help="training crop side (default 192: the smallest from which a crop cut on every side still "
                            "gives a 9-5-5 patch, 48 px scored, at x2-x4 and HR scale 0.5; train.py says so if not)")
    crops.add_argument("--seed", type=int, default=42)
    crops.add_argument("--val-every-nth", type=int, default=12, help="validation split 1: every n-th image (default 12)")
    crops.add_argument("--val2-list", type=Path, default=UNLIKE_LIST,
                       help=f"validation split 2's candidates, by [section] (default {UNLIKE_LIST.relative_to(ROOT)})")
    crops.add_argument("--val2-every", type=int, default=2,
                       help="hold out every n-th image of each section of --val2-list (default 2: half)")
    crops.add_argument("--val-max-side", type=int, default=256,
                       help="a validation plane is its image's centre, at most this many pixels a side (default 256)")
    crops.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if args.eval is None:
        print("no evaluation folder found: planes not checked against evaluation images")
    evals = eval_digests(args.eval)
    if args.crops:
        need = min_crop_side(patch_input_side("9-5-5", 48), [2, 3, 4], [0.5])
        if args.crop < need:
            print(f"note: --crop {args.crop} is under {need}, the side a 9-5-5 patch of 48 needs at HR scale 0.5")
        pack_crops(args, evals)
    else:
        pack_whole(args, evals)


if __name__ == "__main__":
    main()
