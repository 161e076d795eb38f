// fp32 path of gemm_residual (appended to gemm_residual.cu when GR_DTYPE == 2): true fp32 FFMA,
// no TF32. Block tile GR_BM x GR_BN x 16, (BM/8) x (BN/8) threads, 8x8 outputs each as 2x2 blocks
// of 4x4; a warp owns 32 x 64 outputs. That is what the spec renders; the source also takes
// experiment knobs that bench/fp32_variants.py times (GR_TN 16: 8x16 per thread; BK 32; GR_KUNROLL;
// GF_ORDER, the FFMA order; GF_COPY, the copy's address math), all measured slower on the H200 or
// no faster, except GF_ORDER 3, the default (ADR-0008).
//
// Why this shape (ADR-0008): a k-contiguous tile (BK 8 or 16) feeds each FFMA group from a
// shared-memory load issued only a few instructions earlier (8 FFMA between a W float4's LDS and its
// first use, A loaded at the top of every 4-k step and used at once), so with 4 warps per scheduler
// the issue slots go idle on LDS latency. Here every operand is an outer product, loaded one whole k step (64 FFMA) before use
// (register double buffer, k loop fully unrolled), and the next tile's first fragments are loaded
// right after the barrier, under the last k step's FFMAs.
//
// Shared memory, per stage: As[16][BM + 4] and Bs[16][BN + 4], both K-major (k rows, M / N
// contiguous), so a thread's 4 rows (4 columns) at one k are one 16-byte LDS. Global A and W are
// K-contiguous, so the copy transposes: 4-byte cp.async, lane -> (k = lane & 7, row = lane >> 3):
// a warp instruction reads 4 rows x 32 bytes (4 whole sectors) and writes banks 4k + row (the
// row stride is 4 mod 32 words): conflict-free. 16 copies per thread per 16-k tile at 128x128.
// Fragments: lane -> m4 = bits {0, 4}, n4 = bits {1, 2, 3}; a warp's A read is 4 float4 (64 B), its
// W read 8 float4 (128 B), both contiguous, and lanes l, l^2 share the A address, l, l^1 the W
// address: the packed "pair-uniform" case, 2 wavefronts per LDS.128 instead of 4.
// Edges: interior blocks (the whole tile inside M and N) use one row pointer per operand stepped by
// a fixed stride; edge blocks clamp every copied row to M-1 / N-1 (garbage rows, never stored).
// K tail (K % 16 == 8): the second 8-k half of the last tile is zero-filled.
// Epilogue straight from registers: 16-byte loads of R and stores of out, a warp's instruction
// covering 4 rows x 128 contiguous bytes.
// GR_TN (rendered for fp32; 8 when absent): outputs per thread along N, 8 or 16. TN 8: 8x8 per
// thread, warp tile 32 x 64; TN 16: 8x16 per thread (128 accumulators), warp tile 32 x 128.
#ifndef GR_TN
#define GR_TN 8
#endif
// GR_KUNROLL: k steps per unrolled body (pairs; the whole 16/32-k tile when absent).
#ifndef GR_KUNROLL
#define GR_KUNROLL GR_BK
#endif
#define GF_NJ (GR_TN / 4)                   // 4-column groups per thread, 32 columns apart
#define GF_WN (8 * GR_TN)                   // warp tile columns (8 lanes along N)
#define GF_THREADS (GR_BM * GR_BN / (8 * GR_TN))
#define GF_NW (GF_THREADS / 32)              // warps per block
#define GF_WM (GR_BM / 32)                   // warps along M (warp tile 32 x WN)
#define GF_LDA (GR_BM + 4)                   // As row stride in floats (4 mod 32 for BM % 32 == 0)
#define GF_LDB (GR_BN + 4)
#define GF_STAGE_FLOATS (GR_BK * (GF_LDA + GF_LDB))
#define GF_KP (GR_BK / 8)                    // 8-k pieces per tile row (2 or 4)
#define GF_RP (4 * GF_NW)                    // rows one copy pass covers (4 per warp)
#define GF_QA (GR_BM / GF_RP)                // copy passes per stage, A and W
#define GF_QB (GR_BN / GF_RP)
// TN 8: 64 accumulators + 2 x 16 fragment registers + addresses fit 128 registers (512 threads per
// SM). TN 16: 128 + 2 x 24 + addresses fit 255 (256 threads per SM).
#define GF_MIN_BLOCKS (GR_TN == 8 ? 512 / GF_THREADS : (GF_THREADS <= 256 ? 256 / GF_THREADS : 1))

