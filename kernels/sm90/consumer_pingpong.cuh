// Hopper GEMM + residual: the consumer warpgroups' body, ping-pong schedule (PINGPONG 1): the two
// consumer warpgroups own whole tiles, alternately (work item i of the CTA's sequence goes to
// consumer i % 2), each with its own epilogue buffer and residual barriers. The producer fills one
// in-order ring, so consumer 1's first k-block of item i+1 lands only after the last k-block of item
// i: while one warpgroup runs its epilogue the other has the tensor cores. A consumer steps over the
// other's k-blocks in the ring without waiting on them, so its parity waits could alias a full
// barrier several phases behind: before the main loop of item i it waits on its turn barrier, which
// the other consumer arrives on once it has waited on every full barrier of item i-1 (the ordered
// "tensor-core turn"). The storer hands its buffer back as soon as the TMA store has read it.
//
// HALF_TAIL (unclustered data-parallel ping-pong, 128-row tiles, 16-bit data): the tiles past the
// first dp_tiles (the last round's, where it is at most half full) run as two 64-row halves each,
// on two CTAs, so that round takes about half as long. A half loads its 64 A rows by their own
// tensor map (tm_ah), issues only the first m64 wgmma of each k-step (the same sums in the same
// order as the whole tile: the same bits), and stores its 64 rows by 64-row maps (tm_outh,
// tm_out2h); its R box stays whole, and the epilogue runs over all 128 rows of the buffer as for a
// whole tile (the second slice's stale accumulators land in rows no store reads: skipping them
// made ptxas spill 272 bytes in 128x160).
//
// consumer_warpgroups is the schedule's entry, with the same arguments as the cooperative one
// (consumer_cooperative.cuh): the codegen renders the plan's schedule's header into the kernel
// (gemm_residual_sm90.cu, `#include CONSUMER_BODY`).

#ifndef SM90_CONSUMER_PINGPONG_CUH
#define SM90_CONSUMER_PINGPONG_CUH

#include "config.cuh"
#include "epilogue.cuh"
#include "epilogue_store.cuh"
#include "epilogue_write.cuh"
#include "mainloop.cuh"
#include "params.cuh"
#include "scheduler.cuh"
#include "streamk_fixup.cuh"

// A compile-time slice count: HALF_TAIL's k-block loop takes one m64 slice (a half tile) or all.
template <int N>
struct IntC {
    static constexpr int value = N;
};

// Consumer warpgroup cw (lane `lane` of warp `warp` in it) over its items of this CTA's work (sched).
__device__ __forceinline__ void consumer_warpgroups(const Sm90Shared& sh, const Sm90Maps& tm, const Sm90Problem& pb,
                                                    Sched sched, int wg, int warp, int lane) {
    const int cw = wg - 1;  // this consumer warpgroup (warpgroup 0 is the producer)
    const int row0 = 0;                    // this warpgroup's first row in the tile
    const int ct = threadIdx.x % 128;      // this thread's index among the tile's threads
    const unsigned ebuf = sh.epi + (EPI_SHARED ? 0 : cw * EPI_BYTES);
    const unsigned rfb = sh.rfull_bar + 8 * cw, reb = sh.rempty_bar + 8 * cw;  // its residual barriers
    const unsigned flag = sh.flag_addr + 4 * cw;
    const bool storer = threadIdx.x % 128 == 0;
    int item = 0;
    unsigned turn_phase = 0;
    const int bar_id = 1 + cw;  // named barrier of the tile's threads
    bool store_pending = false;  // stays false: the storer hands its buffer back after each store
    int stage = 0;
    unsigned phase = 0, rphase = 0;
    float acc[M_ITERS][ACC_N];
    const unsigned desc_a = desc_lo(sh.base + row0 * 128);  // slot 0, this warpgroup's rows
    int tile, kb0, kb1;
    while (sched_next(sched, pb.dp_tiles, pb.num_kb, tile, kb0, kb1)) {
        if ((item++ & 1) != cw) {
            // the other warpgroup's item: step over its k-blocks in the ring
            const int adv = stage + (kb1 - kb0);
            stage = adv % STAGES;
            phase ^= (unsigned)(adv / STAGES) & 1u;
            continue;
        }
        if (item > 1) {
            // the other consumer has waited on all full barriers of the previous item
            mbar_wait(sh.turn_bar + 8 * cw, turn_phase);
            turn_phase ^= 1u;
        }
        int m0, n0;
        unit_origin(sched, tile, pb.num_m, pb.num_n, pb.rank, pb.M, pb.N, m0, n0);
        int prev_stage = 0;
        const bool is_half = HALF_TAIL && sched.half != 0;  // 64 rows: the first m64 slice of each k-step only
#if HALF_TAIL
        // the k-block loop once per slice count, the branch outside it (a branch between the wgmmas of one k-block
        // made ptxas serialise them through a dummy wgmma: 15 % slower); a generic lambda (HALF_TAIL_OPTIONS)
        auto kloop = [&](auto nmi) {
            consumer_kblocks<decltype(nmi)::value>(acc, stage, phase, prev_stage, store_pending, 0, kb0, kb0, kb1,
                                                   sh.full_bar, sh.empty_bar, desc_a, row0, 0, reb, lane, storer);
        };
        if (is_half) kloop(IntC<1>{});
        else kloop(IntC<M_ITERS>{});
#else
        // one group: the whole k-range in the tensor cores
        const RingPos r = consumer_mainloop<M_ITERS>(acc, RingPos{stage, phase, prev_stage, store_pending}, 0, kb0,
                                                     kb0, kb1, sh.full_bar, sh.empty_bar, desc_a, row0, 0, reb, lane,
                                                     storer);
        stage = r.stage, phase = r.phase, prev_stage = r.prev_stage, store_pending = r.store_pending;
#endif
        if (storer) mbar_arrive(sh.turn_bar + 8 * (cw ^ 1));  // the other consumer's turn
        consumer_drain(acc, acc, sh.empty_bar, prev_stage, lane);
        bool finish = true;  // STREAMK: whether this CTA finishes the tile
        if constexpr (STREAMK)
            finish = streamk_fixup(acc, streamk_workspace(), streamk_counters(), tile, pb.dp_tiles, kb0, kb1,
                                   pb.num_kb, ct, bar_id, flag);
        // ------- epilogue: R (staged by TMA) + acc in fp32, round once, TMA store -------
        mbar_wait(rfb, rphase);
        rphase ^= 1u;
        if constexpr (STREAMK) {
            if (!finish) {
                // nothing to store: the buffer is free once R has landed (waited above)
                if (storer) mbar_arrive(reb);
                continue;
            }
        }
        epilogue_write(acc, ebuf, row0, SPLIT_N ? cw : 0, warp, lane, bar_id);
        if (storer) {
            const unsigned long long st_map = is_half ? tm.outh : tm.out;  // a half tile: its 64 rows
            const unsigned long long st_map2 = is_half ? tm.out2h : tm.out2;
            epilogue_store(st_map, st_map2, m0, n0, pb.M, pb.N, ebuf);
            // the other warpgroup has the tensor cores now: wait here for the store to have read the
            // buffer and hand it back at once (the next R can land early)
            asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
            mbar_arrive(reb);
        }
    }
    if (storer) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

#endif  // SM90_CONSUMER_PINGPONG_CUH
