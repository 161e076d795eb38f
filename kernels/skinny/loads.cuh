// Decode GEMM + residual: W and A from global memory into registers (the register ring, W_BULK 0):
// 16-bit <-> fp32 of one element, 4- and 2-byte loads, a row's 8 elements at one k (16-byte loads
// where ALIGNED8, else assembled from 4-byte (ALIGNED2) or 2-byte loads; elements past K zero), and
// one chunk's loads of a warp's rows and tokens.

#ifndef SKINNY_LOADS_CUH
#define SKINNY_LOADS_CUH

#include "config.cuh"
#include "../vec16.cuh"

__device__ __forceinline__ float h2f(unsigned short h) {
    float lo, hi;
    unpack2((u32)h, lo, hi);
    return lo;
}
__device__ __forceinline__ unsigned short f2h(float x) { return (unsigned short)(pack2(x, 0.0f) & 0xffffu); }

__device__ __forceinline__ u32 ld32(const unsigned short* p, bool stream) {
    u32 v;
    if (stream)
        asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
    else
        asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ u32 ld16(const unsigned short* p, bool stream) {
    unsigned short v;
    if (stream)
        asm volatile("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(v) : "l"(p));
    else
        asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return (u32)v;
}

// The 8 elements p[0..7] at k0..k0+7 of one row; elements at k >= K are zero. STREAM: W (read once,
// no L1 allocation) rather than A (re-read by every CTA along N: cached).
template <bool STREAM>
__device__ __forceinline__ uint4 load8(const unsigned short* p, int k0, int K) {
    if constexpr (ALIGNED8) {
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (k0 < K) v = STREAM ? ld_stream((const uint4*)p) : ld_cached((const uint4*)p);
        return v;
    } else if constexpr (ALIGNED2) {
        u32 e[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) e[j] = (k0 + 2 * j < K) ? ld32(p + 2 * j, STREAM) : 0u;
        return make_uint4(e[0], e[1], e[2], e[3]);
    } else {
        u32 e[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) e[j] = (k0 + j < K) ? ld16(p + j, STREAM) : 0u;
        return make_uint4(e[0] | (e[1] << 16), e[2] | (e[3] << 16), e[4] | (e[5] << 16), e[6] | (e[7] << 16));
    }
}

// One chunk's loads: W rows g and g + 8 of each of the warp's row groups, token row g of each n8
// fragment, at k0 = 32 * chunk + 8 * c.
__device__ __forceinline__ void load_chunk(uint4 (&wv)[RPW][2], uint4 (&av)[NF],
                                           const unsigned short* const (&wp)[RPW][2],
                                           const unsigned short* const (&ap)[NF], int chunk, int c, int K) {
    const int k0 = 32 * chunk + 8 * c;
    const int off = 32 * chunk;
#pragma unroll
    for (int rr = 0; rr < RPW; ++rr) {
        wv[rr][0] = load8<true>(wp[rr][0] + off, k0, K);
        wv[rr][1] = load8<true>(wp[rr][1] + off, k0, K);
    }
#pragma unroll
    for (int f = 0; f < NF; ++f) av[f] = load8<false>(ap[f] + off, k0, K);
}

// One chunk's W loads (rows g and g + 8 of each of the warp's row groups; A_SMEM: A comes from the
// shared-memory tile).
__device__ __forceinline__ void load_w(uint4 (&wv)[RPW][2], const unsigned short* const (&wp)[RPW][2],
                                       int chunk, int c, int K) {
    const int k0 = 32 * chunk + 8 * c;
    const int off = 32 * chunk;
#pragma unroll
    for (int rr = 0; rr < RPW; ++rr) {
        wv[rr][0] = load8<true>(wp[rr][0] + off, k0, K);
        wv[rr][1] = load8<true>(wp[rr][1] + off, k0, K);
    }
}

// The register ring's row pointers of a lane (g, c) in row-group slot `slot`: W's rows g and g + 8 of
// each of its row groups (clamped to the last row: their loads coalesce with a real row's and feed
// only outputs never stored) and A's token g of each n8 fragment (clamped to the last token; A_SMEM
// and W_BULK read A elsewhere), each at element 8 c.
__device__ __forceinline__ void ring_rows(const unsigned short* (&wp)[RPW][2], const unsigned short* (&ap)[NF],
                                          const unsigned short* a, const unsigned short* w, int n0, int m0, int slot,
                                          int g, int c, int M, int N, int K) {
    if constexpr (!W_BULK) {
#pragma unroll
        for (int rr = 0; rr < RPW; ++rr)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = min(n0 + (slot * RPW + rr) * 16 + g + 8 * h, N - 1);
                wp[rr][h] = w + (size_t)row * K + 8 * c;
            }
    }
    if constexpr (!A_SMEM && !W_BULK) {
#pragma unroll
        for (int f = 0; f < NF; ++f) ap[f] = a + (size_t)min(m0 + f * 8 + g, M - 1) * K + 8 * c;
    }
}

#endif  // SKINNY_LOADS_CUH
