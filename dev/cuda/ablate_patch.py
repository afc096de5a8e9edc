"""The phase ablation's ABLATE template argument and its guards, as text patches on a copy of srgpu's fused
kernel sources (srgpu's own kernels carry none of it since issue 41): dev/cuda/phase_ablation.py builds its
variants from the patched text.

Each patch is (text in srgpu's source, its replacement, how many times the text occurs, and optionally the
function whose body the replacement is confined to). A source whose text has moved stops the patching with the
count of matches (as dev/cuda/ws_ablation.py's patches do). Applied to the sources of issue 41's commit that took
the guards out, the patches give back the sources before it byte for byte (BENCHMARKS.md "Issue 41: the phase
ablation's guards out of the product"), so a variant with ABLATE 0 is the offered kernel.

ABLATE (fused_tc's and TcCfg's template argument after SPART, 0 by default) holds the ABL_* bits: phases removed,
so that timing a tile with one phase gone shows what that phase costs; the outputs of an ablated kernel are garbage.
"""

from __future__ import annotations

import re
from pathlib import Path

from srgpu.kernels.build import KERNEL_DIR

# the ABL_* bits of ABL_DEFINES (dev/tests/test_phase_ablation.py keeps them equal)
ABL = {"INPUT": 1, "CONV1": 2, "CONV2": 4, "ZGEMM": 8, "SUM": 16, "STORE": 32, "SYNC": 64, "STREAM": 128,
       "PHASE": 256}

ABL_DEFINES = """\
// ABLATE (fused_tc.cu's last template argument; set only by dev/cuda/phase_ablation.py, 0 in every
// kernel srgpu builds): phases removed, so that timing a tile with one phase gone shows what that
// phase costs. The outputs of an ablated kernel are garbage. INPUT, STREAM (and CONV1, CONV2, ZGEMM
// with PHASE) skip their work at run time behind a test the compiler cannot evaluate (fused_tc.cu
// tc_skip), so the code, registers and schedule stay those of the full kernel; CONV1, CONV2 and ZGEMM
// without PHASE predicate the phase's MMAs off (its fragment loads stay); SUM, STORE and SYNC are
// removed at compile time (Z stores to shared memory stay: what remains keeps its inputs).
#define ABL_INPUT 1    // no bicubic / LR tile into shared memory (one barrier kept)
#define ABL_CONV1 2    // no conv1 MMAs: conv1's accumulators stay at the bias (or 0)
#define ABL_CONV2 4    // no conv2 MMAs: conv2's accumulators stay at the bias
#define ABL_ZGEMM 8    // no conv3 32 -> 25 MMAs: the Z ring gets zeros
#define ABL_SUM 16     // no conv3 shifted sum, hence no global store
#define ABL_STORE 32   // the shifted sum, but its global store only under a test never true
#define ABL_SYNC 64    // no barriers at a chunk's end (fused_z_tail) or after conv1's A1 ring: races
#define ABL_STREAM 128 // STREAM: conv2's fragments are not copied from global (waits and barriers kept)
#define ABL_PHASE 256  // with CONV1 / CONV2 / ZGEMM: the whole phase branched around, fragment loads too
"""

MMA_IF = r"""// The same under a warp-uniform predicate (on != 0), for ABLATE's MMA bits: the operands and the
// accumulators keep their registers and dependencies whether or not the MMA runs.
__device__ __forceinline__ void mma16816_if(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1, u32 on) {
    asm("{ .reg .pred p;\n setp.ne.u32 p, %10, 0;\n"
        " @p mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n}"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(on));
}
"""

