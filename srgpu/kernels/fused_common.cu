// Pieces shared by the fused SRCNN kernels (fused_fp32.cu, fused_tc.cu); inlined into each.
//
// A block owns an output tile of TH rows x (RW - 4) columns. It bicubic-upscales the tile's
// low-resolution footprint into shared memory (the canonical GPU bicubic, bit for bit), then walks
// down the tile in chunks of R rows: conv1 (+conv2) produce new rows of a ring buffer, conv3 is
// split into Z[p][d] = sum_c A2[p][c] * W3[c][d] (one plane per tap d, also a ring) and a shifted
// sum out[q] = b3 + sum_d Z[q + d][d]. Only the LR plane is read and the final plane written.
//
// Borders: every layer of the reference replicates ITS OWN edge values ('same', replicate), so a
// buffer position outside the image must hold the value of the nearest in-image position of that
// layer. Each ring holds "virtual" positions: after computing new rows, positions outside the
// image are overwritten with the clamped in-image position's values (fixup_*), before anything
// reads them. The bicubic evaluates at the clamped position directly.
#include "common.cuh"

typedef unsigned int u32;

#define IN_U8 0
#define IN_U16 1
#define IN_F32 2

#define OUT_RAW 0      // float32, unclipped (the network output; tests, the engine's fused hook)
#define OUT_F32 1      // float32 clipped to [0, 1]
#define OUT_U8 2       // integer, quantised against max_value as from_unit_float
#define OUT_U16 3
#define OUT_BICUBIC 4  // float32 bicubic only (checks the in-kernel bicubic bit for bit)

struct FusedArgs {
    const void* in;   // LR plane (h, w), row pitch in elements
    int in_type, in_pitch, h, w;
    float inv_max;    // integer input: float32(1 / max_value) (host-computed, as load_unit)
    int H, W;         // output size
    const float* wv;  // row coefficients (H, tv) and LR row indices
    const int* iv;
    int tv;
    const float* wh;  // column coefficients (W, th) and LR column indices
    const int* ih;
    int th;
    int rows_first;   // 1: vertical pass first (imresize's order for scale_rows <= scale_cols)
    const int* first0;  // per tile (x for rows_first, else y): first LR index the first pass needs
    int nfirst;         // LR samples along the first pass's other axis per tile (max over tiles)
    void* out;
    int out_mode, out_pitch;
    float max_value;
};

// Kernel parameters (passed one by one: CuPy launches with plain scalars and arrays).
#define FUSED_PARAMS                                                                                   \
    const void *in, int in_type, int in_pitch, int h, int w, float inv_max, int H, int W,             \
        const float *wv, const int *iv, int tv, const float *wh, const int *ih, int th, int rows_first, \
        const int *first0, int nfirst, void *out, int out_mode, int out_pitch, float max_value
// A batch of planes of one size, one per grid z (srgpu.engine.imageproc's groups of images): plane z
// of the input starts z * h rows of in_pitch samples into `in`, of the output z * H rows of out_pitch
// into `out`; the tables serve every plane. One plane: z = 0.
__device__ __forceinline__ int in_sample_bytes(int in_type) { return in_type == IN_U8 ? 1 : in_type == IN_U16 ? 2 : 4; }
__device__ __forceinline__ int out_sample_bytes(int out_mode) {
    return out_mode == OUT_U8 ? 1 : out_mode == OUT_U16 ? 2 : 4;
}
#define FUSED_ARGS_INIT                                                                                     \
    const FusedArgs a = {(const char*)in + (long long)blockIdx.z * h * in_pitch * in_sample_bytes(in_type),  \
                         in_type, in_pitch, h, w, inv_max, H, W, wv, iv, tv, wh, ih, th, rows_first, first0, \
                         nfirst, (char*)out + (long long)blockIdx.z * H * out_pitch * out_sample_bytes(out_mode), \
                         out_mode, out_pitch, max_value};

__device__ __forceinline__ float fused_load_in(const FusedArgs& a, long long idx) {
    if (a.in_type == IN_U8) return __fmul_rn((float)__ldg((const unsigned char*)a.in + idx), a.inv_max);
    if (a.in_type == IN_U16) return __fmul_rn((float)__ldg((const unsigned short*)a.in + idx), a.inv_max);
    return __ldg((const float*)a.in + idx);
}

// Final store, as common.cuh's store_unit (no FMA contraction in the quantisation).
__device__ __forceinline__ void fused_store(const FusedArgs& a, int y, int x, float v) {
    const long long i = (long long)y * a.out_pitch + x;
    switch (a.out_mode) {
    case OUT_F32: ((float*)a.out)[i] = fminf(fmaxf(v, 0.0f), 1.0f); break;
    case OUT_U8:
        ((unsigned char*)a.out)[i] =
            (unsigned char)floorf(__fadd_rn(__fmul_rn(fminf(fmaxf(v, 0.0f), 1.0f), a.max_value), 0.5f));
        break;
    case OUT_U16:
        ((unsigned short*)a.out)[i] =
            (unsigned short)floorf(__fadd_rn(__fmul_rn(fminf(fmaxf(v, 0.0f), 1.0f), a.max_value), 0.5f));
        break;
    default: ((float*)a.out)[i] = v; break;  // OUT_RAW, OUT_BICUBIC
    }
}

