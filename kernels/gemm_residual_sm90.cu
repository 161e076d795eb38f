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
// CLUSTER x CLUSTER_N clusters (CM x CN, each 1 or 2; __cluster_dims__(CM * CN)): the CTAs of a
// cluster run a CM x CN block of adjacent tiles. CTA rank r sits at row rm = r % CM, column
// rn = r / CM. The CTAs of one column (same rn) share their W tile: each loads BN/CM of its rows
// and multicasts them into the slots of that column (TMA .multicast::cluster); the CTAs of one row
// (same rm) share their A tile the same way (BM/CN rows each). So W's L2->SM traffic divides by
// CM and A's by CN. A slot is refilled only when every CTA it was written into has released it:
// each consumer warp arrives on the empty barrier of every CTA in its row and its column (remote
// arrive through mapa; CM + CN - 1 CTAs, itself included). All CTAs of a cluster walk the same
// sequence of tile blocks (data-parallel only: no stream-K); a block reaching past M or N holds
// tiles wholly outside (TMA zero-fills their loads and clips their stores). A cluster barrier after
// the mbarrier init and one before exit keep remote arrivals inside the peers' lifetime.
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
// The Python spec prepends the knobs as #defines of validated integers:
//   BM, BN, BK (64 16-bit or 32 fp32 elements: 128 bytes), STAGES, NUM_CONSUMERS, DT (0 bf16,
//   1 fp16, 2 tf32, 3 fp32 by 3xTF32), FUSE, TMAP_GLOBAL, STREAMK, WS_TILES,
//   PINGPONG, CLUSTER, CLUSTER_N, SPLIT_HI (DT 3); where set, SPLIT_N, EPI_RING, EPI_RING_REUSE,
//   EPI_SHARED and the measurement options below.
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
// The spec then prepends vec16.cuh (16-bit <-> fp32 conversions) with VEC_DTYPE = DT (2 for fp32 data).
// No headers: NVRTC compiles this on a machine without the CUDA toolkit.

#if !defined(BM) || !defined(BN) || !defined(BK) || !defined(STAGES) || !defined(NUM_CONSUMERS)
#error "the spec must define BM, BN, BK, STAGES, NUM_CONSUMERS"
#endif
#ifndef STREAMK
#define STREAMK 0
#endif
#ifndef WS_TILES
#define WS_TILES 264
#endif
#ifndef PINGPONG
#define PINGPONG 0
#endif
#ifndef CLUSTER
#define CLUSTER 1
#endif
#ifndef CLUSTER_N
#define CLUSTER_N 1
#endif
#define MC CLUSTER      // CTAs a W k-block is multicast to (one cluster column)
#define NC CLUSTER_N    // CTAs an A k-block is multicast to (one cluster row)
#define CL (MC * NC)    // CTAs per cluster
#if (CLUSTER != 1 && CLUSTER != 2) || (CLUSTER_N != 1 && CLUSTER_N != 2)
#error "CLUSTER and CLUSTER_N must be 1 or 2"
#endif
#if CL > 1 && STREAMK
#error "the cluster schedule is data-parallel only (STREAMK 0)"
#endif
#ifndef HALF_TAIL
#define HALF_TAIL 0
#endif
#ifndef DT
#define DT 0
#endif
#define IS_BF16 (DT == 0)
#define ELEM (DT >= 2 ? 4 : 2)   // bytes per element of A, W, R and out
#if BK * ELEM != 128
#error "BK must fill one 128-byte swizzle row: 64 16-bit or 32 fp32 elements"
#endif
#define KSTEPS 4                  // wgmma k-steps of 32 bytes per k-block (k16, or k8 for tf32)
#ifndef SPLIT_N
#define SPLIT_N 0
#endif
#if BN != 80 && BN != 128 && BN != 144 && BN != 160 && BN != 192 && BN != 200 && BN != 208 && \
    BN != 256 && !(BN == 320 && SPLIT_N) && !(SWAP_AB && BN % 8 == 0 && BN >= 128 && BN <= 200)
#error "BN must be 80, 128, 144, 160, 192, 208 or 256 (320 with SPLIT_N; 128-200 in steps of 8 with SWAP_AB)"
#endif
// 144, 192 and 208 (16-bit data): widths that fit N = 2560 into fewer N blocks (18, 14, 13) where a
// round of 128-wide or 160-wide tiles would be left nearly empty (the FIT tiles of the Python module)
#if (BN == 144 || BN == 192 || BN == 208) && ELEM != 2
#error "BN = 144, 192, 208 take 16-bit data only"
#endif
// SWAP_AB (the Python module's SWAP_TILES, ADR-0007): the kernel runs the transposed
// product out^T = W A^T, so its M is the problem's N and its N the problem's M: tm_a maps W (BM = 128
// rows of N a tile), tm_w maps A (BN rows of M, any width a wgmma takes), and the kernel's M, N
// arguments are the problem's N, M. R and out stay [M, N] row-major: the epilogue tile is R's natural
// BN x BM box (BM / 64 chunks of BN rows x 128 bytes), which each thread reads and writes at its
// accumulators' transposed positions. Cooperative, data-parallel, 16-bit data only; clusters as unswapped
// (2x1 multicasts the kernel's W, here the problem's A; measured slower, so no default uses them).
// SWAP_AB appears in #if lines above its default below: an undefined macro reads 0 there.
#ifndef SWAP_AB
#define SWAP_AB 0
#endif
#if SWAP_AB && (PINGPONG || STREAMK || ELEM != 2 || BM != 128 || SPLIT_N)
#error "SWAP_AB: cooperative, data-parallel 128-row tiles, 16-bit data"
#endif
#if (BN == 200 || BN == 136 || BN == 152 || BN == 168 || BN == 176 || BN == 184) && !SWAP_AB
#error "BN = 136, 152, 168, 176, 184, 200 (an 8-column tail) only with SWAP_AB (BN runs along the problem's M)"
#endif
#if SPLIT_N && (ELEM != 2 || PINGPONG)
#error "SPLIT_N: cooperative consumers, 16-bit data"
#endif
#if BN == 80 && ELEM != 2
#error "BN = 80 (a 16-column epilogue tail chunk) takes 16-bit data only"
#endif

