"""A folder run on the workers that make a long video's chunks (srgpu.batch.pool' processes, one per
GPU or more; srgpu.batch.cluster's Dask workers), with files as units of work: several videos encoded at
once, images spread over GPUs or machines.

This process stays the coordinator, as in srgpu.batch.local.run_batch, and keeps the same guarantees:
it decides what becomes of each file before any runs (skip, redo, fail: srgpu.batch.resume.Resume and
prepare_job), journals an output in the folder's manifest as its task is handed to a worker and
records it once the worker has published it, reports every file's outcome as it comes (an error
in one file never stops the others; a worker that dies mid-file is replaced and the file made
again elsewhere, srgpu.batch.pool.LocalPool's retries, and a file whose workers keep dying fails
alone), and ends with the same BatchResult (summary, exit status). A run interrupted (Ctrl-C,
SIGTERM) ends every worker; the outputs they were writing stay journalled as begun, so the next
run makes them again, as after an interrupted in-process run.

When a folder uses the workers (``use_workers``): the in-process batch already overlaps reading,
the engine and writing of images on every core with one GPU, and runs videos one after another,
each its own overlapped pipeline. Workers pay where that leaves work undone: a folder holding two
videos or more, whose encoders are the bottleneck (DESIGN.md: 7-35 ms of CPU per 4K frame against
~1 ms of GPU) and run several at once on workers (default_workers: about one per 4 cores, at least
one per GPU; at most four when every video goes to libx264: measured on one H200 and 16 cores, 4
workers ran a folder of eight 20 s x264 videos at 1.28x this process); or where the user asks for them (``--workers N`` with N > 1, ``--gpus``) or for a
cluster. A folder of images alone keeps the in-process pipeline by default, on one GPU or several:
its images are codec-bound on the CPU, which the in-process pipeline already fills. Every video of
a folder runs whole on one worker (one pipeline, no chunks): the folder's files keep the workers
busy without the chunks' scan, start-ups and join; a long video alone is cut into chunks when given
as the input itself.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable, Protocol, Sequence

from .tasks import FileResult, FileTask
from ..images.upscale import DEFAULT_MAX_PIXELS
from .plan import BatchPlan, BatchResult, Outcome
from .resume import Resume, ToRun
from .tasks import OutputFolders, naming, prepare_job
from ..video.options import VideoOptions

FramesCallback = Callable[[int], None]
OutcomeCallback = Callable[[Outcome], None]


class FileRunner(Protocol):
    """srgpu.batch.pool.InProcess or LocalPool, srgpu.batch.cluster.DaskRunner."""

    workers: int

    def identity(self) -> dict[str, Any]:
        """What of its engines decides the outputs (srgpu.manifest.model_identity): their model and scale."""
        ...

    def run(self, tasks: Sequence[Any], on_frames: Callable[[int], None], on_result: Callable[[Any], None],
            on_start: Callable[[Any], None] | None = None,
            on_error: Callable[[Any, str], None] | None = None) -> None: ...


def may_use_workers(plan: BatchPlan, explicit: bool, cluster: bool = False) -> bool:
    """Whether a batch may run on workers, before they are planned (planning looks at the GPUs):
    ``explicit``, the user gave --workers or --gpus; ``cluster``, --cluster."""
    if plan.single:
        return False  # one file: one pipeline, or a long video's chunks (srgpu.video.chunked)
    return cluster or explicit or sum(job.kind == "video" for job in plan.jobs) >= 2


def use_workers(plan: BatchPlan, workers: int, explicit: bool, cluster: bool = False) -> bool:
    """Whether a batch runs on workers (see the module's docstring); ``workers``: how many the
    worker plan (srgpu.batch.pool.plan_workers) or the cluster has."""
    return may_use_workers(plan, explicit, cluster) and (cluster or workers >= 2)


def run_files(plan: BatchPlan, runner: FileRunner, video: VideoOptions = VideoOptions(),
              png_compression: int | None = None, on_done: OutcomeCallback | None = None,
              on_frames: FramesCallback | None = None, max_pixels: int | None = DEFAULT_MAX_PIXELS) -> BatchResult:
    """Every job of a folder ``plan`` as a FileTask on ``runner``, by the scale and model of the
    runner's engines (the folder's record takes them from the runner); image files declaring more than ``max_pixels`` fail
    alone (ImageOptions.max_pixels). ``on_done(outcome)`` as each file's outcome is known
    (skipped and failed-before-running ones first, then in the order they finish);
    ``on_frames(n)``: video frames made on any worker (negative: taken back from a worker that
    died). The result lists the outcomes in the plan's order."""
    if plan.single:
        raise ValueError("run_files runs a folder's plan")
    started = time.perf_counter()
    # the model and scale from the engines that run the tasks (they were also passed beside the
    # runner, kept in step by hand)
    resume = Resume(plan, runner.identity(), video)
    folders = OutputFolders()
    outcomes: dict[int, Outcome] = {}
    going: dict[int, ToRun] = {}

    def record(index: int, outcome: Outcome) -> None:
        outcomes[index] = outcome
        if on_done is not None:
            on_done(outcome)

    def on_start(task: FileTask) -> None:
        resume.begin(plan.jobs[task.index])

    def on_result(result: FileResult) -> None:
        job, go = plan.jobs[result.index], going[result.index]
        outcome = replace(result.outcome, job=job)
        if outcome.status == "done" and result.size is not None:
            resume.finish(job, go, result.size)
            if go.redo:
                outcome = replace(outcome, notes=go.notes + outcome.notes, redone=True)
        else:
            resume.abandon(job)
        record(result.index, outcome)

    def on_error(task: FileTask, message: str) -> None:
        """The task raised (not a per-file problem: those are outcomes) or its workers kept dying."""
        job = plan.jobs[task.index]
        resume.abandon(job)
        record(task.index, Outcome(job, "failed", naming(job.src, message)))

    try:
        tasks = []
        for index, job in enumerate(plan.jobs):
            go = prepare_job(job, plan, folders, resume)
            if isinstance(go, Outcome):
                record(index, go)
                continue
            going[index] = go
            tasks.append(FileTask(index, job, go.replace, video, png_compression, max_pixels))
        runner.run(tasks, on_frames or (lambda n: None), on_result, on_start=on_start, on_error=on_error)
    finally:
        folders.sweep()  # what workers killed mid-file left (their processes are gone)
        resume.close()
    ordered = tuple(outcomes[i] for i in sorted(outcomes))
    return BatchResult(ordered, time.perf_counter() - started, single=False)
