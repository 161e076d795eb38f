// Hopper GEMM + residual (gemm_residual_sm90.cu): the configuration. The Python spec prepends the
// knobs as #defines of validated integers:
//   BM, BN, BK (64 16-bit or 32 fp32 elements: 128 bytes), STAGES, NUM_CONSUMERS, DT (0 bf16,
//   1 fp16, 2 tf32, 3 fp32 by 3xTF32), FUSE, STREAMK, WS_TILES,
//   PINGPONG, CLUSTER, SPLIT_HI and PROMOTE (DT 3); where set, SPLIT_N, SWAP_AB, RASTER_M,
//   RASTER_GROUP, TAIL_SHIFT, HALF_TAIL, EPI_RING, EPI_RING_REUSE and EPI_SHARED.
// Here: their defaults where unset, the combinations the kernel refuses, and the geometry every
// other part derives from them (each consumer warpgroup's share of the tile, slot and box sizes).

#ifndef SM90_CONFIG_CUH
#define SM90_CONFIG_CUH

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
#define CLUSTER_N 0
#endif
// CL CTAs per cluster: MC M-neighbours sharing the W tile (each W k-block multicast to all of them),
// or, with CLUSTER_N, NC N-neighbours sharing the A tile (each A k-block multicast)
#define CL CLUSTER
#define MC (CLUSTER_N ? 1 : CLUSTER)
#define NC (CLUSTER_N ? CLUSTER : 1)
#if CLUSTER != 1 && CLUSTER != 2
#error "CLUSTER must be 1 or 2"
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
    BN != 256 && !(BN == 320 && SPLIT_N) && !(SWAP_AB && BN % 8 == 0 && BN >= 8 && BN <= 200)
#error "BN must be 80, 128, 144, 160, 192, 208 or 256 (320 with SPLIT_N; 8-200 in steps of 8 with SWAP_AB)"
#endif
// 144, 192 and 208 (16-bit data): widths that fit N = 2560 into fewer N blocks (18, 14, 13) where a
// round of 128-wide or 160-wide tiles would be left nearly empty (the FIT tiles of the Python module)
#if (BN == 144 || BN == 192 || BN == 208) && ELEM != 2
#error "BN = 144, 192, 208 take 16-bit data only"
#endif
// SWAP_AB (the Python module's SWAP_TILES, ADR-0007): the kernel runs the transposed
// product out^T = W A^T, so its M is the problem's N and its N the problem's M: tm_a maps W (BM = 64,
// 128 or 256 rows of N a tile), tm_w maps A (BN rows of M, any width a wgmma takes), and the kernel's M, N
// arguments are the problem's N, M. R and out stay [M, N] row-major: the epilogue tile is R's natural
// BN x BM box (BM / 64 chunks of BN rows x 128 bytes), which each thread reads and writes at its
// accumulators' transposed positions. BM = 256 (R x 256 tiles): BN <= 120, each consumer thread's
// 128 x BN / 128 accumulators. Cooperative, data-parallel, 16-bit data only; clusters as unswapped
// (2x1 multicasts the kernel's W, here the problem's A; measured slower, so no default uses them).
// SWAP_AB appears in #if lines above its default below: an undefined macro reads 0 there.
#ifndef SWAP_AB
#define SWAP_AB 0
#endif
#if SWAP_AB && (PINGPONG || STREAMK || ELEM != 2 || (BM != 128 && BM != 256 && BM != 64) || SPLIT_N)
#error "SWAP_AB: cooperative, data-parallel 64-, 128- or 256-row tiles, 16-bit data"
#endif
#if SWAP_AB && BM == 64 && (NUM_CONSUMERS != 1 || BN > 64)
#error "SWAP_AB with BM = 64 (the decode tiles): one consumer warpgroup, BN <= 64 (the problem's M)"
#endif
#if SWAP_AB && BM == 256 && BN > 120
#error "SWAP_AB with BM = 256: BN <= 120 (accumulators per consumer thread)"
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

// STREAM_HINT: the kernel's A operand (a swapped decode tile's W, read once) is loaded with an L2
// EVICT_FIRST policy, so the streamed bytes do not push the tokens and R out of the L2.
#ifndef STREAM_HINT
#define STREAM_HINT 0
#endif
#if STREAM_HINT && !(SWAP_AB && BM == 64)
#error "STREAM_HINT: the swapped decode tiles (BM = 64)"
#endif
// PDL_WAIT: the kernel may be launched with programmatic dependent launch; every thread waits for
// the kernel before it (griddepcontrol.wait) between the barrier set-up and any global access.
#ifndef PDL_WAIT
#define PDL_WAIT 0
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
// a TMA box has at most 256 rows: an unclustered 320-row W tile is loaded as two boxes of 160
#define W_BOXES ((BN / MC) > 256 ? 2 : 1)
#if MC > 1 && (BN / MC) > 256
#error "a CTA's multicast share of W must fit one TMA box (<= 256 rows)"
#endif
#if (BN / MC) % 8 != 0
#error "a multicast part must hold whole 8-row swizzle atoms (1024-byte aligned in the slot)"
#endif
#define A_PART_BYTES (A_TILE_BYTES / NC)   // the A rows one CTA loads (and multicasts)
#if (BM / NC) % 8 != 0
#error "a multicast part must hold whole 8-row swizzle atoms (1024-byte aligned in the slot)"
#endif
#if CLUSTER_N && (ELEM != 2 || DT == 3 || STREAM_HINT || HALF_TAIL)
#error "CLUSTER_N (A multicast): 16-bit data, not the decode tiles' streamed loads, no halves"
#endif

#if WG_M % 64 != 0
#error "each consumer warpgroup needs a multiple of 64 rows"
#endif

#endif  // SM90_CONFIG_CUH
