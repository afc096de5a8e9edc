// The row-streamed fused 9-5-5 tile (fp16-fast, sm_90a only): one block computes TH output rows x 60 columns,
// streaming conv1's output (A1) a row at a time from two producer warpgroups to one consumer warpgroup.
//
// Why: fused_tc.cu's WG tile reads both wgmma operands of conv2 from shared memory (24 wavefronts per MMA)
// and is bound by the shared-memory data pipe. Here conv2's A comes from registers, loaded once per A1 row and
// reused by the 5 tap rows (dy), with all 25 taps' weights resident: ~11 wavefronts per MMA
// (dev/cuda/wgmma_conv2_dy.cu, wgmma_conv23_dy.py: the prototypes, BENCHMARKS.md).
//
// Geometry (tile-local rows): A1 rows rho = 0 .. TH + 7 (frame row oy0 - 4 + rho, 68 columns from ox0 - 4);
// conv2 / Z rows z = 0 .. TH + 3 (frame oy0 - 2 + z, 64 columns from ox0 - 2); output rows o = 0 .. TH - 1
// (oy0 + o, 60 columns from ox0). An MMA's M = 64 rows are the 64 Z columns of one row.
//
// Warpgroup 0, the consumer (setmaxnreg 240): for A1 row rho, 20 A fragments (dx, K-step) by ldmatrix, each
// the A of up to 5 wgmma m64n32k16 (B = conv2's weights W(dy, dx, ks) by descriptor) into conv2 row rho - dy;
// 6 rolling accumulator tiles. Conv2 row rho - 5, complete once row rho - 1's MMAs retired: ReLU(+ b2) as fp16
// in registers, the Z GEMM (2 MMAs, K = 32 channels, N = 25 taps padded to 32) into the tile's own registers,
// the 25 Z values per position to a Z ring of 6 rows; output row rho - 10 = b3 + the shifted sum of Z rows
// rho - 10 .. rho - 6 (the replicate border: columns clamped by per-lane load bases; Z rows above and below the
// frame hold copies of its first and last rows, RowsCons::zstore).
// Warpgroups 1, 2, the producers (setmaxnreg 128): conv1 of A1 row rho into ring slot rho % NS (mma.sync, one
// 16-position block per warp): from the LR samples through the phase filters on fold blocks (as
// tc_conv1_ring_fold), otherwise from the bicubic tile (as tc_conv1_ring), each position computed at its clamped
// frame position (the replicate border of A1). Named barriers: FULL[s] (producers arrive, the consumer waits),
// EMPTY[s] (the consumer arrives once its ldmatrix of the slot's row are done, the producers wait). Output rows go
// from the consumer's sums through a staging ring to the producers, which store them (fused_store) after the EMPTY
// that follows: the consumer has no branch and no global store.
#include "fused_tc.cu"

