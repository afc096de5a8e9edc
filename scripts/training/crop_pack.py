"""Crop packs (issue 42): training HR crops and validation planes in one file small enough to travel.

A GPU-machine call carries at most 64 MiB, the repository and shared/ included, while the training
images are about 300 Mpx of luma. A crop pack holds, as 8-bit luma planes:

- ``train``: HR crops of the training images (random, seeded; made by pack_train_data.py --crops);
- ``val``: validation split 1, whole planes (or their centre, see the packer's --val-max-side) of
  images held out of the crops entirely: it alone chooses train.py's kept iteration;
- ``val2``: validation split 2, images held out because they are unlike the rest (architecture,
  text, graphics): train.py reports it beside split 1 and never chooses on it.

Each plane is one xz stream of its differences from the row above (lossless; about 4.6 bits a pixel
on these images, against 6.1 for the deflate of np.savez_compressed), so the pack's size is known crop by crop. Each
plane also records where it was cut from (``boxes``: row, column, height, width in its source
image, and the source's size), from which train.py knows which of its edges are the image's own and
which are cuts: patches keep away from a cut edge by :func:`cut_margin`, so that every patch it draws
is exactly a patch of the whole image (up to the sampling phase of the HR-scale resize).

Only NumPy and the standard library: the packer runs without PyTorch.
"""

from __future__ import annotations

import json
import lzma
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

FORMAT = "srgpu-crop-pack-1"
SPLITS = ("train", "val", "val2")


def cut_margin(scale: int) -> int:
    """Pixels of an HR plane (after the HR-scale resize and modcrop) next to a cut edge within which
    the training input differs from the whole image's. The bicubic down-and-up by ``scale`` reaches
    about 4s HR pixels in theory; measured (tests/test_train_pack.py), differences above 1e-9 reach
    8, 12 and 13 pixels from the cut at x2, x3 and x4, HR scales 0.5 to 1: 3s + 4 keeps clear of them."""
    return 3 * scale + 4


def patch_input_side(arch: str, patch: int) -> int:
    """The side of a training patch's input: the scored centre plus the network's halo each side."""
    f1, f2, f3 = (int(v) for v in arch.split("-"))
    return patch + 2 * ((f1 - 1) // 2 + (f2 - 1) // 2 + (f3 - 1) // 2)


def resized_side(length: int, scale: int, hr_scale: float) -> int:
    """An HR plane's side after train.py's HR-scale resize (MATLAB's ceil) and modcrop by ``scale``."""
    n = length if hr_scale == 1.0 else int(math.ceil(length * hr_scale - 1e-9))
    return n - n % scale


def min_crop_side(input_side: int, scales: list[int], hr_scales: list[float]) -> int:
    """The smallest crop side from which a crop cut on both sides still gives one patch of
    ``input_side`` at every scale and HR scale (its cut margins kept)."""
    side = input_side
    while any(resized_side(side, s, hs) < input_side + 2 * cut_margin(s) for s in scales for hs in hr_scales):
        side += 1
    return side


XZ_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 6, "lc": 4, "lp": 0, "pb": 0}]


def encode_plane(plane: np.ndarray) -> bytes:
    """A uint8 plane as one xz stream of its vertical differences (each row minus the row above,
    modulo 256; xz's own delta filter reaches only 256 bytes back)."""
    plane = np.ascontiguousarray(plane, dtype=np.uint8)
    diff = plane.copy()
    diff[1:] -= plane[:-1]  # uint8: modulo 256
    return lzma.compress(diff.tobytes(), format=lzma.FORMAT_XZ, filters=XZ_FILTERS)


def decode_plane(blob: bytes | memoryview, shape: tuple[int, int]) -> np.ndarray:
    data = lzma.decompress(blob)
    h, w = shape
    if len(data) != h * w:
        raise ValueError(f"a packed plane decodes to {len(data)} bytes, not {h}x{w}")
    return np.cumsum(np.frombuffer(data, dtype=np.uint8).reshape(h, w), axis=0, dtype=np.uint8)


@dataclass
class Split:
    """One split of a pack: planes (uint8), their source names, the box each was cut from in its
    source (row, column, height, width) and the source's (height, width)."""

    planes: list[np.ndarray] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    boxes: list[tuple[int, int, int, int]] = field(default_factory=list)
    sources: list[tuple[int, int]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.planes)

    def edges(self) -> list[tuple[bool, bool, bool, bool]]:
        """For each plane, whether its top, bottom, left and right edges are its source's own edges
        (True) or cuts (False)."""
        return [(r == 0, r + h == sh, c == 0, c + w == sw) for (r, c, h, w), (sh, sw) in zip(self.boxes, self.sources)]

    def megapixels(self) -> float:
        return sum(p.size for p in self.planes) / 1e6


@dataclass
class Pack:
    splits: dict[str, Split]
    meta: dict


def write_pack(path: Path, splits: dict[str, tuple[Split, list[bytes]]], meta: dict) -> None:
    """``splits``: name -> (the split, its planes' encoded streams in order). Written under a temporary
    name, then renamed."""
    arrays: dict[str, np.ndarray] = {"meta": np.array(json.dumps({"format": FORMAT, **meta}, sort_keys=True))}
    for name, (split, blobs) in splits.items():
        assert len(blobs) == len(split)
        arrays[f"{name}_blob"] = np.frombuffer(b"".join(blobs), dtype=np.uint8)
        arrays[f"{name}_ends"] = np.cumsum([len(b) for b in blobs], dtype=np.int64)
        arrays[f"{name}_shapes"] = np.array([p.shape for p in split.planes], dtype=np.int64).reshape(-1, 2)
        arrays[f"{name}_names"] = np.array([n.encode() for n in split.names], dtype="S")
        arrays[f"{name}_boxes"] = np.array(split.boxes, dtype=np.int64).reshape(-1, 4)
        arrays[f"{name}_sources"] = np.array(split.sources, dtype=np.int64).reshape(-1, 2)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)  # the streams are compressed already
    tmp.replace(path)


def is_crop_pack(path: Path) -> bool:
    if path.suffix != ".npz" or not path.is_file():
        return False
    with np.load(path, allow_pickle=False) as z:
        return "meta" in z.files and json.loads(str(z["meta"])).get("format") == FORMAT


def read_pack(path: Path) -> Pack:
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        if meta.get("format") != FORMAT:
            raise ValueError(f"{path}: not a crop pack ({FORMAT})")
        splits = {}
        for name in SPLITS:
            if f"{name}_blob" not in z.files:
                splits[name] = Split()
                continue
            blob = z[f"{name}_blob"].tobytes()
            ends = z[f"{name}_ends"]
            starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
            shapes = [tuple(int(v) for v in s) for s in z[f"{name}_shapes"]]
            view = memoryview(blob)
            planes = [decode_plane(view[a:b], s) for a, b, s in zip(starts, ends, shapes)]
            splits[name] = Split(planes, [n.decode() for n in z[f"{name}_names"]],
                                 [tuple(int(v) for v in b) for b in z[f"{name}_boxes"]],
                                 [tuple(int(v) for v in s) for s in z[f"{name}_sources"]])
    return Pack(splits, meta)
