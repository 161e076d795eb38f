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
// Rendered into the kernel (gemm_residual_sm90.cu) where a ping-pong plan's consumers start, with
// the fragments it includes inlined (sm90/codegen.py).

        const int row0 = 0;                    // this warpgroup's first row in the tile
        const int ct = threadIdx.x % 128;      // this thread's index among the tile's threads
        const unsigned ebuf = epi + (EPI_SHARED ? 0 : cw * EPI_BYTES);
        const unsigned rfb = rfull_bar + 8 * cw;
        const unsigned reb = rempty_bar + 8 * cw;
        const unsigned flag = flag_addr + 4 * cw;
        const bool storer = threadIdx.x % 128 == 0;
        int item = 0;
        unsigned turn_phase = 0;
        (void)ct;
        (void)flag;
        const int bar_id = 1 + cw;  // named barrier of the tile's threads
        const unsigned long long out_map = TMAP_ADDR(tm_out);
        bool store_pending = false;  // stays false: the storer hands its buffer back after each store
        int stage = 0;
        unsigned phase = 0, rphase = 0;
        float acc[M_ITERS][ACC_N];
        const unsigned desc_a = desc_lo(base + row0 * 128);  // slot 0, this warpgroup's rows

        while (sched_next(sched, dp_tiles, num_kb, tile, kb0, kb1)) {
            if ((item++ & 1) != cw) {
                // the other warpgroup's item: step over its k-blocks in the ring
                const int adv = stage + (kb1 - kb0);
                stage = adv % STAGES;
                phase ^= (unsigned)(adv / STAGES) & 1u;
                continue;
            }
            if (item > 1) {
                // the other consumer has waited on all full barriers of the previous item
                mbar_wait(turn_bar + 8 * cw, turn_phase);
                turn_phase ^= 1u;
            }
            int m0, n0;
            TILE_ORIGIN(tile, m0, n0);
            int prev_stage = 0;
#if HALF_TAIL
            const bool is_half = sched.half != 0;  // 64 rows: the first m64 slice of each k-step only
#endif
            {  // one group: the whole k-range in the tensor cores
                const int g0 = kb0, g1 = kb1;
#if HALF_TAIL
                // the k-block loop once per slice count, the branch outside it: a branch between
                // the wgmmas of one k-block made ptxas merge their async groups with a dummy wgmma
                // and wait on it, serialising the k-blocks (measured 15 % slower)
                auto kloop = [&](auto nmi) {
                    constexpr int NMI = decltype(nmi)::value;
#define KLOOP_NMI NMI
#else
#define KLOOP_NMI M_ITERS
#endif
#include "mainloop.cuh"
#undef KLOOP_NMI
#if HALF_TAIL
                };
                if (is_half) {
                    kloop(IntC<1>{});
                } else {
                    kloop(IntC<M_ITERS>{});
                }
#endif
                if (storer) mbar_arrive(turn_bar + 8 * (cw ^ 1));  // the other consumer's turn
#include "mainloop_drain.cuh"
            }
#define ACC_OUT acc

#include "streamk_fixup.cuh"

            // ------- epilogue: R (staged by TMA) + acc in fp32, round once, TMA store -------
            mbar_wait(rfb, rphase);
            rphase ^= 1u;
#if STREAMK
            if (!finish) {
                // nothing to store: the buffer is free once R has landed (waited above)
                if (storer) mbar_arrive(reb);
                continue;
            }
#endif
#include "epilogue_write.cuh"
            if (storer) {
#if HALF_TAIL
                // a half tile stores its 64 rows: the first 64 of each chunk of the buffer
                const unsigned long long st_map = is_half ? TMAP_ADDR(tm_outh) : out_map;
                const unsigned long long st_map2 = is_half ? TMAP_ADDR(tm_out2h) : TMAP_ADDR(tm_out2);
                (void)st_map2;
#define STORE_MAP st_map
#define STORE_MAP2 st_map2
#else
// (the names, not variables: the builds without halves compile the same tokens as before them)
#define STORE_MAP out_map
#define STORE_MAP2 TMAP_ADDR(tm_out2)
#endif
#include "epilogue_store.cuh"
#undef STORE_MAP
#undef STORE_MAP2
                // the other warpgroup has the tensor cores now: wait here for the store to have
                // read the buffer and hand it back at once (the next R can land early)
                asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
                mbar_arrive(reb);
            }
        }
        if (storer) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
