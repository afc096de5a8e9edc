#!/usr/bin/env python3
"""What a chunk costs the encoder, against what the chunk planner knows before encoding: its
frames and the source's coded bytes in it (srgpu.video.chunks.SourceScan.sizes). Each chunk of
srgpu's plan for the source (``--workers``, the default cost model) is decoded exactly as srgpu
decodes it (its window), scaled to 3840x2160 (bicubic) and encoded (x264, ``--preset``), one at a
time, forward then backward (the mean of the two); its ffmpeg's CPU seconds are fitted as a*frames and as a*frames + b*bytes (least squares),
and each fit's worst error on a chunk printed; ``--chunk-seconds`` for more, shorter chunks (more
points for the fit). CPU only.

    python3 dev/chunk_cost.py [--seconds 60] [--workers 4] [--preset veryfast] [--chunk-seconds S] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "benchmarks"))


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--source", type=Path)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--preset", default="veryfast")
    ap.add_argument("--chunk-seconds", type=float, default=None, help="chunks this long (more points for the fit)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    import numpy as np

    from bench_chunks import default_source
    from srgpu.video import chunks as chunking
    from srgpu.video.ffmpeg import ffmpeg_exe
    from srgpu.video.reader import decode_args

    work = Path(tempfile.mkdtemp())
    src = a.source or default_source(work, a.seconds)
    scan = chunking.scan(src, 0)
    assert not isinstance(scan, str), scan
    plan = chunking.plan(scan, a.workers, a.chunk_seconds)
    def cost(c: chunking.Chunk) -> float:
        args = decode_args(src, 0, None, (), "scale=3840:2160:flags=bicubic", c.window())
        before = children_cpu()
        subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", *args, "-c:v", "libx264", "-preset",
                        a.preset, "-crf", "18", "-f", "null", "-"], check=True)
        return children_cpu() - before

    # forward, then backward: this machine's speed drifts by a quarter over minutes (a block timed
    # again later cost 25 % more), and the mean of the two passes cancels a steady drift
    passes: dict[int, list[float]] = {c.index: [] for c in plan}
    for c in [*plan, *reversed(plan)]:
        passes[c.index].append(cost(c))
    rows = []
    for c in plan:
        rows.append({"index": c.index, "frames": c.last - c.first, "bytes": sum(scan.sizes[c.first:c.last]),
                     "cpu_s": round(sum(passes[c.index]) / 2, 3), "passes": [round(t, 3) for t in passes[c.index]]})
        print(json.dumps(rows[-1]), flush=True)
    f = np.array([r["frames"] for r in rows], float)
    b = np.array([r["bytes"] for r in rows], float)
    y = np.array([r["cpu_s"] for r in rows])
    report: dict = {"source": str(src), "frames": scan.frames, "preset": a.preset, "chunks": rows}
    for name, x in (("frames", f[:, None]), ("frames+bytes", np.stack([f, b], 1))):
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        err = x @ coef - y
        report[name] = {"coef": [float(v) for v in coef], "worst_error_share": float(np.max(np.abs(err) / y)),
                        "rms_error_share": float(np.sqrt(np.mean((err / y) ** 2)))}
    if "frames+bytes" in report:
        a_, b_ = report["frames+bytes"]["coef"]
        mean_bytes = float(b.sum() / f.sum())
        report["bytes_share_of_cost"] = b_ * mean_bytes / (a_ + b_ * mean_bytes)  # at the mean frame's bytes
    print(json.dumps({k: v for k, v in report.items() if k != "chunks"}, indent=1))
    if a.json:
        a.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
