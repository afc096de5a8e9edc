// Prototype: 9-5-5's conv2 (64 -> 32 channels, 5x5, valid) on Hopper's warpgroup MMA with A from registers,
// each A fragment reused over the 5 tap rows (dy). Driven by dev/cuda/wgmma_conv2_dy.py (reference check,
// timing beside wgmma_conv2.cu's wg_conv2, where A and B are both read from shared memory).
//
// One block: a tile of ZT output rows x 64 output columns (ZT + 4 input rows x 68 columns in shared memory),
// NWG warpgroups, warpgroup g taking the R = ZT / NWG output rows g R .. g R + R - 1. An MMA's M = 64 rows are
// 64 consecutive columns of one row (warp w: columns 16 w .. 16 w + 15, in mma.sync's m16k16 A-fragment layout,
// which is wgmma's register-A layout per warp). For input row rho (of the warpgroup's R + 4), column shift dx and
// K-step ks (channels 16 ks .. 16 ks + 15), one ldmatrix.x4 per warp loads the fragment, then up to 5 MMAs
// (m64n32k16, A from registers, B = W(dy, dx, ks) by descriptor from shared memory) accumulate into output row
// rho - dy, dy = 0..4. Output row y thus gets its 25 taps x 4 K-steps from input rows y .. y + 4. NACC rolling
// accumulator tiles of 16 registers (tile y % NACC):
//   NACC = 5: after input row rho, wait for every MMA (wgmma.wait_group 0) and store output row rho - 4;
//   NACC = 6: output row rho - 5 is stored during input row rho, once the waits that free the A buffers have
//             also retired input row rho - 1's MMAs (no drain of the MMA pipeline per row).
// The A fragment of fragment f lives in buffer f % NBUF; before it is loaded, wgmma.wait_group NBUF - 1 retires
// the MMAs that read that buffer NBUF fragments ago. The row loop is unrolled completely (R + 4 rows; shared
// memory holds at most ~14 input rows), so every accumulator and buffer index is a compile-time register and
// the MMAs a row does not need (its output rows outside the warpgroup's) are not issued.
//
// Shared memory (as wgmma_conv2.cu): weights [tap][channel group][out n (32)][8 channels] fp16 (100 KB); then
// the activations in 8 planes (channels 8g .. 8g + 7, 16 bytes per position, position p = r * P + c), P = 68.
typedef unsigned int u32;
typedef unsigned long long u64;

__device__ __forceinline__ u64 dy_desc(u32 saddr, u32 lbo, u32 sbo) {
    return (u64)((saddr >> 4) & 0x3FFF) | ((u64)((lbo >> 4) & 0x3FFF) << 16) | ((u64)((sbo >> 4) & 0x3FFF) << 32);
}

__device__ __forceinline__ u32 dy_smem_u32(const void* p) {
    u32 r;
    asm("{ .reg .u64 t;\n cvta.to.shared.u64 t, %1;\n cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}

__device__ __forceinline__ void dy_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void dy_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void dy_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }

// registers the compiler must not move across the surrounding volatile asm (CUTLASS' warpgroup_fence_operand)
__device__ __forceinline__ void dy_pin(float (&d)[16]) {
#pragma unroll
    for (int k = 0; k < 16; ++k) asm volatile("" : "+f"(d[k])::"memory");
}

// d (m64n32, f32) = A (registers, this warp's m16k16 fragment) x B (desc, K-major) + (ACC ? d : 0)
template <int ACC>
__device__ __forceinline__ void dy_mma(float (&d)[16], const u32 (&a)[4], u64 db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
        "{%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(ACC));
}

__device__ __forceinline__ void dy_ldmatrix(u32 (&a)[4], u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                 : "r"(addr)
                 : "memory");
}

__device__ __forceinline__ u32 dy_pack_relu(float lo, float hi) {
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(fmaxf(hi, 0.f)), "f"(fmaxf(lo, 0.f)));
    return r;
}

// predicated store: no branch around it (reads of accumulators under a branch beside in-flight MMAs)
__device__ __forceinline__ void dy_st4(u32* p, u32 a, u32 b, u32 c, u32 d, bool ok) {
    asm volatile(
        "{\n.reg .pred q;\nsetp.ne.b32 q, %5, 0;\n"
        "@q st.global.u32 [%0], %1;\n@q st.global.u32 [%0+16], %2;\n"
        "@q st.global.u32 [%0+32], %3;\n@q st.global.u32 [%0+48], %4;\n}\n"
        :: "l"(p), "r"(a), "r"(b), "r"(c), "r"(d), "r"((u32)ok) : "memory");
}

template <int ZT, int NWG>
struct DyCfg {
    static constexpr int R = ZT / NWG;           // output rows per warpgroup
    static constexpr int P = 68;                 // positions per plane row: 64 outputs + the 4-column halo
    static constexpr int ROWS = ZT + 4;
    static constexpr int NPOS = ROWS * P;
    static constexpr int G = (NPOS * 16 + 127) / 128 * 128 + 16;  // plane stride, bytes
    static constexpr int O_W = 0;
    static constexpr int W_BYTES = 25 * 8 * 512;
    static constexpr int O_A = O_W + W_BYTES;
    static constexpr int O_B = O_A + 8 * G;      // 32 fp32 biases
    static constexpr int TOTAL = O_B + 128;
    static constexpr int NT = NWG * 128;
    static_assert(ZT % NWG == 0, "rows split evenly over the warpgroups");
    static_assert(TOTAL <= 232448, "227 KB of shared memory per block");
};

