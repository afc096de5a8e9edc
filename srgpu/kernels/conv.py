"""SRCNN convolution layers on the GPU (conv.cu): five variants, their launch shapes, a NumPy
reference and a self-check.

A layer is a correlation with 'same' output size and replicate border, bias and optional ReLU in
the epilogue, on planar float32 tensors (C, H, W). Variants (the seeds' methods):

- v1 direct: one thread per output pixel computes all filters; weights and inputs from global.
- v2 shared filters: v1 with the weights staged in shared memory, ``ch`` input channels a stage.
- v3 shared tile: v2 plus the block's input tile and halo staged in shared memory, loaded in
  passes of the block's thread count (tiles that do not divide the image are clamped).
- v4 register neighbourhood (1x1..5x5 layers): each thread holds its K x (px+K-1) input window
  in registers and computes ``px`` pixels x ``fo`` filters.
- v5 register blocked: ``px`` pixels x ``fo`` filters per thread, input channels accumulated in
  the kernel ``ch`` at a time, input tile + halo and filters in shared memory.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from ..model import SRCNNModel
from .launch import Launch, cdiv, round_up

SOURCE = "conv.cu"
VARIANTS = ("v1", "v2", "v3", "v4", "v5")
SHARED_BUDGET = 100 * 1024  # per block, for the candidate lists (Hopper allows 227 KB after opting in)


@dataclass(frozen=True)
class ConvLayer:
    """One convolution: cin -> cout channels, k x k filters, ReLU or not."""

    name: str
    cin: int
    cout: int
    k: int
    relu: bool

    @property
    def macs_per_pixel(self) -> int:
        return self.cin * self.cout * self.k * self.k


def srcnn_layers(model: SRCNNModel) -> tuple[ConvLayer, ConvLayer, ConvLayer]:
    return (ConvLayer("conv1", 1, model.n1, model.f1, True),
            ConvLayer("conv2", model.n1, model.n2, model.f2, True),
            ConvLayer("conv3", model.n2, 1, model.f3, False))


@dataclass(frozen=True)
class ConvConfig:
    """A variant and its launch shape: block (bx, by) threads, px pixels x fo filters per thread
    (v4, v5), ch input channels per shared-memory stage (v2..v5)."""

    variant: str
    bx: int
    by: int
    px: int = 1
    fo: int = 0  # filters per thread; 0 = all (v1..v3)
    ch: int = 1

    @property
    def label(self) -> str:
        s = f"{self.variant} {self.bx}x{self.by}"
        if self.variant in ("v4", "v5"):
            s += f" px{self.px} fo{self.fo}"
        if self.variant != "v1":
            s += f" ch{self.ch}"
        return s

    def filters(self, layer: ConvLayer) -> int:
        return self.fo or layer.cout

    def kernel_name(self, layer: ConvLayer) -> str:
        args = [layer.cin, layer.cout, layer.k, "true" if layer.relu else "false", self.bx, self.by]
        if self.variant in ("v4", "v5"):
            args += [self.px, self.fo]
        if self.variant != "v1":
            args += [self.ch]
        return f"conv_{self.variant}<{', '.join(str(a) for a in args)}>"

    def shared_bytes(self, layer: ConvLayer) -> int:
        """Dynamic shared memory; mirrors the constexpr sizes in conv.cu (which trap if short)."""
        k, ch, fo = layer.k, self.ch, self.filters(layer)
        if self.variant == "v1":
            return 0
        if self.variant == "v2":
            return 4 * ch * k * k * fo
        if self.variant == "v3":
            return 4 * (round_up(ch * k * k * fo, 4) + ch * (self.by + k - 1) * (self.bx + k - 1))
        if self.variant == "v4":
            return 4 * ch * k * k * fo
        pitch = self.bx * self.px + round_up(k - 1, 4)
        return 4 * (round_up(ch * k * k * fo, 4) + ch * (self.by + k - 1) * pitch)

    def launch(self, layer: ConvLayer, h: int, w: int) -> Launch:
        cols = self.bx * (self.px if self.variant in ("v4", "v5") else 1)
        groups = layer.cout // self.filters(layer)
        blocks = cdiv(w, cols) * cdiv(h, self.by) * groups
        return Launch(self.kernel_name(layer), (blocks, 1, 1), (self.bx, self.by, 1), self.shared_bytes(layer))

    def problems(self, layer: ConvLayer) -> list[str]:
        """Why this config cannot instantiate for ``layer`` (empty when it can)."""
        out = []
        if self.variant not in VARIANTS:
            out.append(f"unknown variant {self.variant}")
        if self.variant in ("v1", "v2", "v3") and (self.px != 1 or self.fo != 0):
            out.append(f"{self.variant} computes one pixel and all filters per thread")
        if self.variant in ("v2", "v3", "v4", "v5") and (self.ch < 1 or layer.cin % self.ch):
            out.append(f"ch={self.ch} must divide cin={layer.cin}")
        if self.variant in ("v4", "v5") and (self.fo < 1 or layer.cout % self.fo):
            out.append(f"fo={self.fo} must divide cout={layer.cout}")
        if self.variant == "v5" and self.px % 4:
            out.append("v5 needs px a multiple of 4")
        if self.variant == "v4" and layer.k > 5:
            out.append("v4 is for 1x1..5x5 layers")
        if self.bx < 1 or self.by < 1 or self.px < 1:
            out.append("empty block")
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ConvConfig":
        if not isinstance(d, dict) or set(d) != {"variant", "bx", "by", "px", "fo", "ch"}:
            raise ValueError(f"not a conv config: {d!r}")
        if not isinstance(d["variant"], str) or not all(isinstance(d[k], int) for k in ("bx", "by", "px", "fo", "ch")):
            raise ValueError(f"not a conv config: {d!r}")
        return cls(**d)


def _largest_ch(layer: ConvLayer, fits: Any, cap: int = 64) -> int:
    best = 1
    for ch in range(1, min(layer.cin, cap) + 1):
        if layer.cin % ch == 0 and fits(ch):
            best = ch
    return best


def candidates(layer: ConvLayer) -> list[ConvConfig]:
    """Every variant x launch shape the tuner times for ``layer``."""
    k, cout = layer.k, layer.cout
    out: list[ConvConfig] = []
    for bx, by in ((32, 4), (32, 8)):
        out.append(ConvConfig("v1", bx, by))
    ch2 = _largest_ch(layer, lambda ch: 4 * ch * k * k * cout <= 32 * 1024)
    for bx, by in ((32, 4), (32, 8)):
        out.append(ConvConfig("v2", bx, by, ch=ch2))
    for bx, by in ((32, 4), (32, 8)):
        ch3 = _largest_ch(layer, lambda ch: ConvConfig("v3", bx, by, ch=ch).shared_bytes(layer) <= 40 * 1024, cap=16)
        out.append(ConvConfig("v3", bx, by, ch=ch3))
    if k <= 5:
        if cout == 1:
            shapes4 = [(32, 4, 4, 1), (32, 8, 4, 1), (32, 4, 8, 1), (32, 8, 2, 1)]
        elif k == 1:
            shapes4 = [(32, 4, 4, cout), (32, 4, 4, cout // 2), (32, 4, 2, cout), (32, 4, 8, cout // 4)]
        else:
            shapes4 = [(32, 4, 4, cout // 2), (32, 4, 4, cout // 4), (32, 4, 2, cout), (32, 4, 8, cout // 4)]
        for bx, by, px, fo in shapes4:
            if fo < 1 or cout % fo:
                continue
            ch4 = _largest_ch(layer, lambda ch: 4 * ch * k * k * fo <= 16 * 1024)
            out.append(ConvConfig("v4", bx, by, px, fo, ch4))
    if layer.cin == 1:
        shapes5 = [(32, 8, 4, 8, 1), (32, 4, 8, 8, 1), (32, 8, 4, 16, 1), (32, 4, 8, 16, 1), (16, 8, 8, 16, 1)]
    elif cout == 1:
        shapes5 = [(32, 8, 4, 1, 4), (32, 4, 8, 1, 4), (32, 16, 4, 1, 2), (32, 8, 8, 1, 2), (32, 8, 4, 1, 8)]
    elif k == 1:
        shapes5 = [(32, 4, 4, cout, 16), (32, 4, 4, cout // 2, 16), (32, 8, 4, cout // 2, 8), (32, 4, 8, cout // 2, 8),
                   (32, 4, 4, cout, 32)]
    else:
        shapes5 = [(32, 4, 4, cout // 2, 4), (32, 8, 4, cout // 4, 4), (32, 4, 8, cout // 4, 4),
                   (32, 4, 4, cout, 2), (32, 4, 8, cout // 2, 2)]
    for bx, by, px, fo, ch in shapes5:
        cfg = ConvConfig("v5", bx, by, px, fo, ch)
        if not cfg.problems(layer) and cfg.shared_bytes(layer) <= SHARED_BUDGET:
            out.append(cfg)
    bad = [(c.label, c.problems(layer)) for c in out if c.problems(layer)]
    assert not bad, bad
    return out


def default_config(layer: ConvLayer) -> ConvConfig:
    """The configuration used before (or without) tuning: a register-blocked variant."""
    if layer.cin == 1:
        return ConvConfig("v5", 32, 8, 4, 8, 1)
    if layer.cout == 1:
        return ConvConfig("v5", 32, 8, 4, 1, 4)
    if layer.k == 1:
        return ConvConfig("v4", 32, 4, 4, layer.cout, _largest_ch(layer, lambda ch: 4 * ch * layer.cout <= 16 * 1024))
    return ConvConfig("v5", 32, 4, 4, layer.cout // 2, 4)


def transpose_weights(weight: np.ndarray) -> np.ndarray:
    """(cout, cin, k, k) -> (cin, k, k, cout) float32: a tap's filters contiguous, as conv.cu reads."""
    return np.ascontiguousarray(np.transpose(weight, (1, 2, 3, 0)), dtype=np.float32)