// Bicubic of the virtual HR window rows [vy0, vy0 + ny) x cols [vx0, vx0 + nx), each position
// clamped into the image, through `store(r, c, value)`. Same arithmetic as bicubic.cu: per output
// acc = 0; acc = fmaf(w[t], x[idx[t]], acc) in tap order, in imresize's pass order. `tmp` holds the
// first pass: ny x nfirst (rows first) or nfirst x nx (columns first). Ends with a barrier.
template <class Store>
__device__ void fused_bicubic(const FusedArgs& a, int vy0, int ny, int vx0, int nx, int first0,
                              float* tmp, Store store) {
    const int nf = a.nfirst;
    if (a.rows_first) {
        const int ncols = min(nf, a.w - first0);
        // e = r * nf + j walks by blockDim.x without a division per element
        const int dr = blockDim.x / nf, dj = blockDim.x - dr * nf;
        int r = threadIdx.x / nf, j = threadIdx.x - r * nf;
#pragma unroll 4
        for (int e = threadIdx.x; e < ny * nf; e += blockDim.x) {
            float acc = 0.0f;
            if (j < ncols) {
                const int yy = clampi(vy0 + r, 0, a.H - 1);
                const float* wr = a.wv + (long long)yy * a.tv;
                const int* ir = a.iv + (long long)yy * a.tv;
                for (int t = 0; t < a.tv; ++t)
                    acc = fmaf(__ldg(wr + t), fused_load_in(a, (long long)__ldg(ir + t) * a.in_pitch + first0 + j), acc);
            }
            tmp[e] = acc;
            r += dr;
            j += dj;
            if (j >= nf) { j -= nf; ++r; }
        }
        __syncthreads();
        for (int e = threadIdx.x; e < ny * nx; e += blockDim.x) {
            const int r = e / nx, c = e - r * nx;
            const int xx = clampi(vx0 + c, 0, a.W - 1);
            const float* wc = a.wh + (long long)xx * a.th;
            const int* ic = a.ih + (long long)xx * a.th;
            const float* tr = tmp + r * nf - first0;
            float acc = 0.0f;
            for (int t = 0; t < a.th; ++t) acc = fmaf(__ldg(wc + t), tr[__ldg(ic + t)], acc);
            store(r, c, acc);
        }
    } else {
        const int nrows = min(nf, a.h - first0);
#pragma unroll 4
        for (int e = threadIdx.x; e < nf * nx; e += blockDim.x) {
            const int j = e / nx, c = e - j * nx;
            float acc = 0.0f;
            if (j < nrows) {
                const int xx = clampi(vx0 + c, 0, a.W - 1);
                const float* wc = a.wh + (long long)xx * a.th;
                const int* ic = a.ih + (long long)xx * a.th;
                const long long row = (long long)(first0 + j) * a.in_pitch;
                for (int t = 0; t < a.th; ++t)
                    acc = fmaf(__ldg(wc + t), fused_load_in(a, row + __ldg(ic + t)), acc);
            }
            tmp[e] = acc;
        }
        __syncthreads();
        for (int e = threadIdx.x; e < ny * nx; e += blockDim.x) {
            const int r = e / nx, c = e - r * nx;
            const int yy = clampi(vy0 + r, 0, a.H - 1);
            const float* wr = a.wv + (long long)yy * a.tv;
            const int* ir = a.iv + (long long)yy * a.tv;
            float acc = 0.0f;
            for (int t = 0; t < a.tv; ++t) acc = fmaf(__ldg(wr + t), tmp[(__ldg(ir + t) - first0) * nx + c], acc);
            store(r, c, acc);
        }
    }
    __syncthreads();
}

// The bicubic's symmetric border (srgpu.resize.mirror): ..., 1, 0 | 0, 1, ..., n-1 | n-1, n-2, ...
__device__ __forceinline__ int mirror_index(int i, int n) {
    const int p = 2 * n;
    i %= p;
    if (i < 0) i += p;
    return i < n ? i : p - 1 - i;
}

// The fold (FOLD kernels, srgpu/kernels/fold.py) for one block. `fold` = int[8] {on, window offset
// of phase 0, of phase 1, their minimum, then the frame rows [ylo, yhi) and columns [xlo, xhi) where
// the phase filters hold}. The block folds when `on` and its whole Z region (virtual rows [zvy,
// zvy + nz), columns [zvx, zvx + zw), both starting even) lies there; then (ly0, lx0) is its LR
// tile's origin and d0 / d1 where phase 0 / 1's windows start in it.
struct FoldBlock {
    bool on;
    int ly0, lx0, d0, d1;
};
__device__ __forceinline__ FoldBlock fold_block(const FusedArgs& a, const int* __restrict__ fold, int zvy, int nz,
                                                int zvx, int zw) {
    FoldBlock f = {false, 0, 0, 0, 0};
    f.on = __ldg(fold) != 0 && a.out_mode != OUT_BICUBIC && zvy >= __ldg(fold + 4) && zvy + nz <= __ldg(fold + 5) &&
           zvx >= __ldg(fold + 6) && zvx + zw <= __ldg(fold + 7);
    if (f.on) {
        const int offmin = __ldg(fold + 3);
        f.d0 = __ldg(fold + 1) - offmin;
        f.d1 = __ldg(fold + 2) - offmin;
        f.ly0 = (zvy >> 1) + offmin;
        f.lx0 = (zvx >> 1) + offmin;
    }
    return f;
}

