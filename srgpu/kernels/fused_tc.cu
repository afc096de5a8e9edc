// Fused SRCNN on the tensor cores: fp16 operands, fp32 accumulation, inline PTX mma.sync
// m16n8k16 (+ ldmatrix), no WMMA header. Tile walk, ring buffers and borders: fused_common.cu.
//
// Every layer is a GEMM with M = 16 positions per MMA block:
//   conv1: K = 81 taps as 45 pairs of horizontally adjacent taps (a 10th, zero-weight tap per row),
//          padded to 96; A fragments are 32-bit loads from the bicubic tile kept as fp16 in two
//          copies (pairs starting at even / odd columns), N = 64 channels.
//   conv2: F2 == 1: the conv1 accumulators ARE the A fragments of conv2 (m16n8 C layout = m16k16 A
//          layout), K = 64, N = 32, all in registers. F2 > 1: conv1 writes an fp16 ring of A1
//          rows (one 128-byte record per position, 16-byte chunks XOR-swizzled by column) and conv2
//          loads A with ldmatrix, K = 64 per tap, F2 x F2 taps.
//   conv3: Z[p][d] = sum_c A2[p][c] W3[c][d], K = 32, N = 25 taps (padded to 32), again straight
//          from the conv2 accumulators; then the shifted sum of fused_common.cu in fp32.
// WG (F2 == 5, fp16-fast, sm_90a only): conv2 on Hopper's warpgroup MMA instead, A1 and conv2's weights
//   read by the tensor cores from shared memory by descriptor (the WG section below). WG with FOLD (F2 == 1):
//   the fold blocks' conv1, conv2 and Z GEMM on the warpgroup MMA with A from registers, B by descriptor
//   (tc_wg_fold_z); the edge blocks keep mma.sync, except in the WS tiles (warps specialised: a chain and a sum role
//   per block, tc_ws_block; their edge blocks run the bicubic path's conv1 on the warpgroup MMA too, tc_ws_edge_block).
//   WG with FOLD (F2 == 5): the fold blocks' conv1 reads the LR
//   samples (mma.sync, tc_conv1_ring_fold) and writes the A1 window that conv2's wgmma reads, for each chunk's rows
//   and conv2's halo; the edge blocks keep the bicubic.
// FOLD (F2 == 1, x2 with integer samples): blocks whose Z region lies in the frame's interior skip
//   the bicubic: conv1 reads the LR samples themselves through the four phase filters of
//   srgpu/kernels/fold.py (8 x 8 LR taps = K 64, no padding). Samples of up to 11 bits are exact
//   in fp16, so only the weights need the hi/lo split: two MMAs per product, not three. An MMA
//   block is 16 positions of one row and one column phase (every other column); the weights are
//   scaled by 2^e so their lo halves stay normal fp16, and acc * (2^-e / max_value) + b1 undoes it.
//   Blocks at the frame's edges take the bicubic path.
// SPLIT: each fp16 operand x is carried as hi = fp16(x) and lo = fp16(x - hi) and every product
// as hi*hi + hi*lo + lo*hi (three MMAs), which keeps about 22 bits: the output matches the fp32
// network to ~1e-6, where plain fp16 operands (SPLIT = false) are off by ~5e-4 (a few % of 8-bit
// pixels one level apart).
#include "fused_common.cu"

