"""The chunks of a long video as tasks of a Dask distributed cluster (``--cluster ADDRESS``; the
``srgpu[cluster]`` extra installs dask[distributed]).

Every worker of the cluster needs srgpu installed and sees the source, the work folder and the
output under the same paths (a shared filesystem): a task names files, it does not carry
frames. A worker with a GPU says so with a resource (``dask worker tcp://scheduler:8786
--resources GPU=1 --nthreads 1``, or dask-cuda's ``dask cuda worker``, one worker per GPU); when
any worker has one, every chunk asks for one (``resources={"GPU": 1}``), so a GPU runs one chunk
of each of its workers at a time. Each worker process makes its engine once (on the GPU it sees
first, else the CPU) and keeps it for the tasks that follow.

Paths are absolute (srgpu.video.chunked.plan_chunked; the command line for a folder's files): a
worker's own working directory never decides which file it opens; a chunk's worker checks that
the source it finds is the coordinator's before it decodes a frame (chunked.check_source).

A worker lost while it makes a chunk (killed, its machine gone) is the scheduler's business: it
gives the task to another worker (up to the scheduler's ``allowed-failures``), and a task that
raises is retried ``retries`` times. Nothing half-made counts: a chunk file gets its name only
once it is verified, and the join checks every chunk's hash (srgpu.video.chunked); a file of a
folder gets its name only once whole (srgpu.batch.tasks). A finished task's future is let go as soon
as its result is here (the result that matters is on disk), so the scheduler never recomputes it
when the worker that held it is lost; a task run again anyway finds its chunk verified and returns
it without work. When a run stops (a failure, Ctrl-C), its tasks are cancelled, the running ones
end at their next frame, and ``run`` returns only once none runs. Progress is counted as tasks
finish (a task cannot report its frames while it runs).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any, Callable, Sequence

from ..errors import EngineError
from .pool import EngineSpec, ErrorCallback, StartCallback, WorkerError

_local = threading.local()  # one engine per worker thread (engines are not shared between threads)


def _client_class() -> Any:
    try:
        from distributed import Client
    except ImportError:
        raise EngineError("--cluster needs Dask distributed: pip install 'srgpu[cluster]' (on this machine and "
                          "on every worker)") from None
    return Client


def check_address(address: str) -> str:
    """``--cluster``'s value, stripped: EngineError (one line) for an empty one or one that names no
    scheduler (distributed's own parser, where it is installed; else the connection says)."""
    text = address.strip()
    if not text:
        raise EngineError("--cluster needs the Dask scheduler's address (tcp://HOST:8786), not an empty string")
    try:
        from distributed.comm.addressing import parse_address, parse_host_port
    except ImportError:
        return text
    try:
        scheme, location = parse_address(text)
        if scheme in ("tcp", "tls"):
            parse_host_port(location)
    except (ValueError, TypeError) as e:
        raise EngineError(f"--cluster {address}: not a Dask scheduler's address ({e}); use tcp://HOST:8786") from None
    return text


class _MutedLogs:
    """distributed's own log records muted (its tracebacks while it reconnects, closes, loses a
    worker) for a command line run, which says what went wrong in its own one line: its loggers
    disabled, and its handlers dropping the records of loggers made later."""

    def __init__(self) -> None:
        names = [n for n in list(logging.root.manager.loggerDict) if n.split(".")[0] in ("distributed", "tornado")]
        self._disabled = {n: logging.getLogger(n).disabled for n in names}
        self._handlers = [h for n in ("distributed", "tornado") for h in logging.getLogger(n).handlers]
        for n in names:
            logging.getLogger(n).disabled = True
        for h in self._handlers:
            h.addFilter(_drop)

    def restore(self) -> None:
        for name, disabled in self._disabled.items():
            logging.getLogger(name).disabled = disabled
        for h in self._handlers:
            h.removeFilter(_drop)
        self._disabled, self._handlers = {}, []


def _drop(record: logging.LogRecord) -> bool:
    return False


# per worker process: the runs whose coordinator stopped them (a failure, Ctrl-C), and how many
# tasks of each run its threads are running, so that the coordinator can wait for them to end
_stopped: set[str] = set()
_running: dict[str, int] = {}
_state = threading.Lock()


class Stopped(Exception):
    """The task's run was stopped by its coordinator: the task ends without publishing anything."""


def run_task(task: Any, spec: EngineSpec, run: str = "") -> Any:
    """On a Dask worker: run one task with this thread's engine for ``spec`` (made on first use);
    it ends at its next frame once its ``run`` is stopped (stop_run)."""
    from ..manifest import weights_hash

    def check(n: int = 0) -> None:
        if run in _stopped:
            raise Stopped(f"run {run} stopped by its coordinator")

    with _state:  # under the lock stop_run takes: it counts this task, or this task sees the stop
        check()
        _running[run] = _running.get(run, 0) + 1
    try:
        engines = getattr(_local, "engines", None)
        if engines is None:
            engines = _local.engines = {}
        key = (spec.scale, spec.device, spec.precision, weights_hash(spec.model.arrays()))
        engine = engines.get(key)
        if engine is None:
            engine = engines[key] = spec.create()
        return task.execute(engine, check)
    finally:
        with _state:
            _running[run] -= 1
            if not _running[run]:
                del _running[run]


def stop_run(run: str) -> int:
    """On a Dask worker (Client.run): stop ``run``'s tasks; how many of them are still running."""
    with _state:
        _stopped.add(run)
        return _running.get(run, 0)


def running(run: str) -> int:
    """On a Dask worker (Client.run): how many of ``run``'s tasks are still running."""
    with _state:
        return _running.get(run, 0)


class DaskRunner:
    """Runs tasks on a Dask cluster: ``address`` (tcp://host:8786) or a distributed.Client.
    ``workers``: how many tasks the cluster runs at once (its GPUs where its workers have the GPU
    resource, else its worker threads), for the chunk plan's cost model. ``quiet_logs``: mute
    distributed's log records while the runner lives (the command line: one line of error only)."""

    def __init__(self, address: Any, spec: EngineSpec, retries: int = 2, timeout: float | None = None,
                 quiet_logs: bool = False) -> None:
        client_class = _client_class()
        self._own = not isinstance(address, client_class)
        self._logs = _MutedLogs() if quiet_logs else None
        try:
            if self._own:
                address = check_address(address)
            # timeout None: Dask's own (distributed.comm.timeouts.connect, 30 s by default)
            self.client = (client_class(address, **({"timeout": timeout} if timeout else {})) if self._own
                           else address)
        except (OSError, TimeoutError) as e:
            self._restore_logs()
            raise EngineError(f"cannot reach the Dask scheduler at {address}: {e}") from None
        except (EngineError, ValueError, TypeError) as e:
            self._restore_logs()
            raise EngineError(str(e) if isinstance(e, EngineError)
                              else f"--cluster {address}: not a Dask scheduler's address ({e})") from None
        self.address = address if self._own else getattr(self.client.scheduler, "address", "?")
        info = self.client.scheduler_info()
        workers = info.get("workers", {})
        if not workers:
            self.close()
            raise EngineError(f"the Dask cluster at {address} has no workers")
        gpus = sum(int(w.get("resources", {}).get("GPU", 0)) for w in workers.values())
        self.gpu = gpus > 0
        self.workers = gpus if self.gpu else sum(int(w.get("nthreads", 1)) for w in workers.values())
        # on the cluster each worker uses the GPU it sees (dask-cuda gives each one its own), or the CPU
        device = spec.device if spec.device != "auto" else ("cuda" if self.gpu else "cpu")
        self.spec = EngineSpec(spec.model, spec.scale, "cuda" if device.startswith("cuda") else device, spec.precision)
        self.retries = retries

    def identity(self) -> dict[str, Any]:
        """What of the cluster's engines decides their output (EngineSpec.identity)."""
        return self.spec.identity()

    def run(self, tasks: Sequence[Any], on_frames: Callable[[int], None],
            on_result: Callable[[Any], None], on_start: StartCallback | None = None,
            on_error: ErrorCallback | None = None) -> None:
        """Submit every task, report each as it finishes; the first failure cancels the rest and is
        raised as WorkerError (one line), or, with ``on_error``, is reported there and the others go
        on. ``on_start``: every task is submitted at once, so every task is started at once."""
        from distributed import as_completed

        if not tasks:
            return
        run = uuid.uuid4().hex[:8]
        spec = self.spec
        resources = {"GPU": 1} if self.gpu else None
        for task in tasks if on_start is not None else ():
            on_start(task)  # type: ignore[misc]
        futures = [self.client.submit(run_task, task, spec, run, key=f"srgpu-{run}-{i}", resources=resources,
                                      retries=self.retries, pure=False)
                   for i, task in enumerate(tasks)]
        task_of = {f.key: t for f, t in zip(futures, tasks)}
        pending = {f.key: f for f in futures}
        del futures  # a finished task's future is let go (below): its result is on disk and here, and
        # a result the cluster still held would be recomputed when the worker holding it is lost
        try:
            for future in as_completed(list(pending.values())):
                pending.pop(future.key, None)
                try:
                    result = future.result()
                except Exception as e:  # noqa: BLE001 - the task's error, or the scheduler's KilledWorker
                    if self._lost(e):  # every other task is lost with it: the whole run stops
                        raise WorkerError(f"lost the connection to the Dask scheduler at {self.address}; "
                                          "what was finished is kept for the next run") from None
                    if on_error is None:
                        raise WorkerError(_one_line(e)) from None
                    on_error(task_of[future.key], _one_line(e))
                    continue
                finally:
                    future.release()
                on_frames(int(getattr(result, "frames", 0)))
                on_result(result)
        except BaseException:
            self._stop(run, list(pending.values()))
            raise

    def _stop(self, run: str, futures: list[Any], wait: float = 60.0) -> None:
        """Cancel ``futures`` and end the run's tasks already running (at their next frame), then
        wait until none runs (at most ``wait`` seconds): no task of a run writes after srgpu exits."""
        try:
            self.client.cancel(futures)
            deadline = time.monotonic() + wait
            left = self.client.run(stop_run, run)
            while any(left.values()) and time.monotonic() < deadline:
                time.sleep(0.1)
                left = self.client.run(running, run)
        except Exception:  # noqa: BLE001 - a client without its scheduler can neither cancel nor ask
            pass

    def _lost(self, e: BaseException) -> bool:
        """Whether ``e`` says the client lost its scheduler (rather than one task failing): also the
        closed connection itself, which a result being gathered as the scheduler dies raises before
        the client's status has changed."""
        from distributed.comm.core import CommClosedError

        return (isinstance(e, CommClosedError) or "scheduler-connection-lost" in str(e)
                or self.client.status not in ("running", "newly-created"))

    def release(self) -> None:
        """Nothing to end: the cluster's workers are not this run's."""

    def close(self) -> None:
        try:
            if self._own:
                self.client.close()
        except Exception:  # noqa: BLE001 - a client whose scheduler is gone closes with an error
            pass
        finally:
            self._restore_logs()

    def _restore_logs(self) -> None:
        if self._logs is not None:
            self._logs.restore()

    def __enter__(self) -> "DaskRunner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_OWN_ERRORS = ("VideoError", "EngineError", "ChunkMismatch", "DamagedChunk", "SourceMismatch")  # their text says it all


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    name = type(e).__name__
    if name == "KilledWorker":
        return f"the task's worker died too many times: {text}"
    return text if name in _OWN_ERRORS else f"{name}: {text}"
