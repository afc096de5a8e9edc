// Probe: do warp shuffles (SHFL) draw on the same shared-memory bandwidth as LDS and as wgmma's operand reads?
// Driven by dev/cuda/shfl_smem_probe.py (NVRTC, sm_90a). One block per SM; its warps take roles by index:
//   [0, 4 NMMA)           warpgroup MMAs, m64n32k16 f16 -> f32, the 9-5-5 prototype's pattern (wgmma_conv2.cu:
//                         4 M tiles per warpgroup, one tap row = 5 dx x 4 K-steps x 4 tiles = 80 MMAs per
//                         loop trip); RS = 0: A and B by descriptor (SS), RS = 1: A from registers, B by
//                         descriptor; INW = 1: each MMA warp also issues 4 SHFL per MMA (the shifted-A design's
//                         rate: 16 shuffles of 128 B per warpgroup MMA), into registers the MMAs do not read;
//                         INW = 2: 1 SHFL per MMA per warp; INW = 3: 1 ldmatrix.x4 per MMA per warp (an m64k16 A
//                         fragment through registers for every MMA: SS's bytes); INW = 4: 1 ldmatrix.x4 per 5
//                         MMAs per warp (one A fragment used by 5 MMAs). Work counted in role 5 (warp instructions)
//   then NLDS warps       LDS.128, conflict-free (a warp reads 512 contiguous bytes)
//   then NSHFL warps      shfl.sync.idx.b32, 8 independent streams per warp
//   then NMIX warps       1 LDS.128 then 4 SHFL, repeated (equal bytes through a 128 B/clk crossbar)
// Every role runs until the same SM-clock deadline (start + T cycles); the MMA warpgroup agrees on its exit
// through bar.red.or on its own named barrier. shfl.sync.idx uses the source lane's low 5 bits; the lanes vary
// so that ptxas cannot merge shuffles (it treats them as pure). Results per block: out[block][role] = {ops, cycles}.
// Roles: 0 MMAs (warpgroup instructions), 1 LDS (warp instructions), 2 SHFL, 3 MIX LDS, 4 MIX SHFL, 5 INW SHFL.
typedef unsigned int u32;
typedef unsigned long long u64;

#define NROLE 6
// the prototype's shared layout (WgCfg<16, 2>): weights [25 taps][8 groups][32 out][8] fp16, then 8 planes
constexpr int P = 36, NPOS = 20 * P, G = (NPOS * 16 + 127) / 128 * 128 + 16;
constexpr int O_W = 0, W_BYTES = 25 * 8 * 512, O_A = O_W + W_BYTES, TOTAL = O_A + 8 * G;

