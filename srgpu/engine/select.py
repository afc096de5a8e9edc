"""``--device auto|cpu|cuda[:N]`` -> an engine, with the reason when the GPU is not used."""

from __future__ import annotations

import re
import warnings

from ..errors import EngineError
from ..model import SRCNNModel
from .base import Engine
from .cpu import CPUEngine
from .options import GPUOptions

DEVICE_PATTERN = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


def parse_device(device: str) -> tuple[str, int]:
    """'auto' | 'cpu' | 'cuda' | 'cuda:N' -> (kind, index)."""
    if not DEVICE_PATTERN.match(device):
        raise EngineError(f"unknown device {device!r}: use auto, cpu, cuda or cuda:N")
    if device.startswith("cuda"):
        return "cuda", int(device.split(":")[1]) if ":" in device else 0
    return device, 0


def create_engine(device: str, model: SRCNNModel, scale: int, options: GPUOptions = GPUOptions(),
                  autotune: bool = True) -> Engine:
    """Make the engine for ``device``. 'auto' falls back to the CPU with a warning that says why;
    'cuda' fails with an EngineError naming the cause. ``options`` are for a GPU engine (the CPU
    has no choices); ``autotune``: hand it the tuner, so a frame size without a cached plan is
    measured once (else the default plan runs until ``srgpu tune`` caches one)."""
    kind, index = parse_device(device)
    if kind == "cpu":
        return CPUEngine(model, scale)
    try:
        return _gpu_engine(model, scale, index, options, autotune)
    except EngineError as e:
        if kind == "cuda":
            raise
        warnings.warn(f"GPU not used, running on the CPU: {e}", RuntimeWarning, stacklevel=2)
        return CPUEngine(model, scale)


def _gpu_engine(model: SRCNNModel, scale: int, index: int, options: GPUOptions, autotune: bool) -> Engine:
    from .gpuinfo import cuda_status, missing_gpu

    status = cuda_status()
    if not status.usable:
        raise EngineError(status.reason or "no usable CUDA device")
    missing = missing_gpu(index, status)
    if missing:
        raise EngineError(missing)
    try:
        from .gpu import GPUEngine
    except ImportError as e:
        raise EngineError(f"the GPU engine is not available in this build ({e})") from None
    from .tune import Tuner  # the factory wires the tuner in: the engine itself never imports it

    return GPUEngine(model, scale, index, options, Tuner() if autotune else None)
