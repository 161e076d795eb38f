"""Hopper-native path of gemm_residual: TMA + mbarrier pipeline + wgmma, warp-specialised,
persistent (``gemm_residual_sm90.cu``). Used on compute capability 9.0 for bf16/fp16, tf32
(fp32 data read as tf32 by the tensor cores) and fp32 (3xTF32: each fp32 operand split into a tf32
high and low part, three tensor-core products summed in fp32; fp32-class accuracy).

``out[M, N] = A[M, K] @ W[N, K]^T + R[M, N]``; fp32 accumulation, the residual added in fp32 in
the epilogue and the result rounded once. Tiles 128x256, 128x128, 256x128 and 128x160 (N = 2560 =
16 x 160), and for 16-bit data at small M the narrow 128x80 and 64x80 and, as knobs, cuBLAS's wide
256x160 and 128x320 (``WIDE_TILES``; 128x320's consumers split N), and the widths 128x144, 128x192
and 128x208 (``FIT_TILES``) that fit N into fewer blocks where the others leave a round nearly empty
(``FIT_GAIN``); optional 2x1 clusters with
TMA multicast of W (``build(cluster=2)``; the default only for 16-bit ping-pong 128x128,
``use_cluster``), and for measurements 1x2 / 2x2 clusters that also multicast A
(``build(cluster=(cm, cn))``, 16-bit; slower everywhere on the H200: ADR-0007). Module-level
functions, so that the ``gemm_residual`` spec can delegate to them:

- ``supported(limits, dtype, shape)``: cc 9.0 and bf16/fp16/tf32/fp32 (and N, K multiples of 8).
- ``block_size_options`` / ``pipelining_options`` / ``smem_bytes`` / ``check``.
- ``build(task, limits, block_size, stages, fuse=None)``: a :class:`kernels.spec.Build` whose
  GEMM launch takes four :class:`~kernels.spec.TensorMapArg` (A, W, R, out; 128B swizzle,
  64-element-wide boxes) and the ints M, N, K (fusion off adds a launch on ``out``, ``r``). The backend must encode the tensor maps
  (``engine.backends.tensormap``) and raise the kernel's dynamic shared-memory limit to
  ``Launch.shared_mem_bytes`` before launching.

Shapes: M is arbitrary (TMA zero-fills rows past M; the epilogue is predicated). N and K need
only be multiples of 8 (16-byte row strides for TMA): partial N and K tiles are zero-filled by
TMA too and the epilogue checks the columns, so no tile divisibility is required.

MEMORY_PIPELINING: 0 ("off") compiles one shared-memory slot (the producer waits for the
consumers before the next copy: no overlap); ``s`` >= 2 compiles ``s`` slots. For 16-bit data and a
given shape, the counts that fit only without the epilogue buffer are offered too: the epilogue
tile is then staged in the ring's freed slots (``ring_stage_options``; cooperative, data-parallel).

Schedule (not a knob: chosen per shape by ``plan_schedule``): the persistent grid runs whole tiles
data-parallel, and, where the tile count leaves a bad last wave (or too few tiles to fill the
GPU), splits the k-iterations of the tail tiles evenly over the grid (stream-K). Partial tiles
are summed in fp32 in a static workspace; the CTA that completes a tile's K adds the residual
once and rounds once. ``streamk=False`` compiles the purely data-parallel kernel.

Consumer schedule (not a knob either: ``use_pingpong``): cooperative (both consumer warpgroups
share every tile, BM / 2 rows each, or BN / 2 columns on 128x320, and run the epilogue together) or
ping-pong (each consumer
warpgroup owns whole tiles, alternately, with its own epilogue buffer, so one warpgroup's
epilogue overlaps the other's main loop). Ping-pong needs the whole tile in one warpgroup's
registers (<= 160 fp32 accumulators per thread: the 128x128 and 128x160 tiles) and two epilogue
buffers (128x160: at most 4 stages beside them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from kernels.spec import (
    KERNEL_DIR,
    Buffer,
    Build,
    DeviceLimits,
    Launch,
    TensorMapArg,
    Tile,
    Violation,
    vec16_source,
)

SOURCE_FILE = "gemm_residual_sm90.cu"
KERNEL = "gemm_residual_sm90"
ADD_KERNEL = "residual_add_inplace"
ADD_KERNEL_F32 = "residual_add_inplace_f32"
BK = 64
"""K per stage for 16-bit data: one 128-byte swizzle row (tf32: 32 fp32 elements, ``bk_of``)."""

SWAP_ROWS = range(136, 201, 8)
"""The swapped tiles' side along M (``SWAP_TILES``): every multiple of 8 from 136 to 200."""
TILES: dict[str, tuple[int, int, int]] = {
    # name: (BM, BN, consumer warpgroups)
    "128x256": (128, 256, 2),
    "128x128": (128, 128, 2),
    "256x128": (256, 128, 2),
    "128x160": (128, 160, 2),
    "128x80": (128, 80, 2),
    "64x80": (64, 80, 1),
    "256x160": (256, 160, 2),
    "128x320": (128, 320, 2),
    "128x144": (128, 144, 2),
    "128x192": (128, 192, 2),
    "128x208": (128, 208, 2),
    # swapped-operand tiles (``SWAP_TILES``): rows along M x 128 columns of N
    **{f"{r}x128": (r, 128, 2) for r in SWAP_ROWS},
}
"""Tile shapes, best default first. Each consumer warpgroup owns BM / consumers rows. The narrow
tiles (N = 80: 2560 = 32 x 80) are for small M, where the wide ones leave most SMs idle or split K:
N = K = 2560 gives 128 tiles at M = 256 (64x80, one consumer warpgroup) and M = 512 (128x80),
each CTA running the whole K loop."""
NARROW_TILES = ("128x80", "64x80")
"""Tiles for 16-bit data only: their 16-column epilogue tail chunk (32B swizzle) is not written for
fp32 data (``tiles_for``)."""
WIDE_TILES = ("256x160", "128x320")
"""cuBLAS's big tiles (knobs, not defaults: ADR-0007), 16-bit data only: 160 accumulators per
consumer thread,
two m64n160k16 per k16 each; 256x160's consumers split the rows as every cooperative tile does,
128x320's split the columns (``SPLIT_N_TILES``). Their 80 KB epilogue tile fits beside 2 stages,
deeper rings only with it staged in the ring (``build(epi_ring=True)``)."""
FIT_TILES = ("128x144", "128x192", "128x208")
"""Widths that fit N = 2560 into fewer N blocks (18, 14, 13) than 128 and 160 do (20, 16), after
cuBLAS, which picks its tile's free side per shape (ADR-0007): where the tiles of 128 or 160 leave
the last round nearly empty, 13 x 20 M blocks of 128x208 fill two rounds of 132 (M = 2433-2560). 16-bit data only (their 16-column tail
chunk, as the narrow tiles'); 128x144 runs ping-pong (144 accumulators per thread), the wider two
cooperative."""
SWAP_TILES = tuple(f"{r}x128" for r in SWAP_ROWS)
"""Tiles of R rows along M (any multiple of 8 from 136 to 200) by 128 columns of N, built as the
transposed product out^T = W A^T (``_build_swapped``, ``SWAP_AB`` in the kernel): the kernel's 128-row
side runs along N (W as the wgmma's A operand) and its BN = R along M (A as its B operand, so any
width a wgmma takes sizes the tile along M), as cuBLAS sizes its tiles to the shape (ADR-0007).
Cooperative, unclustered, data-parallel, 16-bit data; R and out keep their [M, N] layout (the
epilogue tile is R's natural R x 64 boxes, in its own buffer; for a shape, the deeper rings that fit
only with it staged in the ring's freed slots are knobs too, ``ring_stage_options``: not faster,
ADR-0007). ``default_knobs`` takes them at 4 stages where ``_swap_tile``
finds 13 row blocks filling two rounds with clearly less work (``SWAP_GAIN``)."""
_SWAP_KERNEL_TILES = {f"128x{r}": (128, r, 2) for r in SWAP_ROWS}
"""The swapped tiles in the kernel's frame (128 x R): what ``_build_swapped`` renders; no knob."""
MC_SHARE_ROWS = 8
"""A multicast box's rows are a multiple of this (one 128-byte swizzle atom is 8 rows: each CTA's
share then starts on an atom). Probes may lower it to test a share that starts mid-atom."""
MBAR_SUSPEND_NS = 0
"""A measurement option (0: off, the default): the mbarrier try_wait's suspend-time hint in ns
(``MBAR_SUSPEND_NS`` in the kernel), so that a waiting thread sleeps longer before it polls again.
Probes set it to test whether the polling's issue slots and power cost time (ADR-0007)."""
SPLIT_N_TILES = ("128x320",)
"""Cooperative tiles whose two consumers split the columns (SPLIT_N): a consumer of 64 x 320 would
need n320 wgmmas (n <= 256)."""

DTYPES = ("bf16", "fp16", "tf32", "fp32")
"""tf32: fp32 A, W, R and out; the tensor cores read the fp32 operands as tf32 (wgmma .tf32, the low
13 mantissa bits ignored), fp32 accumulation; the residual added in fp32.
fp32: the same data, fp32-class results by 3xTF32 (``tf32_split`` writes each operand's low part
tf32(x - hi); the GEMM sums a_lo*w_hi + a_hi*w_lo + a_hi*w_hi over 3x the k-blocks). The
portable path's FFMA kernel stays available as ``gemm_residual_mma``."""
ITEMSIZE = {"bf16": 2, "fp16": 2, "tf32": 4, "fp32": 4}
DT_CODE = {"bf16": 0, "fp16": 1, "tf32": 2, "fp32": 3}
PASSES = {"fp32": 3}
"""Tensor-core products per k-block (3xTF32 for fp32; one otherwise)."""
SPLIT_HI_DEFAULT = False
"""fp32: False reads each operand's high part as the tensor cores see x itself (low 13 bits
ignored) and writes only the low parts; True also writes hi = tf32(x) rounded to nearest."""
TAIL_SHIFT_DEFAULT = True
"""Move a last tile that reaches past M (N) back to end at M (N) where the build is data-parallel
with 16-bit data (``use_tail_shift``): a partial TMA box is slower than a whole one (ADR-0007)."""
SPLIT_KERNEL = "tf32_split"
PROMOTE_DEFAULT = 4
"""fp32: k-blocks (of 32) the tensor cores sum from zero before the group is drained and added
into a second register accumulator by FADD; 0 = all of K in the tensor cores, whose own
accumulation is coarser than fp32 round-to-nearest (its error grows with the steps). The group
size trades accuracy against time (ADR-0007). ``promote_fits`` says where it applies."""