static_assert(GR_BK == 16 || GR_BK == 32, "the copy plan covers 16 or 32 k per stage (8-k pieces)");
static_assert(GR_TN == 8 || GR_TN == 16, "8 or 16 outputs per thread along N");
static_assert(GR_BM % 32 == 0 && GR_BN % GF_WN == 0, "warp tiles are 32 x WN");
static_assert(GF_WM * (GR_BN / GF_WN) == GF_NW, "warps tile the block");
static_assert(GR_BM % GF_RP == 0 && GR_BN % GF_RP == 0, "copy passes tile the rows");
static_assert(GR_KUNROLL % 2 == 0 && GR_BK % GR_KUNROLL == 0, "k unroll: pairs dividing BK");
// The spec sizes a stage as (BM + BN) x (BK + 4) floats; this layout needs no more than that.
static_assert(GF_STAGE_FLOATS <= (GR_BM + GR_BN) * (GR_BK + 4), "stage exceeds the spec's smem size");

// 4-byte async copy (cp.async.ca: 4 bytes is below .cg's 16) and a plain shared store.
__device__ __forceinline__ void gf_cp4(u32 dst, const float* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(dst), "l"(src));
}
__device__ __forceinline__ void gf_st(u32 dst, float v) {
    asm volatile("st.shared.f32 [%0], %1;\n" :: "r"(dst), "f"(v));
}

// One row's share of the copy: elements (kl + 8h, row) of the k-tile whose (row, kl) element `p`
// points at, h < KP, into shared `d + h * 8 rows` (immediate offsets on both sides). FULL: the whole
// tile is inside K; else piece h is inside iff 8h < kleft = K - k0 (piece 0 always is), the others
// are zeroed by plain stores (the barrier that publishes the stage orders them too).
template <int LD, bool FULL>
__device__ __forceinline__ void gf_copy_row(u32 d, const float* p, int kleft) {
#pragma unroll
    for (int h = 0; h < GF_KP; ++h) {
        const u32 dh = d + h * 8 * LD * 4;
        const bool in = FULL || h == 0 || 8 * h < kleft;
#if GR_STAGES == 0
        gf_st(dh, in ? p[8 * h] : 0.f);
#else
        if (in) gf_cp4(dh, p + 8 * h);
        else gf_st(dh, 0.f);
#endif
    }
}

// Copy the k-tile at k0 into the stage at shared byte address `st`, transposed to K-major. The
// thread's elements: k = kl + 8h (h < KP), rows rl + q * RP (q < QA for A, < QB for W); `dsta` /
// `dstw`: shared byte offsets of (k = kl, row rl) in a stage. Interior blocks (EDGE false): `pa` /
// `pw` point at (row rl of the block, column kl), rows stepping by `step` elements. Edge blocks: rows
// recomputed from the thread's first global row `ra` / `rw` and clamped to M-1 / N-1 (in range;
// those rows' results are never stored). K is a multiple of 8 and k0 < K, so each 8-k piece is
// wholly inside or outside K.
// Synchronous loads (no stages): unrolled fully, the 64x64 tile would hold 32 loads in registers at
// once and spill; two passes at a time is plenty without overlap anyway.
// GF_COPY: interior copy address math. 0 (default): the row pointers are rebuilt from the row index
// and k0 every tile (64-bit add chains); 1: two 64-bit pointers (A and W at the copied tile's column)
// advanced per tile, rows q > 0 one IMAD.WIDE each. 1 saves 8 of 1174 instructions per tile in the
// device's SASS (NVRTC 13.0) but measured the same (ADR-0008).
#ifndef GF_COPY
#define GF_COPY 0
#endif
#if GR_STAGES == 0
#define GF_COPY_UNROLL _Pragma("unroll 2")
#else
#define GF_COPY_UNROLL _Pragma("unroll")
#endif
template <bool EDGE, bool FULL>
__device__ __forceinline__ void load_tile_f32_(u32 st, const float* pa, const float* pw, size_t step, int ra,
                                               int rw, int M, int N, int K, int k0, u32 dsta, u32 dstw) {
    // EDGE: the row limits go through an opaque move so that the clamped row pointers (loop
    // invariant) are recomputed per tile instead of being hoisted into 16 registers (spills).
    int mlast = M - 1, nlast = N - 1;
    if (EDGE) asm volatile("" : "+r"(mlast), "+r"(nlast));
    const int kleft = K - k0;
#if GF_COPY == 1
    if (!EDGE) {
        // pa / pw already point at column k0 (advanced by the caller); row q is one IMAD.WIDE away
        // (32-bit row offset q * RP * K, sign-extended, added to the 64-bit row-0 pointer).
        const int rstep = GF_RP * K;
        GF_COPY_UNROLL
        for (int q = 0; q < GF_QA; ++q)
            gf_copy_row<GF_LDA, FULL>(st + dsta + q * GF_RP * 4, pa + q * rstep, kleft);
        GF_COPY_UNROLL
        for (int q = 0; q < GF_QB; ++q)
            gf_copy_row<GF_LDB, FULL>(st + dstw + q * GF_RP * 4, pw + q * rstep, kleft);
        return;
    }
#endif
    const float* p = pa + k0;
    GF_COPY_UNROLL
    for (int q = 0; q < GF_QA; ++q) {
        if (EDGE) p = pa + (size_t)min(ra + q * GF_RP, mlast) * K + k0;
        gf_copy_row<GF_LDA, FULL>(st + dsta + q * GF_RP * 4, p, kleft);
        if (!EDGE) p += step;
    }
    p = pw + k0;
    GF_COPY_UNROLL
    for (int q = 0; q < GF_QB; ++q) {
        if (EDGE) p = pw + (size_t)min(rw + q * GF_RP, nlast) * K + k0;
        gf_copy_row<GF_LDB, FULL>(st + dstw + q * GF_RP * 4, p, kleft);
        if (!EDGE) p += step;
    }
}

