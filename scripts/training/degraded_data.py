"""Training inputs degraded as real inputs are (train.py --degrade): the LR image of each training
plane quantised to 8 bits and compressed (JPEG, all-intra H.264/HEVC; srgpu.tools.degrade) at a quality
drawn at random per variant.

Compressing per patch would take one ffmpeg call each, so each LR plane gets `variants` versions
once, in the data preparation: each is clean with probability `clean_fraction`, else compressed
by one of the specs (chosen uniformly) at a quality drawn uniformly from its range. The draw of a
variant depends only on (seed, split, scale, plane, HR scale, variant): the same data on any
machine, with any number of workers. Same-size planes at the same codec and quality go through one
ffmpeg call (srgpu.tools.degrade.compress_batch, which equals one call per plane).

The degraded LR planes can be kept in a cache folder (one file per scale and settings, named by a
hash of them): the first process to need one makes it under a lock, others wait and read it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections import defaultdict
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from srgpu.color import quantize
from srgpu.tools.degrade import Degradation, compress_batch, parse_degradation
from srgpu.tools.evaluate import modcrop
from srgpu.resize import imresize

CACHE_VERSION = 1
BATCH_FRAMES = 64  # planes per compress_batch call: enough to amortise ffmpeg's start, small enough to spread
TRAIN, VAL, VAL2 = 0, 1, 2  # the split, part of every variant's seed (VAL2: a crop pack's validation split 2)


@dataclass(frozen=True)
class DegradeMix:
    """How the training and validation inputs are degraded."""

    specs: tuple[Degradation, ...]
    clean_fraction: float
    variants: int
    seed: int

    def __post_init__(self) -> None:
        if not self.specs:
            raise ValueError("--degrade: give at least one spec")
        if not 0.0 <= self.clean_fraction < 1.0:
            raise ValueError(f"--clean-fraction {self.clean_fraction}: must be in [0, 1)")
        if self.variants < 1:
            raise ValueError(f"--variants {self.variants}: must be at least 1")

    @classmethod
    def parse(cls, specs: list[str], clean_fraction: float, variants: int, seed: int) -> "DegradeMix":
        return cls(tuple(parse_degradation(s) for s in specs), clean_fraction, variants, seed)

    def describe(self) -> dict:
        return {"degrade": [str(s) for s in self.specs], "clean_fraction": self.clean_fraction,
                "variants": self.variants, "seed": self.seed}

    def draw(self, key: tuple[int, ...]) -> tuple[str, int] | None:
        """(codec, quality) of the variant ``key``, or None for a clean one."""
        rng = np.random.default_rng([self.seed, *key])
        if rng.random() < self.clean_fraction:
            return None
        spec = self.specs[int(rng.integers(len(self.specs)))]
        return spec.codec, spec.draw(rng)


def hr_plane(plane: np.ndarray, scale: int, hr_scale: float) -> np.ndarray:
    """An HR uint8 plane at ``hr_scale`` of its size (requantised, as an 8-bit image), modcropped,
    float64 in [0, 1]: the target train.py's pairs use."""
    hr = plane.astype(np.float64) / 255.0
    if hr_scale != 1.0:
        hr = np.clip(imresize(hr, hr_scale), 0.0, 1.0)
        hr = quantize(hr, np.uint8).astype(np.float64) / 255.0  # as if it were an 8-bit HR image
    return modcrop(hr, scale)


def lr_uint8(args: tuple[np.ndarray, int, float]) -> np.ndarray:
    """The LR image of an HR plane as a decoded image holds it: imresize 1/s, rounded to 8 bits."""
    plane, scale, hr_scale = args
    return quantize(imresize(hr_plane(plane, scale, hr_scale), 1.0 / scale), np.uint8)


def _compress_job(args: tuple[list[np.ndarray], str, int]) -> np.ndarray:
    planes, codec, quality = args
    return compress_batch(planes, codec, quality)


def upscale_lr(args: tuple[np.ndarray, int]) -> np.ndarray:
    """A degraded LR uint8 plane -> the network's input: its bicubic upscale, float32."""
    lr, scale = args
    return imresize(lr.astype(np.float64) / 255.0, float(scale)).astype(np.float32)


@dataclass(frozen=True)
class Variants:
    """The degraded variants of a list of sources (one source = one plane at one HR scale):
    ``lr[i][v]`` the LR uint8 plane of variant v of source i, or None where it is clean;
    ``labels[i][v]`` 'clean' or 'codec:quality'."""

    lr: list[list[np.ndarray | None]]
    labels: list[list[str]]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for row in self.labels:
            for label in row:
                out[label.split(":")[0]] += 1
        return dict(sorted(out.items()))


