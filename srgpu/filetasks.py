"""One file of a folder (an image or a whole video) as a task for the workers that make a long
video's chunks (srgpu.workers: this machine's worker processes; srgpu.cluster: a Dask cluster):
``FileTask.execute(engine, progress)`` on whichever worker takes it, ``FileResult`` back.

A task names files, it carries no pixels: the worker reads the source and publishes the output
itself, under a temporary name first and by the rename that never replaces what the run did not
mean to replace (srgpu.outputs), exactly as the in-process batch does. So a worker killed mid-file
leaves at most a temporary (swept once its process is gone), and the task given to another worker
makes the whole file again. What a file becomes (skip, redo, fail before running) and the
folder's manifest are the coordinator's business (srgpu.batch_workers), never a worker's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from .images import Job, Outcome, image_processor_for, run_video, upscale_image_file
from .video.options import VideoOptions

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
    fails, an output that appeared meanwhile) are a failed outcome, as in srgpu.images.run_batch.
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
