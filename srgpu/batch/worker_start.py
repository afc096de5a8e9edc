"""How LocalPool starts its worker processes, and how a worker ends with the process that started it.

Spawned, each worker imported srgpu, NumPy, OpenCV and CuPy by itself: 0.53-0.55 s of a worker's
1.4 s start on the device hosts, 1.3 s with four at once on two cores (BENCHMARKS.md, session 32),
while the run waits for its workers. Where it can (Linux, with pidfd), the first pool starts
multiprocessing's forkserver, which imports them once, while the caller probes and scans its video,
and every worker is forked from it (0.03-0.06 s to the same point). Nothing of CUDA is inherited
either way: the server only imports (CuPy's import makes no CUDA context), and each worker picks its
GPU before CUDA starts. What a fork from the server would not have of the caller's:
- its environment at the worker's start (the server keeps the one of its own start): the caller's
  is sent with each worker and taken first;
- its death as a signal: the server is the worker's parent, and outlives the caller while any worker
  holds its pipe, so PR_SET_PDEATHSIG would wait on the server; a forked worker watches the caller's
  pid instead (a pidfd) and takes SIGTERM when it ends.
The working directory and sys.path are the caller's in both (multiprocessing sends them).
"""

from __future__ import annotations

import multiprocessing
import os
import select
import signal
import sys
import threading
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from typing import Mapping

# what a chunk or folder worker imports before its first task (the server imports those it finds)
PRELOAD = ("srgpu.batch.pool", "srgpu.video.chunked", "srgpu.video.handover", "srgpu.engine.gpu",
           "srgpu.batch.pool_files", "cupy")


@dataclass(frozen=True)
class Caller:
    """What a worker takes of the process that started it, at its start."""

    pid: int
    environ: Mapping[str, str]
    srgpu: str  # the caller's srgpu package: the worker's must be the same files

    @classmethod
    def now(cls) -> "Caller":
        import srgpu

        return cls(os.getpid(), dict(os.environ), os.path.dirname(os.path.abspath(srgpu.__file__)))


def worker_context() -> BaseContext:
    """The start method for worker processes: the forkserver, started now with PRELOAD (where this
    system has it and pidfd works, which a forked worker needs to end with its caller), else spawn."""
    spawn = multiprocessing.get_context("spawn")
    if sys.platform != "linux" or "forkserver" not in multiprocessing.get_all_start_methods() \
            or not hasattr(os, "pidfd_open"):
        return spawn
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # an old kernel, or a sandbox that refuses it
        return spawn
    from multiprocessing import forkserver

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))  # where the server already runs, it keeps what it has
    # the server must import what this process would: before Python 3.12.8 it ignores this process's
    # sys.path (CPython gh-117378) and looks in its working directory first; so it is given that
    # path as PYTHONPATH, and PYTHONSAFEPATH keeps the directory out (its workers take this
    # process's environment back, take_caller)
    path = os.pathsep.join(os.path.abspath(p) if p else os.getcwd() for p in sys.path)
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "PYTHONSAFEPATH")}
    os.environ.update(PYTHONPATH=path, PYTHONSAFEPATH="1")
    try:
        forkserver.ensure_running()
    except OSError:
        return spawn
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return ctx


def take_caller(caller: Caller) -> None:
    """In a worker, first: the caller's environment of now, and an end with the caller. OSError
    where the worker's srgpu is not the caller's (a server that imported another)."""
    if dict(os.environ) != caller.environ:
        os.environ.clear()
        os.environ.update(caller.environ)
    _end_with_parent()
    if os.getppid() != caller.pid:  # forked by the server
        threading.Thread(target=_watch, args=(caller.pid,), name="srgpu-watch-caller", daemon=True).start()
    import srgpu

    here = os.path.dirname(os.path.abspath(srgpu.__file__))
    if here != caller.srgpu:
        raise OSError(f"the worker runs the srgpu of {here}, not the caller's of {caller.srgpu}")


def _end() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


def _watch(pid: int) -> None:
    """SIGTERM this worker once process ``pid`` has ended (the worker then cleans up as after Ctrl-C)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:  # it ended before the worker looked
        _end()
        return
    except OSError:
        return  # not watchable here (the caller only forks where it is): its pipe's end ends the worker
    try:
        select.select([fd], [], [])  # readable once the process has ended
    finally:
        os.close(fd)
    _end()


def _end_with_parent() -> None:
    """Linux: SIGTERM this worker when its parent dies, even by SIGKILL (the worker then cleans up
    as after Ctrl-C); elsewhere the broken pipe ends it at its next message."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the parent died before the call
            _end()
    except (OSError, AttributeError):
        pass