SKIPS = """\
// ABLATE's run-time skips (INPUT, STREAM; CONV1, CONV2, ZGEMM with PHASE) happen under a test the
// compiler cannot evaluate (a word of the weights that is always 0): the skipped code stays, with the
// registers and schedule of the kernel around it, and nothing that feeds it is optimised away; only its
// work is not done. `w`: the weights in shared memory (after the first barrier) or, with `global_`,
// the global array.
// TC_SKIP / TC_SKIP_PHASE / TC_MMA_ON: the same, written so that with the bit clear the front end folds
// the test away and emits no call (the kernels as offered keep their machine code: sass_compare.py).
#define TC_SKIP(C, BIT, ...) ((C::ABL & (BIT)) != 0 && tc_skip<C, BIT>(__VA_ARGS__))
#define TC_SKIP_PHASE(C, BIT, smw) ((C::ABL & (BIT)) != 0 && tc_skip_phase<C, BIT>(smw))
#define TC_MMA_ON(C, BIT, smw) ((C::ABL & (BIT)) != 0 ? tc_mma_on<C, BIT>(smw) : 1u)
template <class C, int BIT>
__device__ __forceinline__ bool tc_skip(const u32* w, bool global_ = false) {
    if constexpr ((C::ABL & BIT) == 0) return false;
    else return (global_ ? __ldg(w + C::G_ZERO) : w[C::O_ZERO]) == 0u;
}
// CONV1, CONV2, ZGEMM: with PHASE the whole phase is branched around (fragment loads too); without it
// only its MMAs are predicated off (tc_mma_on: the predicate, 0 when they are off): loads, registers
// and schedule as in the full kernel (the 9-1-5 fold tile, at its 128-register cap, spills when its
// phases are branched around).
template <class C, int BIT>
__device__ __forceinline__ bool tc_skip_phase(const u32* smw) {
    if constexpr ((C::ABL & ABL_PHASE) == 0) return false;
    else return tc_skip<C, BIT>(smw);
}
template <class C, int BIT>
__device__ __forceinline__ u32 tc_mma_on(const u32* smw) {
    if constexpr ((C::ABL & BIT) == 0 || (C::ABL & ABL_PHASE) != 0) {
        return 1u;
    } else {  // a volatile load where it is used: not hoisted, so no register holds it across the phase
        u32 v;
        asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(smem_u32(smw + C::O_ZERO)));
        return v;  // 0: off
    }
}
template <class C, int BIT>
__device__ __forceinline__ void tc_mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1, u32 on) {
    if constexpr ((C::ABL & BIT) != 0 && (C::ABL & ABL_PHASE) == 0) mma16816_if(d, a, b0, b1, on);
    else mma16816(d, a, b0, b1);
}
"""

# blocks of srgpu's source that a skip wraps (indented by 4 inside the guard)
FOLD_CONV1 = """\
        u32 a[2][MB][4];
        uint4 bh[2][4], bl[2][4];
        tc_fold_load<C, MB>(L, b0, Wp, 0, a[0], bh[0], bl[0]);
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            if (s + 1 < 4) tc_fold_load<C, MB>(L, b0, Wp, s + 1, a[(s + 1) & 1], bh[(s + 1) & 1], bl[(s + 1) & 1]);
            tc_mma_passes<C, MB, 4, 8, true>(acc, a[s & 1], a[s & 1], bh[s & 1], bl[s & 1]);
        }
"""
STREAM_COPY = """\
        const uint4* src = reinterpret_cast<const uint4*>(weights) + dy * (C::W2S / 4);
        uint4* dst = reinterpret_cast<uint4*>(smw + C::O_W2F);
        for (int i = threadIdx.x; i < C::NSPL * C::W2S / 4; i += NT) {
            const int copy = i / (C::W2S / 4), k = i - copy * (C::W2S / 4);
            dst[i] = __ldg(src + copy * (C::W2F / 4) + k);
        }
"""
BICUBIC = """\
        fused_bicubic(a, oy0 - C::HAL, C::Y0ROWS, ox0 - C::HAL, C::Y0W + 1,
                      a.first0[a.rows_first ? blockIdx.x : blockIdx.y], Z, [&](int r, int c, float v) {
                          // even-start copy: halves c; odd-start copy: halves c - 1 (pairs (c-1, c))
                          const unsigned short hh = f2h(v);
                          const int i = r * C::Y0W + c;
                          if (c < C::Y0W) Yh[i] = hh;
                          if (c >= 1) Yh[2 * C::PY + i - 1] = hh;
                          if (SPLIT) {
                              const unsigned short ll = f2h(v - h2f(hh));
                              if (c < C::Y0W) Yh[4 * C::PY + i] = ll;
                              if (c >= 1) Yh[6 * C::PY + i - 1] = ll;
                          }
                      });
"""


def _indent(block: str) -> str:
    return "".join(line if line.startswith("#") or not line.strip() else "    " + line
                   for line in block.splitlines(keepends=True))


