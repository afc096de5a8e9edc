// Fused SRCNN in float32 on the FMA units: bicubic -> conv1 -> ReLU -> conv2 -> ReLU -> conv3 per
// tile, nothing intermediate in global memory. Layout and borders: fused_common.cu.
//
// F2 == 1 (9-1-5): each thread owns 4 neighbouring positions of a row and chains the layers in
// registers: conv1 for 8 channels at a time (sliding 12-sample rows of the bicubic tile), folded
// at once into the 32 conv2 accumulators, then the 25 Z taps. Weights are read as warp-uniform
// float4 broadcasts from shared memory, one load per 16-32 FMAs.
// FOLD (F2 == 1, x2 with integer samples): blocks whose Z region lies in the frame's interior skip
// the bicubic and read the LR samples through conv1 folded with it (srgpu/kernels/fold.py: four
// phase filters of 8 x 8 LR taps instead of 9 x 9 upscaled ones, 21 % fewer conv1 FMAs); a warp
// serves one phase so the weights stay broadcasts. Edge blocks take the bicubic path.
// F2 > 1 (9-3-5, 9-5-5): conv1 fills a ring of A1 rows (64 planes); conv2 reads 8-sample windows
// of it (4 positions x 8 output channels per thread, weights from L1 via __ldg); a Z pass follows.
#include "fused_common.cu"

template <int F2, int TH, int RW, int R, int NT, int P, bool FOLD>
struct FfmaCfg {
    static constexpr int P_ = P;  // positions per thread in the f2 == 1 chain (2 or 4)
    static constexpr int H2 = F2 / 2;
    static constexpr int HAL = 6 + H2;  // bicubic window margin around the output tile
    static constexpr int TW = RW - 4;   // output tile width; Z region = tile +- 2
    static constexpr int RW1 = RW + 2 * H2;
    static constexpr int RW1P = (RW1 + 3) / 4 * 4;
    static constexpr int Y0ROWS = TH + 2 * HAL;
    static constexpr int Y0W = RW1P + 8;
    static constexpr int CZ = R + 4;
    static constexpr int C1 = R + 2 * H2;
    static constexpr int R_ = R;
    static constexpr int RW_ = RW;
    static constexpr int PZ = (CZ * RW + 31) / 32 * 32 + 4;  // plane stride = 4 (mod 32): no bank conflicts
    static constexpr int P1 = (C1 * RW1P + 31) / 32 * 32 + 4;
    // fold path: LR tile of LRR rows x LRCW columns in two copies (copy d holds column c + d at c)
    static constexpr int LRR = (TH + 3) / 2 + 9;
    static constexpr int LRCW = RW / 2 + 12;
    static constexpr int PLR = LRR * LRCW + 4;
    // shared memory (floats); [0, O_W1) is a copy of the packed global array's prefix, then the
    // bicubic path's conv1 weights and Y0 plane, or the fold path's phase filters and LR copies
    static constexpr int O_B1 = 0;                  // [64]
    static constexpr int O_B2 = O_B1 + 64;          // [32]
    static constexpr int O_B3 = O_B2 + 32;          // [1] + 3 pad
    static constexpr int O_W3 = O_B3 + 4;           // [25 taps][32]
    static constexpr int O_W2 = O_W3 + 25 * 32;     // F2 == 1: [64 in][32 out] (F2 > 1: global only, same offset)
    static constexpr int O_W1 = O_W2 + (F2 == 1 ? 64 * 32 : 0);  // [81 taps][64]
    static constexpr int O_Y0 = O_W1 + 81 * 64;
    static constexpr int O_A1 = O_Y0 + Y0ROWS * Y0W;
    static constexpr int O_A2 = O_A1 + (F2 > 1 ? 64 * P1 : 0);
    static constexpr int END_BIC = O_A2 + (F2 > 1 ? 32 * R * RW : 0);
    static constexpr int O_W1P = O_W1;              // [phase py * 2 + px][64 taps a * 8 + b][64]
    static constexpr int O_LR = O_W1P + 4 * 64 * 64;
    static constexpr int END_FOLD = FOLD ? O_LR + 2 * PLR : 0;
    static constexpr int O_Z = END_BIC > END_FOLD ? END_BIC : END_FOLD;
    static constexpr int TOTAL = O_Z + 25 * PZ;
    // the packed global array: [b1 | b2 | b3 0 0 0 | W3 | W2 | W1 | W1P (FOLD)]
    static constexpr int G_W2 = O_W3 + 25 * 32;
    static constexpr int G_W1 = G_W2 + 64 * F2 * F2 * 32;
    static constexpr int G_W1P = G_W1 + 81 * 64;
    static constexpr int PACKED = G_W1P + (FOLD ? 4 * 64 * 64 : 0);
    static_assert(RW % 16 == 0, "RW must be a multiple of 16");
    static_assert(R >= 4, "R must be at least 4 (border fix-ups read within the ring)");
    static_assert(P == 4 || (P == 2 && F2 == 1), "P is 4, or 2 for the f2 == 1 chain");
    static_assert(O_W1 % 4 == 0 && O_Y0 % 4 == 0 && O_LR % 4 == 0 && PLR % 4 == 0 && G_W1 % 4 == 0, "float4 alignment");
    static_assert(!FOLD || (F2 == 1 && P == 4 && RW == 64 && TH % 2 == 0 && R % 2 == 0),
                  "FOLD: the f2 == 1 chain, 4 positions per thread, RW 64, even TH and R");
};