template <int TH, int NS>
struct RowsCfg {
    // the names tc_conv1 / tc_mma_passes / tc_load_lr read (fused_tc.cu TcCfg)
    static constexpr bool SPLIT_ = false;
    static constexpr bool WG_ = true;
    static constexpr int NT = 384;
    static constexpr int H2 = 2, HAL = 8, RW = 64, TW = 60, RW1 = 68;
    static constexpr int R = TH + 4;   // conv2 / Z rows
    static constexpr int NA = TH + 8;  // A1 rows
    static constexpr int Y0ROWS = TH + 2 * HAL;
    static constexpr int Y0W = (RW1 + 10 + 3) / 4 * 4, Y0WW = Y0W / 2;
    static constexpr int PY0 = Y0ROWS * Y0WW;
    static constexpr int PY = PY0 + (48 - PY0 % 32) % 32;
    static constexpr int LRR = (TH + 3 + 2 * H2) / 2 + 9;
    static constexpr int LRWW = (RW1 + 3) / 4 + 5;
    static constexpr int PLR0 = LRR * LRWW;
    static constexpr int PLR = PLR0 + (48 - PLR0 % 32) % 32;
    static constexpr int W1F = 6 * 4 * 32 * 4;  // conv1's B fragments (bicubic path), words
    static constexpr int W1P = 4 * 4 * 32 * 4;  // one phase filter's B fragments (fold path), words
    static constexpr int W2F = 25 * 4 * 2 * 32 * 4;  // conv2, wgmma layout [tap][g 8][n 32][8], words
    static constexpr int W3F = 2 * 2 * 32 * 4;       // the Z GEMM's weights, 512 words
    // the packed global array (pack.pack_tc with wg, fold, rows): [W2 (wgmma) | W3 fragments | b1 | b2 | b3 0 0 0 |
    // W1 fragments | 4 phase filters' fragments | W3 in wgmma's layout [g 4][tap 32][8]]
    static constexpr int G_B1 = W2F + W3F;
    static constexpr int G_W1F = G_B1 + 100;
    static constexpr int G_W1P = G_W1F + W1F;
    static constexpr int G_W3G = G_W1P + 4 * W1P;
    static constexpr int PACKED = G_W3G + W3F;
    // shared memory, 32-bit words
    static constexpr int O_W2 = 0;
    static constexpr int O_W3G = O_W2 + W2F;
    static constexpr int O_B1 = O_W3G + W3F;
    static constexpr int O_B2 = O_B1 + 64;
    static constexpr int O_B3 = O_B2 + 32;
    static constexpr int O_IN = O_B3 + 4;
    static constexpr int O_W1F = O_IN, O_Y = O_W1F + W1F;  // bicubic path: conv1's fragments, Y planes E, O
    static constexpr int O_W1P = O_IN, O_LR = O_W1P + 4 * W1P;  // fold path: phase fragments, LR planes E, O
    static constexpr int END_BIC = O_Y + 2 * PY, END_FOLD = O_LR + 2 * PLR;
    static constexpr int O_A1 = ((END_BIC > END_FOLD ? END_BIC : END_FOLD) + 31) / 32 * 32;
    // A1 ring: slot s, channel group g, column c at byte s SLOT + g GS + 16 c (GS = 16 mod 128: ldmatrix and the
    // bicubic path's stores conflict-free)
    static constexpr int GS = RW1 * 16 + 80;
    static constexpr int SLOT = 8 * GS;
    static constexpr int ZR = 6;            // Z ring rows
    static constexpr int ZPS = ZR * 64 + 4;  // Z plane stride, words: a store's 8 columns x 4 tap pairs hit 32 banks
    static constexpr int O_Z = O_A1 + NS * SLOT / 4;
    static constexpr int O_OUT = O_Z + 26 * ZPS;  // 25 taps + a scratch plane (taps 25..31 of the padded GEMM)
    static constexpr int TOTAL = O_OUT + 6 * 64;  // output staging: row o in slot o % 6, 64 fp32
    static constexpr int MB1_ = 1;
    static_assert(TH % 2 == 0 && R % 6 == 0 && TH >= 8, "TH: even (the fold's A1 origin), TH + 4 a multiple of 6");
    static_assert(6 % NS == 0 && NS >= 2, "ring slots divide the consumer's 6-row unroll");
    static_assert(GS % 128 == 16 && SLOT % 16 == 0 && O_IN % 4 == 0 && O_Y % 4 == 0 && O_LR % 4 == 0, "alignment");
    static_assert((2 * ZPS) % 32 == 8, "Z stores conflict-free");
    static_assert(TOTAL * 4 <= 232448, "227 KB of shared memory per block");
};

// Named barriers (0 is __syncthreads'): FULL[s] = 1 + s, EMPTY[s] = 1 + NS + s, the consumer's own 1 + 2 NS, and
// DONE = 2 + 2 NS (the consumer's last two output rows staged).
__device__ __forceinline__ void rows_bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void rows_bar_arrive(int id, int n) {
    asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void rows_ldsm(u32 (&a)[4], u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(addr) : "memory");
}
// registers the compiler must not move across the surrounding volatile asm (CUTLASS' warpgroup_fence_operand)
__device__ __forceinline__ void rows_pin(float (&d)[16]) {
#pragma unroll
    for (int k = 0; k < 16; ++k) asm volatile("" : "+f"(d[k])::"memory");
}
__device__ __forceinline__ void rows_sts(u32 addr, float v) { asm volatile("st.shared.f32 [%0], %1;" :: "r"(addr), "f"(v) : "memory"); }
// predicated (on != 0), not branched: 0 where off
__device__ __forceinline__ float rows_lds_if(u32 addr, u32 on) {
    float v = 0.f;
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n@p ld.shared.f32 %0, [%1];\n}\n"
                 : "+f"(v) : "r"(addr), "r"(on) : "memory");
    return v;
}
__device__ __forceinline__ void rows_sts_if(u32 addr, float v, u32 on) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n@p st.shared.f32 [%0], %1;\n}\n"
                 :: "r"(addr), "f"(v), "r"(on) : "memory");
}