#ifndef PROMOTE
#define PROMOTE 0
#endif
#if PROMOTE && (DT != 3 || (BM / NUM_CONSUMERS) * BN > 64 * 160 || PINGPONG)
#error "PROMOTE: fp32 (DT 3), cooperative, at most 64 x 160 accumulators per warpgroup (2 sets)"
#endif

#if PINGPONG
#if NUM_CONSUMERS != 2
#error "ping-pong needs two consumer warpgroups"
#endif
#if BM * BN > 20480
#error "ping-pong: a consumer holds the whole tile, at most 160 fp32 accumulators per thread"
#endif
#define WG_M BM
#define WG_N BN
#define TILE_THREADS 128
#define EPI_BARS 2   // residual full / empty barriers: one pair per consumer
#elif SPLIT_N
// SPLIT_N (cooperative): the consumers split the tile's columns, not its rows: consumer c owns all
// BM rows of columns [c * WG_N, (c + 1) * WG_N), the wgmma's B operand offset by c * WG_N W rows
// (128x320: two consumers of 128x160, each two m64n160k16 per k16, as a ping-pong 128x160 consumer).
// The wide tile reads fewer operand bytes per output from the L2 (ADR-0007).
#if NUM_CONSUMERS != 2 || (BN / 2) % 16 != 0 || (BN / 2) > 256 || BM > 128
#error "SPLIT_N: two consumers of BM <= 128 rows x BN / 2 columns"
#endif
#define WG_M BM
#define WG_N (BN / NUM_CONSUMERS)
#define TILE_THREADS (NUM_CONSUMERS * 128)
#define EPI_BARS 1
#else
#define WG_M (BM / NUM_CONSUMERS)
#define WG_N BN
#define TILE_THREADS (NUM_CONSUMERS * 128)
#define EPI_BARS 1
#endif
// EPI_SHARED (ping-pong): the two consumers share one epilogue buffer instead of one
// each, which buys the ring one stage more (128x128: 6 stages; 128x160: 5). Their epilogues never
// overlap (each runs while the other consumer's main loop does), so item i's R is staged once item
// i - 1's TMA store has read the buffer: the producer probes for that at every k-block from the
// usual issue point on, without waiting (the other consumer's epilogue may still run while this
// item's k-blocks must flow), and waits only at the item's last k-block. Measured 1.5-2 % slower
// than two buffers at the same depth, the deeper ring not buying it back: R lands later in the item
// (ADR-0007), so it runs only where a stage count needs it, never by default.
#ifndef EPI_SHARED
#define EPI_SHARED 0
#endif
// The k-block of each item after which the producer stages its R (measurement option; the default,
// STAGES, measured best: ADR-0007)
#ifndef R_ISSUE_KB
#define R_ISSUE_KB STAGES
#endif
#if EPI_SHARED && !PINGPONG
#error "EPI_SHARED: ping-pong consumers"
#endif
#if HALF_TAIL && (!PINGPONG || CL > 1 || STREAMK || ELEM != 2 || BM != 128 || EPI_SHARED)
#error "HALF_TAIL: unclustered data-parallel ping-pong 128-row tiles with 16-bit data, two epilogue buffers"
#endif
#define EPI_BUFS (EPI_BARS - EPI_SHARED)  // epilogue buffers in shared memory
#define M_ITERS (WG_M / 64)
#define ACC_N (WG_N / 2)
#define THREADS (128 * (NUM_CONSUMERS + 1))
#define A_TILE_BYTES (BM * BK * ELEM)
#define B_TILE_BYTES (BN * BK * ELEM)
#define STAGE_BYTES (A_TILE_BYTES + B_TILE_BYTES)
#define B_PART_BYTES (B_TILE_BYTES / MC)   // the W rows one CTA loads (and multicasts)
#define A_PART_BYTES (A_TILE_BYTES / NC)   // the A rows one CTA loads (and multicasts)
// a TMA box has at most 256 rows: an unclustered 320-row W tile is loaded as two boxes of 160
#define W_BOXES ((BN / MC) > 256 ? 2 : 1)
#if MC > 1 && (BN / MC) > 256
#error "a CTA's multicast share of W must fit one TMA box (<= 256 rows)"
#endif
#ifndef MC_SHARE_ROWS
#define MC_SHARE_ROWS 8  // a probe may set 4 (gemm_residual_sm90.MC_SHARE_ROWS) to test mid-atom parts
#endif
#if (BN / MC) % MC_SHARE_ROWS != 0 || (BM / NC) % MC_SHARE_ROWS != 0
#error "a multicast part must hold whole 8-row swizzle atoms (1024-byte aligned in the slot)"
#endif

#if WG_M % 64 != 0
#error "each consumer warpgroup needs a multiple of 64 rows"
#endif

#if DT == 2 || DT == 3
#define WG_AB "tf32"
#define WG_K "8"
#define WG_IMM "1, 1"          // scale-a, scale-b (tf32 takes no transpose immediates)
#elif DT == 0
#define WG_AB "bf16"
#define WG_K "16"
#define WG_IMM "1, 1, 0, 0"    // scale-a, scale-b, both K-major (no transpose)
#else
#define WG_AB "f16"
#define WG_K "16"
#define WG_IMM "1, 1, 0, 0"
#endif

struct __align__(64) TmaDesc {
    unsigned long long v[16];
};

#if TMAP_GLOBAL
#define TMAP_PARAM(name) const TmaDesc* __restrict__ name
#define TMAP_ADDR(name) ((unsigned long long)(name))
#else
#define TMAP_PARAM(name) const __grid_constant__ TmaDesc name
#define TMAP_ADDR(name) ((unsigned long long)(&name))
#endif

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    unsigned long long a;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
    return (unsigned)a;
}

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// MBAR_SUSPEND_NS (a measurement option): the try_wait's suspend-time hint, so that a waiting
// thread sleeps up to that long for the phase instead of the system's default before it polls again.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
#ifdef MBAR_SUSPEND_NS
        asm volatile(
            "{\n.reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity), "n"(MBAR_SUSPEND_NS)
            : "memory");