// --- PTX helpers begin
__device__ __forceinline__ u32 pack_h2(float lo, float hi) {
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
__device__ __forceinline__ void unpack_h2(u32 v, float& lo, float& hi) {
    asm("{.reg .f16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;}"
        : "=f"(lo), "=f"(hi) : "r"(v));
}
__device__ __forceinline__ unsigned short f2h(float v) {
    unsigned short r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(v));
    return r;
}
__device__ __forceinline__ float h2f(unsigned short v) {
    float r;
    asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(v));
    return r;
}
// ReLU(x0), ReLU(x1) as packed fp16 in one instruction (F2FP.RELU; fmaxf + cvt is three).
__device__ __forceinline__ u32 pack_h2_relu(float lo, float hi) {
    u32 r;
    asm("cvt.rn.relu.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
// (x0, x1) -> packed fp16 hi and, with SPLIT, the packed residual lo.
template <bool SPLIT>
__device__ __forceinline__ void split2(float x0, float x1, u32& hi, u32& lo) {
    hi = pack_h2(x0, x1);
    if (SPLIT) {
        float f0, f1;
        unpack_h2(hi, f0, f1);
        lo = pack_h2(x0 - f0, x1 - f1);
    } else {
        lo = 0u;
    }
}
// split2 of (ReLU(x0), ReLU(x1)).
template <bool SPLIT>
__device__ __forceinline__ void relu_split2(float x0, float x1, u32& hi, u32& lo) {
    if (SPLIT) {
        split2<true>(fmaxf(x0, 0.f), fmaxf(x1, 0.f), hi, lo);
    } else {
        hi = pack_h2_relu(x0, x1);
        lo = 0u;
    }
}
__device__ __forceinline__ void mma16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void ldsm_x4(u32 (&r)[4], u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ u32 smem_u32(const void* p) {
    u32 r;
    asm("{ .reg .u64 t;\n cvta.to.shared.u64 t, %1;\n cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}

// cp.async of 16 bytes global -> shared (sm_80+, .cg: through L2 only); wait_all = commit + wait for all.
__device__ __forceinline__ void cp_async16(u32 dst, const void* src) {
    asm volatile("{ .reg .u64 g;\n cvta.to.global.u64 g, %1;\n cp.async.cg.shared.global [%0], [g], 16; }"
                 :: "r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// --- PTX helpers end

// SPART (with STREAM): 0 streams conv2's fragments a tap row at a time through one buffer (load,
// barrier, MMAs); SPART = p > 0 streams each tap row in p parts through two buffers, the next part
// arriving by cp.async while the MMAs of the current one run (tc_conv2_ring_z_pipe).
template <int F2, bool SPLIT, int TH, int RW, int R, int NT, int MB1, int MB2, bool FOLD, bool STREAM, int SPART = 0,
          bool WG = false>
struct TcCfg {
    static constexpr bool SPLIT_ = SPLIT;
    static constexpr bool WG_ = WG;
    static constexpr int SPART_ = SPART;
    static constexpr int RW_ = RW, R_ = R, MB1_ = MB1, MB2_ = MB2, NW = NT / 32;
    static constexpr int H2 = F2 / 2;
    static constexpr int HAL = 6 + H2;
    static constexpr int TW = RW - 4;
    static constexpr int RW1 = RW + 2 * H2;
    static constexpr int Y0ROWS = TH + 2 * HAL;
    static constexpr int Y0W = (RW1 + 10 + 3) / 4 * 4;  // halves per row: 8 taps + the zero 10th + 1
    static constexpr int Y0WW = Y0W / 2;                 // 32-bit words per row
    static constexpr int PY0 = Y0ROWS * Y0WW;
    static constexpr int PY = PY0 + (48 - PY0 % 32) % 32;  // plane stride = 16 (mod 32) words
    static constexpr int NSPL = SPLIT ? 2 : 1;
    static constexpr int CZ = R + 4;
    static constexpr int PZ = (CZ * RW + 31) / 32 * 32 + 4;
    static constexpr int C1 = R + 2 * H2;
    static constexpr int A1W = C1 * RW1 * 32;  // words per copy (hi / lo) of the A1 ring
    static constexpr int W1F = 6 * 4 * 32 * 4;  // B fragments, words per copy
    static constexpr int W2F = F2 * F2 * 4 * 2 * 32 * 4;
    static constexpr int W2S = F2 * 4 * 2 * 32 * 4;   // one tap row (dy) of W2F, words per copy
    static constexpr int W2U = SPART ? W2S / SPART : W2S;  // one streamed part of a tap row, words per copy
    // WG with SPART > 1: three buffers, so a part's MMAs may still run while the part after next arrives
    static constexpr int W2NBUF = WG && SPART > 1 ? 3 : 2;
    static constexpr int W2SM = STREAM ? (SPART ? W2NBUF * W2U : W2S) : W2F;  // conv2 words per copy in shared memory
    static constexpr int W3F = 2 * 2 * 32 * 4;
    // fold path: per phase (py * 2 + px) and copy, conv1's B fragments for K = 64 LR taps
    static constexpr int W1P = 4 * 4 * 32 * 4;
    // LR rows and 32-bit words per row (pairs) of the tile: for conv1's region, the Z region (F2 == 1) or the A1
    // window's rows and RW1 columns (F2 > 1)
    static constexpr int LRR = (TH + 3 + 2 * H2) / 2 + 9;
    static constexpr int LRWW = (RW1 + 3) / 4 + 5;
    static constexpr int PLR0 = LRR * LRWW;
    static constexpr int PLR = PLR0 + (48 - PLR0 % 32) % 32;  // = 16 (mod 32): the two copies on other banks
    // the packed global array: [W2F hi (lo) | W3F hi (lo) | b1 | b2 | b3 0 0 0 | W1F hi (lo) | W1P (FOLD):
    // phase 0 hi (lo), phase 1 ...]
    static constexpr int G_W3F = NSPL * W2F;
    static constexpr int G_W1F = G_W3F + NSPL * W3F + 100;
    static constexpr int G_W1P = G_W1F + NSPL * W1F;
    // WG with FOLD (tc_wg_fold_z): the phase matrices in wgmma's layout instead of fragments, then conv2's and the
    // Z GEMM's weights once more in wgmma's layout (the edge blocks keep the fragments above)
    static constexpr bool WGF = WG && FOLD && F2 == 1;
    static constexpr int G_W2G = G_W1P + 4 * NSPL * W1P;
    static constexpr int G_W3G = G_W2G + W2F;
    // and conv1's (96 x 64, conv1_matrix) in that layout too, for a WS kernel's edge blocks (tc_ws_edge_block)
    static constexpr int W1G = 96 * 64 / 2;
    static constexpr int G_W1G = G_W3G + W3F;
    static constexpr int PACKED = FOLD ? (WGF ? G_W1G + W1G : G_W2G) : G_W1P;
    // shared memory, 32-bit words: conv2's fragments (all, or with STREAM the tap row being used),
    // the W3F..b3 part of the global array, then the bicubic path's conv1 fragments and Y planes, or
    // the fold path's phase fragments and LR planes
    static constexpr int O_W2F = 0;
    static constexpr int O_W3F = O_W2F + NSPL * W2SM;
    static constexpr int O_B1 = O_W3F + NSPL * W3F;
    static constexpr int O_B2 = O_B1 + 64;
    static constexpr int O_B3 = O_B2 + 32;
    static constexpr int O_W1F = O_B3 + 4;
    static constexpr int O_Y = O_W1F + NSPL * W1F;  // planes: E hi, O hi [, E lo, O lo]
    static constexpr int O_W1P = O_W1F;
    static constexpr int O_W2G = O_W1P + 4 * NSPL * W1P;  // WGF: as the global array from G_W1P on
    static constexpr int O_W3G = O_W2G + W2F;
    static constexpr int O_LR = WGF ? O_W3G + W3F : O_W2G;  // planes: E, O (samples are exact: no lo)
    static constexpr int END_LR = FOLD ? O_LR + 2 * PLR : 0;
    // the A1 ring (window) after both paths' inputs: FOLD with F2 > 1 (WG) writes it from the LR planes too
    static constexpr int O_A1 = FOLD && F2 > 1 && END_LR > O_Y + 2 * NSPL * PY ? END_LR : O_Y + 2 * NSPL * PY;
    static constexpr int END_BIC = O_A1 + (F2 > 1 ? NSPL * A1W : 0);
    static constexpr int END_FOLD = FOLD && F2 > 1 ? END_BIC : END_LR;
    static constexpr int O_Z = END_BIC > END_FOLD ? END_BIC : END_FOLD;
    static constexpr int TOTAL = O_Z + 25 * PZ;
    static_assert(RW % 16 == 0, "RW must be a multiple of 16");
    static_assert(R >= 4, "R must be at least 4");
    static_assert(O_Y % 4 == 0 && O_A1 % 4 == 0 && O_W1F % 4 == 0 && O_LR % 4 == 0 && O_W2G % 4 == 0, "16-byte alignment");
    static_assert(!FOLD || (TH % 2 == 0 && (F2 == 1 ? RW % 32 == 0 && (RW / 32) % MB1 == 0 : WG && RW1 % 2 == 0)),
                  "FOLD: even TH; f2 == 1: RW a multiple of 32 (two MB1-block groups per phase); f2 > 1: WG");
    static_assert(!STREAM || F2 > 1, "STREAM: conv2 with taps (f2 > 1)");
    static_assert(SPART == 0 || (STREAM && SPART > 0 && (F2 * 4) % SPART == 0),
                  "SPART: a streamed conv2, each tap row's F2 * 4 K-steps in SPART equal parts");
    static_assert(G_W1F - G_W3F == O_W1F - O_W3F, "the W3F..b3 part is copied as one block");
    // WG (fused_wg.cuh): conv2 on the warpgroup MMA; the A1 ring and conv2's streamed fragments keep their
    // sizes, in wgmma's layouts (A1: 8 planes of A1P bytes; a tap row's weights: [dx][g][n][8] fp16)
    static constexpr int A1P = C1 * RW1 * 16;
    static constexpr int WG_PC = RW / 8, WG_NWG = NT / 128;   // 8 x 8 patches per row of patches, warpgroups
    static constexpr int WG_MT = R / 8 * WG_PC / WG_NWG;      // patches per warpgroup in a full chunk
    static_assert(!WG || F2 == 1 ||
                      (F2 > 1 && !SPLIT && STREAM && (SPART == 1 || SPART == 2) && R % 8 == 0 &&
                       NT % 128 == 0 && (R / 8 * WG_PC) % WG_NWG == 0 && WG_MT >= 1 && WG_MT <= 8 && H2 == 2),
                  "WG: fp16-fast 5x5 conv2 streamed a tap row at a time, R a multiple of 8, patches even over warpgroups");
    // WG, F2 == 1 (tc_wg_fold_z): a warpgroup job is 2 rows of one parity x 2 blocks of one column phase; MB2
    // (unused by f2 = 1 otherwise) is the number of jobs a warpgroup keeps in flight together
    static_assert(!WG || F2 > 1 || (FOLD && !SPLIT && !STREAM && RW == 64 && R % 4 == 0 && NT % 32 == 0 &&
                                    (MB2 == 1 || MB2 == 2)),
                  "WG for f2 = 1: fp16-fast fold tiles, RW 64, R a multiple of 4, whole warpgroups, MB2 1 or 2");
    static_assert(STREAM || (G_W3F == O_W3F && G_W1F == O_W1F), "without STREAM the prefix is the global one");
};

// Word offsets in the Y planes of this lane's conv1 tap pairs (conv1_matrix's order; cq = lane % 4): K-step s uses
// off[2 s] (k) and off[2 s + 1] (k + 8). Pairs 45.. (zero weights) read row 8's first words: valid memory.
template <class C>
__device__ __forceinline__ void tc_tap_offsets(int (&off)[12], int cq) {
#pragma unroll
    for (int i = 0; i < 12; ++i) {
        const int p = 8 * (i >> 1) + 4 * (i & 1) + cq;
        off[i] = p < 45 ? (p / 5) * C::Y0WW + p % 5 : 8 * C::Y0WW + (p - 45);
    }
}

// conv1 for MB blocks of 16 positions. b0/b8: word index (plane + row + column/2) of the
// position in rows 0-7 / 8-15 of the block for this lane; off: this lane's pair offsets.
// Fragments of K-step s + 1 are loaded while the MMAs of step s run; the three products of the
// split are issued as three passes over all accumulators, so no MMA waits on the one before it.
template <class C, int MB>
__device__ __forceinline__ void tc_conv1_load(const u32* smw, const int (&b0)[MB], const int (&b8)[MB],
                                              const int (&off)[12], int s, int lane, u32 (&ah)[MB][4],
                                              u32 (&al)[MB][4], uint4 (&bh)[4], uint4 (&bl)[4]) {
    const u32* Y = smw + C::O_Y;
    const uint4* Wb = reinterpret_cast<const uint4*>(smw + C::O_W1F) + lane;
#pragma unroll
    for (int m = 0; m < MB; ++m) {
        ah[m][0] = Y[b0[m] + off[2 * s]];
        ah[m][1] = Y[b8[m] + off[2 * s]];
        ah[m][2] = Y[b0[m] + off[2 * s + 1]];
        ah[m][3] = Y[b8[m] + off[2 * s + 1]];
        if (C::SPLIT_) {
            al[m][0] = Y[2 * C::PY + b0[m] + off[2 * s]];
            al[m][1] = Y[2 * C::PY + b8[m] + off[2 * s]];
            al[m][2] = Y[2 * C::PY + b0[m] + off[2 * s + 1]];
            al[m][3] = Y[2 * C::PY + b8[m] + off[2 * s + 1]];
        }
    }
#pragma unroll
    for (int jp = 0; jp < 4; ++jp) {
        bh[jp] = Wb[(s * 4 + jp) * 32];
        if (C::SPLIT_) bl[jp] = Wb[C::W1F / 4 + (s * 4 + jp) * 32];
    }
}

// acc[m][0..2*NP) += A (hi, lo) x B (NP uint4 of two n-tiles each), split products in three passes
// (two with A_EXACT: A is exact in fp16, al is not read), so no MMA waits on the one before it.
template <class C, int MB, int NP, int NTILE, bool A_EXACT = false>
__device__ __forceinline__ void tc_mma_passes(float (&acc)[MB][NTILE][4], const u32 (&ah)[MB][4], const u32 (&al)[MB][4],
                                              const uint4 (&bh)[NP], const uint4 (&bl)[NP]) {
#pragma unroll
    for (int jp = 0; jp < NP; ++jp)
#pragma unroll
        for (int m = 0; m < MB; ++m) {
            mma16816(acc[m][2 * jp], ah[m], bh[jp].x, bh[jp].y);
            mma16816(acc[m][2 * jp + 1], ah[m], bh[jp].z, bh[jp].w);
        }
    if (C::SPLIT_) {
#pragma unroll
        for (int jp = 0; jp < NP; ++jp)
#pragma unroll
            for (int m = 0; m < MB; ++m) {
                mma16816(acc[m][2 * jp], ah[m], bl[jp].x, bl[jp].y);
                mma16816(acc[m][2 * jp + 1], ah[m], bl[jp].z, bl[jp].w);
            }
    }
    if (C::SPLIT_ && !A_EXACT) {
#pragma unroll
        for (int jp = 0; jp < NP; ++jp)
#pragma unroll
            for (int m = 0; m < MB; ++m) {
                mma16816(acc[m][2 * jp], al[m], bh[jp].x, bh[jp].y);
                mma16816(acc[m][2 * jp + 1], al[m], bh[jp].z, bh[jp].w);
            }
    }
}

template <class C, int MB>
__device__ __forceinline__ void tc_conv1(const u32* smw, const int (&b0)[MB], const int (&b8)[MB],
                                         const int (&off)[12], float (&acc)[MB][8][4], int lane) {
    u32 ah[2][MB][4], al[2][MB][4];
    uint4 bh[2][4], bl[2][4];
    tc_conv1_load<C, MB>(smw, b0, b8, off, 0, lane, ah[0], al[0], bh[0], bl[0]);
#pragma unroll
    for (int s = 0; s < 6; ++s) {
        if (s + 1 < 6)
            tc_conv1_load<C, MB>(smw, b0, b8, off, s + 1, lane, ah[(s + 1) & 1], al[(s + 1) & 1], bh[(s + 1) & 1],
                                 bl[(s + 1) & 1]);
        tc_mma_passes<C, MB, 4, 8>(acc, ah[s & 1], al[s & 1], bh[s & 1], bl[s & 1]);
    }
}

// Accumulators (MB blocks x NTILE n-tiles, C layout) = the bias of their channels.
template <class C, int MB, int NTILE>
__device__ __forceinline__ void tc_bias_init(const float* bias, float (&acc)[MB][NTILE][4], int cq) {
#pragma unroll
    for (int j = 0; j < NTILE; ++j) {
        const float2 b = *reinterpret_cast<const float2*>(bias + 8 * j + 2 * cq);
#pragma unroll
        for (int m = 0; m < MB; ++m) {
            acc[m][j][0] = b.x; acc[m][j][1] = b.y; acc[m][j][2] = b.x; acc[m][j][3] = b.y;
        }
    }
}

// Accumulators (MB blocks x NTILE n-tiles) = 0.
template <int MB, int NTILE>
__device__ __forceinline__ void tc_zero(float (&acc)[MB][NTILE][4]) {
#pragma unroll
    for (int m = 0; m < MB; ++m)
#pragma unroll
        for (int j = 0; j < NTILE; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[m][j][e] = 0.0f;
}

// ReLU'd accumulators of n-tiles (2k, 2k+1) -> the A fragment (hi, lo) of K-step k.
template <class C, int MB, int NT_>
__device__ __forceinline__ void tc_to_a(const float (&acc)[MB][NT_][4], int k, u32 (&ah)[MB][4], u32 (&al)[MB][4]) {
#pragma unroll
    for (int m = 0; m < MB; ++m) {
        relu_split2<C::SPLIT_>(acc[m][2 * k][0], acc[m][2 * k][1], ah[m][0], al[m][0]);
        relu_split2<C::SPLIT_>(acc[m][2 * k][2], acc[m][2 * k][3], ah[m][1], al[m][1]);
        relu_split2<C::SPLIT_>(acc[m][2 * k + 1][0], acc[m][2 * k + 1][1], ah[m][2], al[m][2]);
        relu_split2<C::SPLIT_>(acc[m][2 * k + 1][2], acc[m][2 * k + 1][3], ah[m][3], al[m][3]);
    }
}

// acc (MB x n-tiles) += A (hi, lo) x B fragments (two n-tiles per uint4; lo copy `lo_off` uint4 away).
template <class C, int MB, int NTILE>
__device__ __forceinline__ void tc_mma_k(float (&acc)[MB][NTILE][4], const u32 (&ah)[MB][4], const u32 (&al)[MB][4],
                                         const uint4* B, int lo_off) {
    uint4 bh[NTILE / 2], bl[NTILE / 2];
#pragma unroll
    for (int jp = 0; jp < NTILE / 2; ++jp) {
        bh[jp] = B[jp * 32];
        if (C::SPLIT_) bl[jp] = B[lo_off + jp * 32];
    }
    tc_mma_passes<C, MB, NTILE / 2, NTILE>(acc, ah, al, bh, bl);
}

// ReLU(conv2) accumulators -> Z GEMM -> the Z ring (rows rr, columns xb + CS * i, i < 16).
template <class C, int MB, int CS = 1>
__device__ __forceinline__ void tc_z(const u32* smw, float* Z, const float (&acc2)[MB][4][4], const int (&rr)[MB],
                                     const int (&xb)[MB], const bool (&ok)[MB], int lane) {
    const uint4* W3 = reinterpret_cast<const uint4*>(smw + C::O_W3F) + lane;
    float acc3[MB][4][4];
    tc_zero<MB, 4>(acc3);
#pragma unroll
    for (int k = 0; k < 2; ++k) {
        u32 ah[MB][4], al[MB][4];
        tc_to_a<C, MB, 4>(acc2, k, ah, al);
        tc_mma_k<C, MB, 4>(acc3, ah, al, W3 + k * 2 * 32, C::W3F / 4);
    }
    const int r0 = lane >> 2, cq = lane & 3;
#pragma unroll
    for (int m = 0; m < MB; ++m) {
        if (!ok[m]) continue;
        float* zrow = Z + (rr[m] % C::CZ) * C::RW_ + xb[m] + CS * r0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int d = 8 * j + 2 * cq;
            if (d < 25) {
                zrow[d * C::PZ] = acc3[m][j][0];
                zrow[d * C::PZ + 8 * CS] = acc3[m][j][2];
            }
            if (d + 1 < 25) {
                zrow[(d + 1) * C::PZ] = acc3[m][j][1];
                zrow[(d + 1) * C::PZ + 8 * CS] = acc3[m][j][3];
            }
        }
    }
}

// ---------------------------------------------------------------- F2 == 1: conv1 -> conv2 -> Z in registers

// conv1 accumulators (bias in) -> ReLU -> conv2 (K 64, N 32, in registers) -> ReLU -> Z, for f2 == 1.
template <class C, int MB, int CS>
__device__ __forceinline__ void tc_conv2_z(const u32* smw, float* Z, const float (&acc)[MB][8][4], const int (&rr)[MB],
                                           const int (&xb)[MB], const bool (&ok)[MB], int lane) {
    const float* b2 = reinterpret_cast<const float*>(smw + C::O_B2);
    const uint4* W2 = reinterpret_cast<const uint4*>(smw + C::O_W2F) + lane;
    const int cq = lane & 3;
    float acc2[MB][4][4];
    tc_bias_init<C, MB, 4>(b2, acc2, cq);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        u32 ah[MB][4], al[MB][4];
        tc_to_a<C, MB, 8>(acc, k, ah, al);
        tc_mma_k<C, MB, 4>(acc2, ah, al, W2 + k * 2 * 32, C::W2F / 4);
    }
    tc_z<C, MB, CS>(smw, Z, acc2, rr, xb, ok, lane);
}

// tc_job_blocks' default step per block: nothing.
struct TcNoBlockWork {
    __device__ void operator()(int) const {}
};

// The MB blocks of job `job` over Z rows from z0 (nm blocks of 16 positions, RW / 16 per row): their
// rows, first columns, and which exist (a missing block repeats the last one and stores nothing);
// `each(m)` runs once block m's are set (in the same unrolled step: the caller's per-block
// addresses interleave as they did when each caller had its own copy of this loop).
template <class C, int MB, class Each = TcNoBlockWork>
__device__ __forceinline__ void tc_job_blocks(int job, int z0, int nm, int (&rr)[MB], int (&xb)[MB], bool (&ok)[MB],
                                              Each each = Each()) {
    constexpr int MPR = C::RW_ / 16;
#pragma unroll
    for (int m = 0; m < MB; ++m) {
        int mi = job * MB + m;
        ok[m] = mi < nm;
        mi = min(mi, nm - 1);
        rr[m] = z0 + mi / MPR;
        xb[m] = (mi % MPR) * 16;
        each(m);
    }
}

template <class C>
__device__ void tc_chain_z(const u32* smw, float* Z, int z0, int z1, const int (&off)[12]) {
    constexpr int MB = C::MB1_, MPR = C::RW_ / 16;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, r0 = lane >> 2, cq = lane & 3;
    const float* b1 = reinterpret_cast<const float*>(smw + C::O_B1);
    const int nm = (z1 - z0) * MPR, njobs = (nm + MB - 1) / MB;
    for (int job = warp; job < njobs; job += C::NW) {
        int rr[MB], xb[MB], b0[MB], b8[MB];
        bool ok[MB];
        tc_job_blocks<C, MB>(job, z0, nm, rr, xb, ok, [&](int m) {
            const int x = xb[m] + r0;
            b0[m] = (x & 1) * C::PY + rr[m] * C::Y0WW + (x >> 1);
            b8[m] = b0[m] + 4;
        });
        float acc[MB][8][4];
        tc_bias_init<C, MB, 8>(b1, acc, cq);
        tc_conv1<C, MB>(smw, b0, b8, off, acc, lane);
        tc_conv2_z<C, MB, 1>(smw, Z, acc, rr, xb, ok, lane);
    }
}

// ---------------------------------------------------------------- FOLD: conv1 from the LR samples

// K-step s (LR tap rows 2s, 2s + 1) of the folded conv1: b0 is this lane's word in the LR planes
// (copy, row and pair of its position r0, plus cq); Wp the phase's fragments.
template <class C, int MB>
__device__ __forceinline__ void tc_fold_load(const u32* L, const int (&b0)[MB], const uint4* Wp, int s,
                                             u32 (&a)[MB][4], uint4 (&bh)[4], uint4 (&bl)[4]) {
#pragma unroll
    for (int m = 0; m < MB; ++m) {
        const int w = b0[m] + 2 * s * C::LRWW;
        a[m][0] = L[w];
        a[m][1] = L[w + 4];  // position r0 + 8: eight LR columns on
        a[m][2] = L[w + C::LRWW];
        a[m][3] = L[w + C::LRWW + 4];
    }
#pragma unroll
    for (int jp = 0; jp < 4; ++jp) {
        bh[jp] = Wp[(s * 4 + jp) * 32];
        if (C::SPLIT_) bl[jp] = Wp[C::W1P / 4 + (s * 4 + jp) * 32];
    }
}

// conv1 -> conv2 -> Z for Z-region rows [z0, z1) of a fold block. A job is MB blocks of 16
// positions of one row and one column phase px: region columns px + 2 * (16 * blk + i).
// d0 / d1: first LR row (column) of phase 0 / 1's window, relative to the tile's LR origin.
template <class C>
__device__ void tc_chain_z_fold(const u32* smw, float* Z, int z0, int z1, int d0, int d1, float fscale) {
    constexpr int MB = C::MB1_, BPP = C::RW_ / 32, GPP = BPP / MB, JPR = 2 * GPP;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, r0 = lane >> 2, cq = lane & 3;
    const float* b1 = reinterpret_cast<const float*>(smw + C::O_B1);
    const u32* L = smw + C::O_LR;
    const int nj = (z1 - z0) * JPR;
    for (int job = warp; job < nj; job += C::NW) {
        const int row = z0 + job / JPR, rem = job % JPR, px = rem / GPP, blk0 = (rem % GPP) * MB;
        const int py = row & 1;  // the Z region starts on an even frame row and column
        const int lrow = (row >> 1) + (py ? d1 : d0), dcol = px ? d1 : d0;
        int b0[MB], rr[MB], xb[MB];
        bool ok[MB];
#pragma unroll
        for (int m = 0; m < MB; ++m) {
            const int lcol = 16 * (blk0 + m) + r0 + dcol;
            b0[m] = (lcol & 1) * C::PLR + lrow * C::LRWW + (lcol >> 1) + cq;
            rr[m] = row;
            xb[m] = px + 32 * (blk0 + m);
            ok[m] = true;
        }
        const uint4* Wp = reinterpret_cast<const uint4*>(smw + C::O_W1P + (py * 2 + px) * C::NSPL * C::W1P) + lane;
        float acc[MB][8][4];
        tc_zero<MB, 8>(acc);
        u32 a[2][MB][4];
        uint4 bh[2][4], bl[2][4];
        tc_fold_load<C, MB>(L, b0, Wp, 0, a[0], bh[0], bl[0]);
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            if (s + 1 < 4) tc_fold_load<C, MB>(L, b0, Wp, s + 1, a[(s + 1) & 1], bh[(s + 1) & 1], bl[(s + 1) & 1]);
            tc_mma_passes<C, MB, 4, 8, true>(acc, a[s & 1], a[s & 1], bh[s & 1], bl[s & 1]);
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const float2 b = *reinterpret_cast<const float2*>(b1 + 8 * j + 2 * cq);
#pragma unroll
            for (int m = 0; m < MB; ++m) {
                acc[m][j][0] = fmaf(acc[m][j][0], fscale, b.x);
                acc[m][j][1] = fmaf(acc[m][j][1], fscale, b.y);
                acc[m][j][2] = fmaf(acc[m][j][2], fscale, b.x);
                acc[m][j][3] = fmaf(acc[m][j][3], fscale, b.y);
            }
        }
        tc_conv2_z<C, MB, 2>(smw, Z, acc, rr, xb, ok, lane);
    }
}

// The LR tile of a fold block as fp16 (exact integers): rows ly0 + [0, LRR), columns lx0 + [0, 2 LRWW],
// the symmetric border of the bicubic applied (the fold's windows are unfolded indices). Plane E
// word w = columns (2w, 2w + 1), plane O word w = (2w + 1, 2w + 2). Ends with a barrier.
template <class C, int NT>
__device__ void tc_load_lr(const FusedArgs& a, u32* smw, int ly0, int lx0) {
    unsigned short* Lh = reinterpret_cast<unsigned short*>(smw + C::O_LR);
    constexpr int LW = 2 * C::LRWW, N = LW + 1;
    for (int e = threadIdx.x; e < C::LRR * N; e += NT) {
        const int r = e / N, c = e - r * N;
        const unsigned short hv = f2h(fold_sample(a, ly0 + r, lx0 + c));
        if (c < LW) Lh[r * LW + c] = hv;
        if (c >= 1) Lh[2 * C::PLR + r * LW + c - 1] = hv;
    }
    __syncthreads();
}

// ---------------------------------------------------------------- F2 > 1: A1 ring (fp16 records), ldmatrix conv2

// WG: the A1 buffer holds rows [base, base + C1) linearly (fused_wg.cuh), in 8 planes (channel group j,
// 16 bytes per position); otherwise a ring of records (row % C1), 16-byte chunks swizzled by column.
template <class C>
__device__ void tc_conv1_ring(const u32* smw, u32* A1, int a0, int a1, const int (&off)[12], int base = 0) {
    constexpr int MB = C::MB1_;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, r0 = lane >> 2, cq = lane & 3;
    const float* b1 = reinterpret_cast<const float*>(smw + C::O_B1);
    const int npos = (a1 - a0) * C::RW1, nm = (npos + 15) / 16, njobs = (nm + MB - 1) / MB;
    for (int job = warp; job < njobs; job += C::NW) {
        int b0[MB], b8[MB], ra[MB], rb[MB], xa[MB], xb8[MB];
        bool oka[MB], okb[MB];
#pragma unroll
        for (int m = 0; m < MB; ++m) {
            const int mi = min(job * MB + m, nm - 1);
            const bool okm = job * MB + m < nm;
            int qa = mi * 16 + r0, qb = qa + 8;
            oka[m] = okm && qa < npos;
            okb[m] = okm && qb < npos;
            qa = min(qa, npos - 1);
            qb = min(qb, npos - 1);
            ra[m] = a0 + qa / C::RW1; xa[m] = qa % C::RW1;
            rb[m] = a0 + qb / C::RW1; xb8[m] = qb % C::RW1;
            b0[m] = (xa[m] & 1) * C::PY + ra[m] * C::Y0WW + (xa[m] >> 1);
            b8[m] = (xb8[m] & 1) * C::PY + rb[m] * C::Y0WW + (xb8[m] >> 1);
        }
        float acc[MB][8][4];
        tc_bias_init<C, MB, 8>(b1, acc, cq);
        tc_conv1<C, MB>(smw, b0, b8, off, acc, lane);
        if constexpr (C::WG_) {
#pragma unroll
            for (int m = 0; m < MB; ++m) {
                u32* pa = A1 + ((ra[m] - base) * C::RW1 + xa[m]) * 4 + cq;
                u32* pb = A1 + ((rb[m] - base) * C::RW1 + xb8[m]) * 4 + cq;
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    u32 h, l;
                    if (oka[m]) {
                        relu_split2<false>(acc[m][j][0], acc[m][j][1], h, l);
                        pa[j * (C::A1P / 4)] = h;
                    }
                    if (okb[m]) {
                        relu_split2<false>(acc[m][j][2], acc[m][j][3], h, l);
                        pb[j * (C::A1P / 4)] = h;
                    }
                }
            }
            continue;
        }
#pragma unroll
        for (int m = 0; m < MB; ++m) {
            u32* reca = A1 + ((ra[m] % C::C1) * C::RW1 + xa[m]) * 32 + cq;
            u32* recb = A1 + ((rb[m] % C::C1) * C::RW1 + xb8[m]) * 32 + cq;
            const int sa = xa[m] & 7, sb = xb8[m] & 7;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                u32 h, l;
                if (oka[m]) {
                    relu_split2<C::SPLIT_>(acc[m][j][0], acc[m][j][1], h, l);
                    reca[(j ^ sa) << 2] = h;
                    if (C::SPLIT_) reca[C::A1W + ((j ^ sa) << 2)] = l;
                }
                if (okb[m]) {
                    relu_split2<C::SPLIT_>(acc[m][j][2], acc[m][j][3], h, l);
                    recb[(j ^ sb) << 2] = h;
                    if (C::SPLIT_) recb[C::A1W + ((j ^ sb) << 2)] = l;
                }
            }
        }
    }
}

// FOLD with F2 > 1 (WG): conv1 of A1 rows [a0, a1) of a fold block straight from the LR planes (the phase filters,
// as tc_chain_z_fold), ReLU'd into the WG window (rows from `base`, planar) as tc_conv1_ring writes it. An MMA block
// is 16 positions of one phase (py, px): the phase's positions listed row by row (rows of parity py, RW1 / 2 columns
// px + 2 i each), so a block may span two rows; each lane's two positions (r0, r0 + 8) have their own LR words.
// The A1 window's origin is an even frame row and column (fold_block on it), d0 / d1 as tc_chain_z_fold's.
template <class C>
__device__ void tc_conv1_ring_fold(const u32* smw, u32* A1, int a0, int a1, int base, int d0, int d1, float fscale) {
    constexpr int MB = C::MB1_, NC = C::RW1 / 2;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, r0 = lane >> 2, cq = lane & 3;
    const float* b1 = reinterpret_cast<const float*>(smw + C::O_B1);
    const u32* L = smw + C::O_LR;
    int first[2], npos[2], njp[2];  // per row parity: first row, positions per phase, jobs per phase
#pragma unroll
    for (int py = 0; py < 2; ++py) {
        first[py] = a0 + ((a0 ^ py) & 1);
        npos[py] = max(a1 - first[py] + 1, 0) / 2 * NC;
        njp[py] = ((npos[py] + 15) / 16 + MB - 1) / MB;
    }
    const int njobs = 2 * (njp[0] + njp[1]);
    for (int job = warp; job < njobs; job += C::NW) {
        const bool odd = job >= 2 * njp[0];  // warp-uniform
        const int py = odd ? 1 : 0, jr = odd ? job - 2 * njp[0] : job, nj = odd ? njp[1] : njp[0];
        const int px = jr >= nj ? 1 : 0, jb = jr - px * nj, np = odd ? npos[1] : npos[0], f = odd ? first[1] : first[0];
        const int dr = py ? d1 : d0, dc = px ? d1 : d0;
        int bw[MB][2], pos[MB][2];
        bool ok[MB][2];
#pragma unroll
        for (int m = 0; m < MB; ++m)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                int q = (jb * MB + m) * 16 + r0 + 8 * h;
                ok[m][h] = q < np;
                q = min(q, np - 1);
                const int row = f + 2 * (q / NC), col = px + 2 * (q % NC);
                const int lrow = (row >> 1) + dr, lcol = (col >> 1) + dc;
                bw[m][h] = (lcol & 1) * C::PLR + lrow * C::LRWW + (lcol >> 1) + cq;
                pos[m][h] = (row - base) * C::RW1 + col;
            }
        const uint4* Wp = reinterpret_cast<const uint4*>(smw + C::O_W1P + (py * 2 + px) * C::NSPL * C::W1P) + lane;
        float acc[MB][8][4];
        tc_zero<MB, 8>(acc);
        {
            u32 a[2][MB][4];
            uint4 bh[2][4], bl[2][4];
            auto load = [&](int s, u32 (&am)[MB][4], uint4 (&b_h)[4], uint4 (&b_l)[4]) {
#pragma unroll
                for (int m = 0; m < MB; ++m) {
                    am[m][0] = L[bw[m][0] + 2 * s * C::LRWW];
                    am[m][1] = L[bw[m][1] + 2 * s * C::LRWW];
                    am[m][2] = L[bw[m][0] + (2 * s + 1) * C::LRWW];
                    am[m][3] = L[bw[m][1] + (2 * s + 1) * C::LRWW];
                }
#pragma unroll
                for (int jp = 0; jp < 4; ++jp) {
                    b_h[jp] = Wp[(s * 4 + jp) * 32];
                    if (C::SPLIT_) b_l[jp] = Wp[C::W1P / 4 + (s * 4 + jp) * 32];
                }
            };
            load(0, a[0], bh[0], bl[0]);
#pragma unroll
            for (int s = 0; s < 4; ++s) {
                if (s + 1 < 4) load(s + 1, a[(s + 1) & 1], bh[(s + 1) & 1], bl[(s + 1) & 1]);
                tc_mma_passes<C, MB, 4, 8, true>(acc, a[s & 1], a[s & 1], bh[s & 1], bl[s & 1]);
            }
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const float2 b = *reinterpret_cast<const float2*>(b1 + 8 * j + 2 * cq);
#pragma unroll
            for (int m = 0; m < MB; ++m) {
                if (ok[m][0])
                    A1[pos[m][0] * 4 + cq + j * (C::A1P / 4)] =
                        pack_h2_relu(fmaf(acc[m][j][0], fscale, b.x), fmaf(acc[m][j][1], fscale, b.y));
                if (ok[m][1])
                    A1[pos[m][1] * 4 + cq + j * (C::A1P / 4)] =
                        pack_h2_relu(fmaf(acc[m][j][2], fscale, b.x), fmaf(acc[m][j][3], fscale, b.y));
            }
        }
    }
}

// Fragments of step t = dx * 4 + ks of one conv2 tap row: A by ldmatrix from the swizzled A1 ring
// (row[m]: byte address of this lane's record at dx = 0), B (two uint4 = four n-tiles) from Wt.
template <class C, int MB>
__device__ __forceinline__ void tc_ring_load(const u32 (&row)[MB], const uint4* Wt, int lo_off, int t, int lrow, int lhi,
                                             u32 (&ah)[MB][4], u32 (&al)[MB][4], uint4 (&bh)[2], uint4 (&bl)[2]) {
    const int dx = t >> 2, ks = t & 3;
    const int sw = (lrow + dx) & 7;  // column & 7 (xb is a multiple of 16)
    const u32 coff = (dx << 7) + ((((2 * ks + lhi) ^ sw)) << 4);
#pragma unroll
    for (int m = 0; m < MB; ++m) {
        ldsm_x4(ah[m], row[m] + coff);
        if (C::SPLIT_) ldsm_x4(al[m], row[m] + coff + C::A1W * 4);
    }
    const uint4* B = Wt + t * 2 * 32;
#pragma unroll
    for (int jp = 0; jp < 2; ++jp) {
        bh[jp] = B[jp * 32];
        if (C::SPLIT_) bl[jp] = B[lo_off + jp * 32];
    }
}

// acc2 += one conv2 tap row (dy) for MB blocks: row[m] the byte address of this lane's A1 record
// at dx = 0; Wt the row's B fragments (t = dx * 4 + K-step; lo copy lo_off uint4 away).
template <class C, int F2, int MB>
__device__ __forceinline__ void tc_conv2_tap_row(float (&acc2)[MB][4][4], const u32 (&row)[MB], const uint4* Wt,
                                                 int lo_off, int lrow, int lhi) {
    u32 ah[2][MB][4], al[2][MB][4];
    uint4 bh[2][2], bl[2][2];
    tc_ring_load<C, MB>(row, Wt, lo_off, 0, lrow, lhi, ah[0], al[0], bh[0], bl[0]);
#pragma unroll
    for (int t = 0; t < F2 * 4; ++t) {  // fragments of t + 1 load under t's MMAs
        if (t + 1 < F2 * 4)
            tc_ring_load<C, MB>(row, Wt, lo_off, t + 1, lrow, lhi, ah[(t + 1) & 1], al[(t + 1) & 1], bh[(t + 1) & 1],
                                bl[(t + 1) & 1]);
        tc_mma_passes<C, MB, 2, 4>(acc2, ah[t & 1], al[t & 1], bh[t & 1], bl[t & 1]);
    }
}

// conv2 (f2 x f2 taps, all their fragments in shared memory) -> Z for Z rows [z0, z1).
template <class C, int F2>
__device__ void tc_conv2_ring_z(const u32* smw, const u32* A1, float* Z, int z0, int z1) {
    constexpr int MB = C::MB2_, MPR = C::RW_ / 16;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, cq = lane & 3;
    const int lrow = lane & 15, lhi = lane >> 4;
    const float* b2 = reinterpret_cast<const float*>(smw + C::O_B2);
    const uint4* W2 = reinterpret_cast<const uint4*>(smw + C::O_W2F) + lane;
    const u32 a1s = smem_u32(A1);
    const int nm = (z1 - z0) * MPR, njobs = (nm + MB - 1) / MB;
    for (int job = warp; job < njobs; job += C::NW) {
        int rr[MB], xb[MB];
        bool ok[MB];
        tc_job_blocks<C, MB>(job, z0, nm, rr, xb, ok);
        float acc2[MB][4][4];
        tc_bias_init<C, MB, 4>(b2, acc2, cq);
#pragma unroll 1
        for (int dy = 0; dy < F2; ++dy) {
            u32 row[MB];
#pragma unroll
            for (int m = 0; m < MB; ++m)
                row[m] = a1s + ((((rr[m] + dy) % C::C1) * C::RW1 + xb[m] + lrow) << 7);
            tc_conv2_tap_row<C, F2, MB>(acc2, row, W2 + dy * F2 * 8 * 32, C::W2F / 4, lrow, lhi);
        }
        tc_z<C, MB>(smw, Z, acc2, rr, xb, ok, lane);
    }
}

// The same with STREAM: shared memory holds one tap row of conv2's fragments at a time (the split
// 9-5-5 weights, 200 KB, do not fit whole), loaded from the global array before each row; a warp
// keeps the accumulators of all its jobs (at most JMAX) across the rows. Every thread must call it.
template <class C, int F2, int NT>
__device__ void tc_conv2_ring_z_stream(u32* smw, const u32* __restrict__ weights, const u32* A1, float* Z, int z0,
                                       int z1) {
    constexpr int MB = C::MB2_, MPR = C::RW_ / 16;
    constexpr int JMAX = (C::R_ * MPR / MB + C::NW - 1) / C::NW;  // jobs of a full chunk per warp
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, cq = lane & 3;
    const int lrow = lane & 15, lhi = lane >> 4;
    const float* b2 = reinterpret_cast<const float*>(smw + C::O_B2);
    const uint4* W2 = reinterpret_cast<const uint4*>(smw + C::O_W2F) + lane;
    const u32 a1s = smem_u32(A1);
    const int nm = (z1 - z0) * MPR, njobs = (nm + MB - 1) / MB;
    int rr[JMAX][MB], xb[JMAX][MB];
    bool ok[JMAX][MB];
    float acc2[JMAX][MB][4][4];
#pragma unroll
    for (int jj = 0; jj < JMAX; ++jj) {
        tc_job_blocks<C, MB>(warp + jj * C::NW, z0, nm, rr[jj], xb[jj], ok[jj]);
        tc_bias_init<C, MB, 4>(b2, acc2[jj], cq);
    }
#pragma unroll 1
    for (int dy = 0; dy < F2; ++dy) {
        __syncthreads();  // nobody reads the previous row's fragments any more
        const uint4* src = reinterpret_cast<const uint4*>(weights) + dy * (C::W2S / 4);
        uint4* dst = reinterpret_cast<uint4*>(smw + C::O_W2F);
        for (int i = threadIdx.x; i < C::NSPL * C::W2S / 4; i += NT) {
            const int copy = i / (C::W2S / 4), k = i - copy * (C::W2S / 4);
            dst[i] = __ldg(src + copy * (C::W2F / 4) + k);
        }
        __syncthreads();
#pragma unroll
        for (int jj = 0; jj < JMAX; ++jj) {
            if (warp + jj * C::NW >= njobs) continue;  // warp-uniform
            u32 row[MB];
#pragma unroll
            for (int m = 0; m < MB; ++m)
                row[m] = a1s + ((((rr[jj][m] + dy) % C::C1) * C::RW1 + xb[jj][m] + lrow) << 7);
            tc_conv2_tap_row<C, F2, MB>(acc2[jj], row, W2, C::W2S / 4, lrow, lhi);
        }
    }
#pragma unroll
    for (int jj = 0; jj < JMAX; ++jj)
        if (warp + jj * C::NW < njobs) tc_z<C, MB>(smw, Z, acc2[jj], rr[jj], xb[jj], ok[jj], lane);
}

// With SPART: part w (of the F2 * SPART parts a chunk walks) of conv2's fragments, both copies, from the
// global array into buffer `buf` of shared memory by cp.async (no wait).
template <class C, int F2, int NT>
__device__ __forceinline__ void tc_stream_part(u32* smw, const u32* __restrict__ weights, int buf, int w) {
    constexpr int NU = C::SPART_, UQ = C::W2U / 4;  // uint4 per part and copy
    const int dy = w / NU, part = w - dy * NU;
    const uint4* src = reinterpret_cast<const uint4*>(weights) + (dy * C::W2S + part * C::W2U) / 4;
    const u32 dst = smem_u32(smw + C::O_W2F + buf * C::NSPL * C::W2U);
    for (int i = threadIdx.x; i < C::NSPL * UQ; i += NT) {
        const int copy = i / UQ, k = i - copy * UQ;
        cp_async16(dst + 16u * i, src + copy * (C::W2F / 4) + k);
    }
}

// K-steps [t0, t0 + TU) of one conv2 tap row (t = dx * 4 + ks, as tc_conv2_tap_row) for MB blocks, B
// fragments from Wu (this part's buffer: step t at (t - t0) * 2 * 32 uint4, lo copy lo_off away).
template <class C, int TU, int MB>
__device__ __forceinline__ void tc_conv2_tap_steps(float (&acc2)[MB][4][4], const u32 (&row)[MB], const uint4* Wu,
                                                   int lo_off, int t0, int lrow, int lhi) {
    u32 ah[2][MB][4], al[2][MB][4];
    uint4 bh[2][2], bl[2][2];
    auto load = [&](int i, u32 (&a_h)[MB][4], u32 (&a_l)[MB][4], uint4 (&b_h)[2], uint4 (&b_l)[2]) {
        const int t = t0 + i, dx = t >> 2, ks = t & 3;
        const int sw = (lrow + dx) & 7;
        const u32 coff = (dx << 7) + ((((2 * ks + lhi) ^ sw)) << 4);
#pragma unroll
        for (int m = 0; m < MB; ++m) {
            ldsm_x4(a_h[m], row[m] + coff);
            if (C::SPLIT_) ldsm_x4(a_l[m], row[m] + coff + C::A1W * 4);
        }
        const uint4* B = Wu + i * 2 * 32;
#pragma unroll
        for (int jp = 0; jp < 2; ++jp) {
            b_h[jp] = B[jp * 32];
            if (C::SPLIT_) b_l[jp] = B[lo_off + jp * 32];
        }
    };
    load(0, ah[0], al[0], bh[0], bl[0]);
#pragma unroll
    for (int i = 0; i < TU; ++i) {  // fragments of i + 1 load under i's MMAs
        if (i + 1 < TU) load(i + 1, ah[(i + 1) & 1], al[(i + 1) & 1], bh[(i + 1) & 1], bl[(i + 1) & 1]);
        tc_mma_passes<C, MB, 2, 4>(acc2, ah[i & 1], al[i & 1], bh[i & 1], bl[i & 1]);
    }
}

// tc_conv2_ring_z_stream with SPART: each tap row in SPART parts through two buffers. Part u (counted
// over the whole kernel: buffer u & 1) was issued while part u - 1's MMAs ran; one barrier per part
// (its data visible to all, and every warp done with part u - 1, whose buffer then takes part u + 1).
// `more`: another chunk follows (its first part is prefetched under this chunk's last). Returns the
// next part's number. Every thread must call it.
template <class C, int F2, int NT>
__device__ int tc_conv2_ring_z_pipe(u32* smw, const u32* __restrict__ weights, const u32* A1, float* Z, int z0,
                                    int z1, int u0, bool more) {
    constexpr int MB = C::MB2_, MPR = C::RW_ / 16, NU = C::SPART_, TU = F2 * 4 / NU, NP = F2 * NU;
    constexpr int JMAX = (C::R_ * MPR / MB + C::NW - 1) / C::NW;  // jobs of a full chunk per warp
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, cq = lane & 3;
    const int lrow = lane & 15, lhi = lane >> 4;
    const float* b2 = reinterpret_cast<const float*>(smw + C::O_B2);
    const u32 a1s = smem_u32(A1);
    const int nm = (z1 - z0) * MPR, njobs = (nm + MB - 1) / MB;
    int rr[JMAX][MB], xb[JMAX][MB];
    bool ok[JMAX][MB];
    float acc2[JMAX][MB][4][4];
#pragma unroll
    for (int jj = 0; jj < JMAX; ++jj) {
        tc_job_blocks<C, MB>(warp + jj * C::NW, z0, nm, rr[jj], xb[jj], ok[jj]);
        tc_bias_init<C, MB, 4>(b2, acc2[jj], cq);
    }
#pragma unroll 1
    for (int v = 0; v < NP; ++v) {
        const int u = u0 + v;
        cp_async_wait_all();
        __syncthreads();
        if (v + 1 < NP || more) tc_stream_part<C, F2, NT>(smw, weights, (u + 1) & 1, (v + 1) % NP);
        const int dy = v / NU, t0 = (v - dy * NU) * TU;
        const uint4* Wu = reinterpret_cast<const uint4*>(smw + C::O_W2F + (u & 1) * C::NSPL * C::W2U) + lane;
#pragma unroll
        for (int jj = 0; jj < JMAX; ++jj) {
            if (warp + jj * C::NW >= njobs) continue;  // warp-uniform
            u32 row[MB];
#pragma unroll
            for (int m = 0; m < MB; ++m)
                row[m] = a1s + ((((rr[jj][m] + dy) % C::C1) * C::RW1 + xb[jj][m] + lrow) << 7);
            tc_conv2_tap_steps<C, TU, MB>(acc2[jj], row, Wu, C::W2U / 4, t0, lrow, lhi);
        }
    }
#pragma unroll
    for (int jj = 0; jj < JMAX; ++jj)
        if (warp + jj * C::NW < njobs) tc_z<C, MB>(smw, Z, acc2[jj], rr[jj], xb[jj], ok[jj], lane);
    return u0 + NP;
}

// A1 ring border fix-up: records of 8 swizzled 16-byte chunks per copy.
template <class C>
__device__ void tc_fixup_a1(u32* A1, int r0, int r1, int vy0, int vx0, int H, int W) {
    constexpr int PER = C::C1 * C::RW1 * 8;  // uint4 per copy
    uint4* buf = reinterpret_cast<uint4*>(A1);
    const int nr = r1 - r0, n = C::NSPL * nr * C::RW1 * 8;
    if (vx0 < 0 || vx0 + C::RW1 > W) {
        for (int e = threadIdx.x; e < n; e += blockDim.x) {
            const int k = e & 7, t = e >> 3, c = t % C::RW1, t2 = t / C::RW1, r = r0 + t2 % nr, cp = t2 / nr;
            const int v = vx0 + c;
            if (v < 0 || v >= W) {
                const int sc = clampi(v, 0, W - 1) - vx0;
                const int g = k ^ (c & 7);
                uint4* rowp = buf + cp * PER + (r % C::C1) * C::RW1 * 8;
                rowp[c * 8 + k] = rowp[sc * 8 + (g ^ (sc & 7))];
            }
        }
        __syncthreads();
    }
    if (vy0 + r0 < 0 || vy0 + r1 > H) {
        for (int e = threadIdx.x; e < n; e += blockDim.x) {
            const int k = e & 7, t = e >> 3, c = t % C::RW1, t2 = t / C::RW1, r = r0 + t2 % nr, cp = t2 / nr;
            const int v = vy0 + r;
            if (v < 0 || v >= H) {
                uint4* p = buf + cp * PER;
                const int sr = clampi(v, 0, H - 1) - vy0;
                p[((r % C::C1) * C::RW1 + c) * 8 + k] = p[((sr % C::C1) * C::RW1 + c) * 8 + k];
            }
        }
        __syncthreads();
    }
}


// ---------------------------------------------------------------- WG: conv2 on the warpgroup MMA (sm_90a)
//
// conv2 as an implicit GEMM on Hopper's wgmma.mma_async m64n32k16 (fp16 operands, fp32 accumulators), A
// (activations) and B (weights) read from shared memory by descriptor, so no operand passes through the
// registers (dev/cuda/wgmma_conv2.py: the tensor pipe, not ldmatrix, sets the pace). Layouts: no swizzle,
// core matrices of 8 rows x 16 contiguous bytes.
//   A1 (conv1's output): a linear window of C1 rows starting at the chunk's first row (not a ring: an
//   8-row patch must not wrap), in 8 planes (channel group g = channels 8g..8g+7), position (row, col) at
//   g * A1P + 16 * (row * RW1 + col). A = one 8 x 8 patch of Z positions (M row m = patch row m / 8,
//   column m % 8) for one tap: SBO (M direction) = one row, 16 RW1 bytes; LBO (K direction) = A1P; a tap
//   (dy, dx) only moves the start address, by 16 (dy RW1 + dx) bytes.
//   conv2's weights, streamed a tap row (dy) at a time as before: [dx][g][n (32)][8 channels] fp16, 512
//   bytes per (dx, g): B of K-step ks is 512 (8 dx + 2 ks) bytes in; SBO (N direction) = 128, LBO = 512.
// A chunk's R x RW Z positions are R / 8 x RW / 8 patches, WG_MT per warpgroup; each warpgroup keeps its
// patches' accumulators (16 registers each) across the F2 tap rows. A warp's share of a patch (M rows
// 16 w .. 16 w + 15 = patch rows 2w, 2w + 1) is in mma.sync's m16n8 C layout, four n-tiles: the Z GEMM
// (tc_z's mma.sync) takes it as it is.
typedef unsigned long long u64;

__device__ __forceinline__ u64 wg_desc(u32 saddr, u32 lbo, u32 sbo) {  // layout type 0: no swizzle
    return (u64)((saddr >> 4) & 0x3FFF) | ((u64)((lbo >> 4) & 0x3FFF) << 16) | ((u64)((sbo >> 4) & 0x3FFF) << 32);
}
// A descriptor as two words: the low one (start address >> 4, LBO >> 4 << 16) moves with the operand, the high
// one (SBO) is a constant. Shared addresses are below 2^18, so the start field (14 bits) never carries into
// LBO's: an offset in 16-byte units is added to the low word alone.
__device__ __forceinline__ u32 wg_lo(u32 saddr, u32 lbo) { return ((saddr >> 4) & 0x3FFF) | (((lbo >> 4) & 0x3FFF) << 16); }
__host__ __device__ constexpr u32 wg_hi(u32 sbo) { return (sbo >> 4) & 0x3FFF; }
__device__ __forceinline__ u64 wg_make(u32 lo, u32 hi) { return ((u64)hi << 32) | lo; }
// This thread's warpgroup, through a shuffle: the compiler then knows it is the same for the whole warp, and
// what is computed from it (descriptors, jobs) stays in uniform registers.
__device__ __forceinline__ int wg_index() { return __shfl_sync(0xffffffffu, (int)(threadIdx.x >> 7), 0); }
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
template <int N>  // at most N of this warpgroup's committed groups still running
__device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
// Generic-proxy writes to shared memory (st.shared, cp.async) made visible to the async proxy (wgmma):
// each writing thread, before the barrier that precedes the MMAs.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// mbarriers in shared memory (WS): init (one thread, then fence_mbar_init and a block barrier), arrive (release at
// CTA scope: this thread's earlier shared-memory accesses), wait for the phase of `parity` (acquire).
__device__ __forceinline__ void mbar_init(u32 addr, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(addr), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive(u32 addr) {
    asm volatile("{ .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}" :: "r"(addr) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 addr, u32 parity) {
    asm volatile("{ .reg .pred p;\n"
                 "WS_WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WS_WAIT;\n}"
                 :: "r"(addr), "r"(parity) : "memory");
}

// d = A x B + (acc ? d : 0): the first MMA of a sum passes acc = 0 instead of zeroing d (moves into d
// between the fence and the MMA make ptxas serialise the MMAs).
__device__ __forceinline__ void wgmma_m64n32k16(float (&d)[16], u64 da, u64 db, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(da), "l"(db), "r"(acc));
}

// Before a chunk that starts at A1 row z0 (> 0): its first 2 H2 rows, the last ones of the previous
// (full) chunk at window rows R.., move to window rows 0..; the window then starts at z0. Barrier after.
template <class C>
__device__ void tc_wg_shift_a1(u32* A1) {
    uint4* buf = reinterpret_cast<uint4*>(A1);
    constexpr int NR = 2 * C::H2, PER = C::A1P / 16, N = 8 * NR * C::RW1;
    for (int e = threadIdx.x; e < N; e += blockDim.x) {
        const int g = e / (NR * C::RW1), q = e - g * (NR * C::RW1);
        buf[g * PER + q] = buf[g * PER + C::R_ * C::RW1 + q];
    }
    __syncthreads();
}

// tc_fixup_a1 for the WG window (rows from `base`, planar): new rows [r0, r1).
template <class C>
__device__ void tc_fixup_a1_wg(u32* A1, int r0, int r1, int base, int vy0, int vx0, int H, int W) {
    constexpr int PER = C::A1P / 16;  // uint4 per plane
    uint4* buf = reinterpret_cast<uint4*>(A1);
    const int nr = r1 - r0, n = 8 * nr * C::RW1;
    if (vx0 < 0 || vx0 + C::RW1 > W) {
        for (int e = threadIdx.x; e < n; e += blockDim.x) {
            const int c = e % C::RW1, t = e / C::RW1, r = r0 + t % nr, g = t / nr;
            const int v = vx0 + c;
            if (v < 0 || v >= W) {
                uint4* rowp = buf + g * PER + (r - base) * C::RW1;
                rowp[c] = rowp[clampi(v, 0, W - 1) - vx0];
            }
        }
        __syncthreads();
    }
    if (vy0 + r0 < 0 || vy0 + r1 > H) {
        for (int e = threadIdx.x; e < n; e += blockDim.x) {
            const int c = e % C::RW1, t = e / C::RW1, r = r0 + t % nr, g = t / nr;
            const int v = vy0 + r;
            if (v < 0 || v >= H) {
                // rows below the image copy the last row inside; when that row left the window, the
                // window's first row (itself such a copy) stands in for it
                const int sr = max(clampi(v, 0, H - 1) - vy0, base);
                buf[g * PER + (r - base) * C::RW1 + c] = buf[g * PER + (sr - base) * C::RW1 + c];
            }
        }
        __syncthreads();
    }
}

// conv2 (F2 tap rows streamed in SPART parts each, as tc_conv2_ring_z_pipe) -> Z for Z rows [z0, z1), the A1
// window starting at row z0. Part u (counted over the kernel) is in buffer u % W2NBUF. With two buffers
// (SPART 1) the buffer refilled after a part's barrier was read by the part before, so each warpgroup's
// MMAs drain before every barrier; with three (SPART 2) only the part before that must be done, and the
// previous part's MMAs keep the tensor pipe busy across the barrier. Returns the next part's number.
// Every thread must call it.
template <class C, int F2, int NT>
__device__ int tc_wg_conv2_z(u32* smw, const u32* __restrict__ weights, const u32* A1, float* Z, int z0, int z1,
                             int u0, bool more) {
    constexpr int MT = C::WG_MT, PC = C::WG_PC;
    const int tid = threadIdx.x, wg = wg_index(), warp = (tid >> 5) & 3, lane = tid & 31, cq = lane & 3;
    const int nrows = z1 - z0;
    const u32 a1s = smem_u32(A1), wbase = smem_u32(smw + C::O_W2F);
    // patch i of this warpgroup: p = wg * MT + i, patch row p / PC, column p % PC. Every patch is computed
    // (a test around an MMA makes ptxas serialise them all, C7520); in a short last chunk those below it
    // read stale rows of the window, inside it, and store nothing. Descriptors by their low words (wg_lo).
    u32 da[MT];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        const int p = wg * MT + i, pr = p / PC, pc = p - pr * PC;
        da[i] = wg_lo(a1s + (pr * 8 * C::RW1 + pc * 8) * 16, C::A1P);
    }
    constexpr u32 AHI = wg_hi(16 * C::RW1), BHI = wg_hi(128);
    const u32 db0 = wg_lo(wbase, 512);
    constexpr int NU = C::SPART_, TU = F2 * 4 / NU, NP = F2 * NU, NB = C::W2NBUF;  // K-step t = 4 dx + ks
    float acc[MT][16];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int k = 0; k < 16; ++k) acc[i][k] = 0.f;
    // tap rows at run time, their parts and K-steps unrolled: every descriptor is a uniform register plus an
    // immediate (with the part index at run time, ~17 instructions per MMA went to descriptor arithmetic)
#pragma unroll 1
    for (int dy = 0; dy < F2; ++dy) {
#pragma unroll
        for (int part = 0; part < NU; ++part) {
            const int v = dy * NU + part, u = u0 + v;
            cp_async_wait_all();
            wg_wait<NB - 2>();  // the MMAs that read buffer (u + 1) % NB, refilled below, are done
            fence_proxy_async();
            __syncthreads();
            if (v + 1 < NP || more) tc_stream_part<C, F2, NT>(smw, weights, (u + 1) % NB, (v + 1) % NP);
            const u32 wb = db0 + (u % NB) * (C::W2U / 4);  // K-step t of the part at 1024 (t - part TU) bytes
            const u32 arow = dy * C::RW1;
            const int first = dy | part;  // 0: the sum's first MMA (scale-d 0)
            wg_fence();
#pragma unroll
            for (int j = 0; j < TU; ++j) {
                const int t = part * TU + j, dx = t >> 2, ks = t & 3;
                const u64 b = wg_make(wb + j * 64, BHI);
                const u32 ao = arow + dx + ks * 2 * (C::A1P / 16);
#pragma unroll
                for (int i = 0; i < MT; ++i) wgmma_m64n32k16(acc[i], wg_make(da[i] + ao, AHI), b, first | j);
            }
            wg_commit();
        }
    }
    wg_wait_all();
    const float* b2 = reinterpret_cast<const float*>(smw + C::O_B2);
    const uint4* W3 = reinterpret_cast<const uint4*>(smw + C::O_W3F) + lane;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        const int p = wg * MT + i, pr = p / PC, pc = p - pr * PC;
        if (pr * 8 >= nrows) continue;  // warpgroup-uniform
        float acc2[1][4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float2 b = *reinterpret_cast<const float2*>(b2 + 8 * j + 2 * cq);
            acc2[0][j][0] = acc[i][4 * j] + b.x;
            acc2[0][j][1] = acc[i][4 * j + 1] + b.y;
            acc2[0][j][2] = acc[i][4 * j + 2] + b.x;
            acc2[0][j][3] = acc[i][4 * j + 3] + b.y;
        }
        float acc3[1][4][4];
        tc_zero<1, 4>(acc3);
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            u32 ah[1][4], al[1][4];
            tc_to_a<C, 1, 4>(acc2, k, ah, al);
            tc_mma_k<C, 1, 4>(acc3, ah, al, W3 + k * 2 * 32, C::W3F / 4);
        }
        // C rows lane / 4 (h = 0) and lane / 4 + 8 (h = 1) of the warp's 16: patch rows 2 warp + h
        const int col = pc * 8 + (lane >> 2);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = z0 + pr * 8 + 2 * warp + h;
            if (row >= z1) continue;
            float* zrow = Z + (row % C::CZ) * C::RW_ + col;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int d = 8 * j + 2 * cq;
                if (d < 25) zrow[d * C::PZ] = acc3[0][j][2 * h];
                if (d + 1 < 25) zrow[(d + 1) * C::PZ] = acc3[0][j][2 * h + 1];
            }
        }
    }
    return u0 + NP;
}

