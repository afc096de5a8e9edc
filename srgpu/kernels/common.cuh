// Device helpers shared by srgpu's kernels. Inlined into each .cu source by build.load_source.

// Index clamp: the replicate border of every convolution ('same' size, imfilter 'replicate').
__device__ __forceinline__ int clampi(int v, int lo, int hi) { return min(max(v, lo), hi); }

// Dynamic shared memory given to this launch; kernels trap if the host passed too little.
__device__ __forceinline__ unsigned dynamic_smem_bytes() {
    unsigned r;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
    return r;
}

// Sample -> float in [0, 1]: integer samples times 1/max_value (host-computed float32, as the CPU
// engine's to_unit_float), float samples as they are.
template <typename T> __device__ __forceinline__ float load_unit(const T* p, float inv_max);
template <> __device__ __forceinline__ float load_unit<float>(const float* p, float) { return __ldg(p); }
template <> __device__ __forceinline__ float load_unit<unsigned char>(const unsigned char* p, float inv_max) {
    return __fmul_rn((float)__ldg(p), inv_max);
}
template <> __device__ __forceinline__ float load_unit<unsigned short>(const unsigned short* p, float inv_max) {
    return __fmul_rn((float)__ldg(p), inv_max);
}

// float -> output sample. MODE 0: raw float (intermediates); 1: float clipped to [0, 1];
// 2: integer, v = min(max(v, 0), 1) * max_value rounded half up (srgpu.engine.base.from_unit_float);
// __fmul_rn/__fadd_rn keep the compiler from contracting them into one FMA, which rounds differently.
template <int MODE, typename T> __device__ __forceinline__ T store_unit(float v, float max_value);
template <> __device__ __forceinline__ float store_unit<0, float>(float v, float) { return v; }
template <> __device__ __forceinline__ float store_unit<1, float>(float v, float) { return fminf(fmaxf(v, 0.0f), 1.0f); }
template <> __device__ __forceinline__ unsigned char store_unit<2, unsigned char>(float v, float max_value) {
    return (unsigned char)floorf(__fadd_rn(__fmul_rn(fminf(fmaxf(v, 0.0f), 1.0f), max_value), 0.5f));
}
template <> __device__ __forceinline__ unsigned short store_unit<2, unsigned short>(float v, float max_value) {
    return (unsigned short)floorf(__fadd_rn(__fmul_rn(fminf(fmaxf(v, 0.0f), 1.0f), max_value), 0.5f));
}
