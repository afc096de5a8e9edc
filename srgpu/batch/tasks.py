"""One file of a batch, run: an image file read, upscaled and published (upscale_image_file), a video
(run_video), each job made ready first (prepare_job); and the same as a task for the workers that make a long
video's chunks.

One file of a folder (an image or a whole video) as a task for the workers that make a long
video's chunks (srgpu.batch.pool: this machine's worker processes; srgpu.batch.cluster: a Dask cluster):
``FileTask.execute(engine, progress)`` on whichever worker takes it, ``FileResult`` back.

A task names files, it carries no pixels: the worker reads the source and publishes the output
itself, under a temporary name first and by the rename that never replaces what the run did not
mean to replace (srgpu.outputs), exactly as the in-process batch does. So a worker killed mid-file
leaves at most a temporary (swept once its process is gone), and the task given to another worker
makes the whole file again. What a file becomes (skip, redo, fail before running) and the
folder's manifest are the coordinator's business (srgpu.batch.pool_files), never a worker's.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .. import outputs
from ..engine.base import Engine
from ..errors import ImageFileError
from ..images.files import read_image_data, write_image_atomic
from ..images.upscale import RowsCallback, _check_alpha, fit_to_format, format_notes, image_processor_for
from ..outputs import OutputExistsError
from ..video.options import VideoOptions
from .plan import BatchPlan, FramesCallback, Job, Outcome, _same, unsupported, video_api
from .resume import JobStat, Resume, ToRun

if TYPE_CHECKING:
    from ..engine.imageproc import ImageProcessor
    from ..video.api import VideoJob

Progress = Callable[[int], None]

# one image path per engine, kept for the worker's next images (a GPU engine's pinned buffers and
# slots are made once, not per file). A worker keeps its engine for its whole life (one per process
# here, one per thread on a Dask worker), so the path lives as long: keyed by the engine's id, the
# engine held with it so that the id is never another's
_processors: dict[int, tuple[Any, Any]] = {}


@dataclass(frozen=True)
class FileTask:
    """One job of a folder plan (its index in the plan, for the coordinator), with how it runs:
    whether publishing may replace what is at the output's name (decided by the coordinator), the
    video settings (with the x264 threads where several videos run at once) and the PNG level."""

    index: int
    job: Job
    replace: bool
    video: VideoOptions = VideoOptions()
    png_compression: int | None = None
    max_pixels: int | None = None  # image files declaring more fail alone (ImageOptions.max_pixels)

    def execute(self, engine: Any, progress: Progress | None = None) -> "FileResult":
        return run_file(self, engine, progress)


@dataclass(frozen=True)
class FileResult:
    """What became of a task's file: its outcome (done or failed, and why) and, when done, the
    size written (for the folder's manifest) and the video frames made."""

    index: int
    outcome: Outcome
    size: int | None = None
    frames: int = 0


def run_file(task: FileTask, engine: Any, progress: Progress | None = None) -> FileResult:
    """Upscale the task's file with ``engine``; per-file problems (unreadable, corrupt, a video that
    fails, an output that appeared meanwhile) are a failed outcome, as in srgpu.batch.local.run_batch.
    ``progress(n)``: video frames made (negative: taken back, where a video is decoded again)."""
    job = task.job
    if job.kind == "image":
        outcome, size = upscale_image_file(job, task.replace, _processor(engine), task.png_compression,
                                           max_pixels=task.max_pixels)
        return FileResult(task.index, outcome, size)
    started = time.perf_counter()
    counted = [0]

    def frames(n: int, total: int | None = None) -> None:
        counted[0] += n
        if progress is not None:
            progress(n)

    outcome = replace(run_video(job, task.replace, engine, task.video, frames), seconds=time.perf_counter() - started)
    size = None
    if outcome.status == "done":
        try:
            size = job.dst.stat().st_size
        except OSError:
            size = None  # gone already: nothing to record
    return FileResult(task.index, outcome, size, counted[0] if outcome.status == "done" else 0)


def _processor(engine: Any) -> Any:
    held = _processors.get(id(engine))
    if held is None or held[0] is not engine:
        held = _processors[id(engine)] = (engine, image_processor_for(engine))
    return held[1]


def upscale_image_file(job: Job, replace_output: bool, processor: ImageProcessor,
                       png_compression: int | None = None, on_rows: RowsCallback | None = None,
                       max_pixels: int | None = None) -> tuple[Outcome, int | None]:
    """One image file, read, upscaled and published, one stage after another (a worker's share of
    a folder, srgpu.batch.tasks; run_batch overlaps the same stages over many files): its outcome
    and, when done, the size written. Per-file problems are a failed outcome, as in run_batch."""
    started = time.perf_counter()
    try:
        data = read_image_data(job.src, processor.order, max_pixels)  # type: ignore[arg-type]
        _check_alpha(data.pixels, job.dst.suffix, job.src)  # before the upscale: it would be for nothing
        pixels = processor.submit(data.pixels, on_rows).wait()
        fitted = format_notes(pixels, job.dst.suffix)
        pixels = fit_to_format(pixels, job.dst.suffix, job.src)
        written = write_image_atomic(job.dst, pixels, replace=replace_output, icc=data.icc, order=data.order,
                                     png_compression=png_compression, scratch=True, gray_alpha=data.gray_alpha,
                                     png_colour=data.png_colour)
    except OutputExistsError as e:  # a file appeared at dst meanwhile: kept, and said so
        return Outcome(job, "failed", str(e), time.perf_counter() - started), None
    except (ImageFileError, OSError, MemoryError) as e:
        return _failure(job, e, time.perf_counter() - started), None
    return Outcome(job, "done", seconds=time.perf_counter() - started, notes=fitted + written.notes), written.size


def _failure(job: Job, error: BaseException, seconds: float) -> Outcome:
    if isinstance(error, ImageFileError):
        return Outcome(job, "failed", naming(job.src, str(error)), seconds)
    return Outcome(job, "failed", f"{job.src}: {type(error).__name__}: {error}", seconds)


class OutputFolders:
    """The folders a batch writes into, each made ready once: created, and cleared of the
    temporaries that killed srgpu runs left there (srgpu.outputs: only srgpu's own names, only where
    their process is gone), with one look at each folder however many files go into it."""

    def __init__(self) -> None:
        self._ready: set[Path] = set()

    def prepare(self, folder: Path) -> None:
        if folder in self._ready:
            return
        folder.mkdir(parents=True, exist_ok=True)
        outputs.remove(outputs.stale_temps_in(folder))
        self._ready.add(folder)

    def sweep(self) -> None:
        """Remove the temporaries whose process is gone from every folder made ready: what a worker
        killed mid-file left (srgpu.batch.pool_files), before the next run would."""
        for folder in self._ready:
            outputs.remove(outputs.stale_temps_in(folder))


def prepare_job(job: Job, plan: BatchPlan, folders: OutputFolders, resume: Resume | None,
                looked: JobStat | None = None) -> Outcome | ToRun:
    """The job's outcome if it cannot or need not run; else how it runs (its output folder made
    ready). ``looked``: the job's source and output as already looked at (else looked at here)."""
    if job.kind == "unsupported":
        return Outcome(job, "failed", unsupported(job.src))
    if job.problem:
        return Outcome(job, "failed", job.problem)
    looked = looked or JobStat.at(job)
    output = looked.output if isinstance(looked.output, os.stat_result) else None
    # (a folder run's Resume refuses an output that is one of the inputs, by file identity)
    if resume is None and _same(job.src, job.dst):
        return Outcome(job, "failed", f"{job.dst}: output would replace its input")
    if output is not None and stat.S_ISDIR(output.st_mode):
        return Outcome(job, "failed", f"{job.dst}: is a folder, so the output cannot be written under that name")
    if resume is not None:
        go = resume.decide(job, looked)
    elif output is not None and not plan.overwrite:  # one file: planning refused this, unless it appeared since
        go = Outcome(job, "failed", f"{job.dst}: output exists (use --overwrite to replace it)")
    else:
        go = ToRun(plan.overwrite)
    if isinstance(go, Outcome):
        return go
    try:
        folders.prepare(job.dst.parent)
    except OSError as e:
        return Outcome(job, "failed", f"{job.dst.parent}: cannot create folder ({e.strerror or e})")
    return go


def _video_job(job: Job, go: ToRun, engine: Engine, video: VideoOptions,
               on_frames: FramesCallback | None, resume: Resume | None, planned: VideoJob | None = None) -> Outcome:
    if resume:
        resume.begin(job)
    outcome = run_video(job, go.replace, engine, video, on_frames, planned)
    if resume and outcome.status == "done":
        try:
            resume.finish(job, go, job.dst.stat().st_size)
        except OSError:
            pass  # gone already: nothing to record
    elif resume:
        resume.abandon(job)
    if outcome.status != "done" or not go.redo:
        return outcome
    return replace(outcome, notes=go.notes + outcome.notes, redone=True)


def run_video(job: Job, overwrite: bool, engine: Engine, video: VideoOptions,
              on_frames: FramesCallback | None, planned: VideoJob | None = None) -> Outcome:
    """``planned``: the video's job as the caller planned it already (srgpu.video.api.upscale_video)."""
    api = video_api()
    if api is None:
        return Outcome(job, "failed", f"{job.src}: video support is not available in this installation")
    try:
        result = api.upscale_video(job.src, job.dst, engine, video, overwrite=overwrite, progress=on_frames,
                                   planned=planned)
    except api.VideoError as e:
        return Outcome(job, "failed", naming(job.src, str(e)))
    except OutputExistsError as e:  # srgpu.video publishes with outputs.publish: the file that appeared is kept
        return Outcome(job, "failed", str(e))
    w, h = result.output_size
    detail = f"{result.frames} frames, {w}x{h}, {result.codec} {result.pix_fmt}, {result.fps:.1f} fps"
    if result.decoder != "software":  # NVDEC decoded some or all of it
        detail += f", decoded by {result.decoder}"
    return Outcome(job, "done", detail, notes=tuple(result.notes), video=result)


def naming(src: Path, message: str) -> str:
    """Make sure a per-file message names the file it is about."""
    return message if str(src) in message else f"{src}: {message}"
