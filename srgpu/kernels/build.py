"""Run-time compilation (CuPy RawModule / NVRTC) and checked launches.

Every compile or launch failure becomes an EngineError that names the kernel, so the engine
selection can fall back to the CPU (``--device auto``) or fail clearly (``--device cuda``).
Project headers (``#include "x.cuh"``) are inlined into the source string: CuPy's compile cache
keys on the source text and would not see edits to an ``-I`` header.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from ..errors import EngineError
from ..outputs import replace_atomically
from .launch import DeviceLimits, Launch, LaunchError, validate_launch

KERNEL_DIR = Path(__file__).resolve().parent
COMPILE_OPTIONS = ("-std=c++17",)
MAX_CHECKED_LAUNCHES = 4096
_INCLUDE = re.compile(r'^\s*#include\s+"([A-Za-z0-9_.]+)"\s*$', re.MULTILINE)


@lru_cache(maxsize=None)
def load_source(filename: str) -> str:
    """A .cu file with its project headers inlined (each once)."""
    seen: set[str] = set()

    def expand(name: str) -> str:
        if name in seen:
            return ""
        seen.add(name)
        text = (KERNEL_DIR / name).read_text()
        return _INCLUDE.sub(lambda m: expand(m.group(1)), text)

    return expand(filename)


@lru_cache(maxsize=1)
def sources_digest() -> str:
    """Hash of every kernel source: a plan measured with other kernels is stale. Once per process
    (the sources are the installed package's; a folder of many sizes asks once per size)."""
    h = hashlib.sha256()
    for p in sorted(KERNEL_DIR.glob("*.cu")) + sorted(KERNEL_DIR.glob("*.cuh")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def device_limits(device_index: int = 0) -> DeviceLimits:
    import cupy as cp

    props = cp.cuda.runtime.getDeviceProperties(device_index)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    optin = int(props.get("sharedMemPerBlockOptin", 0)) or int(props["sharedMemPerBlock"])
    return DeviceLimits(
        name=name, compute_capability=f"{props['major']}.{props['minor']}",
        max_threads_per_block=int(props["maxThreadsPerBlock"]),
        max_block_dims=tuple(int(v) for v in props["maxThreadsDim"]),  # type: ignore[arg-type]
        max_grid_dims=tuple(int(v) for v in props["maxGridSize"]),  # type: ignore[arg-type]
        max_shared_per_block=int(props["sharedMemPerBlock"]), max_shared_per_block_optin=optin,
        multiprocessors=int(props["multiProcessorCount"]), total_memory=int(props["totalGlobalMem"]))


class Kernel:
    """One compiled kernel (a template instantiation) with checked launches."""

    def __init__(self, name: str, function: Any, limits: DeviceLimits) -> None:
        self.name = name
        self.function = function
        self.limits = limits
        self._shared_raised = 0
        self._checked: set[Launch] = set()  # launches validated already: a folder of small images
        # launches the same few shapes thousands of times

    @property
    def registers(self) -> int:
        return int(self.function.num_regs)

    @property
    def local_bytes(self) -> int:
        return int(self.function.local_size_bytes)

    def check(self, launch: Launch) -> None:
        if launch in self._checked:
            return
        try:
            validate_launch(launch, self.limits, int(self.function.max_threads_per_block))
        except LaunchError as e:
            raise EngineError(str(e)) from None
        if len(self._checked) < MAX_CHECKED_LAUNCHES:
            self._checked.add(launch)

    def __call__(self, launch: Launch, args: Sequence[Any], stream: Any) -> None:
        self.check(launch)
        try:
            if launch.needs_shared_optin and launch.shared_bytes > self._shared_raised:
                self.function.max_dynamic_shared_size_bytes = launch.shared_bytes
                self._shared_raised = launch.shared_bytes
            self.function(launch.grid, launch.block, tuple(args), shared_mem=launch.shared_bytes, stream=stream)
        except EngineError:
            raise
        except Exception as e:  # CUDADriverError / CUDARuntimeError and friends
            raise EngineError(f"kernel {self.name} failed to launch "
                              f"(grid {launch.grid}, block {launch.block}, {launch.shared_bytes} B shared): "
                              f"{_one_line(e)}") from None


_ModuleKey = tuple[str, tuple[str, ...], int]
_modules: dict[_ModuleKey, dict[str, Kernel]] = {}
_locks_guard = threading.Lock()
_locks: dict[_ModuleKey, threading.Lock] = {}


def _lock_for(key: _ModuleKey) -> threading.Lock:
    """One lock per module: a module compiles once however many threads ask for it, and different
    modules compile at once (NVRTC gives up the GIL: a first run compiles its kernels side by side)."""
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


def compile_kernels(filename: str, names: Sequence[str], device_index: int, limits: DeviceLimits,
                    extra_source: str = "", arch: str | None = None) -> dict[str, Kernel]:
    """Compile the template instantiations ``names`` of ``filename`` in one NVRTC call (cached
    per process). ``arch``: a target other than the device's own (``"sm_90a"``: wgmma), built by
    :func:`compile_for_arch`. Raises EngineError naming the kernels on a compile error."""
    import cupy as cp

    names = tuple(sorted(set(names)))
    key = (filename + extra_source + (f"@{arch}" if arch else ""), names, device_index)
    with _lock_for(key):
        if key in _modules:
            return _modules[key]
        code = load_source(filename) + extra_source
        try:
            with cp.cuda.Device(device_index):
                if arch is None:
                    module = cp.RawModule(code=code, options=COMPILE_OPTIONS, name_expressions=list(names))
                    kernels = {n: Kernel(n, module.get_function(n), limits) for n in names}
                else:
                    kernels = _load_for_arch(code, filename, names, arch, limits)
                for k in kernels.values():  # force the load now, so failures surface here
                    _ = k.function.num_regs
        except Exception as e:
            shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
            raise EngineError(f"kernel {shown} ({filename}) failed to compile: {_compile_message(e)}") from None
        _modules[key] = kernels
        return kernels


def _load_for_arch(code: str, filename: str, names: tuple[str, ...], arch: str,
                   limits: DeviceLimits) -> dict[str, Kernel]:
    """The kernels of :func:`compile_for_arch`'s cubin, loaded; a cached cubin that does not load
    (damaged, or from a driver that no longer takes it) is built again once."""
    import cupy as cp

    for fresh in (False, True):
        path, lowered = compile_for_arch(code, filename, names, arch, fresh=fresh)
        try:
            module = cp.RawModule(path=str(path))
            kernels = {n: Kernel(n, module.get_function(lowered[n]), limits) for n in names}
            for k in kernels.values():
                _ = k.function.num_regs
            return kernels
        except Exception:
            if fresh:
                raise
    raise AssertionError("unreachable")


def _cubin_cache_dir() -> Path:
    """Where :func:`compile_for_arch` keeps its cubins: CuPy's kernel cache folder."""
    return Path(os.environ.get("CUPY_CACHE_DIR", Path.home() / ".cupy" / "kernel_cache"))


def _arch_cache_paths(code: str, names: Sequence[str], arch: str) -> tuple[Path, Path, list[str]]:
    """The cubin and name-index paths :func:`compile_for_arch` keeps a build under (by source, options, names and
    NVRTC version), and the options."""
    from cupy_backends.cuda.libs import nvrtc

    options = [*COMPILE_OPTIONS, f"-arch={arch}"]
    digest = hashlib.sha256("\0".join([code, *options, *names, str(nvrtc.getVersion())]).encode()).hexdigest()[:32]
    folder = _cubin_cache_dir()
    return folder / f"srgpu_{digest}.cubin", folder / f"srgpu_{digest}.json", options


def compile_for_arch(code: str, filename: str, names: Sequence[str], arch: str,
                     fresh: bool = False) -> tuple[Path, dict[str, str]]:
    """NVRTC straight to a cubin for ``arch`` (e.g. ``"sm_90a"``; CuPy's RawModule would add its own
    ``-arch`` for the device, sm_90, which rejects wgmma): the cubin's path (cached on disk by source,
    options and NVRTC version) and each name's lowered (mangled) name. Raises RuntimeError with
    NVRTC's log on a compile error."""
    from cupy_backends.cuda.libs import nvrtc

    path, index, options = _arch_cache_paths(code, names, arch)
    folder = path.parent
    if not fresh and path.is_file() and index.is_file():
        try:
            lowered = json.loads(index.read_text())
        except (OSError, ValueError):
            lowered = {}
        if isinstance(lowered, dict) and set(lowered) == set(names):
            return path, lowered
    prog = nvrtc.createProgram(code, filename, [], [])
    try:
        for n in names:
            nvrtc.addNameExpression(prog, n)
        try:
            nvrtc.compileProgram(prog, options)
        except nvrtc.NVRTCError:
            log = nvrtc.getProgramLog(prog)
            raise RuntimeError(log.decode(errors="replace") if isinstance(log, bytes) else log) from None
        cubin = nvrtc.getCUBIN(prog)
        lowered = {n: nvrtc.getLoweredName(prog, n) for n in names}
    finally:
        nvrtc.destroyProgram(prog)
    folder.mkdir(parents=True, exist_ok=True)
    # written whole, then renamed: no half files for other processes (or engines made on other threads)
    replace_atomically(path, lambda f: f.write(cubin))
    text = json.dumps(lowered).encode()
    replace_atomically(index, lambda f: f.write(text))
    return path, lowered


def built_for_arch(filename: str, names: Sequence[str], arch: str) -> bool:
    """Whether :func:`compile_kernels` would find these kernels' ``arch`` cubin on disk (no compile)."""
    path, index, _ = _arch_cache_paths(load_source(filename), tuple(sorted(set(names))), arch)
    return path.is_file() and index.is_file()


_background: dict[str, Any] = {}  # cubin path -> the build's process (subprocess.Popen), once per process
BUILD_MARKER_S = 600.0  # a build marker younger than this means another process is building that cubin

_BUILD_CHILD = """
import os, sys
from srgpu.kernels.build import compile_for_arch, load_source
filename, arch, marker, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
try:
    compile_for_arch(load_source(filename), filename, names, arch)
finally:
    try:
        os.unlink(marker)
    except OSError:
        pass
"""


def build_in_background(filename: str, names: Sequence[str], arch: str) -> None:
    """Start building these kernels' ``arch`` cubin into the disk cache, as :func:`compile_kernels` would, in a
    process of its own: it outlives this one, so a run shorter than the build still leaves the cubin for the next
    (a thread would not: at exit the process waits for NVRTC to finish). Once per process and cubin; a marker
    beside the cubin (younger than BUILD_MARKER_S) keeps other processes from starting the same build. Nothing
    partial is left: the cubin is written whole and renamed into place."""
    import subprocess
    import sys
    import time

    names = tuple(sorted(set(names)))
    path, _, _ = _arch_cache_paths(load_source(filename), names, arch)
    marker = path.with_suffix(".building")
    with _locks_guard:
        if str(path) in _background:
            return
        _background[str(path)] = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if marker.is_file() and time.time() - marker.stat().st_mtime < BUILD_MARKER_S:
            return
        marker.write_text(str(os.getpid()))
        env = dict(os.environ)  # the same srgpu, and the same kernel cache (CUPY_CACHE_DIR)
        env["PYTHONPATH"] = os.pathsep.join([str(KERNEL_DIR.parents[1])] + [p for p in [env.get("PYTHONPATH")] if p])
        _background[str(path)] = subprocess.Popen(
            [sys.executable, "-c", _BUILD_CHILD, filename, arch, str(marker), *names], env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:  # no cache folder or no process: the run that needs the kernel compiles it itself
        pass


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _compile_message(e: BaseException) -> str:
    """The first compiler error line (NVRTC logs are long)."""
    text = str(e)
    for line in text.splitlines():
        if "error" in line.lower():
            return " ".join(line.split())[:300]
    return _one_line(e)[:300]