def make_variants(sources: list[tuple[np.ndarray, int, float]], keys: list[tuple[int, ...]], mix: DegradeMix,
                  pool: Executor) -> Variants:
    """``sources``: (HR uint8 plane, scale, HR scale); ``keys``: each source's seed key."""
    draws = [[mix.draw((*key, v)) for v in range(mix.variants)] for key in keys]
    need = [i for i, row in enumerate(draws) if any(d is not None for d in row)]
    lrs = dict(zip(need, pool.map(lr_uint8, [sources[i] for i in need], chunksize=4)))
    # same size, codec and quality: one ffmpeg call for many planes
    groups: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    for i, row in enumerate(draws):
        for v, d in enumerate(row):
            if d is not None:
                groups[(lrs[i].shape, *d)].append((i, v))
    jobs, members = [], []
    for (_, codec, quality), items in sorted(groups.items(), key=lambda kv: str(kv[0])):
        for b in range(0, len(items), BATCH_FRAMES):
            part = items[b : b + BATCH_FRAMES]
            jobs.append(([lrs[i] for i, _ in part], codec, quality))
            members.append(part)
    lr: list[list[np.ndarray | None]] = [[None] * mix.variants for _ in sources]
    for part, out in zip(members, pool.map(_compress_job, jobs)):
        for (i, v), plane in zip(part, out):
            lr[i][v] = plane
    labels = [["clean" if d is None else f"{d[0]}:{d[1]}" for d in row] for row in draws]
    return Variants(lr, labels)


# ---------------------------------------------------------------- cache


def cache_settings(mix: DegradeMix, scale: int, hr_scales: list[float], val_every_nth: int, names: list[str],
                   planes: list[np.ndarray], parts: list[str] | None = None) -> dict:
    """What a cache file's contents depend on (the data: by names and a hash of the planes); ``parts``:
    the splits it holds when not train and val (a crop pack's: train, val, val2)."""
    digest = hashlib.sha256()
    for name, p in zip(names, planes):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(p).tobytes())
    out = {"version": CACHE_VERSION, **mix.describe(), "scale": scale, "hr_scales": list(hr_scales),
           "val_every_nth": val_every_nth, "data_sha256": digest.hexdigest()}
    if parts is not None:
        out["parts"] = list(parts)
    return out


def cache_path(folder: Path, settings: dict) -> Path:
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    return folder / f"degraded_x{settings['scale']}_{key}.npz"


def save_variants(path: Path, settings: dict, parts: dict[str, Variants]) -> None:
    arrays: dict[str, np.ndarray] = {"settings": np.array(json.dumps(settings, sort_keys=True))}
    for name, var in parts.items():
        planes = [p for row in var.lr for p in row if p is not None]
        arrays[f"{name}_flat"] = np.concatenate([p.ravel() for p in planes]) if planes else np.zeros(0, np.uint8)
        arrays[f"{name}_shapes"] = np.array([p.shape for p in planes], np.int64).reshape(-1, 2)
        arrays[f"{name}_labels"] = np.array([label for row in var.labels for label in row])
        arrays[f"{name}_variants"] = np.array(len(var.labels[0]) if var.labels else 0)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.savez_compressed(f, **arrays)
    os.replace(tmp, path)


def load_variants(path: Path, settings: dict, names: list[str]) -> dict[str, Variants]:
    with np.load(path, allow_pickle=False) as z:
        saved = json.loads(str(z["settings"]))
        if saved != settings:
            raise SystemExit(f"{path}: made with other settings ({saved}), not {settings}")
        out = {}
        for name in names:
            flat, shapes, labels = z[f"{name}_flat"], z[f"{name}_shapes"], [str(s) for s in z[f"{name}_labels"]]
            k = int(z[f"{name}_variants"])
            ends = np.cumsum([h * w for h, w in shapes])
            planes = iter(flat[e - h * w : e].reshape(h, w) for e, (h, w) in zip(ends, shapes))
            rows = [labels[i : i + k] for i in range(0, len(labels), k)]
            lr = [[None if label == "clean" else next(planes) for label in row] for row in rows]
            out[name] = Variants(lr, rows)
    return out


def cached_variants(folder: Path | None, settings: dict, make: Callable[[], dict[str, Variants]],
                    log: Callable[[str], None]) -> dict[str, Variants]:
    """The variants from ``folder``'s cache file for ``settings``, else ``make()`` (saved there when a
    folder is given). A lock makes concurrent runs (train_all.sh: both architectures of a scale)
    generate once."""
    if folder is None:
        return make()
    folder.mkdir(parents=True, exist_ok=True)
    path = cache_path(folder, settings)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if path.is_file():
            log(f"degraded inputs from {path}")
            return load_variants(path, settings, settings.get("parts", ["train", "val"]))
        parts = make()
        save_variants(path, settings, parts)
        log(f"degraded inputs saved in {path} ({path.stat().st_size / 1e6:.1f} MB)")
        return parts
