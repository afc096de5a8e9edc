#!/usr/bin/env python3
"""What srgpu's handling of one image file costs beyond the codecs, with nothing else running: every
step of a folder run's image, one file after another on one thread (look, read, the manifest's
begin, the atomic write, its finish), against the codec floor's bare calls (imdecode of np.fromfile,
one cv2.imwrite to the final name), ms per image; the upscale is cv2.resize in both, so the
difference is srgpu's own file handling. The GPU engine's own per-image time is
dev/profile_folder_engine.py's.

With threads, this is work that either holds the GIL (Python) or gives it up and takes it back
(each system call): what bounds how far a folder of small images can scale on the codec threads.

    python3 dev/folder_serial_cost.py FOLDER [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from srgpu.images.files import encode_params, read_image_data, write_image_atomic  # noqa: E402
from srgpu.batch.resume import JobStat, Resume
from srgpu.manifest import model_identity
from srgpu.batch.tasks import OutputFolders, prepare_job
from srgpu.images.upscale import _check_alpha, fit_to_format
from srgpu.batch.plan import plan_batch  # noqa: E402
from srgpu.model import builtin_path, load_npz  # noqa: E402
from srgpu.video.options import VideoOptions  # noqa: E402


def resized(image: np.ndarray, scale: int) -> np.ndarray:
    h, w = image.shape[:2]
    return cv2.resize(image, (w * scale, h * scale), interpolation=cv2.INTER_CUBIC)


def srgpu_steps(folder: Path, out: Path, scale: int) -> dict[str, float]:
    """Seconds per step over the folder, srgpu's way."""
    shutil.rmtree(out, ignore_errors=True)
    plan = plan_batch(folder, out)
    resume = Resume(plan, model_identity(load_npz(builtin_path("9-1-5", scale)), scale), VideoOptions())
    folders = OutputFolders()
    t = dict.fromkeys(("look", "read", "resize", "write"), 0.0)
    for job in plan.jobs:
        t0 = time.perf_counter()
        go = prepare_job(job, plan, folders, resume, JobStat.at(job))
        t1 = time.perf_counter()
        data = read_image_data(job.src, "bgr")
        _check_alpha(data.pixels, job.dst.suffix, job.src)
        t2 = time.perf_counter()
        pixels = resized(data.pixels, scale)
        t3 = time.perf_counter()
        resume.begin(job)
        written = write_image_atomic(job.dst, fit_to_format(pixels, job.dst.suffix, job.src), replace=go.replace,
                                     icc=data.icc, order=data.order, scratch=True)
        resume.finish(job, go, written.size)
        t4 = time.perf_counter()
        for k, dt in zip(t, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            t[k] += dt
    resume.close()
    return t


def floor_steps(folder: Path, out: Path, scale: int) -> dict[str, float]:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    t = dict.fromkeys(("look", "read", "resize", "write"), 0.0)
    for src in sorted(p for p in folder.iterdir() if p.is_file()):
        t1 = time.perf_counter()
        image = cv2.imdecode(np.fromfile(str(src), np.uint8), cv2.IMREAD_UNCHANGED)
        t2 = time.perf_counter()
        pixels = resized(image, scale)
        t3 = time.perf_counter()
        dst = out / src.name
        cv2.imwrite(str(dst), pixels, encode_params(dst.suffix.lower(), 95, None))
        t4 = time.perf_counter()
        for k, dt in zip(("read", "resize", "write"), (t2 - t1, t3 - t2, t4 - t3)):
            t[k] += dt
    return t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", type=int, default=2)
    args = ap.parse_args()
    n = sum(1 for p in args.folder.iterdir() if p.is_file())
    with tempfile.TemporaryDirectory(prefix="srgpu-serial-") as tmp:
        runs: dict[str, list[dict[str, float]]] = {"floor": [], "srgpu": []}
        for _ in range(args.rounds):
            runs["floor"].append(floor_steps(args.folder, Path(tmp) / "floor", args.scale))
            runs["srgpu"].append(srgpu_steps(args.folder, Path(tmp) / "srgpu", args.scale))
    print(f"{n} images, one thread, ms per image (median of {args.rounds} rounds):")
    medians = {}
    for name, rounds in runs.items():
        medians[name] = {k: statistics.median(r[k] for r in rounds) / n * 1e3 for k in rounds[0]}
        m = medians[name]
        print(f"  {name:6s} " + "  ".join(f"{k} {v:.3f}" for k, v in m.items()) + f"  total {sum(m.values()):.3f}")
    extra = sum(medians["srgpu"].values()) - sum(medians["floor"].values())
    print(f"  srgpu's file handling beyond the codecs: {extra:.3f} ms per image")
    return 0


if __name__ == "__main__":
    sys.exit(main())
