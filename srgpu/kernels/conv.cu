// SRCNN convolution layers: y[o] = act(b[o] + sum_{c,dy,dx} w[o][c][dy][dx] * x[c][clamp(i+dy-R)][clamp(j+dx-R)])
// on planar float32 tensors x (CIN, H, W) -> y (COUT, H, W): correlation, 'same' size, replicate
// border (the clamp), bias and ReLU fused into every variant's epilogue.
//
// Weights come transposed to wt[c][dy][dx][o] (o fastest) so a tap's filters are contiguous.
// Variants (the seeds' methods; conv.py describes them and their launch shapes):
//   conv_v1  direct: one thread per output pixel, all COUT filters, weights and inputs from global
//   conv_v2  v1 + the layer's weights staged in shared memory (CH input channels at a time)
//   conv_v3  v2 + the block's input tile and halo staged in shared memory, loaded in passes of
//            the block's thread count
//   conv_v4  register neighbourhood: each thread loads its K x (PX+K-1) input window per channel
//            into registers and computes PX pixels x FO filters
//   conv_v5  register blocked: PX pixels x FO filters per thread, input tile + halo and filters in
//            shared memory, CH input channels per stage, 16-byte shared-memory reads
// Every launch is a 1-D grid; blocks are numbered filter group fastest, so the blocks that share
// an input tile run at the same time and find it in L2.
#include "common.cuh"

template <bool RELU> __device__ __forceinline__ float act(float v) { return RELU ? fmaxf(v, 0.0f) : v; }

struct BlockPos { int z, bx, by; };

template <int NZ> __device__ __forceinline__ BlockPos block_pos(int tile_w, int W) {
    const int nbx = (W + tile_w - 1) / tile_w;
    const int b = blockIdx.x;
    BlockPos p;
    p.z = b % NZ;
    const int t = b / NZ;
    p.bx = t % nbx;
    p.by = t / nbx;
    return p;
}

__host__ __device__ constexpr int round4(int n) { return (n + 3) / 4 * 4; }

// acc[o] += w[o] * v for o < N, w in shared memory (16-byte reads when N allows).
template <int N> __device__ __forceinline__ void axpy(float (&acc)[N], const float* w, float v) {
    if constexpr (N % 4 == 0) {
#pragma unroll
        for (int o = 0; o < N / 4; ++o) {
            const float4 q = reinterpret_cast<const float4*>(w)[o];
            acc[4 * o + 0] = fmaf(q.x, v, acc[4 * o + 0]);
            acc[4 * o + 1] = fmaf(q.y, v, acc[4 * o + 1]);
            acc[4 * o + 2] = fmaf(q.z, v, acc[4 * o + 2]);
            acc[4 * o + 3] = fmaf(q.w, v, acc[4 * o + 3]);
        }
    } else {
#pragma unroll
        for (int o = 0; o < N; ++o) acc[o] = fmaf(w[o], v, acc[o]);
    }
}

// acc[f][p] += w[f] * nb[p + DX] for f < FO, p < PX (the register-blocked inner product).
template <int FO, int PX, int DX, int NB>
__device__ __forceinline__ void block_fma(float (&acc)[FO][PX], const float* w, const float (&nb)[NB]) {
    if constexpr (FO % 4 == 0) {
#pragma unroll
        for (int f = 0; f < FO / 4; ++f) {
            const float4 q = reinterpret_cast<const float4*>(w)[f];
#pragma unroll
            for (int p = 0; p < PX; ++p) {
                acc[4 * f + 0][p] = fmaf(q.x, nb[p + DX], acc[4 * f + 0][p]);
                acc[4 * f + 1][p] = fmaf(q.y, nb[p + DX], acc[4 * f + 1][p]);
                acc[4 * f + 2][p] = fmaf(q.z, nb[p + DX], acc[4 * f + 2][p]);
                acc[4 * f + 3][p] = fmaf(q.w, nb[p + DX], acc[4 * f + 3][p]);
            }
        }
    } else {
#pragma unroll
        for (int f = 0; f < FO; ++f) {
            const float wf = w[f];
#pragma unroll
            for (int p = 0; p < PX; ++p) acc[f][p] = fmaf(wf, nb[p + DX], acc[f][p]);
        }
    }
}

