#!/usr/bin/env python3
"""Ablations of the 9-1-5 ws fold tile (fused_tc.cu's tc_ws_block), by text patches on copies of a tree: which
part of the warp-specialised block holds the frame time. Each variant leaves out one piece of work and keeps the
rest (barrier protocol, registers, the other role) as it is; its output is wrong by design, only its time counts.

    python3 dev/cuda/ws_ablation.py make TREE OUTDIR          # OUTDIR/base, OUTDIR/<variant>: srgpu + dev copies
    # on the GPU machine, alternating:
    for v in base nosum ...; do (cd OUTDIR/$v && PYTHONPATH=$PWD python3 dev/cuda/ab_tiles.py --tree . --tile T); done

The patches match the tree as of the section "the ws tile's edge blocks" in BENCHMARKS.md (before it, those of
"the 9-1-5 ws tile's sum, its chain's job arithmetic and its Z layout") (the first ablations ran at a820cb8, before it, with the patches of that commit); on a later tree a
variant whose code has moved stops with the count of its matches.

Variants:
  base      the tree as it is
  nosum     the summing warps keep the mbarrier protocol and skip the sums and output stores
  zhalf     the chains store half of their Z values (planes 0-7 and 16-23 of each lane)
  arrfirst  the chain arrives on the ring group's "full" barrier before its Z stores, not after
  nolr      the chain skips the next job's LR loads (keeps the first job's A)
  nobias    conv1's and conv2's biases are constants, not shared-memory loads (every tile and block of the copy)
  nomma     the chain issues no MMAs (waits on empty groups)
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

WS_STORE = """__device__ __forceinline__ void ws_store_z(float* zrow, const float (&acc3)[16], int cq) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {"""
# the non-early chain (the offered nt 640 tile's), from its definition to the next one's comment
WS_CHAIN = ("__device__ void tc_wg_fold_ws(", "// tc_wg_fold_ws with 16 warps or fewer")
SCOPED = ("nomma", "arrfirst")  # patched in WS_CHAIN only: the other chains have the same lines
PATCHES: dict[str, list[tuple[str, str, int]]] = {
    "base": [],
    "nosum": [("for (int u0 = 0; u0 < 8; u0 += NWS) {", "for (int u0 = 0; u0 < 0; u0 += NWS) {", 1)],
    "zhalf": [(WS_STORE, WS_STORE.replace("j < 4", "j < 2"), 1)],
    "arrfirst": [("        mbar_arrive(ws_full<C>(bars, g));\n        if (!more) break;", "        if (!more) break;", 1),
                 ("        wg_wait_all();\n        float* zrow", "        wg_wait_all();\n        mbar_arrive(ws_full<C>(bars, g));\n        float* zrow", 1)],
    # not an ablation: nt 768 as 4 chain warpgroups (setmaxnreg 96) and 2 summing ones (setmaxnreg 40)
    "sum8": [("static constexpr int NPROD = (C::NW - 1) / 4,", "static constexpr int NPROD = C::NW == 24 ? 4 : (C::NW - 1) / 4,", 1),
             ("    if (wg_index() < WsCfg<C>::NPROD) {\n",
              "    if (wg_index() < WsCfg<C>::NPROD) {\n"
              "        if constexpr (C::NW == 24) asm volatile(\"setmaxnreg.inc.sync.aligned.u32 96;\\n\" ::: \"memory\");\n", 1),
             ("    } else\n        tc_ws_sum<C, false>(a, smw, Z, nz, nout, ncol, oy0, ox0, 0, 0);",
              "    } else {\n        if constexpr (C::NW == 24) asm volatile(\"setmaxnreg.dec.sync.aligned.u32 40;\\n\" ::: \"memory\");\n"
              "        tc_ws_sum<C, false>(a, smw, Z, nz, nout, ncol, oy0, ox0, 0, 0);\n    }", 1)],
    "nolr": [("if constexpr (STEP == 4) nxt.load_job(a1[0], 0, L, q + 1, py, px, 0, nz, d0, d1, warp, r0, cq);",
              "if constexpr (STEP == 4) { u32 dummy[4][4]; nxt.load_job(dummy, 0, L, q + 1, py, px, 0, nz, d0, d1, warp, r0, cq); }", 1)],
    "nobias": [("const float2 b = *reinterpret_cast<const float2*>(bias + 8 * j + 2 * cq);",
                "const float2 b = make_float2(0.01f * j, 0.02f * cq);", 3)],
    "nomma": [("tc_wg_gemm_rs_issue(acc1, a1, bw, 2048, 1024);\n        wg_wait_all();\n        u32 a2[1][4][4];",
               "for (int v = 0; v < 32; ++v) acc1[0][v] = __uint_as_float(a1[0][v & 3][v >> 3]);\n"
               "        wg_wait_all();\n        u32 a2[1][4][4];", 1),
              ("tc_wg_gemm_rs_issue(acc2, a2, bw, 1024, 512);\n        if (more) {",
               "for (int v = 0; v < 16; ++v) acc2[0][v] = __uint_as_float(a2[0][v & 3][v >> 2]);\n"
               "        if (more) {", 1),
              ("tc_wg_gemm_rs_issue(acc3, a3, bw, 1024, 512);\n",
               "for (int v = 0; v < 16; ++v) acc3[0][v] = __uint_as_float(a3[0][v & 1][v >> 2]);\n", 1)],
}


def make(tree: Path, out: Path) -> None:
    src = (tree / "srgpu" / "kernels" / "fused_tc.cu").read_text()
    for name, patches in PATCHES.items():
        text = src
        for old, new, count in patches:
            scoped = name in SCOPED
            a, b = (text.index(WS_CHAIN[0]), text.index(WS_CHAIN[1])) if scoped else (0, len(text))
            found = text[a:b].count(old)
            if found != count:
                sys.exit(f"{name}: {found} matches of a patch, expected {count}: {old[:60]!r}")
            text = text[:a] + text[a:b].replace(old, new) + text[b:]
        write_copy(tree, out / name, {"fused_tc.cu": text})


def write_copy(tree: Path, dst: Path, kernels: dict[str, str], parts: tuple[str, ...] = ("srgpu", "dev")) -> None:
    """dst (replaced): the tree's ``parts``, with srgpu/kernels' files of ``kernels`` (name -> text) replaced."""
    if dst.exists():
        shutil.rmtree(dst)
    for part in parts:
        shutil.copytree(tree / part, dst / part, ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in kernels.items():
        (dst / "srgpu" / "kernels" / name).write_text(text)
    print(dst)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "make":
        sys.exit(__doc__)
    make(Path(sys.argv[2]).resolve(), Path(sys.argv[3]).resolve())
