#!/usr/bin/env python3
"""How long a user waits for the first upscaled frame: on a fresh machine (empty kernel and plan
caches) and for a new frame size on a warm one.

Each measurement is a new Python process with CUPY_CACHE_DIR (CuPy's compiled kernels) and
XDG_CACHE_HOME (srgpu's plans) pointed at folders of this run, so "fresh" means both caches are
empty, as on a new machine. The process imports srgpu, makes the GPU engine as the CLI does
(``create_engine('cuda', ..., GPUOptions(precision=...))``, with the planner) and upscales one
random frame; the figure is the wall time from the process's start to that frame back on the host.
Then, in the same process, one frame of a size not seen before (what a folder of photos meets).

    python3 scripts/benchmarks/bench_startup.py [--arch 9-1-5 --arch 9-5-5] [--bits 8 --bits 10]
        [--size 1920x1080] [--new-size 1280x720] [--cli CLIP] [--json FILE]

Python modules are compiled to bytecode once before the first measurement, as `pip install` does
(--source-imports: as the environment has it). --cli CLIP also times ``srgpu upscale CLIP`` end to end with empty caches (the whole command,
so an upper bound on its first frame).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import os, sys, time
start = float(os.environ["SRGPU_BENCH_START"])
import numpy as np
from srgpu.engine import GPUOptions, PlaneSpec, create_engine
from srgpu.model import resolve_model
arch, bits, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
imported = time.time() - start
notes = []
engine = create_engine("cuda", resolve_model(arch, 2), 2, GPUOptions(precision=sys.argv[5], notify=notes.append))
made = time.time() - start
top = 2**bits - 1
frame = np.random.default_rng(0).integers(0, top + 1, (h, w)).astype(np.uint8 if bits == 8 else np.uint16)
out = engine.upscale_frame([frame], [PlaneSpec((2 * h, 2 * w), True)], top)[0]
first = time.time() - start
plan = engine.plan_for((h, w), (2 * h, 2 * w), bits)
nw, nh = int(sys.argv[6]), int(sys.argv[7])  # then a new size in the same process (a folder of images)
t = time.time()
frame = np.random.default_rng(1).integers(0, top + 1, (nh, nw)).astype(frame.dtype)
engine.upscale_frame([frame], [PlaneSpec((2 * nh, 2 * nw), True)], top)
print({"import_s": imported, "engine_s": made, "first_frame_s": first, "plan": plan.describe(),
       "source": plan.source, "notes": notes, "new_size_in_process_s": time.time() - t})
"""


def child(arch: str, bits: int, size: tuple[int, int], precision: str, env: dict[str, str],
          then: tuple[int, int]) -> dict:
    env = dict(env, SRGPU_BENCH_START=repr(time.time()))
    r = subprocess.run([sys.executable, "-c", CHILD, arch, str(bits), str(size[0]), str(size[1]), precision,
                        str(then[0]), str(then[1])],
                       env=env, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(f"child failed: {r.stderr[-2000:]}")
    import ast

    return ast.literal_eval(r.stdout.strip().splitlines()[-1])


def parse_size(s: str) -> tuple[int, int]:
    w, h = s.lower().split("x")
    return int(w), int(h)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", action="append")
    ap.add_argument("--bits", action="append", type=int)
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--new-size", default="1280x720")
    ap.add_argument("--then-size", default="1001x667", help="a new size upscaled after the first frame, "
                    "in the same process")
    ap.add_argument("--cli", type=Path, help="also time `srgpu upscale CLIP` end to end with empty caches")
    ap.add_argument("--source-imports", action="store_true", help="leave Python's bytecode settings as the "
                    "environment has them (default: bytecode compiled once, as a pip install does)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    env0 = dict(os.environ)
    env0["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env0.get("PYTHONPATH")] if p])
    pycache = tempfile.TemporaryDirectory(prefix="srgpu-pycache-")
    if not args.source_imports:
        # as after `pip install`, which compiles every module: bytecode written once and read by
        # every child (some machines set PYTHONDONTWRITEBYTECODE, which makes each process compile
        # the sources of srgpu, NumPy and CuPy again: ~0.26 s on the GPU machine)
        env0.pop("PYTHONDONTWRITEBYTECODE", None)
        env0["PYTHONPYCACHEPREFIX"] = pycache.name
        subprocess.run([sys.executable, "-c", "import cupy, cv2, srgpu.cli, srgpu.engine.gpu, "
                        "srgpu.engine.imageproc, srgpu.kernels.fused.runner, srgpu.engine.tune"],
                       env=env0, check=True, cwd=ROOT)
    for arch in args.arch or ["9-1-5", "9-5-5"]:
        for bits in args.bits or [8, 10]:
            with tempfile.TemporaryDirectory(prefix="srgpu-startup-") as tmp:
                env = dict(env0, CUPY_CACHE_DIR=f"{tmp}/cupy", XDG_CACHE_HOME=f"{tmp}/xdg")
                for label, size in (("fresh machine", args.size), ("same size, warm", args.size),
                                    ("new size, warm", args.new_size)):
                    r = child(arch, bits, parse_size(size), args.precision, env, parse_size(args.then_size))
                    row = dict(arch=arch, bits=bits, case=label, size=size, **r)
                    rows.append(row)
                    print(f"{arch} {bits}-bit {label:16s} {size:>10s}: first frame {r['first_frame_s']:6.2f} s "
                          f"(import {r['import_s']:.2f}, engine {r['engine_s']:.2f}); then {args.then_size} in the "
                          f"same process {r['new_size_in_process_s']:.3f} s; plan {r['source']}: {r['plan']}",
                          flush=True)
    if args.cli:
        with tempfile.TemporaryDirectory(prefix="srgpu-startup-") as tmp:
            env = dict(env0, CUPY_CACHE_DIR=f"{tmp}/cupy", XDG_CACHE_HOME=f"{tmp}/xdg")
            started = time.time()
            r = subprocess.run([sys.executable, "-m", "srgpu", "upscale", str(args.cli), "-o", f"{tmp}/out.mp4",
                                "--device", "cuda"], env=env, capture_output=True, text=True, cwd=ROOT)
            took = time.time() - started
            print(f"srgpu upscale {args.cli.name}, empty caches: {took:.2f} s in all (rc {r.returncode})")
            print(r.stderr.strip()[-1500:])
            rows.append(dict(case="cli, fresh machine", clip=str(args.cli), total_s=took, rc=r.returncode))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