// ---------------------------------------------------------------- WG, F2 == 1: the fold chain on the warpgroup MMA
//
// tc_chain_z_fold's three GEMMs on wgmma with A from registers and B from shared memory by descriptor, so no
// B fragment passes through the register file (448 shared bytes per position through it on mma.sync; here the
// tensor cores read B once per warpgroup MMA: 224 bytes per position). Per warp, wgmma's register A of
// m64nNk16 is mma.sync's m16k16 A fragment and its f32 accumulators are mma.sync's m16n8 C layout, so the
// chaining is tc_chain_z_fold's: conv1's accumulators become conv2's A, conv2's the Z GEMM's A.
// A job (warpgroup-uniform): 64 positions of one fold phase (py, px), because B (the phase's filter) is
// shared by the warpgroup: rows z0 + 4q + py and that + 2, two 16-position blocks each (warp w: row w / 2,
// block w % 2), columns px + 2 i. B layouts (no swizzle, core matrices of 8 n x 16 bytes): [K / 8][N][8] fp16,
// LBO (K direction) = N * 16 bytes, SBO (N direction) = 128; K-step s at 2 N * 16 s bytes.
//   conv1: m64n64k16 x 4 (K = 64 LR taps a * 8 + b, the phase matrix scaled by 2^e as on mma.sync)
//   conv2: m64n32k16 x 4 (K = 64 channels), the Z GEMM: m64n32k16 x 2 (K = 32, N = 25 taps padded to 32).
// JB (TcCfg's MB2) jobs of a warpgroup go through each GEMM together (one fence / commit / wait for all).

