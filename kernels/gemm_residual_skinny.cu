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
// Defines (validated integers, prepended by kernels/gemm_residual_skinny.py): BM, BN, STAGES, WARPS,
// SPLIT_K, DT (0 bf16, 1 fp16), FUSE, ALIGNED8, ALIGNED2, COUNTERS, A_SMEM, A_TILE (chunks per warp
// per shared-memory tile), W_BULK, BULK_K (K elements per ring slot); then vec16.cuh (VEC_DTYPE =
// DT) for ld_stream / ld_cached / pack2 / unpack2.

#define NF (BM / 8)
#define RG (BN / 16)
#define WG (RG < WARPS ? RG : WARPS)
#define RPW (RG / WG)
#define KW (WARPS / WG)
#define BNP (BN + 4)
#ifndef W_BULK
#define W_BULK 0
#endif
#if W_BULK
#if !ALIGNED8 || A_SMEM
#error "W_BULK needs K % 8 == 0 (16-byte bulk copies of whole rows) and A_SMEM = 0"
#endif
#define THREADS ((WARPS + 1) * 32)
#if W_BULK == 2
#define ROW_E BULK_K
#else
#define ROW_E (BULK_K + 8)
#endif
#define SLOT_ELEMS ((BN + BM) * ROW_E)
#define STEPS (BULK_K / 16)
#else
#define THREADS (WARPS * 32)
#endif
#define RED_FLOATS (KW * BM * BNP)

#ifndef A_SMEM
#define A_SMEM 0
#endif
#if A_SMEM
#if !ALIGNED8
#error "A_SMEM needs K % 8 == 0 (16-byte cp.async of A's rows)"
#endif
#define KT (KW * A_TILE)
#define A_TILE_ELEMS (KT * BM * 32)
// Element (chunk j of the tile, token t, element e of the chunk's 32) of a shared-memory A tile.
#define A_OFF(j, t, e) (((j) * BM + (t)) * 32 + (e))
// The copy: 16-byte piece p of a tile is element 8 q of chunk j of token t (tokens fastest).
#define A_PIECES (KT * BM * 4)
#define A_PIECE_Q(p) ((p) % 4)
#define A_PIECE_T(p) (((p) / 4) % BM)
#define A_PIECE_J(p) ((p) / (4 * BM))
#define SMEM_A_BYTES (2 * A_TILE_ELEMS * 2)
#define SMEM_RED_BYTES (RED_FLOATS * 4)
#define SMEM_BYTES (SMEM_A_BYTES > SMEM_RED_BYTES ? SMEM_A_BYTES : SMEM_RED_BYTES)
#endif

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

// One fragment pair's MMAs (the K permutation: see the header). w0 = W row g, w1 = row g + 8,
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

#if A_SMEM
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

// One chunk's W loads (rows g and g + 8 of each of the warp's row groups).
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
#endif

#if W_BULK
#include "mbarrier.cuh"
// Programmatic dependent launch (engine/backends/pdl.py): launched with it, this kernel may start
// while the kernel before it in the stream still runs. grid_dependency_wait() returns once that
// kernel has finished and its writes are visible (at once without the launch attribute): every
// thread runs it before its first global read or write.
__device__ __forceinline__ void grid_dependency_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
// The decode path's shared addresses by the compiler's intrinsic, not mbarrier.cuh's smem_u32 (PTX
// cvta): the two compile to different code around the ring's address arithmetic.
__device__ __forceinline__ unsigned shared_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void ldsm_x4(unsigned addr, u32& r0, u32& r1, u32& r2, u32& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x2(unsigned addr, u32& r0, u32& r1) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(addr));
}

#if W_BULK == 2
struct __align__(64) TmaDesc {
    unsigned long long v[16];
};
__device__ __forceinline__ void tma_box(unsigned dst, const TmaDesc* map, int col, int row, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst), "l"((unsigned long long)map), "r"(col), "r"(row),
                 "r"(bar) : "memory");
}
// Byte offset in a slot of the 16-byte chunk holding elements k .. k + 7 (k % 8 == 0) of W row
// `row` (tokens: BN + t): its box (k / 64), its 128-byte row, the chunk swizzled by the row.
__device__ __forceinline__ unsigned swz(int row, int box_rows, int k) {
    return (unsigned)(((k >> 6) * box_rows + row) * 128 + ((((k & 63) >> 3) ^ (row & 7)) << 4));
}
#define W_AT(row, k) swz((row), BN, (k))
#define A_AT(t, k) (BN * BULK_K * 2 + swz((t), BM, (k)))