template <bool EDGE>
__device__ __forceinline__ void load_tile_f32(u32 st, const float* pa, const float* pw, size_t step, int ra, int rw,
                                              int M, int N, int K, int k0, u32 dsta, u32 dstw) {
    if (k0 + GR_BK <= K) load_tile_f32_<EDGE, true>(st, pa, pw, step, ra, rw, M, N, K, k0, dsta, dstw);
    else load_tile_f32_<EDGE, false>(st, pa, pw, step, ra, rw, M, N, K, k0, dsta, dstw);
}

// Fragments of k step `k` from the stage at `sa` (A; W follows at BK * LDA floats): rows
// aoff + {0..3, 16..19}, columns boff + 32t + {0..3}, t < NJ.
__device__ __forceinline__ void load_frag_f32(const float* sa, int k, int aoff, int boff, float (&fa)[8],
                                              float (&fb)[GR_TN]) {
    const float* pa = sa + k * GF_LDA + aoff;
    const float* pb = sa + GR_BK * GF_LDA + k * GF_LDB + boff;
    const float4 a0 = *reinterpret_cast<const float4*>(pa);
    const float4 a1 = *reinterpret_cast<const float4*>(pa + 16);
    fa[0] = a0.x; fa[1] = a0.y; fa[2] = a0.z; fa[3] = a0.w;
    fa[4] = a1.x; fa[5] = a1.y; fa[6] = a1.z; fa[7] = a1.w;
#pragma unroll
    for (int t = 0; t < GF_NJ; ++t) {
        const float4 b = *reinterpret_cast<const float4*>(pb + 32 * t);
        fb[4 * t] = b.x; fb[4 * t + 1] = b.y; fb[4 * t + 2] = b.z; fb[4 * t + 3] = b.w;
    }
}

