// Hopper-native GEMM + residual: out[M,N] = A[M,K] @ W[N,K]^T + R[M,N]   (sm_90a)
// bf16 / fp16 (fp32 accumulators, result rounded once), or tf32: fp32 A, W, R and out, the tensor
// cores reading the fp32 operands as tf32 (the low 13 mantissa bits ignored), fp32 accumulation.
//
// TMA (cp.async.bulk.tensor, 128B swizzle) -> mbarrier pipeline of STAGES slots -> wgmma
// (m64nBNk16, fp32 accumulators in registers). Warp-specialised: warpgroup 0 is the producer
// (one thread issues TMA; setmaxnreg.dec), warpgroups 1..NUM_CONSUMERS are consumers
// (setmaxnreg.inc) in one of two schedules, each its own body: cooperative (each consumer owns
// BM/NUM_CONSUMERS rows of every BM x BN tile: sm90/consumer_cooperative.cuh) or PINGPONG (the
// two consumers own whole tiles, alternately: sm90/consumer_pingpong.cuh). Persistent grid:
// CTA b takes tiles b, b + gridDim.x, ...; tiles are numbered N-fastest so the CTAs in flight
// share A row panels and the whole W in L2 (in one or two waves of some tiles, where W comes from
// DRAM once: M-fastest or in groups of M blocks, RASTER_M / RASTER_GROUP). The residual tile is loaded by TMA into a
// shared-memory epilogue buffer while the tile's main loop runs; the epilogue adds it to the
// accumulators in fp32, rounds once, writes the result back into the same buffer and one
// thread stores it with TMA (asynchronously: the consumers go straight on to the next tile).
//
// Stream-K tail (STREAMK): tiles [0, dp_tiles) are data-parallel (one CTA, the whole K loop);
// the k-iterations of the remaining tiles are split evenly over the grid, so a CTA's share can
// start or end inside a tile. A CTA that covers only part of a tile's K adds its fp32 partial into
// a static workspace slot (red.global.add.v4.f32) and counts its k-blocks on the slot's counter;
// the one whose k-blocks complete the count reads the sum back, re-zeroes the slot, resets the
// counter and runs the normal epilogue (residual added once, rounded once). No CTA ever waits on
// another, so any grid order is deadlock-free. The workspace is per module: launches of one
// module must not run concurrently on two streams.
//
// PINGPONG (sm90/consumer_pingpong.cuh): here, the producer's alternation of epilogue buffers and
// residual barriers between the consumers, and their two turn barriers.
//
// CLUSTER == 2: the CTAs run in 2x1 clusters (__cluster_dims__) on vertically adjacent tiles that
// share their W tile: CTA rank rm loads BN/2 of its rows and multicasts them into both CTAs' slots
// (TMA .multicast::cluster), so W's L2->SM traffic halves. A slot is refilled only when the
// consumers of both CTAs have released it: each consumer warp arrives on the empty barrier of both
// CTAs (remote arrive through mapa). Both CTAs walk the same sequence of tile pairs (data-parallel
// only: no stream-K); an odd last M tile pairs with a tile wholly past M (TMA zero-fills its loads
// and clips its store). A cluster barrier after the mbarrier init and one before exit keep remote
// arrivals inside the peer's lifetime. CLUSTER_N: the pair are N-neighbours sharing the A tile
// instead (rank r loads BM/2 of A's rows and multicasts them; tile pairs along N), the same
// barriers and release.
//
// Decode tiles (SWAP_AB with BM = 64, one consumer warpgroup, BN = 8..56 tokens): one 64-row W tile a
// CTA, W streamed once from DRAM through the ring, its loads with an L2 evict-first policy
// (STREAM_HINT) so the tokens and R stay in the L2; the wgmma's N is the tokens (ADR-0011). They
// are launched with programmatic dependent launch (PDL_WAIT: griddepcontrol.wait in every thread
// after the barrier set-up; no early trigger, ADR-0010).
//
// HALF_TAIL (ping-pong: sm90/consumer_pingpong.cuh): here, the producer's 64-row A loads (tm_ah) of
// a half tile.
//
// STAGES == 1 is MEMORY_PIPELINING=off: the producer waits for the consumers to free the only
// slot before it issues the next load, so copies and math never overlap.
//
// DT 3 (fp32 inputs, fp32-class accuracy on the tensor cores, "3xTF32"): tf32_split first writes
// each operand's low part lo = tf32(x - hi) (and, with SPLIT_HI, hi = tf32(x) itself; without it
// the tensor cores' own reading of x is hi: they ignore its low 13 mantissa bits). The GEMM then
// runs 3x the k-blocks: a_lo * w_hi, a_hi * w_lo, a_hi * w_hi into one fp32 accumulator (small
// terms first); a_lo * w_lo (~2^-22 relative) is dropped. Same tiles, wgmma .tf32 and epilogue as
// DT 2. PROMOTE (cooperative: sm90/consumer_cooperative.cuh) sums groups of k-blocks apart.
//
// The spec renders one source: its #defines, vec16.cuh (16-bit <-> fp32 conversions, VEC_DTYPE = DT,
// 2 for fp32 data), the headers under sm90/ in order (config.cuh: the defines checked and the tile
// geometry; ptx.cuh: mbarrier, TMA and cluster PTX; wgmma.cuh: the wgmma wrappers; epilogue.cuh:
// the epilogue buffer; scheduler.cuh: the persistent tile sequence and the stream-K workspace), this
// file (the GEMM kernel: setup, producer), then sm90/side_kernels.cuh (fusion off's residual add,
// 3xTF32's split). The consumers' body is the plan's schedule's, rendered at `#include CONSUMER_BODY`
// below; it includes the parts both schedules share: mainloop.cuh (the k-block loop),
// mainloop_drain.cuh (after a group's last k-block), streamk_fixup.cuh, epilogue_write.cuh (R +
// accumulators into the buffer) and epilogue_store.cuh (its TMA stores). No file reaches NVRTC on its
// own: the codegen inlines each #include (sm90/codegen.py), so NVRTC compiles one source, on a
// machine without the CUDA toolkit too.

