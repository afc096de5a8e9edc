"""Measuring plans: time every candidate on the real frame size and keep the fastest.

The engine (srgpu.engine.gpu) is handed a :class:`Tuner` as its planner when it may measure; it
never imports this module, and this module only uses the engine it is given. Plans, their key,
cache, the precision and the accuracy bar are srgpu.plans'.

Fused backends (srgpu.plans.FUSED_BACKENDS) are modules that define

    fused_candidates(model, limits, arithmetics) -> list[FusedConfig]
    fused_runner(arithmetic, params, model, device_index, limits) -> run(src, out, max_value, stream)

where ``src`` is the (h, w) low-resolution device plane (uint8/uint16 samples against
``max_value``, or float32 in [0, 1]) and ``run`` writes the SRCNN output (bicubic upscale + 3
layers), converted exactly as the layer-wise plan's last step does (srgpu.kernels.quantize), into
``out``, the (H, W) device plane of the same dtype, on ``stream``. Raising EngineError from either
removes that backend from the choice.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .errors import EngineError
from .kernels.conv import candidates, default_config
from .kernels.timing import time_ms
from .plans import (FUSED_BACKENDS, FusedChoice, LayerChoice, Plan, PlanKey, Timing, arithmetics_for, plan_key,
                    save_cached)

if TYPE_CHECKING:  # the engine is given to the tuner, never imported by it
    from .engine.gpu import GPUEngine


@dataclass(frozen=True)
class TuneResult:
    key: PlanKey
    plan: Plan
    timings: tuple[Timing, ...] = ()
    strip_rows: int = 0
    stages_ms: dict[str, float] = field(default_factory=dict)  # layer-wise: bicubic, each layer, quantize
    cache_path: Path | None = None
    layerwise: Plan | None = None  # the best layer-wise plan (= plan unless a fused one won)


@dataclass(frozen=True)
class Tuner:
    """The planner an engine that may measure is handed (srgpu.engine.gpu.Planner): measures a
    frame size and caches the plan where the engine reads its cache. ``log``: every candidate's
    timing."""

    log: Callable[[str], None] | None = None

    def measure(self, engine: GPUEngine, lr_shape: tuple[int, int], hr_shape: tuple[int, int]) -> Plan:
        result = measure(engine, lr_shape, hr_shape, log=self.log)
        save_cached(result.key, result.plan, result.timings, engine.options.cache_dir)
        return result.plan


def fused_backends() -> list[Any]:
    """The fused backend modules present in this installation."""
    found = []
    for name in FUSED_BACKENDS:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, "fused_candidates") and hasattr(mod, "fused_runner"):
            found.append(mod)
    return found


def measure(engine: GPUEngine, lr_shape: tuple[int, int], hr_shape: tuple[int, int], seed: int = 0,
            log: Callable[[str], None] | None = None) -> TuneResult:
    """Time every candidate of every layer (and every fused candidate the engine's precision
    allows) on this frame size with ``engine``; return the fastest plan, checked against the CPU
    reference."""
    with engine.device, engine.stream:
        return _measure(engine, tuple(lr_shape), tuple(hr_shape), seed, log)


def _measure(engine: GPUEngine, lr_shape: tuple[int, int], hr_shape: tuple[int, int], seed: int,
             log: Callable[[str], None] | None) -> TuneResult:
    import cupy as cp

    log = log or (lambda s: None)
    rng = np.random.default_rng(seed)
    stream = engine.stream
    layers = engine.layers
    H, W = hr_shape
    rows = engine.strip_rows(H, W)
    timings: list[Timing] = []
    best: list[LayerChoice] = []
    # random [0, 1] input, realistic activations for the later layers (never zeros)
    x = cp.asarray(rng.random((rows, W), dtype=np.float32))
    acts = engine.layer_buffers(rows, W)
    inputs = [x, acts[0], acts[1]]
    for i, layer in enumerate(layers):
        engine.run_layer(i, default_config(layer), inputs[i], acts[i])
    stream.synchronize()
    for i, layer in enumerate(layers):
        cands = candidates(layer)
        try:
            engine.compile_layer_configs(i, cands)
        except EngineError as e:  # one bad instantiation: compile them one by one
            log(f"{layer.name}: group compile failed ({e}); compiling one by one")
        chosen: LayerChoice | None = None
        for cfg in cands:
            try:
                ms = time_ms(lambda: engine.run_layer(i, cfg, inputs[i], acts[i]), stream)
                timings.append(Timing(layer.name, cfg.label, ms, None, cfg))
                log(f"{layer.name} {cfg.label:28s} {ms:9.3f} ms")
                if chosen is None or ms < (chosen.ms or np.inf):
                    chosen = LayerChoice(layer.name, cfg, ms)
            except EngineError as e:
                timings.append(Timing(layer.name, cfg.label, None, str(e), cfg))
                log(f"{layer.name} {cfg.label:28s} failed: {e}")
        if chosen is None:
            raise EngineError(f"{layer.name}: no convolution variant could run on this GPU")
        best.append(chosen)
    plan = Plan("layerwise", tuple(best), source="tuned")
    network_ms, stages = engine.time_network(plan, lr_shape, hr_shape)
    plan = layerwise = Plan("layerwise", tuple(best), None, network_ms, "tuned")
    arithmetics = arithmetics_for(engine.precision)
    for backend in fused_backends():
        try:
            configs = backend.fused_candidates(engine.model, engine.limits, arithmetics)
        except EngineError as e:
            log(f"fused backend {backend.__name__}: {e}")
            continue
        for cfg in configs:
            choice = FusedChoice(backend.__name__, f"fused-{cfg.kernel}", cfg.params, cfg.arithmetic)
            fplan = Plan("fused", (), choice, None, "tuned")
            try:
                engine.check_plan(fplan)
                ms, _ = engine.time_network(fplan, lr_shape, hr_shape)
                timings.append(Timing("network", f"fused {choice.label}", ms, None, None, choice))
                log(f"network fused {choice.label:20s} {ms:9.3f} ms")
                if plan.ms is None or ms < plan.ms:
                    plan = Plan("fused", (), choice, ms, "tuned")
            except EngineError as e:
                timings.append(Timing("network", f"fused {choice.label}", None, str(e), None, choice))
                log(f"network fused {choice.label}: {e}")
    engine.check_plan(plan)
    key = plan_key(engine.limits.key, engine.model.arch, lr_shape, hr_shape, engine.precision)
    return TuneResult(key, plan, tuple(timings), rows, stages, None, layerwise)