// The order in which a k step's FFMAs are written (GF_ORDER) does not change any result (each
// accumulator sees the same k sequence) but steers ptxas' register allocation and schedule, which
// sets the time (ADR-0008): 0 i outer / j inner, 1 j outer, 2 i outer with j snaking, 3 j outer with
// i snaking (the default, the fastest); orders 4-13 (gf_pos: blocks, pairs, reversal on odd k) are
// slower. What ranks them is the register-file reads of the device's SASS (FFMA sources not served
// by a reuse flag); order 3 has the fewest.
#ifndef GF_ORDER
#define GF_ORDER 3
#endif
static_assert(GF_ORDER >= 0 && GF_ORDER <= 13, "FFMA orders 0-13");
static_assert(GF_ORDER <= 3 || GR_TN == 8, "orders 4-13 are written for 8x8 per thread");
// Orders 4-13 (8x8): position n < 64 of k step `k` -> (i, j) as i * 8 + j.
__host__ __device__ constexpr int gf_o3(int n) { return ((n >> 3) & 1 ? 7 - (n & 7) : (n & 7)) * 8 + (n >> 3); }
__host__ __device__ constexpr int gf_pos(int o, int k, int n) {
    return o == 4 ?   // 2x2 blocks: block grid j-outer / i-snake, inside j-outer / i-snake
        ((((n >> 4) & 1) ? 3 - ((n >> 2) & 3) : ((n >> 2) & 3)) * 2 + ((((n >> 1) & 1) ^ (((n >> 4) & 1) ? 1 : 0)) ? 1 - (n & 1) : (n & 1))) * 8
            + (n >> 4) * 2 + ((n >> 1) & 1)
        : o == 5 ?    // 4x4 blocks (2x2 grid, snake), inside j-outer / i-snake
        ((n >> 5) * 4 + ((((n >> 2) & 1) ? 3 - (n & 3) : (n & 3)))) * 8 + (((n >> 5) & 1) ? 1 - ((n >> 4) & 1) : ((n >> 4) & 1)) * 4 + ((n >> 2) & 3)
        : o == 6 ? gf_o3(k & 1 ? 63 - n : n)                    // order 3, reversed on odd k
        : o == 7 ?    // j in pairs outer, i snake, the pair inner
        ((((n >> 4) & 1) ? 7 - ((n >> 1) & 7) : ((n >> 1) & 7))) * 8 + (n >> 4) * 2 + (n & 1)
        : o == 8 ?    // i in pairs outer, j snake, the pair inner
        ((n >> 4) * 2 + (n & 1)) * 8 + (((n >> 4) & 1) ? 7 - ((n >> 1) & 7) : ((n >> 1) & 7))
        : o == 9 ? gf_pos(7, 0, k & 1 ? 63 - n : n)             // order 7, reversed on odd k
        : o == 10 ? (gf_o3(n) & ~7) + (((gf_o3(n) & 7) >> 1) + ((gf_o3(n) & 7) & 1) * 4)  // order 3, j as 0 4 1 5 2 6 3 7
        : o == 11 ? gf_pos(8, 0, k & 1 ? 63 - n : n)            // order 8, reversed on odd k
        : o == 12 ? (gf_o3(n) & 7) * 8 + (gf_o3(n) >> 3)         // order 3 transposed (= order 2)
        : gf_o3(n);                                              // 13: order 3 (a control: same SASS as 3?)
}
// Every table order visits each (i, j) once per k step (else results would change silently).
__host__ __device__ constexpr bool gf_order_is_permutation(int o) {
    for (int k = 0; k < 2; ++k) {
        unsigned long long seen = 0;
        for (int n = 0; n < 64; ++n) seen |= 1ull << gf_pos(o, k, n);
        if (seen != ~0ull) return false;
    }
    return true;
}
static_assert(GF_ORDER < 4 || gf_order_is_permutation(GF_ORDER), "GF_ORDER table is not a permutation");
template <int K>
__device__ __forceinline__ void outer_f32k(float (&acc)[8][GR_TN], const float (&fa)[8], const float (&fb)[GR_TN]) {
#if GF_ORDER >= 4
#pragma unroll
    for (int n = 0; n < 64; ++n) {
        const int p = gf_pos(GF_ORDER, K, n), i = p >> 3, j = p & 7;
        acc[i][j] = fmaf(fa[i], fb[j], acc[i][j]);
    }
#endif
}
__device__ __forceinline__ void outer_f32(float (&acc)[8][GR_TN], const float (&fa)[8], const float (&fb)[GR_TN]) {
#if GF_ORDER == 0
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < GR_TN; ++j) acc[i][j] = fmaf(fa[i], fb[j], acc[i][j]);
#elif GF_ORDER == 1
#pragma unroll
    for (int j = 0; j < GR_TN; ++j)
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[i][j] = fmaf(fa[i], fb[j], acc[i][j]);
#elif GF_ORDER == 2
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int jj = 0; jj < GR_TN; ++jj) {
            const int j = (i & 1) ? GR_TN - 1 - jj : jj;
            acc[i][j] = fmaf(fa[i], fb[j], acc[i][j]);
        }
#elif GF_ORDER == 3
#pragma unroll
    for (int j = 0; j < GR_TN; ++j)