// ---------------------------------------------------------------- F2 == 1: chained in registers

// Y0 row segment [x0, x0 + P + 8) into registers (x0 is a multiple of P: aligned vector loads).
template <int P>
__device__ __forceinline__ void ffma_load_row(const float* src, float (&y)[P + 8]) {
    if constexpr (P == 4) {
        const float4* v = reinterpret_cast<const float4*>(src);
#pragma unroll
        for (int i = 0; i < 3; ++i) {
            const float4 q = v[i];
            y[4 * i] = q.x; y[4 * i + 1] = q.y; y[4 * i + 2] = q.z; y[4 * i + 3] = q.w;
        }
    } else {
        const float2* v = reinterpret_cast<const float2*>(src);
#pragma unroll
        for (int i = 0; i < 5; ++i) {
            const float2 q = v[i];
            y[2 * i] = q.x; y[2 * i + 1] = q.y;
        }
    }
}

// acc2[p][o] = b2[o]: conv2's accumulators of P positions start at its bias.
template <int P>
__device__ __forceinline__ void ffma_conv2_init(float (&acc2)[P][32], const float* b2s) {
#pragma unroll
    for (int o = 0; o < 32; ++o) {
        const float b = b2s[o];
#pragma unroll
        for (int p = 0; p < P; ++p) acc2[p][o] = b;
    }
}

// acc2[p][o] += W2[c][o] * a1[p] for one conv1 channel c (w2 = its 32 weights): 32 P FMAs.
template <int P>
__device__ __forceinline__ void ffma_conv2_acc(float (&acc2)[P][32], const float (&a1)[P], const float* w2) {
#pragma unroll
    for (int oq = 0; oq < 8; ++oq) {
        const float4 w = *reinterpret_cast<const float4*>(w2 + oq * 4);
#pragma unroll
        for (int p = 0; p < P; ++p) {
            acc2[p][oq * 4 + 0] = fmaf(w.x, a1[p], acc2[p][oq * 4 + 0]);
            acc2[p][oq * 4 + 1] = fmaf(w.y, a1[p], acc2[p][oq * 4 + 1]);
            acc2[p][oq * 4 + 2] = fmaf(w.z, a1[p], acc2[p][oq * 4 + 2]);
            acc2[p][oq * 4 + 3] = fmaf(w.w, a1[p], acc2[p][oq * 4 + 3]);
        }
    }
}

