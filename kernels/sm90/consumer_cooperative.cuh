// Hopper GEMM + residual: the consumer warpgroups, cooperative schedule (PINGPONG 0): the
// NUM_CONSUMERS warpgroups share every tile, each owning BM/NUM_CONSUMERS of its rows (SPLIT_N:
// BN/NUM_CONSUMERS of its columns), and run its epilogue together through one buffer. The storer
// hands the buffer back (the residual-empty barrier) at the next tile's first k-block, by when its
// TMA store has long read it. EPI_RING: the buffer is EPI_RING_SLOTS adjacent ring slots instead.
//
// PROMOTE = p > 0 (DT 3): the tensor cores sum p k-blocks at a time from zero (their own
// accumulation is coarser than fp32 round-to-nearest and its error grows with the steps); each
// group is drained and added into a second register accumulator by FADD (tiles of at most
// 64 x 160 per warpgroup, where the second set fits). The drain costs a bubble per group.
//
// consumer_warpgroups is the schedule's entry, with the same arguments as ping-pong's
// (consumer_pingpong.cuh): the codegen renders the plan's schedule's header into the kernel
// (gemm_residual_sm90.cu, `#include CONSUMER_BODY`).

#ifndef SM90_CONSUMER_COOPERATIVE_CUH
#define SM90_CONSUMER_COOPERATIVE_CUH

#include "config.cuh"
#include "epilogue.cuh"
#include "epilogue_store.cuh"
#include "epilogue_write.cuh"
#include "mainloop.cuh"
#include "params.cuh"
#include "scheduler.cuh"
#include "streamk_fixup.cuh"

// Consumer warpgroup cw (lane `lane` of warp `warp` in it) over this CTA's work items (sched).
__device__ __forceinline__ void consumer_warpgroups(const Sm90Shared& sh, const Sm90Maps& tm, const Sm90Problem& pb,
                                                    Sched sched, int wg, int warp, int lane) {
    const int cw = wg - 1;  // this consumer warpgroup (warpgroup 0 is the producer)
    const int row0 = SPLIT_N ? 0 : cw * WG_M;  // this warpgroup's first row in the tile
    const int col0 = SPLIT_N ? cw * WG_N : 0;  // and column (SPLIT_N)
    const int ct = threadIdx.x - 128;
    const bool storer = threadIdx.x == 128;
    const int bar_id = 1;  // named barrier of the tile's threads
    bool store_pending = false;
    int ring_pending = 0;  // EPI_RING_REUSE: the storer's first ring slot of the tile whose store is pending
    int stage = 0;
    unsigned phase = 0, rphase = 0;
    float acc[M_ITERS][ACC_N];
    const unsigned desc_a = desc_lo(sh.base + row0 * 128);  // slot 0, this warpgroup's rows
    int tile, kb0, kb1;
    while (sched_next(sched, pb.dp_tiles, pb.num_kb, tile, kb0, kb1)) {
        int m0, n0;
        unit_origin(sched, tile, pb.num_m, pb.num_n, pb.rank, pb.M, pb.N, m0, n0);
        float sum[M_ITERS][ACC_N];  // PROMOTE: the groups' sum
        const RingPos r = consumer_tile<M_ITERS>(acc, sum, RingPos{stage, phase, 0, store_pending}, ring_pending, kb0,
                                                 kb1, sh.full_bar, sh.empty_bar, desc_a, row0, col0, sh.rempty_bar,
                                                 lane, storer);
        stage = r.stage, phase = r.phase, store_pending = r.store_pending;
        float (&out)[M_ITERS][ACC_N] = PROMOTE != 0 ? sum : acc;

        bool finish = true;  // STREAMK: whether this CTA finishes the tile
        if constexpr (STREAMK)
            finish = streamk_fixup(out, streamk_workspace(), streamk_counters(), tile, pb.dp_tiles, kb0, kb1,
                                   pb.num_kb, ct, bar_id, sh.flag_addr);
        // ------- epilogue: R (staged by TMA) + acc in fp32, round once, TMA store -------
        unsigned ebuf = sh.epi;
        int ring_first = 0;
        if constexpr (EPI_RING) {
            ring_first = epi_ring_first(stage);
            ebuf = sh.base + ring_first * STAGE_BYTES;
            if constexpr (EPI_RING_REUSE) {
                if (ring_first != stage) {
                    for (int s2 = stage; s2 < STAGES; ++s2) release_slot(sh.empty_bar + 8 * s2, lane);
                    stage = 0;
                    phase ^= 1u;
                }
                stage += EPI_RING_SLOTS;
                if (stage == STAGES) {
                    stage = 0;
                    phase ^= 1u;
                }
            }
        }
        mbar_wait(sh.rfull_bar, rphase);
        rphase ^= 1u;
        if constexpr (STREAMK) {
            if (!finish) {
                // nothing to store: the buffer is free once R has landed (waited above)
                if (storer) store_pending = true;
                continue;
            }
        }
        epilogue_write(out, ebuf, row0, SPLIT_N ? cw : 0, warp, lane, bar_id);
        if constexpr (EPI_RING_REUSE) {
            if (storer) mbar_arrive(sh.rempty_bar);  // every tile thread is past its wait on the R barrier
        }
        if (storer) {
            epilogue_store(tm.out, tm.out2, m0, n0, pb.M, pb.N, ebuf);
            if constexpr (EPI_RING_REUSE && !EPI_RING_DEFER) {
                // no room beside the epilogue tile's slots for the next tile: free them now
                asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
                release_epi_slots(sh.empty_bar, ring_first);
            } else {
                store_pending = true;
                ring_pending = ring_first;
            }
        }
    }
    if (storer) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

#endif  // SM90_CONSUMER_COOPERATIVE_CUH
