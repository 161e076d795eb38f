"""The decode path's knobs (their values), its plan object (``SkinnyPlan``) and the geometry that
follows from a tile: warps' layout, registers, shared memory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernels.spec import DeviceLimits, Tile

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
"""schedule.w_bulk: 0 W through registers (16-byte loads); W and A into a shared-memory ring by 1 row
copies, 2 tensor-map boxes."""
BULK_K_OPTIONS = (64, 128, 256, 512, 1024)
"""schedule.bulk_k: K elements per ring slot (128 to 512 bytes per row and copy)."""
BULK_MIN_CC = (9, 0)
"""cp.async.bulk and mbarrier transaction counts need Hopper."""
BULK_STATIC_SMEM = 128 * -(-(16 + 2 * 8 * max(STAGE_OPTIONS)) // 128)
"""Static shared memory beside the ring: the split-K flag and two mbarriers per slot (at most), in
the 128-byte units ptxas lays static memory out in ahead of the 128-byte aligned dynamic ring."""
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
REGISTERS_PER_SM = 65536


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