// ------------------------------------------------------------------------------------------------ producers

// conv1 of A1 row rho (tile-local) of a fold block, block `blk` (0..5: column phase blk / 3, positions 16 (blk % 3)
// .. + 15 of the phase's 34 columns px + 2 i), from the LR planes: as tc_conv1_ring_fold for one row.
template <class C>
__device__ __forceinline__ void rows_conv1_fold(const u32* smw, u32* slot, int rho, int blk, int d0, int d1, float fscale) {
    const int lane = threadIdx.x & 31, r0 = lane >> 2, cq = lane & 3;
    const int py = rho & 1, px = blk >= 3 ? 1 : 0, i0 = (blk - 3 * px) * 16 + r0;
    const int dr = py ? d1 : d0, dc = px ? d1 : d0;
    const float* b1 = reinterpret_cast<const float*>(smw + C::O_B1);
    const u32* L = smw + C::O_LR;
    int bw[2], col[2];
    bool ok[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int i = i0 + 8 * h;
        ok[h] = i < C::RW1 / 2;
        const int ic = min(i, C::RW1 / 2 - 1);
        col[h] = px + 2 * ic;
        const int lrow = (rho >> 1) + dr, lcol = ic + dc;
        bw[h] = (lcol & 1) * C::PLR + lrow * C::LRWW + (lcol >> 1) + cq;
    }
    const uint4* Wp = reinterpret_cast<const uint4*>(smw + C::O_W1P + (py * 2 + px) * C::W1P) + lane;
    float acc[1][8][4];
    tc_zero<1, 8>(acc);
    {
        u32 a[2][1][4];
        uint4 bh[2][4];
        auto load = [&](int s, u32 (&am)[1][4], uint4 (&b_h)[4]) {
            am[0][0] = L[bw[0] + 2 * s * C::LRWW];
            am[0][1] = L[bw[1] + 2 * s * C::LRWW];
            am[0][2] = L[bw[0] + (2 * s + 1) * C::LRWW];
            am[0][3] = L[bw[1] + (2 * s + 1) * C::LRWW];
#pragma unroll
            for (int jp = 0; jp < 4; ++jp) b_h[jp] = Wp[(s * 4 + jp) * 32];
        };
        load(0, a[0], bh[0]);
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            if (s + 1 < 4) load(s + 1, a[(s + 1) & 1], bh[(s + 1) & 1]);
            tc_mma_passes<C, 1, 4, 8, true>(acc, a[s & 1], a[s & 1], bh[s & 1], bh[s & 1]);
        }
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const float2 b = *reinterpret_cast<const float2*>(b1 + 8 * j + 2 * cq);
        if (ok[0]) slot[j * (C::GS / 4) + col[0] * 4 + cq] = pack_h2_relu(fmaf(acc[0][j][0], fscale, b.x), fmaf(acc[0][j][1], fscale, b.y));
        if (ok[1]) slot[j * (C::GS / 4) + col[1] * 4 + cq] = pack_h2_relu(fmaf(acc[0][j][2], fscale, b.x), fmaf(acc[0][j][3], fscale, b.y));
    }
}

