#!/usr/bin/env python3
"""Prototype of 9-5-5's conv2 on Hopper's warpgroup MMA (dev/cuda/wgmma_conv2.cu): check against a
NumPy reference, then time a 4K frame's worth of the fused kernel's conv2 work.

    python3 dev/cuda/wgmma_conv2.py --offline            # NVRTC sm_90a build only: registers, spills
    python3 dev/cuda/wgmma_conv2.py --check              # GPU: reference on random data, awkward sizes
    python3 dev/cuda/wgmma_conv2.py --time --reps 20     # GPU: ms for a 4K frame's worth of conv2
    python3 dev/cuda/wgmma_conv2.py --once               # GPU: one launch (for ncu)

A 4K frame's worth: the offered 9-5-5 fp16-fast tile (60 x 28 outputs) computes conv2 on 64 x 32 Z
positions per tile, 36 x 138 tiles for 3840 x 2160: 10.17 M positions, what its conv2 phase (1.93 ms of
3.93, BENCHMARKS.md "Issue 17: the phase ablation on the GPU") does. Here blocks of ZT x 32 positions
cover that many positions, each loading its activations (from a small frame that stays in L2; block b
takes tile b mod tiles) and all of conv2's weights (100 KB, from L2) into shared memory: the MMA part
plus what the fused kernel's weight stream costs. --reps R also runs the MMAs R times per load.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # dev/ lies beside the package
from dev.cuda import nvrtc_sm90a  # noqa: E402
SOURCE = HERE / "wgmma_conv2.cu"
POSITIONS_4K = 36 * 64 * 138 * 32  # Z positions of the 60 x 28 tile over 3840 x 2160
OPTIONS = ("-std=c++17", "-arch=sm_90a")


def kernel_name(zt: int, nwg: int, nb: int = 1) -> str:
    return f"wg_conv2<{zt}, {nwg}, {nb}>"


def shared_bytes(zt: int, nwg: int, nb: int = 1) -> int:
    """WgCfg::TOTAL."""
    npos = (zt + 4) * 36
    g = (npos * 16 + 127) // 128 * 128 + 16
    return 25 * 8 * 512 + 8 * g + 128


def compile_cubin(names: list[str]) -> tuple[bytes, dict[str, str]]:
    """NVRTC for sm_90a: the cubin and the lowered names (ptxas' C7519 notes, an arrive at the loop's back
    edge, are expected; anything else is shown)."""
    cubin, lowered, _ = nvrtc_sm90a.compile_cubin(SOURCE, names, OPTIONS)
    return cubin, lowered

def pack_weights(w2: np.ndarray) -> np.ndarray:
    """conv2 weights (32 out, 64 in, 5, 5) -> fp16 [tap][channel group][out][8 channels] (the shared layout)."""
    w = np.asarray(w2, np.float32).transpose(2, 3, 1, 0).reshape(25, 8, 8, 32)  # (t, g, k, n)
    return np.ascontiguousarray(w.transpose(0, 1, 3, 2).astype(np.float16))


def reference(x: np.ndarray, w2: np.ndarray, b2: np.ndarray) -> np.ndarray:
    """x (Hin, Win, 64) fp16 -> ReLU(valid 5x5 conv + b2), (Hin - 4, Win - 4, 32) fp32, in fp64."""
    xf = x.astype(np.float64)
    hz, wz = x.shape[0] - 4, x.shape[1] - 4
    acc = np.zeros((hz, wz, 32))
    wf = w2.astype(np.float16).astype(np.float64)
    for dy in range(5):
        for dx in range(5):
            acc += xf[dy:dy + hz, dx:dx + wz] @ wf[:, :, dy, dx].T
    return np.maximum(acc + b2.astype(np.float64), 0.0)


class Conv2:
    def __init__(self, zt: int, nwg: int, nb: int = 1) -> None:
        import cupy as cp
        import cupy_backends.cuda.api.driver as drv

        self.zt, self.nwg, self.nb = zt, nwg, nb
        name = kernel_name(zt, nwg, nb)
        cubin, lowered = compile_cubin([name])
        self.module = cp.cuda.function.Module()
        self.module.load(cubin)
        self.fn = self.module.get_function(lowered[name])
        self.smem = shared_bytes(zt, nwg)
        drv.funcSetAttribute(self.fn.ptr, drv.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, self.smem)
        self.regs = drv.funcGetAttribute(drv.CU_FUNC_ATTRIBUTE_NUM_REGS, self.fn.ptr)
        self.local = drv.funcGetAttribute(drv.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, self.fn.ptr)

    def __call__(self, x, wpk, b2, out, blocks: int | None = None, reps: int = 1, swap: int = 0) -> None:
        hin, win = int(x.shape[0]), int(x.shape[1])
        tiles_x = -(-(win - 4) // 32)
        ntiles = tiles_x * -(-(hin - 4) // self.zt)
        grid = (blocks or ntiles, 1, 1)
        self.fn(grid, (self.nwg * 128, 1, 1), (x, np.int32(hin), np.int32(win), wpk, b2, out, np.int32(tiles_x),
                                                np.int32(ntiles), np.int32(reps), np.int32(swap)),
                shared_mem=self.smem)


def random_case(rng: np.random.Generator, hz: int, wz: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = rng.uniform(0, 1, (hz + 4, wz + 4, 64)).astype(np.float16)  # post-ReLU activations
    w2 = (rng.standard_normal((32, 64, 5, 5)) * 0.05).astype(np.float32)
    b2 = (rng.standard_normal(32) * 0.1).astype(np.float32)
    return x, w2, b2


def check(configs: list[tuple[int, ...]], swap: int) -> bool:
    import cupy as cp

    rng = np.random.default_rng(7)
    ok = True
    for cfg in configs:
        k = Conv2(*cfg)
        zt = cfg[0]
        print(f"{kernel_name(*cfg)}: {k.regs} regs, {k.local} local bytes, {k.smem} B shared")
        for hz, wz in ((37, 53), (zt, 32), (70, 101), (8, 5)):
            x, w2, b2 = random_case(rng, hz, wz)
            ref = reference(x, w2, b2)
            out = cp.full((hz, wz, 32), np.nan, np.float16)  # poisoned
            k(cp.asarray(x), cp.asarray(pack_weights(w2)), cp.asarray(b2), out, swap=swap)
            got = out.get().astype(np.float64)
            err = np.abs(got - ref)
            tol = 2e-3 * np.maximum(1.0, np.abs(ref))  # fp16 output rounding (2^-11) + fp32 sums
            good = bool(np.all(np.isfinite(got)) and np.all(err <= tol))
            ok &= good
            print(f"  {hz}x{wz}: max abs err {np.nanmax(err):.3g}, max |ref| {ref.max():.3g}, "
                  f"{'ok' if good else 'FAIL'} (swap={swap})")
    return ok


def time_config(zt: int, nwg: int, nb: int, reps: int, swap: int, mma_reps: list[int]) -> dict:
    import cupy as cp

    k = Conv2(zt, nwg, nb)
    rng = np.random.default_rng(1)
    hz, wz = 8 * zt, 32 * 16  # a small frame (L2-resident): 128 tiles
    x, w2, b2 = random_case(rng, hz, wz)
    dx, dw, db = cp.asarray(x), cp.asarray(pack_weights(w2)), cp.asarray(b2)
    out = cp.zeros((hz, wz, 32), np.float16)
    blocks = POSITIONS_4K // (zt * 32)
    row = {"kernel": kernel_name(zt, nwg, nb), "swap": swap, "regs": k.regs, "local": k.local, "smem": k.smem,
           "blocks": blocks}
    for r in mma_reps:
        ms = time_cupy(lambda: k(dx, dw, db, out, blocks=blocks, reps=r, swap=swap), reps)
        row[f"ms_reps{r}"] = ms
    if len(mma_reps) >= 2:
        r0, r1 = mma_reps[0], mma_reps[-1]
        row["ms_per_mma_pass"] = (row[f"ms_reps{r1}"] - row[f"ms_reps{r0}"]) / (r1 - r0)
        flops = 2.0 * POSITIONS_4K * 1600 * 32
        row["tflops_mma_pass"] = flops / (row["ms_per_mma_pass"] * 1e-3) / 1e12
        row["tflops_issued"] = nb * row["tflops_mma_pass"]  # the probe's MMAs are nb times wider
    return row


@functools.lru_cache(maxsize=1)
def _bench_peers():
    spec = importlib.util.spec_from_file_location("bench_peers", HERE.parents[1] / "scripts" / "benchmarks" / "bench_peers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_cupy(fn, reps: int, warmup: int = 3) -> float:
    """bench_peers.py's timing: the median of CUDA-event intervals between back-to-back runs."""
    return _bench_peers().time_cupy(fn, reps, warmup)