// d = A (registers) x B (descriptor) + (acc ? d : 0)
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const u32 (&a)[4], u64 db, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}
__device__ __forceinline__ void wgmma_m64n32k16_rs(float (&d)[16], const u32 (&a)[4], u64 db, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
        "{%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}

// ReLU(acc * scale + bias) of n-tiles 2k, 2k + 1 (accumulators in m16n8 C layout, 4 per n-tile) -> the m16k16 A
// fragment of K-step k; bias: this lane's channel pairs (8 j + 2 cq)
template <int NV>
__device__ __forceinline__ void tc_wg_to_a(const float (&acc)[NV], const float* bias, int cq, int k, float scale,
                                           u32 (&a)[4]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int j = 2 * k + h;
        const float2 b = *reinterpret_cast<const float2*>(bias + 8 * j + 2 * cq);
        a[2 * h] = pack_h2_relu(fmaf(acc[4 * j], scale, b.x), fmaf(acc[4 * j + 1], scale, b.y));
        a[2 * h + 1] = pack_h2_relu(fmaf(acc[4 * j + 2], scale, b.x), fmaf(acc[4 * j + 3], scale, b.y));
    }
}

// acc[i] = A[i] x B_i for JB jobs (warpgroup MMAs, A from registers: KS K-steps of 16; N = 64 for NV 32
// accumulators, 32 for 16), issued as one commit group, not waited for. B_i's K-step k at shared address b[i] +
// k * bk, core matrices lbo bytes apart along K. The first K-step passes scale-d 0: the zeros are for the compiler.
template <int NV, int JB, int KS>
__device__ __forceinline__ void tc_wg_gemm_rs_issue(float (&acc)[JB][NV], const u32 (&a)[JB][KS][4], const u32 (&b)[JB],
                                                    int bk, int lbo) {
    static_assert(NV == 32 || NV == 16, "m64n64k16 or m64n32k16");
#pragma unroll
    for (int i = 0; i < JB; ++i)
#pragma unroll
        for (int e = 0; e < NV; ++e) acc[i][e] = 0.f;
    wg_fence();
#pragma unroll
    for (int i = 0; i < JB; ++i)
#pragma unroll
        for (int k = 0; k < KS; ++k) {
            const u64 db = wg_make(wg_lo(b[i], lbo) + k * (bk >> 4), wg_hi(128));
            if constexpr (NV == 32) wgmma_m64n64k16_rs(acc[i], a[i][k], db, k);
            else wgmma_m64n32k16_rs(acc[i], a[i][k], db, k);
        }
    wg_commit();
}