// conv1 of A1 row rho from the bicubic tile, block `blk` (0..4: columns 16 blk .. + 15 of 68), each position at its
// clamped frame position (a1y0 / a1x0: the A1 origin in the frame; the Y tile's row r, half c hold the bicubic of
// frame row a1y0 - 4 + r, column a1x0 - 4 + c, so A1 position (r, c) reads Y from (r, c)).
template <class C>
__device__ __forceinline__ void rows_conv1_bicubic(const u32* smw, u32* slot, int rho, int blk, const int (&off)[12],
                                                   int a1y0, int a1x0, int H, int W) {
    const int lane = threadIdx.x & 31, r0 = lane >> 2, cq = lane & 3;
    const int ry = clampi(a1y0 + rho, 0, H - 1) - a1y0;
    int b0[1], b8[1], col[2];
    bool ok[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int c = blk * 16 + r0 + 8 * h;
        ok[h] = c < C::RW1;
        col[h] = c;
        const int cx = clampi(a1x0 + min(c, C::RW1 - 1), 0, W - 1) - a1x0;
        const int b = (cx & 1) * C::PY + ry * C::Y0WW + (cx >> 1);
        if (h == 0) b0[0] = b; else b8[0] = b;
    }
    const float* b1 = reinterpret_cast<const float*>(smw + C::O_B1);
    float acc[1][8][4];
    tc_bias_init<C, 1, 8>(b1, acc, cq);
    tc_conv1<C, 1>(smw, b0, b8, off, acc, lane);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        if (ok[0]) slot[j * (C::GS / 4) + col[0] * 4 + cq] = pack_h2_relu(acc[0][j][0], acc[0][j][1]);
        if (ok[1]) slot[j * (C::GS / 4) + col[1] * 4 + cq] = pack_h2_relu(acc[0][j][2], acc[0][j][3]);
    }
}

// ------------------------------------------------------------------------------------------------ consumer

// d (m64n32, f32) = A (registers) x B (descriptor) + (ACC ? d : 0)
template <int ACC>
__device__ __forceinline__ void rows_mma(float (&d)[16], const u32 (&a)[4], u64 db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
        "{%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(ACC));
}

// What the consumer does with conv2 row rho - 5 and output row rho - 10 during A1 row rho (the prototype's DzCons).
// No branches: a branch between the wgmma of a row makes ptxas keep their descriptors in spilled registers.
template <class C>
struct RowsCons {
    float bv[8];   // b2 at this lane's channel pairs (8 j + 2 cq, + 1)
    u32 a3[2][4];  // A2 of the ready row: the Z GEMM's A, K-steps 0, 1
    u64 db;        // conv2's descriptor (W2 at offset 0): W3's is db + DW3
    u32 zst;       // Z store address of this lane: column 16 warp + lane / 4, plane 0, ring row 0
    u32 zb[5];     // Z load bases of this lane for load i (i % 5): its column's clamped (column + dx), ring row 0
    u32 stage;     // output staging address of this lane's column, slot 0 (lanes 16..31: the same as lane - 16)
    int h;         // tap half of the sum: lane / 16
    int cq;
    float b3;
    int ztop;      // 2 - zvy: the Z row of frame row 0 (2 on the frame's first tile row)
    int zbot;      // H - zvy: the first Z row below the frame

    static constexpr int DW3 = (C::O_W3G - C::O_W2) * 4 / 16;

