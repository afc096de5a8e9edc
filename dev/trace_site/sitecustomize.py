"""A timeline of one srgpu command, every process of it (the coordinator, the spawned workers): with
this folder on PYTHONPATH and SRGPU_DEV_TRACE=<folder>, each Python process appends
"<time.time()> <pid> <event> B|E|I" lines to <folder>/<pid>.log for the functions named below,
patched as their modules are first imported (so `from module import name` elsewhere gets the
patched one). Read them with dev/trace_report.py. Not part of the product: nothing under srgpu/
knows of it."""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import sys
import time

_DIR = os.environ.get("SRGPU_DEV_TRACE")
TARGETS = {
    "srgpu.batch.route": ["upscale", "_upscale_in_chunks", "make_engine", "_forget_finished_chunks",
                          "_one_pipeline_device"],
    "srgpu.batch.plan": ["plan_batch"],
    "srgpu.model": ["resolve_model"],
    "srgpu.engine.gpuinfo": ["cuda_status", "nvml_free_memory"],
    "srgpu.kernels.bicubic": ["Bicubic.__init__"],
    "srgpu.kernels.quantize": ["Quantize.__init__"],
    "srgpu.video.probe": ["probe"],
    "srgpu.video.chunks": ["scan", "chunkable", "decoder_time_base"],
    "srgpu.video.hwdecode": ["decodes_like_software", "choose_decoder"],
    "srgpu.video.chunked": ["plan_chunked_or_single", "join", "_upscale_chunked", "run_chunk", "_make_chunk",
                            "_choose_plan", "check_chunk", "_check_nvenc", "file_digest", "_fsync",
                            "check_source", "WorkFolder.open"],
    "srgpu.batch.pool": ["plan_workers", "workers_that_fit", "LocalPool.start", "LocalPool._start", "LocalPool.close", "LocalPool._run", "_own_gpu",
                         "EngineSpec.create"],
    "srgpu.video.verify": ["check_frames"],
    "srgpu.video.reader": ["Reader.start"],
    "srgpu.video.writer": ["Writer.start", "Writer.finish"],
    "srgpu.video.pipeline": ["run_pipeline"],
    "srgpu.video.api": ["upscale_video"],
    "srgpu.outputs": ["publish"],
    "srgpu.engine.gpu": ["GPUEngine.__init__", "GPUEngine.frame_processor"],
}
GENERATORS = {"srgpu.video.reader": ["Reader.frames"]}
FIRST_CALL = {"srgpu.video.writer": ["Writer.write"]}


def _log(event: str, kind: str) -> None:
    with open(os.path.join(_DIR, f"{os.getpid()}.log"), "a") as f:  # type: ignore[arg-type]
        f.write(f"{time.time():.4f} {os.getpid()} {event} {kind}\n")


def _wrap(name: str, fn):  # type: ignore[no-untyped-def]
    @functools.wraps(fn)
    def traced(*a, **k):  # type: ignore[no-untyped-def]
        _log(name, "B")
        try:
            return fn(*a, **k)
        finally:
            _log(name, "E")
    return traced


def _wrap_gen(name: str, fn):  # type: ignore[no-untyped-def]
    @functools.wraps(fn)
    def traced(*a, **k):  # type: ignore[no-untyped-def]
        _log(name, "B")
        first = True
        for item in fn(*a, **k):
            if first:
                _log(name + ".first", "I")
                first = False
            yield item
        _log(name, "E")
    return traced


def _wrap_first(name: str, fn):  # type: ignore[no-untyped-def]
    seen: set[int] = set()

    @functools.wraps(fn)
    def traced(self, *a, **k):  # type: ignore[no-untyped-def]
        if id(self) not in seen:
            seen.add(id(self))
            _log(name + ".first", "I")
        return fn(self, *a, **k)
    return traced


def _patch(module) -> None:  # type: ignore[no-untyped-def]
    for table, wrap in ((TARGETS, _wrap), (GENERATORS, _wrap_gen), (FIRST_CALL, _wrap_first)):
        for qual in table.get(module.__name__, []):
            owner, attr = module, qual
            if "." in qual:
                cls, attr = qual.split(".")
                owner = getattr(module, cls)
            setattr(owner, attr, wrap(f"{module.__name__.split('.')[-1]}.{qual}", getattr(owner, attr)))


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname not in TARGETS and fullname not in GENERATORS and fullname not in FIRST_CALL:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):  # type: ignore[no-untyped-def]
            run(module)
            _patch(module)
        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _thread_cpu() -> None:
    """Each thread's own CPU seconds (user + system), logged as it ends: where a process's CPU goes."""
    import atexit
    import threading

    run = threading.Thread.run

    def counted(self):  # type: ignore[no-untyped-def]
        try:
            run(self)
        finally:
            _log(f"thread-cpu {self.name} {time.thread_time():.3f}", "I")
    threading.Thread.run = counted  # type: ignore[method-assign]
    atexit.register(lambda: _log(f"thread-cpu main {time.thread_time():.3f} process {time.process_time():.3f}", "I"))
    atexit.register(_threads_alive_at_exit)


def _threads_alive_at_exit() -> None:
    """The threads still running at exit, which never log their own end: Python's daemon threads
    ("alive:NAME") and threads Python did not start ("native:COMM": the CUDA driver's, NVML's ...),
    from /proc (Linux): where a process's CPU goes that its ended threads do not explain."""
    import threading

    python = {t.native_id: t.name for t in threading.enumerate() if t is not threading.main_thread()}
    main = threading.main_thread().native_id
    tick = os.sysconf("SC_CLK_TCK")
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return
    for tid in tids:
        if int(tid) == main:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")].replace(" ", "_")
        fields = stat[stat.rindex(")") + 2:].split()
        seconds = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
        name = f"alive:{python[int(tid)]}" if int(tid) in python else f"native:{comm}"
        _log(f"thread-cpu {name.replace(' ', '_')} {seconds:.3f}", "I")


if _DIR:
    os.makedirs(_DIR, exist_ok=True)
    _thread_cpu()
    _log("python " + " ".join(sys.argv[:1] or ["?"]), "I")
    sys.meta_path.insert(0, _Finder())
