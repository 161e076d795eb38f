// Decode GEMM + residual, W (and A) through a shared-memory ring (W_BULK 1 row copies, 2 tensor-map
// boxes): a producer warp fills STAGES slots of BULK_K elements of the CTA's BN rows and BM tokens,
// completing on each slot's full mbarrier; the consumer warps read their fragments with ldmatrix and
// release the slot on its empty mbarrier. The kernel's header (gemm_residual_skinny.cu) describes
// the layouts.

#ifndef SKINNY_BULK_CUH
#define SKINNY_BULK_CUH

#include "config.cuh"
#include "mma.cuh"
#include "../mbarrier.cuh"

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

// Byte offset in a ring slot of the 16-byte chunk holding elements k .. k + 7 of W row `row` (w_at)
// or of token t (a_at): W_BULK 2, in the swizzled boxes; W_BULK 1, in rows of ROW_E elements.
__device__ __forceinline__ unsigned w_at(int row, int k) {
    if constexpr (W_BULK == 2) {
        return swz(row, BN, k);
    } else {
        return (unsigned)((row * ROW_E + k) * 2);
    }
}
__device__ __forceinline__ unsigned a_at(int t, int k) {
    if constexpr (W_BULK == 2) {
        return BN * BULK_K * 2 + swz(t, BM, k);
    } else {
        return (unsigned)(((BN + t) * ROW_E + k) * 2);
    }
}

// W_BULK 2, the producer (lane 0 of the last warp): for each of the CTA's slots of K, once the consumers
// released the ring slot, arm its full barrier with the slot's bytes (whole boxes, zeros past the
// matrix included) and copy BULK_K / 64 boxes of W and of A. A's boxes are min(BM, M) tokens (the
// tensor map's box): with fewer tokens than BM no box row lies past M, whose zero fill costs the
// copy engine time; the rows of the slot beyond them keep stale values that feed only outputs that
// are never stored.
__device__ __forceinline__ void bulk_produce_boxes(unsigned ring, unsigned full0, unsigned empty0, const TmaDesc* tw,
                                                   const TmaDesc* ta, int n0, int m0, int sb, int nit, int M,
                                                   int lane) {
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
            tma_box(slot + w_at(0, 64 * j), tw, k0 + 64 * j, n0, full0 + 8 * s);
            tma_box(slot + a_at(0, 64 * j), ta, k0 + 64 * j, m0, full0 + 8 * s);
        }
    }
}
// W_BULK 1, the producer warp: for each of the CTA's slots of K, once every consumer warp released the ring
// slot it reuses, lane 0 arms the slot's full barrier with the bytes to come and the lanes copy the
// valid rows (W's nv rows, then A's mv tokens) in whole runs of the slot's K range.
__device__ __forceinline__ void bulk_produce_rows(unsigned ring, unsigned full0, unsigned empty0,
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
                        ldsm_x4(slot + a_at(t, kk + 8 * bhalf), b[f][0], b[f][1], b[f + 1][0], b[f + 1][1]);
                    } else {
                        const int t = f * 8 + brow;
                        ldsm_x2(slot + a_at(t, kk + 8 * bhalf), b[f][0], b[f][1]);
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
                    ldsm_x4(slot + w_at(row, kk + 8 * lhalf), a0, a1, a2, a3);
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

#endif  // SKINNY_BULK_CUH
