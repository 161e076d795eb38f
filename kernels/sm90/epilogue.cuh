// Hopper GEMM + residual: the epilogue's shared-memory side: TMA stores and shared-memory access,
// the layout of the epilogue buffer (R in, the result back out), the epilogue tile staged in the
// ring (EPI_RING), and the producer's staging of R (stage_residual).

#ifndef SM90_EPILOGUE_CUH
#define SM90_EPILOGUE_CUH

#include "config.cuh"
#include "ptx.cuh"

__device__ __forceinline__ void tma_store_2d(unsigned long long tmap, int c0, int c1, unsigned src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(tmap),
                 "r"(c0), "r"(c1), "r"(src)
                 : "memory");
}

__device__ __forceinline__ unsigned ld_shared_u32(unsigned addr) {
    unsigned v;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
    return v;
}

__device__ __forceinline__ void st_shared_u32(unsigned addr, unsigned v) {
    asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}

// (SWAP_AB) Four (two) 8x8 16-bit matrices of R's natural tile, transposed on the way: lanes 8i..8i+7 give
// the addresses of matrix i's eight rows (16 bytes each); each lane's register i is then the pair
// (column lane / 4, rows 2 (lane % 4) and + 1) of matrix i: an accumulator fragment's position.
__device__ __forceinline__ void ldsm_x4_trans(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2,
                                              unsigned& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr)
                 : "memory");
}
__device__ __forceinline__ void ldsm_x2_trans(unsigned addr, unsigned& r0, unsigned& r1) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                 : "=r"(r0), "=r"(r1)
                 : "r"(addr)
                 : "memory");
}
// ... and back: the inverse of ldsm_x4_trans / ldsm_x2_trans at the same addresses.
__device__ __forceinline__ void stsm_x4_trans(unsigned addr, unsigned r0, unsigned r1, unsigned r2,
                                              unsigned r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr),
                 "r"(r0), "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}
__device__ __forceinline__ void stsm_x2_trans(unsigned addr, unsigned r0, unsigned r1) {
    asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};" ::"r"(addr), "r"(r0),
                 "r"(r1)
                 : "memory");
}

__device__ __forceinline__ float2 ld_shared_f2(unsigned addr) {
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr) : "memory");
    return v;
}

__device__ __forceinline__ void st_shared_f2(unsigned addr, float a, float b) {
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(a), "f"(b) : "memory");
}

// The epilogue tile (R in, out back) lives in shared memory as BN/64 column chunks of
// BM rows x 128 bytes, 128B-swizzled like the TMA boxes that fill and drain it: a fragment
// pair (row, col) sits at chunk col/64, row*128 + (((col%64)/8) ^ (row%8))*16 + (col%8)*2,
// so the 8 rows x 4 pairs of one warp access hit 32 distinct banks.
// tf32 (fp32 R and out): the same 128-byte swizzled chunks of 32 columns; a thread's pair (8 bytes)
// at chunk col/32, row*128 + ((((col%32)/4) ^ (row%8)) << 4) + (col%4)*4.
#define EPI_COLS (128 / ELEM)
// SWAP_AB: R's natural box, BM / 64 chunks (64 of the problem's N columns each) of BN rows (its M)
// x 128 bytes
#define EPI_CHUNKS (SWAP_AB ? BM / EPI_COLS : BN / EPI_COLS)
#define EPI_CHUNK_BYTES (SWAP_AB ? BN * 128 : BM * 128)
#define EPI_BYTES (BM * BN * ELEM)
// A tail chunk with 16-bit data (its own tensor maps: tm_r2 / tm_out2) of TB = EPI_TAIL_BYTES per
// row, swizzled at its own width (CUTLASS Swizzle<log2(TB/16), 4, 3>: the 16-byte unit XOR address
// bits 7..): BN = 160: 32 columns, 64B swizzle, pair (row, 128 + c) at
// tail + row*64 + (((c/8) ^ ((row/2)%4)) << 4) + (c%8)*2; BN = 80: 16 columns, 32B swizzle,
// pair (row, 64 + c) at tail + row*32 + (((c/8) ^ ((row/4)%2)) << 4) + (c%8)*2.
#define EPI_TAIL_COLS (SWAP_AB ? 0 : BN % EPI_COLS)
#define EPI_TAIL_BYTES (EPI_TAIL_COLS * ELEM)
#if EPI_TAIL_COLS != 0 && EPI_TAIL_COLS * 2 != EPI_COLS && EPI_TAIL_COLS * 4 != EPI_COLS
#error "the epilogue's tail chunk must be half or a quarter of a chunk"
#endif
#define EPI_TAIL (EPI_CHUNKS * EPI_CHUNK_BYTES)   // offset of the tail chunk in the buffer
#define EPI_TAIL_ROW_SHIFT (EPI_TAIL_BYTES == 32 ? 2 : 1)      // log2(rows per 128-byte line)
#define EPI_TAIL_SW_MASK (EPI_TAIL_BYTES ? EPI_TAIL_BYTES / 16 - 1 : 0)  // 16-byte units per row - 1