#else
        asm volatile(
            "{\n.reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
#endif
    } while (!done);
}

// Has the phase of `parity` completed? (no waiting)
__device__ __forceinline__ bool mbar_test(unsigned bar, unsigned parity) {
    unsigned done;
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    return done != 0;
}

__device__ __forceinline__ void tma_load_2d(unsigned dst, unsigned long long tmap, int c0, int c1,
                                            unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
        "l"(tmap), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

#if CL > 1
// The same TMA load, written to the same shared-memory offset of every CTA in `mask` and
// completing bytes on each one's mbarrier at `bar`'s offset.
__device__ __forceinline__ void tma_load_2d_mc(unsigned dst, unsigned long long tmap, int c0, int c1,
                                               unsigned bar, unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
        "l"(tmap), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
        : "memory");
}

// Arrive on the mbarrier at local address `bar` of the cluster's CTA `rank` (itself included).
// Default semantics (release, CTA scope), as CUTLASS's ClusterBarrier: the slot's readers are the
// wgmma that wgmma.wait_group has already retired, so no cluster-scope fence is needed (the
// .release.cluster form made every k-block 0.2-0.4 us slower on the H200).
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned rank) {
    asm volatile(
        "{\n.reg .b32 ra;\n"
        "mapa.shared::cluster.u32 ra, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(bar),
        "r"(rank)
        : "memory");
}

__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}
#endif

// A consumer warp frees a pipeline slot: lane 0 arrives; with a cluster, lane r for each CTA r
// that writes into this CTA's slots (the same cluster row rm or column rn as this one).
__device__ __forceinline__ void release_slot(unsigned bar, int lane, unsigned rm, unsigned rn) {
#if CL > 1
#if MC == 1 || NC == 1
    (void)rm;
    (void)rn;
    if (lane < CL) mbar_arrive_cluster(bar, (unsigned)lane);  // one row or column: every CTA
#else
    if (lane < CL && ((unsigned)lane % MC == rm || (unsigned)lane / MC == rn))
        mbar_arrive_cluster(bar, (unsigned)lane);
#endif
#else
    (void)rm;
    (void)rn;
    if (lane == 0) mbar_arrive(bar);
#endif
}

#if EPI_RING_REUSE
// One thread frees a pipeline slot for all the tile's consumer warps: an arrival count of
// TILE_THREADS / 32 on the slot's empty barrier in this CTA and, with a cluster, in every CTA that
// writes into this slot (the same cluster row or column), as release_slot's warps would.
__device__ __forceinline__ void release_slot_all(unsigned bar, unsigned rm, unsigned rn) {
#if CL > 1
#pragma unroll
    for (unsigned r = 0; r < CL; ++r) {
        if (MC == 1 || NC == 1 || r % MC == rm || r / MC == rn) {
            asm volatile(
                "{\n.reg .b32 ra;\n"
                "mapa.shared::cluster.u32 ra, %0, %1;\n"
                "mbarrier.arrive.shared::cluster.b64 _, [ra], %2;\n}\n" ::"r"(bar),
                "r"(r), "n"(TILE_THREADS / 32)
                : "memory");
        }
    }
#else
    (void)rm;
    (void)rn;
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "n"(TILE_THREADS / 32)
                 : "memory");
#endif
}
#endif

// wgmma shared-memory descriptor for a K-major tile written by TMA with 128B swizzle: rows of 128
// bytes, 8-row (1024-byte) swizzle atoms stacked along M/N. Split at bit 32: the low word holds
// the address field (addr >> 4, 14 bits) and LBO (1: unused for swizzled K-major), the high word
// SBO (1024 >> 4) and the mode (bit 62: 128B swizzle), a constant. Shared memory is < 256 KB, so
// a tile offset (>> 4) adds to the low word without leaving the address field: one uniform add
// per wgmma instead of rebuilding the descriptor (the main loop's SASS for ping-pong 128x128: 56
// instructions per k-block and warp instead of 120).
__device__ __forceinline__ unsigned desc_lo(unsigned saddr) {
    return ((saddr & 0x3FFFF) >> 4) | (1u << 16);
}
#define DESC_HI ((1024u >> 4) | (1u << 30))
__device__ __forceinline__ unsigned long long desc64(unsigned lo) {
    return ((unsigned long long)DESC_HI << 32) | lo;
}

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_reg(float& r) {
    asm volatile("" : "+f"(r)::"memory");
}

// The accumulator operands of a wgmma, 8 at a time: "+f"(d[b]) ... "+f"(d[b + 7]).
#define WG_ACC8(b)                                                                              \
    "+f"(d[b]), "+f"(d[b + 1]), "+f"(d[b + 2]), "+f"(d[b + 3]), "+f"(d[b + 4]), "+f"(d[b + 5]), \
        "+f"(d[b + 6]), "+f"(d[b + 7])
#define WG_ACC_40 WG_ACC8(0), WG_ACC8(8), WG_ACC8(16), WG_ACC8(24), WG_ACC8(32)
#define WG_ACC_64 \
    WG_ACC8(0), WG_ACC8(8), WG_ACC8(16), WG_ACC8(24), WG_ACC8(32), WG_ACC8(40), WG_ACC8(48), WG_ACC8(56)
#define WG_ACC_80 WG_ACC_64, WG_ACC8(64), WG_ACC8(72)
#define WG_ACC_72 WG_ACC_64, WG_ACC8(64)
#define WG_ACC_96 WG_ACC_64, WG_ACC8(64), WG_ACC8(72), WG_ACC8(80), WG_ACC8(88)
#define WG_ACC_104 WG_ACC_64, WG_ACC8(64), WG_ACC8(72), WG_ACC8(80), WG_ACC8(88), WG_ACC8(96)
#define WG_ACC4(b) "+f"(d[b]), "+f"(d[b + 1]), "+f"(d[b + 2]), "+f"(d[b + 3])
#define WG_ACC_100 WG_ACC_96, WG_ACC4(96)
#define WG_ACC_68 WG_ACC_64, WG_ACC4(64)
#define WG_ACC_76 WG_ACC_72, WG_ACC4(72)
#define WG_ACC_84 WG_ACC_80, WG_ACC4(80)
#define WG_ACC_88 WG_ACC_80, WG_ACC8(80)
#define WG_ACC_92 WG_ACC_88, WG_ACC4(88)
#define WG_ACC_128 \
    WG_ACC_64, WG_ACC8(64), WG_ACC8(72), WG_ACC8(80), WG_ACC8(88), WG_ACC8(96), WG_ACC8(104), \
        WG_ACC8(112), WG_ACC8(120)

