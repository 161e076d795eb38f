// 16-byte vector access and 16-bit <-> fp32 conversions shared by the row-wise memory-bound kernels
// (add_rmsnorm.cu, bias_gelu.cu). Their specs prepend this text after the #defines, with
// VEC_DTYPE = 0 bf16, 1 fp16, 2 fp32 (the kernel's own dtype define). No CUDA headers: NVRTC
// needs none, conversions are inline PTX.

#ifndef KERNELS_VEC16_CUH
#define KERNELS_VEC16_CUH

#ifndef VEC_DTYPE
#error "VEC_DTYPE (0 bf16, 1 fp16, 2 fp32 data) must be defined before vec16.cuh"
#endif

typedef unsigned int u32;

// Streamed inputs: read-only path, no L1 allocation. Reused inputs (weights, bias): read-only
// path, cached. In-place operands: plain loads. Outputs: plain 16-byte stores (st_vec); a kernel's
// final outputs go through st_out, which is st_vec unless STREAM_STORES is 1.
// Measurement builds only (bench/membound_hints.py; no gain through the engine, ADR-0006, so the
// specs never set them): STREAM_STORES 1 makes st_out a streaming store
// (VEC_ST_HINT 1 .cs, 2 L2 evict-first policy); VEC_LD_HINT 1 gives the streamed loads an L2
// evict-first policy, 2 a 256-byte L2 prefetch.
#ifndef STREAM_STORES
#define STREAM_STORES 0
#endif
#ifndef VEC_LD_HINT
#define VEC_LD_HINT 0
#endif
#ifndef VEC_ST_HINT
#define VEC_ST_HINT 1
#endif
#if VEC_LD_HINT == 1 || VEC_ST_HINT == 2
__device__ __forceinline__ unsigned long long evict_first_policy() {
    unsigned long long p;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}
#endif
__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
    uint4 v;
#if VEC_LD_HINT == 1
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(evict_first_policy()));
#elif VEC_LD_HINT == 2
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
#else
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
#endif
    return v;
}
__device__ __forceinline__ uint4 ld_plain(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ uint4 ld_cached(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ void st_vec(uint4* p, uint4 v) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ void st_stream(uint4* p, uint4 v) {
#if VEC_ST_HINT == 2
    asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;"
                 :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(evict_first_policy()) : "memory");
#else
    asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
#endif
}
__device__ __forceinline__ void st_out(uint4* p, uint4 v) {
#if STREAM_STORES
    st_stream(p, v);
#else
    st_vec(p, v);
#endif
}

// --- conversions: a 16-byte vector <-> 8 (16-bit) or 4 (fp32) floats, rounded to nearest even ---
// pack2 / unpack2 (a 16-bit pair) are defined for fp32 data too, in their fp16 form, so that code
// choosing a layout by the dtype at compile time (if constexpr) names them in every build; an fp32
// kernel calls neither.
__device__ __forceinline__ u32 pack2(float lo, float hi) {
    u32 r;
#if VEC_DTYPE == 0
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}
__device__ __forceinline__ void unpack2(u32 v, float& lo, float& hi) {
#if VEC_DTYPE == 0
    lo = __int_as_float(v << 16);
    hi = __int_as_float(v & 0xffff0000u);
#else
    asm("{ .reg .b16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h; }"
        : "=f"(lo), "=f"(hi) : "r"(v));
#endif
}

__device__ __forceinline__ void unpack(const uint4 v, float* f) {
#if VEC_DTYPE == 2
    f[0] = __uint_as_float(v.x); f[1] = __uint_as_float(v.y);
    f[2] = __uint_as_float(v.z); f[3] = __uint_as_float(v.w);
#else
    unpack2(v.x, f[0], f[1]); unpack2(v.y, f[2], f[3]);
    unpack2(v.z, f[4], f[5]); unpack2(v.w, f[6], f[7]);
#endif
}
__device__ __forceinline__ uint4 pack(const float* f) {
    uint4 v;
#if VEC_DTYPE == 2
    v.x = __float_as_uint(f[0]); v.y = __float_as_uint(f[1]);
    v.z = __float_as_uint(f[2]); v.w = __float_as_uint(f[3]);
#else
    v.x = pack2(f[0], f[1]); v.y = pack2(f[2], f[3]);
    v.z = pack2(f[4], f[5]); v.w = pack2(f[6], f[7]);
#endif
    return v;
}

#endif  // KERNELS_VEC16_CUH