// Store output row y (of the warpgroup's) from tile d: ReLU(d + bias) as fp16. Lane: M rows lane / 4 + 8 h of
// its warp's 16 columns, channels 8 j + 2 (lane % 4) + c (register 4 j + 2 h + c).
__device__ __forceinline__ void dy_store(const float (&d)[16], const float (&bv)[8], u32* __restrict__ out, int y,
                                         int x, int Hz, int Wz, bool last, int cq) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int xx = x + 8 * h;
        const bool ok = last && y < Hz && xx < Wz;
        u32 v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j)
            v[j] = dy_pack_relu(d[4 * j + 2 * h] + bv[2 * j], d[4 * j + 2 * h + 1] + bv[2 * j + 1]);
        u32* o = out + ((long long)(ok ? y : 0) * Wz + (ok ? xx : 0)) * 16 + cq;
        dy_st4(o, v[0], v[1], v[2], v[3], ok);
    }
}

// in: (Hin, Win, 64) fp16 as 8 uint4 per position; out: (Hz, Wz, 32) fp16, ReLU(conv + bias), Hz = Hin - 4,
// Wz = Win - 4. wpk: the weights in the shared layout. Tile blockIdx.x % ntiles (a grid larger than the frame's
// tiles repeats them: a 4K frame's worth on a small, L2-resident frame). reps > 1: the MMAs run reps times on the
// loaded tile (timing the MMA part alone); only the last rep stores.
template <int ZT, int NWG, int NACC, int NBUF>
__global__ void __launch_bounds__(NWG * 128, 1)
    dy_conv2(const uint4* __restrict__ in, int Hin, int Win, const uint4* __restrict__ wpk,
             const float* __restrict__ bias, u32* __restrict__ out, int tiles_x, int ntiles, int reps) {
    typedef DyCfg<ZT, NWG> C;
    constexpr int R = C::R;
    static_assert(NACC == 5 || NACC == 6, "5 or 6 rolling accumulator tiles");
    static_assert(NBUF >= 2 && NBUF <= 4, "A buffers");
    extern __shared__ __align__(128) unsigned char sm[];
    const int tile = blockIdx.x % ntiles, ty = tile / tiles_x, tx = tile - ty * tiles_x;
    const int y0 = ty * ZT, x0 = tx * 64, Hz = Hin - 4, Wz = Win - 4;
    const int tid = threadIdx.x;
    {
        uint4* w = reinterpret_cast<uint4*>(sm + C::O_W);
        for (int i = tid; i < C::W_BYTES / 16; i += C::NT) w[i] = __ldg(wpk + i);
        if (tid < 32) reinterpret_cast<float*>(sm + C::O_B)[tid] = __ldg(bias + tid);
        for (int e = tid; e < C::NPOS * 8; e += C::NT) {
            const int g = e & 7, pos = e >> 3, r = pos / C::P, c = pos - r * C::P;
            const int y = y0 + r, x = x0 + c;
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (y < Hin && x < Win) v = __ldg(in + ((long long)y * Win + x) * 8 + g);
            *reinterpret_cast<uint4*>(sm + C::O_A + g * C::G + pos * 16) = v;
        }
    }
    // generic-proxy stores of the weights, read next by the tensor cores (async proxy)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    // warp-uniform to ptxas (no serialised wgmma, C7520)
    const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0), warp = __shfl_sync(0xffffffffu, (tid >> 5) & 3, 0);
    const int lane = tid & 31, cq = lane & 3;
    const u32 sbase = dy_smem_u32(sm);
    // ldmatrix.x4: lane l addresses row l % 8 of matrix l / 8; matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15) =
    // a0..a3 of the m16k16 fragment: position 16 warp + 8 ((l / 8) & 1) + l % 8, plane (l / 16) (+ 2 ks)
    const u32 abase = sbase + C::O_A + (lane >> 4) * C::G +
                      ((wg * R) * C::P + 16 * warp + ((lane >> 3) & 1) * 8 + (lane & 7)) * 16;
    const u64 db = dy_desc(sbase + C::O_W, 512u, 128u);  // LBO: K direction (plane of 8), SBO: N direction
    float bv[8];
    {
        const float* b = reinterpret_cast<const float*>(sm + C::O_B);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            bv[2 * j] = b[8 * j + 2 * cq];
            bv[2 * j + 1] = b[8 * j + 2 * cq + 1];
        }
    }
    const int ybase = y0 + wg * R, x = x0 + 16 * warp + (lane >> 2);
    u32* outl = out + cq;  // this lane's channel pairs 8 j + 2 cq: u32 4 j + cq of a position's 16
    float acc[NACC][16];
#pragma unroll
    for (int i = 0; i < NACC; ++i)
#pragma unroll
        for (int k = 0; k < 16; ++k) acc[i][k] = 0.f;
    u32 a[NBUF][4];
