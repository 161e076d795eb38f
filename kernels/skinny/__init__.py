"""Decode-shaped ("skinny") GEMM + residual for M <= 64 tokens: the decode path.

``out[M, N] = A[M, K] @ W[N, K]^T + R[M, N]``, bf16 or fp16, fp32 accumulation, the residual added
in fp32 and the result rounded once. At decode sizes the GEMM is memory-bound: its speed of light
is W (N x K x 2 bytes) streamed once from HBM, which the wgmma/TMA tiles (64+ rows of A) cannot
reach at M = 1..16. This path streams W from global memory straight into registers (16-byte
loads, ``stages`` chunks of 32 K elements in flight per warp) and multiplies with mma.sync
m16n8k16 with swapped roles (16 rows of W the MMA's M side, 8 tokens its N side), the K
order permuted so that every lane's fragment is one 16-byte load (no shared memory, no ldmatrix;
the kernel's header derives the permutation).

Knobs (validated integers only reach the source, as ``#define`` lines):

- BLOCK_SIZE "BMxBN": BM tokens (8, 16, 32, 64: BM / 8 n8 fragments) by BN rows of W (16, 32,
  64, 128: BN / 16 row groups) per CTA (``TILES``).
- MEMORY_PIPELINING: chunks of 32 K elements in flight per warp (``STAGE_OPTIONS``), held in
  registers; combinations whose registers would spill are refused (``register_estimate``).
- schedule.warps (4, 8): warps per CTA; they split the CTA's rows into row groups and its K range
  among the rest, partial sums reduced in shared memory in a fixed order.
- schedule.split_k: CTAs per output tile along K. Above 1 each CTA writes an fp32 partial to the
  ``ws`` scratch buffer (split_k, M, N); the last CTA of a tile (a static counter per tile, reset
  by that CTA) sums the partials in a fixed order, so results are deterministic.
- schedule.a_smem (0, 1; ``A_SMEM_OPTIONS``): where A's fragments come from. 0: every warp loads
  its own copy from global memory (L1 / L2) into the register ring beside W's. 1: the CTA copies
  A[its BM tokens, its K range] into shared memory once, in double-buffered tiles of
  ``a_tile_chunks`` chunks per warp (16-byte cp.async, 16 KB a tile), and the warps read their
  fragments from there; K % 8 == 0 only (refused otherwise: the 16-byte copies need 16-byte
  aligned rows, and an unaligned copy would hold registers or expose its latency once a tile).

- schedule.w_bulk (0, 1, 2; ``W_BULK_OPTIONS``): how W reaches the MMAs. 0: the register ring
  above (each load 64 contiguous bytes of 8 rows). 1: a producer warp copies whole runs of
  ``schedule.bulk_k`` elements of every W row and A token of the CTA into a ring of
  MEMORY_PIPELINING shared-memory slots with 1D bulk copies (cp.async.bulk, one per row), and the
  warps read their fragments with ldmatrix. 2: the same ring filled by 2D TMA boxes (tensor maps
  over W and A, BN or BM rows x 64 elements, 128-byte swizzle; one copy per box, zeros past the
  matrix). Compute capability >= 9.0 and K % 8 == 0 only, A from the slots (a_smem 0). Dynamic
  shared memory: ``bulk_smem``.
- schedule.bulk_k (``BULK_K_OPTIONS``): K elements per ring slot with w_bulk 1 or 2.

Any N, K >= 1: K % 8 != 0 builds the vectors from 4-byte (K even) or 2-byte loads (``ALIGNED8``,
``ALIGNED2``; base pointers 16-byte aligned, as CuPy allocates). Fusion off runs the GEMM without R
and then ``skinny_residual_add``.

The path in parts, as the Hopper one (kernels/sm90/): ``tiles`` (the knobs' values, the plan object
and the geometry every part derives from them), ``planner`` (the defaults: ``plan``), ``checks``
(every refusal before compiling: ``check``), ``model`` (predicted times, the tuner's prior) and
``codegen`` (the source and the launches of a plan: ``render``); the device code is
kernels/gemm_residual_skinny.cu and its headers under kernels/skinny/. ``kernels.gemm_residual_skinny``
is the path's name for the specs.

Where this deviates from the design it was written to:

- Tails: rows past N and tokens past M are clamped to the last row / token instead of loaded as
  zeros. They feed only outputs that are never stored (out^T's rows past N, columns past M), and
  a clamped lane's load falls on the same address as a real one in the same instruction, so it
  costs no memory traffic and no predicate registers. k past K is zero in both operands.
- Each warp of a row-group slot takes one contiguous range of the CTA's chunks (rather than every
  KW-th chunk), so that a warp's loads in flight cover stages x 64 contiguous bytes of each row.
- The register rule depends on K's alignment (``REGISTER_BUDGET``): 4- and 2-byte loads each hold
  a register until the vector is assembled, so fewer stages fit than with 16-byte loads.
- The split-K workspace is (split_k, M, N) fp32: only real tokens and rows are written.
- A's shared-memory tiles are laid out [chunk][token][32 elements] rather than token rows padded
  by 16 bytes: a fragment read (8 lanes: 2 tokens x 64 bytes) and a copy's 8 lanes (2 tokens x 64
  bytes) both cover 128 contiguous bytes, conflict-free without padding. The copy zero-fills
  tokens past M and k past the CTA's range (A_SMEM = 0 clamps tokens instead).
- With a_smem 1 a warp-slot's KW warps take a tile's chunks interleaved, not in contiguous
  ranges (the tiles keep them in step, and a part-full last tile stays balanced).
"""
