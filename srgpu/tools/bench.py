"""Measuring kernels on this GPU: ``srgpu tune`` (measure a frame size and cache its plan) and
``srgpu bench`` (kernel part): ms per frame of every layer x variant, of the chosen plan and of
the whole device-side network, for one frame size (default 1920x1080 -> 3840x2160, x2).

Times are medians of CUDA-event timings after warm-up on random data, excluding host transfers;
the network time covers bicubic, the three layers and the conversion to 8 bits.
"""

from __future__ import annotations

import datetime
import platform
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import __version__
from ..engine.options import GPUOptions
from ..model import SUPPORTED_SCALES, ModelError, SRCNNModel, random_model, resolve_model
from ..engine.plans import KernelPlan, Precision, Timing, save_cached
from ..resize import output_size
from ..engine.tune import TuneResult, measure

DEFAULT_LR_SHAPE = (1080, 1920)


@dataclass(frozen=True)
class BenchReport:
    device: str
    date: str
    model: str
    arch: str
    scale: int
    lr_shape: tuple[int, int]
    hr_shape: tuple[int, int]
    timings: tuple[Timing, ...]  # every layer x variant (and fused candidates)
    plan: KernelPlan  # the chosen plan
    layerwise: KernelPlan  # the best layer-wise plan
    stages_ms: dict[str, float]  # layer-wise plan: bicubic, conv1..3, quantize, each alone
    network_ms: tuple[float, ...]  # the chosen plan's whole network, timed twice (spread)
    layerwise_ms: tuple[float, ...]  # the best layer-wise network, timed twice
    versions: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device, "date": self.date, "model": self.model, "arch": self.arch, "scale": self.scale,
            "input": {"width": self.lr_shape[1], "height": self.lr_shape[0]},
            "output": {"width": self.hr_shape[1], "height": self.hr_shape[0]},
            "layers": [t.to_dict() for t in self.timings],
            "plan": {"description": self.plan.describe(), **self.plan.to_dict()},
            "layerwise_plan": {"description": self.layerwise.describe(), **self.layerwise.to_dict()},
            "stages_ms": self.stages_ms,
            "network_ms": min(self.network_ms), "network_ms_runs": list(self.network_ms),
            "layerwise_network_ms": min(self.layerwise_ms), "layerwise_network_ms_runs": list(self.layerwise_ms),
            "versions": self.versions,
        }


def bench_model(arch: str, scale: int, model: SRCNNModel | None = None) -> SRCNNModel:
    """The model to time: the given one, else the built-in one, else seeded random weights of the
    same architecture (timing does not depend on the weight values)."""
    if model is not None:
        return model
    if scale not in SUPPORTED_SCALES:
        raise ModelError(f"scale x{scale} is not supported; choose one of {', '.join(map(str, SUPPORTED_SCALES))}")
    try:
        return resolve_model(arch, scale)
    except ModelError:
        return random_model(arch, seed=0, scale=scale)


def tune(model: SRCNNModel, scale: int, lr_shape: tuple[int, int], device_index: int = 0,
         options: GPUOptions = GPUOptions(), bits: int = 8, log: Callable[[str], None] | None = None) -> TuneResult:
    """``srgpu tune``: measure every candidate for ``lr_shape`` upscaled by ``scale`` on this GPU
    at ``options.precision`` for outputs of ``bits`` and cache the chosen plan (in
    ``options.cache_dir``)."""
    from ..engine.gpu import GPUEngine, require_gpu

    require_gpu(device_index)
    hr_shape = output_size(tuple(lr_shape), scale)
    with GPUEngine(model, scale, device_index, options) as engine:
        result = measure(engine, tuple(lr_shape), hr_shape, bits, log=log)
        path = save_cached(result.key, result.plan, result.timings, options.cache_dir)
        return TuneResult(result.key, result.plan, result.timings, result.strip_rows, result.stages_ms, path,
                          result.layerwise)


def bench(model: SRCNNModel | None = None, arch: str = "9-1-5", scale: int = 2,
          lr_shape: tuple[int, int] = DEFAULT_LR_SHAPE, device_index: int = 0, precision: Precision = "fp32",
          log: Callable[[str], None] | None = None, save_plan: bool = True) -> BenchReport:
    """Measure every candidate on this GPU for ``lr_shape`` x ``scale`` and time the result."""
    import cupy as cp

    from ..engine.gpu import GPUEngine, require_gpu

    require_gpu(device_index)
    model = bench_model(arch, scale, model)
    hr_shape = output_size(tuple(lr_shape), scale)
    with GPUEngine(model, scale, device_index, GPUOptions(precision=precision)) as engine:
        result = measure(engine, tuple(lr_shape), hr_shape, 8, log=log)
        if save_plan:
            save_cached(result.key, result.plan, result.timings)
        layerwise = result.layerwise or result.plan
        net = tuple(engine.time_network(result.plan, lr_shape, hr_shape)[0] for _ in range(2))
        lw = net if layerwise is result.plan else tuple(
            engine.time_network(layerwise, lr_shape, hr_shape)[0] for _ in range(2))
        return BenchReport(
            device=f"{engine.limits.name} (cuda:{device_index}, sm_{engine.limits.compute_capability.replace('.', '')}, "
                   f"{engine.limits.multiprocessors} SMs)",
            date=datetime.date.today().isoformat(), model=model.name, arch=model.arch, scale=scale,
            lr_shape=tuple(lr_shape), hr_shape=hr_shape, timings=result.timings, plan=result.plan,
            layerwise=layerwise, stages_ms=dict(result.stages_ms), network_ms=net, layerwise_ms=lw,
            versions={"srgpu": __version__, "cupy": cp.__version__, "python": platform.python_version(),
                      "cuda_runtime": _cuda_runtime()})


def _cuda_runtime() -> str:
    import cupy as cp

    v = cp.cuda.runtime.runtimeGetVersion()
    return f"{v // 1000}.{(v % 1000) // 10}"


def format_report(r: BenchReport) -> str:
    """The table ``srgpu bench`` prints."""
    lines = [f"device: {r.device}", f"model: {r.model} (SRCNN {r.arch}), x{r.scale}, "
             f"{r.lr_shape[1]}x{r.lr_shape[0]} -> {r.hr_shape[1]}x{r.hr_shape[0]}, fp32, {r.date}", "",
             f"{'layer':8s} {'variant / launch shape':30s} {'ms/frame':>10s}"]
    chosen = {c.layer: c.config.label for c in r.layerwise.layers}
    for t in r.timings:
        mark = " *" if chosen.get(t.layer) == t.label else ""
        value = f"{t.ms:10.3f}" if t.ms is not None else f"{'failed':>10s}"
        lines.append(f"{t.layer:8s} {t.label:30s} {value}{mark}")
        if t.error:
            lines.append(f"{'':8s}   {t.error[:100]}")
    lines += ["", "* fastest per layer (the layer-wise plan)", "",
              "stages of the layer-wise plan, each alone: " + ", ".join(f"{k} {v:.3f}" for k, v in r.stages_ms.items())
              + " ms",
              f"layer-wise network (bicubic + 3 layers + 8-bit output): {min(r.layerwise_ms):.3f} ms/frame "
              f"(runs: {', '.join(f'{v:.3f}' for v in r.layerwise_ms)})",
              f"chosen plan: {r.plan.kind}: {r.plan.describe()}",
              f"whole network, chosen plan: {min(r.network_ms):.3f} ms/frame "
              f"(runs: {', '.join(f'{v:.3f}' for v in r.network_ms)})"]
    return "\n".join(lines)