// One warpgroup step of tc_wg_fold_z: JB jobs from job0 on, this warp's rows, and its conv1 A (the LR samples,
// exact in fp16, as tc_fold_load) into `a1`.
template <class C>
struct WgFoldJobs {
    int row[C::MB2_], ph[C::MB2_], col[C::MB2_];

    __device__ __forceinline__ void load(u32 (&a1)[C::MB2_][4][4], const u32* L, int job0, int nj, int z0, int z1,
                                         int d0, int d1, int warp, int r0, int cq) {
#pragma unroll
        for (int i = 0; i < C::MB2_; ++i) {
            const int job = min(job0 + i, nj - 1);
            load_job(a1[i], i, L, job >> 2, (job >> 1) & 1, job & 1, z0, z1, d0, d1, warp, r0, cq);
        }
    }
    // job 4 q + 2 py + px into slot i (tc_wg_fold_ws: with py and px the same for all of a warpgroup's jobs, the
    // compiler takes what depends on them out of its loop)
    __device__ __forceinline__ void load_job(u32 (&a)[4][4], int i, const u32* L, int q, int py, int px, int z0, int z1,
                                             int d0, int d1, int warp, int r0, int cq) {
        const int first = z0 + 4 * q + py, r = first + 2 * (warp >> 1);
        row[i] = r < z1 ? r : first;
        ph[i] = py * 2 + px;
        const int lrow = (row[i] >> 1) + (py ? d1 : d0);
        const int lcol = 16 * (warp & 1) + r0 + (px ? d1 : d0);
        const int b0 = (lcol & 1) * C::PLR + lrow * C::LRWW + (lcol >> 1) + cq;
        col[i] = px + 32 * (warp & 1) + 2 * r0;
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            const int w = b0 + 2 * s * C::LRWW;
            a[s][0] = L[w];
            a[s][1] = L[w + 4];  // position r0 + 8: eight LR columns on
            a[s][2] = L[w + C::LRWW];
            a[s][3] = L[w + C::LRWW + 4];
        }
    }
};

