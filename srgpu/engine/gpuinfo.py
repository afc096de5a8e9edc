"""What CUDA devices are usable, or why none is. Never raises (but require_gpu, asked to): a machine
with no GPU, no driver or no CuPy is a normal case. Whether cuda:N exists is decided here, once
(missing_gpu): the engine factory, require_gpu and the workers' --device and --gpus ask it."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class CudaDevice:
    index: int
    name: str
    compute_capability: str
    total_memory: int
    free_memory: int | None  # None unless cuda_status(free_memory=True) was asked: see there
    multiprocessors: int
    pci_bus_id: str | None = None  # "0000:3b:00.0": how NVML names the same device (free_memory)


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
    """The usable devices, from their properties, which need no CUDA context: a context costs
    about 0.5 GB of GPU memory and start-up time, and a worker that made one on every GPU of the
    host to look at them held N of them (BENCHMARKS.md issue 40). ``free_memory``: also each
    device's free memory, from NVML (no context) where the driver has it, else from CUDA (a context
    on every device: for ``srgpu info``, a one-off)."""
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
            bus = f"{int(props['pciDomainID']):04x}:{int(props['pciBusID']):02x}:{int(props['pciDeviceID']):02x}.0"
            devices.append(CudaDevice(
                index=i, name=props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
                compute_capability=f"{props['major']}.{props['minor']}", total_memory=int(props["totalGlobalMem"]),
                free_memory=None, multiprocessors=int(props["multiProcessorCount"]), pci_bus_id=bus))
        except Exception as e:
            errors.append(f"device {i}: {_one_line(e)}")
    if free_memory and devices:
        free = nvml_free_memory([d.pci_bus_id or "" for d in devices])
        if free is None:
            free = []
            for d in devices:
                with cupy.cuda.Device(d.index):
                    free.append(int(runtime.memGetInfo()[0]))
        devices = [replace(d, free_memory=f) for d, f in zip(devices, free)]
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


class _NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def nvml_free_memory(pci_bus_ids: list[str]) -> list[int] | None:
    """Free bytes of each device (by PCI bus id, which CUDA and NVML agree on whatever their
    orders and CUDA_VISIBLE_DEVICES), from the driver's NVML: no CUDA context. None where NVML
    cannot be loaded or does not know a device."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    if nvml.nvmlInit_v2() != 0:
        return None
    try:
        out = []
        for bus in pci_bus_ids:
            handle, memory = ctypes.c_void_p(), _NvmlMemory()
            if (nvml.nvmlDeviceGetHandleByPciBusId_v2(bus.encode(), ctypes.byref(handle)) != 0
                    or nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)) != 0):
                return None
            out.append(int(memory.free))
        return out
    finally:
        nvml.nvmlShutdown()


def _version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__
