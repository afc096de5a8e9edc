// Prototype: 9-5-5's conv2 (64 -> 32 channels, 5x5, valid) as an implicit GEMM on Hopper's warpgroup
// MMA (wgmma.mma_async m64n32k16, fp16 operands, fp32 accumulators), both operands read from shared
// memory by descriptor (sm_90a). Driven by dev/cuda/wgmma_conv2.py (reference check, timing).
//
// Shared memory, no-swizzle canonical layouts (core matrix = 8 rows x 16 bytes, contiguous):
//   activations: 8 planes, one per channel group g (channels 8g..8g+7); plane position p = r * P + c
//     holds 16 bytes (the 8 channels) at g * G + 16 p. A core matrix (8 consecutive positions of a row,
//     8 channels) is then 128 contiguous bytes from any position: a 5x5 tap moves the A window by whole
//     positions, i.e. only the descriptor's start address (16-byte units) changes.
//     A (M = 64 positions, K = 16 channels): an 8 x 8 patch of positions, M row m = (m / 8, m % 8):
//     SBO (M-direction core-matrix stride) = one plane row = 16 P bytes, LBO (K direction) = G.
//   weights: [tap t][channel group g][out n (32)][8 channels] fp16, 512 bytes per (t, g): B (K = 16,
//     N = 32) of tap t, K-step ks starts at (8 t + 2 ks) * 512: SBO (N direction) = 128, LBO = 512.
// G = 16 (mod 128): the 8 chunks of one position land on different banks when written.
typedef unsigned int u32;
typedef unsigned long long u64;

// Descriptor of a no-swizzle (layout type 0) operand: start, LBO, SBO in 16-byte units.
__device__ __forceinline__ u64 wg_desc(u32 saddr, u32 lbo, u32 sbo) {
    return (u64)((saddr >> 4) & 0x3FFF) | ((u64)((lbo >> 4) & 0x3FFF) << 16) | ((u64)((sbo >> 4) & 0x3FFF) << 32);
}

__device__ __forceinline__ u32 wg_smem_u32(const void* p) {
    u32 r;
    asm("{ .reg .u64 t;\n cvta.to.shared.u64 t, %1;\n cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }

// d (m64nN, f32, N / 2 registers per thread) = A (desc) x B (desc) + (acc ? d : 0), both K-major. The
// first MMA of a sum passes acc = 0 rather than zeroing d: moves into d between the fence and the MMA
// would make ptxas serialise the MMAs (C7517 / C7519).
template <int N>
__device__ __forceinline__ void wgmma_f16(float (&d)[N / 2], u64 da, u64 db, int acc);
template <>
__device__ __forceinline__ void wgmma_f16<32>(float (&d)[16], u64 da, u64 db, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(da), "l"(db), "r"(acc));
}
template <>
__device__ __forceinline__ void wgmma_f16<64>(float (&d)[32], u64 da, u64 db, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db), "r"(acc));
}
template <>
__device__ __forceinline__ void wgmma_f16<128>(float (&d)[64], u64 da, u64 db, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(acc));
}