#pragma unroll
        for (int ii = 0; ii < 8; ++ii) {
            const int i = (j & 1) ? 7 - ii : ii;
            acc[i][j] = fmaf(fa[i], fb[j], acc[i][j]);
        }
#endif
}

// One k-tile from the stage at `cur`, its first fragments already in f[0]; loads k + 1 while
// computing k. The last step first runs `at_end` (wait for the next tile, barrier) and loads the
// next tile's k = 0 fragments from `next` into f[0]. The tile runs as BK / KUNROLL passes of one
// unrolled body of KUNROLL steps (an even count, so the buffer parity is static); the body's last
// step branches (uniformly) between the next k of this tile and the next tile. A short body keeps
// the hot loop inside the instruction cache: on the H200, 8x16 tiles fully unrolled over BK 32
// (4400 instructions, 70 KB) ran 9 % slower than the same kernel with 8-step bodies.
template <typename AtEnd>
__device__ __forceinline__ void compute_tile_f32(const float* cur, const float* next, float (&acc)[8][GR_TN],
                                                 float (&fa)[2][8], float (&fb)[2][GR_TN], int aoff, int boff,
                                                 AtEnd at_end) {
#pragma unroll 1
    for (int kb = 0; kb < GR_BK; kb += GR_KUNROLL) {
#pragma unroll
        for (int kk = 0; kk < GR_KUNROLL; ++kk) {
            if (kk + 1 < GR_KUNROLL) {
                load_frag_f32(cur, kb + kk + 1, aoff, boff, fa[(kk + 1) & 1], fb[(kk + 1) & 1]);
            } else if (kb + GR_KUNROLL < GR_BK) {
                load_frag_f32(cur, kb + GR_KUNROLL, aoff, boff, fa[0], fb[0]);
            } else {
                at_end();
                load_frag_f32(next, 0, aoff, boff, fa[0], fb[0]);
            }
#if GF_ORDER >= 4
            if (kk & 1) outer_f32k<1>(acc, fa[1], fb[1]);
            else outer_f32k<0>(acc, fa[0], fb[0]);
#else
            outer_f32(acc, fa[kk & 1], fb[kk & 1]);
#endif
        }
    }
}

template <bool EDGE>
__device__ __forceinline__ void mainloop_f32(float (&acc)[8][GR_TN], float* smem, const float* __restrict__ a,
                                             const float* __restrict__ w, int M, int N, int K, int m0, int n0,
                                             int tid, int aoff, int boff) {
    const int lane = tid & 31, warp = tid >> 5;
    const int kl = lane & 7, rl = (lane >> 3) + 4 * warp;   // copy plan: k within a piece, row in a pass
    const int ra = m0 + rl, rw = n0 + rl;
    const size_t step = (size_t)GF_RP * K;
    const float* pa = a + (size_t)(EDGE ? 0 : ra) * K + kl;   // EDGE: column kl of row 0
    const float* pw = w + (size_t)(EDGE ? 0 : rw) * K + kl;
    const u32 dsta = (u32)(kl * GF_LDA + rl) * 4u;                   // shared offsets of (kl, rl)
    const u32 dstw = (u32)(GR_BK * GF_LDA + kl * GF_LDB + rl) * 4u;
    const u32 sbase = smem_addr(smem);
    const int ktiles = (K + GR_BK - 1) / GR_BK;
    float fa[2][8], fb[2][GR_TN];

#if GR_STAGES == 0
    for (int kt = 0; kt < ktiles; ++kt) {
        __syncthreads();                    // everyone is done reading the previous tile
        load_tile_f32<EDGE>(sbase, pa + (GF_COPY && !EDGE ? kt * GR_BK : 0), pw + (GF_COPY && !EDGE ? kt * GR_BK : 0),
                            step, ra, rw, M, N, K, kt * GR_BK, dsta, dstw);
        __syncthreads();
        load_frag_f32(smem, 0, aoff, boff, fa[0], fb[0]);
        compute_tile_f32(smem, smem, acc, fa, fb, aoff, boff, [] {});
    }
#else
#pragma unroll
    for (int s = 0; s < GR_STAGES - 1; ++s) {
        if (s < ktiles)
            load_tile_f32<EDGE>(sbase + s * GF_STAGE_FLOATS * 4, pa + (GF_COPY && !EDGE ? s * GR_BK : 0),
                                pw + (GF_COPY && !EDGE ? s * GR_BK : 0), step, ra, rw, M, N, K, s * GR_BK, dsta, dstw);
        cp_async_commit();
    }
    cp_async_wait<GR_STAGES - 2>();
    __syncthreads();                        // tile 0 visible to all
    load_frag_f32(smem, 0, aoff, boff, fa[0], fb[0]);
    int rd = 0, wr = GR_STAGES - 1;         // stage read by tile kt / written with tile kt + STAGES - 1
#if GF_COPY == 1
    // interior: pointers at the column of the next tile to copy (tile STAGES - 1 first)
    const float* qa = pa + (EDGE ? 0 : (GR_STAGES - 1) * GR_BK);
    const float* qw = pw + (EDGE ? 0 : (GR_STAGES - 1) * GR_BK);
#else
    const float* const qa = pa;
    const float* const qw = pw;
#endif
    for (int kt = 0; kt < ktiles; ++kt) {
        // Stage wr held tile kt - 1, whose last reads came before the barrier that ended step kt - 1.
        const int nk = kt + GR_STAGES - 1;
        if (nk < ktiles)
            load_tile_f32<EDGE>(sbase + wr * GF_STAGE_FLOATS * 4, qa, qw, step, ra, rw, M, N, K, nk * GR_BK,
                                dsta, dstw);
#if GF_COPY == 1
        if (!EDGE) { qa += GR_BK; qw += GR_BK; }
#endif
        cp_async_commit();
        const float* cur = smem + rd * GF_STAGE_FLOATS;
        rd = rd == GR_STAGES - 1 ? 0 : rd + 1;
        wr = wr == GR_STAGES - 1 ? 0 : wr + 1;
        // Groups committed: STAGES - 1 + kt + 1; at most STAGES - 2 pending leaves tiles 0..kt+1 done.
        compute_tile_f32(cur, smem + rd * GF_STAGE_FLOATS, acc, fa, fb, aoff, boff, [] {
            cp_async_wait<GR_STAGES - 2>();
            __syncthreads();
        });
    }
    cp_async_wait<0>();
#endif
}

