"""``srgpu bench VIDEO`` (pipeline part): the throughput of each stage of a video upscale on
this machine, in frames per second, and which stage sets the end-to-end rate.

Stages, each measured alone on the same clip and settings:
  decode    ffmpeg decoding to raw planar frames through the pipe (the reader; on NVDEC where
            ``upscale_video`` would use it)
  upload    pinned host -> GPU copies of a frame's planes   } inside the engine's overlapped
  gpu       bicubic + SRCNN on luma, bicubic on chroma,     } processor (what upscale_video
            conversion back                                 } runs), one frame at a time,
  download  GPU -> pinned host copies of the upscaled planes } CUDA events around each stage
  encode    the encoder fed an upscaled frame through the pipe (the writer; other streams mapped)
  end-to-end  ``upscale_video`` itself: all of the above overlapped
"""

from __future__ import annotations

import resource
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..engine.base import Engine
from ..video.api import VideoError, VideoOptions, engine_gpu, open_reader, plan_video, upscale_video
from ..video.reader import Frame
from ..video.writer import Writer

SAMPLE_FRAMES = 8  # decoded frames kept for the GPU stages
ENCODE_SAMPLES = 2  # of them upscaled once and fed to the encoder alone, in turn
GPU_WARMUP = 2  # frames through the GPU stages before they are timed
GPU_FRAMES = 30  # frames whose stage times give the medians


@dataclass(frozen=True)
class StageResult:
    name: str
    frames: int
    seconds: float

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else float("inf")


@dataclass(frozen=True)
class VideoBenchReport:
    source: str
    input_size: tuple[int, int]
    output_size: tuple[int, int]
    scale: int
    engine: str
    codec: str
    preset: str | None
    crf: int | None
    stages: tuple[StageResult, ...]
    peak_gpu_bytes: int | None
    peak_host_bytes: int
    notes: tuple[str, ...] = field(default=())
    # CPU per frame during the end-to-end run: srgpu's own process, and its ffmpeg children
    # (decoder and encoder) -- what the machine's cores are shared between
    cpu_self_ms: float | None = None
    cpu_children_ms: float | None = None
    decoder: str = "software"  # or the NVDEC decoder (h264_cuvid, ...)
    # the end-to-end run split in three: until the first frame is handed to the encoder (plan,
    # children starting, first frame through every stage), the steady rate from the first to the
    # last frame handed on, and after the last (encoder flush, exit, the completeness check)
    startup_s: float | None = None
    steady_fps: float | None = None
    finish_s: float | None = None

    @property
    def bottleneck(self) -> str:
        parts = [s for s in self.stages if s.name != "end-to-end"]
        return min(parts, key=lambda s: s.fps).name

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stages"] = [{"name": s.name, "frames": s.frames, "seconds": round(s.seconds, 4), "fps": round(s.fps, 2)}
                       for s in self.stages]
        d["bottleneck"] = self.bottleneck
        return d


def synthetic_source(folder: Path, size: tuple[int, int] = (1920, 1080), frames: int = 240, rate: int = 24) -> Path:
    """A clip from ffmpeg's own test source (moving pattern + tone, x264 crf 18: the demo's
    renderer), for a bench with no file of the user's."""
    from .demo import ClipSpec, render_clip

    spec = ClipSpec(width=size[0], height=size[1], fps=rate, seconds=frames / rate)
    return render_clip(folder / f"synthetic_{size[0]}x{size[1]}_{frames}f.mp4", spec)