# ---------------------------------------------------------------- NumPy reference


def reference(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, relu: bool) -> np.ndarray:
    """The layer on the CPU through srgpu.reference's oracle functions: (cin, H, W) -> (cout, H, W)
    in x's float dtype."""
    from .. import reference as ref

    dt = x.dtype
    weight, bias = weight.astype(dt), bias.astype(dt)
    if weight.shape[1] == 1:
        out = ref.conv_single_in(np.ascontiguousarray(x[0]), weight, bias)
    elif weight.shape[0] == 1:
        out = ref.conv_single_out(x, weight, bias)[None]
    else:
        out = ref.conv_multi(x, weight, bias)
    return np.maximum(out, 0) if relu else out


# ---------------------------------------------------------------- GPU


def compile_configs(pairs: Iterable[tuple[ConvLayer, ConvConfig]], device_index: int, limits: Any) -> dict[str, Any]:
    """Compile the kernels of (layer, config) pairs in one NVRTC call: kernel name -> Kernel."""
    from ..errors import EngineError
    from .build import compile_kernels
    from .launch import LaunchError, validate_launch

    names = []
    for layer, cfg in pairs:
        problems = cfg.problems(layer)
        if problems:
            raise EngineError(f"kernel {cfg.kernel_name(layer)}: {'; '.join(problems)}")
        try:  # block shape and shared memory against the device, before compiling
            validate_launch(cfg.launch(layer, 1, 1), limits)
        except LaunchError as e:
            raise EngineError(str(e)) from None
        names.append(cfg.kernel_name(layer))
    return compile_kernels(SOURCE, names, device_index, limits)


