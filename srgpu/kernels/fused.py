"""Fused SRCNN kernels (fused_fp32.cu, fused_tc.cu): bicubic + conv1 + conv2 + conv3 in one launch.

One block per output tile reads the low-resolution luma footprint of its tile, upscales it with
the canonical GPU bicubic (bit for bit the one of bicubic.cu) into shared memory, runs the three
layers there and writes the final 8/16-bit (or float) plane; nothing intermediate touches global
memory (fused_common.cu describes the tile walk and the replicate borders).

Precisions:

- ``fp32``: float32 on the FMA units; equals the CPU reference within ~1e-6.
- ``fp16``: tensor cores (mma.sync m16n8k16, fp32 accumulation) with every fp16 operand split
  into hi + lo halves and three MMAs per product, so it keeps ~22 bits: 8-bit output equal to the
  fp32 network on >= 99.9 % of pixels (the issue's bar). Built for f2 = 1 (9-1-5) and f2 = 3
  (9-3-5); 9-5-5's split conv2 weights (205 KB) fit only streamed one tap row at a time, a tile
  that runs but is not offered (NOT_OFFERED: slower than cuDNN, and under the bar on real images).
- ``fp16-fast``: plain fp16 operands, one MMA per product: the fastest, but a few % of 8-bit
  pixels come out one level off (fp16 keeps 11 bits); never chosen automatically.

Fold (``FusedConfig.fold``, 9-1-5, the default tiles): on an exact x2 upscale of integer samples,
tiles away from the frame's edge skip the bicubic and run conv1 folded with it on the LR samples
(srgpu/kernels/fold.py: 8 x 8 LR taps per phase instead of 9 x 9 upscaled ones; on the tensor
cores the samples are exact in fp16, so conv1 needs two MMAs per product instead of three). Edge
tiles, float input and other ratios take the bicubic path of the same kernel.

API: :class:`FusedSRCNN` (``run`` takes a device LR plane, returns/writes the device HR plane),
:func:`reference` (the NumPy definition: srgpu.resize.imresize + srgpu.reference.srcnn_forward),
:func:`self_check`, and the tuner hook ``fused_candidates`` / ``fused_runner`` (srgpu.tune).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..engine.base import EngineError, from_unit_float, to_unit_float
from ..model import SRCNNModel
from .bicubic import coefficients, inv_max, pass_order
from .launch import Launch, cdiv

PRECISIONS = ("fp32", "fp16", "fp16-fast")
BACKEND = "srgpu.kernels.fused"
IN_CODES = {np.dtype(np.uint8): 0, np.dtype(np.uint16): 1, np.dtype(np.float32): 2}
OUT_RAW, OUT_F32, OUT_U8, OUT_U16, OUT_BICUBIC = 0, 1, 2, 3, 4
ACCURACY_BAR = 0.999  # fraction of 8-bit pixels equal to the fp32 network (and never > 1 level off)


@dataclass(frozen=True)
class FusedConfig:
    """One kernel instantiation: ``kernel`` 'fp32' or 'tc' (``split`` for the fp16 hi/lo scheme),
    output tile ``th`` rows x (``rw`` - 4) columns, ``r`` rows per chunk, ``nt`` threads, and for
    'tc' the 16-position MMA blocks per warp in conv1 (``mb1``) and conv2 (``mb2``)."""

    kernel: str
    split: bool
    th: int
    rw: int
    r: int
    nt: int
    mb1: int = 2
    mb2: int = 4
    p: int = 4  # 'fp32', f2 = 1: positions per thread (2 or 4)
    fold: bool = False  # f2 = 1: interior tiles of an exact x2 read the integer LR samples (fold.py)
    stream: bool = False  # 'tc', f2 > 1: conv2's weights in shared memory one tap row at a time

    def kernel_name(self, f2: int) -> str:
        if self.kernel == "fp32":
            return f"fused_fp32<{f2}, {self.th}, {self.rw}, {self.r}, {self.nt}, {self.p}, {'true' if self.fold else 'false'}>"
        return (f"fused_tc<{f2}, {'true' if self.split else 'false'}, {self.th}, {self.rw}, {self.r}, "
                f"{self.nt}, {self.mb1}, {self.mb2}, {'true' if self.fold else 'false'}, "
                f"{'true' if self.stream else 'false'}>")

    def layout_name(self, f2: int) -> str:
        return self.kernel_name(f2).replace("fused_fp32<", "fused_fp32_layout<").replace("fused_tc<", "fused_tc_layout<")

    @property
    def source(self) -> str:
        return "fused_fp32.cu" if self.kernel == "fp32" else "fused_tc.cu"

    @property
    def params(self) -> tuple[tuple[str, Any], ...]:
        return (("th", self.th), ("rw", self.rw), ("r", self.r), ("nt", self.nt), ("mb1", self.mb1), ("mb2", self.mb2),
                ("p", self.p), ("fold", int(self.fold)), ("stream", int(self.stream)))

    @property
    def label(self) -> str:
        s = f"{self.th}x{self.rw - 4} r{self.r} nt{self.nt}"
        s += f" mb{self.mb1}/{self.mb2}" if self.kernel == "tc" else f" p{self.p}"
        return s + (" fold" if self.fold else "") + (" stream" if self.stream else "")


def config_for(precision: str, f2: int, **params: int) -> FusedConfig:
    """The default tile of ``precision`` for an f2 x f2 middle layer, with ``params`` overriding it."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}: use {', '.join(PRECISIONS)}")
    kernel, split = ("fp32", False) if precision == "fp32" else ("tc", precision == "fp16")
    base = dict(CANDIDATES[(precision, _f2_key(f2))][0])
    base.update(params)
    base["fold"] = bool(base.get("fold", False))
    base["stream"] = bool(base.get("stream", False))
    if base["fold"] and f2 != 1:
        raise ValueError("the folded conv1 is built for 9-1-5 only")
    if base["stream"] and (kernel != "tc" or f2 == 1):
        raise ValueError("streaming conv2's weights is built for the tensor-core kernels of 9-3-5 and 9-5-5")
    return FusedConfig(kernel, split, **base)


