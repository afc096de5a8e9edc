// BT.601 studio-range colour conversion between interleaved samples and planes, for the GPU's image
// path: srgpu.color's rgb_to_ycbcr / ycbcr_to_rgb + quantize, computed as the CPU does, in double.
//
// to_ycc:   interleaved T samples (C = 3 or 4 channels, R G B [A] or, with BGR, B G R [A] as OpenCV
//           decodes them) -> Y, Cb, Cr float planes (unit range, what the engine's planes take) and
//           the alpha plane (C = 4). Per pixel: x = sample / top; v = ((m0 x_r + m1 x_g) + m2 x_b
//           + offset) / 255; rounded once to float.
// from_ycc: the upscaled float planes and alpha -> interleaved T samples. Per pixel:
//           t = plane * 255 - offset; rgb = (i0 t_y + i1 t_cb) + i2 t_cr; sample = saturate(
//           sign(s) floor(|s| + 0.5)) with s = rgb * top (srgpu.color.quantize).
// coef: 12 doubles, the 3x3 matrix row by row (Y, Cb, Cr rows for to_ycc; R, G, B rows of its
// inverse for from_ycc) then the three offsets (16, 128, 128): srgpu.color's own arrays, so that
// both sides use the same constants. The _rn intrinsics keep the compiler from contracting the
// products and sums into FMAs, which would round differently from NumPy.
// Grid-stride loops over pixels; one thread a pixel per step.
#include "common.cuh"

__device__ __forceinline__ double dot3(const double* __restrict__ m, double a, double b, double c) {
    return __dadd_rn(__dadd_rn(__dmul_rn(__ldg(m), a), __dmul_rn(__ldg(m + 1), b)), __dmul_rn(__ldg(m + 2), c));
}

template <typename T> __device__ __forceinline__ T quantize_sample(double v, double top) {
    const double s = __dmul_rn(v, top);
    const double a = floor(__dadd_rn(fabs(s), 0.5));
    const double q = s < 0.0 ? -a : a;
    return (T)fmin(fmax(q, 0.0), top);
}

template <typename T, int C, bool BGR>
__global__ void __launch_bounds__(256) to_ycc(const T* __restrict__ src, float* __restrict__ y, float* __restrict__ cb,
                                              float* __restrict__ cr, T* __restrict__ alpha, long long n, double top,
                                              const double* __restrict__ coef) {
    static_assert(C == 3 || C == 4, "3 or 4 interleaved channels");
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const T* p = src + i * C;
        const double r = __ddiv_rn((double)p[BGR ? 2 : 0], top);
        const double g = __ddiv_rn((double)p[1], top);
        const double b = __ddiv_rn((double)p[BGR ? 0 : 2], top);
        y[i] = __double2float_rn(__ddiv_rn(__dadd_rn(dot3(coef, r, g, b), __ldg(coef + 9)), 255.0));
        cb[i] = __double2float_rn(__ddiv_rn(__dadd_rn(dot3(coef + 3, r, g, b), __ldg(coef + 10)), 255.0));
        cr[i] = __double2float_rn(__ddiv_rn(__dadd_rn(dot3(coef + 6, r, g, b), __ldg(coef + 11)), 255.0));
        if (C == 4) alpha[i] = p[C - 1];
    }
}

template <typename T, int C, bool BGR>
__global__ void __launch_bounds__(256) from_ycc(const float* __restrict__ y, const float* __restrict__ cb,
                                                const float* __restrict__ cr, const T* __restrict__ alpha,
                                                T* __restrict__ dst, long long n, double top,
                                                const double* __restrict__ coef) {
    static_assert(C == 3 || C == 4, "3 or 4 interleaved channels");
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const double ty = __dsub_rn(__dmul_rn((double)__ldg(y + i), 255.0), __ldg(coef + 9));
        const double tb = __dsub_rn(__dmul_rn((double)__ldg(cb + i), 255.0), __ldg(coef + 10));
        const double tr = __dsub_rn(__dmul_rn((double)__ldg(cr + i), 255.0), __ldg(coef + 11));
        T* q = dst + i * C;
        q[BGR ? 2 : 0] = quantize_sample<T>(dot3(coef, ty, tb, tr), top);
        q[1] = quantize_sample<T>(dot3(coef + 3, ty, tb, tr), top);
        q[BGR ? 0 : 2] = quantize_sample<T>(dot3(coef + 6, ty, tb, tr), top);
        if (C == 4) q[C - 1] = alpha[i];
    }
}
