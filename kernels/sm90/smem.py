"""Shared memory of one CTA (the ring of stages, the epilogue buffers, the barriers) and the
BLOCK_SIZE and MEMORY_PIPELINING options that fit a device's per-block limit."""

from __future__ import annotations

from kernels.sm90.tiles import (
    DTYPES,
    FIT_TILES,
    ITEMSIZE,
    PINGPONG_TILES,
    _dtype,
    _mnk,
    _tile_name,
    kernel_frame_error,
    parse_block_size,
    stage_count,
    tiles_for,
)
from kernels.spec import DeviceLimits

BARRIER_BYTES = 16
"""Two 8-byte mbarriers (full, empty) per stage; plus two for the epilogue buffer and 16 bytes
for the stream-K "finish" flag (ping-pong: two buffers' barriers, two turn barriers, two flags)."""
ALIGN_SLACK = 1024
"""The dynamic shared-memory base is rounded up to 1024 bytes for the 128B swizzle atoms."""
MAX_STAGES = 22
"""The deepest ring compiled: the swapped decode tile 16x64 fits 22 slots of 10 KB (a 220 KB ring;
cuBLAS streams W through ~180 KB); the narrow 64x80 tile fits 11 slots of 18 KB."""


def smem_bytes(block_size: str, stages: int, dtype: str, pingpong: bool = False,
               epi_ring: bool = False, epi_shared: bool = False) -> int:
    """Dynamic shared memory for one CTA: stages x (A tile + W tile), the BM x BN epilogue
    buffer (residual in, result out; one per consumer with ping-pong unless ``epi_shared``, which
    has them share one; none with ``epi_ring``, which stages it in the ring), barriers,
    alignment."""
    bm, bn, _ = parse_block_size(block_size, dtype)
    itemsize = ITEMSIZE.get(_dtype(dtype), 2)
    slots = stage_count(stages)
    bars = 2 if pingpong else 1
    bufs = 1 if epi_shared else bars
    return (slots * (bm + bn) * 128 + (0 if epi_ring else bufs * bm * bn * itemsize)
            + (slots + 2 * bars) * BARRIER_BYTES + ALIGN_SLACK)


EPI_SHARED_DTYPES = ("bf16", "fp16")
"""Where ping-pong may run its two consumers on one shared epilogue buffer (``build(epi_shared=True)``)
for a stage count two buffers leave no room for: the dtypes it ran with on the GPU."""


def pingpong_fits(limits: DeviceLimits, block_size: str, stages: int, dtype: str) -> bool:
    """True where the ping-pong consumer schedule can be compiled for these knobs: a tile one
    warpgroup holds whole, and two epilogue buffers plus the stages in shared memory, or (16-bit
    data, ``EPI_SHARED_DTYPES``) one buffer the two consumers share."""
    parse_block_size(block_size, dtype)
    return (_tile_name(block_size) in PINGPONG_TILES
            and smem_bytes(block_size, stages, dtype, True, epi_shared=_dtype(dtype) in EPI_SHARED_DTYPES)
            <= limits.shared_memory_per_block_bytes)


def epi_shared_needed(limits: DeviceLimits, block_size: str, stages: int, dtype: str) -> bool:
    """True where ping-pong fits these knobs only with the two consumers sharing one epilogue
    buffer (16-bit data)."""
    cap = limits.shared_memory_per_block_bytes
    return (_dtype(dtype) in EPI_SHARED_DTYPES and _tile_name(block_size) in PINGPONG_TILES
            and smem_bytes(block_size, stages, dtype, True) > cap
            >= smem_bytes(block_size, stages, dtype, True, epi_shared=True))


def block_size_options(limits: DeviceLimits, dtype: str) -> list[str]:
    """Tiles whose smallest pipelined configuration (2 stages) fits the per-block limit."""
    if _dtype(dtype) not in DTYPES:
        return []
    return [name for name in tiles_for(dtype)
            if smem_bytes(name, 2, dtype) <= limits.shared_memory_per_block_bytes]


def pipelining_options(limits: DeviceLimits, dtype: str, block_size: str,
                       shape: dict[str, int] | None = None) -> list[int]:
    """0 (off) and every stage count from 2 up to what fits in shared memory (at most
    ``MAX_STAGES``); with a shape, also the deeper rings that fit once the epilogue tile is staged
    in the ring (``ring_stage_options``). A knob API: a swapped tile
    written in the kernel's frame is refused (``kernel_frame_error``)."""
    if (frame := kernel_frame_error(block_size)) is not None:
        raise ValueError(frame)
    parse_block_size(block_size, dtype)
    cap = limits.shared_memory_per_block_bytes
    out = [0] if smem_bytes(block_size, 0, dtype) <= cap else []
    out += [s for s in range(2, MAX_STAGES + 1) if smem_bytes(block_size, s, dtype) <= cap]
    return out + ring_stage_options(limits, dtype, block_size, shape)


def ring_stage_options(limits: DeviceLimits, dtype: str, block_size: str,
                       shape: dict[str, int] | None) -> list[int]:
    """The stage counts that fit only with the epilogue tile staged in the ring's freed slots
    (``build(epi_ring=True)``: cooperative and data-parallel; where a CTA gets more than one tile
    the slots are returned after each store): 16-bit data, for a given shape; else none. The
    defaults take them only where every CTA has one tile (``one_tile_per_cta``, ADR-0007)."""
    if ITEMSIZE.get(_dtype(dtype), 4) != 2 or not shape or _tile_name(block_size) in FIT_TILES:
        # FIT_TILES: their ring-staged builds (128x208 s5, 128x144 s6) have not run on a GPU yet
        # (a swapped tile's name is R x 128, none of them)
        return []
    try:
        _mnk(shape)
    except ValueError:
        return []
    cap = limits.shared_memory_per_block_bytes
    return [s for s in range(2, MAX_STAGES + 1)
            if smem_bytes(block_size, s, dtype) > cap >= smem_bytes(block_size, s, dtype, epi_ring=True)]