Patch = tuple[str, str, int, str]  # (srgpu's text, replacement, occurrences, confined to this function or "")

KERNEL = "void __launch_bounds__(NT, MINB) fused_tc("
PATCHES: dict[str, list[Patch]] = {
    "fused_common.cu": [
        ("#define OUT_BICUBIC 4  // float32 bicubic only (checks the in-kernel bicubic bit for bit)\n\n",
         "#define OUT_BICUBIC 4  // float32 bicubic only (checks the in-kernel bicubic bit for bit)\n\n"
         + ABL_DEFINES + "\n", 1, ""),
        ("template <int CZ, int RW>\n__device__ void fused_conv3_rows(",
         "template <int CZ, int RW, int ABLATE = 0>\n__device__ void fused_conv3_rows(", 1, ""),
        ("        fused_store(a, oy0 + i, ox0 + j, v);\n",
         "        if constexpr ((ABLATE & ABL_STORE) != 0) {\n"
         "            if (v == -1.0e30f) fused_store(a, oy0 + i, ox0 + j, v);  // never true: the sum stays, the store goes\n"
         "        } else {\n"
         "            fused_store(a, oy0 + i, ox0 + j, v);\n"
         "        }\n", 1, "void fused_conv3_rows("),
        ("template <int CZ, int PZ, int RW>\n__device__ __forceinline__ int fused_z_tail(",
         "template <int CZ, int PZ, int RW, int ABLATE = 0>\n__device__ __forceinline__ int fused_z_tail(", 1, ""),
        ("    __syncthreads();\n", "    if constexpr ((ABLATE & ABL_SYNC) == 0) __syncthreads();\n", 2, "int fused_z_tail("),
        ("        fused_conv3_rows<CZ, RW>(a, Z, PZ, b3, out_done, o_t, ncol, oy0, ox0);\n",
         "        if constexpr ((ABLATE & ABL_SUM) == 0) fused_conv3_rows<CZ, RW, ABLATE>(a, Z, PZ, b3, out_done, o_t, ncol, "
         "oy0, ox0);\n", 1, ""),
    ],
    "fused_tc.cu": [
        ("__device__ __forceinline__ void ldsm_x4(", MMA_IF + "__device__ __forceinline__ void ldsm_x4(", 1, ""),
        # TcCfg: the argument, C::ABL, the zero word the skips test, ABLATE refused with WG
        ("// SPART (with STREAM): 0 streams",
         "// ABLATE: fused_common.cu's ABL_* bits (dev/cuda/phase_ablation.py only; 0 = the kernel as offered).\n"
         "// SPART (with STREAM): 0 streams", 1, ""),
        ("int SPART = 0,\n          bool WG = false>\nstruct TcCfg {\n    static constexpr bool SPLIT_ = SPLIT;\n"
         "    static constexpr bool WG_ = WG;\n",
         "int SPART = 0,\n          int ABLATE = 0, bool WG = false>\nstruct TcCfg {\n    static constexpr bool SPLIT_ = SPLIT;\n"
         "    static constexpr bool WG_ = WG;\n    static constexpr int ABL = ABLATE;\n", 1, ""),
        ("    static constexpr int TOTAL = O_Z + 25 * PZ;\n",
         "    static constexpr int TOTAL = O_Z + 25 * PZ;\n"
         "    // a word that is always 0 (b3's padding), in the global array and in shared memory: tc_skip's test\n"
         "    static constexpr int G_ZERO = G_W1F - 3, O_ZERO = O_B3 + 1;\n", 1, ""),
        ("(SPART == 1 || SPART == 2) && R % 8 == 0", "(SPART == 1 || SPART == 2) && ABLATE == 0 && R % 8 == 0", 1, ""),
        ("(FOLD && !SPLIT && !STREAM && RW == 64", "(FOLD && !SPLIT && !STREAM && ABLATE == 0 && RW == 64", 1, ""),
        ("};\n\n// Word offsets in the Y planes", "};\n\n" + SKIPS + "\n// Word offsets in the Y planes", 1, ""),
        # the MMA helpers: a phase bit and the predicate its MMAs run under
        ("template <class C, int MB, int NP, int NTILE, bool A_EXACT = false>\n",
         "template <class C, int MB, int NP, int NTILE, bool A_EXACT = false, int BIT = 0>\n", 1, ""),
        ("const uint4 (&bh)[NP], const uint4 (&bl)[NP]) {", "const uint4 (&bh)[NP], const uint4 (&bl)[NP], u32 on = 1u) {",
         1, ""),
        ("mma16816(acc[m]", "tc_mma<C, BIT>(acc[m]", 6, "void tc_mma_passes("),
        (".y);\n", ".y, on);\n", 3, "void tc_mma_passes("),
        (".w);\n", ".w, on);\n", 3, "void tc_mma_passes("),
        ("template <class C, int MB, int NTILE>\n__device__ __forceinline__ void tc_mma_k(",
         "template <class C, int MB, int NTILE, int BIT = 0>\n__device__ __forceinline__ void tc_mma_k(", 1, ""),
        ("const uint4* B, int lo_off) {", "const uint4* B, int lo_off, u32 on = 1u) {", 1, ""),
        ("    tc_mma_passes<C, MB, NTILE / 2, NTILE>(acc, ah, al, bh, bl);\n",
         "    tc_mma_passes<C, MB, NTILE / 2, NTILE, false, BIT>(acc, ah, al, bh, bl, on);\n", 1, ""),
        ("int lo_off, int lrow, int lhi) {", "int lo_off, int lrow, int lhi, u32 on = 1u) {", 1, ""),
        ("int lo_off, int t0, int lrow, int lhi) {", "int lo_off, int t0, int lrow, int lhi, u32 on = 1u) {", 1, ""),
        # conv1 (bicubic path)
        ("float (&acc)[MB][8][4], int lane) {\n    u32 ah[2][MB][4], al[2][MB][4];\n",
         "float (&acc)[MB][8][4], int lane) {\n"
         "    if (TC_SKIP_PHASE(C, ABL_CONV1, smw)) return;  // the accumulators keep the bias\n"
         "    u32 ah[2][MB][4], al[2][MB][4];\n", 1, ""),
        ("        tc_mma_passes<C, MB, 4, 8>(acc, ah[s & 1], al[s & 1], bh[s & 1], bl[s & 1]);\n",
         "        tc_mma_passes<C, MB, 4, 8, false, ABL_CONV1>(acc, ah[s & 1], al[s & 1], bh[s & 1], bl[s & 1],\n"
         "                                                     TC_MMA_ON(C, ABL_CONV1, smw));\n", 1, ""),
        # the Z GEMM and f2 = 1's conv2
        ("        u32 ah[MB][4], al[MB][4];\n        tc_to_a<C, MB, 4>(acc2, k, ah, al);\n"
         "        tc_mma_k<C, MB, 4>(acc3, ah, al, W3 + k * 2 * 32, C::W3F / 4);\n",
         "        if (TC_SKIP_PHASE(C, ABL_ZGEMM, smw)) break;\n"
         "        u32 ah[MB][4], al[MB][4];\n        tc_to_a<C, MB, 4>(acc2, k, ah, al);\n"
         "        tc_mma_k<C, MB, 4, ABL_ZGEMM>(acc3, ah, al, W3 + k * 2 * 32, C::W3F / 4, TC_MMA_ON(C, ABL_ZGEMM, smw));\n",
         1, ""),
        ("        u32 ah[MB][4], al[MB][4];\n        tc_to_a<C, MB, 8>(acc, k, ah, al);\n"
         "        tc_mma_k<C, MB, 4>(acc2, ah, al, W2 + k * 2 * 32, C::W2F / 4);\n",
         "        if (TC_SKIP_PHASE(C, ABL_CONV2, smw)) break;\n"
         "        u32 ah[MB][4], al[MB][4];\n        tc_to_a<C, MB, 8>(acc, k, ah, al);\n"
         "        tc_mma_k<C, MB, 4, ABL_CONV2>(acc2, ah, al, W2 + k * 2 * 32, C::W2F / 4, TC_MMA_ON(C, ABL_CONV2, smw));\n",
         1, ""),
        # conv1 of the f2 = 1 fold chain
        (FOLD_CONV1, "        if (!TC_SKIP_PHASE(C, ABL_CONV1, smw)) {\n" + _indent(FOLD_CONV1) + "        }\n", 1,
         "void tc_chain_z_fold("),
        ("                tc_mma_passes<C, MB, 4, 8, true>(acc, a[s & 1], a[s & 1], bh[s & 1], bl[s & 1]);\n",
         "                tc_mma_passes<C, MB, 4, 8, true, ABL_CONV1>(acc, a[s & 1], a[s & 1], bh[s & 1], bl[s & 1],\n"
         "                                                            TC_MMA_ON(C, ABL_CONV1, smw));\n", 1,
         "void tc_chain_z_fold("),
        # conv2 on the A1 ring: all taps in shared memory, streamed a tap row at a time, streamed in parts
        ("        tc_mma_passes<C, MB, 2, 4>(acc2, ah[t & 1], al[t & 1], bh[t & 1], bl[t & 1]);\n",
         "        tc_mma_passes<C, MB, 2, 4, false, ABL_CONV2>(acc2, ah[t & 1], al[t & 1], bh[t & 1], bl[t & 1], on);\n", 1, ""),
        ("        for (int dy = 0; dy < F2; ++dy) {\n            u32 row[MB];\n",
         "        for (int dy = 0; dy < F2; ++dy) {\n            if (TC_SKIP_PHASE(C, ABL_CONV2, smw)) break;\n"
         "            u32 row[MB];\n", 1, ""),
        ("            tc_conv2_tap_row<C, F2, MB>(acc2, row, W2 + dy * F2 * 8 * 32, C::W2F / 4, lrow, lhi);\n",
         "            tc_conv2_tap_row<C, F2, MB>(acc2, row, W2 + dy * F2 * 8 * 32, C::W2F / 4, lrow, lhi,\n"
         "                                        TC_MMA_ON(C, ABL_CONV2, smw));\n", 1, ""),
        (STREAM_COPY, "        if (!TC_SKIP(C, ABL_STREAM, smw)) {\n" + _indent(STREAM_COPY) + "        }\n", 1, ""),
        ("            if (warp + jj * C::NW >= njobs) continue;  // warp-uniform\n",
         "            if (warp + jj * C::NW >= njobs) continue;  // warp-uniform\n"
         "            if (TC_SKIP_PHASE(C, ABL_CONV2, smw)) continue;\n", 2, ""),
        ("            tc_conv2_tap_row<C, F2, MB>(acc2[jj], row, W2, C::W2S / 4, lrow, lhi);\n",
         "            tc_conv2_tap_row<C, F2, MB>(acc2[jj], row, W2, C::W2S / 4, lrow, lhi, TC_MMA_ON(C, ABL_CONV2, smw));\n",
         1, ""),
        ("    constexpr int NU = C::SPART_, UQ = C::W2U / 4;  // uint4 per part and copy\n",
         "    constexpr int NU = C::SPART_, UQ = C::W2U / 4;  // uint4 per part and copy\n"
         "    if (TC_SKIP(C, ABL_STREAM, weights, true)) return;  // the global array: part 0 goes before any barrier\n",
         1, ""),
        ("        tc_mma_passes<C, MB, 2, 4>(acc2, ah[i & 1], al[i & 1], bh[i & 1], bl[i & 1]);\n",
         "        tc_mma_passes<C, MB, 2, 4, false, ABL_CONV2>(acc2, ah[i & 1], al[i & 1], bh[i & 1], bl[i & 1], on);\n", 1, ""),
        ("            tc_conv2_tap_steps<C, TU, MB>(acc2[jj], row, Wu, C::W2U / 4, t0, lrow, lhi);\n",
         "            tc_conv2_tap_steps<C, TU, MB>(acc2[jj], row, Wu, C::W2U / 4, t0, lrow, lhi, TC_MMA_ON(C, ABL_CONV2, smw));\n",
         1, ""),
        # the kernel and its layout kernel
        ("leaves room for (__launch_bounds__); SPART: TcCfg.", "leaves room for (__launch_bounds__); SPART, ABLATE: TcCfg.",
         1, ""),
        ("          int SPART = 0, bool WG = false, bool WS = false>\n",
         "          int SPART = 0, int ABLATE = 0, bool WG = false, bool WS = false>\n", 2, ""),
        (", SPART, WG> C;", ", SPART, ABLATE, WG> C;", 1, KERNEL),
        ("        tc_load_lr<C, NT>(a, smw, fb.ly0, fb.lx0);\n",
         "        if (TC_SKIP(C, ABL_INPUT, weights, true))\n"
         "            __syncthreads();  // the weights' copy, as the input stage's last barrier\n"
         "        else\n"
         "            tc_load_lr<C, NT>(a, smw, fb.ly0, fb.lx0);\n", 1, KERNEL),
        (BICUBIC, "        if (TC_SKIP(C, ABL_INPUT, weights, true)) {\n"
                  "            __syncthreads();  // as above (the tap offsets are still needed: conv1 reads shared memory by "
                  "them)\n"
                  "        } else {\n" + _indent(BICUBIC) + "        }\n", 1, KERNEL),
        ("                __syncthreads();\n                tc_fixup_a1<C>(A1, a1_done",
         "                if constexpr ((ABLATE & ABL_SYNC) == 0) __syncthreads();\n                tc_fixup_a1<C>(A1, a1_done",
         1, KERNEL),
        ("fused_z_tail<C::CZ, C::PZ, RW>(", "fused_z_tail<C::CZ, C::PZ, RW, ABLATE>(", 1, KERNEL),
        ("__global__ void fused_tc_layout(int* out) {  // MINB and WS move nothing: the same arguments as fused_tc\n",
         "__global__ void fused_tc_layout(int* out) {  // ABLATE moves nothing: the layout of the kernel as offered "
         "(WG, WS neither)\n", 1, ""),
        (", SPART, WG> C;", ", SPART, 0, WG> C;", 1, "void fused_tc_layout("),
    ],
    # the row-streamed tile's config reads tc_conv1, whose guard asks it for ABL and O_ZERO
    "fused_rows.cu": [
        ("    static constexpr bool WG_ = true;\n", "    static constexpr bool WG_ = true;\n    static constexpr int ABL = 0;\n",
         1, ""),
        ("    static constexpr int MB1_ = 1;\n", "    static constexpr int O_ZERO = O_B3 + 1;\n    static constexpr int MB1_ = 1;\n",
         1, ""),
    ],
}