// ... and their names in the instruction's template ("%0, %1, ..."): the accumulators, then the two
// descriptors and the scale-d predicate follow in the wrapper.
#define WG_R40                                                                        \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "           \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39"
#define WG_R64                                                                            \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "               \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "     \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "     \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WG_R80 WG_R64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
#define WG_R72 WG_R64 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define WG_R96 WG_R80 ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define WG_R104 WG_R96 ", %96, %97, %98, %99, %100, %101, %102, %103"
#define WG_R100 WG_R96 ", %96, %97, %98, %99"
#define WG_R68 WG_R64 ", %64, %65, %66, %67"
#define WG_R76 WG_R72 ", %72, %73, %74, %75"
#define WG_R84 WG_R80 ", %80, %81, %82, %83"
#define WG_R88 WG_R80 ", %80, %81, %82, %83, %84, %85, %86, %87"
#define WG_R92 WG_R88 ", %88, %89, %90, %91"
#define WG_R128                                                                                    \
    WG_R80 ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "    \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

// wgmma_m64n<N>k16(d, desc_a, desc_b, scale_d): one wgmma of a 64 x N tile into NACC = N / 2
// accumulators per thread; the descriptors and the scale-d predicate are operands NACC, NACC + 1
// and NACC + 2 of the instruction's template.
#define DEFINE_WGMMA(N, NACC, IA, IB, IP, RLIST, ACCLIST)                                         \
    __device__ __forceinline__ void wgmma_m64n##N##k16(float (&d)[NACC], unsigned long long da,  \
                                                      unsigned long long db, int scale_d) {    \
        asm volatile(                                                                           \
            "{\n.reg .pred p;\n"                                                                \
            "setp.ne.b32 p, %" #IP ", 0;\n"                                                     \
            "wgmma.mma_async.sync.aligned.m64n" #N "k" WG_K ".f32." WG_AB "." WG_AB " "          \
            "{" RLIST "}, %" #IA ", %" #IB ", p, " WG_IMM ";\n}\n"                                \
            : ACCLIST                                                                           \
            : "l"(da), "l"(db), "r"(scale_d));                                                  \
    }
DEFINE_WGMMA(256, 128, 128, 129, 130, WG_R128, WG_ACC_128)
DEFINE_WGMMA(128, 64, 64, 65, 66, WG_R64, WG_ACC_64)
DEFINE_WGMMA(160, 80, 80, 81, 82, WG_R80, WG_ACC_80)
DEFINE_WGMMA(80, 40, 40, 41, 42, WG_R40, WG_ACC_40)
// the widths only some builds take: defined (and named WGMMA) where this build's WG_N is one
#if WG_N == 144
DEFINE_WGMMA(144, 72, 72, 73, 74, WG_R72, WG_ACC_72)
#define WGMMA wgmma_m64n144k16
#elif WG_N == 192
DEFINE_WGMMA(192, 96, 96, 97, 98, WG_R96, WG_ACC_96)
#define WGMMA wgmma_m64n192k16
#elif WG_N == 208
DEFINE_WGMMA(208, 104, 104, 105, 106, WG_R104, WG_ACC_104)
#define WGMMA wgmma_m64n208k16
#elif WG_N == 200
DEFINE_WGMMA(200, 100, 100, 101, 102, WG_R100, WG_ACC_100)
#define WGMMA wgmma_m64n200k16
#elif WG_N == 136
DEFINE_WGMMA(136, 68, 68, 69, 70, WG_R68, WG_ACC_68)
#define WGMMA wgmma_m64n136k16
#elif WG_N == 152
DEFINE_WGMMA(152, 76, 76, 77, 78, WG_R76, WG_ACC_76)
#define WGMMA wgmma_m64n152k16
#elif WG_N == 168
DEFINE_WGMMA(168, 84, 84, 85, 86, WG_R84, WG_ACC_84)
#define WGMMA wgmma_m64n168k16
#elif WG_N == 176
DEFINE_WGMMA(176, 88, 88, 89, 90, WG_R88, WG_ACC_88)
#define WGMMA wgmma_m64n176k16
#elif WG_N == 184
DEFINE_WGMMA(184, 92, 92, 93, 94, WG_R92, WG_ACC_92)
#define WGMMA wgmma_m64n184k16
#elif WG_N == 256
#define WGMMA wgmma_m64n256k16
#elif WG_N == 160
#define WGMMA wgmma_m64n160k16
#elif WG_N == 80
#define WGMMA wgmma_m64n80k16
#else
#define WGMMA wgmma_m64n128k16
#endif

// pack2 / unpack2 (fp32 pair <-> packed 16-bit pair, rounded to nearest even): vec16.cuh.

__device__ __forceinline__ void tma_store_2d(unsigned long long tmap, int c0, int c1, unsigned src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(tmap),
                 "r"(c0), "r"(c1), "r"(src)
                 : "memory");
}

__device__ __forceinline__ unsigned ld_shared_u32(unsigned addr) {
    unsigned v;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
    return v;
}

__device__ __forceinline__ void st_shared_u32(unsigned addr, unsigned v) {
    asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}

