"""The fused backend's hook, as srgpu.engine.plans names it (FUSED_BACKENDS): which tiles can serve the
kernel arithmetics the plans allow on a device, and a runner for a chosen one."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from ...errors import EngineError
from ...model import SRCNNModel
from ..build import build_in_background, built_for_arch
from .runner import FusedSRCNN
from .smem import shared_bytes
from .tiles import Arithmetic, FusedConfig, candidate_configs, config_for


def available(model: SRCNNModel, arithmetic: Arithmetic, limits: Any) -> str | None:
    """None if ``arithmetic`` can run ``model`` on a device with ``limits``, else why not (offline:
    the shared-memory need is computed here as in the .cu layouts)."""
    if model.n1 != 64 or model.n2 != 32 or model.f1 != 9 or model.f3 != 5:
        return f"fused kernels need SRCNN 9-f2-5 with 64/32 channels, not {model.arch}"
    if arithmetic != "fp32" and limits is not None and float(limits.compute_capability) < 8.0:
        return "tensor-core kernels need compute capability 8.0 or newer"
    need = shared_bytes(config_for(arithmetic, model.f2), model.f2)
    if limits is not None and need > limits.max_shared_per_block_optin:
        return (f"{arithmetic} {model.arch} needs {need} bytes of shared memory per block; the device allows "
                f"{limits.max_shared_per_block_optin}")
    return None


def fused_candidates(model: SRCNNModel, limits: Any, arithmetics: Sequence[Arithmetic]) -> list[FusedConfig]:
    """The tiles worth timing for ``model`` on a device with ``limits`` in each of ``arithmetics``
    (srgpu.engine.plans decides which arithmetics a precision allows); EngineError if none can run."""
    out = []
    for a in arithmetics:
        if available(model, a, limits) is None:
            for cfg in candidate_configs(a, model.f2):
                if limits is None or (shared_bytes(cfg, model.f2) <= limits.max_shared_per_block_optin
                                      and cfg.runs_on(limits.compute_capability)):
                    out.append(cfg)
    if not out:
        raise EngineError(f"no fused kernel for {model.arch} in {'/'.join(arithmetics)}: "
                          f"{available(model, arithmetics[0], limits)}")
    return out


def fused_runner(arithmetic: Arithmetic, params: Mapping[str, int], model: SRCNNModel, device_index: int,
                 limits: Any, axis_tables: Any = None) -> Callable[[Any, Any, float, Any], None]:
    """run(src, out, max_value, stream) for the tile ``params`` of ``arithmetic``, with ``src`` the
    LR plane (uint8/uint16 against ``max_value``, or float32 in [0, 1]) and ``out`` the (H, W)
    plane of the same dtype that receives the converted output (the kernel reads and writes the
    samples itself); or a batch of planes of one size, (N, h, w) -> (N, H, W). ``axis_tables``: the
    caller's srgpu.kernels.bicubic.Bicubic, whose per-axis tables the kernel shares."""
    cfg = config_for(arithmetic, model.f2, **{k: int(v) for k, v in params.items()})
    net = FusedSRCNN(model, arithmetic, device_index, cfg, limits, axis_tables)

    def run(src: Any, out: Any, max_value: float, stream: Any) -> None:
        net.run(src, tuple(out.shape[-2:]), max_value, out=out, stream=stream)  # a plane or a batch of planes

    run.net = net  # type: ignore[attr-defined]
    return run


def fused_build_pending(arithmetic: Arithmetic, params: Mapping[str, int], model: SRCNNModel) -> bool:
    """True when the tile ``params`` is slow to build (FusedConfig.slow_build) and its kernels are not built yet: the
    build then starts in the background (srgpu.kernels.build.build_in_background) and the quick choice passes over
    the tile for now; a later run loads it from the disk cache."""
    cfg = config_for(arithmetic, model.f2, **{k: int(v) for k, v in params.items()})
    if not cfg.slow_build or cfg.arch is None:
        return False
    names = [cfg.kernel_name(model.f2), cfg.layout_name(model.f2)]
    if built_for_arch(cfg.source, names, cfg.arch):
        return False
    build_in_background(cfg.source, names, cfg.arch)
    return True
