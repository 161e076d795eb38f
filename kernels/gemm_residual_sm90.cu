// Hopper-native GEMM + residual: out[M,N] = A[M,K] @ W[N,K]^T + R[M,N]   (sm_90a)
// bf16 / fp16 (fp32 accumulators, result rounded once), or tf32: fp32 A, W, R and out, the tensor
// cores reading the fp32 operands as tf32 (the low 13 mantissa bits ignored), fp32 accumulation.
//
// TMA (cp.async.bulk.tensor, 128B swizzle) -> mbarrier pipeline of STAGES slots -> wgmma
// (m64nBNk16, fp32 accumulators in registers). Warp-specialised: warpgroup 0 is the producer
// (one thread issues TMA; setmaxnreg.dec), warpgroups 1..NUM_CONSUMERS are consumers
// (setmaxnreg.inc), each owning BM/NUM_CONSUMERS rows of the BM x BN tile. Persistent grid:
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
// PINGPONG: the consumer warpgroups own whole tiles, alternately (work item i of the CTA's
// sequence goes to consumer i % 2), each with its own epilogue buffer and residual barriers. The
// producer fills one in-order ring, so consumer 1's first k-block of item i+1 lands only after the
// last k-block of item i: while one warpgroup runs its epilogue the other has the tensor cores.
// A consumer steps over the other's k-blocks in the ring without waiting on them, so its parity
// waits could alias a full barrier several phases behind: before the main loop of item i it waits
// on its turn barrier, which the other consumer arrives on once it has waited on every full
// barrier of item i-1 (the ordered "tensor-core turn"). Otherwise (cooperative) each consumer owns
// BM/NUM_CONSUMERS rows of every tile and both run the epilogue together.
//
// CLUSTER == 2: the CTAs run in 2x1 clusters (__cluster_dims__) on vertically adjacent tiles that
// share their W tile: CTA rank rm loads BN/2 of its rows and multicasts them into both CTAs' slots
// (TMA .multicast::cluster), so W's L2->SM traffic halves. A slot is refilled only when the
// consumers of both CTAs have released it: each consumer warp arrives on the empty barrier of both
// CTAs (remote arrive through mapa). Both CTAs walk the same sequence of tile pairs (data-parallel
// only: no stream-K); an odd last M tile pairs with a tile wholly past M (TMA zero-fills its loads
// and clips its store). A cluster barrier after the mbarrier init and one before exit keep remote
// arrivals inside the peer's lifetime.
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
// STAGES == 1 is MEMORY_PIPELINING=off: the producer waits for the consumers to free the only
// slot before it issues the next load, so copies and math never overlap.
//
// DT 3 (fp32 inputs, fp32-class accuracy on the tensor cores, "3xTF32"): tf32_split first writes
// each operand's low part lo = tf32(x - hi) (and, with SPLIT_HI, hi = tf32(x) itself; without it
// the tensor cores' own reading of x is hi: they ignore its low 13 mantissa bits). The GEMM then
// runs 3x the k-blocks: a_lo * w_hi, a_hi * w_lo, a_hi * w_hi into one fp32 accumulator (small
// terms first); a_lo * w_lo (~2^-22 relative) is dropped. Same tiles, wgmma .tf32 and epilogue as
// DT 2. PROMOTE = p > 0: the tensor cores sum p k-blocks at a time from zero (their own
// accumulation is coarser than fp32 round-to-nearest and its error grows with the steps); each
// group is drained and added into a second register accumulator by FADD (cooperative tiles of
// at most 64 x 160 per warpgroup, where the second set fits). The drain costs a bubble per group.
//
// The spec renders one source: its #defines, vec16.cuh (16-bit <-> fp32 conversions, VEC_DTYPE = DT,
// 2 for fp32 data), the headers under sm90/ in order (config.cuh: the defines checked and the tile
// geometry; ptx.cuh: mbarrier, TMA and cluster PTX; wgmma.cuh: the wgmma wrappers; epilogue.cuh:
// the epilogue buffer; scheduler.cuh: the persistent tile sequence and the stream-K workspace), this
// file (the GEMM kernel), then sm90/side_kernels.cuh (fusion off's residual add, 3xTF32's split).
// No #include: NVRTC compiles the one source on a machine without the CUDA toolkit.

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
    const int num_tiles = ((num_m + MC - 1) / MC) * num_n;  // schedule tiles
    // this CTA's rank in its cluster: a literal 0 without one. The unused `rank` stays there: NVRTC's
    // register assignment depends on it (without it the fp32 builds compile to other cubins)
