"""``srgpu bench FOLDER``: a folder of images timed three ways in one run.

1. srgpu: ``run_batch`` on the folder into a temporary folder, as ``srgpu upscale`` runs it. With a
   GPU engine twice: a first run (an empty plan cache: the plan choice is part of it) and a run
   with the plans that first run cached (a user's second run); with the CPU engine once.
2. The codec floor: the same files read, resized by OpenCV's bicubic (cv2.resize, INTER_CUBIC) and
   written in the same formats and settings, on as many threads: what the codecs alone cost, the
   least a folder run could take.
3. srgpu's own split of each run (srgpu.batch.stages.StageTimes): seconds of decoding and of encoding
   summed over the worker threads (and that sum over the thread count: the stage's wall time if it
   ran alone and perfectly spread), the engine's seconds, and how long the engine waited for reads
   and for writers.

The files are read once before anything is timed, so that every run finds them in the page cache.
"""

from __future__ import annotations

import datetime
import platform
import resource
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import cv2
import numpy as np

from .. import __version__
from ..engine.base import Engine
from ..images.files import encode_params
from ..batch.plan import BatchError, plan_batch
from ..batch.local import ImageOptions, run_batch
from ..batch.stages import StageTimes

EngineFactory = Callable[[Path | None], Engine]  # plan cache folder (None: the CPU engine) -> engine


@dataclass(frozen=True)
class FolderRun:
    """One srgpu run over the folder."""

    label: str  # "cpu", "first run" or "warm plans"
    seconds: float  # run_batch, end to end (the engine made before)
    images: int  # upscaled
    failed: int
    cpu_seconds: float  # user + system time of this process (every thread) during the run
    plan_seconds: float  # choosing plans (the GPU engine's planner), within ``seconds``
    plans_measured: int
    stages: StageTimes
    # the engine's start-up self-checks of its plans (kernel load included), within ``seconds``:
    # every run pays them once per plan, cached or not; a first run's are within plan_seconds
    check_seconds: float = 0.0

    @property
    def images_per_second(self) -> float:
        return self.images / self.seconds if self.seconds > 0 else float("inf")

    def to_dict(self, floor_seconds: float) -> dict[str, Any]:
        threads = max(1, self.stages.threads)
        return {"label": self.label, "seconds": round(self.seconds, 4), "images": self.images, "failed": self.failed,
                "images_per_s": round(self.images_per_second, 2), "cpu_s": round(self.cpu_seconds, 3),
                "plan_s": round(self.plan_seconds, 3), "plans_measured": self.plans_measured,
                "check_s": round(self.check_seconds, 3),
                "times_codec_floor": round(self.seconds / floor_seconds, 3) if floor_seconds > 0 else None,
                "stages": self.stages.to_dict(),
                "stage_wall_s": {"read": round(self.stages.read / threads, 4), "engine": round(self.stages.process, 4),
                                 "write": round(self.stages.write / threads, 4)}}


@dataclass(frozen=True)
class FolderBenchReport:
    folder: str
    images: int
    input_megapixels: float
    output_megapixels: float
    formats: dict[str, int]  # output extension -> files
    scale: int
    model: str
    engine: str
    threads: int  # reader threads, and as many writer threads
    png_compression: int | None
    floor_seconds: float
    floor_cpu_seconds: float
    runs: tuple[FolderRun, ...]
    date: str
    versions: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"folder": self.folder, "images": self.images, "input_megapixels": round(self.input_megapixels, 3),
                "output_megapixels": round(self.output_megapixels, 3), "formats": self.formats, "scale": self.scale,
                "model": self.model, "engine": self.engine, "workers": self.threads,  # (the JSON's name for them, kept)
                "png_compression": self.png_compression,
                "codec_floor": {"seconds": round(self.floor_seconds, 4), "cpu_s": round(self.floor_cpu_seconds, 3),
                                "images_per_s": round(self.images / self.floor_seconds, 2) if self.floor_seconds else None},
                "runs": [r.to_dict(self.floor_seconds) for r in self.runs], "date": self.date,
                "versions": self.versions}


