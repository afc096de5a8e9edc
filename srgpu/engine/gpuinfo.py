"""What CUDA devices are usable, or why none is. Never raises (but require_gpu, asked to): a machine
with no GPU, no driver or no CuPy is a normal case. Whether cuda:N exists is decided here, once
(missing_gpu): the engine factory, require_gpu and the workers' --device and --gpus ask it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CudaDevice:
    index: int
    name: str
    compute_capability: str
    total_memory: int
    free_memory: int | None  # None unless cuda_status(free_memory=True) was asked: see there
    multiprocessors: int


@dataclass(frozen=True)
class CudaStatus:
    devices: tuple[CudaDevice, ...]
    reason: str | None  # why no device is usable; None when at least one is
    cupy_version: str | None
    cuda_runtime: str | None
    driver: str | None
    nvrtc: str | None = None  # the run-time compiler CuPy builds srgpu's kernels with

    @property
    def usable(self) -> bool:
        return bool(self.devices)


def missing_gpu(index: int, status: CudaStatus) -> str | None:
    """"cuda:N does not exist (K usable device(s))" where cuda:``index`` is not one of ``status``'s usable
    devices; None where it is."""
    if index in {d.index for d in status.devices}:
        return None
    return f"cuda:{index} does not exist ({len(status.devices)} usable device(s))"


def require_gpu(device_index: int = 0) -> None:
    """EngineError saying why, unless cuda:device_index is usable."""
    from ..errors import EngineError

    status = cuda_status()
    if not status.usable:
        raise EngineError(f"no usable CUDA GPU: {status.reason}")
    missing = missing_gpu(device_index, status)
    if missing:
        raise EngineError(missing)


def cuda_status(free_memory: bool = False) -> CudaStatus:
    """The usable devices. ``free_memory``: also each device's free memory, which needs a CUDA
    context on every device (about 0.5 GB of GPU memory each, and seconds of start-up): a worker
    process that asked would hold a context on every GPU of the host, not only its own. Everything
    else comes from the device properties, which need no context."""
    try:
        import cupy
    except Exception as e:  # ImportError, or a broken CUDA library underneath
        return CudaStatus((), f"CuPy is not importable ({type(e).__name__}: {e})", None, None, None)
    try:
        from cupy.cuda import runtime
    except Exception as e:
        return CudaStatus((), f"CuPy's CUDA runtime is not loadable ({e})", cupy.__version__, None, None)
    nvrtc, nvrtc_error = _nvrtc()
    rt = drv = None
    try:
        rt = _version(runtime.runtimeGetVersion())
        drv = _version(runtime.driverGetVersion())
        count = runtime.getDeviceCount()
    except Exception as e:
        if drv == "0.0":  # cudaDriverGetVersion gives 0 when no driver is loaded at all
            return CudaStatus((), "no NVIDIA driver is installed or visible", cupy.__version__, rt, None, nvrtc)
        return CudaStatus((), f"no usable CUDA driver ({_one_line(e)})", cupy.__version__, rt, drv, nvrtc)
    if count == 0:
        return CudaStatus((), "the CUDA driver reports no devices", cupy.__version__, rt, drv, nvrtc)
    devices = []
    errors = []
    for i in range(count):
        try:
            props = runtime.getDeviceProperties(i)
            free: int | None = None
            if free_memory:
                with cupy.cuda.Device(i):
                    free = int(runtime.memGetInfo()[0])
            devices.append(CudaDevice(
                index=i, name=props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
                compute_capability=f"{props['major']}.{props['minor']}", total_memory=int(props["totalGlobalMem"]),
                free_memory=free, multiprocessors=int(props["multiProcessorCount"])))
        except Exception as e:
            errors.append(f"device {i}: {_one_line(e)}")
    usable, reason = verdict(devices, errors, nvrtc_error)
    return CudaStatus(usable, reason, cupy.__version__, rt, drv, nvrtc)


def verdict(devices: list[CudaDevice], errors: list[str],
            nvrtc_error: str | None) -> tuple[tuple[CudaDevice, ...], str | None]:
    """(usable devices, why none is): a GPU without NVRTC cannot build srgpu's kernels, so it is
    not usable, and the reason says what to install."""
    if devices and nvrtc_error is not None:
        return (), (f"CuPy cannot load NVRTC, which compiles srgpu's kernels ({nvrtc_error}): "
                    "pip install nvidia-cuda-nvrtc-cu12, or install a CUDA toolkit")
    return tuple(devices), None if devices else "; ".join(errors) or "no usable device"


def _nvrtc() -> tuple[str | None, str | None]:
    """(NVRTC version, None), (None, why it cannot be loaded), or (None, None) if unknown."""
    try:
        from cupy_backends.cuda.libs import nvrtc

        get_version = nvrtc.getVersion
    except (ImportError, AttributeError):
        return None, None  # another CuPy layout: unknown, and not a reason to refuse the GPU
    try:
        major, minor = get_version()
        return f"{major}.{minor}", None
    except Exception as e:  # the library itself cannot be found or loaded: kernels cannot compile
        return None, _one_line(e)


def _version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__