#if MC > 1
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
            mbar_init(empty_bar + 8 * s, (TILE_THREADS / 128) * 4 * MC);
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
#if MC > 1
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
                    tma_load_2d(sa, am, kx, m0, fb);
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
#if PINGPONG
        const int row0 = 0;                    // this warpgroup's first row in the tile
        const int ct = threadIdx.x % 128;      // this thread's index among the tile's threads
        const unsigned ebuf = epi + (EPI_SHARED ? 0 : cw * EPI_BYTES);
        const unsigned rfb = rfull_bar + 8 * cw;
        const unsigned reb = rempty_bar + 8 * cw;
        const unsigned flag = flag_addr + 4 * cw;
        const bool storer = threadIdx.x % 128 == 0;
        int item = 0;
        unsigned turn_phase = 0;
#else
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
#endif
        (void)ct;
        (void)flag;
        const int bar_id = PINGPONG ? 1 + cw : 1;  // named barrier of the tile's threads
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
#if PINGPONG
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
#endif
            int m0, n0;
            TILE_ORIGIN(tile, m0, n0);
            int prev_stage = 0;
#if HALF_TAIL
            const bool is_half = sched.half != 0;  // 64 rows: the first m64 slice of each k-step only
#endif
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
#undef KLOOP_NMI
#if HALF_TAIL
                };
                if (is_half) {
                    kloop(IntC<1>{});
                } else {
                    kloop(IntC<M_ITERS>{});
                }
#endif
#if PINGPONG
                if (storer) mbar_arrive(turn_bar + 8 * (cw ^ 1));  // the other consumer's turn
#endif
#if STAGES > 1
                wgmma_wait<0>();
                release_slot(empty_bar + 8 * prev_stage, lane);
#endif
#pragma unroll
                for (int mi = 0; mi < M_ITERS; ++mi) {
#pragma unroll
                    for (int i = 0; i < ACC_N; ++i) {
                        fence_reg(acc[mi][i]);
#if PROMOTE
                        sum[mi][i] += acc[mi][i];
#endif
                    }
                }
            }
#if PROMOTE
#define ACC_OUT sum
#else
#define ACC_OUT acc
#endif

#if STREAMK
            bool finish = true;
            if (kb0 != 0 || kb1 != num_kb) {
                // ------- stream-K fixup: add the partial in, count k-blocks, last one finishes -------
                float4* ws = sk_ws + (size_t)(tile - dp_tiles) * (BM * BN / 4) + ct;
                unsigned* cnt = sk_cnt + (tile - dp_tiles);
#pragma unroll
                for (int mi = 0; mi < M_ITERS; ++mi) {
#pragma unroll
                    for (int q = 0; q < ACC_N / 4; ++q) {
                        red_add_v4(ws + (mi * (ACC_N / 4) + q) * TILE_THREADS, ACC_OUT[mi][4 * q],
                                   ACC_OUT[mi][4 * q + 1], ACC_OUT[mi][4 * q + 2], ACC_OUT[mi][4 * q + 3]);
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
                            ACC_OUT[mi][4 * q] = v.x;
                            ACC_OUT[mi][4 * q + 1] = v.y;
                            ACC_OUT[mi][4 * q + 2] = v.z;
                            ACC_OUT[mi][4 * q + 3] = v.w;
                            st_cg_zero_v4(p);
                        }
                    }
                    if (ct == 0) st_relaxed_u32(cnt, 0u);
                }
            }
#endif

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
#if PINGPONG
                if (storer) mbar_arrive(reb);
#else
                if (storer) store_pending = true;
#endif
                continue;
            }
