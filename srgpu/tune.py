"""Choosing how the GPU runs the network: plans, their measurement and their cache.

A :class:`Plan` names either a layer-wise plan (one conv variant + launch shape per layer, see
srgpu.kernels.conv) or a fused one (a kernel from a fused backend). The tuner times every
candidate on the real frame size and keeps the fastest; the result is cached per GPU model,
model architecture, frame size and precision in ``$XDG_CACHE_HOME/srgpu/plans`` (default
``~/.cache/srgpu/plans``). A cache file that does not parse, or was measured with other kernel
sources, is ignored and rebuilt.

Fused backends (hook for srgpu/kernels/fused*.py): a module listed in FUSED_BACKENDS that
imports and defines

    fused_candidates(model, scale, lr_shape, hr_shape, limits, precision) -> list[FusedChoice]
    fused_runner(choice, model, device_index, limits) -> run(src, out, max_value, stream)

where ``src`` is the (h, w) low-resolution device plane (uint8/uint16 samples against
``max_value``, or float32 in [0, 1]) and ``run`` writes the SRCNN output (bicubic upscale + 3
layers), converted exactly as the layer-wise plan's last step does (srgpu.kernels.quantize), into
``out``, the (H, W) device plane of the same dtype, on ``stream``. Raising
srgpu.engine.EngineError from either removes that backend from the choice.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import statistics
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .kernels.conv import ConvConfig, ConvLayer, candidates, default_config, srcnn_layers
from .model import SRCNNModel

CACHE_FORMAT = "srgpu-plan"
CACHE_VERSION = 1
FUSED_BACKENDS = ("srgpu.kernels.fused",)
PRECISIONS = ("fp32", "fp16", "auto")


# ---------------------------------------------------------------- plans


@dataclass(frozen=True)
class LayerChoice:
    layer: str
    config: ConvConfig
    ms: float | None = None


@dataclass(frozen=True)
class FusedChoice:
    backend: str  # the module providing it (one of FUSED_BACKENDS)
    name: str
    params: tuple[tuple[str, Any], ...] = ()
    precision: str = "fp32"

    @property
    def label(self) -> str:
        p = " ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.name} {self.precision}{' ' + p if p else ''}"


@dataclass(frozen=True)
class Plan:
    """How one frame size runs: ``kind`` 'layerwise' (``layers``) or 'fused' (``fused``)."""

    kind: str
    layers: tuple[LayerChoice, ...] = ()
    fused: FusedChoice | None = None
    ms: float | None = None  # measured network time per frame (bicubic .. quantised output)
    source: str = "default"  # default | tuned | cache | given

    def describe(self) -> str:
        if self.kind == "fused" and self.fused is not None:
            s = f"fused {self.fused.label}"
        else:
            s = ", ".join(f"{c.layer} {c.config.label}" for c in self.layers)
        if self.ms is not None:
            s += f" ({self.ms:.2f} ms/frame)"
        return s

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "ms": self.ms}
        if self.kind == "layerwise":
            d["layers"] = [{"layer": c.layer, "config": c.config.to_dict(), "ms": c.ms} for c in self.layers]
        else:
            assert self.fused is not None
            d["fused"] = {"backend": self.fused.backend, "name": self.fused.name,
                          "params": [list(p) for p in self.fused.params], "precision": self.fused.precision}
        return d

    @classmethod
    def from_dict(cls, d: Any, source: str = "cache") -> "Plan":
        """Parse; ValueError on anything malformed."""
        if not isinstance(d, dict) or d.get("kind") not in ("layerwise", "fused"):
            raise ValueError("plan: kind must be layerwise or fused")
        ms = _opt_float(d.get("ms"))
        if d["kind"] == "layerwise":
            layers = d.get("layers")
            if not isinstance(layers, list) or len(layers) != 3:
                raise ValueError("plan: a layer-wise plan has three layers")
            choices = []
            for item in layers:
                if not isinstance(item, dict) or not isinstance(item.get("layer"), str):
                    raise ValueError("plan: malformed layer entry")
                choices.append(LayerChoice(item["layer"], ConvConfig.from_dict(item.get("config")),
                                           _opt_float(item.get("ms"))))
            return cls("layerwise", tuple(choices), None, ms, source)
        f = d.get("fused")
        if not isinstance(f, dict) or not all(isinstance(f.get(k), str) for k in ("backend", "name", "precision")):
            raise ValueError("plan: malformed fused entry")
        params = f.get("params", [])
        if not isinstance(params, list) or not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                                                   for p in params):
            raise ValueError("plan: malformed fused params")
        return cls("fused", (), FusedChoice(f["backend"], f["name"], tuple((k, v) for k, v in params),
                                            f["precision"]), ms, source)

    def check(self, layers: Sequence[ConvLayer]) -> None:
        """ValueError if the plan cannot run these layers (e.g. measured for another model)."""
        if self.kind != "layerwise":
            return
        if [c.layer for c in self.layers] != [l.name for l in layers]:
            raise ValueError("plan: layer names do not match the model")
        for c, layer in zip(self.layers, layers):
            problems = c.config.problems(layer)
            if problems:
                raise ValueError(f"plan: {layer.name} {c.config.label}: {'; '.join(problems)}")


def _opt_float(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
        raise ValueError(f"plan: bad time {v!r}")
    return float(v)


def default_plan(model: SRCNNModel) -> Plan:
    """The layer-wise plan used before (or without) tuning."""
    return Plan("layerwise", tuple(LayerChoice(l.name, default_config(l)) for l in srcnn_layers(model)))


def layerwise_plan(model: SRCNNModel, configs: Sequence[ConvConfig]) -> Plan:
    return Plan("layerwise", tuple(LayerChoice(l.name, c) for l, c in zip(srcnn_layers(model), configs)),
                source="given")


# ---------------------------------------------------------------- cache


@dataclass(frozen=True)
class PlanKey:
    gpu: str  # DeviceLimits.key: name and compute capability
    arch: str
    lr_shape: tuple[int, int]
    hr_shape: tuple[int, int]
    precision: str
    kernels: str  # digest of the kernel sources the plan was measured with

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "arch": self.arch, "lr_shape": list(self.lr_shape),
                "hr_shape": list(self.hr_shape), "precision": self.precision, "kernels": self.kernels}

    @property
    def filename(self) -> str:
        """Stable per GPU/arch/size/precision: a stale entry is overwritten, not accumulated."""
        slug = re.sub(r"[^A-Za-z0-9]+", "-", self.gpu).strip("-")
        lr, hr = "x".join(map(str, self.lr_shape)), "x".join(map(str, self.hr_shape))
        return f"{slug}_{self.arch}_{lr}_to_{hr}_{self.precision}.json"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "srgpu" / "plans"


def load_cached(key: PlanKey, directory: Path | None = None, layers: Sequence[ConvLayer] = ()) -> Plan | None:
    """The cached plan for ``key``, or None when absent, corrupt or stale."""
    path = (directory or cache_dir()) / key.filename
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    try:
        if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT or data.get("version") != CACHE_VERSION:
            return None
        if data.get("key") != key.to_dict():
            return None  # stale: other kernels, GPU, model or size
        plan = Plan.from_dict(data.get("plan"), source="cache")
        plan.check(layers)
        return plan
    except (ValueError, TypeError, KeyError):
        return None


def save_cached(key: PlanKey, plan: Plan, timings: Sequence["Timing"] = (), directory: Path | None = None) -> Path | None:
    """Write atomically (temporary name + rename); a cache that cannot be written is only a warning."""
    directory = directory or cache_dir()
    path = directory / key.filename
    data = {"format": CACHE_FORMAT, "version": CACHE_VERSION, "key": key.to_dict(), "plan": plan.to_dict(),
            "timings": [t.to_dict() for t in timings]}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(path)
        return path
    except OSError as e:
        warnings.warn(f"plan cache not written ({e})", RuntimeWarning, stacklevel=2)
        return None


def cached_plans(gpu: str, directory: Path | None = None) -> list[tuple[PlanKey, Plan]]:
    """Plans cached for the GPU model ``gpu`` (DeviceLimits.key) and the current kernel sources,
    for ``srgpu info``. Unreadable or stale files are skipped."""
    from .kernels.build import sources_digest

    digest = sources_digest()
    found = []
    for path in sorted((directory or cache_dir()).glob("*.json")):
        try:
            data = json.loads(path.read_text())
            k = data["key"]
            key = PlanKey(k["gpu"], k["arch"], tuple(k["lr_shape"]), tuple(k["hr_shape"]), k["precision"], k["kernels"])
            if (key.gpu != gpu or key.kernels != digest or data.get("format") != CACHE_FORMAT
                    or data.get("version") != CACHE_VERSION):  # the same staleness rule as load_cached
                continue
            found.append((key, Plan.from_dict(data["plan"], source="cache")))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


# ---------------------------------------------------------------- measurement


@dataclass(frozen=True)
class Timing:
    """One candidate's time on one layer (``layer`` 'network' for whole-network candidates)."""

    layer: str
    label: str
    ms: float | None
    error: str | None = None
    config: ConvConfig | None = None
    fused: FusedChoice | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"layer": self.layer, "label": self.label, "ms": self.ms, "error": self.error}