__device__ __forceinline__ u32 wg_pack_h2(float lo, float hi) {
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

template <int ZT, int NWG>
struct WgCfg {
    static constexpr int P = 36;                 // positions per plane row: 32 outputs + the 4-column halo
    static constexpr int ROWS = ZT + 4;
    static constexpr int NPOS = ROWS * P;
    static constexpr int G = (NPOS * 16 + 127) / 128 * 128 + 16;  // plane stride, bytes
    static constexpr int O_W = 0;
    static constexpr int W_BYTES = 25 * 8 * 512;
    static constexpr int O_A = O_W + W_BYTES;
    static constexpr int O_B = O_A + 8 * G;      // 32 fp32 biases
    static constexpr int TOTAL = O_B + 128;
    static constexpr int NT = NWG * 128;
    static constexpr int MTILES = ZT / 8 * 4;    // 8 x 8 patches of a ZT x 32 tile
    static constexpr int MT = MTILES / NWG;      // per warpgroup
    static_assert(ZT % 8 == 0 && MTILES % NWG == 0, "patches split evenly over the warpgroups");
    static_assert(TOTAL < (1 << 18), "descriptor addresses are 18 bits");
};

// NB > 1 (a rate probe, not a convolution): the MMAs are m64n(32 NB)k16, B's rows n >= 32 read on past
// the tap's 512 bytes into the next weights (garbage, never stored); channels 0..31 stay exact. So the
// MMAs per position are the same, each NB times wider: how the tensor rate grows with N when A (2 KB per
// MMA) is the same, i.e. what reading A from shared memory costs.
// One block: a tile of ZT output rows x 32 columns (tile blockIdx.x % ntiles: a grid larger than the
// frame's tiles repeats them, to time a 4K frame's worth on a small, L2-resident frame).
// in: (Hin, Win, 64) fp16 as 8 uint4 per position; out: (Hz, Wz, 32) fp16, ReLU(conv + bias), where
// Hz = Hin - 4, Wz = Win - 4. wpk: the weights in the shared layout. reps > 1: the MMAs run reps times
// on the loaded tile (timing the MMA part alone); the last rep stores. swap: LBO / SBO exchanged (a
// probe of the descriptor's convention).
template <int ZT, int NWG, int NB = 1>
__global__ void __launch_bounds__(NWG * 128, 1)
    wg_conv2(const uint4* __restrict__ in, int Hin, int Win, const uint4* __restrict__ wpk,
             const float* __restrict__ bias, u32* __restrict__ out, int tiles_x, int ntiles, int reps, int swap) {
    typedef WgCfg<ZT, NWG> C;
    extern __shared__ __align__(128) unsigned char sm[];
    const int tile = blockIdx.x % ntiles, ty = tile / tiles_x, tx = tile - ty * tiles_x;
    const int y0 = ty * ZT, x0 = tx * 32, Hz = Hin - 4, Wz = Win - 4;
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
    // generic-proxy stores read next by the tensor cores (async proxy)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    const int wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
    const u32 sbase = wg_smem_u32(sm);
    const u32 lbo_a = swap ? 16u * C::P : (u32)C::G, sbo_a = swap ? (u32)C::G : 16u * C::P;
    const u32 lbo_b = swap ? 128u : 512u, sbo_b = swap ? 512u : 128u;
    u64 da[C::MT];
#pragma unroll
    for (int i = 0; i < C::MT; ++i) {
        const int m = wg * C::MT + i, pr = m >> 2, pc = m & 3;
        da[i] = wg_desc(sbase + C::O_A + (pr * 8 * C::P + pc * 8) * 16, lbo_a, sbo_a);
    }
    const u64 db = wg_desc(sbase + C::O_W, lbo_b, sbo_b);
    float acc[C::MT][16 * NB];
#pragma unroll
    for (int i = 0; i < C::MT; ++i)
#pragma unroll
        for (int k = 0; k < 16 * NB; ++k) acc[i][k] = 0.f;
    for (int rep = 0; rep < reps; ++rep) {
        wg_fence();
#pragma unroll 1
        for (int dy = 0; dy < 5; ++dy) {  // not unrolled: 400 descriptors would be kept live (spills)
#pragma unroll
            for (int dx = 0; dx < 5; ++dx) {
            const int t = dy * 5 + dx;
#pragma unroll
            for (int ks = 0; ks < 4; ++ks) {
                const u64 b = db + (u64)((t * 8 + 2 * ks) * 32);       // 512 B per (t, g), 16-byte units
                const u64 ao = (u64)(dy * C::P + dx + ks * 2 * (C::G / 16));
#pragma unroll
                for (int i = 0; i < C::MT; ++i) wgmma_f16<32 * NB>(acc[i], da[i] + ao, b, t + ks);
            }
            }
        }
        wg_commit();
        wg_wait<0>();
    }
    // epilogue: accumulator register 4j + 2h + c = M row 16 warp + lane / 4 + 8h, channel 8j + 2 (lane % 4) + c
    const float* b = reinterpret_cast<const float*>(sm + C::O_B);
#pragma unroll
    for (int i = 0; i < C::MT; ++i) {
        const int m = wg * C::MT + i, pr = m >> 2, pc = m & 3;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int y = y0 + pr * 8 + 2 * warp + h, x = x0 + pc * 8 + (lane >> 2);
            if (y >= Hz || x >= Wz) continue;
            u32* o = out + ((long long)y * Wz + x) * 16;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int n = 8 * j + 2 * (lane & 3);
                o[n >> 1] = wg_pack_h2(fmaxf(acc[i][4 * j + 2 * h] + b[n], 0.f),
                                       fmaxf(acc[i][4 * j + 2 * h + 1] + b[n + 1], 0.f));
            }
        }
    }
}