#if SWAP_AB
// Four (two) 8x8 16-bit matrices of R's natural tile, transposed on the way: lanes 8i..8i+7 give
// the addresses of matrix i's eight rows (16 bytes each); each lane's register i is then the pair
// (column lane / 4, rows 2 (lane % 4) and + 1) of matrix i: an accumulator fragment's position.
__device__ __forceinline__ void ldsm_x4_trans(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2,
                                              unsigned& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr)
                 : "memory");
}
__device__ __forceinline__ void ldsm_x2_trans(unsigned addr, unsigned& r0, unsigned& r1) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                 : "=r"(r0), "=r"(r1)
                 : "r"(addr)
                 : "memory");
}
// ... and back: the inverse of ldsm_x4_trans / ldsm_x2_trans at the same addresses.
__device__ __forceinline__ void stsm_x4_trans(unsigned addr, unsigned r0, unsigned r1, unsigned r2,
                                              unsigned r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr),
                 "r"(r0), "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}
__device__ __forceinline__ void stsm_x2_trans(unsigned addr, unsigned r0, unsigned r1) {
    asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};" ::"r"(addr), "r"(r0),
                 "r"(r1)
                 : "memory");
}
#endif

__device__ __forceinline__ float2 ld_shared_f2(unsigned addr) {
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr) : "memory");
    return v;
}

__device__ __forceinline__ void st_shared_f2(unsigned addr, float a, float b) {
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(a), "f"(b) : "memory");
}

// The epilogue tile (R in, out back) lives in shared memory as BN/64 column chunks of
// BM rows x 128 bytes, 128B-swizzled like the TMA boxes that fill and drain it: a fragment
// pair (row, col) sits at chunk col/64, row*128 + (((col%64)/8) ^ (row%8))*16 + (col%8)*2,
// so the 8 rows x 4 pairs of one warp access hit 32 distinct banks.
// tf32 (fp32 R and out): the same 128-byte swizzled chunks of 32 columns; a thread's pair (8 bytes)
// at chunk col/32, row*128 + ((((col%32)/4) ^ (row%8)) << 4) + (col%4)*4.
#define EPI_COLS (128 / ELEM)
#if SWAP_AB
// R's natural box: BM / 64 chunks (64 of the problem's N columns each) of BN rows (its M) x 128 bytes
#define EPI_CHUNKS (BM / EPI_COLS)
#define EPI_CHUNK_BYTES (BN * 128)
#else
#define EPI_CHUNKS (BN / EPI_COLS)
#define EPI_CHUNK_BYTES (BM * 128)
#endif
#define EPI_BYTES (BM * BN * ELEM)
// A tail chunk with 16-bit data (its own tensor maps: tm_r2 / tm_out2) of TB = EPI_TAIL_BYTES per
// row, swizzled at its own width (CUTLASS Swizzle<log2(TB/16), 4, 3>: the 16-byte unit XOR address
// bits 7..): BN = 160: 32 columns, 64B swizzle, pair (row, 128 + c) at
// tail + row*64 + (((c/8) ^ ((row/2)%4)) << 4) + (c%8)*2; BN = 80: 16 columns, 32B swizzle,
// pair (row, 64 + c) at tail + row*32 + (((c/8) ^ ((row/4)%2)) << 4) + (c%8)*2.
#if SWAP_AB
#define EPI_TAIL_COLS 0
#else
#define EPI_TAIL_COLS (BN % EPI_COLS)
#endif
#define EPI_TAIL_BYTES (EPI_TAIL_COLS * ELEM)
#if EPI_TAIL_COLS != 0 && EPI_TAIL_COLS * 2 != EPI_COLS && EPI_TAIL_COLS * 4 != EPI_COLS
#error "the epilogue's tail chunk must be half or a quarter of a chunk"
#endif
#define EPI_TAIL (EPI_CHUNKS * EPI_CHUNK_BYTES)   // offset of the tail chunk in the buffer
#define EPI_TAIL_ROW_SHIFT (EPI_TAIL_BYTES == 32 ? 2 : 1)      // log2(rows per 128-byte line)
#define EPI_TAIL_SW_MASK (EPI_TAIL_BYTES ? EPI_TAIL_BYTES / 16 - 1 : 0)  // 16-byte units per row - 1

// EPI_RING (cooperative, data-parallel, 16-bit data; the default where one data-parallel tile per
// CTA has a stage count that needs it, build() and ring_stage_options in the Python module): no
// epilogue buffer of its own, so the ring gets its shared memory (a deeper pipeline). After its last
// k-block the producer acquires the next ring slots in order, as if for more k-blocks, until
// EPI_RING_SLOTS adjacent slots are free (the ones the consumers released first), and stages R
// there; the consumers find the same slots from their own ring position after the main loop.
#ifndef EPI_RING
#define EPI_RING 0
#endif
#if EPI_RING
#define EPI_RING_SLOTS ((EPI_BYTES + STAGE_BYTES - 1) / STAGE_BYTES)
#if PINGPONG || STREAMK || EPI_RING_SLOTS > STAGES
#error "EPI_RING: cooperative, data-parallel, and a ring of at least the epilogue's size"
#endif
// EPI_RING_REUSE (a CTA may get more than one tile): the ring goes on after the epilogue, so its
// slots come back: slots skipped to find adjacent ones are released by every consumer warp at once;
// the slots holding the tile by the storer thread once the TMA store has read them (for every
// consumer warp: an arrival count), deferred to the next tile's first k-block where the ring has
// room for the next tile's first k-blocks beside them (EPI_RING_DEFER), else at once. Two barrier
// rules keep the parities true (both found on the H200): the producer arrives on
// the full barrier of every slot it takes for R or skips (no k-block completes its phase that
// round, and the consumers step over it), and it stages the next tile's R only once every tile
// thread is past its wait for the previous one (the residual-empty barrier, arrived on after the
// epilogue's named barrier)
#ifndef EPI_RING_REUSE
#define EPI_RING_REUSE 0
#endif
#define EPI_RING_DEFER (STAGES >= 2 * EPI_RING_SLOTS)
// the first of the slots holding the epilogue tile, from the ring position after the main loop
__device__ __forceinline__ int epi_ring_first(int stage) {
    return stage + EPI_RING_SLOTS <= STAGES ? stage : 0;
}
#if EPI_RING_REUSE
// The storer frees the EPI_RING_SLOTS slots from `first` on, once the TMA store has read them.
__device__ __forceinline__ void release_epi_slots(unsigned empty_bar, int first, unsigned rm, unsigned rn) {
#pragma unroll
    for (int i = 0; i < EPI_RING_SLOTS; ++i) release_slot_all(empty_bar + 8 * (first + i), rm, rn);
}
#endif
#endif