// ReLU(conv2) of P positions -> their 25 Z taps, position p at zb[d * PZ + CS * p].
template <class C, int P, int CS>
__device__ __forceinline__ void ffma_relu_z(float (&acc2)[P][32], const float* W3s, float* zb) {
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
        for (int o = 0; o < 32; ++o) acc2[p][o] = fmaxf(acc2[p][o], 0.0f);
#pragma unroll 1
    for (int d = 0; d < 25; ++d) {
        float z[P];
#pragma unroll
        for (int p = 0; p < P; ++p) z[p] = 0.0f;
        const float* w3 = W3s + d * 32;
#pragma unroll
        for (int cq = 0; cq < 8; ++cq) {
            const float4 w = *reinterpret_cast<const float4*>(w3 + cq * 4);
#pragma unroll
            for (int p = 0; p < P; ++p) {
                z[p] = fmaf(w.x, acc2[p][cq * 4 + 0], z[p]);
                z[p] = fmaf(w.y, acc2[p][cq * 4 + 1], z[p]);
                z[p] = fmaf(w.z, acc2[p][cq * 4 + 2], z[p]);
                z[p] = fmaf(w.w, acc2[p][cq * 4 + 3], z[p]);
            }
        }
        if constexpr (CS == 1 && P == 4)
            *reinterpret_cast<float4*>(zb + d * C::PZ) = make_float4(z[0], z[1], z[2], z[3]);
        else if constexpr (CS == 1 && P == 2)
            *reinterpret_cast<float2*>(zb + d * C::PZ) = make_float2(z[0], z[1]);
        else
#pragma unroll
            for (int p = 0; p < P; ++p) zb[d * C::PZ + CS * p] = z[p];
    }
}

template <class C, int NT>
__device__ void ffma_chain_z(const float* sm, float* Z, int z0, int z1) {
    constexpr int P = C::P_, GPR = C::RW_ / P;
    const float* W1s = sm + C::O_W1;
    const float* b1s = sm + C::O_B1;
    const float* b2s = sm + C::O_B2;
    const float* W2s = sm + C::O_W2;
    const float* W3s = sm + C::O_W3;
    const float* Y0 = sm + C::O_Y0;
    const int n = (z1 - z0) * GPR;
    for (int g = threadIdx.x; g < n; g += NT) {
        const int rr = z0 + g / GPR, x0 = (g % GPR) * P;
        const float* yb = Y0 + rr * C::Y0W + x0;
        float acc2[P][32];
        ffma_conv2_init<P>(acc2, b2s);
#pragma unroll 1
        for (int cc = 0; cc < 64; cc += 8) {
            float acc1[P][8];
#pragma unroll
            for (int c = 0; c < 8; ++c) {
                const float b = b1s[cc + c];
#pragma unroll
                for (int p = 0; p < P; ++p) acc1[p][c] = b;
            }
#pragma unroll 1
            for (int dy = 0; dy < 9; ++dy) {
                float y[P + 8];
                ffma_load_row<P>(yb + dy * C::Y0W, y);
                const float* wr = W1s + dy * 9 * 64 + cc;
#pragma unroll
                for (int dx = 0; dx < 9; ++dx) {
                    const float4 wa = *reinterpret_cast<const float4*>(wr + dx * 64);
                    const float4 wb = *reinterpret_cast<const float4*>(wr + dx * 64 + 4);
                    const float w[8] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
#pragma unroll
                    for (int p = 0; p < P; ++p)
#pragma unroll
                        for (int c = 0; c < 8; ++c) acc1[p][c] = fmaf(w[c], y[p + dx], acc1[p][c]);
                }
            }
#pragma unroll
            for (int c = 0; c < 8; ++c) {
                float a1[P];
#pragma unroll
                for (int p = 0; p < P; ++p) a1[p] = fmaxf(acc1[p][c], 0.0f);
                ffma_conv2_acc<P>(acc2, a1, W2s + (cc + c) * 32);
            }
        }
        ffma_relu_z<C, P, 1>(acc2, W3s, Z + (rr % C::CZ) * C::RW_ + x0);
    }
}