#endif
#if DT >= 2
#pragma unroll
            for (int mi = 0; mi < M_ITERS; ++mi) {
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    const int lr = row0 + mi * 64 + warp * 16 + (lane >> 2) + half * 8;
                    const unsigned row_addr = ebuf + lr * 128 + (lane & 1) * 8;
                    const int sw = lane >> 2;  // == lr % 8
                    const int q2 = (lane & 3) >> 1;
#pragma unroll
                    for (int jg = 0; jg < BN / 8; jg += 4) {
                        // 4 pairs of residuals first (8 registers), then add and write back
#if FUSE
                        float2 rv[4];
#pragma unroll
                        for (int jj = 0; jj < 4; ++jj) {
                            const int j = jg + jj;
                            rv[jj] = ld_shared_f2(row_addr + (j / 4) * EPI_CHUNK_BYTES +
                                                  (((2 * (j % 4) + q2) ^ sw) << 4));
                        }
#endif
#pragma unroll
                        for (int jj = 0; jj < 4; ++jj) {
                            const int j = jg + jj;
                            float v0 = ACC_OUT[mi][j * 4 + half * 2];
                            float v1 = ACC_OUT[mi][j * 4 + half * 2 + 1];
#if FUSE
                            v0 += rv[jj].x;
                            v1 += rv[jj].y;
#endif
                            st_shared_f2(row_addr + (j / 4) * EPI_CHUNK_BYTES + (((2 * (j % 4) + q2) ^ sw) << 4),
                                         v0, v1);
                        }
                    }
                }
            }
#elif SWAP_AB
            // each accumulator pair is (the problem's column n, rows m and m + 1), an 8 x 8 block of
            // them (8 n x 8 m) one matrix of ldmatrix / stmatrix .trans: this lane addresses row
            // m = 8 (j + mi / 2) + mr of matrix mi (half mi % 2 of the warp's 16 n, k-block pair j)
            {
                const int mi = lane >> 3;
                const int mr = lane & 7;
                const int nb = row0 + warp * 16 + (mi & 1) * 8;  // the matrix's first n
                const unsigned ubase = ebuf + (nb / 64) * EPI_CHUNK_BYTES;
                const int nu = (nb % 64) / 8;  // its 16-byte unit in a 128-byte row, before the swizzle
#pragma unroll
                for (int j = 0; j + 1 < WG_N / 8; j += 2) {
                    const int m = 8 * (j + (mi >> 1)) + mr;
                    const unsigned addr = ubase + m * 128 + ((nu ^ (m % 8)) << 4);
                    unsigned q[4];
                    float v[4][2];
#pragma unroll
                    for (int i = 0; i < 4; ++i) {  // matrix i: half i % 2, block j + i / 2
                        v[i][0] = ACC_OUT[0][(j + i / 2) * 4 + (i % 2) * 2];
                        v[i][1] = ACC_OUT[0][(j + i / 2) * 4 + (i % 2) * 2 + 1];
                    }
#if FUSE
                    ldsm_x4_trans(addr, q[0], q[1], q[2], q[3]);
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        float r0, r1;
                        unpack2(q[i], r0, r1);
                        v[i][0] += r0;
                        v[i][1] += r1;
                    }
#endif
#pragma unroll
                    for (int i = 0; i < 4; ++i) q[i] = pack2(v[i][0], v[i][1]);
                    stsm_x4_trans(addr, q[0], q[1], q[2], q[3]);
                }
#if (WG_N / 8) % 2
                {  // the last k-block of an odd count: its two halves, lanes 0-15's addresses
                    constexpr int j = WG_N / 8 - 1;
                    const int m = 8 * j + mr;
                    const unsigned addr = ubase + m * 128 + ((nu ^ (m % 8)) << 4);
                    float a0 = ACC_OUT[0][j * 4], a1 = ACC_OUT[0][j * 4 + 1];
                    float b0 = ACC_OUT[0][j * 4 + 2], b1 = ACC_OUT[0][j * 4 + 3];
#if FUSE
                    unsigned q0, q1;
                    ldsm_x2_trans(addr, q0, q1);
                    float r0, r1;
                    unpack2(q0, r0, r1);
                    a0 += r0;
                    a1 += r1;
                    unpack2(q1, r0, r1);
                    b0 += r0;
                    b1 += r1;
#endif
                    stsm_x2_trans(addr, pack2(a0, a1), pack2(b0, b1));
                }