def candidate_configs(precision: str, f2: int) -> list[FusedConfig]:
    """Every tile worth timing for ``precision`` and f2, the default first."""
    return [config_for(precision, f2, **c) for c in CANDIDATES[(precision, _f2_key(f2))]]


def _f2_key(f2: int) -> int:
    return 1 if f2 == 1 else 3 if f2 == 3 else 5


# Tiles per (precision, f2), fastest first as measured on an H200 and an H100 (BENCHMARKS.md "Fused
# kernels"); fold = 1: the folded conv1 on interior tiles of exact x2 upscales of integer samples.
# Tile heights 60/66/108 change how many waves of one block per SM a frame takes (66: 2112 tiles
# of a 4K output, 16 full waves on 132 SMs); the tuner times them on the GPU at hand.
# Shared memory decides most of it: the Z ring (25 fp32 planes of R + 4 rows) and, for f2 > 1, the
# A1 ring and conv2's weights; one block per SM for the defaults.
CANDIDATES: dict[tuple[str, int], list[dict[str, int]]] = {
    ("fp32", 1): [dict(th=60, rw=64, r=16, nt=256, p=4, fold=1), dict(th=108, rw=64, r=16, nt=256, p=4, fold=1),
                  dict(th=66, rw=64, r=16, nt=256, p=4, fold=1), dict(th=64, rw=64, r=16, nt=256, p=4, fold=1),
                  dict(th=64, rw=64, r=16, nt=256, p=4, fold=0)],
    ("fp32", 3): [dict(th=32, rw=32, r=8, nt=256)],
    ("fp32", 5): [dict(th=32, rw=32, r=8, nt=256)],
    ("fp16", 1): [dict(th=64, rw=64, r=12, nt=256, mb1=2, mb2=2, fold=1),
                  dict(th=66, rw=64, r=12, nt=256, mb1=2, mb2=2, fold=1),
                  dict(th=64, rw=64, r=16, nt=512, mb1=1, mb2=1, fold=1),
                  dict(th=64, rw=64, r=12, nt=256, mb1=2, mb2=2, fold=0),
                  dict(th=64, rw=64, r=16, nt=512, mb1=1, mb2=1, fold=0),
                  dict(th=64, rw=64, r=12, nt=512, mb1=1, mb2=1, fold=0)],
    ("fp16", 3): [dict(th=32, rw=32, r=4, nt=128, mb1=2, mb2=2)],
    ("fp16", 5): [dict(th=32, rw=32, r=4, nt=128, mb1=2, mb2=2)],  # does not fit: reported as unavailable
    ("fp16-fast", 1): [dict(th=66, rw=64, r=16, nt=512, mb1=2, mb2=2, fold=1),
                       dict(th=64, rw=64, r=16, nt=512, mb1=2, mb2=2, fold=1),
                       dict(th=64, rw=64, r=16, nt=512, mb1=2, mb2=2, fold=0),
                       dict(th=64, rw=64, r=16, nt=256, mb1=4, mb2=4, fold=0),
                       dict(th=64, rw=64, r=12, nt=512, mb1=1, mb2=1, fold=0)],
    ("fp16-fast", 3): [dict(th=32, rw=32, r=8, nt=128, mb1=2, mb2=4)],
    ("fp16-fast", 5): [dict(th=64, rw=32, r=8, nt=256, mb1=2, mb2=2), dict(th=64, rw=32, r=8, nt=512, mb1=1, mb2=1),
                       dict(th=32, rw=32, r=8, nt=256, mb1=2, mb2=2)],
}