def bench_video(src: Path, engine: Engine, options: VideoOptions = VideoOptions(),
                log: Callable[[str], None] | None = None, max_frames: int | None = None) -> VideoBenchReport:
    say = log or (lambda _m: None)
    with tempfile.TemporaryDirectory(prefix="srgpu-bench-") as tmp:
        out = Path(tmp) / f"out{_output_suffix(options.encode.codec)}"
        job = plan_video(src, out, engine.scale, options, gpu=engine_gpu(engine))
        stages: list[StageResult] = []

        say("decode ...")
        decode, samples, timing = _decode_stage(job, max_frames)
        stages.append(decode)
        if hasattr(engine, "frame_processor") and getattr(engine, "device", None) is not None:
            say("upload / gpu / download ...")
            stages.extend(_gpu_stages(engine, job, samples))
            upscaled = _upscale(engine, job, samples[:ENCODE_SAMPLES])
        else:
            say("cpu engine ...")
            t0 = time.perf_counter()
            upscaled = _upscale(engine, job, samples[:ENCODE_SAMPLES])
            stages.append(StageResult("cpu", len(upscaled), time.perf_counter() - t0))
        say("encode ...")
        stages.append(_encode_stage(job, upscaled, timing))
        say("end-to-end ...")
        own0, children0 = cpu_seconds()
        handed: dict[str, float] = {}  # when the first and the latest frame went to the encoder

        def on_frame(_n: int, _total: int | None) -> None:
            now = time.perf_counter()
            handed.setdefault("first", now)
            handed["last"] = now

        t0 = time.perf_counter()
        result = upscale_video(src, out, engine, options, overwrite=True, progress=on_frame)
        t1 = time.perf_counter()
        stages.append(StageResult("end-to-end", result.frames, t1 - t0))
        own1, children1 = cpu_seconds()
        first, last = handed["first"], handed["last"]
    return VideoBenchReport(
        source=str(src), input_size=result.input_size, output_size=result.output_size, scale=engine.scale,
        engine=getattr(engine, "description", engine.name), codec=result.codec, preset=options.encode.preset,
        crf=options.encode.crf, stages=tuple(stages), peak_gpu_bytes=_gpu_pool_bytes(engine),
        peak_host_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, notes=result.notes,
        cpu_self_ms=1000 * (own1 - own0) / result.frames, cpu_children_ms=1000 * (children1 - children0) / result.frames,
        decoder=result.decoder, startup_s=first - t0, finish_s=t1 - last,
        steady_fps=(result.frames - 1) / (last - first) if result.frames > 1 and last > first else None)


