// Binary convolution (the XNOR-popcount method of CN106779057B) for binarized SRCNN layers.
//
// Activations and weights are signs (+1 / -1) stored as bits (1 = +1), 64 channels a word:
// bit b of word g holds channel 64 g + b; bits past the channel count are 0 in activations and
// weights alike, so they XOR to 0 and never count. Packed planes are planar, (CW, H, W) uint64
// with CW = ceil(C / 64): one 8-byte word per pixel and group, neighbouring threads reading
// neighbouring pixels (coalesced), the layout of the float planes conv.cu reads and writes.
//
//   pack_bits<T>   x (C, H, W) float32 (T = float) or fp16 (T = unsigned short, the half's bits)
//                  -> bits: bit = x[c] > t[c] (a per-channel threshold; the activation's sign)
//   bconv_b0       direct: one thread an output pixel x FO filters, words and weights from global
//   bconv_b1       two-level blocking: a block's output tile (BX*PX x BY pixels) with its halo of
//                  packed words and its FO filters' weights staged in shared memory; each thread
//                  PX pixels of a row x FO filters, popcounts accumulated in registers
//
// For output o at a pixel, with N = K*K*CIN counted bits and pc = sum over taps and words of
// popcount(a XOR w) (XOR emulates XNOR: pc counts the disagreeing signs),
//   s = N - 2 pc = sum over taps and channels of sign(a) sign(w)      (exact, an integer)
// and the epilogue (OUT) writes
//   OUT 0 / 1: float32 v = alpha[o] * s + beta[o] (rounded after the product and after the sum,
//              no FMA, as NumPy computes it), with ReLU (0) or without (1);
//   OUT 2 / 3: the same v rounded to fp16 (round to nearest even);
//   OUT 4:     the vote for a following binary layer: bit o of the pixel's packed output word is
//              dir[o] * s > k[o] (vote[o] = k, vote[COUT + o] = dir; dir = 1, k = 0 is the plain
//              majority vote: more agreeing than disagreeing signs); binary.fold_vote turns a
//              float epilogue and the next layer's threshold into (k, dir) exactly.
// Borders: 'same' size, replicate (clamped indices): the sign of a replicated activation is the
// replicated sign, so clamping the packed plane is exact.
// Every launch is a 1-D grid; blocks are numbered filter group fastest (blocks that share an
// input tile run together and find it in L2).
#include "common.cuh"

typedef unsigned long long u64;

