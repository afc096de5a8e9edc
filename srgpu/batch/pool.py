"""Workers that run units of work (the chunks of a long video) on every GPU and CPU of this
machine: each worker is a process with its own engine (on its GPU, or the CPU engine) that takes
one task at a time, so that several encoders (the CPU's share of the work) run at once.

A task is a picklable object with ``execute(engine, progress) -> result`` (srgpu.video.chunked.
ChunkTask). ``InProcess`` runs tasks one after another in the calling process with an engine it
is given; ``LocalPool`` starts worker processes (spawned: no CUDA context or thread is inherited),
hands each one task at a time, relays their progress, and restarts a worker that dies (a task it
was running is given to another worker, at most ``retries`` times: a chunk or a file is published
only once whole, so a half-made one never counts). Without ``on_error`` the first task that fails
stops everything (the others are ended) and its error is raised in the caller, in one line: the
chunks of one video are worth nothing without each other. With ``on_error(task, message)`` (the
files of a folder, srgpu.batch.pool_files) a task that raises, or whose worker died more than
``retries`` times, is reported there and the others go on. ``on_start(task)`` is called in the
caller as a task is handed to a worker (a folder run journals the output it is about to write).
Ctrl-C, SIGTERM or SIGHUP end every worker and its ffmpeg children.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import queue
import signal
import sys
import threading
from multiprocessing.connection import wait as mp_wait
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..engine import Engine, GPUOptions, create_engine
from ..cpus import cpu_cores
from ..errors import EngineError
from ..model import SRCNNModel
from ..manifest import model_identity
from ..video import nvenc


class WorkerError(RuntimeError):
    """A task failed in a worker; the message is the worker's one-line error."""


@dataclass(frozen=True)
class EngineSpec:
    """How a worker makes its engine: the model, the scale, the device ("cpu" or "cuda:N") and the
    GPU arithmetic. Picklable: it travels to worker processes and cluster workers."""

    model: SRCNNModel
    scale: int
    device: str = "cpu"
    precision: str = "auto"

    def __post_init__(self) -> None:
        # where the model and the scale meet for the workers: a model file made for another scale
        # is refused here, in the caller, in the engine's words, not in every worker it reaches
        self.model.check_scale(self.scale)

    def create(self) -> Engine:
        return create_engine(self.device, self.model, self.scale, GPUOptions(precision=self.precision))  # type: ignore[arg-type]

    def on(self, device: str) -> "EngineSpec":
        return EngineSpec(self.model, self.scale, device, self.precision)

    def identity(self) -> dict[str, Any]:
        """What of the engine decides its output (srgpu.manifest.model_identity; the device and
        precision do not: every engine stays within one 8-bit level of the exact result)."""
        return model_identity(self.model, self.scale)


def parse_gpus(text: str | None, device: str = "auto") -> tuple[int, ...] | None:
    """``--gpus``: None (not given), "all" -> every usable GPU, "0,1" -> (0, 1); EngineError for
    anything else, a GPU that does not exist, or GPUs named with ``device`` "cpu"."""
    if text is None:
        return None
    from ..engine.gpuinfo import cuda_status, missing_gpu

    if device == "cpu":
        raise EngineError("--gpus names GPUs, but --device cpu keeps the work on the CPU")
    text = text.strip()
    status = cuda_status()
    if text == "all":
        if not status.usable:
            raise EngineError(f"--gpus all: no usable CUDA GPU ({status.reason})")
        return tuple(d.index for d in status.devices)
    try:
        wanted = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise EngineError(f"--gpus {text!r}: use all, or GPU numbers separated by commas (0,1)") from None
    if not wanted or any(i < 0 for i in wanted) or len(set(wanted)) != len(wanted):
        raise EngineError(f"--gpus {text!r}: use all, or GPU numbers separated by commas (0,1)")
    if not status.usable:
        raise EngineError(f"--gpus {text}: no usable CUDA GPU ({status.reason})")
    missing = [m for m in (missing_gpu(i, status) for i in wanted) if m]
    if missing:
        raise EngineError(f"--gpus {text}: {missing[0]}")
    return wanted


