"""Plans: how the GPU runs the network for one frame size, and everything decided about them once.

GPU-free (CI imports it without CUDA); the engine (srgpu.engine.gpu) and the tuner (srgpu.engine.tune)
both import it, and neither imports the other. Here, one of each:

- the precision a user asks for (``Precision``: fp32 | fp16 | auto, checked by
  :func:`parse_precision` where an engine's options are made) and which fused kernel arithmetics it
  allows (:func:`arithmetics_for`);
- the accuracy bar a reduced-precision plan must meet (``ACCURACY_BAR``);
- the plan types: a layer-wise plan (one conv variant + launch shape per layer, see
  srgpu.kernels.conv) or a fused one (a kernel of a fused backend, FUSED_BACKENDS);
- the plan key and the cache: per GPU model, model architecture, frame size and precision in
  ``$XDG_CACHE_HOME/srgpu/plans`` (default ``~/.cache/srgpu/plans``). A cache file that does not
  parse, or was measured with other kernel sources, is ignored and rebuilt.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence, get_args

import numpy as np

from ..errors import EngineError
from ..kernels.build import sources_digest
from ..kernels.conv import ConvConfig, ConvLayer, default_config, srcnn_layers
from ..kernels.fused.tiles import ARITHMETICS, Arithmetic
from ..model import SRCNNModel
from ..outputs import replace_atomically

CACHE_FORMAT = "srgpu-plan"
CACHE_VERSION = 2  # 2: keyed by output bit depth
FUSED_BACKENDS = ("srgpu.kernels.fused",)  # modules a fused plan may name (fused_candidates, fused_runner)

PlanKind = Literal["layerwise", "fused"]


# ---------------------------------------------------------------- precision and the accuracy bar

Precision = Literal["fp32", "fp16", "auto"]
PRECISIONS: tuple[Precision, ...] = get_args(Precision)

FLOAT_BITS = 32  # the "bit depth" of a float32 output plane: no level to be within, fp32 only


def parse_precision(value: str) -> Precision:
    """A user's --precision, checked (EngineError naming the choices)."""
    if value not in PRECISIONS:
        raise EngineError(f"unknown precision {value!r}: use {', '.join(PRECISIONS)}")
    return value  # type: ignore[return-value]


def output_bits(dtype: Any, max_value: float) -> int:
    """The bit depth of an output plane, where it enters the engine: 8 for uint8, the bits of
    ``max_value`` for uint16 (1023 -> 10, 65535 -> 16), FLOAT_BITS for float32."""
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        return 8
    if dtype == np.uint16:
        return max(1, int(round(max_value))).bit_length()
    return FLOAT_BITS


@dataclass(frozen=True)
class AccuracyBar:
    """When a kernel arithmetic may serve an output bit depth, judged against the fp32 kernel on
    the check set (scripts/benchmarks/fused_accuracy.py): (1) no output sample more than
    ``max_level_difference`` levels off at that depth, and (2) mean Y-PSNR against ground truth
    within ``max_psnr_change_db``. The engine's start-up self-check enforces (1)."""

    max_level_difference: int
    max_psnr_change_db: float

    def met(self, max_level_difference: int, psnr_change_db: float = 0.0) -> bool:
        return max_level_difference <= self.max_level_difference and abs(psnr_change_db) <= self.max_psnr_change_db


ACCURACY_BAR = AccuracyBar(max_level_difference=1, max_psnr_change_db=0.005)

# The highest output bit depth at which each kernel arithmetic met ACCURACY_BAR for every shipped
# model and scale on the check set (BENCHMARKS.md, "The accuracy bar per bit depth"; measured with
# scripts/benchmarks/fused_accuracy.py). fp16-fast keeps 11 bits: about one 8-bit level of error,
# two or more at 10 bits. The split fp16 keeps ~22 bits.
SERVES_UP_TO_BITS: dict[Arithmetic, int] = {"fp32": FLOAT_BITS, "fp16": 16, "fp16-fast": 8}


def serves(arithmetic: Arithmetic, bits: int) -> bool:
    """Whether ``arithmetic`` meets the accuracy bar for outputs of ``bits``."""
    return bits <= SERVES_UP_TO_BITS[arithmetic]


