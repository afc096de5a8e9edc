#!/usr/bin/env python3
"""Where one 1080p -> 4K pipeline's GPU memory goes, measured with nvidia-smi (issue 43).

Each part is measured alone on GPU ``--gpu`` (idle before each), as the GPU's memory.used less its
idle figure:

- ``context``: a Python process that creates CuPy's CUDA context on the GPU and nothing else;
- ``engine``: the same process after srgpu's GPU engine is made (kernels built and loaded);
- ``processor``: after the video pipeline's frame processor for the source's format, with the
  pipeline's slot count, has upscaled ``--frames`` frames (CuPy's pool and the engine's buffers;
  CuPy's own count of its pool is printed beside);
- ``nvdec``: an ffmpeg process decoding the source on NVDEC (h264_cuvid, as srgpu runs it), peak;
- ``pipeline``: ``srgpu upscale SRC --gpus G --chunk-seconds 0`` (one pipeline: both processes),
  peak over the run; and ``--workers W`` on the same GPU with ``--chunk-seconds 10`` (peak / W);

    python3 scripts/benchmarks/bench_gpu_memory.py --source clip1080.mkv --gpu 0 --json mem.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

CHILD = r"""
import json, sys, numpy as np
gpu, src, frames = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
def stage(name, **kw):
    print(json.dumps({"stage": name, **kw}), flush=True)
    sys.stdin.readline()  # the parent has read nvidia-smi
import cupy as cp
cp.cuda.Device(gpu).use()
cp.empty(1)
stage("context")
from srgpu.engine import create_engine
from srgpu.model import resolve_model
from srgpu.video.probe import probe
from srgpu.engine.frames import FrameFormat, PlaneSpec
engine = create_engine(f"cuda:{gpu}", resolve_model(None, 2), 2)
stage("engine")
v = probe(__import__("pathlib").Path(src)).main_video()
h, w = v.height, v.width
shapes = ((h, w), (h // 2, w // 2), (h // 2, w // 2))
specs = (PlaneSpec((2 * h, 2 * w), True), PlaneSpec((h, w), False), PlaneSpec((h, w), False))
fmt = FrameFormat(shapes, np.dtype(np.uint8), specs, 255.0)
proc = engine.frame_processor(fmt, 8 + 5)  # the pipeline's default: queue depth + 5
rng = np.random.default_rng(0)
planes = [rng.integers(0, 256, s, dtype=np.uint8) for s in shapes]
pending = []
for i in range(frames):
    bufs = []
    for p in planes:
        view = proc.input_buffer(p.nbytes).view(p.dtype)[:p.size].reshape(p.shape)
        view[...] = p
        bufs.append(view)
    pending.append(proc.submit(bufs))
    if len(pending) > 3:
        x = pending.pop(0); x.wait(); x.release()
for x in pending:
    x.wait(); x.release()
cp.cuda.Device(gpu).synchronize()
pool = cp.get_default_memory_pool()
stage("processor", cupy_pool_used_mib=round(pool.used_bytes() / 2**20, 1),
      cupy_pool_total_mib=round(pool.total_bytes() / 2**20, 1))
"""


def used_mib(gpu: int) -> int:
    out = subprocess.run(["nvidia-smi", f"--id={gpu}", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def peak_while(gpu: int, cmd: list[str], log: Path) -> tuple[int, int, float]:
    """(peak MiB used on ``gpu`` while ``cmd`` runs, its exit status, its seconds)."""
    peak = [0]
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], used_mib(gpu))
            time.sleep(0.2)

    t = threading.Thread(target=poll, daemon=True)
    t0 = time.perf_counter()
    t.start()
    with open(log, "a") as lf:
        rc = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT).returncode
    done.set()
    t.join()
    return peak[0], rc, round(time.perf_counter() - t0, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, required=True, help="a 1080p H.264 video")
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from srgpu.video.ffmpeg import ffmpeg_exe

    g = args.gpu
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "source": str(args.source), "gpu": g}
    report["gpu_name"] = subprocess.run(["nvidia-smi", f"--id={g}", "--query-gpu=name", "--format=csv,noheader"],
                                        capture_output=True, text=True).stdout.strip()
    idle = report["idle_mib"] = used_mib(g)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(g), str(args.source), str(args.frames)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert child.stdin and child.stdout
    for line in child.stdout:
        row = json.loads(line)
        time.sleep(0.5)
        row["mib"] = used_mib(g) - idle
        report[row.pop("stage")] = row
        child.stdin.write("\n")
        child.stdin.flush()
    if child.wait():
        raise SystemExit(f"the in-process stages failed (exit {child.returncode})")
    with tempfile.TemporaryDirectory(prefix="srgpu-mem-") as tmp:
        log = Path(tmp) / "log.txt"
        time.sleep(1.0)
        idle = used_mib(g)
        nvdec = [ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-c:v", "h264_cuvid", "-gpu", str(g),
                 "-i", str(args.source), "-frames:v", "600", "-f", "null", "-"]
        peak, rc, s = peak_while(g, nvdec, log)
        report["nvdec"] = {"mib": peak - idle, "rc": rc, "seconds": s}
        out = Path(tmp) / "out.mkv"
        one = [sys.executable, "-m", "srgpu", "upscale", str(args.source), "-o", str(out), "--gpus", str(g),
               "--chunk-seconds", "0", "--preset", "ultrafast"]
        peak, rc, s = peak_while(g, one, log)
        report["pipeline"] = {"mib": peak - idle, "rc": rc, "seconds": s, "command": " ".join(one[1:])}
        out.unlink(missing_ok=True)
        many = [sys.executable, "-m", "srgpu", "upscale", str(args.source), "-o", str(out), "--gpus", str(g),
                "--workers", str(args.workers), "--chunk-seconds", "10", "--preset", "ultrafast"]
        peak, rc, s = peak_while(g, many, log)
        report["workers"] = {"workers": args.workers, "mib": peak - idle, "mib_per_worker": round((peak - idle) / args.workers),
                             "rc": rc, "seconds": s, "command": " ".join(many[1:])}
        if any(report[k]["rc"] for k in ("nvdec", "pipeline", "workers")):
            report["log_tail"] = log.read_text()[-3000:]
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