# x264 spreads one 4K stream over every core by itself (about 1.5 threads a core), yet several at once
# fill the cores better (its frame threads wait on each other: measured, not profiled). On one H200 with 16
# cores (BENCHMARKS.md sessions 27-28), four chunk workers on the one GPU, each x264 on 24 threads,
# ran at 1.12-1.32x srgpu's one worker (veryfast and ultrafast 150 s, medium 60 s, a folder of 8 x 20 s;
# 1.04x on a 30 s video); on the 64-core 4-GPU host, four x264 encoders of 24 threads were already
# the default. So up to X264_ENCODERS at once by default (about one per 4 cores, at least one per GPU)
# and each keeps up to X264_THREADS threads: what x264 picks for itself on 16 cores.
X264_ENCODERS = 4
X264_THREADS = 24


def default_workers(gpus: int, cores: int | None = None, encoder: str | None = None) -> int:
    """Chunk workers when the user says none: the encoder is the CPU's part and the bottleneck of a
    long job (DESIGN.md: 7-35 ms of CPU per 4K frame against ~1 ms of GPU), so about one worker per
    4 cores, at least one per GPU, at most 4 per GPU (each holds frames and buffers on its GPU);
    for libx264 at most X264_ENCODERS (at least one per GPU; one in all on the CPU, whose engine
    is the bottleneck there); for NVENC, which encodes on the card and leaves the cores alone, a
    fixed number of sessions per GPU (srgpu.video.nvenc.SESSIONS_PER_GPU: why two), on the first
    NVENC GPU for CPU engines."""
    if nvenc.is_nvenc(encoder):
        return nvenc.SESSIONS_PER_GPU * max(1, gpus)
    cores = cores or cpu_cores()
    n = max(1, cores // 4)
    if encoder == "libx264":
        return max(gpus, min(n, X264_ENCODERS)) if gpus else 1
    if gpus:
        n = min(max(n, gpus), 4 * gpus)
    return n


def encoder_threads(workers: int, cores: int | None = None) -> int | None:
    """Threads for each worker's encoder (x264, the one encoder told: srgpu.video.api.threads_option):
    its share of the machine's cores at x264's own 1.5 threads a core, or where that is fewer, what
    x264 would pick on this machine alone up to X264_THREADS; None (its own choice) for one worker."""
    if workers <= 1:
        return None
    cores = cores or cpu_cores()
    share = math.ceil(1.5 * cores / workers)
    return max(share, min(math.ceil(1.5 * cores), X264_THREADS))


def devices_for(workers: int, gpus: Sequence[int]) -> list[str]:
    """The device of each worker: round robin over the GPUs, else the CPU."""
    return [f"cuda:{gpus[i % len(gpus)]}" for i in range(workers)] if gpus else ["cpu"] * workers


@dataclass(frozen=True)
class WorkerPlan:
    """Which devices the chunk workers use (one entry per worker), and why not the GPU where
    ``--device auto`` found none usable."""

    devices: tuple[str, ...]
    why_cpu: str | None = None
    fewer: str | None = None  # why fewer workers than the encoder would have (the GPUs' free memory)

    @property
    def workers(self) -> int:
        return len(self.devices)

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d for d in self.devices if d != "cpu"))

    def describe(self) -> str:
        if not self.gpus:
            return f"{self.workers} CPU worker{'s' if self.workers != 1 else ''}"
        per = {g: self.devices.count(g) for g in self.gpus}
        return f"{self.workers} worker{'s' if self.workers != 1 else ''} on " + ", ".join(
            f"{g}" + (f" (x{n})" if n > 1 else "") for g, n in per.items()) + (f" ({self.fewer})" if self.fewer else "")


