"""Batch upscaling of one image or a folder tree (which may also hold videos), as a library.

The CLI plans a batch with :func:`plan_batch`, runs it with :func:`run_batch` and prints the
:class:`BatchResult`. Per-file problems (a corrupt image, a video that fails) are collected in the
result and the rest of the batch goes on; problems with the request itself (missing input, missing
or unwritable output directory, output equal to input, output exists) raise :class:`BatchError`
before any work. A folder run resumes from the manifest it keeps in the output folder
(srgpu.manifest; what it skips, redoes or leaves alone: ``Resume``), and never replaces an input.
"""


from __future__ import annotations
import contextlib
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from ..engine.base import Engine
from ..cpus import cpu_cores
from ..images.files import PNG_LEVELS, ChannelOrder, ImageData, read_image_data, write_image_atomic
from ..errors import ImageFileError
from ..manifest import model_identity
from ..outputs import OutputExistsError
from .stages import Budget, InOrder, StageClock, StageTimes, default_budget
from ..video.options import VideoOptions
from .plan import BatchError, BatchPlan, BatchResult, FileCallback, FramesCallback, Job, Outcome, OutcomeCallback
from ..images.upscale import (DEFAULT_MAX_PIXELS, RowsCallback, _PlaneProcessor, _check_alpha, fit_to_format,
                              format_notes)
from .resume import JobStat, Resume, ToRun
from .tasks import OutputFolders, _failure, _video_job, naming, prepare_job

if TYPE_CHECKING:
    from ..video.api import VideoJob


@dataclass(frozen=True)
class ImageOptions:
    """How a batch's image files are read and written (configuration only; the pixels do not
    depend on it, so it is not part of the settings a resumed run compares).

    jobs: image files decoded at once, and as many encoded at once, on threads (OpenCV's codecs
        release the GIL); None: one of each per CPU core this process may use.
    png_compression: zlib level 0-9 of PNG outputs; None: OpenCV's fast default
        (srgpu.images.files.encode_params; BENCHMARKS.md has the trade-off).
    memory_bytes: about how much decoded images read ahead and upscaled images waiting for a
        writer may hold (srgpu.batch.stages.Budget); None: a quarter of the machine's memory, at most
        4 GiB. One image always goes through, however large.
    max_pixels: an image file whose header declares more pixels fails alone, before it is decoded
        (a decompression bomb, or a scan that would take many minutes: --max-megapixels); None:
        only OpenCV's own limit.
    """

    jobs: int | None = None
    png_compression: int | None = None
    memory_bytes: int | None = None
    max_pixels: int | None = DEFAULT_MAX_PIXELS

    def __post_init__(self) -> None:
        if self.jobs is not None and self.jobs < 1:
            raise BatchError(f"--jobs {self.jobs}: at least 1 file at a time")
        if self.png_compression is not None and self.png_compression not in PNG_LEVELS:
            raise BatchError(f"--png-compression {self.png_compression}: choose a zlib level from 0 to 9")
        if self.memory_bytes is not None and self.memory_bytes < 1:
            raise BatchError("the memory budget must be at least one byte")
        if self.max_pixels is not None and self.max_pixels < 1:
            raise BatchError("--max-megapixels must be more than 0")

    @property
    def threads(self) -> int:
        """Reader threads, and as many writer threads (``jobs``, else one per core)."""
        return self.jobs if self.jobs is not None else cpu_cores()


READ_AHEAD_PER_THREAD = 2  # images being decoded or waiting for the engine, per reader thread
FIRST_RATIO = 8.0  # decoded bytes per file byte assumed before any image was read (JPEG ~10, PNG ~2)



@dataclass
class _Prepared:
    """A job whose preparation is done: its outcome if it does not run, else how it runs and (an
    image) its read on a reader thread, with the bytes the budget holds for it."""

    index: int
    job: Job
    started: float
    go: Outcome | ToRun
    read: Future | None = None
    held: int = 0
    source_bytes: int = 0  # the file's size when it was looked at


@dataclass
class _InFlight:
    index: int
    job: Job
    started: float
    go: ToRun
    data: ImageData
    ticket: object
    held: int


