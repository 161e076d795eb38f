// Decode GEMM + residual, A in shared memory (A_SMEM 1): the CTA copies A[its BM tokens, its K
// range] once, in double-buffered tiles of KT chunks (config.cuh's A_OFF layout), with 16-byte
// cp.async that zero-fill tokens past M and k past the CTA's range.

#ifndef SKINNY_A_TILE_CUH
#define SKINNY_A_TILE_CUH

#include "config.cuh"

// 16-byte asynchronous copy global -> shared; bytes < 16 zero-fills the rest (0: all zeros).
__device__ __forceinline__ void cp_async16(unsigned short* dst, const unsigned short* src, int bytes) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// Copy the A tile of chunks [chunk0, chunk0 + KT) and tokens [m0, m0 + BM) into sbuf (A_OFF
// layout): elements at k >= kend (K or the end of the CTA's range) and tokens >= mv are zeros.
__device__ __forceinline__ void copy_a_tile(unsigned short* sbuf, const unsigned short* a, int m0, int mv,
                                            int chunk0, int kend, int K) {
#pragma unroll
    for (int r = 0; r < (A_PIECES + THREADS - 1) / THREADS; ++r) {
        const int p = (int)threadIdx.x + r * THREADS;
        if (A_PIECES % THREADS == 0 || p < A_PIECES) {
            const int j = A_PIECE_J(p), t = A_PIECE_T(p), q = A_PIECE_Q(p);
            const int k = 32 * (chunk0 + j) + 8 * q;
            const bool ok = t < mv && k < kend;
            const unsigned short* src = a + (size_t)(m0 + (t < mv ? t : mv - 1)) * K + (ok ? k : 0);
            cp_async16(sbuf + A_OFF(j, t, 8 * q), src, ok ? 16 : 0);
        }
    }
}

#endif  // SKINNY_A_TILE_CUH