def promote_fits(block_size: str, pingpong: bool) -> bool:
    """A second accumulator set fits beside the first: cooperative tiles of at most 64 x 160
    accumulators per consumer warpgroup (128x128, 128x160)."""
    bm, bn, consumers = parse_block_size(block_size, "fp32")
    return not pingpong and bm // consumers * bn <= 64 * 160


def bk_of(dtype: Any) -> int:
    """K per stage in elements: one 128-byte swizzle row (64 for bf16/fp16, 32 for tf32)."""
    return 128 // ITEMSIZE.get(_dtype(dtype), 2)


def _k16(k: int, dtype: Any) -> int:
    """K in 16-bit-element units times the products per k-block, so that k-block counts (cdiv by
    ``BK``) hold for every dtype (fp32's three tf32 products count three times)."""
    dt = _dtype(dtype)
    return k * ITEMSIZE.get(dt, 2) // 2 * PASSES.get(dt, 1)
BARRIER_BYTES = 16
"""Two 8-byte mbarriers (full, empty) per stage; plus two for the epilogue buffer and 16 bytes
for the stream-K "finish" flag (ping-pong: two buffers' barriers, two turn barriers, two flags)."""
ALIGN_SLACK = 1024
"""The dynamic shared-memory base is rounded up to 1024 bytes for the 128B swizzle atoms."""
MAX_STAGES = 12
"""The deepest ring compiled (the narrow 64x80 tile fits 11 slots of 18 KB; cuBLAS runs 11 there)."""
WS_TILES = 264
"""Stream-K workspace slots (fp32 BM x BN each, static in the module): at most this many tiles
are split; two waves of 132 SMs."""
STREAMK_DEFAULT = True
PINGPONG_TILES = ("128x128", "128x160", "128x144")
"""Tiles one consumer warpgroup can hold whole (BM * BN / 128 threads <= 160 accumulators)."""
PINGPONG_DEFAULT = True
"""Use ping-pong consumers where they fit and each CTA gets >= 2 tiles (``use_pingpong``): one
consumer's epilogue then overlaps the other's main loop, faster than cooperative there (ADR-0007)."""
"""Compile the stream-K tail into the kernel (the schedule still runs purely data-parallel
where ``plan_schedule`` finds no gain)."""

# Schedule cost model in microseconds, fitted to an H200 M sweep (ADR-0007; 35 measured schedules
# of 128x256 and 128x128 within ~5 % rms): fixed cost of a launch; one
# k-block of a 128x256 tile (scaled by tile area), slower by up to _HOT once the chip runs long
# enough to reach its power limit; a tile's epilogue; a split segment's extra (fp32 partial
# added into the workspace and read back).
_F_US = 8.0
_KB_US = 0.55
_HOT = 0.4
_EPI_US = 2.0
_SEG_US = 6.0
_TILE_SLOWDOWN = {"128x256": 1.0, "128x128": 1.04, "256x128": 1.05, "128x160": 1.03}
"""Main-loop time per unit of tile area relative to 128x256 (seed shape, best stages)."""
_TILE_STAGES = {"128x128": 4, "64x80": 8, **dict.fromkeys(SWAP_TILES, 4)}
_NOT_DEFAULT = {"128x160", "128x80", "64x80", "256x160", "128x320", *FIT_TILES, *SWAP_TILES}
"""Tiles the cost model does not rate (chosen only by ``_few_full_waves`` and ``narrow_tile``)."""