extern "C" __global__ void __launch_bounds__(THREADS, 1) CLUSTER_ATTR
gemm_residual_sm90(TMAP_PARAM(tm_a), TMAP_PARAM(tm_w), TMAP_PARAM(tm_r), TMAP_PARAM(tm_out),
                   TMAP_PARAM(tm_r2), TMAP_PARAM(tm_out2),
#if HALF_TAIL
                   TMAP_PARAM(tm_ah), TMAP_PARAM(tm_outh), TMAP_PARAM(tm_out2h),
#endif
#if DT == 3
                   TMAP_PARAM(tm_alo), TMAP_PARAM(tm_wlo),
#endif
                   int M, int N, int K, int dp_tiles) {
    extern __shared__ unsigned char smem_raw[];
    const unsigned base = (smem_u32(smem_raw) + 1023u) & ~1023u;  // swizzle atoms need 1024 B
    const unsigned epi = base + STAGES * STAGE_BYTES;
    const unsigned full_bar = epi + (EPI_RING ? 0 : EPI_BUFS * EPI_BYTES);
    const unsigned empty_bar = full_bar + STAGES * 8;
    const unsigned rfull_bar = empty_bar + STAGES * 8;   // one per consumer with ping-pong
    const unsigned rempty_bar = rfull_bar + EPI_BARS * 8;
    const unsigned turn_bar = rempty_bar + EPI_BARS * 8;  // ping-pong: one per consumer
    const unsigned flag_addr = turn_bar + (PINGPONG ? 16 : 0);  // stream-K: "finish the tile"
    (void)turn_bar;
    (void)flag_addr;

    const int num_m = (M + BM - 1) / BM;
    const int num_n = (N + BN - 1) / BN;
    const int num_tiles = ((num_m + MC - 1) / MC) * ((num_n + NC - 1) / NC);  // schedule tiles
    // this CTA's rank in its cluster: a literal 0 without one. The unused `rank` stays there: NVRTC's
    // register assignment depends on it (without it the fp32 builds compile to other cubins)
#if CL > 1
    const unsigned rm = cluster_rank();
#define CTA_RM rm
#else
    const unsigned rank = 0;
    (void)rank;
#define CTA_RM 0u
#endif
#if DT == 3
    const int kb_k = (K + BK - 1) / BK;  // k-blocks of one product; three products
    const int num_kb = 3 * kb_k;
#else
    const int num_kb = (K + BK - 1) / BK;
#endif
#if STREAMK
    // at most WS_TILES split tiles (the workspace's slots): the rest run data-parallel
    dp_tiles = dp_tiles < 0 ? 0 : dp_tiles;
    dp_tiles = dp_tiles > num_tiles ? num_tiles : dp_tiles;
    dp_tiles = num_tiles - dp_tiles > WS_TILES ? num_tiles - WS_TILES : dp_tiles;
#elif HALF_TAIL
    // the whole tiles; the rest run in halves
    dp_tiles = dp_tiles < 0 ? 0 : dp_tiles > num_tiles ? num_tiles : dp_tiles;
#else
    dp_tiles = num_tiles;
#endif

    const int wg = __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0);  // warp-uniform (CUTLASS idiom)
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full_bar + 8 * s, 1);
            // lane 0 of each warp using it, in every CTA of the cluster
            mbar_init(empty_bar + 8 * s, (TILE_THREADS / 128) * 4 * CL);
        }
        for (int e = 0; e < EPI_BARS; ++e) {
            mbar_init(rfull_bar + 8 * e, 1);
            mbar_init(rempty_bar + 8 * e, 1);
        }