// The producer (lane 0 of the last warp): for each of the CTA's slots of K, once the consumers
// released the ring slot, arm its full barrier with the slot's bytes (whole boxes, zeros past the
// matrix included) and copy BULK_K / 64 boxes of W and of A. A's boxes are min(BM, M) tokens (the
// tensor map's box): with fewer tokens than BM no box row lies past M, whose zero fill costs the
// copy engine time; the rows of the slot beyond them keep stale values that feed only outputs that
// are never stored.
__device__ __forceinline__ void bulk_produce(unsigned ring, unsigned full0, unsigned empty0, const TmaDesc* tw,
                                             const TmaDesc* ta, int n0, int m0, int sb, int nit, int M, int lane) {
    if (lane != 0) return;
    const unsigned bytes = (unsigned)((BN + min(BM, M)) * BULK_K * 2);
    for (int i = 0; i < nit; ++i) {
        const int s = i % STAGES;
        if (i >= STAGES) mbar_wait(empty0 + 8 * s, ((i / STAGES) - 1) & 1);
        const int k0 = (sb + i) * BULK_K;
        mbar_expect_tx(full0 + 8 * s, bytes);
        const unsigned slot = ring + (unsigned)(s * SLOT_ELEMS * 2);
#pragma unroll
        for (int j = 0; j < BULK_K / 64; ++j) {
            tma_box(slot + W_AT(0, 64 * j), tw, k0 + 64 * j, n0, full0 + 8 * s);
            tma_box(slot + A_AT(0, 64 * j), ta, k0 + 64 * j, m0, full0 + 8 * s);
        }
    }
}
#else
#define W_AT(row, k) (unsigned)(((row) * ROW_E + (k)) * 2)
#define A_AT(t, k) (unsigned)(((BN + (t)) * ROW_E + (k)) * 2)

// The producer warp: for each of the CTA's slots of K, once every consumer warp released the ring
// slot it reuses, lane 0 arms the slot's full barrier with the bytes to come and the lanes copy the
// valid rows (W's nv rows, then A's mv tokens) in whole runs of the slot's K range.
__device__ __forceinline__ void bulk_produce(unsigned ring, unsigned full0, unsigned empty0,
                                             const unsigned short* w, const unsigned short* a, int n0, int nv,
                                             int m0, int mv, int sb, int nit, int K, int lane) {
    for (int i = 0; i < nit; ++i) {
        const int s = i % STAGES;
        if (i >= STAGES) mbar_wait(empty0 + 8 * s, ((i / STAGES) - 1) & 1);
        const int k0 = (sb + i) * BULK_K;
        const unsigned rb = (unsigned)min(BULK_K, K - k0) * 2u;
        if (lane == 0) mbar_expect_tx(full0 + 8 * s, rb * (unsigned)(nv + mv));
        __syncwarp();
        const unsigned slot = ring + (unsigned)(s * SLOT_ELEMS * 2);
        for (int r = lane; r < nv + mv; r += 32) {
            const bool is_w = r < nv;
            const unsigned short* src = is_w ? w + (size_t)(n0 + r) * K + k0 : a + (size_t)(m0 + r - nv) * K + k0;
            const int dst_row = is_w ? r : BN + (r - nv);
            bulk_copy(slot + (unsigned)(dst_row * ROW_E * 2), src, rb, full0 + 8 * s);
        }
    }
}
#endif

