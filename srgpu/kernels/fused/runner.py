"""The fused network on a device: FusedSRCNN compiles one tile of fused_fp32.cu / fused_tc.cu,
uploads its packed weights, builds the per-frame-size bicubic and fold tables and launches it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import EngineError
from ...model import SRCNNModel
from ..bicubic import coefficients, inv_max, pass_order
from ..launch import Launch, cdiv
from ..tables import upload
from .numpy_reference import agreement, reference
from .pack import FOLD_MAX_SAMPLE, FOLD_SCALE, pack_fp32, pack_tc
from .smem import shared_bytes
from .tiles import Arithmetic, FusedConfig, config_for

IN_CODES = {np.dtype(np.uint8): 0, np.dtype(np.uint16): 1, np.dtype(np.float32): 2}
OUT_RAW, OUT_F32, OUT_U8, OUT_U16, OUT_BICUBIC = 0, 1, 2, 3, 4


def fold_args(in_shape: tuple[int, int], out_shape: tuple[int, int]) -> np.ndarray:
    """The FOLD kernels' ``fold`` array (fused_common.cu fold_block): {on, phase 0 / 1 window
    offsets, their minimum, then the frame rows [ylo, yhi) and columns [xlo, xhi) where the phase
    filters hold}; ``on`` = 0 unless the upscale is an exact x2 with such a region along both axes."""
    from ..fold import interior_offsets, regular_range

    (h, w), (H, W) = in_shape, out_shape
    ylo, yhi = regular_range(h, H, FOLD_SCALE)
    xlo, xhi = regular_range(w, W, FOLD_SCALE)
    offsets = np.array(interior_offsets(FOLD_SCALE))
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
    """The fused network for one model in one arithmetic on one device (``config``'s, when given).

    ``run(plane, out_shape, max_value, out=None, raw=False, stream=None)``: ``plane`` a device
    (h, w) uint8/uint16/float32 array (rows may be padded: any row stride), returns (or writes
    into ``out``) the (H, W) plane: integer input -> same dtype quantised against ``max_value``,
    float32 input -> float32 clipped to [0, 1], ``raw`` -> float32 unclipped network output.
    """

    def __init__(self, model: SRCNNModel, arithmetic: Arithmetic = "fp32", device_index: int = 0,
                 config: FusedConfig | None = None, limits: Any = None, axis_tables: Any = None) -> None:
        import cupy as cp

        from ..build import compile_kernels, device_limits

        self.model = model
        self.config = config or config_for(arithmetic, model.f2)
        self.arithmetic = self.config.arithmetic
        if model.n1 != 64 or model.n2 != 32 or model.f1 != 9 or model.f3 != 5:
            raise EngineError(f"fused kernels need SRCNN 9-f2-5 with 64/32 channels, got {model.arch} "
                              f"({model.n1}/{model.n2} channels)")
        self.device_index = device_index
        self.device = cp.cuda.Device(device_index)
        self.limits = limits or device_limits(device_index)
        cfg, f2 = self.config, model.f2
        self.name = f"fused-{self.arithmetic} {model.arch} {cfg.label}"
        if not cfg.runs_on(self.limits.compute_capability):
            raise EngineError(f"{self.name}: built for {cfg.arch}, the device is compute capability "
                              f"{self.limits.compute_capability}")
        kernels = compile_kernels(cfg.source, [cfg.kernel_name(f2), cfg.layout_name(f2)], device_index, self.limits,
                                  arch=cfg.arch)
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
                packed, self.fold_exponent = pack_tc(model, cfg.split, cfg.fold, cfg.wg, cfg.rows)
            expect = int(v[7])
            if packed.size != expect or self.layout.shared_bytes != shared_bytes(cfg, f2):
                raise EngineError(f"{self.name}: host and kernel layouts disagree ({packed.size} vs {expect} weight "
                                  f"words, {shared_bytes(cfg, f2)} vs {self.layout.shared_bytes} shared bytes)")
            if self.layout.shared_bytes > self.limits.max_shared_per_block_optin:
                raise EngineError(f"{self.name}: needs {self.layout.shared_bytes} bytes of shared memory per "
                                  f"block, the device allows {self.limits.max_shared_per_block_optin}")
            self.weights = cp.asarray(packed)
        self._tables: dict[tuple[int, int, int, int], _Tables] = {}
        # an engine's srgpu.kernels.bicubic.Bicubic on this device: the per-axis coefficient tables
        # are the same (coefficients()), so each axis goes up once for both (known / adopt)
        self.axis_tables = axis_tables

    # ------------------------------------------------------------ tables

    def tables(self, in_shape: tuple[int, int], out_shape: tuple[int, int]) -> _Tables:
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
            shared = self.axis_tables
            axes = [(h, H, wv, iv), (w, W, wh, ih)]
            known = [shared.known(n, m) if shared is not None else None for n, m, _, _ in axes]
            new = [a for a, k in zip(axes, known) if k is None]
            with self.device:  # one copy for all that is new
                up = upload(first0, fold, np.concatenate([[0], fold[1:]]).astype(np.int32),
                            *(t for _, _, wt, ix in new for t in (wt, ix)))
                d_first0, d_fold, d_fold_off, rest = up[0], up[1], up[2], list(up[3:])
                device_axes = []
                for (n, m, wt, ix), k in zip(axes, known):
                    if k is None:
                        d_w, d_i = rest.pop(0), rest.pop(0)
                        if shared is not None:
                            shared.adopt(n, m, d_w, d_i)
                    else:
                        d_w, d_i = k.weights, k.indices
                    device_axes.append((d_w, d_i))
                (d_wv, d_iv), (d_wh, d_ih) = device_axes
                t = _Tables(d_wv, d_iv, int(wv.shape[1]), d_wh, d_ih, int(wh.shape[1]), int(rows_first), d_first0,
                            nfirst, d_fold, d_fold_off)
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
        h2 = self.model.f2 // 2  # conv1's region: the Z region, with f2 > 1 and conv2's halo
        zy = np.arange(gy) * L.tile_rows - 2 - h2
        nz = np.minimum(L.tile_rows, H - np.arange(gy) * L.tile_rows) + 4 + 2 * h2
        zx = np.arange(gx) * L.tile_cols - 2 - h2
        rows = (zy >= f[4]) & (zy + nz <= f[5])
        cols = (zx >= f[6]) & (zx + L.tile_cols + 4 + 2 * h2 <= f[7])
        return int(rows.sum() * cols.sum())

    # ------------------------------------------------------------ running

    def run(self, plane: Any, out_shape: tuple[int, int], max_value: float, out: Any = None, raw: bool = False,
            stream: Any = None, bicubic_only: bool = False) -> Any:
        """``plane`` (h, w), or a batch (N, h, w) of planes of one size (one launch: grid z), ->
        (H, W) or (N, H, W) (``out_shape`` is one plane's)."""
        import cupy as cp

        if plane.ndim not in (2, 3) or np.dtype(plane.dtype) not in IN_CODES:
            raise EngineError(f"{self.name}: input must be a 2-D uint8/uint16/float32 plane or a batch of them, "
                              f"got {plane.dtype} {plane.shape}")
        batch = plane.ndim == 3
        if not _pitched(plane):
            with self.device:
                plane = cp.ascontiguousarray(plane)  # the kernel reads rows with a pitch
        h, w = int(plane.shape[-2]), int(plane.shape[-1])
        n = int(plane.shape[0]) if batch else 1
        H, W = (int(out_shape[0]), int(out_shape[1]))
        if H < 1 or W < 1 or h < 1 or w < 1 or n < 1:
            raise EngineError(f"{self.name}: empty plane {plane.shape} -> {out_shape}")
        in_dtype = np.dtype(plane.dtype)
        if raw or bicubic_only:
            out_dtype, mode = np.dtype(np.float32), (OUT_BICUBIC if bicubic_only else OUT_RAW)
            if bicubic_only and self.config.kernel != "fp32":
                raise EngineError("the bicubic-only check runs on the fp32 kernel")
        else:
            out_dtype = in_dtype
            mode = {np.dtype(np.uint8): OUT_U8, np.dtype(np.uint16): OUT_U16, np.dtype(np.float32): OUT_F32}[in_dtype]
        full_shape = (n, H, W) if batch else (H, W)
        with self.device:
            if out is None:
                out = cp.empty(full_shape, dtype=out_dtype)
            if tuple(out.shape) != full_shape or np.dtype(out.dtype) != out_dtype:
                raise EngineError(f"{self.name}: output must be {out_dtype} {full_shape}, got {out.dtype} {out.shape}")
            if not _pitched(out):
                raise EngineError(f"{self.name}: output rows must be contiguous (planes one after another)")
            t = self.tables((h, w), (H, W))
            args = (plane, np.int32(IN_CODES[in_dtype]), np.int32(plane.strides[-2] // plane.itemsize),
                    np.int32(h), np.int32(w), inv_max(in_dtype, max_value),
                    np.int32(H), np.int32(W), t.wv, t.iv, np.int32(t.tv), t.wh, t.ih, np.int32(t.th),
                    np.int32(t.rows_first), t.first0, np.int32(t.nfirst), out, np.int32(mode),
                    np.int32(out.strides[-2] // out.itemsize), np.float32(max_value), self.weights)
            folds = self.folds(in_dtype, max_value) and not bicubic_only
            args += (t.fold if folds else t.no_fold,
                     np.float32(np.float32(2.0**-self.fold_exponent) * inv_max(in_dtype, max_value)))
            gx, gy, _ = self.grid((H, W))
            launch = Launch(self.kernel.name, (gx, gy, n), (self.layout.threads, 1, 1), self.layout.shared_bytes)
            self.kernel(launch, args, stream if stream is not None else cp.cuda.get_current_stream())
        return out

    def flops(self, out_shape: tuple[int, int]) -> float:
        """Useful FLOPs of the network on one frame (2 x MACs per output pixel, no halo)."""
        return 2.0 * self.model.macs_per_pixel * out_shape[0] * out_shape[1]


def _pitched(a: Any) -> bool:
    """Rows of contiguous samples at a positive pitch and, in a batch, planes one after another
    (plane z at z * rows * pitch): what the kernel's addressing takes."""
    item = a.itemsize
    if a.strides[-1] != item or a.strides[-2] % item or a.strides[-2] < 0:
        return False
    return a.ndim == 2 or a.strides[0] == a.shape[1] * a.strides[1]


def self_check(device_index: int = 0, arithmetic: Arithmetic = "fp32", arch: str = "9-1-5",
               seed: int = 0) -> dict[str, float]:
    """Random weights and a random 8-bit plane of an awkward size through the fused kernel against
    :func:`reference`: raw max abs error (fp32; raises over 1e-4) or 8-bit agreement (tensor
    cores; raises over one level apart; whether the agreement meets the accuracy bar is
    srgpu.engine.plans' call). Returns the measured figures."""
    import cupy as cp

    from ...model import random_model

    rng = np.random.default_rng(seed)
    model = random_model(arch, seed=seed)
    net = FusedSRCNN(model, arithmetic, device_index)
    lr = rng.integers(0, 256, (37, 53)).astype(np.uint8)
    out_shape = (74, 106)
    with net.device:
        if arithmetic == "fp32":
            got = net.run(cp.asarray(lr), out_shape, 255, out=cp.full(out_shape, np.nan, np.float32), raw=True).get()
            err = float(np.max(np.abs(got - reference(lr, out_shape, 255, model, raw=True))))
            if not err <= 1e-4:
                raise AssertionError(f"{net.name}: max error {err:.3g} > 1e-4")
            return {"max_abs_error": err}
        got8 = net.run(cp.asarray(lr), out_shape, 255, out=cp.full(out_shape, 0xAB, np.uint8)).get()
        frac, worst = agreement(got8, reference(lr, out_shape, 255, model))
        if arithmetic == "fp16" and worst > 1:
            raise AssertionError(f"{net.name}: {frac:.4%} of 8-bit pixels equal, max difference {worst}")
        return {"equal_fraction": frac, "max_level_difference": float(worst)}
