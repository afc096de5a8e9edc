#!/usr/bin/env python3
"""Peak memory (max RSS) and wall time of a large image upscaled on the CPU.

    python3 scripts/benchmarks/bench_cpu_memory.py make IMG [--size 6000x4000]
    python3 scripts/benchmarks/bench_cpu_memory.py cli IMG --scale 2 [--src DIR] [--json]
    python3 scripts/benchmarks/bench_cpu_memory.py engine IMG --scale 2 [--src DIR] [--json]

``make`` writes a natural-looking test image: Set5's butterfly upsampled to the size, plus
Gaussian noise (sigma 6), JPEG quality 92 -- never constant, so no code path is skipped.
``cli`` runs ``python -m srgpu upscale IMG -o OUT --device cpu`` (default 9-1-5 model) under
``/usr/bin/time -v`` and reports its maximum resident set size and elapsed time.
``engine`` measures the engine alone in a fresh process: the image's Y, Cb, Cr planes (uint8)
through ``CPUEngine.upscale_frame`` (Y through SRCNN, chroma bicubic), peak RSS from getrusage.
``--src`` runs another checkout (e.g. an export of an older commit) instead of this one."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SET5 = ROOT.parent / "shared" / "data" / "eval" / "Set5" / "butterfly_GT.bmp"

ENGINE_CHILD = r"""
import resource, sys, time
import cv2, numpy as np
from srgpu.engine.base import PlaneSpec
from srgpu.engine.cpu import CPUEngine
from srgpu.model import resolve_model
img, scale = sys.argv[1], int(sys.argv[2])
bgr = cv2.imread(img)
planes = [np.ascontiguousarray(p) for p in cv2.split(cv2.cvtColor(bgr, cv2.COLOR_BGR2YCrCb))]
del bgr
h, w = planes[0].shape
specs = [PlaneSpec((h * scale, w * scale), i == 0) for i in range(3)]
engine = CPUEngine(resolve_model(None, scale), scale)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
outs = engine.upscale_frame(planes, specs, 255)
print(base, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.perf_counter() - t)
"""


def make(path: Path, size: str, seed: int = 0) -> None:
    import cv2
    import numpy as np

    w, h = (int(v) for v in size.split("x"))
    src = cv2.imread(str(SET5))
    if src is None:
        sys.exit(f"cannot read {SET5}")
    big = cv2.resize(src, (w, h), interpolation=cv2.INTER_CUBIC).astype(np.float32)
    big += np.random.default_rng(seed).normal(0, 6, big.shape).astype(np.float32)
    cv2.imwrite(str(path), np.clip(big, 0, 255).astype(np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 92])


def env_for(src: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src)
    return env


def child(cmd: list[str], src: Path) -> subprocess.CompletedProcess:
    """Run ``cmd`` with ``src`` first on sys.path: in it as the working directory too, since
    ``python -m``/``-c`` put the working directory ahead of PYTHONPATH."""
    return subprocess.run(cmd, env=env_for(src), cwd=src, capture_output=True, text=True)


def cli(img: Path, scale: int, src: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"out{img.suffix}"
        cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "srgpu", "upscale", str(img), "-o", str(out),
               "--device", "cpu", "--scale", str(scale), "--quiet"]
        run = child(cmd, src)
        report = run.stderr
        if run.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed ({run.returncode}):\n{report[-3000:]}")
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", report).group(1))
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", report).group(1)
    seconds = sum(float(p) * 60**i for i, p in enumerate(reversed(wall.split(":"))))
    return {"mode": "cli", "scale": scale, "max_rss_mb": rss_kb / 1024, "wall_s": seconds}


def engine(img: Path, scale: int, src: Path) -> dict:
    run = child([sys.executable, "-c", ENGINE_CHILD, str(img), str(scale)], src)
    if run.returncode != 0:
        sys.exit(f"engine run failed ({run.returncode}):\n{run.stderr[-3000:]}")
    base_kb, peak_kb, seconds = run.stdout.split()[-3:]
    return {"mode": "engine", "scale": scale, "max_rss_mb": int(peak_kb) / 1024,
            "rss_before_mb": int(base_kb) / 1024, "engine_s": float(seconds)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["make", "cli", "engine"])
    ap.add_argument("image", type=Path)
    ap.add_argument("--size", default="6000x4000", help="WxH for make")
    ap.add_argument("--scale", type=int, default=2)
    ap.add_argument("--src", type=Path, default=ROOT, help="checkout whose srgpu runs")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.mode == "make":
        make(args.image, args.size)
        return
    load_before = os.getloadavg()[0]  # the machine may be shared: say how busy it was
    result = (cli if args.mode == "cli" else engine)(args.image.resolve(), args.scale, args.src.resolve())
    result["load1_before"], result["load1_after"] = load_before, os.getloadavg()[0]
    print(json.dumps(result) if args.json else "  ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}"
                                                          for k, v in result.items()))


if __name__ == "__main__":
    main()