// All K taps of one input row: DX = 0..K-1 unrolled at compile time (registers need constant indices).
template <int FO, int PX, int K, int NB, int DX = 0>
__device__ __forceinline__ void row_fma(float (&acc)[FO][PX], const float* w, const float (&nb)[NB]) {
    if constexpr (DX < K) {
        block_fma<FO, PX, DX, NB>(acc, w + DX * FO, nb);
        row_fma<FO, PX, K, NB, DX + 1>(acc, w, nb);
    }
}

// Store PX pixels x FO filters of one output row (16-byte stores where aligned and in range).
template <int FO, int PX, bool RELU>
__device__ __forceinline__ void store_block(const float (&acc)[FO][PX], float* __restrict__ y, long long HW,
                                            int W, int gy, int x0, int f0, bool vec) {
#pragma unroll
    for (int f = 0; f < FO; ++f) {
        float* yr = y + (long long)(f0 + f) * HW + (long long)gy * W + x0;
        if constexpr (PX % 4 == 0) {
            if (vec) {
#pragma unroll
                for (int p = 0; p < PX; p += 4)
                    reinterpret_cast<float4*>(yr)[p / 4] = make_float4(
                        act<RELU>(acc[f][p]), act<RELU>(acc[f][p + 1]), act<RELU>(acc[f][p + 2]), act<RELU>(acc[f][p + 3]));
                continue;
            }
        } else if constexpr (PX % 2 == 0) {
            if (vec) {
#pragma unroll
                for (int p = 0; p < PX; p += 2)
                    reinterpret_cast<float2*>(yr)[p / 2] = make_float2(act<RELU>(acc[f][p]), act<RELU>(acc[f][p + 1]));
                continue;
            }
        }
#pragma unroll
        for (int p = 0; p < PX; ++p)
            if (x0 + p < W) yr[p] = act<RELU>(acc[f][p]);
    }
}

// Stage the filters f0..f0+FO of input channels c0..c0+CH into s_w[c][dy][dx][f].
template <int CIN, int COUT, int K, int FO, int CH, int NT>
__device__ __forceinline__ void stage_weights(float* s_w, const float* __restrict__ wt, int c0, int f0, int tid) {
    constexpr int PER_C = K * K * FO;
#pragma unroll 4
    for (int i = tid; i < CH * PER_C; i += NT) {
        const int c = i / PER_C, rem = i - c * PER_C, tap = rem / FO, f = rem - tap * FO;
        s_w[i] = __ldg(wt + ((long long)(c0 + c) * K * K + tap) * COUT + f0 + f);
    }
}

// Stage input channels c0..c0+CH of the tile (rows y0-R .., TH rows; columns x0-R .., TW columns),
// clamped at the image edge, in passes of the block's thread count.
template <int CH, int TH, int TW, int R, int NT>
__device__ __forceinline__ void stage_tile(float* s_t, const float* __restrict__ x, long long HW, int H, int W,
                                           int c0, int y0, int x0, int tid) {
    constexpr int TN = TH * TW;
#pragma unroll 4
    for (int i = tid; i < CH * TN; i += NT) {
        const int c = i / TN, rem = i - c * TN, r = rem / TW, q = rem - r * TW;
        s_t[i] = __ldg(x + (long long)(c0 + c) * HW + (long long)clampi(y0 + r - R, 0, H - 1) * W + clampi(x0 + q - R, 0, W - 1));
    }
}

// ---------------------------------------------------------------- v1: direct