// conv1 -> conv2 -> Z for Z-region rows [z0, z1) of a fold block (tc_chain_z_fold's contract). The next step's LR
// words load under this step's conv2 MMAs. (Its conv1 MMAs in flight under this step's Z GEMM and stores need more
// registers than ptxas gives the wgmma pipeline: it serialises them, C7511.) Every thread must call it.
template <class C>
__device__ void tc_wg_fold_z(const u32* smw, float* Z, int z0, int z1, int d0, int d1, float fscale) {
    constexpr int JB = C::MB2_;
    const int tid = threadIdx.x, wg = wg_index(), warp = (tid >> 5) & 3, lane = tid & 31, r0 = lane >> 2, cq = lane & 3;
    const float* b1 = reinterpret_cast<const float*>(smw + C::O_B1);
    const float* b2 = reinterpret_cast<const float*>(smw + C::O_B2);
    const u32* L = smw + C::O_LR;
    const u32 w1s = smem_u32(smw + C::O_W1P), w2s = smem_u32(smw + C::O_W2G), w3s = smem_u32(smw + C::O_W3G);
    // jobs 4 q + 2 py + px; chunks start on even rows (R % 4 == 0) and hold an even number of rows (fold blocks:
    // TH and the frame even), so a job's first row is always inside; its second may not be (recomputed as the first)
    const int nj = (z1 - z0 + 3) / 4 * 4;
    constexpr int STEP = C::WG_NWG * JB;
    int job0 = wg * JB;
    if (job0 >= nj) return;  // warpgroup-uniform
    WgFoldJobs<C> cur, nxt;
    u32 a1[JB][4][4];
    cur.load(a1, L, job0, nj, z0, z1, d0, d1, warp, r0, cq);
#pragma unroll 1
    for (;; job0 += STEP) {
        const bool more = job0 + STEP < nj;  // warpgroup-uniform
        u32 bw[JB];
#pragma unroll
        for (int i = 0; i < JB; ++i) bw[i] = w1s + cur.ph[i] * (C::W1P * 4);  // each job's phase matrix
        float acc1[JB][32];
        tc_wg_gemm_rs_issue(acc1, a1, bw, 2048, 1024);
        wg_wait_all();
        // conv2: A = ReLU(conv1 * fscale + b1)
        u32 a2[JB][4][4];
#pragma unroll
        for (int i = 0; i < JB; ++i)
#pragma unroll
            for (int k = 0; k < 4; ++k) tc_wg_to_a<32>(acc1[i], b1, cq, k, fscale, a2[i][k]);
#pragma unroll
        for (int i = 0; i < JB; ++i) bw[i] = w2s;
        float acc2[JB][16];
        tc_wg_gemm_rs_issue(acc2, a2, bw, 1024, 512);
        if (more) nxt.load(a1, L, job0 + STEP, nj, z0, z1, d0, d1, warp, r0, cq);  // under conv2's MMAs
        wg_wait_all();
        // the Z GEMM: A = ReLU(conv2 + b2)
        u32 a3[JB][2][4];
#pragma unroll
        for (int i = 0; i < JB; ++i)
#pragma unroll
            for (int k = 0; k < 2; ++k) tc_wg_to_a<16>(acc2[i], b2, cq, k, 1.f, a3[i][k]);
#pragma unroll
        for (int i = 0; i < JB; ++i) bw[i] = w3s;
        float acc3[JB][16];
        tc_wg_gemm_rs_issue(acc3, a3, bw, 1024, 512);
        wg_wait_all();
        // as tc_z with CS = 2: C rows r0 and r0 + 8 of the warp's block are columns c and c + 16. A row outside the
        // chunk was computed as its job's first row (row[i]) from the same operands: stored there again, the same bits
#pragma unroll
        for (int i = 0; i < JB; ++i) {
            float* zrow = Z + (cur.row[i] % C::CZ) * C::RW_ + cur.col[i];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int d = 8 * j + 2 * cq;
                if (d < 25) {
                    zrow[d * C::PZ] = acc3[i][4 * j];
                    zrow[d * C::PZ + 16] = acc3[i][4 * j + 2];
                }
                if (d + 1 < 25) {
                    zrow[(d + 1) * C::PZ] = acc3[i][4 * j + 1];
                    zrow[(d + 1) * C::PZ + 16] = acc3[i][4 * j + 3];
                }
            }
        }
        if (!more) break;
        cur = nxt;
    }
}

// ---------------------------------------------------------------- WS: warp-specialised fold blocks
//
// Fold blocks (their Z region lies inside the frame: fold.regular_range, so no border fix-up) walk the whole Z region
// in one pass, without chunks or block barriers: the first NPROD warpgroups run tc_wg_fold_z's chain over jobs wg,
// wg + NPROD, ... (job 4 q + 2 py + px writes rows 4 q + py and + 2 of column phase px: row group q is complete after
// jobs 4 q .. 4 q + 3), and the remaining NCONS threads (the warps after them: a whole warpgroup or less) sum conv3
// for output rows 4 q' .. 4 q' + 3 once row groups q' and q' + 1 are in the ring. The Z ring's CZ rows are NG groups
// of 4: group q in ring group q % NG. full[g]: 4 jobs x 128 threads arrive after their Z stores; empty[g]: the NCONS
// summing threads arrive after the output rows that last read it. A producer waits for empty before its Z stores,
// not before its MMAs. Same arithmetic in the same order as the chunked walk: the outputs are the same bits.
// Each group's two mbarriers lie in the 4 words after Z plane g's CZ rows (PZ's padding, read and written by nothing
// else). (Not in TcCfg: a new template parameter there changes the other kernels' machine code.)
template <class C>
struct WsCfg {
    static constexpr int NG = C::CZ / 4, PAD = C::CZ * C::RW_;
    static constexpr int NPROD = (C::NW - 1) / 4, NCONS = 32 * C::NW - 128 * NPROD;
    // tc_wg_fold_ws_early (the next job's conv1 issued before this job's Z stores): with the registers of 16 warps or
    // fewer (at 20, 95 registers, ptxas serialises every wgmma, C7512, and spills)
    static constexpr bool EARLY = C::NW <= 16;
    static_assert(C::WGF && C::MB2_ == 1 && NPROD >= 1 && C::CZ % 4 == 0 && NG <= 25 && C::PZ - PAD >= 4 &&
                      (C::O_Z + PAD) % 2 == 0 && C::PZ % 2 == 0 && C::O_B1 % 4 == 0 && C::O_W1F % 4 == 0 &&
                      C::O_W1P % 4 == 0 && C::G_W1P % 4 == 0 && C::O_LR % 4 == 0,
                  "WS: wgmma fold tiles of f2 = 1, one job per warpgroup, a warpgroup and a warp or more");
};
// The mbarriers of ring group g: after Z plane g's rows (bars = the first one's address).
template <class C>
__device__ __forceinline__ u32 ws_bars(const u32* smw) { return smem_u32(smw + C::O_Z + WsCfg<C>::PAD); }
template <class C>
__device__ __forceinline__ u32 ws_full(u32 bars, int g) { return bars + 4 * C::PZ * g; }
template <class C>
__device__ __forceinline__ u32 ws_empty(u32 bars, int g) { return bars + 4 * C::PZ * g + 8; }

// A WS block's Z rows are split by column phase: frame column c of the Z region is word (c & 1) * 32 + (c >> 1) of its
// row, so that a chain warp's stores of a plane (8 consecutive positions of one phase x 4 planes 8 banks apart) fall in
// 32 banks, as do the summing warps' loads (32 outputs of one parity). The chunked walk keeps columns in order.
__device__ __forceinline__ int ws_zcol(int c) { return (c & 1) * 32 + (c >> 1); }
// One job's Z values into the ring (zrow: its first position's word; accumulator rows r0 + 8 are R8 words on: 8 for
// a fold job's columns c + 16, 4 for an edge job's c + 8).
template <class C, int R8 = 8>
__device__ __forceinline__ void ws_store_z(float* zrow, const float (&acc3)[16], int cq) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int d = 8 * j + 2 * cq;
        if (d < 25) {
            zrow[d * C::PZ] = acc3[4 * j];
            zrow[d * C::PZ + R8] = acc3[4 * j + 2];
        }
        if (d + 1 < 25) {
            zrow[(d + 1) * C::PZ] = acc3[4 * j + 1];
            zrow[(d + 1) * C::PZ + R8] = acc3[4 * j + 3];
        }
    }
}

// The chain: Z rows [0, nz) (tc_wg_fold_z with z0 = 0, z1 = nz, NPROD warpgroups, one job at a time).
template <class C>
__device__ void tc_wg_fold_ws(const u32* smw, float* Z, int nz, int d0, int d1, float fscale) {
    static_assert(C::MB2_ == 1, "WS: one job at a time");
    const int tid = threadIdx.x, wg = wg_index(), warp = (tid >> 5) & 3, lane = tid & 31, r0 = lane >> 2, cq = lane & 3;
    const float* b1 = reinterpret_cast<const float*>(smw + C::O_B1);
    const float* b2 = reinterpret_cast<const float*>(smw + C::O_B2);
    const u32* L = smw + C::O_LR;
    const u32 w1s = smem_u32(smw + C::O_W1P), w2s = smem_u32(smw + C::O_W2G), w3s = smem_u32(smw + C::O_W3G);
    const u32 bars = ws_bars<C>(smw);
    const int nj = (nz + 3) / 4 * 4;
    constexpr int STEP = WsCfg<C>::NPROD, NG = WsCfg<C>::NG;
    int job0 = wg;
    if (job0 >= nj) return;  // warpgroup-uniform
    // STEP 4: warpgroup wg's jobs wg + 4 q all have phase wg, so their phase matrix, LR columns and Z column do not
    // change, and group q's ring group and lap are counted rather than divided out
    const int py = (wg >> 1) & 1, px = wg & 1;
    int q = job0 >> 2, g = q % NG, lap = q / NG;
    WgFoldJobs<C> cur, nxt;
    u32 a1[1][4][4];
    if constexpr (STEP == 4) cur.load_job(a1[0], 0, L, q, py, px, 0, nz, d0, d1, warp, r0, cq);
    else cur.load(a1, L, job0, nj, 0, nz, d0, d1, warp, r0, cq);
#pragma unroll 1
    for (;; job0 += STEP) {
        const bool more = job0 + STEP < nj;  // warpgroup-uniform
        u32 bw[1];
        bw[0] = w1s + cur.ph[0] * (C::W1P * 4);
        float acc1[1][32];
        tc_wg_gemm_rs_issue(acc1, a1, bw, 2048, 1024);
        wg_wait_all();
        u32 a2[1][4][4];
#pragma unroll
        for (int k = 0; k < 4; ++k) tc_wg_to_a<32>(acc1[0], b1, cq, k, fscale, a2[0][k]);
        bw[0] = w2s;
        float acc2[1][16];
        tc_wg_gemm_rs_issue(acc2, a2, bw, 1024, 512);
        if (more) {  // under conv2's MMAs
            if constexpr (STEP == 4) nxt.load_job(a1[0], 0, L, q + 1, py, px, 0, nz, d0, d1, warp, r0, cq);
            else nxt.load(a1, L, job0 + STEP, nj, 0, nz, d0, d1, warp, r0, cq);
        }
        wg_wait_all();
        u32 a3[1][2][4];
#pragma unroll
        for (int k = 0; k < 2; ++k) tc_wg_to_a<16>(acc2[0], b2, cq, k, 1.f, a3[0][k]);
        bw[0] = w3s;
        float acc3[1][16];
        tc_wg_gemm_rs_issue(acc3, a3, bw, 1024, 512);
        if constexpr (STEP != 4) q = job0 >> 2, g = q % NG, lap = q / NG;
        if (lap > 0) mbar_wait(ws_empty<C>(bars, g), (lap - 1) & 1);  // output rows of group q - NG summed
        wg_wait_all();
        float* zrow = Z + (4 * g + cur.row[0] - 4 * q) * C::RW_ + ws_zcol(cur.col[0]);  // row 4 q + k: ring row 4 g + k
        ws_store_z<C>(zrow, acc3[0], cq);
        mbar_arrive(ws_full<C>(bars, g));
        if (!more) break;
        cur = nxt;
        if constexpr (STEP == 4) {
            ++q;
            if (++g == NG) g = 0, ++lap;
        }
    }
}

