"""Choosing plans: quickly by a cost model when a run needs one, or by timing every candidate on the
real frame size (``srgpu tune``).

The quick choice (:func:`choose`, what an engine's planner does by default) compiles and checks the
top-ranked tile of the fastest kernel arithmetic that meets the accuracy bar for the output depth
(ARITHMETIC_RANK; the tiles of an arithmetic are ranked in srgpu.kernels.fused.tiles.CANDIDATES),
and times it against the default layer-wise plan only where the cost model cannot tell (fp32).
One compile instead of dozens: a first run on a fresh machine starts in seconds.

The engine (srgpu.engine.gpu) is handed a :class:`Tuner` as its planner when it may measure; it
never imports this module, and this module only uses the engine it is given. Plans, their key,
cache, the precision and the accuracy bar are srgpu.engine.plans'.

Fused backends (srgpu.engine.plans.FUSED_BACKENDS) are modules that define

    fused_candidates(model, limits, arithmetics) -> list[FusedConfig]
    fused_runner(arithmetic, params, model, device_index, limits) -> run(src, out, max_value, stream)

where ``src`` is the (h, w) low-resolution device plane (uint8/uint16 samples against
``max_value``, or float32 in [0, 1]) and ``run`` writes the SRCNN output (bicubic upscale + 3
layers), converted exactly as the layer-wise plan's last step does (srgpu.kernels.quantize), into
``out``, the (H, W) device plane of the same dtype, on ``stream``. Raising EngineError from either
removes that backend from the choice. A backend may also define

    fused_build_pending(arithmetic, params, model) -> bool

True for a tile whose kernel is slow to build and not built yet: the quick choice passes over it (the backend
builds it meanwhile, for a later run) and the plan it takes instead is not cached, so that the next run chooses
again.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..errors import EngineError
from ..kernels.conv import candidates, default_config
from ..kernels.timing import time_ms
from ..kernels.fused.tiles import Arithmetic
from .plans import (FUSED_BACKENDS, FusedChoice, LayerChoice, KernelPlan, PlanKey, Timing, arithmetics_for, default_plan, plan_key, save_cached)

# Kernel arithmetics, fastest first: on every model, scale and GPU measured so far each is at least
# 1.8x faster than the next (BENCHMARKS.md "Fused kernels": 1080p -> 4K on the H100, 9-1-5 0.59 /
# 1.10 / 3.36 ms, 9-5-5 4.2 / 13.8 / 36.9 ms), so the quick choice needs no timing between them.
ARITHMETIC_RANK: tuple[Arithmetic, ...] = ("fp16-fast", "fp16", "fp32")

if TYPE_CHECKING:  # the engine is given to the tuner, never imported by it
    from .gpu import GPUEngine


@dataclass(frozen=True)
class TuneResult:
    key: PlanKey
    plan: KernelPlan
    timings: tuple[Timing, ...] = ()
    strip_rows: int = 0
    stages_ms: dict[str, float] = field(default_factory=dict)  # layer-wise: bicubic, each layer, quantize
    cache_path: Path | None = None
    layerwise: KernelPlan | None = None  # the best layer-wise plan (= plan unless a fused one won)
    provisional: bool = False  # a better-ranked tile was still building: not cached, chosen again next run


@dataclass(frozen=True)
class Tuner:
    """The planner an engine that may measure is handed (srgpu.engine.gpu.Planner): chooses a plan
    for a frame size and output depth, quickly (:func:`choose`) or with the whole search
    (``full``, :func:`measure`), and caches it where the engine reads its cache. ``log``: every
    candidate's timing."""

    log: Callable[[str], None] | None = None
    full: bool = False

    def measure(self, engine: GPUEngine, lr_shape: tuple[int, int], hr_shape: tuple[int, int], bits: int) -> KernelPlan:
        result = (measure if self.full else choose)(engine, lr_shape, hr_shape, bits, log=self.log)
        if not result.provisional:
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


