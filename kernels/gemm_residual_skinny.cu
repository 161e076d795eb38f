// Decode-shaped ("skinny") GEMM + residual: out[M, N] = A[M, K] @ W[N, K]^T + R[M, N] for
// M <= 64, 16-bit data, fp32 accumulation, the residual added in fp32 and the result rounded once.
//
// Memory-bound: the time is W streamed once from HBM. So W goes straight from global memory into
// registers with 16-byte streaming loads (no shared memory, no ldmatrix), many loads in flight per
// warp, and mma.sync m16n8k16 with swapped roles: 16 rows of W are the MMA's M side (its "A"
// operand), 8 tokens its N side (its "B" operand); each warp accumulates fragments of out^T.
//
// K permutation. Within a chunk of 32 K elements, lane (g = lane / 4, c = lane % 4) loads the 8
// consecutive elements e0..e7 at k = 32 kc + 8 c of W row g, of W row g + 8 and of token row g of
// A. MMA step 0 uses (e0, e1) as the fragment's k = (2c, 2c+1) and (e2, e3) as k = (2c+8, 2c+9);
// step 1 uses (e4, e5) and (e6, e7). W's and A's fragments use the same mapping, so the two steps
// sum every k of the chunk exactly once: the dot product over a permutation of k.
// (PTX m16n8k16 layouts: A a0a1 row g k 2c..2c+1, a2a3 row g+8 same k, a4a5 row g k 2c+8..,
// a6a7 row g+8 k 2c+8..; B b0b1 k 2c..2c+1 col g, b2b3 k 2c+8.. col g; C/D c0c1 row g cols
// 2c..2c+1, c2c3 row g+8.) tests/unit/test_skinny_compile.py emulates the two mma16816 lines of
// mma_chunk below in numpy.
//
// Work split. Grid (ceil(N / BN), SPLIT_K, ceil(M / BM)); a CTA takes BN rows of W, BM tokens and
// a contiguous range of whole chunks of K. Its WARPS warps: WG = min(BN / 16, WARPS) row-group
// slots of RPW row groups (16 rows) each, and KW = WARPS / WG warps per slot splitting the CTA's
// chunks into contiguous ranges. Partial sums meet in shared memory (fixed order: deterministic).
// SPLIT_K > 1: each CTA writes its fp32 partial tile to ws[SPLIT_K][M][N], fences, and counts
// itself on the tile's counter; the last to arrive sums all SPLIT_K partials in order 0..SPLIT_K-1,
// adds R, rounds, writes out and resets the counter for the next launch.
//
// Tails. Rows past N and tokens past M are clamped to the last row / token (their loads coalesce
// with the real row's, and they only feed outputs that are never stored); k past K is zero in both
// operands. ALIGNED8 = 1 (K % 8 == 0, 16-byte aligned base pointers as CuPy allocates) takes
// 16-byte loads; ALIGNED8 = 0 builds the 8-element vectors from 4-byte loads (ALIGNED2 = 1: K
// even) or 2-byte loads (K odd).
//
// Defines (validated integers, prepended by kernels/gemm_residual_skinny.py): BM, BN, STAGES, WARPS,
// SPLIT_K, DT (0 bf16, 1 fp16), FUSE, ALIGNED8, ALIGNED2, COUNTERS; then vec16.cuh (VEC_DTYPE = DT)
// for ld_stream / ld_cached / pack2 / unpack2.

#define NF (BM / 8)
#define RG (BN / 16)
#define WG (RG < WARPS ? RG : WARPS)
#define RPW (RG / WG)
#define KW (WARPS / WG)
#define BNP (BN + 4)
#define THREADS (WARPS * 32)

// Per-output-tile arrival counters of the split-K reduction: zero at module load, each returned
// to zero by the tile's last CTA (so a launch must not be interrupted half-way, and two launches
// of this module must not run concurrently on different streams).
__device__ unsigned int skinny_counters[COUNTERS];

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
#if ALIGNED8
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (k0 < K) v = STREAM ? ld_stream((const uint4*)p) : ld_cached((const uint4*)p);
    return v;
#elif ALIGNED2
    u32 e[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) e[j] = (k0 + 2 * j < K) ? ld32(p + 2 * j, STREAM) : 0u;
    return make_uint4(e[0], e[1], e[2], e[3]);
#else
    u32 e[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) e[j] = (k0 + j < K) ? ld16(p + j, STREAM) : 0u;
    return make_uint4(e[0] | (e[1] << 16), e[2] | (e[3] << 16), e[4] | (e[5] << 16), e[6] | (e[7] << 16));
#endif
}

