// Hopper GEMM + residual: the stream-K fixup, where this CTA covered only part of the tile's K: add
// its fp32 partial (acc) into the tile's workspace slot and count its k-blocks; the CTA whose
// k-blocks complete the count reads the sum back into acc and clears the slot.

#ifndef SM90_STREAMK_FIXUP_CUH
#define SM90_STREAMK_FIXUP_CUH

#include "config.cuh"
#include "epilogue.cuh"
#include "scheduler.cuh"

// Returns whether this CTA finishes the tile (runs its epilogue): always where it covered all of the
// tile's k-blocks [kb0, kb1) of num_kb. workspace / counters: the stream-K slots and their counters
// (streamk_workspace(), streamk_counters()); ct: the thread's index among the tile's threads;
// bar_id: the tile threads' named barrier; flag: a shared word to broadcast the outcome.
__device__ __forceinline__ bool streamk_fixup(float (&acc)[M_ITERS][ACC_N], float4* workspace, unsigned* counters,
                                              int tile, int dp_tiles, int kb0, int kb1, int num_kb, int ct,
                                              int bar_id, unsigned flag) {
    bool finish = true;
    if (kb0 != 0 || kb1 != num_kb) {
        // ------- stream-K fixup: add the partial in, count k-blocks, last one finishes -------
        float4* ws = workspace + (size_t)(tile - dp_tiles) * (BM * BN / 4) + ct;
        unsigned* cnt = counters + (tile - dp_tiles);
#pragma unroll
        for (int mi = 0; mi < M_ITERS; ++mi) {
#pragma unroll
            for (int q = 0; q < ACC_N / 4; ++q) {
                red_add_v4(ws + (mi * (ACC_N / 4) + q) * TILE_THREADS, acc[mi][4 * q], acc[mi][4 * q + 1],
                           acc[mi][4 * q + 2], acc[mi][4 * q + 3]);
            }
        }
        fence_gpu();
        asm volatile("bar.sync %0, %1;" ::"r"(bar_id), "n"(TILE_THREADS) : "memory");
        if (ct == 0) {
            const unsigned add = (unsigned)(kb1 - kb0);
            const unsigned done = atom_add_acq_rel(cnt, add) + add;
            st_shared_u32(flag, done == (unsigned)num_kb ? 1u : 0u);
        }
        asm volatile("bar.sync %0, %1;" ::"r"(bar_id), "n"(TILE_THREADS) : "memory");
        finish = ld_shared_u32(flag) != 0u;
        if (finish) {
            fence_gpu();
#pragma unroll
            for (int mi = 0; mi < M_ITERS; ++mi) {
#pragma unroll
                for (int q = 0; q < ACC_N / 4; ++q) {
                    float4* p = ws + (mi * (ACC_N / 4) + q) * TILE_THREADS;
                    const float4 v = ld_cg_v4(p);
                    acc[mi][4 * q] = v.x;
                    acc[mi][4 * q + 1] = v.y;
                    acc[mi][4 * q + 2] = v.z;
                    acc[mi][4 * q + 3] = v.w;
                    st_cg_zero_v4(p);
                }
            }
            if (ct == 0) st_relaxed_u32(cnt, 0u);
        }
    }
    return finish;
}

#endif  // SM90_STREAMK_FIXUP_CUH