def run(kernel: Any, layer: ConvLayer, cfg: ConvConfig, x: Any, wt: Any, bias: Any, y: Any, stream: Any) -> None:
    """y (cout, H, W) = layer(x (cin, H, W)) with ``kernel`` (compiled for layer and cfg)."""
    h, w = int(y.shape[-2]), int(y.shape[-1])
    if x.size != layer.cin * h * w or y.size != layer.cout * h * w:
        raise ValueError(f"{layer.name}: x {x.shape} / y {y.shape} do not match ({layer.cin}->{layer.cout}, {h}x{w})")
    vec_ok = w % 4 == 0 and x.data.ptr % 16 == 0 and y.data.ptr % 16 == 0
    kernel(cfg.launch(layer, h, w), (x, wt, bias, y, np.int32(h), np.int32(w), np.int32(vec_ok)), stream)


def check_configs(layer: ConvLayer, configs: Sequence[ConvConfig], shape: tuple[int, int], device_index: int = 0,
                  seed: int = 0) -> dict[str, float]:
    """Run each config on random [0, 1] input and seeded random weights against :func:`reference`
    (output poisoned with NaN first): config label -> max abs error (NaN: an element not written)."""
    import cupy as cp

    from .build import device_limits

    rng = np.random.default_rng(seed)
    h, w = shape
    x = rng.random((layer.cin, h, w), dtype=np.float32)
    weight = (rng.standard_normal((layer.cout, layer.cin, layer.k, layer.k))
              * np.sqrt(2.0 / (layer.cin * layer.k * layer.k))).astype(np.float32)
    bias = (rng.standard_normal(layer.cout) * 0.05).astype(np.float32)
    expect = reference(x, weight, bias, layer.relu)
    kernels = compile_configs([(layer, c) for c in configs], device_index, device_limits(device_index))
    errors = {}
    with cp.cuda.Device(device_index), cp.cuda.Stream(non_blocking=True) as stream:
        dx, dwt, db = cp.asarray(x), cp.asarray(transpose_weights(weight)), cp.asarray(bias)
        dexpect = cp.asarray(expect)
        del x, expect
        dy = cp.empty((layer.cout, h, w), dtype=np.float32)
        for cfg in configs:
            dy.fill(np.nan)
            run(kernels[cfg.kernel_name(layer)], layer, cfg, dx, dwt, db, dy, stream)
            unwritten = bool(cp.isnan(dy).any())  # the poison survived somewhere
            errors[cfg.label] = float("nan") if unwritten else float(cp.max(cp.abs(dy - dexpect)))
        stream.synchronize()
    return errors


def self_check(device_index: int = 0, arch: str = "9-1-5", tolerance: float = 1e-4) -> float:
    """Every candidate of every layer of ``arch`` on small awkward sizes; raises on an error above
    ``tolerance``; returns the worst error."""
    from ..model import random_model

    worst = 0.0
    for layer in srcnn_layers(random_model(arch)):
        for shape in ((1, 1), (13, 7), (17, 33)):
            for label, err in check_configs(layer, candidates(layer), shape, device_index).items():
                if not err <= tolerance:
                    raise AssertionError(f"{layer.name} {label} at {shape}: max error {err}")
                worst = max(worst, err)
    return worst