// The integer LR sample at (y, x), the bicubic's symmetric border applied, as a float (exact).
__device__ __forceinline__ float fold_sample(const FusedArgs& a, int y, int x) {
    const long long idx = (long long)mirror_index(y, a.h) * a.in_pitch + mirror_index(x, a.w);
    return a.in_type == IN_U8 ? (float)__ldg((const unsigned char*)a.in + idx) : (float)__ldg((const unsigned short*)a.in + idx);
}

// Replicate border of a planar ring buffer: `nplanes` planes `pstride` floats apart, each
// [C slots][rowlen], region row r in slot r % C, region column c at virtual column vx0 + c.
// New region rows [r0, r1) (virtual rows vy0 + r): out-of-image columns copy the clamped column,
// then out-of-image rows copy the clamped row. Block-uniform branches; barriers when it writes.
__device__ void fixup_planar(float* buf, int nplanes, int pstride, int C, int rowlen, int ncols, int r0, int r1,
                             int vy0, int vx0, int H, int W) {
    if (vx0 < 0 || vx0 + ncols > W) {
        const int nr = r1 - r0, n = nplanes * nr * ncols;
        for (int e = threadIdx.x; e < n; e += blockDim.x) {
            const int c = e % ncols, t = e / ncols;
            const int v = vx0 + c;
            if (v < 0 || v >= W) {
                float* row = buf + (t / nr) * pstride + ((r0 + t % nr) % C) * rowlen;
                row[c] = row[clampi(v, 0, W - 1) - vx0];
            }
        }
        __syncthreads();
    }
    if (vy0 + r0 < 0 || vy0 + r1 > H) {
        const int nr = r1 - r0, n = nplanes * nr * ncols;
        for (int e = threadIdx.x; e < n; e += blockDim.x) {
            const int c = e % ncols, t = e / ncols;
            const int r = r0 + t % nr, v = vy0 + r;
            if (v < 0 || v >= H) {
                float* plane = buf + (t / nr) * pstride;
                plane[(r % C) * rowlen + c] = plane[((clampi(v, 0, H - 1) - vy0) % C) * rowlen + c];
            }
        }
        __syncthreads();
    }
}

// conv3's shifted sum over the Z ring (25 planes `pz` floats apart, [CZ][RW]) for tile-local
// output rows [i0, i1) and columns [0, ncols): out = b3 + sum_{dy,dx} Z[dy*5+dx][i+dy][j+dx].
template <int CZ, int RW>
__device__ void fused_conv3_rows(const FusedArgs& a, const float* Z, int pz, float b3, int i0, int i1, int ncols,
                                 int oy0, int ox0) {
    constexpr int TW = RW - 4;  // e / TW: a multiply-shift, not a division
    const int n = (i1 - i0) * TW;
    for (int e = threadIdx.x; e < n; e += blockDim.x) {
        const int i = i0 + e / TW, j = e % TW;
        if (j >= ncols) continue;
        float part[5];  // one partial sum per tap row: five short dependency chains instead of one long one
#pragma unroll
        for (int dy = 0; dy < 5; ++dy) {
            const float* zr = Z + ((i + dy) % CZ) * RW + j + dy * 5 * pz;
            part[dy] = zr[0];
#pragma unroll
            for (int dx = 1; dx < 5; ++dx) part[dy] += zr[dx * pz + dx];
        }
        const float v = b3 + ((part[0] + part[1]) + (part[2] + part[3]) + part[4]);
        fused_store(a, oy0 + i, ox0 + j, v);
    }
}

// The end of a chunk, every thread: after the chunk's Z rows [z0, z1) are written, their border
// fix-up, then conv3 of the output rows [out_done, min(z1 - 4, nout)) they complete (a row needs
// four Z rows below it); returns the new out_done. Barriers before and after.
template <int CZ, int PZ, int RW>
__device__ __forceinline__ int fused_z_tail(const FusedArgs& a, float* Z, float b3, int z0, int z1, int out_done,
                                            int nout, int ncol, int oy0, int ox0, int zvy, int zvx) {
    __syncthreads();
    fixup_planar(Z, 25, PZ, CZ, RW, RW, z0, z1, zvy, zvx, a.H, a.W);
    const int o_t = min(z1 - 4, nout);
    if (o_t > out_done) {
        fused_conv3_rows<CZ, RW>(a, Z, PZ, b3, out_done, o_t, ncol, oy0, ox0);
        out_done = o_t;
    }
    __syncthreads();
    return out_done;
}