// tc_wg_fold_ws with 16 warps or fewer (WsCfg::EARLY: the registers allow it): off the chain's critical path, conv1's
// biases are loaded once, conv2's while its MMAs run, and the next job's conv1 MMAs are issued before this job's Z
// stores, which then run under them (waited for after the stores: ptxas would add that wait at the loop's back edge
// itself, C7517). Measured faster than tc_wg_fold_ws at 16 warps, slower with its bias loads at 20 (BENCHMARKS.md).
template <class C>
__device__ void tc_wg_fold_ws_early(const u32* smw, float* Z, int nz, int d0, int d1, float fscale) {
    static_assert(C::MB2_ == 1, "WS: one job at a time");
    const int tid = threadIdx.x, wg = wg_index(), warp = (tid >> 5) & 3, lane = tid & 31, r0 = lane >> 2, cq = lane & 3;
    const float* b1 = reinterpret_cast<const float*>(smw + C::O_B1);
    const float* b2 = reinterpret_cast<const float*>(smw + C::O_B2);
    const u32* L = smw + C::O_LR;
    const u32 w1s = smem_u32(smw + C::O_W1P), w2s = smem_u32(smw + C::O_W2G), w3s = smem_u32(smw + C::O_W3G);
    const u32 bars = ws_bars<C>(smw);
    const int nj = (nz + 3) / 4 * 4;
    constexpr int STEP = WsCfg<C>::NPROD, NG = WsCfg<C>::NG;
    int job0 = wg;
    if (job0 >= nj) return;  // warpgroup-uniform
    WgFoldJobs<C> cur, nxt;
    u32 a1[1][4][4];
    u32 bw[1];
    float acc1[1][32];
    static_assert(WsCfg<C>::EARLY, "the registers of 16 warps or fewer");
    float2 bb1[8];
    cur.load(a1, L, job0, nj, 0, nz, d0, d1, warp, r0, cq);
#pragma unroll
    for (int j = 0; j < 8; ++j) bb1[j] = *reinterpret_cast<const float2*>(b1 + 8 * j + 2 * cq);
    bw[0] = w1s + cur.ph[0] * (C::W1P * 4);
    tc_wg_gemm_rs_issue(acc1, a1, bw, 2048, 1024);
#pragma unroll 1
    for (;; job0 += STEP) {
        const bool more = job0 + STEP < nj;  // warpgroup-uniform
        wg_wait_all();  // conv1's MMAs (issued before the loop or under the previous job's Z stores)
        // conv2: A = ReLU(conv1 * fscale + b1) (tc_wg_to_a's arithmetic)
        u32 a2[1][4][4];
#pragma unroll
        for (int k = 0; k < 4; ++k)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int jj = 2 * k + h;
                const float2 b = bb1[jj];
                a2[0][k][2 * h] = pack_h2_relu(fmaf(acc1[0][4 * jj], fscale, b.x), fmaf(acc1[0][4 * jj + 1], fscale, b.y));
                a2[0][k][2 * h + 1] =
                    pack_h2_relu(fmaf(acc1[0][4 * jj + 2], fscale, b.x), fmaf(acc1[0][4 * jj + 3], fscale, b.y));
            }
        bw[0] = w2s;
        float acc2[1][16];
        tc_wg_gemm_rs_issue(acc2, a2, bw, 1024, 512);
        if (more) nxt.load(a1, L, job0 + STEP, nj, 0, nz, d0, d1, warp, r0, cq);  // under conv2's MMAs
        float2 bb2[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) bb2[j] = *reinterpret_cast<const float2*>(b2 + 8 * j + 2 * cq);
        wg_wait_all();
        // the Z GEMM: A = ReLU(conv2 + b2) (tc_wg_to_a with scale 1: fmaf(x, 1, b) = x + b)
        u32 a3[1][2][4];
#pragma unroll
        for (int k = 0; k < 2; ++k)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int jj = 2 * k + h;
                const float2 b = bb2[jj];
                a3[0][k][2 * h] = pack_h2_relu(fmaf(acc2[0][4 * jj], 1.f, b.x), fmaf(acc2[0][4 * jj + 1], 1.f, b.y));
                a3[0][k][2 * h + 1] = pack_h2_relu(fmaf(acc2[0][4 * jj + 2], 1.f, b.x), fmaf(acc2[0][4 * jj + 3], 1.f, b.y));
            }
        bw[0] = w3s;
        float acc3[1][16];
        tc_wg_gemm_rs_issue(acc3, a3, bw, 1024, 512);
        const int q = job0 >> 2, g = q % NG;
        if (q >= NG) mbar_wait(ws_empty<C>(bars, g), (q / NG - 1) & 1);  // output rows of group q - NG summed
        wg_wait_all();
        if (more) {  // the next job's conv1 under this job's Z stores
            bw[0] = w1s + nxt.ph[0] * (C::W1P * 4);
            tc_wg_gemm_rs_issue(acc1, a1, bw, 2048, 1024);
        }
        float* zrow = Z + (cur.row[0] % C::CZ) * C::RW_ + ws_zcol(cur.col[0]);
        ws_store_z<C>(zrow, acc3[0], cq);
        mbar_arrive(ws_full<C>(bars, g));
        wg_wait_all();  // the next job's conv1, here rather than at the loop's back edge (C7517)
        if (!more) break;
        cur = nxt;
    }
}

// The sum (the threads after the producers' warpgroups): fused_conv3_rows's arithmetic, in the same order, for
// output rows [0, nout), 4 at a time. A group's 4 rows x 2 column parities are 8 units of 32 outputs (columns
// 2 l + parity, past ncol not stored), one per summing warp at a time; a unit's loads of a plane are 32 consecutive
// words of one phase half (ws_zcol). Output row 4 q + r reads Z rows 4 q + r + dy, dy = 0..4: ring group q's rows
// while r + dy < 4, then group q + 1's; so each row's address is one of two per-group bases plus a constant, and every
// plane and column offset is an immediate of the load.
template <class C, int PJ>
__device__ __forceinline__ void tc_ws_sum_unit(const FusedArgs& a, const float* Z, int o0, int o1, int r, int l, int ncol,
                                               float b3, int y, int ox0) {
    constexpr int RW = C::RW_, PZ = C::PZ;
    const int j = 2 * l + PJ;
    if (j >= ncol) return;
    float part[5];
#pragma unroll
    for (int dy = 0; dy < 5; ++dy) {
        const float* zr = Z + (r + dy < 4 ? o0 : o1) + (r + dy) * RW + l + dy * 5 * PZ;
        part[dy] = zr[PJ * 32];  // column j + dx: word ((PJ + dx) & 1) * 32 + l + (PJ + dx) / 2
#pragma unroll
        for (int dx = 1; dx < 5; ++dx) part[dy] += zr[dx * PZ + ((PJ + dx) & 1) * 32 + (PJ + dx) / 2];
    }
    const float v = b3 + ((part[0] + part[1]) + (part[2] + part[3]) + part[4]);
    fused_store(a, y, ox0 + j, v);
}
// An edge block's unit (tc_ws_edge_block): Z rows and columns outside the frame read the clamped in-frame position,
// as fixup_planar's copies would have made them (the ring's rows by division: edge blocks are few).
template <class C, int PJ>
__device__ __forceinline__ void tc_ws_edge_unit(const FusedArgs& a, const float* Z, int i, int l, int ncol, float b3,
                                                int oy0, int ox0, int zvy, int zvx) {
    constexpr int RW = C::RW_, PZ = C::PZ, NG = WsCfg<C>::NG;
    const int j = 2 * l + PJ;
    if (j >= ncol) return;
    int wc[5];
#pragma unroll
    for (int dx = 0; dx < 5; ++dx) wc[dx] = ws_zcol(clampi(zvx + j + dx, 0, a.W - 1) - zvx);
    float part[5];
#pragma unroll
    for (int dy = 0; dy < 5; ++dy) {
        const int zr = clampi(zvy + i + dy, 0, a.H - 1) - zvy;
        const float* zp = Z + (4 * ((zr >> 2) % NG) + (zr & 3)) * RW + dy * 5 * PZ;
        part[dy] = zp[wc[0]];
#pragma unroll
        for (int dx = 1; dx < 5; ++dx) part[dy] += zp[dx * PZ + wc[dx]];
    }
    const float v = b3 + ((part[0] + part[1]) + (part[2] + part[3]) + part[4]);
    fused_store(a, oy0 + i, ox0 + j, v);
}
template <class C, bool EDGE>
__device__ void tc_ws_sum(const FusedArgs& a, const u32* smw, const float* Z, int nz, int nout, int ncol, int oy0,
                          int ox0, int zvy, int zvx) {
    constexpr int CZ = C::CZ, RW = C::RW_, NG = WsCfg<C>::NG, NWS = WsCfg<C>::NCONS / 32;
    static_assert(CZ == 4 * NG && RW == 64 && WsCfg<C>::NCONS % 32 == 0, "whole ring groups, 64-column rows, warps");
    const u32 bars = ws_bars<C>(smw);
    const float b3 = reinterpret_cast<const float*>(smw)[C::O_B3];
    const int t = threadIdx.x - 128 * WsCfg<C>::NPROD, w = t >> 5, l = t & 31;
    const int ngr = (nz + 3) / 4;
#pragma unroll 1
    for (int q = 0; 4 * q < nout; ++q) {
        mbar_wait(ws_full<C>(bars, q % NG), (q / NG) & 1);
        if (q + 1 < ngr) mbar_wait(ws_full<C>(bars, (q + 1) % NG), ((q + 1) / NG) & 1);
        const int nrow = min(4, nout - 4 * q);
        const int o0 = 4 * (q % NG) * RW;            // Z row 4 q + k at Z + o0 + k * RW (k < 4)
        const int o1 = (4 * ((q + 1) % NG) - 4) * RW;  // and at Z + o1 + k * RW (k >= 4)
#pragma unroll
        for (int u0 = 0; u0 < 8; u0 += NWS) {
            const int u = u0 + w, r = u >> 1;  // warp-uniform
            if (u >= 8 || r >= nrow) continue;
            if constexpr (EDGE) {
                if (u & 1)
                    tc_ws_edge_unit<C, 1>(a, Z, 4 * q + r, l, ncol, b3, oy0, ox0, zvy, zvx);
                else
                    tc_ws_edge_unit<C, 0>(a, Z, 4 * q + r, l, ncol, b3, oy0, ox0, zvy, zvx);
            } else if (u & 1) {
                tc_ws_sum_unit<C, 1>(a, Z, o0, o1, r, l, ncol, b3, oy0 + 4 * q + r, ox0);
            } else {
                tc_ws_sum_unit<C, 0>(a, Z, o0, o1, r, l, ncol, b3, oy0 + 4 * q + r, ox0);
            }
        }
        mbar_arrive(ws_empty<C>(bars, q % NG));
    }
}

// A fold block of a WS kernel, whole. Its input stage with every global load in flight at once: the fold path's
// weights by cp.async (the biases and b3, the phase matrices, conv2's and the Z GEMM's wgmma weights; not the edge
// blocks' fragments), the LR samples into registers first and then to shared memory as tc_load_lr stores them; the
// mbarriers initialised meanwhile; one block barrier. Then the roles.
template <class C, int NT>
__device__ void tc_ws_block(const FusedArgs& a, u32* smw, const u32* __restrict__ weights, const FoldBlock& fb, int nz,
                            int nout, int ncol, int oy0, int ox0, float fscale) {
    const int tid = threadIdx.x;
    const u32 s0 = smem_u32(smw);
    for (int i = tid; i < (C::O_W1F - C::O_B1) / 4; i += NT) cp_async16(s0 + 4 * (C::O_B1 + 4 * i), weights + C::O_B1 + 4 * i);
    for (int i = tid; i < (C::O_LR - C::O_W1P) / 4; i += NT)
        cp_async16(s0 + 4 * (C::O_W1P + 4 * i), weights + C::G_W1P + 4 * i);
    {  // tc_load_lr's samples and stores
        unsigned short* Lh = reinterpret_cast<unsigned short*>(smw + C::O_LR);
        constexpr int LW = 2 * C::LRWW, N = LW + 1, NE = C::LRR * N, K = (NE + NT - 1) / NT;
        unsigned short hv[K];
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int e = tid + k * NT, r = e / N, c = e - r * N;
            hv[k] = e < NE ? f2h(fold_sample(a, fb.ly0 + r, fb.lx0 + c)) : (unsigned short)0;
        }
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int e = tid + k * NT, r = e / N, c = e - r * N;
            if (e < NE) {
                if (c < LW) Lh[r * LW + c] = hv[k];
                if (c >= 1) Lh[2 * C::PLR + r * LW + c - 1] = hv[k];
            }
        }
    }
    if (tid == 0) {
        const u32 bars = ws_bars<C>(smw);
        for (int g = 0; g < WsCfg<C>::NG; ++g) {
            mbar_init(ws_full<C>(bars, g), 4 * 128);
            mbar_init(ws_empty<C>(bars, g), WsCfg<C>::NCONS);
        }
        fence_mbar_init();
    }
    cp_async_wait_all();
    fence_proxy_async();  // the weights are read by wgmma
    __syncthreads();
    float* Z = reinterpret_cast<float*>(smw + C::O_Z);
    if (wg_index() < WsCfg<C>::NPROD) {
        if constexpr (WsCfg<C>::EARLY)
            tc_wg_fold_ws_early<C>(smw, Z, nz, fb.d0, fb.d1, fscale);
        else
            tc_wg_fold_ws<C>(smw, Z, nz, fb.d0, fb.d1, fscale);
    } else
        tc_ws_sum<C, false>(a, smw, Z, nz, nout, ncol, oy0, ox0, 0, 0);
}

// ---------------------------------------------------------------- WS: the edge blocks
//
// A WS kernel's edge blocks (their Z region does not fold: at the frame's edges, or a frame the fold does not serve)
// take the fold blocks' roles and ring protocol on the bicubic tile: the chain runs fused_tc's generic conv1 (K = 96,
// conv1_matrix's tap pairs read from the Y planes as tc_chain_z reads them) and conv2 and the Z GEMM on the warpgroup
// MMA, B by descriptor (W1G, W2G, W3G), one Z row of 64 positions per job (warp w: columns 16 w .. 16 w + 15), so
// group q's 4 jobs are its 4 rows; the summing warps read the ring at replicate-clamped rows and columns
// (tc_ws_edge_unit) instead of after fixup_planar's copies. Biases as tc_chain_z adds them: conv1's and conv2's
// accumulators start from them.
template <class C>
struct WsEdgeCfg {
    static constexpr int O_W1G = C::O_W1F, O_W2G = O_W1G + C::W1G, O_W3G = O_W2G + C::W2F, O_Y = O_W3G + C::W3F;
    static_assert(O_Y + 2 * C::PY <= C::O_Z && O_W2G % 4 == 0 && O_Y % 4 == 0 && C::G_W1G % 4 == 0 &&
                      C::G_W2G % 4 == 0 && C::G_W3G == C::G_W2G + C::W2F && !C::SPLIT_,
                  "WS edge blocks: conv1's, conv2's and the Z GEMM's wgmma weights and the Y planes before the Z ring");
};

// conv1's A for Z row zr (all six K-steps): this lane's positions 16 warp + r0 and + 8, as tc_chain_z's b0 / b8.
template <class C>
__device__ __forceinline__ void ws_edge_load(u32 (&a)[6][4], const u32* Y, int zr, int warp, int r0,
                                             const int (&off)[12]) {
    const int x = 16 * warp + r0;
    const int b0 = (x & 1) * C::PY + zr * C::Y0WW + (x >> 1);
#pragma unroll
    for (int s = 0; s < 6; ++s) {
        a[s][0] = Y[b0 + off[2 * s]];
        a[s][1] = Y[b0 + 4 + off[2 * s]];  // position + 8: four words on in the same parity's plane
        a[s][2] = Y[b0 + off[2 * s + 1]];
        a[s][3] = Y[b0 + 4 + off[2 * s + 1]];
    }
}
// Accumulators (m16n8 C layout, NV / 4 n-tiles) = the bias of their channels.
template <int NV>
__device__ __forceinline__ void ws_bias(float (&acc)[NV], const float* bias, int cq) {
#pragma unroll
    for (int j = 0; j < NV / 4; ++j) {
        const float2 b = *reinterpret_cast<const float2*>(bias + 8 * j + 2 * cq);
        acc[4 * j] = b.x; acc[4 * j + 1] = b.y; acc[4 * j + 2] = b.x; acc[4 * j + 3] = b.y;
    }
}
// ReLU(acc) of n-tiles 2k, 2k + 1 -> the A fragment of K-step k (tc_to_a).
template <int NV>
__device__ __forceinline__ void ws_relu_a(const float (&acc)[NV], int k, u32 (&a)[4]) {
#pragma unroll
    for (int e = 0; e < 4; ++e) a[e] = pack_h2_relu(acc[8 * k + 2 * e], acc[8 * k + 2 * e + 1]);
}