    __device__ __forceinline__ void ready(const float (&d)[16]) {
#pragma unroll
        for (int k = 0; k < 2; ++k)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const int j = 2 * k + hh;
                a3[k][2 * hh] = pack_h2_relu(d[4 * j] + bv[2 * j], d[4 * j + 1] + bv[2 * j + 1]);
                a3[k][2 * hh + 1] = pack_h2_relu(d[4 * j + 2] + bv[2 * j], d[4 * j + 3] + bv[2 * j + 1]);
            }
    }
    // after the fragment's wgmma.fence (which also covers a3's writes): Z = A2 x W3 into the finished tile
    __device__ __forceinline__ void issue(float (&d)[16]) {
        u64 b;
        asm volatile("mov.b64 %0, %1;" : "=l"(b) : "l"(db));
        b += (u64)DW3;
        rows_mma<0>(d, a3[0], b);
        rows_mma<1>(d, a3[1], b + 64u);  // K-step 1: 2 channel groups (1024 bytes) on
    }
    // Z row z (the tile d, retired) into ring row SL. The replicate border: a row below the frame takes the row
    // above's values (ring row SL - 1, as this lane stored them), and the frame's first row is stored into the two
    // rows above it as well; predicated, not branched.
    template <int SL>
    __device__ __forceinline__ void zstore(const float (&d)[16], int z) {
        u32 zs;  // opaque: otherwise the 8 addresses per ring row are hoisted out of the row loop (registers)
        asm volatile("mov.b32 %0, %1;" : "=r"(zs) : "r"(zst));
        const u32 below = z >= zbot, first = z == ztop;
        constexpr int UP1 = ((SL + 5) % 6) * 64 * 4, UP2 = ((SL + 4) % 6) * 64 * 4, HERE = SL * 64 * 4;
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const int t = min(8 * j + 2 * cq + c, 25);  // taps 25..31 (zero weights): the scratch plane
                const u32 ad = zs + (u32)(t * C::ZPS * 4);
#pragma unroll
                for (int m = 0; m < 2; ++m) {  // M row + 8: column + 8
                    float v = d[4 * j + 2 * m + c];
                    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n@p ld.shared.f32 %0, [%1];\n}\n"
                                 : "+f"(v) : "r"(ad + 32 * m + UP1), "r"(below) : "memory");
                    rows_sts(ad + 32 * m + HERE, v);
                    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n@p st.shared.f32 [%0], %3;\n"
                                 "@p st.shared.f32 [%1], %3;\n}\n"
                                 :: "r"(ad + 32 * m + UP1), "r"(ad + 32 * m + UP2), "r"(first), "f"(v) : "memory");
                }
            }
    }
    // output row o from Z ring rows S0 .. S0 + 4 (mod 6) into staging row S0 (lanes 0..15: their columns); the
    // producers store it to the frame. Rows o < 0 (the first 10 A1 rows) read and store nothing: their Z rows are
    // not all written yet, and rows 0 and 1 of a first tile row are (zstore's copies) in the same step.
    template <int S0>
    __device__ __forceinline__ void sum(int o) {
        const u32 on = o >= 0;
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 13; ++i) {
            const int t0 = i, t1 = 13 + i < 25 ? 13 + i : 0;
            const int off0 = (t0 * C::ZPS + ((S0 + t0 / 5) % 6) * 64) * 4;
            const int off1 = (t1 * C::ZPS + ((S0 + t1 / 5) % 6) * 64) * 4;
            u32 base;  // opaque, as in zstore
            asm volatile("mov.b32 %0, %1;" : "=r"(base) : "r"(zb[i % 5]));
            float v = rows_lds_if(base + (u32)(off0 + h * (off1 - off0)), on);
            if (i == 12) v = h ? 0.f : v;  // the upper half has 12 taps
            s += v;
        }
        s += __shfl_xor_sync(0xffffffffu, s, 16);
        rows_sts_if(stage + S0 * 64 * 4, s + b3, on & (h ^ 1));  // lanes 16..31 hold the same sums
    }
    template <int TA>
    __device__ __forceinline__ void after(int k, float (&d)[16], int rho) {
        if (k == 3) {  // the Z GEMM of fragment 1 has retired (the wait before this fragment)
            rows_pin(d);
            zstore<(TA + 1) % 6>(d, rho - 5);
        }
        if (k == 10) sum<(TA + 2) % 6>(rho - 10);
    }
};

