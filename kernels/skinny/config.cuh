// Decode GEMM + residual (gemm_residual_skinny.cu): the configuration. The Python side
// (kernels/skinny/codegen.py) prepends the plan as #defines of validated integers: BM, BN, STAGES,
// WARPS, SPLIT_K, DT (0 bf16, 1 fp16), FUSE, ALIGNED8, ALIGNED2, COUNTERS, A_SMEM, A_TILE (chunks per
// warp per shared-memory tile), W_BULK, BULK_K (K elements per ring slot); then vec16.cuh (VEC_DTYPE
// = DT) for ld_stream / ld_cached / pack2 / unpack2. Here: the combinations the kernel refuses and the
// geometry every other part derives from them.

#ifndef SKINNY_CONFIG_CUH
#define SKINNY_CONFIG_CUH

#if !defined(BM) || !defined(BN) || !defined(STAGES) || !defined(WARPS) || !defined(SPLIT_K)
#error "the spec must define BM, BN, STAGES, WARPS, SPLIT_K"
#endif

// NF n8 fragments of tokens; RG row groups of 16 rows of W, in WG row-group slots of RPW each; KW
// warps per slot split the CTA's K range; BNP the padded row of a partial tile.
#define NF (BM / 8)
#define RG (BN / 16)
#define WG (RG < WARPS ? RG : WARPS)
#define RPW (RG / WG)
#define KW (WARPS / WG)
#define BNP (BN + 4)
#ifndef W_BULK
#define W_BULK 0
#endif
#if W_BULK && (!ALIGNED8 || A_SMEM)
#error "W_BULK needs K % 8 == 0 (16-byte bulk copies of whole rows) and A_SMEM = 0"
#endif
// W_BULK: WARPS consumer warps and one producer warp; a ring slot holds BN rows of W and BM tokens
// of A, ROW_E elements each (W_BULK 1: BULK_K + 8, the 16 bytes that put 8 rows in 8 bank groups;
// 2: BULK_K, the boxes swizzled), read in STEPS steps of 16 elements.
#define THREADS ((WARPS + (W_BULK ? 1 : 0)) * 32)
#if W_BULK == 2
#define ROW_E BULK_K
#else
#define ROW_E (BULK_K + 8)
#endif
#define SLOT_ELEMS ((BN + BM) * ROW_E)
#define STEPS (BULK_K / 16)
#define RED_FLOATS (KW * BM * BNP)
// SPLIT_K > 1: the outputs a thread of the tile's last CTA sums in one pass, groups of 4 (N % 4 == 0)
// or single, all their partials loaded first
#define SPLIT_RU4 (SPLIT_K >= 16 ? 1 : 16 / SPLIT_K)
#define SPLIT_RU1 (SPLIT_K >= 16 ? 2 : 32 / SPLIT_K)

#ifndef A_SMEM
#define A_SMEM 0
#endif
#if A_SMEM && !ALIGNED8
#error "A_SMEM needs K % 8 == 0 (16-byte cp.async of A's rows)"
#endif
// A_SMEM: tiles of KT chunks (A_TILE per warp of a slot) of BM tokens.
#define KT (KW * A_TILE)
#define A_TILE_ELEMS (KT * BM * 32)
// Element (chunk j of the tile, token t, element e of the chunk's 32) of a shared-memory A tile.
#define A_OFF(j, t, e) (((j) * BM + (t)) * 32 + (e))
// The copy: 16-byte piece p of a tile is element 8 q of chunk j of token t (tokens fastest).
#define A_PIECES (KT * BM * 4)
#define A_PIECE_Q(p) ((p) % 4)
#define A_PIECE_T(p) (((p) / 4) % BM)
#define A_PIECE_J(p) ((p) / (4 * BM))
#define SMEM_A_BYTES (2 * A_TILE_ELEMS * 2)
#define SMEM_RED_BYTES (RED_FLOATS * 4)
#define SMEM_BYTES (SMEM_A_BYTES > SMEM_RED_BYTES ? SMEM_A_BYTES : SMEM_RED_BYTES)

#endif  // SKINNY_CONFIG_CUH
