// Bias + GELU (tanh approximation), one pass over the data:
//   out[M,N] = gelu(x + bias),   gelu(v) = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))
// computed in fp32 as v / (1 + exp(-2u)) (the same function: 0.5 (1 + tanh u) = 1 / (1 + e^-2u)),
// rounded once.
//
// Rendered by kernels/bias_gelu.py, which prepends integer #defines only:
//   BG_DTYPE    0 = bf16, 1 = fp16, 2 = fp32
//   BG_THREADS  threads per block (BLOCK_SIZE)
//   BG_UNROLL   16-byte vectors each thread has in flight (MEMORY_PIPELINING; 1 = off: load one
//               vector, compute, store, then the next). All BG_UNROLL loads are issued before any
//               of them is used.
//   BG_FUSE     1 = one kernel; 0 = bias_add (out = round(x + bias)), then gelu in place on out
// The grid strides over the [M, N] array viewed as M*N/EPV 16-byte vectors; N is a multiple of 8
// so a vector never straddles two rows and its bias vector is (i mod N/EPV).

#if BG_DTYPE == 2
#define BG_EPV 4
#else
#define BG_EPV 8
#endif

// 16-byte access and conversions: vec16.cuh (prepended by the spec, VEC_DTYPE = BG_DTYPE).

// gelu_tanh(v) = v * sigmoid(2u): ex2.approx (relative error ~2^-22) and a fast reciprocal;
// -2u is clamped so that exp never overflows (gelu(v) -> 0 from below there).
__device__ __forceinline__ float gelu(float v) {
    const float u = 0.7978845608028654f * fmaf(0.044715f * v, v * v, v);
    const float e = __expf(fminf(-2.0f * u, 80.0f));
    return __fdividef(v, 1.0f + e);
}

// One grid-stride step: BG_UNROLL vectors per thread, all loads issued first.
template <bool BIAS, bool GELU, bool INPLACE>
__device__ __forceinline__ void run(const uint4* x, const uint4* bias, uint4* out, int M, int N) {
    const u32 vrow = (u32)(N / BG_EPV);
    const u32 total = (u32)M * vrow;
    const u32 step = gridDim.x * (u32)(BG_THREADS * BG_UNROLL);
    for (u32 i0 = blockIdx.x * (u32)(BG_THREADS * BG_UNROLL) + threadIdx.x; i0 < total; i0 += step) {
        uint4 a[BG_UNROLL];
#pragma unroll
        for (int u = 0; u < BG_UNROLL; ++u) {
            const u32 i = i0 + (u32)(u * BG_THREADS);
            if (i < total) a[u] = INPLACE ? ld_plain(x + i) : ld_stream(x + i);
        }
#pragma unroll
        for (int u = 0; u < BG_UNROLL; ++u) {
            const u32 i = i0 + (u32)(u * BG_THREADS);
            if (i < total) {
                float f[BG_EPV];
                unpack(a[u], f);
                if (BIAS) {
                    float b[BG_EPV];
                    unpack(ld_cached(bias + i % vrow), b);
#pragma unroll
                    for (int e = 0; e < BG_EPV; ++e) f[e] += b[e];
                }
                if (GELU) {
#pragma unroll
                    for (int e = 0; e < BG_EPV; ++e) f[e] = gelu(f[e]);
                }
                st_out(out + i, pack(f));
            }
        }
    }
}

#if BG_FUSE
extern "C" __global__ void __launch_bounds__(BG_THREADS)
bias_gelu(const uint4* __restrict__ x, const uint4* __restrict__ bias, uint4* __restrict__ out, int M, int N) {
    run<true, true, false>(x, bias, out, M, N);
}
#else
// Fusion off: out = round(x + bias), then out = gelu(out) in place (one more pass over [M, N]).
extern "C" __global__ void __launch_bounds__(BG_THREADS)
bias_add(const uint4* __restrict__ x, const uint4* __restrict__ bias, uint4* __restrict__ out, int M, int N) {
    run<true, false, false>(x, bias, out, M, N);
}
extern "C" __global__ void __launch_bounds__(BG_THREADS)
gelu_inplace(uint4* out, int M, int N) {
    run<false, true, true>(out, nullptr, out, M, N);
}
#endif
