// Hopper GEMM + residual: a consumer warpgroup's main loop. consumer_kblocks runs the k-blocks [g0,
// g1) of a tile: wait for the slot's full barrier, issue NMI m64 slices of wgmma per k-step (M_ITERS;
// a ping-pong HALF_TAIL half tile, one), release the previous slot, and at the tile's first k-block
// hand back the epilogue buffer of the storer's pending TMA store (cooperative: `store_pending`).
// consumer_drain follows a group's last k-block: wait for its wgmmas, release its slot and fence the
// accumulators (PROMOTE: add the group into `sum`). consumer_tile is a whole tile (its groups, each
// drained); consumer_mainloop is consumer_kblocks on a ring position passed and returned by value.
// The consumer (consumer_*.cuh) holds the ring position (RingPos) across tiles.

#ifndef SM90_MAINLOOP_CUH
#define SM90_MAINLOOP_CUH

#include "config.cuh"
#include "epilogue.cuh"
#include "ptx.cuh"
#include "wgmma.cuh"

// A consumer's place in the ring: the slot it waits on next (stage) and that slot's phase parity, the
// slot of its last k-block (prev_stage, released once its wgmmas retire), and whether the storer still
// owes the producer the epilogue buffer (store_pending, handed back at the tile's first k-block).
struct RingPos {
    int stage;
    unsigned phase;
    int prev_stage;
    bool store_pending;
};

// The k-blocks [g0, g1) of a tile whose first is kb0 (ring_pending: EPI_RING_REUSE's slots to free
// at it); the ring's barriers (slot 0), the A descriptor of slot 0 at this warpgroup's first row row0
// (SPLIT_N: its W rows start at col0), the residual-empty barrier reb and which thread stores.
template <int NMI>
__device__ __forceinline__ void consumer_kblocks(float (&acc)[M_ITERS][ACC_N], int& stage, unsigned& phase,
                                                 int& prev_stage, bool& store_pending, int ring_pending, int kb0,
                                                 int g0, int g1, unsigned full_bar, unsigned empty_bar,
                                                 unsigned desc_a, int row0, int col0, unsigned reb, int lane,
                                                 bool storer) {
    for (int kb = g0; kb < g1; ++kb) {
        mbar_wait(full_bar + 8 * stage, phase);
        // the slot's descriptors (low words); slab and k-step offsets add to them. The value is
        // warp-uniform by construction; the shuffle proves it to ptxas, which then keeps the
        // descriptor arithmetic in uniform registers (ping-pong's ring position otherwise lives in a
        // vector register: 84 SASS instructions per k-block instead of 56)
        const unsigned da = __shfl_sync(0xffffffffu, desc_a + stage * (STAGE_BYTES >> 4), 0);
        unsigned db;
        if constexpr (SPLIT_N) {
            db = da + ((A_TILE_BYTES + col0 * 128) >> 4);  // W rows col0..
        } else {
            db = da + ((A_TILE_BYTES - row0 * 128) >> 4);
        }
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < KSTEPS; ++k) {
#pragma unroll
            for (int mi = 0; mi < NMI; ++mi) {
                WGMMA(acc[mi], desc64(da + ((mi * 64 * 128 + k * 32) >> 4)), desc64(db + ((k * 32) >> 4)),
                      (kb != g0) | (k != 0));
            }
        }
        wgmma_commit();
        if constexpr (STAGES == 1) {
            wgmma_wait<0>();
            release_slot(empty_bar + 8 * stage, lane);
        } else {
            wgmma_wait<1>();
            if (kb > g0) release_slot(empty_bar + 8 * prev_stage, lane);
        }
        if (kb == kb0 && storer && store_pending) {
            // the previous tile's TMA store has long finished reading shared memory
            asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
            if constexpr (EPI_RING_REUSE) {
                release_epi_slots(empty_bar, ring_pending);  // the previous tile's slots in the ring (EPI_RING_DEFER)
            } else {
                mbar_arrive(reb);
            }
            store_pending = false;
        }
        prev_stage = stage;
        if (++stage == STAGES) {
            stage = 0;
            phase ^= 1u;
        }
    }
}