def arithmetics_for(precision: Precision, bits: int) -> tuple[Arithmetic, ...]:
    """The fused kernel arithmetics a plan for ``precision`` may use on outputs of ``bits``:
    fp32 exact; fp16 the tensor-core arithmetics that meet the bar at that depth (fp32 where none
    does: a 16-bit float output cannot be served by fp16); auto fp32 and those."""
    fp16 = tuple(a for a in ("fp16", "fp16-fast") if serves(a, bits))  # type: ignore[arg-type]
    if precision == "fp32":
        return ("fp32",)
    if precision == "fp16":
        return fp16 or ("fp32",)
    return ("fp32",) + fp16


# ---------------------------------------------------------------- plans


@dataclass(frozen=True)
class LayerChoice:
    layer: str
    config: ConvConfig
    ms: float | None = None


@dataclass(frozen=True)
class FusedChoice:
    """A fused kernel: its backend module (one of FUSED_BACKENDS), name, tile and arithmetic
    (stored as "precision" in cache files, the name it had)."""

    backend: str
    name: str
    params: tuple[tuple[str, Any], ...] = ()
    arithmetic: Arithmetic = "fp32"

    @property
    def label(self) -> str:
        p = " ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.name} {self.arithmetic}{' ' + p if p else ''}"


@dataclass(frozen=True)
class KernelPlan:
    """Which kernels the GPU engine runs a frame size with: ``kind`` 'layerwise' (``layers``) or
    'fused' (``fused``)."""

    kind: PlanKind
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
                          "params": [list(p) for p in self.fused.params], "precision": self.fused.arithmetic}
        return d

    @classmethod
    def from_dict(cls, d: Any, source: str = "cache") -> "KernelPlan":
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
        if f["precision"] not in ARITHMETICS:
            raise ValueError(f"plan: unknown fused arithmetic {f['precision']!r}")
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


def default_plan(model: SRCNNModel) -> KernelPlan:
    """The layer-wise plan used before (or without) tuning."""
    return KernelPlan("layerwise", tuple(LayerChoice(l.name, default_config(l)) for l in srcnn_layers(model)))


def layerwise_plan(model: SRCNNModel, configs: Sequence[ConvConfig]) -> KernelPlan:
    return KernelPlan("layerwise", tuple(LayerChoice(l.name, c) for l, c in zip(srcnn_layers(model), configs)),
                source="given")


# ---------------------------------------------------------------- measurements (kept with the cache)


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


# ---------------------------------------------------------------- key and cache


@dataclass(frozen=True)
class PlanKey:
    gpu: str  # DeviceLimits.key: name and compute capability
    arch: str
    lr_shape: tuple[int, int]
    hr_shape: tuple[int, int]
    precision: Precision
    bits: int  # output bit depth (output_bits): which arithmetics meet the bar depends on it
    kernels: str  # digest of the kernel sources the plan was measured with

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "arch": self.arch, "lr_shape": list(self.lr_shape),
                "hr_shape": list(self.hr_shape), "precision": self.precision, "bits": self.bits,
                "kernels": self.kernels}

    @classmethod
    def from_dict(cls, k: Any) -> "PlanKey":
        """KeyError / TypeError / ValueError on anything malformed."""
        return cls(str(k["gpu"]), str(k["arch"]), (int(k["lr_shape"][0]), int(k["lr_shape"][1])),
                   (int(k["hr_shape"][0]), int(k["hr_shape"][1])), parse_precision(k["precision"]), int(k["bits"]),
                   str(k["kernels"]))

    @property
    def filename(self) -> str:
        """Stable per GPU/arch/size/precision/depth: a stale entry is overwritten, not accumulated."""
        slug = re.sub(r"[^A-Za-z0-9]+", "-", self.gpu).strip("-")
        lr, hr = "x".join(map(str, self.lr_shape)), "x".join(map(str, self.hr_shape))
        return f"{slug}_{self.arch}_{lr}_to_{hr}_{self.precision}_{self.bits}bit.json"

    def same_kind(self, other: "PlanKey") -> bool:
        """The same GPU model, architecture, precision, depth and kernels (any frame size)."""
        return (self.gpu, self.arch, self.precision, self.bits, self.kernels) == (
            other.gpu, other.arch, other.precision, other.bits, other.kernels)


