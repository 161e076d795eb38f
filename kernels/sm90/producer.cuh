// Hopper GEMM + residual: the producer warpgroup (one thread issues every TMA): for each of the CTA's
// work items, its k-blocks into the ring of STAGES slots (A and W tiles; in a cluster, this CTA's
// share multicast to every CTA; 3xTF32, three products' k-blocks; a HALF_TAIL half, 64 A rows), and
// the item's residual tile into its epilogue buffer: at the k-block after which the ring has just
// filled (ADR-0007), with EPI_SHARED once the previous item's store has read the shared buffer, with
// EPI_RING in adjacent ring slots after the last k-block.

#ifndef SM90_PRODUCER_CUH
#define SM90_PRODUCER_CUH

#include "config.cuh"
#include "epilogue.cuh"
#include "params.cuh"
#include "ptx.cuh"
#include "scheduler.cuh"

// One k-block's A and W tiles into ring slot `stage`, completing on its full barrier: k-block kb of
// the tile at (m0, n0); 3xTF32, k-block kq of product seg (0 a_lo * w_hi, 1 a_hi * w_lo, 2 a_hi *
// w_hi; kb_k k-blocks each), both advanced here; rm the CTA's cluster rank; half (HALF_TAIL) the
// unit's half, 0 a whole tile (a half loads 64 A rows); stream_policy STREAM_HINT's L2 policy.
__device__ __forceinline__ void producer_load(const Sm90Shared& sh, const Sm90Maps& tm, int stage, int kb, int& seg,
                                              int& kq, int kb_k, int m0, int n0, unsigned rm, int half,
                                              unsigned long long stream_policy) {
    const unsigned fb = sh.full_bar + 8 * stage;
    if constexpr (HALF_TAIL) {
        mbar_expect_tx(fb, half ? STAGE_BYTES - A_TILE_BYTES / 2 : STAGE_BYTES);
    } else {
        mbar_expect_tx(fb, STAGE_BYTES);
    }
    const unsigned sa = sh.base + stage * STAGE_BYTES;
    int kx;
    unsigned long long am, wm;
    if constexpr (DT == 3) {
        kx = kq * BK;
        am = seg == 0 ? tm.alo : tm.a;
        wm = seg == 1 ? tm.wlo : tm.w;
        if (++kq == kb_k) {
            kq = 0;
            ++seg;
        }
    } else {
        kx = kb * BK;
        am = HALF_TAIL && half ? tm.ah : tm.a;
        wm = tm.w;
    }
    if constexpr (STREAM_HINT) {
        tma_load_2d_hint(sa, am, kx, m0, fb, stream_policy);
    } else if constexpr (CLUSTER_N) {
        // this CTA's share of the A rows, into every CTA of its cluster
        tma_load_2d_mc(sa + rm * A_PART_BYTES, am, kx, m0 + (int)rm * (BM / NC), fb,
                       (unsigned short)((1u << CL) - 1u));
    } else {
        tma_load_2d(sa, am, kx, m0, fb);
    }
    if constexpr (MC > 1) {
        // this CTA's share of the W rows, into every CTA of its cluster
        tma_load_2d_mc(sa + A_TILE_BYTES + rm * B_PART_BYTES, wm, kx, n0 + (int)rm * (BN / MC), fb,
                       (unsigned short)((1u << MC) - 1u));
    } else {
        tma_load_2d(sa + A_TILE_BYTES, wm, kx, n0, fb);
        if constexpr (W_BOXES > 1) tma_load_2d(sa + A_TILE_BYTES + (BN / 2) * 128, wm, kx, n0 + BN / 2, fb);
    }
}

// 3xTF32's place in its k-blocks: product seg, k-block kq within it.
struct Product {
    int seg, kq;
};
// producer_load on the product's place passed and returned by value (the next k-block's): the
// producer's own variables stay unaliased, as the kernel's compiled code expects (ADR-0012).
__device__ __forceinline__ Product producer_load_next(const Sm90Shared& sh, const Sm90Maps& tm, int stage, int kb,
                                                      Product p, int kb_k, int m0, int n0, unsigned rm, int half,
                                                      unsigned long long stream_policy) {
    producer_load(sh, tm, stage, kb, p.seg, p.kq, kb_k, m0, n0, rm, half, stream_policy);
    return p;
}