// ---------------------------------------------------------------- FOLD: conv1 from the LR samples

// The LR tile of a fold block (rows ly0 + [0, LRR), columns lx0 + [0, LRCW]) as floats, the
// bicubic's symmetric border applied, in two copies: copy d holds column c + d at c, so every
// window starts on a float4. Ends with a barrier.
template <class C, int NT>
__device__ void ffma_load_lr(const FusedArgs& a, float* sm, int ly0, int lx0) {
    float* L = sm + C::O_LR;
    constexpr int N = C::LRCW + 1;
    for (int e = threadIdx.x; e < C::LRR * N; e += NT) {
        const int r = e / N, c = e - r * N;
        const float v = fold_sample(a, ly0 + r, lx0 + c);
        if (c < C::LRCW) L[r * C::LRCW + c] = v;
        if (c >= 1) L[C::PLR + r * C::LRCW + c - 1] = v;
    }
    __syncthreads();
}

// conv1 (folded) -> conv2 -> Z for Z-region rows [z0, z1) of a fold block. A warp shares one phase
// (weights stay warp-uniform broadcasts): per 8 rows, 4 warps of (row parity py, column parity px),
// lane = 4 rows of that parity x 8 groups; a thread owns region columns px + 8 grp + 2p, p < 4,
// whose LR windows slide by one column. d0 / d1: window offsets of phase 0 / 1 from the LR origin.
template <class C, int NT>
__device__ void ffma_chain_z_fold(const float* sm, float* Z, int z0, int z1, int d0, int d1, float fscale) {
    const float* b1s = sm + C::O_B1;
    const float* b2s = sm + C::O_B2;
    const float* W2s = sm + C::O_W2;
    const float* W3s = sm + C::O_W3;
    const float* L = sm + C::O_LR;
    const int n = (z1 - z0 + 7) / 8 * 128;
    for (int g = threadIdx.x; g < n; g += NT) {
        const int q = (g >> 5) & 3, lane = g & 31;
        const int py = q >> 1, px = q & 1, grp = lane & 7;
        const int rr = z0 + (g >> 7) * 8 + 2 * (lane >> 3) + py;  // z0 is even
        if (rr >= z1) continue;
        const int dy = py ? d1 : d0, dx = px ? d1 : d0;
        const float* yb = L + dx * C::PLR + ((rr >> 1) + dy) * C::LRCW + 4 * grp;
        const float* W1s = sm + C::O_W1P + (py * 2 + px) * 64 * 64;
        float acc2[4][32];
        ffma_conv2_init<4>(acc2, b2s);
#pragma unroll 1
        for (int cc = 0; cc < 64; cc += 8) {
            float acc1[4][8];
#pragma unroll
            for (int c = 0; c < 8; ++c)
#pragma unroll
                for (int p = 0; p < 4; ++p) acc1[p][c] = 0.0f;
#pragma unroll 1
            for (int ta = 0; ta < 8; ++ta) {
                float y[12];
                ffma_load_row<4>(yb + ta * C::LRCW, y);
                const float* wr = W1s + ta * 8 * 64 + cc;
#pragma unroll
                for (int tb = 0; tb < 8; ++tb) {
                    const float4 wa = *reinterpret_cast<const float4*>(wr + tb * 64);
                    const float4 wb = *reinterpret_cast<const float4*>(wr + tb * 64 + 4);
                    const float w[8] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
#pragma unroll
                    for (int p = 0; p < 4; ++p)
#pragma unroll
                        for (int c = 0; c < 8; ++c) acc1[p][c] = fmaf(w[c], y[p + tb], acc1[p][c]);
                }
            }
#pragma unroll
            for (int c = 0; c < 8; ++c) {
                float a1[4];
                const float b = b1s[cc + c];
#pragma unroll
                for (int p = 0; p < 4; ++p) a1[p] = fmaxf(fmaf(acc1[p][c], fscale, b), 0.0f);
                ffma_conv2_acc<4>(acc2, a1, W2s + (cc + c) * 32);
            }
        }
        ffma_relu_z<C, 4, 2>(acc2, W3s, Z + (rr % C::CZ) * C::RW_ + px + 8 * grp);
    }
}