// The producer's staging of R's BM x BN tile into the epilogue buffer at `buf` (its 128-byte
// chunks, then the tail chunk through its own map), completing on `bar`; fusion off: the barrier
// just flips. A macro, not a function: the same tokens in place keep every build's cubin (an
// inline helper changed the fp32 builds' register allocation)
#if EPI_TAIL_COLS
#define STAGE_RESIDUAL_TAIL(buf, bar) \
    tma_load_2d((buf) + EPI_TAIL, TMAP_ADDR(tm_r2), n0 + EPI_CHUNKS * EPI_COLS, m0, bar);
#else
#define STAGE_RESIDUAL_TAIL(buf, bar)
#endif
#if FUSE && SWAP_AB
// the box at the problem's (row n0, column m0): the kernel's n0 is its M offset, m0 its N offset
#define STAGE_RESIDUAL(buf, bar)                                                              \
    mbar_expect_tx(bar, EPI_BYTES);                                                           \
    _Pragma("unroll") for (int c = 0; c < EPI_CHUNKS; ++c) {                                  \
        tma_load_2d((buf) + c * EPI_CHUNK_BYTES, r_map, m0 + c * EPI_COLS, n0, bar);           \
    }
#elif FUSE
#define STAGE_RESIDUAL(buf, bar)                                                              \
    mbar_expect_tx(bar, EPI_BYTES);                                                           \
    _Pragma("unroll") for (int c = 0; c < EPI_CHUNKS; ++c) {                                  \
        tma_load_2d((buf) + c * EPI_CHUNK_BYTES, r_map, n0 + c * EPI_COLS, m0, bar);           \
    }                                                                                         \
    STAGE_RESIDUAL_TAIL(buf, bar)
#else
#define STAGE_RESIDUAL(buf, bar) mbar_arrive(bar);
#endif

// Shared address of a thread's 16-bit pair j (columns 8j + 2(lane%4)) in its row of the epilogue
// buffer: 128B-swizzled 64-column chunks, then the tail chunk swizzled at its width.
__device__ __forceinline__ unsigned epi_addr(unsigned row_addr, unsigned tail_addr, int j, int sw,
                                             int sw_tail) {
    if (EPI_TAIL_COLS && j >= EPI_CHUNKS * 8) return tail_addr + (((j - EPI_CHUNKS * 8) ^ sw_tail) << 4);
    return row_addr + (j / 8) * EPI_CHUNK_BYTES + (((j % 8) ^ sw) << 4);
}


#if STREAMK
// fp32 partial sums of the split tiles, in the consumers' fragment order (float4 q of tile
// thread t at [q][t]: coalesced; a tile's threads are its consumer warpgroup(s)), and per-slot k-block counters. Zero at module load; every
// launch leaves them zero again (the finishing CTA clears its slot).
__device__ float4 sk_ws[WS_TILES * BM * BN / 4];
__device__ unsigned sk_cnt[WS_TILES];

