"""Decode-shaped ("skinny") GEMM + residual for M <= 64 tokens (``gemm_residual_skinny.cu``).

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

Defaults (``plan``): BM the fewest tokens >= M. Where bulk copies apply (compute capability >= 9.0,
K % 8 == 0): w_bulk 2 with ``tma_schedule``'s tile, warps, ring and split-K. Elsewhere the register
ring: 4 warps; a_smem 1 where BM >= ``A_SMEM_MIN_BM``, K %
8 == 0 and its registers and shared memory fit (``default_a_smem``), else 0. With a_smem 0: BN
(widest of 64, 32, 16 with BN >= BM / 2) and split-K (least) so that the grid has about 2 CTAs per
SM (``CTAS_PER_SM`` x limits.sm_count) while each warp keeps >= ``MIN_WARP_CHUNKS`` chunks of K and
the split-K partials' traffic stays under ``SPLIT_TRAFFIC`` of W. With a_smem 1: BN (128, 64, 32,
16) and split-K with the least L2 traffic beyond W (A once per CTA column, the partials weighted
by ``SPLIT_WEIGHT``) among grids of one wave that keep every SM busy and enough of W in flight
(``_smem_schedule``). ``DEFAULT_STAGES`` stages, fewer where the register budget demands.

Why A in shared memory at M >= 16. With a_smem 0 the L2 -> SM traffic is W plus A once per
row-group slot of every CTA column: at M = 32, N = K = 5120 with 32x16 tiles, 105 MB of A against
52 MB of W, ~157 MB in the 26.4 us the H200 measured (~6 TB/s: the L2's bandwidth, not the
DRAM's). A copy per CTA, shared by all its warps, cuts A's share to M / BN of W's bytes, so wide
tiles (BN 64, 128) pay; they need split-K to fill the GPU, whose partials cost traffic too (hence
the balance in ``_smem_schedule``). Work per warp: with 4 warps a 128-row tile gives each warp 2
row groups, so each B fragment read from shared memory feeds 2 MMAs; at 1 row group (BN <= 64)
the reads are still well within shared memory's bandwidth (BM = 64: 8 x 512-byte reads a chunk
per 1 KB of W, ~40 % of 128 B/clock at the SM's share of 3.2 TB/s), so no separate knob for it.

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

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kernels.spec import (
    Buffer,
    Build,
    DeviceLimits,
    Launch,
    TensorMapArg,
    Tile,
    Violation,
    kernel_source,
    vec16_source,
)

SOURCE_FILE = "gemm_residual_skinny.cu"
KERNEL = "gemm_residual_skinny"
ADD_KERNEL = "skinny_residual_add"
CHUNK = 32
"""K elements per chunk: 4 lanes x 8 elements (one 16-byte load per lane and row)."""
MAX_M = 64
BM_OPTIONS = (8, 16, 32, 64)
BN_OPTIONS = (16, 32, 64, 128)
TILES = tuple(f"{bm}x{bn}" for bm in BM_OPTIONS for bn in BN_OPTIONS)
"""BLOCK_SIZE values: BM tokens x BN rows of W per CTA."""
STAGE_OPTIONS = (2, 4, 6, 8)
WARPS_OPTIONS = (4, 8)
SPLIT_K_OPTIONS = (1, 2, 3, 4, 6, 8, 12, 16)
A_SMEM_OPTIONS = (0, 1)
"""schedule.a_smem: 0 A's fragments from global memory per warp, 1 A staged in shared memory per CTA."""
W_BULK_OPTIONS = (0, 1, 2)
W_BULK_DEFAULT = 2
"""The w_bulk the planner takes where bulk copies apply (``default_w_bulk``): TMA boxes, faster than
the register ring at every decode shape probed on the H200 (ADR-0003)."""
"""schedule.w_bulk: 0 W through registers (16-byte loads); W and A into a shared-memory ring by 1 row
copies, 2 tensor-map boxes."""
BULK_K_OPTIONS = (64, 128, 256, 512, 1024)
"""schedule.bulk_k: K elements per ring slot (128 to 512 bytes per row and copy)."""
DEFAULT_BULK_K = 128
BULK_MIN_CC = (9, 0)
"""cp.async.bulk and mbarrier transaction counts need Hopper."""
BULK_STATIC_SMEM = 128 * -(-(16 + 2 * 8 * max(STAGE_OPTIONS)) // 128)
"""Static shared memory beside the ring: the split-K flag and two mbarriers per slot (at most), in
the 128-byte units ptxas lays static memory out in ahead of the 128-byte aligned dynamic ring."""
A_SMEM_DEFAULT = False
"""Whether the planner takes a_smem = 1 by default. Off: on the H200 (ADR-0003, single-launch probe)
the best a_smem 1 build was slower than the best a_smem 0 one at every shape tried (M = 32, N = K =
5120: 35.4 against 26.5 us; M = 16: 31.9 / 21.7; M = 64, N = K = 4096: 28.0 / 26.2); it stays a
schedule choice the tuner tries."""
A_SMEM_MIN_BM = 16
"""The default takes a_smem 1 from this BM (BM = 8: one fragment a chunk, A is 1/8 of a row group's
loads, and M = 1, 8 ran faster than cuBLAS as they are)."""
A_TILE_BYTES = 16384
"""Bytes of one shared-memory A tile (two are in use): ``a_tile_chunks`` chunks per warp fill it."""
A_TILE_MAX = 16
"""The most chunks per warp in one A tile (BM = 8, 16 would take more)."""
DTYPES = ("bf16", "fp16")
DT_CODE = {"bf16": 0, "fp16": 1}
COUNTERS = 65536
"""Split-K arrival counters in the module (one per output tile, ``skinny_counters``)."""
REGISTER_BUDGET = {16: 248, 4: 200, 2: 172}
"""Most registers ``register_estimate`` may predict, per load width in bytes (``load_width``), for
a variant to be accepted. ptxas' ceiling is 255 per thread. Measured on sm_90a (bf16 and fp16
within a few registers of each other): the 16-byte variants estimated <= 244 used <= 242
registers, the first that spilled was estimated 304. Narrower loads hold more registers in
flight (each 4- or 2-byte load its own register until the vector is assembled) and ptxas
schedules them differently: 4-byte variants estimated <= 200 used <= 224 (the first spill at
244), 2-byte ones estimated <= 168 used <= 229 (the first spill at 236). Each budget keeps a
margin of >= 13 registers below 255; tests/unit/test_skinny_compile.py compiles every accepted
variant and checks that none spills."""
DEFAULT_WARPS = 4
DEFAULT_STAGES = 6
DEFAULT_BN = (64, 32, 16)
"""BN tried for the default, widest first: a wider tile re-reads A from L2 fewer times and needs
less split-K; narrower ones make more CTAs where N is small. Only BN >= BM / 2 is tried, so that
the CTAs' reads of A (BM / BN of their W bytes, from L2) stay within twice W's."""
CTAS_PER_SM = 1.9
"""The default grid's target: about 2 CTAs per SM (256 CTAs on 132 SMs count), within the split-K
limits below; the CTAs are small (4 warps, <= 20 KB of shared memory), so more fit at once."""
MIN_WARP_CHUNKS = 8
"""The default's split-K leaves each warp at least this many chunks (8 x 1 KB of W at one row group)."""
SPLIT_TRAFFIC = 0.25
"""The default's split-K keeps its partials' traffic (fp32, written and read back, mostly in L2)
under this fraction of W's bytes."""
SPLIT_WEIGHT = 2.0
"""With a_smem 1 the default weighs the split-K partials' bytes (fp32, written and read back) this
much above A's (bf16, read only, from L2): the partials may reach DRAM and end in the last CTA's
serial reduction."""
SPLIT_FIXED_BYTES = 3.2e6
"""With a_smem 1 the default counts a split-K grid this many bytes more besides its partials: the
fence, the counter and the last CTA's reduction, ~1 us at ~3.2 TB/s (at M = 1 on the H200 a
split-4 grid ran 1.4 us behind one without split-K)."""
IN_FLIGHT_PER_SM = 32 * 1024
"""With a_smem 1 the default keeps at least this many bytes of W in flight per SM (resident CTAs x
warps x stages x row groups x 1 KB): ~3.2 TB/s x ~1.3 us of latency over 132 SMs."""
REGISTERS_PER_SM = 65536
ADD_THREADS = 256


@dataclass(frozen=True)
class SkinnyPlan:
    """One resolved configuration: knobs, alignment variant and launch geometry."""

    bm: int
    bn: int
    stages: int
    warps: int
    split_k: int
    fuse: bool
    aligned8: bool
    aligned2: bool
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem_bytes: int
    a_smem: int = 0
    w_bulk: int = 0
    bulk_k: int = 0
    """K elements per ring slot with w_bulk 1 (0 otherwise)."""

    @property
    def block_size(self) -> str:
        return f"{self.bm}x{self.bn}"

    def info(self) -> dict[str, Any]:
        """Resolved knobs and geometry for display."""
        return {
            "path": "mma.sync split-K (decode)",
            "tile": self.block_size,
            "stages": self.stages,
            "warps": self.warps,
            "split_k": self.split_k,
            "grid": self.grid,
            "threads": self.block[0],
            "smem_bytes": self.smem_bytes,
            "fused": self.fuse,
            "loads": ("tensor-map boxes" if self.w_bulk == 2 else "bulk copies" if self.w_bulk else "16-byte" if self.aligned8
                      else "4-byte" if self.aligned2 else "2-byte"),
            "a_smem": self.a_smem,
            "w_bulk": self.w_bulk,
            "bulk_k": self.bulk_k,
        }


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def parse_block_size(block_size: str) -> tuple[int, int]:
    """(BM, BN) of a ``TILES`` name; ValueError naming the offered tiles otherwise."""
    try:
        tile = Tile.parse(block_size)
    except ValueError:
        tile = None
    if tile is None or tile.k is not None or tile.name not in TILES:
        raise ValueError(f"block_size {str(block_size)!r}: one of {', '.join(TILES)}")
    return tile.m, int(tile.n or 0)


def warp_layout(bn: int, warps: int) -> tuple[int, int, int]:
    """(row-group slots, row groups per warp, warps per slot splitting K): the kernel's WG, RPW, KW."""
    groups = bn // 16
    slots = min(groups, warps)
    return slots, groups // slots, warps // slots


def load_width(k: int) -> int:
    """Bytes per load of a row's 8-element vector: 16 where K % 8 == 0, 4 where K is even, else 2."""
    return 16 if k % 8 == 0 else 4 if k % 2 == 0 else 2


def _fits(bm: int, bn: int, stages: int, warps: int, k: int, a_smem: int) -> bool:
    """The register rule of one variant (a_smem 1 needs K % 8 == 0 besides)."""
    if a_smem and k % 8:
        return False
    return register_estimate(bm, bn, stages, warps, a_smem) <= REGISTER_BUDGET[load_width(k)]


def stages_that_fit(bm: int, bn: int, warps: int, k: int, a_smem: int | None = None) -> list[int]:
    """The ``STAGE_OPTIONS`` whose register estimate is within the budget for K's load width, for
    the given a_smem, or (None) for the variant ``plan`` takes by default at each stage count
    (``default_a_smem``; shared memory not counted: it fits every device of cc >= 8.0)."""
    if a_smem is None:
        return [s for s in STAGE_OPTIONS
                if _fits(bm, bn, s, warps, k, default_a_smem(bm, bn, s, warps, k))]
    return [s for s in STAGE_OPTIONS if _fits(bm, bn, s, warps, k, a_smem)]


def register_estimate(bm: int, bn: int, stages: int, warps: int, a_smem: int = 0) -> int:
    """Registers per thread. a_smem 0: each chunk in flight holds 8 per row group (rows g and g + 8)
    and 4 per n8 fragment, the accumulators 4 per (row group, fragment), plus addresses and
    indices. a_smem 1: the ring holds only W (8 per row group a chunk); A's fragments are read
    from shared memory just before their MMAs (4 per fragment, all of a chunk's at once at
    worst), plus the copy's and the tiles' indices. Fitted to ptxas for sm_90a (the compile test
    checks that no accepted variant spills)."""
    _, rpw, _ = warp_layout(bn, warps)
    nf = bm // 8
    if a_smem:
        return stages * 8 * rpw + 4 * rpw * nf + 4 * nf + 4 * rpw + 40
    return stages * (8 * rpw + 4 * nf) + 4 * rpw * nf + 2 * (2 * rpw + nf) + 24


def a_tile_chunks(bm: int, bn: int, warps: int) -> int:
    """Chunks per warp in one shared-memory A tile (``A_TILE``): the most (a power of 2, at most
    ``A_TILE_MAX``) whose tile of KW x that many chunks of BM tokens fits ``A_TILE_BYTES``."""
    _, _, kw = warp_layout(bn, warps)
    per_chunk = bm * CHUNK * 2 * kw
    t = 1
    while 2 * t <= A_TILE_MAX and 2 * t * per_chunk <= A_TILE_BYTES:
        t *= 2
    return t


def smem_bytes(plan: SkinnyPlan) -> int:
    """Shared memory of a CTA. Register ring: static, the warps' fp32 partial tiles (KW x BM x
    (BN + 4)) and a flag; with a_smem 1 the two A tiles, which the partial tiles reuse after the
    main loop. w_bulk 1: ``bulk_smem`` (dynamic) and ``BULK_STATIC_SMEM``."""
    if plan.w_bulk:
        return bulk_smem(plan.bm, plan.bn, plan.warps, plan.stages, plan.bulk_k, plan.w_bulk) + BULK_STATIC_SMEM
    return _smem(plan.bm, plan.bn, plan.warps, plan.a_smem)


def bulk_smem(bm: int, bn: int, warps: int, stages: int, bulk_k: int, mode: int = 1) -> int:
    """Dynamic shared memory of a w_bulk CTA: the partial tiles, then ``stages`` slots of BN rows
    of W and BM tokens of A. Mode 1: rows of bulk_k + 8 elements after the tiles rounded to 128
    bytes; mode 2: rows of bulk_k elements (swizzled boxes), the ring 1024-byte aligned at run
    time (1 KB more)."""
    _, _, kw = warp_layout(bn, warps)
    red = kw * bm * (bn + 4) * 4
    if mode == 2:
        return red + 1024 + stages * (bn + bm) * bulk_k * 2
    return _cdiv(red, 128) * 128 + stages * (bn + bm) * (bulk_k + 8) * 2


def bulk_stages_that_fit(bm: int, bn: int, warps: int, bulk_k: int, limits: DeviceLimits | None = None,
                         mode: int = 1) -> list[int]:
    """``STAGE_OPTIONS`` whose ring fits the device's shared memory per block (all, without limits)."""
    if limits is None:
        return list(STAGE_OPTIONS)
    return [s for s in STAGE_OPTIONS
            if bulk_smem(bm, bn, warps, s, bulk_k, mode) + BULK_STATIC_SMEM <= limits.shared_memory_per_block_bytes]


def bulk_applies(k: int, limits: DeviceLimits) -> bool:
    """w_bulk 1 can build: Hopper or later and 16-byte aligned rows (K % 8 == 0)."""
    return k % 8 == 0 and tuple(limits.compute_capability) >= BULK_MIN_CC


def _smem(bm: int, bn: int, warps: int, a_smem: int = 0) -> int:
    _, _, kw = warp_layout(bn, warps)
    red = kw * bm * (bn + 4) * 4
    if a_smem:
        tiles = 2 * kw * a_tile_chunks(bm, bn, warps) * bm * CHUNK * 2
        return max(red, tiles) + 16
    return red + 16


def default_bm(m: int) -> int:
    """The fewest tokens per CTA that hold M (one CTA row along M up to 64)."""
    return next((bm for bm in BM_OPTIONS if bm >= m), MAX_M)


def default_stages(bm: int, bn: int, warps: int, k: int, a_smem: int | None = None) -> int:
    """``DEFAULT_STAGES`` chunks in flight, fewer where the registers demand (``stages_that_fit``:
    a_smem None is the variant ``plan`` takes by default)."""
    fits = [s for s in stages_that_fit(bm, bn, warps, k, a_smem) if s <= DEFAULT_STAGES]
    return max(fits) if fits else STAGE_OPTIONS[0]


def default_a_smem(bm: int, bn: int, stages: int, warps: int, k: int,
                   limits: DeviceLimits | None = None) -> int:
    """1 where ``A_SMEM_DEFAULT`` is on, BM >= ``A_SMEM_MIN_BM``, K % 8 == 0, the a_smem 1 registers
    fit at ``stages`` and (given ``limits``) its static shared memory fits; else 0."""
    if not A_SMEM_DEFAULT or bm < A_SMEM_MIN_BM or k % 8 or not _fits(bm, bn, stages, warps, k, 1):
        return 0
    if limits is not None and _smem(bm, bn, warps, 1) > _smem_limit(limits):
        return 0
    return 1


def _smem_limit(limits: DeviceLimits) -> int:
    """Static shared memory a CTA may use: 48 KB, or the device's per-block limit if lower."""
    return min(48 * 1024, limits.shared_memory_per_block_bytes)


def _max_split(m: int, k: int, n_rows: int, warps: int) -> int:
    """The most split-K the default takes: each warp keeps >= MIN_WARP_CHUNKS chunks, and the
    partials' traffic (split_k x M x N x 8 bytes) stays under SPLIT_TRAFFIC of W (N x K x 2)."""
    _, _, kw = warp_layout(n_rows, warps)
    by_chunks = _cdiv(k, CHUNK) // (MIN_WARP_CHUNKS * kw)
    by_traffic = int(SPLIT_TRAFFIC * 2 * k / (8 * m))  # split_k * M * N * 8 <= SPLIT_TRAFFIC * N * K * 2
    return max(1, min(by_chunks, by_traffic))


def default_schedule(m: int, n: int, k: int, bm: int, warps: int, sm_count: int,
                     bn: int | None = None, a_smem: int = 0) -> tuple[int, int]:
    """(BN, split_k). a_smem 0: the least split-K (its partials cost traffic and a reduction), then
    the widest tile of ``DEFAULT_BN`` (or ``bn``), that give >= CTAS_PER_SM CTAs per SM within
    ``_max_split``; where none does, the most CTAs. On the H200 at M = 1, N = K = 4096, 8x16
    without split-K (256 CTAs) ran 15.0 us against 8x64 split 4 (also 256 CTAs) 16.4 us
    (ADR-0003). a_smem 1: ``_smem_schedule``."""
    if a_smem:
        picked = _smem_schedule(m, n, k, bm, warps, sm_count, bn)
        if picked is not None:
            return picked
    want = CTAS_PER_SM * sm_count
    best: tuple[int, int, int] | None = None
    widths = (bn,) if bn else tuple(b for b in DEFAULT_BN if 2 * b >= bm)
    caps = {b: _max_split(m, k, b, warps) for b in widths}
    for s in SPLIT_K_OPTIONS:
        for b in widths:
            if s > caps[b]:
                continue
            ctas = _cdiv(n, b) * _cdiv(m, bm) * s
            if ctas >= want:
                return b, s
            if best is None or ctas > best[0]:
                best = (ctas, b, s)
    assert best is not None
    return best[1], best[2]


DEFAULT_BN_SMEM = (128, 64, 32, 16)
"""BN tried for the a_smem 1 default: A's L2 traffic falls as 1 / BN."""


def _smem_schedule(m: int, n: int, k: int, bm: int, warps: int, sm_count: int,
                   bn: int | None = None) -> tuple[int, int] | None:
    """(BN, split_k) for a_smem 1: among ``DEFAULT_BN_SMEM`` (or ``bn``) x split-K within
    ``_max_split`` whose grid keeps every SM busy (>= sm_count CTAs), runs in one wave (<= the CTAs
    the registers let the SMs hold at the default stages) and keeps >= ``IN_FLIGHT_PER_SM`` bytes
    of W in flight per SM, the least traffic beyond W: A once per CTA column plus, with split-K,
    ``SPLIT_WEIGHT`` x the partials' bytes and ``SPLIT_FIXED_BYTES`` (ties: less split-K, then the
    wider tile). None where no grid qualifies (``default_schedule`` then falls back to the a_smem
    0 rule). A guess from one measurement (M = 32 was bound by L2, not DRAM): the GPU probe's
    table decides."""
    best: tuple[float, int, int, int] | None = None
    for b in (bn,) if bn else DEFAULT_BN_SMEM:
        stages = default_stages(bm, b, warps, k, 1)
        _, rpw, _ = warp_layout(b, warps)
        resident = sm_count * _resident_ctas(register_estimate(bm, b, stages, warps, 1), warps)
        cap = _max_split(m, k, b, warps)
        for s in SPLIT_K_OPTIONS:
            if s > cap:
                break
            ctas = _cdiv(n, b) * _cdiv(m, bm) * s
            in_flight = min(ctas, resident) * warps * stages * rpw * 16 * CHUNK * 2
            if not sm_count <= ctas <= resident or in_flight < IN_FLIGHT_PER_SM * sm_count:
                continue
            traffic = _cdiv(n, b) * m * k * 2 + (SPLIT_WEIGHT * 2 * s * m * n * 4 + SPLIT_FIXED_BYTES if s > 1 else 0)
            key = (traffic, s, -b, b)
            if best is None or key < best:
                best = key
    return None if best is None else (best[3], best[1])


BULK_LATENCY_S = 1.0e-6
"""DRAM latency under load that the bulk ring's bytes in flight must cover (``bulk_cost_us``)."""
BULK_SM_SHARE = 1.0
"""The most one SM streams in ``bulk_cost_us``, as a multiple of its even share of the DRAM
bandwidth: a grid on fewer than 1 / BULK_SM_SHARE of the SMs cannot reach the bandwidth (on the
H200 every fastest bulk build ran >= 2 CTAs per SM: ADR-0003)."""


def default_w_bulk(k: int, limits: DeviceLimits) -> int:
    """``W_BULK_DEFAULT`` where bulk copies can build (``bulk_applies``), else 0."""
    return W_BULK_DEFAULT if bulk_applies(k, limits) else 0


def _bulk_resident(bm: int, bn: int, warps: int, stages: int, bulk_k: int, limits: DeviceLimits,
                   mode: int = 1) -> int:
    """Resident w_bulk CTAs per SM: by shared memory (1 KB reserved per CTA) and by warps."""
    smem = bulk_smem(bm, bn, warps, stages, bulk_k, mode) + BULK_STATIC_SMEM + 1024
    return max(1, min(limits.shared_memory_per_sm_bytes // smem, 64 // (warps + 1), 32))


def bulk_cost_us(m: int, n: int, k: int, bm: int, bn: int, stages: int, warps: int, split_k: int,
                 bulk_k: int, limits: DeviceLimits, bandwidth_bytes_per_s: float, mode: int = 1) -> float:
    """A predicted time in microseconds for a w_bulk ring (the tuner's prior, not a measurement, and
    not what picks the default: ``tma_schedule`` does): W, A, R and out
    from DRAM in waves of resident CTAs, each wave at the bandwidth or at what its bytes in flight
    (``stages`` slots of BN rows of bulk_k elements per CTA) carry over ``BULK_LATENCY_S`` or what
    its SMs can stream (``BULK_SM_SHARE``), whichever is lowest; A's reads from L2 once per CTA; the split-K partials written and read back plus the
    reduction's fixed cost; the launch."""
    item = 2
    ctas = _cdiv(n, bn) * _cdiv(m, bm) * split_k
    slots = limits.sm_count * _bulk_resident(bm, bn, warps, stages, bulk_k, limits, mode)
    per_cta = (n * k + _cdiv(n, bn) * m * k / L2_RATIO) * item / ctas
    t = 0.0
    left = ctas
    while left > 0:
        c = min(left, slots)
        in_flight = c * stages * (bn + bm) * bulk_k * item
        sm_rate = min(c, limits.sm_count) * BULK_SM_SHARE * bandwidth_bytes_per_s / limits.sm_count
        t += c * per_cta / min(bandwidth_bytes_per_s, in_flight / BULK_LATENCY_S, sm_rate)
        left -= c
    partials = 2 * split_k * m * n * 4 if split_k > 1 else 0
    t += (2 * m * n * item + partials) / bandwidth_bytes_per_s
    return t * 1e6 + 2.0 + (1.0 if split_k > 1 else 0.0)


TMA_NARROW_BM = 16
"""Up to this BM the w_bulk 2 default takes ``TMA_NARROW`` (BN, warps), above it ``TMA_WIDE``."""
TMA_NARROW = (16, 4)
TMA_WIDE = (128, 8)
"""The w_bulk 2 default's (BN, warps): narrow tiles make many CTAs, each W box read once, where A is
small (BM <= 16); at BM 32 and 64 wide tiles with 8 warps, A read once per 128 rows (H200 probe,
ADR-0003: 16x16 fastest at M = 1-16, 64x128 with 8 warps and split-K at M = 33)."""
TMA_FILL = 0.9
"""The w_bulk 2 default's split-K counts a grid that busies this share of the SMs as filling them."""
TMA_MIN_RESIDENT = 2
"""The w_bulk 2 default's ring: the deepest of ``STAGE_OPTIONS`` that keeps this many CTAs per SM."""


def tma_schedule(m: int, n: int, k: int, bm: int, limits: DeviceLimits, bn: int | None = None,
                 stages: int | None = None, split_k: int | None = None, bulk_k: int | None = None,
                 warps: int | None = None, mode: int = 2) -> tuple[int, tuple[int, int, int, int] | None]:
    """(warps, (BN, split_k, stages, bulk_k)) for a shared-memory ring (w_bulk ``mode``, the
    shared memory counted as that mode lays it out), the knobs given kept: BN and warps by
    BM (``TMA_NARROW``/``TMA_WIDE``), ``DEFAULT_BULK_K``, the least split-K (at most one slot of K
    per split) that busies ``TMA_FILL`` of the SMs in one wave of resident CTAs, else the least
    that busies them, and the deepest ring that keeps ``TMA_MIN_RESIDENT`` CTAs per SM and the grid
    in one wave (else the deepest that keeps them, else the deepest that fits): at 16 x 8192 x 8192
    on the H200 16x16 with 8 slots (3 CTAs per SM, 512 CTAs in 1.3 waves) ran 43.7 us, with 6
    slots (4 per SM, one wave) 37.6. None for the knobs where no ring fits."""
    nb, nw = TMA_NARROW if bm <= TMA_NARROW_BM else TMA_WIDE
    warps = warps or nw
    bn = bn or nb
    bk = bulk_k or DEFAULT_BULK_K
    fit = bulk_stages_that_fit(bm, bn, warps, bk, limits, mode)
    if stages is not None and stages not in fit:
        return warps, None
    if not fit:
        return warps, None
    cap = max(1, _cdiv(k, bk))
    splits = [s for s in SPLIT_K_OPTIONS if s <= cap] if split_k is None else [split_k]
    busy = TMA_FILL * limits.sm_count

    def grid(st: int) -> tuple[int, int, int]:
        """(split-K, CTAs, resident CTA slots) at ring depth st."""
        slots = limits.sm_count * _bulk_resident(bm, bn, warps, st, bk, limits, mode)
        ctas = {s: _cdiv(n, bn) * _cdiv(m, bm) * s for s in splits}
        sp = next((s for s in splits if busy <= ctas[s] <= slots),
                  next((s for s in splits if ctas[s] >= busy), splits[-1]))
        return sp, ctas[sp], slots

    if stages is None:
        deep = [st for st in fit if _bulk_resident(bm, bn, warps, st, bk, limits, mode) >= TMA_MIN_RESIDENT]
        one_wave = [st for st in deep if grid(st)[1] <= grid(st)[2]]
        stages = max(one_wave or deep or fit)
    split_k = grid(stages)[0]
    return warps, (bn, split_k, stages, bk)


def plan(m: int, n: int, k: int, dtype: str, limits: DeviceLimits, block_size: str | None = None,
         stages: int | None = None, warps: int | None = None, split_k: int | None = None,
         fuse: bool = True, a_smem: int | None = None, w_bulk: int | None = None,
         bulk_k: int | None = None) -> SkinnyPlan:
    """Resolve every unset knob from the hardware (``default_bm``, ``default_schedule`` against
    limits.sm_count, ``default_stages``, ``default_a_smem``) and the launch geometry; ValueError
    naming the knob for a value this path cannot run (``check`` lists every problem). a_smem None
    resolves as ``check`` resolves it: ``default_a_smem`` of the final tile, stages and warps."""
    if min(m, n, k) < 1:
        raise ValueError(f"shape {m}x{n}x{k}: every dimension must be >= 1")
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype}: the skinny path takes {', '.join(DTYPES)}")
    if m > MAX_M:
        raise ValueError(f"shape.m={m}: the skinny path is for M <= {MAX_M}")
    warps_req = warps
    if warps is None:
        warps = DEFAULT_WARPS
    if warps not in WARPS_OPTIONS:
        raise ValueError(f"schedule.warps={warps}: one of {WARPS_OPTIONS}")
    if split_k is not None and split_k not in SPLIT_K_OPTIONS:
        raise ValueError(f"schedule.split_k={split_k}: one of {SPLIT_K_OPTIONS}")
    if stages is not None and stages not in STAGE_OPTIONS:
        raise ValueError(f"memory_pipelining={stages}: one of {STAGE_OPTIONS}")
    if a_smem is not None and a_smem not in A_SMEM_OPTIONS:
        raise ValueError(f"schedule.a_smem={a_smem}: one of {A_SMEM_OPTIONS}")
    if a_smem == 1 and k % 8:
        raise ValueError(f"schedule.a_smem={a_smem}: A in shared memory needs K % 8 == 0 (K = {k})")
    if w_bulk is not None and w_bulk not in W_BULK_OPTIONS:
        raise ValueError(f"schedule.w_bulk={w_bulk}: one of {W_BULK_OPTIONS}")
    if w_bulk == 0 and bulk_k is not None:
        raise ValueError(f"schedule.bulk_k={bulk_k}: slots of K are for schedule.w_bulk = 1 or 2 only")
    if bulk_k is not None and bulk_k not in BULK_K_OPTIONS:
        raise ValueError(f"schedule.bulk_k={bulk_k}: one of {BULK_K_OPTIONS}")
    bm, bn_req = (default_bm(m), None) if block_size is None else parse_block_size(block_size)
    if w_bulk is None:
        w_bulk = 1 if bulk_k is not None else 0 if a_smem == 1 else default_w_bulk(k, limits)
    if w_bulk:
        if not bulk_applies(k, limits):
            raise ValueError(f"schedule.w_bulk={w_bulk}: bulk copies need compute capability >= "
                             f"{BULK_MIN_CC[0]}.{BULK_MIN_CC[1]} and K % 8 == 0 (K = {k}, "
                             f"cc {limits.compute_capability[0]}.{limits.compute_capability[1]})")
        if a_smem == 1:
            raise ValueError(f"schedule.a_smem={a_smem}: with schedule.w_bulk = 1 A comes through the ring (a_smem 0)")
        warps, picked = tma_schedule(m, n, k, bm, limits, bn_req, stages, split_k, bulk_k, warps_req, w_bulk)
        if picked is None:
            raise ValueError(f"memory_pipelining={stages}: no ring of {bm}x{bn_req or 'any'} with bulk_k "
                             f"{bulk_k or DEFAULT_BULK_K} fits {limits.shared_memory_per_block_bytes} bytes of "
                             f"shared memory per block")
        bn, split, st, bk = picked
        plan_ = SkinnyPlan(bm=bm, bn=bn, stages=st, warps=warps, split_k=split, fuse=bool(fuse), aligned8=True,
                           aligned2=True, grid=(_cdiv(n, bn), split, _cdiv(m, bm)), block=(32 * (warps + 1), 1, 1),
                           smem_bytes=0, w_bulk=w_bulk, bulk_k=bk)
        return SkinnyPlan(**{**plan_.__dict__, "smem_bytes": smem_bytes(plan_)})

    def resolve(variant: int) -> tuple[int, int, int]:
        """(BN, split_k, stages) for the given a_smem variant, the user's knobs kept."""
        bn, auto_split = default_schedule(m, n, k, bm, warps, limits.sm_count, bn_req, variant)
        st = stages if stages is not None else default_stages(bm, bn, warps, k, variant)
        return bn, split_k if split_k is not None else auto_split, st

    if a_smem is not None:
        bn, split, st = resolve(a_smem)
        variant = a_smem
    else:
        bn, split, st = resolve(int(bm >= A_SMEM_MIN_BM and k % 8 == 0))
        variant = default_a_smem(bm, bn, st, warps, k, limits)
        if not variant and bm >= A_SMEM_MIN_BM and k % 8 == 0:  # a_smem 1 does not fit these knobs
            bn, split, st = resolve(0)
            variant = default_a_smem(bm, bn, st, warps, k, limits)
    grid = (_cdiv(n, bn), split, _cdiv(m, bm))
    return SkinnyPlan(bm=bm, bn=bn, stages=st, warps=warps, split_k=split, fuse=bool(fuse),
                      aligned8=k % 8 == 0, aligned2=k % 2 == 0, grid=grid, block=(32 * warps, 1, 1),
                      smem_bytes=_smem(bm, bn, warps, variant), a_smem=variant)


def check(m: int, n: int, k: int, dtype: str, limits: DeviceLimits, block_size: str,
          stages: int, warps: int, split_k: int, a_smem: int | None = None, w_bulk: int | None = None,
          bulk_k: int = 0) -> list[Violation]:
    """Every constraint of this path, before compiling. a_smem None checks the variant ``plan``
    takes by default for these knobs (``default_a_smem``), so that ``check`` and ``plan`` called
    with the same knobs agree."""
    out: list[Violation] = []
    if dtype not in DTYPES:
        out.append(Violation("dtype", dtype, "the skinny path takes 16-bit data", ", ".join(DTYPES)))
    if m > MAX_M:
        out.append(Violation("shape.m", m, f"the skinny (decode) path is for M <= {MAX_M} tokens",
                             f"M <= {MAX_M}"))
    for name, val in (("m", m), ("n", n), ("k", k)):
        if not 1 <= val < 2**31:
            out.append(Violation(f"shape.{name}", val, "must be in 1..2**31-1", "int32 kernel arguments"))
    if tuple(limits.compute_capability) < (8, 0):
        out.append(Violation("device", limits.profile or str(limits.compute_capability),
                             "mma.sync m16n8k16 with bf16 needs compute capability 8.0", "cc >= 8.0"))
    if warps not in WARPS_OPTIONS:
        out.append(Violation("schedule.warps", warps, "warps per CTA",
                             ", ".join(map(str, WARPS_OPTIONS))))
    if split_k not in SPLIT_K_OPTIONS:
        out.append(Violation("schedule.split_k", split_k, "CTAs per output tile along K",
                             ", ".join(map(str, SPLIT_K_OPTIONS))))
    if stages not in STAGE_OPTIONS:
        out.append(Violation("memory_pipelining", stages, "chunks of 32 K elements in flight per warp",
                             ", ".join(map(str, STAGE_OPTIONS))))
    if a_smem is not None and a_smem not in A_SMEM_OPTIONS:
        out.append(Violation("schedule.a_smem", a_smem, "A's fragments from global memory (0) or shared memory (1)",
                             ", ".join(map(str, A_SMEM_OPTIONS))))
    elif a_smem == 1 and k % 8:
        out.append(Violation("schedule.a_smem", a_smem,
                             f"A staged in shared memory needs K % 8 == 0 (16-byte cp.async of A's rows; K = {k})",
                             "K % 8 == 0, or schedule.a_smem = 0"))
    try:
        bm, bn = parse_block_size(block_size)
    except ValueError as exc:
        return [*out, Violation("block_size", block_size, str(exc), ", ".join(TILES))]
    if out:
        return out
    if w_bulk is None:  # as ``plan`` resolves it
        w_bulk = 1 if bulk_k else 0 if a_smem == 1 else default_w_bulk(k, limits)
    if w_bulk:
        return _bulk_violations(m, n, k, bm, bn, stages, warps, split_k, bulk_k or DEFAULT_BULK_K, limits, a_smem,
                                w_bulk)
    if a_smem is None:
        a_smem = default_a_smem(bm, bn, stages, warps, k, limits)
    return _geometry_violations(m, n, k, bm, bn, stages, warps, split_k, limits, a_smem)


def _bulk_violations(m: int, n: int, k: int, bm: int, bn: int, stages: int, warps: int, split_k: int,
                     bulk_k: int, limits: DeviceLimits, a_smem: int | None, mode: int = 1) -> list[Violation]:
    """w_bulk 1 or 2: the device and K, the ring against shared memory, threads, split-K counters."""
    out: list[Violation] = []
    if mode not in W_BULK_OPTIONS:
        return [Violation("schedule.w_bulk", mode, "how W reaches the MMAs", ", ".join(map(str, W_BULK_OPTIONS)))]
    if not bulk_applies(k, limits):
        out.append(Violation("schedule.w_bulk", mode,
                             f"bulk copies need compute capability >= {BULK_MIN_CC[0]}.{BULK_MIN_CC[1]} and "
                             f"16-byte aligned rows (K = {k}, cc {limits.compute_capability[0]}."
                             f"{limits.compute_capability[1]})", "schedule.w_bulk = 0"))
    if a_smem == 1:
        out.append(Violation("schedule.a_smem", a_smem, "with schedule.w_bulk = 1 A comes through the ring",
                             "schedule.a_smem = 0"))
    if bulk_k not in BULK_K_OPTIONS:
        out.append(Violation("schedule.bulk_k", bulk_k, "K elements per ring slot",
                             ", ".join(map(str, BULK_K_OPTIONS))))
        return out
    smem = bulk_smem(bm, bn, warps, stages, bulk_k, mode) + BULK_STATIC_SMEM
    if smem > limits.shared_memory_per_block_bytes:
        fits = bulk_stages_that_fit(bm, bn, warps, bulk_k, limits, mode)
        out.append(Violation("memory_pipelining", stages,
                             f"a ring of {stages} slots of {bm}x{bn} with bulk_k {bulk_k} needs {smem} bytes of "
                             f"shared memory; fits: {', '.join(map(str, fits)) or 'none'}",
                             f"{limits.shared_memory_per_block_bytes} bytes per block"))
    return out + _launch_violations(m, n, bm, bn, warps, split_k, limits, producer=True)


def _geometry_violations(m: int, n: int, k: int, bm: int, bn: int, stages: int, warps: int,
                         split_k: int, limits: DeviceLimits, a_smem: int = 0) -> list[Violation]:
    """Registers, shared memory, threads and the split-K counters for valid knob values."""
    out: list[Violation] = []
    fits = stages_that_fit(bm, bn, warps, k, a_smem)
    if stages not in fits:
        width = load_width(k)
        out.append(Violation("memory_pipelining", stages,
                             f"{bm}x{bn} with {warps} warps, {width}-byte loads and a_smem {a_smem} would "
                             f"spill registers at this depth (estimate "
                             f"{register_estimate(bm, bn, stages, warps, a_smem)}); "
                             f"fits: {', '.join(map(str, fits)) or 'none'}",
                             f"register estimate <= {REGISTER_BUDGET[width]} (no spills)"))
    smem = _smem(bm, bn, warps, a_smem)
    if smem > _smem_limit(limits):
        out.append(Violation("schedule.a_smem" if a_smem and _smem(bm, bn, warps) <= _smem_limit(limits)
                             else "block_size", a_smem if a_smem else f"{bm}x{bn}",
                             f"{smem} bytes of static shared memory for {bm}x{bn}",
                             f"{_smem_limit(limits)} bytes per block"))
    return out + _launch_violations(m, n, bm, bn, warps, split_k, limits)


def _launch_violations(m: int, n: int, bm: int, bn: int, warps: int, split_k: int,
                       limits: DeviceLimits, producer: bool = False) -> list[Violation]:
    """Threads per block (``warps`` consumer warps, and a producer warp with a w_bulk ring) and the
    split-K arrival counters, for either way W travels."""
    out: list[Violation] = []
    if 32 * (warps + producer) > limits.max_threads_per_block:
        out.append(Violation("schedule.warps", warps,
                             "too many threads per block" + (" (one more warp copies)" if producer else ""),
                             f"{limits.max_threads_per_block} threads"))
    tiles = _cdiv(n, bn) * _cdiv(m, bm)
    if split_k > 1 and tiles > COUNTERS:
        out.append(Violation("block_size", f"{bm}x{bn}", f"{tiles} output tiles need split-K counters",
                             f"{COUNTERS} counters"))
    return out


def defines(plan: SkinnyPlan, dtype: str) -> dict[str, int]:
    """The template's #define values, all integers."""
    return {"BM": plan.bm, "BN": plan.bn, "STAGES": plan.stages, "WARPS": plan.warps,
            "SPLIT_K": plan.split_k, "DT": DT_CODE[dtype], "FUSE": int(plan.fuse),
            "ALIGNED8": int(plan.aligned8), "ALIGNED2": int(plan.aligned2), "COUNTERS": COUNTERS,
            "A_SMEM": int(plan.a_smem), "A_TILE": a_tile_chunks(plan.bm, plan.bn, plan.warps),
            "W_BULK": int(plan.w_bulk), "BULK_K": int(plan.bulk_k)}


def source(plan: SkinnyPlan, dtype: str) -> str:
    """Defines, then vec16.cuh for the data type, then the template."""
    consts = defines(plan, dtype)
    head = "".join(f"#define {name} {int(value)}\n" for name, value in consts.items())
    return head + vec16_source(consts["DT"]) + kernel_source(SOURCE_FILE)


def render(plan: SkinnyPlan, m: int, n: int, k: int, dtype: str) -> Build:
    """The build for one plan: the GEMM launch (``a``, ``w``, ``r``, ``out``, ``ws``, M, N, K), with
    fusion off the in-place add on ``out``; ``ws`` is scratch of (split_k, M, N) fp32 (one element
    when split_k is 1, never read then)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: one of {', '.join(DTYPES)}")
    dynamic = bulk_smem(plan.bm, plan.bn, plan.warps, plan.stages, plan.bulk_k, plan.w_bulk) if plan.w_bulk else 0
    args: tuple[str | int | TensorMapArg, ...] = ("a", "w", "r", "out", "ws", m, n, k)
    if plan.w_bulk == 2:
        args += (TensorMapArg("w", rows=n, cols=k, box_rows=plan.bn, box_cols=64, swizzle_bytes=128),
                 TensorMapArg("a", rows=m, cols=k, box_rows=min(plan.bm, m), box_cols=64, swizzle_bytes=128))
    launches = [Launch(KERNEL, plan.grid, plan.block, dynamic, args, pdl=bool(plan.w_bulk))]
    functions = [KERNEL]
    if not plan.fuse:
        add_grid = max(1, min(_cdiv(_cdiv(m * n, 8), ADD_THREADS), 1024))
        launches.append(Launch(ADD_KERNEL, (add_grid, 1, 1), (ADD_THREADS, 1, 1), 0, ("out", "r", m, n)))
        functions.append(ADD_KERNEL)
    ws_shape = (plan.split_k, m, n) if plan.split_k > 1 else (1,)
    return Build(source=source(plan, dtype), functions=tuple(functions), launches=tuple(launches),
                 options=("--std=c++17",), info=plan.info(),
                 scratch=(Buffer("ws", ws_shape, "fp32", "scratch"),))


L2_RATIO = 1.8
"""L2 -> SM bandwidth over the DRAM bandwidth ``cost_us`` is given: on the H200 the a_smem 0 build
at M = 32, N = K = 5120 (32x16) moved ~157 MB through L2 in 26.4 us (~6 TB/s) against ~3.2 TB/s
streamed from DRAM by the decode-sized runs."""


def cost_us(plan: SkinnyPlan, m: int, n: int, k: int, dtype: str, bandwidth_bytes_per_s: float,
            sm_count: int) -> float:
    """A predicted time in microseconds (a search-order prior for a tuner, not a measurement): the
    slower of DRAM bytes (W once, A, R and out, the split-K partials written and read back) over
    the bandwidth and L2 -> SM bytes (W, A once per CTA with a_smem 1 or once per row-group slot
    of each CTA with a_smem 0, the partials) over ``L2_RATIO`` x the bandwidth, divided by an
    efficiency that falls where the grid leaves SMs idle or holds too few bytes in flight for the
    memory latency, plus the launch and the reduction's tail."""
    if plan.w_bulk:
        raise ValueError("cost_us: a w_bulk plan's model is bulk_cost_us (it needs the device's limits)")
    item = 2
    partials = 2 * plan.split_k * m * n * 4 if plan.split_k > 1 else 0
    dram = (n * k + m * k + 2 * m * n) * item + partials
    slots, rpw, _ = warp_layout(plan.bn, plan.warps)
    a_l2 = plan.grid[0] * m * k * item * (1 if plan.a_smem else slots)
    l2 = n * k * item + a_l2 + partials + 2 * m * n * item
    ctas = plan.grid[0] * plan.grid[1] * plan.grid[2]
    fill = min(1.0, ctas / sm_count)
    per_sm = _ctas_per_sm(plan)
    resident = min(ctas, sm_count * per_sm)
    in_flight = resident * plan.warps * plan.stages * rpw * 16 * CHUNK * item
    latency_s = 1.0e-6
    depth = min(1.0, in_flight / (bandwidth_bytes_per_s * latency_s))
    waves = _cdiv(ctas, sm_count * per_sm)
    t = max(dram, l2 / L2_RATIO) / bandwidth_bytes_per_s / max(1e-3, fill * depth) * 1e6
    t *= 1.0 + 0.05 * (waves - 1)
    return t + 2.0 + (1.0 if plan.split_k > 1 else 0.0)


def _resident_ctas(registers: int, warps: int) -> int:
    """Resident CTAs per SM by registers (the estimate rounded up to 8) and a 64-warp SM."""
    regs = 8 * math.ceil(registers / 8)
    return max(1, min(REGISTERS_PER_SM // (regs * 32 * warps), 64 // warps, 32))


def _ctas_per_sm(plan: SkinnyPlan) -> int:
    """Resident CTAs per SM of a plan (``_resident_ctas`` of its register estimate)."""
    return _resident_ctas(register_estimate(plan.bm, plan.bn, plan.stages, plan.warps, plan.a_smem), plan.warps)