#endif
            }
#else
#if SPLIT_N
            // this consumer's columns start at pair joff of the row: a constant in each unrolled
            // copy (the chunk and swizzle unit of every pair fold at compile time)
#pragma unroll
            for (int cc = 0; cc < NUM_CONSUMERS; ++cc) {
                if (cc != cw) continue;
                const int joff = cc * (WG_N / 8);
#else
            {
                const int joff = 0;
#endif
#pragma unroll
            for (int mi = 0; mi < M_ITERS; ++mi) {
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    const int lr = row0 + mi * 64 + warp * 16 + (lane >> 2) + half * 8;
                    const unsigned row_addr = ebuf + lr * 128 + (lane & 3) * 4;
                    const int sw = lane >> 2;  // == lr % 8
                    const unsigned tail_addr = ebuf + EPI_TAIL + lr * EPI_TAIL_BYTES + (lane & 3) * 4;
                    const int sw_tail = (lr >> EPI_TAIL_ROW_SHIFT) & EPI_TAIL_SW_MASK;
                    (void)tail_addr;
                    (void)sw_tail;
#if FUSE
                    // all of this row's residual pairs first: one exposed latency, not WG_N/8
                    unsigned rv[WG_N / 8];
#pragma unroll
                    for (int j = 0; j < WG_N / 8; ++j) {
                        rv[j] = ld_shared_u32(epi_addr(row_addr, tail_addr, joff + j, sw, sw_tail));
                    }
#endif
#pragma unroll
                    for (int j = 0; j < WG_N / 8; ++j) {
                        const unsigned addr = epi_addr(row_addr, tail_addr, joff + j, sw, sw_tail);
                        float v0 = ACC_OUT[mi][j * 4 + half * 2];
                        float v1 = ACC_OUT[mi][j * 4 + half * 2 + 1];
#if FUSE
                        float r0, r1;
                        unpack2(rv[j], r0, r1);
                        v0 += r0;
                        v1 += r1;
#endif
                        st_shared_u32(addr, pack2(v0, v1));
                    }
                }
            }
            }
#endif
            // generic-proxy writes -> async-proxy (TMA) reads
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            asm volatile("bar.sync %0, %1;" ::"r"(bar_id), "n"(TILE_THREADS) : "memory");
#if EPI_RING_REUSE
            if (storer) mbar_arrive(reb);  // every tile thread is past its wait on the R barrier
#endif
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
#if SWAP_AB
#pragma unroll
                for (int c = 0; c < EPI_CHUNKS; ++c) {
                    if (n0 < N && m0 + c * EPI_COLS < M)
                        tma_store_2d(STORE_MAP, m0 + c * EPI_COLS, n0, ebuf + c * EPI_CHUNK_BYTES);
                }
#else
#pragma unroll
                for (int c = 0; c < EPI_CHUNKS; ++c) {
                    if (m0 < M && n0 + c * EPI_COLS < N)
                        tma_store_2d(STORE_MAP, n0 + c * EPI_COLS, m0, ebuf + c * EPI_CHUNK_BYTES);
                }
#endif
#if EPI_TAIL_COLS
                if (m0 < M && n0 + EPI_CHUNKS * EPI_COLS < N)
                    tma_store_2d(STORE_MAP2, n0 + EPI_CHUNKS * EPI_COLS, m0, ebuf + EPI_TAIL);
#endif
#undef STORE_MAP
#undef STORE_MAP2
                asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#if PINGPONG
                // the other warpgroup has the tensor cores now: wait here for the store to have
                // read the buffer and hand it back at once (the next R can land early)
                asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
                mbar_arrive(reb);
#elif EPI_RING_REUSE && !EPI_RING_DEFER
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
    }
#if MC > 1
    cluster_sync();  // no CTA leaves while its peer may still arrive on its barriers
#endif
}