// acc += A x B (KS K-steps of 16, B's K-step k at descriptor address b + k * bk, core matrices lbo bytes apart along
// K): one commit group, not waited for. acc holds its start (the bias), or with ZERO the first K-step ignores it.
template <int NV, int KS, bool ZERO>
__device__ __forceinline__ void ws_gemm(float (&acc)[NV], const u32 (&a)[KS][4], u32 b, int bk, int lbo) {
    wg_fence();
#pragma unroll
    for (int k = 0; k < KS; ++k) {
        const u64 db = wg_make(wg_lo(b, lbo) + k * (bk >> 4), wg_hi(128));
        if constexpr (NV == 32) wgmma_m64n64k16_rs(acc, a[k], db, ZERO ? k : 1);
        else wgmma_m64n32k16_rs(acc, a[k], db, ZERO ? k : 1);
    }
    wg_commit();
}

// The edge chain: Z rows [0, nz), job j = row j, warpgroup wg's jobs wg, wg + NPROD, ... (Each job loads its A
// first: the next job's under conv2's MMAs spills at 20 warps and makes ptxas serialise every wgmma of the kernel.)
// A job past nz recomputes row nz - 1 (its group's) and stores the same bits there again.
template <class C>
__device__ void tc_wg_edge_ws(const u32* smw, float* Z, int nz) {
    typedef WsEdgeCfg<C> E;
    const int tid = threadIdx.x, wg = wg_index(), warp = (tid >> 5) & 3, lane = tid & 31, r0 = lane >> 2, cq = lane & 3;
    const float* b1 = reinterpret_cast<const float*>(smw + C::O_B1);
    const float* b2 = reinterpret_cast<const float*>(smw + C::O_B2);
    const u32* Y = smw + E::O_Y;
    const u32 w1s = smem_u32(smw + E::O_W1G), w2s = smem_u32(smw + E::O_W2G), w3s = smem_u32(smw + E::O_W3G);
    const u32 bars = ws_bars<C>(smw);
    constexpr int STEP = WsCfg<C>::NPROD, NG = WsCfg<C>::NG;
    const int nj = (nz + 3) / 4 * 4;
    int job = wg;
    if (job >= nj) return;  // warpgroup-uniform
    int off[12];
    tc_tap_offsets<C>(off, cq);
#pragma unroll 1
    for (;; job += STEP) {
        const bool more = job + STEP < nj;  // warpgroup-uniform
        const int zr = min(job, nz - 1);
        u32 a1[6][4];
        ws_edge_load<C>(a1, Y, zr, warp, r0, off);
        float acc1[32];
        ws_bias<32>(acc1, b1, cq);
        ws_gemm<32, 6, false>(acc1, a1, w1s, 2048, 1024);
        wg_wait_all();
        u32 a2[4][4];
#pragma unroll
        for (int k = 0; k < 4; ++k) ws_relu_a<32>(acc1, k, a2[k]);
        float acc2[16];
        ws_bias<16>(acc2, b2, cq);
        ws_gemm<16, 4, false>(acc2, a2, w2s, 1024, 512);
        wg_wait_all();
        u32 a3[2][4];
#pragma unroll
        for (int k = 0; k < 2; ++k) ws_relu_a<16>(acc2, k, a3[k]);
        float acc3[16];
#pragma unroll
        for (int e = 0; e < 16; ++e) acc3[e] = 0.f;  // for the compiler: the first K-step ignores them
        ws_gemm<16, 2, true>(acc3, a3, w3s, 1024, 512);
        const int q = job >> 2, g = q % NG, lap = q / NG;
        if (lap > 0) mbar_wait(ws_empty<C>(bars, g), (lap - 1) & 1);  // output rows of group q - NG summed
        wg_wait_all();
        ws_store_z<C, 4>(Z + (4 * g + (zr & 3)) * C::RW_ + ws_zcol(16 * warp + r0), acc3, cq);
        mbar_arrive(ws_full<C>(bars, g));
        if (!more) break;
    }
}

// An edge block of a WS kernel, whole: the weights it reads by cp.async (biases, W1G, W2G and W3G), the bicubic
// tile into the Y planes as the chunked path writes them (fused_bicubic: its scratch is the Z ring, so the
// mbarriers are initialised after its closing barrier), one block barrier, then the roles.
template <class C, int NT>
__device__ void tc_ws_edge_block(const FusedArgs& a, u32* smw, const u32* __restrict__ weights, int nz, int nout,
                                 int ncol, int oy0, int ox0, int zvy, int zvx) {
    typedef WsEdgeCfg<C> E;
    const int tid = threadIdx.x;
    const u32 s0 = smem_u32(smw);
    for (int i = tid; i < (C::O_W1F - C::O_B1) / 4; i += NT) cp_async16(s0 + 4 * (C::O_B1 + 4 * i), weights + C::O_B1 + 4 * i);
    for (int i = tid; i < C::W1G / 4; i += NT) cp_async16(s0 + 4 * (E::O_W1G + 4 * i), weights + C::G_W1G + 4 * i);
    for (int i = tid; i < (C::W2F + C::W3F) / 4; i += NT)
        cp_async16(s0 + 4 * (E::O_W2G + 4 * i), weights + C::G_W2G + 4 * i);
    float* Z = reinterpret_cast<float*>(smw + C::O_Z);
    unsigned short* Yh = reinterpret_cast<unsigned short*>(smw + E::O_Y);
    fused_bicubic(a, oy0 - C::HAL, C::Y0ROWS, ox0 - C::HAL, C::Y0W + 1, a.first0[a.rows_first ? blockIdx.x : blockIdx.y],
                  Z, [&](int r, int c, float v) {  // as fused_tc's chunked path (SPLIT false)
                      const unsigned short hh = f2h(v);
                      const int i = r * C::Y0W + c;
                      if (c < C::Y0W) Yh[i] = hh;
                      if (c >= 1) Yh[2 * C::PY + i - 1] = hh;
                  });
    if (tid == 0) {
        const u32 bars = ws_bars<C>(smw);
        for (int g = 0; g < WsCfg<C>::NG; ++g) {
            mbar_init(ws_full<C>(bars, g), 4 * 128);
            mbar_init(ws_empty<C>(bars, g), WsCfg<C>::NCONS);
        }
        fence_mbar_init();
    }
    cp_async_wait_all();
    fence_proxy_async();  // the weights and the Y planes are read by wgmma / the chain
    __syncthreads();
    if (wg_index() < WsCfg<C>::NPROD)
        tc_wg_edge_ws<C>(smw, Z, nz);
    else
        tc_ws_sum<C, true>(a, smw, Z, nz, nout, ncol, oy0, ox0, zvy, zvx);
}

// ---------------------------------------------------------------- the kernel

// fold: fused_common.cu's fold_block; fscale = 2^-e / max_value (acc * fscale + b1 after conv1).
// MINB: blocks per SM the register allocation leaves room for (__launch_bounds__); SPART: TcCfg.
// WG: conv2 on the warpgroup MMA (built for sm_90a only; the section above).
template <int F2, bool SPLIT, int TH, int RW, int R, int NT, int MB1, int MB2, bool FOLD, bool STREAM, int MINB = 1,
          int SPART = 0, bool WG = false, bool WS = false>
__global__ void __launch_bounds__(NT, MINB) fused_tc(FUSED_PARAMS, const u32* __restrict__ weights,
                                                     const int* __restrict__ fold, float fscale) {
    FUSED_ARGS_INIT
    typedef TcCfg<F2, SPLIT, TH, RW, R, NT, MB1, MB2, FOLD, STREAM, SPART, WG> C;
    extern __shared__ __align__(16) u32 smw[];
    if (dynamic_smem_bytes() < C::TOTAL * 4u) __trap();
    const int ox0 = blockIdx.x * C::TW, oy0 = blockIdx.y * TH;
    const int nout = min(TH, a.H - oy0), ncol = min(C::TW, a.W - ox0);
    const int nz = nout + 4;
    const int zvy = oy0 - 2, zvx = ox0 - 2;
    FoldBlock fb = {false, 0, 0, 0, 0};
    // the region conv1 computes: the Z region, or with F2 > 1 the A1 window's (an H2 halo more on each side)
    if constexpr (FOLD) fb = fold_block(a, fold, zvy - C::H2, nz + 2 * C::H2, zvx - C::H2, C::RW1);
    const bool folding = fb.on;
    if constexpr (WS) {  // warps specialised, no chunks (tc_ws_block, tc_ws_edge_block); block-uniform
        if (folding)
            tc_ws_block<C, NT>(a, smw, weights, fb, nz, nout, ncol, oy0, ox0, fscale);
        else
            tc_ws_edge_block<C, NT>(a, smw, weights, nz, nout, ncol, oy0, ox0, zvy, zvx);
        return;
    } else {
        static_assert(!WG || F2 > 1 || NT % 128 == 0, "WG for f2 = 1 without WS: whole warpgroups");
    }
    {
        const uint4* src = reinterpret_cast<const uint4*>(weights);
        uint4* dst = reinterpret_cast<uint4*>(smw);
        if constexpr (STREAM) {  // conv2's fragments come a tap row at a time (tc_conv2_ring_z_stream)
            if constexpr (SPART > 0) tc_stream_part<C, F2, NT>(smw, weights, 0, 0);  // part 0 under the bicubic
            for (int i = threadIdx.x; i < (C::O_W1F - C::O_W3F) / 4; i += NT)
                dst[C::O_W3F / 4 + i] = __ldg(src + C::G_W3F / 4 + i);
        } else {  // the global array's prefix as it is
            for (int i = threadIdx.x; i < C::O_W1F / 4; i += NT) dst[i] = __ldg(src + i);
        }
        if (folding) {
            for (int i = threadIdx.x; i < (C::O_LR - C::O_W1P) / 4; i += NT)
                dst[C::O_W1P / 4 + i] = __ldg(src + C::G_W1P / 4 + i);
            if constexpr (C::WGF) fence_proxy_async();  // read by wgmma after tc_load_lr's barrier
        } else {
            for (int i = threadIdx.x; i < C::NSPL * C::W1F / 4; i += NT) dst[C::O_W1F / 4 + i] = __ldg(src + C::G_W1F / 4 + i);
        }
    }
    float* Z = reinterpret_cast<float*>(smw + C::O_Z);
    int off[12];  // word offsets of this lane's tap pairs: K-step s uses off[2s] (k) and off[2s+1] (k + 8)
    if (folding) {
        tc_load_lr<C, NT>(a, smw, fb.ly0, fb.lx0);
    } else {
        tc_tap_offsets<C>(off, threadIdx.x & 3);
        unsigned short* Yh = reinterpret_cast<unsigned short*>(smw + C::O_Y);
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
        if (a.out_mode == OUT_BICUBIC) {  // the host asks the fp32 kernel for that
            if constexpr (STREAM && SPART > 0) cp_async_wait_all();
            return;
        }
    }
    const float b3 = reinterpret_cast<const float*>(smw)[C::O_B3];
    int z_done = 0, a1_done = 0, out_done = 0;
    int spart_next = 0;  // SPART: the next streamed part of conv2's fragments (tc_conv2_ring_z_pipe)
    while (out_done < nout) {
        const int z_t = min(z_done + R, nz);
        if constexpr (F2 > 1) {
            u32* A1 = smw + C::O_A1;
            const int a_t = z_t + 2 * C::H2;
            if constexpr (WG) {  // the A1 window starts at the chunk's first row (tc_wg_conv2_z)
                if (z_done > 0) tc_wg_shift_a1<C>(A1);
                if constexpr (FOLD) {
                    if (folding)
                        tc_conv1_ring_fold<C>(smw, A1, a1_done, a_t, z_done, fb.d0, fb.d1, fscale);
                    else
                        tc_conv1_ring<C>(smw, A1, a1_done, a_t, off, z_done);
                } else {
                    tc_conv1_ring<C>(smw, A1, a1_done, a_t, off, z_done);
                }
                __syncthreads();
                tc_fixup_a1_wg<C>(A1, a1_done, a_t, z_done, zvy - C::H2, zvx - C::H2, a.H, a.W);
                a1_done = a_t;
            } else if (a_t > a1_done) {
                tc_conv1_ring<C>(smw, A1, a1_done, a_t, off);
                __syncthreads();
                tc_fixup_a1<C>(A1, a1_done, a_t, zvy - C::H2, zvx - C::H2, a.H, a.W);
                a1_done = a_t;
            }
            if constexpr (WG)
                spart_next = tc_wg_conv2_z<C, F2, NT>(smw, weights, A1, Z, z_done, z_t, spart_next, z_t < nz);
            else if constexpr (STREAM && SPART > 0)
                spart_next = tc_conv2_ring_z_pipe<C, F2, NT>(smw, weights, A1, Z, z_done, z_t, spart_next, z_t < nz);
            else if constexpr (STREAM)
                tc_conv2_ring_z_stream<C, F2, NT>(smw, weights, A1, Z, z_done, z_t);
            else
                tc_conv2_ring_z<C, F2>(smw, A1, Z, z_done, z_t);
        } else {
            if constexpr (FOLD) {
                if (folding) {
                    if constexpr (WG)
                        tc_wg_fold_z<C>(smw, Z, z_done, z_t, fb.d0, fb.d1, fscale);
                    else
                        tc_chain_z_fold<C>(smw, Z, z_done, z_t, fb.d0, fb.d1, fscale);
                } else
                    tc_chain_z<C>(smw, Z, z_done, z_t, off);
            } else {
                tc_chain_z<C>(smw, Z, z_done, z_t, off);
            }
        }
        out_done = fused_z_tail<C::CZ, C::PZ, RW>(a, Z, b3, z_done, z_t, out_done, nout, ncol, oy0, ox0, zvy, zvx);
        z_done = z_t;
    }
}

template <int F2, bool SPLIT, int TH, int RW, int R, int NT, int MB1, int MB2, bool FOLD, bool STREAM, int MINB = 1,
          int SPART = 0, bool WG = false, bool WS = false>
__global__ void fused_tc_layout(int* out) {  // MINB and WS move nothing: the same arguments as fused_tc
    typedef TcCfg<F2, SPLIT, TH, RW, R, NT, MB1, MB2, FOLD, STREAM, SPART, WG> C;
    out[0] = C::TOTAL * 4; out[1] = TH; out[2] = C::TW; out[3] = C::Y0ROWS; out[4] = C::Y0W + 1;
    out[5] = 25 * C::PZ; out[6] = NT; out[7] = C::PACKED; out[8] = C::O_W1F;
}
