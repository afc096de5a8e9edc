// MATLAB-compatible bicubic resize on the GPU: one separable pass per axis.
//
// The canonical definition (the fused kernels reproduce it bit for bit): coefficients from
// srgpu.resize.contributions (weights float32, indices int32, same tap order); each output is
// acc = 0.0f; for t in taps: acc = fmaf(w[t], x[idx[t]], acc); integer input read as
// sample * (1.0f / max_value). One thread per output sample; neighbouring threads write
// neighbouring samples of a row.
#include "common.cuh"

// Along axis 0: out[i][j] = sum_t w[i][t] * in[idx[i][t]][j]; in is (in_rows, cols). Grid z: a batch
// of planes of one size, one after another in src and in dst.
template <typename TIn, typename TOut, int MODE>
__global__ void __launch_bounds__(256) resample_rows(
    const TIn* __restrict__ src, TOut* __restrict__ dst, const float* __restrict__ wts,
    const int* __restrict__ idx, int taps, int cols, int out_rows, int in_rows, float inv_max, float max_value) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= out_rows || j >= cols) return;
    src += (long long)blockIdx.z * in_rows * cols;
    dst += (long long)blockIdx.z * out_rows * cols;
    const float* w = wts + (long long)i * taps;
    const int* ix = idx + (long long)i * taps;
    float acc = 0.0f;
    for (int t = 0; t < taps; ++t)
        acc = fmaf(__ldg(w + t), load_unit<TIn>(src + (long long)__ldg(ix + t) * cols + j, inv_max), acc);
    dst[(long long)i * cols + j] = store_unit<MODE, TOut>(acc, max_value);
}

// Along axis 1: out[i][j] = sum_t w[j][t] * in[i][idx[j][t]]; in is (rows, in_cols).
template <typename TIn, typename TOut, int MODE>
__global__ void __launch_bounds__(256) resample_cols(
    const TIn* __restrict__ src, TOut* __restrict__ dst, const float* __restrict__ wts,
    const int* __restrict__ idx, int taps, int in_cols, int rows, int out_cols, float inv_max,
    float max_value) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= rows || j >= out_cols) return;
    src += (long long)blockIdx.z * rows * in_cols;
    dst += (long long)blockIdx.z * rows * out_cols;
    const float* w = wts + (long long)j * taps;
    const int* ix = idx + (long long)j * taps;
    const TIn* row = src + (long long)i * in_cols;
    float acc = 0.0f;
    for (int t = 0; t < taps; ++t)
        acc = fmaf(__ldg(w + t), load_unit<TIn>(row + __ldg(ix + t), inv_max), acc);
    dst[(long long)i * out_cols + j] = store_unit<MODE, TOut>(acc, max_value);
}
