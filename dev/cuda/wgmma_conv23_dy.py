#!/usr/bin/env python3
"""The row-streamed consumer (issue 17): dz_conv23s in dev/cuda/wgmma_conv2_dy.cu = dy_conv2s' conv2 (register A
reused over the 5 tap rows) + per finished conv2 row: ReLU(acc + b2) -> fp16 register A, the Z GEMM (2 x wgmma
m64n32k16, B = W3), a Z ring in shared memory, conv3's shifted sum -> fp32 output. Checked against a float64
reference of conv3(ReLU(conv2(x) + b2)) + b3; timed beside dy_conv2s (conv2 only) in the same process.

    python3 dev/cuda/wgmma_conv23_dy.py --offline        # NVRTC sm_90a build, ptxas -v: registers, notes
    python3 dev/cuda/wgmma_conv23_dy.py --check          # GPU: reference on random data, awkward sizes
    python3 dev/cuda/wgmma_conv23_dy.py --time --reps 20 --mma-reps 1,3,5
                                                         # GPU: a 4K frame's worth, + dy_conv2s<48, 2, 2, 2>

Configs "R,NWG[,NRING[,NBUF[,KSUM[,ABL]]]]": R conv2 rows (R - 4 output rows) x 64 columns (60 outputs) per
warpgroup job, NWG warpgroups, NRING input rows in the ring, NBUF A buffers, KSUM the fragment of a row that does
the shifted sum; ABL (timing ablation, wrong output): bit 0 no Z GEMM, bit 1 no Z stores, bit 2 no shifted sum.

A 4K frame's worth, counted as dy_conv2s counts it: POSITIONS_4K (wgmma_conv2.py, 10.17 M) conv2 positions, so
both kernels run the same blocks (ceil(POSITIONS_4K / (NWG R 64))) with the same conv2 MMAs, and the difference
is the cost of steps 1-4. Such a block stores NWG (R - 4) 60 outputs; "ms_out4k" rescales to the 3840 x 2160
outputs of a frame (the halo's conv2 rows and columns, 4 of R and 4 of 64, are then paid for as well).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # dev/ lies beside the package
from dev.cuda import wgmma_conv2 as wc  # noqa: E402
from dev.cuda import wgmma_conv2_dy as wd  # noqa: E402

DEFAULT_CONFIGS = ["48,2,2,2"]
# (output rows, output columns): one row, one column, widths not a multiple of 60, heights not of R - 4
CHECK_SIZES = ((37, 53), (1, 1), (1, 130), (44, 60), (45, 61), (8, 5), (3, 121), (70, 101), (89, 64))
OUT_4K = 3840 * 2160


def kernel_name(r: int, nwg: int, nring: int = 2, nbuf: int = 2, ksum: int = 10, abl: int = 0) -> str:
    """abl (timing only): bit 0 no Z GEMM, bit 1 no Z stores, bit 2 no shifted sum."""
    return f"dz_conv23s<{r}, {nwg}, {nring}, {nbuf}, 1, {ksum}" + (f", {abl}>" if abl else ">")


def shared_bytes(r: int, nwg: int, nring: int = 2, nbuf: int = 2, ksum: int = 10, abl: int = 0) -> int:
    """DzCfg::TOTAL."""
    zb = (26 * (6 * 64 + 4) * 4 + 127) // 128 * 128
    return 25 * 8 * 512 + nwg * nring * 8 * (68 * 16 + 80) + 4 * 32 * 16 + nwg * zb + 256


def pack_w3(w3: np.ndarray) -> np.ndarray:
    """conv3 weights (1, 32, 5, 5) -> fp16 [channel group 4][tap 32 (25 used)][8 channels] (wgmma's K-major B)."""
    w = np.zeros((32, 32), np.float32)  # (tap n, channel k)
    w[:25] = np.asarray(w3, np.float32).reshape(32, 25).T
    return np.ascontiguousarray(w.reshape(32, 4, 8).transpose(1, 0, 2).astype(np.float16))


def random_case(rng: np.random.Generator, ho: int, wo: int):
    """x (ho + 8, wo + 8, 64) fp16 in [0, 1), conv2 weights (std 0.05) and biases as wgmma_conv2.py, conv3's
    weights std 0.05 (the 9-5-5 models' conv3 spread is of that order) and b3."""
    x, w2, b2 = wc.random_case(rng, ho + 4, wo + 4)
    w3 = (rng.standard_normal((1, 32, 5, 5)) * 0.05).astype(np.float32)
    b3 = np.float32(rng.standard_normal() * 0.1)
    return x, w2, b2, w3, b3


def _conv3(a2: np.ndarray, w3f: np.ndarray) -> np.ndarray:
    ho, wo = a2.shape[0] - 4, a2.shape[1] - 4
    out = np.zeros((ho, wo))
    for dy in range(5):
        for dx in range(5):
            out += a2[dy:dy + ho, dx:dx + wo] @ w3f[0, :, dy, dx]
    return out


def reference(x, w2, b2, w3, b3):
    """float64: (conv3(ReLU(conv2(x) + b2)) + b3, (Hin - 8, Win - 8)), and the error bound's scale
    S = sum |W3| |A2| per output (weights as the kernel sees them, fp16)."""
    a2 = wc.reference(x, w2, b2)
    w3f = np.asarray(w3, np.float32).astype(np.float16).astype(np.float64)
    return _conv3(a2, w3f) + float(b3), _conv3(np.abs(a2), np.abs(w3f))


def conv2_abs(x, w2) -> np.ndarray:
    """sum |x| |W2| per conv2 output (the scale of conv2's fp32 rounding)."""
    return wc.reference(np.abs(x), np.abs(w2), np.zeros(32, np.float32))


@functools.lru_cache(maxsize=None)
def build(cfg: tuple[int, ...]) -> "DzConv23":
    return DzConv23(*cfg)


class DzConv23:
    def __init__(self, r: int, nwg: int, nring: int = 2, nbuf: int = 2, ksum: int = 10, abl: int = 0) -> None:
        import cupy as cp
        import cupy_backends.cuda.api.driver as drv

        self.cfg = (r, nwg, nring, nbuf, ksum, abl)
        self.r, self.nwg = r, nwg
        name = kernel_name(*self.cfg)
        cubin, lowered, self.log = wd.compile_cubin([name], verbose=True)
        self.module = cp.cuda.function.Module()
        self.module.load(cubin)
        self.fn = self.module.get_function(lowered[name])
        self.smem = shared_bytes(*self.cfg)
        drv.funcSetAttribute(self.fn.ptr, drv.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, self.smem)
        self.regs = drv.funcGetAttribute(drv.CU_FUNC_ATTRIBUTE_NUM_REGS, self.fn.ptr)
        self.local = drv.funcGetAttribute(drv.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, self.fn.ptr)

    def jobs(self, hin: int, win: int) -> tuple[int, int]:
        tiles_x = -(-(win - 8) // 60)
        return tiles_x, tiles_x * -(-(hin - 8) // (self.r - 4))

    def __call__(self, x, wpk, w3pk, bias, out, blocks: int | None = None, reps: int = 1, reload: int = 1,
                 clk=None) -> None:
        hin, win = int(x.shape[0]), int(x.shape[1])
        tiles_x, njobs = self.jobs(hin, win)
        blocks = blocks or -(-njobs // self.nwg)
        args = (x, np.int32(hin), np.int32(win), wpk, w3pk, bias, out, np.int32(tiles_x), np.int32(njobs),
                np.int32(reps), np.int32(reload), clk if clk is not None else np.uint64(0))
        self.fn((blocks, 1, 1), (self.nwg * 128, 1, 1), args, shared_mem=self.smem)


def device_args(x, w2, b2, w3, b3):
    import cupy as cp

    bias = np.concatenate([np.asarray(b2, np.float32), np.float32([b3])])
    return cp.asarray(x), cp.asarray(wc.pack_weights(w2)), cp.asarray(pack_w3(w3)), cp.asarray(bias)


def check(configs: list[tuple[int, ...]], reps: tuple[int, ...] = (1, 2), sizes=CHECK_SIZES) -> bool:
    """Every config on `sizes` (random data, NaN-poisoned output), 1 and 2 passes, against the float64 reference.
    Tolerance: the kernel rounds A2 = ReLU(conv2 + b2) to fp16 (round to nearest: |error| <= 2^-11 |A2|), so
    |out - ref| <= 2^-11 S (S = sum |W3| |A2|) plus the fp32 sums: conv2's 1600 products (<= 1600 u32 sum |x| |W2|
    per A2, u32 = 2^-24), carried through |W3|, and conv3's 32 + 25 terms (<= 60 u32 S)."""
    import cupy as cp

    rng = np.random.default_rng(11)
    ok = True
    for cfg in configs:
        k = build(tuple(cfg))
        print(f"{kernel_name(*cfg)}: {k.regs} regs, {k.local} local bytes, {k.smem} B shared")
        for ho, wo in sizes:
            x, w2, b2, w3, b3 = random_case(rng, ho, wo)
            ref, s = reference(x, w2, b2, w3, b3)
            w3f = np.abs(np.asarray(w3, np.float32).astype(np.float16).astype(np.float64))
            p = _conv3(conv2_abs(x, w2), w3f)
            tol = 2.0**-11 * s + 2.0**-24 * (1600 * p * (1 + 2.0**-11) + 60 * s) + 1e-7
            dx, dw, dw3, db = device_args(x, w2, b2, w3, b3)
            for r in reps:
                out = cp.full((ho, wo), np.nan, np.float32)  # poisoned
                k(dx, dw, dw3, db, out, reps=r)
                got = out.get().astype(np.float64)
                err = np.abs(got - ref)
                nan = int(np.count_nonzero(~np.isfinite(got)))
                good = bool(nan == 0 and np.all(err <= tol))
                ok &= good
                print(f"  {ho}x{wo} reps {r}: max abs err {np.nanmax(err):.3g}, max err / (2^-11 S) "
                      f"{np.nanmax(err / (2.0**-11 * s + 1e-30)):.3f}, max |ref| {np.abs(ref).max():.3g}, "
                      f"non-finite {nan}, {'ok' if good else 'FAIL'}")
    return ok


@functools.lru_cache(maxsize=None)
def base_row(cfg: tuple[int, ...], reps: int, mma_reps: tuple[int, ...]) -> dict:
    """dy_conv2s timed once per process and config (an ablation series shares it)."""
    return wd.time_config(cfg, reps, list(mma_reps))


def time_pair(cfg: tuple[int, ...], reps: int, mma_reps: list[int]) -> list[dict]:
    """dz_conv23s (cfg) and dy_conv2s<R, NWG, NRING, NBUF> on the same number of blocks (a 4K frame's worth of conv2
    positions), each on a small L2-resident frame (dy_conv2s: wgmma_conv2_dy.py's 96 x 1024 conv2 output; dz_conv23s
    the same input, 92 x 1020 outputs); ms, MMA passes and SM clocks per MMA as wgmma_conv2_dy.py."""
    import cupy as cp

    r, nwg, nring, nbuf = cfg[:4]
    rows = [base_row((r, nwg, nring, nbuf, 1), reps, tuple(mma_reps))]
    k = build(tuple(cfg))
    x, w2, b2, w3, b3 = random_case(np.random.default_rng(1), 92, 1020)
    dx, dw, dw3, db = device_args(x, w2, b2, w3, b3)
    out = cp.zeros((92, 1020), np.float32)
    pos = nwg * r * 64
    blocks = math.ceil(wc.POSITIONS_4K / pos)
    scale = wc.POSITIONS_4K / (blocks * pos)
    row = {"kernel": kernel_name(*cfg), "regs": k.regs, "local": k.local, "smem": k.smem, "blocks": blocks,
           "scale": scale, "out4k_factor": OUT_4K / (blocks * scale * nwg * (r - 4) * 60)}
    for n in mma_reps:
        row[f"ms_reps{n}"] = scale * wc.time_cupy(lambda: k(dx, dw, dw3, db, out, blocks=blocks, reps=n, reload=0), reps)
    wd.add_pairs(row, mma_reps)
    r0, r1 = mma_reps[0], mma_reps[-1]
    row["ms_per_mma_pass"] = (row[f"ms_reps{r1}"] - row[f"ms_reps{r0}"]) / (r1 - r0)
    ms1 = scale * wc.time_cupy(lambda: k(dx, dw, dw3, db, out, blocks=blocks, reps=r1, reload=1), reps)
    row[f"ms_reps{r1}_reload"] = ms1
    row["ms_per_pass_with_row_loads"] = (ms1 - row[f"ms_reps{r0}"]) / (r1 - r0)
    row["ms_out4k_reps1"] = row[f"ms_reps{r0}"] * row["out4k_factor"]
    cyc = {}
    for n in mma_reps:
        c = cp.zeros(2 * blocks, np.int64)
        k(dx, dw, dw3, db, out, blocks=blocks, reps=n, reload=0, clk=c)
        c = c.get().reshape(-1, 2).astype(np.float64)
        cyc[n] = c[:, 0].mean()
        row[f"ghz_reps{n}"] = c[:, 0].sum() / c[:, 1].sum()
    conv2_mmas = nwg * r * 100  # conv2's warpgroup MMAs of a block's pass (dy_conv2s' count)
    row["clk_per_pass"] = (cyc[r1] - cyc[r0]) / (r1 - r0)
    row["clk_per_conv2_mma"] = row["clk_per_pass"] / conv2_mmas
    row["clk_per_mma_all"] = row["clk_per_pass"] / (nwg * r * 102)  # + the 2 Z GEMM MMAs per conv2 row
    for ra, rb in zip(mma_reps, mma_reps[1:]):
        row[f"clk_per_conv2_mma_{ra}_{rb}"] = (cyc[rb] - cyc[ra]) / (rb - ra) / conv2_mmas
    base = rows[0]
    row["consumer_ms_reps1"] = row[f"ms_reps{r0}"] - base[f"ms_reps{r0}"]
    row["consumer_ms_per_pass"] = row["ms_per_mma_pass"] - base["ms_per_mma_pass"]
    if "clk_per_mma" in base:
        row["consumer_clk_per_conv2_mma"] = row["clk_per_conv2_mma"] - base["clk_per_mma"]
    rows.append(row)
    return rows


def parse_configs(spec: list[str]) -> list[tuple[int, ...]]:
    """ "R,NWG[,NRING[,NBUF[,KSUM[,ABL]]]]" (ABL only where non-zero)."""
    out = []
    for s in spec:
        v = [int(t) for t in s.split(",")]
        c = tuple(v) + (2, 2, 10)[len(v) - 2:]
        out.append(c if len(c) == 5 or c[5] else c[:5])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", action="append", default=None, help=f"R,NWG[,NRING[,NBUF[,KSUM]]] (default {DEFAULT_CONFIGS})")
    ap.add_argument("--offline", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--mma-reps", default="1,3,5")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    configs = parse_configs(args.config or DEFAULT_CONFIGS)
    if args.offline:
        for c in configs:
            cubin, lowered, log = wd.compile_cubin([kernel_name(*c)], verbose=True)
            info = [ln.strip() for ln in log.splitlines() if "registers" in ln or "spill" in ln or "C75" in ln]
            print(f"{kernel_name(*c)}: {len(cubin)} B cubin, shared {shared_bytes(*c)}")
            for ln in info:
                print("   ", ln)
        return
    failed = args.check and not check(configs)
    if args.time:
        mr = [int(v) for v in args.mma_reps.split(",")]
        rows, seen = [], set()
        for c in configs:
            for row in time_pair(c, args.reps, mr):
                if row["kernel"].startswith("dz") or row["kernel"] not in seen:
                    rows.append(row)
                    seen.add(row["kernel"])
        for r in rows:
            print(json.dumps(r))
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
    if failed:
        raise SystemExit("reference check failed")


if __name__ == "__main__":
    main()
