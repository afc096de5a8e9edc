#!/usr/bin/env python3
"""9-5-5's conv2 on Hopper's warpgroup MMA with A from registers, each A fragment reused over the 5 tap
rows (dev/cuda/wgmma_conv2_dy.cu): check against wgmma_conv2.py's NumPy reference, then time a 4K frame's
worth beside wgmma_conv2.cu's wg_conv2 (A and B from shared memory) in the same process.

    python3 dev/cuda/wgmma_conv2_dy.py --offline         # NVRTC sm_90a build, ptxas -v: registers, notes
    python3 dev/cuda/wgmma_conv2_dy.py --check           # GPU: reference on random data, awkward sizes
    python3 dev/cuda/wgmma_conv2_dy.py --time --reps 20 --mma-reps 1,3,5 --soak 1
                                                         # GPU: ms for a 4K frame's worth, + wg_conv2<16, 2>
    python3 dev/cuda/wgmma_conv2_dy.py --once --config s:48,2 --mma-reps 3   # one launch (ncu)

Configs: "ZT,NWG[,NACC[,NBUF]]": dy_conv2, the whole ZT x 64 tile (+ halo) in shared memory, NWG warpgroups
of ZT / NWG rows, NACC rolling accumulator tiles (5: drain and store after each input row; 6: store a row
later, no drain), NBUF A buffers. "s:R,NWG[,NRING[,NBUF]]": dy_conv2s, each warpgroup an R x 64 strip whose
input rows stream through a ring of NRING rows (R % 6 == 0).

A 4K frame's worth (wgmma_conv2.py): POSITIONS_4K = 10.17 M conv2 positions. Blocks of ZT x 64 (dy_conv2) or
NWG x R x 64 (dy_conv2s) positions cover that many (ceil; the ms are scaled by POSITIONS_4K / positions
computed where that does not divide), each loading all of conv2's weights (100 KB) and its activations from
a small L2-resident frame. --mma-reps 1,3[,5] runs the MMAs 1, 3 (, 5) times per launch; the differences /
2 are the MMA pass (dy_conv2s: the later passes reload no rows, reload = 0; "with_row_loads": they do).
dy_conv2s also reports SM clocks per warpgroup MMA from clock64 in the kernel (one block per SM) and the
clock rate from %globaltimer; --soak reads nvidia-smi's SM clock while a kernel runs for a second.
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
from dev.cuda import nvrtc_sm90a  # noqa: E402
from dev.cuda import wgmma_conv2 as wc  # noqa: E402

SOURCE = HERE / "wgmma_conv2_dy.cu"
OPTIONS = ("-std=c++17", "-arch=sm_90a")
DEFAULT_CONFIGS = ["s:48,2,2,2", "s:96,2,2,2", "s:24,2,2,2", "s:48,2,2,5", "8,2,6,2"]
CHECK_SIZES = ((37, 53), (8, 64), (70, 101), (8, 5), (3, 130), (13, 64), (1, 1), (49, 70))


def kernel_name(zt: int, nwg: int, nacc: int, nbuf: int, stream: int = 0) -> str:
    """stream = 0: dy_conv2<ZT, NWG, NACC, NBUF> (whole tile in shared memory); 1: dy_conv2s<R, NWG, NRING, NBUF>
    (rows streamed through a ring; the first field is R, the rows per warpgroup, the third NRING)."""
    if stream:
        return f"dy_conv2s<{zt}, {nwg}, {nacc}, {nbuf}, 1>"
    return f"dy_conv2<{zt}, {nwg}, {nacc}, {nbuf}>"


def shared_bytes(zt: int, nwg: int, nacc: int = 6, nbuf: int = 2, stream: int = 0) -> int:
    """DyCfg::TOTAL, DySCfg::TOTAL."""
    if stream:
        return 25 * 8 * 512 + nwg * nacc * 8 * (68 * 16 + 80) + 128
    g = ((zt + 4) * 68 * 16 + 127) // 128 * 128 + 16
    return 25 * 8 * 512 + 8 * g + 128


def positions(cfg: tuple[int, ...]) -> int:
    """Output positions of one block."""
    zt, nwg = cfg[0], cfg[1]
    return zt * 64 * (nwg if len(cfg) > 4 and cfg[4] else 1)


def compile_cubin(names: list[str], verbose: bool = False) -> tuple[bytes, dict[str, str], str]:
    """NVRTC for sm_90a: the cubin, the lowered names and the log (ptxas' -v lines with verbose; only its
    C75xx notes and warnings are shown)."""
    return nvrtc_sm90a.compile_cubin(SOURCE, names, list(OPTIONS) + (["-Xptxas", "-v"] if verbose else []),
                                     hidden=("C7519", "ptxas info", "bytes stack frame"))

@functools.lru_cache(maxsize=None)
def build(cfg: tuple[int, ...]) -> "DyConv2":
    """One build per config and process (the check and the timing share it)."""
    return DyConv2(*cfg)


class DyConv2:
    def __init__(self, zt: int, nwg: int, nacc: int, nbuf: int, stream: int = 0) -> None:
        import cupy as cp
        import cupy_backends.cuda.api.driver as drv

        self.cfg = (zt, nwg, nacc, nbuf, stream)
        self.zt, self.nwg, self.stream = zt, nwg, stream
        name = kernel_name(*self.cfg)
        cubin, lowered, self.log = compile_cubin([name], verbose=True)
        self.module = cp.cuda.function.Module()
        self.module.load(cubin)
        self.fn = self.module.get_function(lowered[name])
        self.smem = shared_bytes(*self.cfg)
        self.threads = nwg * 128
        drv.funcSetAttribute(self.fn.ptr, drv.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, self.smem)
        self.regs = drv.funcGetAttribute(drv.CU_FUNC_ATTRIBUTE_NUM_REGS, self.fn.ptr)
        self.local = drv.funcGetAttribute(drv.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, self.fn.ptr)

    def tiles(self, hin: int, win: int) -> tuple[int, int]:
        """64-column strips, and tiles (dy_conv2) or jobs (dy_conv2s) in all."""
        tiles_x = -(-(win - 4) // 64)
        return tiles_x, tiles_x * -(-(hin - 4) // self.zt)

    def __call__(self, x, wpk, b2, out, blocks: int | None = None, reps: int = 1, reload: int = 1, clk=None) -> None:
        hin, win = int(x.shape[0]), int(x.shape[1])
        tiles_x, ntiles = self.tiles(hin, win)
        args = [x, np.int32(hin), np.int32(win), wpk, b2, out, np.int32(tiles_x), np.int32(ntiles), np.int32(reps)]
        if self.stream:
            args += [np.int32(reload), clk if clk is not None else np.uint64(0)]
            blocks = blocks or -(-ntiles // self.nwg)
        self.fn(((blocks or ntiles), 1, 1), (self.threads, 1, 1), tuple(args), shared_mem=self.smem)


def check(configs: list[tuple[int, ...]], reps: tuple[int, ...] = (1, 2)) -> bool:
    """Every config on CHECK_SIZES (random fp16 activations, NaN-poisoned output), against the float64
    reference; reps 2 as well (the last rep stores: the timing path)."""
    import cupy as cp

    rng = np.random.default_rng(7)
    ok = True
    for cfg in configs:
        k = build(tuple(cfg))
        print(f"{kernel_name(*cfg)}: {k.regs} regs, {k.local} local bytes, {k.smem} B shared")
        for hz, wz in CHECK_SIZES:
            x, w2, b2 = wc.random_case(rng, hz, wz)
            ref = wc.reference(x, w2, b2)
            dx, dw, db = cp.asarray(x), cp.asarray(wc.pack_weights(w2)), cp.asarray(b2)
            for r in reps:
                out = cp.full((hz, wz, 32), np.nan, np.float16)  # poisoned
                k(dx, dw, db, out, reps=r)
                got = out.get().astype(np.float64)
                err = np.abs(got - ref)
                tol = 2e-3 * np.maximum(1.0, np.abs(ref))  # fp16 output rounding (2^-11) + fp32 sums
                nan = int(np.count_nonzero(~np.isfinite(got)))
                good = bool(nan == 0 and np.all(err <= tol))
                ok &= good
                print(f"  {hz}x{wz} reps {r}: max abs err {np.nanmax(err):.3g}, max |ref| {ref.max():.3g}, "
                      f"non-finite {nan}, {'ok' if good else 'FAIL'}")
    return ok


def timing_frame(cfg: tuple[int, ...] | None) -> tuple[int, int]:
    """(Hz, Wz) of the small L2-resident frame the 4K frame's worth of blocks reads: wg_conv2 (None) as
    wgmma_conv2.py, 8 ZT x 512; dy_conv2 8 ZT x 1024 (128 tiles); dy_conv2s 96 x 1024 (13 MB of input: the
    same for every R, 16 strips x 96 / R jobs)."""
    if cfg is None:
        return 8 * 16, 512
    if cfg[4:] and cfg[4]:
        return max(96, cfg[0]), 1024
    return 8 * cfg[0], 1024


def time_config(cfg: tuple[int, ...], reps: int, mma_reps: list[int]) -> dict:
    import cupy as cp

    k = build(tuple(cfg))
    zt = cfg[0]
    rng = np.random.default_rng(1)
    hz, wz = timing_frame(tuple(cfg))
    x, w2, b2 = wc.random_case(rng, hz, wz)
    dx, dw, db = cp.asarray(x), cp.asarray(wc.pack_weights(w2)), cp.asarray(b2)
    out = cp.zeros((hz, wz, 32), np.float16)
    blocks = math.ceil(wc.POSITIONS_4K / positions(cfg))
    scale = wc.POSITIONS_4K / (blocks * positions(cfg))
    row = {"kernel": kernel_name(*cfg), "regs": k.regs, "local": k.local, "smem": k.smem, "blocks": blocks,
           "scale": scale}
    for r in mma_reps:
        row[f"ms_reps{r}"] = scale * wc.time_cupy(lambda: k(dx, dw, db, out, blocks=blocks, reps=r, reload=0), reps)
    add_pairs(row, mma_reps)
    if len(mma_reps) >= 2:
        r0, r1 = mma_reps[0], mma_reps[-1]
        row["ms_per_mma_pass"] = (row[f"ms_reps{r1}"] - row[f"ms_reps{r0}"]) / (r1 - r0)
        row["tflops_mma_pass"] = 2.0 * wc.POSITIONS_4K * 1600 * 32 / (row["ms_per_mma_pass"] * 1e-3) / 1e12
        if k.stream:  # the later passes reload their rows (through the ring, from L2) as a first pass does
            ms1 = scale * wc.time_cupy(lambda: k(dx, dw, db, out, blocks=blocks, reps=r1, reload=1), reps)
            row[f"ms_reps{r1}_reload"] = ms1
            row["ms_per_pass_with_row_loads"] = (ms1 - row[f"ms_reps{r0}"]) / (r1 - r0)
            # SM clocks of the rep loop per block (one block per SM): clk/MMA independent of the clock rate and
            # of the grid's tail; the clock rate from the same blocks' globaltimer
            cyc = {}
            for r in mma_reps:
                c = cp.zeros(2 * blocks, np.int64)
                k(dx, dw, db, out, blocks=blocks, reps=r, reload=0, clk=c)
                c = c.get().reshape(-1, 2).astype(np.float64)
                cyc[r] = c[:, 0].mean()
                row[f"ghz_reps{r}"] = c[:, 0].sum() / c[:, 1].sum()
            mmas = k.nwg * zt * 100  # warpgroup MMAs of a block's pass
            row["clk_per_mma"] = (cyc[r1] - cyc[r0]) / (r1 - r0) / mmas
            for ra, rb in zip(mma_reps, mma_reps[1:]):
                row[f"clk_per_mma_{ra}_{rb}"] = (cyc[rb] - cyc[ra]) / (rb - ra) / mmas
    return row


def add_pairs(row: dict, mma_reps: list[int]) -> None:
    """ms of one MMA pass from each pair of consecutive pass counts: 1 -> 3 has the first pass's loads in both
    launches, but not equally contended (every block of a 1-pass launch loads at once), 3 -> 5 compares
    launches whose blocks are equally out of step."""
    for ra, rb in zip(mma_reps, mma_reps[1:]):
        if f"ms_reps{ra}" in row and f"ms_reps{rb}" in row:
            row[f"ms_pass_{ra}_{rb}"] = (row[f"ms_reps{rb}"] - row[f"ms_reps{ra}"]) / (rb - ra)


def soak_clock(fn, seconds: float = 1.0) -> dict:
    """Enqueue ~`seconds` of launches of fn (a few ms each), read nvidia-smi's SM clock and power half-way
    through, then wait: the clock the kernel actually runs at (the clock falls with the power drawn)."""
    import subprocess
    import time

    import cupy as cp

    fn()
    cp.cuda.Device().synchronize()
    t = time.perf_counter()
    fn()
    cp.cuda.Device().synchronize()
    n = max(1, int(seconds / max(time.perf_counter() - t, 1e-4)))
    for _ in range(n):
        fn()
    time.sleep(seconds / 2)
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active",
                            "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        q = f"nvidia-smi: {e}"
    cp.cuda.Device().synchronize()
    return {"smi_during_soak": q, "soak_launches": n}


def parse_configs(spec: list[str]) -> list[tuple[int, ...]]:
    """ "ZT,NWG[,NACC[,NBUF]]" (dy_conv2) or "s:R,NWG[,NRING[,NBUF]]" (dy_conv2s)."""
    out = []
    for s in spec:
        stream = s.startswith("s:")
        v = [int(t) for t in s.removeprefix("s:").split(",")]
        cfg = (v[0], v[1], v[2] if len(v) > 2 else (2 if stream else 6), v[3] if len(v) > 3 else 2)
        out.append(cfg + (1,) if stream else cfg)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", action="append", default=None, help=f"ZT,NWG[,NACC[,NBUF]] (default {DEFAULT_CONFIGS})")
    ap.add_argument("--offline", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--once", action="store_true", help="one launch of the first config (for ncu)")
    ap.add_argument("--no-baseline", action="store_true", help="do not time wg_conv2<16, 2> beside")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--mma-reps", default="1,3")
    ap.add_argument("--json", default=None)
    ap.add_argument("--soak", type=float, default=0.0, help="seconds of launches per kernel, nvidia-smi's clock read")
    args = ap.parse_args()
    configs = parse_configs(args.config or DEFAULT_CONFIGS)
    if args.offline:
        for c in configs:
            cubin, lowered, log = compile_cubin([kernel_name(*c)], verbose=True)
            info = [ln.strip() for ln in log.splitlines() if "registers" in ln or "spill" in ln or "C75" in ln]
            print(f"{kernel_name(*c)}: {len(cubin)} B cubin, shared {shared_bytes(*c)}, {positions(c)} positions a block")
            for ln in info:
                print("   ", ln)
        return
    failed = args.check and not check(configs)
    if args.once:  # one 4K frame's worth launch of the first config, --mma-reps' last count of passes (ncu)
        import cupy as cp

        c = configs[0]
        k = build(tuple(c))
        x, w2, b2 = wc.random_case(np.random.default_rng(1), *timing_frame(tuple(c)))
        out = cp.zeros((x.shape[0] - 4, x.shape[1] - 4, 32), np.float16)
        k(cp.asarray(x), cp.asarray(wc.pack_weights(w2)), cp.asarray(b2), out,
          blocks=math.ceil(wc.POSITIONS_4K / positions(c)), reps=int(args.mma_reps.split(",")[-1]), reload=0)
        cp.cuda.Device().synchronize()
    if args.time:
        mr = [int(v) for v in args.mma_reps.split(",")]
        rows = [time_config(c, args.reps, mr) for c in configs]
        if not args.no_baseline:
            rows.append(wc.time_config(16, 2, 1, args.reps, 0, mr))
            add_pairs(rows[-1], mr)
        if args.soak:
            import cupy as cp

            for c, row in zip(configs + ([None] if not args.no_baseline else []), rows):
                zt = 16 if c is None else c[0]
                k = wc.Conv2(16, 2, 1) if c is None else build(tuple(c))
                x, w2, b2 = wc.random_case(np.random.default_rng(1), *timing_frame(None if c is None else tuple(c)))
                dx, dw, db = cp.asarray(x), cp.asarray(wc.pack_weights(w2)), cp.asarray(b2)
                out = cp.zeros((x.shape[0] - 4, x.shape[1] - 4, 32), np.float16)
                blocks = math.ceil(wc.POSITIONS_4K / (16 * 32 if c is None else positions(c)))
                r1 = mr[-1]
                if c is None:
                    row.update(soak_clock(lambda: k(dx, dw, db, out, blocks=blocks, reps=r1, swap=0), args.soak))
                else:
                    row.update(soak_clock(lambda: k(dx, dw, db, out, blocks=blocks, reps=r1, reload=0), args.soak))
        for r in rows:
            print(json.dumps(r))
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
    if failed:
        raise SystemExit("reference check failed")


if __name__ == "__main__":
    main()