// One A1 row rho (compile-time phase TA = rho % 6, ring slot S = rho % NS): wait until the producers filled it, then
// 20 fragments x the dy in [DY0, DY1]; release the slot. Two A buffers: before fragment k's ldmatrix,
// wgmma.wait_group 1 retires the MMAs that read its buffer (fragment k - 2); at k = 1 that also retires row
// rho - 1's last MMAs, so conv2 row rho - 5 (tile (TA + 1) % 6) is complete: converted there, its Z GEMM issued
// with fragment 1's MMAs, stored to the Z ring at k = 3, and output row rho - 10 summed at k = 10.
template <class C, int NS, int TA, int DY0, int DY1>
__device__ __forceinline__ void rows_step(float (&acc)[6][16], u32 (&a)[2][4], int rho, u32 alane, u64 db,
                                          RowsCons<C>& cons) {
    constexpr int S = TA % NS;
    constexpr int tp = (TA + 1) % 6;  // tile of conv2 row rho - 5
    rows_bar_sync(1 + S, C::NT);
#pragma unroll
    for (int k = 0; k < 20; ++k) {  // k = 4 dx + ks
        const int dx = k >> 2, ks = k & 3, buf = k & 1;
        wg_wait<1>();
        if (k == 1 && DY1 >= 0) {
            rows_pin(acc[tp]);
            cons.ready(acc[tp]);
        }
        rows_ldsm(a[buf], alane + (u32)(S * C::SLOT + dx * 16 + 2 * ks * C::GS));
        wg_fence();
        u64 dbf;
        asm volatile("mov.b64 %0, %1;" : "=l"(dbf) : "l"(db));
#pragma unroll
        for (int dy = DY0; dy <= DY1; ++dy) {
            const u64 b = dbf + (u64)(((dy * 5 + dx) * 8 + 2 * ks) * 32);
            const int tile = (TA - dy + 6) % 6;
            if (dy == 0 && k == 0) rows_mma<0>(acc[tile], a[buf], b);
            else rows_mma<1>(acc[tile], a[buf], b);
        }
        if (k == 1 && DY1 >= 0) cons.issue(acc[tp]);
        wg_commit();
        cons.template after<TA>(k, acc[tp], rho);
    }
    rows_bar_arrive(1 + NS + S, C::NT);  // every ldmatrix of the slot has returned (its registers were read)
}

