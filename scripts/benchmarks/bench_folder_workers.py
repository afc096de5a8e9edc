#!/usr/bin/env python3
"""A folder of videos: one srgpu process (srgpu.batch.local.run_batch: the videos one after another,
each its own overlapped pipeline) against the folder's files spread over W worker processes
(srgpu.batch.pool_files.run_files on srgpu.batch.pool.LocalPool, several videos encoded at once), for
each W asked for, on the same folder and settings; the workers' start is counted.

    python3 scripts/benchmarks/bench_folder_workers.py [--files 8] [--seconds 10] [--workers 2 4]
        [--device auto] [--gpus all] [--codec libx264] [--preset medium] [--json OUT.json]

The folder is --files cuts of --seconds each of the 1080p SMPTE clip of ../shared/data/video
(stream copies at its keyframes, with their audio), or the videos of --folder.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from srgpu.batch.pool_files import run_files  # noqa: E402
from srgpu.engine import GPUOptions, create_engine  # noqa: E402
from srgpu.batch.plan import plan_batch
from srgpu.batch.local import run_batch  # noqa: E402
from srgpu.model import resolve_model  # noqa: E402
from srgpu.video.api import EncodeOptions, VideoOptions  # noqa: E402
from srgpu.batch.pool import EngineSpec, LocalPool, encoder_threads, plan_workers  # noqa: E402
from bench_chunks import count_frames, ffmpeg, shared_clip  # noqa: E402


def make_folder(folder: Path, files: int, seconds: float) -> Path:
    src = shared_clip("smpte_1080p25_h264_aac.mp4")
    folder.mkdir()
    for k in range(files):  # the clip is short: cuts wrap around it
        ffmpeg("-stream_loop", "-1", "-ss", f"{k * seconds % 8:g}", "-i", str(src), "-t", f"{seconds}", "-map", "0",
               "-c", "copy", str(folder / f"cut{k:03d}.mp4"))
    return folder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folder", type=Path, help="a folder of videos (default: cuts of the 1080p clip)")
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--workers", type=int, nargs="+", default=None,
                    help="worker counts to time (default: srgpu's default for this machine)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--gpus", default=None)
    ap.add_argument("--model", default="9-1-5")
    ap.add_argument("--precision", default="auto", choices=["fp32", "fp16", "auto"])
    ap.add_argument("--codec", default="libx264")
    ap.add_argument("--preset", default="medium")
    ap.add_argument("--crf", type=int, default=18)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    scale = 2
    options = VideoOptions(EncodeOptions(codec=args.codec, preset=args.preset, crf=args.crf))
    model = resolve_model(args.model, scale)
    counts = args.workers or [plan_workers(args.device, args.gpus).workers]

    with tempfile.TemporaryDirectory(prefix="srgpu-bench-folder-") as tmp:
        folder = args.folder or make_folder(Path(tmp) / "in", args.files, args.seconds)
        frames = sum(count_frames(p) for p in sorted(folder.iterdir()) if p.is_file())
        runs: dict[str, list[float]] = {}
        engine = create_engine(args.device, model, scale, GPUOptions(precision=args.precision))
        for _ in range(args.rounds):
            out = Path(tmp) / "out"
            t0 = time.perf_counter()
            result = run_batch(plan_batch(folder, out), engine, options)
            runs.setdefault("one_process", []).append(time.perf_counter() - t0)
            assert not result.failed, [o.message for o in result.failed]
            shutil.rmtree(out)
            for w in counts:
                wplan = plan_workers(args.device, args.gpus, w)
                video = VideoOptions(options.encode, encoder_threads=encoder_threads(wplan.workers))
                t0 = time.perf_counter()
                with LocalPool(EngineSpec(model, scale, precision=args.precision), wplan.devices) as pool:
                    result = run_files(plan_batch(folder, out), pool, video)
                runs.setdefault(f"workers_{w}", []).append(time.perf_counter() - t0)
                assert not result.failed, [o.message for o in result.failed]
                shutil.rmtree(out)
                print(f"{wplan.describe()}: {frames / runs[f'workers_{w}'][-1]:.1f} fps", file=sys.stderr, flush=True)
        engine.close()
        fps = {k: round(frames / statistics.median(v), 2) for k, v in runs.items()}
        report = {"date": time.strftime("%Y-%m-%d"), "host": platform.node(), "cpus": os.cpu_count(),
                  "engine": getattr(engine, "description", engine.name), "files": len(list(folder.iterdir())),
                  "frames": frames, "codec": args.codec, "preset": args.preset, "crf": args.crf,
                  "fps": fps, "speedup": {k: round(v / fps["one_process"], 3) for k, v in fps.items()},
                  "seconds": {k: [round(s, 2) for s in v] for k, v in runs.items()}}
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