template <int CIN, int COUT, int K, bool RELU, int BX, int BY>
__global__ void __launch_bounds__(BX * BY)
conv_v1(const float* __restrict__ x, const float* __restrict__ wt, const float* __restrict__ bias,
        float* __restrict__ y, int H, int W, int vec_ok) {
    constexpr int R = K / 2;
    const BlockPos bp = block_pos<1>(BX, W);
    const int gx = bp.bx * BX + threadIdx.x, gy = bp.by * BY + threadIdx.y;
    if (gx >= W || gy >= H) return;
    const long long HW = (long long)H * W;
    float acc[COUT];
#pragma unroll
    for (int o = 0; o < COUT; ++o) acc[o] = __ldg(bias + o);
#pragma unroll 1
    for (int c = 0; c < CIN; ++c) {
        const float* xc = x + c * HW;
#pragma unroll 1
        for (int dy = 0; dy < K; ++dy) {
            const float* xr = xc + (long long)clampi(gy + dy - R, 0, H - 1) * W;
            const float* wr = wt + (long long)(c * K + dy) * K * COUT;
#pragma unroll
            for (int dx = 0; dx < K; ++dx) {
                const float v = __ldg(xr + clampi(gx + dx - R, 0, W - 1));
#pragma unroll
                for (int o = 0; o < COUT; ++o) acc[o] = fmaf(__ldg(wr + dx * COUT + o), v, acc[o]);
            }
        }
    }
    float* yp = y + (long long)gy * W + gx;
#pragma unroll
    for (int o = 0; o < COUT; ++o) yp[o * HW] = act<RELU>(acc[o]);
}

// ---------------------------------------------------------------- v2: filters in shared memory

template <int CIN, int COUT, int K, bool RELU, int BX, int BY, int CH>
__global__ void __launch_bounds__(BX * BY)
conv_v2(const float* __restrict__ x, const float* __restrict__ wt, const float* __restrict__ bias,
        float* __restrict__ y, int H, int W, int vec_ok) {
    static_assert(CIN % CH == 0, "CH must divide CIN");
    constexpr int R = K / 2, NT = BX * BY, WN = CH * K * K * COUT;
    extern __shared__ float4 smem4[];
    float* s_w = reinterpret_cast<float*>(smem4);
    if (dynamic_smem_bytes() < WN * sizeof(float)) __trap();
    const BlockPos bp = block_pos<1>(BX, W);
    const int tid = threadIdx.y * BX + threadIdx.x;
    const int gx = bp.bx * BX + threadIdx.x, gy = bp.by * BY + threadIdx.y;
    const bool active = gx < W && gy < H;
    const long long HW = (long long)H * W;
    float acc[COUT];
#pragma unroll
    for (int o = 0; o < COUT; ++o) acc[o] = __ldg(bias + o);
    for (int c0 = 0; c0 < CIN; c0 += CH) {
        __syncthreads();
        stage_weights<CIN, COUT, K, COUT, CH, NT>(s_w, wt, c0, 0, tid);
        __syncthreads();
        if (!active) continue;
#pragma unroll 1
        for (int c = 0; c < CH; ++c) {
            const float* xc = x + (c0 + c) * HW;
#pragma unroll 1
            for (int dy = 0; dy < K; ++dy) {
                const float* xr = xc + (long long)clampi(gy + dy - R, 0, H - 1) * W;
                const float* wr = s_w + (c * K + dy) * K * COUT;
#pragma unroll
                for (int dx = 0; dx < K; ++dx) axpy<COUT>(acc, wr + dx * COUT, __ldg(xr + clampi(gx + dx - R, 0, W - 1)));
            }
        }
    }
    if (!active) return;
    float* yp = y + (long long)gy * W + gx;
#pragma unroll
    for (int o = 0; o < COUT; ++o) yp[o * HW] = act<RELU>(acc[o]);
}

// ---------------------------------------------------------------- v3: input tile + halo in shared memory