__device__ __forceinline__ void red_add_v4(float4* p, float a, float b, float c, float d) {
    asm volatile("red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(a), "f"(b),
                 "f"(c), "f"(d)
                 : "memory");
}
__device__ __forceinline__ float4 ld_cg_v4(const float4* p) {
    float4 v;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p)
                 : "memory");
    return v;
}
__device__ __forceinline__ void st_cg_zero_v4(float4* p) {
    asm volatile("st.global.cg.v4.f32 [%0], {%1, %1, %1, %1};" ::"l"(p), "f"(0.0f) : "memory");
}
__device__ __forceinline__ void fence_gpu() {
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
}
__device__ __forceinline__ unsigned atom_add_acq_rel(unsigned* p, unsigned v) {
    unsigned old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
__device__ __forceinline__ void st_relaxed_u32(unsigned* p, unsigned v) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
#endif

// This CTA's work, in order: data-parallel tiles blockIdx.x, + gridDim.x, ... below dp_tiles,
// then (STREAMK) its contiguous share [it, end) of the remaining tiles' k-iterations, cut at
// tile boundaries into segments. Producer and consumers walk the same sequence.
struct Sched {
    int next_tile;
    long long it, end;
#if HALF_TAIL
    int units;  // dp_tiles whole tiles, then two halves of each later tile
    int half;   // the current unit: 0 a whole tile, 1 its first 64 rows, 2 its last 64
#endif
};

__device__ __forceinline__ void sched_init(Sched& s, int dp_tiles, int num_tiles, int num_kb) {
    s.next_tile = blockIdx.x / CL;
#if HALF_TAIL
    s.units = dp_tiles + 2 * (num_tiles - dp_tiles);
    s.half = 0;
#endif
    const long long sk_iters = (long long)(num_tiles - dp_tiles) * num_kb;
    s.it = (long long)blockIdx.x * sk_iters / gridDim.x;
    s.end = (long long)(blockIdx.x + 1) * sk_iters / gridDim.x;
}

__device__ __forceinline__ bool sched_next(Sched& s, int dp_tiles, int num_kb, int& tile, int& kb0,
                                           int& kb1) {
#if HALF_TAIL
    if (s.next_tile < s.units) {
        const int h = s.next_tile - dp_tiles;  // >= 0: a half unit
        tile = h < 0 ? s.next_tile : dp_tiles + h / 2;
        s.half = h < 0 ? 0 : 1 + (h & 1);
        kb0 = 0;
        kb1 = num_kb;
        s.next_tile += gridDim.x;
        return true;
    }
    return false;
#endif
    if (s.next_tile < dp_tiles) {
        tile = s.next_tile;
        kb0 = 0;
        kb1 = num_kb;
        s.next_tile += gridDim.x / CL;
        return true;
    }
#if STREAMK
    if (s.it < s.end) {
        const long long t = s.it / num_kb;
        kb0 = (int)(s.it - t * num_kb);
        const long long rem = s.end - s.it;
        kb1 = rem < (long long)(num_kb - kb0) ? kb0 + (int)rem : num_kb;
        tile = dp_tiles + (int)t;
        s.it += kb1 - kb0;
        return true;
    }
#endif
    return false;
}

// Tile `tile` of the schedule -> this CTA's first row and column. With a cluster, schedule tiles are
// CM x CN blocks of tiles (numbered N-fastest, ``num_nb`` blocks across N), the CTA's cluster row
// rm and column rn picking its tile in the block.
#ifndef RASTER_M
#define RASTER_M 0
#endif
#ifndef W_FIRST
#define W_FIRST 0
#endif
__device__ __forceinline__ void tile_origin(int tile, int num_nb, unsigned rm, unsigned rn, int& m0,
                                            int& n0) {
#if RASTER_M
    // tiles numbered M-fastest (num_nb then holds the M blocks), so adjacent CTAs share a W tile
    // instead of an A row panel: the default for a narrow tile in one wave (use_raster_m)
    m0 = ((tile % num_nb) * MC + (int)rm) * BM;
    n0 = ((tile / num_nb) * NC + (int)rn) * BN;
#else
    m0 = ((tile / num_nb) * MC + (int)rm) * BM;
    n0 = ((tile % num_nb) * NC + (int)rn) * BN;
#endif
}

#ifndef RASTER_GROUP
#define RASTER_GROUP 0
#endif
#if RASTER_GROUP
// tiles in groups of RASTER_GROUP M blocks (of cluster rows where clustered), numbered M-fastest
// inside a group and group after group (CUTLASS's swizzle): the CTAs in flight share W tiles side
// by side and a band of A row panels. The default for two-wave cooperative 128x160
// (use_raster_group); slower on the clustered ping-pong defaults (ADR-0007)
__device__ __forceinline__ void tile_origin_grouped(int tile, int num_mb, int num_nb, unsigned rm,
                                                    unsigned rn, int& m0, int& n0) {
    const int g = tile / (RASTER_GROUP * num_nb);
    const int r = tile - g * (RASTER_GROUP * num_nb);
    const int rows = num_mb - g * RASTER_GROUP < RASTER_GROUP ? num_mb - g * RASTER_GROUP : RASTER_GROUP;
    m0 = ((g * RASTER_GROUP + r % rows) * MC + (int)rm) * BM;
    n0 = ((r / rows) * NC + (int)rn) * BN;
}
#define TILE_ORIGIN_RAW(t, m0, n0) tile_origin_grouped(t, (num_m + MC - 1) / MC, NUM_NB, CTA_RM, CTA_RN, m0, n0)
#else
#define TILE_ORIGIN_RAW(t, m0, n0) tile_origin(t, RASTER_M ? (num_m + MC - 1) / MC : NUM_NB, CTA_RM, CTA_RN, m0, n0)
#endif

// TAIL_SHIFT (on by default for 16-bit data-parallel builds: use_tail_shift): a tile that reaches
// past M (N) but starts inside is moved back to end at M (N), where M >= BM (N >= BN): its TMA boxes
// are then wholly inside (a straddling box loads slower). The rows (columns) it shares with its
// neighbour are computed by both, in the same order, and stored twice with the same bits (out never
// aliases R or the operands).
#ifndef TAIL_SHIFT
#define TAIL_SHIFT 0
#endif
#if TAIL_SHIFT
#define TAIL_FIX(m0, n0)                                         \
    do {                                                         \
        if ((m0) < M && (m0) + BM > M && M >= BM) (m0) = M - BM; \
        if ((n0) < N && (n0) + BN > N && N >= BN) (n0) = N - BN; \
    } while (0)
#else
#define TAIL_FIX(m0, n0) ((void)0)
#endif
#if HALF_TAIL
template <int N>
struct IntC {  // a compile-time slice count for the k-block loop's lambda
    static constexpr int value = N;
};
#define HALF_FIX(m0) ((m0) += sched.half == 2 ? 64 : 0)  // a tile's second half: its last 64 rows
#else
#define HALF_FIX(m0) ((void)0)
#endif
// a unit's first row and column as producer and consumers both see it, the tail shift included
#define TILE_ORIGIN(t, m0, n0)      \
    do {                            \
        TILE_ORIGIN_RAW(t, m0, n0); \
        TAIL_FIX(m0, n0);           \
        HALF_FIX(m0);               \
    } while (0)

#if CL > 1
#define CLUSTER_ATTR __cluster_dims__(CL, 1, 1)
#else
#define CLUSTER_ATTR
#endif

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
    // tile blocks across N, this CTA's row and column in its cluster: literal constants where they
    // are (no cluster, or one row or column), so the unclustered and 2x1 builds compile to the
    // same code as before 2D clusters existed (a folded-away variable still reorders NVRTC's
    // registers: the fp32 producer's cubin changed)
#if NC > 1
    const int num_nb = (num_n + NC - 1) / NC;
#define NUM_NB num_nb
#else
#define NUM_NB num_n
#endif
    const int num_tiles = ((num_m + MC - 1) / MC) * NUM_NB;           // schedule tiles
#if CL > 1
    const unsigned rank = cluster_rank();
    const unsigned rm = NC == 1 ? rank : MC == 1 ? 0u : rank % MC;
    const unsigned rn = MC == 1 ? rank : NC == 1 ? 0u : rank / MC;
#define CTA_RM rm
#define CTA_RN rn
#else
    const unsigned rank = 0;
    (void)rank;
#define CTA_RM 0u
#define CTA_RN 0u
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
            mbar_init(empty_bar + 8 * s, (TILE_THREADS / 128) * 4 * (MC + NC - 1));
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
            int stage = 0, item = 0;
            unsigned phase = 0, rphases = 0;  // bit e: parity of epilogue buffer e
            while (sched_next(sched, dp_tiles, num_kb, tile, kb0, kb1)) {
                int m0, n0;
                TILE_ORIGIN(tile, m0, n0);
                const int eb = PINGPONG ? (item++ & 1) : 0;  // the consumer (its barriers, buffer)
                const unsigned ebuf = epi + (EPI_SHARED ? 0 : eb * EPI_BYTES);
                const unsigned rfb = rfull_bar + 8 * eb;
                (void)ebuf;
                // the k-block after which the producer stages the next residual tile: by default the
                // stage count, when the ring has just filled with this item's first k-blocks, so the
                // R load delays the next ones while the most are buffered (each k-block earlier or
                // later measured slower: ADR-0007)
                const int r_issue_kb = kb0 + (kb1 - kb0 - 1 < R_ISSUE_KB ? kb1 - kb0 - 1 : R_ISSUE_KB);
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
#if NC > 1
                    // this CTA's share of the A rows, into every CTA of its cluster row
                    tma_load_2d_mc(sa + rn * A_PART_BYTES, am, kx, m0 + (int)rn * (BM / NC), fb,
                                   (unsigned short)(((1u << MC) + 1u) << rm));
#elif !W_FIRST
                    tma_load_2d(sa, am, kx, m0, fb);
#endif
#if MC > 1
                    // this CTA's share of the W rows, into every CTA of its cluster column
                    tma_load_2d_mc(sa + A_TILE_BYTES + rm * B_PART_BYTES, wm, kx,
                                   n0 + (int)rm * (BN / MC), fb,
                                   (unsigned short)(((1u << MC) - 1u) << (MC * rn)));
#else
                    tma_load_2d(sa + A_TILE_BYTES, wm, kx, n0, fb);
#if W_BOXES > 1
                    tma_load_2d(sa + A_TILE_BYTES + (BN / 2) * 128, wm, kx, n0 + BN / 2, fb);
#endif
#endif
#if NC == 1 && W_FIRST
                    tma_load_2d(sa, am, kx, m0, fb);  // measurement option: W's box issued first
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
                    release_slot(empty_bar + 8 * stage, lane, CTA_RM, CTA_RN);
#else
                    wgmma_wait<1>();
                    if (kb > g0) release_slot(empty_bar + 8 * prev_stage, lane, CTA_RM, CTA_RN);
#endif
                    if (kb == kb0 && storer && store_pending) {
                        // the previous tile's TMA store has long finished reading shared memory
                        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#if EPI_RING_REUSE
                        // the previous tile's slots in the ring (EPI_RING_DEFER)
                        release_epi_slots(empty_bar, ring_pending, CTA_RM, CTA_RN);
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
                release_slot(empty_bar + 8 * prev_stage, lane, CTA_RM, CTA_RN);
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
                for (int s2 = stage; s2 < STAGES; ++s2) release_slot(empty_bar + 8 * s2, lane, CTA_RM, CTA_RN);
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
                release_epi_slots(empty_bar, ring_first, CTA_RM, CTA_RN);
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
#if CL > 1
    cluster_sync();  // no CTA leaves while its peer may still arrive on its barriers
#endif
}

#if ELEM == 2
// Fusion off: out += r after the GEMM-only kernel (FUSE=0), 8 elements (16 bytes) per step.
extern "C" __global__ void residual_add_inplace(unsigned short* __restrict__ out,
                                                const unsigned short* __restrict__ r, int M, int N) {
    const size_t total8 = (size_t)M * N / 8;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total8;
         i += (size_t)gridDim.x * blockDim.x) {
        uint4 o = ((const uint4*)out)[i];
        const uint4 q = ((const uint4*)r)[i];
        unsigned* op = (unsigned*)&o;
        const unsigned* qp = (const unsigned*)&q;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            float a0, a1, b0, b1;
            unpack2(op[e], a0, a1);
            unpack2(qp[e], b0, b1);
            op[e] = pack2(a0 + b0, a1 + b1);
        }
        ((uint4*)out)[i] = o;
    }
}
#else
// Fusion off, fp32 data (tf32, fp32): out += r, 4 elements (16 bytes) per step.
extern "C" __global__ void residual_add_inplace_f32(float* __restrict__ out, const float* __restrict__ r,
                                                    int M, int N) {
    const size_t total4 = (size_t)M * N / 4;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 o = ((const float4*)out)[i];
        const float4 q = ((const float4*)r)[i];
        o.x += q.x;
        o.y += q.y;
        o.z += q.z;
        o.w += q.w;
        ((float4*)out)[i] = o;
    }
}
#endif