# Tiles built, compiled in CI (tests/test_kernel_compile.py) and checked on a GPU
# (tests/test_gpu_fused.py::test_streamed_conv2_tiles) that the tuner does not offer: the
# streamed-conv2 kernels. They make the split fp16 9-5-5 fit (184 KB of shared memory instead of
# 344), but on the H100 it takes 13.8 ms a 4K frame (cuDNN's best 11.6, fp32 fused 37.1) and its
# 8-bit output equals the fp32 network's on 99.896 % of pixels (Set5 and a synthetic frame), under
# the 99.9 % bar; streaming makes plain fp16 9-5-5 slower (5.07 ms against 4.15). BENCHMARKS.md.
NOT_OFFERED: dict[tuple[str, int], list[dict[str, int]]] = {
    ("fp16", 5): [dict(th=32, rw=32, r=4, nt=128, mb1=2, mb2=2, stream=1),
                  dict(th=32, rw=32, r=4, nt=128, mb1=1, mb2=1, stream=1),
                  dict(th=64, rw=32, r=4, nt=128, mb1=2, mb2=2, stream=1)],
    ("fp16", 3): [dict(th=32, rw=32, r=4, nt=128, mb1=2, mb2=2, stream=1)],
    ("fp16-fast", 5): [dict(th=64, rw=32, r=8, nt=256, mb1=2, mb2=2, stream=1)],
}


def not_offered_configs(precision: str, f2: int) -> list[FusedConfig]:
    """The NOT_OFFERED tiles of ``precision`` and f2 (none for most)."""
    return [config_for(precision, f2, **c) for c in NOT_OFFERED.get((precision, _f2_key(f2)), [])]


# ---------------------------------------------------------------- weights, packed as the kernels read them


def pack_fp32(model: SRCNNModel, fold: bool = False) -> np.ndarray:
    """float32 [b1 | b2 | b3, 0, 0, 0 | W3 (25 taps x 32) | W2 | W1 (81 taps x 64) | with ``fold``: the
    four phase filters (64 LR taps x 64) of the folded conv1, unscaled]; W2 is (64 in x 32 out) for
    f2 = 1 and (64 in, f2, f2, 32 out) otherwise (fused_fp32.cu FfmaCfg)."""
    a = model.arrays(np.float32)
    w1 = a["conv1_weight"][:, 0].reshape(64, 81).T
    w3 = a["conv3_weight"][0].reshape(32, 25).T
    w2 = a["conv2_weight"].transpose(1, 2, 3, 0)  # (in, dy, dx, out)
    parts = [a["conv1_bias"], a["conv2_bias"], np.array([a["conv3_bias"][0], 0, 0, 0], np.float32), w3, w2, w1]
    if fold:
        mats, e = fold_matrices(model)
        parts.append(mats * np.float32(2.0**-e))  # exact: a power of two
    return np.ascontiguousarray(np.concatenate([np.asarray(p, np.float32).ravel() for p in parts]))