// ---------------------------------------------------------------- F2 > 1: A1 ring, then conv2, then Z

template <class C, int NT>
__device__ void ffma_conv1_ring(const float* sm, float* A1, int a0, int a1) {
    constexpr int GPR = C::RW1P / 4;
    const float* W1s = sm + C::O_W1;
    const float* b1s = sm + C::O_B1;
    const float* Y0 = sm + C::O_Y0;
    const int per = (a1 - a0) * GPR;
    for (int g = threadIdx.x; g < per * 4; g += NT) {
        const int cc = (g / per) * 16, rem = g % per;
        const int rr = a0 + rem / GPR, x0 = (rem % GPR) * 4;
        const float* yb = Y0 + rr * C::Y0W + x0;
        float acc[4][16];
#pragma unroll
        for (int c = 0; c < 16; ++c) {
            const float b = b1s[cc + c];
#pragma unroll
            for (int p = 0; p < 4; ++p) acc[p][c] = b;
        }
#pragma unroll 1
        for (int dy = 0; dy < 9; ++dy) {
            const float4* yr = reinterpret_cast<const float4*>(yb + dy * C::Y0W);
            const float4 q0 = yr[0], q1 = yr[1], q2 = yr[2];
            const float y[12] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w, q2.x, q2.y, q2.z, q2.w};
            const float* wr = W1s + dy * 9 * 64 + cc;
#pragma unroll
            for (int dx = 0; dx < 9; ++dx) {
#pragma unroll
                for (int cq = 0; cq < 4; ++cq) {
                    const float4 w = *reinterpret_cast<const float4*>(wr + dx * 64 + cq * 4);
#pragma unroll
                    for (int p = 0; p < 4; ++p) {
                        acc[p][cq * 4 + 0] = fmaf(w.x, y[p + dx], acc[p][cq * 4 + 0]);
                        acc[p][cq * 4 + 1] = fmaf(w.y, y[p + dx], acc[p][cq * 4 + 1]);
                        acc[p][cq * 4 + 2] = fmaf(w.z, y[p + dx], acc[p][cq * 4 + 2]);
                        acc[p][cq * 4 + 3] = fmaf(w.w, y[p + dx], acc[p][cq * 4 + 3]);
                    }
                }
            }
        }
        float* dst = A1 + cc * C::P1 + (rr % C::C1) * C::RW1P + x0;
#pragma unroll
        for (int c = 0; c < 16; ++c)
            *reinterpret_cast<float4*>(dst + c * C::P1) =
                make_float4(fmaxf(acc[0][c], 0.0f), fmaxf(acc[1][c], 0.0f), fmaxf(acc[2][c], 0.0f), fmaxf(acc[3][c], 0.0f));
    }
}