def choose(engine: GPUEngine, lr_shape: tuple[int, int], hr_shape: tuple[int, int], bits: int,
           log: Callable[[str], None] | None = None) -> TuneResult:
    """The quick choice: the first tile, in ARITHMETIC_RANK and tile order, of an arithmetic the
    engine's precision allows at ``bits`` that compiles and passes its self-check; timed against
    the default layer-wise plan when it is fp32 (or when no fused tile runs). A tile still building in the
    background (``fused_build_pending``) is passed over, and the result is then provisional."""
    log = log or (lambda s: None)
    lr_shape, hr_shape = tuple(lr_shape), tuple(hr_shape)
    allowed = arithmetics_for(engine.precision, bits)
    timings: list[Timing] = []
    chosen: KernelPlan | None = None
    pending = False
    with engine.device, engine.stream:
        for arithmetic in (a for a in ARITHMETIC_RANK if a in allowed):
            for choice in _fused_choices(engine, (arithmetic,), log):
                if _build_pending(engine, choice):
                    pending = True
                    log(f"network fused {choice.label}: building in the background, for a later run")
                    continue
                plan = _timed_fused(engine, choice, lr_shape, hr_shape, bits, timings, log)
                if plan is not None:
                    chosen = plan
                    break
            if chosen is not None:
                break
        if chosen is None or (chosen.fused is not None and chosen.fused.arithmetic == "fp32"):
            layerwise = default_plan(engine.model)
            ms, _ = engine.time_network(layerwise, lr_shape, hr_shape, bits)
            timings.append(Timing("network", "layer-wise (default variants)", ms))
            log(f"network layer-wise default {ms:9.3f} ms")
            if chosen is None or chosen.ms is None or ms < chosen.ms:
                chosen = KernelPlan("layerwise", layerwise.layers, None, ms, "quick")
    key = plan_key(engine.limits.key, engine.model.arch, lr_shape, hr_shape, engine.precision, bits)
    return TuneResult(key, chosen, tuple(timings), provisional=pending)


def _build_pending(engine: GPUEngine, choice: FusedChoice) -> bool:
    """The backend's fused_build_pending for ``choice`` (False for a backend without one)."""
    pending = getattr(importlib.import_module(choice.backend), "fused_build_pending", None)
    if pending is None:
        return False
    try:
        return bool(pending(choice.arithmetic, dict(choice.params), engine.model))
    except Exception:  # noqa: BLE001 - no compiler to ask: the tile's own compile then reports what is wrong
        return False


def _fused_choices(engine: GPUEngine, arithmetics: tuple[Arithmetic, ...],
                   log: Callable[[str], None]) -> list[FusedChoice]:
    """Every fused tile of ``arithmetics`` the installed backends offer for the engine's model and
    device, ranked as the backends rank them."""
    out = []
    for backend in fused_backends():
        try:
            configs = backend.fused_candidates(engine.model, engine.limits, arithmetics)
        except EngineError as e:
            log(f"fused backend {backend.__name__}: {e}")
            continue
        out += [FusedChoice(backend.__name__, f"fused-{cfg.kernel}", cfg.params, cfg.arithmetic) for cfg in configs]
    return out


def _timed_fused(engine: GPUEngine, choice: FusedChoice, lr_shape: tuple[int, int], hr_shape: tuple[int, int],
                 bits: int, timings: list[Timing], log: Callable[[str], None]) -> KernelPlan | None:
    """The fused plan of ``choice``, self-checked at ``bits`` and timed (None, with the reason in
    ``timings``, when it cannot run or misses the bar)."""
    plan = KernelPlan("fused", (), choice, None, "tuned")
    try:
        engine.check_plan(plan, bits)
        ms, _ = engine.time_network(plan, lr_shape, hr_shape, bits)
    except EngineError as e:
        timings.append(Timing("network", f"fused {choice.label}", None, str(e), None, choice))
        log(f"network fused {choice.label}: {e}")
        return None
    timings.append(Timing("network", f"fused {choice.label}", ms, None, None, choice))
    log(f"network fused {choice.label:20s} {ms:9.3f} ms")
    return KernelPlan("fused", (), choice, ms, "quick")


def measure(engine: GPUEngine, lr_shape: tuple[int, int], hr_shape: tuple[int, int], bits: int = 8, seed: int = 0,
            log: Callable[[str], None] | None = None) -> TuneResult:
    """Time every candidate of every layer (and every fused candidate the engine's precision
    allows at output depth ``bits``) on this frame size with ``engine``; return the fastest plan,
    checked against the CPU reference."""
    with engine.device, engine.stream:
        return _measure(engine, tuple(lr_shape), tuple(hr_shape), bits, seed, log)


def _measure(engine: GPUEngine, lr_shape: tuple[int, int], hr_shape: tuple[int, int], bits: int, seed: int,
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
    plan = KernelPlan("layerwise", tuple(best), source="tuned")
    network_ms, stages = engine.time_network(plan, lr_shape, hr_shape, bits)
    plan = layerwise = KernelPlan("layerwise", tuple(best), None, network_ms, "tuned")
    for choice in _fused_choices(engine, arithmetics_for(engine.precision, bits), log):
        fplan = _timed_fused(engine, choice, lr_shape, hr_shape, bits, timings, log)
        if fplan is not None and fplan.ms is not None and (plan.ms is None or fplan.ms < plan.ms):
            plan = KernelPlan("fused", (), choice, fplan.ms, "tuned")
    engine.check_plan(plan, bits)
    key = plan_key(engine.limits.key, engine.model.arch, lr_shape, hr_shape, engine.precision, bits)
    return TuneResult(key, plan, tuple(timings), rows, stages, None, layerwise)