extern "C" __global__ void __launch_bounds__(GF_THREADS, GF_MIN_BLOCKS)
gemm_residual_fp32(const float* __restrict__ a, const float* __restrict__ w, const float* __restrict__ r,
                   float* __restrict__ out, int M, int N, int K) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    float* smem = reinterpret_cast<float*>(smem_raw);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int n0 = blockIdx.x * GR_BN, m0 = blockIdx.y * GR_BM;
    // Compute layout: warp (wm, wn) owns rows wm*32 + [0, 32) and columns wn*WN + [0, WN); the lane's
    // 4-row groups start at m4 * 4 (+16), its 4-column groups at n4 * 4 (+32t).
    const int wm = warp % GF_WM, wn = warp / GF_WM;
    const int m4 = (lane & 1) | ((lane >> 3) & 2), n4 = (lane >> 1) & 7;
    const int aoff = wm * 32 + m4 * 4, boff = wn * GF_WN + n4 * 4;

    float acc[8][GR_TN];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < GR_TN; ++j) acc[i][j] = 0.f;

    if (m0 + GR_BM <= M && n0 + GR_BN <= N)
        mainloop_f32<false>(acc, smem, a, w, M, N, K, m0, n0, tid, aoff, boff);
    else
        mainloop_f32<true>(acc, smem, a, w, M, N, K, m0, n0, tid, aoff, boff);

    // Epilogue from registers: acc[s*4 + i][t*4 + j] is (row aoff + 16s + i, column boff + 32t + j).
    // N % 8 == 0, so a 4-column group is wholly inside N or wholly outside.
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = m0 + aoff + (i >> 2) * 16 + (i & 3);
        if (row >= M) continue;
#pragma unroll
        for (int t = 0; t < GF_NJ; ++t) {
            const int col = n0 + boff + t * 32;
            if (col >= N) continue;
            float4 v = make_float4(acc[i][t * 4], acc[i][t * 4 + 1], acc[i][t * 4 + 2], acc[i][t * 4 + 3]);
            const size_t o = (size_t)row * N + col;
#if GR_FUSE
            const float4 rv = *reinterpret_cast<const float4*>(r + o);
            v.x += rv.x; v.y += rv.y; v.z += rv.z; v.w += rv.w;
#endif
            *reinterpret_cast<float4*>(out + o) = v;
        }
    }
}