def split_fp16(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float32 -> (hi, lo) float16 with hi + lo ~ x to ~22 bits (round to nearest even, as cvt.rn)."""
    x = np.asarray(x, np.float32)
    hi = x.astype(np.float16)
    lo = (x - hi.astype(np.float32)).astype(np.float16)
    return hi, lo


def b_fragments(b: np.ndarray) -> np.ndarray:
    """(K, N) float16 B matrix -> its mma.m16n8k16 B fragments, (K/16, N/16, 32 lanes, 4) uint32:
    per lane (b0, b1) of n-tile 2j then of n-tile 2j + 1; b0 holds k = 2(lane%4) + {0, 1} (low half
    first), b1 the same k + 8, both at n = lane/4 of the n-tile."""
    k, n = b.shape
    assert k % 16 == 0 and n % 16 == 0, (k, n)
    bits = np.ascontiguousarray(b, np.float16).view(np.uint16).astype(np.uint32)
    lane = np.arange(32)
    kk, nn = 2 * (lane % 4), lane // 4
    out = np.empty((k // 16, n // 16, 32, 4), np.uint32)
    for s in range(k // 16):
        for jp in range(n // 16):
            for half in range(2):
                col = 8 * (2 * jp + half) + nn
                k0 = 16 * s + kk
                out[s, jp, :, 2 * half] = bits[k0, col] | (bits[k0 + 1, col] << 16)
                out[s, jp, :, 2 * half + 1] = bits[k0 + 8, col] | (bits[k0 + 9, col] << 16)
    return out


def conv1_matrix(w1: np.ndarray) -> np.ndarray:
    """conv1 weights (64, 9, 9) -> B (96, 64): k = 2p + e is tap (p // 5, 2 (p % 5) + e); the 10th
    column of each row and p >= 45 are zero (fused_tc.cu reads them from valid memory)."""
    b = np.zeros((96, 64), np.float32)
    for p in range(45):
        for e in range(2):
            dy, dx = p // 5, 2 * (p % 5) + e
            if dx < 9:
                b[2 * p + e] = w1[:, dy, dx]
    return b


FOLD_SCALE = 2  # the folded conv1 is built for exact x2 upscales (four phase filters)
FOLD_MAX_SAMPLE = 2048  # integers up to 2^11 are exact in fp16


def fold_matrices(model: SRCNNModel) -> tuple[np.ndarray, int]:
    """conv1 folded with the x2 bicubic (fold.phase_filters) as four matrices (64 LR taps a * 8 + b,
    64 channels), one per phase py * 2 + px, scaled by 2^e so the largest is ~2^14 (the fp16 lo
    halves stay normal); returns (matrices (4, 64, 64) float32, e)."""
    from .fold import phase_filters

    ph = phase_filters(model.arrays(np.float32)["conv1_weight"].astype(np.float64), FOLD_SCALE)
    f = ph.filters.reshape(FOLD_SCALE * FOLD_SCALE, 64, ph.taps * ph.taps)  # (phase, c, a * taps + b)
    e = int(np.floor(np.log2(2.0**14 / np.max(np.abs(f)))))
    return np.ascontiguousarray((f * 2.0**e).transpose(0, 2, 1).astype(np.float32)), e


def pack_tc(model: SRCNNModel, split: bool, fold: bool = False) -> tuple[np.ndarray, int]:
    """uint32 [W2 fragments hi (lo) | W3 fragments hi (lo) | b1 | b2 | b3 0 0 0 | W1 fragments hi (lo)
    | with ``fold``: the four phase matrices' fragments, hi (lo) each] (fused_tc.cu TcCfg): B
    fragments of conv2 per tap (64 x 32), the Z GEMM (32 channels x 25 taps padded to 32), conv1
    (96 x 64) and the folded conv1 (64 x 64 per phase); and the fold's exponent e (0 without)."""
    a = model.arrays(np.float32)
    f2 = model.f2

    def fragments(m: np.ndarray, rows: int) -> list[np.ndarray]:
        hi, lo = split_fp16(m)
        return [np.concatenate([b_fragments(part[t:t + rows]).ravel() for t in range(0, part.shape[0], rows)])
                for part in ((hi, lo) if split else (hi,))]

    words = fragments(np.concatenate([a["conv2_weight"][:, :, dy, dx].T for dy in range(f2) for dx in range(f2)]), 64)
    words += fragments(np.pad(a["conv3_weight"][0].reshape(32, 25), ((0, 0), (0, 7))), 32)
    biases = np.concatenate([a["conv1_bias"], a["conv2_bias"], [a["conv3_bias"][0], 0, 0, 0]]).astype(np.float32)
    words.append(biases.view(np.uint32))
    words += fragments(conv1_matrix(a["conv1_weight"][:, 0]), 96)
    e = 0
    if fold:
        mats, e = fold_matrices(model)
        for m in mats:
            words += fragments(m, 64)
    return np.ascontiguousarray(np.concatenate(words).astype(np.uint32)), e


# ---------------------------------------------------------------- NumPy references


def reference(plane: np.ndarray, out_shape: tuple[int, int], max_value: float, model: SRCNNModel,
              raw: bool = False, dtype: type = np.float32) -> np.ndarray:
    """What the fused kernels compute, on the CPU: imresize of the unit-float plane, the SRCNN
    reference, then the output conversion (or the unclipped network output with ``raw``)."""
    from ..reference import srcnn_forward
    from ..resize import imresize

    x = to_unit_float(plane, max_value).astype(dtype)
    y = srcnn_forward(imresize(x, output_shape=tuple(out_shape)), model, dtype=dtype)
    if raw:
        return y.astype(np.float32)
    return from_unit_float(y, plane.dtype, max_value)


def agreement(got: np.ndarray, expect: np.ndarray) -> tuple[float, int]:
    """(fraction of equal samples, max absolute difference) of two integer planes."""
    d = np.abs(got.astype(np.int64) - expect.astype(np.int64))
    return float(np.mean(d == 0)), int(d.max()) if d.size else 0


# ---------------------------------------------------------------- GPU


def fold_args(in_shape: tuple[int, int], out_shape: tuple[int, int]) -> np.ndarray:
    """The FOLD kernels' ``fold`` array (fused_common.cu fold_block): {on, phase 0 / 1 window
    offsets, their minimum, then the frame rows [ylo, yhi) and columns [xlo, xhi) where the phase
    filters hold}; ``on`` = 0 unless the upscale is an exact x2 with such a region along both axes."""
    from .fold import phase_filters, regular_range

    (h, w), (H, W) = in_shape, out_shape
    ylo, yhi = regular_range(h, H, FOLD_SCALE)
    xlo, xhi = regular_range(w, W, FOLD_SCALE)
    offsets = phase_filters(np.zeros((1, 1, 9, 9)), FOLD_SCALE).offsets
    on = int(yhi > ylo and xhi > xlo)
    return np.array([on, offsets[0], offsets[1], offsets.min(), ylo, yhi, xlo, xhi], np.int32)


@dataclass(frozen=True)
class Layout:
    shared_bytes: int
    tile_rows: int
    tile_cols: int
    win_rows: int  # bicubic window (virtual HR rows/cols around the tile)
    win_cols: int
    tmp_floats: int  # capacity of the bicubic first-pass buffer
    threads: int

    @property
    def margin(self) -> int:
        return (self.win_rows - self.tile_rows) // 2


@dataclass
class _Tables:
    wv: Any
    iv: Any
    tv: int
    wh: Any
    ih: Any
    th: int
    rows_first: int
    first0: Any
    nfirst: int
    fold: Any = None  # int32[8] for the FOLD kernels (fold_args), `on` set
    no_fold: Any = None  # the same with `on` clear (inputs the fold cannot take exactly)


def _first_pass_window(idx: np.ndarray, n_tiles: int, tile: int, margin: int, window: int,
                       out_len: int) -> tuple[np.ndarray, int]:
    """Per tile: the first low-resolution index the second pass reads in the tile's window of
    ``window`` virtual outputs starting at t * tile - margin (clamped), and the largest span."""
    pos = np.clip(np.arange(n_tiles)[:, None] * tile - margin + np.arange(window)[None, :], 0, out_len - 1)
    used = idx[pos]
    lo = used.min(axis=(1, 2))
    span = int((used.max(axis=(1, 2)) - lo + 1).max())
    return lo.astype(np.int32), span


class FusedSRCNN:
    """The fused network for one model at one precision on one device.

    ``run(plane, out_shape, max_value, out=None, raw=False, stream=None)``: ``plane`` a device
    (h, w) uint8/uint16/float32 array (rows may be padded: any row stride), returns (or writes
    into ``out``) the (H, W) plane: integer input -> same dtype quantised against ``max_value``,
    float32 input -> float32 clipped to [0, 1], ``raw`` -> float32 unclipped network output.
    """

    def __init__(self, model: SRCNNModel, precision: str = "fp32", device_index: int = 0,
                 config: FusedConfig | None = None, limits: Any = None) -> None:
        import cupy as cp

        from .build import compile_kernels, device_limits

        self.model = model
        self.precision = precision
        self.config = config or config_for(precision, model.f2)
        if model.n1 != 64 or model.n2 != 32 or model.f1 != 9 or model.f3 != 5:
            raise EngineError(f"fused kernels need SRCNN 9-f2-5 with 64/32 channels, got {model.arch} "
                              f"({model.n1}/{model.n2} channels)")
        if self.config.kernel == "tc" and self.config.split is not (precision == "fp16"):
            raise EngineError(f"config {self.config} does not match precision {precision}")
        self.device_index = device_index
        self.device = cp.cuda.Device(device_index)
        self.limits = limits or device_limits(device_index)
        cfg, f2 = self.config, model.f2
        self.name = f"fused-{precision} {model.arch} {cfg.label}"
        kernels = compile_kernels(cfg.source, [cfg.kernel_name(f2), cfg.layout_name(f2)], device_index, self.limits)
        self.kernel = kernels[cfg.kernel_name(f2)]
        with self.device:
            buf = cp.zeros(16, dtype=np.int32)
            kernels[cfg.layout_name(f2)](Launch(cfg.layout_name(f2), (1, 1, 1), (1, 1, 1)), (buf,),
                                         cp.cuda.get_current_stream())
            v = buf.get()
            self.layout = Layout(*(int(x) for x in v[:7]))
            if cfg.kernel == "fp32":
                packed, self.fold_exponent = pack_fp32(model, cfg.fold), 0
            else:
                packed, self.fold_exponent = pack_tc(model, cfg.split, cfg.fold)
            expect = int(v[7])
            if packed.size != expect or self.layout.shared_bytes != shared_bytes(cfg, f2):
                raise EngineError(f"{self.name}: host and kernel layouts disagree ({packed.size} vs {expect} weight "
                                  f"words, {shared_bytes(cfg, f2)} vs {self.layout.shared_bytes} shared bytes)")
            if self.layout.shared_bytes > self.limits.max_shared_per_block_optin:
                raise EngineError(f"{self.name}: needs {self.layout.shared_bytes} bytes of shared memory per "
                                  f"block, the device allows {self.limits.max_shared_per_block_optin}")
            self.weights = cp.asarray(packed)
        self._tables: dict[tuple[int, int, int, int], _Tables] = {}

    # ------------------------------------------------------------ tables

    def tables(self, in_shape: tuple[int, int], out_shape: tuple[int, int]) -> _Tables:
        import cupy as cp

        key = (*in_shape, *out_shape)
        t = self._tables.get(key)
        if t is None:
            (h, w), (H, W), L = in_shape, out_shape, self.layout
            wv, iv = coefficients(h, H)
            wh, ih = coefficients(w, W)
            rows_first = pass_order(in_shape, out_shape)[0] == 0
            if rows_first:
                first0, nfirst = _first_pass_window(ih, cdiv(W, L.tile_cols), L.tile_cols, L.margin, L.win_cols, W)
                need = L.win_rows * nfirst
            else:
                first0, nfirst = _first_pass_window(iv, cdiv(H, L.tile_rows), L.tile_rows, L.margin, L.win_rows, H)
                need = nfirst * L.win_cols
            if need > L.tmp_floats:
                raise EngineError(f"{self.name}: {w}x{h} -> {W}x{H} needs a {need}-float bicubic buffer per tile "
                                  f"(capacity {L.tmp_floats}); the fused kernels are for upscaling")
            fold = fold_args(in_shape, out_shape) if self.config.fold else np.zeros(8, np.int32)
            with self.device:
                t = _Tables(cp.asarray(wv), cp.asarray(iv), int(wv.shape[1]), cp.asarray(wh), cp.asarray(ih),
                            int(wh.shape[1]), int(rows_first), cp.asarray(first0), nfirst, cp.asarray(fold),
                            cp.asarray(np.concatenate([[0], fold[1:]]).astype(np.int32)))
            self._tables[key] = t
        return t

    def grid(self, out_shape: tuple[int, int]) -> tuple[int, int, int]:
        return (cdiv(out_shape[1], self.layout.tile_cols), cdiv(out_shape[0], self.layout.tile_rows), 1)

    def folds(self, dtype: Any, max_value: float) -> bool:
        """Whether this kernel's interior tiles read the LR samples through the folded conv1 for
        this input: a FOLD instantiation and integer samples (on the tensor cores, samples exact in
        fp16: up to 2^11)."""
        return (self.config.fold and np.dtype(dtype) in (np.dtype(np.uint8), np.dtype(np.uint16))
                and (self.config.kernel == "fp32" or max_value <= FOLD_MAX_SAMPLE))

    def fold_tiles(self, in_shape: tuple[int, int], out_shape: tuple[int, int]) -> int:
        """How many tiles of this frame size take the fold path (for integer inputs; the kernel's
        own test, on the host)."""
        if not self.config.fold:
            return 0
        f = fold_args(in_shape, out_shape)
        if not f[0]:
            return 0
        gx, gy, _ = self.grid(out_shape)
        L, H = self.layout, out_shape[0]
        zy = np.arange(gy) * L.tile_rows - 2
        nz = np.minimum(L.tile_rows, H - np.arange(gy) * L.tile_rows) + 4
        zx = np.arange(gx) * L.tile_cols - 2
        rows = (zy >= f[4]) & (zy + nz <= f[5])
        cols = (zx >= f[6]) & (zx + L.tile_cols + 4 <= f[7])
        return int(rows.sum() * cols.sum())

    # ------------------------------------------------------------ running

    def run(self, plane: Any, out_shape: tuple[int, int], max_value: float, out: Any = None, raw: bool = False,
            stream: Any = None, bicubic_only: bool = False) -> Any:
        import cupy as cp

        if plane.ndim != 2 or np.dtype(plane.dtype) not in IN_CODES:
            raise EngineError(f"{self.name}: input must be a 2-D uint8/uint16/float32 plane, got "
                              f"{plane.dtype} {plane.shape}")
        if plane.strides[1] != plane.itemsize or plane.strides[0] % plane.itemsize or plane.strides[0] < 0:
            with self.device:
                plane = cp.ascontiguousarray(plane)  # the kernel reads rows with a pitch
        H, W = (int(out_shape[0]), int(out_shape[1]))
        if H < 1 or W < 1 or plane.shape[0] < 1 or plane.shape[1] < 1:
            raise EngineError(f"{self.name}: empty plane {plane.shape} -> {out_shape}")
        in_dtype = np.dtype(plane.dtype)
        if raw or bicubic_only:
            out_dtype, mode = np.dtype(np.float32), (OUT_BICUBIC if bicubic_only else OUT_RAW)
            if bicubic_only and self.config.kernel != "fp32":
                raise EngineError("the bicubic-only check runs on the fp32 kernel")
        else:
            out_dtype = in_dtype
            mode = {np.dtype(np.uint8): OUT_U8, np.dtype(np.uint16): OUT_U16, np.dtype(np.float32): OUT_F32}[in_dtype]
        with self.device:
            if out is None:
                out = cp.empty((H, W), dtype=out_dtype)
            if tuple(out.shape) != (H, W) or np.dtype(out.dtype) != out_dtype:
                raise EngineError(f"{self.name}: output must be {out_dtype} {(H, W)}, got {out.dtype} {out.shape}")
            if out.strides[1] != out.itemsize or out.strides[0] % out.itemsize:
                raise EngineError(f"{self.name}: output rows must be contiguous")
            t = self.tables(tuple(plane.shape), (H, W))
            args = (plane, np.int32(IN_CODES[in_dtype]), np.int32(plane.strides[0] // plane.itemsize),
                    np.int32(plane.shape[0]), np.int32(plane.shape[1]), inv_max(in_dtype, max_value),
                    np.int32(H), np.int32(W), t.wv, t.iv, np.int32(t.tv), t.wh, t.ih, np.int32(t.th),
                    np.int32(t.rows_first), t.first0, np.int32(t.nfirst), out, np.int32(mode),
                    np.int32(out.strides[0] // out.itemsize), np.float32(max_value), self.weights)
            folds = self.folds(in_dtype, max_value) and not bicubic_only
            args += (t.fold if folds else t.no_fold,
                     np.float32(np.float32(2.0**-self.fold_exponent) * inv_max(in_dtype, max_value)))
            launch = Launch(self.kernel.name, self.grid((H, W)), (self.layout.threads, 1, 1), self.layout.shared_bytes)
            self.kernel(launch, args, stream if stream is not None else cp.cuda.get_current_stream())
        return out

    def flops(self, out_shape: tuple[int, int]) -> float:
        """Useful FLOPs of the network on one frame (2 x MACs per output pixel, no halo)."""
        return 2.0 * self.model.macs_per_pixel * out_shape[0] * out_shape[1]


# ---------------------------------------------------------------- availability, self-check, tuner hook


def available(model: SRCNNModel, precision: str, limits: Any) -> str | None:
    """None if ``precision`` can run ``model`` on a device with ``limits``, else why not (offline:
    the shared-memory need is computed here as in the .cu layouts)."""
    if model.n1 != 64 or model.n2 != 32 or model.f1 != 9 or model.f3 != 5:
        return f"fused kernels need SRCNN 9-f2-5 with 64/32 channels, not {model.arch}"
    if precision != "fp32" and limits is not None and float(limits.compute_capability) < 8.0:
        return "tensor-core kernels need compute capability 8.0 or newer"
    need = shared_bytes(config_for(precision, model.f2), model.f2)
    if limits is not None and need > limits.max_shared_per_block_optin:
        return (f"{precision} {model.arch} needs {need} bytes of shared memory per block; the device allows "
                f"{limits.max_shared_per_block_optin}")
    return None


def shared_bytes(cfg: FusedConfig, f2: int) -> int:
    """Shared memory of an instantiation, mirroring FfmaCfg / TcCfg (checked against the device's
    layout kernel in the GPU tests)."""
    h2 = f2 // 2
    cz = cfg.r + 4
    pz = cdiv(cz * cfg.rw, 32) * 32 + 4
    if cfg.kernel == "fp32":
        rw1p = cdiv(cfg.rw + 2 * h2, 4) * 4
        y0 = (cfg.th + 2 * (6 + h2)) * (rw1p + 8)
        p1 = cdiv((cfg.r + 2 * h2) * rw1p, 32) * 32 + 4
        common = 64 + 32 + 4 + 25 * 32 + (64 * 32 if f2 == 1 else 0)
        rings = (64 * p1 + 32 * cfg.r * cfg.rw) if f2 > 1 else 0
        bicubic_path = 81 * 64 + y0 + rings
        fold_path = 4 * 64 * 64 + 2 * (((cfg.th + 3) // 2 + 9) * (cfg.rw // 2 + 12) + 4) if cfg.fold else 0
        return 4 * (common + max(bicubic_path, fold_path) + 25 * pz)
    nspl = 2 if cfg.split else 1
    rw1 = cfg.rw + 2 * h2
    y0w = cdiv(rw1 + 10, 4) * 4
    py0 = (cfg.th + 2 * (6 + h2)) * (y0w // 2)
    py = py0 + (48 - py0 % 32) % 32
    common = nspl * (f2 * (1 if cfg.stream else f2) * 4 * 2 * 32 * 4 + 2 * 2 * 32 * 4) + 100
    a1 = nspl * (cfg.r + 2 * h2) * rw1 * 32 if f2 > 1 else 0
    bicubic_path = nspl * 6 * 4 * 32 * 4 + 2 * nspl * py + a1
    fold_path = 0
    if cfg.fold:
        plr0 = ((cfg.th + 3) // 2 + 9) * (cfg.rw // 4 + 5)
        fold_path = 4 * nspl * 4 * 4 * 32 * 4 + 2 * (plr0 + (48 - plr0 % 32) % 32)
    return 4 * (common + max(bicubic_path, fold_path) + 25 * pz)


def self_check(device_index: int = 0, precision: str = "fp32", arch: str = "9-1-5", seed: int = 0) -> dict[str, float]:
    """Random weights and a random 8-bit plane of an awkward size through the fused kernel against
    :func:`reference`: raw max abs error (fp32; raises over 1e-4) or 8-bit agreement (fp16;
    raises under the accuracy bar). Returns the measured figures."""
    import cupy as cp

    from ..model import random_model

    rng = np.random.default_rng(seed)
    model = random_model(arch, seed=seed)
    net = FusedSRCNN(model, precision, device_index)
    lr = rng.integers(0, 256, (37, 53)).astype(np.uint8)
    out_shape = (74, 106)
    with net.device:
        if precision == "fp32":
            got = net.run(cp.asarray(lr), out_shape, 255, out=cp.full(out_shape, np.nan, np.float32), raw=True).get()
            err = float(np.max(np.abs(got - reference(lr, out_shape, 255, model, raw=True))))
            if not err <= 1e-4:
                raise AssertionError(f"{net.name}: max error {err:.3g} > 1e-4")
            return {"max_abs_error": err}
        got8 = net.run(cp.asarray(lr), out_shape, 255, out=cp.full(out_shape, 0xAB, np.uint8)).get()
        frac, worst = agreement(got8, reference(lr, out_shape, 255, model))
        if precision == "fp16" and (frac < ACCURACY_BAR or worst > 1):
            raise AssertionError(f"{net.name}: {frac:.4%} of 8-bit pixels equal, max difference {worst}")
        return {"equal_fraction": frac, "max_level_difference": float(worst)}


def fused_candidates(model: SRCNNModel, scale: int, lr_shape: Sequence[int], hr_shape: Sequence[int], limits: Any,
                     precision: str) -> list[Any]:
    """srgpu.tune hook: the fused choices for ``precision`` ('fp32', 'fp16' or 'auto'; fp16 means
    the split scheme that meets the accuracy bar, never ``fp16-fast``)."""
    from ..tune import FusedChoice

    wanted = {"fp32": ["fp32"], "fp16": ["fp16"], "auto": ["fp32", "fp16"]}.get(precision)
    if wanted is None:
        raise EngineError(f"unknown precision {precision!r}")
    out = []
    for p in wanted:
        if available(model, p, limits) is None:
            for cfg in candidate_configs(p, model.f2):
                if limits is None or shared_bytes(cfg, model.f2) <= limits.max_shared_per_block_optin:
                    out.append(FusedChoice(BACKEND, f"fused-{cfg.kernel}", cfg.params, p))
    if not out:
        raise EngineError(f"no fused kernel for {model.arch} at precision {precision}: "
                          f"{available(model, wanted[0], limits)}")
    return out


def fused_runner(choice: Any, model: SRCNNModel, device_index: int, limits: Any) -> Any:
    """srgpu.tune hook: run(src, out, max_value, stream) with ``src`` the LR plane (uint8/uint16
    against ``max_value``, or float32 in [0, 1]) and ``out`` the (H, W) plane of the same dtype
    that receives the converted output (the kernel reads and writes the samples itself)."""
    params = dict(choice.params)
    cfg = config_for(choice.precision, model.f2, **{k: int(v) for k, v in params.items()})
    net = FusedSRCNN(model, choice.precision, device_index, cfg, limits)

    def run(src: Any, out: Any, max_value: float, stream: Any) -> None:
        net.run(src, tuple(out.shape), max_value, out=out, stream=stream)

    run.net = net  # type: ignore[attr-defined]
    return run