__device__ __forceinline__ float load_act(const float* p) { return __ldg(p); }
__device__ __forceinline__ float load_act(const unsigned short* p) {  // fp16 bits (no cuda_fp16.h in NVRTC builds)
    const unsigned short h = __ldg(p);
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ unsigned short float_to_half_bits(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// ---------------------------------------------------------------- packing

template <typename T>
__global__ void __launch_bounds__(256) pack_bits(const T* __restrict__ x, const float* __restrict__ t,
                                                 u64* __restrict__ bits, int cin, long long HW) {
    const int cw = (cin + 63) / 64;
    const long long n = HW * cw;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const int g = (int)(i / HW);
        const long long p = i - g * HW;
        const int c0 = 64 * g, m = min(64, cin - c0);
        const T* xp = x + c0 * HW + p;
        u64 word = 0;
#pragma unroll 8
        for (int b = 0; b < m; ++b) word |= (u64)(load_act(xp + b * HW) > __ldg(t + c0 + b)) << b;
        bits[i] = word;
    }
}

// ---------------------------------------------------------------- convolution

struct BinBlockPos { int z, bx, by; };

template <int NZ> __device__ __forceinline__ BinBlockPos bin_block_pos(int tile_w, int W) {
    const int nbx = (W + tile_w - 1) / tile_w;
    const int b = blockIdx.x;
    BinBlockPos p;
    p.z = b % NZ;
    const int t = b / NZ;
    p.bx = t % nbx;
    p.by = t / nbx;
    return p;
}

// The epilogue of PX pixels (one row, from column x0) x FO filters (from f0); pc are popcounts.
template <int OUT, int COUT, int FO, int PX>
__device__ __forceinline__ void epilogue(const int (&pc)[FO][PX], const float* __restrict__ alpha,
                                         const float* __restrict__ beta, const int* __restrict__ vote,
                                         void* __restrict__ y, long long HW, int W, int gy, int x0, int f0,
                                         int nbits, bool vec) {
    const long long at = (long long)gy * W + x0;
    if constexpr (OUT == 4) {
        static_assert(FO % 64 == 0 || (FO == COUT && COUT <= 64), "a vote word is written by one thread");
        u64* yw = reinterpret_cast<u64*>(y);
#pragma unroll
        for (int g = 0; g < (FO + 63) / 64; ++g) {
#pragma unroll
            for (int p = 0; p < PX; ++p) {
                u64 word = 0;
#pragma unroll
                for (int b = 0; b < (FO - 64 * g < 64 ? FO - 64 * g : 64); ++b) {
                    const int f = 64 * g + b;
                    const int s = nbits - 2 * pc[f][p];
                    const int k = __ldg(vote + f0 + f), dir = __ldg(vote + COUT + f0 + f);
                    word |= (u64)(dir * s > k) << b;
                }
                if (x0 + p < W) yw[(long long)(f0 / 64 + g) * HW + at + p] = word;
            }
        }
    } else {
        constexpr bool RELU = OUT == 0 || OUT == 2;
#pragma unroll
        for (int f = 0; f < FO; ++f) {
            const float a = __ldg(alpha + f0 + f), b = __ldg(beta + f0 + f);
            float v[PX];
#pragma unroll
            for (int p = 0; p < PX; ++p) {
                v[p] = __fadd_rn(__fmul_rn(a, (float)(nbits - 2 * pc[f][p])), b);
                if (RELU) v[p] = fmaxf(v[p], 0.0f);
            }
            if constexpr (OUT <= 1) {
                float* yr = reinterpret_cast<float*>(y) + (long long)(f0 + f) * HW + at;
                if constexpr (PX % 4 == 0) {
                    if (vec) {
#pragma unroll
                        for (int p = 0; p < PX; p += 4)
                            reinterpret_cast<float4*>(yr)[p / 4] = make_float4(v[p], v[p + 1], v[p + 2], v[p + 3]);
                        continue;
                    }
                }
#pragma unroll
                for (int p = 0; p < PX; ++p)
                    if (x0 + p < W) yr[p] = v[p];
            } else {
                unsigned short* yr = reinterpret_cast<unsigned short*>(y) + (long long)(f0 + f) * HW + at;
                if constexpr (PX % 4 == 0) {
                    if (vec) {
#pragma unroll
                        for (int p = 0; p < PX; p += 4) {
                            const unsigned lo = float_to_half_bits(v[p]) | ((unsigned)float_to_half_bits(v[p + 1]) << 16);
                            const unsigned hi = float_to_half_bits(v[p + 2]) | ((unsigned)float_to_half_bits(v[p + 3]) << 16);
                            reinterpret_cast<uint2*>(yr)[p / 4] = make_uint2(lo, hi);
                        }
                        continue;
                    }
                }
#pragma unroll
                for (int p = 0; p < PX; ++p)
                    if (x0 + p < W) yr[p] = float_to_half_bits(v[p]);
            }
        }
    }
}

// b0: direct. One thread an output pixel x FO filters; words (clamped) and weights from global.
template <int CW, int COUT, int K, int BX, int BY, int FO, int OUT>
__global__ void __launch_bounds__(BX * BY)
bconv_b0(const u64* __restrict__ x, const u64* __restrict__ wt, const float* __restrict__ alpha,
         const float* __restrict__ beta, const int* __restrict__ vote, void* __restrict__ y, int H, int W,
         int nbits, int vec_ok) {
    static_assert(COUT % FO == 0, "FO must divide COUT");
    constexpr int R = K / 2, NZ = COUT / FO;
    const BinBlockPos bp = bin_block_pos<NZ>(BX, W);
    const int f0 = bp.z * FO;
    const int gx = bp.bx * BX + threadIdx.x, gy = bp.by * BY + threadIdx.y;
    if (gx >= W || gy >= H) return;
    const long long HW = (long long)H * W;
    int pc[FO][1];
#pragma unroll
    for (int f = 0; f < FO; ++f) pc[f][0] = 0;
    for (int c = 0; c < CW; ++c) {
#pragma unroll 1
        for (int dy = 0; dy < K; ++dy) {
            const u64* xr = x + c * HW + (long long)clampi(gy + dy - R, 0, H - 1) * W;
#pragma unroll
            for (int dx = 0; dx < K; ++dx) {
                const u64 a = __ldg(xr + clampi(gx + dx - R, 0, W - 1));
                const u64* wr = wt + ((c * K + dy) * K + dx) * COUT + f0;
#pragma unroll
                for (int f = 0; f < FO; ++f) pc[f][0] += __popcll(a ^ __ldg(wr + f));
            }
        }
    }
    epilogue<OUT, COUT, FO, 1>(pc, alpha, beta, vote, y, HW, W, gy, gx, f0, nbits, false);
}

// b1: two-level blocking. The block's tile of BY rows x BX*PX columns plus a halo of R each side
// (CW words a pixel) and its FO filters' weights go to shared memory, loaded in passes of the
// block's thread count with clamped (replicate) indices; each thread then slides a window of
// PX+K-1 words per tap row through registers and accumulates PX x FO popcounts.
template <int CW, int COUT, int K, int BX, int BY, int PX, int FO, int OUT>
__global__ void __launch_bounds__(BX * BY)
bconv_b1(const u64* __restrict__ x, const u64* __restrict__ wt, const float* __restrict__ alpha,
         const float* __restrict__ beta, const int* __restrict__ vote, void* __restrict__ y, int H, int W,
         int nbits, int vec_ok) {
    static_assert(COUT % FO == 0, "FO must divide COUT");
    constexpr int R = K / 2, NT = BX * BY, NZ = COUT / FO, TH = BY + K - 1, TW = BX * PX + K - 1;
    constexpr int NB = PX + K - 1, WN = CW * K * K * FO, TN = TH * TW;
    extern __shared__ u64 s_words[];
    u64* s_w = s_words;
    u64* s_t = s_words + WN;
    if (dynamic_smem_bytes() < (WN + CW * TN) * sizeof(u64)) __trap();
    const BinBlockPos bp = bin_block_pos<NZ>(BX * PX, W);
    const int tid = threadIdx.y * BX + threadIdx.x;
    const int f0 = bp.z * FO, tx0 = bp.bx * BX * PX, ty0 = bp.by * BY;
    const long long HW = (long long)H * W;
    for (int i = tid; i < WN; i += NT) {  // s_w[c][dy][dx][f] from wt[c][dy][dx][o]
        const int tap = i / FO, f = i - tap * FO;
        s_w[i] = __ldg(wt + tap * COUT + f0 + f);
    }
    for (int i = tid; i < CW * TN; i += NT) {
        const int c = i / TN, r = i - c * TN, ty = r / TW, tx = r - ty * TW;
        s_t[i] = __ldg(x + c * HW + (long long)clampi(ty0 + ty - R, 0, H - 1) * W + clampi(tx0 + tx - R, 0, W - 1));
    }
    __syncthreads();
    const int x0 = tx0 + threadIdx.x * PX, gy = ty0 + threadIdx.y;
    if (x0 >= W || gy >= H) return;  // no barrier follows
    int pc[FO][PX];
#pragma unroll
    for (int f = 0; f < FO; ++f)
#pragma unroll
        for (int p = 0; p < PX; ++p) pc[f][p] = 0;
#pragma unroll 1
    for (int c = 0; c < CW; ++c) {
#pragma unroll 1
        for (int dy = 0; dy < K; ++dy) {
            const u64* tr = s_t + c * TN + (threadIdx.y + dy) * TW + threadIdx.x * PX;
            u64 nb[NB];
#pragma unroll
            for (int i = 0; i < NB; ++i) nb[i] = tr[i];
            const u64* wr = s_w + (c * K + dy) * K * FO;
#pragma unroll
            for (int dx = 0; dx < K; ++dx) {
#pragma unroll
                for (int f = 0; f < FO; ++f) {
                    const u64 w = wr[dx * FO + f];  // the same address for the whole warp: a broadcast
#pragma unroll
                    for (int p = 0; p < PX; ++p) pc[f][p] += __popcll(nb[p + dx] ^ w);
                }
            }
        }
    }
    const bool vec = vec_ok && x0 + PX <= W;
    epilogue<OUT, COUT, FO, PX>(pc, alpha, beta, vote, y, HW, W, gy, x0, f0, nbits, vec);
}