// After a group's last k-block (prev_stage its slot): its wgmmas retired, its slot released, the
// accumulators fenced; PROMOTE, each added into `sum` (without PROMOTE `sum` is not touched).
__device__ __forceinline__ void consumer_drain(float (&acc)[M_ITERS][ACC_N], float (&sum)[M_ITERS][ACC_N],
                                               unsigned empty_bar, int prev_stage, int lane) {
    if constexpr (STAGES > 1) {
        wgmma_wait<0>();
        release_slot(empty_bar + 8 * prev_stage, lane);
    }
#pragma unroll
    for (int mi = 0; mi < M_ITERS; ++mi) {
#pragma unroll
        for (int i = 0; i < ACC_N; ++i) {
            fence_reg(acc[mi][i]);
            if constexpr (PROMOTE != 0) sum[mi][i] += acc[mi][i];
        }
    }
}

// consumer_kblocks on a ring position passed and returned by value: the consumer's own variables stay
// unaliased, as the kernel's compiled code expects (ADR-0012).
template <int NMI>
__device__ __forceinline__ RingPos consumer_mainloop(float (&acc)[M_ITERS][ACC_N], RingPos pos, int ring_pending,
                                                     int kb0, int g0, int g1, unsigned full_bar, unsigned empty_bar,
                                                     unsigned desc_a, int row0, int col0, unsigned reb, int lane,
                                                     bool storer) {
    int stage = pos.stage, prev_stage = pos.prev_stage;
    unsigned phase = pos.phase;
    bool store_pending = pos.store_pending;
    consumer_kblocks<NMI>(acc, stage, phase, prev_stage, store_pending, ring_pending, kb0, g0, g1, full_bar, empty_bar,
                          desc_a, row0, col0, reb, lane, storer);
    return RingPos{stage, phase, prev_stage, store_pending};
}

// A tile's k-blocks [kb0, kb1) into acc: one group (the tensor cores sum the whole k-range) or, with
// PROMOTE, groups of PROMOTE k-blocks, each summed from zero in acc and added into sum by FADD.
template <int NMI>
__device__ __forceinline__ RingPos consumer_tile(float (&acc)[M_ITERS][ACC_N], float (&sum)[M_ITERS][ACC_N],
                                                 RingPos pos, int ring_pending, int kb0, int kb1, unsigned full_bar,
                                                 unsigned empty_bar, unsigned desc_a, int row0, int col0, unsigned reb,
                                                 int lane, bool storer) {
    if constexpr (PROMOTE != 0) {
#pragma unroll
        for (int mi = 0; mi < M_ITERS; ++mi) {
#pragma unroll
            for (int i = 0; i < ACC_N; ++i) sum[mi][i] = 0.0f;
        }
        for (int g0 = kb0; g0 < kb1; g0 += PROMOTE) {
            const int g1 = g0 + PROMOTE < kb1 ? g0 + PROMOTE : kb1;
            consumer_kblocks<NMI>(acc, pos.stage, pos.phase, pos.prev_stage, pos.store_pending, ring_pending, kb0, g0,
                                  g1, full_bar, empty_bar, desc_a, row0, col0, reb, lane, storer);
            consumer_drain(acc, sum, empty_bar, pos.prev_stage, lane);
        }
    } else {
        consumer_kblocks<NMI>(acc, pos.stage, pos.phase, pos.prev_stage, pos.store_pending, ring_pending, kb0, kb0, kb1,
                              full_bar, empty_bar, desc_a, row0, col0, reb, lane, storer);
        consumer_drain(acc, acc, empty_bar, pos.prev_stage, lane);
    }
    return pos;
}

#endif  // SM90_MAINLOOP_CUH