template <class C, int NT, int F2>
__device__ void ffma_conv2_ring(const float* sm, const float* __restrict__ w2g, const float* A1, float* A2,
                                int z0, int z1) {
    constexpr int GPR = C::RW_ / 4;
    const float* b2s = sm + C::O_B2;
    const int per = (z1 - z0) * GPR;
    for (int g = threadIdx.x; g < per * 4; g += NT) {
        const int oc = (g / per) * 8, rem = g % per;
        const int rr = z0 + rem / GPR, x0 = (rem % GPR) * 4;
        float acc[4][8];
#pragma unroll
        for (int o = 0; o < 8; ++o) {
            const float b = b2s[oc + o];
#pragma unroll
            for (int p = 0; p < 4; ++p) acc[p][o] = b;
        }
        const float* rows[F2];
#pragma unroll
        for (int dy = 0; dy < F2; ++dy) rows[dy] = A1 + ((rr + dy) % C::C1) * C::RW1P + x0;
        const float* wg = w2g + oc;  // [c][dy][dx][32]
#pragma unroll 1
        for (int c = 0; c < 64; ++c) {
#pragma unroll
            for (int dy = 0; dy < F2; ++dy) {
                const float4 v0 = *reinterpret_cast<const float4*>(rows[dy] + c * C::P1);
                const float4 v1 = *reinterpret_cast<const float4*>(rows[dy] + c * C::P1 + 4);
                const float v[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
#pragma unroll
                for (int dx = 0; dx < F2; ++dx) {
                    const float4* wp = reinterpret_cast<const float4*>(wg + ((c * F2 + dy) * F2 + dx) * 32);
                    const float4 wa = __ldg(wp), wb = __ldg(wp + 1);
                    const float w[8] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
#pragma unroll
                    for (int p = 0; p < 4; ++p)
#pragma unroll
                        for (int o = 0; o < 8; ++o) acc[p][o] = fmaf(w[o], v[p + dx], acc[p][o]);
                }
            }
        }
        float* dst = A2 + oc * (C::R_ * C::RW_) + (rr - z0) * C::RW_ + x0;
#pragma unroll
        for (int o = 0; o < 8; ++o)
            *reinterpret_cast<float4*>(dst + o * (C::R_ * C::RW_)) =
                make_float4(fmaxf(acc[0][o], 0.0f), fmaxf(acc[1][o], 0.0f), fmaxf(acc[2][o], 0.0f), fmaxf(acc[3][o], 0.0f));
    }
}

template <class C, int NT>
__device__ void ffma_z_from_a2(const float* sm, const float* A2, float* Z, int z0, int z1) {
    constexpr int GPR = C::RW_ / 4;
    const float* W3s = sm + C::O_W3;
    const int n = (z1 - z0) * GPR;
    for (int g = threadIdx.x; g < n; g += NT) {
        const int rr = z0 + g / GPR, x0 = (g % GPR) * 4;
        float a[4][32];
        const float* src = A2 + (rr - z0) * C::RW_ + x0;
#pragma unroll
        for (int c = 0; c < 32; ++c) {
            const float4 v = *reinterpret_cast<const float4*>(src + c * (C::R_ * C::RW_));
            a[0][c] = v.x; a[1][c] = v.y; a[2][c] = v.z; a[3][c] = v.w;
        }
        float* zb = Z + (rr % C::CZ) * C::RW_ + x0;
#pragma unroll 1
        for (int d = 0; d < 25; ++d) {
            float z[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            const float* w3 = W3s + d * 32;
#pragma unroll
            for (int c = 0; c < 32; ++c) {
                const float w = w3[c];
#pragma unroll
                for (int p = 0; p < 4; ++p) z[p] = fmaf(w, a[p][c], z[p]);
            }
            *reinterpret_cast<float4*>(zb + d * C::PZ) = make_float4(z[0], z[1], z[2], z[3]);
        }
    }
}

// ---------------------------------------------------------------- the kernel

// fold, fscale: as fused_tc.cu (fscale = 1 / max_value here: the phase filters are not scaled).
template <int F2, int TH, int RW, int R, int NT, int P, bool FOLD>
__global__ void __launch_bounds__(NT, 1) fused_fp32(FUSED_PARAMS, const float* __restrict__ weights,
                                                    const int* __restrict__ fold, float fscale) {
    FUSED_ARGS_INIT
    typedef FfmaCfg<F2, TH, RW, R, NT, P, FOLD> C;
    extern __shared__ __align__(16) float sm[];
    if (dynamic_smem_bytes() < C::TOTAL * 4u) __trap();
    const int ox0 = blockIdx.x * C::TW, oy0 = blockIdx.y * TH;
    const int nout = min(TH, a.H - oy0), ncol = min(C::TW, a.W - ox0);
    const int nz = nout + 4;
    const int zvy = oy0 - 2, zvx = ox0 - 2;  // virtual origin of the Z region
    FoldBlock fb = {false, 0, 0, 0, 0};
    if constexpr (FOLD) fb = fold_block(a, fold, zvy, nz, zvx, RW);
    const bool folding = fb.on;
    {
        const float4* src = reinterpret_cast<const float4*>(weights);
        float4* dst = reinterpret_cast<float4*>(sm);
        for (int i = threadIdx.x; i < C::O_W1 / 4; i += NT) dst[i] = __ldg(src + i);
        if (folding) {
            for (int i = threadIdx.x; i < 4 * 64 * 64 / 4; i += NT) dst[C::O_W1P / 4 + i] = __ldg(src + C::G_W1P / 4 + i);
        } else {
            for (int i = threadIdx.x; i < 81 * 64 / 4; i += NT) dst[C::O_W1 / 4 + i] = __ldg(src + C::G_W1 / 4 + i);
        }
    }
    float* Y0 = sm + C::O_Y0;
    float* Z = sm + C::O_Z;
    if (folding) {
        ffma_load_lr<C, NT>(a, sm, fb.ly0, fb.lx0);
    } else {
        fused_bicubic(a, oy0 - C::HAL, C::Y0ROWS, ox0 - C::HAL, C::Y0W,
                      a.first0[a.rows_first ? blockIdx.x : blockIdx.y], Z,
                      [&](int r, int c, float v) { Y0[r * C::Y0W + c] = v; });
        if (a.out_mode == OUT_BICUBIC) {
            for (int e = threadIdx.x; e < nout * ncol; e += NT) {
                const int i = e / ncol, j = e % ncol;
                fused_store(a, oy0 + i, ox0 + j, Y0[(i + C::HAL) * C::Y0W + j + C::HAL]);
            }
            return;
        }
    }
    const float b3 = sm[C::O_B3];
    int z_done = 0, a1_done = 0, out_done = 0;
    while (out_done < nout) {
        const int z_t = min(z_done + R, nz);
        if constexpr (F2 > 1) {
            float* A1 = sm + C::O_A1;
            const int a_t = min(z_t + 2 * C::H2, nz + 2 * C::H2);
            if (a_t > a1_done) {
                ffma_conv1_ring<C, NT>(sm, A1, a1_done, a_t);
                __syncthreads();
                fixup_planar(A1, 64, C::P1, C::C1, C::RW1P, C::RW1P, a1_done, a_t, zvy - C::H2, zvx - C::H2, a.H, a.W);
                a1_done = a_t;
            }
            float* A2 = sm + C::O_A2;
            ffma_conv2_ring<C, NT, F2>(sm, weights + C::G_W2, A1, A2, z_done, z_t);
            __syncthreads();
            ffma_z_from_a2<C, NT>(sm, A2, Z, z_done, z_t);
        } else if constexpr (FOLD) {
            if (folding)
                ffma_chain_z_fold<C, NT>(sm, Z, z_done, z_t, fb.d0, fb.d1, fscale);
            else
                ffma_chain_z<C, NT>(sm, Z, z_done, z_t);
        } else {
            ffma_chain_z<C, NT>(sm, Z, z_done, z_t);
        }
        out_done = fused_z_tail<C::CZ, C::PZ, RW>(a, Z, b3, z_done, z_t, out_done, nout, ncol, oy0, ox0, zvy, zvx);
        z_done = z_t;
    }
}

// Layout constants for the host: {shared bytes, tile rows, tile cols, Y0 rows, Y0 cols, first-pass
// buffer capacity in floats, threads, packed weight floats}.
template <int F2, int TH, int RW, int R, int NT, int P, bool FOLD>
__global__ void fused_fp32_layout(int* out) {
    typedef FfmaCfg<F2, TH, RW, R, NT, P, FOLD> C;
    out[0] = C::TOTAL * 4; out[1] = TH; out[2] = C::TW; out[3] = C::Y0ROWS; out[4] = C::Y0W;
    out[5] = 25 * C::PZ; out[6] = NT; out[7] = C::PACKED; out[8] = C::O_W1;
}