// EPI_RING (cooperative, data-parallel, 16-bit data; the default where one data-parallel tile per
// CTA has a stage count that needs it, build() and ring_stage_options in the Python module): no
// epilogue buffer of its own, so the ring gets its shared memory (a deeper pipeline). After its last
// k-block the producer acquires the next ring slots in order, as if for more k-blocks, until
// EPI_RING_SLOTS adjacent slots are free (the ones the consumers released first), and stages R
// there; the consumers find the same slots from their own ring position after the main loop.
#ifndef EPI_RING
#define EPI_RING 0
#endif
#define EPI_RING_SLOTS ((EPI_BYTES + STAGE_BYTES - 1) / STAGE_BYTES)
#if EPI_RING && (PINGPONG || STREAMK || EPI_RING_SLOTS > STAGES)
#error "EPI_RING: cooperative, data-parallel, and a ring of at least the epilogue's size"
#endif
// EPI_RING_REUSE (a CTA may get more than one tile): the ring goes on after the epilogue, so its
// slots come back: slots skipped to find adjacent ones are released by every consumer warp at once;
// the slots holding the tile by the storer thread once the TMA store has read them (for every
// consumer warp: an arrival count), deferred to the next tile's first k-block where the ring has
// room for the next tile's first k-blocks beside them (EPI_RING_DEFER), else at once. Two barrier
// rules keep the parities true (both found on the H200): the producer arrives on
// the full barrier of every slot it takes for R or skips (no k-block completes its phase that
// round, and the consumers step over it), and it stages the next tile's R only once every tile
// thread is past its wait for the previous one (the residual-empty barrier, arrived on after the
// epilogue's named barrier)
#ifndef EPI_RING_REUSE
#define EPI_RING_REUSE 0
#endif
#if EPI_RING_REUSE && !EPI_RING
#error "EPI_RING_REUSE: with EPI_RING"
#endif
#define EPI_RING_DEFER (STAGES >= 2 * EPI_RING_SLOTS)
// the first of the slots holding the epilogue tile, from the ring position after the main loop
__device__ __forceinline__ int epi_ring_first(int stage) {
    return stage + EPI_RING_SLOTS <= STAGES ? stage : 0;
}
// (EPI_RING_REUSE) The storer frees the EPI_RING_SLOTS slots from `first` on, once the TMA store
// has read them.
__device__ __forceinline__ void release_epi_slots(unsigned empty_bar, int first) {
#pragma unroll
    for (int i = 0; i < EPI_RING_SLOTS; ++i) release_slot_all(empty_bar + 8 * (first + i));
}

// The producer's staging of R's BM x BN tile at the tile's (m0, n0) into the epilogue buffer at
// `buf` (its 128-byte chunks through r_map, then the tail chunk through r2_map), completing on
// `bar`; fusion off: the barrier just flips. SWAP_AB: the box at the problem's (row n0, column
// m0), the kernel's n0 being its M offset and m0 its N offset.
__device__ __forceinline__ void stage_residual(unsigned buf, unsigned bar, unsigned long long r_map,
                                               unsigned long long r2_map, int m0, int n0) {
    if constexpr (FUSE) {
        mbar_expect_tx(bar, EPI_BYTES);
#pragma unroll
        for (int c = 0; c < EPI_CHUNKS; ++c) {
            if constexpr (SWAP_AB) {
                tma_load_2d(buf + c * EPI_CHUNK_BYTES, r_map, m0 + c * EPI_COLS, n0, bar);
            } else {
                tma_load_2d(buf + c * EPI_CHUNK_BYTES, r_map, n0 + c * EPI_COLS, m0, bar);
            }
        }
        if constexpr (EPI_TAIL_COLS != 0) tma_load_2d(buf + EPI_TAIL, r2_map, n0 + EPI_CHUNKS * EPI_COLS, m0, bar);
    } else {
        mbar_arrive(bar);
    }
}

// Shared address of a thread's 16-bit pair j (columns 8j + 2(lane%4)) in its row of the epilogue
// buffer: 128B-swizzled 64-column chunks, then the tail chunk swizzled at its width.
__device__ __forceinline__ unsigned epi_addr(unsigned row_addr, unsigned tail_addr, int j, int sw,
                                             int sw_tail) {
    if (EPI_TAIL_COLS && j >= EPI_CHUNKS * 8) return tail_addr + (((j - EPI_CHUNKS * 8) ^ sw_tail) << 4);
    return row_addr + (j / 8) * EPI_CHUNK_BYTES + (((j % 8) ^ sw) << 4);
}

#endif  // SM90_EPILOGUE_CUH