template <int TH, int NS>
__global__ void __launch_bounds__(384, 1) fused_tc_rows(FUSED_PARAMS, const u32* __restrict__ weights,
                                                        const int* __restrict__ fold, float fscale) {
    FUSED_ARGS_INIT
    typedef RowsCfg<TH, NS> C;
    extern __shared__ __align__(128) u32 smw[];
    if (dynamic_smem_bytes() < C::TOTAL * 4u) __trap();
    const int tid = threadIdx.x, lane = tid & 31, cq = lane & 3;
    const int ox0 = blockIdx.x * C::TW, oy0 = blockIdx.y * TH;
    const int nout = min(TH, a.H - oy0), ncol = min(C::TW, a.W - ox0);
    const int a1y0 = oy0 - 4, a1x0 = ox0 - 4;
    const FoldBlock fb = fold_block(a, fold, a1y0, nout + 8, a1x0, C::RW1);
    const bool folding = fb.on;
    {  // weights: conv2's (wgmma layout), W3 (wgmma layout), biases, and the path's conv1 fragments
        const uint4* src = reinterpret_cast<const uint4*>(weights);
        uint4* dst = reinterpret_cast<uint4*>(smw);
        for (int i = tid; i < C::W2F / 4; i += C::NT) dst[i] = __ldg(src + i);
        for (int i = tid; i < C::W3F / 4; i += C::NT) dst[C::O_W3G / 4 + i] = __ldg(src + C::G_W3G / 4 + i);
        if (tid < 100) smw[C::O_B1 + tid] = __ldg(weights + C::G_B1 + tid);
        if (folding) {
            for (int i = tid; i < 4 * C::W1P / 4; i += C::NT) dst[C::O_W1P / 4 + i] = __ldg(src + C::G_W1P / 4 + i);
        } else {
            for (int i = tid; i < C::W1F / 4; i += C::NT) dst[C::O_W1F / 4 + i] = __ldg(src + C::G_W1F / 4 + i);
        }
        fence_proxy_async();  // W2, W3: read by the tensor cores after the input stage's barrier
    }
    int off[12];  // bicubic path: word offsets of this lane's tap pairs (fused_tc's)
#pragma unroll
    for (int i = 0; i < 12; ++i) {
        const int p = 8 * (i >> 1) + 4 * (i & 1) + cq;
        off[i] = p < 45 ? (p / 5) * C::Y0WW + p % 5 : 8 * C::Y0WW + (p - 45);
    }
    if (folding) {
        tc_load_lr<C, C::NT>(a, smw, fb.ly0, fb.lx0);
    } else {
        unsigned short* Yh = reinterpret_cast<unsigned short*>(smw + C::O_Y);
        fused_bicubic(a, oy0 - C::HAL, C::Y0ROWS, ox0 - C::HAL, C::Y0W + 1, a.first0[a.rows_first ? blockIdx.x : blockIdx.y],
                      reinterpret_cast<float*>(smw + C::O_A1), [&](int r, int c, float v) {
                          // even-start copy: halves c; odd-start copy: halves c - 1 (pairs (c-1, c))
                          const unsigned short hh = f2h(v);
                          const int i = r * C::Y0W + c;
                          if (c < C::Y0W) Yh[i] = hh;
                          if (c >= 1) Yh[2 * C::PY + i - 1] = hh;
                      });
        if (a.out_mode == OUT_BICUBIC) return;  // the host asks the fp32 kernel for that
    }
    u32* ring = smw + C::O_A1;
    // registers: the block holds 384 x 168 (the launch bound); setmaxnreg moves them within that pool, 128 x 240 for
    // the consumer and 256 x 128 for the producers (63,488 of 64,512: more and the consumer's request never returns)
    if (tid >= 128) {  // ---------------- producers: conv1, one A1 row at a time, 8 warps x one 16-position block
        asm volatile("setmaxnreg.dec.sync.aligned.u32 128;\n" ::: "memory");
        const int pw = (tid - 128) >> 5, pc = tid - 128;
        const int nblk = folding ? 6 : 5;
        const float* stage = reinterpret_cast<const float*>(smw + C::O_OUT);
        // output row o, staged by the consumer (slot o % 6) before the release this thread just waited for
        auto put = [&](int o) {
            if (o >= 0 && o < nout && pc < ncol) fused_store(a, oy0 + o, ox0 + pc, stage[(o % 6) * 64 + pc]);
        };
#pragma unroll 1
        for (int rho = 0; rho < C::NA; ++rho) {
            const int s = rho % NS;
            if (rho >= NS) {
                rows_bar_sync(1 + NS + s, C::NT);  // the consumer is done with row rho - NS (and output rho - NS - 10)
                put(rho - NS - 10);
            }
            u32* slot = ring + s * (C::SLOT / 4);
            if (pw < nblk) {
                if (folding) rows_conv1_fold<C>(smw, slot, rho, pw, fb.d0, fb.d1, fscale);
                else rows_conv1_bicubic<C>(smw, slot, rho, pw, off, a1y0, a1x0, a.H, a.W);
            }
            rows_bar_arrive(1 + s, C::NT);
        }
#pragma unroll 1
        for (int rho = C::NA; rho < C::NA + NS; ++rho) {  // the last releases
            rows_bar_sync(1 + NS + rho % NS, C::NT);
            put(rho - NS - 10);
        }
        rows_bar_sync(2 + 2 * NS, C::NT);  // the consumer's last two output rows
        put(TH - 2);
        put(TH - 1);
        return;
    }
    // ---------------- consumer: conv2, the Z GEMM and conv3's shifted sum, one warpgroup
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
    const int warp = __shfl_sync(0xffffffffu, tid >> 5, 0);
    const u32 sbase = smem_u32(smw);
    const u32 ringa = smem_u32(ring);
    const u32 alane = ringa + (lane >> 4) * C::GS + (16 * warp + ((lane >> 3) & 1) * 8 + (lane & 7)) * 16;
    const u64 db = wg_desc(sbase + C::O_W2 * 4, 512u, 128u);
    const float* bsm = reinterpret_cast<const float*>(smw + C::O_B2);
    const u32 zring = smem_u32(smw + C::O_Z);
    const int zcol = 16 * warp + (lane & 15);  // this lane's output column in the tile (lanes 0..15 store)
    const int zvy = oy0 - 2, zvx = ox0 - 2;
    RowsCons<C> cons{{}, {}, db, zring + (u32)((16 * warp + (lane >> 2)) * 4), {},
                     smem_u32(smw + C::O_OUT) + (u32)(zcol * 4), lane >> 4, cq,
                     reinterpret_cast<const float*>(smw + C::O_B3)[0], -zvy, a.H - zvy};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        cons.bv[2 * j] = bsm[8 * j + 2 * cq];
        cons.bv[2 * j + 1] = bsm[8 * j + 2 * cq + 1];
    }
    // load i of the sum reads tap t0 = i (lanes 0..15) or t1 = 13 + i (16..31): column shift dx = i % 5 or (i + 3) % 5;
    // the columns of lanes past the tile's 60 (nothing stored) kept in their Z row: column 64 on is the next ring row's,
    // which this step's zstore writes
