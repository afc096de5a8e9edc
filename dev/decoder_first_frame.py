#!/usr/bin/env python3
"""Seconds from starting a chunk's decoder (ffmpeg, as srgpu.video.reader starts it: -ss at a chunk's
start, raw yuv420p on stdout) to its first whole frame, for the CPU's decoder and NVDEC (h264_cuvid):
one at a time, then N at once (as N chunk workers start their first chunks together).

    python3 dev/decoder_first_frame.py SRC [--at 0 15 30 45] [--together 4] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from srgpu.video.ffmpeg import ffmpeg_exe  # noqa: E402
from srgpu.video.probe import probe  # noqa: E402


def first_frame(src: Path, at: float, nvdec: bool, frame_bytes: int) -> float:
    cmd = [ffmpeg_exe(), "-nostdin", "-hide_banner", "-loglevel", "error", "-copyts", "-noautorotate",
           "-seek_timestamp", "1", "-noaccurate_seek", "-ss", f"{at:.6f}",
           *(["-c:0", "h264_cuvid", "-gpu:0", "0"] if nvdec else []),
           "-i", str(src), "-map", "0:0", "-f", "rawvideo", "-pix_fmt", "yuv420p", "pipe:1"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    got = 0
    assert proc.stdout is not None
    while got < frame_bytes:
        chunk = proc.stdout.read1(frame_bytes - got)
        if not chunk:
            raise SystemExit(f"no frame from {' '.join(cmd)}")
        got += len(chunk)
    took = time.perf_counter() - t0
    proc.kill()
    proc.wait()
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("src", type=Path)
    ap.add_argument("--at", type=float, nargs="+", default=[0.0, 15.0, 30.0, 45.0])
    ap.add_argument("--together", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    v = probe(a.src).main_video()
    frame_bytes = v.width * v.height * 3 // 2  # type: ignore[operator]
    out: dict = {}
    for nvdec in (False, True):
        name = "nvdec" if nvdec else "cpu"
        first_frame(a.src, 0.0, nvdec, frame_bytes)  # page cache, driver
        alone = [first_frame(a.src, at, nvdec, frame_bytes) for _ in range(a.repeat) for at in a.at]
        together: list[float] = []
        for _ in range(a.repeat):
            times: list[float] = []
            ts = [threading.Thread(target=lambda at=at: times.append(first_frame(a.src, at, nvdec, frame_bytes)))
                  for at in a.at[:a.together]]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            together += times
        out[name] = {"alone_median_s": round(statistics.median(alone), 3), "alone": [round(x, 3) for x in alone],
                     f"{a.together}_at_once_median_s": round(statistics.median(together), 3),
                     "at_once": [round(x, 3) for x in together]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