def parse_configs(spec: list[str]) -> list[tuple[int, int, int]]:
    """ "ZT,NWG[,NB]" -> (ZT, NWG, NB)."""
    out = []
    for s in spec:
        v = [int(x) for x in s.split(",")]
        out.append((v[0], v[1], v[2] if len(v) > 2 else 1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", action="append", default=None,
                    help="ZT,NWG[,NB]: Z rows per block, warpgroups, N / 32 (NB > 1: rate probe; default 16,2 16,4 "
                         "8,1 8,2)")
    ap.add_argument("--offline", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--once", action="store_true", help="one launch of the first config (ncu)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--mma-reps", default="1,3", help="MMA passes per load to time (the difference: MMAs alone)")
    ap.add_argument("--swap", type=int, default=-1, help="LBO/SBO exchanged (1), not (0), or find out (-1)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    configs = parse_configs(args.config or ["16,2", "16,4", "8,1", "8,2"])
    if args.offline:
        cubin, lowered = compile_cubin([kernel_name(*c) for c in configs])
        print(f"NVRTC sm_90a: {len(cubin)} bytes of cubin, {lowered}")
        return
    swap = args.swap
    if args.check or swap < 0:
        if swap < 0:
            swap = 0 if check(configs[:1], 0) else 1 if check(configs[:1], 1) else -1
            if swap < 0:
                raise SystemExit("neither descriptor convention matches the reference")
            print(f"descriptor convention: swap={swap}")
        if args.check and not check(configs, swap):
            raise SystemExit("reference check failed")
    if args.once:
        import cupy as cp

        zt, nwg, nb = configs[0]
        k = Conv2(zt, nwg, nb)
        x, w2, b2 = random_case(np.random.default_rng(1), 8 * zt, 512)
        out = cp.zeros((8 * zt, 512, 32), np.float16)
        k(cp.asarray(x), cp.asarray(pack_weights(w2)), cp.asarray(b2), out, blocks=POSITIONS_4K // (zt * 32), swap=swap)
        cp.cuda.Device().synchronize()
    if args.time:
        rows = [time_config(zt, nwg, nb, args.reps, swap, [int(v) for v in args.mma_reps.split(",")])
                for zt, nwg, nb in configs]
        for r in rows:
            print(json.dumps(r))
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
