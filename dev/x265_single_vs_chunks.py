#!/usr/bin/env python3
"""Issue 22 check: one srgpu process and srgpu's chunks, x265 medium, on the bench's default source
(--seconds s of Big Buck Bunny at 1080p): output bytes, frames, frame types. The chunked file came
out twice the single one's size in a bench_chunks run (2026-11-24); this says which is off."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "scripts" / "benchmarks"))
import bench_chunks as b  # noqa: E402
from srgpu.engine import GPUOptions, create_engine  # noqa: E402
from srgpu.model import resolve_model  # noqa: E402
from srgpu.video import chunked  # noqa: E402
from srgpu.video.api import EncodeOptions, VideoOptions, upscale_video  # noqa: E402
from srgpu.video.ffmpeg import ffmpeg_exe  # noqa: E402
from srgpu.batch.pool import EngineSpec, LocalPool  # noqa: E402


def main() -> None:  # the pool's workers import this module: nothing runs at import
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    tmp = Path("/tmp/x265chk"); tmp.mkdir(exist_ok=True)
    src = b.default_source(tmp, seconds)
    model = resolve_model("9-1-5", 2)
    options = VideoOptions(EncodeOptions(codec="libx265", preset="medium", crf=18))
    engine = create_engine("auto", model, 2, GPUOptions())
    single, parts = tmp / "single.mkv", tmp / "chunks.mkv"
    t0 = time.perf_counter(); upscale_video(src, single, engine, options, overwrite=True); t1 = time.perf_counter()
    spec = EngineSpec(model, 2)
    cj = chunked.plan_chunked(src, parts, spec.identity(), options, overwrite=True, workers=4, gpu=0,
                              chunk_seconds=seconds / 4)
    assert not isinstance(cj, str), cj
    with LocalPool(spec, ["cuda:0"] * 4) as pool:
        chunked.upscale_chunked(cj, pool, overwrite=True)
    t2 = time.perf_counter()
    for f, took in ((single, t1 - t0), (parts, t2 - t1)):
        info = subprocess.run([ffmpeg_exe(), "-hide_banner", "-i", str(f), "-vf", "showinfo", "-f", "null", "-"],
                              capture_output=True, text=True).stderr
        types = {t: info.count(f"type:{t}") for t in "IPB"}
        data = f.read_bytes()
        m = re.search(rb"x265 \(build.{0,3000}", data)
        opts = m.group(0).decode(errors="replace").split(" - ")[-1].split() if m else []
        keep = [o for o in opts if o.split("=")[0] in ("fps", "crf", "keyint", "min-keyint", "open-gop", "no-open-gop", "bframes", "input-res", "input-csp")]
        print(f.name, f"{len(data) / 1e6:.1f} MB", f"{took:.1f} s", types, keep, flush=True)
    print("chunks:", [(c.first, c.last, c.keyframe is not None) for c in cj.chunks])


if __name__ == "__main__":
    main()
