// Hopper GEMM + residual: the consumer warpgroups' body, cooperative schedule (PINGPONG 0): the
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
// Rendered into the kernel (gemm_residual_sm90.cu) where a cooperative plan's consumers start, with
// the fragments it includes inlined (sm90/codegen.py).

#if SPLIT_N
        const int row0 = 0;
        const int col0 = cw * WG_N;  // this warpgroup's first column in the tile
#else
        const int row0 = cw * WG_M;
#endif
        const int ct = threadIdx.x - 128;
#if !EPI_RING
        const unsigned ebuf = epi;
#endif
        const unsigned rfb = rfull_bar;
        const unsigned reb = rempty_bar;
        const unsigned flag = flag_addr;
        const bool storer = threadIdx.x == 128;
        (void)ct;
        (void)flag;
        const int bar_id = 1;  // named barrier of the tile's threads
        const unsigned long long out_map = TMAP_ADDR(tm_out);
        bool store_pending = false;
#if EPI_RING_REUSE
        int ring_pending = 0;  // the storer's: first ring slot of the tile whose store is pending
#endif
        int stage = 0;
        unsigned phase = 0, rphase = 0;
        float acc[M_ITERS][ACC_N];
        const unsigned desc_a = desc_lo(base + row0 * 128);  // slot 0, this warpgroup's rows

        while (sched_next(sched, dp_tiles, num_kb, tile, kb0, kb1)) {
            int m0, n0;
            TILE_ORIGIN(tile, m0, n0);
            int prev_stage = 0;
#if PROMOTE
            // groups of PROMOTE k-blocks, each summed from zero by the tensor cores, drained
            // (wgmma.wait_group 0) and added into `sum` by FADD
            float sum[M_ITERS][ACC_N];
#pragma unroll
            for (int mi = 0; mi < M_ITERS; ++mi) {
#pragma unroll
                for (int i = 0; i < ACC_N; ++i) sum[mi][i] = 0.0f;
            }
            for (int g0 = kb0; g0 < kb1; g0 += PROMOTE) {
                const int g1 = g0 + PROMOTE < kb1 ? g0 + PROMOTE : kb1;
#else
            {  // one group: the whole k-range in the tensor cores
                const int g0 = kb0, g1 = kb1;
#endif
#define KLOOP_NMI M_ITERS
#include "mainloop.cuh"
#undef KLOOP_NMI
#include "mainloop_drain.cuh"
            }
#if PROMOTE
#define ACC_OUT sum
#else
#define ACC_OUT acc
#endif

#include "streamk_fixup.cuh"

            // ------- epilogue: R (staged by TMA) + acc in fp32, round once, TMA store -------
#if EPI_RING
            const int ring_first = epi_ring_first(stage);
            const unsigned ebuf = base + ring_first * STAGE_BYTES;
#if EPI_RING_REUSE
            // follow the producer past the slots it acquired: those skipped to reach adjacent ones
            // (nothing was staged there: free them now), then the epilogue tile's
            if (ring_first != stage) {
                for (int s2 = stage; s2 < STAGES; ++s2) release_slot(empty_bar + 8 * s2, lane);
                stage = 0;
                phase ^= 1u;
            }
            stage += EPI_RING_SLOTS;
            if (stage == STAGES) {
                stage = 0;
                phase ^= 1u;
            }
#endif
#endif
            mbar_wait(rfb, rphase);
            rphase ^= 1u;
#if STREAMK
            if (!finish) {
                // nothing to store: the buffer is free once R has landed (waited above)
                if (storer) store_pending = true;
                continue;
            }
#endif
#include "epilogue_write.cuh"
#if EPI_RING_REUSE
            if (storer) mbar_arrive(reb);  // every tile thread is past its wait on the R barrier
#endif
            if (storer) {
#define STORE_MAP out_map
#define STORE_MAP2 TMAP_ADDR(tm_out2)
#include "epilogue_store.cuh"
#undef STORE_MAP
#undef STORE_MAP2
#if EPI_RING_REUSE && !EPI_RING_DEFER
                // no room beside the epilogue tile's slots for the next tile: free them now
                asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
                release_epi_slots(empty_bar, ring_first);
#else
                store_pending = true;
#if EPI_RING_REUSE
                ring_pending = ring_first;
#endif
#endif
            }
        }
        if (storer) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