// EPI_RING: after the item's last k-block, acquire ring slots in order until EPI_RING_SLOTS adjacent
// ones are held and stage R there (stage, phase: the producer's ring position; rphases: the
// residual-empty barrier's parity).
struct ProducerRing {
    int stage;
    unsigned phase, rphases;
};
__device__ __forceinline__ void producer_ring_acquire(const Sm90Shared& sh, const Sm90Maps& tm, int& stage,
                                                      unsigned& phase, unsigned& rphases, unsigned rfb, int m0,
                                                      int n0) {
    const int first = epi_ring_first(stage);
    const int n_acq = (first == stage ? 0 : STAGES - stage) + EPI_RING_SLOTS;
    for (int i = 0; i < n_acq; ++i) {
        mbar_wait(sh.empty_bar + 8 * stage, phase ^ 1u);
        if constexpr (EPI_RING_REUSE) {
            // no k-block lands in this slot this round: complete its full barrier's phase all the
            // same, or the consumers' parity waits on it would run a round ahead once the ring goes
            // on (they step over the slot, not wait)
            mbar_arrive(sh.full_bar + 8 * stage);
        }
        if (++stage == STAGES) {
            stage = 0;
            phase ^= 1u;
        }
    }
    if constexpr (EPI_RING_REUSE) {
        // one residual barrier for every tile: stage this tile's R only once the consumers are past
        // their wait for the previous one, or with a deep ring and few k-blocks (the producer a whole
        // tile ahead) two phases could complete before a consumer looks, and its parity wait would alias
        mbar_wait(sh.rempty_bar, (rphases & 1u) ^ 1u);
        rphases ^= 1u;
    }
    stage_residual(sh.base + first * STAGE_BYTES, rfb, tm.r, tm.r2, m0, n0);
}
// producer_ring_acquire on the ring position passed and returned by value (ADR-0012).
__device__ __forceinline__ ProducerRing producer_ring_residual(const Sm90Shared& sh, const Sm90Maps& tm,
                                                               ProducerRing r, unsigned rfb, int m0, int n0) {
    producer_ring_acquire(sh, tm, r.stage, r.phase, r.rphases, rfb, m0, n0);
    return r;
}

// The producer warpgroup's thread 0 over this CTA's work items (sched).
__device__ __forceinline__ void producer_thread(const Sm90Shared& sh, const Sm90Maps& tm, const Sm90Problem& pb,
                                                Sched sched) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(tm.a) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(tm.w) : "memory");
    if constexpr (DT == 3) {
        asm volatile("prefetch.tensormap [%0];" ::"l"(tm.alo) : "memory");
        asm volatile("prefetch.tensormap [%0];" ::"l"(tm.wlo) : "memory");
    }
    if constexpr (FUSE) asm volatile("prefetch.tensormap [%0];" ::"l"(tm.r) : "memory");
    unsigned long long stream_policy = 0;
    if constexpr (STREAM_HINT) stream_policy = l2_evict_first();
    int stage = 0, item = 0;
    unsigned phase = 0, rphases = 0;  // bit e: parity of epilogue buffer e
    int tile, kb0, kb1;
    while (sched_next(sched, pb.dp_tiles, pb.num_kb, tile, kb0, kb1)) {
        int m0, n0;
        unit_origin(sched, tile, pb.num_m, pb.num_n, pb.rank, pb.M, pb.N, m0, n0);
        const int eb = PINGPONG ? (item++ & 1) : 0;  // the consumer (its barriers, buffer)
        const unsigned ebuf = sh.epi + (EPI_SHARED ? 0 : eb * EPI_BYTES);
        const unsigned rfb = sh.rfull_bar + 8 * eb;
        // the k-block after which the producer stages the next residual tile: the stage count, when
        // the ring has just filled with this item's first k-blocks, so the R load delays the next
        // ones while the most are buffered (each k-block earlier or later measured slower: ADR-0007)
        const int r_issue_kb = kb0 + (kb1 - kb0 - 1 < STAGES ? kb1 - kb0 - 1 : STAGES);
        // EPI_SHARED: the shared buffer is free once the previous item's store has read it (the other
        // consumer's barrier; the first item has no previous)
        const unsigned prev_reb = sh.rempty_bar + 8 * (eb ^ 1);
        const unsigned prev_par = (rphases >> (eb ^ 1)) & 1u;
        bool r_due = true;
        int seg = 0, kq = 0;  // 3xTF32: the product, the k-block within it
        if constexpr (DT == 3) {
            seg = kb0 / pb.kb_k;
            kq = kb0 - seg * pb.kb_k;
        }
        for (int kb = kb0; kb < kb1; ++kb) {
            mbar_wait(sh.empty_bar + 8 * stage, phase ^ 1u);
            const Product pr = producer_load_next(sh, tm, stage, kb, Product{seg, kq}, pb.kb_k, m0, n0, pb.rank,
                                                  HALF_TAIL ? sched.half : 0, stream_policy);
            seg = pr.seg, kq = pr.kq;
            if (++stage == STAGES) {
                stage = 0;
                phase ^= 1u;
            }
            if constexpr (EPI_SHARED) {
                if (r_due && kb >= r_issue_kb && (item == 1 || kb == kb1 - 1 || mbar_test(prev_reb, prev_par))) {
                    if (item > 1) {
                        mbar_wait(prev_reb, prev_par);
                        rphases ^= 1u << (eb ^ 1);
                    }
                    stage_residual(ebuf, rfb, tm.r, tm.r2, m0, n0);
                    r_due = false;
                }
            } else if (!EPI_RING && kb == r_issue_kb) {
                // the epilogue buffer is free once the last TMA store has read it
                mbar_wait(sh.rempty_bar + 8 * eb, ((rphases >> eb) & 1u) ^ 1u);
                stage_residual(ebuf, rfb, tm.r, tm.r2, m0, n0);
                rphases ^= 1u << eb;
            }
        }
        if constexpr (EPI_RING) {
            const ProducerRing r = producer_ring_residual(sh, tm, ProducerRing{stage, phase, rphases}, rfb, m0, n0);
            stage = r.stage, phase = r.phase, rphases = r.rphases;
        }
    }
}

#endif  // SM90_PRODUCER_CUH