def plan_key(gpu: str, arch: str, lr_shape: tuple[int, int], hr_shape: tuple[int, int],
             precision: Precision, bits: int) -> PlanKey:
    """The key of a plan measured now: ``gpu`` is DeviceLimits.key, the kernels the current sources."""
    return PlanKey(gpu, arch, tuple(lr_shape), tuple(hr_shape), precision, bits, sources_digest())


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "srgpu" / "plans"


def load_cached(key: PlanKey, directory: Path | None = None, layers: Sequence[ConvLayer] = ()) -> KernelPlan | None:
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
        plan = KernelPlan.from_dict(data.get("plan"), source="cache")
        plan.check(layers)
        return plan
    except (ValueError, TypeError, KeyError):
        return None


def save_cached(key: PlanKey, plan: KernelPlan, timings: Sequence[Timing] = (), directory: Path | None = None) -> Path | None:
    """Write atomically (temporary name + rename); a cache that cannot be written is only a warning."""
    directory = directory or cache_dir()
    path = directory / key.filename
    data = {"format": CACHE_FORMAT, "version": CACHE_VERSION, "key": key.to_dict(), "plan": plan.to_dict(),
            "timings": [t.to_dict() for t in timings]}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        text = json.dumps(data, indent=1).encode()
        replace_atomically(path, lambda f: f.write(text))  # engines on several threads may write one key
        return path
    except OSError as e:
        warnings.warn(f"plan cache not written ({e})", RuntimeWarning, stacklevel=2)
        return None


def cached_plans(gpu: str, directory: Path | None = None) -> list[tuple[PlanKey, KernelPlan]]:
    """Plans cached for the GPU model ``gpu`` (DeviceLimits.key) and the current kernel sources,
    for ``srgpu info``. Unreadable or stale files are skipped."""
    digest = sources_digest()
    found = []
    for path in sorted(p for p in (directory or cache_dir()).glob("*.json") if not p.name.startswith(".")):  # not a temporary
        try:
            data = json.loads(path.read_text())
            key = PlanKey.from_dict(data["key"])
            if (key.gpu != gpu or key.kernels != digest or data.get("format") != CACHE_FORMAT
                    or data.get("version") != CACHE_VERSION):  # the same staleness rule as load_cached
                continue
            found.append((key, KernelPlan.from_dict(data["plan"], source="cache")))
        except (OSError, ValueError, KeyError, TypeError, IndexError, EngineError):
            continue
    return found


def nearest_cached(key: PlanKey, directory: Path | None = None, layers: Sequence[ConvLayer] = ()) -> KernelPlan | None:
    """A cached plan of the same kind as ``key`` (GPU model, architecture, precision, depth,
    kernels) measured for another frame size, the nearest in output pixels and at the same scale
    where there is one: the kernels are tiled, so the choice hardly depends on the frame size, and
    a new size then starts without a measurement."""
    def distance(k: PlanKey) -> tuple[bool, float]:
        ratio = (k.hr_shape[0] * key.lr_shape[0], k.hr_shape[1] * key.lr_shape[1]) != (
            key.hr_shape[0] * k.lr_shape[0], key.hr_shape[1] * k.lr_shape[1])
        area = k.hr_shape[0] * k.hr_shape[1] / max(1, key.hr_shape[0] * key.hr_shape[1])
        return ratio, abs(np.log(max(area, 1e-9)))

    candidates = sorted((k for k, _ in cached_plans(key.gpu, directory) if k.same_kind(key) and k != key), key=distance)
    for k in candidates:
        plan = load_cached(k, directory, layers)
        if plan is not None:
            return KernelPlan(plan.kind, plan.layers, plan.fused, None,
                        f"cache ({k.lr_shape[1]}x{k.lr_shape[0]} -> {k.hr_shape[1]}x{k.hr_shape[0]})")
    return None
