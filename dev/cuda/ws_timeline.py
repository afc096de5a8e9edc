#!/usr/bin/env python3
"""Where a ws fold tile's block time goes, per SM: a copy of the tree whose fused_tc stamps clock64 at the block's
start, after the input stage, at each producer warpgroup's end and each summing warp's end (edge blocks: start and
end), and a run that reads the stamps back and splits every SM's busy time into input stage, chain, drain (the sum
after the last producer), the gap between one block's end and the next block's start, and edge blocks.

    python3 dev/cuda/ws_timeline.py make TREE OUTDIR      # OUTDIR/trace: srgpu + dev, patched
    # on the GPU machine:
    cd OUTDIR/trace && PYTHONPATH=$PWD python3 dev/cuda/ws_timeline.py run --tile fp16-fast:9-1-5:th=66,...,ws=1

The stamps cost a few instructions per block and warp; the frame time printed beside them is the traced kernel's.
The patches match the tree as of the section "where a ws block's time goes" in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

TRACE_DEFS = """#include "fused_common.cu"
extern "C" __device__ unsigned long long ws_trace[16384 * 8];
__device__ __forceinline__ unsigned long long ws_clk() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t));
    return t;
}
__device__ __forceinline__ unsigned long long* ws_slot() {
    return ws_trace + 8 * ((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x);
}
__device__ __forceinline__ void ws_stamp_max(int i) {
    if ((threadIdx.x & 31) == 0) atomicMax(ws_slot() + i, ws_clk());
}
"""
PATCHES: list[tuple[str, str, int]] = [
    ('#include "fused_common.cu"\n', TRACE_DEFS, 1),
    # block start: SM, start clock
    ("    if (dynamic_smem_bytes() < C::TOTAL * 4u) __trap();\n",
     "    if (dynamic_smem_bytes() < C::TOTAL * 4u) __trap();\n"
     "    if (threadIdx.x == 0) { unsigned s; asm(\"mov.u32 %0, %%smid;\" : \"=r\"(s)); ws_slot()[0] = s; "
     "ws_slot()[1] = ws_clk(); }\n", 1),
    # fold blocks: after the input stage; each producer warp's end (max, min); each summing warp's end
    ("    float* Z = reinterpret_cast<float*>(smw + C::O_Z);\n    if (wg_index() < WsCfg<C>::NPROD) {\n",
     "    if (threadIdx.x == 0) { ws_slot()[2] = ws_clk(); ws_slot()[6] = 1; }\n"
     "    float* Z = reinterpret_cast<float*>(smw + C::O_Z);\n    if (wg_index() < WsCfg<C>::NPROD) {\n", 1),
    ("            tc_wg_fold_ws<C>(smw, Z, nz, fb.d0, fb.d1, fscale);\n",
     "            tc_wg_fold_ws<C>(smw, Z, nz, fb.d0, fb.d1, fscale);\n"
     "        ws_stamp_max(3);\n        if ((threadIdx.x & 31) == 0) atomicMin(ws_slot() + 4, ws_clk());\n", 1),
    ("        tc_ws_sum<C, false>(a, smw, Z, nz, nout, ncol, oy0, ox0, 0, 0);\n",
     "        { tc_ws_sum<C, false>(a, smw, Z, nz, nout, ncol, oy0, ox0, 0, 0); ws_stamp_max(5); }\n", 1),
    # edge blocks: each warp's end
    ("            tc_ws_edge_block<C, NT>(a, smw, weights, nz, nout, ncol, oy0, ox0, zvy, zvx);\n",
     "            { tc_ws_edge_block<C, NT>(a, smw, weights, nz, nout, ncol, oy0, ox0, zvy, zvx); ws_stamp_max(5); }\n", 1),
]


def make(tree: Path, out: Path) -> None:
    text = (tree / "srgpu" / "kernels" / "fused_tc.cu").read_text()
    for old, new, count in PATCHES:
        if text.count(old) != count:
            sys.exit(f"{text.count(old)} matches of a patch, expected {count}: {old[:70]!r}")
        text = text.replace(old, new)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ws_ablation import write_copy

    write_copy(tree, out / "trace", {"fused_tc.cu": text})


def run(spec: str, reps: int) -> None:
    import cupy as cp
    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ab_tiles import build_tile, image_like

    lr = cp.asarray(image_like((1080, 1920), seed=1))
    cfg, net = build_tile(spec)
    out = cp.empty((2160, 3840), np.uint8)
    for _ in range(3):
        net.run(lr, out.shape, 255, out=out)
    ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
    ev0.record()
    for _ in range(reps):
        net.run(lr, out.shape, 255, out=out)
    ev1.record()
    ev1.synchronize()
    ms = cp.cuda.get_elapsed_time(ev0, ev1) / reps
    fn = net.kernel.function
    mod = getattr(fn, "kernel", fn).module  # RawKernel (RawModule.get_function) or Function
    ptr = mod.get_global_var("ws_trace")
    n = 16384 * 8
    trace = cp.ndarray((n,), np.uint64, cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(ptr, n * 8, mod), 0))
    trace.fill(0)
    trace.reshape(-1, 8)[:, 4] = np.iinfo(np.uint64).max
    net.run(lr, out.shape, 255, out=out)
    cp.cuda.Device().synchronize()
    t = trace.get().reshape(-1, 8).astype(np.int64)
    t = t[t[:, 1] > 0]
    fold = t[:, 6] == 1
    print(f"{cfg.label}: {ms:.4f} ms per frame (traced kernel, mean of {reps}); {len(t)} blocks, {fold.sum()} fold")
    parts = {"input": 0, "chain": 0, "drain": 0, "edge": 0, "gap": 0}
    spans, waits = [], []
    for sm in np.unique(t[:, 0]):
        b = t[t[:, 0] == sm]
        b = b[np.argsort(b[:, 1])]
        end = np.where(b[:, 6] == 1, np.maximum(b[:, 3], b[:, 5]), b[:, 5])
        spans.append(end.max() - b[0, 1])
        for i, row in enumerate(b):
            if row[6] == 1:
                parts["input"] += row[2] - row[1]
                parts["chain"] += row[3] - row[2]
                parts["drain"] += max(0, row[5] - row[3])
                waits.append(row[3] - row[4])
            else:
                parts["edge"] += row[5] - row[1]
            if i + 1 < len(b):
                parts["gap"] += max(0, b[i + 1, 1] - end[i])
    total = sum(parts.values())
    print("share of SM busy time: " + ", ".join(f"{k} {100 * v / total:.1f} %" for k, v in parts.items()))
    nf, ne = fold.sum(), (~fold).sum()
    print(f"per fold block (clocks): input {parts['input'] / max(nf, 1):.0f}, chain {parts['chain'] / max(nf, 1):.0f}, "
          f"drain {parts['drain'] / max(nf, 1):.0f}; first to last producer end {statistics.mean(waits):.0f}; "
          f"per edge block {parts['edge'] / max(ne, 1):.0f}; per gap {parts['gap'] / max(len(t) - len(spans), 1):.0f}")
    print(f"SM span (clocks): min {min(spans)}, median {statistics.median(spans):.0f}, max {max(spans)}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make")
    mk.add_argument("tree")
    mk.add_argument("out")
    rn = sub.add_parser("run")
    rn.add_argument("--tile", action="append", required=True)
    rn.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    if args.cmd == "make":
        make(Path(args.tree).resolve(), Path(args.out).resolve())
    else:
        for spec in args.tile:
            run(spec, args.reps)