__device__ __forceinline__ u64 wg_desc(u32 saddr, u32 lbo, u32 sbo) {
    return (u64)((saddr >> 4) & 0x3FFF) | ((u64)((lbo >> 4) & 0x3FFF) << 16) | ((u64)((sbo >> 4) & 0x3FFF) << 32);
}
__device__ __forceinline__ u32 smem_u32(const void* p) {
    u32 r;
    asm("{ .reg .u64 t;\n cvta.to.shared.u64 t, %1;\n cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }

__device__ __forceinline__ void mma_ss(float (&d)[16], u64 da, u64 db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.eq.u32 p, 1, 1;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
        "%12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(da), "l"(db));
}
__device__ __forceinline__ void mma_rs(float (&d)[16], const u32 (&a)[4], u64 db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.eq.u32 p, 1, 1;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
        "%12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

__device__ __forceinline__ uint4 lds128(u32 addr) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
    return v;
}
__device__ __forceinline__ u32 shfl(u32 v, int src) {
    u32 r;
    asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(src));
    return r;
}
// true on every thread of the 128 of named barrier id if any of them passes true
__device__ __forceinline__ bool bar_or(bool v, int id) {
    u32 r;
    asm volatile("{ .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, 128, p;\n selp.u32 %0, 1, 0, q; }"
                 : "=r"(r) : "r"((u32)v), "r"(id) : "memory");
    return r != 0;
}

template <int RS, int INW>
__global__ void __launch_bounds__(512, 1)
    probe(int nmma, int nlds, int nshfl, int nmix, long long T, u64* __restrict__ out, u32* __restrict__ sink) {
    extern __shared__ __align__(128) unsigned char sm[];
    __shared__ long long t0s;
    const int tid = threadIdx.x, lane = tid & 31;
    const int warp = __shfl_sync(0xffffffffu, tid >> 5, 0);  // warp-uniform to ptxas (no serialised wgmma, C7520)
    for (int i = tid; i < TOTAL / 4; i += blockDim.x) {
        u32 h = (u32)i * 2654435761u;
        h ^= h >> 15;
        reinterpret_cast<u32*>(sm)[i] = ((h & 0x03FFu) | 0x2000u) | (((h >> 16) & 0x03FFu) | 0x2000u) << 16;
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (tid == 0) t0s = clock64();
    __syncthreads();
    const long long t0 = t0s, deadline = t0 + T;
    const u32 sbase = smem_u32(sm);
    u64* o = out + (u64)blockIdx.x * NROLE * 2;
    u32 x = 0;
    int w = warp;
    if (w < 4 * nmma) {
        const int wg = w >> 2;
        u64 da[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int m = wg * 4 + i, pr = m >> 2, pc = m & 3;
            da[i] = wg_desc(sbase + O_A + (pr * 8 * P + pc * 8) * 16, G, 16 * P);
        }
        const u64 db = wg_desc(sbase + O_W, 512, 128);
        u32 a[4][4];  // register A (arbitrary small fp16 pairs), never written after the fence
        u32 s[4];     // shuffle sources, separate from a
#pragma unroll
        for (int k = 0; k < 4; ++k)
#pragma unroll
            for (int j = 0; j < 4; ++j) a[k][j] = reinterpret_cast<const u32*>(sm + O_A)[tid * 16 + k * 4 + j];
#pragma unroll
        for (int j = 0; j < 4; ++j) s[j] = a[0][j] ^ (u32)(lane * 0x10001);
        float acc[4][16];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int k = 0; k < 16; ++k) acc[i][k] = 0.f;
        long long n = 0, nsh = 0;
        int dy = 0;
        u32 sel = lane;  // source lanes change with every shuffle and every trip (nothing for ptxas to merge)
        wg_fence();
#pragma unroll 1
        for (;;) {
#pragma unroll
            for (int dx = 0; dx < 5; ++dx)
#pragma unroll
                for (int ks = 0; ks < 4; ++ks) {
                    const int t = dy * 5 + dx;
                    const u64 b = db + (u64)((t * 8 + 2 * ks) * 32);
                    const u64 ao = (u64)(dy * P + dx + ks * 2 * (G / 16));
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        if (RS) mma_rs(acc[i], a[ks], b);
                        else mma_ss(acc[i], da[i] + ao, b);
                        const int idx = (dx * 4 + ks) * 4 + i;
                        if (INW == 1) {
#pragma unroll
                            for (int j = 0; j < 4; ++j) x ^= shfl(s[j], sel + idx * 4 + j);
                        } else if (INW == 2) {
                            x ^= shfl(s[idx & 3], sel + idx);
                        } else if (INW == 3 || (INW == 4 && idx % 5 == 0)) {
                            u32 q0, q1, q2, q3;  // 64 KB of the activations, a new 512 B block every time
                            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                                         : "=r"(q0), "=r"(q1), "=r"(q2), "=r"(q3)
                                         : "r"(sbase + O_A + lane * 16 + (((u32)sel * 80 + idx) & 127) * 512));
                            x ^= q0 ^ q1 ^ q2 ^ q3;
                        }
                    }
                }
            n += 80;
            nsh += INW == 1 ? 320 : INW == 2 || INW == 3 ? 80 : INW == 4 ? 16 : 0;
            sel += 7;
            dy = dy == 4 ? 0 : dy + 1;
            if (bar_or(clock64() > deadline, 1 + wg)) break;
        }
        wg_commit();
        wg_wait0();
        const long long t1 = clock64();
        float sum = 0.f;
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int k = 0; k < 16; ++k) sum += acc[i][k];
        if (sum == 1234.5f || x == 0x9e3779b9u) sink[blockIdx.x] = __float_as_uint(sum) ^ x;
        if (lane == 0) {
            if ((w & 3) == 0) atomicAdd(o + 0, (u64)n);
            atomicMax(o + 1, (u64)(t1 - t0));
            if (INW) {
                atomicAdd(o + 10, (u64)nsh);
                atomicMax(o + 11, (u64)(t1 - t0));
            }
        }
        return;
    }
    w -= 4 * nmma;
    const u32 abase = sbase + O_A + lane * 16;  // 32 x 512 B = 16 KB of the activation planes, read round
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    u32 src[8], r[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) src[j] = (u32)(tid * 8 + j), r[j] = 0u;
    long long n = 0, n2 = 0;
    int role, role2 = -1;
    u32 sel = lane, trip = 0;  // shuffles' source lanes and the loads' 16 KB half change every trip
    if (w < nlds) {
        role = 1;
#pragma unroll 1
        do {
#pragma unroll
            for (int i = 0; i < 32; ++i) {
                const uint4 q = lds128(abase + ((trip & 1u) << 14) + i * 512);
                v.x ^= q.x, v.y ^= q.y, v.z ^= q.z, v.w ^= q.w;
            }
            n += 32, ++trip;
        } while (clock64() <= deadline);
    } else if ((w -= nlds) < nshfl) {
        role = 2;
#pragma unroll 1
        do {
#pragma unroll
            for (int i = 0; i < 32; ++i) r[i & 7] ^= shfl(src[i & 7], sel + i);
            n += 32, sel += 7;
        } while (clock64() <= deadline);
    } else if ((w -= nshfl) < nmix) {
        role = 3, role2 = 4;
#pragma unroll 1
        do {
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const uint4 q = lds128(abase + ((trip & 1u) << 14) + i * 512);
                v.x ^= q.x, v.y ^= q.y, v.z ^= q.z, v.w ^= q.w;
#pragma unroll
                for (int j = 0; j < 4; ++j) r[(4 * i + j) & 7] ^= shfl(src[(4 * i + j) & 7], sel + 4 * i + j);
            }
            n += 8, n2 += 32, sel += 7, ++trip;
        } while (clock64() <= deadline);
    } else {
        return;
    }
    const long long t1 = clock64();
#pragma unroll
    for (int j = 0; j < 8; ++j) x ^= r[j];
    x ^= v.x ^ v.y ^ v.z ^ v.w;
    if (x == 0x9e3779b9u) sink[blockIdx.x] = x;
    if (lane == 0) {
        atomicAdd(o + 2 * role, (u64)n);
        atomicMax(o + 2 * role + 1, (u64)(t1 - t0));
        if (role2 >= 0) {
            atomicAdd(o + 2 * role2, (u64)n2);
            atomicMax(o + 2 * role2 + 1, (u64)(t1 - t0));
        }
    }
}