#pragma unroll 1
    for (int rep = 0; rep < reps; ++rep) {
        const bool last = rep == reps - 1;
#pragma unroll
        for (int rho = 0; rho < R + 4; ++rho) {
#pragma unroll
            for (int k = 0; k < 20; ++k) {  // k = 4 dx + ks
                const int f = rho * 20 + k, dx = k >> 2, ks = k & 3, buf = f % NBUF;
                if (f >= NBUF) dy_wait<NBUF - 1>();  // fragment f - NBUF's MMAs (its buffer's readers) retired
                if (NACC == 6 && k == NBUF - 1 && rho >= 5 && rho - 5 < R) {
                    // input row rho - 1's MMAs have retired too: output row rho - 5 is complete
                    dy_pin(acc[(rho - 5) % 6]);
                    dy_store(acc[(rho - 5) % 6], bv, outl, ybase + rho - 5, x, Hz, Wz, last, 0);
                }
                dy_ldmatrix(a[buf], abase + (u32)((rho * C::P + dx) * 16 + 2 * ks * C::G));
                dy_fence();
                // opaque per fragment: otherwise the compiler hoists all 100 B descriptors out of the rep loop
                u64 dbf;
                asm volatile("mov.b64 %0, %1;" : "=l"(dbf) : "l"(db));
#pragma unroll
                for (int dy = 0; dy < 5; ++dy) {
                    const int y = rho - dy;
                    if (y < 0 || y >= R) continue;  // compile-time
                    const u64 b = dbf + (u64)(((dy * 5 + dx) * 8 + 2 * ks) * 32);  // 512 B per (tap, group)
                    if (dy == 0 && k == 0) dy_mma<0>(acc[y % NACC], a[buf], b);  // output row y's first MMA
                    else dy_mma<1>(acc[y % NACC], a[buf], b);
                }
                dy_commit();
            }
            if (NACC == 5 && rho >= 4 && rho - 4 < R) {
                dy_wait<0>();
                dy_pin(acc[(rho - 4) % 5]);
                dy_store(acc[(rho - 4) % 5], bv, outl, ybase + rho - 4, x, Hz, Wz, last, 0);
            }
        }
        dy_wait<0>();
        if (NACC == 6) {
#pragma unroll
            for (int y = R - 1; y < R; ++y) {  // not stored in the loop: input row y + 5 > R + 3
                if (y < 0) continue;
                dy_pin(acc[y % 6]);
                dy_store(acc[y % 6], bv, outl, ybase + y, x, Hz, Wz, last, 0);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Streaming variant: a warpgroup's input rows pass through a ring of NRING rows in shared memory (cp.async, one
// row ahead per slot), so a warpgroup's strip can be tall (R output rows, R % 6 == 0) and the A fragments per MMA
// fall towards 20 / 100 (R + 4 input rows x 20 fragments for 100 R MMAs). Each input row is read only while it is
// the current row (all 5 tap rows are served from its fragments), so NRING = 2 or 3 rows suffice. A block is NWG
// jobs, one per warpgroup; job j: output rows 64-column strip j % tiles_x, rows R (j / tiles_x) .. + R - 1.
// 6 accumulator tiles (output row y: tile y % 6), the row loop unrolled by 6: rows 0..5 (prologue, MMAs of output
// rows < 0 not issued), 6..R-1 in trips of 6 (all 5 MMAs per fragment), R..R+3 (epilogue, rows >= R not issued).
// reps > 1 with reload = 0: the later reps do not reload the rows (their MMAs read stale rows: timing only).
// DRAIN = 1: wgmma.wait_group 0 once per 6-row trip (at the loop's back edge). Without it (DRAIN = 0) ptxas
// serialises every wgmma (C7514: the stores' reads of a finished tile, while other tiles' MMAs are in flight
// across the back edge); with it, no note (nvcc 13.0 and NVRTC 12.9, sm_90a). clk (optional): per block, the SM
// clocks and globaltimer nanoseconds of the rep loop.
template <int NWG, int NRING>
struct DySCfg {
    static constexpr int P = 68;
    static constexpr int GS = P * 16 + 80;        // plane stride, bytes: = 16 (mod 128), conflict-free writes
    static constexpr int SLOT = 8 * GS;           // one input row, 8 planes
    static constexpr int O_W = 0;
    static constexpr int W_BYTES = 25 * 8 * 512;
    static constexpr int O_A = O_W + W_BYTES;     // warpgroup g's ring at O_A + g * NRING * SLOT
    static constexpr int O_B = O_A + NWG * NRING * SLOT;
    static constexpr int TOTAL = O_B + 128;
    static constexpr int NT = NWG * 128;
    static_assert(GS % 128 == 16, "plane stride");
    static_assert(TOTAL <= 232448, "227 KB of shared memory per block");
};

__device__ __forceinline__ void dy_cp16(u32 dst, const void* src, bool ok) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void dy_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void dy_cp_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
__device__ __forceinline__ void dy_bar(int id) { asm volatile("bar.sync %0, 128;" :: "r"(id) : "memory"); }

// copies of input row r (of the job) into ring slot address `slot` by the warpgroup's 128 threads (t = thread
// index in the warpgroup), then one commit group (empty when the row is past the job's R + 4 or not loaded)
template <class C>
__device__ __forceinline__ void dy_row_load(const uint4* __restrict__ in, int Hin, int Win, int yrow, int xcol,
                                            u32 slot, int t, bool load) {
    if (load) {
        const bool rowok = yrow < Hin;
        for (int e = t; e < C::P * 8; e += 128) {
            const int g = e & 7, c = e >> 3, x = xcol + c;
            const bool ok = rowok && x < Win;
            const uint4* src = ok ? in + ((long long)yrow * Win + x) * 8 + g : in;
            dy_cp16(slot + g * C::GS + c * 16, src, ok);
        }
    }
    dy_cp_commit();
}

// One input row rho (compile-time phase TA = rho % 6, ring slot S = rho % NRING): wait for its copies, barrier,
// start the copies of row rho + NRING - 1, then 20 fragments x the dy in [DY0, DY1] (compile-time). K: what is done
// with output row rho - 5 (tile (TA + 1) % 6), complete once the wait of fragment NBUF - 1 has retired input row
// rho - 1's MMAs: K::ready at that point (before the fragment's ldmatrix), K::issue after the fragment's MMAs (more
// MMAs in the same commit group), K::after after each fragment's commit (k compile-time).
template <class C, int NRING, int NBUF, int TA, int S, int DY0, int DY1, class K>
__device__ __forceinline__ void dy_srow(float (&acc)[6][16], u32 (&a)[NBUF][4], int rho, int R, u32 ring, u32 alane,
                                        u64 db, const uint4* __restrict__ in, int Hin, int Win, int yin0, int xcol,
                                        int t, int barid, bool load, K& cons) {
    dy_cp_wait<NRING - 2>();
    dy_bar(barid);
    dy_row_load<C>(in, Hin, Win, yin0 + rho + NRING - 1, xcol, ring + ((S + NRING - 1) % NRING) * C::SLOT, t,
                   load && rho + NRING - 1 < R + 4);
    constexpr int tp = (TA + 1) % 6;  // tile of row rho - 5
#pragma unroll
    for (int k = 0; k < 20; ++k) {  // k = 4 dx + ks
        const int dx = k >> 2, ks = k & 3, buf = k % NBUF;
        dy_wait<NBUF - 1>();  // fragment f - NBUF's MMAs (its buffer's readers) retired (none pending at a start)
        if (k == NBUF - 1 && DY1 >= 0) {
            // input row rho - 1's MMAs have retired too: output row rho - 5 is complete (stored if rho >= 5)
            dy_pin(acc[tp]);
            cons.template ready<TA>(acc[tp], rho);
        }
        dy_ldmatrix(a[buf], alane + (u32)(S * C::SLOT + dx * 16 + 2 * ks * C::GS));
        dy_fence();
        u64 dbf;
        asm volatile("mov.b64 %0, %1;" : "=l"(dbf) : "l"(db));
#pragma unroll
        for (int dy = DY0; dy <= DY1; ++dy) {
            const u64 b = dbf + (u64)(((dy * 5 + dx) * 8 + 2 * ks) * 32);
            const int tile = (TA - dy + 6) % 6;
            if (dy == 0 && k == 0) dy_mma<0>(acc[tile], a[buf], b);
            else dy_mma<1>(acc[tile], a[buf], b);
        }
        if (k == NBUF - 1 && DY1 >= 0) cons.template issue<TA>(acc[tp]);
        dy_commit();
        cons.template after<TA, NBUF>(k, acc[tp], rho);
    }
}

// dy_conv2s' consumer: ReLU(acc + b2) as fp16 to global memory (dy_store), nothing else
struct DyStoreCons {
    const float (&bv)[8];
    u32* outl;
    int ybase, x, Hz, Wz;
    bool last;
    template <int TA>
    __device__ __forceinline__ void ready(const float (&d)[16], int rho) {
        dy_store(d, bv, outl, ybase + rho - 5, x, Hz, Wz, last && rho >= 5, 0);
    }
    template <int TA>
    __device__ __forceinline__ void issue(float (&)[16]) {}
    template <int TA, int NBUF>
    __device__ __forceinline__ void after(int, float (&)[16], int) {}
};

template <int R, int NWG, int NRING, int NBUF, int DRAIN = 1>
__global__ void __launch_bounds__(NWG * 128, 1)
    dy_conv2s(const uint4* __restrict__ in, int Hin, int Win, const uint4* __restrict__ wpk,
              const float* __restrict__ bias, u32* __restrict__ out, int tiles_x, int njobs, int reps, int reload,
              long long* __restrict__ clk) {
    typedef DySCfg<NWG, NRING> C;
    static_assert(R % 6 == 0 && R >= 6, "rows per job: a multiple of the 6-row unroll");
    static_assert(NRING == 2 || NRING == 3, "ring slots divide the 6-row unroll");
    static_assert(20 % NBUF == 0 && NBUF >= 2, "A buffers divide the 20 fragments of a row");
    extern __shared__ __align__(128) unsigned char sm[];
    const int tid = threadIdx.x;
    const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0), warp = __shfl_sync(0xffffffffu, (tid >> 5) & 3, 0);
    const int lane = tid & 31, cq = lane & 3, t = tid & 127;
    const int job = (blockIdx.x * NWG + wg) % njobs, jy = job / tiles_x, jx = job - jy * tiles_x;
    const int yin0 = jy * R, xcol = jx * 64, Hz = Hin - 4, Wz = Win - 4;
    const u32 sbase = dy_smem_u32(sm);
    const u32 ring = sbase + C::O_A + wg * NRING * C::SLOT;
    // the first NRING - 1 rows of the ring start loading before the weights
#pragma unroll
    for (int r = 0; r < NRING - 1; ++r) dy_row_load<C>(in, Hin, Win, yin0 + r, xcol, ring + r * C::SLOT, t, true);
    {
        uint4* w = reinterpret_cast<uint4*>(sm + C::O_W);
        for (int i = tid; i < C::W_BYTES / 16; i += C::NT) w[i] = __ldg(wpk + i);
        if (tid < 32) reinterpret_cast<float*>(sm + C::O_B)[tid] = __ldg(bias + tid);
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // weights: read by the tensor cores
    __syncthreads();
    const u32 alane = ring + (lane >> 4) * C::GS + (16 * warp + ((lane >> 3) & 1) * 8 + (lane & 7)) * 16;
    const u64 db = dy_desc(sbase + C::O_W, 512u, 128u);
    float bv[8];
    {
        const float* b = reinterpret_cast<const float*>(sm + C::O_B);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            bv[2 * j] = b[8 * j + 2 * cq];
            bv[2 * j + 1] = b[8 * j + 2 * cq + 1];
        }
    }
    const int x = xcol + 16 * warp + (lane >> 2);
    u32* outl = out + cq;
    const int barid = 1 + wg;
    float acc[6][16];
#pragma unroll
    for (int i = 0; i < 6; ++i)
#pragma unroll
        for (int k = 0; k < 16; ++k) acc[i][k] = 0.f;
    u32 a[NBUF][4];
    long long c0 = 0, g0 = 0;
    if (clk && tid == 0) {  // SM clocks and nanoseconds of the rep loop (block-wide), for clk/MMA
        c0 = clock64();
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
    }
#define DY_ARGS acc, a, rho, R, ring, alane, db, in, Hin, Win, yin0, xcol, t, barid, load, cons
#pragma unroll 1
    for (int rep = 0; rep < reps; ++rep) {
        const bool last = rep == reps - 1, load = rep == 0 || reload;
        DyStoreCons cons{bv, outl, yin0, x, Hz, Wz, last};
        if (rep > 0) {
#pragma unroll
            for (int r = 0; r < NRING - 1; ++r)
                dy_row_load<C>(in, Hin, Win, yin0 + r, xcol, ring + r * C::SLOT, t, load);
        }
        int rho = 0;
        // rows 0..5: output rows rho - dy >= 0 only; no row to store before rho = 5 (DY1 < 0 would skip: kept
        // uniform, the store's predicate is off for rho < 5)
        dy_srow<C, NRING, NBUF, 0, 0 % NRING, 0, 0>(DY_ARGS); rho = 1;
        dy_srow<C, NRING, NBUF, 1, 1 % NRING, 0, 1>(DY_ARGS); rho = 2;
        dy_srow<C, NRING, NBUF, 2, 2 % NRING, 0, 2>(DY_ARGS); rho = 3;
        dy_srow<C, NRING, NBUF, 3, 3 % NRING, 0, 3>(DY_ARGS); rho = 4;
        dy_srow<C, NRING, NBUF, 4, 4 % NRING, 0, 4>(DY_ARGS); rho = 5;
        dy_srow<C, NRING, NBUF, 5, 5 % NRING, 0, 4>(DY_ARGS); rho = 6;
#pragma unroll 1
        for (; rho < R; rho += 6) {
            // rho % 6 == 0 here: the phases are compile-time; rho itself only moves addresses
            const int r0 = rho;
            rho = r0 + 0; dy_srow<C, NRING, NBUF, 0, 0 % NRING, 0, 4>(DY_ARGS);
            rho = r0 + 1; dy_srow<C, NRING, NBUF, 1, 1 % NRING, 0, 4>(DY_ARGS);
            rho = r0 + 2; dy_srow<C, NRING, NBUF, 2, 2 % NRING, 0, 4>(DY_ARGS);
            rho = r0 + 3; dy_srow<C, NRING, NBUF, 3, 3 % NRING, 0, 4>(DY_ARGS);
            rho = r0 + 4; dy_srow<C, NRING, NBUF, 4, 4 % NRING, 0, 4>(DY_ARGS);
            rho = r0 + 5; dy_srow<C, NRING, NBUF, 5, 5 % NRING, 0, 4>(DY_ARGS);
            rho = r0;
            if (DRAIN) dy_wait<0>();
        }
        // rows R..R+3 (R % 6 == 0): output rows < R only
        if (DRAIN == 2) dy_wait<0>();
        rho = R + 0; dy_srow<C, NRING, NBUF, 0, 0 % NRING, 1, 4>(DY_ARGS);
        rho = R + 1; dy_srow<C, NRING, NBUF, 1, 1 % NRING, 2, 4>(DY_ARGS);
        rho = R + 2; dy_srow<C, NRING, NBUF, 2, 2 % NRING, 3, 4>(DY_ARGS);
        rho = R + 3; dy_srow<C, NRING, NBUF, 3, 3 % NRING, 4, 4>(DY_ARGS);
        dy_wait<0>();
        dy_pin(acc[(R - 1) % 6]);
        dy_store(acc[(R - 1) % 6], bv, outl, yin0 + R - 1, x, Hz, Wz, last, 0);
        dy_cp_wait<0>();
        dy_bar(barid);  // the ring's last reads done before the next rep's loads
    }
#undef DY_ARGS
    if (clk) {
        __syncthreads();
        if (tid == 0) {
            long long g1;
            const long long c1 = clock64();
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
            clk[2 * blockIdx.x] = c1 - c0;
            clk[2 * blockIdx.x + 1] = g1 - g0;
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The row-streamed consumer (issue 17): dy_conv2s' conv2, then for every finished conv2 row what the fused kernel
// does after conv2, by the same warpgroups (no warp specialisation):
//   1. A2 = ReLU(acc + b2) as fp16 in registers: the m16n8 C layout of the tile is the m16k16 A layout (two
//      K-steps of 16 channels; fused_tc.cu's tc_wg_to_a);
//   2. the Z GEMM: Z[p][t] = sum_c A2[p][c] W3[t][c], t = 0..24 (N padded to 32), two m64n32k16 with A from
//      registers, B = W3 by descriptor ([channel group 4][tap 32][8 channels] fp16, 2 KB), into the finished tile's
//      own registers (it is not written again before the next row's first MMA, scale-d 0), in the commit group of
//      fragment NBUF - 1 (the one where the tile became ready);
//   3. at fragment 2 NBUF - 1 (that group retired by the wait before it) the 25 Z values per position (fp32) into
//      the warpgroup's Z ring: 26 planes (25 taps + a scratch plane for taps 25..31) x 6 rows x 64 columns, plane
//      stride ZPS = 388 words (2 ZPS = 8 mod 32: a store's 8 columns x 4 tap pairs hit 32 banks);
//   4. at fragment KSUM of input row rho the shifted sum of output row o = rho - 10 (Z rows o .. o + 4, all stored
//      before the row's barrier; Z row rho - 5, stored in this row, is the one slot it does not read): lane l of
//      warp w takes column 16 w + l % 16 and half the taps (l < 16: 0..12, else 13..24), the halves added by one
//      shuffle; out[o][x] = b3 + sum, x < 60, fp32 to global memory.
// A job: R conv2 rows x 64 columns (input R + 4 rows x 68 columns), R - 4 output rows x 60 columns; jobs step by
// R - 4 rows and 60 columns (their conv2 rows overlap by 4 rows, 4 columns). Input (Hin, Win, 64) fp16, output
// (Hin - 8, Win - 8) fp32. Conv2 output row rho - 5 is converted in input row rho, Z row rho - 5 is stored in it,
// output row rho - 10 is summed in it; conv2 row R - 1's Z and output rows R - 6, R - 5 after the last input row.
template <int NWG, int NRING>
struct DzCfg {
    static constexpr int P = 68;
    static constexpr int GS = DySCfg<NWG, NRING>::GS;
    static constexpr int SLOT = DySCfg<NWG, NRING>::SLOT;
    static constexpr int O_W = 0;
    static constexpr int W_BYTES = 25 * 8 * 512;
    static constexpr int O_A = O_W + W_BYTES;            // warpgroup g's ring at O_A + g * NRING * SLOT
    static constexpr int O_W3 = O_A + NWG * NRING * SLOT; // W3: 4 channel groups x 32 taps x 8 channels, fp16
    static constexpr int W3_BYTES = 4 * 32 * 16;
    static constexpr int ZR = 6;                         // Z ring rows
    static constexpr int ZPS = ZR * 64 + 4;              // Z plane stride, words
    static constexpr int ZB = (26 * ZPS * 4 + 127) / 128 * 128;
    static constexpr int O_Z = O_W3 + W3_BYTES;          // warpgroup g's Z ring at O_Z + g * ZB
    static constexpr int O_B = O_Z + NWG * ZB;           // b2 (32 fp32), b3
    static constexpr int TOTAL = O_B + 256;
    static constexpr int NT = NWG * 128;
    static_assert((2 * ZPS) % 32 == 8, "Z stores conflict-free");
    static_assert(TOTAL <= 232448, "227 KB of shared memory per block");
};

__device__ __forceinline__ void dz_sts(u32 addr, float v) {
    asm volatile("st.shared.f32 [%0], %1;" :: "r"(addr), "f"(v) : "memory");
}
__device__ __forceinline__ float dz_lds(u32 addr) {
    float v;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
    return v;
}
__device__ __forceinline__ void dz_stg(float* p, float v, bool ok) {
    asm volatile("{\n.reg .pred q;\nsetp.ne.b32 q, %2, 0;\n@q st.global.f32 [%0], %1;\n}\n"
                 :: "l"(p), "f"(v), "r"((u32)ok) : "memory");
}

// ABL (timing ablation only, 0 = the consumer): bit 0 no Z GEMM (the conv2 values are stored as Z), bit 1 no Z
// stores, bit 2 no shifted sum
template <int ZPS, int KSUM, int DW3, int ABL = 0>
struct DzCons {
    const float (&bv)[8];  // b2 at this lane's channel pairs (as dy_store)
    u32 a3[2][4];          // A2 of the ready row: the Z GEMM's A, K-steps 0, 1
    u64 db;                // conv2's descriptor (W at offset 0): W3's is db + DW3 (the 16-byte address field)
    u32 zst;               // Z store address of this lane: column 16 warp + lane / 4, plane 0, ring row 0
    u32 zld;               // Z load address of this lane: column 16 warp + lane % 16, plane 0, ring row 0
    int h;                 // tap half of the sum: lane / 16
    int cq;
    float b3;
    float* out;            // out + ybase * Wout + this lane's column
    int Wout;
    int olim;              // output rows o < olim stored: 0 unless the last pass, lane 0..15 and column < 60

    template <int TA>
    __device__ __forceinline__ void ready(const float (&d)[16], int) {
#pragma unroll
        for (int k = 0; k < 2; ++k)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const int j = 2 * k + hh;
                a3[k][2 * hh] = dy_pack_relu(d[4 * j] + bv[2 * j], d[4 * j + 1] + bv[2 * j + 1]);
                a3[k][2 * hh + 1] = dy_pack_relu(d[4 * j + 2] + bv[2 * j], d[4 * j + 3] + bv[2 * j + 1]);
            }
    }
    // after the fragment's wgmma.fence (which also covers a3's writes)
    template <int TA>
    __device__ __forceinline__ void issue(float (&d)[16]) {
        if (ABL & 1) return;
        u64 b;
        asm volatile("mov.b64 %0, %1;" : "=l"(b) : "l"(db));
        b += (u64)(DW3 >> 4);
        dy_mma<0>(d, a3[0], b);
        dy_mma<1>(d, a3[1], b + 64u);  // K-step 1: 2 channel groups (1024 bytes) on
    }
    // Z (the tile d, retired) into ring row SL
    template <int SL>
    __device__ __forceinline__ void zstore(const float (&d)[16]) {
        if (ABL & 2) return;
        u32 zs;  // opaque: otherwise the 8 addresses per ring row are hoisted out of the row loop (registers)
        asm volatile("mov.b32 %0, %1;" : "=r"(zs) : "r"(zst));
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const int t = min(8 * j + 2 * cq + c, 25);  // taps 25..31 (zero weights): the scratch plane
                const u32 ad = zs + (u32)((t * ZPS + SL * 64) * 4);
                dz_sts(ad, d[4 * j + c]);
                dz_sts(ad + 32, d[4 * j + 2 + c]);  // M row + 8: column + 8
            }
    }
    // output row o (of the job) from Z ring rows S0 .. S0 + 4 (mod 6)
    template <int S0>
    __device__ __forceinline__ void sum(int o) {
        if (ABL & 4) return;
        float s = 0.f;
        u32 zl;  // opaque, as in zstore
        asm volatile("mov.b32 %0, %1;" : "=r"(zl) : "r"(zld));
#pragma unroll
        for (int i = 0; i < 13; ++i) {
            const int t0 = i, t1 = 13 + i < 25 ? 13 + i : 0;
            const int off0 = (t0 * ZPS + ((S0 + t0 / 5) % 6) * 64 + t0 % 5) * 4;
            const int off1 = (t1 * ZPS + ((S0 + t1 / 5) % 6) * 64 + t1 % 5) * 4;
            float v = dz_lds(zl + (u32)(off0 + h * (off1 - off0)));
            if (i == 12) v = h ? 0.f : v;  // the upper half has 12 taps
            s += v;
        }
        s += __shfl_xor_sync(0xffffffffu, s, 16);
        const bool ok = (u32)o < (u32)olim;
        dz_stg(out + (long long)(ok ? o : 0) * Wout, s + b3, ok);
    }
    template <int TA, int NBUF>
    __device__ __forceinline__ void after(int k, float (&d)[16], int rho) {
        if (k == 2 * NBUF - 1) {  // the Z GEMM of fragment NBUF - 1 has retired (the wait before this fragment)
            dy_pin(d);
            zstore<(TA + 1) % 6>(d);
        }
        if (k == KSUM) sum<(TA + 2) % 6>(rho - 10);
    }
};

// in: (Hin, Win, 64) fp16 as 8 uint4 per position; wpk: conv2's weights (dy_conv2s' layout); w3pk: W3 as
// [4][32][8] fp16; bias: b2 (32) then b3; out: (Hin - 8, Win - 8) fp32. tiles_x = ceil((Win - 8) / 60), njobs =
// tiles_x * ceil((Hin - 8) / (R - 4)); block b: jobs (b NWG + g) % njobs. reps, reload, clk: as dy_conv2s (the
// consumer runs on every pass; only the last stores).
template <int R, int NWG, int NRING, int NBUF, int DRAIN = 1, int KSUM = 10, int ABL = 0>
__global__ void __launch_bounds__(NWG * 128, 1)
    dz_conv23s(const uint4* __restrict__ in, int Hin, int Win, const uint4* __restrict__ wpk,
               const uint4* __restrict__ w3pk, const float* __restrict__ bias, float* __restrict__ out, int tiles_x,
               int njobs, int reps, int reload, long long* __restrict__ clk) {
    typedef DzCfg<NWG, NRING> C;
    static_assert(R % 6 == 0 && R >= 12, "rows per job: a multiple of the 6-row unroll, >= 12 (rho - 10 >= 0 at R + 3)");
    static_assert(NRING == 2 || NRING == 3, "ring slots divide the 6-row unroll");
    static_assert(20 % NBUF == 0 && NBUF >= 2 && 2 * NBUF - 1 < 20, "A buffers divide the 20 fragments of a row");
    static_assert(KSUM >= 0 && KSUM < 20, "fragment of the shifted sum");
    extern __shared__ __align__(128) unsigned char sm[];
    const int tid = threadIdx.x;
    const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0), warp = __shfl_sync(0xffffffffu, (tid >> 5) & 3, 0);
    const int lane = tid & 31, cq = lane & 3, t = tid & 127;
    const int job = (blockIdx.x * NWG + wg) % njobs, jy = job / tiles_x, jx = job - jy * tiles_x;
    const int yin0 = jy * (R - 4), xcol = jx * 60;
    const u32 sbase = dy_smem_u32(sm);
    const u32 ring = sbase + C::O_A + wg * NRING * C::SLOT;
#pragma unroll
    for (int r = 0; r < NRING - 1; ++r) dy_row_load<C>(in, Hin, Win, yin0 + r, xcol, ring + r * C::SLOT, t, true);
    {
        uint4* w = reinterpret_cast<uint4*>(sm + C::O_W);
        for (int i = tid; i < C::W_BYTES / 16; i += C::NT) w[i] = __ldg(wpk + i);
        uint4* w3 = reinterpret_cast<uint4*>(sm + C::O_W3);
        for (int i = tid; i < C::W3_BYTES / 16; i += C::NT) w3[i] = __ldg(w3pk + i);
        if (tid < 33) reinterpret_cast<float*>(sm + C::O_B)[tid] = __ldg(bias + tid);
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // weights: read by the tensor cores
    __syncthreads();
    const u32 alane = ring + (lane >> 4) * C::GS + (16 * warp + ((lane >> 3) & 1) * 8 + (lane & 7)) * 16;
    const u64 db = dy_desc(sbase + C::O_W, 512u, 128u);
    float bv[8];
    const float* bsm = reinterpret_cast<const float*>(sm + C::O_B);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        bv[2 * j] = bsm[8 * j + 2 * cq];
        bv[2 * j + 1] = bsm[8 * j + 2 * cq + 1];
    }
    const u32 zring = sbase + C::O_Z + wg * C::ZB;
    const int zcol = 16 * warp + (lane & 15), ocol = xcol + zcol, Hout = Hin - 8, Wout = Win - 8;
    // output rows o < olim_all of the job are this lane's to store (lanes 0..15, columns < 60 and in the frame)
    const int olim_all = (lane < 16 && zcol < 60 && ocol < Wout) ? max(0, min(R - 4, Hout - yin0)) : 0;
    DzCons<C::ZPS, KSUM, C::O_W3 - C::O_W, ABL> cons{bv, {}, db, zring + (u32)((16 * warp + (lane >> 2)) * 4),
                                              zring + (u32)(zcol * 4), lane >> 4, cq, bsm[32],
                                              out + (long long)yin0 * Wout + (olim_all ? ocol : 0), Wout, 0};
    const int barid = 1 + wg;
    float acc[6][16];
#pragma unroll
    for (int i = 0; i < 6; ++i)
#pragma unroll
        for (int k = 0; k < 16; ++k) acc[i][k] = 0.f;
    u32 a[NBUF][4];
    long long c0 = 0, g0 = 0;
    if (clk && tid == 0) {
        c0 = clock64();
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
    }
#define DZ_ARGS acc, a, rho, R, ring, alane, db, in, Hin, Win, yin0, xcol, t, barid, load, cons
#pragma unroll 1
    for (int rep = 0; rep < reps; ++rep) {
        const bool load = rep == 0 || reload;
        cons.olim = rep == reps - 1 ? olim_all : 0;
        if (rep > 0) {
#pragma unroll
            for (int r = 0; r < NRING - 1; ++r)
                dy_row_load<C>(in, Hin, Win, yin0 + r, xcol, ring + r * C::SLOT, t, load);
        }
        int rho = 0;
        dy_srow<C, NRING, NBUF, 0, 0 % NRING, 0, 0>(DZ_ARGS); rho = 1;
        dy_srow<C, NRING, NBUF, 1, 1 % NRING, 0, 1>(DZ_ARGS); rho = 2;
        dy_srow<C, NRING, NBUF, 2, 2 % NRING, 0, 2>(DZ_ARGS); rho = 3;
        dy_srow<C, NRING, NBUF, 3, 3 % NRING, 0, 3>(DZ_ARGS); rho = 4;
        dy_srow<C, NRING, NBUF, 4, 4 % NRING, 0, 4>(DZ_ARGS); rho = 5;
        dy_srow<C, NRING, NBUF, 5, 5 % NRING, 0, 4>(DZ_ARGS); rho = 6;
#pragma unroll 1
        for (; rho < R; rho += 6) {
            const int r0 = rho;
            rho = r0 + 0; dy_srow<C, NRING, NBUF, 0, 0 % NRING, 0, 4>(DZ_ARGS);
            rho = r0 + 1; dy_srow<C, NRING, NBUF, 1, 1 % NRING, 0, 4>(DZ_ARGS);
            rho = r0 + 2; dy_srow<C, NRING, NBUF, 2, 2 % NRING, 0, 4>(DZ_ARGS);
            rho = r0 + 3; dy_srow<C, NRING, NBUF, 3, 3 % NRING, 0, 4>(DZ_ARGS);
            rho = r0 + 4; dy_srow<C, NRING, NBUF, 4, 4 % NRING, 0, 4>(DZ_ARGS);
            rho = r0 + 5; dy_srow<C, NRING, NBUF, 5, 5 % NRING, 0, 4>(DZ_ARGS);
            rho = r0;
            if (DRAIN) dy_wait<0>();
        }
        rho = R + 0; dy_srow<C, NRING, NBUF, 0, 0 % NRING, 1, 4>(DZ_ARGS);
        rho = R + 1; dy_srow<C, NRING, NBUF, 1, 1 % NRING, 2, 4>(DZ_ARGS);
        rho = R + 2; dy_srow<C, NRING, NBUF, 2, 2 % NRING, 3, 4>(DZ_ARGS);
        rho = R + 3; dy_srow<C, NRING, NBUF, 3, 3 % NRING, 4, 4>(DZ_ARGS);
        // conv2 row R - 1 (tile 5, R % 6 == 0): its Z GEMM, then Z ring row 5 once row R + 3's sum (output row
        // R - 7, ring rows 5, 0..3) is done by every warp; then output rows R - 6 (ring rows 0..4), R - 5 (1..5)
        dy_wait<0>();
        dy_pin(acc[5]);
        cons.template ready<4>(acc[5], R + 4);
        dy_fence();
        cons.template issue<4>(acc[5]);
        dy_commit();
        dy_wait<0>();
        dy_pin(acc[5]);
        dy_bar(barid);
        cons.template zstore<5>(acc[5]);
        dy_bar(barid);
        cons.template sum<0>(R - 6);
        cons.template sum<1>(R - 5);
        dy_cp_wait<0>();
        dy_bar(barid);  // the ring's and the Z ring's last reads done before the next rep
    }
#undef DZ_ARGS
    if (clk) {
        __syncthreads();
        if (tid == 0) {
            long long g1;
            const long long c1 = clock64();
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
            clk[2 * blockIdx.x] = c1 - c0;
            clk[2 * blockIdx.x + 1] = g1 - g0;
        }
    }
}