def _few_full_waves(m: int, n: int, bm: int, bn: int, sms: int) -> bool:
    """N a multiple of BN, and the tiles fill one or two waves to >= 90 %: where the 128x160 tile
    measured faster than every other default (ADR-0007)."""
    if n % bn:
        return False
    tiles = _cdiv(m, bm) * (n // bn)
    waves = _cdiv(tiles, sms)
    return waves <= 2 and tiles >= 0.9 * waves * sms
"""Stage count per tile where the deepest that fits is not the fastest measured."""


def tile_rounds(m: int, n: int, bm: int, bn: int, sms: int, cluster: Any = 1,
                half_tail: bool = False) -> float:
    """Rounds of tiles a persistent data-parallel grid runs (clusters, ``cluster_shape``'s cm x cn
    neighbours, take a block of tiles each, ``sms // (cm * cn)`` of them at once): the busiest
    CTA's tile count; with ``half_tail`` (unclustered), a last round that ``half_tail_whole`` runs
    in halves counts ``HALF_ROUND``."""
    cm, cn = cluster_shape(cluster)
    blocks = _cdiv(m, bm * cm) * _cdiv(n, bn * cn)
    grid = max(1, sms // (cm * cn))
    if half_tail and cm * cn == 1 and half_tail_whole(blocks, grid) is not None:
        return blocks // grid + HALF_ROUND
    return _cdiv(blocks, grid)


HALF_TAIL_DEFAULT = True
"""Run a last round of tiles that is at most half full as 64-row halves on twice the CTAs
(``HALF_TAIL``) where ``use_half_tail`` says so (faster on the H200: ADR-0007)."""
HALF_ROUND = 0.8
"""A round of half tiles in units of a whole round, for ``tile_rounds``: a 64-row half reads all of
its W tile for half the math, so a round of halves costs more than half a round (measured 0.66-0.86:
ADR-0007)."""


def half_tail_whole(tiles: int, grid: int) -> int | None:
    """The tiles a persistent grid runs whole before its last round runs in halves: where the grid
    takes its tiles in more than one round and the last round holds at most half a grid of them
    (their halves then fill at most one round); else None."""
    tail = tiles % grid
    if tiles > grid and 0 < 2 * tail <= grid:
        return tiles - tail
    return None


def half_tail_fits(block_size: str, dtype: str, pingpong: bool, cluster: Any, streamk: bool,
                   epi_shared: bool) -> bool:
    """The configurations the kernel's ``HALF_TAIL`` implements: unclustered data-parallel
    ping-pong on a 128-row tile, 16-bit data, an epilogue buffer per consumer."""
    cm, cn = cluster_shape(cluster)
    return bool(pingpong and cm * cn == 1 and not streamk and not epi_shared
                and ITEMSIZE[_dtype(dtype)] == 2 and parse_block_size(block_size, dtype)[0] == 128)


def halves_planned(limits: DeviceLimits, block_size: str, stages: int, dtype: str,
                   shape: dict[str, int] | None) -> bool:
    """Whether the engine's unclustered build of these knobs would run a part-full last round in
    halves (its consumers and epilogue buffers as ``build`` chooses them): for the rules that
    count rounds (``tile_rounds(half_tail=...)``)."""
    pingpong = use_pingpong(limits, block_size, stages, dtype, shape)
    return HALF_TAIL_DEFAULT and half_tail_fits(
        block_size, dtype, pingpong, 1, False,
        pingpong and epi_shared_needed(limits, block_size, stages, dtype))


def use_half_tail(block_size: str, dtype: str, pingpong: bool, cluster: Any, streamk: bool,
                  epi_shared: bool, tiles: int, grid: int) -> bool:
    """Whether ``build`` runs the last round of tiles in halves (``HALF_TAIL``) by default: where
    the kernel implements it (``half_tail_fits``) and ``half_tail_whole`` finds a last round at
    most half full."""
    return (HALF_TAIL_DEFAULT and half_tail_fits(block_size, dtype, pingpong, cluster, streamk, epi_shared)
            and half_tail_whole(tiles, grid) is not None)


TILE_160_GAIN = 0.97
"""``default_knobs`` trades 128x128 for 128x160 where the bigger tile's data-parallel rounds cost at
most this fraction of the work (rounds x tile area): where 128x128's last round is nearly empty,
128x160's fewer rounds are faster; at equal work 128x128 stays (ADR-0007)."""


def round_work(limits: DeviceLimits, dtype: str, block: str, stages: int,
               shape: dict[str, int]) -> tuple[float, float]:
    """(rounds, rounds x tile area) of these knobs' data-parallel schedule, clusters and halves as
    the engine would run them (``tile_rounds`` with ``use_cluster`` and ``halves_planned``): what the
    tile rules weigh and the SIMULATED fill counts."""
    m, n, _ = _mnk(shape)
    bm, bn, _ = parse_block_size(block, dtype)
    rounds = tile_rounds(m, n, bm, bn, limits.sm_count, use_cluster(limits, block, stages, dtype, shape),
                         halves_planned(limits, block, stages, dtype, shape))
    return rounds, rounds * bm * bn


def _tile_160_fills_rounds(limits: DeviceLimits, dtype: str, shape: dict[str, int] | None,
                           stages_128: int, stages_160: int) -> bool:
    """16-bit data, and 128x160 (ping-pong where it applies, else cooperative, at ``stages_160``)
    runs its tiles in rounds that do at most ``TILE_160_GAIN`` of the work of 128x128's (at
    ``stages_128``, in 2x1 clusters where ``use_cluster`` takes them), counting data-parallel
    rounds (a stream-K tail measured slower than the round it saves: ADR-0007)."""
    if not shape or ITEMSIZE.get(_dtype(dtype), 2) != 2:
        return False
    try:
        _mnk(shape)
    except ValueError:
        return False
    return (round_work(limits, dtype, "128x160", stages_160, shape)[1]
            <= TILE_160_GAIN * round_work(limits, dtype, "128x128", stages_128, shape)[1])


def narrow_tile(m: int, n: int, sms: int) -> str | None:
    """The narrow tile (16-bit data) for a shape whose tiles fit in one wave, each CTA running the
    whole K loop (no stream-K fixup): 64x80 where its tiles fit, else 128x80; None where neither
    does. N = K = 2560: 64x80 for M <= 256, 128x80 for 256 < M <= 512. One wave only: at two waves
    128x160 is faster (ADR-0007)."""
    for tile in ("64x80", "128x80"):
        bm, bn, _ = TILES[tile]
        if _cdiv(m, bm) * _cdiv(n, bn) <= sms:
            return tile
    return None


def tiles_for(dtype: Any) -> list[str]:
    """The tiles this dtype can take (before shared memory): every one for 16-bit data, all but
    ``NARROW_TILES`` for fp32 data (tf32, fp32)."""
    sixteen = ITEMSIZE.get(_dtype(dtype), 2) == 2
    return [t for t in TILES if sixteen or t not in NARROW_TILES + WIDE_TILES + FIT_TILES + SWAP_TILES]


def swapped(block_size: str) -> bool:
    """Whether this BLOCK_SIZE runs as the transposed product (``SWAP_TILES``)."""
    return _tile_name(block_size) in SWAP_TILES


def kernel_frame_error(block_size: str) -> str | None:
    """For a swapped tile written in the kernel's own frame (128 x R, not itself a tile), what to
    write instead; else None. ``parse_block_size`` accepts the name for ``_build_swapped``'s inner
    build; ``check`` and ``build`` refuse it from anyone else with this message."""
    name = _tile_name(block_size)
    if name not in _SWAP_KERNEL_TILES or name in TILES:
        return None
    rows = _SWAP_KERNEL_TILES[name][1]
    return (f"{block_size} is the kernel's own frame of the swapped tile {rows}x128 (rows along M first): "
            f"write {rows}x128, e.g. BLOCK_SIZE={rows}x128")


def parse_block_size(block_size: str, dtype: Any = None) -> tuple[int, int, int]:
    """'128x256' or '128x256x64' (tf32: 'x32') -> (BM, BN, consumers); ValueError for anything
    else. Without a dtype the BK part must be 16-bit's 64."""
    bk = bk_of(dtype) if dtype is not None else BK
    text = str(block_size).strip().lower()
    parts = text.split("x")
    if len(parts) == 3:
        if parts[2] != str(bk):
            raise ValueError(f"the Hopper path takes BK = {bk} only here (one 128-byte swizzle "
                             f"row), got {parts[2]}")
        text = "x".join(parts[:2])
    if text in _SWAP_KERNEL_TILES and text not in TILES:  # _build_swapped's name for the kernel's frame
        return _SWAP_KERNEL_TILES[text]
    if text not in TILES:
        raise ValueError(f"unknown tile {block_size!r}; the Hopper path takes "
                         f"{', '.join(TILES)} (optionally with 'x{bk}')")
    if dtype is not None and text not in tiles_for(dtype):
        raise ValueError(f"tile {text} takes 16-bit data (bf16, fp16) only; for {_dtype(dtype)} "
                         f"use {', '.join(tiles_for(dtype))}")
    return TILES[text]


def stage_count(stages: int) -> int:
    """MEMORY_PIPELINING -> shared-memory slots compiled (0 = off = one slot, no overlap)."""
    return 1 if stages == 0 else int(stages)


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


def _tile_name(block_size: str) -> str:
    """'128x160x64' or ' 128X160 ' -> '128x160' (a key of ``TILES``)."""
    return "x".join(str(block_size).strip().lower().split("x")[:2])


EPI_SHARED_DTYPES = ("bf16", "fp16")
"""Where ping-pong may run its two consumers on one shared epilogue buffer (``build(epi_shared=True)``)
for a stage count two buffers leave no room for: the dtypes it ran with on the GPU."""
EPI_SHARED_DEFAULT = False
"""Whether ``default_knobs`` may pick such a stage count (off: slower than two buffers, ADR-0007)."""


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


def use_pingpong(limits: DeviceLimits, block_size: str, stages: int, dtype: str,
                 shape: dict[str, int] | None = None) -> bool:
    """The consumer schedule for these knobs (not itself a knob): ping-pong where it fits and
    ``PINGPONG_DEFAULT`` is on, with the pipeline on (off keeps its meaning: no overlap), and, for
    a known shape, where every CTA gets at least two tiles (with one, a warpgroup would idle and
    no epilogue would overlap a main loop; not measured, so cooperative there). At least
    ``PINGPONG_MIN_STAGES`` stages: one issuing warpgroup needs a deep ring (tf32 128x128 with the
    3 stages its two fp32 epilogue buffers leave is slower than cooperative: ADR-0007)."""
    if not (PINGPONG_DEFAULT and stages >= PINGPONG_MIN_STAGES
            and pingpong_fits(limits, block_size, stages, dtype)):
        return False
    if shape:
        try:
            m, n, _ = _mnk(shape)
        except ValueError:
            return True
        bm, bn, _ = parse_block_size(block_size)
        return _cdiv(m, bm) * _cdiv(n, bn) >= 2 * max(1, limits.sm_count)
    return True


PINGPONG_MIN_STAGES = 4
PINGPONG_PREFER_STAGES = 5
"""``default_knobs`` prefers ping-pong 128x128 over the cost model's tile only where it fits this
many stages (measured at the seed shape with 5; 4 is slower than cooperative 128x256 there)."""

CLUSTER_DEFAULT = True
"""Use 2x1 clusters with W multicast where ``use_cluster`` allows (ADR-0007)."""
CLUSTER_DEFAULT_TILES = ("128x128",)
CLUSTER_DEFAULT_DTYPES = ("bf16", "fp16")
"""Where clusters are the default: ping-pong 128x128 in 16-bit data, the one schedule measured
faster with them, rested (ADR-0007). Elsewhere (cooperative tiles, 128x160, tf32) they were level or
slower, so ``build(cluster=2)`` only."""
CLUSTER_DTYPES = ("bf16", "fp16", "tf32")
"""Clusters are compiled for these only: fp32's three-product producer spills a register in the
ping-pong cluster build (the producer warpgroup keeps 40), and clusters measured no gain anyway."""


def use_cluster(limits: DeviceLimits, block_size: str, stages: int, dtype: str,
                shape: dict[str, int] | None = None) -> int:
    """Cluster size for these knobs (not itself a knob): 2 where ``CLUSTER_DEFAULT`` is on, the
    tile and dtype are in ``CLUSTER_DEFAULT_TILES`` / ``CLUSTER_DEFAULT_DTYPES``, the consumers run
    ping-pong (``use_pingpong``: so the pipeline is on and, for a known shape, every CTA gets two
    tiles or more), and (for a known shape) every cluster gets at least one whole wave of work
    and pairing the M blocks costs no round of tiles (``tile_rounds``: an odd M block count can
    leave the last pair half empty and push a round, e.g. 19 blocks at M = 2400: 4 rounds in
    pairs against 3 alone; M = 3400, 540 tiles: 5 rounds in pairs, 4 and a round of halves
    alone; the 3 % clusters buy is less than that); else 1."""
    if (not CLUSTER_DEFAULT or stages == 0 or _dtype(dtype) not in CLUSTER_DEFAULT_DTYPES
            or _tile_name(block_size) not in CLUSTER_DEFAULT_TILES
            or not use_pingpong(limits, block_size, stages, dtype, shape)):
        return 1
    if shape:
        try:
            m, n, _ = _mnk(shape)
        except ValueError:
            return 1
        bm, bn, _ = parse_block_size(block_size)
        if _cdiv(m, 2 * bm) * _cdiv(n, bn) < max(1, limits.sm_count // 2):
            return 1
        alone = tile_rounds(m, n, bm, bn, limits.sm_count, 1,
                            half_tail=halves_planned(limits, block_size, stages, dtype, shape))
        if tile_rounds(m, n, bm, bn, limits.sm_count, 2) > alone:
            return 1
    return 2


def supported(limits: DeviceLimits, dtype: str, shape: dict[str, int] | None = None) -> bool:
    """True where this path applies: compute capability 9.0, bf16/fp16/tf32/fp32, N a multiple of 8,
    and K a multiple of 8 or 16-bit data (whose K is then padded, ``k_padded``)."""
    if tuple(limits.compute_capability) != (9, 0) or _dtype(dtype) not in DTYPES:
        return False
    if shape:
        _, n, k = _mnk(shape)
        return n % 8 == 0 and (k % 8 == 0 or ITEMSIZE[_dtype(dtype)] == 2)
    return True


PAD_KERNEL = "pad_rows16"
PAD_SOURCE = "pad_rows16.cuh"


def k_padded(k: int, dtype: str) -> int:
    """K as the GEMM reads it: TMA needs rows of whole 16 bytes, so 16-bit data whose K is not a
    multiple of 8 is copied, each launch, into rows of the next multiple of 8 with zeros after K
    (``PAD_KERNEL``: one more read and write of A and W); else K itself."""
    return -(-k // 8) * 8 if ITEMSIZE[_dtype(dtype)] == 2 else k


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


EPI_RING_DEFAULT = True
"""Stage the epilogue tile in the ring, for one stage more, where ``default_knobs`` finds a tile of
``EPI_RING_TILES`` with one tile per CTA (the deeper ring is faster there: ADR-0007)."""
EPI_RING_TILES = ("64x80", "128x80", "128x160", "128x256")
"""The tiles measured faster with the epilogue tile in the ring and the deeper ring it buys."""


def one_tile_per_cta(limits: DeviceLimits, block_size: str, dtype: str,
                     shape: dict[str, int] | None) -> bool:
    """True where the engine's plan for this shape gives every CTA one data-parallel tile (so the
    consumers run cooperative and unclustered: ping-pong and clusters need two tiles a CTA)."""
    if not shape:
        return False
    try:
        m, n, k = _mnk(shape)
    except ValueError:
        return False
    bm, bn, _ = parse_block_size(block_size, dtype)
    tiles = _cdiv(m, bm) * _cdiv(n, bn)
    grid, dp_tiles = plan_schedule(m, n, _k16(k, dtype), block_size, limits.sm_count, STREAMK_DEFAULT)
    return tiles <= grid and dp_tiles >= tiles


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


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def schedule_cost(m: int, n: int, k: int, block_size: str, sms: int, grid: int,
                  dp_tiles: int) -> float:
    """Modelled time in us of one (grid, dp_tiles) schedule: the busiest CTA's work."""
    bm, bn, _ = parse_block_size(block_size)
    tiles = _cdiv(m, bm) * _cdiv(n, bn)
    kb = _cdiv(k, BK)
    area = bm * bn / 32768
    grid = max(1, grid)
    dp_tiles = min(max(dp_tiles, 0), tiles)
    work = tiles * kb * area / sms  # 128x256 k-blocks per SM: how long the chip runs flat out
    t_kb = _KB_US * area * _TILE_SLOWDOWN.get(block_size, 1.0) * (1 + _HOT * min(1.0, work / 200))
    t = _F_US + (_cdiv(dp_tiles, grid) if dp_tiles else 0) * (kb * t_kb + _EPI_US * area)
    sk_tiles = tiles - dp_tiles
    sk_iters = sk_tiles * kb
    if sk_iters:
        per = _cdiv(sk_iters, grid)
        if grid % sk_tiles == 0:  # a whole number of CTAs per tile: one segment each
            segs, split = 1, grid > sk_tiles
        elif sk_iters % grid == 0 and per % kb == 0:  # whole tiles each
            segs, split = per // kb, False
        else:
            segs, split = _cdiv(per, kb) + 1, True
        t += per * t_kb + segs * _EPI_US * area + (segs * _SEG_US * area if split else 0.0)
    return t


def schedule_candidates(m: int, n: int, k: int, bm: int, bn: int,
                        sms: int) -> list[tuple[int, int]]:
    """(grid, dp_tiles) schedules worth trying: data-parallel first, then stream-K over the tail
    (one full wave plus the tail, or the tail alone) or, when the tiles do not fill the GPU,
    over all tiles with a grid of 2..8 CTAs per tile or the whole GPU."""
    tiles = _cdiv(m, bm) * _cdiv(n, bn)
    kb = _cdiv(k, BK)
    out = [(max(1, min(tiles, sms)), tiles)]
    if kb < 2 or tiles % sms == 0:
        return out
    q = tiles // sms
    if q == 0:
        grids = sorted({g for g in (tiles * s for s in range(2, 9)) if g <= sms} | {sms})
        out += [(g, 0) for g in grids]
    else:
        out += [(sms, d) for d in ((q - 1) * sms, q * sms)
                if tiles - d <= WS_TILES]
    return out


def plan_schedule(m: int, n: int, k: int, block_size: str, sms: int,
                  streamk: bool = True) -> tuple[int, int]:
    """(grid, dp_tiles) for this shape: the cheapest of ``schedule_candidates`` by the cost model;
    stream-K only where it saves at least 3 % of the data-parallel time."""
    bm, bn, _ = parse_block_size(block_size)
    cands = schedule_candidates(m, n, k, bm, bn, sms)
    if not streamk:
        return cands[0]
    costs = [schedule_cost(m, n, k, block_size, sms, g, d) for g, d in cands]
    best = min(range(len(cands)), key=lambda i: costs[i])
    return cands[best] if costs[best] < 0.97 * costs[0] else cands[0]


FIT_GAIN = 0.95
"""``default_knobs`` trades its pick for a ``FIT_TILES`` width where that tile's data-parallel rounds
do at most this fraction of the pick's work (rounds x tile area, ``tile_rounds`` as the other rules
count them), in fewer rounds, both taking two or more: the fewer rounds are what pays, and the
round model over-states the gain about twofold (ADR-0007)."""


def _cheaper_tile(limits: DeviceLimits, dtype: str, shape: dict[str, int] | None, block: str, stages: int,
                  candidates: tuple[str, ...], gain: float,
                  rounds_ok: Callable[[float, float], bool]) -> tuple[str, int] | None:
    """Of ``candidates`` (16-bit data, a known shape, ``block`` pipelined in two rounds or more), the
    one whose data-parallel rounds at its default stages do the least work, at most ``gain`` of
    ``block``'s at ``stages`` (``round_work``), where ``rounds_ok(its rounds, block's rounds)``:
    (tile, stages), or None."""
    if not shape or ITEMSIZE.get(_dtype(dtype), 2) != 2 or stages == 0:
        return None
    try:
        _mnk(shape)
    except ValueError:
        return None
    rounds, work = round_work(limits, dtype, block, stages, shape)
    if rounds < 2:
        return None
    best = None
    offered = block_size_options(limits, dtype)
    for tile in candidates:
        if tile not in offered:
            continue
        st = default_stages(limits, dtype, tile, shape)
        r, w = round_work(limits, dtype, tile, st, shape)
        if rounds_ok(r, rounds) and w <= gain * work and (best is None or w < best[0]):
            best = (w, tile, st)
    return None if best is None else (best[1], best[2])


def _fit_tile(limits: DeviceLimits, dtype: str, shape: dict[str, int] | None,
              block: str, stages: int) -> tuple[str, int] | None:
    """The ``FIT_TILES`` width (and its stages) ``default_knobs`` takes instead of ``block`` at
    ``stages`` for this shape (``FIT_GAIN``, in fewer rounds, two or more), or None."""
    return _cheaper_tile(limits, dtype, shape, block, stages, FIT_TILES, FIT_GAIN,
                         lambda r, rounds: 2 <= r < rounds)


SWAP_GAIN = 0.965
"""``default_knobs`` trades its pick for a ``SWAP_TILES`` tile where that tile's two data-parallel
rounds do at most this fraction of the pick's work (``round_work``). The swapped build does a little
less per unit of work than the unswapped tiles (4 stages; its epilogue moves R's natural tile through
ldmatrix / stmatrix .trans), so it takes them only with less work (the threshold sits between the
measured gains and the level shapes: ADR-0007)."""


def _swap_tile(limits: DeviceLimits, dtype: str, shape: dict[str, int] | None,
               block: str, stages: int) -> tuple[str, int] | None:
    """The ``SWAP_TILES`` tile (and its stages) ``default_knobs`` takes instead of ``block`` at
    ``stages`` for this shape (``SWAP_GAIN``; the candidate in exactly two rounds), or None."""
    return _cheaper_tile(limits, dtype, shape, block, stages, SWAP_TILES, SWAP_GAIN,
                         lambda r, rounds: r == 2)


def default_knobs(limits: DeviceLimits, dtype: str,
                  shape: dict[str, int] | None = None) -> tuple[str, int]:
    """The knobs of ``_base_knobs``, or a ``FIT_TILES`` width where ``_fit_tile`` finds one whose
    rounds do clearly less work, or a swapped tile where ``_swap_tile`` does (16-bit data, a known
    shape)."""
    block, stages = _base_knobs(limits, dtype, shape)
    block, stages = _fit_tile(limits, dtype, shape, block, stages) or (block, stages)
    return _swap_tile(limits, dtype, shape, block, stages) or (block, stages)


def _deepest_ring(limits: DeviceLimits, dtype: str, block: str, shape: dict[str, int] | None) -> int:
    """One tile a CTA on a measured tile: the deepest ring, the epilogue tile staged in it (0: not
    here; with more tiles a CTA the ring measured slower than ping-pong, ADR-0007)."""
    if (not EPI_RING_DEFAULT or _tile_name(block) not in EPI_RING_TILES
            or not one_tile_per_cta(limits, block, dtype, shape)):
        return 0
    return max(ring_stage_options(limits, dtype, block, shape), default=0)


def default_stages(limits: DeviceLimits, dtype: str, block: str, shape: dict[str, int] | None) -> int:
    """The MEMORY_PIPELINING ``default_knobs`` gives ``block`` for this shape: the deepest ring where
    a CTA has one tile (``_deepest_ring``); for ping-pong the deepest count that fits (128x128: 5
    beside two epilogue buffers, 6 with the consumers sharing one, where ``EPI_SHARED_DEFAULT``);
    cooperative 16-bit ``_TILE_STAGES`` (128x128 measured best at 4), else the deepest (tf32: 5)."""
    ring = _deepest_ring(limits, dtype, block, shape)
    if ring:
        return ring
    fits = pipelining_options(limits, dtype, block)  # no shape: the counts beside a buffer
    pp = [st for st in fits if st and use_pingpong(limits, block, st, dtype, shape)
          and (EPI_SHARED_DEFAULT or not epi_shared_needed(limits, block, st, dtype))]
    if pp:
        return max(pp)
    want = _TILE_STAGES.get(block, max(fits)) if ITEMSIZE.get(_dtype(dtype), 2) == 2 else max(fits)
    return want if want in fits else max(fits)


def _base_knobs(limits: DeviceLimits, dtype: str,
                shape: dict[str, int] | None = None) -> tuple[str, int]:
    """(BLOCK_SIZE, MEMORY_PIPELINING): without a shape, 128x256 with the deepest pipeline that
    fits (3 stages; measured fastest on the H200). With a shape, the tile whose planned schedule
    (data-parallel waves, stream-K tail) the cost model rates fastest for this M, N, K (128x256
    unless another tile is more than 5 % faster: the model's error): 128x128 (4 stages) where 128x256 tiles leave a
    bad last wave or too few tiles, e.g. M = 256, 512 at N = K = 2560; and 128x128 with 5 stages
    wherever that tile runs ping-pong (>= 2 tiles per CTA: M >= 4096 at N = K = 2560, the seed
    shape included), unless 128x160 runs its tiles in rounds that do less work in all
    (``TILE_160_GAIN``, rounds of halves counted by ``tile_rounds``: at N = K = 2560 M = 769-1024,
    1665-1792, 2433-2560, 2945-3072, 4993-5248, 5889-6272 and 6657-6784); 128x160 with 5 stages (16-bit data) where N is a multiple of 160 and its tiles
    fill one or two waves (``_few_full_waves``: M = 1024, 2048 at N = K = 2560). tf32 takes
    cooperative 128x128 with 5 stages (its fp32 epilogue buffer leaves the bigger tiles 2)."""
    options = block_size_options(limits, dtype)
    if not options:
        raise ValueError(f"no Hopper tile fits {limits.shared_memory_per_block_bytes} bytes")
    # a tile that fits only 2 stages (tf32's 128x256 and 256x128 beside their fp32 epilogue
    # buffer) is offered as a knob but not chosen: two slots cannot cover the TMA latency
    options = [b for b in options if max(pipelining_options(limits, dtype, b)) >= 3] or options
    options = [b for b in options if b not in _NOT_DEFAULT] or options

    block = options[0]
    if shape:
        try:
            m, n, k = _mnk(shape)
        except ValueError:
            return block, default_stages(limits, dtype, block, shape)
        k = _k16(k, dtype)
        sms = limits.sm_count

        def cost(b: str) -> float:
            g, d = plan_schedule(m, n, k, b, sms, STREAMK_DEFAULT)
            return schedule_cost(m, n, k, b, sms, g, d) * (1.0 if b == options[0] else 1.05)

        narrow = narrow_tile(m, n, sms)
        if narrow in block_size_options(limits, dtype):  # 16-bit data, and it fits
            return narrow, default_stages(limits, dtype, narrow, shape)
        block = min(options, key=lambda b: (cost(b), options.index(b)))
        # ping-pong 128x128 wherever it applies (>= 2 tiles per CTA): timed in alternation with
        # the cooperative 128x256 at the seed shape it is faster under sustained load and level in
        # a cold run (ADR-0007); the model does not know ping-pong
        if "128x128" in options and any(
                use_pingpong(limits, "128x128", st, dtype, shape)
                for st in pipelining_options(limits, dtype, "128x128")
                if st >= PINGPONG_PREFER_STAGES):
            block = "128x128"
        # 128x160 where 128x128's last round of tiles is nearly empty and the bigger tile's rounds
        # do less work in all (16-bit data)
        if (block == "128x128" and ITEMSIZE.get(_dtype(dtype), 2) == 2
                and "128x160" in block_size_options(limits, dtype)):
            st160 = default_stages(limits, dtype, "128x160", shape)
            st128 = default_stages(limits, dtype, "128x128", shape)
            if _tile_160_fills_rounds(limits, dtype, shape, st128, st160):
                return "128x160", st160
        # 128x160 where its tiles fill one or two waves (measured for 16-bit data only)
        if (ITEMSIZE.get(_dtype(dtype), 2) == 2
                and "128x160" in block_size_options(limits, dtype)
                and _few_full_waves(m, n, 128, 160, sms)):
            return "128x160", _deepest_ring(limits, dtype, "128x160", shape) or max(pipelining_options(limits, dtype, "128x160"))
    return block, default_stages(limits, dtype, block, shape)


def check(task: Any, limits: DeviceLimits) -> list[Violation]:
    """Every constraint of this path, before compiling."""
    out: list[Violation] = []
    dtype = _dtype(task.dtype)
    if tuple(limits.compute_capability) != (9, 0):
        out.append(Violation("device", limits.profile or str(limits.compute_capability),
                             "the wgmma/TMA path needs compute capability 9.0 (sm_90a)",
                             "cc 9.0"))
    if dtype not in DTYPES:
        out.append(Violation("dtype", dtype, "the Hopper path takes bf16, fp16, tf32 or fp32",
                             "bf16, fp16, tf32, fp32"))
    try:
        m, n, k = _mnk(task.shape)
    except ValueError as exc:
        return [*out, Violation("shape", task.shape, str(exc))]
    for name, val in (("m", m), ("n", n), ("k", k)):
        if val < 1:
            out.append(Violation(f"shape.{name}", val, "must be positive"))
    for name, val in (("n", n), ("k", k)):
        if val % 8 and not (name == "k" and ITEMSIZE.get(dtype, 4) == 2):
            out.append(Violation(f"shape.{name}", val,
                                 "TMA needs 16-byte row strides: a multiple of 8 elements"
                                 + (" (16-bit data pads K; N cannot be padded in place)" if name == "n" else ""),
                                 "multiple of 8"))
    if m * n >= 2**31 or m * k >= 2**31 or n * k >= 2**31:
        out.append(Violation("shape", f"{m}x{n}x{k}", "indices are 32-bit in the tile scheduler",
                             "each operand < 2**31 elements"))
    block = getattr(task, "block_size", None) or "128x256"
    stages = getattr(task, "memory_pipelining", None)
    stages = 3 if stages is None else stages
    try:
        parse_block_size(block, dtype if dtype in DTYPES else None)
    except ValueError as exc:  # the fix lists the tiles that fit: the message need not list them all
        text = str(exc)
        if text.startswith("unknown tile"):
            return [*out, Violation("block_size", block,
                                    f"unknown tile {block!r} for the Hopper path (tui kernels lists its tiles)")]
        return [*out, Violation("block_size", block, text, ", ".join(tiles_for(dtype)))]
    if (frame := kernel_frame_error(block)) is not None:
        return [*out, Violation("block_size", block, frame, ", ".join(tiles_for(dtype)))]
    if stages == 1 or stages < 0 or stages > MAX_STAGES:
        out.append(Violation("memory_pipelining", stages, f"must be 0 (off) or 2..{MAX_STAGES}",
                             f"0, 2..{MAX_STAGES}"))
        return out
    dt = dtype if dtype in DTYPES else "bf16"
    need = smem_bytes(block, stages, dt)
    ring = ring_stage_options(limits, dt, block, task.shape)
    if need > limits.shared_memory_per_block_bytes and stages not in ring:
        fits = pipelining_options(limits, dt, block, task.shape)
        deeper = (f" ({', '.join(map(str, ring))}: the epilogue tile staged in the ring)" if ring else "")
        out.append(Violation(
            "memory_pipelining", stages,
            f"{need} bytes of shared memory for {block} x {stage_count(stages)} stages; "
            f"fits: {', '.join(map(str, fits)) or 'none'}{deeper}",
            f"{limits.shared_memory_per_block_bytes} bytes per block"))
    return out


def cluster_shape(cluster: Any) -> tuple[int, int]:
    """A ``cluster`` argument as (CTAs along M sharing W, CTAs along N sharing A): an int c is the
    c x 1 cluster (W multicast only), a pair (cm, cn) itself; each 1 or 2."""
    cm, cn = (cluster, 1) if isinstance(cluster, int) else tuple(cluster)
    if cm not in (1, 2) or cn not in (1, 2):
        raise ValueError(f"cluster {cluster}: 1 (none), 2 (2x1, W multicast), or a pair (cm, cn) "
                         "of 1 or 2 (1x2: A multicast; 2x2: both)")
    return int(cm), int(cn)


def cluster_label(cm: int, cn: int) -> str:
    """How ``info`` and the bench tables name a cluster shape."""
    if cm * cn == 1:
        return "none"
    what = " and ".join(x for x, c in (("W", cm), ("A", cn)) if c > 1)
    return f"{cm}x{cn}, {what} multicast"


RASTER_M_DEFAULT = True
"""Number the tiles M-fastest where ``use_raster_m`` says so (ADR-0007)."""
RASTER_M_TILES = NARROW_TILES + ("128x160",)
"""The tiles measured faster M-fastest in one wave (128x256, the other one-wave default, level)."""
RASTER_GROUP_DEFAULT = 4
"""M blocks per group where ``use_raster_group`` says so (0: never; ADR-0007)."""


def use_raster_m(block_size: str, tiles: int, grid: int, dp_tiles: int, cluster: int,
                 dtype: str = "bf16") -> bool:
    """The tile order (not a knob): M-fastest for 16-bit data on a narrow tile (64x80, 128x80) or
    128x160 whose tiles all run in one data-parallel wave without clusters, so the CTAs that read
    the same W tile are launched side by side, as cuBLAS's grid runs them; elsewhere N-fastest (the
    CTAs in flight share A row panels and keep W in L2 across waves) or ``use_raster_group``.
    Faster on those tiles in one wave, level on 128x256, slower on the clustered ping-pong
    defaults (ADR-0007)."""
    return (RASTER_M_DEFAULT and ITEMSIZE.get(_dtype(dtype), 4) == 2
            and _tile_name(block_size) in RASTER_M_TILES and cluster == 1
            and dp_tiles >= tiles and tiles <= grid)


def use_raster_group(block_size: str, tiles: int, grid: int, dp_tiles: int, cluster: int,
                     pingpong: bool, dtype: str = "bf16") -> int:
    """The grouped tile order (not a knob): ``RASTER_GROUP_DEFAULT`` M blocks per group, numbered
    M-fastest inside a group, for 16-bit cooperative 128x160 whose data-parallel tiles take a
    second wave (at most two: beyond, the defaults run ping-pong) without clusters; else 0.
    Groups of 4 measured fastest there; on the clustered ping-pong defaults every grouping was
    slower, so they stay N-fastest (ADR-0007)."""
    if not (RASTER_GROUP_DEFAULT and ITEMSIZE.get(_dtype(dtype), 4) == 2 and not pingpong
            and _tile_name(block_size) == "128x160" and cluster == 1 and dp_tiles >= tiles
            and grid < tiles <= 2 * grid):
        return 0
    return RASTER_GROUP_DEFAULT


def use_tail_shift(m: int, n: int, block_size: str, dtype: str, streamk: bool) -> bool:
    """Whether ``build`` moves partial last tiles back (``TAIL_SHIFT``) by default: only where a
    tile reaches past M or N and could end there instead (M >= BM or N >= BN), the schedule is
    data-parallel and the data 16-bit. The rows or columns a moved tile shares with its neighbour
    are computed by both and stored twice; the GPU showed both stores the same bits only there
    (``sm90_gemm.py --tail-bits``: with stream-K compiled in, or tf32 / 3xTF32, they differed in
    the last bits, which would make the output depend on which store lands last)."""
    bm, bn, _ = parse_block_size(block_size, dtype)
    partial = (m % bm and m > bm) or (n % bn and n > bn)
    return bool(TAIL_SHIFT_DEFAULT and partial and not streamk and ITEMSIZE[_dtype(dtype)] == 2)


def defines(block_size: str, stages: int, dtype: str, fuse: bool,
            tmap_global: bool = False, streamk: bool = STREAMK_DEFAULT,
            pingpong: bool = False, cluster: Any = 1,
            split_hi: bool = SPLIT_HI_DEFAULT, promote: int | None = None,
            raster_m: bool = False, w_first: bool = False, raster_group: int = 0,
            epi_ring: bool = False, epi_shared: bool = False,
            r_issue_kb: int | None = None, epi_ring_reuse: bool = False,
            tail_shift: bool = False, half_tail: bool = False) -> dict[str, int]:
    """The compile-time constants of one configuration (validated integers only). ``cluster``: see
    ``cluster_shape``; ``promote`` (fp32 only; default ``PROMOTE_DEFAULT`` where ``promote_fits``,
    else 0). Measurement options (defined only when set): ``raster_m`` numbers the tiles M-fastest
    (adjacent CTAs share a W tile), ``w_first`` issues W's TMA box before A's, ``raster_group`` = G
    numbers them in groups of G M blocks, M-fastest inside a group (``build`` chooses both by
    default: ``use_raster_m``, ``use_raster_group``); ``r_issue_kb`` the k-block of each item after
    which the producer stages its R (default: the stage count; measured best, ADR-0007).
    ``epi_ring`` / ``epi_shared``: the epilogue tile in the ring's freed slots / one buffer for
    both ping-pong consumers; ``epi_ring_reuse`` (with ``epi_ring``, where a CTA may get a second
    tile): the ring goes on after each epilogue, its slots returned once the store has read them.
    ``tail_shift``: a tile that reaches past M (N) and starts inside is moved back to end there.
    ``half_tail``: the tiles past the kernel's dp_tiles argument run as two 64-row halves each
    (unclustered data-parallel ping-pong, 128-row tiles, 16-bit data, two epilogue buffers).
    A ``SWAP_TILES`` tile R x 128: ``SWAP_AB`` and the kernel's frame 128 x R, cooperative and
    data-parallel whatever ``streamk`` and ``pingpong`` say (what ``_build_swapped`` compiles)."""
    if swapped(block_size):
        rows = parse_block_size(block_size, dtype)[0]
        return {"SWAP_AB": 1, **defines(f"128x{rows}", stages, dtype, fuse, tmap_global, False, False, cluster,
                                        split_hi, promote, raster_m, w_first, raster_group)}
    bm, bn, consumers = parse_block_size(block_size, dtype)
    cm, cn = cluster_shape(cluster)
    if cm * cn > 1 and streamk:
        raise ValueError("the cluster schedule is data-parallel only (streamk=False)")
    if cm * cn > 1 and _dtype(dtype) not in CLUSTER_DTYPES:
        raise ValueError(f"the cluster schedule takes {', '.join(CLUSTER_DTYPES)}")
    if cn > 1 and ITEMSIZE[_dtype(dtype)] != 2:
        raise ValueError("A multicast (cluster 1x2, 2x2) is built and GPU-tested for bf16 and fp16 only")
    if (bn // cm) % MC_SHARE_ROWS or (bm // cn) % MC_SHARE_ROWS:
        raise ValueError(f"cluster {cm}x{cn} on {block_size}: each CTA's multicast share must be a "
                         f"multiple of {MC_SHARE_ROWS} rows")
    if pingpong and _tile_name(block_size) not in PINGPONG_TILES:
        raise ValueError(f"tile {block_size}: ping-pong takes {', '.join(PINGPONG_TILES)}")
    if _dtype(dtype) not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: the Hopper path takes bf16, fp16, tf32 or fp32")
    slots = stage_count(stages)
    if not 1 <= slots <= MAX_STAGES:
        raise ValueError(f"stages {stages}: must be 0 (off) or 2..{MAX_STAGES}")
    out = {"BM": bm, "BN": bn, "BK": bk_of(dtype), "STAGES": slots, "NUM_CONSUMERS": consumers,
           "DT": DT_CODE[_dtype(dtype)], "FUSE": int(bool(fuse)),
           "TMAP_GLOBAL": int(bool(tmap_global)), "STREAMK": int(bool(streamk)),
           "WS_TILES": WS_TILES, "PINGPONG": int(bool(pingpong)), "CLUSTER": cm}
    if MC_SHARE_ROWS != 8:
        out["MC_SHARE_ROWS"] = int(MC_SHARE_ROWS)
    if MBAR_SUSPEND_NS:
        out["MBAR_SUSPEND_NS"] = int(MBAR_SUSPEND_NS)
    if _tile_name(block_size) in SPLIT_N_TILES:
        out["SPLIT_N"] = 1
    if cn > 1:
        out["CLUSTER_N"] = cn
    if raster_m:
        out["RASTER_M"] = 1
    if w_first:
        out["W_FIRST"] = 1
    if tail_shift:
        out["TAIL_SHIFT"] = 1
    if half_tail:
        if not half_tail_fits(block_size, dtype, pingpong, (cm, cn), streamk, epi_shared):
            raise ValueError("half_tail: unclustered data-parallel ping-pong on a 128-row tile, "
                             "16-bit data, an epilogue buffer per consumer")
        out["HALF_TAIL"] = 1
    if epi_ring:
        if pingpong or streamk or ITEMSIZE[_dtype(dtype)] != 2 or slots < 2:
            raise ValueError("epi_ring: cooperative, data-parallel, 16-bit data (the dtypes it ran "
                             "with on the GPU), >= 2 stages")
        if -(-bm * bn * ITEMSIZE[_dtype(dtype)] // ((bm + bn) * 128)) > slots:
            raise ValueError(f"epi_ring: the {block_size} epilogue tile needs more than {slots} slots")
        out["EPI_RING"] = 1
        if epi_ring_reuse:
            out["EPI_RING_REUSE"] = 1
    elif epi_ring_reuse:
        raise ValueError("epi_ring_reuse: with epi_ring")
    if epi_shared:
        if not pingpong:
            raise ValueError("epi_shared: ping-pong consumers")
        out["EPI_SHARED"] = 1
    if r_issue_kb is not None:
        if int(r_issue_kb) < 0 or epi_ring:
            raise ValueError("r_issue_kb: a k-block index >= 0, with an epilogue buffer (not epi_ring)")
        out["R_ISSUE_KB"] = int(r_issue_kb)
    if raster_group:
        if raster_m or int(raster_group) < 1:
            raise ValueError("raster_group: a positive group of M blocks, instead of raster_m")
        out["RASTER_GROUP"] = int(raster_group)
    if _dtype(dtype) == "fp32":
        fits = promote_fits(block_size, pingpong)
        if promote is None:
            promote = PROMOTE_DEFAULT if fits else 0
        if int(promote) < 0 or (promote and not fits):
            raise ValueError(f"promote {promote}: 0, or k-blocks per group on a cooperative tile "
                             "of at most 64 x 160 accumulators per warpgroup")
        out["SPLIT_HI"] = int(bool(split_hi))
        out["PROMOTE"] = int(promote)
    return out


def render_source(block_size: str, stages: int, dtype: str, fuse: bool = True,
           tmap_global: bool = False, streamk: bool = STREAMK_DEFAULT,
           pingpong: bool = False, cluster: Any = 1,
           split_hi: bool = SPLIT_HI_DEFAULT, promote: int | None = None) -> str:
    """The CUDA source for one configuration: #defines of integers, then the template."""
    return _source(defines(block_size, stages, dtype, fuse, tmap_global, streamk, pingpong,
                           cluster, split_hi, promote))


def _source(consts: dict[str, int]) -> str:
    """``defines``' constants as #defines of integers, the shared 16-bit conversions
    (``vec16.cuh``, VEC_DTYPE 0 bf16, 1 fp16, 2 fp32 data), then the kernel template."""
    head = "".join(f"#define {k} {int(v)}\n" for k, v in consts.items())
    return (head + vec16_source(min(int(consts["DT"]), 2))
            + (KERNEL_DIR / SOURCE_FILE).read_text(encoding="utf-8"))


HALF_TAIL_OPTIONS = ("--device-as-default-execution-space",)
"""NVRTC options a ``HALF_TAIL`` build adds: its k-block loop is a generic lambda (instantiated for
one m64 slice and for all), which NVRTC 13.0 takes for host code without this (CuPy's RawModule
passes it to every compile; NVRTC 13.5 accepts the lambda either way)."""


def options(limits: DeviceLimits | None = None) -> tuple[str, ...]:
    """NVRTC options: sm_90a (wgmma and setmaxnreg need the arch-specific target)."""
    return ("--gpu-architecture=sm_90a", "--std=c++17")


@dataclass(frozen=True)
class Sm90Plan:
    """Every decision of one Hopper build, made once by ``plan``; ``render`` only writes it out.
    Sizes and the tile are in the kernel's frame: a swapped plan (``swapped_rows`` > 0, a problem
    tile of R x 128 built as out^T = W A^T) holds the problem's N as ``m`` and its M as ``n``."""

    m: int
    n: int
    k: int
    dtype: str
    block_size: str
    """The kernel-frame tile name (a swapped R x 128 tile is 128xR here)."""
    stages: int
    fuse: bool
    pingpong: bool
    epi_shared: bool
    cluster: tuple[int, int]
    streamk: bool
    grid: int
    dp_tiles: int
    half_tail: bool
    epi_ring: bool
    epi_ring_reuse: bool
    raster_m: bool
    raster_group: int
    tail_shift: bool
    split_hi: bool
    promote: int | None
    tmap_global: bool = False
    w_first: bool = False
    r_issue_kb: int | None = None
    swapped_rows: int = 0
    k_pad: int = 0
    """K padded to whole 16-byte rows (``k_padded``) where the problem's K is not; 0: no padding."""

    @property
    def tile(self) -> Tile:
        """The tile in the problem's frame (rows along M x columns along N x BK)."""
        bm, bn, _ = parse_block_size(self.block_size, self.dtype)
        if self.swapped_rows:
            return Tile(self.swapped_rows, 128, bk_of(self.dtype))
        return Tile(bm, bn, bk_of(self.dtype))

    @property
    def tiles(self) -> int:
        bm, bn, _ = parse_block_size(self.block_size, self.dtype)
        return _cdiv(self.m, bm) * _cdiv(self.n, bn)

    def schedule(self) -> dict[str, Any]:
        """The schedule choices as a task names them (``SCHEDULE_KNOBS``)."""
        return {"consumers": "pingpong" if self.pingpong else "cooperative",
                "cluster": self.cluster[0] * self.cluster[1],
                "raster": ("group" if self.raster_group else "m" if self.raster_m else "n")
                if not self.swapped_rows else
                ("group" if self.raster_group else "n" if self.raster_m else "m"),
                "split": ("halves" if self.half_tail else "streamk" if self.dp_tiles < self.tiles else "off")}


def plan(task: Any, limits: DeviceLimits, block_size: str, stages: int,
         fuse: bool | None = None, tmap_global: bool = False, streamk: bool | None = None,
         schedule: tuple[int, int] | None = None, pingpong: bool | None = None,
         cluster: Any = None, split_hi: bool | None = None,
         promote: int | None = None, raster_m: bool | None = None, w_first: bool = False,
         raster_group: int | None = None, epi_ring: bool | None = None,
         epi_shared: bool | None = None, r_issue_kb: int | None = None,
         tail_shift: bool | None = None, half_tail: bool | None = None,
         _swapped: bool = False) -> Sm90Plan:
    """Decide one configuration: every argument left None is the engine's choice for these knobs
    and this shape. ``fuse`` defaults to ``task.fusion`` (True when absent):
    off = the GEMM-only kernel (FUSE=0) then ``residual_add_inplace`` on ``out``. ``streamk``
    (default ``STREAMK_DEFAULT``) compiles the stream-K tail in; ``schedule`` = (grid, dp_tiles)
    overrides ``plan_schedule`` (benchmarks; any value is correct, the kernel clamps it);
    ``pingpong`` (default ``use_pingpong``) picks the consumer schedule; ``cluster`` (default
    ``use_cluster``) 2 runs 2x1 clusters sharing W by TMA multicast, (cm, cn) any of
    ``cluster_shape``'s (data-parallel only).
    fp32 (3xTF32) first launches ``tf32_split`` on A and W into scratch buffers (``Build.scratch``:
    a_lo, w_lo, and with ``split_hi``, default ``SPLIT_HI_DEFAULT``, a_hi, w_hi); ``promote``
    see ``defines``, as ``w_first`` (a measurement option), ``raster_m`` and ``raster_group`` (the
    tile order; defaults ``use_raster_m``, ``use_raster_group``; an explicit ``raster_m=True``
    numbers M-fastest, not grouped). ``epi_ring`` (default: exactly where the stage count fits only
    without an epilogue buffer, 16-bit cooperative) stages the epilogue tile in the ring and makes
    the schedule data-parallel; the ring is reused where a CTA gets more than one tile.
    ``tail_shift`` (default ``use_tail_shift``) moves a last tile that reaches past M or N back to
    end there (``TAIL_SHIFT``). ``half_tail`` (default ``use_half_tail``) runs the last round of
    tiles, where it is at most half full, as 64-row halves on twice the CTAs (``HALF_TAIL``; a
    ``schedule``'s dp_tiles then counts the tiles run whole). A ``SWAP_TILES`` block size plans the
    transposed product (``_plan_swapped``; ``cluster`` in the kernel's frame, for measurements)."""
    if swapped(block_size):
        return _plan_swapped(task, limits, block_size, stages, fuse, 1 if cluster is None else cluster,
                             raster_m, raster_group, epi_ring)
    if not _swapped and (frame := kernel_frame_error(block_size)) is not None:
        raise ValueError(frame)
    m, n, k = _mnk(task.shape)
    dtype = _dtype(task.dtype)
    if fuse is None:
        fuse = bool(getattr(task, "fusion", True))
    bm, bn, consumers = parse_block_size(block_size, dtype)
    k16 = _k16(k, dtype)
    streamk_forced = streamk is not None
    if streamk is None:
        streamk = STREAMK_DEFAULT
    if pingpong is None:
        pingpong = use_pingpong(limits, block_size, stages, dtype, task.shape)
    if epi_shared is None:  # the engine's choice: only where the stage count needs it
        epi_shared = bool(pingpong) and epi_shared_needed(limits, block_size, stages, dtype)
    if pingpong and (_tile_name(block_size) not in PINGPONG_TILES
                     or smem_bytes(block_size, stages, dtype, True, epi_shared=bool(epi_shared))
                     > limits.shared_memory_per_block_bytes):
        raise ValueError(f"ping-pong does not fit {block_size} with {stage_count(stages)} stages"
                         + ("" if epi_shared else " and an epilogue buffer per consumer"))
    if cluster is None:
        cluster = use_cluster(limits, block_size, stages, dtype, task.shape)
    cm, cn = cluster_shape(cluster)
    cluster = cm * cn  # CTAs per cluster
    if cluster > 1:
        streamk = False
    if split_hi is None:
        split_hi = SPLIT_HI_DEFAULT
    tiles = -(-m // bm) * -(-n // bn)
    blocks = tiles  # the schedule's units: tiles, or with a cluster blocks of cm x cn tiles
    if cluster > 1:
        # whole clusters; the kernel's tile unit is a block of cm x cn tiles
        blocks = groups = _cdiv(m, bm * cm) * _cdiv(_cdiv(n, bn), cn)
        if schedule is not None:
            groups = min(groups, max(1, int(schedule[0]) // cluster))
        grid = cluster * max(1, min(groups, limits.sm_count // cluster))
        dp_tiles = tiles
    elif schedule is None or not streamk:
        grid, dp_tiles = plan_schedule(m, n, k16, block_size, limits.sm_count, streamk)
        if streamk and dp_tiles >= tiles and not streamk_forced and ITEMSIZE[dtype] == 2:
            # the plan splits nothing: compile the data-parallel kernel, the same schedule without
            # the stream-K code, which is faster (ADR-0007). 16-bit data only: fp32 (3xTF32)
            # measured slower without it
            streamk = False
    else:
        grid, dp_tiles = max(1, int(schedule[0])), int(schedule[1])
    dp_grid = max(1, min(tiles, limits.sm_count))  # the data-parallel grid, one tile per CTA a round
    if half_tail is None:  # the engine's choice; it replaces a planned stream-K tail (not a forced one)
        half_tail = schedule is None and use_half_tail(
            block_size, dtype, bool(pingpong), (cm, cn), streamk_forced and streamk, bool(epi_shared),
            tiles, dp_grid)
    if half_tail:
        if streamk_forced and streamk:
            raise ValueError("half_tail: a data-parallel schedule (streamk=False): the halves replace a stream-K tail")
        streamk = False
        # schedule's dp_tiles: the tiles run whole
        grid, dp_tiles = ((dp_grid, half_tail_whole(tiles, dp_grid) or tiles) if schedule is None
                          else (max(1, int(schedule[0])), int(schedule[1])))
    if epi_ring is None:  # the engine's choice: only where the stage count needs it
        epi_ring = not pingpong and stages in ring_stage_options(limits, dtype, block_size, task.shape)
    epi_ring_reuse = False
    if epi_ring:
        # data-parallel only; where a CTA gets more than one tile (block of tiles) the ring's
        # slots come back after each epilogue (EPI_RING_REUSE)
        if cluster == 1 and dp_tiles < tiles:
            grid, dp_tiles = plan_schedule(m, n, k16, block_size, limits.sm_count, False)
        streamk = False
        epi_ring_reuse = blocks > grid // cluster
    if raster_group is None:
        raster_group = 0 if raster_m else use_raster_group(block_size, tiles, grid, dp_tiles, cluster,
                                                           bool(pingpong), dtype)
    if raster_m is None:
        raster_m = not raster_group and use_raster_m(block_size, tiles, grid, dp_tiles, cluster, dtype)
    if tail_shift is None:
        tail_shift = use_tail_shift(m, n, block_size, dtype, streamk)
    kp = k_padded(k, dtype)
    p = Sm90Plan(m=m, n=n, k=k, dtype=dtype, block_size=_tile_name(block_size), stages=int(stages),
                 fuse=bool(fuse), pingpong=bool(pingpong), epi_shared=bool(epi_shared), cluster=(cm, cn),
                 streamk=bool(streamk), grid=int(grid), dp_tiles=int(dp_tiles), half_tail=bool(half_tail),
                 epi_ring=bool(epi_ring), epi_ring_reuse=bool(epi_ring_reuse), raster_m=bool(raster_m),
                 raster_group=int(raster_group), tail_shift=bool(tail_shift), split_hi=bool(split_hi),
                 promote=promote, tmap_global=bool(tmap_global), w_first=bool(w_first),
                 r_issue_kb=r_issue_kb, k_pad=kp if kp != k else 0)
    defines_of(p)  # every combination the kernel cannot compile is refused here, not at render
    smem = smem_bytes(p.block_size, p.stages, dtype, p.pingpong, p.epi_ring, p.epi_shared)
    if smem > limits.shared_memory_per_block_bytes:  # would fail at launch (the knob checks refuse it first)
        raise ValueError(f"{block_size} with {stage_count(stages)} stages needs {smem} bytes of shared memory "
                         f"({'ring-staged epilogue' if epi_ring else 'with its epilogue buffer'}); a block "
                         f"gets {limits.shared_memory_per_block_bytes}")
    return p


def defines_of(p: Sm90Plan) -> dict[str, int]:
    """``defines`` for a plan (kernel frame)."""
    return defines(p.block_size, p.stages, p.dtype, p.fuse, p.tmap_global, p.streamk, p.pingpong,
                   p.cluster, p.split_hi, p.promote, p.raster_m, p.w_first, p.raster_group, p.epi_ring,
                   p.epi_shared, p.r_issue_kb, p.epi_ring_reuse, p.tail_shift, p.half_tail)


def build(task: Any, limits: DeviceLimits, block_size: str, stages: int, **choices: Any) -> Build:
    """``render(plan(...))``: for callers that hold knobs rather than a plan (benchmarks, tests)."""
    return render(plan(task, limits, block_size, stages, **choices), limits)


def render(p: Sm90Plan, limits: DeviceLimits) -> Build:
    """The source, launches and scratch buffers of a plan: no decision is taken here."""
    if p.swapped_rows:
        return _render_swapped(p, limits)
    m, n, k, dtype = p.m, p.n, p.k, p.dtype
    bm, bn, consumers = parse_block_size(p.block_size, dtype)
    bk = bk_of(dtype)
    cm, cn = p.cluster
    cluster = cm * cn
    grid, dp_tiles, tiles = p.grid, p.dp_tiles, p.tiles
    x3 = dtype == "fp32"
    consts = defines_of(p)
    source = _source(consts)
    smem = smem_bytes(p.block_size, p.stages, dtype, p.pingpong, p.epi_ring, p.epi_shared)
    a_hi, w_hi = ("a_hi", "w_hi") if x3 and p.split_hi else ("a", "w")
    if p.k_pad:  # the GEMM reads the padded copies (``k_padded``)
        a_hi, w_hi, k = "a_pad", "w_pad", p.k_pad
    maps = (
        TensorMapArg(a_hi, rows=m, cols=k, box_rows=bm // cn, box_cols=bk, swizzle_bytes=128),
        # a TMA box has at most 256 rows: an unclustered 320-row W tile loads as two of 160
        TensorMapArg(w_hi, rows=n, cols=k, box_rows=bn // cm if bn // cm <= 256 else bn // cm // 2,
                     box_cols=bk, swizzle_bytes=128),
        TensorMapArg("r", rows=m, cols=n, box_rows=bm, box_cols=bk, swizzle_bytes=128),
        TensorMapArg("out", rows=m, cols=n, box_rows=bm, box_cols=bk, swizzle_bytes=128),
    )
    # the epilogue's tail chunk, swizzled at its own width (16-bit data: BN = 160 32 columns, 64B
    # swizzle; BN = 80 16 columns, 32B); otherwise the same maps again (unused)
    tail = bn % bk
    if tail:
        tail_sw = tail * ITEMSIZE[dtype]
        maps += (TensorMapArg("r", rows=m, cols=n, box_rows=bm, box_cols=tail, swizzle_bytes=tail_sw),
                 TensorMapArg("out", rows=m, cols=n, box_rows=bm, box_cols=tail, swizzle_bytes=tail_sw))
    else:
        maps += (maps[2], maps[3])
    if p.half_tail:  # a half tile's 64 A rows, and its 64-row stores (the tail chunk's too)
        maps += (replace(maps[0], box_rows=64), replace(maps[3], box_rows=64),
                 replace(maps[5], box_rows=64))
    launches: list[Launch] = []
    functions: list[str] = []
    scratch: tuple[Buffer, ...] = ()
    if x3:
        maps += (replace(maps[0], buffer="a_lo"), replace(maps[1], buffer="w_lo"))
        scratch = (Buffer("a_lo", (m, k), "fp32", "scratch"),
                   Buffer("w_lo", (n, k), "fp32", "scratch"))
        if p.split_hi:
            scratch += (Buffer("a_hi", (m, k), "fp32", "scratch"),
                        Buffer("w_hi", (n, k), "fp32", "scratch"))
        total4 = (m * k + n * k) // 4
        split_grid = max(1, min(-(-total4 // 256), limits.sm_count * 8))
        launches.append(Launch(SPLIT_KERNEL, (split_grid, 1, 1), (256, 1, 1), 0,
                               ("a", a_hi, "a_lo", m * k // 4, "w", w_hi, "w_lo", n * k // 4)))
        functions.append(SPLIT_KERNEL)
    if p.k_pad:
        scratch = (Buffer("a_pad", (m, k), dtype, "scratch"), Buffer("w_pad", (n, k), dtype, "scratch"))
        for src, dst, rows in (("a", "a_pad", m), ("w", "w_pad", n)):
            total8 = rows * k // 8
            pad_grid = max(1, min(-(-total8 // 256), limits.sm_count * 8))
            launches.append(Launch(PAD_KERNEL, (pad_grid, 1, 1), (256, 1, 1), 0, (src, dst, rows, p.k, k)))
        functions.append(PAD_KERNEL)
        source += (KERNEL_DIR / PAD_SOURCE).read_text(encoding="utf-8")
    launches.append(Launch(KERNEL, (grid, 1, 1), (128 * (consumers + 1), 1, 1), smem,
                           (*maps, m, n, k, dp_tiles), cluster=cluster))
    functions.append(KERNEL)
    if not p.fuse:
        total8 = m * n // 8
        add_grid = max(1, min(-(-total8 // 256), limits.sm_count * 8))
        add = ADD_KERNEL_F32 if ITEMSIZE[dtype] == 4 else ADD_KERNEL
        launches.append(Launch(add, (add_grid, 1, 1), (256, 1, 1), 0, ("out", "r", m, n)))
        functions.append(add)
    info = {
        "path": "wgmma+TMA (sm_90a, warp-specialised, persistent)",
        "tile": f"{bm}x{bn}x{bk}",
        "stages": stage_count(p.stages),
        "pipelining": "off" if p.stages == 0 else p.stages,
        "consumer_warpgroups": consumers,
        "consumers": "ping-pong (whole tiles, alternating)" if p.pingpong else "cooperative",
        "cluster": cluster_label(cm, cn),
        "threads": 128 * (consumers + 1),
        "grid": grid,
        "tiles": tiles,
        "schedule": ("data-parallel" if dp_tiles >= tiles else
                     f"data-parallel, the last {tiles - dp_tiles} tiles in 64-row halves" if p.half_tail else
                     f"stream-K over {tiles - dp_tiles} tiles after {dp_tiles} data-parallel"),
        "smem_bytes": smem,
        "fused": bool(p.fuse),
        "epilogue_tile": ("in the ring's freed slots" + (", returned after each store" if p.epi_ring_reuse else "")
                          if p.epi_ring
                          else "one buffer shared by both consumers" if p.epi_shared else "own buffer"),
        "tensor_maps": "by pointer (global)" if p.tmap_global else "by value (__grid_constant__)",
        "tile_order": (f"groups of {p.raster_group} M blocks" if p.raster_group
                       else "M-fastest" if p.raster_m else "N-fastest"),
        "tail": ("last tiles moved back to end at M, N" if p.tail_shift
                 else "tiles past M, N clipped by TMA"),
    }
    if p.k_pad:
        info["k_padding"] = (f"K = {p.k} padded to {p.k_pad} (16-byte rows for TMA): A and W copied each launch, "
                             f"{2 * (m + n) * p.k * ITEMSIZE[dtype] / 1e6:.1f} MB more traffic")
    if x3:
        info["math"] = ("3xTF32 (a_lo*w_hi + a_hi*w_lo + a_hi*w_hi; hi "
                        + ("tf32-rounded" if p.split_hi else "as the tensor cores read x") + "; "
                        + (f"tensor cores sum {consts['PROMOTE']} k-blocks, then FADD"
                           if consts["PROMOTE"] else "tensor-core accumulation over all of K")
                        + ")")
    return Build(source=source, functions=tuple(functions), launches=tuple(launches),
                 options=options(limits) + (HALF_TAIL_OPTIONS if p.half_tail else ()), info=info,
                 scratch=scratch)


SWAP_ORDER_GAIN = 0.9
"""``swap_n_fastest``: number a swapped build's tiles with the problem's N blocks fastest where one
round's tiles then touch at most this fraction of the rows of A and W that they touch numbered
M-fastest (``round_rows``), else M-fastest (the inner build's own order)."""


def round_rows(m: int, n: int, rows: int, cols: int, sms: int, n_fastest: bool) -> int:
    """The rows of A and W (each K long) that the first round of ``sms`` data-parallel tiles of
    ``rows`` x ``cols`` (along M x along N) touch, numbered N-fastest or M-fastest: a round's
    footprint in L2, which DRAM supplies once a round where the next round's is different."""
    mb, nb = -(-m // rows), -(-n // cols)
    g = min(sms, mb * nb)
    if n_fastest:
        return min(mb, -(-g // nb)) * rows + min(nb, g) * cols
    return min(mb, g) * rows + min(nb, -(-g // mb)) * cols


def swap_n_fastest(m: int, n: int, rows: int, sms: int) -> bool:
    """Whether a swapped tile of ``rows`` x 128 numbers the problem's N blocks fastest
    (``SWAP_ORDER_GAIN``): N-fastest where its round's footprint is clearly smaller, level or
    slower elsewhere (ADR-0007)."""
    return (round_rows(m, n, rows, 128, sms, True)
            <= SWAP_ORDER_GAIN * round_rows(m, n, rows, 128, sms, False))


def _plan_swapped(task: Any, limits: DeviceLimits, block_size: str, stages: int,
                  fuse: bool | None, cluster: Any = 1, raster_m: bool | None = None,
                  raster_group: int | None = None, epi_ring: bool | None = None) -> Sm90Plan:
    """A ``SWAP_TILES`` tile (R x 128) as the transposed product (``SWAP_AB``): the kernel computes
    out^T = W A^T, its M the problem's N (128 rows of W a tile, the wgmma's A operand) and its N the
    problem's M (R rows of A, the wgmma's B operand); R and out keep their [M, N] layout, staged and
    stored as R x 64 boxes. Cooperative, data-parallel, 16-bit data; fusion off runs the GEMM-only
    kernel and then ``residual_add_inplace`` as unswapped; ``cluster`` as ``plan``'s in the kernel's
    frame (2: CTAs along the problem's N share A's box by multicast; measured slower, ADR-0007), and so
    are ``raster_m`` and ``raster_group`` (``raster_m=True``: the problem's N blocks fastest; by
    default where ``swap_n_fastest`` says so, else the inner build's order)."""
    from types import SimpleNamespace

    m, n, k = _mnk(task.shape)
    dtype = _dtype(task.dtype)
    if fuse is None:
        fuse = bool(getattr(task, "fusion", True))
    rows, cols, _ = parse_block_size(block_size, dtype)
    if raster_m is None and raster_group is None and swap_n_fastest(m, n, rows, limits.sm_count):
        raster_m = True  # the kernel's M blocks (the problem's N blocks) fastest
    if epi_ring is None:  # as plan's: only where the stage count needs it
        epi_ring = stages in ring_stage_options(limits, dtype, block_size, task.shape)
    t = SimpleNamespace(shape={"m": n, "n": m, "k": k}, dtype=dtype, fusion=fuse)
    inner = plan(t, limits, f"{cols}x{rows}", stages, fuse=fuse, pingpong=False, cluster=cluster, streamk=False,
                 tail_shift=False, half_tail=False, epi_ring=epi_ring, raster_m=raster_m,
                 raster_group=raster_group, _swapped=True)
    return replace(inner, swapped_rows=rows)


def _render_swapped(p: Sm90Plan, limits: DeviceLimits) -> Build:
    """The inner (kernel-frame) build of a swapped plan, its tensor maps turned to the problem's
    [M, N] layout for R and out."""
    rows = p.swapped_rows
    m, n, dtype = p.n, p.m, p.dtype  # the problem's M and N
    b = render(replace(p, swapped_rows=0), limits)
    at = next(i for i, launch in enumerate(b.launches) if launch.function == KERNEL)
    gemm = b.launches[at]
    maps = list(gemm.args[:6])
    pad = "_pad" if p.k_pad else ""
    maps[0] = replace(maps[0], buffer="w" + pad)  # n rows of K: the wgmma's A operand, 128-row boxes
    maps[1] = replace(maps[1], buffer="a" + pad)  # m rows of K: its B operand, R-row boxes
    nat = {"rows": m, "cols": n, "box_rows": rows, "box_cols": bk_of(dtype), "swizzle_bytes": 128}
    maps[2] = replace(maps[2], **nat)
    maps[3] = replace(maps[3], **nat)
    maps[4], maps[5] = maps[2], maps[3]  # no tail chunk: 128 columns of N are two whole chunks
    launches = list(b.launches)
    launches[at] = replace(gemm, args=(*maps, *gemm.args[6:]))
    if p.k_pad:  # the inner build padded its own A (the problem's W) and W (the problem's A)
        swap = {"a": "w", "w": "a", "a_pad": "w_pad", "w_pad": "a_pad"}
        launches = [replace(ln, args=tuple(swap.get(x, x) if isinstance(x, str) else x for x in ln.args))
                    if ln.function == PAD_KERNEL else ln for ln in launches]
        scratch = tuple(replace(sb, name=swap[sb.name], shape=(m if sb.name == "w_pad" else n, p.k_pad))
                        for sb in b.scratch)
        b = replace(b, scratch=scratch)
    # the inner build names its tile order in the kernel's frame, where M and N trade places
    order = str(b.info.get("tile_order", ""))
    order = {"N-fastest": "M-fastest", "M-fastest": "N-fastest"}.get(order, order.replace(" M blocks", " N blocks"))
    info = dict(b.info, tile=f"{rows}x128x{bk_of(dtype)} swapped (out^T = W A^T)", tile_order=order,
                tail="tiles past M, N clipped by TMA")
    return replace(b, source="#define SWAP_AB 1\n" + b.source, launches=tuple(launches), info=info)


def _dtype(dtype: Any) -> str:
    return str(getattr(dtype, "value", dtype))


def _mnk(shape: Any) -> tuple[int, int, int]:
    """m, n, k from a shape mapping: named (m, n, k), batch/seq/hidden, or positional '_0'.."""
    if not isinstance(shape, dict):
        raise ValueError(f"expected a mapping of dimensions, got {shape!r}")
    if all(key in shape for key in ("m", "n", "k")):
        return int(shape["m"]), int(shape["n"]), int(shape["k"])
    if all(key in shape for key in ("batch", "seq", "hidden")):
        h = int(shape["hidden"])
        return int(shape["batch"]) * int(shape["seq"]), h, h
    if shape and all(str(key).startswith("_") for key in shape):
        vals = [int(shape[key]) for key in sorted(shape, key=lambda s: int(s[1:]))]
        if len(vals) == 3:
            return vals[0], vals[1], vals[2]
    raise ValueError(f"cannot read m, n, k from shape {shape!r}")
