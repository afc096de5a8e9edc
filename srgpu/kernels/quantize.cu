// Conversions between output samples and float: the last step of every plane (SRCNN output ->
// uint8/uint16 against max_value, or float clipped to [0, 1]) and the integer -> float step for
// kernels that take unit floats. Grid-stride loops over contiguous ranges.
#include "common.cuh"

// float (unclipped) -> TOut by store_unit<MODE> (MODE 1: clipped float, 2: integer).
template <typename TOut, int MODE>
__global__ void __launch_bounds__(256) from_unit(const float* __restrict__ src, TOut* __restrict__ dst,
                                                 long long n, float max_value) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        dst[i] = store_unit<MODE, TOut>(__ldg(src + i), max_value);
}

// TIn sample -> float in [0, 1] (load_unit: integers times float32(1 / max_value)).
template <typename TIn>
__global__ void __launch_bounds__(256) to_unit(const TIn* __restrict__ src, float* __restrict__ dst, long long n,
                                               float inv_max) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        dst[i] = load_unit<TIn>(src + i, inv_max);
}