def _span(text: str, within: str) -> tuple[int, int]:
    """The part of ``text`` a patch may touch: all of it, or from ``within`` to the end of that function."""
    if not within:
        return 0, len(text)
    if text.count(within) != 1:
        raise ValueError(f"{text.count(within)} functions {within!r}, expected 1")
    a = text.index(within)
    return a, text.index("\n}\n", a) + 3


def apply(name: str, text: str, patches: list[Patch], reverse: bool = False) -> str:
    """``text`` with ``patches`` applied (``reverse``: undone, last first); raises ValueError naming a patch whose text
    does not occur as often as it says."""
    for old, new, count, within in (reversed(patches) if reverse else patches):
        if reverse:
            old, new = new, old
        a, b = _span(text, within)
        found = text[a:b].count(old)
        if found != count:
            raise ValueError(f"{name}: {found} matches of a patch, expected {count}"
                             f"{f' in {within}' if within else ''}: {old[:70]!r}")
        text = text[:a] + text[a:b].replace(old, new) + text[b:]
    return text


def ablated_sources(kernel_dir: Path = KERNEL_DIR) -> dict[str, str]:
    """File name -> text of each patched source of ``kernel_dir`` (srgpu's by default)."""
    return {name: apply(name, (kernel_dir / name).read_text(), patches) for name, patches in PATCHES.items()}


_INCLUDE = re.compile(r'^\s*#include\s+"([A-Za-z0-9_.]+)"\s*$', re.MULTILINE)


def ablated_code(source: str, kernel_dir: Path = KERNEL_DIR) -> str:
    """What NVRTC compiles for ``source`` with the guards: as srgpu.kernels.build.load_source (project headers
    inlined, each once), from the patched texts."""
    texts = ablated_sources(kernel_dir)
    seen: set[str] = set()

    def expand(name: str) -> str:
        if name in seen:
            return ""
        seen.add(name)
        text = texts[name] if name in texts else (kernel_dir / name).read_text()
        return _INCLUDE.sub(lambda m: expand(m.group(1)), text)

    return expand(source)