// A consumer warp: its row groups (slot position `rslot`) and its share of each slot's 16-element
// steps (steps kw, kw + KW, ...), fragments by ldmatrix, then the slot released.
__device__ __forceinline__ void bulk_consume(float (&acc)[RPW][NF][4], unsigned ring, unsigned full0,
                                             unsigned empty0, int rslot, int kw, int sb, int nit, int K,
                                             int lane) {
    const int lrow = lane & 15, lhalf = lane >> 4;              // W: rows 0-15, k halves
    const int brow = lane & 7, bhalf = (lane >> 3) & 1, bfrag = lane >> 4;  // A: tokens, k halves
    for (int i = 0; i < nit; ++i) {
        const int s = i % STAGES;
        mbar_wait(full0 + 8 * s, (i / STAGES) & 1);
        const unsigned slot = ring + (unsigned)(s * SLOT_ELEMS * 2);
        const int kv = min(BULK_K, K - (sb + i) * BULK_K);
#pragma unroll
        for (int j = 0; j < (STEPS + KW - 1) / KW; ++j) {
            const int kk = (j * KW + kw) * 16;
            if (kk < kv && (STEPS % KW == 0 || j * KW + kw < STEPS)) {
                const bool half = W_BULK == 1 && kk + 8 >= kv;
                u32 b[NF][2];
#pragma unroll
                for (int f = 0; f < NF; f += 2) {
                    if (f + 1 < NF) {
                        const int t = (f + bfrag) * 8 + brow;
                        ldsm_x4(slot + A_AT(t, kk + 8 * bhalf), b[f][0], b[f][1], b[f + 1][0], b[f + 1][1]);
                    } else {
                        const int t = f * 8 + brow;
                        ldsm_x2(slot + A_AT(t, kk + 8 * bhalf), b[f][0], b[f][1]);
                    }
                }
                if (half) {
#pragma unroll
                    for (int f = 0; f < NF; ++f) b[f][1] = 0u;
                }
#pragma unroll
                for (int rr = 0; rr < RPW; ++rr) {
                    const int row = (rslot * RPW + rr) * 16 + lrow;
                    u32 a0, a1, a2, a3;
                    ldsm_x4(slot + W_AT(row, kk + 8 * lhalf), a0, a1, a2, a3);
                    if (half) a2 = a3 = 0u;
#pragma unroll
                    for (int f = 0; f < NF; ++f) mma16816(acc[rr][f], a0, a1, a2, a3, b[f][0], b[f][1]);
                }
            }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(empty0 + 8 * s);
    }
}
#endif

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
#if FUSE
    s += h2f(r[o]);
#endif
    out[o] = f2h(s);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_residual_skinny(const unsigned short* __restrict__ a, const unsigned short* __restrict__ w,
                     const unsigned short* __restrict__ r, unsigned short* __restrict__ out,
                     float* __restrict__ ws, int M, int N, int K
#if W_BULK == 2
                     , const __grid_constant__ TmaDesc tw, const __grid_constant__ TmaDesc ta
#endif
                     ) {
#if W_BULK
    // Dynamic shared memory: the KW partial tiles, then the ring of STAGES slots.
    extern __shared__ __align__(128) unsigned char dsmem[];
    float* const red = (float*)dsmem;
    __shared__ __align__(8) unsigned long long bars[2 * STAGES];  // full[STAGES], then empty[STAGES]
#elif A_SMEM
    // The A tiles (two buffers) while the main loop runs, the KW partial tiles after it.
    __shared__ __align__(16) unsigned char smem[SMEM_BYTES];
    unsigned short* const sa = (unsigned short*)smem;
    float* const red = (float*)smem;
#else
    __shared__ float red[RED_FLOATS];
#endif
    __shared__ unsigned int is_last;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, c = lane & 3;
    const int slot = warp % WG, kw = warp / WG;
    const int n0 = blockIdx.x * BN, m0 = blockIdx.z * BM;

#if !W_BULK
    const unsigned short* wp[RPW][2];
#pragma unroll
    for (int rr = 0; rr < RPW; ++rr)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = min(n0 + (slot * RPW + rr) * 16 + g + 8 * h, N - 1);
            wp[rr][h] = w + (size_t)row * K + 8 * c;
        }
#endif

#if !A_SMEM && !W_BULK
    const unsigned short* ap[NF];
#pragma unroll
    for (int f = 0; f < NF; ++f) ap[f] = a + (size_t)min(m0 + f * 8 + g, M - 1) * K + 8 * c;
#endif

#if !W_BULK
    // This CTA's chunks [cb, ce).
    const int kc = (K + 31) / 32;
    const int cb = (int)((long long)blockIdx.y * kc / SPLIT_K);
    const int ce = (int)((long long)(blockIdx.y + 1) * kc / SPLIT_K);
#endif
#if !A_SMEM && !W_BULK
    // This warp's contiguous share [wb, wb + nch) of the CTA's chunks.
    const int wb = cb + (ce - cb) * kw / KW;
    const int nch = cb + (ce - cb) * (kw + 1) / KW - wb;
#endif

    float acc[RPW][NF][4];
#pragma unroll
    for (int rr = 0; rr < RPW; ++rr)
#pragma unroll
        for (int f = 0; f < NF; ++f)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[rr][f][j] = 0.0f;

#if W_BULK
    // This CTA's slots of K [sb, sb + nit); the last warp produces, the others consume.
    const int ks = (K + BULK_K - 1) / BULK_K;
    const int sb = (int)((long long)blockIdx.y * ks / SPLIT_K);
    const int nit = (int)((long long)(blockIdx.y + 1) * ks / SPLIT_K) - sb;
    const unsigned full0 = shared_addr(bars), empty0 = full0 + 8 * STAGES;
#if W_BULK == 2
    const unsigned ring = (shared_addr(dsmem) + RED_FLOATS * 4 + 1023) & ~1023u;  // the swizzle's period
#else
    const unsigned ring = shared_addr(dsmem + ((RED_FLOATS * 4 + 127) / 128) * 128);
#endif
    if (threadIdx.x == 0) {
#if W_BULK == 2
        // the tensor maps into the copy engine's cache while the barriers are set up
        asm volatile("prefetch.tensormap [%0];" ::"l"((unsigned long long)&tw) : "memory");
        asm volatile("prefetch.tensormap [%0];" ::"l"((unsigned long long)&ta) : "memory");
#endif
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, WARPS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    // launched with PDL, the set-up above overlapped the end of the kernel before; A, W, R, out
    // and ws are touched only after it has finished. No early launch_dependents(): the next
    // kernel's CTAs would take SMs as this one's leave, unevenly (ADR-0010)
    grid_dependency_wait();
    __syncthreads();
    if (warp == WARPS)
#if W_BULK == 2
        bulk_produce(ring, full0, empty0, &tw, &ta, n0, m0, sb, nit, M, lane);
#else
        bulk_produce(ring, full0, empty0, w, a, n0, min(BN, N - n0), m0, min(BM, M - m0), sb, nit, K, lane);
#endif
    else
        bulk_consume(acc, ring, full0, empty0, slot, kw, sb, nit, K, lane);
#elif A_SMEM
    // Tiles of KT chunks; iteration i of every warp is chunk A_TILE_J(i) of tile i / A_TILE (the
    // same count for all warps, so the per-tile barrier is uniform). STAGES chunks of W in flight
    // per warp, as below; tile t + 1 is copied while tile t is multiplied.
    const int kend = min(K, 32 * ce), mva = min(BM, M - m0);
    const int ntile = (ce - cb + KT - 1) / KT;
    const int nit = ntile * A_TILE;
#define A_TILE_J(i) (((i) % A_TILE) * KW + kw)
#define A_CHUNK(i) (cb + ((i) / A_TILE) * KT + A_TILE_J(i))
    if (ntile > 0) {
        copy_a_tile(sa, a, m0, mva, cb, kend, K);
        cp_async_commit();
    }
    uint4 wv[STAGES][RPW][2];
#pragma unroll
    for (int s = 0; s < STAGES; ++s)
        if (s < nit && A_CHUNK(s) < ce) load_w(wv[s], wp, A_CHUNK(s), c, K);
    for (int base = 0; base < nit; base += STAGES) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            const int i = base + s;
            if (i < nit) {
                if ((A_TILE % STAGES != 0 || s == 0) && i % A_TILE == 0) {
                    // tile i / A_TILE landed (this thread's copies, then everyone's); every warp is
                    // done with the previous tile, whose buffer takes the next one
                    cp_async_wait_all();
                    __syncthreads();
                    const int t = i / A_TILE;
                    if (t + 1 < ntile) {
                        copy_a_tile(sa + ((t + 1) & 1) * A_TILE_ELEMS, a, m0, mva, cb + (t + 1) * KT, kend, K);
                        cp_async_commit();
                    }
                }
                if (A_CHUNK(i) < ce)
                    mma_chunk_smem(acc, wv[s], sa + ((i / A_TILE) & 1) * A_TILE_ELEMS, A_TILE_J(i), g, c);
                const int i2 = i + STAGES;
                if (i2 < nit && A_CHUNK(i2) < ce) load_w(wv[s], wp, A_CHUNK(i2), c, K);
            }
        }
    }
#undef A_CHUNK
#undef A_TILE_J
    cp_async_wait_all();
    __syncthreads();  // the tiles' buffers become red
#else
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
#endif

    // Fragments to shared memory: acc[rr][f] = out^T rows (row group) g, g + 8 x tokens 2c, 2c + 1.
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
    // Several outputs per thread at once: all their partials are loaded before any is summed (in
    // order 0..SPLIT_K-1, as always), so the loads' latency is paid once per group. N % 4 == 0:
    // groups of 4 consecutive outputs, one 16-byte load per partial (n0 and N multiples of 4).
    if ((N & 3) == 0) {
        constexpr int RU = SPLIT_K >= 16 ? 1 : 16 / SPLIT_K;
        constexpr int NQ = BN / 4;
        for (int i0 = threadIdx.x; i0 < mv * NQ; i0 += RU * THREADS) {
            float4 v[RU][SPLIT_K];
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
    } else {
        constexpr int RU = SPLIT_K >= 16 ? 2 : 32 / SPLIT_K;
        for (int i0 = threadIdx.x; i0 < mv * BN; i0 += RU * THREADS) {
            float v[RU][SPLIT_K];
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
