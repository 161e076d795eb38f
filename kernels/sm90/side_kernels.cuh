// Hopper GEMM + residual: the build's other kernels: fusion off's residual add after the GEMM-only
// kernel, and 3xTF32's operand split before it (DT 3). Each is a kernel of the module only where the
// build launches it.

#ifndef SM90_SIDE_KERNELS_CUH
#define SM90_SIDE_KERNELS_CUH

#include "config.cuh"
#include "../vec16.cuh"

#if ELEM == 2
// Fusion off: out += r after the GEMM-only kernel (FUSE=0), 8 elements (16 bytes) per step.
extern "C" __global__ void residual_add_inplace(unsigned short* __restrict__ out,
                                                const unsigned short* __restrict__ r, int M, int N) {
    const size_t total8 = (size_t)M * N / 8;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total8;
         i += (size_t)gridDim.x * blockDim.x) {
        uint4 o = ((const uint4*)out)[i];
        const uint4 q = ((const uint4*)r)[i];
        unsigned* op = (unsigned*)&o;
        const unsigned* qp = (const unsigned*)&q;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            float a0, a1, b0, b1;
            unpack2(op[e], a0, a1);
            unpack2(qp[e], b0, b1);
            op[e] = pack2(a0 + b0, a1 + b1);
        }
        ((uint4*)out)[i] = o;
    }
}
#else
// Fusion off, fp32 data (tf32, fp32): out += r, 4 elements (16 bytes) per step.
extern "C" __global__ void residual_add_inplace_f32(float* __restrict__ out, const float* __restrict__ r,
                                                    int M, int N) {
    const size_t total4 = (size_t)M * N / 4;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 o = ((const float4*)out)[i];
        const float4 q = ((const float4*)r)[i];
        o.x += q.x;
        o.y += q.y;
        o.z += q.z;
        o.w += q.w;
        ((float4*)out)[i] = o;
    }
}
#endif

#if DT == 3
#ifndef SPLIT_HI
#define SPLIT_HI 0
#endif
// x rounded to tf32 (nearest, ties away: cvt.rna), returned as fp32 with the low 13 bits zero.
__device__ __forceinline__ float tf32_rna(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return __uint_as_float(r & 0xFFFFE000u);
}

__device__ __forceinline__ void split4(float4 x, float4& hi, float4& lo) {
    float* xv = (float*)&x;
    float* hv = (float*)&hi;
    float* lv = (float*)&lo;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
#if SPLIT_HI
        hv[e] = tf32_rna(xv[e]);
#else
        hv[e] = __uint_as_float(__float_as_uint(xv[e]) & 0xFFFFE000u);  // what the tensor cores read
#endif
        lv[e] = tf32_rna(xv[e] - hv[e]);  // x - hi is exact in fp32
    }
}

// 3xTF32 operand split, one launch for A (n4a float4s) then W (n4w): lo always, hi with SPLIT_HI.
extern "C" __global__ void tf32_split(const float4* __restrict__ a, float4* __restrict__ a_hi,
                                      float4* __restrict__ a_lo, int n4a,
                                      const float4* __restrict__ w, float4* __restrict__ w_hi,
                                      float4* __restrict__ w_lo, int n4w) {
    const long long total = (long long)n4a + n4w;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const bool is_a = i < n4a;
        const long long j = is_a ? i : i - n4a;
        float4 hi, lo;
        split4(is_a ? a[j] : w[j], hi, lo);
        (is_a ? a_lo : w_lo)[j] = lo;
#if SPLIT_HI
        (is_a ? a_hi : w_hi)[j] = hi;
#else
        (void)a_hi;
        (void)w_hi;
#endif
    }
}
#endif

#endif  // SM90_SIDE_KERNELS_CUH
