// Hopper GEMM + residual: warpgroup MMA (wgmma.mma_async) for the build's dtype: the operand
// descriptors, fences and waits, and one wrapper per instruction width, the build's named WGMMA.

#ifndef SM90_WGMMA_CUH
#define SM90_WGMMA_CUH

#include "config.cuh"

#if DT == 2 || DT == 3
#define WG_AB "tf32"
#define WG_K "8"
#define WG_IMM "1, 1"          // scale-a, scale-b (tf32 takes no transpose immediates)
#elif DT == 0
#define WG_AB "bf16"
#define WG_K "16"
#define WG_IMM "1, 1, 0, 0"    // scale-a, scale-b, both K-major (no transpose)
#else
#define WG_AB "f16"
#define WG_K "16"
#define WG_IMM "1, 1, 0, 0"
#endif

// wgmma shared-memory descriptor for a K-major tile written by TMA with 128B swizzle: rows of 128
// bytes, 8-row (1024-byte) swizzle atoms stacked along M/N. Split at bit 32: the low word holds
// the address field (addr >> 4, 14 bits) and LBO (1: unused for swizzled K-major), the high word
// SBO (1024 >> 4) and the mode (bit 62: 128B swizzle), a constant. Shared memory is < 256 KB, so
// a tile offset (>> 4) adds to the low word without leaving the address field: one uniform add
// per wgmma instead of rebuilding the descriptor (the main loop's SASS for ping-pong 128x128: 56
// instructions per k-block and warp instead of 120).
__device__ __forceinline__ unsigned desc_lo(unsigned saddr) {
    return ((saddr & 0x3FFFF) >> 4) | (1u << 16);
}
#define DESC_HI ((1024u >> 4) | (1u << 30))
__device__ __forceinline__ unsigned long long desc64(unsigned lo) {
    return ((unsigned long long)DESC_HI << 32) | lo;
}

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_reg(float& r) {
    asm volatile("" : "+f"(r)::"memory");
}

// wgmma_m64n<N>k16(d, desc_a, desc_b, scale_d): one wgmma of a 64 x N tile into NACC = N / 2
// accumulators per thread; the descriptors and the scale-d predicate are operands NACC, NACC + 1
// and NACC + 2 of the instruction's template.
#define DEFINE_WGMMA(N, NACC, IA, IB, IP, RLIST, ACCLIST)                                         \
    __device__ __forceinline__ void wgmma_m64n##N##k16(float (&d)[NACC], unsigned long long da,  \
                                                      unsigned long long db, int scale_d) {    \
        asm volatile(                                                                           \
            "{\n.reg .pred p;\n"                                                                \
            "setp.ne.b32 p, %" #IP ", 0;\n"                                                     \
            "wgmma.mma_async.sync.aligned.m64n" #N "k" WG_K ".f32." WG_AB "." WG_AB " "          \
            "{" RLIST "}, %" #IA ", %" #IB ", p, " WG_IMM ";\n}\n"                                \
            : ACCLIST                                                                           \
            : "l"(da), "l"(db), "r"(scale_d));                                                  \
    }
// One wrapper per width, WG_ACC_<N/2> / WG_R<N/2> its operand lists, and WGMMA the build's:
// generated (kernels/sm90/wgmma_table.py).
#include "wgmma_table.cuh"

#endif  // SM90_WGMMA_CUH