def cpu_seconds() -> tuple[float, float]:
    """User + system CPU seconds of this process and of its finished (waited-for) children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _output_suffix(codec: str | None) -> str:
    return ".mov" if (codec or "").startswith("prores") else ".mkv"  # None: libx264 in .mkv


def _decode_stage(job: Any, max_frames: int | None) -> tuple[StageResult, list[Frame], tuple[Any, list[Frame]]]:
    reader = open_reader(job)
    samples: list[Frame] = []
    count = 0
    t0 = time.perf_counter()
    try:
        reader.start()
        for frame in reader.frames():
            if len(samples) < SAMPLE_FRAMES:
                samples.append(frame)
            count += 1
            if max_frames is not None and count >= max_frames:
                break
        seconds = time.perf_counter() - t0
    finally:
        reader.kill()
    if not samples:
        raise VideoError(f"{job.src}: no frames decoded")  # one error line from the CLI, not a traceback
    return StageResult("decode", count, seconds), samples, (reader.time_base, samples)


def _gpu_stages(engine: Any, job: Any, samples: list[Frame]) -> list[StageResult]:
    """Upload, compute and download of one frame, timed inside the engine's own overlapped
    processor (srgpu.engine.overlap, as ``upscale_video`` runs it) with CUDA events around each
    stage; frames go one at a time, so each stage is measured alone. Medians of GPU_FRAMES frames
    after GPU_WARMUP (the first may measure a plan and allocates the buffers)."""
    from ..engine.frames import FrameFormat
    from ..engine.overlap import OverlappedGPU

    planes = samples[0].planes
    fmt = FrameFormat(tuple(p.shape for p in planes), np.dtype(planes[0].dtype), tuple(job.specs),
                      job.layout.max_value)
    processor = OverlappedGPU(engine, fmt, slots=2, timed=True)
    times: dict[str, list[float]] = {"upload": [], "gpu": [], "download": []}
    try:
        pinned = []  # as the reader decodes them: into the processor's pinned input memory
        for p in planes:
            view = processor.input_buffer(p.nbytes).view(p.dtype)[:p.size].reshape(p.shape)
            view[...] = p
            pinned.append(view)
        for i in range(GPU_WARMUP + GPU_FRAMES):
            pending = processor.submit(pinned)
            stage_ms = pending.stage_ms()
            pending.release()
            if i >= GPU_WARMUP:
                for name, ms in stage_ms.items():
                    times[name].append(ms)
    finally:
        processor.close()
    return [StageResult(name, 1, statistics.median(ms) / 1000.0) for name, ms in times.items()]


def _upscale(engine: Engine, job: Any, frames: list[Frame]) -> list[list[np.ndarray]]:
    return [engine.upscale_frame(f.planes, job.specs, job.layout.max_value) for f in frames]


def _encode_stage(job: Any, ups: list[list[np.ndarray]], timing: tuple[Any, list[Frame]],
                  frames: int | None = None) -> StageResult:
    """The encoder alone, fed upscaled frames as fast as it takes them (``ups``, the sample
    frames upscaled once, repeated with the source's frame timing)."""
    time_base, decoded = timing
    step = (decoded[1].pts - decoded[0].pts) if len(decoded) > 1 else (decoded[0].duration or 1)
    n = frames or max(48, min(240, len(decoded) * 30))
    writer = Writer(job.plan)
    t0 = time.perf_counter()
    try:
        writer.start(time_base, decoded[0].pts)
        for i in range(n):
            writer.write(Frame(i, decoded[0].pts + i * step, step, ups[i % len(ups)]))
        writer.finish()
    finally:
        writer.kill()
        job.plan.tmp.unlink(missing_ok=True)
    return StageResult("encode", n, time.perf_counter() - t0)


def _gpu_pool_bytes(engine: Any) -> int | None:
    if getattr(engine, "device", None) is None:
        return None
    import cupy as cp

    # CuPy's pool keeps what it allocated, so what it holds now is what srgpu's peak needed
    return int(cp.get_default_memory_pool().total_bytes())


def format_report(r: VideoBenchReport) -> str:
    lines = [f"{r.source}: {r.input_size[0]}x{r.input_size[1]} -> {r.output_size[0]}x{r.output_size[1]} "
             f"(x{r.scale}), {r.engine}, {r.codec}"
             f"{' preset ' + r.preset if r.preset else ''}{' crf ' + str(r.crf) if r.crf is not None else ''}"
             f", decoded by {r.decoder}",
             f"{'stage':<12} {'fps':>9}"]
    for s in r.stages:
        lines.append(f"{s.name:<12} {s.fps:9.1f}")
    lines.append(f"bottleneck: {r.bottleneck}")
    if r.startup_s is not None and r.finish_s is not None:
        steady = f"then {r.steady_fps:.1f} fps, " if r.steady_fps is not None else ""
        lines.append(f"end to end: first frame to the encoder after {r.startup_s:.2f} s, {steady}"
                     f"{r.finish_s:.2f} s from the last frame to the finished file")
    if r.cpu_self_ms is not None and r.cpu_children_ms is not None:
        lines.append(f"CPU per frame, end to end: srgpu {r.cpu_self_ms:.1f} ms, its ffmpeg decoder and encoder "
                     f"{r.cpu_children_ms:.1f} ms")
    if r.peak_gpu_bytes is not None:
        lines.append(f"GPU memory held by srgpu: {r.peak_gpu_bytes / 2**20:.0f} MiB")
    lines.append(f"peak host memory (RSS): {r.peak_host_bytes / 2**20:.0f} MiB")
    return "\n".join(lines)
