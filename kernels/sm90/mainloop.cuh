// Hopper GEMM + residual: a consumer's main loop over the k-blocks [g0, g1) of its tile: wait for
// the slot's full barrier, issue KLOOP_NMI m64 slices of wgmma per k-step (M_ITERS; a ping-pong
// HALF_TAIL half tile, one), release the previous slot, and at the first k-block hand back the
// epilogue buffer of the storer's pending TMA store (cooperative: `store_pending`). The consumer
// body around it (sm90/consumer_*.cuh) defines KLOOP_NMI, holds the ring position (stage, phase,
// prev_stage) and drains the last k-block afterwards (mainloop_drain.cuh).

                for (int kb = g0; kb < g1; ++kb) {
                    mbar_wait(full_bar + 8 * stage, phase);
                    // the slot's descriptors (low words); slab and k-step offsets add to them. The
                    // value is warp-uniform by construction; the shuffle proves it to ptxas, which
                    // then keeps the descriptor arithmetic in uniform registers (ping-pong's ring
                    // position otherwise lives in a vector register: 84 SASS instructions per k-block
                    // instead of 56)
                    const unsigned da = __shfl_sync(0xffffffffu, desc_a + stage * (STAGE_BYTES >> 4), 0);
#if SPLIT_N
                    const unsigned db = da + ((A_TILE_BYTES + col0 * 128) >> 4);  // W rows col0..
#else
                    const unsigned db = da + ((A_TILE_BYTES - row0 * 128) >> 4);
#endif
                    wgmma_fence();
#define ISSUE_WGMMAS(NMI)                                                                         \
    _Pragma("unroll") for (int k = 0; k < KSTEPS; ++k) {                                          \
        _Pragma("unroll") for (int mi = 0; mi < (NMI); ++mi) {                                    \
            WGMMA(acc[mi], desc64(da + ((mi * 64 * 128 + k * 32) >> 4)), desc64(db + ((k * 32) >> 4)), \
                  (kb != g0) | (k != 0));                                                         \
        }                                                                                         \
    }
                    ISSUE_WGMMAS(KLOOP_NMI)
#undef ISSUE_WGMMAS
                    wgmma_commit();
#if STAGES == 1
                    wgmma_wait<0>();
                    release_slot(empty_bar + 8 * stage, lane);
#else
                    wgmma_wait<1>();
                    if (kb > g0) release_slot(empty_bar + 8 * prev_stage, lane);
#endif
                    if (kb == kb0 && storer && store_pending) {
                        // the previous tile's TMA store has long finished reading shared memory
                        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#if EPI_RING_REUSE
                        // the previous tile's slots in the ring (EPI_RING_DEFER)
                        release_epi_slots(empty_bar, ring_pending);
#else
                        mbar_arrive(reb);
#endif
                        store_pending = false;
                    }
                    prev_stage = stage;
                    if (++stage == STAGES) {
                        stage = 0;
                        phase ^= 1u;
                    }
                }
