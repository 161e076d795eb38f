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
// PINGPONG (sm90/consumer_pingpong.cuh; the producer's alternation of epilogue buffers and residual
// barriers between the consumers: sm90/producer.cuh): here, the consumers' two turn barriers.
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
// HALF_TAIL (ping-pong: sm90/consumer_pingpong.cuh; the producer's 64-row A loads of a half tile:
// sm90/producer.cuh): here, its tensor maps.
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
// The parts, each a header under sm90/ that compiles alone (tests/unit/test_sm90_headers_alone.py):
// config.cuh (the defines checked and the tile geometry), ptx.cuh (mbarrier, TMA and cluster PTX),
// wgmma.cuh (the wgmma wrappers), epilogue.cuh (the epilogue buffer, the residual's staging),
// scheduler.cuh (the persistent tile sequence and the stream-K workspace), params.cuh (what this
// kernel hands its warpgroups), producer.cuh (the producer warpgroup) and the consumers of the
// plan's schedule: consumer_cooperative.cuh or consumer_pingpong.cuh, rendered at `#include
// CONSUMER_BODY` below, each built of mainloop.cuh (the k-block loop and its drain),
// streamk_fixup.cuh, epilogue_write.cuh (R + accumulators into the buffer) and epilogue_store.cuh
// (its TMA stores). This file: the kernel's set-up and its split into warpgroups. The codegen
// (sm90/codegen.py) prepends the plan's #defines and vec16.cuh (16-bit <-> fp32 conversions,
// VEC_DTYPE = DT, 2 for fp32 data), appends side_kernels.cuh (fusion off's residual add, 3xTF32's
// split) and inlines each #include once (kernels/include_once.py), so NVRTC compiles one source, on
// a machine without the CUDA toolkit too.

#include "sm90/config.cuh"
#include "sm90/ptx.cuh"
#include "sm90/wgmma.cuh"
#include "sm90/epilogue.cuh"
#include "sm90/scheduler.cuh"
#include "sm90/params.cuh"
#include "sm90/producer.cuh"
// the consumer warpgroups (consumer_warpgroups) of the plan's schedule: sm90/consumer_cooperative.cuh
// or sm90/consumer_pingpong.cuh, as the plan's pingpong says
#include CONSUMER_BODY

// The kernel's tensor maps (its parameters) as the warpgroups take them: their addresses, taken in
// each warpgroup's branch, where it first uses them.
#if HALF_TAIL
#define HALF_TAIL_MAPS TMAP_ADDR(tm_ah), TMAP_ADDR(tm_outh), TMAP_ADDR(tm_out2h)
#else
#define HALF_TAIL_MAPS 0ull, 0ull, 0ull
#endif
#if DT == 3
#define LOW_PART_MAPS TMAP_ADDR(tm_alo), TMAP_ADDR(tm_wlo)
#else
#define LOW_PART_MAPS 0ull, 0ull
#endif
#define KERNEL_MAPS                                                                                         \
    Sm90Maps{TMAP_ADDR(tm_a), TMAP_ADDR(tm_w), LOW_PART_MAPS, TMAP_ADDR(tm_r), TMAP_ADDR(tm_out),               \
             TMAP_ADDR(tm_r2), TMAP_ADDR(tm_out2), HALF_TAIL_MAPS}

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
    const Sm90Shared sh = shared_layout((smem_u32(smem_raw) + 1023u) & ~1023u);  // swizzle atoms need 1024 B
    Sm90Problem pb;
    pb.M = M;
    pb.N = N;
    pb.K = K;
    pb.num_m = (M + BM - 1) / BM;
    pb.num_n = (N + BN - 1) / BN;
    pb.num_tiles = ((pb.num_m + MC - 1) / MC) * ((pb.num_n + NC - 1) / NC);  // schedule tiles
    pb.rank = 0u;  // this CTA's rank in its cluster
    if constexpr (CL > 1) pb.rank = cluster_rank();
    pb.kb_k = (K + BK - 1) / BK;             // k-blocks of one product (3xTF32: three products)
    pb.num_kb = DT == 3 ? 3 * pb.kb_k : pb.kb_k;
    pb.dp_tiles = clamp_dp_tiles(dp_tiles, pb.num_tiles);

    const int wg = __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0);  // warp-uniform (CUTLASS idiom)
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(sh.full_bar + 8 * s, 1);
            // lane 0 of each warp using it, in every CTA of the cluster
            mbar_init(sh.empty_bar + 8 * s, (TILE_THREADS / 128) * 4 * CL);
        }
        for (int e = 0; e < EPI_BARS; ++e) {
            mbar_init(sh.rfull_bar + 8 * e, 1);
            mbar_init(sh.rempty_bar + 8 * e, 1);
        }
        if constexpr (PINGPONG) {
            mbar_init(sh.turn_bar, 1);
            mbar_init(sh.turn_bar + 8, 1);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if constexpr (PDL_WAIT) {
        // launched with programmatic dependent launch (the decode tiles: engine/backends/pdl.py), the
        // set-up above overlapped the end of the kernel before; every thread waits for it to finish
        // before its first global access (the tensor-map prefetches read the parameters only)
        asm volatile("griddepcontrol.wait;" ::: "memory");
    }
    if constexpr (CL > 1) {
        cluster_sync();  // the peer's barriers are initialised before any multicast or remote arrive
    } else {
        __syncthreads();
    }

    Sched sched;
    sched_init(sched, pb.dp_tiles, pb.num_tiles, pb.num_kb);
    if (wg == 0) {
        // ---------------- producer warpgroup ----------------
        if constexpr (NUM_CONSUMERS > 1) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (threadIdx.x == 0) producer_thread(sh, KERNEL_MAPS, pb, sched);
    } else {
        // ---------------- consumer warpgroups ----------------
        // (one consumer warpgroup: 256 threads leave every warp enough registers as launched)
        if constexpr (NUM_CONSUMERS > 1) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        consumer_warpgroups(sh, KERNEL_MAPS, pb, sched, wg, (threadIdx.x % 128) / 32, threadIdx.x % 32);
    }
    if constexpr (CL > 1) cluster_sync();  // no CTA leaves while its peer may still arrive on its barriers
}
