// Decode GEMM + residual: mma.sync m16n8k16 with swapped roles (16 rows of W the MMA's M side, 8
// tokens its N side) and the K permutation that lets each lane's fragment be one 16-byte load (the
// kernel's header, gemm_residual_skinny.cu, derives it): one fragment pair, one chunk with A's
// fragments from registers, one chunk with them from the shared-memory A tile (A_SMEM).

#ifndef SKINNY_MMA_CUH
#define SKINNY_MMA_CUH

#include "config.cuh"
#include "../vec16.cuh"

__device__ __forceinline__ void mma16816(float* d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    if constexpr (DT == 0) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
            "{%8, %9}, {%0, %1, %2, %3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    } else {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
            "{%8, %9}, {%0, %1, %2, %3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
}

// One fragment pair's MMAs (the K permutation: see the kernel's header). w0 = W row g, w1 = row g + 8,
// av = token g, each the 8 elements at k = 32 kc + 8 c.
__device__ __forceinline__ void mma_pair(float (&d)[4], const uint4 w0, const uint4 w1, const uint4 av) {
    mma16816(d, w0.x, w1.x, w0.y, w1.y, av.x, av.y);  // step 0: e0..e3
    mma16816(d, w0.z, w1.z, w0.w, w1.w, av.z, av.w);  // step 1: e4..e7
}

// One chunk's MMAs, A's fragments from registers.
__device__ __forceinline__ void mma_chunk(float (&acc)[RPW][NF][4], const uint4 (&wv)[RPW][2],
                                          const uint4 (&avs)[NF]) {
#pragma unroll
    for (int rr = 0; rr < RPW; ++rr)
#pragma unroll
        for (int f = 0; f < NF; ++f) mma_pair(acc[rr][f], wv[rr][0], wv[rr][1], avs[f]);
}

// One chunk's MMAs, A's fragments from the shared-memory tile (chunk jj of tile sbuf): each B
// fragment is read once and feeds the warp's RPW row groups.
__device__ __forceinline__ void mma_chunk_smem(float (&acc)[RPW][NF][4], const uint4 (&wv)[RPW][2],
                                               const unsigned short* sbuf, int jj, int g, int c) {
#pragma unroll
    for (int f = 0; f < NF; ++f) {
        const uint4 av = *(const uint4*)(sbuf + A_OFF(jj, f * 8 + g, 8 * c));
#pragma unroll
        for (int rr = 0; rr < RPW; ++rr) mma_pair(acc[rr][f], wv[rr][0], wv[rr][1], av);
    }
}

#endif  // SKINNY_MMA_CUH