@dataclass(frozen=True)
class TuneResult:
    key: PlanKey
    plan: Plan
    timings: tuple[Timing, ...] = ()
    strip_rows: int = 0
    stages_ms: dict[str, float] = field(default_factory=dict)  # layer-wise: bicubic, each layer, quantize
    cache_path: Path | None = None
    layerwise: Plan | None = None  # the best layer-wise plan (= plan unless a fused one won)


def time_ms(fn: Callable[[], None], stream: Any, warmup: int = 2, min_reps: int = 5, max_reps: int = 50,
            target_ms: float = 150.0) -> float:
    """Median GPU time of ``fn`` in ms: CUDA events between back-to-back runs after warm-up
    (no host gap inside a measurement), as many runs as fit in ``target_ms`` within the bounds."""
    import cupy as cp

    for _ in range(warmup):
        fn()
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    e0.record(stream)
    fn()
    e1.record(stream)
    e1.synchronize()
    one = max(cp.cuda.get_elapsed_time(e0, e1), 1e-3)
    if one > 50.0:  # slow candidates (direct variants on big layers): fewer runs
        min_reps = 3
    reps = int(min(max_reps, max(min_reps, target_ms // one)))
    events = [cp.cuda.Event() for _ in range(reps + 1)]
    events[0].record(stream)
    for i in range(reps):
        fn()
        events[i + 1].record(stream)
    events[-1].synchronize()
    return float(statistics.median(cp.cuda.get_elapsed_time(a, b) for a, b in zip(events, events[1:])))


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


def plan_key(engine: Any, lr_shape: tuple[int, int], hr_shape: tuple[int, int]) -> PlanKey:
    from .kernels.build import sources_digest

    return PlanKey(engine.limits.key, engine.model.arch, tuple(lr_shape), tuple(hr_shape), engine.precision,
                   sources_digest())


def measure(engine: Any, lr_shape: tuple[int, int], hr_shape: tuple[int, int], seed: int = 0,
            log: Callable[[str], None] | None = None) -> TuneResult:
    """Time every candidate of every layer (and every fused candidate) on this frame size with
    ``engine`` (a GPUEngine); return the fastest plan, checked against the CPU reference."""
    with engine.device, engine.stream:
        return _measure(engine, tuple(lr_shape), tuple(hr_shape), seed, log)


def _measure(engine: Any, lr_shape: tuple[int, int], hr_shape: tuple[int, int], seed: int,
             log: Callable[[str], None] | None) -> TuneResult:
    import cupy as cp

    from .engine.base import EngineError

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
    for backend in fused_backends():
        try:
            choices = backend.fused_candidates(engine.model, engine.scale, tuple(lr_shape), tuple(hr_shape),
                                               engine.limits, engine.precision)
        except EngineError as e:
            log(f"fused backend {backend.__name__}: {e}")
            continue
        for choice in choices:
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
    return TuneResult(plan_key(engine, lr_shape, hr_shape), plan, tuple(timings), rows, stages, None, layerwise)


def plan_for(engine: Any, lr_shape: tuple[int, int], hr_shape: tuple[int, int], directory: Path | None = None,
             force: bool = False, log: Callable[[str], None] | None = None) -> Plan:
    """The cached plan for this engine and frame size, or a freshly measured (and cached) one."""
    key = plan_key(engine, lr_shape, hr_shape)
    if not force:
        cached = load_cached(key, directory, engine.layers)
        if cached is not None:
            return cached
    result = measure(engine, lr_shape, hr_shape, log=log)
    save_cached(key, result.plan, result.timings, directory)
    return result.plan


def tune(model: SRCNNModel, scale: int, lr_shape: tuple[int, int], device_index: int = 0, precision: str = "fp32",
         directory: Path | None = None, log: Callable[[str], None] | None = None) -> TuneResult:
    """``srgpu tune``: measure every candidate for ``lr_shape`` upscaled by ``scale`` on this GPU
    and cache the chosen plan."""
    from .engine.gpu import GPUEngine, require_gpu
    from .resize import output_size

    require_gpu(device_index)
    hr_shape = output_size(tuple(lr_shape), scale)
    with GPUEngine(model, scale, device_index, autotune=False, precision=precision, cache_dir=directory) as engine:
        result = measure(engine, tuple(lr_shape), hr_shape, log=log)
        path = save_cached(result.key, result.plan, result.timings, directory)
        return TuneResult(result.key, result.plan, result.timings, result.strip_rows, result.stages_ms, path,
                          result.layerwise)
