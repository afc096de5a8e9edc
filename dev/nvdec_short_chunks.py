#!/usr/bin/env python3
"""Which decoder made each chunk of a video cut into short chunks, on worker processes of one GPU
(the smpte clip's first SECONDS, chunks of CHUNK s, hwdec auto): (index, frames, decoder,
handover_at, nvdec_failed, seconds) per chunk, and the run's notes. GPU machine only.

    python3 dev/nvdec_short_chunks.py [--seconds 4] [--chunk 0.5] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--chunk", type=float, default=0.5)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    from srgpu.batch.pool import EngineSpec, LocalPool
    from srgpu.model import random_model
    from srgpu.video import chunked, ffmpeg
    from srgpu.video.options import EncodeOptions, VideoOptions

    work = Path(tempfile.mkdtemp())
    clip = work / "clip.mp4"
    subprocess.run([ffmpeg.ffmpeg_exe(), "-v", "error", "-i", "shared/data/video/smpte_1080p25_h264_aac.mp4", "-t",
                    str(a.seconds), "-map", "0", "-c", "copy", str(clip)], check=True)
    spec = EngineSpec(random_model("9-1-5", seed=5, scale=2), 2, device="cuda:0", precision="fp32")
    options = VideoOptions(EncodeOptions(codec="ffv1"), hwdec="auto")
    cj = chunked.plan_chunked(clip, work / "out.mkv", spec.identity(), options, workers=a.workers,
                              chunk_seconds=a.chunk, gpu=0)
    results: list = []
    with LocalPool(spec, ["cuda:0"] * a.workers) as pool:
        run = pool.run
        pool.run = lambda tasks, on_frames, on_result, *r, **k: run(  # type: ignore[method-assign]
            tasks, on_frames, lambda x: (results.append(x), on_result(x)), *r, **k)
        result = chunked.upscale_chunked(cj, pool)
    print(json.dumps({"chunks": sorted((r.index, r.frames, r.decoder, r.handover_at, r.nvdec_failed,
                                        round(r.seconds, 3)) for r in results),
                      "decoder": result.decoder, "notes": list(result.notes)}))


if __name__ == "__main__":
    main()
