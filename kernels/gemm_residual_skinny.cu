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
// mma_pair (skinny/mma.cuh) in numpy.
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
// A in shared memory (A_SMEM = 1, K % 8 == 0 only). A_SMEM = 0: every warp loads its own copy of
// A's fragments from global memory (L1 / L2) into the same register ring as W's. At M >= 16 those
// loads outweigh W's (BM / 8 fragments against 2 per row group), and every row-group warp of a CTA
// and every CTA along N fetches the same A slice again from L2, which becomes the bound. A_SMEM = 1:
// the CTA copies A[m0 : m0 + BM, its K range] into shared memory once, in tiles of KT = KW x A_TILE
// chunks, double-buffered with 16-byte cp.async.cg (zero-filled past M and past the CTA's K range
// through the src-size operand), one barrier per tile; W stays streamed into the register ring, and
// each warp reads its B fragments with 16-byte ld.shared right before its MMAs, with the same K
// permutation as before (lane (g, c): the 8 elements at k = 32 kc + 8 c of token g). Layout of a
// tile: [chunk j][token t][32 elements] (A_OFF): a fragment read by 8 consecutive lanes (tokens g,
// g + 1, c = 0..3) covers 128 contiguous bytes, all 32 banks once, and so does each group of 8
// lanes of the copy (tokens fastest): conflict-free without padding. A warp-slot's KW warps take
// the tile's chunks interleaved (warp kw: chunks kw, kw + KW, ...), so that they stay balanced on
// a part-full last tile. After the main loop the tile buffers hold the KW partial tiles (red).
//
// W through shared memory by bulk copies (W_BULK = 1, K % 8 == 0, compute capability >= 9.0). The
// register ring above reads each W row in 64-byte pieces (4 lanes a row per load), so tens of
// thousands of short runs reach DRAM at once. With W_BULK one producer warp copies whole runs of
// BULK_K elements of each of the CTA's BN rows of W and BM tokens of A into a ring of STAGES
// shared-memory slots with 1D bulk copies (cp.async.bulk, the TMA engine; one copy per row, its
// bytes completing on the slot's "full" mbarrier); WARPS consumer warps read their fragments with
// ldmatrix (W rows as the MMA's M side as above, tokens as its N side, k in natural order) and each
// releases the slot on its "empty" mbarrier. Rows are padded by 16 bytes (BULK_K + 8 elements: an
// odd number of 16-byte units), so the 8 rows of an ldmatrix phase fall in 8 different bank groups.
// A CTA's K range is whole slots (split-K divides ceil(K / BULK_K) slots); the last slot of K may
// be part-full: its copies carry only the bytes before K, steps past K are skipped, and a step
// that straddles K (K % 16 == 8) zeroes the fragments' upper half in both operands. Rows past N
// and tokens past M are not copied: their slots keep stale values that feed only outputs that are
// never stored. The warps' partial tiles, split-K and the epilogue are the same as above.
// W_BULK = 2 moves the same slots as 2D TMA boxes instead (tensor maps `tw` over W and `ta` over A,
// boxes of BN rows, or min(BM, M) tokens, x 64 elements, 128-byte swizzle): BULK_K / 64 boxes of
// each a slot, one copy per box rather than per row, issued by lane 0. A box's 16-byte chunk c of
// row r lands at chunk c ^ (r % 8) of its 128-byte row, which the ldmatrix addresses undo (8 rows
// at one k: 8 distinct chunks, no conflicts); rows, tokens and k past the matrix arrive as zeros,
// so no step is masked (with M < BM the slot's token rows past M are not written: stale values
// that feed only outputs that are never stored). Slots start 1024-byte aligned (the swizzle's
// period).
//
// The parts, each a header under skinny/ that compiles alone (tests/unit/test_skinny_headers_alone.py):
// config.cuh (the defines checked and the warps' geometry), loads.cuh (the register ring's loads),
// mma.cuh (mma.sync and the K permutation), a_tile.cuh (A's shared-memory tiles), bulk.cuh (the
// bulk-copy ring's producer and consumers), mainloop.cuh (a warp's main loop with A_SMEM or W_BULK)
// and epilogue.cuh (the partial tiles, split-K and the stores). This file: the kernel's set-up, the
// register ring's loop, the split into the parts, and the residual add of fusion off. The codegen
// (kernels/skinny/codegen.py) prepends the plan's #defines and vec16.cuh and inlines each #include
// once (kernels/include_once.py), so NVRTC compiles one source.