template <int CIN, int COUT, int K, bool RELU, int BX, int BY, int CH>
__global__ void __launch_bounds__(BX * BY)
conv_v3(const float* __restrict__ x, const float* __restrict__ wt, const float* __restrict__ bias,
        float* __restrict__ y, int H, int W, int vec_ok) {
    static_assert(CIN % CH == 0, "CH must divide CIN");
    constexpr int R = K / 2, NT = BX * BY, TH = BY + K - 1, TW = BX + K - 1, TN = TH * TW;
    constexpr int WN = round4(CH * K * K * COUT);
    extern __shared__ float4 smem4[];
    float* s_w = reinterpret_cast<float*>(smem4);
    float* s_t = s_w + WN;
    if (dynamic_smem_bytes() < (WN + CH * TN) * sizeof(float)) __trap();
    const BlockPos bp = block_pos<1>(BX, W);
    const int tid = threadIdx.y * BX + threadIdx.x;
    const int x0 = bp.bx * BX, y0 = bp.by * BY;
    const int gx = x0 + threadIdx.x, gy = y0 + threadIdx.y;
    const bool active = gx < W && gy < H;
    const long long HW = (long long)H * W;
    float acc[COUT];
#pragma unroll
    for (int o = 0; o < COUT; ++o) acc[o] = __ldg(bias + o);
    for (int c0 = 0; c0 < CIN; c0 += CH) {
        __syncthreads();
        stage_weights<CIN, COUT, K, COUT, CH, NT>(s_w, wt, c0, 0, tid);
        stage_tile<CH, TH, TW, R, NT>(s_t, x, HW, H, W, c0, y0, x0, tid);
        __syncthreads();
        if (!active) continue;
#pragma unroll 1
        for (int c = 0; c < CH; ++c) {
#pragma unroll 1
            for (int dy = 0; dy < K; ++dy) {
                const float* tr = s_t + c * TN + (threadIdx.y + dy) * TW + threadIdx.x;
                const float* wr = s_w + (c * K + dy) * K * COUT;
#pragma unroll
                for (int dx = 0; dx < K; ++dx) axpy<COUT>(acc, wr + dx * COUT, tr[dx]);
            }
        }
    }
    if (!active) return;
    float* yp = y + (long long)gy * W + gx;
#pragma unroll
    for (int o = 0; o < COUT; ++o) yp[o * HW] = act<RELU>(acc[o]);
}

// ---------------------------------------------------------------- v4: register neighbourhood

template <int CIN, int COUT, int K, bool RELU, int BX, int BY, int PX, int FO, int CH>
__global__ void __launch_bounds__(BX * BY)
conv_v4(const float* __restrict__ x, const float* __restrict__ wt, const float* __restrict__ bias,
        float* __restrict__ y, int H, int W, int vec_ok) {
    static_assert(CIN % CH == 0 && COUT % FO == 0, "CH must divide CIN and FO must divide COUT");
    constexpr int R = K / 2, NT = BX * BY, NZ = COUT / FO, NB = PX + K - 1, WN = CH * K * K * FO;
    extern __shared__ float4 smem4[];
    float* s_w = reinterpret_cast<float*>(smem4);
    if (dynamic_smem_bytes() < WN * sizeof(float)) __trap();
    const BlockPos bp = block_pos<NZ>(BX * PX, W);
    const int tid = threadIdx.y * BX + threadIdx.x;
    const int f0 = bp.z * FO;
    const int x0 = bp.bx * BX * PX + threadIdx.x * PX, gy = bp.by * BY + threadIdx.y;
    const bool active = x0 < W && gy < H;
    const bool vec = vec_ok && (PX % 2 == 0) && x0 + PX <= W;
    constexpr int CU = K == 1 ? 4 : 1;  // 1x1: several channels' loads in flight per thread
    const long long HW = (long long)H * W;
    int col[NB], row[K];
#pragma unroll
    for (int i = 0; i < NB; ++i) col[i] = clampi(x0 + i - R, 0, W - 1);
#pragma unroll
    for (int dy = 0; dy < K; ++dy) row[dy] = clampi(gy + dy - R, 0, H - 1) * W;
    float acc[FO][PX];
#pragma unroll
    for (int f = 0; f < FO; ++f)
#pragma unroll
        for (int p = 0; p < PX; ++p) acc[f][p] = __ldg(bias + f0 + f);
    for (int c0 = 0; c0 < CIN; c0 += CH) {
        __syncthreads();
        stage_weights<CIN, COUT, K, FO, CH, NT>(s_w, wt, c0, f0, tid);
        __syncthreads();
        if (!active) continue;
#pragma unroll CU
        for (int c = 0; c < CH; ++c) {
            const float* xc = x + (long long)(c0 + c) * HW;
            float nb[K][NB];
            bool loaded = false;
            if constexpr (K == 1 && PX % 4 == 0) {
                if (vec) {
#pragma unroll
                    for (int p = 0; p < PX; p += 4) {
                        const float4 q = __ldg(reinterpret_cast<const float4*>(xc + row[0] + x0) + p / 4);
                        nb[0][p] = q.x; nb[0][p + 1] = q.y; nb[0][p + 2] = q.z; nb[0][p + 3] = q.w;
                    }
                    loaded = true;
                }
            } else if constexpr (K == 1 && PX % 2 == 0) {
                if (vec) {
#pragma unroll
                    for (int p = 0; p < PX; p += 2) {
                        const float2 q = __ldg(reinterpret_cast<const float2*>(xc + row[0] + x0) + p / 2);
                        nb[0][p] = q.x; nb[0][p + 1] = q.y;
                    }
                    loaded = true;
                }
            }
            if (!loaded) {
#pragma unroll
                for (int dy = 0; dy < K; ++dy)
#pragma unroll
                    for (int i = 0; i < NB; ++i) nb[dy][i] = __ldg(xc + row[dy] + col[i]);
            }
            const float* wc = s_w + c * K * K * FO;
#pragma unroll
            for (int dy = 0; dy < K; ++dy) row_fma<FO, PX, K, NB>(acc, wc + dy * K * FO, nb[dy]);
        }
    }
    if (!active) return;
    store_block<FO, PX, RELU>(acc, y, HW, W, gy, x0, f0, vec);
}