class _Readers:
    """Images decoded on ``threads`` threads ahead of the engine, as far as the count and the
    memory budget let (srgpu.batch.stages.Budget: only while there is room, never blocking)."""

    def __init__(self, threads: int, order: ChannelOrder, budget: Budget, clock: StageClock,
                 max_pixels: int | None = DEFAULT_MAX_PIXELS) -> None:
        self.order = order
        self.max_pixels = max_pixels
        self.budget = budget
        self.clock = clock
        self.limit = READ_AHEAD_PER_THREAD * threads
        self.ratio = FIRST_RATIO  # decoded bytes per file byte, the largest seen so far
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="srgpu-image-reader")

    def estimate(self, source_bytes: int) -> int:
        """Decoded bytes expected of a file of ``source_bytes`` (0 for one that cannot be looked at:
        its read will say what is wrong)."""
        return int(source_bytes * self.ratio)

    def start(self, job: Job) -> Future:
        return self._pool.submit(self._read, job)

    def _read(self, job: Job) -> ImageData:
        t0 = time.perf_counter()
        try:
            data = read_image_data(job.src, self.order, self.max_pixels)
            _check_alpha(data.pixels, job.dst.suffix, job.src)  # before the upscale: it would be for nothing
            return data
        finally:
            self.clock.add("read", time.perf_counter() - t0)

    def result(self, entry: _Prepared) -> ImageData | Outcome:
        """The decoded image (the budget now holds its real size), or the job's failure."""
        t0 = time.perf_counter()
        try:
            data = entry.read.result()  # type: ignore[union-attr]
        except ImageFileError as e:
            return Outcome(entry.job, "failed", naming(entry.job.src, str(e)))
        except (OSError, MemoryError) as e:
            return Outcome(entry.job, "failed", f"{entry.job.src}: {type(e).__name__}: {e}")
        finally:
            self.clock.add("wait_read", time.perf_counter() - t0)
            self.budget.give_read(entry.held)
            entry.held = 0
        entry.held = data.pixels.nbytes
        self.budget.take_read(entry.held)
        if entry.source_bytes:
            self.ratio = max(self.ratio, data.pixels.nbytes / entry.source_bytes)
        return data

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)  # a decode under way ends by itself


class _Writers:
    """Encodes and writes upscaled images on ``threads`` threads while the calling thread reads
    and upscales the next ones; each outcome goes into ``outcomes`` under its job's index. An
    exception that is not a per-file failure (a bug, or KeyboardInterrupt raised inside a write)
    stops the writing and is raised again in the calling thread."""

    def __init__(self, threads: int, resume: Resume | None, budget: Budget, outcomes: InOrder[Outcome],
                 clock: StageClock, png_compression: int | None) -> None:
        self.resume = resume
        self.budget = budget
        self.outcomes = outcomes
        self.clock = clock
        self.png_compression = png_compression
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="srgpu-image-writer")
        self._futures: set[Future] = set()
        self._error: BaseException | None = None
        self._stop = False  # set on a fatal error or an interrupt: queued writes are not started

    def submit(self, index: int, job: Job, data: ImageData, go: ToRun, started: float) -> None:
        self.raise_error()
        nbytes = data.pixels.nbytes
        t0 = time.perf_counter()
        self.budget.take_write(nbytes)
        self.clock.add("wait_write", time.perf_counter() - t0)
        future = self._pool.submit(self._run, index, job, data, go, started, nbytes)
        self._futures.add(future)
        future.add_done_callback(self._futures.discard)

    def _run(self, index: int, job: Job, data: ImageData, go: ToRun, started: float, nbytes: int) -> None:
        try:
            if self._stop:
                return  # stopping: nothing more is written (the job gets no outcome)
            t0 = time.perf_counter()
            try:
                outcome = self._write(job, data, go)
            except BaseException as e:  # noqa: BLE001 - handed to the calling thread
                self._error = self._error or e  # (its 'begin' stays in the journal: the next run redoes it)
                self._stop = True
                return
            finally:
                self.clock.add("write", time.perf_counter() - t0)
            self.outcomes.put(index, replace(outcome, seconds=time.perf_counter() - started))
        finally:
            self.budget.give_write(nbytes)

    def _write(self, job: Job, data: ImageData, go: ToRun) -> Outcome:
        if self.resume:
            self.resume.begin(job)
        try:
            fitted = format_notes(data.pixels, job.dst.suffix)
            pixels = fit_to_format(data.pixels, job.dst.suffix, job.src)
            written = write_image_atomic(job.dst, pixels, replace=go.replace, icc=data.icc, order=data.order,
                                         png_compression=self.png_compression, scratch=True,
                                         gray_alpha=data.gray_alpha, png_colour=data.png_colour)
        except OutputExistsError as e:  # a file appeared at dst meanwhile: kept, and said so
            failed = Outcome(job, "failed", str(e))
        except ImageFileError as e:
            failed = Outcome(job, "failed", naming(job.src, str(e)))
        except (OSError, MemoryError) as e:
            failed = Outcome(job, "failed", f"{job.src}: {type(e).__name__}: {e}")
        else:
            if self.resume:
                self.resume.finish(job, go, written.size)
            return Outcome(job, "done", notes=go.notes + fitted + written.notes, redone=bool(go.redo))
        if self.resume:
            self.resume.abandon(job)
        return failed

    def raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def drain(self) -> None:
        """Wait for every write handed over so far."""
        for future in list(self._futures):
            future.exception()  # waits; _run keeps its own exceptions
        self.raise_error()

    def close(self, finish_queued: bool = True, raise_errors: bool = True) -> None:
        """Wait for the writes under way, and for the queued ones unless ``finish_queued`` is
        False (an interrupt: what is being written completes whole, nothing more starts)."""
        if not finish_queued:
            self._stop = True
        self._pool.shutdown(wait=True)
        if raise_errors:
            self.raise_error()
        self._error = None