#if PINGPONG
        mbar_init(turn_bar, 1);
        mbar_init(turn_bar + 8, 1);
#endif
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
#if PDL_WAIT
    // launched with programmatic dependent launch (the decode tiles: engine/backends/pdl.py), the
    // set-up above overlapped the end of the kernel before; every thread waits for it to finish
    // before its first global access (the tensor-map prefetches read the parameters only)
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
#if CL > 1
    cluster_sync();  // the peer's barriers are initialised before any multicast or remote arrive
#else
    __syncthreads();
#endif

    Sched sched;
    sched_init(sched, dp_tiles, num_tiles, num_kb);
    int tile, kb0, kb1;

    if (wg == 0) {
        // ---------------- producer warpgroup ----------------
#if NUM_CONSUMERS > 1
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
#endif
        if (threadIdx.x == 0) {
            const unsigned long long a_map = TMAP_ADDR(tm_a);
            const unsigned long long w_map = TMAP_ADDR(tm_w);
            asm volatile("prefetch.tensormap [%0];" ::"l"(a_map) : "memory");
            asm volatile("prefetch.tensormap [%0];" ::"l"(w_map) : "memory");
#if DT == 3
            asm volatile("prefetch.tensormap [%0];" ::"l"(TMAP_ADDR(tm_alo)) : "memory");
            asm volatile("prefetch.tensormap [%0];" ::"l"(TMAP_ADDR(tm_wlo)) : "memory");
#endif
#if FUSE
            const unsigned long long r_map = TMAP_ADDR(tm_r);
            asm volatile("prefetch.tensormap [%0];" ::"l"(r_map) : "memory");
#endif
#if STREAM_HINT
            const unsigned long long stream_policy = l2_evict_first();
#endif
            int stage = 0, item = 0;
            unsigned phase = 0, rphases = 0;  // bit e: parity of epilogue buffer e
            while (sched_next(sched, dp_tiles, num_kb, tile, kb0, kb1)) {
                int m0, n0;
                TILE_ORIGIN(tile, m0, n0);
                const int eb = PINGPONG ? (item++ & 1) : 0;  // the consumer (its barriers, buffer)
                const unsigned ebuf = epi + (EPI_SHARED ? 0 : eb * EPI_BYTES);
                const unsigned rfb = rfull_bar + 8 * eb;
                (void)ebuf;
                // the k-block after which the producer stages the next residual tile: the stage
                // count, when the ring has just filled with this item's first k-blocks, so the R load
                // delays the next ones while the most are buffered (each k-block earlier or later
                // measured slower: ADR-0007)
                const int r_issue_kb = kb0 + (kb1 - kb0 - 1 < STAGES ? kb1 - kb0 - 1 : STAGES);
#if EPI_SHARED
                // the shared buffer is free once the previous item's store has read it (the other
                // consumer's barrier; the first item has no previous)
                const unsigned prev_reb = rempty_bar + 8 * (eb ^ 1);
                const unsigned prev_par = (rphases >> (eb ^ 1)) & 1u;
                bool r_due = true;
#endif
#if DT == 3
                int seg = kb0 / kb_k, kq = kb0 - seg * kb_k;  // product, k-block within it
#endif
                for (int kb = kb0; kb < kb1; ++kb) {
                    mbar_wait(empty_bar + 8 * stage, phase ^ 1u);
                    const unsigned fb = full_bar + 8 * stage;
#if HALF_TAIL
                    mbar_expect_tx(fb, sched.half ? STAGE_BYTES - A_TILE_BYTES / 2 : STAGE_BYTES);
#else
                    mbar_expect_tx(fb, STAGE_BYTES);
#endif
                    const unsigned sa = base + stage * STAGE_BYTES;
#if DT == 3
                    // product seg: 0 a_lo * w_hi, 1 a_hi * w_lo, 2 a_hi * w_hi
                    const int kx = kq * BK;
                    const unsigned long long am = seg == 0 ? TMAP_ADDR(tm_alo) : a_map;
                    const unsigned long long wm = seg == 1 ? TMAP_ADDR(tm_wlo) : w_map;
                    if (++kq == kb_k) {
                        kq = 0;
                        ++seg;
                    }
#else
                    const int kx = kb * BK;
#if HALF_TAIL
                    const unsigned long long am = sched.half ? TMAP_ADDR(tm_ah) : a_map;
#else
                    const unsigned long long am = a_map;
#endif
                    const unsigned long long wm = w_map;
#endif
#if STREAM_HINT
                    tma_load_2d_hint(sa, am, kx, m0, fb, stream_policy);
#elif CLUSTER_N
                    // this CTA's share of the A rows, into every CTA of its cluster
                    tma_load_2d_mc(sa + rm * A_PART_BYTES, am, kx, m0 + (int)rm * (BM / NC), fb,
                                   (unsigned short)((1u << CL) - 1u));
#else
                    tma_load_2d(sa, am, kx, m0, fb);
#endif
#if MC > 1
                    // this CTA's share of the W rows, into every CTA of its cluster
                    tma_load_2d_mc(sa + A_TILE_BYTES + rm * B_PART_BYTES, wm, kx,
                                   n0 + (int)rm * (BN / MC), fb, (unsigned short)((1u << MC) - 1u));
#else
                    tma_load_2d(sa + A_TILE_BYTES, wm, kx, n0, fb);
#if W_BOXES > 1
                    tma_load_2d(sa + A_TILE_BYTES + (BN / 2) * 128, wm, kx, n0 + BN / 2, fb);
#endif
#endif
                    if (++stage == STAGES) {
                        stage = 0;
                        phase ^= 1u;
                    }
#if EPI_SHARED
                    if (r_due && kb >= r_issue_kb
                        && (item == 1 || kb == kb1 - 1 || mbar_test(prev_reb, prev_par))) {
                        if (item > 1) {
                            mbar_wait(prev_reb, prev_par);
                            rphases ^= 1u << (eb ^ 1);
                        }
                        STAGE_RESIDUAL(ebuf, rfb);
                        r_due = false;
                    }
#else
                    if (!EPI_RING && kb == r_issue_kb) {
                        // the epilogue buffer is free once the last TMA store has read it
                        mbar_wait(rempty_bar + 8 * eb, ((rphases >> eb) & 1u) ^ 1u);
                        STAGE_RESIDUAL(ebuf, rfb);
                        rphases ^= 1u << eb;
                    }
#endif
                }
#if EPI_RING
                {
                    // acquire ring slots in order until EPI_RING_SLOTS adjacent ones are held
                    const int first = epi_ring_first(stage);
                    const int n_acq = (first == stage ? 0 : STAGES - stage) + EPI_RING_SLOTS;
                    for (int i = 0; i < n_acq; ++i) {
                        mbar_wait(empty_bar + 8 * stage, phase ^ 1u);
#if EPI_RING_REUSE
                        // no k-block lands in this slot this round: complete its full barrier's
                        // phase all the same, or the consumers' parity waits on it would run a
                        // round ahead once the ring goes on (they step over the slot, not wait)
                        mbar_arrive(full_bar + 8 * stage);
#endif
                        if (++stage == STAGES) {
                            stage = 0;
                            phase ^= 1u;
                        }
                    }
#if EPI_RING_REUSE
                    // one residual barrier for every tile: stage this tile's R only once the
                    // consumers are past their wait for the previous one, or with a deep ring and
                    // few k-blocks (the producer a whole tile ahead) two phases could complete
                    // before a consumer looks, and its parity wait would alias
                    mbar_wait(rempty_bar, (rphases & 1u) ^ 1u);
                    rphases ^= 1u;
#endif
                    STAGE_RESIDUAL(base + first * STAGE_BYTES, rfb);
                }
#endif
            }
        }
    } else {
        // ---------------- consumer warpgroups ----------------
#if NUM_CONSUMERS > 1
        // (one consumer warpgroup: 256 threads leave every warp enough registers as launched)
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
#endif
        const int cw = wg - 1;
        const int warp = (threadIdx.x % 128) / 32;
        const int lane = threadIdx.x % 32;
        // the schedule's body: sm90/consumer_cooperative.cuh or sm90/consumer_pingpong.cuh, as
        // the plan's pingpong says (the codegen renders it here)
#include CONSUMER_BODY
    }
#if CL > 1
    cluster_sync();  // no CTA leaves while its peer may still arrive on its barriers
#endif
}
