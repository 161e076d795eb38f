// Decode GEMM + residual: after the main loop. Each warp's fragments of out^T go to shared memory as
// its partial tile; the CTA sums its KW partial tiles in a fixed order and stores out = round(sum +
// R) (SPLIT_K 1) or writes its fp32 partial to ws[SPLIT_K][M][N]; with SPLIT_K > 1 the tile's last
// CTA (a counter per tile) sums all SPLIT_K partials in order 0..SPLIT_K-1, adds R, rounds, stores
// and resets the counter for the next launch.

#ifndef SKINNY_EPILOGUE_CUH
#define SKINNY_EPILOGUE_CUH

#include "config.cuh"
#include "loads.cuh"

// Per-output-tile arrival counters of the split-K reduction: zero at module load, each returned
// to zero by the tile's last CTA (so a launch must not be interrupted half-way, and two launches
// of this module must not run concurrently on different streams).
__device__ unsigned int skinny_counters[COUNTERS];

__device__ __forceinline__ float ld_cg_f32(const float* p) {
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ float4 ld_cg_f32x4(const float* p) {
    float4 v;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}

// out[o] = round(s (+ R[o] when fused)).
__device__ __forceinline__ void store_out(unsigned short* out, const unsigned short* r, size_t o, float s) {
    if constexpr (FUSE) s += h2f(r[o]);
    out[o] = f2h(s);
}

// Fragments to shared memory: acc[rr][f] = out^T rows (row group) g, g + 8 x tokens 2c, 2c + 1, of
// warp `warp` (row-group slot `slot`, K share kw) into partial tile kw of red.
__device__ __forceinline__ void stash_partials(float* red, float (&acc)[RPW][NF][4], int warp, int slot, int kw,
                                               int g, int c) {
#pragma unroll
    for (int rr = 0; rr < RPW; ++rr)
#pragma unroll
        for (int f = 0; f < NF; ++f) {
            if (W_BULK && warp == WARPS) continue;  // the producer warp has no partials
            float* p = red + (kw * BM + f * 8 + 2 * c) * BNP + (slot * RPW + rr) * 16 + g;
            p[0] = acc[rr][f][0];
            p[BNP] = acc[rr][f][1];
            p[8] = acc[rr][f][2];
            p[BNP + 8] = acc[rr][f][3];
        }
}

// The CTA's mv x nv outputs at (m0, n0): the KW partial tiles summed in order, then stored (SPLIT_K
// 1) or written to the CTA's split of ws.
__device__ __forceinline__ void sum_partials(unsigned short* out, const unsigned short* r, float* ws, const float* red,
                                             int m0, int n0, int mv, int nv, int M, int N) {
    for (int i = threadIdx.x; i < mv * BN; i += THREADS) {
        const int ml = i / BN, nl = i % BN;
        if (nl >= nv) continue;
        float s = 0.0f;
#pragma unroll
        for (int q = 0; q < KW; ++q) s += red[(q * BM + ml) * BNP + nl];
        const size_t o = (size_t)(m0 + ml) * N + n0 + nl;
        if constexpr (SPLIT_K == 1) {
            store_out(out, r, o, s);
        } else {
            ws[(size_t)blockIdx.y * M * N + o] = s;
        }
    }
}

// The last CTA of a tile (SPLIT_K > 1), N % 4 == 0: groups of 4 consecutive outputs, one 16-byte load
// per partial (n0 and N multiples of 4); SPLIT_RU4 groups per thread at once (v: their loads), all
// their partials loaded before any is summed (in order 0..SPLIT_K-1), so the loads' latency is paid
// once per pass.
__device__ __forceinline__ void split_sum_vec4(float4 (&v)[SPLIT_RU4][SPLIT_K], unsigned short* out,
                                               const unsigned short* r, const float* ws, int m0, int n0, int mv,
                                               int nv, int M, int N) {
    constexpr int RU = SPLIT_RU4;
    constexpr int NQ = BN / 4;
    for (int i0 = threadIdx.x; i0 < mv * NQ; i0 += RU * THREADS) {
#pragma unroll
        for (int u = 0; u < RU; ++u) {
            const int i = i0 + u * THREADS, ml = i / NQ, nl = 4 * (i % NQ);
            const bool live = i < mv * NQ && nl < nv;
            const size_t o = (size_t)(m0 + ml) * N + n0 + nl;
#pragma unroll
            for (int q = 0; q < SPLIT_K; ++q)
                v[u][q] = live ? ld_cg_f32x4(ws + (size_t)q * M * N + o) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int u = 0; u < RU; ++u) {
            const int i = i0 + u * THREADS, ml = i / NQ, nl = 4 * (i % NQ);
            if (i < mv * NQ && nl < nv) {
                float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma unroll
                for (int q = 0; q < SPLIT_K; ++q) {
                    s0 += v[u][q].x;
                    s1 += v[u][q].y;
                    s2 += v[u][q].z;
                    s3 += v[u][q].w;
                }
                const size_t o = (size_t)(m0 + ml) * N + n0 + nl;
                store_out(out, r, o, s0);
                if (nl + 1 < nv) store_out(out, r, o + 1, s1);
                if (nl + 2 < nv) store_out(out, r, o + 2, s2);
                if (nl + 3 < nv) store_out(out, r, o + 3, s3);
            }
        }
    }
}

// The last CTA of a tile (SPLIT_K > 1), any N: one output at a time, SPLIT_RU1 per thread at once
// (v: their loads).
__device__ __forceinline__ void split_sum_scalar(float (&v)[SPLIT_RU1][SPLIT_K], unsigned short* out,
                                                 const unsigned short* r, const float* ws, int m0, int n0, int mv,
                                                 int nv, int M, int N) {
    constexpr int RU = SPLIT_RU1;
    for (int i0 = threadIdx.x; i0 < mv * BN; i0 += RU * THREADS) {
#pragma unroll
        for (int u = 0; u < RU; ++u) {
            const int i = i0 + u * THREADS, ml = i / BN, nl = i % BN;
            const bool live = i < mv * BN && nl < nv;
            const size_t o = (size_t)(m0 + ml) * N + n0 + nl;
#pragma unroll
            for (int q = 0; q < SPLIT_K; ++q) v[u][q] = live ? ld_cg_f32(ws + (size_t)q * M * N + o) : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < RU; ++u) {
            const int i = i0 + u * THREADS, ml = i / BN, nl = i % BN;
            if (i < mv * BN && nl < nv) {
                float s = 0.0f;
#pragma unroll
                for (int q = 0; q < SPLIT_K; ++q) s += v[u][q];
                store_out(out, r, (size_t)(m0 + ml) * N + n0 + nl, s);
            }
        }
    }
}

#endif  // SKINNY_EPILOGUE_CUH
