"""The per-build choices that are not knobs, made for a shape: the consumer schedule (ping-pong or
cooperative), 2x1 clusters, a last round in halves, the tile order and the tail shift."""

from __future__ import annotations

from typing import Any

from kernels.sm90.model import half_tail_whole, plan_schedule, tile_rounds
from kernels.sm90.smem import epi_shared_needed, pingpong_fits
from kernels.sm90.tiles import (
    ITEMSIZE,
    NARROW_TILES,
    _cdiv,
    _dtype,
    _k16,
    _mnk,
    _tile_name,
    cluster_shape,
    parse_block_size,
)
from kernels.spec import DeviceLimits


def use_pingpong(limits: DeviceLimits, block_size: str, stages: int, dtype: str,
                 shape: dict[str, int] | None = None) -> bool:
    """The consumer schedule for these knobs (not itself a knob): ping-pong where it fits (one
    consumer's epilogue then overlaps the other's main loop, faster than cooperative there:
    ADR-0007), with the pipeline on (off keeps its meaning: no overlap), and, for
    a known shape, where every CTA gets at least two tiles (with one, a warpgroup would idle and
    no epilogue would overlap a main loop; not measured, so cooperative there). At least
    ``PINGPONG_MIN_STAGES`` stages: one issuing warpgroup needs a deep ring (tf32 128x128 with the
    3 stages its two fp32 epilogue buffers leave is slower than cooperative: ADR-0007)."""
    if not (stages >= PINGPONG_MIN_STAGES
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

CLUSTER_DEFAULT_TILES = ("128x128",)
CLUSTER_DEFAULT_DTYPES = ("bf16", "fp16")
"""Where clusters are the default: ping-pong 128x128 in 16-bit data, the one schedule measured
faster with them, rested (ADR-0007). Elsewhere (cooperative tiles, 128x160, tf32) they were level or
slower, so ``build(cluster=2)`` only."""


def use_cluster(limits: DeviceLimits, block_size: str, stages: int, dtype: str,
                shape: dict[str, int] | None = None) -> int:
    """Cluster size for these knobs (not itself a knob): 2x1 with W multicast (ADR-0007) where the
    tile and dtype are in ``CLUSTER_DEFAULT_TILES`` / ``CLUSTER_DEFAULT_DTYPES``, the consumers run
    ping-pong (``use_pingpong``: so the pipeline is on and, for a known shape, every CTA gets two
    tiles or more), and (for a known shape) every cluster gets at least one whole wave of work
    and pairing the M blocks costs no round of tiles (``tile_rounds``: an odd M block count can
    leave the last pair half empty and push a round, e.g. 19 blocks at M = 2400: 4 rounds in
    pairs against 3 alone; M = 3400, 540 tiles: 5 rounds in pairs, 4 and a round of halves
    alone; the 3 % clusters buy is less than that); else 1."""
    if (stages == 0 or _dtype(dtype) not in CLUSTER_DEFAULT_DTYPES
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
    return half_tail_fits(
        block_size, dtype, pingpong, 1, False,
        pingpong and epi_shared_needed(limits, block_size, stages, dtype))


def use_half_tail(block_size: str, dtype: str, pingpong: bool, cluster: Any, streamk: bool,
                  epi_shared: bool, tiles: int, grid: int) -> bool:
    """Whether ``build`` runs the last round of tiles in halves (``HALF_TAIL``: 64-row halves on
    twice the CTAs, faster on the H200, ADR-0007) by default: where the kernel implements it
    (``half_tail_fits``) and ``half_tail_whole`` finds a last round at most half full."""
    return (half_tail_fits(block_size, dtype, pingpong, cluster, streamk, epi_shared)
            and half_tail_whole(tiles, grid) is not None)


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
    grid, dp_tiles = plan_schedule(m, n, _k16(k, dtype), block_size, limits.sm_count, True)
    return tiles <= grid and dp_tiles >= tiles


RASTER_M_TILES = NARROW_TILES + ("128x160",)
"""The tiles measured faster M-fastest in one wave (128x256, the other one-wave default, level)."""
RASTER_GROUP_M_BLOCKS = 4
"""M blocks per group where ``use_raster_group`` says so (ADR-0007)."""


def use_raster_m(block_size: str, tiles: int, grid: int, dp_tiles: int, cluster: int,
                 dtype: str = "bf16") -> bool:
    """The tile order (not a knob): M-fastest for 16-bit data on a narrow tile (64x80, 128x80) or
    128x160 whose tiles all run in one data-parallel wave without clusters, so the CTAs that read
    the same W tile are launched side by side, as cuBLAS's grid runs them; elsewhere N-fastest (the
    CTAs in flight share A row panels and keep W in L2 across waves) or ``use_raster_group``.
    Faster on those tiles in one wave, level on 128x256, slower on the clustered ping-pong
    defaults (ADR-0007)."""
    return (ITEMSIZE.get(_dtype(dtype), 4) == 2
            and _tile_name(block_size) in RASTER_M_TILES and cluster == 1
            and dp_tiles >= tiles and tiles <= grid)


def use_raster_group(block_size: str, tiles: int, grid: int, dp_tiles: int, cluster: int,
                     pingpong: bool, dtype: str = "bf16") -> int:
    """The grouped tile order (not a knob): ``RASTER_GROUP_M_BLOCKS`` M blocks per group, numbered
    M-fastest inside a group, for 16-bit cooperative 128x160 whose data-parallel tiles take a
    second wave (at most two: beyond, the defaults run ping-pong) without clusters; else 0.
    Groups of 4 measured fastest there; on the clustered ping-pong defaults every grouping was
    slower, so they stay N-fastest (ADR-0007)."""
    if not (ITEMSIZE.get(_dtype(dtype), 4) == 2 and not pingpong
            and _tile_name(block_size) == "128x160" and cluster == 1 and dp_tiles >= tiles
            and grid < tiles <= 2 * grid):
        return 0
    return RASTER_GROUP_M_BLOCKS


def use_tail_shift(m: int, n: int, block_size: str, dtype: str, streamk: bool) -> bool:
    """Whether ``build`` moves partial last tiles back to end at M (N) (``TAIL_SHIFT``: a partial
    TMA box is slower than a whole one, ADR-0007) by default: only where a
    tile reaches past M or N and could end there instead (M >= BM or N >= BN), the schedule is
    data-parallel and the data 16-bit. The rows or columns a moved tile shares with its neighbour
    are computed by both and stored twice; the GPU showed both stores the same bits only there
    (``sm90_gemm.py --tail-bits``: with stream-K compiled in, or tf32 / 3xTF32, they differed in
    the last bits, which would make the output depend on which store lands last)."""
    bm, bn, _ = parse_block_size(block_size, dtype)
    partial = (m % bm and m > bm) or (n % bn and n > bn)
    return bool(partial and not streamk and ITEMSIZE[_dtype(dtype)] == 2)


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


def swap_n_fastest(m: int, n: int, rows: int, sms: int, cols: int = 128) -> bool:
    """Whether a swapped tile of ``rows`` x ``cols`` numbers the problem's N blocks fastest
    (``SWAP_ORDER_GAIN``): N-fastest where its round's footprint is clearly smaller, level or
    slower elsewhere (ADR-0007)."""
    return (round_rows(m, n, rows, cols, sms, True)
            <= SWAP_ORDER_GAIN * round_rows(m, n, rows, cols, sms, False))