#pragma unroll
    for (int j = 0; j < 5; ++j) {
        const int dx = cons.h ? (j + 3) % 5 : j;
        cons.zb[j] = zring + (u32)(min(clampi(zvx + zcol + dx, 0, a.W - 1) - zvx, C::RW - 1) * 4);
    }
    float acc[6][16];
#pragma unroll
    for (int i = 0; i < 6; ++i)
#pragma unroll
        for (int k = 0; k < 16; ++k) acc[i][k] = 0.f;
    u32 af[2][4];
    constexpr int R = C::R;
    int rho = 0;
#define ROWS_ARGS acc, af, rho, alane, db, cons
    // rows 0..5: conv2 rows rho - dy >= 0 only
    rows_step<C, NS, 0, 0, 0>(ROWS_ARGS); rho = 1;
    rows_step<C, NS, 1, 0, 1>(ROWS_ARGS); rho = 2;
    rows_step<C, NS, 2, 0, 2>(ROWS_ARGS); rho = 3;
    rows_step<C, NS, 3, 0, 3>(ROWS_ARGS); rho = 4;
    rows_step<C, NS, 4, 0, 4>(ROWS_ARGS); rho = 5;
    rows_step<C, NS, 5, 0, 4>(ROWS_ARGS); rho = 6;
#pragma unroll 1
    for (; rho < R; rho += 6) {  // rho % 6 == 0: the phases are compile-time
        const int r0 = rho;
        rho = r0 + 0; rows_step<C, NS, 0, 0, 4>(ROWS_ARGS);
        rho = r0 + 1; rows_step<C, NS, 1, 0, 4>(ROWS_ARGS);
        rho = r0 + 2; rows_step<C, NS, 2, 0, 4>(ROWS_ARGS);
        rho = r0 + 3; rows_step<C, NS, 3, 0, 4>(ROWS_ARGS);
        rho = r0 + 4; rows_step<C, NS, 4, 0, 4>(ROWS_ARGS);
        rho = r0 + 5; rows_step<C, NS, 5, 0, 4>(ROWS_ARGS);
        rho = r0;
        wg_wait<0>();  // one drain per 6 rows: without it ptxas serialises every wgmma (C7514)
    }
    // rows R..R+3 (R % 6 == 0): conv2 rows < R only
    rho = R + 0; rows_step<C, NS, 0, 1, 4>(ROWS_ARGS);
    rho = R + 1; rows_step<C, NS, 1, 2, 4>(ROWS_ARGS);
    rho = R + 2; rows_step<C, NS, 2, 3, 4>(ROWS_ARGS);
    rho = R + 3; rows_step<C, NS, 3, 4, 4>(ROWS_ARGS);
#undef ROWS_ARGS
    // conv2 row R - 1 (tile 5): its Z GEMM, then Z ring row 5 once row R + 3's sum (output row R - 7) is done by
    // every warp; then output rows R - 6 (ring rows 0..4), R - 5 (1..5)
    wg_wait<0>();
    rows_pin(acc[5]);
    cons.ready(acc[5]);
    wg_fence();
    cons.issue(acc[5]);
    wg_commit();
    wg_wait<0>();
    rows_pin(acc[5]);
    rows_bar_sync(1 + 2 * NS, 128);
    cons.template zstore<5>(acc[5], R - 1);
    rows_bar_sync(1 + 2 * NS, 128);
    cons.template sum<0>(R - 6);
    cons.template sum<1>(R - 5);
    rows_bar_arrive(2 + 2 * NS, C::NT);  // the producers store them
}

template <int TH, int NS>
__global__ void fused_tc_rows_layout(int* out) {
    typedef RowsCfg<TH, NS> C;
    out[0] = C::TOTAL * 4; out[1] = TH; out[2] = C::TW; out[3] = C::Y0ROWS; out[4] = C::Y0W + 1;
    out[5] = C::TOTAL - C::O_A1; out[6] = C::NT; out[7] = C::PACKED; out[8] = C::O_W1F;
}