def plan_workers(device: str, gpus: str | None = None, workers: int | None = None,
                 cores: int | None = None, encoder: str | None = None) -> WorkerPlan:
    """The workers of a run: ``device`` (auto | cpu | cuda[:N]) and ``gpus`` (None | "all" | "0,1")
    say which GPUs (auto: every usable one; cuda:N: that one; cpu: none), ``workers`` how many
    (None: default_workers, for ``encoder`` where known). EngineError for a device or GPU that
    cannot be had."""
    from ..engine.select import parse_device
    from ..engine.gpuinfo import cuda_status, missing_gpu

    kind, index = parse_device(device)
    why = None
    if workers is not None and workers < 1:
        raise EngineError(f"--workers {workers}: at least one worker")
    if gpus is not None:
        chosen: tuple[int, ...] = parse_gpus(gpus, kind) or ()
    elif kind == "cpu":
        chosen = ()
    else:
        status = cuda_status()
        if kind == "cuda":
            if not status.usable:
                raise EngineError(f"{device}: {status.reason}")
            missing = missing_gpu(index, status)
            if missing:
                raise EngineError(missing)
            chosen = (index,)
        else:
            chosen = tuple(d.index for d in status.devices)
            why = None if chosen else status.reason
    n = workers if workers is not None else default_workers(len(chosen), cores, encoder)
    fewer = None
    if workers is None and n > len(chosen) > 0:
        fit, fewer = workers_that_fit(chosen)
        n = min(n, fit) if fit is not None else n
    return WorkerPlan(tuple(devices_for(n, chosen)), why, fewer if fewer and n < default_workers(
        len(chosen), cores, encoder) else None)


# GPU memory one worker's pipeline holds: measured 1.25 GiB for 1080p -> 4K on an H200 (srgpu's
# process 674 MiB, ffmpeg's NVDEC 564 MiB; BENCHMARKS.md issue 43), with headroom
PIPELINE_BYTES = 3 * 2**29