#if DT == 3
#ifndef SPLIT_HI
#define SPLIT_HI 0
#endif
// x rounded to tf32 (nearest, ties away: cvt.rna), returned as fp32 with the low 13 bits zero.
__device__ __forceinline__ float tf32_rna(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return __uint_as_float(r & 0xFFFFE000u);
}

__device__ __forceinline__ void split4(float4 x, float4& hi, float4& lo) {
    float* xv = (float*)&x;
    float* hv = (float*)&hi;
    float* lv = (float*)&lo;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
#if SPLIT_HI
        hv[e] = tf32_rna(xv[e]);
#else
        hv[e] = __uint_as_float(__float_as_uint(xv[e]) & 0xFFFFE000u);  // what the tensor cores read
#endif
        lv[e] = tf32_rna(xv[e] - hv[e]);  // x - hi is exact in fp32
    }
}

// 3xTF32 operand split, one launch for A (n4a float4s) then W (n4w): lo always, hi with SPLIT_HI.
extern "C" __global__ void tf32_split(const float4* __restrict__ a, float4* __restrict__ a_hi,
                                      float4* __restrict__ a_lo, int n4a,
                                      const float4* __restrict__ w, float4* __restrict__ w_hi,
                                      float4* __restrict__ w_lo, int n4w) {
    const long long total = (long long)n4a + n4w;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const bool is_a = i < n4a;
        const long long j = is_a ? i : i - n4a;
        float4 hi, lo;
        split4(is_a ? a[j] : w[j], hi, lo);
        (is_a ? a_lo : w_lo)[j] = lo;
#if SPLIT_HI
        (is_a ? a_hi : w_hi)[j] = hi;
#else
        (void)a_hi;
        (void)w_hi;
#endif
    }
}
#endif