// ---------------------------------------------------------------- v5: register blocked, tiles in shared memory

template <int CIN, int COUT, int K, bool RELU, int BX, int BY, int PX, int FO, int CH>
__global__ void __launch_bounds__(BX * BY)
conv_v5(const float* __restrict__ x, const float* __restrict__ wt, const float* __restrict__ bias,
        float* __restrict__ y, int H, int W, int vec_ok) {
    static_assert(CIN % CH == 0 && COUT % FO == 0, "CH must divide CIN and FO must divide COUT");
    static_assert(PX % 4 == 0, "v5 reads its input window as float4");
    constexpr int R = K / 2, NT = BX * BY, NZ = COUT / FO;
    constexpr int TWO = BX * PX;                 // output columns per block
    constexpr int TWP = TWO + round4(K - 1);     // tile row pitch (floats), a multiple of 4
    constexpr int TH = BY + K - 1, TN = TH * TWP;
    constexpr int NB = round4(PX + K - 1);       // input window per thread and tile row
    constexpr int WN = round4(CH * K * K * FO);
    extern __shared__ float4 smem4[];
    float* s_w = reinterpret_cast<float*>(smem4);
    float* s_t = s_w + WN;
    if (dynamic_smem_bytes() < (WN + CH * TN) * sizeof(float)) __trap();
    const BlockPos bp = block_pos<NZ>(TWO, W);
    const int tid = threadIdx.y * BX + threadIdx.x;
    const int f0 = bp.z * FO, bx0 = bp.bx * TWO, by0 = bp.by * BY;
    const int x0 = bx0 + threadIdx.x * PX, gy = by0 + threadIdx.y;
    const bool active = x0 < W && gy < H;
    const long long HW = (long long)H * W;
    float acc[FO][PX];
#pragma unroll
    for (int f = 0; f < FO; ++f)
#pragma unroll
        for (int p = 0; p < PX; ++p) acc[f][p] = __ldg(bias + f0 + f);
    for (int c0 = 0; c0 < CIN; c0 += CH) {
        __syncthreads();
        stage_weights<CIN, COUT, K, FO, CH, NT>(s_w, wt, c0, f0, tid);
        stage_tile<CH, TH, TWP, R, NT>(s_t, x, HW, H, W, c0, by0, bx0, tid);
        __syncthreads();
        if (!active) continue;
#pragma unroll 1
        for (int c = 0; c < CH; ++c) {
#pragma unroll
            for (int dy = 0; dy < K; ++dy) {
                const float4* tr = reinterpret_cast<const float4*>(s_t + c * TN + (threadIdx.y + dy) * TWP + threadIdx.x * PX);
                float nb[NB];
#pragma unroll
                for (int v = 0; v < NB / 4; ++v) {
                    const float4 q = tr[v];
                    nb[4 * v] = q.x; nb[4 * v + 1] = q.y; nb[4 * v + 2] = q.z; nb[4 * v + 3] = q.w;
                }
                row_fma<FO, PX, K, NB>(acc, s_w + (c * K + dy) * K * FO, nb);
            }
        }
    }
    if (!active) return;
    store_block<FO, PX, RELU>(acc, y, HW, W, gy, x0, f0, vec_ok && x0 + PX <= W);
}