__device__ __forceinline__ void mma16816(float* d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
#if DT == 0
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
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

// One chunk's MMAs (the K permutation: see the header). w0 = row g, w1 = row g + 8, av = token g.
__device__ __forceinline__ void mma_chunk(float (&acc)[RPW][NF][4], const uint4 (&wv)[RPW][2],
                                          const uint4 (&avs)[NF]) {
#pragma unroll
    for (int rr = 0; rr < RPW; ++rr) {
        const uint4 w0 = wv[rr][0], w1 = wv[rr][1];
#pragma unroll
        for (int f = 0; f < NF; ++f) {
            const uint4 av = avs[f];
            mma16816(acc[rr][f], w0.x, w1.x, w0.y, w1.y, av.x, av.y);  // step 0: e0..e3
            mma16816(acc[rr][f], w0.z, w1.z, w0.w, w1.w, av.z, av.w);  // step 1: e4..e7
        }
    }
}

__device__ __forceinline__ float ld_cg_f32(const float* p) {
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

// out[o] = round(s (+ R[o] when fused)).
__device__ __forceinline__ void store_out(unsigned short* out, const unsigned short* r, size_t o, float s) {
#if FUSE
    s += h2f(r[o]);
#endif
    out[o] = f2h(s);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_residual_skinny(const unsigned short* __restrict__ a, const unsigned short* __restrict__ w,
                     const unsigned short* __restrict__ r, unsigned short* __restrict__ out,
                     float* __restrict__ ws, int M, int N, int K) {
    __shared__ float red[KW * BM * BNP];
    __shared__ unsigned int is_last;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, c = lane & 3;
    const int slot = warp % WG, kw = warp / WG;
    const int n0 = blockIdx.x * BN, m0 = blockIdx.z * BM;

    const unsigned short* wp[RPW][2];
#pragma unroll
    for (int rr = 0; rr < RPW; ++rr)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = min(n0 + (slot * RPW + rr) * 16 + g + 8 * h, N - 1);
            wp[rr][h] = w + (size_t)row * K + 8 * c;
        }
    const unsigned short* ap[NF];
#pragma unroll
    for (int f = 0; f < NF; ++f) ap[f] = a + (size_t)min(m0 + f * 8 + g, M - 1) * K + 8 * c;

    // This CTA's chunks [cb, ce), this warp's contiguous share [wb, wb + nch).
    const int kc = (K + 31) / 32;
    const int cb = (int)((long long)blockIdx.y * kc / SPLIT_K);
    const int ce = (int)((long long)(blockIdx.y + 1) * kc / SPLIT_K);
    const int wb = cb + (ce - cb) * kw / KW;
    const int nch = cb + (ce - cb) * (kw + 1) / KW - wb;

    float acc[RPW][NF][4];
#pragma unroll
    for (int rr = 0; rr < RPW; ++rr)
#pragma unroll
        for (int f = 0; f < NF; ++f)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[rr][f][j] = 0.0f;

    // STAGES chunks in flight: chunk i + STAGES is loaded into slot s as soon as chunk i's MMAs
    // have read it.
    uint4 wv[STAGES][RPW][2];
    uint4 av[STAGES][NF];
#pragma unroll
    for (int s = 0; s < STAGES; ++s)
        if (s < nch) load_chunk(wv[s], av[s], wp, ap, wb + s, c, K);
    for (int base = 0; base < nch; base += STAGES) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            if (base + s < nch) mma_chunk(acc, wv[s], av[s]);
            if (base + s + STAGES < nch) load_chunk(wv[s], av[s], wp, ap, wb + base + s + STAGES, c, K);
        }
    }

    // Fragments to shared memory: acc[rr][f] = out^T rows (row group) g, g + 8 x tokens 2c, 2c + 1.
#pragma unroll
    for (int rr = 0; rr < RPW; ++rr)
#pragma unroll
        for (int f = 0; f < NF; ++f) {
            float* p = red + (kw * BM + f * 8 + 2 * c) * BNP + (slot * RPW + rr) * 16 + g;
            p[0] = acc[rr][f][0];
            p[BNP] = acc[rr][f][1];
            p[8] = acc[rr][f][2];
            p[BNP + 8] = acc[rr][f][3];
        }
    __syncthreads();

    const int mv = min(BM, M - m0), nv = min(BN, N - n0);
    for (int i = threadIdx.x; i < mv * BN; i += THREADS) {
        const int ml = i / BN, nl = i % BN;
        if (nl >= nv) continue;
        float s = 0.0f;
#pragma unroll
        for (int q = 0; q < KW; ++q) s += red[(q * BM + ml) * BNP + nl];
        const size_t o = (size_t)(m0 + ml) * N + n0 + nl;
#if SPLIT_K == 1
        store_out(out, r, o, s);
#else
        ws[(size_t)blockIdx.y * M * N + o] = s;
#endif
    }
#if SPLIT_K > 1
    __threadfence();
    __syncthreads();
    const unsigned int tile = blockIdx.z * gridDim.x + blockIdx.x;
    if (threadIdx.x == 0) is_last = atomicAdd(&skinny_counters[tile], 1u) == SPLIT_K - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    for (int i = threadIdx.x; i < mv * BN; i += THREADS) {
        const int ml = i / BN, nl = i % BN;
        if (nl >= nv) continue;
        const size_t o = (size_t)(m0 + ml) * N + n0 + nl;
        float s = 0.0f;
#pragma unroll
        for (int q = 0; q < SPLIT_K; ++q) s += ld_cg_f32(ws + (size_t)q * M * N + o);
        store_out(out, r, o, s);
    }
    if (threadIdx.x == 0) skinny_counters[tile] = 0u;
#endif
}

// Fusion off: out += R after the GEMM built with FUSE = 0; any M * N (16-byte vectors, then a
// scalar tail; base pointers 16-byte aligned as CuPy allocates them).
extern "C" __global__ void skinny_residual_add(unsigned short* __restrict__ out,
                                               const unsigned short* __restrict__ r, int M, int N) {
    const size_t total = (size_t)M * N, total8 = total / 8;
    const size_t step = (size_t)gridDim.x * blockDim.x;
    const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (size_t i = first; i < total8; i += step) {
        uint4 o = ld_plain((const uint4*)out + i);
        const uint4 q = ld_cached((const uint4*)r + i);
        float fo[8], fq[8];
        unpack(o, fo);
        unpack(q, fq);
#pragma unroll
        for (int e = 0; e < 8; ++e) fo[e] += fq[e];
        st_vec((uint4*)out + i, pack(fo));
    }
    for (size_t i = total8 * 8 + first; i < total; i += step) out[i] = f2h(h2f(out[i]) + h2f(r[i]));
}