def run_batch(plan: BatchPlan, engine: Engine, video: VideoOptions = VideoOptions(),
              on_start: FileCallback | None = None, on_done: OutcomeCallback | None = None,
              on_frames: FramesCallback | None = None, on_rows: RowsCallback | None = None,
              images: ImageOptions = ImageOptions(), video_plan: "VideoJob | None" = None) -> BatchResult:
    """Process every job of ``plan``, by the engine's scale; videos as ``video`` says
    (srgpu.video.options.VideoOptions), image files as ``images`` says (ImageOptions). Per-file
    errors (unreadable, corrupt, unsupported files; a failing video) become 'failed' outcomes and
    the batch goes on; engine errors and Ctrl-C stop it (no partial file is left under a final
    name either way; on an engine error the images already upscaled are written first).

    Images go through three stages at once: reader threads decode the next images, the engine
    upscales them in job order on this thread (a GPU engine with a few in flight:
    Engine.image_processor), writer threads encode and publish them; memory in flight is bounded
    (ImageOptions.memory_bytes). A video runs alone, after the images before it are written.
    ``on_start(job)`` comes as a job reaches the engine and ``on_done(outcome)`` once its file is
    complete, both in job order, on this thread. ``on_rows(done, total)``: output rows of the
    image being upscaled, after each band of a large one (upscale_image).

    A folder run keeps a manifest in the output folder (srgpu.manifest) and resumes from it: see
    ``Resume`` for what becomes of outputs that exist. No output ever replaces a file that
    appeared at its name during the run, unless ``plan.overwrite``. ``video_plan``: a single
    video's job as the caller planned it already (srgpu.video.chunked.SinglePipeline), planned
    again only where it does not fit ``engine``."""
    started = time.perf_counter()
    reported: list[Outcome] = []
    outcomes: InOrder[Outcome] = InOrder()
    clock = StageClock()
    threads = images.threads
    budget = Budget(images.memory_bytes or default_budget())
    folders = OutputFolders()
    resume = None if plan.single else Resume(plan, model_identity(engine.model, engine.scale), video)
    processor = (engine.image_processor() if any(j.kind == "image" for j in plan.jobs) else None) \
        or _PlaneProcessor(engine)
    readers = _Readers(threads, processor.order, budget, clock, images.max_pixels)
    writers = _Writers(threads, resume, budget, outcomes, clock, images.png_compression)
    ahead: deque[_Prepared] = deque()
    in_flight: deque[_InFlight] = deque()
    planned = 0
    looked_at: tuple[int, JobStat] | None = None

    def report() -> None:
        for outcome in outcomes.ready():
            reported.append(outcome)
            if on_done:
                on_done(outcome)

    def look_ahead() -> None:
        """Prepare the next jobs and start their reads, while count and memory allow."""
        nonlocal planned, looked_at
        while planned < len(plan.jobs) and len(ahead) < readers.limit:
            job = plan.jobs[planned]
            if looked_at is None or looked_at[0] != planned:  # once per job, however often its turn is put off
                looked_at = (planned, JobStat.at(job))
            looked = looked_at[1]
            estimate = readers.estimate(looked.source_bytes) if job.kind == "image" else 0
            if ahead and estimate and not readers.budget.room_for_read(estimate):
                return  # the engine works on what is read meanwhile, freeing room
            entry = _Prepared(planned, job, time.perf_counter(), prepare_job(job, plan, folders, resume, looked),
                           source_bytes=looked.source_bytes)
            if job.kind == "image" and isinstance(entry.go, ToRun):
                entry.held = estimate
                budget.take_read(estimate)
                entry.read = readers.start(job)
            ahead.append(entry)
            planned += 1

    def to_writer(item: _InFlight) -> None:
        """The oldest image on the engine, waited for and handed to a writer."""
        t0 = time.perf_counter()
        try:
            pixels = item.ticket.wait()  # type: ignore[attr-defined]
        except (ImageFileError, OSError, MemoryError) as e:
            outcomes.put(item.index, _failure(item.job, e, time.perf_counter() - item.started))
            return
        finally:
            clock.add("process", time.perf_counter() - t0)
            budget.give_read(item.held)
        clock.add("output_pixels", 0.0, pixels.shape[0] * pixels.shape[1])
        writers.submit(item.index, item.job, replace(item.data, pixels=pixels), item.go, item.started)

    def run_image(entry: _Prepared) -> None:
        data = readers.result(entry)
        if isinstance(data, Outcome):
            outcomes.put(entry.index, replace(data, seconds=time.perf_counter() - entry.started))
            return
        t0 = time.perf_counter()
        try:
            ticket = processor.submit(data.pixels, on_rows)
        except (ImageFileError, OSError, MemoryError) as e:
            budget.give_read(entry.held)
            outcomes.put(entry.index, _failure(entry.job, e, time.perf_counter() - entry.started))
            return
        finally:
            clock.add("process", time.perf_counter() - t0)
        clock.add("process", 0.0, 1)  # one more image on the engine
        clock.add("input_pixels", 0.0, data.pixels.shape[0] * data.pixels.shape[1])
        in_flight.append(_InFlight(entry.index, entry.job, entry.started, entry.go, data, ticket,  # type: ignore[arg-type]
                                   entry.held))
        # the oldest is waited for once enough are queued; before that, whatever is done already
        # goes on to the writers at once (they would otherwise idle while groups fill)
        while in_flight and (len(in_flight) > processor.in_flight or _ready(in_flight[0].ticket)):
            to_writer(in_flight.popleft())

    def finish_in_flight() -> None:
        while in_flight:
            to_writer(in_flight.popleft())

    try:
        while planned < len(plan.jobs) or ahead:
            look_ahead()
            entry = ahead.popleft()
            report()
            if on_start:
                on_start(entry.job)
            if isinstance(entry.go, Outcome):
                outcomes.put(entry.index, entry.go)
            elif entry.job.kind == "image":
                run_image(entry)
            else:  # a video runs alone: the images before it are written first
                finish_in_flight()
                writers.drain()
                report()
                outcome = _video_job(entry.job, entry.go, engine, video, on_frames, resume, video_plan)
                outcomes.put(entry.index, replace(outcome, seconds=time.perf_counter() - entry.started))
            writers.raise_error()
        finish_in_flight()
        writers.close()
        report()
    except BaseException as e:
        # what is being written completes whole, never half, and is still reported; after an
        # engine error the images it already upscaled are written too, after an interrupt no more
        in_flight.clear()
        with contextlib.suppress(Exception):  # the error under way is the one to report
            processor.close()
        readers.close()
        writers.close(finish_queued=not isinstance(e, KeyboardInterrupt), raise_errors=False)
        report()
        raise
    finally:
        readers.close()
        processor.close()
        if resume is not None:
            resume.close()  # after the writers: every output they published is in the journal
    return BatchResult(tuple(reported), time.perf_counter() - started, plan.single, StageTimes.of(clock, threads))


def _ready(ticket: object) -> bool:
    """Whether a ticket's result is there without waiting (a ticket that cannot say: no)."""
    ready = getattr(ticket, "ready", None)
    return bool(ready()) if ready is not None else False