class _TimedPlanner:
    """The engine's planner, timed (the plan choice a first run pays)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.count = 0

    def measure(self, engine: Any, lr_shape: tuple[int, int], hr_shape: tuple[int, int], bits: int) -> Any:
        t0 = time.perf_counter()
        try:
            return self.inner.measure(engine, lr_shape, hr_shape, bits)
        finally:
            self.seconds += time.perf_counter() - t0
            self.count += 1


class _TimedChecks:
    """The engine's ``check_plan``, timed (what a run with cached plans pays too)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.inner = engine.check_plan
        self.seconds = 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.inner(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t0


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def codec_floor(pairs: list[tuple[Path, Path]], scale: int, threads: int,
                png_compression: int | None) -> tuple[float, float]:
    """(seconds, CPU seconds) to read every source, resize it by ``scale`` with cv2.resize
    (bicubic) and write it to its destination with srgpu's encoder settings, on ``threads`` threads."""

    def one(pair: tuple[Path, Path]) -> None:
        src, dst = pair
        image = cv2.imdecode(np.fromfile(str(src), np.uint8), cv2.IMREAD_UNCHANGED)
        if image is None:
            return  # srgpu reports it as failed; the floor skips it
        h, w = image.shape[:2]
        big = cv2.resize(image, (w * scale, h * scale), interpolation=cv2.INTER_CUBIC)
        cv2.imwrite(str(dst), big, encode_params(dst.suffix.lower(), 95, png_compression))

    cpu0, t0 = _cpu_seconds(), time.perf_counter()
    with ThreadPoolExecutor(threads, thread_name_prefix="srgpu-codec-floor") as pool:
        list(pool.map(one, pairs))
    return time.perf_counter() - t0, _cpu_seconds() - cpu0


def _srgpu_run(label: str, folder: Path, out: Path, engine: Engine, fmt: str | None, images: ImageOptions) -> FolderRun:
    planner = getattr(engine, "planner", None)
    timed = _TimedPlanner(planner) if planner is not None else None
    if timed is not None:
        engine.planner = timed  # type: ignore[attr-defined]
    checks = _TimedChecks(engine) if hasattr(engine, "check_plan") else None
    if checks is not None:
        engine.check_plan = checks  # type: ignore[attr-defined]
    plan = plan_batch(folder, out, fmt=fmt)
    cpu0 = _cpu_seconds()
    try:
        result = run_batch(plan, engine, images=images)
    finally:
        if checks is not None:
            del engine.check_plan  # type: ignore[attr-defined]
    cpu = _cpu_seconds() - cpu0
    return FolderRun(label, result.seconds, len(result.done), len(result.failed), cpu,
                     timed.seconds if timed else 0.0, timed.count if timed else 0, result.stages,  # type: ignore[arg-type]
                     checks.seconds if checks else 0.0)


def bench_folder(folder: Path, make_engine: EngineFactory, gpu: bool, fmt: str | None = None,
                 images: ImageOptions = ImageOptions(), log: Callable[[str], None] | None = None) -> FolderBenchReport:
    """Time ``folder`` three ways (module docstring). ``make_engine(cache_dir)``: a fresh engine
    whose plans are cached in ``cache_dir``; ``gpu``: whether it is a GPU engine (then a first run
    on an empty cache and a warm run follow each other)."""
    say = log or (lambda _m: None)
    folder = Path(folder)
    with tempfile.TemporaryDirectory(prefix="srgpu-bench-folder-") as tmp:
        root = Path(tmp)
        plan = plan_batch(folder, root / "floor", fmt=fmt)
        pairs = [(j.src, j.dst) for j in plan.jobs if j.kind == "image" and j.problem is None]
        if not pairs:
            raise BatchError(f"{folder}: no images to benchmark")
        say(f"reading {len(pairs)} images once (page cache) ...")
        in_px = out_px = 0
        for src, _ in pairs:
            image = cv2.imdecode(np.fromfile(str(src), np.uint8), cv2.IMREAD_UNCHANGED)
            if image is not None:
                in_px += image.shape[0] * image.shape[1]
        threads = images.threads
        runs: list[FolderRun] = []
        cache = root / "plans"
        engine = make_engine(cache if gpu else None)
        scale, description, model = engine.scale, getattr(engine, "description", engine.name), engine.model.name
        out_px = in_px * scale * scale
        for dst in {d.parent for _, d in pairs}:
            dst.mkdir(parents=True, exist_ok=True)
        say(f"codec floor: read + cv2.resize + write on {threads} threads ...")
        floor_s, floor_cpu = codec_floor(pairs, scale, threads, images.png_compression)
        with engine:
            say("srgpu" + (" (first run: empty plan cache) ..." if gpu else " ..."))
            runs.append(_srgpu_run("first run" if gpu else "cpu", folder, root / "run1", engine, fmt, images))
        if gpu:
            say("srgpu (warm plans: the cache the first run left) ...")
            with make_engine(cache) as warm:
                runs.append(_srgpu_run("warm plans", folder, root / "run2", warm, fmt, images))
    return FolderBenchReport(
        folder=str(folder), images=len(pairs), input_megapixels=in_px / 1e6, output_megapixels=out_px / 1e6,
        formats=dict(sorted(Counter(d.suffix.lower() for _, d in pairs).items())), scale=scale, model=model,
        engine=str(description), threads=threads, png_compression=images.png_compression, floor_seconds=floor_s,
        floor_cpu_seconds=floor_cpu, runs=tuple(runs), date=datetime.date.today().isoformat(),
        versions={"srgpu": __version__, "opencv": cv2.__version__, "numpy": np.__version__,
                  "python": platform.python_version(), "cpu": platform.processor() or platform.machine()})


def format_report(r: FolderBenchReport) -> str:
    """The table ``srgpu bench FOLDER`` prints."""
    formats = ", ".join(f"{n} {ext}" for ext, n in r.formats.items())
    png = "default (fast)" if r.png_compression is None else str(r.png_compression)
    lines = [f"folder: {r.folder}: {r.images} images ({formats}), {r.input_megapixels:.1f} Mpx in, "
             f"{r.output_megapixels:.1f} Mpx out, x{r.scale}",
             f"engine: {r.engine}; model {r.model}; {r.threads} reader and {r.threads} writer threads; "
             f"PNG compression {png}; {r.date}", "",
             f"{'':24s} {'seconds':>9s} {'images/s':>9s} {'x floor':>8s} {'CPU s':>8s} {'plans s':>8s} {'checks s':>8s}",
             f"{'codec floor':24s} {r.floor_seconds:9.2f} {r.images / r.floor_seconds:9.1f} {1.0:8.2f} "
             f"{r.floor_cpu_seconds:8.1f} {'':>8s}"]
    for run in r.runs:
        lines.append(f"{'srgpu, ' + run.label:24s} {run.seconds:9.2f} {run.images_per_second:9.1f} "
                     f"{run.seconds / r.floor_seconds:8.2f} {run.cpu_seconds:8.1f} {run.plan_seconds:8.2f} "
                     f"{run.check_seconds:8.2f}")
    lines += ["", "srgpu's own split (read and write: thread-seconds, and over the threads; engine: its thread):"]
    for run in r.runs:
        s = run.stages
        n = max(1, s.threads)
        lines.append(f"  {run.label}: read {s.read:.2f} s ({s.read / n:.2f} s over {n}), engine {s.process:.2f} s, "
                     f"write {s.write:.2f} s ({s.write / n:.2f} s over {n}); the engine waited "
                     f"{s.waiting_for_reads:.2f} s for reads, {s.waiting_for_writes:.2f} s for writers"
                     + (f"; {run.failed} failed" if run.failed else ""))
    return "\n".join(lines)