def workers_per_gpu(free_bytes: int) -> int:
    """Workers a GPU with ``free_bytes`` free holds: one at least (it says so itself if it cannot)."""
    return max(1, free_bytes // PIPELINE_BYTES)


def workers_that_fit(gpus: Sequence[int]) -> tuple[int | None, str | None]:
    """How many workers the GPUs' free memory holds (PIPELINE_BYTES each, round robin: the GPU with
    the least free memory decides), and how that reads; (None, None) where NVML cannot say."""
    from ..engine.gpuinfo import cuda_status, nvml_free_memory

    by_index = {d.index: d for d in cuda_status().devices}
    free = nvml_free_memory([by_index[i].pci_bus_id or "" for i in gpus if i in by_index])
    if free is None or len(free) != len(gpus):
        return None, None
    least = min(range(len(gpus)), key=lambda k: free[k])
    per_gpu = workers_per_gpu(free[least])
    return per_gpu * len(gpus), (f"{per_gpu} per GPU: {free[least] / 2**30:.1f} GiB free on cuda:{gpus[least]}, "
                                 f"{PIPELINE_BYTES / 2**30:.1f} GiB a worker")


class EngineTurn:
    """An engine (a worker's, or InProcess's), one task at a time. A task that ``overlaps`` (a
    chunk) takes it before its frames and gives it up once its last frame is processed: the worker
    says so (``free``), and the parent sends the next task, which starts (its decoder, engine and
    encoder) while the last one's encoder drains and its file is checked and published; at each
    chunk change the encoders stood still for about a second (BENCHMARKS.md issue 40, session 23).
    ``cancel``: set when the worker or the run is ended, stopping the pipelines of tasks running in
    threads."""

    def __init__(self, lock: threading.Lock, cancel: threading.Event, on_free: Callable[[], None]) -> None:
        self._lock, self.cancel, self._on_free = lock, cancel, on_free
        self._held = False

    def acquire(self) -> None:
        if not self._held:
            self._lock.acquire()
            self._held = True

    def release(self) -> None:
        """Give the engine up, and say so."""
        if self._held:
            self._held = False
            self._lock.release()
            self._on_free()

    def end(self) -> None:
        """Give the engine up at the task's end (its result says the rest)."""
        if self._held:
            self._held = False
            self._lock.release()


# ---------------------------------------------------------------- in this process


StartCallback = Callable[[Any], None]
ErrorCallback = Callable[[Any, str], None]


class InProcess:
    """Runs the tasks in this process, with ``engine``, one at a time on the engine. A task that
    ``overlaps`` (a chunk) runs in a thread of its own and the next one starts as soon as it gives
    the engine up (EngineTurn, as in a pool's worker), while its encoder drains and its file is
    checked and published: one after another, the encoder stood still about a second at each
    chunk change (BENCHMARKS.md issue 40, session 26). Progress, results and errors reach the
    callbacks in the calling thread; a task's error is raised there as it was raised (no
    ``on_error``) once the other task in flight is ended."""

    workers = 1

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def identity(self) -> dict[str, Any]:
        """What of the engine decides its output (srgpu.manifest.model_identity)."""
        return model_identity(self.engine.model, self.engine.scale)

    def run(self, tasks: Sequence[Any], on_frames: Callable[[int], None],
            on_result: Callable[[Any], None], on_start: StartCallback | None = None,
            on_error: ErrorCallback | None = None) -> None:
        events: queue.Queue[tuple[str, int, Any]] = queue.Queue()
        engine_lock, cancel = threading.Lock(), threading.Event()
        threads: dict[int, threading.Thread] = {}
        freed: set[int] = set()  # tasks in threads that gave the engine up
        frames_of: dict[int, int] = {}
        waiting = list(enumerate(tasks))

        def in_thread(tid: int, task: Any) -> None:
            def progress(n: int) -> None:
                events.put(("frames", tid, n))

            turn = EngineTurn(engine_lock, cancel, lambda: events.put(("free", tid, None)))
            outcome: tuple[str, Any]
            try:
                outcome = ("done", task.execute(self.engine, progress, turn))
            except BaseException as e:  # noqa: BLE001 - raised in the caller's thread
                outcome = ("failed", e)
            finally:
                turn.end()
            events.put((outcome[0], tid, outcome[1]))

        try:
            while waiting or threads:
                if waiting and len(threads) < 2 and freed.issuperset(threads):
                    tid, task = waiting[0]
                    if getattr(task, "overlaps", False):
                        waiting.pop(0)
                        if on_start is not None:
                            on_start(task)
                        threads[tid] = threading.Thread(target=in_thread, args=(tid, task), daemon=True,
                                                        name=f"srgpu-task-{tid}")
                        threads[tid].start()
                        continue
                    if not threads:  # a task that does not overlap runs here, alone
                        waiting.pop(0)
                        self._run_here(task, on_frames, on_result, on_start, on_error)
                        continue
                kind, tid, payload = events.get()
                if kind == "frames":
                    frames_of[tid] = frames_of.get(tid, 0) + payload
                    on_frames(payload)
                elif kind == "free":
                    freed.add(tid)
                else:
                    threads.pop(tid).join()
                    freed.discard(tid)
                    if kind == "done":
                        on_result(payload)
                    elif on_error is None or not isinstance(payload, Exception):
                        raise payload  # KeyboardInterrupt, SystemExit: not one task's failure
                    else:
                        if frames_of.get(tid):  # its frames were not made after all
                            on_frames(-frames_of[tid])
                        on_error(tasks[tid], _one_line(payload))
                    frames_of.pop(tid, None)
        except BaseException:
            cancel.set()  # the pipelines in flight stop as after Ctrl-C: children ended, temporaries removed
            deadline = time.monotonic() + 15.0
            for t in threads.values():
                while t.is_alive() and time.monotonic() < deadline:
                    try:
                        t.join(max(0.0, deadline - time.monotonic()))
                    except KeyboardInterrupt:
                        pass  # a second Ctrl-C: the clean-up goes on
            raise

    def _run_here(self, task: Any, on_frames: Callable[[int], None], on_result: Callable[[Any], None],
                  on_start: StartCallback | None, on_error: ErrorCallback | None) -> None:
        if on_start is not None:
            on_start(task)
        if on_error is None:
            on_result(task.execute(self.engine, on_frames))
            return
        try:
            result = task.execute(self.engine, on_frames)
        except Exception as e:  # noqa: BLE001 - reported for this task; the others go on
            on_error(task, _one_line(e))
            return
        on_result(result)

    def release(self) -> None:
        """Nothing to end: the engine is the caller's."""


# ---------------------------------------------------------------- worker processes


_PROGRESS_EVERY = 0.2  # seconds between a worker's progress messages


def _worker_main(wid: int, spec: EngineSpec, conn: Any) -> None:
    """A worker process: make the engine once, then run the tasks its pipe brings. A task that
    ``overlaps`` runs in a thread of its own, so that the next can start once it gives the engine
    up (EngineTurn); any other runs here, alone. Each worker has its own pipe to the parent: a
    worker killed while writing breaks only its own."""
    lock = threading.Lock()
    engine_lock = threading.Lock()
    cancel = threading.Event()
    running: list[threading.Thread] = []

    def send(message: tuple) -> None:
        with lock:
            conn.send(message)

    def terminate(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; it ends us with SIGTERM
    _end_with_parent()
    try:
        engine = _own_gpu(spec).create()
    except BaseException as e:  # noqa: BLE001 - reported, then the worker ends
        send(("broken", None, _one_line(e)))
        return
    send(("ready", None, None))

    def run_task(tid: int, task: Any, in_thread: bool) -> None:
        pending = [0, time.monotonic()]
        lock_pending = threading.Lock()

        def progress(n: int) -> None:
            with lock_pending:
                pending[0] += n
                now = time.monotonic()
                if now - pending[1] < _PROGRESS_EVERY:
                    return
                n, pending[0], pending[1] = pending[0], 0, now
            send(("frames", tid, n))

        turn = EngineTurn(engine_lock, cancel, lambda: send(("free", tid, None)))
        try:
            if getattr(task, "overlaps", False):
                result = task.execute(engine, progress, turn)
            else:
                turn.acquire()
                result = task.execute(engine, progress)
        except KeyboardInterrupt:
            if not in_thread:
                raise
            return  # the worker is being ended (cancel): the parent no longer waits for this task
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the parent
            send(("failed", tid, _one_line(e)))
            return
        finally:
            turn.end()
        if pending[0]:
            send(("frames", tid, pending[0]))
        send(("done", tid, result))

    def in_thread(tid: int, task: Any) -> None:
        try:
            run_task(tid, task, True)
        except (BrokenPipeError, EOFError, OSError):
            pass  # the parent is gone

    try:
        while True:
            try:
                item = conn.recv()
            except EOFError:
                break
            if item is None:
                break
            tid, task = item
            running[:] = [t for t in running if t.is_alive()]
            if getattr(task, "overlaps", False):
                t = threading.Thread(target=in_thread, args=(tid, task), name=f"srgpu-task-{tid}", daemon=True)
                t.start()
                running.append(t)
            else:
                run_task(tid, task, False)
    except (KeyboardInterrupt, BrokenPipeError, EOFError):
        cancel.set()
    finally:
        deadline = time.monotonic() + 15.0
        for t in running:  # a cancelled pipeline ends its children and removes its temporaries
            while t.is_alive() and time.monotonic() < deadline:
                try:
                    t.join(max(0.0, deadline - time.monotonic()))
                except KeyboardInterrupt:
                    cancel.set()
        try:
            engine.close()
        except Exception:  # noqa: BLE001 - ending anyway
            pass


def visible_device(index: int, visible: str | None) -> str:
    """CUDA_VISIBLE_DEVICES for a process that is to see only this process's cuda:``index``
    (``visible``: this process's own CUDA_VISIBLE_DEVICES, which renumbers the devices)."""
    if visible is None or not visible.strip():
        return str(index)
    ids = [v.strip() for v in visible.split(",")]
    return ids[index]


def _own_gpu(spec: EngineSpec) -> EngineSpec:
    """A worker on cuda:N sees that GPU alone, as its cuda:0 (its ffmpeg children inherit it, so
    NVDEC's and NVENC's ``-gpu 0`` name the same one). Seeing every GPU, it held a CUDA context on
    GPU 0 as well (518 MiB, measured: CUDA 12's cudaSetDevice makes a context, and leaving a
    ``with Device(N)`` sets device 0 back on each thread), so GPU 0 held every worker's."""
    kind, _, n = spec.device.partition(":")
    if kind != "cuda" or not n:
        return spec
    os.environ["CUDA_VISIBLE_DEVICES"] = visible_device(int(n), os.environ.get("CUDA_VISIBLE_DEVICES"))
    from ..engine.gpuinfo import cuda_status

    seen = len(cuda_status().devices)
    if seen != 1:  # CUDA was started before the variable was set: this process would use the wrong GPU
        raise EngineError(f"the worker for {spec.device} sees {seen} GPUs, not its own alone")
    return spec.on("cuda:0")


_MAIN_HIDDEN = threading.Lock()


@contextlib.contextmanager
def _main_module_hidden():  # type: ignore[no-untyped-def]
    """While a worker is spawned: its target and arguments live in srgpu, so it needs nothing of the
    caller's ``__main__``, but spawn imports that module again in every worker, by its file or its
    module name. A script read from stdin has no file to import (the worker dies, "<stdin>" not
    found), and a script without the ``if __name__ == "__main__":`` guard runs itself again in each
    worker, which then cannot start a pool of its own. The main module's file and spec are hidden
    from spawn (what it does for a script given with -c, which has neither)."""
    main = sys.modules.get("__main__")
    with _MAIN_HIDDEN:
        saved = {k: main.__dict__.pop(k) for k in ("__file__", "__spec__") if main is not None and k in main.__dict__}
        if main is not None and "__spec__" in saved:
            main.__spec__ = None
        try:
            yield
        finally:
            if main is not None:
                main.__dict__.update(saved)


def _end_with_parent() -> None:
    """Linux: SIGTERM this worker when its parent dies, even by SIGKILL (the worker then cleans up
    as after Ctrl-C); elsewhere the broken pipe ends it at its next message."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the parent died before the call
            os.kill(os.getpid(), signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def _one_line(e: BaseException) -> str:
    from ..video.errors import VideoError

    if isinstance(e, (VideoError, EngineError, OSError)):
        return " ".join(str(e).split())
    text = traceback.format_exception_only(type(e), e)
    return " ".join(" ".join(text).split())


@dataclass
class _Worker:
    wid: int
    slot: int
    proc: Any
    conn: Any
    ready: bool = False
    tasks: list[int] = field(default_factory=list)  # the task ids it runs: two while the older drains
    freed: set[int] = field(default_factory=set)  # those of its tasks that gave the engine up

    @property
    def task(self) -> int | None:
        """The task it started last."""
        return self.tasks[-1] if self.tasks else None

    def takes_another(self) -> bool:
        """Whether to send it a task now: it runs none, or one that gave its engine up."""
        return self.ready and len(self.tasks) < 2 and all(t in self.freed for t in self.tasks)

    def finished(self, tid: int) -> None:
        if tid in self.tasks:
            self.tasks.remove(tid)
        self.freed.discard(tid)


class LocalPool:
    """Worker processes of this machine, one engine each (``devices``: "cpu" or "cuda:N" per
    worker). ``run`` may be called several times; ``close`` ends them."""

    def __init__(self, spec: EngineSpec, devices: Sequence[str], retries: int = 2) -> None:
        if not devices:
            raise ValueError("a pool needs at least one worker")
        self.spec = spec
        self.devices = list(devices)
        self.workers = len(self.devices)
        self.retries = retries
        self._ctx = multiprocessing.get_context("spawn")
        self._pool: dict[int, _Worker] = {}
        self._stopping: list[_Worker] = []  # released: told to stop, not waited for yet (close waits)
        self._died_starting: dict[int, int] = {}  # by slot: workers that ended before their engine was ready, in a row
        self._next_wid = 0
        self._next_tid = 0

    def _start(self, slot: int) -> _Worker:
        wid = self._next_wid
        self._next_wid += 1
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(target=_worker_main, args=(wid, self.spec.on(self.devices[slot]), child),
                                 name=f"srgpu-worker-{wid}", daemon=True)
        with _main_module_hidden():
            proc.start()
        child.close()
        worker = _Worker(wid, slot, proc, parent)
        self._pool[wid] = worker
        return worker

    def identity(self) -> dict[str, Any]:
        """What of the workers' engines decides their output (EngineSpec.identity)."""
        return self.spec.identity()

    def pids(self) -> list[int]:
        """The worker processes' ids (for tests and tools)."""
        return [w.proc.pid for w in self._pool.values() if w.proc.pid is not None]

    def run(self, tasks: Sequence[Any], on_frames: Callable[[int], None],
            on_result: Callable[[Any], None], on_start: StartCallback | None = None,
            on_error: ErrorCallback | None = None) -> None:
        """Run every task; the first failure (after ending every worker) is raised as WorkerError,
        or, with ``on_error``, reported there; Ctrl-C as KeyboardInterrupt, after every worker is
        ended."""
        if not tasks:
            return
        try:
            self._run(list(tasks), on_frames, on_result, on_start, on_error)
        except BaseException:
            self.close(force=True)
            raise

    def start(self) -> None:
        """Start every worker now, without waiting for them (``run`` starts any that are not): a
        worker takes seconds to import, make its engine and load its kernels, which can pass while
        the caller plans."""
        slots = {w.slot for w in self._pool.values()}
        for slot in range(self.workers):
            if slot not in slots:
                self._start(slot)

    def _run(self, tasks: list[Any], on_frames: Callable[[int], None], on_result: Callable[[Any], None],
             on_start: StartCallback | None, on_error: ErrorCallback | None) -> None:
        self.start()
        base = self._next_tid
        self._next_tid += len(tasks)
        waiting = [base + i for i in range(len(tasks))]
        tries = {tid: 0 for tid in waiting}
        frames_of: dict[int, int] = {}
        left = len(tasks)
        last_check = time.monotonic()
        while left:
            for w in self._pool.values():
                if waiting and w.takes_another():
                    tid = waiting.pop(0)
                    tries[tid] += 1
                    w.tasks.append(tid)
                    if on_start is not None:
                        on_start(tasks[tid - base])
                    try:
                        w.conn.send((tid, tasks[tid - base]))
                    except (BrokenPipeError, OSError):
                        pass  # it died: found below
            conns = {w.conn: w for w in self._pool.values()}
            for conn in mp_wait(list(conns), timeout=0.2):
                w = conns[conn]
                try:
                    kind, tid, payload = conn.recv()
                except (EOFError, OSError, Exception):  # noqa: BLE001 - a worker killed mid-message
                    w.proc.join(5.0)
                    if w.proc.is_alive():
                        w.proc.kill()
                        w.proc.join(1.0)
                    continue
                if kind == "ready":
                    w.ready = True
                    self._died_starting.pop(w.slot, None)
                elif kind == "broken":
                    raise WorkerError(f"the worker on {self.devices[w.slot]} could not start: {payload}")
                elif kind == "frames":
                    frames_of[tid] = frames_of.get(tid, 0) + payload
                    on_frames(payload)
                elif kind == "free":
                    if tid in w.tasks:
                        w.freed.add(tid)
                elif kind == "failed":
                    if on_error is None:
                        raise WorkerError(payload)
                    w.finished(tid)
                    left -= 1
                    if frames_of.get(tid):  # its frames were not made after all
                        on_frames(-frames_of.pop(tid))
                    on_error(tasks[tid - base], payload)
                elif kind == "done":
                    w.finished(tid)
                    left -= 1
                    on_result(payload)
            if time.monotonic() - last_check >= 0.2:
                last_check = time.monotonic()
                for tid, why in self._replace_dead(waiting, tries, frames_of, on_frames, on_error is not None):
                    left -= 1
                    on_error(tasks[tid - base], why)  # type: ignore[misc]

    def _replace_dead(self, waiting: list[int], tries: dict[int, int], frames_of: dict[int, int],
                      on_frames: Callable[[int], None], give_up: bool = False) -> list[tuple[int, str]]:
        """Restart the workers that died and give their tasks to others; a task whose workers died
        more than ``retries`` times: WorkerError, or with ``give_up`` returned (task id, why)."""
        lost: list[tuple[int, str]] = []
        for w in list(self._pool.values()):
            if w.proc.is_alive():
                continue
            w.proc.join(1.0)
            del self._pool[w.wid]
            w.conn.close()
            if not w.ready:  # it ended before its engine was ready: its next one would too
                self._died_starting[w.slot] = self._died_starting.get(w.slot, 0) + 1
                if self._died_starting[w.slot] > self.retries:
                    raise WorkerError(f"the worker on {self.devices[w.slot]} could not start: it ended with "
                                      f"{_exit(w.proc.exitcode)} before its engine was ready, "
                                      f"{self._died_starting[w.slot]} times")
            for tid in w.tasks:
                if frames_of.get(tid):
                    on_frames(-frames_of.pop(tid))
                if tries[tid] > self.retries:
                    why = f"a worker died {tries[tid]} times running the same task ({_exit(w.proc.exitcode)})"
                    if not give_up:
                        raise WorkerError(why)
                    lost.append((tid, why))
                else:
                    waiting.insert(0, tid)
            self._start(w.slot)
        return lost

    def release(self) -> None:
        """Tell every worker to stop, without waiting for them (``close`` waits): the caller has no
        task for them now (a chunked video's chunks are all made; its join goes on meanwhile: a worker
        takes a third of a second to end, BENCHMARKS.md issue 40). A later ``run`` starts new ones."""
        for w in self._pool.values():
            try:
                w.conn.send(None)
            except (OSError, ValueError):
                pass
        self._stopping += self._pool.values()
        self._pool.clear()

    def close(self, force: bool = False) -> None:
        """End the workers: politely (their pipe says stop) or, with ``force``, by SIGTERM, which
        they turn into the same clean-up as Ctrl-C (ffmpeg children ended, temporaries removed);
        those released too."""
        if force:
            self._stopping += self._pool.values()
            self._pool.clear()
            for w in self._stopping:
                if w.proc.is_alive():
                    w.proc.terminate()
        else:
            self.release()
        deadline = time.monotonic() + 10.0
        for w in self._stopping:
            while True:
                try:
                    w.proc.join(max(0.0, deadline - time.monotonic()))
                    break
                except KeyboardInterrupt:
                    continue
            if w.proc.is_alive():
                w.proc.kill()
                w.proc.join(1.0)
            w.conn.close()
        self._stopping.clear()

    def __enter__(self) -> "LocalPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(force=exc[0] is not None)


def _exit(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