#include "skinny/config.cuh"
#include "skinny/loads.cuh"
#include "skinny/mma.cuh"
#include "skinny/mainloop.cuh"
#include "skinny/epilogue.cuh"

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_residual_skinny(const unsigned short* __restrict__ a, const unsigned short* __restrict__ w,
                     const unsigned short* __restrict__ r, unsigned short* __restrict__ out,
                     float* __restrict__ ws, int M, int N, int K
#if W_BULK == 2
                     , const __grid_constant__ TmaDesc tw, const __grid_constant__ TmaDesc ta
#endif
                     ) {
#if W_BULK
    extern __shared__ __align__(128) unsigned char dsmem[];  // the KW partial tiles, then the ring of STAGES slots
    float* const red = (float*)dsmem;
    __shared__ __align__(8) unsigned long long bars[2 * STAGES];  // full[STAGES], then empty[STAGES]
#elif A_SMEM
    __shared__ __align__(16) unsigned char smem[SMEM_BYTES];  // the A tiles (two buffers), then the partial tiles
    unsigned short* const sa = (unsigned short*)smem;
    float* const red = (float*)smem;
#else
    __shared__ float red[RED_FLOATS];
#endif
    __shared__ unsigned int is_last;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
    const int slot = warp % WG, kw = warp / WG, n0 = blockIdx.x * BN, m0 = blockIdx.z * BM;
    const unsigned short* wp[RPW][2];  // the register ring's rows of W and tokens of A
    const unsigned short* ap[NF];
    ring_rows(wp, ap, a, w, n0, m0, slot, g, c, M, N, K);
    const int kc = (K + 31) / 32;  // the CTA's chunks [cb, ce), the warp's contiguous share [wb, wb + nch)
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
#if W_BULK == 2
    mainloop_bulk(acc, dsmem, bars, w, a, &tw, &ta, warp, lane, slot, kw, n0, m0, M, N, K);
#elif W_BULK
    mainloop_bulk(acc, dsmem, bars, w, a, nullptr, nullptr, warp, lane, slot, kw, n0, m0, M, N, K);
#elif A_SMEM
    mainloop_a_smem(acc, sa, a, wp, m0, cb, ce, kw, g, c, M, K);
#else
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
#endif
    stash_partials(red, acc, warp, slot, kw, g, c);
    __syncthreads();
    const int mv = min(BM, M - m0), nv = min(BN, N - n0);
    sum_partials(out, r, ws, red, m0, n0, mv, nv, M, N);
    if constexpr (SPLIT_K > 1) {  // the tile's last CTA sums the SPLIT_K partials in order, resets the counter
        __threadfence();
        __syncthreads();
        const unsigned int tile = blockIdx.z * gridDim.x + blockIdx.x;
        if (threadIdx.x == 0) is_last = atomicAdd(&skinny_counters[tile], 1u) == SPLIT_K - 1;
        __syncthreads();
        if (!is_last) return;
        __threadfence();
        if ((N & 3) == 0) {
            float4 v[SPLIT_RU4][SPLIT_K];
            split_sum_vec4(v, out, r, ws, m0, n0, mv, nv, M, N);
        } else {
            float v[SPLIT_RU1][SPLIT_K];
            split_sum_scalar(v, out, r, ws, m0, n0, mv, nv, M, N);
        }
        if (threadIdx.x == 0) skinny_counters[tile] = 0u;
    }
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
