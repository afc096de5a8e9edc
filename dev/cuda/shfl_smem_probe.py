#!/usr/bin/env python3
"""Do warp shuffles draw on the shared-memory bandwidth that LDS and wgmma's operand reads use?
(dev/cuda/shfl_smem_probe.cu; one block per SM, warps in roles, every role runs to the same SM-clock
deadline, rates per SM clock, averaged over the blocks.)

    python3 dev/cuda/shfl_smem_probe.py --offline      # NVRTC sm_90a build only: registers, spills
    python3 dev/cuda/shfl_smem_probe.py [--cycles 4000000] [--json out.json]   # GPU: the probe table

Rates: LDS in bytes/clk/SM (LDS.128 warp instructions x 512 B), SHFL in warp shuffles/clk/SM (x 128 B
for the bytes a 32 x 4 B exchange moves), MMAs in clocks per m64n32k16 per SM (16 = the tensor pipe's
dense fp16 rate, 2048 MAC/clk/SM) and TFLOP/s at the clock measured from CUDA events.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # dev/ lies beside the package
from dev.cuda import nvrtc_sm90a  # noqa: E402
SOURCE = HERE / "shfl_smem_probe.cu"
OPTIONS = ("-std=c++17", "-arch=sm_90a")
NROLE = 6
ROLES = ("mma", "lds", "shfl", "mix_lds", "mix_shfl", "inw_shfl")  # inw_shfl: SHFL or ldmatrix by the MMA warps
P = 36
G = (20 * P * 16 + 127) // 128 * 128 + 16
TOTAL = 25 * 8 * 512 + 8 * G
KERNELS = {"ss": "probe<0, 0>", "rs": "probe<1, 0>", "rs_inw": "probe<1, 1>", "ss_inw": "probe<0, 1>",
           "rs_sh1": "probe<1, 2>", "rs_ldsm": "probe<1, 3>", "rs_ldsm5": "probe<1, 4>", "ss_ldsm": "probe<0, 3>"}
INW_BYTES = {"ss_inw": 128, "rs_inw": 128, "rs_sh1": 128, "rs_ldsm": 512, "rs_ldsm5": 512, "ss_ldsm": 512}

# (label, kernel, nmma warpgroups, LDS warps, SHFL warps, MIX warps)
CASES = [
    ("a: LDS x4 warps", "ss", 0, 4, 0, 0),
    ("a: LDS x8", "ss", 0, 8, 0, 0),
    ("a: LDS x16", "ss", 0, 16, 0, 0),
    ("b: SHFL x4", "ss", 0, 0, 4, 0),
    ("b: SHFL x8", "ss", 0, 0, 8, 0),
    ("b: SHFL x16", "ss", 0, 0, 16, 0),
    ("c: LDS x8 + SHFL x8 (separate warps)", "ss", 0, 8, 8, 0),
    ("c: LDS x4 + SHFL x12 (separate warps)", "ss", 0, 4, 12, 0),
    ("c: MIX x8 (1 LDS.128 : 4 SHFL in each warp)", "ss", 0, 0, 0, 8),
    ("c: MIX x16", "ss", 0, 0, 0, 16),
    ("d: SS MMA 2 wg", "ss", 2, 0, 0, 0),
    ("d: SS MMA 1 wg", "ss", 1, 0, 0, 0),
    ("d: SS MMA 2 wg + SHFL x4", "ss", 2, 0, 4, 0),
    ("d: SS MMA 2 wg + SHFL x8", "ss", 2, 0, 8, 0),
    ("d: SS MMA 2 wg + LDS x4", "ss", 2, 4, 0, 0),
    ("d: SS MMA 2 wg + LDS x8", "ss", 2, 8, 0, 0),
    ("d: SS MMA 2 wg, 4 SHFL/MMA in the MMA warps", "ss_inw", 2, 0, 0, 0),
    ("e: RS MMA 2 wg", "rs", 2, 0, 0, 0),
    ("e: RS MMA 1 wg", "rs", 1, 0, 0, 0),
    ("e: RS MMA 2 wg + SHFL x4", "rs", 2, 0, 4, 0),
    ("e: RS MMA 2 wg + SHFL x8", "rs", 2, 0, 8, 0),
    ("e: RS MMA 2 wg + LDS x4", "rs", 2, 4, 0, 0),
    ("e: RS MMA 2 wg + LDS x8", "rs", 2, 8, 0, 0),
    ("e: RS MMA 2 wg, 4 SHFL/MMA in the MMA warps", "rs_inw", 2, 0, 0, 0),
    ("e: RS MMA 1 wg, 4 SHFL/MMA in the MMA warps", "rs_inw", 1, 0, 0, 0),
    ("e: RS MMA 2 wg, 1 SHFL/MMA in the MMA warps", "rs_sh1", 2, 0, 0, 0),
    ("e: RS MMA 2 wg, 1 ldmatrix.x4/MMA in the MMA warps", "rs_ldsm", 2, 0, 0, 0),
    ("e: RS MMA 2 wg, 1 ldmatrix.x4 per 5 MMAs in the MMA warps", "rs_ldsm5", 2, 0, 0, 0),
    ("d: SS MMA 2 wg, 1 ldmatrix.x4/MMA in the MMA warps", "ss_ldsm", 2, 0, 0, 0),
]


def compile_cubin(names: list[str]) -> tuple[bytes, dict[str, str]]:
    cubin, lowered, _ = nvrtc_sm90a.compile_cubin(SOURCE, names, OPTIONS)
    return cubin, lowered

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--offline", action="store_true")
    ap.add_argument("--cycles", type=int, default=4_000_000, help="SM clocks each launch runs")
    ap.add_argument("--runs", type=int, default=3, help="launches per case (the median is shown)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    cubin, lowered = compile_cubin(list(KERNELS.values()))
    if args.offline:
        print(f"NVRTC sm_90a: {len(cubin)} bytes of cubin, {lowered}")
        return
    import cupy as cp
    import cupy_backends.cuda.api.driver as drv

    module = cp.cuda.function.Module()
    module.load(cubin)
    fns = {}
    for key, name in KERNELS.items():
        fn = module.get_function(lowered[name])
        drv.funcSetAttribute(fn.ptr, drv.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, TOTAL)
        regs = drv.funcGetAttribute(drv.CU_FUNC_ATTRIBUTE_NUM_REGS, fn.ptr)
        local = drv.funcGetAttribute(drv.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn.ptr)
        print(f"{name}: {regs} regs, {local} local bytes, {TOTAL} B dynamic shared")
        fns[key] = fn
    dev = cp.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    print(f"device: {cp.cuda.runtime.getDeviceProperties(dev.id)['name'].decode()}, {sms} SMs")
    out = cp.zeros((sms, NROLE, 2), np.uint64)
    sink = cp.zeros(sms, np.uint32)
    rows = []
    for label, kern, nmma, nlds, nshfl, nmix in CASES:
        threads = 32 * (4 * nmma + nlds + nshfl + nmix)
        assert threads <= 512, "__launch_bounds__(512, 1)"
        runs = []
        for r in range(args.runs + 1):  # the first launch is a warm-up
            out.fill(0)
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            fns[kern]((sms,), (threads,), (np.int32(nmma), np.int32(nlds), np.int32(nshfl), np.int32(nmix),
                                           np.int64(args.cycles), out, sink), shared_mem=TOTAL)
            e1.record()
            e1.synchronize()
            ms = cp.cuda.get_elapsed_time(e0, e1)
            o = out.get().astype(np.float64)
            if r == 0:
                continue
            res = {"ms": ms}
            spans = []
            for k, role in enumerate(ROLES):
                ops, cyc = o[:, k, 0], o[:, k, 1]
                if ops.sum() == 0:
                    continue
                res[role] = float(np.mean(ops / cyc))  # per clock per SM
                spans.append(float(cyc.max()))
            res["ghz"] = max(spans) / (ms * 1e6)  # launch overhead included: a lower bound
            runs.append(res)
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        row = {"case": label, "kernel": KERNELS[kern], "threads": threads, **med}
        if "mma" in med:
            row["clk_per_mma"] = 1.0 / med["mma"]
            row["mma_tflops"] = med["mma"] * 64 * 32 * 16 * 2 * sms * med["ghz"] * 1e9 / 1e12
            row["mma_smem_B_per_clk"] = med["mma"] * (1024 + (2048 if kern.startswith("ss") else 0))
        if "lds" in med:
            row["lds_B_per_clk"] = med["lds"] * 512
        if "shfl" in med:
            row["shfl_B_per_clk"] = med["shfl"] * 128
        if "mix_lds" in med:
            row["mix_B_per_clk"] = med["mix_lds"] * 512 + med["mix_shfl"] * 128
        if "inw_shfl" in med:
            row["inw_B_per_clk"] = med["inw_shfl"] * INW_BYTES[kern]
        rows.append(row)
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
