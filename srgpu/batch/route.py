"""How an ``upscale`` run is carried out, decided in one place: in this process, a long video cut into
chunks for workers, a folder's files on workers, or either on a Dask cluster; and which engine runs
in this process (with the GPU-to-CPU fallback said in one line). ``srgpu upscale`` parses its
arguments, calls :func:`upscale` with callbacks that draw progress and print, and prints the result;
a Python user calls the same function::

    from srgpu.batch.route import UpscaleOptions, upscale

    result = upscale(UpscaleOptions(Path("film.mkv"), Path("film-x2.mkv"), scale=2, device="cpu"))
    assert result.exit_code == 0

:class:`Callbacks` (all optional, silent by default) is how the caller sees the run: the lines a
person would read (:meth:`Callbacks.say`), the settings as they become known, and progress.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from ..engine import Engine, GPUOptions, create_engine
from ..model import DEFAULT_ARCH, SRCNNModel, resolve_model
from ..video.options import VideoOptions
from .local import ImageOptions, run_batch
from .plan import BatchPlan, BatchResult, Job, plan_batch

if TYPE_CHECKING:
    from ..batch.tasks import Outcome
    from .pool import EngineSpec
    from ..video.api import VideoJob, VideoResult

Say = Callable[[str], None]


@dataclass(frozen=True)
class UpscaleOptions:
    """One ``upscale`` run: what the ``srgpu upscale`` command's options say, checked where they are
    parsed (``video``: VideoOptions checks --hwdec; ``images``: ImageOptions)."""

    input: Path
    output: Path
    scale: int = 2
    model: str = DEFAULT_ARCH  # a built-in architecture or a .npz path (srgpu.model.resolve_model)
    device: str = "auto"  # auto, cpu, cuda or cuda:N
    precision: str = "auto"
    overwrite: bool = False
    format: str | None = None  # image outputs: png, jpg, webp; None keeps each image's format
    video: VideoOptions = field(default_factory=VideoOptions)
    images: ImageOptions = field(default_factory=ImageOptions)
    workers: int | None = None  # worker processes for a long video's chunks and a folder's files
    gpus: str | None = None  # "all" or "0,1": the GPUs the workers use
    chunk_seconds: float | None = None  # None: a cost model decides; 0: never cut a video
    cluster: str | None = None  # a Dask scheduler's address


@dataclass(frozen=True)
class RunResult:
    """What a run made. ``route``: "in-process", "chunks" (one video cut into chunks) or "workers" (a
    folder's files on worker processes or a cluster). ``batch``: every input's outcome (in-process
    and workers); ``video`` with ``chunks``, ``reused_chunks``, ``reused_frames`` (chunks made by an
    interrupted run and kept) and ``seconds`` (this run's wall time): a chunked video."""

    plan: BatchPlan
    route: str
    batch: BatchResult | None = None
    video: "VideoResult | None" = None
    chunks: int = 0
    reused_chunks: int = 0
    reused_frames: int = 0
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        return self.batch.exit_code if self.batch is not None else 0


class BatchProgress(Protocol):
    """Progress of a run in this process (srgpu.batch.local.run_batch's callbacks)."""

    def start(self, job: Job) -> None: ...
    def done(self, outcome: "Outcome") -> None: ...
    def frames_done(self, increment: int, total: int | None) -> None: ...
    def rows_done(self, done: int, total: int) -> None: ...
    def close(self) -> None: ...


class ChunkProgress(Protocol):
    """Progress of a video cut into chunks (srgpu.video.chunked.ChunkProgress), and close."""

    def begin(self, frames: int, chunks: int, frames_done: int, chunks_done: int) -> None: ...
    def frames(self, n: int) -> None: ...
    def chunk_done(self, done: int, total: int) -> None: ...
    def joining(self) -> None: ...
    def close(self) -> None: ...


class FilesProgress(Protocol):
    """Progress of a folder's files on workers (srgpu.batch.pool_files.run_files's callbacks)."""

    def frames(self, n: int) -> None: ...
    def done(self, outcome: "Outcome") -> None: ...
    def close(self) -> None: ...


class _Silent:
    """Progress that shows nothing (the default)."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


class Callbacks:
    """How the caller sees a run; every method does nothing unless overridden."""

    def say(self, message: str) -> None:
        """A line for a person: which device, a note, how a video is cut."""

    def planned(self, plan: BatchPlan) -> None:
        """The jobs, once planned (before the model is resolved)."""

    def model(self, model: SRCNNModel) -> None:
        """The model, once resolved."""

    def engine(self, engine: Engine, description: str) -> None:
        """The engine of a run in this process (or of the one worker a chunked video runs on here)."""

    def workers(self, description: str, gpu: bool) -> None:
        """The workers a run uses (worker processes or a cluster): described, and whether on GPUs."""

    def batch_progress(self, plan: BatchPlan) -> BatchProgress:
        return _Silent()  # type: ignore[return-value]

    def chunk_progress(self, name: str) -> ChunkProgress:
        return _Silent()  # type: ignore[return-value]

    def files_progress(self, plan: BatchPlan) -> FilesProgress:
        return _Silent()  # type: ignore[return-value]


class _CountReused:
    """A ChunkProgress passed on, keeping what an interrupted run had made (begin's counts)."""

    def __init__(self, inner: ChunkProgress) -> None:
        self.inner = inner
        self.reused = self.reused_frames = 0

    def begin(self, frames: int, chunks: int, frames_done: int, chunks_done: int) -> None:
        self.reused, self.reused_frames = chunks_done, frames_done
        self.inner.begin(frames, chunks, frames_done, chunks_done)

    def frames(self, n: int) -> None:
        self.inner.frames(n)

    def chunk_done(self, done: int, total: int) -> None:
        self.inner.chunk_done(done, total)

    def joining(self) -> None:
        self.inner.joining()


# ---------------------------------------------------------------- the engine


def describe_engine(engine: Engine) -> str:
    description = getattr(engine, "description", None)
    if description:
        return str(description)
    return "CPU" if engine.name == "cpu" else engine.name


def make_engine(device: str, model: SRCNNModel, scale: int, precision: str = "auto", say: Say | None = None) -> Engine:
    """create_engine, saying (``say``; None: nothing) which device runs, and why not the GPU when
    'auto' falls back to the CPU."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        notify = None if say is None or device == "cpu" else say
        engine = create_engine(device, model, scale, GPUOptions(precision=precision, notify=notify))
    why = "; ".join(str(w.message).replace("GPU not used, running on the CPU: ", "GPU not used: ")
                    for w in caught if issubclass(w.category, RuntimeWarning))
    if say is not None:
        say(f"device: {describe_engine(engine)}{f' ({why})' if why else ''}; model: {model.describe()}")
    return engine


# ---------------------------------------------------------------- the route


def upscale(options: UpscaleOptions, callbacks: Callbacks | None = None) -> RunResult:
    """Upscale an image, a video or a folder as ``options`` say, by the route that pays: a long
    video in chunks on workers, a folder's files on workers (where that pays, or where asked), or
    this process; a cluster where one is named. Errors are raised (srgpu.batch.plan.BatchError,
    srgpu.model.ModelError, srgpu.engine.EngineError, ...); a file that fails in a folder is an
    outcome in ``result.batch`` (``result.exit_code`` non-zero)."""
    cb = callbacks or Callbacks()
    o = options
    src, dst, cluster = o.input, o.output, o.cluster
    if cluster is not None:
        from .cluster import check_address

        cluster = check_address(cluster)
        # a task names files, and a cluster's worker opens them from its own working directory
        src, dst = _absolute(src), _absolute(dst)
    _forget_finished_chunks(dst, cb.say)
    plan = plan_batch(src, dst, fmt=o.format, overwrite=o.overwrite)
    cb.planned(plan)
    from .pool import EngineSpec

    # the run's model and scale, decided here once (resolve_model refuses a model file made for
    # another scale); the routes below take them from this spec or from the engines made of it
    spec = EngineSpec(resolve_model(o.model, o.scale), o.scale, o.device, o.precision)
    cb.model(spec.model)
    device = o.device
    video_plan = None  # a single video's job, planned once (where it keeps the single pipeline)
    if plan.single and plan.jobs[0].kind == "video" and o.chunk_seconds != 0:
        chunked = _upscale_in_chunks(plan, spec, o, cluster, cb)
        if isinstance(chunked, RunResult):
            return chunked
        video_plan = chunked
        device = _one_pipeline_device(o, cb.say)
    elif not plan.single:
        on_workers = _upscale_folder_on_workers(plan, spec, o, cluster, cb)
        if isinstance(on_workers, BatchResult):
            return RunResult(plan, "workers", batch=on_workers)
        device = on_workers
    else:
        if cluster or o.workers:
            cb.say("note: --workers and --cluster apply to a long video (cut into chunks) and to folders; "
                   f"one {plan.jobs[0].kind} runs in this process")
        device = _one_pipeline_device(o, cb.say)
    with make_engine(device, spec.model, spec.scale, spec.precision, cb.say) as engine:
        cb.engine(engine, describe_engine(engine))
        progress = cb.batch_progress(plan)
        try:
            result = run_batch(plan, engine, o.video, on_start=progress.start, on_done=progress.done,
                               on_frames=progress.frames_done, on_rows=progress.rows_done, images=o.images,
                               video_plan=video_plan)
        finally:
            progress.close()
    return RunResult(plan, "in-process", batch=result)


def _one_pipeline_device(o: UpscaleOptions, say: Say) -> str:
    """The device of a run in this process: the GPU ``--gpus`` names (the first, said, where it
    names several), else ``--device``. EngineError for a GPU that does not exist."""
    if o.gpus is None:
        return o.device
    from .pool import parse_gpus

    gpus = parse_gpus(o.gpus, o.device) or ()
    if len(gpus) > 1:
        say(f"note: one pipeline runs in this process: on cuda:{gpus[0]}, the first GPU of --gpus {o.gpus}")
    return f"cuda:{gpus[0]}"


def _absolute(path: Path) -> Path:
    """``path`` made absolute against this directory, symlinks kept (what the user named)."""
    return Path(os.path.abspath(path))


def _forget_finished_chunks(output: Path, say: Say) -> None:
    """A chunked run killed after publishing its output leaves its work folder: removed (and said)
    where the output there is the file that run verified, before existing outputs are looked for."""
    from ..video.chunked import forget_finished_in

    for dst in forget_finished_in(output if output.is_dir() else output.parent):
        say(f"note: {dst}: complete (verified and published by a run killed before its clean-up); the chunks "
            "that run left were removed")


def _upscale_in_chunks(plan: BatchPlan, spec: EngineSpec, o: UpscaleOptions, cluster: str | None,
                       cb: Callbacks) -> "RunResult | VideoJob":
    """A single video, cut into chunks for the workers (srgpu.video.chunked) where that pays; else
    its job as planned there, for the single pipeline (a short video: said only when chunks were
    asked for). ``spec``: the run's model, scale, device and precision (the local workers' engines
    go on their own devices)."""
    from ..video import chunked
    from ..video.api import threads_option
    from .pool import InProcess, LocalPool, encoder_threads, plan_workers

    job, video, overwrite = plan.jobs[0], o.video, o.overwrite
    if cluster:
        from .cluster import DaskRunner

        runner_cm: contextlib.AbstractContextManager = DaskRunner(cluster, spec, quiet_logs=True)
        count, what = runner_cm.workers, f"the Dask cluster at {cluster}"  # type: ignore[attr-defined]
    else:
        from ..video.api import video_codec

        wplan = plan_workers(o.device, o.gpus, o.workers, encoder=video_codec(job.dst, video.encode))
        count, what = wplan.workers, wplan.describe()
    gpu = None if cluster or not wplan.gpus else int(wplan.gpus[0].split(":")[1])  # NVDEC's trial runs there
    pool = LocalPool(spec, wplan.devices) if not cluster and count > 1 else None
    try:  # the workers start once the video is known to be long, and come up while it is scanned
        cj = chunked.plan_chunked_or_single(job.src, job.dst, spec.identity(), video, overwrite=overwrite,
                                            workers=count, chunk_seconds=o.chunk_seconds, gpu=gpu,
                                            when_long=pool.start if pool is not None else None)
    except BaseException:
        if pool is not None:
            pool.close(force=True)
        raise
    if isinstance(cj, chunked.SinglePipeline):
        if pool is not None:
            pool.close(force=True)
        if cluster or o.chunk_seconds or (o.workers or 1) > 1:
            cb.say(f"note: {job.src}: one pipeline: {cj.reason}")
        if cluster:
            runner_cm.__exit__(None, None, None)
        return cj.job
    started = time.monotonic()
    runner: Any
    if cluster:
        runner = runner_cm
    elif count == 1:
        engine = make_engine(wplan.devices[0], spec.model, spec.scale, spec.precision, cb.say)
        runner_cm = engine
        runner = InProcess(engine)
        cb.engine(engine, describe_engine(engine))
    else:
        runner_cm = runner = pool
    if cluster or count != 1:
        cb.workers(what, gpu=bool(cluster) or bool(wplan.gpus))
    why = f" (GPU not used: {wplan.why_cpu})" if not cluster and wplan.why_cpu else ""
    threads = encoder_threads(count)
    shares = threads_option(cj.job.codec, cj.job.plan.extra_args, threads)
    encoder = cj.job.codec + (f" on {shares[0][1]} threads each" if shares else "")
    cb.say(f"{job.src.name}: {len(cj.chunks)} chunks, {cj.scan.frames} frames, on {what}{why}, {encoder}; "
           f"model: {spec.model.describe()}")
    for note in cj.notes:
        cb.say(f"note: {job.src}: {note}")
    bar = cb.chunk_progress(job.src.name)
    counted = _CountReused(bar)
    try:
        with runner_cm:
            result = chunked.upscale_chunked(cj, runner, overwrite=overwrite, progress=counted,
                                             encoder_threads=threads)
    finally:
        bar.close()
    for note in result.notes:
        if note not in cj.notes:
            cb.say(f"note: {job.src}: {note}")
    return RunResult(plan, "chunks", video=result, chunks=len(cj.chunks), reused_chunks=counted.reused,
                     reused_frames=counted.reused_frames, seconds=time.monotonic() - started)


def folder_encoder(plan: BatchPlan, video: VideoOptions) -> str | None:
    """The encoder every video of a folder gets, if they share one (the default worker count
    depends on it: srgpu.batch.pool.default_workers); None where they differ or one cannot be decided
    now (that file's own error comes when it runs)."""
    from ..video.api import video_codec
    from ..video.errors import VideoError

    try:
        encoders = {video_codec(job.dst, video.encode) for job in plan.jobs if job.kind == "video"}
    except VideoError:
        return None
    return encoders.pop() if len(encoders) == 1 else None


def _upscale_folder_on_workers(plan: BatchPlan, spec: EngineSpec, o: UpscaleOptions, cluster: str | None,
                               cb: Callbacks) -> BatchResult | str:
    """A folder whose files go to the chunk workers, one file per task (srgpu.batch.pool_files: when
    that pays); else the device its in-process run uses (the one --gpus names for one worker).
    ``spec``: the run's model, scale, device and precision."""
    from .pool import LocalPool, encoder_threads, plan_workers
    from .pool_files import may_use_workers, run_files, use_workers

    device, workers, gpus = o.device, o.workers, o.gpus
    explicit = workers is not None or gpus is not None
    if not may_use_workers(plan, explicit, cluster is not None):
        return device
    if cluster:
        from .cluster import DaskRunner

        runner_cm: contextlib.AbstractContextManager = DaskRunner(cluster, spec, quiet_logs=True)
        count, what = runner_cm.workers, f"the Dask cluster at {cluster}"  # type: ignore[attr-defined]
    else:
        wplan = plan_workers(device, gpus, workers, encoder=folder_encoder(plan, o.video))
        count, what = wplan.workers, wplan.describe()
        if not use_workers(plan, count, explicit):
            return wplan.devices[0] if gpus is not None else device
        if wplan.why_cpu:
            what += f" (GPU not used: {wplan.why_cpu})"
        runner_cm = LocalPool(spec, wplan.devices)
    cb.workers(what, gpu=bool(cluster) or bool(wplan.gpus))
    cb.say(f"{len(plan.jobs)} files, one per task, on {what}; model: {spec.model.describe()}")
    video = dataclasses.replace(o.video, encoder_threads=encoder_threads(count))
    progress = cb.files_progress(plan)
    try:
        with runner_cm as runner:
            return run_files(plan, runner, video, o.images.png_compression, on_done=progress.done,
                             on_frames=progress.frames, max_pixels=o.images.max_pixels)
    finally:
        progress.close()
