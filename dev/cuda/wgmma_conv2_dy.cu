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
