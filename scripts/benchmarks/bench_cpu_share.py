#!/usr/bin/env python3
"""Where the CPU goes in `srgpu upscale` of a video: plain ffmpeg's CPU per frame against srgpu's
(its ffmpeg children, and its own Python process split by thread).

    python3 scripts/benchmarks/bench_cpu_share.py [--source SRC] [--presets ultrafast veryfast] [--rounds 2]
    python3 scripts/benchmarks/bench_cpu_share.py --slots --source SRC   # no GPU: preallocated slots stand in

The default source is the Big Buck Bunny clip of ../shared/data/video scaled to 1920x1080, x264
crf 18 (as scripts/benchmarks/bench_ffmpeg.py). With --slots the engine is replaced by preallocated output
planes (nothing is upscaled; the plain ffmpeg run is skipped), which isolates the pipeline's own
CPU (decoding pipe, copies, writer) on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "benchmarks"))
from bench_ffmpeg import default_source, ffmpeg  # noqa: E402
from srgpu.tools.bench_video import cpu_seconds  # noqa: E402
from srgpu.engine import GPUOptions, create_engine  # noqa: E402
from srgpu.engine.base import Engine
from srgpu.engine.frames import FrameFormat, FrameProcessor  # noqa: E402
from srgpu.model import random_model, resolve_model  # noqa: E402
from srgpu.video.api import EncodeOptions, VideoOptions, upscale_video  # noqa: E402


class Slot:
    def __init__(self, processor: "SlotProcessor", index: int) -> None:
        self.processor, self.index = processor, index

    def wait(self) -> list[np.ndarray]:
        return self.processor.outputs[self.index]

    def release(self) -> None:
        self.processor.give_back(self.index)


class SlotProcessor(FrameProcessor):
    """What the GPU path does on the host, minus CUDA: hand out the slot's (preallocated) output
    planes until the writer releases them. The GPU uploads each input by DMA from the reader's
    pinned buffer, which costs the host nothing, so nothing is copied here (the reader's buffers
    are plain memory: no pinned allocations are measured)."""

    in_flight = 3

    def __init__(self, engine: Engine, fmt: FrameFormat, slots: int) -> None:
        super().__init__(engine, fmt)
        self.outputs = [[np.full(sp.out_shape, 128, fmt.dtype) for sp in fmt.specs] for _ in range(slots)]
        self._free = list(range(slots))
        self._cv = threading.Condition()

    def give_back(self, index: int) -> None:
        with self._cv:
            self._free.append(index)
            self._cv.notify()

    def submit(self, planes):  # type: ignore[no-untyped-def]
        with self._cv:
            while not self._free:
                self._cv.wait()
            index = self._free.pop()
        return Slot(self, index)


class SlotEngine(Engine):
    name = "slots"

    def srcnn_plane(self, plane, out_shape, max_value):  # type: ignore[no-untyped-def]
        raise NotImplementedError("the slot engine only stands in for the video pipeline's GPU")

    bicubic_plane = srcnn_plane

    def frame_processor(self, fmt: FrameFormat, slots: int | None = None) -> FrameProcessor:
        return SlotProcessor(self, fmt, slots or 9)


class ThreadCPU:
    """CPU seconds of each of this process's threads, sampled from /proc (Linux) while they live."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, int], tuple[float, float]] = {}
        self._ticks = os.sysconf("SC_CLK_TCK")
        threading.Thread(target=self._run, daemon=True, name="cpu-sampler").start()

    def _run(self) -> None:
        while True:
            for t in threading.enumerate():
                try:
                    fields = Path(f"/proc/self/task/{t.native_id}/stat").read_text().rsplit(")", 1)[1].split()
                except (OSError, TypeError):
                    continue
                self.seen[(t.name, t.native_id)] = (int(fields[11]) / self._ticks, int(fields[12]) / self._ticks)
            time.sleep(0.1)

    def by_name(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for (name, _), (user, system) in self.seen.items():
            out[name][0] += user
            out[name][1] += system
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path)
    ap.add_argument("--presets", nargs="+", default=["ultrafast", "veryfast"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--crf", type=int, default=18)
    ap.add_argument("--slots", action="store_true", help="no GPU: preallocated slots stand in for the engine")
    args = ap.parse_args()
    threads = ThreadCPU()
    with tempfile.TemporaryDirectory(prefix="srgpu-cpu-share-") as tmp:
        src = args.source
        if src is None:
            src = default_source(Path(tmp))
        if args.slots:
            engine: Engine = SlotEngine(random_model("9-1-5", seed=1), 2)
        else:
            engine = create_engine("cuda", resolve_model("9-1-5", 2), 2, GPUOptions(precision="auto"))
        for preset in args.presets:
            for rnd in range(args.rounds):
                line = f"{preset:<10} round {rnd}:"
                if not args.slots:
                    own0, ch0 = cpu_seconds()
                    plain = ffmpeg("-i", str(src), "-vf", "scale=iw*2:ih*2:flags=bicubic", "-c:v", "libx264", "-preset",
                                   preset, "-crf", str(args.crf), "-c:a", "copy", str(Path(tmp) / "plain.mkv"))
                    _, ch1 = cpu_seconds()
                else:
                    plain = None
                before = threads.by_name()
                own1, ch1b = cpu_seconds()
                t0 = time.perf_counter()
                result = upscale_video(src, Path(tmp) / "srgpu.mkv", engine,
                                       VideoOptions(EncodeOptions(crf=args.crf, preset=preset), hwdec="no"),
                                       overwrite=True)  # "no": the CPU decoder, as this table was measured
                seconds = time.perf_counter() - t0
                own2, ch2 = cpu_seconds()
                n = result.frames
                if plain is not None:
                    line += f" plain {n / plain:6.1f} fps, CPU {1000 * (ch1 - ch0) / n:6.1f} ms/frame |"
                line += (f" srgpu {n / seconds:6.1f} fps, CPU children {1000 * (ch2 - ch1b) / n:6.1f}"
                         f" + own {1000 * (own2 - own1) / n:5.2f} ms/frame")
                print(line, flush=True)
                time.sleep(0.25)  # the sampler's last look at the finished threads
                after = threads.by_name()
                for name, (user, system) in sorted(after.items(), key=lambda kv: -sum(kv[1])):
                    u0, s0 = before.get(name, [0.0, 0.0])
                    if (user - u0) + (system - s0) > 0:
                        print(f"    {name:<24} user {1000 * (user - u0) / n:5.2f}  sys {1000 * (system - s0) / n:5.2f} ms/frame")


if __name__ == "__main__":
    main()
